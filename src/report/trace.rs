//! `--operator-trace-file`: the per-operator breakdown of the best configuration (one prefill
//! forward and one decode step at the shapes the engine priced, each operator kind as one span
//! covering all its layers), one trace file per device, in the Chrome trace-event format
//! (chrome://tracing, Perfetto). The simulated timeline is `--chrome-trace-file` (`timeline`).

use super::timeline::path_for;
use super::{Artifact, Destination, ExportError};
use crate::cost::{BatchShape, PhaseLoad};
use crate::outcome::Phase;
use crate::outcome::Report;
use crate::plan::Plan;
use crate::search::engine::analytic::RooflineOracle;
use crate::search::engine::best_row_ctx;
use crate::search::CandidateCtx;
use serde_json::json;
use std::path::Path;

/// Events of one step: operators back to back (each operator kind as one span covering all
/// its repetitions), with their bound components as arguments.
fn step_events(ctx: &CandidateCtx, shape: &BatchShape, name: &str, tid: u32, start_us: &mut f64, out: &mut Vec<serde_json::Value>) {
    for (op, count, t) in ctx.cost.op_times(shape) {
        let dur = t.total() * count * 1e6;
        if dur <= 0.0 {
            continue;
        }
        out.push(json!({
            "name": op, "cat": name, "ph": "X", "pid": 0, "tid": tid, "ts": *start_us, "dur": dur,
            "args": {"repetitions": count, "cube_us": t.cube * 1e6, "vector_us": t.vector * 1e6,
                     "memory_us": t.memory * 1e6, "comm_us": t.comm * 1e6, "fixed_us": t.fixed * 1e6}
        }));
        *start_us += dur;
    }
}

/// One trace document per device that has a best row (several devices: the device name is
/// appended to the file stem).
pub fn render(plan: &Plan, report: &Report, base: &Path) -> Result<Vec<Artifact>, ExportError> {
    let mut out = Vec::new();
    let several = report.devices.len() > 1;
    for d in &report.devices {
        let Some((phase, best, ctx)) = best_row_ctx(plan, d) else { continue };
        let o = RooflineOracle::new(&ctx);
        let s = &o.shapes;
        let per_replica = best.batch_size as u64;
        let mut events = Vec::new();
        let mut t = 0.0;
        if phase.phase != Phase::Decode {
            let q = s.effective.min(best.max_batched_tokens.max(1));
            let n = (best.max_batched_tokens / q.max(1)).clamp(1, per_replica);
            let shape = BatchShape { prefill: PhaseLoad::uniform(n, q, q), sampled: n, ..Default::default() };
            step_events(&ctx, &shape, "prefill forward", 1, &mut t, &mut events);
        }
        if phase.phase != Phase::Prefill {
            let shape = BatchShape {
                decode: PhaseLoad::uniform(per_replica, s.decode_query, s.decode_seq()),
                sampled: per_replica * s.decode_query,
                ..Default::default()
            };
            step_events(&ctx, &shape, "decode step", 2, &mut t, &mut events);
        }
        let doc = json!({
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {"device": d.device, "parallel": best.parallel, "batch_size": best.batch_size, "model": plan.model.id},
        });
        let path = path_for(base, &d.device, several);
        out.push(Artifact {
            destination: Destination::File { flag: "--operator-trace-file", path },
            contents: serde_json::to_string(&doc)?,
        });
    }
    Ok(out)
}
