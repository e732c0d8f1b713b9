//! What one engine step of a batch costs on one device of a candidate deployment, and how
//! much memory that deployment leaves for the KV cache.
//!
//! [`RooflineCost`] is built once per candidate (model × device × parallel layout × options):
//! it lays out the operator graph ([`graph`]) with coefficients precomputed, then prices any
//! [`BatchShape`] in O(operator kinds). [`StepCostModel`] is the seam the engines use, so
//! scheduler tests can swap in a fixed-latency model. [`memory::MemoryModel`] holds weights,
//! KV bytes per token and activation estimates. [`pipeline`] splits a pipelined replica's
//! layers over its stages and prices the activation send between them.

pub mod graph;
mod memo;
pub mod memory;
pub mod ops;
pub mod pipeline;
pub mod priced;

pub use crate::hardware::kernels::KernelRef;
pub use memory::MemoryModel;
pub use ops::{Breakdown, Features, OpTime};

use crate::hardware::{DeviceProfile, PowerLimit};
use crate::model::ModelArch;
use crate::quant::QuantConfig;
use ops::f;
use serde::{Deserialize, Serialize};

/// A parallel layout of `num_devices` devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ParallelConfig {
    pub num_devices: u32,
    /// Attention / dense tensor parallelism; `dp = num_devices / tp` replicas.
    pub tp: u32,
    pub dp: u32,
    /// Expert parallelism, MoE tensor parallelism (`N / (ep × moe_dp)`) and MoE data
    /// parallelism. For dense models these are 1.
    pub ep: u32,
    pub moe_tp: u32,
    pub moe_dp: u32,
    /// Decode context parallelism inside the TP group.
    pub dcp: u32,
    /// Pipeline stages of a replica (`--pp-sizes`): the decoder layers are split over `pp`
    /// stages, each `num_devices / pp` devices laid out as the other sizes say (TP, EP, MoE-TP
    /// and MoE-DP count the devices of one stage). Absent from JSON when 1.
    #[serde(default = "one_stage", skip_serializing_if = "is_one_stage")]
    pub pp: u32,
}

fn one_stage() -> u32 {
    1
}

fn is_one_stage(pp: &u32) -> bool {
    *pp == 1
}

impl ParallelConfig {
    pub fn dense(num_devices: u32, tp: u32) -> Self {
        ParallelConfig { num_devices, tp, dp: num_devices / tp, ep: 1, moe_tp: 1, moe_dp: 1, dcp: 1, pp: 1 }
    }

    /// Devices of one replica: TP × PP.
    pub fn replica_devices(&self) -> u32 {
        self.tp * self.pp
    }
}

/// Fusions of `--compile` and `--compilation-config`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileOptions {
    pub enabled: bool,
    pub multistream: bool,
    pub sequence_parallel: bool,
    pub matmul_allreduce: bool,
    pub dispatch_ffn_combine: bool,
}

/// How the word embedding is sharded (`--word-embedding-tp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingTp {
    Col,
    Row,
}

/// Everything besides model, device and layout that changes the operator graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostOptions {
    pub quant: QuantConfig,
    pub compile: CompileOptions,
    /// MTP draft passes per step (each runs the model's MTP block on the step's tokens).
    pub mtp_tokens: u32,
    /// Extra draft-model layers run per step (DFlash/DSpark `--num-draft-layers`).
    pub draft_layers: u32,
    pub shared_expert_tp: bool,
    pub word_embedding_tp: Option<EmbeddingTp>,
    /// Whether requests carry images (the vision tower's weights are resident only then).
    pub with_vision: bool,
    /// Price prefill attention with causal masking (a chunk of q tokens at context c attends
    /// to q·c − q(q−1)/2 pairs). Off = the original's convention: every query attends to the
    /// whole context.
    #[serde(default)]
    pub causal_attention: bool,
    /// Under tensor parallelism without attention DP, every TP rank keeps every token through
    /// the MoE block and one all-reduce sums the routed (and shared) experts' partial outputs,
    /// as vLLM's fused MoE layer, SGLang's and TensorRT-LLM's do. Off = the original's pattern:
    /// tokens sliced across the TP ranks before routing, all-gathered within the MoE-TP group,
    /// reduce-scattered after the experts and gathered back (three collectives, not one).
    #[serde(default)]
    pub moe_all_reduce: bool,
    /// Measured kernel tables of the device under the serving engine: GEMMs, attention, routed
    /// experts and collectives are priced from them (`None`: the roofline alone).
    #[serde(skip)]
    pub kernels: Option<KernelRef>,
}

