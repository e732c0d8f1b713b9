//! The result model of a run, as data: every probed [`Row`], why a probe is infeasible
//! ([`StopReason`]), the ranked best rows per phase, P/D matches and their simulated
//! verification, chunk-budget studies, the echoed inputs — one [`Report`] value; beside it,
//! what the search recorded of each best configuration for the trace outputs ([`recording`]).
//!
//! `search` builds them; `report` only renders them; snapshot tests compare the report. It
//! sits above the engines (a row carries the simulator's latency statistics), below `search`.

mod capacity;
mod cost;
mod frontier;
mod pd;
pub mod price;
pub mod recording;
mod replicas;

use crate::cost::memory::MemoryUse;
use crate::cost::{Breakdown, ParallelConfig};
pub use capacity::*;
pub use cost::*;
pub use frontier::*;
pub use pd::*;
pub use replicas::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::analytic::pd::InstanceSplit;

/// Which phase a search evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Prefill and decode on the same instances (PD mixed).
    Aggregated,
    Prefill,
    Decode,
}

impl Phase {
    /// The machine-readable code, the same in JSON and CSV.
    pub fn code(self) -> &'static str {
        match self {
            Phase::Aggregated => "aggregated",
            Phase::Prefill => "prefill",
            Phase::Decode => "decode",
        }
    }
}

pub const DISCLAIMER: &str = "These results come from throughput modelling and are a planning reference only: actual \
performance depends on the runtime, topology, software stack and real traffic, so validate on the real serving \
stack with your workload before deciding.";

/// Why a probe is infeasible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    PrefillOom,
    DecodeOom,
    MemoryOom,
    TpotLimit,
    TtftLimit,
    /// The simulation did not finish within its step budget (neither a memory nor a latency
    /// verdict: the probe is unknown, and counted infeasible).
    StepLimit,
}

impl From<crate::analytic::Oom> for StopReason {
    fn from(o: crate::analytic::Oom) -> Self {
        match o {
            crate::analytic::Oom::Prefill => StopReason::PrefillOom,
            crate::analytic::Oom::Decode => StopReason::DecodeOom,
        }
    }
}

impl StopReason {
    pub const ALL: [StopReason; 6] = [
        StopReason::PrefillOom,
        StopReason::DecodeOom,
        StopReason::MemoryOom,
        StopReason::TpotLimit,
        StopReason::TtftLimit,
        StopReason::StepLimit,
    ];

    /// The machine-readable code, the same in JSON and CSV (`prefill_oom`, `tpot_limit`, …).
    pub fn code(self) -> &'static str {
        match self {
            StopReason::PrefillOom => "prefill_oom",
            StopReason::DecodeOom => "decode_oom",
            StopReason::MemoryOom => "memory_oom",
            StopReason::TpotLimit => "tpot_limit",
            StopReason::TtftLimit => "ttft_limit",
            StopReason::StepLimit => "step_limit",
        }
    }

    /// The reason in words, for the text report.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::PrefillOom => "out of memory in prefill",
            StopReason::DecodeOom => "out of memory in decode",
            StopReason::MemoryOom => "out of memory",
            StopReason::TpotLimit => "TPOT above the limit",
            StopReason::TtftLimit => "TTFT above the limit",
            StopReason::StepLimit => "simulation step limit reached",
        }
    }
}

/// One composition line of a variable-length batch (per DP replica).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompositionRow {
    pub num_input_tokens: u64,
    pub query_len: u64,
    pub request_ratio: f64,
    pub samples: u64,
}

