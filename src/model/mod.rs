//! What the network computes: a decoder described as groups of identical layers (attention kind
//! × MLP kind), optional MTP (next-token prediction) layers and an optional vision tower.
//!
//! Models come from Hugging Face `config.json` files ([`hf`]) or from the built-in catalog
//! ([`catalog`], stored in this project's own YAML format under `profiles/models/`). Everything
//! downstream (cost model, memory model) reads only [`ModelArch`].

pub mod catalog;
pub mod hf;
mod resolve;

pub use resolve::{checkpoint_in, fp8_release_weights, modelopt_kv, network_key, resolve_model, ModelError, ModelSource};

use serde::{Deserialize, Serialize};

/// Most decoder (or MTP, or vision) layers a config may declare; real models have under 200.
pub const MAX_LAYERS: u64 = 1024;
/// Most experts (routed, shared or per token) a config may declare; real models have under 400.
pub const MAX_EXPERTS: u64 = 4096;
/// Most attention heads of any kind.
pub const MAX_HEADS: u64 = 4096;
/// Largest vocabulary (real ones are under 300 k).
pub const MAX_VOCAB: u64 = 1 << 24;
/// Largest context length or sliding window.
pub const MAX_CONTEXT: u64 = 1 << 32;
/// Largest hidden, intermediate or head dimension (real ones are under 100 k): keeps every
/// parameter and FLOP count far from overflow.
pub const MAX_DIM: u64 = 1 << 20;

/// A decoder-only language model (optionally with a vision encoder in front).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelArch {
    /// Hugging Face id (or the path the config was read from).
    pub id: String,
    /// The HF `model_type` this was read from.
    pub model_type: String,
    pub hidden_size: u64,
    pub vocab_size: u64,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_position_embeddings: Option<u64>,
    /// Decoder layers grouped by kind; the order of groups carries no meaning for the cost.
    pub layers: Vec<LayerGroup>,
    /// Next-token-prediction layers shipped with the model (DeepSeek `num_nextn_predict_layers`,
    /// Qwen3.5 `mtp_num_hidden_layers`); needed for `--num-mtp-tokens > 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtp: Option<MtpBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<VisionTower>,
    /// How the published checkpoint stores its weights (its `quantization_config`): what a
    /// run is priced in when the user does not choose a quantization.
    #[serde(default, skip_serializing_if = "WeightFormat::is_bf16")]
    pub weights: WeightFormat,
    /// The checkpoint quantizes its KV cache to FP8 (ModelOpt's `kv_cache_quant_algo: FP8`,
    /// compressed-tensors' `kv_cache_scheme`): engines then keep the cache in FP8.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_kv_cache: bool,
}

/// The weight format a checkpoint ships in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightFormat {
    /// bf16 (or fp16) weights.
    #[default]
    Bf16,
    /// FP8 E4M3 with one scale per tensor or channel (ModelOpt, llm-compressor, fbgemm FP8).
    Fp8Tensor,
    /// FP8 E4M3 in 128 × 128 blocks (DeepSeek-V3, Kimi-K2 and Qwen3 FP8 checkpoints).
    Fp8Block,
    /// MXFP4 routed experts, everything else bf16 (gpt-oss).
    Mxfp4Experts,
    /// NVFP4 (ModelOpt): FP4 in groups of 16 with FP8 scales.
    Nvfp4,
    /// INT4 routed experts, weight-only in groups of 32 with a bf16 scale each (W4A16,
    /// compressed-tensors `pack-quantized`), everything else bf16 (Kimi-K2.5, Kimi-K2-Thinking).
    Int4Experts,
    /// NVFP4 MLPs (routed, shared and dense), attention projections kept in bf16: NVIDIA's
    /// ModelOpt NVFP4 checkpoints of GLM-5, Kimi-K2.5 and MiniMax-M2.5 (their
    /// `exclude_modules` list every `self_attn` projection).
    Nvfp4Mlp,
    /// NVFP4 MLPs (routed, shared and dense) and FP8 token-mixer projections: NVIDIA's
    /// ModelOpt `MIXED_PRECISION` releases of Qwen3.6 and Nemotron 3.5 Lightning.
    Nvfp4MlpFp8Attention,
    /// NVFP4 routed experts, every other linear (attention's and the indexer's projections,
    /// shared experts, dense MLPs) in 8-bit floats: NVIDIA's ModelOpt release of MiniMax-M3,
    /// whose other linears are MXFP8 (E4M3 with a power-of-two scale per 32 weights, priced as
    /// FP8: 3 % fewer bytes; Blackwell's MXFP8 matrix rate is its FP8 rate, and Hopper, which
    /// has no MXFP8 instructions, reaches at most its FP8 rate).
    Nvfp4ExpertsFp8,
}

