//! The step after the search for the outputs that look inside one run: each device's best row
//! simulated once more with recording on (`--chrome-trace-file`, `--requests-file`) and its
//! operators priced one by one (`--operator-trace-file`), handed to `report` as
//! [`Recordings`]. Nothing is recorded unless the plan asks for one of those files.
//!
//! The re-simulation is the search's own probe of that row (the candidate's [`SimSetup`], same
//! batch size, budget, seed and stream), so its figures are the report's. The timeline keeps at
//! most [`MAX_TIMELINE_STEPS`] steps (the first ones); every request is kept.
//!
//! [`SimSetup`]: super::engine::sim::SimSetup

use super::engine::analytic::Shapes;
use super::engine::CandidateCtx;
use crate::cost::{BatchShape, PhaseLoad};
use crate::outcome::recording::{
    InstanceRole, OperatorTrace, PassKind, PricedOperator, PricedPass, RecordingFailure, Recordings, RequestLife, StepSpan, Timeline,
    MAX_TIMELINE_STEPS,
};
use crate::outcome::{DeviceResult, Phase, PhaseResult, Report, Row};
use crate::plan::Plan;
use crate::sim::{simulate_detailed_staged, RequestState, Role, StepRecord};

/// What the plan's outputs need recorded of `report`'s best rows (nothing when it asks for
/// none of the files that look inside a run).
pub fn record(plan: &Plan, report: &Report) -> Recordings {
    let out = &plan.output;
    let timelines = if out.chrome_trace.is_some() || out.requests_file.is_some() { timelines(plan, report) } else { Ok(Vec::new()) };
    let operator_traces = match &out.operator_trace {
        Some(_) => report
            .devices
            .iter()
            .filter_map(|d| best_row_ctx(plan, d).map(|(phase, best, ctx)| operator_trace(&d.device, phase, best, &ctx)))
            .collect(),
        None => Vec::new(),
    };
    Recordings { timelines, operator_traces }
}

/// The best row of a device's first phase that has one (aggregated, or prefill under
/// disaggregation), its phase, and the candidate context the search priced it with.
fn best_row_ctx<'a>(plan: &'a Plan, d: &'a DeviceResult) -> Option<(&'a PhaseResult, &'a Row, CandidateCtx<'a>)> {
    let device = plan.devices.iter().find(|p| p.name == d.device)?;
    let phase = d.phases.iter().find(|p| !p.best.is_empty())?;
    let best = &phase.best[0];
    let cand = super::candidates::enumerate(plan, best.num_devices, phase.phase)
        .0
        .into_iter()
        .find(|c| c.parallel == best.layout && c.mtp == best.mtp)?;
    Some((phase, best, CandidateCtx::new(plan, device, cand, phase.phase)))
}

/// Each device's best row simulated with recording on; the first failure stops the lot.
fn timelines(plan: &Plan, report: &Report) -> Result<Vec<Timeline>, RecordingFailure> {
    let mut out = Vec::new();
    for d in &report.devices {
        let Some((_, best, ctx)) = best_row_ctx(plan, d) else { continue };
        let setup = ctx.sim_setup();
        let (cfg, factory) = setup.config(best.batch_size, best.max_batched_tokens);
        let mut steps = Vec::new();
        let mut steps_total = 0u64;
        let mut keep = |s: StepRecord| {
            steps_total += 1;
            if steps.len() < MAX_TIMELINE_STEPS {
                steps.push(step_span(&s));
            }
        };
        let (_, requests) = simulate_detailed_staged(&cfg, &setup.cost, setup.pipeline(), factory, &mut keep)
            .map_err(|e| RecordingFailure { device: d.device.clone(), message: e.to_string() })?;
        out.push(Timeline {
            device: d.device.clone(),
            row: best.clone(),
            role: match cfg.role {
                Role::Mixed => InstanceRole::Mixed,
                Role::Prefill => InstanceRole::Prefill,
                Role::Decode => InstanceRole::Decode,
            },
            instances: cfg.instances,
            kv_blocks: cfg.instance.kv_blocks,
            steps,
            steps_total,
            requests: requests.iter().map(request_life).collect(),
        });
    }
    Ok(out)
}

fn step_span(s: &StepRecord) -> StepSpan {
    StepSpan {
        instance: s.instance,
        start_ns: s.start,
        end_ns: s.end,
        prefill_seqs: s.prefill_seqs,
        prefill_tokens: s.prefill_tokens,
        decode_seqs: s.decode_seqs,
        decode_tokens: s.decode_tokens,
        kv_used: s.kv_used,
    }
}

fn request_life(r: &RequestState) -> RequestLife {
    RequestLife {
        instance: r.instance,
        arrival_ns: r.arrival,
        scheduled_ns: r.scheduled.or(r.decode_admitted),
        first_token_ns: r.first_token,
        finish_ns: r.finish,
        input_tokens: r.input,
        cached_tokens: r.cached,
        output_tokens: r.output,
        preemptions: r.preemptions,
    }
}

/// The best row's operators priced at the shapes its engine priced: one prefill forward of the
/// budget's uniform chunks (up to the batch), one decode step of the whole batch at the
/// mid-generation context.
fn operator_trace(device: &str, phase: &PhaseResult, best: &Row, ctx: &CandidateCtx) -> OperatorTrace {
    let s = Shapes::new(ctx);
    let per_replica = best.batch_size as u64;
    let mut passes = Vec::new();
    if phase.phase != Phase::Decode {
        let q = s.effective.min(best.max_batched_tokens.max(1));
        let n = (best.max_batched_tokens / q.max(1)).clamp(1, per_replica);
        let shape = BatchShape { prefill: PhaseLoad::uniform(n, q, q), sampled: n, ..Default::default() };
        passes.push(priced(ctx, &shape, PassKind::PrefillForward));
    }
    if phase.phase != Phase::Prefill {
        let shape = BatchShape {
            decode: PhaseLoad::uniform(per_replica, s.decode_query, s.decode_seq()),
            sampled: per_replica * s.decode_query,
            ..Default::default()
        };
        passes.push(priced(ctx, &shape, PassKind::DecodeStep));
    }
    OperatorTrace { device: device.to_string(), row: best.clone(), passes }
}

fn priced(ctx: &CandidateCtx, shape: &BatchShape, kind: PassKind) -> PricedPass {
    let operators = ctx
        .cost
        .op_times(shape)
        .into_iter()
        .map(|(name, count, t)| PricedOperator {
            name: name.to_string(),
            count,
            cube_s: t.cube,
            vector_s: t.vector,
            memory_s: t.memory,
            comm_s: t.comm,
            fixed_s: t.fixed,
            total_s: t.total(),
        })
        .collect();
    PricedPass { kind, operators }
}
