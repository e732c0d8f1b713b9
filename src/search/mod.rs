//! Which candidate wins: enumerate layouts per device and phase, search each candidate's batch
//! size in parallel (rayon, `--jobs`), rank feasible rows, match P/D instances, and assemble
//! the [`Report`]; then [`record()`] what the trace outputs show of the best rows.

pub mod batch;
pub mod candidates;
pub mod cost;
pub mod engine;
pub mod frontier;
pub mod goodput;
pub mod merge;
pub mod pd;
pub mod price;
pub mod ranking;
pub mod rate_estimate;
pub mod record;
pub mod replicas;
pub mod sizing;
pub mod slo_check;
pub mod spread;
pub mod sweep;
pub mod warnings;

#[cfg(test)]
mod goodput_properties;
#[cfg(test)]
mod properties;

pub use candidates::Candidate;
pub use engine::{cost_options, AnalyticEngine, CandidateCtx, CompareEngine, Engine, SimEngine};
pub use ranking::{best_per_layout, ranking, Ranking};
pub use record::record;

use crate::hardware::DeviceProfile;
use crate::outcome::{
    BatchRange, DeviceResult, Inputs, LengthInput, LengthSource, ModeInput, ModeKind, PdRatioResult, Phase, PhaseResult, ProfileSummary,
    Report, Row, ServingSummary, StopReason, DISCLAIMER,
};
use crate::plan::{EngineKind, Mode, Plan};
use crate::workload::Lengths;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// Token budgets to try on `device`: the explicit one; the serving engine's default (vLLM's,
/// with a simulator engine); or 4×, 2×, 1× the raw input length (retried in that order only
/// when the first probe runs out of memory in prefill).
pub fn budgets(plan: &Plan, device: &DeviceProfile) -> (Vec<u64>, bool) {
    match &plan.search.max_batched_tokens {
        Some(b) => (b.clone(), true),
        None if plan.engine_limits(device).default_budget.is_some() => {
            (plan.engine_limits(device).default_budget.into_iter().collect(), false)
        }
        None => {
            // Image tokens are part of every prompt.
            let e = plan.workload.input.mean_raw() + image_tokens(plan);
            let mut v = Vec::new();
            for m in [4, 2, 1] {
                // At least MIN_AUTO_BUDGET tokens: a budget of a few tokens (a prompt of one)
                // lets a few decodes run per step and spends the work budget.
                let b = (e * m).max(MIN_AUTO_BUDGET);
                if !v.contains(&b) {
                    v.push(b);
                }
            }
            (v, false)
        }
    }
}

/// The smallest automatic token budget.
pub const MIN_AUTO_BUDGET: u64 = 64;

/// Running sequences per replica for open-loop simulations without `--max-num-seqs` or a
/// serving engine's default (vLLM's default on small GPUs).
pub const OPEN_LOOP_MAX_NUM_SEQS: u32 = 256;

/// Running sequences per replica of an open-loop probe on `device`: `--max-num-seqs`, the
/// serving engine's default, or [`OPEN_LOOP_MAX_NUM_SEQS`].
pub fn open_loop_max_num_seqs(plan: &Plan, device: &DeviceProfile) -> u32 {
    plan.engine_limits(device).max_num_seqs.map_or(OPEN_LOOP_MAX_NUM_SEQS, |m| m as u32)
}

/// LLM tokens the images of one request add to its prompt.
pub fn image_tokens(plan: &Plan) -> u64 {
    match (&plan.workload.images, &plan.model.vision) {
        (Some(im), Some(v)) => v.image_tokens(im.height, im.width).1 * im.per_request as u64,
        _ => 0,
    }
}

/// The batch range a candidate's search covers on `device`. Without `--batch-range`, a
/// simulated run with `--max-num-seqs` (or the serving engine's default) stops at that cap: a
/// client beyond it only waits in the queue, which adds TTFT and no throughput, so without a
/// TTFT limit the search would otherwise never end.
/// With pipeline stages the batch is one micro-batch, and the lanes share the cap.
fn batch_bounds(plan: &Plan, device: &DeviceProfile, stages: u32) -> (u32, Option<u32>) {
    let s = &plan.search;
    let cap = match (s.batch_max, plan.engine_limits(device).max_num_seqs) {
        (None, Some(m)) if plan.engine != EngineKind::Analytic => Some(((m as u32).div_ceil(stages)).max(s.batch_min)),
        (max, _) => max,
    };
    (s.batch_min, cap)
}

