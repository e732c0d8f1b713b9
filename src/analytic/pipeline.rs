//! The pipeline formula. The original tool sizes a pipelined deployment's concurrency as
//! batch × DP × PP (one batch per stage in flight) but has no pipeline timing of its own, so
//! this is the plain pipeline's: a replica of S stages keeps S micro-batches in flight, every
//! micro-batch passes every stage in turn (stage k takes t_k, each hand-over to the next stage
//! d), and each stage serves each micro-batch once per cycle. A micro-batch's step therefore
//! takes
//!
//! T = max(Σ_k t_k + (S − 1)·d, S · max_k t_k)
//!
//! the first term a lone micro-batch's latency through the pipeline, the second the
//! bottleneck stage's share of S micro-batches (its bubbles when the stages are uneven). T is
//! the formulas' forward: the interval between a micro-batch's tokens, during which each of
//! the S micro-batches emits its own. With one stage T = t, the formulas unchanged.

/// A micro-batch's step through a pipeline of stages taking `stage_ms`, with `send_ms` per
/// hand-over between consecutive stages (see the module comment).
pub fn cycle_ms(stage_ms: &[f64], send_ms: f64) -> f64 {
    let s = stage_ms.len() as f64;
    let through = stage_ms.iter().sum::<f64>() + (s - 1.0).max(0.0) * send_ms;
    let bottleneck = s * stage_ms.iter().copied().fold(0.0, f64::max);
    through.max(bottleneck)
}

#[cfg(test)]
mod tests {
    use super::cycle_ms;

    #[test]
    fn a_pipeline_cycles_at_its_bottleneck_or_its_latency() {
        // Four stages of 2 ms, no send: 8 ms either way. Mutation: drop the S × max term and
        // the uneven case below reads 9 instead of 12.
        assert_eq!(cycle_ms(&[2.0; 4], 0.0), 8.0);
        // A 3 ms stage among 2 ms ones: the bottleneck serves four micro-batches, 12 ms.
        assert_eq!(cycle_ms(&[2.0, 3.0, 2.0, 2.0], 0.0), 12.0);
        // Sends of 1 ms between equal stages: the lone batch's 8 + 3 ms exceeds 4 × 2.
        // Mutation: count S sends instead of S − 1 and this reads 12.
        assert_eq!(cycle_ms(&[2.0; 4], 1.0), 11.0);
        // One stage: the step itself.
        assert_eq!(cycle_ms(&[5.0], 7.0), 5.0);
    }
}
