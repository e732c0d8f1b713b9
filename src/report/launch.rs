//! `--emit ENGINE` / `--emit-dir DIR`: the launch commands of a row of the report for a real
//! serving engine. [`deployment`] reads the plan and the chosen row into an engine-neutral
//! [`Deployment`] (instances, layout, limits, weights, KV dtype, speculative decoding, prefix
//! caching); one [`Emitter`] per engine turns it into files with that engine's own flag names,
//! or says why the engine cannot run it. Nothing here re-ranks: the row is the report's.
//!
//! Flag names were checked in the engines' sources:
//! - vLLM: `vllm/engine/arg_utils.py` at 99d7eb5 (v0.11 line: `--tensor-parallel-size`,
//!   `--data-parallel-size`, `--enable-expert-parallel`, `--decode-context-parallel-size`,
//!   `--max-num-seqs`, `--max-num-batched-tokens`, `--kv-cache-dtype`, `--quantization`,
//!   `--speculative-config`, `--kv-transfer-config`, `--enable-prefix-caching`,
//!   `--gpu-memory-utilization`, `--block-size`), the `mtp` method of `vllm/config/speculative.py`
//!   (main at 002e77c) and the NixlConnector guide (`kv_role: kv_both`, `toy_proxy_server.py`).
//! - SGLang: `server_args.py` as documented in `docs/advanced_features/server_arguments.md`
//!   (main at 004813e): `--tp-size`, `--dp-size`, `--enable-dp-attention`, `--ep-size`,
//!   `--moe-dp-size`, `--max-running-requests`, `--chunked-prefill-size`, `--kv-cache-dtype`
//!   (`fp8_e4m3`), `--speculative-algorithm EAGLE` with `--speculative-num-steps`,
//!   `--disable-radix-cache`, `--mem-fraction-static`, `--page-size`, `--disaggregation-mode`,
//!   `--disaggregation-transfer-backend`; the router is `sglang_router.launch_router`.
//! - TensorRT-LLM: `tensorrt_llm/commands/serve.py` at 4c05a74 (`trtllm-serve MODEL --backend
//!   pytorch --tp_size --ep_size --max_batch_size --max_num_tokens --enable_chunked_prefill
//!   --extra_llm_api_options FILE`), LLM API options in that YAML (`enable_attention_dp`,
//!   `kv_cache_config`, `speculative_config`, `cache_transceiver_config`) and
//!   `trtllm-serve disaggregated -c FILE` (examples/disaggregated/README.md).

use crate::cost::ParallelConfig;
use crate::outcome::{DeviceResult, Phase, Report, Row};
use crate::plan::{EmitOptions, LaunchEngine, Mode, Plan};
use crate::quant::{KvQuant, LinearQuant, NamedEnum};
use std::fmt::Write as _;

/// What an instance does in the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Mixed,
    Prefill,
    Decode,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Mixed => "aggregated",
            Role::Prefill => "prefill",
            Role::Decode => "decode",
        }
    }
}

/// One kind of engine instance, and how many of them run.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub role: Role,
    pub count: u32,
    pub layout: ParallelConfig,
    /// Running sequences per DP replica.
    pub max_num_seqs: u64,
    /// Token budget of one step per DP replica (the chunked-prefill size).
    pub max_batched_tokens: u64,
    /// MTP draft tokens per decode step (0: none).
    pub mtp: u32,
}

/// How the weights are served.
#[derive(Debug, Clone, PartialEq)]
pub enum Weights {
    /// BF16, as the checkpoint stores them.
    Bf16,
    /// FP8 quantized by the engine when it loads a BF16 checkpoint.
    Fp8Online,
    /// As the checkpoint stores them (its `quantization_config`), described in words.
    Checkpoint(String),
}

/// Everything the commands need, engine-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    /// The model as the user gave it.
    pub model: String,
    pub device: String,
    pub nvidia: bool,
    pub ascend: bool,
    pub moe: bool,
    pub weights: Weights,
    pub kv: KvQuant,
    pub chunked_prefill: bool,
    pub prefix_caching: bool,
    /// Share of device memory the engine may use.
    pub memory_fraction: f64,
    pub block_size: u32,
    /// Longest prompt (sizes the KV-transfer buffer of TensorRT-LLM).
    pub max_input: u64,
    /// One mixed instance kind, or prefill then decode.
    pub instances: Vec<Instance>,
    /// The row the commands come from, for the header.
    pub source: String,
}

impl Deployment {
    fn is_pd(&self) -> bool {
        self.instances.iter().any(|i| i.role != Role::Mixed)
    }
}

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

