//! Measured kernel latencies of one system under one serving engine's kernels: the device
//! time of GEMMs, attention, routed experts and collectives, as silicon ran them.
//!
//! A [`KernelTables`] holds one [`Grid`] per measured table (a GEMM dtype, an attention
//! variant, a MoE dtype and routing skew, a collective), keyed by [`TableId`]. The tables come
//! from NVIDIA AIConfigurator's public silicon database (`aic`: its directory of parquet files,
//! read as published) or from the compact copies derived from it that ship inside the binary
//! (`packed`). The cost model slices a grid at an operator's fixed widths ([`Dense`]) and
//! prices each step's varying shape from the slice.
//!
//! Axis order of every table (coordinates of a point, outermost first; the last axis is the
//! one that varies from step to step):
//!
//! | table | axes |
//! |---|---|
//! | `gemm/<dtype>` | n (output features), k (input features), m (tokens) |
//! | `context_attention/<kv dtype>/w<window>` | head_dim, kv heads, q heads (per GPU), batch, prompt tokens |
//! | `generation_attention/<kv dtype>/w<window>` | head_dim, kv heads, q heads (per GPU), batch, KV length |
//! | `moe/<dtype>/<distribution>` | moe_tp, moe_ep, hidden, intermediate, top-k, experts, tokens per expert |
//! | `all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all` (NCCL); `custom_all_reduce` (the engine's) | GPUs, bytes |
//! | `context_mla/<kv dtype>`, `generation_mla/<kv dtype>` (MLA's core kernel at DeepSeek-V3's dimensions) | q heads (per GPU), batch, prompt tokens or KV length |
//! | `context_msa_module/<kv dtype>/<gemm dtype>`, `generation_msa_module/…` (MiniMax-M3's whole attention block) | q heads (per GPU), batch, prompt tokens or KV length |
//! | `context_mla_module/<kv dtype>/<gemm dtype>`, `generation_mla_module/…` (DeepSeek-V3's whole MLA block) | q heads (per GPU), batch, prompt tokens or KV length |
//!
//! Latencies are seconds per call of one operator (one layer) on one GPU. MoE tables are keyed
//! by tokens per expert (tokens entering the MoE group × top-k / experts) rather than tokens:
//! what decides a grouped GEMM's utilisation is the rows each expert multiplies, so an unseen
//! expert layout is priced at the utilisation measured at the same rows per expert.

pub mod aic;
pub mod builtin;
pub mod dense;
pub mod grid;
pub mod packed;

pub use dense::Dense;
pub use grid::{Grid, GridError, Priced, Source};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Which operator a table measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelOp {
    Gemm,
    ContextAttention,
    GenerationAttention,
    Moe,
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    /// The serving engine's own one-shot/two-shot all-reduce (vLLM and SGLang custom
    /// all-reduce, TensorRT-LLM's), used for tensor-parallel all-reduces within a node.
    CustomAllReduce,
    /// Multi-head latent attention's core kernel in prefill (expanded keys and values), as
    /// measured at DeepSeek-V3's dimensions (latent 512, rotary 64, no-position 128, value 128).
    ContextMla,
    /// MLA's core kernel in decode (absorbed form over the latent cache), DeepSeek-V3's
    /// dimensions.
    GenerationMla,
    /// MiniMax Sparse Attention's whole block in prefill, as measured at MiniMax-M3's
    /// dimensions: the QKV and index projections, norms, rotary, the indexer, attention over
    /// the top blocks and o_proj of one layer on one GPU (no TP reduction).
    ContextMsa,
    /// The same block in decode.
    GenerationMsa,
    /// Multi-head latent attention's whole block in prefill, as measured at DeepSeek-V3's
    /// dimensions: the fused down projection, the latent norms, q_b_proj, rotary, the latent
    /// cache write, kv_b_proj's expansion, attention and o_proj of one layer on one GPU (no TP
    /// reduction).
    ContextMlaModule,
    /// The same block in decode (attention in the absorbed form over the latent cache).
    GenerationMlaModule,
}

impl KernelOp {
    pub const ALL: [KernelOp; 15] = [
        KernelOp::Gemm,
        KernelOp::ContextAttention,
        KernelOp::GenerationAttention,
        KernelOp::Moe,
        KernelOp::AllReduce,
        KernelOp::AllGather,
        KernelOp::ReduceScatter,
        KernelOp::AllToAll,
        KernelOp::CustomAllReduce,
        KernelOp::ContextMla,
        KernelOp::GenerationMla,
        KernelOp::ContextMsa,
        KernelOp::GenerationMsa,
        KernelOp::ContextMlaModule,
        KernelOp::GenerationMlaModule,
    ];

