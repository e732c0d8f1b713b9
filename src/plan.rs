//! The validated plan of a run: every choice the command line (or a scenario file) made, in
//! types the engines' builders, the search and the report read. `cli` produces it (all
//! validation happens there, once); nothing after `cli` re-validates user input.
//!
//! It sits below `search` and `report` so that both can read it without importing the command
//! line layer.

use crate::cost::{CompileOptions, EmbeddingTp};
use crate::hardware::DeviceProfile;
use crate::model::{ModelArch, ModelSource};
use crate::quant::{NamedEnum, QuantConfig};
use crate::sim::Percentile;
use crate::workload::arrival::{ArrivalProcess, SharedPrefix};
use crate::workload::Lengths;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which engine evaluates candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    Analytic,
    Sim,
    Compare,
}
crate::quant::named_enum!(EngineKind { Analytic => "analytic", Sim => "sim", Compare => "compare" });

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputFormat {
    Table,
    Json,
    Csv,
}
crate::quant::named_enum!(OutputFormat { Table => "table", Json => "json", Csv => "csv" });

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchStrategy {
    Exponential,
    LinearExponential,
}
crate::quant::named_enum!(SearchStrategy { Exponential => "exponential", LinearExponential => "linear_exponential" });

/// Which TPOT the SLO filter uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TpotDefinition {
    /// (finish − first token) / (O − 1) per request, as serving benchmarks measure it.
    InterToken,
    /// E2E / O, the documented formula's definition (TTFT amortised over the output).
    Amortized,
}
crate::quant::named_enum!(TpotDefinition { InterToken => "inter-token", Amortized => "amortized" });

impl TpotDefinition {
    pub fn parse(s: &str) -> Result<Self, String> {
        let norm = s.trim().replace('_', "-").to_lowercase();
        Self::ALL.iter().copied().find(|d| d.name() == norm).ok_or_else(|| format!("`{s}` is not one of {}", Self::choices()))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpeculativeMethod {
    Dflash,
    Dspark,
}
crate::quant::named_enum!(SpeculativeMethod { Dflash => "dflash", Dspark => "dspark" });

/// The serving engine whose scheduler the simulator models (`--serving-engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServingEngine {
    /// vLLM V1's scheduler and its default budget and running cap ([`crate::sim::scheduler::Vllm`]).
    Vllm,
    /// SGLang's prefill-first scheduler with conservative admission ([`crate::sim::scheduler::Sglang`]).
    Sglang,
    /// TensorRT-LLM's in-flight batching with guaranteed-no-evict admission
    /// ([`crate::sim::scheduler::Trtllm`]).
    Trtllm,
    /// The original msmodeling tool's decode-first scheduler with token-budget slack
    /// ([`crate::sim::scheduler::DecodeFirst`]), the tool's own auto budgets.
    Msmodeling,
}
crate::quant::named_enum!(ServingEngine { Vllm => "vllm", Sglang => "sglang", Trtllm => "trtllm", Msmodeling => "msmodeling" });

impl ServingEngine {
    /// The engine a device is served with when `--serving-engine` is not given: vLLM on
    /// NVIDIA GPUs and (ROCm vLLM) on AMD GPUs (the profile's `vendor`), msmodeling elsewhere
    /// (Ascend, the test device).
    pub fn default_for(device: &DeviceProfile) -> Self {
        if device.vendor.eq_ignore_ascii_case("nvidia") || device.vendor.eq_ignore_ascii_case("amd") {
            ServingEngine::Vllm
        } else {
            ServingEngine::Msmodeling
        }
    }

    /// The engine's default KV-cache block (page) size in tokens on an NVIDIA GPU: vLLM 16
    /// (`CacheConfig.block_size`, `vllm/config/cache.py`), 64 with an MLA model (the FlashMLA
    /// backend's only block size); SGLang's `page_size` 1 (`server_args.py`); TensorRT-LLM's
    /// `tokens_per_block` 32 (`KvCacheConfig`); msmodeling keeps the original's 128.
    pub fn kv_block_size(self, mla: bool) -> u32 {
        match self {
            ServingEngine::Vllm if mla => 64,
            ServingEngine::Vllm => 16,
            ServingEngine::Sglang => 1,
            ServingEngine::Trtllm => 32,
            ServingEngine::Msmodeling => 128,
        }
    }