impl CostOptions {
    /// One quantization for every linear, unquantized KV, no MTP or drafts, the original's
    /// attention convention — the options of most examples and benchmarks.
    pub fn basic(linear: crate::quant::LinearQuant, compile: bool) -> Self {
        CostOptions {
            quant: QuantConfig { linear, non_expert: None, attention: None, kv: crate::quant::KvQuant::Disabled, mxfp4_group_size: 32 },
            compile: CompileOptions { enabled: compile, ..Default::default() },
            mtp_tokens: 0,
            draft_layers: 0,
            shared_expert_tp: false,
            word_embedding_tp: None,
            with_vision: false,
            causal_attention: false,
            moe_all_reduce: false,
            kernels: None,
        }
    }
}

/// Load of one phase of a step on one replica.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseLoad {
    pub seqs: u64,
    /// Σ new tokens.
    pub tokens: u64,
    /// Σ context after this step (cached + new): KV read by attention.
    pub context: u64,
    /// Σ new × context: attention (query, key) pairs.
    pub pairs: f64,
    /// Σ new²: with causal masking a chunk of q new tokens skips q(q−1)/2 of its pairs.
    pub query_sq: f64,
}

impl PhaseLoad {
    /// `seqs` identical sequences of `query` new tokens at context `ctx`.
    pub fn uniform(seqs: u64, query: u64, ctx: u64) -> Self {
        PhaseLoad {
            seqs,
            tokens: seqs * query,
            context: seqs * ctx,
            pairs: (seqs * query) as f64 * ctx as f64,
            query_sq: seqs as f64 * (query as f64).powi(2),
        }
    }
    pub fn add_seq(&mut self, query: u64, ctx: u64) {
        self.seqs += 1;
        self.tokens += query;
        self.context += ctx;
        self.pairs += query as f64 * ctx as f64;
        self.query_sq += (query as f64).powi(2);
    }
    pub fn merge(&mut self, o: &PhaseLoad) {
        self.seqs += o.seqs;
        self.tokens += o.tokens;
        self.context += o.context;
        self.pairs += o.pairs;
        self.query_sq += o.query_sq;
    }
}

/// What one step of one replica runs: the summary the cost depends on.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchShape {
    pub prefill: PhaseLoad,
    pub decode: PhaseLoad,
    /// Rows that reach the LM head (sequences that emit a token; all MTP query positions).
    pub sampled: u64,
    /// Images encoded this step, with their patches and Σ patches².
    pub image_patches: u64,
    pub image_pairs: f64,
}

impl BatchShape {
    pub fn tokens(&self) -> u64 {
        self.prefill.tokens + self.decode.tokens
    }
    pub fn is_empty(&self) -> bool {
        self.tokens() == 0 && self.image_patches == 0
    }
    pub fn features(&self) -> Features {
        let mut x = [0.0; f::N];
        x[f::ONE] = if self.is_empty() { 0.0 } else { 1.0 };
        x[f::TOKENS] = self.tokens() as f64;
        x[f::P_TOKENS] = self.prefill.tokens as f64;
        x[f::D_TOKENS] = self.decode.tokens as f64;
        x[f::P_SEQS] = self.prefill.seqs as f64;
        x[f::D_SEQS] = self.decode.seqs as f64;
        x[f::P_CTX] = self.prefill.context as f64;
        x[f::D_CTX] = self.decode.context as f64;
        x[f::P_PAIRS] = self.prefill.pairs;
        x[f::D_PAIRS] = self.decode.pairs;
        x[f::SAMPLED] = self.sampled as f64;
        x[f::SEQS] = (self.prefill.seqs + self.decode.seqs) as f64;
        x[f::IMG_PATCHES] = self.image_patches as f64;
        x[f::IMG_PAIRS] = self.image_pairs;
        x[f::P_QSQ] = self.prefill.query_sq;
        x
    }
}

/// Latency of one step and where it went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepTime {
    pub seconds: f64,
    pub breakdown: Breakdown,
}

