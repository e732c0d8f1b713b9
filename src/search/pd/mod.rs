//! P/D ratio planning over searched rows: cross the feasible prefill and decode rows, rate each
//! pairing with the analytic P/D formulas, rank the pairings as the original tool does, and
//! verify the best plan by simulation ([`verify`]).

pub mod sizing;
pub mod verify;

use crate::analytic::pd::{decode_qps, prefill_qps, InstanceSplit};
use crate::outcome::{ChosenSplit, PdRow, PdVerification, Row, SplitSource};

/// The split "Overall Best" reports. With simulated splits (a device budget and a simulator
/// engine) the best of them by requests served within the SLO replaces the formula's split
/// when it serves strictly more than the formula's split did in its own simulation (or when
/// the formula's split does not fit the budget); otherwise the formula's split stands. The
/// reason says which, with both figures.
pub fn choose_split(row: &PdRow, formula: Option<InstanceSplit>, v: Option<&PdVerification>) -> Option<ChosenSplit> {
    let formula_good = formula.and_then(|_| v?.simulated.as_ref()).map(|s| s.request_rate * s.goodput);
    let best = v.and_then(|v| v.splits.iter().find(|e| e.error.is_none()));
    let make = |p: u32, d: u32, source, good_qps, reason: String| ChosenSplit {
        prefill_instances: p,
        decode_instances: d,
        prefill_devices: p * row.p_devices,
        decode_devices: d * row.d_devices,
        source,
        good_qps,
        formula_good_qps: formula_good,
        reason,
    };
    match (formula, best) {
        (Some(f), Some(b))
            if (b.prefill_instances, b.decode_instances) != (f.prefill_instances, f.decode_instances)
                && b.good_qps > formula_good.unwrap_or(0.0) =>
        {
            let reason = format!(
                "simulated best split: {} P : {} D serves {:.3} req/s within the SLO, the formula's {} P : {} D {:.3} req/s",
                b.prefill_instances,
                b.decode_instances,
                b.good_qps,
                f.prefill_instances,
                f.decode_instances,
                formula_good.unwrap_or(0.0)
            );
            Some(make(b.prefill_instances, b.decode_instances, SplitSource::Simulation, Some(b.good_qps), reason))
        }
        (Some(f), _) => {
            let reason = match (formula_good, best) {
                (Some(g), Some(b)) => format!(
                    "formula split (P = D x {:.2}, rounded): {g:.3} req/s within the SLO by simulation; the best simulated split serves {:.3}",
                    row.pd_ratio, b.good_qps
                ),
                (Some(g), None) => format!("formula split (P = D x {:.2}, rounded): {g:.3} req/s within the SLO by simulation", row.pd_ratio),
                _ => format!("formula split (P = D x {:.2}, rounded); not simulated", row.pd_ratio),
            };
            Some(make(f.prefill_instances, f.decode_instances, SplitSource::Formula, formula_good, reason))
        }
        (None, Some(b)) => {
            let reason = format!(
                "simulated best split: {} P : {} D serves {:.3} req/s within the SLO; no formula split fits the budget",
                b.prefill_instances, b.decode_instances, b.good_qps
            );
            Some(make(b.prefill_instances, b.decode_instances, SplitSource::Simulation, Some(b.good_qps), reason))
        }
        (None, None) => None,
    }
}

