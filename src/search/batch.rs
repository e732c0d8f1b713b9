//! The batch-size search of one candidate: probe the minimum, bracket the feasibility boundary
//! by doubling (or by extrapolation), then bisect; every feasible probe is kept.

use crate::outcome::{Row, StopReason};
use crate::plan::SearchStrategy;
use std::collections::BTreeMap;

/// Initial upper bracket when `--batch-range` gives no maximum.
pub const INITIAL_RIGHT: u32 = 512;
/// Doublings of the bracket before bisecting regardless.
pub const MAX_EXPANSIONS: usize = 10;
/// Fallback bound of the extrapolating strategy when nothing can be estimated.
pub const FALLBACK_RIGHT: u32 = (1 << 19) - 1;

/// One probe of a batch size.
#[derive(Debug, Clone)]
pub struct Probe {
    pub row: Row,
    pub stop: Option<StopReason>,
}

/// Numbers the extrapolating strategy reads from a probe.
#[derive(Debug, Clone, Copy)]
pub struct ProbeStats {
    pub total_gib: f64,
    pub weight_gib: f64,
    pub reserved_gib: f64,
    pub avail_gib: f64,
    /// (latency, limit) pairs of the SLO-bound metrics.
    pub latencies: [(f64, f64); 2],
}

/// Result of a candidate's search: every probe in batch order, and the first probe's stop.
#[derive(Debug, Clone, Default)]
pub struct SearchResult {
    pub probes: Vec<Probe>,
    pub first_stop: Option<StopReason>,
}

impl SearchResult {
    pub fn feasible(&self) -> impl Iterator<Item = &Probe> {
        self.probes.iter().filter(|p| p.stop.is_none())
    }
}

/// Memory-bound estimate: `round(bs + avail / per_request) + 1` with
/// `per_request = (total − weight − reserved − avail) / bs`.
pub fn memory_bound(bs: u32, s: &ProbeStats) -> Option<u32> {
    let per_req = (s.total_gib - s.weight_gib - s.reserved_gib - s.avail_gib) / bs as f64;
    if per_req <= 0.0 {
        return None;
    }
    Some((crate::util::round_half_even(bs as f64 + s.avail_gib / per_req) + 1.0).max(1.0) as u32)
}

/// Latency-bound estimate from two probes: `max(1, round((bs_l + (limit − lat_l) / slope) × 1.5) + 1)`.
pub fn latency_bound(bs_l: u32, lat_l: f64, bs_r: u32, lat_r: f64, limit: f64) -> Option<u32> {
    if !limit.is_finite() || bs_r <= bs_l || lat_r <= lat_l {
        return None;
    }
    let slope = (lat_r - lat_l) / (bs_r - bs_l) as f64;
    let est = crate::util::round_half_even((bs_l as f64 + (limit - lat_l) / slope) * 1.5) + 1.0;
    Some(est.max(1.0) as u32)
}