/// Without `--batch-range`, a closed loop under vLLM, SGLang or TensorRT-LLM searches batches
/// up to the number of prompts its KV pool holds at once: a running request holds at least its
/// prompt, so the engines queue or preempt any client beyond that, which adds waiting and no
/// throughput, and a search past it only simulates ever longer queues (Qwen3-32B in BF16 on one
/// H100 holds a dozen 3,500-token prompts; at the default max-num-seqs of 1024 the search ran
/// out of its work budget).
fn kv_bound(ctx: &CandidateCtx, budget: u64, batch_min: u32, batch_max: Option<u32>) -> Option<u32> {
    let plan = ctx.plan;
    if plan.engine == EngineKind::Analytic || plan.search.batch_max.is_some() {
        return batch_max;
    }
    let seqs = plan.engine_limits(ctx.device).max_num_seqs.unwrap_or(batch_max.unwrap_or(batch_min) as u64);
    let per_request = plan.workload.input.mean_raw().max(1);
    let Some(tokens) = ctx.sim_setup().closed_loop_kv_tokens(budget, seqs, per_request) else { return batch_max };
    let held = u32::try_from(tokens.div_ceil(per_request)).unwrap_or(u32::MAX).max(batch_min);
    Some(batch_max.map_or(held, |m| m.min(held)))
}

/// Why the simulation of the search's smallest probe could not run (`: ` and the simulator's
/// own words, such as the KV pool the engine's memory setting leaves), or nothing when it ran:
/// "out of memory" alone does not say whether one request or the batch did not fit.
fn sim_reason(rows: &[Row]) -> String {
    let first = rows.iter().filter_map(|r| r.sim_error.as_ref().map(|e| (r.batch_size, e))).min_by_key(|&(b, _)| b);
    first.map_or_else(String::new, |(_, e)| format!(": {e}"))
}

/// Search one candidate: try budgets, run the batch search, return every probe.
///
/// With open-loop arrivals the offered load is fixed and latency falls as the running cap
/// grows (less queueing), so there is no monotone boundary to bisect: each layout is
/// simulated once at its running cap (`--max-num-seqs`, default 256).
pub fn search_candidate(engine: &dyn Engine, ctx: &CandidateCtx) -> (Vec<Row>, Option<String>) {
    let (budgets, explicit) = budgets(ctx.plan, ctx.device);
    let (batch_min, batch_max) = batch_bounds(ctx.plan, ctx.device, ctx.cand.parallel.pp.max(1));
    let batch_max = kv_bound(ctx, budgets[0], batch_min, batch_max);
    if explicit && budgets.len() > 1 {
        // A chunk-budget study: every budget is searched on its own.
        let mut rows = Vec::new();
        let mut failure = None;
        for &b in &budgets {
            let mut f = |batch: u32| engine.probe(ctx, batch, b);
            let res = batch::search(batch_min, batch_max, ctx.plan.search.strategy, &mut f);
            if failure.is_none() {
                failure = res
                    .first_stop
                    .map(|s| format!("{}: {} at batch size {} (budget {b} tokens)", ctx.label, s.describe(), ctx.plan.search.batch_min));
            }
            rows.extend(res.probes.into_iter().map(|p| p.row));
        }
        return (rows, failure);
    }
    if ctx.plan.engine != EngineKind::Analytic && ctx.plan.sim.arrival.is_open() {
        let cap = open_loop_max_num_seqs(ctx.plan, ctx.device);
        let (mut p, _) = engine.probe(ctx, cap, budgets[0]);
        let failure = p.stop.map(|s| format!("{}: {} with {} running sequences per replica", ctx.label, s.describe(), cap));
        if ctx.plan.capacity.goodput {
            goodput::fill_row(ctx, &mut p.row);
        }
        return (vec![p.row], failure);
    }
    let mut last_failure = None;
    for &budget in &budgets {
        let mut f = |b: u32| engine.probe(ctx, b, budget);
        let res = batch::search(batch_min, batch_max, ctx.plan.search.strategy, &mut f);
        let rows: Vec<Row> = res.probes.into_iter().map(|p| p.row).collect();
        if rows.iter().any(|r| r.feasible()) || explicit {
            let failure = res
                .first_stop
                .map(|s| format!("{}: {} at batch size {}{}", ctx.label, s.describe(), ctx.plan.search.batch_min, sim_reason(&rows)));
            return (rows, failure);
        }
        last_failure = res.first_stop.map(|s| {
            format!(
                "{}: {} at batch size {} (budget {budget} tokens){}",
                ctx.label,
                s.describe(),
                ctx.plan.search.batch_min,
                sim_reason(&rows)
            )
        });
        if res.first_stop != Some(StopReason::PrefillOom) {
            return (rows, last_failure);
        }
    }
    (Vec::new(), last_failure)
}

