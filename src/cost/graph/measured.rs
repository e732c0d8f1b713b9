//! Where the device's kernels were measured (kernel tables for this system and serving
//! engine), the builders' GEMMs, attention kernels, routed experts and collectives are priced
//! from the tables: each roofline operator the builders lay out is wrapped into a measured
//! one here, keeping its roofline for the breakdown (see `cost::measured`).
//!
//! Which table prices what:
//! - a GEMM: the table of its dtype (bf16, FP8 per-tensor, FP8 block, NVFP4); a dtype without
//!   a table takes the nearest measured one's time carried by the ratio of the two rooflines
//!   (INT8 ← FP8, weight-only ← bf16, MXFP4 ← NVFP4 where FP4 tensor cores exist, else bf16);
//! - attention: the generation table for decode, the context table for prefill, at the KV
//!   dtype and sliding window (a window without a table reads the full-attention table with
//!   the context clamped to the window);
//! - fused routed experts (top-k, permute, gate-up, activation, down, combine): the MoE table
//!   of the experts' dtype at the model's expert layout, routing skew as the database's own
//!   convention has it (power law α = 1.01 for 256 or more experts, 1.2 below);
//! - a collective inside one node: the engine's custom all-reduce for tensor-parallel
//!   all-reduces, NCCL's measurement otherwise; a group the tables did not measure (more GPUs
//!   than a node) keeps the roofline.
//!
//! Datasheet rates (no efficiency) make the rooflines that utilisation is carried by.

use super::Builder;
use crate::cost::ops::measured::{clamp, AttentionRoof, AttentionSide, Lookup, Measured, Roof1, Transfer};
use crate::cost::ops::{f, scaled, unit, Coef, Collective, Op, OpKind};
use crate::hardware::kernels::{Dense, GemmDtype, KernelOp, MoeDtype, TableId};
use crate::hardware::{CommGroup, Dtype};
use crate::quant::{KvQuant, LinearQuant};

/// A GEMM's bytes per weight and per activation element, and the peak it runs at.
#[derive(Debug, Clone, Copy)]
struct GemmRates {
    weight: f64,
    act: f64,
    peak: f64,
}