    /// The simulator policy of the engine.
    pub fn scheduler(self) -> crate::sim::scheduler::SchedulerKind {
        match self {
            ServingEngine::Vllm => crate::sim::scheduler::SchedulerKind::Vllm,
            ServingEngine::Sglang => crate::sim::scheduler::SchedulerKind::Sglang,
            ServingEngine::Trtllm => crate::sim::scheduler::SchedulerKind::Trtllm,
            ServingEngine::Msmodeling => crate::sim::scheduler::SchedulerKind::DecodeFirst,
        }
    }

    /// The engine's own `(max_num_batched_tokens, max_num_seqs)` on `device` when the user sets
    /// neither; `None` for msmodeling (the tool's auto budgets and the searched batch size).
    ///
    /// vLLM: the OpenAI API server's defaults (`vllm serve`, usage context
    /// `OPENAI_API_SERVER`), as `EngineArgs._set_default_args` sets them in
    /// `vllm/engine/arg_utils.py` (vLLM main at commit 99d7eb5, before v0.12; the later
    /// `get_batch_defaults` keeps the same table): a GPU with at least 70 GiB of memory whose
    /// name does not contain "a100" (H100, H200, B200) gets 8192 tokens and 1024 sequences;
    /// other GPUs (A100 by its name, PR #17885; L40S by its memory) 2048 and 256. The running
    /// cap is then `min(max_num_seqs, max_num_batched_tokens)`. Without chunked prefill vLLM
    /// raises the budget to the model's context length; the search raises it to the longest
    /// prompt instead.
    ///
    /// SGLang: the budget is `chunked_prefill_size`, which `ServerArgs` sets by GPU memory in
    /// `python/sglang/srt/server_args.py` (main at 469c63e): under 35 GiB 2048, under 60 GiB
    /// 4096, under 160 GiB 8192 (H100, H200), else 16384 (B200). `max_running_requests` follows
    /// the KV pool size (`model_runner.py`: at least 2048); 2048 here.
    ///
    /// TensorRT-LLM: `max_num_tokens` 8192 and `max_batch_size` 2048, the LLM API's and
    /// `trtllm-serve`'s defaults (`BuildConfig`, also for the PyTorch backend).
    pub fn default_limits(self, device: &DeviceProfile) -> Option<(u64, u64)> {
        match self {
            ServingEngine::Msmodeling => None,
            ServingEngine::Sglang => {
                let gib = device.memory_gib();
                let tokens = if gib < 35.0 {
                    2048
                } else if gib < 60.0 {
                    4096
                } else if gib < 160.0 {
                    8192
                } else {
                    16384
                };
                Some((tokens, 2048))
            }
            ServingEngine::Trtllm => Some((8192, 2048)),
            ServingEngine::Vllm => {
                let large = device.memory_gib() >= 70.0 && !device.name.to_lowercase().contains("a100");
                let (tokens, seqs) = if large { (8192, 1024) } else { (2048, 256) };
                Some((tokens, seqs.min(tokens)))
            }
        }
    }
}

/// The serving engine `--emit` writes launch commands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchEngine {
    Vllm,
    Sglang,
    Trtllm,
}
crate::quant::named_enum!(LaunchEngine { Vllm => "vllm", Sglang => "sglang", Trtllm => "trtllm" });

/// `--emit-format`: shell scripts (one per node, and the router's) or Kubernetes manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmitFormat {
    Shell,
    K8s,
}
crate::quant::named_enum!(EmitFormat { Shell => "shell", K8s => "k8s" });

/// `--emit ENGINE [--emit-dir DIR] [--emit-row N]`: launch commands for a row of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct EmitOptions {
    pub engine: LaunchEngine,
    /// Write the files here; `None`: print them on stdout instead of the report.
    pub dir: Option<PathBuf>,
    /// 1-based row of the top table (1: the recommended configuration).
    pub row: usize,
    /// The model exactly as the user gave it (the commands serve it under that name).
    pub model: String,
    pub format: EmitFormat,
}

/// Block speculative decoding (DFlash / DSpark): `block` query tokens per decode step,
/// `acceptance` accepted draft tokens on average.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Speculative {
    pub method: SpeculativeMethod,
    pub block: u32,
    pub acceptance: f64,
    pub draft_layers: u32,
    pub markov_rank: Option<u32>,
    pub markov_head: Option<String>,
}

