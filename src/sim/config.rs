//! What a simulation runs: one instance's configuration ([`InstanceConfig`]: the scheduler
//! policy, token budget, KV cache, decode mode, execution profile: overlapped scheduling, the
//! front end ([`Frontend`]) and the CUDA graphs ([`CudaGraphs`])), a homogeneous run
//! ([`SimConfig`]) or a P/D [`System`] of instance [`Group`]s with the [`KvTransfer`] between
//! them and their [`Routing`], and the workload side of a run ([`RunParams`], [`Measure`]).
//! Plain values: the simulator reads them, nothing here runs.

use super::decode::DecodeMode;
use super::queue::Nanos;
use crate::cost::StepCostModel;

/// What an instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Prefill and decode (aggregated serving).
    Mixed,
    /// Prefill only: a request leaves after its first token, its KV sent to a decode instance.
    Prefill,
    /// Decode only: requests arrive with their prompt's KV.
    Decode,
}

/// The policies an instance can run (the policies themselves, and what each kind builds:
/// [`super::scheduler`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SchedulerKind {
    #[default]
    DecodeFirst,
    Vllm,
    Sglang,
    Trtllm,
}

/// How one instance schedules and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceConfig {
    /// The per-step policy (which requests decode, which prompts get how many tokens, whom to
    /// preempt); the instance carries out its decisions.
    pub scheduler: SchedulerKind,
    /// Token budget per step (`--max-batched-tokens`).
    pub budget: u64,
    /// The budget is inflated by this share for prefill chunks after the decodes.
    pub slack: f64,
    /// Running sequences per instance.
    pub max_num_seqs: u64,
    pub chunked_prefill: bool,
    pub block_size: u64,
    /// KV blocks per instance.
    pub kv_blocks: u64,
    pub decode: DecodeMode,
    /// Token-level prefix-cache hit rate.
    pub prefix_hit_rate: f64,
    pub images_per_request: u64,
    pub image_patches_per_image: u64,
    /// Vision patches per request (images × patches).
    pub image_patches: u64,
    /// LLM tokens the images add to each prompt.
    pub image_tokens: u64,
    /// The engine plans each step while the previous one runs: a new request that arrived
    /// after the previous step started misses this one (see
    /// `EngineProfile::overlap_scheduling_from`), and a step's wall time is the larger of its
    /// device and host times instead of their sum (the host prepares step n + 1 while the
    /// device runs step n). An idle engine plans at once.
    pub overlap_scheduling: bool,
    /// The engine's front end (API server: HTTP, tokenization, detokenization, streaming), a
    /// first-come-first-served server in front of the instance; `None`: requests reach the
    /// engine when they arrive and tokens reach the client when a step emits them.
    pub frontend: Option<Frontend>,
    /// The CUDA graphs the engine captured; `None`: every step is priced as the cost model
    /// prices it (the original tool's convention).
    pub graphs: Option<CudaGraphs>,
}

/// Service times of an engine's front end, seconds. A request occupies it on its way in
/// (`request_s` + `input_token_s` per prompt token) and reaches the engine's waiting queue
/// when that is done; each step's output tokens occupy it on their way out
/// (`output_token_s` each), and the client sees them when that is done.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frontend {
    pub request_s: f64,
    pub input_token_s: f64,
    pub output_token_s: f64,
}

impl Frontend {
    /// Service time of a request of `prompt` tokens on its way in, ns (at least 1: the
    /// request passes through the server, whatever its price).
    pub fn request_ns(&self, prompt: u64) -> Nanos {
        (((self.request_s + self.input_token_s * prompt as f64) * 1e9).round() as Nanos).max(1)
    }

    /// Service time of `tokens` output tokens on their way out, ns.
    pub fn tokens_ns(&self, tokens: u64) -> Nanos {
        (self.output_token_s * tokens as f64 * 1e9).round() as Nanos
    }
}

/// What a captured CUDA graph's size counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphUnit {
    /// Tokens of the step (vLLM: `cudagraph_capture_sizes` are token counts).
    Tokens,
    /// Decoding sequences (SGLang's `cuda_graph_max_bs`, TensorRT-LLM's
    /// `cuda_graph_config.max_batch_size`).
    Sequences,
}