/// Called after each candidate with (candidates done, candidates in the run).
pub type ProgressFn<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// Progress of a run, shared by the worker threads, and the caller's request to stop it.
struct Progress<'a> {
    done: std::sync::atomic::AtomicU64,
    total: u64,
    report: ProgressFn<'a>,
    stop: &'a AtomicBool,
}

/// The stop flag of runs nobody can stop.
static NEVER_STOPPED: AtomicBool = AtomicBool::new(false);

impl Progress<'_> {
    fn tick(&self) {
        let d = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        (self.report)(d.min(self.total), self.total);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Candidates a plan will search (the progress total).
fn count_candidates(plan: &Plan) -> u64 {
    if plan.capacity.target.is_some() {
        return plan.devices.len() as u64;
    }
    let phases: Vec<(u32, Phase)> = match &plan.mode {
        Mode::Aggregation => vec![(plan.num_devices, Phase::Aggregated)],
        Mode::Disaggregation { prefill, decode } => {
            let mut v = Vec::new();
            if *prefill {
                v.push((plan.num_devices, Phase::Prefill));
            }
            if *decode {
                v.push((plan.num_devices, Phase::Decode));
            }
            v
        }
        Mode::PdRatio { prefill_devices, decode_devices, .. } => vec![(*prefill_devices, Phase::Prefill), (*decode_devices, Phase::Decode)],
    };
    let mut phases = phases;
    if compares_disagg(plan) {
        for s in frontier::instance_sizes(plan.num_devices) {
            phases.extend([(s, Phase::Prefill), (s, Phase::Decode)]);
        }
    }
    let per_device: u64 = phases.iter().map(|(n, ph)| owned(plan, candidates::enumerate(plan, *n, *ph).0).len() as u64).sum();
    per_device * plan.devices.len() as u64
}

/// One candidate's probes and why it produced no feasible row, by its index in its phase's
/// enumeration ([`candidates::enumerate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Searched {
    pub index: usize,
    pub rows: Vec<Row>,
    pub failure: Option<String>,
}

/// Where a phase's per-candidate results come from.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// The search itself (only the plan's slice under `--shard`).
    Search,
    /// Every candidate's results, read back from the shards by [`merge`].
    Merged(&'a merge::Pieces),
}

/// The candidates this run searches, with their indices: all of them, or under `--shard K/N`
/// those whose index is K − 1 modulo N.
fn owned(plan: &Plan, cands: Vec<Candidate>) -> Vec<(usize, Candidate)> {
    cands.into_iter().enumerate().filter(|(i, _)| plan.search.shard.as_ref().is_none_or(|s| s.owns(*i))).collect()
}

/// Search every candidate of one phase on one device, in parallel, results in candidate order.
pub fn search_phase(plan: &Plan, engine: &dyn Engine, device: &DeviceProfile, n: u32, phase: Phase) -> PhaseResult {
    let quiet = |_: u64, _: u64| {};
    let p = Progress { done: 0.into(), total: 1, report: &quiet, stop: &NEVER_STOPPED };
    search_phase_with(plan, engine, device, n, phase, &p, Source::Search)
}