/// Search `[min, max]` (max unbounded when `None`) with `probe`, memoised per batch size.
pub fn search(min: u32, max: Option<u32>, strategy: SearchStrategy, probe: &mut dyn FnMut(u32) -> (Probe, ProbeStats)) -> SearchResult {
    let mut seen: BTreeMap<u32, (Probe, ProbeStats)> = BTreeMap::new();
    let mut run = |b: u32, seen: &mut BTreeMap<u32, (Probe, ProbeStats)>| -> bool {
        let entry = seen.entry(b).or_insert_with(|| probe(b));
        entry.0.stop.is_none()
    };
    let mut left = min;
    let mut right = max.unwrap_or(INITIAL_RIGHT.max(min));
    if !run(left, &mut seen) {
        let first = seen.get(&left).and_then(|(p, _)| p.stop);
        return SearchResult { probes: seen.into_values().map(|(p, _)| p).collect(), first_stop: first };
    }
    if max.is_none() {
        for _ in 0..MAX_EXPANSIONS {
            if !run(right, &mut seen) {
                break;
            }
            let next = right.saturating_mul(2);
            let bound = match strategy {
                SearchStrategy::Exponential => next,
                SearchStrategy::LinearExponential => {
                    let (_, sl) = seen[&left];
                    let (_, sr) = seen[&right];
                    let mut est: Option<u32> = memory_bound(right, &sr);
                    for i in 0..2 {
                        let (lat_l, limit) = sl.latencies[i];
                        let (lat_r, _) = sr.latencies[i];
                        if let Some(e) = latency_bound(left, lat_l, right, lat_r, limit) {
                            est = Some(est.map_or(e, |x| x.min(e)));
                        }
                    }
                    let est = est.unwrap_or(FALLBACK_RIGHT);
                    next.min(est.max(right + 1))
                }
            };
            left = right;
            right = bound;
        }
    }
    // Bisect: feasibility is assumed monotone in the batch size.
    let (mut l, mut r) = (left, right);
    while l <= r {
        let mid = l + (r - l) / 2;
        if run(mid, &mut seen) {
            l = mid + 1;
        } else {
            if mid == 0 {
                break;
            }
            r = mid - 1;
        }
    }
    SearchResult { probes: seen.into_values().map(|(p, _)| p).collect(), first_stop: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> ProbeStats {
        ProbeStats { total_gib: 64.0, weight_gib: 20.0, reserved_gib: 10.0, avail_gib: 12.0, latencies: [(0.0, f64::INFINITY); 2] }
    }

    fn fake(limit: u32) -> impl FnMut(u32) -> (Probe, ProbeStats) {
        move |b| {
            let stop = if b > limit { Some(StopReason::TpotLimit) } else { None };
            (Probe { row: Row::probe_stub(b), stop }, stats())
        }
    }

    #[test]
    fn extrapolation_estimates_match_the_original() {
        let s = stats();
        // per request (64 − 20 − 10 − 12) / 4 = 5.5 GiB
        assert_eq!((s.total_gib - s.weight_gib - s.reserved_gib - s.avail_gib) / 4.0, 5.5);
        let m = ProbeStats { avail_gib: 10.0, total_gib: 64.0, weight_gib: 20.0, reserved_gib: 18.0, ..s };
        // bs 8, 2 GiB per request, 10 GiB free ⇒ 14
        assert_eq!(memory_bound(8, &m), Some(14));
        assert_eq!(latency_bound(2, 10.0, 6, 30.0, 20.0), Some(7));
        assert_eq!(latency_bound(2, 10.0, 6, 10.0, 20.0), None);
        assert_eq!(FALLBACK_RIGHT, 524_287);
    }

    #[test]
    fn finds_the_boundary_and_keeps_every_feasible_probe() {
        let r = search(1, None, SearchStrategy::Exponential, &mut fake(700));
        let feasible: Vec<u32> = r.feasible().map(|p| p.row.batch_size).collect();
        assert_eq!(*feasible.last().unwrap(), 700);
        assert!(feasible.contains(&1) && feasible.contains(&512));
        assert!(r.probes.iter().any(|p| p.row.batch_size == 1024 && p.stop.is_some()));
    }

    #[test]
    fn exponential_bracket_stops_after_ten_doublings() {
        let mut probed = Vec::new();
        let mut f = |b: u32| {
            probed.push(b);
            (Probe { row: Row::probe_stub(b), stop: None }, stats())
        };
        let r = search(1, None, SearchStrategy::Exponential, &mut f);
        // 512·2^9 is the last bracket probe; bisection then runs up to the unprobed 2^19.
        assert!(probed.contains(&262_144));
        assert!(!probed.contains(&1_048_576));
        assert_eq!(r.feasible().map(|p| p.row.batch_size).max(), Some(524_288));
    }

    #[test]
    fn infeasible_minimum_returns_its_reason() {
        let r = search(4, Some(8), SearchStrategy::Exponential, &mut fake(0));
        assert_eq!(r.first_stop, Some(StopReason::TpotLimit));
        assert_eq!(r.feasible().count(), 0);
    }

    #[test]
    fn batch_range_bounds_are_respected() {
        let mut probed = Vec::new();
        let mut f = |b: u32| {
            probed.push(b);
            (Probe { row: Row::probe_stub(b), stop: None }, stats())
        };
        search(3, Some(9), SearchStrategy::Exponential, &mut f);
        assert!(probed.iter().all(|&b| (3..=9).contains(&b)));
        assert!(probed.contains(&9));
    }
}
