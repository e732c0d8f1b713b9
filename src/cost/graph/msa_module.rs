//! MiniMax-M3's sparse attention layers priced as one measured block.
//!
//! NVIDIA AIConfigurator's database times the whole attention block of a MiniMax-M3 sparse
//! layer on one GPU (`msa_context_module_perf`, `msa_generation_module_perf`): the QKV and
//! index projections, the q/k norms and rotary, the KV and index-key writes, the indexer's
//! scores and top-k, attention over the top blocks and o_proj, at each local head count, batch
//! and prompt or KV length, with a bf16 or FP8 KV cache and bf16 or block-FP8 projections.
//! Where such a table exists for the device and engine, the operators the builder laid out for
//! that block are replaced by one operator, `msa_attention`, looked up there; the TP reduction
//! after o_proj stays a collective of its own (the tables are one GPU's, TP 1).
//!
//! Only the block the tables measured is replaced: MiniMax-M3's widths (hidden 6,144, 64 query
//! and 4 KV heads of 128, 4 index heads of 128, 16 top blocks of 128 tokens), per-head q/k
//! norms, rotary over half of each head, no projection bias, no output gate, a value projection
//! of its own, no decode context parallelism. Anything else keeps its operators, and so does a
//! layer whose o_proj runs fused with its TP all-reduce (the compile pass `matmul_allreduce`):
//! the fused operator holds o_proj inside the collective's stream, and the measured block,
//! o_proj included, cannot be split from it.
//!
//! How a step is looked up (`cost::ops::measured`, `Lookup::Block`): prompts with nothing
//! cached and decode sequences are the tables' own shapes; a chunk after a cached prefix is
//! what the context table says extending the prompt by the chunk adds (2,048 new tokens after
//! 2,048 cached: the 4,096-token prompt's time less the 2,048-token one's), between the time of
//! a prompt as long as the chunk and that of its tokens as separate decodes; a step with
//! prefills and decodes pays the operators both phases share (the projections, norms, rotary and
//! cache writes over all of its tokens, priced at one token; at most the block at one sequence
//! and the shortest KV in the generation table) once.
//!
//! The block's roofline, which carries a shape beyond the measured grid (a prompt longer than
//! the tables), is the projections' matrix work per token, the indexer's scores over every
//! cached index key and reading those keys: at the longest measured prompts the block grows
//! about linearly (on H200 under vLLM 0.24, 2.08 times from 16,384 to 32,768 tokens), as the
//! projections do. It is a lower bound of the block's time, used as the floor of a decode
//! lookup.

use super::{Builder, TOK};
use crate::cost::ops::measured::{AttentionRoof, AttentionSide, Lookup, Measured};
use crate::cost::ops::{add, Op, OpKind};
use crate::cost::{BatchShape, PhaseLoad};
use crate::hardware::kernels::{Dense, Grid, KernelOp, TableId};
use crate::hardware::Dtype;
use crate::model::BlockSparse;
use crate::quant::{KvQuant, LinearQuant};

/// MiniMax-M3's attention block, the one the MSA module tables time.
const MEASURED_BLOCK: (u32, u32, u32, u32) = (6144, 64, 4, 128);
const MEASURED_ROTARY_FRACTION: f64 = 0.5;
const MEASURED_SPARSE: BlockSparse = BlockSparse { index_heads: 4, index_head_dim: 128, block_size: 128, top_blocks: 16 };

/// The attention layer as `gqa` laid it out, for the check that it is the measured block.
pub(super) struct SparseLayer {
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub value_dim: u32,
    pub window: Option<u32>,
    pub gate_out: bool,
    pub sparse: BlockSparse,
    pub qk_norm: bool,
    pub bias: bool,
    pub rotary_fraction: f64,
    pub value_is_key: bool,
}

