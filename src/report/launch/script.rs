//! The shell form of a deployment: one script per node (`launch.sh` when one node runs one
//! server and nothing else), each server's processes on their own GPUs
//! (`CUDA_VISIBLE_DEVICES`) with their own ports, and `router.sh` for the router or proxy of
//! a P/D deployment. Also what every emitter writes the same way: a command continued over
//! lines, the header of a file (where the commands come from, weights and KV cache), and the
//! refusals several engines share (INT8 KV cache, decode context parallelism).

use super::deployment::{Deployment, Weights};
use super::flags::FlagList;
use super::placement::Placement;
use super::{Emitter, Endpoint, LaunchFile, Process, Rank, Site};
use crate::cost::ParallelConfig;
use crate::quant::{KvQuant, NamedEnum};
use std::fmt::Write as _;

/// The process as one shell command: environment assignments, then the words.
pub(super) fn shell_command(p: &Process) -> String {
    let env: Vec<String> = p.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    command(&env.join(" "), &p.words())
}

/// The scripts of a deployment on its nodes.
pub(super) fn shell(e: &dyn Emitter, d: &Deployment, placement: &Placement) -> Result<Vec<LaunchFile>, String> {
    let flags = FlagList::of(e.engine());
    let mut files = e.files(d)?;
    let mut notes = e.notes(d);
    if placement.nodes > 1 {
        let vars: Vec<String> = (0..placement.nodes).map(|n| format!("NODE{n}_HOST")).collect();
        notes.push(format!(
            "{} nodes of {} GPUs: run nodeN.sh on node N, with {} set to the nodes' addresses on every node",
            placement.nodes,
            placement.gpus_per_node,
            vars.join(", ")
        ));
    }
    let router = d.is_pd();
    if !router && placement.servers.len() > 1 {
        // Separate aggregated servers (TensorRT-LLM's data-parallel replicas): no router ships
        // with the engine for them; the header lists them for the user's load balancer.
        let urls: Vec<String> = placement.servers.iter().map(|s| format!("{}:{}", placement.host(s.node), s.port)).collect();
        notes.push(format!("balance requests over the {} servers: {}", urls.len(), urls.join(" ")));
    }
    let single = placement.nodes == 1 && placement.servers.len() == 1 && !router;
    for n in 0..placement.nodes {
        let mut s = header(e.title(), d, &notes);
        let mut background = false;
        for server in placement.on_node(n) {
            let i = &d.instances[server.kind];
            let site = Site {
                server,
                rank: Rank::Node(n - server.node),
                leader: placement.host(server.node),
                hosts: (server.node..server.node + server.nodes).map(|m| placement.host(m)).collect(),
                host: placement.host(n),
                k8s: false,
            };
            let span = if server.nodes > 1 { format!(", node {} of its {}", n - server.node + 1, server.nodes) } else { String::new() };
            let _ = write!(
                s,
                "\n# {} server {} of {}: {} device{}, GPU{} {} of node {n}{span}, port {}\n",
                i.role.name(),
                server.index + 1,
                server.count,
                server.devices,
                if server.devices == 1 { "" } else { "s" },
                if server.gpus.len() == 1 { "" } else { "s" },
                server.visible_devices(),
                server.port
            );
            let Some(mut p) = e.process(d, i, &site)? else {
                s += "# started from the server's first node by mpirun (passwordless ssh, the same files on every node)\n";
                continue;
            };
            flags.check(&p)?;
            p.env.insert(0, ("CUDA_VISIBLE_DEVICES".into(), server.visible_devices()));
            s += &shell_command(&p);
            if single {
                s += "\n";
            } else {
                s += " &\n";
                background = true;
            }
        }
        if background {
            s += "wait\n";
        }
        let name = if single { "launch.sh".to_string() } else { format!("node{n}.sh") };
        files.push(LaunchFile { name, contents: s });
    }
    if router {
        let endpoints: Vec<Endpoint> = placement
            .servers
            .iter()
            .map(|s| Endpoint { role: s.role, host: placement.host(s.node), port: s.port, aux_port: s.aux_port })
            .collect();
        let (pre, p) = e.router(d, &endpoints);
        flags.check(&p)?;
        let mut n = notes.clone();
        n.push(format!("the {} clients send requests to (port {})", router_word(e), super::placement::FRONT_PORT));
        let s = header(e.title(), d, &n) + &pre + &shell_command(&p) + "\n";
        files.push(LaunchFile { name: "router.sh".into(), contents: s });
    }
    Ok(files)
}

fn router_word(e: &dyn Emitter) -> &'static str {
    match e.title() {
        "vLLM" => "proxy",
        "TensorRT-LLM" => "disaggregated server",
        _ => "router",
    }
}

/// Shell words joined into a command continued over lines, two flags per line at most.
pub(super) fn command(env: &str, words: &[String]) -> String {
    let mut s = String::from(env);
    let mut line = String::new();
    for w in words {
        let starts_flag = w.starts_with("--") && !line.is_empty();
        if starts_flag && line.len() > 60 {
            s += &line;
            s += " \\\n   ";
            line.clear();
        }
        line.push(' ');
        line += w;
    }
    s += &line;
    s.trim_start().to_string()
}

pub(super) fn quote(json: &str) -> String {
    format!("'{json}'")
}

/// The header every script starts with: where the commands come from and what they assume.
pub(super) fn header(engine: &str, d: &Deployment, notes: &[String]) -> String {
    let mut s = format!("#!/bin/sh\n# {engine} launch commands written by throughput-optimizer\n");
    let _ = writeln!(s, "# Model: {} on {}; {}", d.model, d.device, d.source);
    let w = match &d.weights {
        Weights::Bf16 => "BF16".to_string(),
        Weights::Fp8Online => "FP8, quantized by the engine at load".to_string(),
        Weights::Checkpoint(what) => format!("{what}, as the checkpoint stores them"),
    };
    let _ = writeln!(s, "# Weights: {w}; KV cache: {}", if d.kv == KvQuant::Disabled { "model dtype" } else { d.kv.name() });
    for n in notes {
        let _ = writeln!(s, "# {n}");
    }
    s
}

pub(super) fn no_int8_kv(engine: &str, d: &Deployment) -> Result<(), String> {
    if d.kv == KvQuant::Int8 {
        return Err(format!("{engine} has no INT8 KV cache (its KV-cache dtypes are the model's and FP8); plan with --quantize-attention-action FP8 or DISABLED"));
    }
    Ok(())
}

pub(super) fn no_dcp(engine: &str, l: &ParallelConfig) -> Result<(), String> {
    if l.dcp > 1 {
        return Err(format!("{engine} has no decode context parallelism (the plan's DCP{}); search without --dcp-sizes", l.dcp));
    }
    Ok(())
}

/// The engine's pipeline-parallel flag and size when the plan pipelines (PP > 1), else
/// nothing.
pub(super) fn pipeline_flag(flag: &str, l: &ParallelConfig) -> Vec<String> {
    if l.pp > 1 {
        vec![flag.to_string(), l.pp.to_string()]
    } else {
        Vec::new()
    }
}
