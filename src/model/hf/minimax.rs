//! MiniMax-M3 (`minimax_m3`): MiniMax-M2's GQA with MiniMax Sparse Attention in most layers, a
//! few dense layers first and then a MoE with a shared expert.

use super::{Attention, BlockSparse, Fields, LayerGroup, Mlp, Parsed};
use serde_json::Value;

/// MiniMax-M3: every layer GQA of `num_attention_heads` and `num_key_value_heads` heads of
/// `head_dim`, Q and K normalised per head (`use_qk_norm`), rotary on `rotary_dim` of each head;
/// the layers `sparse_attention_config.sparse_attention_freq` marks attend through MSA (see
/// [`BlockSparse`]: `sparse_num_index_heads` index heads of `sparse_index_dim`, the
/// `sparse_topk_blocks` best blocks of `sparse_block_size` tokens); `moe_layer_freq` marks the
/// MoE layers (`num_local_experts` experts of `moe_intermediate_size`, `num_experts_per_tok`
/// routed, a shared expert of `shared_intermediate_size` per `n_shared_experts`), the others a
/// gated MLP of `dense_intermediate_size`. As for MiniMax-M2, the config's MTP modules are not
/// modelled.
pub(super) fn minimax_m3(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let moe_freq = f.u32_list("moe_layer_freq")?;
    let sparse_cfg = f.get("sparse_attention_config").and_then(Value::as_object);
    let sparse_on = sparse_cfg.and_then(|c| c.get("use_sparse_attention")).and_then(Value::as_bool).unwrap_or(false);
    let sparse_freq = match sparse_cfg.and_then(|c| c.get("sparse_attention_freq")) {
        Some(Value::Array(a)) if sparse_on => a
            .iter()
            .map(|v| v.as_u64().filter(|v| *v <= 1).map(|v| v as u32))
            .collect::<Option<Vec<u32>>>()
            .ok_or("field `sparse_attention_config.sparse_attention_freq` must be a list of 0 and 1")?,
        _ => vec![0; n as usize],
    };
    for (key, list) in [("moe_layer_freq", &moe_freq), ("sparse_attention_config.sparse_attention_freq", &sparse_freq)] {
        if list.len() != n as usize {
            return Err(format!("field `{key}` has {} entries but `num_hidden_layers` is {n}", list.len()));
        }
    }
    if let Some((i, v)) = moe_freq.iter().enumerate().find(|(_, v)| **v > 1) {
        return Err(format!("field `moe_layer_freq[{i}]` is {v}; expected 0 or 1"));
    }
    let mut dense_attention = super::gqa(f, None)?;
    if let Attention::Gqa { qk_norm, rotary_fraction, head_dim, .. } = &mut dense_attention {
        *qk_norm = f.bool_or("use_qk_norm", true)?;
        if let Some(rot) = f.u32_opt("rotary_dim")? {
            *rotary_fraction = rot as f64 / *head_dim as f64;
        }
    }
    let mut sparse_attention = dense_attention.clone();
    if let (Attention::Gqa { block_sparse, .. }, Some(cfg)) = (&mut sparse_attention, sparse_cfg) {
        *block_sparse = Some(block_sparse_of(cfg)?);
    }
    let dense = Mlp::Dense { intermediate_size: f.u64("dense_intermediate_size")?, bias: false, gated: true };
    let shared = f.u64_opt("shared_intermediate_size")?.unwrap_or(0) * f.u64_opt("n_shared_experts")?.unwrap_or(1);
    let moe = Mlp::swiglu_moe(f.u32("num_local_experts")?, f.u32("num_experts_per_tok")?, f.u64("moe_intermediate_size")?, shared);
    let mut groups: Vec<LayerGroup> = Vec::new();
    for (m, s) in moe_freq.iter().zip(&sparse_freq) {
        let attention = if *s == 1 { sparse_attention.clone() } else { dense_attention.clone() };
        let mlp = if *m == 1 { moe.clone() } else { dense.clone() };
        match groups.iter_mut().find(|g| g.attention == attention && g.mlp == mlp) {
            Some(g) => g.count += 1,
            None => groups.push(LayerGroup { count: 1, attention, mlp }),
        }
    }
    Ok((groups, None))
}

fn block_sparse_of(cfg: &serde_json::Map<String, Value>) -> Result<BlockSparse, String> {
    let num = |k: &str| {
        cfg.get(k)
            .and_then(Value::as_u64)
            .filter(|v| (1..=1 << 20).contains(v))
            .map(|v| v as u32)
            .ok_or_else(|| format!("field `sparse_attention_config.{k}` must be an integer from 1 to 1048576"))
    };
    Ok(BlockSparse {
        index_heads: num("sparse_num_index_heads")?,
        index_head_dim: num("sparse_index_dim")?,
        block_size: num("sparse_block_size")?,
        top_blocks: num("sparse_topk_blocks")?,
    })
}