pub struct Vllm;
pub struct Sglang;
pub struct Trtllm;

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

// ---------------------------------------------------------------------------------------------
// From the plan and the report to a deployment.

/// Published checkpoints that are not BF16: (experts, other linears). The commands serve what
/// the checkpoint holds, so the plan must have priced the same.
fn native_weights(model: &str) -> Option<(LinearQuant, LinearQuant)> {
    let m = model.to_ascii_lowercase();
    if m.starts_with("deepseek-ai/deepseek-v3") || m.starts_with("deepseek-ai/deepseek-r1") || m.starts_with("moonshotai/kimi-k2") {
        Some((LinearQuant::Fp8, LinearQuant::Fp8))
    } else if m.starts_with("openai/gpt-oss") {
        Some((LinearQuant::Mxfp4, LinearQuant::Disabled))
    } else {
        None
    }
}

fn flags_for(w: (LinearQuant, LinearQuant)) -> String {
    if w.0 == w.1 {
        format!("--quantize-linear-action {}", w.0)
    } else {
        format!("--quantize-linear-action {} --quantize-non-expert-linear-action {}", w.0, w.1)
    }
}

fn weights(plan: &Plan, model: &str) -> Result<Weights, String> {
    let planned = (plan.quant.for_experts(), plan.quant.for_non_experts());
    let describe =
        |w: (LinearQuant, LinearQuant)| if w.0 == w.1 { w.0.to_string() } else { format!("{} experts, {} other linears", w.0, w.1) };
    if let Some(native) = native_weights(&plan.model.id) {
        if native != planned {
            return Err(format!(
                "the {} checkpoint holds {} weights but the plan priced {}: rerun with {} so that the commands serve what was planned",
                plan.model.id,
                describe(native),
                describe(planned),
                flags_for(native)
            ));
        }
        return Ok(Weights::Checkpoint(describe(native)));
    }
    match planned {
        (LinearQuant::Disabled, LinearQuant::Disabled) => Ok(Weights::Bf16),
        (LinearQuant::Fp8, LinearQuant::Fp8) => Ok(Weights::Fp8Online),
        w if matches!(plan.model_source, crate::model::ModelSource::File(_)) => Ok(Weights::Checkpoint(describe(w))),
        w => Err(format!(
            "{model} is a BF16 checkpoint, and serving {} weights needs a checkpoint quantized that way (give its directory as the model); \
             or plan BF16 or online-FP8 weights with --quantize-linear-action DISABLED or FP8",
            describe(w)
        )),
    }
}

fn instance(role: Role, count: u32, r: &Row) -> Instance {
    Instance {
        role,
        count,
        layout: r.layout,
        max_num_seqs: r.max_num_seqs.unwrap_or(r.batch_size as u64).max(1),
        max_batched_tokens: r.max_batched_tokens,
        mtp: r.mtp,
    }
}

fn nth<'a, T>(rows: &'a [T], n: usize, what: &str) -> Result<&'a T, String> {
    rows.get(n - 1).ok_or_else(|| match rows.len() {
        0 => format!("no {what} configuration meets the limits, so there is nothing to launch"),
        k => format!("--emit-row {n}: the {what} table has {k} row{} (1 to {k})", if k == 1 { "" } else { "s" }),
    })
}

fn phase(dev: &DeviceResult, p: Phase) -> &[Row] {
    dev.phases.iter().find(|r| r.phase == p).map_or(&[], |r| &r.best)
}

/// Instance counts of a P/D ratio: the reported split for the recommended row, else the
/// smallest whole numbers near the row's P:D ratio.
fn pd_counts(pd: &crate::outcome::PdRatioResult, n: usize) -> (u32, u32) {
    if n == 1 {
        if let Some(c) = &pd.chosen {
            return (c.prefill_instances, c.decode_instances);
        }
        if let Some(s) = &pd.split {
            return (s.prefill_instances, s.decode_instances);
        }
    }
    let ratio = pd.rows[n - 1].pd_ratio;
    if !(ratio.is_finite() && ratio > 0.0) {
        return (1, 1);
    }
    if ratio >= 1.0 {
        (ratio.round().max(1.0) as u32, 1)
    } else {
        (1, (1.0 / ratio).round().max(1.0) as u32)
    }
}