impl Builder<'_> {
    /// Datasheet matrix FLOP/s of `dt` (falling back as `mma_rate` does), no efficiency.
    pub(super) fn peak(&self, dt: Dtype) -> f64 {
        let chain: &[Dtype] = match dt {
            Dtype::Fp4 => &[Dtype::Fp4, Dtype::Fp8, Dtype::Int8, Dtype::Bf16],
            Dtype::Fp8 | Dtype::Int8 => &[dt, Dtype::Fp8, Dtype::Int8, Dtype::Bf16],
            _ => &[dt, Dtype::Bf16, Dtype::Fp16],
        };
        chain.iter().find_map(|&d| self.dev.matrix_tflops.get(d)).unwrap_or(1.0) * 1e12
    }

    pub(super) fn datasheet_hbm(&self) -> f64 {
        self.dev.memory_bandwidth.bytes_per_s
    }

    fn gemm_rates(&self, q: Option<LinearQuant>) -> GemmRates {
        let g = self.opts.quant.mxfp4_group_size;
        match q.filter(|q| q.is_quantized()) {
            Some(q) => GemmRates { weight: q.weight_bytes(g), act: q.activation_bytes(g), peak: self.peak(q.gemm_dtype()) },
            None => GemmRates { weight: 2.0, act: 2.0, peak: self.peak(Dtype::Bf16) },
        }
    }

    fn table_rates(&self, dt: GemmDtype) -> GemmRates {
        match dt {
            GemmDtype::Bf16 => GemmRates { weight: 2.0, act: 2.0, peak: self.peak(Dtype::Bf16) },
            GemmDtype::Fp8 => GemmRates { weight: 1.0, act: 1.0, peak: self.peak(Dtype::Fp8) },
            GemmDtype::Fp8Block => GemmRates { weight: 1.0 + 4.0 / (128.0 * 128.0), act: 1.0 + 4.0 / 128.0, peak: self.peak(Dtype::Fp8) },
            GemmDtype::Nvfp4 => GemmRates { weight: 0.5 + 1.0 / 16.0, act: 0.5 + 1.0 / 16.0, peak: self.peak(Dtype::Fp4) },
        }
    }

    fn gemm_roof(&self, r: GemmRates, k: f64, n: f64) -> Roof1 {
        let hbm = self.datasheet_hbm();
        Roof1 { compute: 2.0 * k * n / r.peak, memory0: k * n * r.weight / hbm, memory1: (k * r.act + n * 2.0) / hbm }
    }

    /// The measured table for a GEMM of quantization `q`, and whether it is the GEMM's own
    /// dtype (else its time is carried by the rooflines' ratio).
    fn gemm_table(&self, q: Option<LinearQuant>) -> Option<(GemmDtype, bool)> {
        let t = self.tables?;
        let has = |d: GemmDtype| t.gemm(d).is_some();
        let own = match q.filter(|q| q.is_quantized()) {
            None => Some(GemmDtype::Bf16),
            Some(LinearQuant::Fp8) => Some(GemmDtype::Fp8),
            Some(LinearQuant::Fp8Block) => Some(GemmDtype::Fp8Block),
            Some(LinearQuant::Nvfp4) => Some(GemmDtype::Nvfp4),
            Some(_) => None,
        };
        if let Some(d) = own.filter(|d| has(*d)) {
            return Some((d, true));
        }
        let q = q.unwrap_or(LinearQuant::Disabled);
        let nearest: &[GemmDtype] = match q.gemm_dtype() {
            Dtype::Fp4 if self.fp4_cores() => &[GemmDtype::Nvfp4, GemmDtype::Fp8, GemmDtype::Bf16],
            Dtype::Fp8 | Dtype::Int8 => &[GemmDtype::Fp8, GemmDtype::Fp8Block, GemmDtype::Bf16],
            _ => &[GemmDtype::Bf16],
        };
        nearest.iter().copied().find(|d| has(*d)).map(|d| (d, false))
    }

    /// `op` (a GEMM of `tok`·[K] × [K, N] laid out by `gemm_op`) priced from its table.
    pub(super) fn measured_gemm(&self, op: Op, tok: &Coef, k: f64, n: f64, q: Option<LinearQuant>) -> Op {
        let Some((dt, own)) = self.gemm_table(q) else { return op };
        let grid = self.tables.and_then(|t| t.gemm(dt)).expect("gemm_table checked it");
        let measured = self.table_rates(dt);
        let roof = self.gemm_roof(measured, k, n);
        // Coordinates (n, k, m): a clamped width scales by the roofline of the query's width.
        let curve = Dense::<1>::slice(grid, &[n, k], &|x: &[f64]| self.gemm_roof(measured, x[1], x[0]).at(x[2]));
        let transfer = (!own).then(|| Transfer { target: self.gemm_roof(self.gemm_rates(q), k, n), measured: roof });
        // In a serving step every layer's weights come from DRAM (the other layers' evict them),
        // so no GEMM reads its weights faster than the device's measured streaming ceiling. The
        // database's collectors time one GEMM in a loop, whose weights stay in L2 when they fit:
        // on an L40S (96 MB of L2) a quarter of the bf16 points beat the ceiling, some 3x over.
        // Activations may come from L2 (the previous kernel wrote them) and keep the datasheet.
        // (Profile validation keeps `memory_efficiency` in (0, 1].)
        let floor = Roof1 { memory0: roof.memory0 / self.dev.memory_efficiency, ..roof };
        let lookup = Lookup::Count { coef: *tok, curve, roof, transfer, floor: Some(floor) };
        Op { fixed_s: 0.0, kind: OpKind::Measured(Box::new(Measured { roofline: op.kind, lookup })), ..op }
    }

    /// Whether the GEMMs after a quantized activation are measured with the quantization in
    /// their time (the FP8 and FP4 tables quantize inside the measured call).
    pub(super) fn quant_in_gemm(&self, q: LinearQuant) -> bool {
        q.is_quantized() && matches!(self.gemm_table(Some(q)), Some((GemmDtype::Fp8 | GemmDtype::Fp8Block | GemmDtype::Nvfp4, _)))
    }

    /// `op` (GQA attention over `hq` heads, queries and keys `hd` wide and values `vd`, `hkv`
    /// KV heads, reading what `reads` says of the cache) priced from the context and generation
    /// tables.
    pub(super) fn measured_attention(&self, op: Op, hq: f64, hkv: f64, (hd, vd): (f64, f64), reads: AttentionWindow) -> Op {
        let Some(t) = self.tables else { return op };
        let kv_fp8 = !matches!(self.opts.quant.kv, KvQuant::Disabled);
        // The table of the layer's own kernel where one is measured (full attention's, or the
        // sliding kernel of its window); otherwise, and always for a block-sparse layer, whose
        // read window is no sliding kernel's, the full-attention table looked up at the
        // clamped length.
        let own = match reads {
            AttentionWindow::Full => Some(0),
            AttentionWindow::Sliding(w) => Some(w as u64),
            AttentionWindow::TopBlocks(_) => None,
        };
        let window = reads.tokens();
        let fixed = [hd, hkv, hq];
        // Each phase's table: the cache dtype's own where it measured these heads (their exact
        // width, and head counts on both sides of them), its window's kernel first; otherwise the
        // other cache dtype's where that one did, carried by the rooflines' ratio (the kernel's
        // work is the same but for the bytes of the cache it reads: SGLang's FP8-cache prefill
        // table holds 512-wide heads only, whose utilisation carried to Llama's 128-wide heads
        // priced its prompts 7x slower than its bf16-cache kernel at the same heads); failing
        // both, the first of those tables that exists, at its nearest heads.
        let pick = |op: KernelOp| {
            let candidates = [kv_fp8, !kv_fp8].into_iter().flat_map(|fp8| {
                let exact = own.and_then(|w| t.get(&TableId::attention(op, fp8, w))).map(|g| (g, false, fp8));
                let full = t.get(&TableId::attention(op, fp8, 0)).map(|g| (g, window.is_some(), fp8));
                [exact, full].into_iter().flatten()
            });
            let candidates: Vec<_> = candidates.collect();
            let covers = |g: &crate::hardware::kernels::Grid| g.axis_values(0).contains(&hd) && g.covers(&fixed);
            candidates.iter().find(|c| covers(c.0)).or(candidates.first()).copied()
        };
        let (Some((ctx, _, ctx_fp8)), Some((gen, clamp_lookup, gen_fp8))) =
            (pick(KernelOp::ContextAttention), pick(KernelOp::GenerationAttention))
        else {
            return op;
        };
        let hbm = self.datasheet_hbm();
        let kvb = self.opts.quant.kv.bytes();
        let table_kvb = |fp8: bool| if fp8 { KvQuant::Fp8 } else { KvQuant::Disabled }.bytes();
        let peak = self.peak(Dtype::Bf16);
        // Coordinates (head_dim, KV heads, heads, batch, length).
        let roof_at = |hd: f64, hkv: f64, hq: f64, kvb: f64| AttentionRoof {
            per_pair: 4.0 * hq * hd / peak,
            per_ctx: 2.0 * hkv * hd * kvb / hbm,
            per_query: hq * hd * 4.0 / hbm,
        };
        // The tables time heads whose values are as wide as their keys; a narrower value head
        // (MiMo-V2-Flash: 192 and 128) carries the measured utilisation to its own work.
        let actual = AttentionRoof {
            per_pair: 2.0 * hq * (hd + vd) / peak,
            per_ctx: hkv * (hd + vd) * kvb / hbm,
            per_query: hq * (hd + vd) * 2.0 / hbm,
        };
        let win = window.map(|w| w as f64);
        let prefill_roof = |x: &[f64]| {
            let (b, s) = (x[3], x[4]);
            let (p, c) = clamp(win, b * s * (s + 1.0) / 2.0, b * s, b * s, b);
            roof_at(x[0], x[1], x[2], table_kvb(ctx_fp8)).at(p, c, b * s)
        };
        let decode_roof = |x: &[f64]| {
            let (b, len) = (x[3], x[4]);
            let (p, c) = clamp(win, b * len, b, b * len, b);
            roof_at(x[0], x[1], x[2], table_kvb(gen_fp8)).at(p, c, b)
        };
        let side = |grid, fp8: bool, roof: &dyn Fn(&[f64]) -> f64| {
            let table = Dense::<2>::slice(grid, &fixed, roof);
            let table = if fp8 == kv_fp8 { table } else { table.carried() };
            AttentionSide { table, measured: roof_at(hd, hkv, hq, table_kvb(fp8)), actual }
        };
        let lookup = Lookup::Attention {
            prefill: Some(side(ctx, ctx_fp8, &prefill_roof)),
            decode: Some(side(gen, gen_fp8, &decode_roof)),
            window: win,
            clamp_lookup,
            dcp: self.par.dcp.max(1) as f64,
        };
        Op { fixed_s: 0.0, window: None, kind: OpKind::Measured(Box::new(Measured { roofline: op.kind, lookup })), ..op }
    }

    /// The MoE table for the experts' quantization and the model's routing skew: the table's
    /// dtype, its bytes per weight and activation, and whether it is the experts' own dtype.
    fn moe_table(&self, experts: f64) -> Option<(&crate::hardware::kernels::Grid, MoeDtype, (f64, f64), bool)> {
        let t = self.tables?;
        let (dt, exact) = match self.expert_q {
            LinearQuant::Disabled => (MoeDtype::Bf16, true),
            LinearQuant::Fp8 => (MoeDtype::Fp8, true),
            LinearQuant::Fp8Block => (MoeDtype::Fp8Block, true),
            LinearQuant::Nvfp4 => (MoeDtype::Nvfp4, true),
            LinearQuant::W4A16Mxfp4 | LinearQuant::Mxfp4 => (MoeDtype::W4a16Mxfp4, true),
            LinearQuant::W4A8Mxfp4Mxfp8 => (MoeDtype::W4a8Mxfp4Mxfp8, true),
            LinearQuant::W4A16Int4 => (MoeDtype::Int4WeightOnly, true),
            // Integer kernels: the FP8 (8-bit activations) or bf16 (weight-only) table, carried.
            LinearQuant::W8A8Static | LinearQuant::W8A8Dynamic | LinearQuant::W4A8Static | LinearQuant::W4A8Dynamic => {
                (MoeDtype::Fp8, false)
            }
            LinearQuant::W8A16Static | LinearQuant::W8A16Dynamic => (MoeDtype::Bf16, false),
        };
        let bytes = |dt: MoeDtype| match dt {
            MoeDtype::Bf16 => (2.0, 2.0),
            MoeDtype::Fp8 | MoeDtype::Fp8Block => (1.0, 1.0),
            MoeDtype::W4a16Mxfp4 | MoeDtype::Int4WeightOnly => (0.5 + 1.0 / 32.0, 2.0),
            MoeDtype::W4a8Mxfp4Mxfp8 => (0.5 + 1.0 / 32.0, 1.0 + 1.0 / 32.0),
            MoeDtype::Nvfp4 => (0.5 + 1.0 / 16.0, 0.5 + 1.0 / 16.0),
        };
        let skew = if experts >= 256.0 {
            ["power_law_1.01", "power_law_1.2", "balanced"]
        } else {
            ["power_law_1.2", "power_law_1.01", "balanced"]
        };
        // INT4 weight-only experts where the engine's table has none (TensorRT-LLM's): the bf16
        // table (its activations and tensor cores), carried by the rooflines' ratio. Not the
        // MXFP4 weight-only one: it holds gpt-oss's shapes only.
        let carried: &[MoeDtype] = match dt {
            MoeDtype::Int4WeightOnly => &[MoeDtype::Bf16],
            _ => &[],
        };
        let own = std::iter::once((dt, exact)).chain(carried.iter().map(|&d| (d, false)));
        own.into_iter().find_map(|(dt, exact)| skew.iter().find_map(|s| t.get(&TableId::moe(dt, s))).map(|g| (g, dt, bytes(dt), exact)))
    }

    /// The roofline of this rank's routed experts per unit of tokens per expert: each local
    /// expert multiplies that many rows through gate-up and down (6·h·i FLOPs a row) and reads
    /// its weights once.
    fn experts_roof(&self, s: &super::moe::MoeShape, peak: f64, bytes: (f64, f64), matrices: f64) -> Roof1 {
        experts_roof_at(s.moe_tp, s.ep, s.eh, s.i_l * s.moe_tp, s.block.experts, peak, bytes, self.datasheet_hbm(), matrices)
    }

    /// Whether the routed experts of a block with `experts` experts are priced as one measured
    /// fused-MoE kernel (the engines' fused graph; eager experts keep their separate kernels).
    pub(super) fn experts_measured(&self, experts: f64) -> bool {
        self.compile && self.moe_table(experts).is_some()
    }

    /// The fused routed experts of one MoE block (the table's top-k, permute, gate-up,
    /// activation, down and combine) as one measured operator, or `None` without a table.
    /// `route` is how tokens reach the experts: (TP slicing, ranks of one MoE group).
    pub(super) fn measured_experts(&self, count: f64, s: &super::moe::MoeShape, roofline: OpKind, route: (f64, f64)) -> Option<Op> {
        let (grid, dt, bytes, exact) = self.moe_table(s.block.experts)?;
        let (route_tp, group_ranks) = route;
        // Tokens per expert: the tokens entering the MoE group times top-k over the experts.
        let coef = unit(f::TOKENS, group_ranks / route_tp * s.block.top_k / s.block.experts);
        let peak = |d: MoeDtype| {
            self.peak(match d {
                MoeDtype::Bf16 | MoeDtype::W4a16Mxfp4 | MoeDtype::Int4WeightOnly => Dtype::Bf16,
                MoeDtype::Nvfp4 => Dtype::Fp4,
                _ => Dtype::Fp8,
            })
        };
        // The tables time gated experts (gate, up and down), except at an ungated model's own
        // shape (below).
        let roof = self.experts_roof(s, peak(dt), bytes, 3.0);
        let fixed = [s.moe_tp, s.ep, s.eh, s.i_l * s.moe_tp, s.block.top_k, s.block.experts];
        // Coordinates (moe_tp, moe_ep, hidden, intermediate, top-k, experts, tokens per expert):
        // a clamped layout or shape scales by the roofline of the query's.
        let hbm = self.datasheet_hbm();
        let curve =
            Dense::<1>::slice(grid, &fixed, &|x: &[f64]| experts_roof_at(x[0], x[1], x[2], x[3], x[5], peak(dt), bytes, hbm, 3.0).at(x[6]));
        let target = self.experts_roof(s, self.peak(self.expert_q.gemm_dtype()), (s.wb, s.ab), s.matrices());
        // Another dtype, or ungated experts (up and down only) at a shape the table measured
        // gated: carried by the rooflines' ratio. The collectors time a model's own experts at
        // its own shape (vLLM's and SGLang's tables hold Nemotron-H's ungated ones: at 32 tokens
        // on an H100, 98 of its 128 experts read in 0.85 ms, a rate no gated expert could reach).
        let own_shape = (0..fixed.len()).all(|i| grid.sub_keys(&fixed[..i], i).contains(&fixed[i]));
        let ungated_carried = !s.block.gated && !own_shape;
        let transfer = (!exact || ungated_carried).then_some(Transfer { target, measured: roof });
        let lookup = Lookup::Count { coef, curve, roof, transfer, floor: None };
        let kind = OpKind::Measured(Box::new(Measured { roofline, lookup }));
        Some(Op { name: "moe_experts", count, gate: f::TOKENS, fixed_s: 0.0, window: None, kind })
    }

    /// A collective on `group` priced from its table when the group size was measured.
    pub(super) fn measured_collective(&self, op: Op, group: CommGroup, algo: Collective, bytes: &Coef) -> Op {
        let Some(t) = self.tables else { return op };
        let kind = match algo {
            Collective::AllReduce if t.collective(KernelOp::CustomAllReduce).is_some() => KernelOp::CustomAllReduce,
            Collective::AllReduce => KernelOp::AllReduce,
            Collective::AllGather => KernelOp::AllGather,
            Collective::ReduceScatter => KernelOp::ReduceScatter,
            Collective::AllToAll => KernelOp::AllToAll,
        };
        let Some(grid) = t.collective(kind) else { return op };
        let size = group.size as f64;
        if !grid.sub_keys(&[], 0).contains(&size) {
            return op;
        }
        // The tables key a collective by nccl-tests' message size: the whole tensor of an
        // all-reduce or reduce-scatter, and the gathered output of an all-gather (every rank's
        // part together), where the builders give an all-gather's bytes per rank.
        let (key, per_key) = match algo {
            Collective::AllGather => (scaled(bytes, size), 1.0 / size),
            _ => (*bytes, 1.0),
        };
        // The group's own model gives latency and per-byte slope for carrying beyond the data.
        let time = |key_bytes: f64| {
            let b = key_bytes * per_key;
            match algo {
                Collective::AllReduce => group.all_reduce(b),
                Collective::AllGather => group.all_gather(b),
                Collective::ReduceScatter => group.reduce_scatter(b),
                Collective::AllToAll => group.all_to_all(b),
            }
        };
        let gib = (1u64 << 30) as f64;
        let roof = Roof1 { compute: 0.0, memory0: time(1.0), memory1: (time(gib) - time(1.0)) / gib };
        let curve = Dense::<1>::slice(grid, &[size], &|x: &[f64]| roof.at(x[1]));
        let lookup = Lookup::Count { coef: key, curve, roof, transfer: None, floor: None };
        Op { fixed_s: 0.0, kind: OpKind::Measured(Box::new(Measured { roofline: op.kind, lookup })), ..op }
    }
}

