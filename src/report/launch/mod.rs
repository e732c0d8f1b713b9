//! `--emit ENGINE` / `--emit-dir DIR`: the launch commands of a row of the report for a real
//! serving engine. `deployment` reads the plan and the chosen row into an engine-neutral
//! [`Deployment`] (instances, layout, limits, weights, KV dtype, speculative decoding, prefix
//! caching); one [`Emitter`] per engine turns it into files with that engine's own flag names,
//! or says why the engine cannot run it. Nothing here re-ranks: the row is the report's.
//!
//! Files: `deployment` (from the plan and a row to a [`Deployment`]), `script` (the shell
//! text and refusals every emitter shares), then one file per engine, each naming the sources
//! its flags were checked in: `vllm` ([`Vllm`]), `sglang` ([`Sglang`]), `trtllm` ([`Trtllm`]).

mod deployment;
mod script;
mod sglang;
mod trtllm;
mod vllm;

pub use deployment::{Deployment, Instance, Role, Weights};
pub use sglang::Sglang;
pub use trtllm::Trtllm;
pub use vllm::Vllm;

use crate::outcome::Report;
use crate::plan::{EmitOptions, LaunchEngine, Plan};
use deployment::{base, instances};
use std::fmt::Write as _;

/// One file of launch commands or configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchFile {
    pub name: String,
    pub contents: String,
}

/// One serving engine's launch commands.
pub trait Emitter {
    /// Why this engine cannot serve the plan's device, weights or KV cache, whatever the row
    /// (checked before the search).
    fn check(&self, d: &Deployment) -> Result<(), String>;
    /// The files that launch `d`, or why this engine cannot run its layout as planned.
    fn emit(&self, d: &Deployment) -> Result<Vec<LaunchFile>, String>;
}

/// The emitter of an engine.
pub fn emitter(engine: LaunchEngine) -> Box<dyn Emitter> {
    match engine {
        LaunchEngine::Vllm => Box::new(Vllm),
        LaunchEngine::Sglang => Box::new(Sglang),
        LaunchEngine::Trtllm => Box::new(Trtllm),
    }
}

/// The files of `--emit`, or why they cannot be produced (a message naming `--emit`).
pub fn render(plan: &Plan, report: &Report, emit: &EmitOptions) -> Result<Vec<LaunchFile>, String> {
    let dev = report.devices.first().ok_or("the run has no device result")?;
    let mut d = base(plan, &dev.device, emit)?;
    let (instances, source) = instances(plan, dev, emit.row).map_err(|w| format!("--emit {}: {w}", emit.engine))?;
    d.instances = instances;
    d.source = source;
    let e = emitter(emit.engine);
    e.check(&d).and_then(|()| e.emit(&d)).map_err(|why| format!("--emit {}: {why}", emit.engine))
}

/// What can be refused before the search: the weights, block speculative decoding, and what
/// the engine cannot serve on the plan's (single) device.
pub fn check(plan: &Plan, emit: &EmitOptions) -> Result<(), String> {
    let device = plan.devices.first().ok_or("the plan has no device")?;
    let d = base(plan, &device.name, emit)?;
    emitter(emit.engine).check(&d).map_err(|why| format!("--emit {}: {why}", emit.engine))
}

/// The files as one text for stdout: each configuration file written by a here-document, then
/// the scripts, so that the whole is itself a runnable script.
pub fn as_script(files: &[LaunchFile]) -> String {
    let mut s = String::from("#!/bin/sh\n");
    for f in files.iter().filter(|f| !f.name.ends_with(".sh")) {
        let _ = write!(s, "cat > {} <<'EOF'\n{}EOF\n\n", f.name, f.contents);
    }
    let scripts: Vec<&LaunchFile> = files.iter().filter(|f| f.name.ends_with(".sh")).collect();
    for (i, f) in scripts.iter().enumerate() {
        if scripts.len() > 1 {
            let _ = writeln!(s, "# ---- {} ----", f.name);
        }
        // Only the last script waits: the servers of the earlier ones keep running in the
        // background while the next start.
        let body = f.contents.strip_prefix("#!/bin/sh\n").unwrap_or(&f.contents);
        if i + 1 < scripts.len() {
            s.extend(body.lines().filter(|l| *l != "wait").map(|l| format!("{l}\n")));
            s.push('\n');
        } else {
            s += body;
        }
    }
    s
}

#[cfg(test)]
mod tests;