    pub fn name(self) -> &'static str {
        match self {
            KernelOp::Gemm => "gemm",
            KernelOp::ContextAttention => "context_attention",
            KernelOp::GenerationAttention => "generation_attention",
            KernelOp::Moe => "moe",
            KernelOp::AllReduce => "all_reduce",
            KernelOp::AllGather => "all_gather",
            KernelOp::ReduceScatter => "reduce_scatter",
            KernelOp::AllToAll => "all_to_all",
            KernelOp::CustomAllReduce => "custom_all_reduce",
            KernelOp::ContextMla => "context_mla",
            KernelOp::GenerationMla => "generation_mla",
            KernelOp::ContextMsa => "context_msa_module",
            KernelOp::GenerationMsa => "generation_msa_module",
            KernelOp::ContextMlaModule => "context_mla_module",
            KernelOp::GenerationMlaModule => "generation_mla_module",
        }
    }

    pub fn from_name(s: &str) -> Option<KernelOp> {
        KernelOp::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Axes of the op's tables (see the module documentation).
    pub fn dims(self) -> usize {
        match self {
            KernelOp::Gemm => 3,
            KernelOp::ContextAttention | KernelOp::GenerationAttention => 5,
            KernelOp::Moe => 7,
            KernelOp::ContextMla
            | KernelOp::GenerationMla
            | KernelOp::ContextMsa
            | KernelOp::GenerationMsa
            | KernelOp::ContextMlaModule
            | KernelOp::GenerationMlaModule => 3,
            _ => 2,
        }
    }
}

/// One table: an op and its variant (a GEMM's dtype, an attention's KV dtype and window, a
/// MoE's dtype and routing distribution; empty for collectives).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableId {
    pub op: KernelOp,
    pub variant: String,
}

impl TableId {
    pub fn new(op: KernelOp, variant: impl Into<String>) -> Self {
        TableId { op, variant: variant.into() }
    }
    pub fn gemm(dtype: GemmDtype) -> Self {
        TableId::new(KernelOp::Gemm, dtype.name())
    }
    pub fn attention(op: KernelOp, kv_fp8: bool, window: u64) -> Self {
        TableId::new(op, format!("{}/w{window}", if kv_fp8 { "fp8" } else { "bfloat16" }))
    }
    pub fn mla(op: KernelOp, kv_fp8: bool) -> Self {
        TableId::new(op, if kv_fp8 { "fp8" } else { "bfloat16" })
    }
    /// A whole attention block (MiniMax-M3's sparse one, DeepSeek-V3's MLA) measured with a
    /// bf16 or FP8 KV cache and projections of `gemm` (`bfloat16`, `fp8_block` or `nvfp4`, the
    /// database's names).
    pub fn module(op: KernelOp, kv_fp8: bool, gemm: &str) -> Self {
        TableId::new(op, format!("{}/{gemm}", if kv_fp8 { "fp8" } else { "bfloat16" }))
    }
    pub fn moe(dtype: MoeDtype, distribution: &str) -> Self {
        TableId::new(KernelOp::Moe, format!("{}/{distribution}", dtype.name()))
    }
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.variant.is_empty() {
            write!(f, "{}", self.op.name())
        } else {
            write!(f, "{}/{}", self.op.name(), self.variant)
        }
    }
}

/// GEMM kinds the tables measure (activation quantization included where there is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GemmDtype {
    Bf16,
    /// FP8 E4M3, per-tensor weight scale, dynamic per-token activation scale.
    Fp8,
    /// FP8 with 128 × 128 weight blocks and 1 × 128 activation groups (DeepSeek, Qwen FP8).
    Fp8Block,
    /// NVFP4: FP4 E2M1 in 16-element groups with FP8 E4M3 scales (Blackwell tensor cores).
    Nvfp4,
}

impl GemmDtype {
    pub fn name(self) -> &'static str {
        match self {
            GemmDtype::Bf16 => "bfloat16",
            GemmDtype::Fp8 => "fp8",
            GemmDtype::Fp8Block => "fp8_block",
            GemmDtype::Nvfp4 => "nvfp4",
        }
    }
    pub fn from_name(s: &str) -> Option<GemmDtype> {
        [GemmDtype::Bf16, GemmDtype::Fp8, GemmDtype::Fp8Block, GemmDtype::Nvfp4].into_iter().find(|d| d.name() == s)
    }
}