fn search_phase_with(
    plan: &Plan,
    engine: &dyn Engine,
    device: &DeviceProfile,
    n: u32,
    phase: Phase,
    progress: &Progress,
    source: Source,
) -> PhaseResult {
    let (cands, skipped) = candidates::enumerate(plan, n, phase);
    let mut results: Vec<Searched> = match source {
        Source::Search => owned(plan, cands.clone())
            .par_iter()
            .map(|&(index, c)| {
                // Once stopped, the candidates not yet started are left out (the caller
                // discards the report).
                if progress.stopped() {
                    return Searched { index, rows: Vec::new(), failure: None };
                }
                let ctx = CandidateCtx::new(plan, device, c, phase);
                let (rows, failure) = search_candidate(engine, &ctx);
                progress.tick();
                Searched { index, rows, failure }
            })
            .collect(),
        Source::Merged(pieces) => pieces.take(&device.name, phase, n),
    };
    // A shard records which candidate each row came from, so that `merge` can rebuild the
    // whole phase in candidate order (the order the unsharded search writes its rows in).
    let shard_candidates = match plan.search.shard {
        Some(_) => results
            .iter()
            .map(|r| crate::outcome::ShardCandidate {
                index: r.index,
                rows: r.rows.len(),
                failure: r.failure.clone(),
                non_finite: merge::non_finite(&r.rows),
            })
            .collect(),
        None => Vec::new(),
    };
    // A shard sees only its slice of the phase: `merge` fills the frontier of the whole.
    if plan.search.shard.is_none() && !progress.stopped() {
        let mut layouts: Vec<(Candidate, &mut Vec<Row>)> = results.iter_mut().map(|r| (cands[r.index], &mut r.rows)).collect();
        spread::fill_frontier(plan, engine, device, phase, &mut layouts);
    }
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for r in results {
        rows.extend(r.rows);
        failures.extend(r.failure);
    }
    let (ttft, tpot) = phase_limits(plan, phase);
    let best = best_per_layout(&rows, ttft, tpot, ranking(plan));
    let sweeps = match &plan.search.max_batched_tokens {
        Some(b) if b.len() > 1 && phase == Phase::Aggregated && !best.is_empty() && !progress.stopped() => {
            let layouts: Vec<Row> = if plan.search.sweep_all_layouts { best.clone() } else { best[..1].to_vec() };
            sweep::study(plan, engine, device, &rows, &layouts)
        }
        _ => Vec::new(),
    };
    PhaseResult { phase, num_devices: n, rows, best, skipped, failures, sweeps, shard_candidates }
}

/// The limits that filter a phase: prefill ignores TPOT, decode ignores TTFT.
pub fn phase_limits(plan: &Plan, phase: Phase) -> (f64, f64) {
    match phase {
        Phase::Aggregated => (plan.slo.ttft_limit(), plan.slo.tpot_limit()),
        Phase::Prefill => (plan.slo.ttft_limit(), f64::INFINITY),
        Phase::Decode => (f64::INFINITY, plan.slo.tpot_limit()),
    }
}

/// The serving engine simulated on `device`, its budgets and running cap (none with the
/// analytic engine, which models no scheduler).
pub fn serving_summary(plan: &Plan, device: &DeviceProfile) -> Option<ServingSummary> {
    if plan.engine == EngineKind::Analytic {
        return None;
    }
    let limits = plan.engine_limits(device);
    let (max_batched_tokens, explicit) = budgets(plan, device);
    let budget_source = match (explicit, limits.default_budget) {
        (true, _) => "flag",
        (false, Some(_)) => "engine-default",
        (false, None) => "auto",
    };
    Some(ServingSummary {
        engine: limits.engine,
        policy: limits.engine.scheduler().describe().to_string(),
        max_batched_tokens,
        budget_source: budget_source.to_string(),
        max_num_seqs: limits.max_num_seqs.or((plan.sim.arrival.is_open()).then_some(OPEN_LOOP_MAX_NUM_SEQS as u64)),
        max_num_seqs_default: plan.sim.max_num_seqs.is_none(),
        calibration: {
            let mut eff = plan.effective(device);
            // The MoE communication pattern says nothing about a dense model.
            eff.moe_all_reduce &= plan.model.is_moe();
            eff.describe()
        },
    })
}

/// Whether the run compares aggregated serving with P/D on the same devices.
fn compares_disagg(plan: &Plan) -> bool {
    plan.search.compare_disagg && matches!(plan.mode, Mode::Aggregation)
}