/// The roofline of one rank's routed experts per unit of tokens per expert, for MoE tensor
/// parallelism `tp`, expert parallelism `ep`, hidden width `h`, intermediate width `inter`
/// (unsharded) and `experts` experts of `matrices` weight matrices (3 gated, 2 ungated): each of
/// the rank's E / ep experts multiplies that many rows through them (2·matrices·h·inter/tp FLOPs
/// a row) and reads its weights once.
#[allow(clippy::too_many_arguments)]
fn experts_roof_at(tp: f64, ep: f64, h: f64, inter: f64, experts: f64, peak: f64, (wb, ab): (f64, f64), hbm: f64, matrices: f64) -> Roof1 {
    let (local, i_l) = ((experts / ep).max(1.0), inter / tp);
    Roof1 {
        compute: local * 2.0 * matrices * h * i_l / peak,
        memory0: local * matrices * h * i_l * wb / hbm,
        memory1: local * (h * ab + 2.0 * h + 2.0 * matrices * i_l) / hbm,
    }
}

/// MLA's widths: latent rank, rotary, no-position and value head dimensions.
#[derive(Debug, Clone, Copy)]
pub(super) struct MlaDims {
    pub r: f64,
    pub rope: f64,
    pub nope: f64,
    pub v: f64,
}

