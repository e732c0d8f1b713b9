//! `--operator-trace-file`: the per-operator breakdown of the best configuration (one prefill
//! forward and one decode step at the shapes the engine priced, as `search::record` priced
//! them, each operator kind as one span covering all its layers), one trace file per device, in
//! the Chrome trace-event format (chrome://tracing, Perfetto). The simulated timeline is
//! `--chrome-trace-file` (`timeline`).

use super::timeline::path_for;
use super::{Artifact, Destination, ExportError};
use crate::outcome::recording::{OperatorTrace, PassKind, PricedPass};
use crate::outcome::Report;
use crate::plan::Plan;
use serde_json::json;
use std::path::Path;

/// Events of one forward: operators back to back (each operator kind as one span covering all
/// its repetitions), with their bound components as arguments.
fn pass_events(pass: &PricedPass, start_us: &mut f64, out: &mut Vec<serde_json::Value>) {
    let (name, tid) = match pass.kind {
        PassKind::PrefillForward => ("prefill forward", 1),
        PassKind::DecodeStep => ("decode step", 2),
    };
    for op in &pass.operators {
        let dur = op.total_s * op.count * 1e6;
        if dur <= 0.0 {
            continue;
        }
        out.push(json!({
            "name": op.name, "cat": name, "ph": "X", "pid": 0, "tid": tid, "ts": *start_us, "dur": dur,
            "args": {"repetitions": op.count, "cube_us": op.cube_s * 1e6, "vector_us": op.vector_s * 1e6,
                     "memory_us": op.memory_s * 1e6, "comm_us": op.comm_s * 1e6, "fixed_us": op.fixed_s * 1e6}
        }));
        *start_us += dur;
    }
}

/// One trace document per device that has a best row (several devices: the device name is
/// appended to the file stem).
pub fn render(plan: &Plan, report: &Report, traces: &[OperatorTrace], base: &Path) -> Result<Vec<Artifact>, ExportError> {
    let mut out = Vec::new();
    let several = report.devices.len() > 1;
    for trace in traces {
        let best = &trace.row;
        let mut events = Vec::new();
        let mut t = 0.0;
        for pass in &trace.passes {
            pass_events(pass, &mut t, &mut events);
        }
        let doc = json!({
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {"device": trace.device, "parallel": best.parallel, "batch_size": best.batch_size, "model": plan.model.id},
        });
        let path = path_for(base, &trace.device, several);
        out.push(Artifact {
            destination: Destination::File { flag: "--operator-trace-file", path },
            contents: serde_json::to_string(&doc)?,
        });
    }
    Ok(out)
}
