//! Nemotron families whose layers are not all alike: Nemotron-H's hybrid block pattern and the
//! neural-architecture-searched Llama-Nemotron (`nemotron-nas`, DeciLM) with per-layer blocks.

use super::{Attention, Fields, LayerGroup, Mlp, MtpBlock, Parsed};
use serde_json::Value;

/// Nemotron-H (`nemotron_h`: Nemotron-H, Nemotron 3 Nano): a stack of single-purpose blocks,
/// one character each in `hybrid_override_pattern`: `M` a Mamba-2 mixer, `*` attention, `-` a
/// dense MLP, `E` a MoE, each after its own norm. Its MLPs and experts are ungated (up, squared
/// ReLU, down); Nemotron 3 Super's experts work at `moe_latent_size`. Consecutive blocks of one
/// kind are one layer group, in the pattern's order.
pub(super) fn nemotron_h(f: &Fields) -> Result<Parsed, String> {
    let pattern = block_pattern(f, "hybrid_override_pattern", "layers_block_type")?;
    let pattern = pattern.as_str();
    if let Some(n) = f.u32_opt("num_hidden_layers")? {
        if pattern.chars().count() != n as usize {
            return Err(format!("the block pattern has {} blocks; `num_hidden_layers` is {n}", pattern.chars().count()));
        }
    }
    let latent_size = f.u64_opt("moe_latent_size")?;
    let mamba = Attention::Mamba2 {
        heads: f.u32("mamba_num_heads")?,
        head_dim: f.u32("mamba_head_dim")?,
        state_size: f.u32("ssm_state_size")?,
        groups: f.u32("n_groups")?,
        conv_kernel: f.u32("conv_kernel")?,
    };
    let bias = f.bool_or("mlp_bias", false)?;
    let block = |c: char| -> Result<(Attention, Mlp), String> {
        Ok(match c {
            'M' => (mamba.clone(), Mlp::None),
            '*' => {
                let heads = f.u32("num_attention_heads")?;
                let head_dim = match f.u32_opt("head_dim")? {
                    Some(d) => d,
                    None => f.u32("attention_head_dim")?,
                };
                let kv_heads = f.u32_opt("num_key_value_heads")?.unwrap_or(heads);
                let bias = f.bool_or("attention_bias", false)?;
                let gqa = Attention::Gqa {
                    heads,
                    kv_heads,
                    head_dim,
                    qk_norm: false,
                    bias,
                    sliding_window: None,
                    output_gate: false,
                    rotary_fraction: 1.0,
                    value_is_key: false,
                    value_head_dim: None,
                    block_sparse: None,
                };
                (gqa, Mlp::None)
            }
            '-' => (Attention::None, Mlp::Dense { intermediate_size: f.u64("intermediate_size")?, bias, gated: false }),
            'E' => (
                Attention::None,
                Mlp::Moe {
                    experts: f.u32("n_routed_experts")?,
                    top_k: f.u32("num_experts_per_tok")?,
                    expert_intermediate_size: f.u64("moe_intermediate_size")?,
                    shared_intermediate_size: f.u64_opt("moe_shared_expert_intermediate_size")?.unwrap_or(0)
                        * f.u64_opt("n_shared_experts")?.unwrap_or(1),
                    bias,
                    gated: false,
                    latent_size,
                },
            ),
            other => {
                return Err(format!(
                    "field `hybrid_override_pattern` holds `{other}`; expected M (Mamba-2), * (attention), - (MLP) or E (MoE)"
                ))
            }
        })
    };
    let mut groups: Vec<LayerGroup> = Vec::new();
    for c in pattern.chars() {
        let (attention, mlp) = block(c)?;
        match groups.last_mut() {
            Some(g) if g.attention == attention && g.mlp == mlp => g.count += 1,
            _ => groups.push(LayerGroup { count: 1, attention, mlp }),
        }
    }
    // MTP (Nemotron 3 Super): `num_nextn_predict_layers` modules of an attention block and a
    // MoE block each (`mtp_hybrid_override_pattern: "*E"`), one decoder layer as this tool
    // lays them out; another pattern is not modelled.
    let mtp_pattern = block_pattern(f, "mtp_hybrid_override_pattern", "mtp_layers_block_type").ok();
    let mtp = match (f.u32_opt("num_nextn_predict_layers")?, mtp_pattern.as_deref()) {
        (Some(n), Some("*E")) if n > 0 => Some(MtpBlock { layers: n, attention: block('*')?.0, mlp: block('E')?.1 }),
        _ => None,
    };
    Ok((groups, mtp))
}

/// A Nemotron-H block pattern, one character a block: the `pattern` string field (older
/// configs), or the `list` of block types (`mamba`, `attention`, `mlp`, `moe`; newer ones).
fn block_pattern(f: &Fields, pattern: &str, list: &str) -> Result<String, String> {
    if let Some(p) = f.get(pattern).and_then(Value::as_str) {
        return Ok(p.to_string());
    }
    let types = f.get(list).and_then(Value::as_array).ok_or(format!("required field `{pattern}` (or `{list}`) is missing"))?;
    types
        .iter()
        .map(|t| match t.as_str() {
            Some("mamba") => Ok('M'),
            Some("attention") => Ok('*'),
            Some("mlp") => Ok('-'),
            Some("moe") => Ok('E'),
            _ => Err(format!("field `{list}` holds {t}; expected mamba, attention, mlp or moe")),
        })
        .collect()
}