/// The instances of the chosen row and a description of where they come from.
fn instances(plan: &Plan, dev: &DeviceResult, n: usize) -> Result<(Vec<Instance>, String), String> {
    match &plan.mode {
        Mode::Aggregation => {
            let r = nth(phase(dev, Phase::Aggregated), n, "aggregated")?;
            Ok((
                vec![instance(Role::Mixed, 1, r)],
                format!("row {n} of the aggregated table: {}, {:.2} tokens/s at concurrency {}", r.parallel, r.throughput, r.concurrency),
            ))
        }
        Mode::Disaggregation { .. } => {
            let p = nth(phase(dev, Phase::Prefill), n, "prefill")?;
            let d = nth(phase(dev, Phase::Decode), n, "decode")?;
            let src = format!(
                "row {n} of the prefill and decode tables: prefill {} ({:.2} req/s), decode {} ({:.2} req/s); one instance each \
                 (--enable-optimize-prefill-decode-ratio plans how many)",
                p.parallel,
                p.qps.unwrap_or(0.0),
                d.parallel,
                d.qps.unwrap_or(0.0)
            );
            Ok((vec![instance(Role::Prefill, 1, p), instance(Role::Decode, 1, d)], src))
        }
        Mode::PdRatio { .. } => {
            let pd = dev.pd_ratio.as_ref().ok_or("the run has no P/D result")?;
            let r = nth(&pd.rows, n, "P/D")?;
            let (pc, dc) = pd_counts(pd, n);
            let src = format!(
                "row {n} of the P/D table: {pc} prefill x {}, {dc} decode x {}, {:.2} req/s balanced",
                r.p_parallel, r.d_parallel, r.balanced_qps
            );
            let stub = |layout: ParallelConfig, batch: u32, budget: u64, mtp: u32| Instance {
                role: Role::Mixed,
                count: 0,
                layout,
                max_num_seqs: batch.max(1) as u64,
                max_batched_tokens: budget,
                mtp,
            };
            let p = Instance { role: Role::Prefill, count: pc, ..stub(r.p_layout, r.p_batch_size, r.p_budget, 0) };
            let d = Instance { role: Role::Decode, count: dc, ..stub(r.d_layout, r.d_batch_size, r.d_budget, r.d_mtp) };
            Ok((vec![p, d], src))
        }
    }
}

/// The plan's side of a deployment on `device` (no instances yet), or why there is none.
fn base(plan: &Plan, device: &str, emit: &EmitOptions) -> Result<Deployment, String> {
    let profile = plan.devices.iter().find(|d| d.name == device).ok_or("the device of the result is not in the plan")?;
    let flag = format!("--emit {}", emit.engine);
    let weights = weights(plan, &emit.model).map_err(|w| format!("{flag}: {w}"))?;
    if plan.serving.speculative.is_some() {
        return Err(format!(
            "{flag}: block speculative decoding (--speculative-method) loads a separate draft model, which the plan does not name; \
             the commands cannot be written without it"
        ));
    }
    Ok(Deployment {
        model: emit.model.clone(),
        device: device.to_string(),
        nvidia: profile.vendor.eq_ignore_ascii_case("nvidia"),
        ascend: profile.vendor.eq_ignore_ascii_case("ascend"),
        moe: plan.model.is_moe(),
        weights,
        kv: plan.quant.kv,
        chunked_prefill: plan.sim.chunked_prefill,
        prefix_caching: plan.workload.prefix_cache_hit_rate > 0.0 || plan.sim.shared_prefix.is_some(),
        // Rounded down: the engine never gets more memory than the plan priced.
        memory_fraction: ((1.0 - plan.serving.reserved_gib(profile) / profile.memory_gib()) * 100.0).floor() / 100.0,
        block_size: plan.serving.kv_block_size,
        max_input: plan.workload.input.max_effective(0.0),
        instances: Vec::new(),
        source: String::new(),
    })
}

// ---------------------------------------------------------------------------------------------
// Shared rendering.

