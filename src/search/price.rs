//! One engine step of one layout priced, operator by operator (`throughput-optimizer price`):
//! the same candidate context, cost model and execution profile a planning run prices its
//! steps with, on a step shape the caller gives instead of a simulated one.

use super::engine::CandidateCtx;
use super::Candidate;
use crate::cost::{BatchShape, ParallelConfig, PhaseLoad};
use crate::outcome::price::{Clocks, PricedOperator, StepPrice, StepSpec};
use crate::outcome::Phase;
use crate::plan::Plan;
use crate::quant::NamedEnum;

/// The batch one rank runs in the step: every decode sequence queries one token at its
/// context; every prefill chunk queries its new tokens after its cached ones; each sequence of
/// the step samples one token (a prefill chunk is taken to end its prompt).
pub fn step_shape(step: &StepSpec) -> BatchShape {
    let mut shape = BatchShape::default();
    for &(seqs, context) in &step.decodes {
        shape.decode.merge(&PhaseLoad::uniform(seqs, 1, context));
        shape.sampled += seqs;
    }
    for p in &step.prefills {
        shape.prefill.merge(&PhaseLoad::uniform(p.prompts, p.tokens, p.cached + p.tokens));
        shape.sampled += p.prompts;
    }
    shape
}

/// The step of `par` on the plan's first device under its serving engine; with `sustained`,
/// repeated back to back at the clocks a power-limited device holds under it (every operator
/// slowed alike: the clock is the device's), else at burst clocks.
pub fn price(plan: &Plan, par: ParallelConfig, step: &StepSpec, sustained: bool) -> StepPrice {
    let device = &plan.devices[0];
    let ctx = CandidateCtx::new(plan, device, Candidate { parallel: par, mtp: 0 }, Phase::Aggregated);
    let eff = plan.effective(device);
    let shape = step_shape(step);
    let burst = crate::cost::StepCostModel::step_parts(&ctx.cost, &shape);
    let limit = ctx.cost.power.filter(|_| sustained);
    let factor = limit.map_or(1.0, |l| l.steady_factor(burst.device_s, burst.matrix_s));
    let mut ops = ctx.cost.priced_ops(&shape);
    for o in &mut ops {
        o.seconds *= factor;
    }
    let device_s: f64 = ops.iter().map(|o| o.seconds).sum();
    let parts = crate::cost::StepParts { device_s, ..burst };
    let step_s = if ctx.overlap_scheduling { parts.overlapped() } else { parts.serial() };
    let q = &plan.quant;
    let quantization = format!("linear {}; KV {}", q.describe_linears(), q.kv.name());
    StepPrice {
        model: plan.model.id.clone(),
        device: device.name.clone(),
        serving_engine: eff.engine.clone(),
        execution_profile: eff.describe(),
        kernel_tables: eff.kernels.as_ref().map(|k| k.0.provenance.to_string()),
        quantization,
        tp: par.tp,
        ep: par.ep,
        dp: par.dp,
        moe_tp: par.moe_tp,
        step: step.clone(),
        device_ms: ops.iter().map(|o| o.seconds * 1e3).sum(),
        host_ms: parts.host_total() * 1e3,
        host_gap_ms: parts.gap_s * 1e3,
        overlap_scheduling: ctx.overlap_scheduling,
        step_ms: step_s * 1e3,
        clocks: match (limit, sustained) {
            (Some(_), _) => Clocks::Sustained {
                tensor_core_load: crate::hardware::power::tensor_core_load(burst.device_s, burst.matrix_s),
                slowdown: factor,
            },
            (None, true) => Clocks::Unlimited,
            (None, false) => Clocks::Burst,
        },
        operators: merged(ops.into_iter().map(|o| PricedOperator {
            name: o.name.to_string(),
            kind: o.kind,
            count: o.count,
            ms: o.seconds * 1e3,
            source: o.source,
        })),
        warnings: ctx.cost.warnings.clone(),
    }
}

/// One row per operator name, kind and source, in the order of first appearance, its calls and
/// time summed: layer groups of one kind that the model lists apart (DeepSeek's dense first
/// layers, a hybrid model's interleaved blocks) read as one operator.
fn merged(ops: impl Iterator<Item = PricedOperator>) -> Vec<PricedOperator> {
    let mut rows: Vec<PricedOperator> = Vec::new();
    for o in ops {
        match rows.iter_mut().find(|r| r.name == o.name && r.kind == o.kind && r.source == o.source) {
            Some(r) => {
                r.count += o.count;
                r.ms += o.ms;
            }
            None => rows.push(o),
        }
    }
    rows
}
