//! What a planned step takes on the clock. The cost model prices the device's work and the
//! host's apart ([`StepParts`]); how they combine is the serving engine's:
//!
//! - CUDA graphs ([`CudaGraphs`]): a batch the engine captured a graph for replays it, padded
//!   up to the captured size (and priced at it); any other step runs eager, and its host also
//!   launches every kernel ([`CudaGraphs::eager_launch_s`]). Launches are asynchronous: the
//!   device runs kernel k while the host launches kernel k + 1, so an eager step is bound by
//!   whichever of the two is slower, not by their sum.
//! - Overlapped scheduling ([`InstanceConfig::overlap_scheduling`]): the host prepares step
//!   n + 1 while the device runs step n, so a step takes the larger of its device time and its
//!   host time (launches included); otherwise the host prepares, then the device runs.
//!
//! Without graphs and without overlap a step takes device + host seconds, what the cost model's
//! `step_seconds` prices (the original tool's convention, kept bit for bit).
//!
//! A device with a measured power limit runs slower under sustained compute-bound load
//! ([`crate::hardware::PowerLimit`]): [`throttled_seconds`] takes the factor its device time
//! takes, which the simulation draws from each instance's recent load.

use super::config::{CudaGraphs, GraphUnit, InstanceConfig};
use crate::cost::{BatchShape, StepCostModel, StepParts};

/// Seconds a step of `shape` takes on an instance configured as `cfg`, priced by `cost`, at
/// the device's burst clocks.
#[inline]
pub fn wall_seconds(cfg: &InstanceConfig, cost: &dyn StepCostModel, shape: &BatchShape) -> f64 {
    throttled_seconds(cfg, cost, shape, |_| 1.0)
}

/// [`wall_seconds`] of a step repeated back to back: a power-limited device runs it at the
/// clocks its own load holds ([`crate::hardware::PowerLimit::steady_factor`]).
pub fn steady_seconds(cfg: &InstanceConfig, cost: &dyn StepCostModel, shape: &BatchShape) -> f64 {
    let limit = cost.power_limit();
    throttled_seconds(cfg, cost, shape, |p| limit.map_or(1.0, |l| l.steady_factor(p.device_s, p.matrix_s)))
}

/// [`wall_seconds`] with the device's part multiplied by `throttle` of the step's parts (as
/// the engine runs it, padding included): the factor its clocks take under the power limit.
#[inline]
pub fn throttled_seconds(
    cfg: &InstanceConfig,
    cost: &dyn StepCostModel,
    shape: &BatchShape,
    throttle: impl FnOnce(&StepParts) -> f64,
) -> f64 {
    let (mut parts, launch_s) = match &cfg.graphs {
        None => (cost.step_parts(shape), 0.0),
        Some(g) => graphed(g, cost, shape),
    };
    // × 1.0 leaves the float as it was: a device without a power limit prices the same bits.
    parts.device_s *= throttle(&parts);
    match (cfg.graphs.is_some(), cfg.overlap_scheduling) {
        (false, false) => parts.serial(),
        (false, true) => parts.overlapped(),
        (true, true) => parts.device_s.max(parts.host_s + launch_s) + parts.gap_s,
        (true, false) => parts.host_s + parts.gap_s + parts.device_s.max(launch_s),
    }
}

/// The step's parts as the engine runs it, and the host seconds its kernel launches take (0
/// when it replays a graph).
fn graphed(g: &CudaGraphs, cost: &dyn StepCostModel, shape: &BatchShape) -> (StepParts, f64) {
    let decode_only = shape.prefill.seqs == 0 && shape.image_patches == 0;
    if !(g.mixed_steps || decode_only) {
        return (cost.step_parts(shape), g.eager_launch_s);
    }
    let size = match g.unit {
        GraphUnit::Tokens => shape.tokens(),
        GraphUnit::Sequences => shape.decode.seqs,
    };
    match g.replayed_size(size) {
        None => (cost.step_parts(shape), g.eager_launch_s),
        Some(captured) if captured == size => (cost.step_parts(shape), 0.0),
        Some(captured) => {
            // The padding rows run through every layer's GEMMs; they attend to nothing and
            // sample nothing.
            let per = match g.unit {
                GraphUnit::Tokens => 1,
                GraphUnit::Sequences => shape.decode.tokens / shape.decode.seqs.max(1),
            };
            let mut padded = *shape;
            let pad = (captured - size) * per;
            if shape.decode.seqs > 0 {
                padded.decode.tokens += pad;
            } else {
                padded.prefill.tokens += pad;
            }
            (cost.step_parts(&padded), 0.0)
        }
    }
}
