//! P/D ratio formulas: the request rate of a prefill and of a decode instance, and the split
//! of a device budget into P and D instances at a ratio (the original tool's P/D planning).

use crate::util::round_half_even;
use serde::{Deserialize, Serialize};

/// How many prefill and decode instances a device budget holds at the matched ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InstanceSplit {
    pub prefill_instances: u32,
    pub decode_instances: u32,
    pub prefill_devices: u32,
    pub decode_devices: u32,
}

/// Prefill instance rate: `C_p / TTFT × 1000` req/s.
pub fn prefill_qps(concurrency: u64, ttft_ms: f64) -> f64 {
    concurrency as f64 / ttft_ms * 1000.0
}

/// Decode instance rate: `C_d / (TPOT × max(O − 1, 1)) × 1000` req/s.
pub fn decode_qps(concurrency: u64, tpot_ms: f64, output: u64) -> f64 {
    concurrency as f64 / (tpot_ms * (output.saturating_sub(1)).max(1) as f64) * 1000.0
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
}