impl WeightFormat {
    pub fn is_bf16(&self) -> bool {
        *self == WeightFormat::Bf16
    }
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Fp8Tensor => "fp8",
            WeightFormat::Fp8Block => "fp8 (128 x 128 blocks)",
            WeightFormat::Mxfp4Experts => "mxfp4 experts",
            WeightFormat::Nvfp4 => "nvfp4",
            WeightFormat::Int4Experts => "int4 experts (W4A16, groups of 32)",
            WeightFormat::Nvfp4Mlp => "nvfp4 MLPs, bf16 attention",
            WeightFormat::Nvfp4MlpFp8Attention => "nvfp4 MLPs, fp8 attention",
            WeightFormat::Nvfp4ExpertsFp8 => "nvfp4 experts, fp8 other linears",
        }
    }
}

/// `count` identical decoder layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerGroup {
    pub count: u32,
    pub attention: Attention,
    pub mlp: Mlp,
}

/// The token mixer of a layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Attention {
    /// Multi-head / grouped-query attention with a per-token KV cache.
    Gqa {
        heads: u32,
        kv_heads: u32,
        head_dim: u32,
        #[serde(default, skip_serializing_if = "is_false")]
        qk_norm: bool,
        #[serde(default, skip_serializing_if = "is_false")]
        bias: bool,
        /// Sliding-window layers attend to at most this many recent tokens.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sliding_window: Option<u32>,
        /// Qwen3.5-style sigmoid output gate (doubles the q projection).
        #[serde(default, skip_serializing_if = "is_false")]
        output_gate: bool,
        /// Fraction of the head dim that gets rotary embedding.
        #[serde(default = "one", skip_serializing_if = "is_one")]
        rotary_fraction: f64,
        /// The values are the keys (Gemma 4's global layers, `attention_k_eq_v`): no value
        /// projection. The paged cache still holds a key and a value plane per token, as the
        /// engines' attention layers write both.
        #[serde(default, skip_serializing_if = "is_false")]
        value_is_key: bool,
        /// The width of a value head where it differs from the query and key heads'
        /// `head_dim` (MiMo-V2-Flash: keys of 192, values of 128); `None`: `head_dim`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value_head_dim: Option<u32>,
        /// Block-sparse attention (MiniMax-M3's MSA): an indexer picks, for each query, the
        /// blocks of the cache the attention reads.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        block_sparse: Option<BlockSparse>,
    },
    /// DeepSeek multi-head latent attention: a compressed latent KV cache shared by all heads.
    Mla {
        heads: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        q_lora_rank: Option<u32>,
        kv_lora_rank: u32,
        qk_nope_head_dim: u32,
        qk_rope_head_dim: u32,
        v_head_dim: u32,
        /// DeepSeek Sparse Attention (GLM-5, DeepSeek-V3.2): a lightning indexer scores every
        /// cached token for each query and the attention proper reads only the top-k.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        indexer: Option<SparseIndexer>,
    },
    /// Gated DeltaNet linear attention: a constant-size recurrent state per sequence.
    LinearAttention { key_heads: u32, value_heads: u32, key_head_dim: u32, value_head_dim: u32, conv_kernel: u32 },
    /// Mamba-2 state-space mixer (Nemotron-H): `heads` heads of `head_dim` channels, each with a
    /// `state_size` state per channel, B and C shared by `groups` groups; a constant-size state
    /// per sequence (fp32) and a causal convolution of `conv_kernel` taps.
    Mamba2 { heads: u32, head_dim: u32, state_size: u32, groups: u32, conv_kernel: u32 },
    /// No token mixer: a block that is only an MLP (Nemotron-H's `-` and `E` blocks).
    None,
}

