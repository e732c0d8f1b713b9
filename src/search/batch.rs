//! The batch-size search of one candidate: probe the minimum, bracket the feasibility boundary
//! by doubling (or by extrapolation), then search the bracket for the boundary without
//! trusting one probe near the limit; every probe is kept and the caller ranks the feasible
//! ones.
//!
//! Simulated latencies need not be monotone in the batch size (a closed loop of identical
//! requests settles into a periodic pattern whose TTFT depends on how prompts line up with the
//! token budget), so a probe that misses its limit by a little says little about its
//! neighbours. The search bisects, but a probe within [`MARGIN`] of its limit is checked
//! against the [`NEIGHBOURS`] batch sizes above it (at most [`EXTRA_PROBES`] in all): one
//! feasible neighbour keeps the bisection going upward. (A feasible neighbour below needs no
//! probe: the bisection goes there anyway.) Probes far past the limit, and memory verdicts, are
//! trusted as before.

use crate::outcome::{Row, StopReason};
use crate::plan::SearchStrategy;
use std::collections::BTreeMap;

/// Initial upper bracket when `--batch-range` gives no maximum.
pub const INITIAL_RIGHT: u32 = 512;
/// Doublings of the bracket before bisecting regardless.
pub const MAX_EXPANSIONS: usize = 10;
/// Fallback bound of the extrapolating strategy when nothing can be estimated.
pub const FALLBACK_RIGHT: u32 = (1 << 19) - 1;
/// A latency-bound probe whose latencies are all within this share above their limits is
/// marginal: its neighbours may well be feasible.
pub const MARGIN: f64 = 0.02;
/// Neighbours probed above a marginal probe.
pub const NEIGHBOURS: u32 = 2;
/// Neighbour probes one search may spend in all (the search stays a bisection in cost).
pub const EXTRA_PROBES: usize = 16;

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

/// The probes of one search, memoised per batch size, and the neighbour probes spent.
struct Probes<'p> {
    seen: BTreeMap<u32, (Probe, ProbeStats)>,
    probe: &'p mut dyn FnMut(u32) -> (Probe, ProbeStats),
    extra: usize,
}

impl Probes<'_> {
    fn feasible(&mut self, b: u32) -> bool {
        let probe = &mut *self.probe;
        self.seen.entry(b).or_insert_with(|| probe(b)).0.stop.is_none()
    }

    /// Whether a probed batch missed only latency limits, each by at most [`MARGIN`].
    fn marginal(&self, b: u32) -> bool {
        let Some((p, s)) = self.seen.get(&b) else { return false };
        matches!(p.stop, Some(StopReason::TtftLimit | StopReason::TpotLimit))
            && s.latencies.iter().all(|&(lat, limit)| !limit.is_finite() || lat <= limit * (1.0 + MARGIN))
    }

    /// Whether `b` is feasible or, when it misses its limits by a little, one of the neighbours
    /// above it up to `hi` is (neighbours count against [`EXTRA_PROBES`]).
    fn feasible_near(&mut self, b: u32, hi: u32) -> bool {
        if self.feasible(b) {
            return true;
        }
        if !self.marginal(b) {
            return false;
        }
        for n in (1..=NEIGHBOURS).filter_map(|d| b.checked_add(d)).filter(|&n| n <= hi) {
            if !self.seen.contains_key(&n) {
                if self.extra >= EXTRA_PROBES {
                    return false;
                }
                self.extra += 1;
            }
            if self.feasible(n) {
                return true;
            }
        }
        false
    }

    /// When the largest feasible batch is bounded by memory (the next batch probed above it is
    /// out of memory), walk down from it while the batch below delivers about as much (at most
    /// [`EXTRA_PROBES`] steps). A closed loop bounded by its KV pool is saturated there: extra
    /// clients only queue, and throughput wanders within a percent or falls (one request more
    /// can also push the prompts past a step's token budget, doubling TTFT). Without the walk a
    /// looser SLO or a larger pool could end the search on such a batch and report less than a
    /// smaller boundary below it. Below saturation one request less costs about 1/(n + 1) of
    /// the throughput, so the walk goes on while the loss is under half of that. A boundary set
    /// by a latency limit is left as it is: there throughput still grows with the batch.
    fn down_from_the_boundary(&mut self, min: u32) {
        let Some((&top, (p, _))) = self.seen.iter().rev().find(|(_, (p, _))| p.stop.is_none()) else { return };
        if preempted(p) {
            return self.down_through_preemption(top, min);
        }
        let above = self.seen.range(top + 1..).next().map(|(_, (p, _))| p.stop);
        if above != Some(Some(StopReason::MemoryOom)) {
            return;
        }
        let (mut b, mut best) = (top, p.row.throughput);
        for _ in 0..EXTRA_PROBES {
            let Some(n) = b.checked_sub(1).filter(|&n| n >= min) else { return };
            if !self.feasible(n) {
                return;
            }
            let t = self.seen[&n].0.row.throughput;
            if t < best * (1.0 - 0.5 / (n + 1) as f64) {
                return;
            }
            (b, best) = (n, best.max(t));
        }
    }

    /// The largest feasible batch preempted: its KV pool, not a latency limit, holds the closed
    /// loop (an engine that preempts and recomputes instead of failing out of memory), and
    /// throughput past the pool's knee falls and wanders, and feasibility with it (Qwen3-8B on
    /// one H100, 4,230-token prompts: 1,772 tok/s at batch 62 with 8 preemptions, 1,734 at 63,
    /// 1,636 at 66, 1,734 at 69). Walk down through the preempting batches, feasible or not, to
    /// the first one that does not preempt (at most [`EXTRA_PROBES`] in all), so that the best
    /// near the knee is among the probes whatever limit ended the bisection.
    fn down_through_preemption(&mut self, top: u32, min: u32) {
        let mut b = top;
        while let Some(n) = b.checked_sub(1).filter(|&n| n >= min) {
            if !self.seen.contains_key(&n) {
                if self.extra >= EXTRA_PROBES {
                    return;
                }
                self.extra += 1;
            }
            self.feasible(n);
            if !preempted(&self.seen[&n].0) {
                return;
            }
            b = n;
        }
    }

    fn into_result(self, first_stop: Option<StopReason>) -> SearchResult {
        SearchResult { probes: self.seen.into_values().map(|(p, _)| p).collect(), first_stop }
    }
}

