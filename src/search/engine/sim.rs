//! The simulator as a search [`Engine`]: a candidate at a batch size becomes a simulation of
//! its serving instances; the row carries the simulated latencies and throughput.
//!
//! Closed-loop and burst runs simulate one representative DP replica with the batch size as
//! its concurrency: replicas share nothing, so the others are statistically identical copies
//! and throughput scales by DP. Open-loop arrivals are routed over every replica (least loaded
//! first), which is where replicas stop being identical. Aggregation runs mixed instances;
//! the disaggregated phases run prefill-only or decode-only instances.

use super::{CandidateCtx, Engine};
use crate::cost::memory::{gib, MemoryUse};
use crate::cost::{BatchShape, PhaseLoad, RooflineCost};
use crate::outcome::Phase;
use crate::outcome::{Row, SimSummary, StopReason};
use crate::plan::{SpeculativeMethod, TpotDefinition};
use crate::search::batch::{Probe, ProbeStats};
use crate::sim::{simulate, DecodeMode, InstanceConfig, Role, RunParams, SimConfig, SimError, SimReport};
use crate::workload::arrival::{ArrivalProcess, RequestFactory};

/// Simulates every probe, within one search's work budget.
#[derive(Debug, Default)]
pub struct SimEngine {
    /// Work spent so far by this search's simulations (see [`WORK_BUDGET`]).
    work: std::sync::atomic::AtomicU64,
}

/// Steps after which one simulation is abandoned (a typed error, not a hang). A search probe
/// is held to what is left of [`WORK_BUDGET`] as well; a P/D verification of thousands of
/// requests over many instances needs the full bound.
pub const MAX_STEPS: u64 = 20_000_000;

/// Work one search may spend simulating, in step units: a step without speculative decoding
/// is one unit whatever its batch (lockstep decodes are O(1)); with MTP or draft blocks every
/// sequence is walked, about a fiftieth of a step each. The event loop runs about a million
/// steps a second on one core, so this is on the order of ten seconds; the headline search
/// uses about 2 % of it. Once spent, every further probe is refused with
/// [`SimError::WorkBudget`] and the run ends with an error naming the flags to change.
pub const WORK_BUDGET: u64 = 10_000_000;

impl SimEngine {
    /// Charge a finished simulation to the budget.
    fn charge(&self, steps: u64, mean_batch: f64, per_sequence: bool) {
        let walk = if per_sequence { steps as f64 * mean_batch / 50.0 } else { 0.0 };
        let work = steps.saturating_add(walk as u64);
        self.work.fetch_add(work, std::sync::atomic::Ordering::Relaxed);
    }

