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
    if moe_freq.len() != n as usize {
        return Err(format!("field `moe_layer_freq` has {} entries but `num_hidden_layers` is {n}", moe_freq.len()));
    }
    if let Some((i, v)) = moe_freq.iter().enumerate().find(|(_, v)| **v > 1) {
        return Err(format!("field `moe_layer_freq[{i}]` is {v}; expected 0 or 1"));
    }
    let dense_attention = minimax_gqa(f)?;
    let (sparse, sparse_freq) = match sparse_attention(f, n)? {
        Some((sparse, freq)) => (Some(sparse), freq),
        None => (None, vec![0; n as usize]),
    };
    let mut sparse_attention = dense_attention.clone();
    if let Attention::Gqa { block_sparse, kv_heads, .. } = &mut sparse_attention {
        if let Some(b) = sparse.filter(|b| b.index_heads != *kv_heads) {
            return Err(format!(
                "field `{}.sparse_num_index_heads` is {}; this tool splits index heads over TP as the KV heads, one per KV head ({kv_heads})",
                f.name("sparse_attention_config"),
                b.index_heads
            ));
        }
        *block_sparse = sparse;
    }
    let dense = Mlp::Dense { intermediate_size: f.u64("dense_intermediate_size")?, bias: false, gated: true };
    let shared = match (f.u64_opt("n_shared_experts")?, f.u64_opt("shared_intermediate_size")?) {
        (Some(0), _) | (None, None) => 0,
        (count, Some(size)) => count.unwrap_or(1) * size,
        (Some(count), None) => return Err(format!("field `shared_intermediate_size` is missing; `n_shared_experts` is {count}")),
    };
    // The multimodal release's text model names the expert width `intermediate_size`.
    let expert_i = f.u64_opt("moe_intermediate_size")?.map_or_else(|| f.u64("intermediate_size"), Ok)?;
    let moe = Mlp::swiglu_moe(f.u32("num_local_experts")?, f.u32("num_experts_per_tok")?, expert_i, shared);
    let mut groups: Vec<LayerGroup> = Vec::new();
    for (m, s) in moe_freq.iter().zip(&sparse_freq) {
        let attention = if *s == 1 { sparse_attention.clone() } else { dense_attention.clone() };
        let mlp = if *m == 1 { moe.clone() } else { dense.clone() };
        super::add_layer(&mut groups, attention, mlp);
    }
    Ok((groups, None))
}

/// MiniMax's GQA (M2 and M3): Q and K normalised (`use_qk_norm`; over the whole projection in
/// M2, per head in M3, the same cost), rotary on `rotary_dim` of each head, an output gate where
/// `attention_output_gate` says so.
pub(super) fn minimax_gqa(f: &Fields) -> Result<Attention, String> {
    let mut attention = super::gqa(f, None)?;
    if let Attention::Gqa { qk_norm, rotary_fraction, head_dim, output_gate, .. } = &mut attention {
        *qk_norm = f.bool_or("use_qk_norm", true)?;
        *output_gate = f.bool_or("attention_output_gate", false)?;
        if let Some(rot) = f.u32_opt("rotary_dim")? {
            if rot == 0 || rot > *head_dim {
                return Err(format!("field `{}` is {rot}; expected 1 to `head_dim` ({head_dim})", f.name("rotary_dim")));
            }
            *rotary_fraction = rot as f64 / *head_dim as f64;
        }
    }
    Ok(attention)
}