impl SparseLayer {
    fn is_measured_block(&self, hidden: f64) -> bool {
        let (h, heads, kv, hd) = MEASURED_BLOCK;
        hidden == h as f64
            && (self.heads, self.kv_heads, self.head_dim, self.value_dim) == (heads, kv, hd, hd)
            && self.window.is_none()
            && !self.gate_out
            && self.sparse == MEASURED_SPARSE
            // per-head q/k norms, no projection bias, rotary over half of each head, a value
            // projection of its own: what the measured block ran
            && self.qk_norm
            && !self.bias
            && self.rotary_fraction == MEASURED_ROTARY_FRACTION
            && !self.value_is_key
    }
}

impl<'a> Builder<'a> {
    /// Replace the operators of the sparse layer laid out from `start` (after its input norm,
    /// through o_proj and its TP reduction) with one `msa_attention` priced from the module
    /// tables, where they exist and measured this block; the reduction's collectives follow it.
    pub(super) fn msa_module(&mut self, count: f64, start: usize, layer: &SparseLayer) {
        if !layer.is_measured_block(self.h) {
            return;
        }
        let gemm = match self.attention_q {
            LinearQuant::Disabled => "bfloat16",
            LinearQuant::Fp8 | LinearQuant::Fp8Block => "fp8_block",
            LinearQuant::Nvfp4 => "nvfp4",
            _ => return,
        };
        let Some((ctx, gen)) = self.module_tables((KernelOp::ContextMsa, KernelOp::GenerationMsa), gemm, start) else { return };
        let taken = self.take_block(start, count);
        let hq = layer.heads as f64 / self.tp;
        let per_index_head = layer.sparse.index_heads as f64 / layer.heads as f64;
        let (id, kvb) = (layer.sparse.index_head_dim as f64, self.opts.quant.kv.bytes());
        let (peak, hbm) = (self.peak(Dtype::Bf16), self.datasheet_hbm());
        // Index heads split over TP as the KV heads are (at least one per rank); per (query,
        // cached token) pair and local index head, the score on the matrix units and its block
        // max and top-k on the vector units, as the indexer's own operator prices them.
        // Per query token, the projections' matrix work (QKV, index query and key, o_proj,
        // at this rank's widths), so that the roofline grows with the prompt as the measured
        // block does at its longest prompts (2.08 times from 16,384 to 32,768 tokens on H200).
        let vec = self.vec_bf16;
        let proj = |heads: f64| {
            let kv = (heads * layer.kv_heads as f64 / layer.heads as f64).max(1.0);
            let hd = layer.head_dim as f64;
            2.0 * self.h * (2.0 * heads * hd + 2.0 * kv * hd + ((heads * per_index_head).max(1.0) + 1.0) * id) / peak
        };
        let roof_at = |heads: f64| AttentionRoof {
            per_pair: (heads * per_index_head).max(1.0) * (2.0 * id / peak + 2.0 / vec),
            per_ctx: id * kvb / hbm,
            per_query: proj(heads),
        };
        // Coordinates (heads, batch, length).
        let prefill_roof = |x: &[f64]| {
            let (b, s) = (x[1], x[2]);
            roof_at(x[0]).at(b * s * (s + 1.0) / 2.0, b * s, b * s)
        };
        let decode_roof = |x: &[f64]| {
            let (b, len) = (x[1], x[2]);
            roof_at(x[0]).at(b * len, b * len, b)
        };
        let side = |grid: &Grid, roof: &dyn Fn(&[f64]) -> f64| AttentionSide {
            table: Dense::<2>::slice(grid, &[hq], roof),
            measured: roof_at(hq),
            actual: roof_at(hq),
        };
        let (prefill, decode) = (side(ctx, &prefill_roof), side(gen, &decode_roof));
        // One sequence at the shortest measured KV length (AIConfigurator's step 1: 2 tokens):
        // the block's launches and weight reads with next to no work of its own.
        // The shared operators once, at most the whole block at one sequence and AIConfigurator's
        // shortest KV (step 1: 2 tokens).
        let whole = decode.table.at([1.0, 2.0], |y| roof_at(hq).at(y[0] * y[1], y[0] * y[1], y[0])).seconds;
        let once = taken.shared_once.min(whole);
        self.push_block("msa_attention", count, taken, Lookup::Block { prefill, decode, once });
    }

