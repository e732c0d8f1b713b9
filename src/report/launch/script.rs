//! What every emitter writes the same way: a command continued over lines, the header of a
//! script (where the commands come from, weights and KV cache), the placement note of an
//! instance kind, and the refusals several engines share (INT8 KV cache, decode context
//! parallelism).

use super::deployment::{Deployment, Instance, Weights};
use crate::cost::ParallelConfig;
use crate::quant::{KvQuant, NamedEnum};
use std::fmt::Write as _;

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

/// Notes on placement: each instance runs on its own devices.
pub(super) fn placement_note(i: &Instance) -> String {
    let n = i.layout.num_devices;
    format!(
        "{} {} instance{} of {n} device{} each: run each command on a host with that many free devices",
        i.count,
        i.role.name(),
        if i.count == 1 { "" } else { "s" },
        if n == 1 { "" } else { "s" }
    )
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
