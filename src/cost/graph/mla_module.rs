//! DeepSeek-V3's multi-head latent attention layers priced as one measured block.
//!
//! NVIDIA AIConfigurator's database times the whole MLA block of a DeepSeek-V3 layer on one GPU
//! under vLLM 0.24 and TensorRT-LLM 1.3 (`mla_context_module_perf`,
//! `mla_generation_module_perf`): the fused down projection of the query and the latent, the
//! latent norms, q_b_proj, rotary, the latent cache write, kv_b_proj's expansion (prefill) or
//! the absorbed projections (decode), attention and o_proj, at each local head count, batch and
//! prompt or KV length, with a bf16 or FP8 cache and bf16 or block-FP8 projections. vLLM has
//! no table of the MLA attention kernel alone (SGLang and TensorRT-LLM do), so without this
//! block its MLA attention could only be priced from the roofline, three to four times below
//! what the other engines' kernels measure. Where such a table exists for the device and
//! engine, the operators the builder laid out for the block are replaced by one operator,
//! `mla_attention`, looked up there; the TP reduction after o_proj stays a collective of its own
//! (the tables are one GPU's, TP 1). AIConfigurator's own model prices the block this way
//! wherever the table holds the layer.
//!
//! Only the block the tables measured is replaced: DeepSeek-V3's widths (hidden 7,168, query
//! latent 1,536, KV latent 512, rotary 64, no-position 128 and value 128 per head; any head
//! count, which is an axis of the tables), no sparse indexer, no decode context parallelism, and
//! projections in bf16 or block FP8 (DeepSeek-V3, R1 and V3.1, Kimi-K2: their checkpoints'
//! formats). Anything else keeps its operators, and so does a layer whose o_proj runs fused with
//! its TP all-reduce.
//!
//! The lookup is the module tables' (`cost::ops::measured`, `Lookup::Block`, as for MiniMax-M3's
//! block in `msa_module`). The block's roofline, which carries a shape beyond the measured grid,
//! is its projections' matrix work per token (and kv_b_proj's per prompt token in prefill), the
//! attention's per (query, key) pair and the latent cache it reads.

use super::measured::MlaDims;
use super::Builder;
use crate::cost::ops::measured::{AttentionRoof, AttentionSide, Lookup};
use crate::hardware::kernels::{Dense, Grid, KernelOp};
use crate::hardware::Dtype;
use crate::quant::LinearQuant;

/// DeepSeek-V3's MLA block, the one the MLA module tables time: hidden, query latent, KV
/// latent, rotary, no-position and value widths.
const MEASURED_BLOCK: (f64, f64, f64, f64, f64, f64) = (7168.0, 1536.0, 512.0, 64.0, 128.0, 128.0);

/// The MLA layer as `mla` laid it out, for the check that it is the measured block.
pub(super) struct MlaLayer {
    pub heads: u32,
    pub q_lora: Option<u32>,
    pub dims: MlaDims,
    pub indexer: bool,
}

impl MlaLayer {
    fn is_measured_block(&self, hidden: f64) -> bool {
        let (h, qa, r, rope, nope, v) = MEASURED_BLOCK;
        let d = self.dims;
        hidden == h && self.q_lora.map(f64::from) == Some(qa) && (d.r, d.rope, d.nope, d.v) == (r, rope, nope, v) && !self.indexer
    }
}

impl Builder<'_> {
    /// Replace the operators of the MLA layer laid out from `start` (after its input norm,
    /// through o_proj and its TP reduction) with one `mla_attention` priced from the module
    /// tables, where they exist and measured this block; the reduction's collectives follow it.
    pub(super) fn mla_module(&mut self, count: f64, start: usize, layer: &MlaLayer) {
        if !layer.is_measured_block(self.h) {
            return;
        }
        let gemm = match self.attention_q {
            LinearQuant::Disabled => "bfloat16",
            LinearQuant::Fp8Block => "fp8_block",
            _ => return,
        };
        let ops = (KernelOp::ContextMlaModule, KernelOp::GenerationMlaModule);
        let Some((ctx, gen)) = self.module_tables(ops, gemm, start) else { return };
        let taken = self.take_block(start, count);
        let hq = layer.heads as f64 / self.tp;
        let (prefill_roof_at, decode_roof_at) = self.mla_block_roofs();
        // Coordinates (heads, batch, length).
        let prefill_roof = |x: &[f64]| {
            let (b, s) = (x[1], x[2]);
            prefill_roof_at(x[0]).at(b * s * (s + 1.0) / 2.0, b * s, b * s)
        };
        let decode_roof = |x: &[f64]| {
            let (b, len) = (x[1], x[2]);
            decode_roof_at(x[0]).at(b * len, b * len, b)
        };
        let side = |grid: &Grid, roof: &dyn Fn(&[f64]) -> f64, at: AttentionRoof| AttentionSide {
            table: Dense::<2>::slice(grid, &[hq], roof),
            measured: at,
            actual: at,
        };
        let (prefill, decode) = (side(ctx, &prefill_roof, prefill_roof_at(hq)), side(gen, &decode_roof, decode_roof_at(hq)));
        // A step with both phases pays the shared operators once, at most the whole block at one
        // sequence and the shortest measured KV.
        let shortest = decode.table.axis(1).first().copied().unwrap_or(1.0);
        let whole = decode.table.at([1.0, shortest], |y| decode_roof(&[hq, y[0], y[1]])).seconds;
        let once = taken.shared_once.min(whole);
        self.push_block("mla_attention", count, taken, Lookup::Block { prefill, decode, once });
    }

    /// The measured block's rooflines at `heads` local heads, prefill then decode: per (query,
    /// key) pair the attention's matrix work; per context token kv_b_proj's expansion (prefill)
    /// or the latent read (decode); per query token the projections (the replicated down
    /// projection, q_b_proj, o_proj, and in decode the absorbed W_UK and W_UV).
    fn mla_block_roofs(&self) -> (impl Fn(f64) -> AttentionRoof, impl Fn(f64) -> AttentionRoof) {
        let (h, qa, r, rope, nope, v) = MEASURED_BLOCK;
        let (peak, hbm, kvb) = (self.peak(Dtype::Bf16), self.datasheet_hbm(), self.opts.quant.kv.bytes());
        let projections = move |hq: f64| 2.0 * (h * (qa + r + rope) + qa * hq * (nope + rope) + hq * v * h);
        let prefill = move |hq: f64| AttentionRoof {
            per_pair: 2.0 * hq * (nope + rope + v) / peak,
            per_ctx: 2.0 * r * hq * (nope + v) / peak,
            per_query: projections(hq) / peak,
        };
        let decode = move |hq: f64| AttentionRoof {
            per_pair: 2.0 * hq * (2.0 * r + rope) / peak,
            per_ctx: (r + rope) * kvb / hbm,
            per_query: (projections(hq) + 2.0 * hq * r * (nope + v)) / peak,
        };
        (prefill, decode)
    }
}