/// Routed-expert kernels the tables measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MoeDtype {
    Bf16,
    Fp8,
    Fp8Block,
    /// INT4 weights, bf16 activations (Marlin).
    Int4WeightOnly,
    /// MXFP4 weights, bf16 activations (gpt-oss).
    W4a16Mxfp4,
    /// MXFP4 weights, MXFP8 activations (Blackwell).
    W4a8Mxfp4Mxfp8,
    Nvfp4,
}

impl MoeDtype {
    pub const ALL: [MoeDtype; 7] = [
        MoeDtype::Bf16,
        MoeDtype::Fp8,
        MoeDtype::Fp8Block,
        MoeDtype::Int4WeightOnly,
        MoeDtype::W4a16Mxfp4,
        MoeDtype::W4a8Mxfp4Mxfp8,
        MoeDtype::Nvfp4,
    ];
    pub fn name(self) -> &'static str {
        match self {
            MoeDtype::Bf16 => "bfloat16",
            MoeDtype::Fp8 => "fp8",
            MoeDtype::Fp8Block => "fp8_block",
            MoeDtype::Int4WeightOnly => "int4_wo",
            MoeDtype::W4a16Mxfp4 => "w4a16_mxfp4",
            MoeDtype::W4a8Mxfp4Mxfp8 => "w4a8_mxfp4_mxfp8",
            MoeDtype::Nvfp4 => "nvfp4",
        }
    }
    pub fn from_name(s: &str) -> Option<MoeDtype> {
        MoeDtype::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// Where a set of tables came from, as the report and `price` name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The system as the database names it (`h200_sxm`).
    pub system: String,
    /// The engine whose kernels were timed (`vllm`, `sglang`, `trtllm`, `torch`).
    pub engine: String,
    pub version: String,
    /// Where the measurements come from, for attribution.
    pub origin: String,
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {} ({})", self.system, self.engine, self.version, self.origin)
    }
}

/// The measured tables of one system under one engine's kernels.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelTables {
    pub provenance: Provenance,
    tables: BTreeMap<TableId, Grid>,
}

impl KernelTables {
    pub fn new(provenance: Provenance, tables: BTreeMap<TableId, Grid>) -> Self {
        KernelTables { provenance, tables }
    }

    pub fn get(&self, id: &TableId) -> Option<&Grid> {
        self.tables.get(id)
    }

    pub fn gemm(&self, dtype: GemmDtype) -> Option<&Grid> {
        self.get(&TableId::gemm(dtype))
    }

    pub fn collective(&self, op: KernelOp) -> Option<&Grid> {
        self.get(&TableId::new(op, ""))
    }

    /// Variants measured for `op` (a MoE's dtypes and distributions, say).
    pub fn variants(&self, op: KernelOp) -> impl Iterator<Item = &str> {
        self.tables.keys().filter(move |k| k.op == op).map(|k| k.variant.as_str())
    }

    pub fn tables(&self) -> impl Iterator<Item = (&TableId, &Grid)> {
        self.tables.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

/// Tables merged by [`with_moe_from`], kept while both of their sources live.
type MergedEntry = (std::sync::Weak<KernelTables>, std::sync::Weak<KernelTables>, MoeDtype, Arc<KernelTables>);
static MERGED: std::sync::Mutex<Vec<MergedEntry>> = std::sync::Mutex::new(Vec::new());

/// `base` with its `dtype` routed-expert tables replaced by `donor`'s: the experts run the
/// donor engine's kernels. `base` itself when `donor` measured none of them. Merged once per
/// pair and shared, so every candidate of a run sees the same tables.
pub fn with_moe_from(base: &Arc<KernelTables>, donor: &Arc<KernelTables>, dtype: MoeDtype) -> Arc<KernelTables> {
    let prefix = format!("{}/", dtype.name());
    let is_dtype = |k: &TableId| k.op == KernelOp::Moe && k.variant.starts_with(&prefix);
    if !donor.tables.keys().any(is_dtype) {
        return Arc::clone(base);
    }
    // A poisoned lock only means another thread panicked while merging; the list stays valid.
    let mut merged = MERGED.lock().unwrap_or_else(|e| e.into_inner());
    merged.retain(|(b, d, _, _)| b.strong_count() > 0 && d.strong_count() > 0);
    let same = |w: &std::sync::Weak<KernelTables>, a: &Arc<KernelTables>| std::ptr::eq(w.as_ptr(), Arc::as_ptr(a));
    if let Some((_, _, _, t)) = merged.iter().find(|(b, d, k, _)| same(b, base) && same(d, donor) && *k == dtype) {
        return Arc::clone(t);
    }
    let mut tables: BTreeMap<TableId, Grid> =
        base.tables.iter().filter(|(k, _)| !is_dtype(k)).map(|(k, g)| (k.clone(), g.clone())).collect();
    tables.extend(donor.tables.iter().filter(|(k, _)| is_dtype(k)).map(|(k, g)| (k.clone(), g.clone())));
    let mut provenance = base.provenance.clone();
    provenance.version =
        format!("{}, {} experts from {} {}", provenance.version, dtype.name(), donor.provenance.engine, donor.provenance.version);
    let t = Arc::new(KernelTables::new(provenance, tables));
    merged.push((Arc::downgrade(base), Arc::downgrade(donor), dtype, Arc::clone(&t)));
    t
}

/// Shared kernel tables, compared by identity (the tables of one system and engine are loaded
/// once per run and shared by every candidate).
#[derive(Clone)]
pub struct KernelRef(pub Arc<KernelTables>);

impl PartialEq for KernelRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for KernelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KernelRef({})", self.0.provenance)
    }
}

