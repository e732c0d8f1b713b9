//! `--emit ENGINE` / `--emit-dir DIR` / `--emit-format shell|k8s`: the launch commands of a row
//! of the report for a real serving engine on real nodes. `deployment` reads the plan and the
//! chosen row into an engine-neutral [`Deployment`] (instances, layout, limits, weights, KV
//! dtype, speculative decoding, prefix caching); `placement` puts every server on its node's
//! own GPUs with its own ports; one [`Emitter`] per engine turns a server into its command with
//! that engine's own flag names (or says why the engine cannot run it), and `script` (one shell
//! script per node and the router's) or `k8s` (Deployments or LeaderWorkerSets, Services, the
//! router) writes the files. `flags` holds the flags each engine version defines
//! (`profiles/engines/flags/`), and every command is checked against them before it is
//! written. Nothing here re-ranks: the row is the report's.
//!
//! Files: `deployment`, `placement`, `flags`, `script`, `k8s`, then one file per engine, each
//! naming the sources its flags were checked in: `vllm` ([`Vllm`]), `sglang` ([`Sglang`]),
//! `trtllm` ([`Trtllm`]).

mod deployment;
mod flags;
mod k8s;
mod placement;
mod script;
mod sglang;
mod trtllm;
mod vllm;

pub use deployment::{Deployment, Instance, Role, Weights};
pub use flags::FlagList;
pub use placement::{Placement, PortBases, Server};
pub use sglang::Sglang;
pub use trtllm::Trtllm;
pub use vllm::Vllm;

use crate::outcome::Report;
use crate::plan::{EmitFormat, EmitOptions, LaunchEngine, Plan};
use deployment::{base, instances};

use std::fmt::Write as _;

/// One file of launch commands or configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchFile {
    pub name: String,
    pub contents: String,
}

/// One process to start: its environment, what launches it (`mpirun … trtllm-llmapi-launch`),
/// and the program with its arguments. `program` is the text that starts it and names the
/// section of the engine's flag list its flags belong to.
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    pub env: Vec<(String, String)>,
    pub launcher: Vec<String>,
    pub program: &'static str,
    pub args: Vec<String>,
}

impl Process {
    pub fn new(program: &'static str, args: Vec<String>) -> Self {
        Process { env: Vec::new(), launcher: Vec::new(), program, args }
    }

    /// Every word after the environment.
    pub fn words(&self) -> Vec<String> {
        let mut w = self.launcher.clone();
        w.extend(self.program.split(' ').map(String::from));
        w.extend(self.args.iter().cloned());
        w
    }
}

/// Which node of a server a process runs on: a known node, or a LeaderWorkerSet worker pod
/// (whose index the pod reads from `LWS_WORKER_INDEX`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rank {
    Node(u32),
    LwsWorker,
}

impl Rank {
    pub fn is_leader(self) -> bool {
        self == Rank::Node(0)
    }

    /// The rank as a shell word.
    pub fn word(self) -> String {
        match self {
            Rank::Node(r) => r.to_string(),
            Rank::LwsWorker => "${LWS_WORKER_INDEX}".into(),
        }
    }

    /// `k` times the rank, as a shell word.
    pub fn times(self, k: u32) -> String {
        match self {
            Rank::Node(r) => (r * k).to_string(),
            Rank::LwsWorker => format!("$((LWS_WORKER_INDEX * {k}))"),
        }
    }
}

/// Where one process of a server runs: the server, its rank among the server's nodes, the
/// address of the server's first node and of each of its nodes, and this node's own address.
#[derive(Debug, Clone)]
pub struct Site<'a> {
    pub server: &'a Server,
    pub rank: Rank,
    pub leader: String,
    pub hosts: Vec<String>,
    pub host: String,
    /// Kubernetes: GPUs are the pod's, addresses come from the cluster.
    pub k8s: bool,
}

/// A server as the router reaches it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub role: deployment::Role,
    pub host: String,
    pub port: u32,
    pub aux_port: u32,
}