/// The CUDA graphs an engine captured, for one instance. A step that replays a graph launches
/// it in one call (its launch is part of the per-step host time); a step no graph covers runs
/// eager and its host also launches every kernel ([`CudaGraphs::eager_launch_s`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CudaGraphs {
    pub unit: GraphUnit,
    /// Largest captured size.
    pub max_size: u64,
    /// Steps with prefill tokens replay graphs too (vLLM's piecewise graphs); otherwise only
    /// decode-only steps do (SGLang, TensorRT-LLM).
    pub mixed_steps: bool,
    /// A batch between captured sizes is padded up to the next (and priced at it); without
    /// padding only the captured sizes replay (TensorRT-LLM's default).
    pub padding: bool,
    /// The captured sizes as `(from, step)` pairs: from `from` on (up to the next pair's
    /// `from`), every multiple of `step` past it (vLLM: `[(1, 1), (2, 2), (4, 4), (8, 8),
    /// (256, 16)]` is 1, 2, 4, 8, 16, …, 248, 256, 272, …).
    pub grid: Vec<(u64, u64)>,
    /// Host seconds to launch the kernels of an eager step (kernels per step × launch cost).
    pub eager_launch_s: f64,
}

impl CudaGraphs {
    /// The captured size a batch of `size` replays (`None`: it runs eager).
    pub fn replayed_size(&self, size: u64) -> Option<u64> {
        if size == 0 || size > self.max_size {
            return None;
        }
        let next = self.next_captured(size)?;
        (next <= self.max_size && (self.padding || next == size)).then_some(next)
    }

    /// The smallest captured size of the grid at or above `size`.
    fn next_captured(&self, size: u64) -> Option<u64> {
        for (i, &(from, step)) in self.grid.iter().enumerate() {
            if size <= from {
                return Some(from);
            }
            let end = self.grid.get(i + 1).map_or(u64::MAX, |g| g.0);
            let at = from + (size - from).div_ceil(step.max(1)) * step.max(1);
            if at < end {
                return Some(at);
            }
        }
        None
    }
}

impl InstanceConfig {
    /// Running sequences are capped so that every decode fits the step's token budget.
    pub fn running_cap(&self) -> u64 {
        self.max_num_seqs.min((self.budget / self.decode.query_tokens()).max(1))
    }

    /// A text-only decode-first instance with chunked prefill and 1000 KV blocks: the base of
    /// the scheduler tests, which vary the rest field by field.
    #[cfg(test)]
    pub(crate) fn for_tests(budget: u64, slack: f64, max_num_seqs: u64, block_size: u64) -> Self {
        InstanceConfig {
            scheduler: Default::default(),
            budget,
            slack,
            max_num_seqs,
            chunked_prefill: true,
            block_size,
            kv_blocks: 1000,
            decode: DecodeMode::Plain,
            prefix_hit_rate: 0.0,
            images_per_request: 0,
            image_patches_per_image: 0,
            image_patches: 0,
            image_tokens: 0,
            overlap_scheduling: false,
            frontend: None,
            graphs: None,
        }
    }
}

/// A homogeneous simulation: `instances` copies of one instance configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub instance: InstanceConfig,
    /// Instances simulated (DP replicas).
    pub instances: u32,
    /// What the instances run (mixed serving, prefill only, decode only).
    pub role: Role,
    pub run: RunParams,
}

/// Workload-side parameters of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunParams {
    /// Closed loop: requests in flight over all simulated instances; burst: requests released.
    pub concurrency: u64,
    /// Open loop: requests to simulate.
    pub num_requests: u64,
    /// Closed loop as a serving benchmark runs it (`vllm bench serve --max-concurrency C
    /// --num-prompts N`): C requests start at t = 0, a new one as each finishes until N were
    /// sent, and every statistic covers all N (the first wave included) over the whole run.
    /// `None`: the steady state of an endless closed loop.
    pub closed_requests: Option<u64>,
    /// Open loop: which requests and span the statistics cover (a benchmark-run closed loop
    /// always covers the whole run).
    pub measure: Measure,
    /// Open loop: at most this many requests in flight (client side).
    pub max_concurrency: Option<u64>,
    /// Closed loop: completions measured at least before the stopping rule may stop (a tail
    /// percentile needs a tail: [`Percentile::min_sample`](super::metrics::Percentile::min_sample)).
    pub min_measured: u64,
    /// Limits for goodput (ms).
    pub ttft_limit_ms: f64,
    pub tpot_limit_ms: f64,
    pub seed: u64,
    /// Steps after which a run is abandoned.
    pub max_steps: u64,
    /// Input-length bins `[min, max)` to break latencies down by (variable-length workloads).
    pub bins: Vec<(u64, u64)>,
    /// Open loop with a steady window: stop as soon as every measured request has finished.
    /// The latencies are then final (the requests after the window only fill the queue
    /// behind it), so an SLO check gets the same verdict without the drain. The latencies and
    /// the measured count are the full run's; the step count and the makespan cover the run
    /// up to then; the run keeps neither the series its rates and KV
    /// use are read from nor the step breakdown (those read 0); and when only the report is
    /// wanted ([`crate::sim::simulate_report`]) instances may run ahead of the stop (the other
    /// step statistics and the tokens emitted may count steps past it).
    pub stop_once_measured: bool,
}