/// One probed (candidate, batch size) with its metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub device: String,
    pub phase: Phase,
    pub parallel: String,
    pub layout: ParallelConfig,
    pub mtp: u32,
    /// Requests per DP replica.
    pub batch_size: u32,
    /// Requests in flight over all replicas.
    pub concurrency: u64,
    pub num_devices: u32,
    pub ttft_ms: Option<f64>,
    /// TPOT under the plan's definition.
    pub tpot_ms: Option<f64>,
    pub tpot_amortized_ms: Option<f64>,
    pub tpot_inter_token_ms: Option<f64>,
    /// Output tokens/s (aggregation, decode) or input tokens/s (prefill).
    pub throughput: f64,
    pub throughput_per_device: f64,
    /// Requests per second.
    pub qps: Option<f64>,
    pub memory: MemoryUse,
    pub breakdown_prefill: Option<Breakdown>,
    pub breakdown_decode: Option<Breakdown>,
    pub max_batched_tokens: u64,
    pub prefill_num_chunks: u64,
    pub effective_input_length: u64,
    pub stop_reason: Option<StopReason>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub composition: Vec<CompositionRow>,
    /// Simulator figures (simulated rows only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<SimSummary>,
    /// Why the simulation could not run, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "sim_error_message", deserialize_with = "sim_error_read")]
    #[schemars(with = "Option<String>")]
    pub sim_error: Option<crate::sim::SimError>,
    /// The analytic engine's figures at the same batch size (`--engine compare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analytic: Option<AnalyticFigures>,
    /// The serving engine whose scheduler the simulation ran (simulated rows only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_engine: Option<crate::plan::ServingEngine>,
    /// Running sequences per replica the simulation allowed (simulated rows only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u64>,
    /// With `--device-hour-cost`: USD per million output tokens of the whole deployment —
    /// `num_devices` × USD per device-hour ÷ (output tokens/s × 3600) × 10⁶ (none for prefill
    /// rows, which emit no output but first tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens: Option<f64>,
    /// With `--device-hour-cost`: USD per million tokens the row's devices process — prompt and
    /// output tokens in aggregation (prompt tokens/s = output tokens/s × mean prompt ÷ mean
    /// output), prompt tokens on prefill instances, output tokens on decode instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_tokens: Option<f64>,
    /// `--goodput`: the highest offered rate, req/s, at which this layout still meets the SLO
    /// (0: not even at 1/64 of the offered rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_rate_within_slo: Option<f64>,
    /// `--goodput`: the rate search's simulations, by rate (the offered rate's is the row's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_curve: Vec<SloPoint>,
}

/// What the simulator measured beyond the row's headline figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SimSummary {
    pub latency: crate::sim::LatencyStats,
    pub total_throughput: f64,
    pub goodput: f64,
    pub kv_utilization: f64,
    pub kv_peak_utilization: f64,
    pub kv_capacity_blocks: u64,
    pub mean_batch_size: f64,
    pub mean_step_ms: f64,
    pub steps: u64,
    pub measured_requests: u64,
    pub preemptions: u64,
    pub window_s: f64,
    pub converged: bool,
    /// Stopped early: latencies were far past the limits.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abandoned: bool,
    /// Share of prompt tokens found in the prefix cache (absent when none were).
    #[serde(default, skip_serializing_if = "crate::sim::metrics::is_zero")]
    pub prefix_cache_hit_rate: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<crate::sim::BinStat>,
}

impl SimSummary {
    pub fn from_report(r: &crate::sim::SimReport) -> Self {
        SimSummary {
            latency: r.latency.clone(),
            total_throughput: r.total_throughput,
            goodput: r.goodput,
            kv_utilization: r.kv_utilization,
            kv_peak_utilization: r.kv_peak_utilization,
            kv_capacity_blocks: r.kv_capacity_blocks,
            mean_batch_size: r.mean_batch_size,
            mean_step_ms: r.mean_step_ms,
            steps: r.steps,
            measured_requests: r.measured,
            preemptions: r.preemptions,
            window_s: r.window_s,
            converged: r.converged,
            abandoned: r.abandoned,
            prefix_cache_hit_rate: r.prefix_cache_hit_rate,
            bins: r.bins.clone(),
        }
    }
}

/// The analytic engine's TTFT, TPOT and throughput for a simulated row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AnalyticFigures {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub throughput: f64,
    pub feasible: bool,
}