/// Cross every feasible prefill row with every feasible decode row within the limits, keep
/// the best pairing per (P layout, D layout), one row per balanced QPS (2 decimals), ranked
/// by balanced QPS, then D QPS, P QPS, TTFT, TPOT, … as the original does.
pub fn match_rows(prefill: &[Row], decode: &[Row], output: u64, ttft_limit: f64, tpot_limit: f64) -> Vec<PdRow> {
    let mut all: Vec<PdRow> = Vec::new();
    for p in prefill.iter().filter(|r| r.feasible()) {
        let Some(ttft) = p.ttft_ms.filter(|t| *t > 0.0 && *t <= ttft_limit) else { continue };
        for d in decode.iter().filter(|r| r.feasible()) {
            let Some(tpot) = d.tpot_ms.filter(|t| *t > 0.0 && *t <= tpot_limit) else { continue };
            all.push(pair(p, ttft, d, tpot, output));
        }
    }
    all.sort_by(rank);
    let mut best_per_pair: Vec<PdRow> = Vec::new();
    for r in all {
        if !best_per_pair.iter().any(|b| b.p_parallel == r.p_parallel && b.d_parallel == r.d_parallel) {
            best_per_pair.push(r);
        }
    }
    let mut out: Vec<PdRow> = Vec::new();
    for r in best_per_pair {
        let key = (r.balanced_qps * 100.0).round();
        if !out.iter().any(|o| (o.balanced_qps * 100.0).round() == key) {
            out.push(r);
        }
    }
    out
}

/// A prefill row at `ttft` ms paired with a decode row at `tpot` ms: their request rates by
/// the P/D formulas, the ratio, and both sides' layouts (no KV transfer time yet).
pub fn pair(p: &Row, ttft: f64, d: &Row, tpot: f64, output: u64) -> PdRow {
    let p_qps = prefill_qps(p.concurrency, ttft);
    let d_qps = decode_qps(d.concurrency, tpot, output);
    PdRow {
        pd_ratio: d_qps / p_qps,
        balanced_qps: p_qps.min(d_qps),
        p_qps,
        d_qps,
        ttft_ms: ttft,
        tpot_ms: tpot,
        p_parallel: p.parallel.clone(),
        d_parallel: d.parallel.clone(),
        p_devices: p.num_devices,
        d_devices: d.num_devices,
        p_batch_size: p.batch_size,
        d_batch_size: d.batch_size,
        p_concurrency: p.concurrency,
        d_concurrency: d.concurrency,
        p_layout: p.layout,
        d_layout: d.layout,
        d_mtp: d.mtp,
        p_budget: p.max_batched_tokens,
        d_budget: d.max_batched_tokens,
        p_transfer_ms: 0.0,
        usd_per_million_output_tokens: None,
        usd_per_million_tokens: None,
    }
}

