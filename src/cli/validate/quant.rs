//! Quantization actions and graph-compilation options.

use super::Warnings;
use crate::cli::args::RawArgs;
use crate::cost::CompileOptions;
use crate::error::Error;
use crate::quant::{KvQuant, LinearQuant, NamedEnum, QuantConfig};

/// `--quantize-*-action` and `--mxfp4-group-size`.
/// The quantization flags. Without `--quantize-linear-action`, a plan on NVIDIA devices runs the
/// checkpoint as it is published (its weights, and its KV cache where the checkpoint quantizes
/// it), as vLLM, SGLang and TensorRT-LLM serve it (and on AMD GPUs, ROCm vLLM and SGLang); elsewhere the original tool's default
/// (W8A8_DYNAMIC weights, bf16 KV) stays.
pub(crate) fn validate_quant(
    raw: &RawArgs,
    model: &crate::model::ModelArch,
    devices: &[crate::hardware::DeviceProfile],
    warnings: &mut Warnings,
) -> Result<QuantConfig, Error> {
    let parse_q = |flag: &str, v: &Option<String>| -> Result<Option<LinearQuant>, Error> {
        v.as_deref().map(|s| LinearQuant::parse_choice(s).map_err(|e| Error::choice(flag, e))).transpose()
    };
    // vLLM, SGLang and TensorRT-LLM on NVIDIA GPUs, and the ROCm builds of vLLM and SGLang on
    // AMD GPUs, serve the checkpoint as it is published.
    let nvidia = !devices.is_empty() && devices.iter().all(|d| d.vendor == "NVIDIA" || d.vendor == "AMD");
    let checkpoint = QuantConfig::checkpoint(model);
    let linear = parse_q("--quantize-linear-action", &raw.quantize_linear_action)?;
    let non_expert = parse_q("--quantize-non-expert-linear-action", &raw.quantize_non_expert_linear_action)?;
    // The checkpoint's own mixer precision holds only while no linear flag overrides it.
    let attention = if linear.is_none() && non_expert.is_none() && nvidia { checkpoint.attention } else { None };
    let (linear, non_expert) = match (linear, nvidia) {
        (Some(l), _) => (l, non_expert),
        (None, true) => (checkpoint.linear, non_expert.or(checkpoint.non_expert)),
        (None, false) => (LinearQuant::W8A8Dynamic, non_expert),
    };
    let (linear, non_expert) = if nvidia { fp8_as_stored(model, linear, non_expert, warnings) } else { (linear, non_expert) };
    let kv = raw
        .quantize_attention_action
        .as_deref()
        .map(|s| KvQuant::parse_choice(s).map_err(|e| Error::choice("--quantize-attention-action", e)))
        .transpose()?
        .unwrap_or(if nvidia && raw.quantize_linear_action.is_none() { checkpoint.kv } else { KvQuant::Disabled });
    let mxfp4_group_size = raw.mxfp4_group_size.unwrap_or(32);
    // Elements per shared scale: the OCP MX formats use 32, NVFP4 16, group-wise integer
    // formats up to 128; a scale per 7 or per 4 billion elements is no format any kernel reads.
    if !(mxfp4_group_size.is_power_of_two() && (8..=256).contains(&mxfp4_group_size)) {
        return Err(Error::invalid("--mxfp4-group-size", mxfp4_group_size, "must be a power of two from 8 to 256 (MXFP4: 32)"));
    }
    if raw.mxfp4_group_size.is_some() && !linear.is_mxfp4() && !non_expert.is_some_and(|q| q.is_mxfp4()) {
        warnings.push(format!("--mxfp4-group-size {mxfp4_group_size} has no effect without MXFP4 quantization"));
    }
    Ok(QuantConfig { linear, non_expert, attention, kv, mxfp4_group_size })
}

/// `FP8` asked of a checkpoint that stores its linears in FP8 128 × 128 blocks (DeepSeek-V3,
/// Kimi-K2, the Qwen3 and MiniMax FP8 releases) is the checkpoint as stored: vLLM, SGLang and
/// TensorRT-LLM load its blocks and their scales and run block-scaled kernels; none re-quantizes
/// an FP8 checkpoint per tensor. Priced per tensor, such a model would take another kernel: on
/// Hopper, vLLM's per-tensor FP8 MoE kernel is measured 2.5 to 3 times slower than its bf16 one
/// (AIConfigurator's tables: Qwen3-235B-A22B, EP 8, 32 decode tokens, H200: 49.7 ms a step
/// against 16.6 ms bf16 and 9.5 ms block-scaled). Said in a warning, so nothing changes unseen.
fn fp8_as_stored(
    model: &crate::model::ModelArch,
    linear: LinearQuant,
    non_expert: Option<LinearQuant>,
    warnings: &mut Warnings,
) -> (LinearQuant, Option<LinearQuant>) {
    if model.weights != crate::model::WeightFormat::Fp8Block || (linear != LinearQuant::Fp8 && non_expert != Some(LinearQuant::Fp8)) {
        return (linear, non_expert);
    }
    warnings.push(format!(
        "{} stores its weights in FP8 128 x 128 blocks, which serving engines run as stored: FP8 is priced as FP8_BLOCK",
        model.id
    ));
    let block = |q: LinearQuant| if q == LinearQuant::Fp8 { LinearQuant::Fp8Block } else { q };
    (block(linear), non_expert.map(block))
}

/// `--compile`, `--compilation-config` and `--compile-allow-graph-break`.
pub(crate) fn validate_compile(raw: &RawArgs, warnings: &mut Warnings) -> Result<CompileOptions, Error> {
    let mut compile = CompileOptions { enabled: raw.compile, ..Default::default() };
    if let Some(opts) = &raw.compilation_config {
        const CHOICES: [&str; 4] =
            ["enable_multistream", "enable_sequence_parallel", "enable_matmul_allreduce", "enable_dispatch_ffn_combine"];
        for o in opts {
            let n = o.trim().replace('-', "_").to_lowercase();
            match n.as_str() {
                "enable_multistream" => compile.multistream = true,
                "enable_sequence_parallel" => compile.sequence_parallel = true,
                "enable_matmul_allreduce" => compile.matmul_allreduce = true,
                "enable_dispatch_ffn_combine" => compile.dispatch_ffn_combine = true,
                _ => {
                    return Err(Error::rejected(
                        "--compilation-config",
                        o,
                        format!("--compilation-config `{o}` is not one of {}", CHOICES.join(", ")),
                    ))
                }
            }
        }
        if !raw.compile {
            warnings.push("--compilation-config options only apply with --compile; they are ignored");
        }
    }
    if raw.compile_allow_graph_break && !raw.compile {
        warnings.push("--compile-allow-graph-break has no effect without --compile");
    }
    Ok(compile)
}