/// MiniMax Sparse Attention (MSA), as MiniMax-M3's `sparse_attention_config` and MiniMax's MSA
/// kernels describe it: `index_heads` index query heads of `index_head_dim` (one per KV head,
/// split over TP as the KV heads are; MSA's kernels take 1, 2 or 4 local index heads) score
/// each query against one index key cached per token beside K and V (a single key head, the
/// same on every rank); the scores are pooled per block of
/// `block_size` tokens and the `top_blocks` best blocks (the query's own local block among them)
/// are all the attention reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockSparse {
    pub index_heads: u32,
    pub index_head_dim: u32,
    pub block_size: u32,
    pub top_blocks: u32,
}

impl BlockSparse {
    /// The most cached tokens one query's attention reads.
    pub fn read_tokens(&self) -> u64 {
        self.block_size as u64 * self.top_blocks as u64
    }

    /// Parameters: the index query projection (`index_heads` heads) and the one index key
    /// head's, both from the hidden state.
    pub fn params(&self, hidden: u64) -> u64 {
        hidden * (self.index_heads as u64 + 1) * self.index_head_dim as u64
    }
}

/// The lightning indexer of DeepSeek Sparse Attention: `heads` small query heads of
/// `head_dim` (projected from the query's low-rank latent) score each query against one
/// `head_dim`-wide key per cached token (its own FP8 cache beside MLA's latent), and the
/// `top_k` best keys are the only ones the attention reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseIndexer {
    pub heads: u32,
    pub head_dim: u32,
    pub top_k: u32,
}

impl SparseIndexer {
    /// Bytes the indexer caches per token and layer: an FP8 key and its fp32 scale.
    pub fn cache_bytes(&self) -> f64 {
        self.head_dim as f64 + 4.0
    }

    /// Parameters: the query projection from the `q_lora`-wide latent (or the hidden state),
    /// the key projection and the per-head weights from the hidden state.
    pub fn params(&self, hidden: u64, q_in: u64) -> u64 {
        let (h, d) = (self.heads as u64, self.head_dim as u64);
        q_in * h * d + hidden * d + hidden * h
    }
}

/// The channel mixer of a layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Mlp {
    /// Gated MLP (SwiGLU): gate and up projections to `intermediate_size`, down back; with
    /// `gated: false` one up projection and a squared ReLU (Nemotron-H).
    Dense {
        intermediate_size: u64,
        #[serde(default, skip_serializing_if = "is_false")]
        bias: bool,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        gated: bool,
    },
    /// Routed experts (each a gated MLP) with top-k routing, plus optional shared experts.
    Moe {
        experts: u32,
        top_k: u32,
        expert_intermediate_size: u64,
        /// Total intermediate size of the always-on shared expert(s); 0 = none.
        #[serde(default, skip_serializing_if = "is_zero")]
        shared_intermediate_size: u64,
        #[serde(default, skip_serializing_if = "is_false")]
        bias: bool,
        /// Whether the experts (and the shared expert) are gated; `false`: up, squared ReLU,
        /// down (Nemotron-H).
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        gated: bool,
        /// Latent MoE (Nemotron 3 Super): the routed experts work at this width, the tokens
        /// projected down to it before them and back up after (the router and the shared
        /// expert see the full hidden state).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        latent_size: Option<u64>,
    },
    /// No channel mixer: a block that is only a token mixer (Nemotron-H's `M` and `*` blocks).
    None,
}

