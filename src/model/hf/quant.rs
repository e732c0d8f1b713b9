//! A checkpoint's weight format and KV-cache precision from its `quantization_config` (or the
//! `hf_quant_config.json` ModelOpt writes beside it): FP8 per tensor or in blocks, MXFP4 and
//! INT4 experts, NVFP4 whole or by module (ModelOpt's `MIXED_PRECISION`), compressed-tensors.

use crate::model::WeightFormat;
use serde_json::{Map, Value};

/// Whether the checkpoint's `quantization_config` quantizes the KV cache to FP8.
pub(super) fn fp8_kv_cache(q: &Map<String, Value>) -> bool {
    let algo = q.get("kv_cache_quant_algo").and_then(Value::as_str).is_some_and(|a| a.eq_ignore_ascii_case("fp8"));
    let scheme = q.get("kv_cache_scheme").is_some_and(|s| !s.is_null());
    algo || scheme
}

/// The checkpoint's weight format from its `quantization_config` (absent: bf16).
pub(super) fn weight_format(q: Option<&Map<String, Value>>) -> Result<WeightFormat, String> {
    let Some(q) = q else { return Ok(WeightFormat::Bf16) };
    let text = |k: &str| q.get(k).and_then(Value::as_str).map(str::to_lowercase);
    let method = text("quant_method").unwrap_or_else(|| unnamed_method(q));
    Ok(match method.as_str() {
        "fp8" if q.get("weight_block_size").is_some_and(|b| !b.is_null()) => WeightFormat::Fp8Block,
        "fp8" | "fbgemm_fp8" => WeightFormat::Fp8Tensor,
        "mxfp4" => WeightFormat::Mxfp4Experts,
        "modelopt" => match text("quant_algo").as_deref() {
            Some("fp8") => WeightFormat::Fp8Tensor,
            Some("nvfp4") if excludes_attention(q) => WeightFormat::Nvfp4Mlp,
            Some("nvfp4") => WeightFormat::Nvfp4,
            Some("mixed_precision") => modelopt_mixed(q)?,
            other => return Err(format!("field `quantization_config.quant_algo` is {other:?}; supported: FP8, NVFP4, MIXED_PRECISION")),
        },
        "compressed-tensors" => compressed_tensors(q)?,
        other => {
            return Err(format!(
                "field `quantization_config.quant_method` is `{other}`; supported: fp8, fbgemm_fp8, mxfp4, modelopt, compressed-tensors"
            ))
        }
    })
}

/// The method of a `quantization_config` that does not name one: ModelOpt's own exports into
/// `config.json` carry `producer.name: modelopt` and `quant_algo` but no `quant_method` (the
/// FP8 per-tensor Qwen3-32B that NVIDIA's AIConfigurator lists as
/// `Qwen3-32B-FP8-Static-PerTensor`, made by ModelOpt 0.31); anything else stays unnamed and is
/// refused as such.
fn unnamed_method(q: &Map<String, Value>) -> String {
    let producer = q.get("producer").and_then(|p| p.get("name")).and_then(Value::as_str);
    if producer.is_some_and(|p| p.eq_ignore_ascii_case("modelopt")) && q.get("quant_algo").is_some() {
        "modelopt".into()
    } else {
        String::new()
    }
}

/// Whether a ModelOpt checkpoint leaves attention unquantized: its `ignore` (config.json) or
/// `exclude_modules` (hf_quant_config.json) names `self_attn` modules, as NVIDIA's NVFP4
/// releases of Gemma 4, GLM-5 and MiniMax-M2.5 do layer by layer.
fn excludes_attention(q: &Map<String, Value>) -> bool {
    ["ignore", "exclude_modules"]
        .iter()
        .filter_map(|k| q.get(*k).and_then(Value::as_array))
        .flatten()
        .any(|m| m.as_str().is_some_and(|m| m.contains("self_attn")))
}