impl RunParams {
    /// A steady-state closed loop of `concurrency` requests with no latency limits, seed 0 and
    /// a bound of 1 M steps: the base tests and benchmarks adjust.
    pub fn closed(concurrency: u64) -> Self {
        RunParams {
            measure: Default::default(),
            closed_requests: None,
            concurrency,
            num_requests: 0,
            max_concurrency: None,
            min_measured: 0,
            ttft_limit_ms: f64::INFINITY,
            tpot_limit_ms: f64::INFINITY,
            seed: 0,
            max_steps: 1_000_000,
            bins: Vec::new(),
            stop_once_measured: false,
        }
    }
}

/// Instances of one kind in a system.
pub struct Group<'a> {
    pub role: Role,
    pub count: u32,
    /// One instance's configuration; with a pipeline, one micro-batch lane's (its share of the
    /// replica's KV pool and running cap).
    pub cfg: InstanceConfig,
    /// The whole model's step cost (with a pipeline, only where a step's time went).
    pub cost: &'a dyn StepCostModel,
    /// Pipeline parallelism: each of the `count` replicas runs its steps through these stages
    /// (`None`: one stage, a step priced by `cost`).
    pub pipeline: Option<Pipeline<'a>>,
}

/// The stages of a pipelined replica (`sim::pipeline`): each stage's step cost, first to
/// last, and the activation send between consecutive stages. A replica keeps one micro-batch
/// per stage in flight, as vLLM's batch queue and SGLang's micro-batches do: it is simulated
/// as one lane per stage, each an instance running one batch at a time.
pub struct Pipeline<'a> {
    pub stages: Vec<&'a dyn StepCostModel>,
    pub send: crate::cost::pipeline::StageSend,
}

impl Pipeline<'_> {
    /// Stages (micro-batch lanes) per replica.
    pub fn len(&self) -> u32 {
        self.stages.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }
}

/// Moving a finished prefill's KV cache to a decode instance.
#[derive(Debug, Clone, PartialEq)]
pub struct KvTransfer {
    /// KV bytes per prompt token each prefill device sends (devices send their shards in
    /// parallel, each over its own link).
    pub bytes_per_token: f64,
    pub link: crate::hardware::Link,
}

impl KvTransfer {
    /// The whole transfer of `tokens` tokens' KV over an idle link.
    pub fn duration_ns(&self, tokens: u64) -> Nanos {
        (self.link.transfer_s(self.bytes_per_token * tokens as f64) * 1e9).round() as Nanos
    }

    /// The link latency, paid once per transfer whatever else is in flight.
    pub fn latency_ns(&self) -> Nanos {
        (self.link.latency_us * 1e3).round() as Nanos
    }

    /// Moving the bytes of `tokens` tokens' KV with the link to itself (transfers in flight
    /// together share it: `sim::link`).
    pub fn data_ns(&self, tokens: u64) -> Nanos {
        self.duration_ns(tokens).saturating_sub(self.latency_ns())
    }
}

/// Which instance of a group receives the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Routing {
    /// The instance with the least outstanding work (prompt tokens to prefill + decoding
    /// sequences); ties to the lowest id.
    LeastLoaded,
    RoundRobin,
}
crate::quant::named_enum!(Routing { LeastLoaded => "least-loaded", RoundRobin => "round-robin" });

/// Which requests and which span a run's statistics cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Measure {
    /// Closed loop: a window after warm-up grown until throughput settles; open loop: the
    /// middle 80 % of arrivals, rates over the window when the system is full.
    #[default]
    Steady,
    /// Every request, rates over the whole run (first arrival to last finish), as a benchmark
    /// client reports them.
    WholeRun,
}
crate::quant::named_enum!(Measure { Steady => "steady", WholeRun => "whole-run" });

/// Everything a simulation runs: instance groups, the KV link between prefill and decode
/// groups, routing, and the run's parameters.
pub struct System<'a> {
    pub groups: Vec<Group<'a>>,
    pub transfer: Option<KvTransfer>,
    pub routing: Routing,
    pub run: RunParams,
}
