//! Lays out the operator graph of one step for a candidate: which operators a layer runs
//! (eager or fused by `--compile`), with what shapes, on which communication groups. Weights,
//! KV bytes per token and activation widths are accumulated while laying out, so the memory
//! model and the cost model cannot disagree about what a layer holds.

// The builder helpers take an operator's whole shape (name, repetitions, token feature, K, N,
// quantization, bias, ...) as arguments; bundling them into a struct would only rename them.
#![allow(clippy::too_many_arguments)]

use super::memory::MemoryModel;
use super::ops::{add, f, scaled, unit, Coef, Collective, ExpertCost, Op, OpKind};
use super::{CostOptions, EmbeddingTp, ParallelConfig, RooflineCost};
use crate::hardware::{CommGroup, DeviceProfile, Dtype};
use crate::model::{Attention, LayerGroup, Mlp, ModelArch, VisionTower};
use crate::quant::{ActQuant, LinearQuant};

/// Build the cost model and the matching memory model of one candidate.
pub fn build_both(model: &ModelArch, dev: &DeviceProfile, par: &ParallelConfig, opts: &CostOptions) -> (RooflineCost, MemoryModel) {
    let mut b = Builder::new(model, dev, par, opts);
    b.embedding();
    for g in &model.layers {
        b.copies = 1.0;
        b.layer(g.count as f64, &g.attention, &g.mlp, TOK);
    }
    let mut lm_passes = 1.0;
    if opts.mtp_tokens > 0 {
        if let Some(m) = &model.mtp {
            let k = opts.mtp_tokens as f64;
            // k draft passes reuse the model's MTP layer(s): compute k times, hold weights once.
            b.copies = m.layers as f64 / k;
            b.gemm("mtp_eh_proj", k, TOK, 2.0 * b.h, b.h, Some(b.non_expert_q), false);
            b.vector("mtp_enorm_hnorm", 2.0 * k, TOK, b.h, 5.0, 4.0, false);
            b.weights += 2.0 * b.h * 2.0 * m.layers as f64;
            b.layer(k, &m.attention, &m.mlp, TOK);
            lm_passes += k;
        }
    }
    if opts.draft_layers > 0 {
        // DFlash/DSpark drafters: priced as extra layers of the target's first layer kind.
        let g: &LayerGroup = &model.layers[0];
        b.copies = 1.0;
        b.layer(opts.draft_layers as f64, &g.attention, &g.mlp, TOK);
    }
    b.copies = 1.0;
    b.norm("final_norm", 1.0, TOK, b.h, true, ActQuant::None);
    b.lm_head(lm_passes);
    if opts.with_vision {
        if let Some(v) = &model.vision {
            b.vision(v);
        }
    }
    let mem = MemoryModel {
        device_bytes: dev.memory.bytes,
        weight_bytes: b.weights,
        kv_bytes_per_token: b.kv_per_token,
        state_bytes_per_seq: b.state_per_seq,
        kv_capacity_factor: b.kv_capacity_factor,
        act_bytes_per_token: 2.0 * (2.0 * b.h) + b.max_act_width * 2.0,
        act_bytes_per_sampled: b.vocab / b.tp * 2.0 + b.vocab * 4.0,
    };
    let cost = RooflineCost::from_ops(b.ops, dev.host_overhead_us * 1e-6, b.warnings);
    (cost, mem)
}

/// The cost model alone.
pub fn build(model: &ModelArch, dev: &DeviceProfile, par: &ParallelConfig, opts: &CostOptions) -> RooflineCost {
    build_both(model, dev, par, opts).0
}

const TOK: usize = f::TOKENS;

struct Builder<'a> {
    dev: &'a DeviceProfile,
    opts: &'a CostOptions,
    par: ParallelConfig,
    ops: Vec<Op>,
    warnings: Vec<String>,
    h: f64,
    vocab: f64,
    tp: f64,
    hbm: f64,
    vec_bf16: f64,
    vec_fp32: f64,
    fixed_mma: f64,
    fixed_gp: f64,
    fixed_comm: f64,
    tp_group: CommGroup,
    ep_group: CommGroup,
    moe_tp_group: CommGroup,
    dcp_group: CommGroup,
    non_expert_q: LinearQuant,
    expert_q: LinearQuant,
    compile: bool,
    // Accumulated for the memory model. `copies` = distinct weight copies per op count.
    copies: f64,
    weights: f64,
    kv_per_token: f64,
    state_per_seq: f64,
    kv_capacity_factor: f64,
    max_act_width: f64,
    tied_flag: bool,
}

impl<'a> Builder<'a> {
    fn new(model: &'a ModelArch, dev: &'a DeviceProfile, par: &ParallelConfig, opts: &'a CostOptions) -> Self {
        let tp = par.tp as u64;
        let moe_tp = par.moe_tp.max(1) as u64;
        let ep = par.ep.max(1) as u64;
        let h = model.hidden_size as f64;
        let mut b = Builder {
            dev,
            opts,
            par: *par,
            ops: Vec::with_capacity(64),
            warnings: Vec::new(),
            h,
            vocab: model.vocab_size as f64,
            tp: par.tp as f64,
            hbm: dev.hbm_bytes_per_s(),
            vec_bf16: dev.vector_flops(Dtype::Bf16),
            vec_fp32: dev.vector_flops(Dtype::Fp32),
            fixed_mma: dev.op_overhead_us.matrix * 1e-6,
            fixed_gp: dev.op_overhead_us.vector * 1e-6,
            fixed_comm: dev.op_overhead_us.collective * 1e-6,
            tp_group: dev.strided_group(tp, 1),
            ep_group: dev.strided_group(ep, moe_tp),
            moe_tp_group: dev.strided_group(moe_tp, 1),
            dcp_group: dev.strided_group(par.dcp.max(1) as u64, 1),
            non_expert_q: opts.quant.for_non_experts(),
            expert_q: opts.quant.for_experts(),
            compile: opts.compile.enabled,
            copies: 1.0,
            weights: 0.0,
            kv_per_token: 0.0,
            state_per_seq: 0.0,
            kv_capacity_factor: 1.0,
            max_act_width: 0.0,
            tied_flag: false,
        };
        b.tied_flag = model.tie_word_embeddings;
        b
    }

