//! The parts of a probe's row both engines fill alike: the candidate's identity, a
//! variable-length batch's composition, and the figures the batch search extrapolates from.
//! Each engine then sets its own metrics (formulas or a simulation) on the row.

use super::CandidateCtx;
use crate::outcome::{CompositionRow, Row};
use crate::search::batch::ProbeStats;
use crate::workload::Composition;

/// A row with the candidate's identity filled in; metrics are set by the caller.
pub fn base_row(ctx: &CandidateCtx, batch: u32, budget: u64, effective: u64) -> Row {
    let p = &ctx.cand.parallel;
    let mut r = Row::probe_stub(batch);
    r.device = ctx.device.name.clone();
    r.phase = ctx.phase;
    r.parallel = ctx.label.clone();
    r.layout = *p;
    r.mtp = ctx.cand.mtp;
    // With pipeline stages the batch is one micro-batch: a replica keeps one per stage in
    // flight (the original tool's C = batch × DP × PP).
    r.concurrency = batch as u64 * p.dp as u64 * p.pp as u64;
    r.num_devices = p.num_devices;
    r.max_batched_tokens = budget;
    r.effective_input_length = effective;
    r
}

/// The composition of a variable-length batch (per DP replica), as the row reports it.
pub fn composition_rows(c: &Composition) -> Vec<CompositionRow> {
    c.rows
        .iter()
        .map(|(r, n)| CompositionRow {
            num_input_tokens: r.num_input_tokens,
            query_len: r.query_len,
            request_ratio: r.request_ratio,
            samples: *n,
        })
        .collect()
}

/// Stats for the extrapolating batch search: the candidate's memory picture (`reserved_gib`:
/// what the engine keeps back beside weights, KV and activations) and the row's (latency,
/// limit) pairs.
pub fn stats(ctx: &CandidateCtx, row: &Row, reserved_gib: f64, lat: [(f64, f64); 2]) -> ProbeStats {
    ProbeStats {
        total_gib: ctx.device.memory_gib(),
        weight_gib: row.memory.weight_gib,
        reserved_gib,
        avail_gib: row.memory.avail_gib,
        latencies: lat,
    }
}