/// A step's time in its two parts: what the device runs (its kernels) and what the host does
/// for it (scheduling, input preparation, launching the graph, sampling and output processing:
/// the execution profile's per-step and per-sequence overheads). How they combine on the clock
/// is the serving engine's business: one after the other ([`StepParts::serial`]) or, when the
/// engine prepares the next step while the device runs this one, overlapped
/// ([`StepParts::overlapped`]).
///
/// The host's part comes in two: `host_s`, its work for the step's sequences (building their
/// inputs, block tables and sampling metadata), which an overlapping engine does for step n + 1
/// while the device runs step n; and `gap_s`, the per-step time the device waits on the host
/// however the engine schedules (the sampled tokens' copy back to the host and the launch of the
/// next step: vLLM's async scheduling narrows the gap between steps, it does not close it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepParts {
    pub device_s: f64,
    pub host_s: f64,
    pub gap_s: f64,
    /// Seconds the step's matrix work takes at the device's effective matrix rate (every
    /// operator's roofline matrix time, [`ops::Op::matrix_seconds`]): over `device_s`, the
    /// tensor-core load that decides how far a power-limited device's clocks fall
    /// ([`PowerLimit`]). Only filled where the device has a power limit: 0 otherwise.
    pub matrix_s: f64,
}

impl StepParts {
    /// Host and device take turns: the sum (what [`StepCostModel::step_seconds`] prices).
    #[inline]
    pub fn serial(&self) -> f64 {
        self.device_s + self.host_s + self.gap_s
    }

    /// The host prepares step n + 1 while the device runs step n: the slower of the two, and
    /// the gap between steps.
    #[inline]
    pub fn overlapped(&self) -> f64 {
        self.device_s.max(self.host_s) + self.gap_s
    }

    /// The host's time in all.
    #[inline]
    pub fn host_total(&self) -> f64 {
        self.host_s + self.gap_s
    }
}

/// Prices a step. The roofline model is the real one; tests use fixed latencies.
pub trait StepCostModel: Send + Sync {
    fn step(&self, shape: &BatchShape) -> StepTime;
    /// Latency only (the simulator's hot path).
    fn step_seconds(&self, shape: &BatchShape) -> f64 {
        self.step(shape).seconds
    }
    /// The step's device and host seconds apart (their sum is [`Self::step_seconds`]). A model
    /// without host time puts everything on the device.
    fn step_parts(&self, shape: &BatchShape) -> StepParts {
        StepParts { device_s: self.step_seconds(shape), ..StepParts::default() }
    }
    /// The device's power limit, where its sustained clocks were measured: a simulation slows
    /// its steps by the recent load (`None`: every step at the burst rate).
    fn power_limit(&self) -> Option<PowerLimit> {
        None
    }
}

/// The per-operator roofline model of one candidate on one device.
#[derive(Debug, Clone)]
pub struct RooflineCost {
    /// The operator graph, fixed once built: the fast path and the memo are derived from it.
    ops: Vec<ops::Op>,
    /// Host-side time added to every step: the gap the device waits, never overlapped.
    pub host_s: f64,
    /// The host's own work per step (a serving engine's scheduler pass and input preparation),
    /// which an overlapped engine does while the device runs the previous step: 0 unless a
    /// serving engine's execution profile says otherwise.
    pub step_host_s: f64,
    /// Host-side time per sequence in the step (sampling, scheduling, metadata), added to every
    /// step: 0 unless a serving engine's execution profile says otherwise.
    pub per_seq_s: f64,
    /// Notes about approximations taken while building (e.g. a dtype peak missing).
    pub warnings: Vec<String>,
    /// The device's power limit (its sustained clocks), where measured.
    pub power: Option<PowerLimit>,
    /// `ops` as [`StepCostModel::step_seconds`] prices them (built with them, by
    /// [`RooflineCost::from_ops`]).
    fast: Vec<ops::FastOp>,
    /// Which of `fast` are memoised per step counts (built with them).
    memo: memo::StepMemo,
    /// The step's matrix work in O(features), for a power-limited device (built with `ops`).
    matrix: ops::MatrixLoad,
}

impl RooflineCost {
    pub fn new(model: &ModelArch, device: &DeviceProfile, par: &ParallelConfig, opts: &CostOptions) -> Self {
        graph::build(model, device, par, opts)
    }

