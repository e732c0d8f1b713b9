//! Xiaomi MiMo-V2-Flash (`mimo_v2_flash`): full and sliding-window GQA layers of their own head
//! counts, keys and queries wider than values, a dense first layer and MoE layers after it.

use super::{Attention, Fields, LayerGroup, Mlp, MtpBlock, Parsed};

/// MiMo-V2-Flash: `hybrid_layer_pattern` marks each layer full attention (0) or sliding-window
/// (1), as Xiaomi's own model code reads it (`is_swa_layer = hybrid_layer_pattern[i] == 1`:
/// five sliding layers to one full, 39 and 9 of the 48). Full layers are GQA of
/// `num_attention_heads` and `num_key_value_heads`, sliding ones of `swa_num_attention_heads`
/// and `swa_num_key_value_heads` over a `sliding_window_size` window; queries and keys are
/// `head_dim` (`swa_head_dim`) wide and values `v_head_dim` (`swa_v_head_dim`), rotary on
/// `partial_rotary_factor` of the key. `moe_layer_freq` marks the MoE layers: `n_routed_experts`
/// experts of `moe_intermediate_size`, `num_experts_per_tok` routed, `n_shared_experts` of the
/// same size (null: none); the others a gated MLP of `intermediate_size`. MTP layers, where the
/// config counts them, are a sliding layer with the dense MLP (the MiMo-V2-Flash report's
/// "SWA and a dense FFN"). The attention sinks and value scale cost nothing worth pricing.
pub(super) fn mimo_v2_flash(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let pattern = f.u32_list("hybrid_layer_pattern")?;
    let moe_freq = f.u32_list("moe_layer_freq")?;
    for (key, list) in [("hybrid_layer_pattern", &pattern), ("moe_layer_freq", &moe_freq)] {
        if list.len() != n as usize {
            return Err(format!("field `{}` has {} entries but `num_hidden_layers` is {n}", f.name(key), list.len()));
        }
        if let Some((i, v)) = list.iter().enumerate().find(|(_, v)| **v > 1) {
            return Err(format!("field `{}[{i}]` is {v}; expected 0 or 1", f.name(key)));
        }
    }
    let full = layer_attention(f, "num_attention_heads", "num_key_value_heads", "head_dim", "v_head_dim", None)?;
    let window_key = if f.get("sliding_window_size").is_some() { "sliding_window_size" } else { "sliding_window" };
    let window = f.u32(window_key)?;
    if window == 0 {
        return Err(format!("field `{}` is 0; expected a positive window", f.name(window_key)));
    }
    let sliding = layer_attention(f, "swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim", Some(window))?;
    let dense = Mlp::Dense { intermediate_size: f.u64("intermediate_size")?, bias: false, gated: true };
    let moe = super::routed_and_shared_moe(f)?;
    let mut groups: Vec<LayerGroup> = Vec::new();
    for (a, m) in pattern.iter().zip(&moe_freq) {
        let attention = if *a == 1 { sliding.clone() } else { full.clone() };
        let mlp = if *m == 1 { moe.clone() } else { dense.clone() };
        super::add_layer(&mut groups, attention, mlp);
    }
    let mtp = match f.u32_opt("num_nextn_predict_layers")? {
        Some(layers) if layers > 0 => Some(MtpBlock { layers, attention: sliding, mlp: dense }),
        _ => None,
    };
    Ok((groups, mtp))
}

/// One kind of MiMo-V2-Flash attention layer from its own keys; a sliding layer's keys fall
/// back to the full layers' where the config leaves them out.
fn layer_attention(f: &Fields, heads: &str, kv_heads: &str, hd: &str, vd: &str, window: Option<u32>) -> Result<Attention, String> {
    // A field the config gives is named in any error about it; a missing one falls back.
    let or_full = |key: &str, full: &str| -> Result<u32, String> {
        let used = if f.get(key).is_some() { key } else { full };
        match f.u32(used)? {
            0 => Err(format!("field `{}` is 0; expected a positive integer", f.name(used))),
            v => Ok(v),
        }
    };
    let head_dim = or_full(hd, "head_dim")?;
    let value_head_dim = match (f.get(vd), f.get("v_head_dim")) {
        (None, None) => None,
        _ => Some(or_full(vd, "v_head_dim")?),
    };
    let heads_field = if f.get(heads).is_some() { heads } else { "num_attention_heads" };
    let (heads, kv_heads) = (or_full(heads, "num_attention_heads")?, or_full(kv_heads, "num_key_value_heads")?);
    if heads % kv_heads != 0 {
        return Err(format!("field `{}` is {heads}; it must be a multiple of the {kv_heads} KV heads", f.name(heads_field)));
    }
    let rotary = f.f64_opt("partial_rotary_factor")?.unwrap_or(1.0);
    Ok(Attention::Gqa {
        heads,
        kv_heads,
        head_dim,
        qk_norm: false,
        bias: f.bool_or("attention_bias", false)?,
        sliding_window: window,
        output_gate: false,
        rotary_fraction: rotary,
        value_is_key: false,
        value_head_dim: value_head_dim.filter(|v| *v != head_dim),
        block_sparse: None,
    })
}