/// Shell words joined into a command continued over lines, two flags per line at most.
fn command(env: &str, words: &[String]) -> String {
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

fn quote(json: &str) -> String {
    format!("'{json}'")
}

/// The header every script starts with: where the commands come from and what they assume.
fn header(engine: &str, d: &Deployment, notes: &[String]) -> String {
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
fn placement_note(i: &Instance) -> String {
    let n = i.layout.num_devices;
    format!(
        "{} {} instance{} of {n} device{} each: run each command on a host with that many free devices",
        i.count,
        i.role.name(),
        if i.count == 1 { "" } else { "s" },
        if n == 1 { "" } else { "s" }
    )
}

fn no_int8_kv(engine: &str, d: &Deployment) -> Result<(), String> {
    if d.kv == KvQuant::Int8 {
        return Err(format!("{engine} has no INT8 KV cache (its KV-cache dtypes are the model's and FP8); plan with --quantize-attention-action FP8 or DISABLED"));
    }
    Ok(())
}

fn no_dcp(engine: &str, l: &ParallelConfig) -> Result<(), String> {
    if l.dcp > 1 {
        return Err(format!("{engine} has no decode context parallelism (the plan's DCP{}); search without --dcp-sizes", l.dcp));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// vLLM.

impl Vllm {
    /// vLLM shards an MoE layer over all TP × DP devices: by TP, or by EP with
    /// `--enable-expert-parallel`. Other splits of the experts have no flag.
    fn parallel(&self, d: &Deployment, l: &ParallelConfig) -> Result<Vec<String>, String> {
        let mut v = vec!["--tensor-parallel-size".into(), l.tp.to_string()];
        if l.dp > 1 {
            v.extend(["--data-parallel-size".into(), l.dp.to_string()]);
        }
        if d.moe {
            match (l.ep, l.moe_tp, l.moe_dp) {
                (1, t, 1) if t == l.num_devices => {}
                (e, 1, 1) if e == l.num_devices => v.push("--enable-expert-parallel".into()),
                _ => {
                    return Err(format!(
                        "vLLM shards MoE layers over all {} devices of an instance (TP, or EP with --enable-expert-parallel); \
                         the plan's EP{} x MoE-TP{} x MoE-DP{} has no vLLM flag",
                        l.num_devices, l.ep, l.moe_tp, l.moe_dp
                    ))
                }
            }
        }
        if l.dcp > 1 {
            v.extend(["--decode-context-parallel-size".into(), l.dcp.to_string()]);
        }
        Ok(v)
    }

    fn serve(&self, d: &Deployment, i: &Instance, port: u32) -> Result<Vec<String>, String> {
        let mut v: Vec<String> = vec!["vllm".into(), "serve".into(), d.model.clone(), "--port".into(), port.to_string()];
        v.extend(self.parallel(d, &i.layout)?);
        v.extend([
            "--max-num-seqs".into(),
            i.max_num_seqs.to_string(),
            "--max-num-batched-tokens".into(),
            i.max_batched_tokens.to_string(),
        ]);
        if !d.chunked_prefill {
            v.push("--no-enable-chunked-prefill".into());
        }
        v.extend(["--gpu-memory-utilization".into(), format!("{:.2}", d.memory_fraction), "--block-size".into(), d.block_size.to_string()]);
        if d.weights == Weights::Fp8Online {
            v.extend(["--quantization".into(), "fp8".into()]);
        }
        if d.kv == KvQuant::Fp8 {
            v.extend(["--kv-cache-dtype".into(), "fp8".into()]);
        }
        if i.mtp > 0 {
            v.extend(["--speculative-config".into(), quote(&format!("{{\"method\":\"mtp\",\"num_speculative_tokens\":{}}}", i.mtp))]);
        }
        if d.prefix_caching {
            v.push("--enable-prefix-caching".into());
        }
        if i.role != Role::Mixed {
            v.extend(["--kv-transfer-config".into(), quote("{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}")]);
        }
        Ok(v)
    }
}

impl Emitter for Vllm {
    fn check(&self, d: &Deployment) -> Result<(), String> {
        no_int8_kv("vLLM", d)
    }

    fn emit(&self, d: &Deployment) -> Result<Vec<LaunchFile>, String> {
        let mut notes = vec!["vLLM v0.11 or newer (vllm serve flags as in vllm/engine/arg_utils.py)".to_string()];
        if d.ascend {
            notes.push("Ascend: vLLM with the vllm-ascend plugin takes the same flags".into());
        }
        if !d.is_pd() {
            let i = &d.instances[0];
            let s = header("vLLM", d, &notes) + &command("", &self.serve(d, i, 8000)?) + "\n";
            return Ok(vec![LaunchFile { name: "launch.sh".into(), contents: s }]);
        }
        notes.push("KV hand-off: NixlConnector (each instance needs its own VLLM_NIXL_SIDE_CHANNEL_PORT if several share a host)".into());
        let mut files = Vec::new();
        let mut ports: Vec<(Role, Vec<u32>)> = Vec::new();
        for (k, i) in d.instances.iter().enumerate() {
            let base = if i.role == Role::Prefill { 8100 } else { 8200 };
            let mut n = notes.clone();
            n.push(placement_note(i));
            let mut s = header("vLLM", d, &n);
            let mut used = Vec::new();
            for j in 0..i.count {
                let port = base + j;
                let _ = writeln!(s, "\n# {} instance {} of {}", i.role.name(), j + 1, i.count);
                s += &command("", &self.serve(d, i, port)?);
                s += " &\n";
                used.push(port);
            }
            s += "wait\n";
            files.push(LaunchFile { name: format!("{}.sh", i.role.name()), contents: s });
            ports.push((d.instances[k].role, used));
        }
        let hosts = |role: Role, var: &str| -> (Vec<String>, Vec<String>) {
            let p = &ports.iter().find(|(r, _)| *r == role).expect("both roles").1;
            (p.iter().enumerate().map(|(j, _)| format!("${{{var}_{j}:-localhost}}")).collect(), p.iter().map(u32::to_string).collect())
        };
        let (ph, pp) = hosts(Role::Prefill, "PREFILL_HOST");
        let (dh, dp) = hosts(Role::Decode, "DECODE_HOST");
        let mut words: Vec<String> =
            vec!["python".into(), "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py".into(), "--port".into(), "8000".into()];
        words.push("--prefiller-hosts".into());
        words.extend(ph);
        words.push("--prefiller-ports".into());
        words.extend(pp);
        words.push("--decoder-hosts".into());
        words.extend(dh);
        words.push("--decoder-ports".into());
        words.extend(dp);
        let mut s = header(
            "vLLM",
            d,
            &["the proxy clients send requests to (port 8000); run from a vLLM source checkout, \
            with PREFILL_HOST_i / DECODE_HOST_i set to where each instance runs"
                .to_string()],
        );
        s += &command("", &words);
        s += "\n";
        files.push(LaunchFile { name: "router.sh".into(), contents: s });
        Ok(files)
    }
}

// ---------------------------------------------------------------------------------------------
// SGLang.

impl Sglang {
    /// SGLang's `--tp-size` counts every device of an instance. A dense model's DP replicas
    /// are `--dp-size` copies of a TP group; an MoE model with DP runs attention data-parallel
    /// (`--enable-dp-attention`) and its experts over the whole instance.
    fn parallel(&self, d: &Deployment, l: &ParallelConfig) -> Result<Vec<String>, String> {
        no_dcp("SGLang", l)?;
        let mut v = Vec::new();
        if !d.moe {
            v.extend(["--tp-size".into(), l.tp.to_string()]);
            if l.dp > 1 {
                v.extend(["--dp-size".into(), l.dp.to_string()]);
            }
            return Ok(v);
        }
        v.extend(["--tp-size".into(), l.num_devices.to_string()]);
        if l.dp > 1 {
            v.extend(["--dp-size".into(), l.dp.to_string(), "--enable-dp-attention".into()]);
        }
        if l.ep > 1 {
            v.extend(["--ep-size".into(), l.ep.to_string()]);
        }
        if l.moe_dp > 1 {
            v.extend(["--moe-dp-size".into(), l.moe_dp.to_string()]);
        }
        Ok(v)
    }

    fn serve(&self, d: &Deployment, i: &Instance, port: u32) -> Result<Vec<String>, String> {
        let mut v: Vec<String> = vec!["python".into(), "-m".into(), "sglang.launch_server".into(), "--model-path".into(), d.model.clone()];
        v.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), port.to_string()]);
        v.extend(self.parallel(d, &i.layout)?);
        // The plan's limits are per DP replica. With DP attention SGLang divides
        // --max-running-requests and --chunked-prefill-size by --dp-size; plain DP replicas
        // each take the values as given.
        let dp_attention = d.moe && i.layout.dp > 1;
        let scale = if dp_attention { i.layout.dp as u64 } else { 1 };
        v.extend(["--max-running-requests".into(), (i.max_num_seqs * scale).to_string()]);
        let chunk = if d.chunked_prefill { (i.max_batched_tokens * scale).to_string() } else { "-1".into() };
        v.extend(["--chunked-prefill-size".into(), chunk, "--max-prefill-tokens".into(), i.max_batched_tokens.to_string()]);
        v.extend(["--mem-fraction-static".into(), format!("{:.2}", d.memory_fraction), "--page-size".into(), d.block_size.to_string()]);
        if d.weights == Weights::Fp8Online {
            v.extend(["--quantization".into(), "fp8".into()]);
        }
        if d.kv == KvQuant::Fp8 {
            v.extend(["--kv-cache-dtype".into(), "fp8_e4m3".into()]);
        }
        if i.mtp > 0 {
            v.extend(["--speculative-algorithm".into(), "EAGLE".into(), "--speculative-num-steps".into(), i.mtp.to_string()]);
            v.extend(["--speculative-eagle-topk".into(), "1".into(), "--speculative-num-draft-tokens".into(), (i.mtp + 1).to_string()]);
        }
        // The radix cache is on by default; the plan priced no hits when it has none.
        if !d.prefix_caching {
            v.push("--disable-radix-cache".into());
        }
        if d.ascend {
            v.extend(["--device".into(), "npu".into(), "--attention-backend".into(), "ascend".into()]);
        }
        if i.role != Role::Mixed {
            let backend = if d.ascend { "ascend" } else { "mooncake" };
            v.extend(["--disaggregation-mode".into(), i.role.name().into(), "--disaggregation-transfer-backend".into(), backend.into()]);
        }
        Ok(v)
    }
}

impl Emitter for Sglang {
    fn check(&self, d: &Deployment) -> Result<(), String> {
        no_int8_kv("SGLang", d)
    }

    fn emit(&self, d: &Deployment) -> Result<Vec<LaunchFile>, String> {
        let notes = vec!["SGLang server arguments as in python/sglang/srt/server_args.py (main, 2025)".to_string()];
        if !d.is_pd() {
            let s = header("SGLang", d, &notes) + &command("", &self.serve(d, &d.instances[0], 30000)?) + "\n";
            return Ok(vec![LaunchFile { name: "launch.sh".into(), contents: s }]);
        }
        let mut files = Vec::new();
        let mut router: Vec<String> =
            vec!["python".into(), "-m".into(), "sglang_router.launch_router".into(), "--pd-disaggregation".into()];
        for i in &d.instances {
            let (base, var) = if i.role == Role::Prefill { (30000, "PREFILL_HOST") } else { (31000, "DECODE_HOST") };
            let mut n = notes.clone();
            n.push(placement_note(i));
            let mut s = header("SGLang", d, &n);
            for j in 0..i.count {
                let _ = writeln!(s, "\n# {} instance {} of {}", i.role.name(), j + 1, i.count);
                s += &command("", &self.serve(d, i, base + j)?);
                s += " &\n";
                router.extend([format!("--{}", i.role.name()), format!("http://${{{var}_{j}:-localhost}}:{}", base + j)]);
            }
            s += "wait\n";
            files.push(LaunchFile { name: format!("{}.sh", i.role.name()), contents: s });
        }
        router.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), "8000".into()]);
        let s = header(
            "SGLang",
            d,
            &["the router clients send requests to (port 8000); PREFILL_HOST_i / DECODE_HOST_i: where each instance runs".to_string()],
        ) + &command("", &router)
            + "\n";
        files.push(LaunchFile { name: "router.sh".into(), contents: s });
        Ok(files)
    }
}

