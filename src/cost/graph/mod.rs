//! Lays out the operator graph of one step for a candidate: which operators a layer runs
//! (eager or fused by `--compile`), with what shapes, on which communication groups. Weights,
//! KV bytes per token and activation widths are accumulated while laying out, so the memory
//! model and the cost model cannot disagree about what a layer holds.
//!
//! One `Builder` walks the model and appends operators in the order the step runs them (a
//! step's seconds are summed in that order, so the order is part of the figures). Each file
//! holds the methods of one part of the walk:
//!
//! | file | lays out |
//! |---|---|
//! | `assembly` | [`build_both`] / [`build`] / [`build_stage`] (one pipeline stage's share): embedding, each decoder layer (attention, norm, MLP), MTP and drafter passes, final norm, LM head and sampler, vision tower; the memory model from what was accumulated |
//! | `attention` | GQA (full or sliding window, decode context parallelism), MLA (prefill expansion, absorbed decode), linear attention (gated delta rule), rotary embedding |
//! | `dense` | the gated MLP of dense layers (and of shared experts) |
//! | `moe` | router, routed experts, shared expert, and the two communication patterns (tokens sliced and dispatched over EP / MoE-TP, or replicated and all-reduced) with their overlap streams |
//! | `vision` | the vision tower (patch embedding, blocks, mergers) |
//! | `norm` | RMSNorm, fused or decomposed, on the sequence-parallel token slice |
//! | `comm` | collectives on a communication group, the TP reduction after a row-parallel linear (all-reduce, or reduce-scatter + all-gather) and its fused matmul + all-reduce stream |
//! | `roofline` | how one operator's shape becomes roofline coefficients: GEMMs (quantized or bf16, a missing dtype peak), element-wise ops, activation quantization |
//! | `measured` | where the device's kernels were measured: GEMMs, attention, routed experts and collectives priced from the kernel tables instead |
//! | `msa_module` | MiniMax-M3's sparse attention layers as one block priced from the measured module tables, in place of the operators `attention` laid out |
//! | `mla_module` | DeepSeek-V3's MLA layers as one block priced from the measured module tables, likewise |
//!
//! The pricing seam: the builders decide which operators run, with which shapes and counts;
//! `roofline` (and `comm` for collectives) turns a shape into an [`Op`]'s coefficients. A
//! backend that prices kernels from measured tables would replace those constructors, not the
//! builders. The attention kernels (`attention`, `vision`) and the routed experts (`moe`) still
//! write their coefficients in place.

// The builder helpers take an operator's whole shape (name, repetitions, token feature, K, N,
// quantization, bias, ...) as arguments; bundling them into a struct would only rename them.
#![allow(clippy::too_many_arguments)]

mod assembly;
mod attention;
mod comm;
mod dense;
mod measured;
mod mla_module;
mod moe;
mod msa_module;
mod norm;
mod roofline;
mod vision;

pub use assembly::{build, build_both, build_stage};

use super::ops::{f, Op};
use super::{CostOptions, ParallelConfig};
use crate::hardware::kernels::KernelTables;
use crate::hardware::{CommGroup, DeviceProfile, Dtype};
use crate::model::ModelArch;
use crate::quant::LinearQuant;

/// The token feature most operators scale with: every token of the step.
const TOK: usize = f::TOKENS;

/// The graph being laid out, the device rates and groups it is priced with, and what it has
/// accumulated for the memory model.
struct Builder<'a> {
    dev: &'a DeviceProfile,
    opts: &'a CostOptions,
    /// Measured kernel tables, when the device's kernels under this engine were measured.
    tables: Option<&'a KernelTables>,
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
    attention_q: LinearQuant,
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
            tables: opts.kernels.as_ref().map(|k| &*k.0),
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
            attention_q: opts.quant.for_attention(),
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
}
