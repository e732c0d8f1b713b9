//! P/D ratio planning: match the request rates of the best prefill and decode instances and
//! split a device budget into P and D instances (reference §5.7).

use crate::report::{InstanceSplit, PdRow, Row};
use crate::util::round_half_even;

/// Prefill instance rate: `C_p / TTFT × 1000` req/s.
pub fn prefill_qps(concurrency: u64, ttft_ms: f64) -> f64 {
    concurrency as f64 / ttft_ms * 1000.0
}

/// Decode instance rate: `C_d / (TPOT × max(O − 1, 1)) × 1000` req/s.
pub fn decode_qps(concurrency: u64, tpot_ms: f64, output: u64) -> f64 {
    concurrency as f64 / (tpot_ms * (output.saturating_sub(1)).max(1) as f64) * 1000.0
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

/// For d = 1 … floor(N / dev_d): p = max(1, round(d × ratio)); keep splits that fit in N and
/// choose the smallest |p − d × ratio| (first wins ties). P ≈ D × ratio, as in the code.
pub fn instance_split(pd_ratio: f64, total: u32, p_dev: u32, d_dev: u32) -> Option<InstanceSplit> {
    let mut best: Option<(f64, u32, u32)> = None;
    for d in 1..=(total / d_dev.max(1)) {
        let p = (round_half_even(d as f64 * pd_ratio) as u32).max(1);
        if p * p_dev + d * d_dev > total {
            continue;
        }
        let err = (p as f64 - d as f64 * pd_ratio).abs();
        if best.is_none_or(|b| err < b.0) {
            best = Some((err, p, d));
        }
    }
    best.map(|(_, p, d)| InstanceSplit { prefill_instances: p, decode_instances: d, prefill_devices: p * p_dev, decode_devices: d * d_dev })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::Phase;

    #[test]
    fn qps_matching_facts() {
        assert!((prefill_qps(10, 100.0) - 100.0).abs() < 1e-9);
        assert!((decode_qps(8, 10.0, 1024) - 0.78201).abs() < 1e-5);
    }

    #[test]
    fn instance_split_facts() {
        let s = instance_split(1.0, 8, 4, 2).unwrap();
        assert_eq!((s.prefill_instances, s.decode_instances), (1, 1));
        let s = instance_split(1.5, 16, 4, 2).unwrap();
        assert_eq!((s.prefill_instances, s.decode_instances), (3, 2));
        assert!(instance_split(1.0, 3, 4, 2).is_none());
    }

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