// ---------------------------------------------------------------------------------------------
// TensorRT-LLM.

impl Trtllm {
    /// `--tp_size` counts every device of a server. Attention data parallelism
    /// (`enable_attention_dp`) runs attention with TP 1; a dense model's DP replicas are
    /// separate servers.
    fn parallel(&self, d: &Deployment, l: &ParallelConfig) -> Result<(Vec<String>, bool, u32), String> {
        no_dcp("TensorRT-LLM", l)?;
        if !d.moe {
            return Ok((vec!["--tp_size".into(), l.tp.to_string()], false, l.dp));
        }
        if l.moe_dp > 1 {
            return Err(format!("TensorRT-LLM has no MoE data parallelism (the plan's MoE-DP{})", l.moe_dp));
        }
        if l.dp > 1 && l.tp > 1 {
            return Err(format!(
                "TensorRT-LLM's attention data parallelism runs attention with TP 1; the plan's TP{} x DP{} has no TensorRT-LLM setting",
                l.tp, l.dp
            ));
        }
        let mut v = vec!["--tp_size".into(), l.num_devices.to_string()];
        if l.ep > 1 {
            v.extend(["--ep_size".into(), l.ep.to_string()]);
        }
        Ok((v, l.dp > 1, 1))
    }

    /// The YAML of `--extra_llm_api_options` for one instance kind.
    fn options(&self, d: &Deployment, i: &Instance, attention_dp: bool) -> String {
        let mut y = String::new();
        if attention_dp {
            y += "enable_attention_dp: true\n";
        }
        y += "kv_cache_config:\n";
        let _ = writeln!(y, "  enable_block_reuse: {}", d.prefix_caching);
        if d.kv == KvQuant::Fp8 {
            y += "  dtype: fp8\n";
        }
        if i.mtp > 0 {
            let _ = write!(y, "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: {}\n", i.mtp);
        }
        match i.role {
            Role::Mixed => {}
            Role::Prefill => {
                // Not supported on context servers in disaggregated serving.
                y += "disable_overlap_scheduler: true\n";
                let _ = write!(
                    y,
                    "cache_transceiver_config:\n  backend: UCX\n  max_tokens_in_buffer: {}\n",
                    d.max_input.max(i.max_batched_tokens)
                );
            }
            Role::Decode => {
                let _ = write!(
                    y,
                    "cache_transceiver_config:\n  backend: UCX\n  max_tokens_in_buffer: {}\n",
                    d.max_input.max(i.max_batched_tokens)
                );
            }
        }
        y
    }