/// Serving mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Mode {
    Aggregation,
    Disaggregation { prefill: bool, decode: bool },
    PdRatio { prefill_devices: u32, decode_devices: u32, total_devices: Option<u32> },
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ImageSpec {
    pub height: u32,
    pub width: u32,
    pub per_request: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Prompt lengths (with a trace: its mean, which sizes the token budget and the formulas).
    pub input: Lengths,
    /// Output lengths (with a trace or a distribution's `output_bins`: their mean).
    pub output: Lengths,
    pub prefix_cache_hit_rate: f64,
    pub images: Option<ImageSpec>,
    /// `--random-range-ratio R`: the simulator draws each fixed length uniformly from
    /// [⌊(1 − R)·L⌋, ⌊(1 + R)·L⌋], as vLLM's random dataset does; the formulas use L.
    pub range_ratio: Option<f64>,
    /// `--ignore-eos`: every request generates its output length exactly, whatever the serving
    /// engine's benchmark client does by default.
    #[serde(default)]
    pub ignore_eos: bool,
    /// Where the lengths come from, as the report's Input Configuration says it.
    pub input_label: String,
    pub output_label: String,
}

/// Latency limits in ms; `None` = unset (no limit), `Some(inf)` = explicitly infinite.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
}

impl Slo {
    pub fn ttft_limit(&self) -> f64 {
        self.ttft_ms.unwrap_or(f64::INFINITY)
    }
    pub fn tpot_limit(&self) -> f64 {
        self.tpot_ms.unwrap_or(f64::INFINITY)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSpace {
    /// `None` = fixed default; `Some(vec![])` = powers of two; else explicit values.
    pub tp: Option<Vec<u32>>,
    pub ep: Option<Vec<u32>>,
    pub moe_dp: Option<Vec<u32>>,
    pub dcp: Option<Vec<u32>>,
    /// Pipeline-parallel sizes (`--pp-sizes`); `None` = 1, as for the other sizes.
    #[serde(default)]
    pub pp: Option<Vec<u32>>,
    pub mtp: Vec<u32>,
    pub batch_min: u32,
    pub batch_max: Option<u32>,
    pub strategy: SearchStrategy,
    /// `None` = auto budgets (4×, 2×, 1× the input length); several = a chunk-budget study.
    pub max_batched_tokens: Option<Vec<u64>>,
    /// Study every layout across the budgets, not only the best.
    pub sweep_all_layouts: bool,
    /// Aggregation: also search P/D deployments on the same devices and compare
    /// (`--compare-disagg`).
    pub compare_disagg: bool,
    /// `--shard K/N`: search only this slice of the candidates (see [`Shard`]).
    pub shard: Option<Shard>,
}

/// `--shard K/N`: the run searches the candidates whose index (in enumeration order, per
/// device and phase) is congruent to K − 1 modulo N, and its JSON keeps what
/// `throughput-optimizer merge` needs to rebuild the whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based: 1 ≤ index ≤ count.
    pub index: u32,
    pub count: u32,
    /// The command line without the program name, recorded so that `merge` can rebuild the
    /// plan (and render the report a single run would).
    pub args: Vec<String>,
}

impl Shard {
    /// Whether this shard searches the candidate at `index` (0-based): round-robin, so every
    /// shard gets a mix of small and large layouts.
    pub fn owns(&self, index: usize) -> bool {
        index % self.count as usize == (self.index - 1) as usize
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServingOptions {
    pub reserved_memory_gb: f64,
    /// `--gpu-memory-utilization F`: the engine may use this share of each device's memory (as
    /// vLLM users size it); the rest is the reserve, replacing `reserved_memory_gb`.
    pub gpu_memory_utilization: Option<f64>,
    pub serving_cost_ms: f64,
    pub mtp_acceptance_rates: Vec<f64>,
    pub speculative: Option<Speculative>,
    pub shared_expert_tp: bool,
    pub word_embedding_tp: Option<EmbeddingTp>,
    /// `--kv-block-size`; `None`: the simulated engine's own on NVIDIA, 128 elsewhere (see
    /// [`Plan::kv_block_size`]).
    pub kv_block_size: Option<u32>,
    pub token_budget_slack: f64,
    pub tpot_definition: TpotDefinition,
    /// Price prefill attention with causal masking (off: the original's convention).
    pub causal_attention: bool,
}

impl ServingOptions {
    /// GiB per device kept back from the model on `device`.
    pub fn reserved_gib(&self, device: &DeviceProfile) -> f64 {
        match self.gpu_memory_utilization {
            Some(f) => device.memory_gib() * (1.0 - f),
            None => self.reserved_memory_gb,
        }
    }
}

/// Simulator options (`--arrival`, scheduler knobs, SLO statistic).
#[derive(Debug, Clone, PartialEq)]
pub struct SimOptions {
    pub arrival: ArrivalProcess,
    pub num_requests: Option<u64>,
    pub max_concurrency: Option<u64>,
    pub max_num_seqs: Option<u64>,
    pub chunked_prefill: bool,
    pub slo_percentile: Percentile,
    /// Which requests and span the statistics cover (`--measure`).
    pub measure: crate::sim::Measure,
    pub shared_prefix: Option<SharedPrefix>,
    /// How P/D systems route requests to instances.
    pub routing: crate::sim::Routing,
    /// `--serving-engine`; `None`: each device's default ([`ServingEngine::default_for`]).
    pub serving_engine: Option<ServingEngine>,
    /// `--serving-engine ENGINE@VERSION`: the release whose version-dependent defaults apply
    /// (overlapped scheduling); `None`: the current release.
    pub engine_version: Option<crate::hardware::calibration::EngineVersion>,
}

impl SimOptions {
    /// `--measure whole-run`: the statistics cover every request over the whole run.
    pub fn measures_whole_run(&self) -> bool {
        self.measure == crate::sim::Measure::WholeRun
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutputOptions {
    pub format: OutputFormat,
    pub file: Option<PathBuf>,
    pub top: Option<usize>,
    /// Columns the text report fits in (`--width`, or the terminal's); `None`: no limit, the
    /// layout of a report written to a pipe or a file.
    pub width: Option<usize>,
    /// Terminal charts: `Some(true)` forced, `Some(false)` never, `None` when stdout is a tty.
    pub plot: Option<bool>,
    pub dump_original: bool,
    /// `--chrome-trace-file`: the simulated timeline of the best configuration.
    pub chrome_trace: Option<PathBuf>,
    /// `--requests-file`: one CSV row per simulated request of the best configuration.
    pub requests_file: Option<PathBuf>,
    /// `--operator-trace-file`: the per-operator breakdown of one prefill and one decode step.
    pub operator_trace: Option<PathBuf>,
    /// SVG charts written here.
    pub plot_file: Option<PathBuf>,
    pub quiet: bool,
    /// `--emit`: launch commands of a row for a serving engine.
    pub emit: Option<EmitOptions>,
}

/// What a sizing run must serve (`--target-request-rate`, `--target-concurrency`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Target {
    /// Requests per second, arriving as the plan's open-loop process at this rate.
    RequestRate(f64),
    /// Clients of a closed loop over all instances.
    Concurrency(u64),
}

/// Capacity planning: goodput per candidate (`--goodput`) and sizing for a target load.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Capacity {
    /// Every open-loop row gets the highest rate at which it meets the SLO.
    pub goodput: bool,
    /// Size the deployment for this load instead of ranking layouts on `num_devices`.
    pub target: Option<Target>,
}

/// Everything a run needs, validated. Later stages trust it.
#[derive(Debug, Clone)]
pub struct Plan {
    pub model: ModelArch,
    pub model_source: ModelSource,
    pub devices: Vec<DeviceProfile>,
    pub num_devices: u32,
    pub workload: Workload,
    pub mode: Mode,
    pub slo: Slo,
    pub quant: QuantConfig,
    pub compile: CompileOptions,
    pub search: SearchSpace,
    pub serving: ServingOptions,
    pub sim: SimOptions,
    pub engine: EngineKind,
    pub output: OutputOptions,
    pub jobs: usize,
    pub seed: u64,
    /// Serving-engine execution profiles and calibrations (`--calibration`).
    pub engines: crate::hardware::calibration::EngineProfiles,
    /// Notes for stderr (ignored flags, deprecated names, large searches).
    pub warnings: Vec<String>,
    /// `--goodput`, `--target-request-rate`, `--target-concurrency`.
    pub capacity: Capacity,
    /// `--device-hour-cost`: what a device costs per hour, to price rows per million tokens.
    pub device_hour_cost: Option<DeviceHourCost>,
    /// `--plan-replicas WINDOW`: the replica plan's window, seconds (with `--arrival trace`).
    pub replica_window_s: Option<f64>,
}

/// `--device-hour-cost`: the price of one device for one hour, USD, for every device profile or
/// per profile (a YAML file mapping profile names to prices). Validated: finite, at least 0, and
/// a price for every device profile the run uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DeviceHourCost {
    /// One price for every device profile (`--device-hour-cost 2.5`).
    All(f64),
    /// Prices per device profile, by the profiles' own names (`--device-hour-cost prices.yaml`).
    PerProfile { file: String, prices: std::collections::BTreeMap<String, f64> },
}

impl DeviceHourCost {
    /// USD per hour of one device of profile `profile` (`None`: the map has no price for it,
    /// which validation rules out for the run's own devices).
    pub fn usd_per_device_hour(&self, profile: &str) -> Option<f64> {
        match self {
            DeviceHourCost::All(p) => Some(*p),
            DeviceHourCost::PerProfile { prices, .. } => prices.get(profile).copied(),
        }
    }
}

/// How the simulator schedules on one device: the serving engine, and the budget and running cap
/// its defaults set where the user set none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineLimits {
    pub engine: ServingEngine,
    /// The engine's default token budget (`None`: the tool's auto budgets or the user's).
    pub default_budget: Option<u64>,
    /// `--max-num-seqs`, else the engine's default (`None`: the searched batch size).
    pub max_num_seqs: Option<u64>,
}

impl Plan {
    /// The serving engine simulated on `device`.
    pub fn serving_engine(&self, device: &DeviceProfile) -> ServingEngine {
        self.sim.serving_engine.unwrap_or_else(|| ServingEngine::default_for(device))
    }