/// The MTP module: `layers` decoder layers (each with an input projection of [embedding;
/// hidden] → hidden) that draft the next tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MtpBlock {
    pub layers: u32,
    pub attention: Attention,
    pub mlp: Mlp,
}

/// A ViT-style vision encoder (Qwen3-VL): patches → transformer → merger into LLM tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisionTower {
    pub depth: u32,
    pub hidden_size: u64,
    pub intermediate_size: u64,
    pub heads: u32,
    pub patch_size: u32,
    pub spatial_merge_size: u32,
    pub temporal_patch_size: u32,
    pub in_channels: u32,
    pub out_hidden_size: u64,
    /// Extra mergers feeding intermediate layers into the LLM (Qwen3-VL deepstack).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub deepstack_mergers: u32,
}

fn is_false(b: &bool) -> bool {
    !*b
}
fn is_true(b: &bool) -> bool {
    *b
}
fn yes() -> bool {
    true
}
fn is_zero(v: &u64) -> bool {
    *v == 0
}
fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}
fn one() -> f64 {
    1.0
}
fn is_one(v: &f64) -> bool {
    *v == 1.0
}

impl Attention {
    /// Query heads (the unit TP splits).
    pub fn heads(&self) -> u32 {
        match self {
            Attention::Gqa { heads, .. } | Attention::Mla { heads, .. } => *heads,
            Attention::LinearAttention { value_heads, .. } => *value_heads,
            Attention::Mamba2 { heads, .. } => *heads,
            Attention::None => 0,
        }
    }
    /// Parameters of the attention block (projections only).
    pub fn params(&self, hidden: u64) -> u64 {
        match *self {
            Attention::Gqa { heads, kv_heads, head_dim, output_gate, value_is_key, value_head_dim, block_sparse, .. } => {
                let vd = value_head_dim.unwrap_or(head_dim) as u64;
                let q = heads as u64 * (head_dim as u64 + if output_gate { vd } else { 0 });
                let kv = kv_heads as u64 * (head_dim as u64 + if value_is_key { 0 } else { vd });
                hidden * (q + kv) + heads as u64 * vd * hidden + block_sparse.map_or(0, |b| b.params(hidden))
            }
            Attention::Mla { heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, indexer } => {
                let h = heads as u64;
                let qd = (qk_nope_head_dim + qk_rope_head_dim) as u64;
                let q = match q_lora_rank {
                    Some(r) => hidden * r as u64 + r as u64 * h * qd,
                    None => hidden * h * qd,
                };
                let kv_a = hidden * (kv_lora_rank + qk_rope_head_dim) as u64;
                let kv_b = kv_lora_rank as u64 * h * (qk_nope_head_dim + v_head_dim) as u64;
                let index = indexer.map_or(0, |i| i.params(hidden, q_lora_rank.map_or(hidden, u64::from)));
                q + kv_a + kv_b + h * v_head_dim as u64 * hidden + index
            }
            Attention::LinearAttention { key_heads, value_heads, key_head_dim, value_head_dim, conv_kernel } => {
                let (kh, vh, dk, dv) = (key_heads as u64, value_heads as u64, key_head_dim as u64, value_head_dim as u64);
                let qkvz = hidden * (2 * kh * dk + 2 * vh * dv);
                let ba = hidden * 2 * vh;
                let conv = conv_kernel as u64 * (2 * kh * dk + vh * dv);
                qkvz + ba + conv + vh * dv * hidden
            }
            Attention::Mamba2 { heads, head_dim, state_size, groups, conv_kernel } => {
                let (inner, bc) = (heads as u64 * head_dim as u64, 2 * groups as u64 * state_size as u64);
                // in_proj to [z, x, B, C, dt], the convolution over [x, B, C], per-head A, D and
                // dt bias, the gated norm's weight, out_proj.
                hidden * (2 * inner + bc + heads as u64) + conv_kernel as u64 * (inner + bc) + 3 * heads as u64 + inner + inner * hidden
            }
            Attention::None => 0,
        }
    }
}