/// Aggregation: the frontier of the aggregated probes and, with `--compare-disagg`, of the
/// P/D deployments searched on the same devices, and the comparison of the best of each.
fn deployment_plane(
    plan: &Plan,
    engine: &dyn Engine,
    device: &DeviceProfile,
    agg: &PhaseResult,
    progress: &Progress,
) -> (crate::outcome::Frontier, Option<crate::outcome::AggVsDisagg>) {
    let (ttft, tpot) = (plan.slo.ttft_limit(), plan.slo.tpot_limit());
    let mut points = frontier::aggregated_points(&agg.rows, ttft, tpot);
    // The aggregated choice is Overall Best's row, so the two never disagree (with a closed
    // loop it is also the most per device; an open loop ranks by requests within the SLO).
    let best_row = agg.best.first().and_then(|b| agg.rows.iter().position(|r| r == b));
    let best_agg = best_row.and_then(|i| points.iter().position(|p| p.row == Some(i)));
    if !compares_disagg(plan) {
        let mut f = frontier::frontier(plan, points);
        f.chosen = best_agg;
        return (f, None);
    }
    let n = plan.num_devices;
    let sizes = frontier::instance_sizes(n);
    let searched: Vec<(PhaseResult, PhaseResult)> = sizes
        .iter()
        .map(|&s| {
            (
                search_phase_with(plan, engine, device, s, Phase::Prefill, progress, Source::Search),
                search_phase_with(plan, engine, device, s, Phase::Decode, progress, Source::Search),
            )
        })
        .collect();
    let prefill: Vec<frontier::SizedRows> =
        searched.iter().map(|(p, _)| frontier::SizedRows { devices: p.num_devices, rows: &p.rows }).collect();
    let decode: Vec<frontier::SizedRows> =
        searched.iter().map(|(_, d)| frontier::SizedRows { devices: d.num_devices, rows: &d.rows }).collect();
    let pd = frontier::disaggregated_points(plan, device, &prefill, &decode, n);
    let agg_count = points.len();
    points.extend(pd.iter().map(|(p, _)| p.clone()));
    let mut f = frontier::frontier(plan, points);
    // The best P/D deployment within the SLO, by its planned figure.
    let only_pd: Vec<crate::outcome::FrontierPoint> = f
        .points
        .iter()
        .map(|p| crate::outcome::FrontierPoint {
            meets_slo: p.meets_slo && p.kind == crate::outcome::DeploymentKind::Disaggregated,
            ..p.clone()
        })
        .collect();
    let best_pd = frontier::choose(&only_pd);
    let cmp = frontier::compare(plan, device, best_agg.map(|i| &f.points[i]), best_pd.map(|i| (&f.points[i], &pd[i - agg_count].1)));
    f.chosen = match cmp.winner {
        Some(crate::outcome::DeploymentKind::Aggregated) => best_agg,
        Some(crate::outcome::DeploymentKind::Disaggregated) => best_pd,
        None => None,
    };
    (f, Some(cmp))
}

fn run_device(plan: &Plan, engine: &dyn Engine, device: &DeviceProfile, progress: &Progress, source: Source) -> DeviceResult {
    if plan.capacity.target.is_some() {
        return run_sizing(plan, device, progress);
    }
    let search_phase = |plan: &Plan, engine: &dyn Engine, device: &DeviceProfile, n: u32, phase: Phase| {
        search_phase_with(plan, engine, device, n, phase, progress, source)
    };
    let mut phases = Vec::new();
    let mut pd_ratio = None;
    match &plan.mode {
        Mode::Aggregation => phases.push(search_phase(plan, engine, device, plan.num_devices, Phase::Aggregated)),
        Mode::Disaggregation { prefill, decode } => {
            if *prefill {
                phases.push(search_phase(plan, engine, device, plan.num_devices, Phase::Prefill));
            }
            if *decode {
                phases.push(search_phase(plan, engine, device, plan.num_devices, Phase::Decode));
            }
        }
        Mode::PdRatio { prefill_devices, decode_devices, total_devices } => {
            let p = search_phase(plan, engine, device, *prefill_devices, Phase::Prefill);
            let d = search_phase(plan, engine, device, *decode_devices, Phase::Decode);
            let out = match &plan.workload.output {
                Lengths::Fixed(o) => *o,
                Lengths::Distribution(dist) => dist.effective_length(0.0),
            };
            let mut rows = pd::match_rows(&p.rows, &d.rows, out, plan.slo.ttft_limit(), plan.slo.tpot_limit());
            for r in rows.iter_mut() {
                r.p_transfer_ms = kv_transfer_ms(plan, device, r);
            }
            let split = match (total_devices, rows.first()) {
                (Some(n), Some(best)) => crate::analytic::pd::instance_split(best.pd_ratio, *n, *prefill_devices, *decode_devices),
                _ => None,
            };
            let verification = match (plan.engine, rows.first()) {
                (EngineKind::Analytic, _) | (_, None) => None,
                (_, Some(best)) => {
                    Some(pd::verify::verify(plan, device, best, split.map(|s| (s.prefill_instances, s.decode_instances)), *total_devices))
                }
            };
            let chosen = rows.first().and_then(|best| pd::choose_split(best, split, verification.as_ref()));
            pd_ratio = Some(PdRatioResult { rows, split, total_devices: *total_devices, verification, chosen });
            phases.push(p);
            phases.push(d);
        }
    }
    let (frontier, agg_vs_disagg) = match (&plan.mode, phases.first()) {
        (Mode::Aggregation, Some(agg)) => {
            let (f, c) = deployment_plane(plan, engine, device, agg, progress);
            (Some(f), c)
        }
        _ => (None, None),
    };
    let replica_plan = match (plan.replica_window_s, &plan.mode, phases.first().and_then(|p| p.best.first())) {
        (Some(window), Mode::Aggregation, Some(best)) if !progress.stopped() => Some(replicas::plan(plan, device, best, window)),
        _ => None,
    };
    let mut result = DeviceResult { pd_ratio, frontier, agg_vs_disagg, replica_plan, ..device_result(plan, device, phases) };
    cost::price_device(plan, &mut result);
    result
}