    fn serve(&self, d: &Deployment, i: &Instance, port: u32, par: &[String], yaml: &str) -> Vec<String> {
        let mut v: Vec<String> = vec!["trtllm-serve".into(), d.model.clone(), "--backend".into(), "pytorch".into()];
        v.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), port.to_string()]);
        v.extend(par.iter().cloned());
        v.extend(["--max_batch_size".into(), i.max_num_seqs.to_string(), "--max_num_tokens".into(), i.max_batched_tokens.to_string()]);
        if d.chunked_prefill {
            v.push("--enable_chunked_prefill".into());
        }
        v.extend(["--extra_llm_api_options".into(), yaml.into()]);
        v
    }

    /// Servers of one instance kind: the script and its options file.
    fn servers(&self, d: &Deployment, i: &Instance, base: u32, notes: &[String]) -> Result<(String, LaunchFile, Vec<u32>), String> {
        let (par, attention_dp, replicas) = self.parallel(d, &i.layout)?;
        let yaml = format!("{}-options.yaml", i.role.name());
        let mut n = notes.to_vec();
        let servers = i.count * replicas;
        if replicas > 1 {
            n.push(format!("DP{replicas}: TensorRT-LLM serves each replica as its own server; balance requests over their ports"));
        }
        n.push(placement_note(&Instance {
            count: servers,
            layout: ParallelConfig { num_devices: i.layout.num_devices / replicas, ..i.layout },
            ..i.clone()
        }));
        let mut s = header("TensorRT-LLM", d, &n);
        let mut ports = Vec::new();
        for j in 0..servers {
            let _ = writeln!(s, "\n# {} server {} of {servers}", i.role.name(), j + 1);
            s += &command("", &self.serve(d, i, base + j, &par, &yaml));
            // Several servers, or a P/D side, run side by side: in the background.
            let background = servers > 1 || i.role != Role::Mixed;
            s += if background { " &\n" } else { "\n" };
            ports.push(base + j);
        }
        if servers > 1 || i.role != Role::Mixed {
            s += "wait\n";
        }
        Ok((s, LaunchFile { name: yaml, contents: self.options(d, i, attention_dp) }, ports))
    }
}