    /// The (context, generation) module tables `ops` measured for this layer's KV cache and
    /// projections in `gemm`, where the block laid out from `start` can be replaced: the
    /// engine's fused graph (the tables time it; eager kernels are priced one by one), no
    /// decode context parallelism (the tables are one GPU's whole context), no INT8 cache (bf16
    /// and FP8 are measured), and no o_proj fused with its TP all-reduce (the fused operator
    /// holds o_proj inside the collective's stream and cannot be split from it).
    pub(super) fn module_tables(&self, ops: (KernelOp, KernelOp), gemm: &str, start: usize) -> Option<(&'a Grid, &'a Grid)> {
        let t = self.tables?;
        let kv_fp8 = match self.opts.quant.kv {
            KvQuant::Disabled => false,
            KvQuant::Fp8 => true,
            KvQuant::Int8 => return None,
        };
        let fused = self.ops[start..].iter().any(|o| matches!(o.kind, OpKind::Overlap { .. }));
        if !self.compile || self.par.dcp > 1 || fused {
            return None;
        }
        Some((t.get(&TableId::module(ops.0, kv_fp8, gemm))?, t.get(&TableId::module(ops.1, kv_fp8, gemm))?))
    }

    /// Take the block's operators (one layer's `count` repetitions) from `start` out of the
    /// graph, with what [`Builder::push_block`] needs to put the block back.
    pub(super) fn take_block(&mut self, start: usize, count: f64) -> TakenBlock {
        let tail = self.ops.split_off(start);
        let (comm, block): (Vec<Op>, Vec<Op>) = tail.into_iter().partition(is_collective);
        // A step with prefills and decodes runs the operators over all of its tokens once
        // (projections, norms, rotary, the cache write: gated on the step's tokens), each
        // phase's attention path apart (gated on that phase's): the shared part, priced at one
        // decode token, is what such a step does not pay twice.
        let one = BatchShape { decode: PhaseLoad::uniform(1, 1, 1), sampled: 1, ..BatchShape::default() }.features();
        let shared: f64 = block.iter().filter(|o| o.gate == TOK).map(|o| o.eval(&one).total() * o.count / count).sum();
        TakenBlock { roofline: summed_roofline(&block), comm, shared_once: shared }
    }

    /// The measured block as one operator, then its collectives.
    pub(super) fn push_block(&mut self, name: &'static str, count: f64, taken: TakenBlock, lookup: Lookup) {
        let kind = OpKind::Measured(Box::new(Measured { roofline: taken.roofline, lookup }));
        self.ops.push(Op { name, count, gate: TOK, fixed_s: 0.0, window: None, kind });
        self.ops.extend(taken.comm);
    }
}

/// A layer's operators taken out of the graph to be replaced by a measured block.
pub(super) struct TakenBlock {
    /// Their summed roofline, for the breakdown's proportions.
    roofline: OpKind,
    /// The collectives among them (the TP reduction), put back after the block.
    comm: Vec<Op>,
    /// Seconds of one call of the operators both phases share, at one decode token: the most a
    /// step with both phases saves against pricing each phase's block apart.
    pub shared_once: f64,
}

fn is_collective(op: &Op) -> bool {
    match &op.kind {
        OpKind::Collective { .. } => true,
        OpKind::Measured(m) => matches!(m.roofline, OpKind::Collective { .. }),
        _ => false,
    }
}

/// The block's roofline for the breakdown's proportions: the sum of its operators' roofline
/// coefficients (each operator's own, or the one its measured table replaced).
fn summed_roofline(ops: &[Op]) -> OpKind {
    let zero = [0.0; crate::cost::ops::f::N];
    let (mut mma, mut gp, mut mem) = (zero, zero, zero);
    for op in ops {
        let kind = match &op.kind {
            OpKind::Measured(m) => &m.roofline,
            k => k,
        };
        if let OpKind::Roofline { mma: a, gp: b, mem: c } = kind {
            mma = add(&mma, a);
            gp = add(&gp, b);
            mem = add(&mem, c);
        }
    }
    OpKind::Roofline { mma, gp, mem }
}
