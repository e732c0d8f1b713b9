//! Goodput per candidate: the highest offered request rate at which a deployment still
//! meets the SLO (`max_request_rate_within_slo`, `--goodput`), by a rate search with the
//! simulator.
//!
//! The rates searched lie on a geometric grid anchored at the offered rate, r₀·(1 + [`TOLERANCE`])ᵏ
//! for whole k within ±[`MAX_GRID_STEPS`] (1/64 to 64 times r₀). Every simulation draws the same
//! seeded requests, their arrival times scaled to the rate (common random numbers: a higher
//! rate is the same requests arriving sooner), so two rates differ only by the load. The
//! search first brackets the boundary: it simulates the grid rate nearest its best guess of
//! it (`rate_estimate`'s closed form on the candidate's own step prices, usually within a grid
//! step or two; without one, the rate an overloaded first run delivered; else the offered
//! rate's neighbour), then walks away from it until the outcome flips, each stride at least
//! double the last and as long as the last two points extrapolate the boundary. It then
//! narrows the bracket to adjacent grid
//! points: each next rate is interpolated between the bracket's ends on log(statistic /
//! limit) against log(rate), rounded to the grid and kept strictly inside, with a plain
//! bisection whenever the same end moved twice in a row (regula falsi's stall). At most
//! [`MAX_SIMULATIONS`] simulations a candidate; the answer is the highest grid rate seen to
//! meet the SLO.
//!
//! Why a grid: where the SLO statistic grows with the rate, the boundary between adjacent
//! grid points is unique, so the answer does not depend on the order of the probes, and a
//! looser SLO or more instances (which only lower the statistic at every rate) can only move
//! it up (the property tests in `properties`). Bisecting real numbers to a tolerance instead
//! ends anywhere within it, and could report less for a looser SLO.

use super::engine::CandidateCtx;
use super::rate_estimate::boundary_rate;
use super::slo_check::{slo_load, OpenLoopDeployment};
use crate::outcome::{Row, SloPoint};

/// Relative spacing of the searched rates: the answer is within it of the boundary.
pub const TOLERANCE: f64 = 0.05;
/// Farthest grid step from the offered rate (1.05⁸⁶ ≈ 66): beyond it the answer is "at least
/// 64 × r₀" or "not even r₀ / 64" (reported as 0).
pub const MAX_GRID_STEPS: i32 = 86;
/// Most simulations one search runs beyond the offered rate's.
pub const MAX_SIMULATIONS: u32 = 10;

/// What a rate search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Goodput {
    /// The highest rate seen to meet the SLO (0 when none did).
    pub rate: f64,
    /// Every simulation, by rate (the first one's included).
    pub points: Vec<SloPoint>,
    /// The bracket closed to adjacent grid rates (false: the simulation cap or the grid's
    /// end stopped it, and `rate` is a lower bound).
    pub exact: bool,
}

/// The rate of grid step `k` from `r0`.
pub fn grid_rate(r0: f64, k: i32) -> f64 {
    r0 * (1.0 + TOLERANCE).powi(k)
}

/// The simulations of one search by grid step, and how many ran.
struct Probes<'f> {
    r0: f64,
    first: Option<SloPoint>,
    check: &'f mut dyn FnMut(f64) -> SloPoint,
    seen: Vec<(i32, SloPoint)>,
    sims: u32,
}

impl Probes<'_> {
    /// The point of grid step `k`, simulated once.
    fn eval(&mut self, k: i32) -> SloPoint {
        if let Some((_, p)) = self.seen.iter().find(|(j, _)| *j == k) {
            return *p;
        }
        let p = match (k, self.first) {
            (0, Some(p)) => p,
            _ => {
                self.sims += 1;
                (self.check)(grid_rate(self.r0, k))
            }
        };
        self.seen.push((k, p));
        p
    }

    fn spent(&self) -> bool {
        self.sims >= MAX_SIMULATIONS
    }
}