    /// The model of an operator graph: `host_s` seconds added per step, none per sequence.
    pub fn from_ops(ops: Vec<ops::Op>, host_s: f64, warnings: Vec<String>) -> Self {
        let fast = ops::FastOp::of(&ops);
        let memo = memo::StepMemo::of(&ops);
        let matrix = ops::MatrixLoad::of(&ops);
        RooflineCost { ops, host_s, step_host_s: 0.0, per_seq_s: 0.0, warnings, power: None, fast, memo, matrix }
    }

    /// The operator graph.
    pub fn ops(&self) -> &[ops::Op] {
        &self.ops
    }

    /// Per-operator times for one shape (for chrome traces and the per-op tests).
    pub fn op_times(&self, shape: &BatchShape) -> Vec<(&'static str, f64, OpTime)> {
        let x = shape.features();
        self.ops.iter().map(|o| (o.name, o.count, o.eval(&x))).collect()
    }
}

impl StepCostModel for RooflineCost {
    fn step(&self, shape: &BatchShape) -> StepTime {
        let x = shape.features();
        if x[f::ONE] == 0.0 {
            return StepTime::default();
        }
        let (total, mut b) = self.memo.step(&self.ops, &x);
        debug_assert!({
            let (mut full, mut fb) = (0.0, Breakdown::default());
            for op in &self.ops {
                full += op.seconds_into(&x, &mut fb);
            }
            full.to_bits() == total.to_bits() && fb.to_bits() == b.to_bits()
        });
        let host = self.host_seconds(shape);
        b.fixed += host;
        StepTime { seconds: total + host, breakdown: b }
    }

    fn step_seconds(&self, shape: &BatchShape) -> f64 {
        self.step_parts(shape).serial()
    }

    fn power_limit(&self) -> Option<PowerLimit> {
        self.power
    }

    fn step_parts(&self, shape: &BatchShape) -> StepParts {
        let x = shape.features();
        if x[f::ONE] == 0.0 {
            return StepParts::default();
        }
        let xmask = ops::nonzero_mask(&x);
        let secs = self.memo.seconds(&self.fast, &self.ops, &x, xmask);
        // Mutation: read one dot product under another's mask, or leave a count the experts
        // read out of the memo's key, and this fires in the cost tests.
        debug_assert_eq!(secs.to_bits(), self.ops.iter().map(|op| op.seconds(&x)).sum::<f64>().to_bits());
        let matrix_s = if self.power.is_some() { self.matrix.seconds(&self.ops, &x) } else { 0.0 };
        // Mutation: drop the gate test in `MatrixLoad::seconds`, and this fires on a decode step.
        debug_assert!(
            self.power.is_none() || {
                let each: f64 = self.ops.iter().map(|op| op.matrix_seconds(&x)).sum();
                (matrix_s - each).abs() <= 1e-9 * each.abs().max(1e-9)
            }
        );
        StepParts { device_s: secs, host_s: self.host_work_seconds(shape), gap_s: self.host_s, matrix_s }
    }
}

impl RooflineCost {
    /// Host time of a step: the gap plus the host's work.
    pub fn host_seconds(&self, shape: &BatchShape) -> f64 {
        self.host_s + self.host_work_seconds(shape)
    }

    /// The host's work for a step, what overlapped scheduling can hide: the per-step part plus
    /// the per-sequence part.
    #[inline]
    pub fn host_work_seconds(&self, shape: &BatchShape) -> f64 {
        self.step_host_s + self.per_seq_s * (shape.prefill.seqs + shape.decode.seqs) as f64
    }
}

/// A cost model that charges a fixed time per step plus a time per token: scheduler tests
/// use it to assert exact step times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedCost {
    pub per_step_s: f64,
    pub per_token_s: f64,
}

impl StepCostModel for FixedCost {
    fn step(&self, shape: &BatchShape) -> StepTime {
        if shape.is_empty() {
            return StepTime::default();
        }
        let seconds = self.per_step_s + self.per_token_s * shape.tokens() as f64;
        StepTime { seconds, breakdown: Breakdown { fixed: seconds, ..Default::default() } }
    }
}

#[cfg(test)]
pub(crate) mod tests;