    /// Step units left in this search's budget.
    fn remaining(&self) -> u64 {
        WORK_BUDGET.saturating_sub(self.work.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn exhausted(&self) -> bool {
        self.work.load(std::sync::atomic::Ordering::Relaxed) >= WORK_BUDGET
    }
}
/// Requests an open loop of a generated process simulates without `--num-requests`.
pub const DEFAULT_OPEN_REQUESTS: u64 = 1000;

/// The decode mode a candidate implies.
pub fn decode_mode(ctx: &CandidateCtx) -> DecodeMode {
    let plan = ctx.plan;
    match &plan.serving.speculative {
        Some(s) => {
            let drafts = match s.method {
                SpeculativeMethod::Dflash => s.block as u64 - 1,
                SpeculativeMethod::Dspark => s.block as u64,
            };
            DecodeMode::Block { block: s.block as u64, drafts, mean_accepted: s.acceptance.min(drafts as f64) }
        }
        None => DecodeMode::mtp(ctx.cand.mtp, &plan.serving.mtp_acceptance_rates),
    }
}

/// KV blocks one instance of the candidate holds once weights, the reserve and the largest
/// step's activations are set aside.
pub fn kv_blocks(ctx: &CandidateCtx, budget: u64, max_seqs: u64) -> u64 {
    let slack = slack(ctx);
    let peak_tokens = (budget as f64 * (1.0 + slack)).floor() as u64;
    let peak = BatchShape { prefill: PhaseLoad::uniform(1, peak_tokens, peak_tokens), sampled: max_seqs, ..Default::default() };
    let bytes = ctx.mem.kv_budget_bytes(&peak, ctx.reserved_bytes());
    ctx.mem.kv_capacity_blocks(bytes, ctx.plan.serving.kv_block_size as u64, max_seqs)
}

/// The share by which the candidate's scheduler lets chunks overflow the budget (none but
/// decode-first's).
fn slack(ctx: &CandidateCtx) -> f64 {
    if ctx.plan.serving_engine(ctx.device).scheduler().uses_slack() {
        ctx.plan.serving.token_budget_slack
    } else {
        0.0
    }
}

/// How one instance of the candidate schedules and what it holds.
pub fn instance_config(ctx: &CandidateCtx, budget: u64, max_num_seqs: u64) -> InstanceConfig {
    let plan = ctx.plan;
    let (images_per_request, patches, tokens) = match (&plan.workload.images, &plan.model.vision) {
        (Some(im), Some(v)) => {
            let (p, t) = v.image_tokens(im.height, im.width);
            (im.per_request as u64, p, t * im.per_request as u64)
        }
        _ => (0, 0, 0),
    };
    InstanceConfig {
        scheduler: plan.serving_engine(ctx.device).scheduler(),
        budget,
        slack: slack(ctx),
        max_num_seqs,
        chunked_prefill: plan.sim.chunked_prefill,
        block_size: plan.serving.kv_block_size as u64,
        kv_blocks: kv_blocks(ctx, budget, max_num_seqs),
        decode: if ctx.phase == Phase::Prefill { DecodeMode::Plain } else { decode_mode(ctx) },
        prefix_hit_rate: plan.workload.prefix_cache_hit_rate,
        images_per_request,
        image_patches_per_image: patches,
        image_patches: patches * images_per_request,
        image_tokens: tokens,
        admissions_per_step: ctx.admissions_per_step.map(u64::from),
        overlap_scheduling: ctx.overlap_scheduling && !trtllm_context_server(ctx),
    }
}

/// A TensorRT-LLM prefill instance of a disaggregated plan: context servers do not support the
/// overlap scheduler, so they run without it (and `--emit trtllm` writes
/// `disable_overlap_scheduler: true` for them).
fn trtllm_context_server(ctx: &CandidateCtx) -> bool {
    ctx.phase == Phase::Prefill && ctx.plan.serving_engine(ctx.device) == crate::plan::ServingEngine::Trtllm
}

/// The step cost the simulator runs on: the candidate's roofline model plus `--serving-cost`
/// on every forward of a disaggregated instance (the formulas add it per forward too).
pub fn step_cost(ctx: &CandidateCtx) -> RooflineCost {
    let mut cost = ctx.cost.clone();
    if ctx.phase != Phase::Aggregated {
        cost.host_s += ctx.plan.serving.serving_cost_ms * 1e-3;
    }
    cost
}

/// The request stream of a plan.
pub fn factory(ctx: &CandidateCtx, arrival: ArrivalProcess) -> RequestFactory {
    let plan = ctx.plan;
    RequestFactory::new(plan.workload.input.clone(), plan.workload.output.clone(), plan.sim.shared_prefix, arrival, plan.seed)
        .with_range_ratio(plan.workload.range_ratio)
}

/// Bins of a variable-length input, for per-bin latencies.
pub fn input_bins(plan: &crate::plan::Plan) -> Vec<(u64, u64)> {
    match &plan.workload.input {
        crate::workload::Lengths::Distribution(d) => d.bins.iter().map(|b| (b.min_tokens, b.max_tokens)).collect(),
        _ => Vec::new(),
    }
}

/// Running sequences an instance's memory is sized for (activations and per-sequence state
/// beside the KV pool), in one place for the pool and the reported memory: decode-first, as the
/// original tool does, reserves for `max_num_seqs`; vLLM, SGLang and TensorRT-LLM reserve
/// nothing up front, so a closed loop holds at most its concurrency.
fn kv_sized_seqs(ic: &InstanceConfig, open: bool, concurrency: u64) -> u64 {
    if open || ic.scheduler == crate::sim::scheduler::SchedulerKind::DecodeFirst {
        ic.max_num_seqs
    } else {
        ic.max_num_seqs.min(concurrency)
    }
}

/// The simulation configuration of one probe.
pub fn sim_config(ctx: &CandidateCtx, batch: u32, budget: u64) -> (SimConfig, RequestFactory) {
    let plan = ctx.plan;
    let so = &plan.sim;
    let open = so.arrival.is_open();
    let limits = plan.engine_limits(ctx.device);
    let max_num_seqs = limits.max_num_seqs.unwrap_or(batch as u64);
    let (ttft_limit, tpot_limit) = crate::search::phase_limits(plan, ctx.phase);
    let mut instance = instance_config(ctx, budget, max_num_seqs);
    let seqs = kv_sized_seqs(&instance, open, batch as u64);
    if seqs != max_num_seqs {
        instance.kv_blocks = kv_blocks(ctx, budget, seqs);
    }
    let factory = factory(ctx, so.arrival.clone());
    let cfg = SimConfig {
        instance,
        instances: if open { ctx.cand.parallel.dp } else { 1 },
        role: match ctx.phase {
            Phase::Aggregated => Role::Mixed,
            Phase::Prefill => Role::Prefill,
            Phase::Decode => Role::Decode,
        },
        run: RunParams {
            measure: so.measure,
            concurrency: batch as u64,
            // A trace runs whole unless --num-requests cuts it (the CLI warns then).
            num_requests: so.num_requests.or(factory.trace_len()).unwrap_or(DEFAULT_OPEN_REQUESTS),
            // A closed loop with --num-requests runs as a benchmark client does; the search
            // simulates one replica, which receives its share of the requests.
            // In P/D ratio planning --num-requests sizes the verification runs; the phase
            // searches stay steady-state closed loops.
            closed_requests: match (&so.arrival, so.num_requests, &plan.mode) {
                (_, _, crate::plan::Mode::PdRatio { .. }) => None,
                (ArrivalProcess::Closed, Some(n), _) => Some(n.div_ceil(ctx.cand.parallel.dp as u64).max(1)),
                _ => None,
            },
            max_concurrency: so.max_concurrency,
            min_measured: so.slo_percentile.min_sample(),
            ttft_limit_ms: ttft_limit,
            tpot_limit_ms: tpot_limit,
            seed: plan.seed,
            max_steps: MAX_STEPS,
            bins: input_bins(ctx.plan),
            frontend_ns: (ctx.request_overhead_s * 1e9).round() as u64,
        },
    };
    (cfg, factory)
}

/// Latency figures of a simulated row under the plan's definition and percentile.
pub fn fill_row(ctx: &CandidateCtx, row: &mut Row, rep: &SimReport, replicas: f64) {
    let plan = ctx.plan;
    let pct = plan.sim.slo_percentile;
    let l = &rep.latency;
    let tpot = match plan.serving.tpot_definition {
        TpotDefinition::InterToken => l.tpot_inter_token.pick(pct),
        TpotDefinition::Amortized => l.tpot_amortized.pick(pct),
    };
    if ctx.phase != Phase::Decode {
        row.ttft_ms = Some(l.ttft.pick(pct));
    }
    if ctx.phase != Phase::Prefill {
        row.tpot_inter_token_ms = Some(l.tpot_inter_token.pick(pct));
        row.tpot_amortized_ms = Some(l.tpot_amortized.pick(pct));
        row.tpot_ms = Some(tpot);
    }
    if ctx.phase == Phase::Prefill {
        // Prefill instances are rated by the prompt tokens they get through.
        row.throughput = rep.input_throughput * replicas;
        row.breakdown_prefill = Some(rep.breakdown);
    } else {
        row.throughput = rep.output_throughput * replicas;
        row.breakdown_decode = Some(rep.breakdown);
    }
    row.qps = Some(rep.request_rate * replicas);
    row.sim = Some(SimSummary::from_report(rep));
}

impl Engine for SimEngine {
    fn probe(&self, ctx: &CandidateCtx, batch: u32, budget: u64) -> (Probe, ProbeStats) {
        let plan = ctx.plan;
        let (mut cfg, factory) = sim_config(ctx, batch, budget);
        // One probe may not overrun what is left of the search's budget.
        cfg.run.max_steps = cfg.run.max_steps.min(self.remaining().max(1));
        let replicas = if plan.sim.arrival.is_open() { 1.0 } else { ctx.cand.parallel.dp as f64 };
        let eff = plan.workload.input.effective(plan.workload.prefix_cache_hit_rate);
        let mut row = super::analytic::base_row(ctx, batch, budget, eff);
        if let crate::workload::Lengths::Distribution(d) = &plan.workload.input {
            row.composition = super::analytic::composition_rows(&d.compose(batch as u64, plan.workload.prefix_cache_hit_rate));
        }
        row.prefill_num_chunks = if ctx.phase == Phase::Decode { 0 } else { eff.div_ceil(budget.max(1)) };
        row.serving_engine = Some(plan.serving_engine(ctx.device));
        row.max_num_seqs = Some(cfg.instance.max_num_seqs);
        let (ttft_limit, tpot_limit) = crate::search::phase_limits(plan, ctx.phase);
        let result = match kv_demand_exceeds(ctx, &cfg) {
            Some(e) => Err(e),
            None if self.exhausted() => Err(SimError::WorkBudget { budget: WORK_BUDGET }),
            None => simulate(&cfg, &step_cost(ctx), factory),
        };
        match &result {
            Ok(rep) => self.charge(rep.steps, rep.mean_batch_size, cfg.instance.decode != DecodeMode::Plain),
            Err(SimError::StepLimit { steps }) => self.charge(*steps, cfg.run.concurrency as f64, cfg.instance.decode != DecodeMode::Plain),
            Err(_) => {}
        }
        // A probe stopped by what was left of the search's budget (below MAX_STEPS, so in a
        // search this is every step-limited probe) spent the budget: how much was left depends
        // on the other threads' progress, so the run ends with the budget error rather than
        // report that probe, and output stays the same whatever --jobs.
        let result = match result {
            Err(SimError::StepLimit { .. }) if cfg.run.max_steps < MAX_STEPS => Err(SimError::WorkBudget { budget: WORK_BUDGET }),
            other => other,
        };
        let stop = match result {
            Err(e) => {
                row.memory = MemoryUse {
                    weight_gib: gib(ctx.mem.weight_bytes),
                    kv_cache_gib: 0.0,
                    activation_gib: 0.0,
                    avail_gib: gib(ctx.mem.device_bytes - ctx.mem.weight_bytes - ctx.reserved_bytes()),
                };
                row.sim_error = Some(e.clone());
                Some(match e {
                    SimError::PromptTooLong { .. } => StopReason::PrefillOom,
                    SimError::StepLimit { .. } | SimError::StepTooSlow { .. } | SimError::WorkBudget { .. } => StopReason::StepLimit,
                    _ => StopReason::MemoryOom,
                })
            }
            Ok(rep) => {
                fill_row(ctx, &mut row, &rep, replicas);
                let ic = &cfg.instance;
                let kv_bytes = rep.kv_peak_utilization * ic.kv_blocks as f64 * ic.block_size as f64 * ctx.mem.kv_bytes_per_token;
                let peak_tokens = (budget as f64 * (1.0 + ic.slack)) as u64;
                let seqs = kv_sized_seqs(ic, plan.sim.arrival.is_open(), cfg.run.concurrency);
                let peak = BatchShape { prefill: PhaseLoad::uniform(1, peak_tokens, budget), sampled: seqs, ..Default::default() };
                row.memory = ctx.mem.usage(&peak, kv_bytes, ctx.reserved_bytes());
                let (ttft, tpot) = (row.ttft_ms.unwrap_or(0.0), row.tpot_ms.unwrap_or(0.0));
                if tpot > tpot_limit {
                    Some(StopReason::TpotLimit)
                } else if ttft > ttft_limit {
                    Some(StopReason::TtftLimit)
                } else {
                    None
                }
            }
        };
        row.throughput_per_device = row.throughput / ctx.cand.parallel.num_devices as f64;
        row.stop_reason = stop;
        let st = super::analytic::stats(ctx, &row, [(row.tpot_ms.unwrap_or(0.0), tpot_limit), (row.ttft_ms.unwrap_or(0.0), ttft_limit)]);
        (Probe { row, stop }, st)
    }
}

/// A closed-loop batch whose steady-state KV demand exceeds the pool would only thrash
/// (preempt and recompute without end): it is out of memory, as the analytic engine's decode
/// check at the mid-generation context says. Open loops are left to admission control. A
/// shared prefix (`--prefix-groups/--prefix-length`) is held once per group, as the pool holds
/// it: its full blocks count once for each group in use, not once per request (decode-only
/// instances receive whole contexts and share nothing).
fn kv_demand_exceeds(ctx: &CandidateCtx, cfg: &SimConfig) -> Option<SimError> {
    if ctx.plan.sim.arrival.is_open() {
        return None;
    }
    let ic = &cfg.instance;
    let w = &ctx.plan.workload;
    let input = w.input.mean_raw() + ic.image_tokens;
    let output = match &w.output {
        crate::workload::Lengths::Fixed(o) => *o,
        crate::workload::Lengths::Distribution(d) => d.effective_length(0.0),
    };
    let per_request = match ctx.phase {
        Phase::Prefill => input,
        _ => input + output / 2 + ic.decode.query_tokens(),
    };
    let running = cfg.run.concurrency.min(ic.running_cap());
    let (shared_blocks, groups) = match ctx.plan.sim.shared_prefix {
        Some(p) if p.groups > 0 && ctx.phase != Phase::Decode => (p.length.min(input) / ic.block_size, p.groups as u64),
        _ => (0, 0),
    };
    let private = (per_request - shared_blocks * ic.block_size).div_ceil(ic.block_size);
    let needed = running * private + running.min(groups) * shared_blocks;
    (needed > ic.kv_blocks).then_some(SimError::KvOversubscribed { needed, capacity: ic.kv_blocks, batch: cfg.run.concurrency })
}
