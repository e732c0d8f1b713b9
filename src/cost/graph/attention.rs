//! Attention layers: grouped-query attention (full or sliding window, with decode context
//! parallelism), multi-head latent attention (prefill expands the latent, decode attends in the
//! absorbed form), linear attention (gated delta rule with its convolution state), the Mamba-2
//! mixer and the rotary embedding. Each adds its KV cache or per-sequence state to the memory model.

use super::measured::{AttentionWindow, MlaDims};
use super::mla_module::MlaLayer;
use super::msa_module::SparseLayer;
use super::{Builder, TOK};
use crate::cost::ops::{f, scaled, unit, Collective, Op, OpKind};
use crate::hardware::kernels::KernelOp;
use crate::hardware::Dtype;
use crate::model::{Attention, BlockSparse, SparseIndexer};
use crate::quant::{ActQuant, LinearQuant};

/// The shape of a GQA layer as its builder reads it (the model's `Attention::Gqa`).
#[derive(Clone, Copy)]
struct GqaShape {
    heads: u32,
    kv_heads: u32,
    hd: u32,
    /// Value head width (`head_dim` unless the model says otherwise).
    vd: u32,
    qk_norm: bool,
    bias: bool,
    window: Option<u32>,
    gate_out: bool,
    sparse: Option<BlockSparse>,
}