/// One serving engine's launch commands.
pub trait Emitter {
    /// The engine's name in headers (`vLLM`).
    fn title(&self) -> &'static str;
    fn engine(&self) -> LaunchEngine;
    /// Lines of the header every file carries (sources, version).
    fn notes(&self, d: &Deployment) -> Vec<String>;
    /// Why this engine cannot serve the plan's device, weights or KV cache, whatever the row
    /// (checked before the search).
    fn check(&self, d: &Deployment) -> Result<(), String>;
    fn ports(&self) -> PortBases;
    /// How many servers an instance kind runs as, and the devices of each: one per instance
    /// unless the engine serves data-parallel replicas apart.
    fn shape(&self, _d: &Deployment, i: &Instance) -> Result<(u32, u32), String> {
        Ok((i.count, i.layout.num_devices))
    }
    /// Files every node reads (TensorRT-LLM's options).
    fn files(&self, _d: &Deployment) -> Result<Vec<LaunchFile>, String> {
        Ok(Vec::new())
    }
    /// The process of a server on one of its nodes; `None` where nothing is started by hand
    /// (`mpirun` reaches the node from the server's first node).
    fn process(&self, d: &Deployment, i: &Instance, site: &Site) -> Result<Option<Process>, String>;
    /// The router or proxy of a P/D deployment in front of `servers`: shell lines to run
    /// first (a configuration file it reads) and its process.
    fn router(&self, d: &Deployment, servers: &[Endpoint]) -> (String, Process);
}

/// The emitter of an engine.
pub fn emitter(engine: LaunchEngine) -> Box<dyn Emitter> {
    match engine {
        LaunchEngine::Vllm => Box::new(Vllm),
        LaunchEngine::Sglang => Box::new(Sglang),
        LaunchEngine::Trtllm => Box::new(Trtllm),
    }
}

/// The servers of `d` on their nodes, in `format`'s files.
pub fn files(e: &dyn Emitter, d: &Deployment, format: EmitFormat) -> Result<Vec<LaunchFile>, String> {
    e.check(d)?;
    let shapes = d.instances.iter().map(|i| e.shape(d, i)).collect::<Result<Vec<_>, _>>()?;
    let placement = placement::place(d, &shapes, e.ports())?;
    match format {
        EmitFormat::Shell => script::shell(e, d, &placement),
        EmitFormat::K8s => k8s::manifests(e, d, &placement),
    }
}

/// The files of `--emit`, or why they cannot be produced (a message naming `--emit`).
pub fn render(plan: &Plan, report: &Report, emit: &EmitOptions) -> Result<Vec<LaunchFile>, String> {
    let deployment = || -> Result<Deployment, String> {
        let dev = report.devices.first().ok_or("the run has no device result")?;
        let mut d = base(plan, &dev.device, emit)?;
        (d.instances, d.source) = instances(plan, dev, emit.row)?;
        Ok(d)
    };
    deployment().and_then(|d| files(emitter(emit.engine).as_ref(), &d, emit.format)).map_err(|why| format!("--emit {}: {why}", emit.engine))
}

/// What can be refused before the search: the weights, block speculative decoding, and what
/// the engine cannot serve on the plan's (single) device.
pub fn check(plan: &Plan, emit: &EmitOptions) -> Result<(), String> {
    let device = plan.devices.first().ok_or("the plan has no device")?;
    base(plan, &device.name, emit).and_then(|d| emitter(emit.engine).check(&d)).map_err(|why| format!("--emit {}: {why}", emit.engine))
}

/// The files as one text for stdout: each configuration file written by a here-document, then
/// the scripts, so that the whole is itself a runnable script; Kubernetes manifests as they are.
pub fn as_script(files: &[LaunchFile]) -> String {
    if let [only] = files {
        if only.name.ends_with(".yaml") {
            return only.contents.clone();
        }
    }
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