impl Row {
    pub fn feasible(&self) -> bool {
        self.stop_reason.is_none()
    }

    /// The latencies and request rate, by their JSON names. An infeasible probe may carry an
    /// infinite latency, which JSON writes as `null` (like an absent one): a shard lists
    /// these in [`ShardCandidate::non_finite`] so that `merge` restores them.
    pub fn optional_floats_mut(&mut self) -> [(&'static str, &mut Option<f64>); 5] {
        [
            ("ttft_ms", &mut self.ttft_ms),
            ("tpot_ms", &mut self.tpot_ms),
            ("tpot_amortized_ms", &mut self.tpot_amortized_ms),
            ("tpot_inter_token_ms", &mut self.tpot_inter_token_ms),
            ("qps", &mut self.qps),
        ]
    }

    /// A row with only the batch size set (tests of the search).
    pub fn probe_stub(batch: u32) -> Row {
        Row {
            device: String::new(),
            phase: Phase::Aggregated,
            parallel: String::new(),
            layout: ParallelConfig::dense(1, 1),
            mtp: 0,
            batch_size: batch,
            concurrency: batch as u64,
            num_devices: 1,
            ttft_ms: None,
            tpot_ms: None,
            tpot_amortized_ms: None,
            tpot_inter_token_ms: None,
            throughput: 0.0,
            throughput_per_device: 0.0,
            qps: None,
            memory: MemoryUse::default(),
            breakdown_prefill: None,
            breakdown_decode: None,
            max_batched_tokens: 0,
            prefill_num_chunks: 0,
            effective_input_length: 0,
            stop_reason: None,
            composition: Vec::new(),
            sim: None,
            sim_error: None,
            analytic: None,
            serving_engine: None,
            max_num_seqs: None,
            usd_per_million_output_tokens: None,
            usd_per_million_tokens: None,
            max_request_rate_within_slo: None,
            slo_curve: Vec::new(),
        }
    }

    /// The breakdown that describes this row's bottleneck: decode for aggregation and decode,
    /// prefill for prefill, weighted by time when both exist.
    pub fn breakdown(&self) -> Option<Breakdown> {
        match (self.breakdown_prefill, self.breakdown_decode) {
            (Some(p), Some(d)) => {
                let mut b = Breakdown::default();
                b.add_scaled(&p, 1.0);
                b.add_scaled(&d, 1.0);
                Some(b)
            }
            (p, d) => p.or(d),
        }
    }
}

/// One budget of a chunk-budget study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SweepPoint {
    /// `--max-batched-tokens`.
    pub budget: u64,
    pub chunks_per_prompt: u64,
    pub ttft_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub throughput: f64,
    /// Whether this budget meets the limits at the study's concurrency.
    pub feasible: bool,
    /// The best batch size under the limits with this budget, and its throughput.
    pub best_batch: Option<u32>,
    pub best_throughput: Option<f64>,
}

/// A layout studied across budgets at one concurrency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BudgetSweep {
    pub parallel: String,
    pub batch_size: u32,
    pub concurrency: u64,
    pub points: Vec<SweepPoint>,
}

/// All probes of one phase on one device, and the ranked best rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PhaseResult {
    pub phase: Phase,
    pub num_devices: u32,
    pub rows: Vec<Row>,
    pub best: Vec<Row>,
    /// Layouts skipped because the model cannot run them.
    pub skipped: Vec<String>,
    /// Why layouts produced no feasible row (for "no configuration" messages).
    pub failures: Vec<String>,
    /// Chunk-budget studies (several `--max-batched-tokens`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweeps: Vec<BudgetSweep>,
    /// `--shard` runs only: the candidates this shard searched, in order, with how many of
    /// `rows` each produced, so that `merge` can put every row back in candidate order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shard_candidates: Vec<ShardCandidate>,
}