impl Emitter for Trtllm {
    fn check(&self, d: &Deployment) -> Result<(), String> {
        if !d.nvidia {
            return Err(format!("TensorRT-LLM runs on NVIDIA GPUs only, and {} is not one", d.device));
        }
        no_int8_kv("TensorRT-LLM (PyTorch backend)", d)?;
        if d.weights == Weights::Fp8Online {
            return Err("TensorRT-LLM does not quantize a BF16 checkpoint at load: serve an FP8 checkpoint (e.g. a ModelOpt export, \
                        given as the model) or plan BF16 weights with --quantize-linear-action DISABLED"
                .into());
        }
        Ok(())
    }

    fn emit(&self, d: &Deployment) -> Result<Vec<LaunchFile>, String> {
        let notes = vec!["TensorRT-LLM trtllm-serve (tensorrt_llm/commands/serve.py), PyTorch backend".to_string()];
        if !d.is_pd() {
            let (s, yaml, _) = self.servers(d, &d.instances[0], 8000, &notes)?;
            return Ok(vec![yaml, LaunchFile { name: "launch.sh".into(), contents: s }]);
        }
        let mut files = Vec::new();
        let mut cfg = String::from("hostname: 0.0.0.0\nport: 8000\nbackend: pytorch\n");
        for i in &d.instances {
            let (base, key, var) = if i.role == Role::Prefill {
                (8100, "context_servers", "PREFILL_HOST")
            } else {
                (8200, "generation_servers", "DECODE_HOST")
            };
            let (s, yaml, ports) = self.servers(d, i, base, &notes)?;
            let _ = write!(cfg, "{key}:\n  num_instances: {}\n  urls:\n", ports.len());
            for (j, p) in ports.iter().enumerate() {
                // The disaggregated server reads this file as is: hosts must be filled in.
                let _ = writeln!(cfg, "    - \"localhost:{p}\"  # {var}_{j}");
            }
            files.push(yaml);
            files.push(LaunchFile { name: format!("{}.sh", i.role.name()), contents: s });
        }
        files.push(LaunchFile { name: "disagg-config.yaml".into(), contents: cfg });
        let s = header(
            "TensorRT-LLM",
            d,
            &["the disaggregated server clients send requests to (port 8000); in disagg-config.yaml, replace localhost \
               with the host of each server (PREFILL_HOST_i / DECODE_HOST_i) when they run elsewhere"
                .to_string()],
        ) + "trtllm-serve disaggregated -c disagg-config.yaml\n";
        files.push(LaunchFile { name: "router.sh".into(), contents: s });
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moe(layout: ParallelConfig) -> Deployment {
        Deployment {
            model: "Qwen/Qwen3-30B-A3B".into(),
            device: "H100_SXM".into(),
            nvidia: true,
            ascend: false,
            moe: true,
            weights: Weights::Bf16,
            kv: KvQuant::Disabled,
            chunked_prefill: true,
            prefix_caching: false,
            memory_fraction: 0.86,
            block_size: 128,
            max_input: 3500,
            instances: vec![Instance { role: Role::Mixed, count: 1, layout, max_num_seqs: 64, max_batched_tokens: 8192, mtp: 0 }],
            source: "test".into(),
        }
    }

    fn layout(tp: u32, dp: u32, ep: u32, moe_tp: u32, moe_dp: u32) -> ParallelConfig {
        ParallelConfig { num_devices: tp * dp, tp, dp, ep, moe_tp, moe_dp, dcp: 1 }
    }

    fn text(e: &dyn Emitter, d: &Deployment) -> String {
        e.emit(d).unwrap().into_iter().map(|f| f.contents).collect()
    }

    /// vLLM expresses experts over every device by TP or by EP, nothing in between. Fails if
    /// the EP arm of `Vllm::parallel` drops `--enable-expert-parallel` or accepts a partial EP.
    #[test]
    fn vllm_moe_is_all_tp_or_all_ep() {
        let ep = text(&Vllm, &moe(layout(1, 8, 8, 1, 1)));
        assert!(
            ep.contains("--tensor-parallel-size 1") && ep.contains("--data-parallel-size 8") && ep.contains("--enable-expert-parallel"),
            "{ep}"
        );
        let tp = text(&Vllm, &moe(layout(8, 1, 1, 8, 1)));
        assert!(!tp.contains("--enable-expert-parallel"), "{tp}");
        let err = Vllm.emit(&moe(layout(8, 1, 4, 2, 1))).unwrap_err();
        assert!(err.contains("EP4 x MoE-TP2 x MoE-DP1"), "{err}");
    }

    /// SGLang counts every device in `--tp-size` and runs attention data-parallel with DP; its
    /// limits are divided by `--dp-size` there, so the plan's per-replica values are multiplied.
    #[test]
    fn sglang_moe_with_dp_attention() {
        let s = text(&Sglang, &moe(layout(1, 8, 8, 1, 1)));
        for part in ["--tp-size 8", "--dp-size 8", "--enable-dp-attention", "--ep-size 8", "--max-running-requests 512"] {
            assert!(s.contains(part), "{part} in {s}");
        }
    }

    /// TensorRT-LLM's attention DP runs attention with TP 1: TP2 x DP4 is refused, TP1 x DP8
    /// becomes `enable_attention_dp`.
    #[test]
    fn trtllm_attention_dp_needs_tp_one() {
        assert!(Trtllm.emit(&moe(layout(2, 4, 8, 1, 1))).unwrap_err().contains("attention with TP 1"));
        let files = Trtllm.emit(&moe(layout(1, 8, 8, 1, 1))).unwrap();
        assert!(files[0].contents.contains("enable_attention_dp: true"), "{}", files[0].contents);
        assert!(
            files[1].contents.contains("--tp_size 8 --ep_size 8") || files[1].contents.contains("--ep_size 8"),
            "{}",
            files[1].contents
        );
    }

    /// `--emit-row` past the table names its range; an empty table says there is nothing to
    /// launch. Fails if `nth` indexes from 0 (row 3 would be out of range).
    #[test]
    fn rows_out_of_range_name_the_range() {
        let rows = [1, 2, 3];
        assert_eq!(nth(&rows, 3, "x"), Ok(&3));
        assert_eq!(nth(&rows, 4, "aggregated").unwrap_err(), "--emit-row 4: the aggregated table has 3 rows (1 to 3)");
        assert!(nth::<u32>(&[], 1, "decode").unwrap_err().contains("no decode configuration"));
    }
}