/// ModelOpt's `MIXED_PRECISION`: a format per module in `quantized_layers`. What this tool
/// prices apart is the routed experts, the other MLPs (shared experts, dense MLPs) and the
/// token mixers' projections (attention's and its indexer's, a linear-attention or Mamba-2
/// mixer's). NVFP4 MLPs (`NVFP4`, or `W4A16_NVFP4`, which the same checkpoints' config_groups
/// give 4-bit activations, so NVFP4 either way) with FP8 mixers are NVIDIA's Qwen3.6 and
/// Nemotron 3.5 Lightning releases; with no mixer listed they stay bf16. NVFP4 routed experts
/// with every other linear in FP8 or MXFP8 is NVIDIA's MiniMax-M3 release. MXFP8 reads as FP8.
/// `lm_head` is never quantized here.
fn modelopt_mixed(q: &Map<String, Value>) -> Result<WeightFormat, String> {
    let layers = q
        .get("quantized_layers")
        .and_then(Value::as_object)
        .ok_or("field `quantization_config.quantized_layers` (an object) is missing for MIXED_PRECISION")?;
    use std::collections::BTreeSet;
    let (mut routed, mut other_mlp, mut mixer) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (name, spec) in layers {
        let algo = spec.get("quant_algo").and_then(Value::as_str).unwrap_or("").to_uppercase();
        let algo = match algo.as_str() {
            "W4A16_NVFP4" => "NVFP4".to_string(),
            // E4M3 with a power-of-two scale per 32 weights: priced as FP8 (see
            // `WeightFormat::Nvfp4ExpertsFp8`).
            "MXFP8" => "FP8".to_string(),
            _ => algo,
        };
        if name.contains("shared_expert") {
            other_mlp.insert(algo);
        } else if name.contains("experts") {
            routed.insert(algo);
        } else if name.contains(".mlp.") || name.ends_with(".mlp") {
            other_mlp.insert(algo);
        } else if name.contains("attn") || name.contains(".mixer.") {
            mixer.insert(algo);
        } else if !name.ends_with("lm_head") {
            return Err(format!("field `quantization_config.quantized_layers` names `{name}`, neither an MLP nor a token mixer"));
        }
    }
    let one = |set: &BTreeSet<String>| set.iter().map(String::as_str).collect::<Vec<_>>().join(", ");
    let mlp: BTreeSet<String> = routed.union(&other_mlp).cloned().collect();
    match (one(&routed).as_str(), one(&other_mlp).as_str(), one(&mixer).as_str()) {
        ("NVFP4", "FP8", "FP8") => Ok(WeightFormat::Nvfp4ExpertsFp8),
        _ => match (one(&mlp).as_str(), one(&mixer).as_str()) {
            ("NVFP4", "FP8") => Ok(WeightFormat::Nvfp4MlpFp8Attention),
            ("NVFP4", "") => Ok(WeightFormat::Nvfp4Mlp),
            (m, a) => Err(format!(
                "field `quantization_config.quantized_layers` holds MLPs in [{m}] and token mixers in [{a}]; supported: NVFP4 MLPs with FP8 (or MXFP8) or bf16 mixers, or NVFP4 routed experts with everything else in FP8 or MXFP8"
            )),
        },
    }
}

/// A compressed-tensors (llm-compressor) scheme: the weights of its first config group. INT4
/// weight-only in groups of 32 is Kimi-K2.5's (its `ignore` list keeps attention, shared
/// experts and dense MLPs in bf16: only routed experts are INT4); FP8 is per channel or tensor,
/// or in blocks.
fn compressed_tensors(q: &Map<String, Value>) -> Result<WeightFormat, String> {
    let group = q
        .get("config_groups")
        .and_then(Value::as_object)
        .and_then(|g| g.values().next())
        .and_then(Value::as_object)
        .ok_or("field `quantization_config.config_groups` must hold at least one group")?;
    let w = group.get("weights").and_then(Value::as_object).ok_or("field `quantization_config.config_groups.*.weights` is missing")?;
    let num = |k: &str| w.get(k).and_then(Value::as_u64);
    let text = |k: &str| w.get(k).and_then(Value::as_str).unwrap_or("");
    let activations = group.get("input_activations").is_some_and(|a| !a.is_null());
    match (num("num_bits"), text("type"), text("strategy"), activations) {
        (Some(4), "int", "group", false) if num("group_size") == Some(32) => Ok(WeightFormat::Int4Experts),
        (Some(8), "float", "block", _) => Ok(WeightFormat::Fp8Block),
        (Some(8), "float", _, _) => Ok(WeightFormat::Fp8Tensor),
        (bits, kind, strategy, _) => Err(format!(
            "field `quantization_config.config_groups` holds a {}-bit {kind} `{strategy}` scheme (group size {:?}, activations {}); supported: INT4 weight-only in groups of 32, FP8",
            bits.map_or("?".into(), |b| b.to_string()),
            num("group_size"),
            if activations { "quantized" } else { "bf16" }
        )),
    }
}
