//! StepFun Step-3.7-Flash (`step3p7`): GQA layers, full or sliding-window as `layer_types`
//! says, a few dense MLP layers and then a MoE with a shared expert, and MTP layers.

use super::{Fields, LayerGroup, Mlp, MtpBlock, Parsed};

/// Step-3.7-Flash: every layer GQA of `num_attention_heads` and `num_key_value_heads` heads of
/// `head_dim`, a `sliding_window` in the layers `layer_types` marks `sliding_attention`; the
/// first `first_k_dense_replace` layers a gated MLP of `intermediate_size`, the rest a MoE of
/// `num_experts` experts of `moe_intermediate_size` (`num_experts_per_tok` routed) and
/// `n_shared_experts` shared experts of `share_expert_dim`; `num_nextn_predict_layers` MTP
/// layers of a full-attention MoE layer's shape.
pub(super) fn step3p7(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let types = f.str_list("layer_types")?.ok_or("required field `layer_types` is missing")?;
    if types.len() != n as usize {
        return Err(format!("field `layer_types` has {} entries but `num_hidden_layers` is {n}", types.len()));
    }
    let dense_count = f.u32_opt("first_k_dense_replace")?.unwrap_or(0).min(n);
    let full = super::gqa(f, None)?;
    let sliding = super::gqa(f, Some(f.u32("sliding_window")?))?;
    let dense = Mlp::Dense { intermediate_size: f.u64("intermediate_size")?, bias: false, gated: true };
    let moe = Mlp::swiglu_moe(
        f.u32("num_experts")?,
        f.u32("num_experts_per_tok")?,
        f.u64("moe_intermediate_size")?,
        f.u64_opt("share_expert_dim")?.unwrap_or(0) * f.u64_opt("n_shared_experts")?.unwrap_or(1),
    );
    let mut groups: Vec<LayerGroup> = Vec::new();
    for (i, t) in types.iter().enumerate() {
        let attention = match t.as_str() {
            "full_attention" => full.clone(),
            "sliding_attention" => sliding.clone(),
            other => return Err(format!("field `layer_types[{i}]` is `{other}`; expected full_attention or sliding_attention")),
        };
        let mlp = if (i as u32) < dense_count { dense.clone() } else { moe.clone() };
        super::add_layer(&mut groups, attention, mlp);
    }
    let mtp = match f.u32_opt("num_nextn_predict_layers")? {
        Some(layers) if layers > 0 => Some(MtpBlock { layers, attention: full, mlp: moe }),
        _ => None,
    };
    Ok((groups, mtp))
}
