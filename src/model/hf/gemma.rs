//! Gemma 4 (`gemma4`, its text model `gemma4_text`): sliding-window and global attention layers
//! of different shapes, and in the MoE releases a routed MoE beside each layer's dense MLP.

use super::{Attention, Fields, LayerGroup, Mlp, Parsed};

/// Gemma 4: `layer_types` marks each layer `sliding_attention` (GQA of `num_key_value_heads`
/// heads of `head_dim`, a `sliding_window`) or `full_attention` (`num_global_key_value_heads`
/// heads of `global_head_dim`, rotary on the full layers' `partial_rotary_factor`, and with
/// `attention_k_eq_v` no value projection); every layer normalises Q and K per head. The MLP is
/// gated (GeGLU) of `intermediate_size`; with `enable_moe_block` each layer also routes its
/// tokens to `top_k_experts` of `num_experts` experts of `moe_intermediate_size`, the dense MLP
/// then being the layer's always-active (shared) part. The vision and audio towers are not
/// modelled (text prompts only). Per-layer input embeddings, KV sharing across layers and the
/// double-wide MLP of the small releases are refused.
pub(super) fn gemma4(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    for (key, what) in [("hidden_size_per_layer_input", "per-layer input embeddings"), ("num_kv_shared_layers", "KV shared across layers")]
    {
        if let Some(v) = f.u64_opt(key)?.filter(|v| *v > 0) {
            return Err(format!("field `{}` is {v}: {what} are not modelled", f.name(key)));
        }
    }
    if f.bool_or("use_double_wide_mlp", false)? {
        return Err(format!("field `{}` is true: the double-wide MLP is not modelled", f.name("use_double_wide_mlp")));
    }
    let types = f.str_list("layer_types")?.ok_or("required field `layer_types` is missing")?;
    if types.len() != n as usize {
        return Err(format!("field `layer_types` has {} entries but `num_hidden_layers` is {n}", types.len()));
    }
    let heads = f.u32("num_attention_heads")?;
    let sliding = Attention::Gqa {
        heads,
        kv_heads: f.u32("num_key_value_heads")?,
        head_dim: f.u32("head_dim")?,
        qk_norm: true,
        bias: f.bool_or("attention_bias", false)?,
        sliding_window: Some(f.u32("sliding_window")?),
        output_gate: false,
        rotary_fraction: 1.0,
        value_is_key: false,
        value_head_dim: None,
        block_sparse: None,
    };
    let rotary = match f.get("rope_parameters").and_then(|r| r.get("full_attention")).and_then(|r| r.get("partial_rotary_factor")) {
        None => 1.0,
        Some(v) => v.as_f64().ok_or("field `rope_parameters.full_attention.partial_rotary_factor` must be a number")?,
    };
    let full = Attention::Gqa {
        heads,
        kv_heads: f.u32_opt("num_global_key_value_heads")?.map_or_else(|| f.u32("num_key_value_heads"), Ok)?,
        head_dim: f.u32_opt("global_head_dim")?.map_or_else(|| f.u32("head_dim"), Ok)?,
        qk_norm: true,
        bias: f.bool_or("attention_bias", false)?,
        sliding_window: None,
        output_gate: false,
        rotary_fraction: rotary,
        value_is_key: f.bool_or("attention_k_eq_v", false)?,
        value_head_dim: None,
        block_sparse: None,
    };
    let intermediate = f.u64("intermediate_size")?;
    let mlp = if f.bool_or("enable_moe_block", false)? {
        Mlp::swiglu_moe(f.u32("num_experts")?, f.u32("top_k_experts")?, f.u64("moe_intermediate_size")?, intermediate)
    } else {
        Mlp::Dense { intermediate_size: intermediate, bias: false, gated: true }
    };
    let (mut n_sliding, mut n_full) = (0, 0);
    for (i, t) in types.iter().enumerate() {
        match t.as_str() {
            "sliding_attention" => n_sliding += 1,
            "full_attention" => n_full += 1,
            other => return Err(format!("field `layer_types[{i}]` is `{other}`; expected sliding_attention or full_attention")),
        }
    }
    let groups = [(n_sliding, sliding), (n_full, full)]
        .into_iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, attention)| LayerGroup { count, attention, mlp: mlp.clone() })
        .collect();
    Ok((groups, None))
}
