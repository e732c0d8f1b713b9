//! P/D ratio planning over searched rows: cross the feasible prefill and decode rows, rate each
//! pairing with the analytic P/D formulas, rank the pairings as the original tool does, and
//! verify the best plan by simulation ([`verify`]).

pub mod verify;

use crate::analytic::pd::{decode_qps, prefill_qps};
use crate::outcome::{PdRow, Row};

/// Cross every feasible prefill row with every feasible decode row within the limits, keep
/// the best pairing per (P layout, D layout), one row per balanced QPS (2 decimals), ranked
/// by balanced QPS, then D QPS, P QPS, TTFT, TPOT, … as the original does.
pub fn match_rows(prefill: &[Row], decode: &[Row], output: u64, ttft_limit: f64, tpot_limit: f64) -> Vec<PdRow> {
    let mut all: Vec<PdRow> = Vec::new();
    for p in prefill.iter().filter(|r| r.feasible()) {
        let Some(ttft) = p.ttft_ms.filter(|t| *t > 0.0 && *t <= ttft_limit) else { continue };
        for d in decode.iter().filter(|r| r.feasible()) {
            let Some(tpot) = d.tpot_ms.filter(|t| *t > 0.0 && *t <= tpot_limit) else { continue };
            let p_qps = prefill_qps(p.concurrency, ttft);
            let d_qps = decode_qps(d.concurrency, tpot, output);
            all.push(PdRow {
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
            });
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
