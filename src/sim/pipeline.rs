//! A pipelined replica's stages on the clock. The replica runs one micro-batch lane per stage
//! (each lane an [`Instance`](super::Instance) that plans its next batch when its last one
//! is done, so a sequence is in at most one batch in flight: its next token depends on the
//! previous one); the lanes share the stages. A batch planned at `now` enters the first
//! stage when that stage is free, runs its share of the layers there, is sent to the next
//! stage (the activation send) and waits there until that stage is free, and so on: stages
//! serve batches in the order they were planned, as each stage's worker runs them in order.
//! With S lanes busy every stage works on a different batch (the steady interval per lane is
//! S stage-times when the stages are alike); with fewer ready, stages idle (the bubbles).
//!
//! Modelled on vLLM V1 (0.9–0.11: `EngineCore.step_with_batch_queue`, a batch queue of
//! `max_concurrent_batches` = pipeline size) and SGLang (0.4.9–0.5: `event_loop_pp`, one
//! running micro-batch per stage). Both share one KV pool and waiting queue among the
//! micro-batches; here each lane holds its share of the pool and its own queue (requests are
//! routed to the least-loaded lane), SGLang's micro-batch running lists made whole.

use super::config::{InstanceConfig, Pipeline};
use super::error::SimError;
use super::queue::Nanos;
use super::step_time::steady_seconds;
use crate::cost::BatchShape;

/// When each stage of one replica is next free.
#[derive(Debug, Clone, Default)]
pub struct Stages {
    free: Vec<Nanos>,
}

impl Stages {
    pub fn new(stages: usize) -> Self {
        Stages { free: vec![0; stages] }
    }

    /// Run a batch planned at `now` whose stages take `stage_ns` with `send_ns` between
    /// consecutive stages; returns when it leaves the last stage, and books the stages.
    pub fn run(&mut self, now: Nanos, stage_ns: &[Nanos], send_ns: Nanos) -> Nanos {
        let mut t = now;
        for (k, (&ns, free)) in stage_ns.iter().zip(self.free.iter_mut()).enumerate() {
            if k > 0 {
                t += send_ns;
            }
            t = t.max(*free) + ns;
            *free = t;
        }
        t
    }
}

/// Each stage's time for a batch of `shape`, ns (at least 1), and the send between stages. A
/// power-limited stage runs at the clocks the batch holds repeated back to back
/// ([`steady_seconds`]): a pipeline at load keeps every stage busy.
pub fn stage_times(cfg: &InstanceConfig, p: &Pipeline, shape: &BatchShape, out: &mut Vec<Nanos>) -> Result<Nanos, SimError> {
    out.clear();
    for cost in &p.stages {
        out.push(to_ns(steady_seconds(cfg, *cost, shape))?);
    }
    let send = p.send.seconds(shape.tokens());
    // A send may take no time (one device, or a test's zero send); a stage always takes some.
    Ok(if send > 0.0 { to_ns(send)? } else { 0 })
}

/// A step's seconds on the clock, refused where not physical ([`super::MAX_STEP_SECONDS`]).
fn to_ns(secs: f64) -> Result<Nanos, SimError> {
    if !(secs.is_finite() && secs <= super::MAX_STEP_SECONDS) {
        return Err(SimError::StepTooSlow { seconds: secs });
    }
    Ok(((secs * 1e9).round() as u64).max(1))
}