    /// Effective matrix FLOP/s for `dt`; a dtype the device lacks falls back to the nearest
    /// wider one it has (the original would price such GEMMs at zero time).
    fn mma_rate(&mut self, dt: Dtype) -> f64 {
        let chain: &[Dtype] = match dt {
            Dtype::Fp4 => &[Dtype::Fp4, Dtype::Fp8, Dtype::Int8, Dtype::Bf16, Dtype::Fp16],
            Dtype::Fp8 => &[Dtype::Fp8, Dtype::Int8, Dtype::Bf16, Dtype::Fp16],
            Dtype::Int8 => &[Dtype::Int8, Dtype::Fp16, Dtype::Bf16],
            Dtype::Bf16 => &[Dtype::Bf16, Dtype::Fp16],
            Dtype::Fp16 => &[Dtype::Fp16, Dtype::Bf16],
            Dtype::Fp32 => &[Dtype::Fp32, Dtype::Bf16, Dtype::Fp16],
        };
        for (i, &d) in chain.iter().enumerate() {
            if let Some(r) = self.dev.matrix_flops(d) {
                if i > 0 {
                    let w = format!("{} has no {} matrix peak; {} GEMMs are priced at its {} peak", self.dev.name, dt, dt, d);
                    if !self.warnings.contains(&w) {
                        self.warnings.push(w);
                    }
                }
                return r;
            }
        }
        unreachable!("validated profiles have a bf16 or fp16 matrix peak")
    }

    /// Whether the device's tensor cores take FP4 operands (and so convert FP4 in hardware).
    fn fp4_cores(&self) -> bool {
        self.dev.matrix_flops(Dtype::Fp4).is_some()
    }

    /// With causal masking, prefill pairs lose q(q−1)/2 per sequence: Σ q·c − (Σ q² − Σ q)/2.
    fn causal(&self, mma: &mut Coef, gp: &mut Coef) {
        if self.opts.causal_attention {
            for c in [mma, gp] {
                let per_pair = c[f::P_PAIRS];
                c[f::P_QSQ] -= 0.5 * per_pair;
                c[f::P_TOKENS] += 0.5 * per_pair;
            }
        }
    }

    fn gate_of(tok: &Coef) -> usize {
        (1..f::N).find(|&i| tok[i] != 0.0).unwrap_or(f::ONE)
    }

    fn track_width(&mut self, w: f64) {
        if w > self.max_act_width {
            self.max_act_width = w;
        }
    }

    /// A GEMM of `tok`·[K] × [K, N]; `q = None` keeps it in bf16 (lm_head, router, vision).
    fn gemm_op(&mut self, name: &'static str, count: f64, tok: Coef, k: f64, n: f64, q: Option<LinearQuant>, bias: bool) -> Op {
        let g = self.opts.quant.mxfp4_group_size;
        let (dt, wb, ab, sb, deq) = match q {
            Some(q) if q.is_quantized() => (
                q.gemm_dtype(),
                q.weight_bytes(g),
                q.activation_bytes(g),
                q.channel_scale_bytes(),
                q.dequant_flops_per_weight(self.fp4_cores()),
            ),
            _ => (Dtype::Bf16, 2.0, 2.0, 0.0, 0.0),
        };
        let rate = self.mma_rate(dt);
        let mma = scaled(&tok, 2.0 * k * n / rate);
        let gp = add(&scaled(&tok, if bias { n / self.vec_bf16 } else { 0.0 }), &unit(f::ONE, deq * k * n / self.vec_fp32));
        let mem = add(&unit(f::ONE, (k * n * wb + n * sb) / self.hbm), &scaled(&tok, (k * ab + n * 2.0) / self.hbm));
        self.weights += count * self.copies * (k * n * wb + n * sb + if bias { n * 2.0 } else { 0.0 });
        // Widths per token in flight; the LM head runs on sampled rows only (counted apart).
        if tok[f::TOKENS] != 0.0 {
            self.track_width((k + n) * tok[f::TOKENS]);
        }
        Op { name, count, gate: Self::gate_of(&tok), fixed_s: self.fixed_mma, window: None, kind: OpKind::Roofline { mma, gp, mem } }
    }

    fn gemm(&mut self, name: &'static str, count: f64, tok: usize, k: f64, n: f64, q: Option<LinearQuant>, bias: bool) {
        let op = self.gemm_op(name, count, unit(tok, 1.0), k, n, q, bias);
        self.ops.push(op);
    }

    fn gemm_c(&mut self, name: &'static str, count: f64, tok: Coef, k: f64, n: f64, q: Option<LinearQuant>, bias: bool) {
        let op = self.gemm_op(name, count, tok, k, n, q, bias);
        self.ops.push(op);
    }

    /// An element-wise operator over `elems` per token; `kernels` launches in eager mode.
    fn vector_op(&self, name: &'static str, count: f64, tok: Coef, elems: f64, flops: f64, bytes: f64, fp32: bool, kernels: f64) -> Op {
        let rate = if fp32 { self.vec_fp32 } else { self.vec_bf16 };
        Op {
            name,
            count,
            gate: Self::gate_of(&tok),
            fixed_s: self.fixed_gp * kernels,
            window: None,
            kind: OpKind::Roofline {
                mma: [0.0; f::N],
                gp: scaled(&tok, elems * flops / rate),
                mem: scaled(&tok, elems * bytes / self.hbm),
            },
        }
    }