/// Llama-Nemotron searched by neural architecture search (`nemotron-nas`, DeciLM: Llama 3.3
/// Nemotron Super 49B): a Llama whose `block_configs` give each layer its own attention (GQA
/// with `num_attention_heads / n_heads_in_group` KV heads, or none: `no_op`) and its own MLP
/// width (`ffn_mult`, or none). Identical layers are one group, in no particular order.
pub(super) fn nemotron_nas(f: &Fields) -> Result<Parsed, String> {
    let blocks = f.get("block_configs").and_then(Value::as_array).ok_or("required field `block_configs` (a list) is missing")?;
    let n = f.u32("num_hidden_layers")?;
    if blocks.len() != n as usize {
        return Err(format!("field `block_configs` has {} entries but `num_hidden_layers` is {n}", blocks.len()));
    }
    let hidden = f.u64("hidden_size")?;
    let heads = f.u32("num_attention_heads")?;
    if heads == 0 || hidden % heads as u64 != 0 {
        return Err(format!("field `hidden_size` ({hidden}) is not a multiple of `num_attention_heads` ({heads})"));
    }
    let mut groups: Vec<LayerGroup> = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let part = |name: &str| -> Result<&serde_json::Map<String, Value>, String> {
            block.get(name).and_then(Value::as_object).ok_or(format!("field `block_configs[{i}].{name}` must be an object"))
        };
        let attention = nas_attention(part("attention")?, i, heads, (hidden / heads as u64) as u32)?;
        let mlp = nas_mlp(part("ffn")?, i, hidden, f.bool_or("mlp_bias", false)?)?;
        if attention == Attention::None && mlp == Mlp::None {
            // Both halves skipped: the layer passes its input through and costs nothing.
            continue;
        }
        match groups.iter_mut().find(|g| g.attention == attention && g.mlp == mlp) {
            Some(g) => g.count += 1,
            None => groups.push(LayerGroup { count: 1, attention, mlp }),
        }
    }
    if groups.is_empty() {
        return Err("every entry of `block_configs` skips both its attention and its MLP: no layer to price".into());
    }
    Ok((groups, None))
}

/// A field of a `block_configs` entry that this tool does not model must be absent, null or
/// false: a searched block that replaces its mixer or MLP by one linear layer, or attends to
/// sink tokens, is refused rather than priced as something else.
fn nas_unmodelled(part: &serde_json::Map<String, Value>, i: usize, name: &str, keys: &[&str]) -> Result<(), String> {
    for key in keys {
        match part.get(*key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {}
            Some(v) => return Err(format!("field `block_configs[{i}].{name}.{key}` is {v}; this tool models only absent, null or false")),
        }
    }
    Ok(())
}

fn nas_flag(part: &serde_json::Map<String, Value>, i: usize, name: &str, key: &str) -> Result<bool, String> {
    match part.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(format!("field `block_configs[{i}].{name}.{key}` is {v}; expected true or false")),
    }
}

fn nas_attention(part: &serde_json::Map<String, Value>, i: usize, heads: u32, head_dim: u32) -> Result<Attention, String> {
    nas_unmodelled(part, i, "attention", &["replace_with_linear", "sparsify", "num_sink_tokens"])?;
    if nas_flag(part, i, "attention", "no_op")? {
        return Ok(Attention::None);
    }
    let group = part.get("n_heads_in_group").and_then(Value::as_u64).filter(|g| *g >= 1 && *g <= heads as u64);
    let Some(group) = group.filter(|g| (heads as u64).is_multiple_of(*g)) else {
        return Err(format!(
            "field `block_configs[{i}].attention.n_heads_in_group` is {}; expected a divisor of `num_attention_heads` ({heads})",
            part.get("n_heads_in_group").unwrap_or(&Value::Null)
        ));
    };
    let window = match part.get("window_length") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64().and_then(|w| u32::try_from(w).ok()).filter(|w| *w >= 1 && *w as u64 <= crate::model::MAX_CONTEXT).ok_or(format!(
                "field `block_configs[{i}].attention.window_length` is {v}; expected a token count from 1 to {}",
                crate::model::MAX_CONTEXT
            ))?,
        ),
    };
    Ok(Attention::Gqa {
        heads,
        kv_heads: heads / group as u32,
        head_dim,
        qk_norm: false,
        bias: false,
        sliding_window: window,
        output_gate: false,
        rotary_fraction: 1.0,
        value_is_key: false,
        value_head_dim: None,
        block_sparse: None,
    })
}

/// DeciLM's MLP width from `ffn_mult`: 2/3 of `ffn_mult` × hidden (a SwiGLU's share of a
/// 4 × hidden MLP), truncated, then rounded up to a multiple of 256 (`_ffn_mult_to_intermediate_size`
/// in its modelling code: 5.25 × 8192 gives Llama 3 70B's 28,672).
fn nas_mlp(part: &serde_json::Map<String, Value>, i: usize, hidden: u64, bias: bool) -> Result<Mlp, String> {
    nas_unmodelled(part, i, "ffn", &["replace_with_linear", "sparsify"])?;
    if nas_flag(part, i, "ffn", "no_op")? {
        return Ok(Mlp::None);
    }
    let mult = part.get("ffn_mult").and_then(Value::as_f64).filter(|m| *m > 0.0 && *m <= 64.0).ok_or(format!(
        "field `block_configs[{i}].ffn.ffn_mult` is {}; expected a number above 0 and at most 64",
        part.get("ffn_mult").unwrap_or(&Value::Null)
    ))?;
    let raw = (2.0 * mult * hidden as f64 / 3.0) as u64;
    Ok(Mlp::Dense { intermediate_size: raw.div_ceil(256) * 256, bias, gated: true })
}