    /// The serving engine on `device` as the cost model sees it: calibrated efficiencies,
    /// host overheads, fused graph.
    pub fn effective(&self, device: &DeviceProfile) -> crate::hardware::calibration::Effective {
        use crate::quant::NamedEnum;
        let mxfp4_experts = self.model.is_moe() && self.quant.for_experts().is_mxfp4();
        self.engines.effective(self.serving_engine(device).name(), device, self.sim.engine_version, mxfp4_experts)
    }

    /// The serving engine on `device` with the limits it implies. The analytic engine keeps the
    /// tool's auto budgets whatever the serving engine.
    pub fn engine_limits(&self, device: &DeviceProfile) -> EngineLimits {
        let engine = self.serving_engine(device);
        let defaults = if self.engine == EngineKind::Analytic { None } else { engine.default_limits(device) };
        let default_budget = match (&self.search.max_batched_tokens, defaults) {
            (None, Some((tokens, _))) if !self.sim.chunked_prefill => Some(tokens.max(self.workload.input.max_effective(0.0))),
            (None, Some((tokens, _))) => Some(tokens),
            _ => None,
        };
        EngineLimits { engine, default_budget, max_num_seqs: self.sim.max_num_seqs.or(defaults.map(|d| d.1)) }
    }

    /// The KV-cache block size the simulation allocates by on `device`: `--kv-block-size`, else
    /// the simulated engine's own on an NVIDIA or AMD GPU (what `--emit` passes; the ROCm builds
    /// of vLLM and SGLang keep the CUDA defaults), else the original tool's 128 (Ascend, the test
    /// device, the formulas).
    pub fn kv_block_size(&self, device: &DeviceProfile) -> u32 {
        let gpu = device.vendor.eq_ignore_ascii_case("nvidia") || device.vendor.eq_ignore_ascii_case("amd");
        match self.serving.kv_block_size {
            Some(b) => b,
            None if gpu && self.engine != EngineKind::Analytic => self.serving_engine(device).kv_block_size(self.model.uses_mla()),
            None => 128,
        }
    }

    /// How the simulator spreads fixed output lengths on `device` (`None`: it does not): the
    /// serving engine's benchmark client honours end-of-sequence by default
    /// (`EngineProfile::benchmark_client`), unless `--ignore-eos` or `--random-range-ratio`
    /// (which spreads lengths as the user asked) says otherwise.
    pub fn output_spread(&self, device: &DeviceProfile) -> Option<u64> {
        if self.workload.ignore_eos || self.workload.range_ratio.is_some() || !matches!(self.workload.output, Lengths::Fixed(_)) {
            return None;
        }
        let profile = self.engines.get(self.serving_engine(device).name());
        profile.benchmark_client.as_ref().map(|c| c.output_spread_tokens).filter(|k| *k > 0)
    }

    /// Device count of each phase's instance.
    pub fn phase_devices(&self) -> (u32, u32) {
        match self.mode {
            Mode::PdRatio { prefill_devices, decode_devices, .. } => (prefill_devices, decode_devices),
            _ => (self.num_devices, self.num_devices),
        }
    }
}