    fn vector(&mut self, name: &'static str, count: f64, tok: usize, elems: f64, flops: f64, bytes: f64, fp32: bool) {
        let op = self.vector_op(name, count, unit(tok, 1.0), elems, flops, bytes, fp32, 1.0);
        self.ops.push(op);
    }

    fn collective_op(&self, name: &'static str, count: f64, group: CommGroup, algo: Collective, bytes: Coef) -> Option<Op> {
        if group.size <= 1 {
            return None;
        }
        let mem = scaled(&bytes, 2.0 / self.hbm);
        Some(Op {
            name,
            count,
            gate: Self::gate_of(&bytes),
            fixed_s: self.fixed_comm,
            window: None,
            kind: OpKind::Collective { algo, group, bytes, mem },
        })
    }

    fn collective(&mut self, name: &'static str, count: f64, group: CommGroup, algo: Collective, bytes: Coef) {
        if let Some(op) = self.collective_op(name, count, group, algo, bytes) {
            self.ops.push(op);
        }
    }

    /// The activation quantization a quantized linear needs before it (none for bf16).
    fn act_quant_op(&self, name: &'static str, count: f64, tok: Coef, elems: f64, q: LinearQuant) -> Option<Op> {
        let (flops, bytes) = match q.act_quant() {
            ActQuant::None => return None,
            ActQuant::Static => (2.0, 3.0),
            ActQuant::Dynamic => (3.0, 3.0),
            ActQuant::Mxfp4 | ActQuant::Mxfp8 => (2.0, 2.0 + q.activation_bytes(self.opts.quant.mxfp4_group_size)),
        };
        Some(self.vector_op(name, count, tok, elems, flops, bytes, true, 1.0))
    }

    fn act_quant(&mut self, name: &'static str, count: f64, tok: Coef, elems: f64, q: LinearQuant) {
        if let Some(op) = self.act_quant_op(name, count, tok, elems, q) {
            self.ops.push(op);
        }
    }

    /// RMSNorm over `elems` per token, with the residual add fused when `residual`; with
    /// `--compile` one fused kernel (quantizing its output for the next GEMM), eager the
    /// decomposed aten ops.
    fn norm(&mut self, name: &'static str, count: f64, tok: usize, elems: f64, residual: bool, quant_out: ActQuant) {
        self.weights += count * self.copies * elems * 2.0;
        let tok_c = self.norm_tokens(tok);
        if self.compile {
            let q = quant_out != ActQuant::None;
            let flops = 5.0 + if residual { 1.0 } else { 0.0 } + if q { 3.0 } else { 0.0 };
            let bytes = 2.0 + if residual { 4.0 } else { 0.0 } + if q { 1.0 } else { 2.0 };
            let op = self.vector_op(name, count, tok_c, elems, flops, bytes, !q, 1.0);
            self.ops.push(op);
        } else {
            if residual {
                let op = self.vector_op("residual_add", count, tok_c, elems, 1.0, 6.0, false, 1.0);
                self.ops.push(op);
            }
            // to_fp32, pow, mean, add+rsqrt, mul, to_bf16, mul weight.
            let op = self.vector_op(name, count, tok_c, elems, 4.0, 36.0, true, 7.0);
            self.ops.push(op);
        }
    }

    /// Under sequence parallelism norms run on the TP-local token slice.
    fn norm_tokens(&self, tok: usize) -> Coef {
        if self.opts.compile.sequence_parallel && self.tp > 1.0 && tok == TOK {
            unit(tok, 1.0 / self.tp)
        } else {
            unit(tok, 1.0)
        }
    }

    /// Sum partial outputs over the TP group after a row-parallel linear (o_proj, down).
    fn tp_reduce_op(&self, name: &'static str, count: f64, width: f64) -> Vec<Op> {
        let bytes = unit(TOK, width * 2.0);
        if self.opts.compile.sequence_parallel {
            let rs = self.collective_op(name, count, self.tp_group, Collective::ReduceScatter, bytes);
            let ag = self.collective_op("sp_all_gather", count, self.tp_group, Collective::AllGather, scaled(&bytes, 1.0 / self.tp));
            rs.into_iter().chain(ag).collect()
        } else {
            self.collective_op(name, count, self.tp_group, Collective::AllReduce, bytes).into_iter().collect()
        }
    }