impl Mlp {
    /// Routed gated (SwiGLU) experts without biases or a latent width, as most MoE configs
    /// describe them, with `shared_intermediate_size` of shared expert (0: none).
    pub fn swiglu_moe(experts: u32, top_k: u32, expert_intermediate_size: u64, shared_intermediate_size: u64) -> Mlp {
        Mlp::Moe { experts, top_k, expert_intermediate_size, shared_intermediate_size, bias: false, gated: true, latent_size: None }
    }

    /// (total parameters, parameters active per token)
    pub fn params(&self, hidden: u64) -> (u64, u64) {
        match *self {
            Mlp::Dense { intermediate_size, gated, .. } => {
                let p = matrices(gated) * hidden * intermediate_size;
                (p, p)
            }
            Mlp::Moe { experts, top_k, expert_intermediate_size, shared_intermediate_size, gated, latent_size, .. } => {
                let width = latent_size.unwrap_or(hidden);
                let per = matrices(gated) * width * expert_intermediate_size;
                let shared = matrices(gated) * hidden * shared_intermediate_size;
                let router = hidden * experts as u64;
                let latent = latent_size.map_or(0, |l| 2 * hidden * l);
                (experts as u64 * per + shared + router + latent, top_k as u64 * per + shared + router + latent)
            }
            Mlp::None => (0, 0),
        }
    }
}

/// Weight matrices of an MLP: gate, up and down, or up and down.
fn matrices(gated: bool) -> u64 {
    if gated {
        3
    } else {
        2
    }
}

impl ModelArch {
    pub fn num_layers(&self) -> u32 {
        self.layers.iter().map(|g| g.count).sum()
    }

    pub fn is_moe(&self) -> bool {
        self.layers.iter().any(|g| matches!(g.mlp, Mlp::Moe { .. }))
    }

    /// Routed experts of the MoE layers (all MoE layers of a model share the count).
    pub fn num_experts(&self) -> Option<u32> {
        self.layers.iter().find_map(|g| match g.mlp {
            Mlp::Moe { experts, .. } => Some(experts),
            _ => None,
        })
    }

    pub fn uses_mla(&self) -> bool {
        self.layers.iter().any(|g| matches!(g.attention, Attention::Mla { .. }))
    }

    /// (total, active-per-token) parameters of the language model, embeddings included once.
    pub fn param_counts(&self) -> (u64, u64) {
        let h = self.hidden_size;
        let mut total = 0u64;
        let mut active = 0u64;
        for g in &self.layers {
            let a = g.attention.params(h);
            let (mt, ma) = g.mlp.params(h);
            total += g.count as u64 * (a + mt);
            active += g.count as u64 * (a + ma);
        }
        let emb = self.vocab_size * h;
        let head = if self.tie_word_embeddings { 0 } else { emb };
        (total + emb + head, active + emb + head)
    }

    /// One line for `--list-models`.
    pub fn summary(&self) -> String {
        let (total, active) = self.param_counts();
        let sparse = self.layers.iter().any(|g| matches!(g.attention, Attention::Mla { indexer: Some(_), .. }));
        let block_sparse = self.layers.iter().any(|g| matches!(g.attention, Attention::Gqa { block_sparse: Some(_), .. }));
        let kind = if sparse {
            "MLA+DSA+MoE"
        } else if block_sparse {
            "GQA+MSA+MoE"
        } else if self.uses_mla() {
            "MLA+MoE"
        } else if self.layers.iter().any(|g| matches!(g.attention, Attention::Mamba2 { .. })) {
            if self.is_moe() {
                "hybrid Mamba-2 MoE"
            } else {
                "hybrid Mamba-2"
            }
        } else if self.layers.iter().any(|g| matches!(g.attention, Attention::LinearAttention { .. })) {
            if self.is_moe() {
                "hybrid linear-attn MoE"
            } else {
                "hybrid linear-attn"
            }
        } else if self.is_moe() {
            "MoE"
        } else {
            "dense"
        };
        let params = if total == active {
            format!("{:.1}B", total as f64 / 1e9)
        } else {
            format!("{:.1}B total / {:.1}B active", total as f64 / 1e9, active as f64 / 1e9)
        };
        let mut extras = Vec::new();
        if let Some(m) = &self.mtp {
            extras.push(format!("MTP layers {}", m.layers));
        }
        if self.vision.is_some() {
            extras.push("vision".to_string());
        }
        let extras = if extras.is_empty() { String::new() } else { format!(", {}", extras.join(", ")) };
        format!("{} layers, hidden {}, {kind}, {params}{extras}", self.num_layers(), self.hidden_size)
    }

