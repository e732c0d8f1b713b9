//! The simulator as a search [`Engine`]: a candidate at a batch size becomes a simulation of
//! its serving instances; the row carries the simulated latencies and throughput. What the
//! plan decides of a candidate's simulations is configured once ([`SimSetup`], `setup`); a
//! probe fills in its batch size and budget, simulates, and reads the result into its row.
//!
//! Closed-loop and burst runs simulate one representative DP replica with the batch size as
//! its concurrency: replicas share nothing, so the others are statistically identical copies
//! and throughput scales by DP. Open-loop arrivals are routed over every replica (least loaded
//! first), which is where replicas stop being identical. Aggregation runs mixed instances;
//! the disaggregated phases run prefill-only or decode-only instances.

mod memory;
mod setup;

pub use setup::{input_bins, request_factory, SimSetup};

use super::row::{base_row, composition_rows, stats};
use super::{CandidateCtx, Engine};
use crate::outcome::Phase;
use crate::outcome::{Row, SimSummary, StopReason};
use crate::plan::TpotDefinition;
use crate::search::batch::{Probe, ProbeStats};
use crate::sim::{simulate_staged, DecodeMode, SimError, SimReport};

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
        let setup = ctx.sim_setup();
        let (mut cfg, factory) = setup.config(batch, budget);
        // One probe may not overrun what is left of the search's budget.
        cfg.run.max_steps = cfg.run.max_steps.min(self.remaining().max(1));
        let mut row = probe_row(ctx, setup, batch, budget);
        row.max_num_seqs = Some(cfg.instance.max_num_seqs * setup.lanes());
        let (ttft_limit, tpot_limit) = (setup.ttft_limit_ms, setup.tpot_limit_ms);
        let result = match setup.kv_oversubscribed(&cfg) {
            Some(e) => Err(e),
            None if self.exhausted() => Err(SimError::WorkBudget { budget: WORK_BUDGET }),
            None => simulate_staged(&cfg, &setup.cost, setup.pipeline(), factory),
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
                row.memory = setup.idle_memory;
                row.sim_error = Some(e.clone());
                Some(match e {
                    SimError::PromptTooLong { .. } => StopReason::PrefillOom,
                    SimError::StepLimit { .. } | SimError::StepTooSlow { .. } | SimError::WorkBudget { .. } => StopReason::StepLimit,
                    _ => StopReason::MemoryOom,
                })
            }
            Ok(rep) => {
                fill_row(ctx, &mut row, &rep, setup.replicas);
                row.memory = setup.memory_use(&cfg, rep.kv_peak_utilization);
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
        let lat = [(row.tpot_ms.unwrap_or(0.0), tpot_limit), (row.ttft_ms.unwrap_or(0.0), ttft_limit)];
        let st = stats(ctx, &row, setup.reserved_gib(budget), lat);
        (Probe { row, stop }, st)
    }
}

/// A probe's row before its simulation: the candidate, the batch's composition, the prompt's
/// chunks under the budget and the serving engine.
fn probe_row(ctx: &CandidateCtx, setup: &SimSetup, batch: u32, budget: u64) -> Row {
    let w = &ctx.plan.workload;
    let eff = setup.effective_input;
    let mut row = base_row(ctx, batch, budget, eff);
    if let crate::workload::Lengths::Distribution(d) = &w.input {
        row.composition = composition_rows(&d.compose(batch as u64, w.prefix_cache_hit_rate));
    }
    row.prefill_num_chunks = if ctx.phase == Phase::Decode { 0 } else { eff.div_ceil(budget.max(1)) };
    row.serving_engine = Some(setup.serving_engine);
    row
}