/// A sizing run on one device (`--target-request-rate`, `--target-concurrency`): its answer,
/// and as the aggregated phase the answer's check at the target (or, when nothing fits, why).
fn run_sizing(plan: &Plan, device: &DeviceProfile, progress: &Progress) -> DeviceResult {
    let out = sizing::size(plan, device);
    progress.tick();
    let phase = |phase: Phase, num_devices: u32, rows: Vec<Row>, failures: Vec<String>| PhaseResult {
        phase,
        num_devices,
        best: rows.clone(),
        rows,
        skipped: Vec::new(),
        failures,
        sweeps: Vec::new(),
        shard_candidates: Vec::new(),
    };
    // One phase per row of the answer (aggregated: its check; P/D: each role's row), or an
    // empty one that says why nothing fits.
    let phases: Vec<PhaseResult> = match (&out.sizing, out.rows.is_empty()) {
        (Some(s), false) if s.deployment == crate::outcome::DeploymentKind::Aggregated => {
            vec![phase(Phase::Aggregated, s.devices, out.rows, Vec::new())]
        }
        (Some(_), false) => out.rows.into_iter().map(|r| phase(r.phase, r.num_devices, vec![r], Vec::new())).collect(),
        _ => vec![phase(Phase::Aggregated, plan.num_devices, Vec::new(), out.unmet.into_iter().collect())],
    };
    let mut sizing = out.sizing;
    if let (Some(s), Some(cost)) = (sizing.as_mut(), &plan.device_hour_cost) {
        s.usd_per_hour = cost::hourly_usd(s.devices, &device.name, cost);
    }
    let mut result = DeviceResult { sizing, ..device_result(plan, device, phases) };
    cost::price_device(plan, &mut result);
    result
}

/// A device's result around its searched `phases`: the profile, the serving engine and the
/// cost model's notes (nothing of P/D, the frontier or sizing).
fn device_result(plan: &Plan, device: &DeviceProfile, phases: Vec<PhaseResult>) -> DeviceResult {
    // Cost-model approximations are the same for every layout; take them from one.
    let notes = candidates::enumerate(plan, plan.phase_devices().0, phases[0].phase)
        .0
        .first()
        .map(|c| CandidateCtx::new(plan, device, *c, phases[0].phase).cost.warnings)
        .unwrap_or_default();
    DeviceResult {
        device: device.name.clone(),
        serving: serving_summary(plan, device),
        profile: ProfileSummary {
            cube_tflops: device.display_cube_tflops(),
            vector_tflops: device.display_vector_tflops(),
            hbm_tib_s: device.display_hbm_tib_s(),
            memory_gib: device.memory_gib(),
            comm_grid: device.grid_sizes(),
            comm_gb_s: device.comm_gb_s(),
        },
        phases,
        pd_ratio: None,
        notes,
        frontier: None,
        agg_vs_disagg: None,
        replica_plan: None,
        sizing: None,
    }
}

/// Run the whole plan. Device profiles run one after another; candidates within a phase run
/// on `--jobs` threads.
pub fn run(plan: &Plan) -> Report {
    run_with_progress(plan, &|_, _| {})
}

/// [`run`], reporting progress after each candidate.
pub fn run_with_progress(plan: &Plan, report: ProgressFn) -> Report {
    assemble(plan, report, &NEVER_STOPPED, Source::Search)
}