/// The search from `r0`, whose point `first` may already be known; `check` simulates a rate.
/// `limits` (TTFT, TPOT ms) steer the interpolation only; `check` decides what meets. `hints`
/// choose where to look first (the estimate, else an overloaded first run's delivered rate,
/// which an open loop past its capacity delivers about); on the grid, where the boundary is
/// unique, the answer is the same.
pub fn search(r0: f64, first: Option<SloPoint>, hints: Hints, limits: (f64, f64), check: &mut dyn FnMut(f64) -> SloPoint) -> Goodput {
    let estimate = hints.estimate.filter(|e| e.is_finite() && *e > 0.0);
    let delivered = hints.delivered.filter(|d| *d > 0.0 && *d < r0 / (1.0 + TOLERANCE));
    let start = estimate.or(delivered).map_or(0, |rate| grid_step(r0, rate));
    let mut probes = Probes { r0, first, check, seen: Vec::new(), sims: 0 };
    let (lo, hi) = bracket(&mut probes, start, limits);
    let (lo, exact) = match (lo, hi) {
        (Some(lo), Some(hi)) => narrow(lo, hi, limits, &mut probes),
        (lo, _) => (lo, false),
    };
    let mut seen = probes.seen;
    seen.sort_by_key(|(k, _)| *k);
    Goodput { rate: lo.map_or(0.0, |k| grid_rate(r0, k)), points: seen.into_iter().map(|(_, p)| p).collect(), exact }
}

/// Where a [`search`] may look first; neither changes its answer on a monotone statistic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Hints {
    /// The request rate the first point's run delivered, if known.
    pub delivered: Option<f64>,
    /// An estimate of the boundary rate.
    pub estimate: Option<f64>,
}

/// The grid step nearest `rate` (within the grid).
fn grid_step(r0: f64, rate: f64) -> i32 {
    ((rate / r0).ln() / (1.0 + TOLERANCE).ln()).round().clamp(-MAX_GRID_STEPS as f64, MAX_GRID_STEPS as f64) as i32
}

/// Tighten the bracket (`lo` the highest step seen to meet, `hi` the lowest seen to miss)
/// with step `k`'s outcome.
fn note(k: i32, meets: bool, lo: &mut Option<i32>, hi: &mut Option<i32>) {
    if meets {
        *lo = Some(lo.map_or(k, |l| l.max(k)));
    } else {
        *hi = Some(hi.map_or(k, |h| h.min(k)));
    }
}

/// Grid steps (lo meets, hi misses) around the boundary, from the guess's step `start`
/// (moved to the side of step 0 that step 0's outcome leaves open), then away from it until
/// the outcome flips: each next step at least doubles the last stride (1, 2, 4, …) and goes
/// as far as the last two points extrapolate the boundary (log(statistic / limit) linear in
/// the step), so a poor guess costs a few simulations, not a walk. `None` at an end the grid
/// or the simulation cap reached first.
fn bracket(probes: &mut Probes, start: i32, limits: (f64, f64)) -> (Option<i32>, Option<i32>) {
    let (mut lo, mut hi) = (None, None);
    let at_r0 = probes.eval(0).meets_slo;
    note(0, at_r0, &mut lo, &mut hi);
    let start = if at_r0 { start.clamp(1, MAX_GRID_STEPS) } else { start.clamp(-MAX_GRID_STEPS, -1) };
    if probes.spent() {
        return (lo, hi);
    }
    let up = probes.eval(start).meets_slo;
    note(start, up, &mut lo, &mut hi);
    let dir = if up { 1 } else { -1 };
    let (mut prev, mut last, mut stride) = (None, start, 1);
    loop {
        let far = prev.and_then(|p| extrapolate(probes, p, last, limits)).map_or(last + dir * stride, |k| {
            if up {
                k.max(last + stride)
            } else {
                k.min(last - stride)
            }
        });
        // Not past a step already known to flip, nor off the grid.
        let next = if up { hi.map_or(far, |h| far.min(h)) } else { lo.map_or(far, |l| far.max(l)) }.clamp(-MAX_GRID_STEPS, MAX_GRID_STEPS);
        if next == last || Some(next) == if up { hi } else { lo } || probes.spent() {
            return (lo, hi);
        }
        let meets = probes.eval(next).meets_slo;
        note(next, meets, &mut lo, &mut hi);
        if meets != up {
            return (lo, hi);
        }
        stride = 2 * (next - last).abs();
        (prev, last) = (Some(last), next);
    }
}