/// `sparse_attention_config`: absent, or with `use_sparse_attention` false, no layer is sparse;
/// on, its block fields and the per-layer `sparse_attention_freq` (0 or 1, one per layer).
fn sparse_attention(f: &Fields, n: u32) -> Result<Option<(BlockSparse, Vec<u32>)>, String> {
    let name = f.name("sparse_attention_config");
    let cfg = match f.get("sparse_attention_config") {
        None => return Ok(None),
        Some(Value::Object(cfg)) => cfg,
        Some(v) => return Err(format!("field `{name}` is {v}; expected an object")),
    };
    match cfg.get("use_sparse_attention") {
        Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => return Ok(None),
        Some(v) => return Err(format!("field `{name}.use_sparse_attention` is {v}; expected true or false")),
        None => return Err(format!("field `{name}.use_sparse_attention` is missing")),
    }
    let freq = match cfg.get("sparse_attention_freq") {
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_f64()
                    .filter(|x| *x == 0.0 || *x == 1.0)
                    .map(|x| x as u32)
                    .ok_or_else(|| format!("field `{name}.sparse_attention_freq[{i}]` is {v}; expected 0 or 1"))
            })
            .collect::<Result<Vec<u32>, String>>()?,
        Some(v) => return Err(format!("field `{name}.sparse_attention_freq` is {v}; expected a list of 0 and 1")),
        None => return Err(format!("field `{name}.sparse_attention_freq` is missing")),
    };
    if freq.len() != n as usize {
        return Err(format!("field `{name}.sparse_attention_freq` has {} entries but `num_hidden_layers` is {n}", freq.len()));
    }
    let num = |k: &str| match cfg.get(k) {
        Some(v) => v
            .as_f64()
            .filter(|x| x.fract() == 0.0 && (1.0..=MAX_BLOCK_FIELD).contains(x))
            .map(|x| x as u32)
            .ok_or_else(|| format!("field `{name}.{k}` is {v}; expected an integer from 1 to {MAX_BLOCK_FIELD}")),
        None => Err(format!("field `{name}.{k}` is missing")),
    };
    let sparse = BlockSparse {
        index_heads: num("sparse_num_index_heads")?,
        index_head_dim: num("sparse_index_dim")?,
        block_size: num("sparse_block_size")?,
        top_blocks: num("sparse_topk_blocks")?,
    };
    if sparse.read_tokens() > crate::model::MAX_CONTEXT {
        return Err(format!(
            "fields `{name}.sparse_block_size` ({}) × `sparse_topk_blocks` ({}) read {} tokens; at most {} is modelled",
            sparse.block_size,
            sparse.top_blocks,
            sparse.read_tokens(),
            crate::model::MAX_CONTEXT
        ));
    }
    unmodelled_variants(cfg, &name, &freq)?;
    Ok(Some((sparse, freq)))
}

/// MSA's variants this tool does not price, refused by name: an index value path in a sparse
/// layer (`sparse_disable_index_value` 0 there adds index value and output projections; the
/// dense layers' entries do not matter), initial blocks every query reads
/// (`sparse_init_block`), a local block other than the one among the top blocks
/// (`sparse_local_block`), and a block score other than the max of its tokens'.
fn unmodelled_variants(cfg: &serde_json::Map<String, Value>, name: &str, sparse_layers: &[u32]) -> Result<(), String> {
    let disabled = |v: &Value| matches!(v.as_f64(), Some(x) if x == 1.0) || matches!(v, Value::Bool(true));
    let index_value = match cfg.get("sparse_disable_index_value") {
        None => None,
        Some(Value::Array(a)) => a.iter().zip(sparse_layers).find(|(v, s)| **s == 1 && !disabled(v)).map(|(v, _)| v),
        Some(v) => Some(v).filter(|v| !disabled(v)),
    };
    if let Some(v) = index_value {
        return Err(format!(
            "field `{name}.sparse_disable_index_value` holds {v} for a sparse layer; only 1 (no index value path) is modelled"
        ));
    }
    for (key, want) in [("sparse_init_block", 0.0), ("sparse_local_block", 1.0)] {
        if let Some(v) = cfg.get(key).filter(|v| v.as_f64() != Some(want)) {
            return Err(format!("field `{name}.{key}` is {v}; only {want} is modelled"));
        }
    }
    match cfg.get("sparse_score_type") {
        None => Ok(()),
        Some(Value::String(t)) if t == "max" => Ok(()),
        Some(v) => Err(format!("field `{name}.sparse_score_type` is {v}; only \"max\" is modelled")),
    }
}

/// The largest index-head count, width, block size or block count read.
const MAX_BLOCK_FIELD: f64 = 1_048_576.0;
