//! From the plan and a row of the report to an engine-neutral [`Deployment`]: the instances
//! (role, count, layout, per-replica limits, MTP) of the chosen row of the aggregated,
//! prefill/decode or P/D-ratio table, and the plan's side (device, weights as the checkpoint
//! holds them, KV dtype, chunked prefill, prefix caching, memory share, block size). What no
//! engine can launch as planned (a checkpoint whose weights differ from the priced ones, block
//! speculative decoding without a draft model) is refused here.

use crate::cost::ParallelConfig;
use crate::hardware::runtime::KvMemorySetting;
use crate::outcome::{DeviceResult, Phase, Row};
use crate::plan::{EmitOptions, Mode, Plan};
use crate::quant::{KvQuant, LinearQuant};

/// What an instance does in the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Mixed,
    Prefill,
    Decode,
}

impl Role {
    pub(super) fn name(self) -> &'static str {
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
    /// An AMD GPU: served by the ROCm builds of vLLM and SGLang.
    pub amd: bool,
    pub ascend: bool,
    pub moe: bool,
    pub weights: Weights,
    /// The plan priced MXFP4 experts on MXFP8 activations (the engine's MXFP4 kernel on a
    /// device with FP4 tensor cores): an engine that needs a switch for that kernel sets it.
    pub mxfp4_moe_mxfp8: bool,
    /// The plan priced MXFP4 experts on bf16 activations with OpenAI's Triton kernels, another
    /// engine's tables of them (TensorRT-LLM on Hopper): an engine whose default backend is
    /// another selects them.
    pub mxfp4_moe_triton: bool,
    pub kv: KvQuant,
    pub chunked_prefill: bool,
    pub prefix_caching: bool,
    /// Share of device memory the engine may use (the plan's reserve).
    pub memory_fraction: f64,
    /// The memory setting the simulated serving engine sized its KV cache by on this device,
    /// and its value (`None`: the engine's own default); `None` when the plan's reserve did
    /// (msmodeling, the formulas). An emitter for that engine passes this setting instead of
    /// `memory_fraction`.
    pub kv_memory: Option<(KvMemorySetting, Option<f64>)>,
    /// KV-cache block size in tokens, as simulated ([`Plan::kv_block_size`]).
    pub block_size: u32,
    /// Devices per node (`DeviceProfile::host_size`): servers are placed on nodes of this many.
    pub gpus_per_node: u32,
    /// Longest prompt (sizes the KV-transfer buffer of TensorRT-LLM).
    pub max_input: u64,
    /// One mixed instance kind, or prefill then decode.
    pub instances: Vec<Instance>,
    /// The row the commands come from, for the header.
    pub source: String,
}

impl Deployment {
    pub(super) fn is_pd(&self) -> bool {
        self.instances.iter().any(|i| i.role != Role::Mixed)
    }
}

/// The (experts, other linears, token-mixer projections) quantization of a checkpoint or plan.
type LinearPrecision = (LinearQuant, LinearQuant, LinearQuant);

fn linear_precision(q: &crate::quant::QuantConfig) -> LinearPrecision {
    (q.for_experts(), q.for_non_experts(), q.for_attention())
}

/// The quantization a model's checkpoint holds.
fn checkpoint_weights(model: &crate::model::ModelArch) -> LinearPrecision {
    linear_precision(&crate::quant::QuantConfig::checkpoint(model))
}

fn flags_for(w: LinearPrecision) -> String {
    if w.2 != w.1 {
        // No flag sets the mixers apart: only the checkpoint's own precision does.
        "no --quantize-linear-action or --quantize-non-expert-linear-action flag".to_string()
    } else if w.0 == w.1 {
        format!("--quantize-linear-action {}", w.0)
    } else {
        format!("--quantize-linear-action {} --quantize-non-expert-linear-action {}", w.0, w.1)
    }
}

fn weights(plan: &Plan, model: &str) -> Result<Weights, String> {
    let planned = linear_precision(&plan.quant);
    let describe = |w: LinearPrecision| {
        let s = if w.0 == w.1 { w.0.to_string() } else { format!("{} experts, {} other linears", w.0, w.1) };
        if w.2 == w.1 {
            s
        } else {
            format!("{s}, {} attention projections", w.2)
        }
    };
    // A checkpoint stored quantized (its config's `quantization_config`: DeepSeek-V3's FP8
    // blocks, gpt-oss's MXFP4 experts, Kimi-K2.5's INT4 experts): the commands serve what it
    // holds, so the plan must have priced the same.
    if !plan.model.weights.is_bf16() && !matches!(plan.model_source, crate::model::ModelSource::File(_)) {
        let native = checkpoint_weights(&plan.model);
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
        (LinearQuant::Disabled, LinearQuant::Disabled, LinearQuant::Disabled) => Ok(Weights::Bf16),
        (LinearQuant::Fp8, LinearQuant::Fp8, LinearQuant::Fp8) => Ok(Weights::Fp8Online),
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

pub(super) fn nth<'a, T>(rows: &'a [T], n: usize, what: &str) -> Result<&'a T, String> {
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
pub(super) fn instances(plan: &Plan, dev: &DeviceResult, n: usize) -> Result<(Vec<Instance>, String), String> {
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
pub(super) fn base(plan: &Plan, device: &str, emit: &EmitOptions) -> Result<Deployment, String> {
    let profile = plan.devices.iter().find(|d| d.name == device).ok_or("the device of the result is not in the plan")?;
    let weights = weights(plan, &emit.model)?;
    if plan.serving.speculative.is_some() {
        return Err("block speculative decoding (--speculative-method) loads a separate draft model, which the plan does not name; \
             the commands cannot be written without it"
            .into());
    }
    // The serving engine's execution profile on this device (the formulas have none).
    let eff = (plan.engine != crate::plan::EngineKind::Analytic).then(|| plan.effective(profile));
    let experts = eff.as_ref().map(|e| crate::search::engine::mxfp4_as_run(e, plan.quant.for_experts()));
    let mxfp4_moe_mxfp8 = experts == Some(LinearQuant::W4A8Mxfp4Mxfp8);
    let mxfp4_moe_triton = experts == Some(LinearQuant::W4A16Mxfp4) && eff.as_ref().is_some_and(|e| e.mxfp4_moe_tables_from.is_some());
    Ok(Deployment {
        model: emit.model.clone(),
        device: device.to_string(),
        nvidia: profile.vendor.eq_ignore_ascii_case("nvidia"),
        amd: profile.vendor.eq_ignore_ascii_case("amd"),
        ascend: profile.vendor.eq_ignore_ascii_case("ascend"),
        moe: plan.model.is_moe(),
        weights,
        mxfp4_moe_mxfp8,
        mxfp4_moe_triton,
        kv: plan.quant.kv,
        chunked_prefill: plan.sim.chunked_prefill,
        prefix_caching: plan.workload.prefix_cache_hit_rate > 0.0 || plan.sim.shared_prefix.is_some(),
        // Rounded down: the engine never gets more memory than the plan priced.
        memory_fraction: ((1.0 - plan.serving.reserved_gib(profile) / profile.memory_gib()) * 100.0).floor() / 100.0,
        kv_memory: eff.and_then(|e| e.kv_memory).map(|m| (m.setting, plan.serving.gpu_memory_utilization.or(m.fraction))),
        block_size: plan.kv_block_size(profile),
        gpus_per_node: profile.host_size(),
        max_input: plan.workload.input.max_effective(0.0),
        instances: Vec::new(),
        source: String::new(),
    })
}