/// Which kernel tables a run prices with.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum KernelChoice {
    /// The built-in tables where they ship (NVIDIA H100, H200, B200 under vLLM, SGLang and
    /// TensorRT-LLM), the roofline elsewhere.
    #[default]
    Builtin,
    /// `--performance-model analytic`: the roofline alone.
    Roofline,
    /// `--performance-model profiling --profiling-database-path DIR`: tables read from a
    /// database, per device name and engine.
    Database(Arc<DatabaseTables>),
}

/// Tables read from a database for the devices and engines of one run.
#[derive(Debug)]
pub struct DatabaseTables {
    pub dir: std::path::PathBuf,
    /// (device name, engine) → tables.
    pub tables: BTreeMap<(String, String), Arc<KernelTables>>,
}

impl PartialEq for DatabaseTables {
    fn eq(&self, other: &Self) -> bool {
        self.dir == other.dir && self.tables.keys().eq(other.tables.keys())
    }
}

impl KernelChoice {
    /// The tables of `device` (its `kernel_system`) under `engine`'s kernels.
    pub fn tables(&self, device: &super::DeviceProfile, engine: &str) -> Option<KernelRef> {
        match self {
            KernelChoice::Roofline => None,
            KernelChoice::Builtin if device.kernel_system.is_empty() => None,
            KernelChoice::Builtin => builtin::tables(&device.kernel_system, engine).map(KernelRef),
            KernelChoice::Database(db) => db.tables.get(&(device.name.clone(), engine.to_string())).cloned().map(KernelRef),
        }
    }
}

impl DatabaseTables {
    /// Read, for each (device, engine), the device's system (its `kernel_system`, else its
    /// name in lower case) under the engine's kernels, else under `torch` (a profiler's own
    /// tables).
    /// `borrowed`: (device, engine) pairs read only if the database has them (another engine's
    /// kernels an engine runs, [`super::runtime::BorrowedMoeKernels`]), with no fallback.
    pub fn load(
        dir: &std::path::Path,
        wanted: &[(&super::DeviceProfile, &str)],
        borrowed: &[(&super::DeviceProfile, &str)],
    ) -> Result<DatabaseTables, aic::AicError> {
        let db = aic::AicDatabase::open(dir)?;
        let system_of = |d: &super::DeviceProfile| if d.kernel_system.is_empty() { d.name.to_lowercase() } else { d.kernel_system.clone() };
        let mut tables = BTreeMap::new();
        for (device, engine) in wanted {
            let system = system_of(device);
            let t = db.load(&system, engine).or_else(|e| db.load(&system, "torch").map_err(|_| e))?;
            tables.insert((device.name.clone(), engine.to_string()), Arc::new(t));
        }
        for (device, engine) in borrowed {
            if let std::collections::btree_map::Entry::Vacant(slot) = tables.entry((device.name.clone(), engine.to_string())) {
                if let Ok(t) = db.load(&system_of(device), engine) {
                    slot.insert(Arc::new(t));
                }
            }
        }
        Ok(DatabaseTables { dir: dir.to_path_buf(), tables })
    }
}
