//! Verifying a P/D plan by simulation: the planned numbers of prefill and decode instances run
//! as one system (prefill group → KV link → decode group) under Poisson arrivals at the
//! balanced rate, and — with a device budget — every maximal instance split is simulated to
//! see whether the arithmetic split is the best one.

use crate::hardware::DeviceProfile;
use crate::outcome::Phase;
use crate::outcome::{PdRow, PdSimulated, PdSplitEval, PdVerification};
use crate::plan::{Plan, TpotDefinition};
use crate::search::engine::sim::{input_bins, request_factory, MAX_STEPS};
use crate::search::{Candidate, CandidateCtx};
use crate::sim::{simulate_report, Group, KvTransfer, Role, RunParams, SimError, System};
use crate::workload::arrival::ArrivalProcess;

/// Fewest requests per verification run unless `--num-requests` says otherwise.
pub const DEFAULT_VERIFY_REQUESTS: u64 = 600;
/// A default verification run lasts at least this many planned request lifetimes, so the
/// open loop reaches a steady state and leaves a window to measure it.
const VERIFY_LIFETIMES: f64 = 4.0;
/// Most requests a default verification run simulates.
const MAX_VERIFY_REQUESTS: u64 = 20_000;

/// Requests to simulate at `rate`: `--num-requests`, or enough for `VERIFY_LIFETIMES`
/// planned lifetimes (TTFT + output × TPOT) of arrivals, at least [`DEFAULT_VERIFY_REQUESTS`].
pub fn verify_requests(plan: &Plan, row: &PdRow, rate: f64) -> u64 {
    if let Some(n) = plan.sim.num_requests {
        return n;
    }
    let life_s = (row.ttft_ms + plan.workload.output.mean_raw() as f64 * row.tpot_ms) / 1e3;
    let n = (VERIFY_LIFETIMES * rate * life_s).ceil();
    if n.is_finite() {
        (n as u64).clamp(DEFAULT_VERIFY_REQUESTS, MAX_VERIFY_REQUESTS)
    } else {
        DEFAULT_VERIFY_REQUESTS
    }
}

fn ctx<'a>(plan: &'a Plan, device: &'a DeviceProfile, cand: Candidate, phase: Phase) -> CandidateCtx<'a> {
    CandidateCtx::new(plan, device, cand, phase)
}

/// Simulate `p` prefill and `d` decode instances of the row's layouts at `rate` req/s.
#[allow(clippy::too_many_arguments)]
pub fn simulate_split(
    plan: &Plan,
    device: &DeviceProfile,
    row: &PdRow,
    p: u32,
    d: u32,
    rate: f64,
    requests: u64,
) -> Result<PdSimulated, SimError> {
    simulate_offered(plan, device, row, (p, d), Offered::Open(ArrivalProcess::Poisson { rate }), requests)
}

/// The load a P/D system is simulated under: open-loop arrivals, or a closed loop of clients
/// (a sizing run's concurrency target).
#[derive(Debug, Clone)]
pub enum Offered {
    Open(ArrivalProcess),
    Closed(u64),
}

/// Simulate `split.0` prefill and `split.1` decode instances of the row's layouts under
/// `offered` (open loop: `requests` requests; closed loop: its steady state).
pub fn simulate_offered(
    plan: &Plan,
    device: &DeviceProfile,
    row: &PdRow,
    split: (u32, u32),
    offered: Offered,
    requests: u64,
) -> Result<PdSimulated, SimError> {
    let (p, d) = split;
    let (arrival, concurrency, min_measured) = match offered {
        Offered::Open(a) => (a, 0, 0),
        Offered::Closed(c) => (ArrivalProcess::Closed, c, plan.sim.slo_percentile.min_sample()),
    };
    let pc = ctx(plan, device, Candidate { parallel: row.p_layout, mtp: 0 }, Phase::Prefill);
    let dc = ctx(plan, device, Candidate { parallel: row.d_layout, mtp: row.d_mtp }, Phase::Decode);
    let (p_setup, d_setup) = (pc.sim_setup(), dc.sim_setup());
    let (ttft_limit, tpot_limit) = (plan.slo.ttft_limit(), plan.slo.tpot_limit());
    let sys = System {
        groups: vec![
            Group {
                role: Role::Prefill,
                count: p * row.p_layout.dp,
                cfg: p_setup.instance(row.p_budget, row.p_batch_size as u64),
                cost: &p_setup.cost,
                pipeline: p_setup.pipeline(),
            },
            Group {
                role: Role::Decode,
                count: d * row.d_layout.dp,
                cfg: d_setup.instance(row.d_budget, row.d_batch_size as u64),
                cost: &d_setup.cost,
                pipeline: d_setup.pipeline(),
            },
        ],
        transfer: Some(KvTransfer { bytes_per_token: pc.mem.kv_bytes_per_token, link: device.kv_transfer.clone() }),
        routing: plan.sim.routing,
        run: RunParams {
            measure: Default::default(),
            closed_requests: None,
            concurrency,
            num_requests: requests,
            max_concurrency: plan.sim.max_concurrency,
            min_measured,
            ttft_limit_ms: ttft_limit,
            tpot_limit_ms: tpot_limit,
            seed: plan.seed,
            max_steps: MAX_STEPS,
            bins: input_bins(plan),
            stop_once_measured: false,
        },
    };
    let rep = simulate_report(&sys, request_factory(plan, arrival, plan.output_spread(device)))?;
    let pct = plan.sim.slo_percentile;
    let tpot = match plan.serving.tpot_definition {
        TpotDefinition::InterToken => rep.latency.tpot_inter_token,
        TpotDefinition::Amortized => rep.latency.tpot_amortized,
    };
    let slo_met = rep.latency.ttft.pick(pct) <= ttft_limit && tpot.pick(pct) <= tpot_limit;
    Ok(PdSimulated {
        ttft: rep.latency.ttft,
        tpot,
        output_throughput: rep.output_throughput,
        request_rate: rep.request_rate,
        goodput: rep.goodput,
        kv_transfer_ms: row.p_transfer_ms,
        slo_met,
        steady: rep.converged,
    })
}