    /// A row-parallel GEMM followed by its TP reduction (fused when matmul_allreduce).
    fn row_parallel(
        &mut self,
        name: &'static str,
        reduce: &'static str,
        count: f64,
        tok: Coef,
        k: f64,
        n: f64,
        q: Option<LinearQuant>,
        bias: bool,
    ) {
        let mm = self.gemm_op(name, count, tok, k, n, q, bias);
        let red = self.tp_reduce_op(reduce, count, n);
        if self.compile && self.opts.compile.matmul_allreduce && !red.is_empty() {
            let fixed = mm.fixed_s;
            let streams = vec![vec![mm], red];
            self.ops.push(Op {
                name: "matmul_all_reduce",
                count,
                gate: TOK,
                fixed_s: fixed,
                window: None,
                kind: OpKind::Overlap { streams, fused: true },
            });
        } else {
            self.ops.push(mm);
            self.ops.extend(red);
        }
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

    fn embedding(&mut self) {
        let h = self.h;
        match self.opts.word_embedding_tp {
            None => {
                self.weights += self.vocab * h * 2.0;
                self.vector("embedding", 1.0, TOK, h, 0.0, 4.0, false);
            }
            Some(EmbeddingTp::Row) => {
                self.weights += self.vocab / self.tp * h * 2.0;
                self.vector("embedding", 1.0, TOK, h, 0.0, 4.0, false);
                let tg = self.tp_group;
                self.collective("embedding_all_reduce", 1.0, tg, Collective::AllReduce, unit(TOK, h * 2.0));
            }
            Some(EmbeddingTp::Col) => {
                self.weights += self.vocab * h / self.tp * 2.0;
                self.vector("embedding", 1.0, TOK, h / self.tp, 0.0, 4.0, false);
                let tg = self.tp_group;
                self.collective("embedding_all_gather", 1.0, tg, Collective::AllGather, unit(TOK, h / self.tp * 2.0));
            }
        }
    }

    fn lm_head(&mut self, passes: f64) {
        let (h, v_l) = (self.h, self.vocab / self.tp);
        let tied_and_replicated = self.opts.word_embedding_tp.is_none() && self.tied();
        let before = self.weights;
        self.gemm("lm_head", passes, f::SAMPLED, h, v_l, None, false);
        if tied_and_replicated {
            // Tied embeddings: the head reads the (replicated) embedding matrix.
            self.weights = before;
        } else {
            // Only one head even with MTP passes.
            self.weights = before + h * v_l * 2.0;
        }
        let tg = self.tp_group;
        self.collective("logits_all_gather", passes, tg, Collective::AllGather, unit(f::SAMPLED, v_l * 2.0));
        let v = self.vocab;
        self.vector("sampler", passes, f::SAMPLED, v, 5.0, 6.0, true);
    }

    fn tied(&self) -> bool {
        self.tied_flag
    }

    /// One decoder layer kind, `count` times.
    fn layer(&mut self, count: f64, att: &Attention, mlp: &Mlp, tok: usize) {
        let _ = tok;
        self.attention(count, att);
        let q = match mlp {
            Mlp::Dense { .. } => self.non_expert_q,
            Mlp::Moe { .. } => self.expert_q,
        };
        let h = self.h;
        let post_quant = if self.compile { q.act_quant() } else { ActQuant::None };
        self.norm("post_attention_norm", count, TOK, h, true, post_quant);
        match *mlp {
            Mlp::Dense { intermediate_size, bias } => {
                let q = self.non_expert_q;
                self.dense_mlp(count, unit(TOK, 1.0), intermediate_size as f64 / self.tp, bias, q, true);
            }
            Mlp::Moe { experts, top_k, expert_intermediate_size, shared_intermediate_size, bias } => {
                self.moe(count, experts as f64, top_k as f64, expert_intermediate_size as f64, shared_intermediate_size as f64, bias);
            }
        }
    }

    /// Gated MLP with intermediate width `i_l` on this rank, over `tok` tokens; `reduce` adds
    /// the TP all-reduce (row-parallel down projection).
    fn dense_mlp(&mut self, count: f64, tok: Coef, i_l: f64, bias: bool, q: LinearQuant, reduce: bool) {
        let h = self.h;
        let qq = Some(q);
        if self.compile {
            self.gemm_c("gate_up_proj", count, tok, h, 2.0 * i_l, qq, bias);
            let quant_fused = q.act_quant() != ActQuant::None;
            let op = self.vector_op(
                "swiglu",
                count,
                tok,
                i_l,
                5.0 + if quant_fused { 3.0 } else { 0.0 },
                4.0 + if quant_fused { 1.0 } else { 2.0 },
                false,
                1.0,
            );
            self.ops.push(op);
        } else {
            for name in ["gate_proj", "up_proj"] {
                self.act_quant(if name == "gate_proj" { "gate_input_quant" } else { "up_input_quant" }, count, tok, h, q);
                self.gemm_c(name, count, tok, h, i_l, qq, bias);
            }
            let op = self.vector_op("silu_and_mul", count, tok, i_l, 5.0, 10.0, false, 2.0);
            self.ops.push(op);
            self.act_quant("down_input_quant", count, tok, i_l, q);
        }
        if reduce {
            self.row_parallel("down_proj", "mlp_all_reduce", count, tok, i_l, h, qq, bias);
        } else {
            self.gemm_c("shared_down_proj", count, tok, i_l, h, qq, bias);
        }
    }

    fn attention(&mut self, count: f64, att: &Attention) {
        match *att {
            Attention::Gqa { heads, kv_heads, head_dim, qk_norm, bias, sliding_window, output_gate, rotary_fraction } => {
                self.gqa(count, heads, kv_heads, head_dim, qk_norm, bias, sliding_window, output_gate, rotary_fraction)
            }
            Attention::Mla { heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim } => {
                self.mla(count, heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim)
            }
            Attention::LinearAttention { key_heads, value_heads, key_head_dim, value_head_dim, conv_kernel } => {
                self.linear_attention(count, key_heads, value_heads, key_head_dim, value_head_dim, conv_kernel)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn gqa(
        &mut self,
        count: f64,
        heads: u32,
        kv_heads: u32,
        hd: u32,
        qk_norm: bool,
        bias: bool,
        window: Option<u32>,
        gate_out: bool,
        rot: f64,
    ) {
        let (h, tp) = (self.h, self.tp);
        let hq = heads as f64 / tp;
        // KV heads are replicated when TP exceeds them.
        let hkv = (kv_heads as f64 / tp).max(1.0);
        let hd = hd as f64;
        let q = self.non_expert_q;
        let kvb = self.opts.quant.kv.bytes();
        let q_width = hq * hd * if gate_out { 2.0 } else { 1.0 };
        let kv_width = 2.0 * hkv * hd;
        let quant_in = if self.compile { q.act_quant() } else { ActQuant::None };
        self.norm("input_norm", count, TOK, h, true, quant_in);
        let tok = unit(TOK, 1.0);
        self.qkv_proj(count, q, q_width, kv_width, bias);
        if qk_norm {
            self.qk_norm(count, (hq + hkv) * hd, hd);
        }
        self.rope(count, (hq + hkv) * hd * rot, hd * rot);
        let kvq = if self.opts.quant.kv.bytes() < 2.0 { 1.0 } else { 0.0 };
        let op = self.vector_op("reshape_and_cache", count, tok, kv_width, kvq, 2.0 + kvb, false, 1.0);
        self.ops.push(op);
        self.gqa_core(count, hq, hd, kv_width, kvb, window);
        let dcp = self.par.dcp.max(1) as f64;
        if dcp > 1.0 {
            let g = self.dcp_group;
            self.collective("dcp_q_all_gather", count, g, Collective::AllGather, unit(f::D_TOKENS, hq * hd * 2.0));
            self.collective(
                "dcp_out_all_to_all",
                count,
                g,
                Collective::AllToAll,
                unit(f::D_TOKENS, hq * (hd + 1.0) * 4.0 * (dcp - 1.0) / dcp),
            );
            self.kv_capacity_factor = dcp.min((tp / kv_heads as f64).max(1.0));
        }
        // Memory: a full layer caches every token; a sliding layer at most `window` per sequence.
        let per_token = count * self.copies * kv_width * kvb;
        match window {
            Some(w) => self.state_per_seq += per_token * w as f64,
            None => self.kv_per_token += per_token,
        }
        if gate_out {
            let op = self.vector_op("attn_output_gate", count, tok, hq * hd, 4.0, 6.0, false, 1.0);
            self.ops.push(op);
        }
        self.act_quant("o_input_quant", count, tok, hq * hd, q);
        self.row_parallel("o_proj", "attn_all_reduce", count, tok, hq * hd, h, Some(q), bias);
        self.track_width(hq * hd * 3.0 + kv_width);
    }

    /// The Q, K and V projections: one fused GEMM with `--compile`, else three, each after
    /// its own input quantization.
    fn qkv_proj(&mut self, count: f64, q: LinearQuant, q_width: f64, kv_width: f64, bias: bool) {
        let h = self.h;
        let tok = unit(TOK, 1.0);
        if self.compile {
            self.gemm("qkv_proj", count, TOK, h, q_width + kv_width, Some(q), bias);
        } else {
            for (name, qname, n) in [
                ("q_proj", "q_input_quant", q_width),
                ("k_proj", "k_input_quant", kv_width / 2.0),
                ("v_proj", "v_input_quant", kv_width / 2.0),
            ] {
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

    /// Attention proper over `hq` local heads of width `hd`, full or sliding.
    /// Costs 4·pairs·heads·dim matrix FLOPs (QKᵀ and PV), 4·pairs·heads vector FLOPs
    /// (softmax), Q/O traffic per token and KV read per context token. No causal halving,
    /// as in the original.
    fn gqa_core(&mut self, count: f64, hq: f64, hd: f64, kv_width: f64, kvb: f64, window: Option<u32>) {
        let mma_r = self.mma_rate(Dtype::Bf16);
        let deq = self.opts.quant.kv.dequant_flops_per_pair_head();
        let dcp = self.par.dcp.max(1) as f64;
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::P_PAIRS] = 4.0 * hq * hd / mma_r;
        mma[f::D_PAIRS] = 4.0 * hq * hd / mma_r / dcp;
        gp[f::P_PAIRS] = (4.0 + deq) * hq / self.vec_bf16;
        gp[f::D_PAIRS] = (4.0 + deq) * hq / self.vec_bf16 / dcp;
        mem[TOK] = hq * hd * 2.0 * 2.0 / self.hbm;
        mem[f::P_CTX] = kv_width * kvb / self.hbm;
        mem[f::D_CTX] = kv_width * kvb / self.hbm / dcp;
        self.causal(&mut mma, &mut gp);
        self.ops.push(Op {
            name: if window.is_some() { "sliding_attention" } else { "attention" },
            count,
            gate: TOK,
            fixed_s: self.fixed_mma,
            window: window.map(|w| w as f64),
            kind: OpKind::Roofline { mma, gp, mem },
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn mla(&mut self, count: f64, heads: u32, q_lora: Option<u32>, r: u32, nope: u32, rope: u32, v: u32) {
        let (h, tp) = (self.h, self.tp);
        let hq = heads as f64 / tp;
        let (r, nope, rope, v) = (r as f64, nope as f64, rope as f64, v as f64);
        let q = self.non_expert_q;
        let qq = Some(q);
        let kvb = self.opts.quant.kv.bytes();
        let tok = unit(TOK, 1.0);
        let quant_in = if self.compile { q.act_quant() } else { ActQuant::None };
        self.norm("input_norm", count, TOK, h, true, quant_in);
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
        self.norm("kv_a_layernorm", count, TOK, r, false, ActQuant::None);
        self.rope(count, (hq + 1.0) * rope, rope);
        let kvq = if kvb < 2.0 { 1.0 } else { 0.0 };
        let op = self.vector_op("concat_and_cache_mla", count, tok, r + rope, kvq, 2.0 + kvb, false, 1.0);
        self.ops.push(op);
        let mma_r = self.mma_rate(Dtype::Bf16);
        let deq = self.opts.quant.kv.dequant_flops_per_pair_head();
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
        self.ops.push(Op {
            name: "mla_prefill_attention",
            count,
            gate: f::P_TOKENS,
            fixed_s: self.fixed_mma,
            window: None,
            kind: OpKind::Roofline { mma, gp, mem },
        });
        // Decode: absorbed form, attending directly over the latent cache.
        let dcp = self.par.dcp.max(1) as f64;
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::D_TOKENS] = (2.0 * hq * nope * r + 2.0 * hq * r * v) / mma_r;
        mma[f::D_PAIRS] = (2.0 * hq * (r + rope) + 2.0 * hq * r) / mma_r / dcp;
        gp[f::D_PAIRS] = (4.0 + deq) * hq / self.vec_bf16 / dcp;
        mem[f::ONE] = r * hq * (nope + v) * 2.0 / self.hbm;
        mem[f::D_TOKENS] = (hq * (nope + rope) + hq * v) * 2.0 / self.hbm;
        mem[f::D_CTX] = (r + rope) * kvb / self.hbm / dcp;
        self.ops.push(Op {
            name: "mla_decode_attention",
            count,
            gate: f::D_TOKENS,
            fixed_s: self.fixed_mma,
            window: None,
            kind: OpKind::Roofline { mma, gp, mem },
        });
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
    }

    fn linear_attention(&mut self, count: f64, kh: u32, vh: u32, dk: u32, dv: u32, kernel: u32) {
        let (h, tp) = (self.h, self.tp);
        let (kh, vh, dk, dv, kernel) = (kh as f64 / tp, vh as f64 / tp, dk as f64, dv as f64, kernel as f64);
        let q = self.non_expert_q;
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
        self.weights += count * self.copies * kernel * ch * 2.0;
        let mut conv = self.vector_op("causal_conv1d", count, tok, ch, 2.0 * kernel, 4.0, false, 1.0);
        if let OpKind::Roofline { mem, .. } = &mut conv.kind {
            mem[f::SEQS] += (kernel - 1.0) * ch * 2.0 * 2.0 / self.hbm;
        }
        self.ops.push(conv);
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

    /// A MoE block: router, routed experts (wrapped in the EP dispatch/combine and the MoE-TP
    /// gather/scatter), the optional shared expert, then the TP ranks' token restore. Under
    /// `moe_all_reduce`, when the MoE ranks are the attention TP ranks, every rank routes every
    /// token instead and one all-reduce sums the experts' partial outputs (see
    /// [`CostOptions::moe_all_reduce`]).
    fn moe(&mut self, count: f64, experts: f64, top_k: f64, inter: f64, shared: f64, bias: bool) {
        let h = self.h;
        let s = self.moe_shape(experts, top_k, inter, bias);
        self.gemm_c("router", count, s.sliced, h, experts, None, bias);
        let op = self.vector_op("topk_softmax", count, s.sliced, experts, 5.0, 6.0, true, 1.0);
        self.ops.push(op);
        // Permuted rows and expert intermediates per sliced token.
        self.track_width((top_k * (h + 2.0 * s.i_l) * s.moe_tp) / s.tp + 2.0 * h);
        if s.replicated {
            // No dispatch or combine to fuse with the experts (`dispatch_ffn_combine`). The
            // shared expert is split over TP like a dense MLP, and the all-reduce sums what both
            // the routed and the shared experts computed: it waits for both, after any second
            // stream.
            let routed = self.expert_ops(count, &s);
            let shared_ops = self.shared_mlp_ops(count, unit(TOK, 1.0), shared / self.tp, false);
            self.schedule_moe(count, routed, shared_ops, 1.0);
            let reduce = self.tp_reduce_op("moe_all_reduce", count, h);
            self.ops.extend(reduce);
        } else {
            let mut routed = self.moe_dispatch_ops(count, &s);
            routed.extend(self.expert_ops(count, &s));
            routed.extend(self.moe_combine_ops(count, &s));
            let shared_ops = self.shared_expert_ops(count, shared, s.sliced);
            self.schedule_moe(count, routed, shared_ops, s.ep);
            self.restore_tokens(count);
        }
    }

    /// The per-rank sizes of one MoE block under this candidate's TP, EP and MoE-TP.
    fn moe_shape(&self, experts: f64, top_k: f64, inter: f64, bias: bool) -> MoeShape {
        let par = self.par;
        let (tp, ep, moe_tp) = (self.tp, par.ep.max(1) as f64, par.moe_tp.max(1) as f64);
        let q = self.expert_q;
        let g = self.opts.quant.mxfp4_group_size;
        // The experts' ranks are exactly the attention TP group (no attention DP): the engine's
        // tokens are already on every rank.
        let replicated = self.opts.moe_all_reduce && tp > 1.0 && par.ep.max(1) * par.moe_tp.max(1) == par.tp;
        MoeShape {
            replicated,
            experts,
            top_k,
            bias,
            tp,
            ep,
            moe_tp,
            q,
            ab: if q.is_quantized() { q.activation_bytes(g) } else { 2.0 },
            wb: if q.is_quantized() { q.weight_bytes(g) } else { 2.0 },
            // Tokens are sliced across the TP ranks before routing (padded to a multiple of TP),
            // unless every rank routes them all.
            sliced: unit(TOK, if replicated { 1.0 } else { 1.0 / tp }),
            per_rank_rows: if ep > 1.0 { top_k } else { 1.0 },
            i_l: inter / moe_tp,
            local: (experts / ep).max(1.0),
        }
    }

    /// Before the experts: permute and all-to-all the routed rows over EP, all-gather over MoE-TP.
    fn moe_dispatch_ops(&self, count: f64, s: &MoeShape) -> Vec<Op> {
        let h = self.h;
        let mut routed: Vec<Op> = Vec::new();
        if s.ep > 1.0 {
            routed.push(self.vector_op("permute_tokens", count, s.sliced, s.top_k * h, 0.0, 2.0 * s.ab, false, 1.0));
            routed.extend(self.collective_op(
                "moe_dispatch_all_to_all",
                count,
                self.ep_group,
                Collective::AllToAll,
                scaled(&s.sliced, s.top_k * h * s.ab * (s.ep - 1.0) / s.ep),
            ));
        }
        if s.moe_tp > 1.0 {
            routed.extend(self.collective_op(
                "moe_tp_all_gather",
                count,
                self.moe_tp_group,
                Collective::AllGather,
                scaled(&s.sliced, s.per_rank_rows * h * s.ab),
            ));
        }
        routed
    }

    /// The grouped expert GEMMs and activation (gate_up, act, down), and the expert and router
    /// weights they hold.
    fn expert_ops(&mut self, count: f64, s: &MoeShape) -> Vec<Op> {
        let h = self.h;
        let eager = !self.compile;
        let [mut gate_up, act, down] = self.expert_costs(s);
        if eager {
            // Two separate GEMMs each move half the gate_up traffic; keep totals right.
            gate_up.mma_per_pair /= 2.0;
            gate_up.gp_per_pair /= 2.0;
            gate_up.mem_per_pair /= 2.0;
            gate_up.mem_per_expert /= 2.0;
            gate_up.gp_per_expert /= 2.0;
        }
        let (fixed_mma, fixed_gp) = (self.fixed_mma, self.fixed_gp);
        let (gu_name, act_name, down_name) = if self.compile {
            ("grouped_gate_up", "grouped_swiglu", "grouped_down")
        } else {
            ("expert_gate_up", "expert_act", "expert_down")
        };
        let eager_kernels = if eager { 2.0 } else { 1.0 };
        let ops = vec![
            Op { name: gu_name, count: count * eager_kernels, gate: TOK, fixed_s: fixed_mma, window: None, kind: OpKind::Experts(gate_up) },
            Op {
                name: act_name,
                count,
                gate: TOK,
                fixed_s: fixed_gp * if eager { 3.0 } else { 1.0 },
                window: None,
                kind: OpKind::Experts(act),
            },
            Op { name: down_name, count, gate: TOK, fixed_s: fixed_mma, window: None, kind: OpKind::Experts(down) },
        ];
        let i_l = s.i_l;
        self.weights += count * self.copies * s.local * (3.0 * h * i_l * s.wb + if s.bias { (2.0 * i_l + h) * 2.0 } else { 0.0 });
        self.weights += count * self.copies * h * s.experts * 2.0;
        ops
    }

    /// Per-pair and per-expert costs of the fused gate_up GEMM, the activation and the down GEMM.
    fn expert_costs(&mut self, s: &MoeShape) -> [ExpertCost; 3] {
        let (h, q, i_l, ab, wb) = (self.h, s.q, s.i_l, s.ab, s.wb);
        let mma_r = self.mma_rate(if q.is_quantized() { q.gemm_dtype() } else { Dtype::Bf16 });
        let deq = q.dequant_flops_per_weight(self.fp4_cores());
        let eager = !self.compile;
        // Grouped kernels run below dense efficiency by the device's (calibrated) factor.
        let g = self.dev.grouped_gemm_efficiency;
        // Replicated tokens are routed once, by every rank alike: one group of all the tokens.
        let (route_tp, group_ranks) = if s.replicated { (1.0, 1.0) } else { (s.tp, s.ep * s.moe_tp) };
        let mk = |mma: f64, gp: f64, mem_pair: f64, w_bytes: f64, deq_w: f64| ExpertCost {
            tp: route_tp,
            group_ranks,
            top_k: s.top_k,
            experts: s.experts,
            local_experts: s.local,
            mma_per_pair: mma / g,
            gp_per_pair: gp / g,
            mem_per_pair: mem_pair / g,
            mem_per_expert: w_bytes / g,
            gp_per_expert: deq_w / g,
            fixed_per_expert: eager,
        };
        let bias_gp = if s.bias { 1.0 } else { 0.0 };
        let hbm = self.hbm;
        let gate_up = mk(
            2.0 * h * 2.0 * i_l / mma_r,
            bias_gp * 2.0 * i_l / self.vec_bf16,
            (h * ab + 2.0 * i_l * 2.0) / hbm,
            h * 2.0 * i_l * wb / hbm,
            deq * h * 2.0 * i_l / self.vec_fp32,
        );
        let act_bytes = 4.0 + if q.is_quantized() { 1.0 } else { 2.0 };
        let act = ExpertCost {
            mma_per_pair: 0.0,
            gp_per_pair: 8.0 * i_l / self.vec_bf16 / g,
            mem_per_pair: i_l * act_bytes / hbm / g,
            mem_per_expert: 0.0,
            gp_per_expert: 0.0,
            ..gate_up.clone()
        };
        let down = mk(
            2.0 * i_l * h / mma_r,
            bias_gp * h / self.vec_bf16,
            (i_l * ab + h * 2.0) / hbm,
            i_l * h * wb / hbm,
            deq * i_l * h / self.vec_fp32,
        );
        [gate_up, act, down]
    }

    /// After the experts: reduce-scatter over MoE-TP, all-to-all back over EP and unpermute.
    fn moe_combine_ops(&self, count: f64, s: &MoeShape) -> Vec<Op> {
        let h = self.h;
        let mut routed: Vec<Op> = Vec::new();
        if s.moe_tp > 1.0 {
            routed.extend(self.collective_op(
                "moe_tp_reduce_scatter",
                count,
                self.moe_tp_group,
                Collective::ReduceScatter,
                scaled(&s.sliced, s.per_rank_rows * s.moe_tp * h * 2.0),
            ));
        }
        if s.ep > 1.0 {
            let top_k = s.top_k;
            routed.extend(self.collective_op(
                "moe_combine_all_to_all",
                count,
                self.ep_group,
                Collective::AllToAll,
                scaled(&s.sliced, top_k * h * 2.0 * (s.ep - 1.0) / s.ep),
            ));
            routed.push(self.vector_op("unpermute_weighted_sum", count, s.sliced, top_k * h, 2.0, 2.0 + 2.0 / top_k, false, 1.0));
        }
        routed
    }

    /// The shared expert's dense MLP (TP-split or on the sliced tokens), laid out apart so it
    /// can be scheduled beside the routed experts.
    fn shared_expert_ops(&mut self, count: f64, shared: f64, sliced: Coef) -> Vec<Op> {
        if self.opts.shared_expert_tp {
            self.shared_mlp_ops(count, unit(TOK, 1.0), shared / self.tp, true)
        } else {
            self.shared_mlp_ops(count, sliced, shared, false)
        }
    }

    /// A shared expert of `width` on `tok` tokens, with its own TP reduction when `reduce`, as
    /// ops taken out of the graph (none without a shared expert).
    fn shared_mlp_ops(&mut self, count: f64, tok: Coef, width: f64, reduce: bool) -> Vec<Op> {
        if width <= 0.0 {
            return Vec::new();
        }
        let qs = self.non_expert_q;
        let before = self.ops.len();
        self.dense_mlp(count, tok, width, false, qs, reduce);
        self.ops.split_off(before)
    }

    /// Append the routed and shared expert ops: fused with their communication, on two streams,
    /// or one after the other, as `--compile` allows.
    fn schedule_moe(&mut self, count: f64, routed: Vec<Op>, mut shared_ops: Vec<Op>, ep: f64) {
        if self.compile && self.opts.compile.dispatch_ffn_combine && ep > 1.0 {
            // One fused dispatch → FFN → combine kernel: communication hides under compute.
            let (comm, compute): (Vec<Op>, Vec<Op>) = routed.into_iter().partition(|o| matches!(o.kind, OpKind::Collective { .. }));
            let fixed = self.fixed_mma;
            self.ops.push(Op {
                name: "dispatch_ffn_combine",
                count,
                gate: TOK,
                fixed_s: fixed,
                window: None,
                kind: OpKind::Overlap { streams: vec![compute, comm], fused: true },
            });
        } else if self.compile && self.opts.compile.multistream && !shared_ops.is_empty() {
            // The shared expert runs on a second stream beside the routed experts.
            let streams = vec![routed, std::mem::take(&mut shared_ops)];
            self.ops.push(Op {
                name: "moe_multistream",
                count: 1.0,
                gate: TOK,
                fixed_s: 0.0,
                window: None,
                kind: OpKind::Overlap { streams, fused: false },
            });
        } else {
            self.ops.extend(routed);
        }
        self.ops.extend(shared_ops);
    }

    /// After MoE, TP ranks gather their token slices back into full hidden states.
    fn restore_tokens(&mut self, count: f64) {
        let tg = self.tp_group;
        let h = self.h;
        self.collective("moe_tp_restore_all_gather", count, tg, Collective::AllGather, unit(TOK, h / self.tp * 2.0));
    }

    fn vision(&mut self, v: &VisionTower) {
        let tp = self.tp;
        let hv = v.hidden_size as f64;
        let iv = v.intermediate_size as f64;
        let heads = v.heads as f64 / tp;
        let hd = v.hidden_size as f64 / v.heads as f64;
        let p = f::IMG_PATCHES;
        let depth = v.depth as f64;
        let patch_in = (v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size) as f64;
        self.gemm("vision_patch_embed", 1.0, p, patch_in, hv, None, true);
        self.norm("vision_norm1", depth, p, hv, true, ActQuant::None);
        self.gemm("vision_qkv", depth, p, hv, 3.0 * hv / tp, None, true);
        self.vector("vision_rope", depth, p, 2.0 * hv / tp, 3.0, 4.0, false);
        let mma_r = self.mma_rate(Dtype::Bf16);
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::IMG_PAIRS] = 4.0 * heads * hd / mma_r;
        gp[f::IMG_PAIRS] = 4.0 * heads / self.vec_bf16;
        mem[p] = 4.0 * heads * hd * 2.0 / self.hbm;
        self.ops.push(Op {
            name: "vision_attention",
            count: depth,
            gate: p,
            fixed_s: self.fixed_mma,
            window: None,
            kind: OpKind::Roofline { mma, gp, mem },
        });
        let tok = unit(p, 1.0);
        self.gemm("vision_proj", depth, p, hv / tp, hv, None, true);
        let tg = self.tp_group;
        self.collective("vision_attn_all_reduce", depth, tg, Collective::AllReduce, unit(p, hv * 2.0));
        self.norm("vision_norm2", depth, p, hv, true, ActQuant::None);
        self.gemm("vision_fc1", depth, p, hv, iv / tp, None, true);
        let op = self.vector_op("vision_gelu", depth, tok, iv / tp, 8.0, 4.0, false, 1.0);
        self.ops.push(op);
        self.gemm("vision_fc2", depth, p, iv / tp, hv, None, true);
        self.collective("vision_mlp_all_reduce", depth, tg, Collective::AllReduce, unit(p, hv * 2.0));
        let merge = (v.spatial_merge_size as f64).powi(2);
        let merged = hv * merge;
        let mergers = 1.0 + v.deepstack_mergers as f64;
        let mtok = unit(p, 1.0 / merge);
        self.gemm_c("vision_merger_fc1", mergers, mtok, merged, merged, None, true);
        self.gemm_c("vision_merger_fc2", mergers, mtok, merged, v.out_hidden_size as f64, None, true);
        self.track_width(iv / tp + hv);
    }
}

/// One MoE block's sizes on this rank, shared by the steps that lay it out.
struct MoeShape {
    experts: f64,
    top_k: f64,
    bias: bool,
    /// Every TP rank holds every token and one all-reduce combines the experts (no slicing,
    /// dispatch or restore).
    replicated: bool,
    tp: f64,
    ep: f64,
    moe_tp: f64,
    /// The experts' quantization, with its activation and weight bytes per element.
    q: LinearQuant,
    ab: f64,
    wb: f64,
    /// One TP rank's slice of the tokens.
    sliced: Coef,
    /// Rows a rank exchanges per sliced token over MoE-TP: top_k once EP has dispatched them.
    per_rank_rows: f64,
    /// Expert intermediate width per MoE-TP rank.
    i_l: f64,
    /// Experts held by this rank.
    local: f64,
}