/// One candidate a shard searched: its index in the whole enumeration of the phase, the
/// number of consecutive `rows` it produced and why it produced no feasible row, if so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShardCandidate {
    pub index: usize,
    pub rows: usize,
    pub failure: Option<String>,
    /// Latencies of its rows that are not finite (JSON has no infinity): `"ROW FIELD VALUE"`,
    /// ROW counting from 0 within the candidate, VALUE `inf`, `-inf` or `NaN`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_finite: Vec<String>,
}

/// A `--shard K/N` run's slice: `throughput-optimizer merge` reads N of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ShardInfo {
    /// K, from 1.
    pub index: u32,
    /// N.
    pub count: u32,
    /// The command line of the run (without the program name), from which `merge` rebuilds
    /// the plan.
    pub args: Vec<String>,
}

/// Profile numbers shown in the cross-hardware comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProfileSummary {
    pub cube_tflops: f64,
    pub vector_tflops: f64,
    pub hbm_tib_s: f64,
    pub memory_gib: f64,
    /// Devices per level of the communication grid, outermost level first.
    pub comm_grid: Vec<u64>,
    /// Effective bandwidth per device of each grid level (bandwidth × efficiency), GB/s,
    /// outermost level first.
    pub comm_gb_s: Vec<f64>,
}

/// The serving engine simulated on a device: its scheduler policy, token budget and running cap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServingSummary {
    pub engine: crate::plan::ServingEngine,
    /// The scheduler policy, in words.
    pub policy: String,
    /// Token budgets searched, in the order tried.
    pub max_batched_tokens: Vec<u64>,
    /// Where the budgets come from: `flag` (`--max-batched-tokens`), `engine-default`, or `auto`
    /// (4×, 2×, 1× the prompt, the next only when the previous runs out of memory in prefill).
    pub budget_source: String,
    /// Running sequences per replica; `None`: the searched batch size.
    pub max_num_seqs: Option<u64>,
    /// Whether `max_num_seqs` is a default (the engine's, or the open loop's), not `--max-num-seqs`.
    pub max_num_seqs_default: bool,
    /// The engine's execution profile and calibration on this device, in words.
    #[serde(default)]
    pub calibration: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceResult {
    pub device: String,
    pub profile: ProfileSummary,
    /// The simulated serving engine (simulator engines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<ServingSummary>,
    pub phases: Vec<PhaseResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pd_ratio: Option<PdRatioResult>,
    /// Approximations taken by the cost model (e.g. a missing dtype peak).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Aggregation: every probe (and with `--compare-disagg` every P/D deployment) as a point
    /// of tokens/s per device against tokens/s per user, the frontier and the choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontier: Option<Frontier>,
    /// `--compare-disagg`: the best aggregated and P/D deployments side by side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agg_vs_disagg: Option<AggVsDisagg>,
    /// `--plan-replicas`: the instance count per window of the trace for the chosen deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_plan: Option<ReplicaPlan>,
    /// `--target-request-rate` / `--target-concurrency`: the smallest deployment on this
    /// device that serves the target within the SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizing: Option<Sizing>,
}

/// Which serving mode the run searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModeKind {
    Aggregation,
    Disaggregation,
    PdRatio,
}

/// The serving mode: its kind, the phases searched and, for P/D ratio planning, the instance
/// sizes and the device budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModeInput {
    pub kind: ModeKind,
    /// Phases searched, in order.
    pub phases: Vec<Phase>,
    /// P/D ratio planning: devices per prefill and per decode instance.
    pub prefill_devices_per_instance: Option<u32>,
    pub decode_devices_per_instance: Option<u32>,
    /// P/D ratio planning: the device budget to split (`--num-devices`), if given.
    pub total_devices: Option<u32>,
    /// The mode in words, as the text report says it.
    pub description: String,
}

/// Where request lengths come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LengthSource {
    /// One length for every request (`--input-length N`, `--output-length N`).
    Fixed,
    /// A length distribution (its bins; for outputs, the file's `output_bins`).
    Distribution,
    /// Every request's lengths from `--arrival trace FILE`.
    Trace,
}