/// The balanced rate of a split: what its prefill and decode sides can both sustain.
pub fn split_rate(row: &PdRow, p: u32, d: u32) -> f64 {
    (p as f64 * row.p_qps).min(d as f64 * row.d_qps)
}

/// Splits that use the device budget fully (no further instance of either kind fits).
pub fn maximal_splits(total: u32, p_dev: u32, d_dev: u32) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    for p in 1..=total / p_dev.max(1) {
        let left = total - p * p_dev;
        let d = left / d_dev.max(1);
        if d == 0 {
            continue;
        }
        let spare = total - p * p_dev - d * d_dev;
        if spare < p_dev {
            v.push((p, d));
        }
    }
    v
}

/// Verify the best P/D row: the planned split (or the smallest integer split near the ratio
/// without a device budget) at its balanced rate, then — with a budget — every maximal split.
pub fn verify(plan: &Plan, device: &DeviceProfile, row: &PdRow, split: Option<(u32, u32)>, total: Option<u32>) -> PdVerification {
    use rayon::prelude::*;
    let (p, d) = split.unwrap_or_else(|| smallest_split(row.pd_ratio));
    let rate = split_rate(row, p, d);
    let requests = verify_requests(plan, row, rate);
    // The planned split (then, if it misses the SLO, the search for the rate it sustains) and
    // every other maximal split are independent simulations: they run side by side on the
    // search's thread pool, and results keep their order (output independent of --jobs).
    let others: Vec<(u32, u32)> = total.map(|n| maximal_splits(n, row.p_devices, row.d_devices)).unwrap_or_default();
    let runs: Vec<(u32, u32, f64, u64)> = std::iter::once((p, d, rate, requests))
        .chain(others.iter().filter(|&&s| s != (p, d)).map(|&(sp, sd)| {
            let r = split_rate(row, sp, sd);
            (sp, sd, r, verify_requests(plan, row, r))
        }))
        .collect();
    let planned = || {
        let simulated = simulate_split(plan, device, row, p, d, rate, requests);
        let sustainable_rate = match &simulated {
            Ok(s) if s.slo_met => Some(rate),
            Ok(_) => sustainable(plan, device, row, p, d, rate, requests),
            Err(_) => None,
        };
        (simulated, sustainable_rate)
    };
    let rest = || runs[1..].par_iter().map(|&(sp, sd, r, n)| simulate_split(plan, device, row, sp, sd, r, n)).collect::<Vec<_>>();
    let ((simulated, sustainable_rate), rest) = rayon::join(planned, rest);
    let results: Vec<_> = std::iter::once(simulated.clone()).chain(rest).collect();
    let mut splits = Vec::new();
    if total.is_some() {
        for &(sp, sd) in &others {
            let r = split_rate(row, sp, sd);
            let at = runs.iter().position(|&(a, b, _, _)| (a, b) == (sp, sd)).expect("every split was simulated");
            let eval = results[at].clone();
            splits.push(match eval {
                Ok(s) => PdSplitEval {
                    prefill_instances: sp,
                    decode_instances: sd,
                    arrival_rate: r,
                    delivered_qps: s.request_rate,
                    good_qps: s.request_rate * s.goodput,
                    slo_met: s.slo_met,
                    steady: s.steady,
                    error: None,
                },
                Err(e) => PdSplitEval {
                    prefill_instances: sp,
                    decode_instances: sd,
                    arrival_rate: r,
                    delivered_qps: 0.0,
                    good_qps: 0.0,
                    slo_met: false,
                    steady: false,
                    error: Some(e),
                },
            });
        }
        splits.sort_by(|a, b| b.good_qps.total_cmp(&a.good_qps).then(a.prefill_instances.cmp(&b.prefill_instances)));
    }
    let share = |cap: f64| if cap > 0.0 { rate / cap } else { 0.0 };
    let (simulated, simulation_error) = match simulated {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(e)),
    };
    PdVerification {
        prefill_instances: p,
        decode_instances: d,
        arrival_rate: rate,
        planned_ttft_ms: row.ttft_ms,
        planned_tpot_ms: row.tpot_ms,
        planned_qps: rate,
        prefill_utilization: share(p as f64 * row.p_qps),
        decode_utilization: share(d as f64 * row.d_qps),
        requests,
        simulated,
        simulation_error,
        sustainable_rate,
        splits,
    }
}