/// [`run_with_progress`] that its caller can stop (an embedder on Ctrl-C): once `stop` is set,
/// the candidates not yet started are skipped, the batch searches in flight end at their next
/// probe ([`engine::Stoppable`]), and the chunk-budget sweeps are skipped. The report of a
/// stopped run is incomplete: the caller discards it.
pub fn run_stoppable(plan: &Plan, report: ProgressFn, stop: &AtomicBool) -> Report {
    assemble(plan, report, stop, Source::Search)
}

/// The report of `plan` from its candidates' results, searched or merged: everything after
/// the per-candidate search (ranking, frontier, summaries) is the same code either way.
fn assemble(plan: &Plan, report: ProgressFn, stop: &AtomicBool, source: Source) -> Report {
    let progress = Progress { done: 0.into(), total: count_candidates(plan).max(1), report, stop };
    let engine: Box<dyn Engine> = match plan.engine {
        EngineKind::Analytic => Box::new(AnalyticEngine),
        EngineKind::Sim => Box::new(SimEngine::default()),
        EngineKind::Compare => Box::new(CompareEngine::default()),
    };
    // A stop ends the batch searches in flight at their next probe, not at their candidates' end.
    let engine = engine::Stoppable { inner: engine.as_ref(), stop };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(plan.jobs).build();
    let devices: Vec<DeviceResult> = match pool {
        Ok(pool) => pool.install(|| plan.devices.iter().map(|d| run_device(plan, &engine, d, &progress, source)).collect()),
        Err(_) => plan.devices.iter().map(|d| run_device(plan, &engine, d, &progress, source)).collect(),
    };
    let found = warnings::after_search(plan, &devices);
    let cost_frontier = match plan.mode {
        Mode::Aggregation => cost::cost_frontier(plan, &devices),
        _ => None,
    };
    Report {
        schema_version: crate::outcome::SCHEMA_VERSION,
        tool: env!("CARGO_PKG_NAME").to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        engine: plan.engine.to_string(),
        inputs: inputs(plan),
        devices,
        warnings: plan.warnings.iter().cloned().chain(found).collect(),
        disclaimer: DISCLAIMER.to_string(),
        shard: plan.search.shard.as_ref().map(|s| crate::outcome::ShardInfo { index: s.index, count: s.count, args: s.args.clone() }),
        cost_frontier,
    }
}