/// Input or output lengths of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LengthInput {
    pub source: LengthSource,
    /// Mean length in tokens before the prefix cache (the length itself when fixed).
    pub mean_tokens: u64,
    /// As Input Configuration prints it (e.g. `3500`, `from the trace (mean 2404)`).
    pub description: String,
}

/// The batch sizes per replica searched (`--batch-range`); `max` none: unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BatchRange {
    pub min: u32,
    pub max: Option<u32>,
}

/// The run's inputs, echoed in every format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Inputs {
    pub model: String,
    pub model_source: String,
    pub devices: Vec<String>,
    pub num_devices: u32,
    pub mode: ModeInput,
    pub input_length: LengthInput,
    pub output_length: LengthInput,
    pub effective_input_length: u64,
    pub quantize_linear_action: String,
    pub quantize_non_expert_linear_action: Option<String>,
    /// The token mixers' projections, where the checkpoint stores them apart (no flag sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_projections: Option<String>,
    pub quantize_attention_action: String,
    pub compile: bool,
    pub ttft_limit_ms: Option<f64>,
    pub tpot_limit_ms: Option<f64>,
    pub tpot_definition: String,
    pub prefix_cache_hit_rate: f64,
    pub mtp_tokens: Vec<u32>,
    pub mtp_acceptance_rates: Vec<f64>,
    pub max_batched_tokens: Option<Vec<u64>>,
    pub batch_range: BatchRange,
    pub reserved_memory_gb: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_utilization: Option<f64>,
    pub serving_cost_ms: f64,
    pub seed: u64,
    /// `--device-hour-cost`: the price of each device profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_hour_cost: Option<CostInput>,
}

/// The version of the JSON report's schema (docs/report.schema.json); the changelog is in
/// docs/user-guide.md, section "Schema versions".
pub const SCHEMA_VERSION: u32 = 2;

/// The whole result of a run: what `--output json` writes. Floating-point numbers are
/// rounded to 6 significant digits when written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "throughput-optimizer report")]
pub struct Report {
    /// The version of this schema.
    pub schema_version: u32,
    pub tool: String,
    pub version: String,
    pub engine: String,
    pub inputs: Inputs,
    pub devices: Vec<DeviceResult>,
    pub warnings: Vec<String>,
    pub disclaimer: String,
    /// `--shard K/N` runs only: which slice this is. Its floating-point numbers are written
    /// exactly (not rounded), so that `merge` ranks and renders as the single run would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// `--device-hour-cost` in aggregation: every device's deployments priced and the frontier
    /// of cost per million tokens against tokens/s per user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_frontier: Option<CostFrontier>,
}

impl Report {
    /// Best rows of `phase` over all devices, one per device (cross-hardware summary).
    pub fn cross_hardware(&self, phase: Phase) -> Vec<Row> {
        let mut v: Vec<Row> =
            self.devices.iter().filter_map(|d| d.phases.iter().find(|p| p.phase == phase).and_then(|p| p.best.first().cloned())).collect();
        v.sort_by(|a, b| b.throughput.total_cmp(&a.throughput));
        v
    }
}

/// A simulation failure is kept typed in memory (its kind decides the stop reason) and written
/// as its message in JSON, so that schema version 1 keeps its string fields. Reading a report
/// back keeps the message ([`sim_error_read`]).
pub(crate) fn sim_error_message<S: serde::Serializer>(e: &Option<crate::sim::SimError>, s: S) -> Result<S::Ok, S::Error> {
    match e {
        Some(e) => s.serialize_str(&e.to_string()),
        None => s.serialize_none(),
    }
}

/// A row's simulation failure read back from JSON (`merge`): its message, which renders and
/// serializes as the original did.
fn sim_error_read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<crate::sim::SimError>, D::Error> {
    Ok(<Option<String> as serde::Deserialize>::deserialize(d)?.map(crate::sim::SimError::Reported))
}