/// The grid step where log(statistic / limit) reaches 0 on the line through steps `a` and
/// `b` (both simulated), rounded; `None` where the line does not head there.
fn extrapolate(probes: &mut Probes, a: i32, b: i32, limits: (f64, f64)) -> Option<i32> {
    let (qa, qb) = (slo_load(&probes.eval(a), limits).ln(), slo_load(&probes.eval(b), limits).ln());
    let slope = (qb - qa) / (b - a) as f64;
    let k = b as f64 - qb / slope;
    (qa.is_finite() && qb.is_finite() && slope.is_finite() && slope > 0.0 && k.is_finite())
        .then(|| k.round().clamp(-MAX_GRID_STEPS as f64, MAX_GRID_STEPS as f64) as i32)
}

/// Narrow a bracket to adjacent grid steps (see the module comment); whether it closed.
fn narrow(mut lo: i32, mut hi: i32, limits: (f64, f64), probes: &mut Probes) -> (Option<i32>, bool) {
    let mut last_moved: Option<bool> = None;
    let mut same_end_twice = false;
    while hi - lo > 1 {
        if probes.spent() {
            return (Some(lo), false);
        }
        let (q_lo, q_hi) = (slo_load(&probes.eval(lo), limits).ln(), slo_load(&probes.eval(hi), limits).ln());
        let interpolated = (q_lo.is_finite() && q_hi.is_finite() && q_hi > q_lo && !same_end_twice)
            .then(|| lo as f64 + (hi - lo) as f64 * (-q_lo) / (q_hi - q_lo));
        let mid = interpolated.map_or((lo + hi).div_euclid(2), |m| m.round() as i32).clamp(lo + 1, hi - 1);
        let moved_lo = probes.eval(mid).meets_slo;
        if moved_lo {
            lo = mid;
        } else {
            hi = mid;
        }
        same_end_twice = last_moved == Some(moved_lo);
        last_moved = Some(moved_lo);
    }
    (Some(lo), true)
}