/// The widths the MLA tables were measured at (DeepSeek-V3's).
const MEASURED_MLA: MlaDims = MlaDims { r: 512.0, rope: 64.0, nope: 128.0, v: 128.0 };

impl MlaDims {
    /// Prefill's core kernel over `hq` heads: attention over expanded keys and values.
    fn prefill_roof(&self, hq: f64, peak: f64, hbm: f64) -> AttentionRoof {
        let width = hq * (self.nope + self.rope + self.v);
        AttentionRoof { per_pair: 2.0 * width / peak, per_ctx: width * 2.0 / hbm, per_query: width * 2.0 / hbm }
    }
    /// Decode's core kernel over `hq` heads: the absorbed query against the latent cache.
    fn decode_roof(&self, hq: f64, kvb: f64, peak: f64, hbm: f64) -> AttentionRoof {
        AttentionRoof {
            per_pair: hq * (4.0 * self.r + 2.0 * self.rope) / peak,
            per_ctx: (self.r + self.rope) * kvb / hbm,
            per_query: hq * (2.0 * self.r + self.rope) * 2.0 / hbm,
        }
    }
}

/// What a GQA layer's attention reads of its cache: all of it, a sliding window, or the top
/// blocks a sparse-attention indexer picks (at most that many tokens).
#[derive(Clone, Copy)]
pub(super) enum AttentionWindow {
    Full,
    Sliding(u32),
    TopBlocks(u32),
}