fn rank(a: &PdRow, b: &PdRow) -> std::cmp::Ordering {
    b.balanced_qps
        .total_cmp(&a.balanced_qps)
        .then(b.d_qps.total_cmp(&a.d_qps))
        .then(b.p_qps.total_cmp(&a.p_qps))
        .then(a.ttft_ms.total_cmp(&b.ttft_ms))
        .then(a.tpot_ms.total_cmp(&b.tpot_ms))
        .then(b.d_batch_size.cmp(&a.d_batch_size))
        .then(b.p_batch_size.cmp(&a.p_batch_size))
        .then(b.d_concurrency.cmp(&a.d_concurrency))
        .then(b.p_concurrency.cmp(&a.p_concurrency))
        .then(a.p_parallel.cmp(&b.p_parallel))
        .then(a.d_parallel.cmp(&b.d_parallel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Phase;

    fn row(phase: Phase, label: &str, conc: u64, ttft: Option<f64>, tpot: Option<f64>) -> Row {
        let mut r = Row::probe_stub(conc as u32);
        r.phase = phase;
        r.parallel = label.into();
        r.concurrency = conc;
        r.ttft_ms = ttft;
        r.tpot_ms = tpot;
        r
    }

    fn verification(planned: (u32, u32), planned_good: f64, splits: &[(u32, u32, f64)]) -> PdVerification {
        let sim = crate::outcome::PdSimulated {
            ttft: Default::default(),
            tpot: Default::default(),
            output_throughput: 0.0,
            request_rate: planned_good * 2.0,
            goodput: 0.5,
            kv_transfer_ms: 0.0,
            slo_met: true,
            steady: true,
        };
        PdVerification {
            prefill_instances: planned.0,
            decode_instances: planned.1,
            arrival_rate: 1.0,
            planned_ttft_ms: 1.0,
            planned_tpot_ms: 1.0,
            planned_qps: 1.0,
            prefill_utilization: 1.0,
            decode_utilization: 1.0,
            requests: 600,
            simulated: Some(sim),
            simulation_error: None,
            sustainable_rate: None,
            splits: splits
                .iter()
                .map(|&(p, d, good_qps)| crate::outcome::PdSplitEval {
                    prefill_instances: p,
                    decode_instances: d,
                    arrival_rate: 1.0,
                    delivered_qps: good_qps,
                    good_qps,
                    slo_met: true,
                    steady: true,
                    error: None,
                })
                .collect(),
        }
    }

    #[test]
    fn overall_best_takes_the_simulated_split_only_when_it_serves_more() {
        // The case: the formula plans 1 P : 2 D (207 req/s within the SLO by simulation)
        // while 1 P : 3 D serves 251: Overall Best reports 1 P : 3 D, says so and why.
        // Mutation: drop the simulated branch of `choose_split` (always the formula's split).
        let p = [row(Phase::Prefill, "P", 10, Some(100.0), None)];
        let d = [row(Phase::Decode, "D", 1000, None, Some(10.0))];
        let best = &match_rows(&p, &d, 1024, f64::INFINITY, f64::INFINITY)[0];
        let formula = Some(InstanceSplit { prefill_instances: 1, decode_instances: 2, prefill_devices: 4, decode_devices: 8 });
        let v = verification((1, 2), 207.0, &[(1, 3, 251.0), (2, 2, 230.0)]);
        let c = choose_split(best, formula, Some(&v)).unwrap();
        assert_eq!((c.prefill_instances, c.decode_instances, c.source), (1, 3, SplitSource::Simulation));
        assert_eq!((c.good_qps, c.formula_good_qps), (Some(251.0), Some(207.0)));
        assert!(c.reason.contains("1 P : 3 D serves 251.000") && c.reason.contains("1 P : 2 D 207.000"), "{}", c.reason);
        // The formula's split is as good or better: it stays, and the reason gives both figures.
        // Mutation: `>=` for `>` in `choose_split` (a tie would switch away from the formula).
        let v = verification((1, 2), 251.0, &[(1, 3, 251.0), (2, 2, 230.0)]);
        let c = choose_split(best, formula, Some(&v)).unwrap();
        assert_eq!((c.prefill_instances, c.decode_instances, c.source), (1, 2, SplitSource::Formula));
        assert!(c.reason.contains("251.000 req/s within the SLO by simulation"), "{}", c.reason);
        // Not simulated (analytic engine): the formula's split, said to be unsimulated.
        let c = choose_split(best, formula, None).unwrap();
        assert_eq!((c.source, c.good_qps), (SplitSource::Formula, None));
        assert!(c.reason.ends_with("not simulated"), "{}", c.reason);
    }

    #[test]
    fn three_by_three_pairings_sorted_by_balanced_qps() {
        let p: Vec<Row> = (1..=3).map(|i| row(Phase::Prefill, &format!("P{i}"), 10 * i, Some(100.0), None)).collect();
        let d: Vec<Row> = (1..=3).map(|i| row(Phase::Decode, &format!("D{i}"), 1000 * i, None, Some(10.0))).collect();
        let m = match_rows(&p, &d, 1024, f64::INFINITY, f64::INFINITY);
        let all = 9;
        assert!(m.len() <= all);
        for w in m.windows(2) {
            assert!(w[0].balanced_qps >= w[1].balanced_qps);
        }
        assert_eq!(m[0].p_parallel, "P3");
        // Balanced QPS repeats (p_qps = 100, 200, 300) are collapsed to one row each.
        let mut keys: Vec<i64> = m.iter().map(|r| (r.balanced_qps * 100.0).round() as i64).collect();
        keys.dedup();
        assert_eq!(keys.len(), m.len());
    }
}