/// `--goodput`: the row's rate search on its candidate with the run's instances, from the
/// offered rate, whose simulation is the row's own.
pub fn fill_row(ctx: &CandidateCtx, row: &mut Row) {
    let Some(r0) = ctx.plan.sim.arrival.mean_rate() else { return };
    let deployment = OpenLoopDeployment::new(ctx, ctx.cand.parallel.dp);
    let limits = deployment.limits();
    let first = match (row.sim_error.is_some(), row.ttft_ms, row.tpot_ms) {
        (false, Some(ttft), Some(tpot)) => {
            SloPoint { rate: r0, ttft_ms: Some(ttft), tpot_ms: Some(tpot), meets_slo: ttft <= limits.0 && tpot <= limits.1 }
        }
        // Out of memory at any rate: nothing to search.
        _ => {
            row.max_request_rate_within_slo = Some(0.0);
            return;
        }
    };
    let hints = Hints { delivered: row.qps, estimate: boundary_rate(&deployment, r0, limits) };
    let g = search(r0, Some(first), hints, limits, &mut |r| deployment.check(r));
    row.max_request_rate_within_slo = Some(g.rate);
    row.slo_curve = g.points;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deployment whose statistic is `rate / capacity` × the limit: it meets the SLO up to
    /// `capacity`.
    fn linear(capacity: f64) -> impl FnMut(f64) -> SloPoint {
        move |rate| SloPoint { rate, ttft_ms: Some(0.0), tpot_ms: Some(50.0 * rate / capacity), meets_slo: rate <= capacity }
    }

    #[test]
    fn the_answer_is_the_last_grid_rate_below_the_boundary() {
        // Capacity 3.3 from r0 = 10: the grid rate just below 3.3. Mutation: return `hi`
        // instead of `lo` from `narrow`, and the answer misses the SLO.
        for (r0, capacity) in [(10.0, 3.3), (1.0, 7.9), (5.0, 5.01), (2.0, 0.5)] {
            let mut f = linear(capacity);
            let g = search(r0, None, Hints::default(), (f64::INFINITY, 50.0), &mut f);
            let k = ((capacity / r0).ln() / (1.0 + TOLERANCE).ln()).floor() as i32;
            assert!(g.exact, "{r0} {capacity}: {g:?}");
            assert!((g.rate - grid_rate(r0, k)).abs() < 1e-9, "{r0} {capacity}: {} vs {}", g.rate, grid_rate(r0, k));
            assert!(g.rate <= capacity && g.rate * (1.0 + TOLERANCE) > capacity);
            assert!(g.points.len() as u32 <= MAX_SIMULATIONS + 1);
        }
    }

    #[test]
    fn the_delivered_rate_only_chooses_where_to_look() {
        // Starting from an overloaded run's delivered rate ends where the plain search does.
        // Mutation: keep the hint's grid step as the answer without checking it (`lo = Some(k)`
        // before `eval`) and a hint above the boundary is reported.
        for (capacity, delivered) in [(3.3, 3.6), (3.3, 2.0), (0.4, 0.45), (7.0, 9.0)] {
            let plain = search(10.0, None, Hints::default(), (f64::INFINITY, 50.0), &mut linear(capacity));
            let hinted =
                search(10.0, None, Hints { delivered: Some(delivered), estimate: None }, (f64::INFINITY, 50.0), &mut linear(capacity));
            assert_eq!(plain.rate.to_bits(), hinted.rate.to_bits(), "{capacity} {delivered}");
        }
    }

    #[test]
    fn the_estimate_only_chooses_where_to_look() {
        // Any estimate, near or far, on either side of r0, ends where the plain search does.
        // Mutation: take the estimate's grid step as met without simulating it and an estimate
        // above the boundary is reported.
        for capacity in [3.3, 0.4, 7.0, 10.2, 40.0] {
            let plain = search(10.0, None, Hints::default(), (f64::INFINITY, 50.0), &mut linear(capacity));
            for estimate in [capacity, capacity * 1.04, capacity / 1.3, capacity * 3.0, 0.01, 900.0] {
                let hints = Hints { delivered: Some(capacity), estimate: Some(estimate) };
                let g = search(10.0, None, hints, (f64::INFINITY, 50.0), &mut linear(capacity));
                assert_eq!(plain.rate.to_bits(), g.rate.to_bits(), "{capacity} {estimate}");
                assert!(g.exact, "{capacity} {estimate}");
            }
        }
    }

    #[test]
    fn an_estimate_within_a_grid_step_takes_two_simulations() {
        // r0's point is known; the grid rates on each side of the boundary are the only two
        // simulated. Mutation: start the walk with a stride of 2 and it takes three.
        for (capacity, estimate) in [(3.3, 3.3), (3.3, 3.4), (3.3, 3.2), (0.5, 0.52)] {
            let mut calls = 0;
            let mut f = linear(capacity);
            let first = f(10.0);
            let hints = Hints { delivered: None, estimate: Some(estimate) };
            let g = search(10.0, Some(first), hints, (f64::INFINITY, 50.0), &mut |r| {
                calls += 1;
                f(r)
            });
            assert!(g.exact && calls == 2, "{capacity} {estimate}: {calls} simulations, {g:?}");
        }
    }

    #[test]
    fn interpolation_saves_simulations() {
        // A linear statistic is found in a few simulations past the bracket. Mutation: always
        // bisect (drop the interpolation) and the count rises to the bisection's.
        let mut calls = 0;
        let mut f = linear(3.3);
        let g = search(10.0, None, Hints::default(), (f64::INFINITY, 50.0), &mut |r| {
            calls += 1;
            f(r)
        });
        assert!(g.exact);
        assert!(calls <= 6, "{calls} simulations");
    }

    #[test]
    fn ends_of_the_grid_and_the_cap() {
        // Nothing meets: 0. Everything meets: a lower bound at the grid's end. Mutation: drop
        // the `k.abs() == MAX_GRID_STEPS` stop and the search loops until the cap.
        let g = search(1.0, None, Hints::default(), (f64::INFINITY, 50.0), &mut |rate| SloPoint {
            rate,
            ttft_ms: Some(1.0),
            tpot_ms: Some(99.0),
            meets_slo: false,
        });
        assert_eq!((g.rate, g.exact), (0.0, false));
        let g = search(1.0, None, Hints::default(), (f64::INFINITY, 50.0), &mut |rate| SloPoint {
            rate,
            ttft_ms: Some(1.0),
            tpot_ms: Some(1.0),
            meets_slo: true,
        });
        assert!(!g.exact && (g.rate - grid_rate(1.0, MAX_GRID_STEPS)).abs() < 1e-9, "{g:?}");
        assert!(g.points.len() as u32 <= MAX_SIMULATIONS + 1);
    }
}