/// Bisections of the arrival rate when looking for the highest rate that holds the SLO.
const RATE_BISECTIONS: u32 = 5;

/// The highest Poisson rate (to 1/32 of the balanced rate) at which the split still meets the
/// SLO, by bisection; `None` when even 1/32 of it fails.
/// Each run simulates as many requests as the verification itself, so the two agree.
///
/// With w worker threads, each round simulates the bisection's next w midpoints as they
/// would be if every one of them held the SLO (a plan that misses its SLO usually misses it by
/// a small margin, so the search mostly moves up), side by side. Their outcomes are read in
/// order only as far as the bisection would go: at the first midpoint that fails, the rest of
/// the round is discarded. So the result is the sequential bisection's whatever the thread
/// count (one thread runs exactly it), and a round that guessed right advances w levels.
/// (Speculating on both halves instead doubles the work per level; speculating before the
/// planned split's own run was measured slower, since it is wasted whenever the plan holds.)
fn sustainable(plan: &Plan, device: &DeviceProfile, row: &PdRow, p: u32, d: u32, rate: f64, n: u64) -> Option<f64> {
    let ok = |r: f64| simulate_split(plan, device, row, p, d, r, n).is_ok_and(|s| s.slo_met);
    let lo = bisect(RATE_BISECTIONS, rayon::current_num_threads().max(1) as u32, &|m| ok(rate * m));
    (lo > 0.0).then_some(rate * lo)
}

/// The lower end of `levels` bisections of [0, 1] on `holds` (a midpoint that holds raises the
/// lower end, one that fails lowers the upper end), evaluating up to `width` midpoints per
/// round on the current thread pool: those of the path on which each one holds.
fn bisect(levels: u32, width: u32, holds: &(dyn Fn(f64) -> bool + Sync)) -> f64 {
    use rayon::prelude::*;
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    let mut level = 0;
    while level < levels {
        let mut mids = Vec::new();
        let mut l = lo;
        for _ in 0..width.clamp(1, levels - level) {
            let mid = (l + hi) / 2.0;
            mids.push(mid);
            l = mid;
        }
        let held: Vec<bool> = mids.par_iter().map(|&m| holds(m)).collect();
        for (&mid, held) in mids.iter().zip(held) {
            level += 1;
            if held {
                lo = mid;
            } else {
                hi = mid;
                break;
            }
        }
    }
    lo
}

/// Without a device budget: the smallest (P, D) whose ratio is within 10 % of D QPS / P QPS
/// (P instances ≈ D instances × ratio), at most 16 of either.
pub fn smallest_split(pd_ratio: f64) -> (u32, u32) {
    let mut best = (1, 1, f64::INFINITY);
    for d in 1..=16u32 {
        let p = ((d as f64 * pd_ratio).round() as u32).clamp(1, 16);
        let err = (p as f64 / d as f64 - pd_ratio).abs() / pd_ratio.max(1e-9);
        if err < best.2 - 1e-12 {
            best = (p, d, err);
        }
        if err <= 0.1 {
            break;
        }
    }
    (best.0, best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speculative_bisection_ends_where_the_sequential_one_does() {
        // Whatever the width, the result is the plain bisection's, also for a criterion that is
        // not monotone (here: a hash of the midpoint's bits). Mutation: keep reading a round's
        // outcomes after the first failure (drop the `break`), and wider rounds end elsewhere.
        let sequential = |holds: &dyn Fn(f64) -> bool| {
            let (mut lo, mut hi) = (0.0f64, 1.0f64);
            for _ in 0..RATE_BISECTIONS {
                let mid = (lo + hi) / 2.0;
                if holds(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        let mut ends = std::collections::BTreeSet::new();
        for salt in 0..64u64 {
            let holds =
                move |m: f64| ((m.to_bits() ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63) == 0;
            let want = sequential(&holds);
            for width in 1..=5 {
                assert_eq!(bisect(RATE_BISECTIONS, width, &holds).to_bits(), want.to_bits(), "salt {salt}, width {width}");
            }
            ends.insert(want.to_bits());
        }
        assert!(ends.len() > 5, "the criteria reach several ends");
        assert_eq!(bisect(RATE_BISECTIONS, 2, &|m| m < 0.84), 0.8125);
    }

    #[test]
    fn maximal_splits_use_the_budget() {
        assert_eq!(maximal_splits(64, 16, 16), vec![(1, 3), (2, 2), (3, 1)]);
        assert_eq!(maximal_splits(16, 4, 2), vec![(1, 6), (2, 4), (3, 2)]);
    }

    #[test]
    fn smallest_split_tracks_the_ratio() {
        assert_eq!(smallest_split(1.0), (1, 1));
        assert_eq!(smallest_split(0.5), (1, 2));
        assert_eq!(smallest_split(2.9), (3, 1));
        assert_eq!(smallest_split(0.03), (1, 16));
    }
}