/// Whether a probe's simulation preempted running requests (its KV pool was full).
fn preempted(p: &Probe) -> bool {
    p.row.sim.as_ref().is_some_and(|s| s.preemptions > 0)
}

/// The next upper bracket after a feasible `right` (`left` is the feasible probe before it).
fn next_bracket(strategy: SearchStrategy, seen: &BTreeMap<u32, (Probe, ProbeStats)>, left: u32, right: u32) -> u32 {
    let next = right.saturating_mul(2);
    match strategy {
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
    }
}

/// Search `[min, max]` (max unbounded when `None`) with `probe`, memoised per batch size:
/// bracket the boundary, then bisect the bracket, checking the neighbours of marginal probes
/// (see the module doc). Every probe is returned; the best feasible one is the caller's pick.
pub fn search(min: u32, max: Option<u32>, strategy: SearchStrategy, probe: &mut dyn FnMut(u32) -> (Probe, ProbeStats)) -> SearchResult {
    let mut probes = Probes { seen: BTreeMap::new(), probe, extra: 0 };
    let mut left = min;
    let mut right = max.unwrap_or(INITIAL_RIGHT.max(min));
    if !probes.feasible(left) {
        let first = probes.seen.get(&left).and_then(|(p, _)| p.stop);
        return probes.into_result(first);
    }
    if max.is_none() {
        for _ in 0..MAX_EXPANSIONS {
            if !probes.feasible(right) {
                break;
            }
            let bound = next_bracket(strategy, &probes.seen, left, right);
            left = right;
            right = bound;
        }
    }
    // Bisect; a marginal probe with a feasible neighbour counts as feasible.
    let hi = max.unwrap_or(right);
    let (mut l, mut r) = (left, right);
    while l <= r {
        let mid = l + (r - l) / 2;
        if probes.feasible_near(mid, hi) {
            l = mid + 1;
        } else {
            if mid == 0 {
                break;
            }
            r = mid - 1;
        }
    }
    probes.down_from_the_boundary(min);
    probes.into_result(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> ProbeStats {
        ProbeStats { total_gib: 64.0, weight_gib: 20.0, reserved_gib: 10.0, avail_gib: 12.0, latencies: [(0.0, f64::INFINITY); 2] }
    }

    /// A probe whose TTFT is `ttft` against a limit of 100 ms.
    fn ttft_probe(b: u32, ttft: f64) -> (Probe, ProbeStats) {
        let stop = (ttft > 100.0).then_some(StopReason::TtftLimit);
        (Probe { row: Row::probe_stub(b), stop }, ProbeStats { latencies: [(0.0, f64::INFINITY), (ttft, 100.0)], ..stats() })
    }

    fn fake(limit: u32) -> impl FnMut(u32) -> (Probe, ProbeStats) {
        move |b| {
            let stop = if b > limit { Some(StopReason::TpotLimit) } else { None };
            (Probe { row: Row::probe_stub(b), stop }, stats())
        }
    }

    #[test]
    fn extrapolation_estimates_match_the_original() {
        // (64 − 20 − 10 − 12) / 4 = 5.5 GiB per request, 12 GiB free: round(4 + 2.18) + 1.
        assert_eq!(memory_bound(4, &stats()), Some(7));
        let m = ProbeStats { reserved_gib: 18.0, avail_gib: 10.0, ..stats() };
        // bs 8, 2 GiB per request, 10 GiB free ⇒ round(8 + 5) + 1
        assert_eq!(memory_bound(8, &m), Some(14));
        // Nothing held per request: no estimate.
        assert_eq!(memory_bound(8, &ProbeStats { avail_gib: 34.0, ..stats() }), None);
        // slope 5 ms per batch: (2 + 10 / 5) × 1.5 + 1
        assert_eq!(latency_bound(2, 10.0, 6, 30.0, 20.0), Some(7));
        assert_eq!(latency_bound(2, 10.0, 6, 10.0, 20.0), None);
    }

    #[test]
    fn the_extrapolating_bracket_probes_the_memory_estimate() {
        // Mutation: make `next_bracket` return `right * 2` for LinearExponential and 1024 is
        // probed instead of the memory estimate. Feasible up to 700; at 512, 22 GiB over 512
        // requests with 12 GiB free ⇒ round(512 + 279.27) + 1 = 792.
        let mut probed = Vec::new();
        let mut f = fake(700);
        let mut g = |b: u32| {
            probed.push(b);
            f(b)
        };
        let r = search(1, None, SearchStrategy::LinearExponential, &mut g);
        assert_eq!(probed[..3], [1, 512, 792]);
        assert_eq!(r.feasible().map(|p| p.row.batch_size).max(), Some(700));
    }

    /// A probe of a KV-bound closed loop: `tput` tok/s, `preemptions`, feasible or not.
    fn kv_probe(b: u32, tput: f64, preemptions: u64, feasible: bool) -> (Probe, ProbeStats) {
        let sim = crate::outcome::SimSummary {
            latency: Default::default(),
            total_throughput: tput,
            goodput: 0.0,
            kv_utilization: 1.0,
            kv_peak_utilization: 1.0,
            kv_capacity_blocks: 1,
            mean_batch_size: b as f64,
            mean_step_ms: 1.0,
            steps: 1,
            measured_requests: 1,
            preemptions,
            window_s: 1.0,
            converged: true,
            abandoned: false,
            prefix_cache_hit_rate: 0.0,
            bins: Vec::new(),
        };
        let row = Row { throughput: tput, sim: Some(sim), ..Row::probe_stub(b) };
        (Probe { row, stop: (!feasible).then_some(StopReason::TpotLimit) }, stats())
    }

    #[test]
    fn a_boundary_past_the_pools_knee_walks_down_to_it() {
        // As Qwen3-8B on one H100 showed it: no preemption up to batch 60, the knee at 62
        // (the best throughput, a few preemptions), past it throughput falls and feasibility
        // wanders (69 meets the limit, 65 to 68 do not). Bisection over [1, 75] ends on 64 with
        // 61 and 63 probed; the walk must reach 62. Mutation: drop the `preempted` branch of
        // `down_from_the_boundary` and the best probe is 61's 1,760 tok/s.
        let mut f = |b: u32| match b {
            ..=60 => kv_probe(b, 1700.0 + b as f64, 0, true),
            61 => kv_probe(b, 1760.0, 12, true),
            62 => kv_probe(b, 1772.0, 8, true),
            63 | 64 => kv_probe(b, 1734.0 - (b - 63) as f64 * 18.0, 100, true),
            65..=68 => kv_probe(b, 1650.0, 250, false),
            69 => kv_probe(b, 1734.0, 190, true),
            _ => kv_probe(b, 1600.0, 300, false),
        };
        let r = search(1, Some(75), SearchStrategy::Exponential, &mut f);
        let best = r.feasible().max_by(|a, b| a.row.throughput.total_cmp(&b.row.throughput)).unwrap();
        assert_eq!(best.row.batch_size, 62);
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
    fn a_periodic_ttft_near_the_limit_does_not_stop_the_search() {
        // As a closed loop of identical 3000-token prompts with a 12000-token budget shows it:
        // TTFT climbs to the limit by batch 4, then hovers just around it with period 4 (only
        // b ≡ 2 mod 4 meets it) up to batch 80, and is far past it beyond. Plain bisection
        // probes 256, 128, 64, 32, 16, 8, 4 (all marginally infeasible) and settles on 3.
        // Mutation: set NEIGHBOURS to 0 (or bisect on `feasible` alone) and the best is 3.
        let mut ttft = |b: u32| match b {
            1..=3 => ttft_probe(b, 30.0 * b as f64),
            4..=80 if b % 4 == 2 => ttft_probe(b, 99.5),
            4..=80 => ttft_probe(b, 101.0),
            _ => ttft_probe(b, 150.0),
        };
        let r = search(1, None, SearchStrategy::Exponential, &mut ttft);
        let best = r.feasible().map(|p| p.row.batch_size).max().unwrap();
        assert!(best >= 70, "best feasible batch {best}");
        assert!(r.probes.len() <= 11 + EXTRA_PROBES, "{} probes", r.probes.len());
    }

    #[test]
    fn probes_far_past_the_limit_cost_no_neighbours() {
        // Monotone, and every infeasible probe is 50 % past the limit: the search is the plain
        // bisection (1, 512, then 9 bisection steps). Mutation: drop the `marginal` check in
        // `feasible_near` and neighbours are probed around every infeasible midpoint.
        let mut probed = 0;
        let mut f = |b: u32| {
            probed += 1;
            ttft_probe(b, if b <= 300 { 50.0 } else { 150.0 })
        };
        let r = search(1, None, SearchStrategy::Exponential, &mut f);
        assert_eq!(r.feasible().map(|p| p.row.batch_size).max(), Some(300));
        assert_eq!(probed, 11);
        // Marginal misses of a monotone boundary spend at most EXTRA_PROBES more.
        let mut probed = 0;
        let mut f = |b: u32| {
            probed += 1;
            ttft_probe(b, if b <= 300 { 99.0 } else { 101.0 })
        };
        let r = search(1, None, SearchStrategy::Exponential, &mut f);
        assert_eq!(r.feasible().map(|p| p.row.batch_size).max(), Some(300));
        assert!(probed <= 11 + EXTRA_PROBES, "{probed} probes");
    }

    #[test]
    fn a_memory_bound_boundary_is_walked_down_while_throughput_holds() {
        // Feasible up to 12, out of memory above; throughput peaks at 5 and stays within
        // 0.5 % below it from 6 to 12 (a saturated closed loop), as a proptest case found it.
        // The search ends at 12 and walks down to the peak, stopping at 4 (far lower).
        // Mutation: drop `probes.down_from_the_boundary(min)`: the best found is 42,485.
        let thr = [0.0, 9660.0, 18683.0, 27304.0, 35057.0, 43013.0, 42499.0, 42499.0, 42479.0, 42742.0, 42508.0, 42303.0, 42485.0];
        let mut probed = Vec::new();
        let mut f = |b: u32| {
            probed.push(b);
            let stop = (b > 12).then_some(StopReason::MemoryOom);
            let row = Row { throughput: thr.get(b as usize).copied().unwrap_or(0.0), ..Row::probe_stub(b) };
            (Probe { row, stop }, stats())
        };
        let r = search(1, Some(48), SearchStrategy::Exponential, &mut f);
        let best = r.feasible().map(|p| p.row.throughput).fold(0.0, f64::max);
        assert_eq!(best, 43013.0, "probed {probed:?}");
        assert!(probed.contains(&4) && !probed.contains(&3), "{probed:?}");
        // The same curve bounded by a TPOT limit instead: no walk (throughput still grows
        // where latency binds), so batch 5 is never probed.
        let mut probed = Vec::new();
        let mut f = |b: u32| {
            probed.push(b);
            let stop = (b > 12).then_some(StopReason::TpotLimit);
            let row = Row { throughput: thr.get(b as usize).copied().unwrap_or(0.0), ..Row::probe_stub(b) };
            (Probe { row, stop }, stats())
        };
        search(1, Some(48), SearchStrategy::Exponential, &mut f);
        assert!(!probed.contains(&5), "{probed:?}");
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
            ttft_probe(b, if b.is_multiple_of(2) { 100.5 } else { 50.0 })
        };
        search(3, Some(9), SearchStrategy::Exponential, &mut f);
        assert!(probed.iter().all(|&b| (3..=9).contains(&b)), "{probed:?}");
        assert!(probed.contains(&9));
    }
}