impl AttentionWindow {
    pub(super) fn tokens(self) -> Option<u32> {
        match self {
            AttentionWindow::Full => None,
            AttentionWindow::Sliding(w) | AttentionWindow::TopBlocks(w) => Some(w),
        }
    }
}

impl Builder<'_> {
    /// MLA's core kernel (`op`, prefill or decode as `kernel` says) over `hq` local heads priced
    /// from the MLA tables, carried from DeepSeek-V3's widths to the model's by the rooflines'
    /// ratio; `None` without a table.
    pub(super) fn measured_mla(&self, op: &Op, kernel: KernelOp, hq: f64, dims: MlaDims) -> Option<Op> {
        let t = self.tables?;
        let kv_fp8 = !matches!(self.opts.quant.kv, KvQuant::Disabled);
        let grid = t.get(&TableId::mla(kernel, kv_fp8))?;
        let (peak, hbm, kvb) = (self.peak(Dtype::Bf16), self.datasheet_hbm(), self.opts.quant.kv.bytes());
        let roof_of = |d: &MlaDims, heads: f64| match kernel {
            KernelOp::ContextMla => d.prefill_roof(heads, peak, hbm),
            _ => d.decode_roof(heads, kvb, peak, hbm),
        };
        // Coordinates (heads, batch, length).
        let slice_roof = |x: &[f64]| {
            let r = roof_of(&MEASURED_MLA, x[0]);
            let (b, s) = (x[1], x[2]);
            match kernel {
                KernelOp::ContextMla => r.at(b * s * (s + 1.0) / 2.0, b * s, b * s),
                _ => r.at(b * s, b * s, b),
            }
        };
        let side = AttentionSide {
            table: Dense::<2>::slice(grid, &[hq], &slice_roof),
            measured: roof_of(&MEASURED_MLA, hq),
            actual: roof_of(&dims, hq),
        };
        let (prefill, decode) = if kernel == KernelOp::ContextMla { (Some(side), None) } else { (None, Some(side)) };
        // A sparse attention's top-k reads the full-attention tables as a window would: decode
        // looked up at the clamped length, the rooflines clamped.
        let (window, clamp_lookup) = (op.window, op.window.is_some());
        let lookup = Lookup::Attention { prefill, decode, window, clamp_lookup, dcp: self.par.dcp.max(1) as f64 };
        Some(Op {
            fixed_s: 0.0,
            window: None,
            kind: OpKind::Measured(Box::new(Measured { roofline: op.kind.clone(), lookup })),
            ..op.clone()
        })
    }
}