fn inputs(plan: &Plan) -> Inputs {
    let (kind, phases, sizes, total, description) = match &plan.mode {
        Mode::Aggregation => (ModeKind::Aggregation, vec![Phase::Aggregated], None, None, "aggregation".to_string()),
        Mode::Disaggregation { prefill, decode } => {
            let phases: Vec<Phase> =
                [(*prefill, Phase::Prefill), (*decode, Phase::Decode)].into_iter().filter(|p| p.0).map(|p| p.1).collect();
            let words = match (prefill, decode) {
                (true, true) => "disaggregation (prefill and decode)",
                (true, false) => "disaggregation (prefill)",
                _ => "disaggregation (decode)",
            };
            (ModeKind::Disaggregation, phases, None, None, words.to_string())
        }
        Mode::PdRatio { prefill_devices, decode_devices, total_devices } => (
            ModeKind::PdRatio,
            vec![Phase::Prefill, Phase::Decode],
            Some((*prefill_devices, *decode_devices)),
            *total_devices,
            format!("P/D ratio ({prefill_devices} devices per prefill instance, {decode_devices} per decode instance)"),
        ),
    };
    let mode = ModeInput {
        kind,
        phases,
        prefill_devices_per_instance: sizes.map(|s| s.0),
        decode_devices_per_instance: sizes.map(|s| s.1),
        total_devices: total,
        description,
    };
    let trace = matches!(plan.sim.arrival, crate::workload::arrival::ArrivalProcess::Trace(_));
    let w = &plan.workload;
    let length = |l: &Lengths, distribution: bool, description: &str| LengthInput {
        source: if trace {
            LengthSource::Trace
        } else if distribution {
            LengthSource::Distribution
        } else {
            LengthSource::Fixed
        },
        mean_tokens: l.mean_raw(),
        description: description.to_string(),
    };
    // Outputs come from a distribution when the input distribution has `output_bins`.
    let output_from_bins = matches!(&w.input, Lengths::Distribution(d) if d.output_mean().is_some());
    let input_length = length(&w.input, w.input.is_variable(), &w.input_label);
    let output_length = length(&w.output, w.output.is_variable() || output_from_bins, &w.output_label);
    let s = &plan.search;
    Inputs {
        model: plan.model.id.clone(),
        model_source: match &plan.model_source {
            crate::model::ModelSource::Catalog => "built-in catalog".into(),
            crate::model::ModelSource::File(p) => p.display().to_string(),
        },
        devices: plan.devices.iter().map(|d| d.name.clone()).collect(),
        num_devices: plan.num_devices,
        mode,
        input_length,
        output_length,
        effective_input_length: plan.workload.input.effective(plan.workload.prefix_cache_hit_rate) + image_tokens(plan),
        quantize_linear_action: plan.quant.linear.to_string(),
        quantize_non_expert_linear_action: plan.quant.non_expert.map(|q| q.to_string()),
        attention_projections: plan.quant.attention.map(|q| q.to_string()),
        quantize_attention_action: plan.quant.kv.to_string(),
        compile: plan.compile.enabled,
        ttft_limit_ms: plan.slo.ttft_ms,
        tpot_limit_ms: plan.slo.tpot_ms,
        tpot_definition: plan.serving.tpot_definition.to_string(),
        prefix_cache_hit_rate: plan.workload.prefix_cache_hit_rate,
        mtp_tokens: s.mtp.clone(),
        mtp_acceptance_rates: plan.serving.mtp_acceptance_rates.clone(),
        max_batched_tokens: s.max_batched_tokens.clone(),
        batch_range: BatchRange { min: s.batch_min, max: s.batch_max },
        reserved_memory_gb: plan.serving.reserved_memory_gb,
        gpu_memory_utilization: plan.serving.gpu_memory_utilization,
        serving_cost_ms: plan.serving.serving_cost_ms,
        seed: plan.seed,
        device_hour_cost: cost::input(plan),
    }
}

/// Time to move one request's prompt KV from a prefill device to a decode device.
fn kv_transfer_ms(plan: &Plan, device: &DeviceProfile, row: &crate::outcome::PdRow) -> f64 {
    kv_transfer_ms_for(plan, device, row.p_layout)
}

/// [`kv_transfer_ms`] from a prefill instance of layout `p_layout`.
pub(crate) fn kv_transfer_ms_for(plan: &Plan, device: &DeviceProfile, p_layout: crate::cost::ParallelConfig) -> f64 {
    let ctx = CandidateCtx::new(plan, device, Candidate { parallel: p_layout, mtp: 0 }, Phase::Prefill);
    let tokens = plan.workload.input.mean_raw();
    device.kv_transfer.transfer_s(ctx.mem.kv_bytes_per_token * tokens as f64) * 1e3
}

/// Fail early when a phase has no runnable layout (a usage error).
/// When the simulator's work budget ran out during the search, the flags to change: the
/// report is then incomplete and must not be presented as a result.
pub fn work_budget_spent(report: &Report) -> Option<String> {
    let spent = report
        .devices
        .iter()
        .flat_map(|d| &d.phases)
        .flat_map(|p| &p.rows)
        .any(|r| matches!(r.sim_error, Some(crate::sim::SimError::WorkBudget { .. })));
    spent.then(|| {
        format!(
            "the search stopped: its simulations used the whole work budget ({} engine steps, about ten seconds). \
             Small token budgets (--max-batched-tokens, by default 4 × the input length) let few sequences run per step; \
             raise --max-batched-tokens, narrow --batch-range or --tp-sizes, lower --num-requests, or use --engine analytic",
            engine::sim::WORK_BUDGET
        )
    })
}

/// A sizing run that found no deployment on any device: why, for each device (the run ends
/// with this message, exit code 1).
pub fn sizing_unmet(plan: &Plan, report: &Report) -> Option<String> {
    plan.capacity.target?;
    let sizing = report.devices.iter().any(|d| d.sizing.is_some());
    let why: Vec<String> =
        report.devices.iter().filter(|d| d.sizing.is_none()).flat_map(|d| d.phases.iter().flat_map(|p| p.failures.clone())).collect();
    (!sizing && !why.is_empty()).then(|| why.join("; "))
}

pub fn check_candidates(plan: &Plan) -> Result<(), String> {
    candidates::check(plan)
}