    /// Structural checks; the message names the field and the value.
    pub fn validate(&self) -> Result<(), String> {
        if self.hidden_size == 0 {
            return Err("`hidden_size` must be positive".into());
        }
        if self.vocab_size == 0 {
            return Err("`vocab_size` must be positive".into());
        }
        if self.layers.is_empty() || self.num_layers() == 0 {
            return Err("the model has no decoder layers (`num_hidden_layers` is 0)".into());
        }
        let blocks = self.layers.iter().map(|g| (&g.attention, &g.mlp)).chain(self.mtp.iter().map(|m| (&m.attention, &m.mlp)));
        for (att, mlp) in blocks {
            match *att {
                Attention::Gqa { heads, kv_heads, head_dim, sliding_window, rotary_fraction, value_head_dim, block_sparse, .. } => {
                    if value_head_dim == Some(0) {
                        return Err("`v_head_dim` must be positive".into());
                    }
                    if let Some(b) = block_sparse {
                        if b.index_heads == 0 || b.index_head_dim == 0 || b.block_size == 0 || b.top_blocks == 0 {
                            return Err(format!(
                                "sparse-attention fields `sparse_num_index_heads` ({}), `sparse_index_dim` ({}), `sparse_block_size` ({}) and `sparse_topk_blocks` ({}) must be positive",
                                b.index_heads, b.index_head_dim, b.block_size, b.top_blocks
                            ));
                        }
                    }
                    if heads == 0 || kv_heads == 0 || head_dim == 0 {
                        return Err(format!(
                            "`num_attention_heads` ({heads}), `num_key_value_heads` ({kv_heads}) and `head_dim` ({head_dim}) must be positive"
                        ));
                    }
                    if heads % kv_heads != 0 {
                        return Err(format!("`num_attention_heads` ({heads}) must be a multiple of `num_key_value_heads` ({kv_heads})"));
                    }
                    if sliding_window == Some(0) {
                        return Err("`sliding_window` must be positive".into());
                    }
                    if !(rotary_fraction > 0.0 && rotary_fraction <= 1.0) {
                        return Err(format!("`partial_rotary_factor` is {rotary_fraction}; it must be in (0, 1]"));
                    }
                }
                Attention::Mla { heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, q_lora_rank, indexer } => {
                    if heads == 0 || kv_lora_rank == 0 || qk_rope_head_dim == 0 || v_head_dim == 0 || qk_nope_head_dim == 0 {
                        return Err("MLA fields `num_attention_heads`, `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim` must be positive".into());
                    }
                    if let Some(i) = indexer {
                        if i.heads == 0 || i.head_dim == 0 || i.top_k == 0 {
                            return Err(format!(
                                "sparse-attention indexer fields `index_n_heads` ({}), `index_head_dim` ({}) and `index_topk` ({}) must be positive",
                                i.heads, i.head_dim, i.top_k
                            ));
                        }
                    }
                    if q_lora_rank == Some(0) {
                        return Err("`q_lora_rank` must be positive or null".into());
                    }
                }
                Attention::LinearAttention { key_heads, value_heads, key_head_dim, value_head_dim, conv_kernel } => {
                    if key_heads == 0 || value_heads == 0 || key_head_dim == 0 || value_head_dim == 0 || conv_kernel == 0 {
                        return Err("linear-attention fields `linear_num_key_heads`, `linear_num_value_heads`, `linear_key_head_dim`, `linear_value_head_dim`, `linear_conv_kernel_dim` must be positive".into());
                    }
                    if value_heads % key_heads != 0 {
                        return Err(format!(
                            "`linear_num_value_heads` ({value_heads}) must be a multiple of `linear_num_key_heads` ({key_heads})"
                        ));
                    }
                }
                Attention::Mamba2 { heads, head_dim, state_size, groups, conv_kernel } => {
                    if heads == 0 || head_dim == 0 || state_size == 0 || groups == 0 || conv_kernel == 0 {
                        return Err("Mamba-2 fields `mamba_num_heads`, `mamba_head_dim`, `ssm_state_size`, `n_groups`, `conv_kernel` must be positive".into());
                    }
                    if heads % groups != 0 {
                        return Err(format!("`mamba_num_heads` ({heads}) must be a multiple of `n_groups` ({groups})"));
                    }
                }
                Attention::None => {
                    if matches!(mlp, Mlp::None) {
                        return Err("a block has neither a token mixer nor an MLP".into());
                    }
                }
            }
            match *mlp {
                Mlp::Dense { intermediate_size, .. } => {
                    if intermediate_size == 0 {
                        return Err("`intermediate_size` must be positive".into());
                    }
                }
                Mlp::Moe { experts, top_k, expert_intermediate_size, latent_size, .. } => {
                    if latent_size == Some(0) {
                        return Err("`moe_latent_size` must be positive or null".into());
                    }
                    if experts == 0 || expert_intermediate_size == 0 {
                        return Err(format!(
                            "MoE fields: number of experts ({experts}) and `moe_intermediate_size` ({expert_intermediate_size}) must be positive"
                        ));
                    }
                    if top_k == 0 || top_k > experts {
                        return Err(format!(
                            "`num_experts_per_tok` is {top_k}; it must be between 1 and the number of experts ({experts})"
                        ));
                    }
                }
                Mlp::None => {}
            }
        }
        if let Some(v) = &self.vision {
            if v.depth == 0 || v.hidden_size == 0 || v.heads == 0 || v.patch_size == 0 || v.spatial_merge_size == 0 {
                return Err(
                    "`vision_config`: `depth`, `hidden_size`, `num_heads`, `patch_size`, `spatial_merge_size` must be positive".into()
                );
            }
            if v.hidden_size % v.heads as u64 != 0 {
                return Err(format!(
                    "`vision_config.hidden_size` ({}) must be a multiple of `vision_config.num_heads` ({})",
                    v.hidden_size, v.heads
                ));
            }
        }
        Ok(())
    }
}

impl VisionTower {
    /// (patches before merge, LLM tokens after merge) for one image of `h × w` pixels. Images
    /// are resized to a multiple of patch × merge, as Qwen-VL processors do.
    pub fn image_tokens(&self, height: u32, width: u32) -> (u64, u64) {
        let unit = (self.patch_size * self.spatial_merge_size) as u64;
        let round = |x: u32| ((x as u64).div_ceil(unit).max(1)) * unit;
        let ph = round(height) / self.patch_size as u64;
        let pw = round(width) / self.patch_size as u64;
        let patches = ph * pw;
        let merge = (self.spatial_merge_size as u64).pow(2);
        (patches, patches / merge)
    }

    pub fn params(&self) -> u64 {
        let h = self.hidden_size;
        let per_layer = 4 * h * h + 2 * h * self.intermediate_size;
        let patch = (self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size) as u64 * h;
        let merged = h * (self.spatial_merge_size as u64).pow(2);
        let merger = merged * merged + merged * self.out_hidden_size;
        self.depth as u64 * per_layer + patch + (1 + self.deepstack_mergers as u64) * merger
    }
}