impl Builder<'_> {
    pub(super) fn attention(&mut self, count: f64, att: &Attention) {
        match *att {
            Attention::Gqa {
                heads,
                kv_heads,
                head_dim,
                qk_norm,
                bias,
                sliding_window,
                output_gate,
                rotary_fraction,
                value_is_key,
                value_head_dim,
                block_sparse,
            } => {
                let vd = value_head_dim.unwrap_or(head_dim);
                let (window, gate_out, sparse) = (sliding_window, output_gate, block_sparse);
                let shape = GqaShape { heads, kv_heads, hd: head_dim, vd, qk_norm, bias, window, gate_out, sparse };
                self.gqa(count, shape, rotary_fraction, value_is_key)
            }
            Attention::Mla { heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, indexer } => {
                let dims =
                    MlaDims { r: kv_lora_rank as f64, rope: qk_rope_head_dim as f64, nope: qk_nope_head_dim as f64, v: v_head_dim as f64 };
                self.mla(count, heads, q_lora_rank, dims, indexer)
            }
            Attention::LinearAttention { key_heads, value_heads, key_head_dim, value_head_dim, conv_kernel } => {
                self.linear_attention(count, key_heads, value_heads, key_head_dim, value_head_dim, conv_kernel)
            }
            Attention::Mamba2 { heads, head_dim, state_size, groups, conv_kernel } => {
                self.mamba2(count, heads, head_dim, state_size, groups, conv_kernel)
            }
            Attention::None => {}
        }
    }

    fn gqa(&mut self, count: f64, shape: GqaShape, rot: f64, value_is_key: bool) {
        let GqaShape { heads, kv_heads, hd, vd, qk_norm, bias, window, gate_out, sparse } = shape;
        let (h, tp) = (self.h, self.tp);
        let hq = heads as f64 / tp;
        // KV heads are replicated when TP exceeds them.
        let hkv = (kv_heads as f64 / tp).max(1.0);
        let (hd, vd) = (hd as f64, vd as f64);
        let q = self.attention_q;
        let kvb = self.opts.quant.kv.bytes();
        // An output gate multiplies the attention's output: one value-wide gate per head.
        let q_width = hq * hd + if gate_out { hq * vd } else { 0.0 };
        // The cache holds a key of `hd` and a value of `vd` per KV head and token.
        let kv_width = hkv * (hd + vd);
        let quant_in = if self.compile { q.act_quant() } else { ActQuant::None };
        self.norm("input_norm", count, TOK, h, true, quant_in);
        let block_start = self.ops.len();
        let tok = unit(TOK, 1.0);
        // Values that are the keys need no projection of their own (the cache still holds both).
        let v_width = if value_is_key { 0.0 } else { hkv * vd };
        self.qkv_proj(count, q, q_width, hkv * hd, v_width, bias);
        if qk_norm {
            self.qk_norm(count, (hq + hkv) * hd, hd);
        }
        self.rope(count, (hq + hkv) * hd * rot, hd * rot);
        let kvq = if self.opts.quant.kv.bytes() < 2.0 { 1.0 } else { 0.0 };
        let op = self.vector_op("reshape_and_cache", count, tok, kv_width, kvq, 2.0 + kvb, false, 1.0);
        self.ops.push(op);
        // A block-sparse layer reads at most its top blocks: priced as a window of that many
        // tokens (the top-k of DeepSeek Sparse Attention is priced so too); it caches them all.
        let read_window = match (window, sparse) {
            (None, None) => AttentionWindow::Full,
            (Some(w), None) => AttentionWindow::Sliding(w),
            (w, Some(b)) => {
                let top = w.map_or(b.read_tokens(), |w| (w as u64).min(b.read_tokens()));
                AttentionWindow::TopBlocks(top.min(u32::MAX as u64) as u32)
            }
        };
        if let Some(b) = sparse {
            self.msa_indexer(count, b, window);
        }
        let name = match (sparse, window) {
            (Some(_), _) => "sparse_attention",
            (None, Some(_)) => "sliding_attention",
            (None, None) => "attention",
        };
        self.gqa_core(count, name, hq, (hd, vd), kv_width, kvb, read_window);
        let dcp = self.par.dcp.max(1) as f64;
        if dcp > 1.0 {
            let g = self.dcp_group;
            self.collective("dcp_q_all_gather", count, g, Collective::AllGather, unit(f::D_TOKENS, hq * hd * 2.0));
            self.collective(
                "dcp_out_all_to_all",
                count,
                g,
                Collective::AllToAll,
                unit(f::D_TOKENS, hq * (vd + 1.0) * 4.0 * (dcp - 1.0) / dcp),
            );
            self.kv_capacity_factor = dcp.min((tp / kv_heads as f64).max(1.0));
        }
        self.cache(count * self.copies * kv_width * kvb, window);
        if gate_out {
            let op = self.vector_op("attn_output_gate", count, tok, hq * vd, 4.0, 6.0, false, 1.0);
            self.ops.push(op);
        }
        self.act_quant("o_input_quant", count, tok, hq * vd, q);
        self.row_parallel("o_proj", "attn_all_reduce", count, tok, hq * vd, h, Some(q), bias);
        self.track_width(hq * (2.0 * hd + vd) + kv_width);
        if let Some(sparse) = sparse {
            let (head_dim, value_dim) = (hd as u32, vd as u32);
            let layer = SparseLayer {
                heads,
                kv_heads,
                head_dim,
                value_dim,
                window,
                gate_out,
                sparse,
                qk_norm,
                bias,
                rotary_fraction: rot,
                value_is_key,
            };
            self.msa_module(count, block_start, &layer);
        }
    }

    /// MiniMax Sparse Attention's indexer beside a GQA layer: the index query projection (its
    /// heads split over TP as the KV heads are, so replicated past them) and the one index key
    /// head's (replicated on every rank, as the engines build it), that key written to the cache
    /// at the KV cache's precision (a sliding layer keeps its `window`), and the scores of every
    /// query against every cached index key (`head_dim` per pair and local index head on the
    /// matrix units; the per-block max and the top-k selection on the vector units).
    fn msa_indexer(&mut self, count: f64, b: BlockSparse, window: Option<u32>) {
        let (ih, id) = ((b.index_heads as f64 / self.tp).max(1.0), b.index_head_dim as f64);
        let kvb = self.opts.quant.kv.bytes();
        let tok = unit(TOK, 1.0);
        self.gemm("msa_index_qk_proj", count, TOK, self.h, (ih + 1.0) * id, Some(self.attention_q), false);
        let kvq = if kvb < 2.0 { 1.0 } else { 0.0 };
        let op = self.vector_op("msa_index_k_cache", count, tok, id, kvq, 2.0 + kvb, false, 1.0);
        self.ops.push(op);
        let mma_r = self.mma_rate(if kvb < 2.0 { Dtype::Fp8 } else { Dtype::Bf16 });
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::P_PAIRS] = 2.0 * ih * id / mma_r;
        mma[f::D_PAIRS] = 2.0 * ih * id / mma_r;
        gp[f::P_PAIRS] = 2.0 * ih / self.vec_bf16;
        gp[f::D_PAIRS] = 2.0 * ih / self.vec_bf16;
        mem[TOK] = (ih * id * 2.0 + b.top_blocks as f64 * 4.0) / self.hbm;
        mem[f::P_CTX] = id * kvb / self.hbm;
        mem[f::D_CTX] = id * kvb / self.hbm;
        self.causal(&mut mma, &mut gp);
        self.ops.push(Op {
            name: "msa_indexer",
            count,
            gate: TOK,
            fixed_s: self.fixed_mma,
            window: window.map(|w| w as f64),
            kind: OpKind::Roofline { mma, gp, mem },
        });
        self.cache(count * self.copies * id * kvb, window);
    }

    /// Memory of `per_token` cached bytes a token: a full layer caches every token, a sliding
    /// layer at most `window` per sequence.
    fn cache(&mut self, per_token: f64, window: Option<u32>) {
        match window {
            Some(w) => self.state_per_seq += per_token * w as f64,
            None => self.kv_per_token += per_token,
        }
    }

    /// The Q, K and V projections: one fused GEMM with `--compile`, else three, each after
    /// its own input quantization.
    fn qkv_proj(&mut self, count: f64, q: LinearQuant, q_width: f64, k_width: f64, v_width: f64, bias: bool) {
        let h = self.h;
        let tok = unit(TOK, 1.0);
        if self.compile {
            self.gemm("qkv_proj", count, TOK, h, q_width + k_width + v_width, Some(q), bias);
        } else {
            for (name, qname, n) in
                [("q_proj", "q_input_quant", q_width), ("k_proj", "k_input_quant", k_width), ("v_proj", "v_input_quant", v_width)]
                    .into_iter()
                    .filter(|(_, _, n)| *n > 0.0)
            {
                self.act_quant(qname, count, tok, h, q);
                self.gemm(name, count, TOK, h, n, Some(q), bias);
            }
        }
    }

    /// Per-head RMSNorm of Q and K over `elems` per token, with its two `hd`-wide weights.
    fn qk_norm(&mut self, count: f64, elems: f64, hd: f64) {
        let tok = unit(TOK, 1.0);
        self.weights += count * self.copies * 2.0 * hd * 2.0;
        let op = if self.compile {
            self.vector_op("qk_norm", count, tok, elems, 5.0, 4.0, false, 2.0)
        } else {
            self.vector_op("qk_norm", count, tok, elems, 4.0, 36.0, true, 14.0)
        };
        self.ops.push(op);
    }

    /// Attention proper over `hq` local heads, queries and keys `hd` wide and values `vd`,
    /// full or sliding. Costs 2·pairs·heads·(hd + vd) matrix FLOPs (QKᵀ and PV),
    /// 4·pairs·heads vector FLOPs (softmax), Q/O traffic per token and KV read per context
    /// token. No causal halving, as in the original.
    fn gqa_core(&mut self, count: f64, name: &'static str, hq: f64, (hd, vd): (f64, f64), kv_width: f64, kvb: f64, reads: AttentionWindow) {
        let window = reads.tokens();
        let mma_r = self.mma_rate(Dtype::Bf16);
        let deq = self.opts.quant.kv.dequant_flops_per_pair_head();
        let dcp = self.par.dcp.max(1) as f64;
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::P_PAIRS] = 2.0 * hq * (hd + vd) / mma_r;
        mma[f::D_PAIRS] = 2.0 * hq * (hd + vd) / mma_r / dcp;
        gp[f::P_PAIRS] = (4.0 + deq) * hq / self.vec_bf16;
        gp[f::D_PAIRS] = (4.0 + deq) * hq / self.vec_bf16 / dcp;
        mem[TOK] = hq * (hd + vd) * 2.0 / self.hbm;
        mem[f::P_CTX] = kv_width * kvb / self.hbm;
        mem[f::D_CTX] = kv_width * kvb / self.hbm / dcp;
        self.causal(&mut mma, &mut gp);
        let op = Op {
            name,
            count,
            gate: TOK,
            fixed_s: self.fixed_mma,
            window: window.map(|w| w as f64),
            kind: OpKind::Roofline { mma, gp, mem },
        };
        let hkv = kv_width / (hd + vd);
        let op = self.measured_attention(op, hq, hkv, (hd, vd), reads);
        self.ops.push(op);
    }

    /// Multi-head latent attention; with a sparse-attention `indexer` (DeepSeek Sparse
    /// Attention), the indexer runs over the whole context and the attention proper reads at
    /// most its top-k tokens per query (priced as a window of top-k).
    fn mla(&mut self, count: f64, heads: u32, q_lora: Option<u32>, dims: MlaDims, indexer: Option<SparseIndexer>) {
        let (h, tp) = (self.h, self.tp);
        let hq = heads as f64 / tp;
        let MlaDims { r, rope, nope, v } = dims;
        let top_k = indexer.map(|i| i.top_k as f64);
        let q = self.attention_q;
        let qq = Some(q);
        let kvb = self.opts.quant.kv.bytes();
        let tok = unit(TOK, 1.0);
        let quant_in = if self.compile { q.act_quant() } else { ActQuant::None };
        self.norm("input_norm", count, TOK, h, true, quant_in);
        let block_start = self.ops.len();
        // Down projections are replicated (not split by TP).
        let qa = q_lora.map(|x| x as f64);
        if self.compile {
            self.gemm("fused_qkv_a_proj", count, TOK, h, qa.unwrap_or(0.0) + r + rope, qq, false);
        } else {
            if let Some(qa) = qa {
                self.act_quant("q_a_input_quant", count, tok, h, q);
                self.gemm("q_a_proj", count, TOK, h, qa, qq, false);
            }
            self.act_quant("kv_a_input_quant", count, tok, h, q);
            self.gemm("kv_a_proj_with_mqa", count, TOK, h, r + rope, qq, false);
        }
        if let Some(qa) = qa {
            let qn = if self.compile { q.act_quant() } else { ActQuant::None };
            self.norm("q_a_layernorm", count, TOK, qa, false, qn);
            if !self.compile {
                self.act_quant("q_b_input_quant", count, tok, qa, q);
            }
            self.gemm("q_b_proj", count, TOK, qa, hq * (nope + rope), qq, false);
        } else {
            self.gemm("q_proj", count, TOK, h, hq * (nope + rope), qq, false);
        }
        if let Some(ix) = indexer {
            self.dsa_indexer(count, ix, qa.unwrap_or(h));
        }
        self.norm("kv_a_layernorm", count, TOK, r, false, ActQuant::None);
        self.rope(count, (hq + 1.0) * rope, rope);
        let kvq = if kvb < 2.0 { 1.0 } else { 0.0 };
        let op = self.vector_op("concat_and_cache_mla", count, tok, r + rope, kvq, 2.0 + kvb, false, 1.0);
        self.ops.push(op);
        let mma_r = self.mma_rate(Dtype::Bf16);
        // Prefill: expand the latent of every context token with kv_b_proj, then attend.
        self.gemm("kv_b_proj_expand", count, f::P_CTX, r, hq * (nope + v), qq, false);
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::P_PAIRS] = (2.0 * hq * (nope + rope) + 2.0 * hq * v) / mma_r;
        gp[f::P_PAIRS] = 4.0 * hq / self.vec_bf16;
        mem[f::P_TOKENS] = (hq * (nope + rope) + hq * v) * 2.0 / self.hbm;
        mem[f::P_CTX] = ((hq * (nope + v) + rope) * 2.0 + (r + rope) * kvb) / self.hbm;
        self.causal(&mut mma, &mut gp);
        let op = Op {
            name: "mla_prefill_attention",
            count,
            gate: f::P_TOKENS,
            fixed_s: self.fixed_mma,
            window: top_k,
            kind: OpKind::Roofline { mma, gp, mem },
        };
        let op = self.measured_mla(&op, KernelOp::ContextMla, hq, dims).unwrap_or(op);
        self.ops.push(op);
        // Decode: absorbed form, attending directly over the latent cache.
        let dcp = self.par.dcp.max(1) as f64;
        self.mla_decode(count, hq, dims, top_k, dcp);
        if dcp > 1.0 {
            let g = self.dcp_group;
            self.collective("dcp_q_all_gather", count, g, Collective::AllGather, unit(f::D_TOKENS, hq * (r + rope) * 2.0));
            self.collective(
                "dcp_out_all_to_all",
                count,
                g,
                Collective::AllToAll,
                unit(f::D_TOKENS, hq * (r + 1.0) * 4.0 * (dcp - 1.0) / dcp),
            );
            self.kv_capacity_factor = dcp;
        }
        // The latent cache is shared by all heads: not divided by TP.
        self.kv_per_token += count * self.copies * (r + rope) * kvb;
        self.act_quant("o_input_quant", count, tok, hq * v, q);
        self.row_parallel("o_proj", "attn_all_reduce", count, tok, hq * v, h, qq, false);
        self.track_width(hq * (nope + rope + v) * 2.0);
        self.mla_module(count, block_start, &MlaLayer { heads, q_lora, dims, indexer: indexer.is_some() });
    }

    /// MLA's decode attention in the absorbed form over the latent cache (`dcp` ranks share each
    /// sequence's context): priced from the engine's MLA kernel table where it has one, with
    /// the absorption into and out of the latent space apart, else on the roofline.
    fn mla_decode(&mut self, count: f64, hq: f64, dims: MlaDims, top_k: Option<f64>, dcp: f64) {
        let MlaDims { r, rope, nope, v } = dims;
        let kvb = self.opts.quant.kv.bytes();
        let mma_r = self.mma_rate(Dtype::Bf16);
        let deq = self.opts.quant.kv.dequant_flops_per_pair_head();
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::D_TOKENS] = (2.0 * hq * nope * r + 2.0 * hq * r * v) / mma_r;
        mma[f::D_PAIRS] = (2.0 * hq * (r + rope) + 2.0 * hq * r) / mma_r / dcp;
        gp[f::D_PAIRS] = (4.0 + deq) * hq / self.vec_bf16 / dcp;
        mem[f::ONE] = r * hq * (nope + v) * 2.0 / self.hbm;
        mem[f::D_TOKENS] = (hq * (nope + rope) + hq * v) * 2.0 / self.hbm;
        mem[f::D_CTX] = (r + rope) * kvb / self.hbm / dcp;
        let op = Op {
            name: "mla_decode_attention",
            count,
            gate: f::D_TOKENS,
            fixed_s: self.fixed_mma,
            window: top_k,
            kind: OpKind::Roofline { mma, gp, mem },
        };
        match self.measured_mla(&op, KernelOp::GenerationMla, hq, dims) {
            // The measured kernel is the attention alone: the absorption into and out of the
            // latent space (two batched GEMMs per token, reading W_UK and W_UV) stays apart.
            Some(core) => {
                let mut bmm_mma = [0.0; f::N];
                let mut bmm_mem = [0.0; f::N];
                bmm_mma[f::D_TOKENS] = mma[f::D_TOKENS];
                bmm_mem[f::ONE] = mem[f::ONE];
                bmm_mem[f::D_TOKENS] = hq * (nope + v + 2.0 * r) * 2.0 / self.hbm;
                let bmm = OpKind::Roofline { mma: bmm_mma, gp: [0.0; f::N], mem: bmm_mem };
                self.ops.push(Op {
                    name: "mla_absorb_bmm",
                    count: 2.0 * count,
                    gate: f::D_TOKENS,
                    fixed_s: self.fixed_mma,
                    window: None,
                    kind: scaled_kind(bmm, 0.5),
                });
                self.ops.push(core);
            }
            None => self.ops.push(op),
        }
    }

    /// DeepSeek Sparse Attention's lightning indexer over `q_in`-wide query latents: its
    /// projections (replicated on every TP rank, as vLLM and SGLang build them; the per-head
    /// weights in bf16 as the FP8 checkpoints keep them), the FP8 key cache it writes, and the
    /// scores of every query against every cached key (FP8 MMA, `heads` × `head_dim` per pair;
    /// a ReLU, the head weighting and the top-k selection per pair on the vector units).
    fn dsa_indexer(&mut self, count: f64, ix: SparseIndexer, q_in: f64) {
        let h = self.h;
        let (ih, id) = (ix.heads as f64, ix.head_dim as f64);
        let q = Some(self.attention_q);
        let tok = unit(TOK, 1.0);
        self.gemm("indexer_q_proj", count, TOK, q_in, ih * id, q, false);
        self.gemm("indexer_k_proj", count, TOK, h, id, q, false);
        self.gemm("indexer_weights_proj", count, TOK, h, ih, None, false);
        // LayerNorm and rotary of the key, FP8 quantization into the cache.
        let op = self.vector_op("indexer_k_cache", count, tok, id, 8.0, 2.0 + 1.0, false, 2.0);
        self.ops.push(op);
        let mma_r = self.mma_rate(Dtype::Fp8);
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::P_PAIRS] = 2.0 * ih * id / mma_r;
        mma[f::D_PAIRS] = 2.0 * ih * id / mma_r;
        gp[f::P_PAIRS] = (2.0 * ih + 4.0) / self.vec_bf16;
        gp[f::D_PAIRS] = (2.0 * ih + 4.0) / self.vec_bf16;
        mem[TOK] = (ih * id + ix.top_k as f64 * 4.0) / self.hbm;
        mem[f::P_CTX] = ix.cache_bytes() / self.hbm;
        mem[f::D_CTX] = ix.cache_bytes() / self.hbm;
        self.causal(&mut mma, &mut gp);
        self.ops.push(Op {
            name: "dsa_indexer",
            count,
            gate: TOK,
            fixed_s: self.fixed_mma,
            window: None,
            kind: OpKind::Roofline { mma, gp, mem },
        });
        // The indexer's key cache beside the latent one, on every rank.
        self.kv_per_token += count * self.copies * ix.cache_bytes();
    }

    fn linear_attention(&mut self, count: f64, kh: u32, vh: u32, dk: u32, dv: u32, kernel: u32) {
        let (h, tp) = (self.h, self.tp);
        let (kh, vh, dk, dv, kernel) = (kh as f64 / tp, vh as f64 / tp, dk as f64, dv as f64, kernel as f64);
        let q = self.attention_q;
        let tok = unit(TOK, 1.0);
        let quant_in = if self.compile { q.act_quant() } else { ActQuant::None };
        self.norm("input_norm", count, TOK, h, true, quant_in);
        if !self.compile {
            self.act_quant("qkvz_input_quant", count, tok, h, q);
        }
        let qkvz = 2.0 * kh * dk + 2.0 * vh * dv;
        self.gemm("in_proj_qkvz", count, TOK, h, qkvz, Some(q), false);
        self.gemm("in_proj_ba", count, TOK, h, 2.0 * vh, None, false);
        let ch = 2.0 * kh * dk + vh * dv;
        self.causal_conv(count, ch, kernel);
        // Gated delta rule: chunked matmuls in prefill, a recurrent update in decode; the
        // fp32 state (vh × dk × dv per sequence) is read and written once per step.
        let state = vh * dk * dv * 4.0;
        let mma_r = self.mma_rate(Dtype::Bf16);
        let mut mma = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::P_TOKENS] = 8.0 * vh * dk * dv / mma_r;
        mem[f::P_TOKENS] = (ch + vh * dv) * 2.0 / self.hbm;
        mem[f::P_SEQS] = 2.0 * state / self.hbm;
        self.ops.push(Op {
            name: "gated_delta_rule_prefill",
            count,
            gate: f::P_TOKENS,
            fixed_s: self.fixed_mma,
            window: None,
            kind: OpKind::Roofline { mma, gp: [0.0; f::N], mem },
        });
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        gp[f::D_TOKENS] = 6.0 * vh * dk * dv / self.vec_fp32;
        mem[f::D_TOKENS] = (ch + vh * dv) * 2.0 / self.hbm;
        mem[f::D_SEQS] = 2.0 * state / self.hbm;
        self.ops.push(Op {
            name: "gated_delta_rule_decode",
            count,
            gate: f::D_TOKENS,
            fixed_s: self.fixed_gp,
            window: None,
            kind: OpKind::Roofline { mma: [0.0; f::N], gp, mem },
        });
        self.state_per_seq += count * self.copies * (state + (kernel - 1.0) * ch * 2.0);
        let op = self.vector_op("gated_rms_norm", count, tok, vh * dv, 6.0, 6.0, false, 1.0);
        self.ops.push(op);
        self.act_quant("out_input_quant", count, tok, vh * dv, q);
        self.row_parallel("out_proj", "attn_all_reduce", count, tok, vh * dv, h, Some(q), false);
        self.track_width(qkvz + ch);
    }

    /// A Mamba-2 mixer (Nemotron-H): in_proj to [z, x, B, C, dt], the causal convolution over
    /// [x, B, C], the state-space scan (chunked in prefill, one state update per token in
    /// decode), the gated norm and the row-parallel out_proj. Heads split over TP; B and C's
    /// groups too, replicated where TP exceeds them, as the KV heads are.
    fn mamba2(&mut self, count: f64, heads: u32, head_dim: u32, state: u32, groups: u32, kernel: u32) {
        let (h, tp) = (self.h, self.tp);
        let (nh, p, n, kernel) = (heads as f64 / tp, head_dim as f64, state as f64, kernel as f64);
        let g = (groups as f64 / tp).max(1.0);
        let (inner, bc) = (nh * p, 2.0 * g * n);
        let q = self.attention_q;
        let tok = unit(TOK, 1.0);
        let quant_in = if self.compile { q.act_quant() } else { ActQuant::None };
        self.norm("input_norm", count, TOK, h, true, quant_in);
        if !self.compile {
            self.act_quant("in_proj_input_quant", count, tok, h, q);
        }
        self.gemm("in_proj", count, TOK, h, 2.0 * inner + bc + nh, Some(q), false);
        let ch = inner + bc;
        // A, D and dt's bias per head, the gated norm's weight.
        self.weights += count * self.copies * (3.0 * nh + inner) * 2.0;
        self.causal_conv(count, ch, kernel);
        // The SSM state is fp32 (`mamba_ssm_cache_dtype`), nh × p × n a sequence, read and
        // written once per step. Prefill runs the chunked scan (SSD, chunks of 128 tokens):
        // within a chunk C·Bᵀ (128 × n a token) and its product with x (128 × p), plus the
        // chunk states in and out (2 · n · p). Decode updates the state per token:
        // state · exp(dt·A) + dt·B·x, then y = C · state.
        let st = nh * p * n * 4.0;
        let io = (ch + inner + nh) * 2.0 / self.hbm;
        let mma_r = self.mma_rate(Dtype::Bf16);
        let mut mma = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::P_TOKENS] = 2.0 * nh * (MAMBA_CHUNK * (n + p) + 2.0 * n * p) / mma_r;
        mem[f::P_TOKENS] = io;
        mem[f::P_SEQS] = 2.0 * st / self.hbm;
        let kind = OpKind::Roofline { mma, gp: [0.0; f::N], mem };
        self.ops.push(Op { name: "mamba_chunk_scan", count, gate: f::P_TOKENS, fixed_s: self.fixed_mma, window: None, kind });
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        gp[f::D_TOKENS] = 6.0 * nh * p * n / self.vec_fp32;
        mem[f::D_TOKENS] = io;
        mem[f::D_SEQS] = 2.0 * st / self.hbm;
        let kind = OpKind::Roofline { mma: [0.0; f::N], gp, mem };
        self.ops.push(Op { name: "mamba_state_update", count, gate: f::D_TOKENS, fixed_s: self.fixed_gp, window: None, kind });
        self.state_per_seq += count * self.copies * (st + (kernel - 1.0) * ch * 2.0);
        let op = self.vector_op("gated_rms_norm", count, tok, inner, 6.0, 6.0, false, 1.0);
        self.ops.push(op);
        self.act_quant("out_input_quant", count, tok, inner, q);
        self.row_parallel("out_proj", "attn_all_reduce", count, tok, inner, h, Some(q), false);
        self.track_width(2.0 * inner + bc + nh);
    }

    /// The depthwise causal convolution of a linear mixer over `ch` channels and `kernel` taps:
    /// its weights, and each sequence's last `kernel − 1` inputs (its state) read and written.
    fn causal_conv(&mut self, count: f64, ch: f64, kernel: f64) {
        self.weights += count * self.copies * kernel * ch * 2.0;
        let mut conv = self.vector_op("causal_conv1d", count, unit(TOK, 1.0), ch, 2.0 * kernel, 4.0, false, 1.0);
        if let OpKind::Roofline { mem, .. } = &mut conv.kind {
            mem[f::SEQS] += (kernel - 1.0) * ch * 2.0 * 2.0 / self.hbm;
        }
        self.ops.push(conv);
    }

    fn rope(&mut self, count: f64, elems: f64, rot_dim: f64) {
        let per_tensor_kernels = if self.compile { 0.5 } else { 5.0 };
        let bytes = if self.compile { 4.0 } else { 28.0 };
        let tok = unit(TOK, 1.0);
        let mut op = self.vector_op("rotary_embedding", count, tok, elems, 3.0, bytes, false, 2.0 * per_tensor_kernels);
        // cos/sin tables read per token.
        if let OpKind::Roofline { mem, .. } = &mut op.kind {
            mem[TOK] += rot_dim * 4.0 / self.hbm;
        }
        self.ops.push(op);
    }
}

/// A roofline kind with every coefficient scaled by `k` (one of `k`⁻¹ identical calls).
fn scaled_kind(kind: OpKind, k: f64) -> OpKind {
    match kind {
        OpKind::Roofline { mma, gp, mem } => OpKind::Roofline { mma: scaled(&mma, k), gp: scaled(&gp, k), mem: scaled(&mem, k) },
        other => other,
    }
}

/// Tokens per chunk of Mamba-2's chunked scan (`chunk_size` in Nemotron-H's configs).
const MAMBA_CHUNK: f64 = 128.0;
