//! The discrete-event simulation of serving instances: requests arrive, wait, prefill in
//! chunks, decode one token per step (more with MTP), finish. Time is integer nanoseconds;
//! events pop by (time, push order); a step's latency comes from a [`StepCostModel`] on the
//! step's actual batch shape. Every loop is bounded: a run that cannot finish is a typed
//! [`SimError`], never a hang.
//!
//! Layout: [`queue`] (events), [`kv`] (paged KV pool, prefix cache), [`link`] (KV transfers
//! sharing the links between prefill and decode instances), [`instance`] (one
//! instance's mechanics: queues, running sequences, KV accounting, the step builder, step
//! completion), [`scheduler`] (the per-step policy behind the [`scheduler::Scheduler`] trait:
//! msmodeling's [`scheduler::DecodeFirst`] or vLLM V1's [`scheduler::Vllm`]), [`metrics`] (latency recorders
//! and the report). The simulator knows nothing of the command line or the
//! search: it takes a [`SimConfig`] (or a P/D [`System`]) and a [`StepCostModel`], and returns
//! a [`SimReport`] or a [`SimError`].

pub mod instance;
pub mod kv;
pub mod link;
pub mod metrics;
pub mod queue;
pub mod records;
pub mod router;
pub mod scheduler;
pub mod steady;

pub use instance::{Instance, Role};
pub use metrics::{BinStat, LatencyStats, Percentile, Recorder, SimReport, Stat};
pub use queue::{Event, EventQueue, Nanos};
pub use records::Requests;

use crate::cost::{Breakdown, StepCostModel};
use crate::workload::arrival::{rng, ArrivalProcess, NewRequest, RequestFactory, Stream};
use instance::StepOutcome;
use router::Set;
use steady::Window;

/// How decode steps draft tokens.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeMode {
    /// One token per step.
    Plain,
    /// MTP with one marginal acceptance rate per draft position (non-increasing).
    Mtp { rates: Vec<f64> },
    /// Block drafting (DFlash/DSpark): `block` query tokens, up to `drafts` accepted, on
    /// average `mean_accepted`.
    Block { block: u64, drafts: u64, mean_accepted: f64 },
}

impl DecodeMode {
    /// MTP with `k` drafts and the given rates (missing rates are 0; a rate cannot exceed the
    /// one before it).
    pub fn mtp(k: u32, rates: &[f64]) -> Self {
        if k == 0 {
            return DecodeMode::Plain;
        }
        let mut v = Vec::with_capacity(k as usize);
        let mut prev: f64 = 1.0;
        for i in 0..k as usize {
            let r = rates.get(i).copied().unwrap_or(0.0).min(prev);
            v.push(r);
            prev = r;
        }
        DecodeMode::Mtp { rates: v }
    }

    /// Query tokens per decode step.
    pub fn query_tokens(&self) -> u64 {
        match self {
            DecodeMode::Plain => 1,
            DecodeMode::Mtp { rates } => 1 + rates.len() as u64,
            DecodeMode::Block { block, .. } => *block,
        }
    }

    /// Drafts accepted by request `req` in the decode step that starts at output position
    /// `pos`.
    pub fn draw_accepted(&self, draws: &AcceptanceDraws, req: u32, pos: u64) -> u64 {
        match self {
            DecodeMode::Plain => 0,
            DecodeMode::Mtp { rates } => {
                // Position i is accepted with marginal probability rates[i] (made
                // non-increasing, since a draft needs its predecessors): one uniform decides all.
                let u = draws.uniform(req, pos, 0);
                rates.iter().take_while(|&&r| u < r).count() as u64
            }
            DecodeMode::Block { drafts, mean_accepted, .. } => {
                let p = if *drafts == 0 { 0.0 } else { (mean_accepted / *drafts as f64).clamp(0.0, 1.0) };
                (0..*drafts).filter(|&j| draws.uniform(req, pos, j) < p).count() as u64
            }
        }
    }

    /// Expected output tokens per decode step.
    pub fn expected_tokens(&self) -> f64 {
        match self {
            DecodeMode::Plain => 1.0,
            DecodeMode::Mtp { rates } => 1.0 + rates.iter().sum::<f64>(),
            DecodeMode::Block { mean_accepted, .. } => 1.0 + mean_accepted,
        }
    }
}

/// The uniforms of speculative decoding's acceptance, keyed by request, output position and
/// draft: request r decoding from output position k draws the same uniforms in every run with
/// the same seed, whatever else runs beside it and in whatever order the decode set is walked.
/// So every probe of a candidate sees the same acceptances per request (common random
/// numbers), and probe-to-probe differences come from the configuration. A counter-based
/// hash (SplitMix64's finalizer over the keys), cheaper than a stream per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptanceDraws {
    key: u64,
}

impl AcceptanceDraws {
    pub fn new(seed: u64) -> Self {
        AcceptanceDraws { key: rand::Rng::random(&mut rng(seed, Stream::MtpAcceptance)) }
    }

    /// A uniform in [0, 1).
    fn uniform(&self, req: u32, pos: u64, draft: u64) -> f64 {
        let mut z = self.key
            ^ (req as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (pos + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)
            ^ (draft + 1).wrapping_mul(0x8CB9_2BA7_2F3D_8DD7);
        for _ in 0..2 {
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
        }
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How one instance schedules and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceConfig {
    /// The per-step policy (which requests decode, which prompts get how many tokens, whom to
    /// preempt); the instance carries out its decisions.
    pub scheduler: scheduler::SchedulerKind,
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
    /// New requests (never admitted before) that may enter the running set per step; `None`:
    /// as many as the policy admits. A serving engine's execution profile sets it: measured
    /// vLLM and TensorRT-LLM runs show requests entering one per engine iteration (see
    /// `EngineProfile::admissions_per_step`). Requests preempted and requeued do not count.
    pub admissions_per_step: Option<u64>,
    /// The engine plans each step while the previous one runs: a new request that arrived
    /// after the previous step started misses this one (see
    /// `EngineProfile::overlap_scheduling_from`). An idle engine plans at once.
    pub overlap_scheduling: bool,
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
            admissions_per_step: None,
            overlap_scheduling: false,
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
    /// percentile needs a tail: [`Percentile::min_sample`]).
    pub min_measured: u64,
    /// Limits for goodput (ms).
    pub ttft_limit_ms: f64,
    pub tpot_limit_ms: f64,
    pub seed: u64,
    /// Steps after which a run is abandoned.
    pub max_steps: u64,
    /// Input-length bins `[min, max)` to break latencies down by (variable-length workloads).
    pub bins: Vec<(u64, u64)>,
    /// The serving engine's per-request time outside the engine (API server, HTTP,
    /// tokenization), ns: added to every request's TTFT and end-to-end latency as the client
    /// sees them. It does not occupy the engine. (A first-come-first-served API server that
    /// delays requests on their way in was tried: fitted on measured runs it turned into a
    /// serial bottleneck at high concurrency that real servers, which handle HTTP
    /// concurrently, do not have.)
    pub frontend_ns: Nanos,
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
            frontend_ns: 0,
        }
    }
}

/// Instances of one kind in a system.
pub struct Group<'a> {
    pub role: Role,
    pub count: u32,
    pub cfg: InstanceConfig,
    pub cost: &'a dyn StepCostModel,
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

/// A request's life, as the simulation records it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestState {
    pub arrival: Nanos,
    pub input: u64,
    pub output: u64,
    pub prefix_group: Option<u32>,
    pub prefix_len: u64,
    /// First time a scheduler admitted it.
    pub scheduled: Option<Nanos>,
    /// Prompt tokens found in the KV cache at that first admission (prefix-cache hits).
    pub cached: u64,
    pub first_token: Option<Nanos>,
    pub finish: Option<Nanos>,
    /// Admission on a decode instance (P/D).
    pub decode_admitted: Option<Nanos>,
    pub generated: u64,
    pub preemptions: u32,
    /// Σ over its preemptions of the tokens it had generated then (recomputed with the prompt).
    pub generated_at_preemptions: u64,
    /// Preemptions that caught it still prefilling (part of its prompt computed, then dropped).
    pub preempted_in_prefill: u32,
    /// P/D: the prefill instance that computed its prompt, and the KV blocks it holds there
    /// until the transfer to the decode instance lands.
    pub kv_source: u32,
    pub held_blocks: u64,
    /// P/D: the blocks the decode instance allocated for its KV when the pull started.
    pub pull_blocks: u64,
    /// Its prompt counts in the input throughput (once, not again when recomputed).
    pub prompt_counted: bool,
    pub instance: u32,
}

impl RequestState {
    /// Tokens to (re)compute when admitted: the prompt plus anything generated before a
    /// preemption.
    pub fn prompt_tokens(&self) -> u64 {
        self.input + self.generated
    }

    fn from_new(n: &NewRequest, image_tokens: u64) -> Self {
        RequestState {
            arrival: n.arrival_ns,
            input: n.input + image_tokens,
            output: n.output,
            prefix_group: n.prefix_group,
            prefix_len: n.prefix_len,
            ..Default::default()
        }
    }
}

/// Why a simulation could not run to completion. It travels to the outcome as this value, so a
/// step limit is never mistaken for a latency limit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("the KV cache holds {capacity} blocks of {block_size} tokens, but one request needs {needed} ({tokens} tokens)")]
    KvTooSmall { needed: u64, capacity: u64, block_size: u64, tokens: u64 },
    #[error("no KV capacity is left for the cache after weights and activations")]
    NoKvCapacity,
    #[error("the simulation did not finish within {steps} engine steps")]
    StepLimit { steps: u64 },
    #[error("the search's simulation work budget ({budget} engine steps) is spent")]
    WorkBudget { budget: u64 },
    #[error("one engine step takes {seconds:e} s (more than an hour): the device profile's values are not physical")]
    StepTooSlow { seconds: f64 },
    #[error("a prompt of {prompt} tokens cannot be scheduled whole in a budget of {budget} tokens without chunked prefill")]
    PromptTooLong { prompt: u64, budget: u64 },
    #[error("instance {instance} stalled: {waiting} requests wait but none can be scheduled")]
    Stalled { instance: u32, waiting: u64 },
    #[error("{batch} requests in flight need about {needed} KV blocks at their mean context, but the cache holds {capacity}")]
    KvOversubscribed { needed: u64, capacity: u64, batch: u64 },
    /// A failure read back from a JSON report (`merge`): only its message survives there.
    #[error("{0}")]
    Reported(String),
}

/// Longest engine step the simulator accepts, in seconds. Real steps take milliseconds; a
/// longer one comes from non-physical device values and would saturate the clock.
pub const MAX_STEP_SECONDS: f64 = 3600.0;

/// A probe whose measured mean latency exceeds its limit by this factor is abandoned: the
/// search only needs to know it is infeasible.
const ABANDON_FACTOR: f64 = 1.5;
/// Measured requests needed before abandoning.
const ABANDON_MIN_REQUESTS: u64 = 16;
/// Open loop: the share of requests at each end of the run (by arrival order) left out of the
/// measurement, so that neither the empty system at the start nor the drain after the last
/// arrival counts as steady state.
const OPEN_EDGE_SHARE: f64 = 0.1;
/// Open loop: the steady part of the measured arrivals (after the system filled) must cover at
/// least this share of their span for rates to be read from it; otherwise the run is too short
/// and rates cover the whole run, drain included.
const OPEN_MIN_STEADY_SHARE: f64 = 0.25;
/// A benchmark client's requests reach the server spread over this span (uniform, seeded): its
/// tasks send them one after another, and the engine picks up whatever has arrived when it
/// plans a step. Without it, requests sent "together" are one admission decision, prefill in
/// the same steps and stay in lockstep for the whole run, which real engines never see (a 1 µs
/// stagger alone moved an H200 TP8 TTFT at concurrency 4 from 125 ms to 81 ms; measured 73 ms).
pub const CLIENT_JITTER_NS: u64 = 1_000_000;
/// Break down every n-th step's time by bound (the breakdown costs more than the latency).
const BREAKDOWN_EVERY: u64 = 16;

/// (time, output tokens, prefilled prompt tokens) at a window boundary.
type Mark = (Nanos, u64, u64);

/// Simulate a stream of requests over `cfg.instances` identical instances.
pub fn simulate(cfg: &SimConfig, cost: &dyn StepCostModel, factory: RequestFactory) -> Result<SimReport, SimError> {
    simulate_report(&single_group(cfg, cost), factory)
}

/// A homogeneous configuration as a system of one group.
fn single_group<'a>(cfg: &SimConfig, cost: &'a dyn StepCostModel) -> System<'a> {
    System {
        groups: vec![Group { role: cfg.role, count: cfg.instances, cfg: cfg.instance.clone(), cost }],
        transfer: None,
        routing: Routing::LeastLoaded,
        run: cfg.run.clone(),
    }
}

/// What one engine step did, for tests and traces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRecord {
    pub instance: u32,
    pub start: Nanos,
    pub end: Nanos,
    pub prefill_seqs: u64,
    pub prefill_tokens: u64,
    pub decode_seqs: u64,
    pub decode_tokens: u64,
    /// KV blocks in use on the instance once the step's blocks are allocated.
    pub kv_used: u64,
}

/// [`simulate`], also returning every request's record and reporting each step to `on_step`.
pub fn simulate_detailed(
    cfg: &SimConfig,
    cost: &dyn StepCostModel,
    factory: RequestFactory,
    on_step: &mut dyn FnMut(StepRecord),
) -> Result<(SimReport, Vec<RequestState>), SimError> {
    simulate_system(&single_group(cfg, cost), factory, on_step)
}

/// Run a system of instance groups over a request stream.
///
/// Requests enter the mixed or prefill group (a decode-only system receives them as if their
/// prompt's KV had been transferred). A prefill instance hands a request off after its first
/// token: with a decode group it is sent over the KV link to a decode instance; without one
/// (a prefill-only study) it leaves the system there.
pub fn simulate_system(
    sys: &System,
    factory: RequestFactory,
    on_step: &mut dyn FnMut(StepRecord),
) -> Result<(SimReport, Vec<RequestState>), SimError> {
    let mut sim = Simulation::new(sys, factory, on_step, true)?;
    sim.start()?;
    sim.run()?;
    let (report, reqs) = sim.report();
    Ok((report, reqs.into_vec()))
}

/// [`simulate_system`] for the report alone: an open loop keeps no request's record once the
/// report has what it needs from it, so its memory does not grow with `--num-requests`.
pub fn simulate_report(sys: &System, factory: RequestFactory) -> Result<SimReport, SimError> {
    let mut no_steps = |_: StepRecord| {};
    let mut sim = Simulation::new(sys, factory, &mut no_steps, false)?;
    sim.start()?;
    sim.run()?;
    Ok(sim.report().0)
}

/// Σ over instances of KV utilization, kept as used blocks per group (instances of a group
/// share one capacity), so accounting it per event costs O(groups), not O(instances). An
/// instance's count is refreshed whenever it was touched: every KV change happens in an
/// event that marks its instance dirty, or while that instance plans.
struct KvUse {
    seen: Vec<u64>,
    by_group: Vec<u64>,
    capacity: Vec<f64>,
}

impl KvUse {
    fn new(instances: &[Instance], group_of: &[usize], groups: usize) -> Self {
        let mut capacity = vec![1.0; groups];
        for (i, &g) in group_of.iter().enumerate() {
            capacity[g] = instances[i].kv.capacity as f64;
        }
        KvUse { seen: vec![0; instances.len()], by_group: vec![0; groups], capacity }
    }

    fn refresh(&mut self, i: usize, g: usize, used: u64) {
        self.by_group[g] = self.by_group[g] + used - self.seen[i];
        self.seen[i] = used;
    }

    /// Σ used / capacity over every instance.
    fn utilization_sum(&self) -> f64 {
        self.by_group.iter().zip(&self.capacity).map(|(&u, &c)| u as f64 / c).sum()
    }
}

/// Run-wide step statistics for the report.
#[derive(Default)]
struct StepStats {
    steps: u64,
    batch_sum: u64,
    token_sum: u64,
    step_time_sum: f64,
    /// ∫ KV utilization dt, summed over instances (ns).
    kv_integral: f64,
    kv_peak: f64,
    breakdown: Breakdown,
    breakdown_weight: f64,
}

/// One run of [`simulate_system`]: the instances, the request records and the event queue
/// (the mechanics), the arrival side (issued, in flight), and the measurement state (the
/// closed loop's window, the open loop's series, the step statistics). Its methods are the
/// run's steps: set-up, event handling, routing and KV transfer, the measurement window's
/// bookkeeping, planning, and the report.
struct Simulation<'s, 'a> {
    sys: &'s System<'a>,
    factory: RequestFactory,
    on_step: &'s mut dyn FnMut(StepRecord),
    closed: bool,
    /// Closed loop run as a benchmark: the total requests to send (see `RunParams`).
    bench_total: Option<u64>,
    jitter_rng: rand_chacha::ChaCha8Rng,
    burst: bool,
    open: bool,
    /// Arrival indices whose arrival times bound the open-loop measurement window.
    open_marks: (u64, u64),
    instances: Vec<Instance>,
    group_of: Vec<usize>,
    kv_use: KvUse,
    /// Decode instances (routing among them and the entry instances: `router`).
    decoders: Vec<u32>,
    /// No instance takes prompts: requests arrive with their KV as transferred.
    decode_only: bool,
    prefill_only: bool,
    image_tokens: u64,
    reqs: Requests,
    /// Keep every request's record for the caller; otherwise an open loop drops each once it
    /// is folded into `tally`.
    keep_records: bool,
    /// Open loop without a client-side cap: arrivals are drawn one at a time, each queued when
    /// the one before it arrives (not all at t = 0), under the sequence number it had when
    /// they were all queued first, so events still pop in the same order.
    lazy_open: bool,
    /// Requests the open loop issues (`--num-requests`, or fewer in a shorter trace).
    open_total: u64,
    /// Every run but the steady-state closed loop (whose window is known only at its end)
    /// measures each finished request whatever happens later, so its records are folded into
    /// `tally` as they finish.
    folds: bool,
    /// What the report needs from the records read so far.
    tally: Tally,
    queue: EventQueue,
    /// KV transfers in flight between prefill and decode instances.
    link: link::SharedLink,
    acceptance: AcceptanceDraws,
    out: StepOutcome,
    /// Inter-token gaps of the measurement window (closed loop: steps ending after the window
    /// opened; burst and benchmark runs: every step). Open loops keep `itl_steps` instead.
    itl: Recorder,
    /// Open loop: (end, step ms, decode sequences) of every step, and the cumulative KV
    /// integral after it (aligned with `series`), to read ITL and KV use over the window
    /// chosen once the run is over.
    itl_steps: Vec<(Nanos, f64, u64)>,
    kv_series: Vec<f64>,
    /// Closed loop: the KV integral when the measurement window opened.
    kv_at_start: f64,
    now: Nanos,
    router: router::Router,
    in_flight: u64,
    issued: u64,
    pending_open: Option<NewRequest>,
    win: Window,
    completed: u64,
    tokens_out: u64,
    prefilled_input: u64,
    stats: StepStats,
    stop: bool,
    /// Instances touched by the events of the current instant, to plan once it is over.
    dirty: Vec<u32>,
    window_marks: (Option<Mark>, Option<Mark>),
    /// Open loop: cumulative (time, output tokens, prefilled tokens) after every step, to read
    /// the rates of a window chosen once the run is over.
    series: Vec<Mark>,
    /// (Σ TTFT, Σ TPOT, count) of requests finishing in the window.
    watch: (f64, f64, u64),
    abandoned: bool,
}

impl<'s, 'a> Simulation<'s, 'a> {
    fn new(
        sys: &'s System<'a>,
        factory: RequestFactory,
        on_step: &'s mut dyn FnMut(StepRecord),
        keep_records: bool,
    ) -> Result<Self, SimError> {
        let run = &sys.run;
        let closed = matches!(factory.process(), ArrivalProcess::Closed);
        let burst = matches!(factory.process(), ArrivalProcess::Burst);
        let open_total = factory.trace_len().map_or(run.num_requests, |l| l.min(run.num_requests));
        let bins = run.bins.len();
        let edge = (open_total as f64 * OPEN_EDGE_SHARE).floor() as u64;
        let mut instances: Vec<Instance> = Vec::new();
        let mut group_of: Vec<usize> = Vec::new();
        for (g, grp) in sys.groups.iter().enumerate() {
            if grp.cfg.kv_blocks == 0 {
                return Err(SimError::NoKvCapacity);
            }
            for _ in 0..grp.count {
                let id = instances.len() as u32;
                instances.push(Instance::with_scheduler(id, grp.role, &grp.cfg, grp.cfg.scheduler.build()));
                group_of.push(g);
            }
        }
        let ids_with = |pred: &dyn Fn(Role) -> bool| -> Vec<u32> { instances.iter().filter(|i| pred(i.role)).map(|i| i.id).collect() };
        let entry: Vec<u32> = ids_with(&|r| r != Role::Decode);
        let decoders: Vec<u32> = ids_with(&|r| r == Role::Decode);
        let prefill_only = !decoders.is_empty() || instances.iter().all(|i| i.role == Role::Prefill);
        let dirty = Vec::with_capacity(instances.len());
        let router = router::Router::new(sys.routing, &entry, &decoders, instances.len());
        let link = link::SharedLink::new(instances.len());
        let bench_total = if closed { run.closed_requests } else { None };
        Ok(Simulation {
            sys,
            closed,
            bench_total,
            jitter_rng: rng(run.seed, Stream::ClientJitter),
            burst,
            open: !closed && !burst,
            open_marks: (edge, open_total.saturating_sub(1 + edge)),
            decode_only: entry.is_empty(),
            prefill_only: prefill_only && decoders.is_empty(),
            image_tokens: sys.groups.iter().map(|g| g.cfg.image_tokens).max().unwrap_or(0),
            kv_use: KvUse::new(&instances, &group_of, sys.groups.len()),
            instances,
            group_of,
            decoders,
            link,
            reqs: Requests::default(),
            keep_records,
            lazy_open: false,
            open_total,
            folds: !closed || bench_total.is_some(),
            tally: Tally::new(bins),
            queue: EventQueue::new(),
            acceptance: AcceptanceDraws::new(run.seed),
            out: StepOutcome::default(),
            itl: Recorder::default(),
            itl_steps: Vec::new(),
            kv_series: Vec::new(),
            kv_at_start: 0.0,
            now: 0,
            router,
            in_flight: 0,
            issued: 0,
            pending_open: None,
            // A benchmark run measures from its start; only the endless closed loop has a
            // stopping rule.
            win: if closed && bench_total.is_none() {
                let bounded = [run.ttft_limit_ms.is_finite(), run.tpot_limit_ms.is_finite()];
                Window::closed(run.concurrency, run.concurrency, bounded, run.min_measured)
            } else {
                Window::whole(bench_total.is_some())
            },
            completed: 0,
            tokens_out: 0,
            prefilled_input: 0,
            stats: StepStats::default(),
            stop: false,
            dirty,
            window_marks: (bench_total.map(|_| (0, 0, 0)), None),
            series: Vec::new(),
            watch: (0.0, 0.0, 0),
            abandoned: false,
            factory,
            on_step,
        })
    }

    /// A request must fit every group's KV cache (and budget, without chunked prefill).
    fn check_fits(&self, r: &RequestState) -> Result<(), SimError> {
        for g in &self.sys.groups {
            let c = &g.cfg;
            let tokens = match g.role {
                Role::Prefill => r.input + 1,
                _ => r.input + r.output + c.decode.query_tokens(),
            };
            let needed = tokens.div_ceil(c.block_size);
            if needed > c.kv_blocks {
                return Err(SimError::KvTooSmall { needed, capacity: c.kv_blocks, block_size: c.block_size, tokens });
            }
            if g.role != Role::Decode && !c.chunked_prefill && r.input > c.budget {
                return Err(SimError::PromptTooLong { prompt: r.input, budget: c.budget });
            }
        }
        Ok(())
    }

    /// Record a new request and schedule its arrival; it counts as issued and in flight.
    fn issue(&mut self, n: NewRequest) -> Result<(), SimError> {
        let mut r = RequestState::from_new(&n, self.image_tokens);
        self.check_fits(&r)?;
        if self.decode_only {
            // The prompt was prefilled elsewhere: the first token exists on arrival.
            r.first_token = Some(n.arrival_ns);
            r.generated = 1;
        }
        let id = self.reqs.issued() as u32;
        if self.lazy_open {
            self.queue.push_reserved(n.arrival_ns, id as u64, Event::Arrival { request: id });
        } else {
            self.queue.push(n.arrival_ns, Event::Arrival { request: id });
        }
        self.tally.arrived(id as u64, r.arrival, self.open_marks);
        self.reqs.push(r);
        self.issued += 1;
        self.in_flight += 1;
        Ok(())
    }

    /// Open loop: release arrivals respecting the client-side concurrency cap.
    fn release_open(&mut self) -> Result<(), SimError> {
        let run = &self.sys.run;
        while let Some(n) = self.pending_open {
            if self.issued >= run.num_requests {
                self.pending_open = None;
                break;
            }
            if run.max_concurrency.is_some_and(|m| self.in_flight >= m) {
                break;
            }
            let mut n = n;
            n.arrival_ns = n.arrival_ns.max(self.now);
            self.issue(n)?;
            self.pending_open = self.factory.next_open();
        }
        Ok(())
    }

    /// The first requests: the closed loop's or burst's concurrency at t = 0, or the open
    /// loop's first arrivals.
    fn start(&mut self) -> Result<(), SimError> {
        if self.closed || self.burst {
            let first_wave = self.bench_total.map_or(self.sys.run.concurrency, |n| n.min(self.sys.run.concurrency));
            for _ in 0..first_wave {
                let at = self.client_send(0);
                let n = self.factory.make(at);
                self.issue(n)?;
            }
        } else if self.sys.run.max_concurrency.is_none() {
            self.lazy_open = true;
            self.check_all_fit()?;
            self.queue.reserve(self.open_total);
            self.issue_next_open()?;
        } else {
            self.pending_open = self.factory.next_open();
            self.release_open()?;
        }
        Ok(())
    }

    /// An uncapped open loop: fail on a request that cannot fit before simulating anything, as
    /// when every request was issued at the start (a copy of the factory draws them).
    fn check_all_fit(&self) -> Result<(), SimError> {
        let mut f = self.factory.clone();
        for _ in 0..self.open_total {
            let Some(n) = f.next_open() else { break };
            self.check_fits(&RequestState::from_new(&n, self.image_tokens))?;
        }
        Ok(())
    }

    /// An uncapped open loop: issue the next arrival (called when the one before it arrives).
    fn issue_next_open(&mut self) -> Result<(), SimError> {
        if self.issued < self.open_total {
            if let Some(n) = self.factory.next_open() {
                self.issue(n)?;
            }
        }
        Ok(())
    }

    /// Share of the admitted prompts' tokens found in the prefix cache: the folded records'
    /// tally plus the records still held.
    fn prefix_hit_rate(&self) -> f64 {
        let (mut cached, mut input) = self.tally.prefix;
        for r in (self.tally.folded..self.reqs.issued()).filter_map(|i| self.reqs.get(i)).filter(|r| r.scheduled.is_some()) {
            cached += r.cached;
            input += r.input;
        }
        if input > 0 {
            cached as f64 / input as f64
        } else {
            0.0
        }
    }

    /// Fold the finished records at the front into the tally (in id order, as the report reads
    /// them) and, unless the caller wants them, drop them.
    fn fold_finished(&mut self) {
        while self.tally.folded < self.reqs.issued() && self.reqs[self.tally.folded].finish.is_some() {
            self.fold_next();
        }
        if !self.keep_records {
            self.reqs.drop_before(self.tally.folded);
        }
    }

    fn fold_next(&mut self) {
        let idx = self.tally.folded;
        let r = &self.reqs[idx];
        self.tally.folded += 1;
        if r.scheduled.is_some() {
            self.tally.prefix.0 += r.cached;
            self.tally.prefix.1 += r.input;
        }
        let Some(fin) = r.finish else { return };
        // The window of a burst, a benchmark run or an open loop, when it is not the steady
        // one, runs from the first arrival (a benchmark: t = 0) to the end, and every request
        // finishes strictly after it arrived: it holds every finished request. (The steady
        // window reads its request rate from the token rate instead.)
        self.tally.measured.finished_in_window += 1;
        let steady_open = self.open && self.sys.run.measure == Measure::Steady && self.open_marks.1 >= self.open_marks.0;
        if steady_open && self.in_open_range(idx) {
            self.tally.life_sum += fin - r.arrival;
            self.tally.lives += 1;
        }
        // A benchmark averages over every request it sent, the first wave included.
        let counted = !steady_open || self.in_open_range(idx);
        if counted {
            let mut m = std::mem::take(&mut self.tally.measured);
            self.tally_request(&mut m, &self.reqs[idx], fin);
            self.tally.measured = m;
        }
    }

    /// The event loop: apply each event, account completions, and plan the touched idle
    /// instances once every event of an instant has been applied.
    fn run(&mut self) -> Result<(), SimError> {
        while let Some((t, ev)) = self.queue.pop() {
            debug_assert!(t >= self.now, "time went backwards: {t} < {}", self.now);
            let dt = (t - self.now) as f64;
            let sum = self.kv_use.utilization_sum();
            // Time moves on only after every touched instance planned (and was refreshed); within
            // an instant the counts may lag, which costs nothing as dt is 0. Mutation: drop the
            // refresh after planning, and this fires in every multi-step simulator test.
            debug_assert!(
                dt == 0.0
                    || (sum - self.instances.iter().map(|i| i.kv.used() as f64 / i.kv.capacity as f64).sum::<f64>()).abs()
                        <= 1e-9 * (1.0 + sum),
                "an instance's KV changed without being marked dirty"
            );
            self.stats.kv_integral += dt * sum;
            self.now = t;
            let (touched, done_now) = self.apply(ev);
            if self.lazy_open && matches!(ev, Event::Arrival { .. }) {
                self.issue_next_open()?;
            }
            let touched = touched.unwrap_or(u32::MAX);
            if done_now > 0 && self.closed && self.win.start.is_some() {
                self.watch_latencies();
            }
            if done_now > 0 && !self.stop {
                self.account_completions(done_now)?;
                if self.folds {
                    self.fold_finished();
                }
            }
            if self.stop {
                break;
            }
            if touched != u32::MAX && !self.dirty.contains(&touched) {
                self.dirty.push(touched);
            }
            // Idle instances plan only once every event of this instant has been applied, so a
            // burst of simultaneous arrivals (or replacements) is seen as one.
            if self.queue.peek_time() == Some(self.now) {
                continue;
            }
            self.dirty.sort_unstable();
            let mut dirty = std::mem::take(&mut self.dirty);
            for touched in dirty.drain(..) {
                self.plan(touched)?;
                self.loads_changed(touched);
                let i = touched as usize;
                self.kv_use.refresh(i, self.group_of[i], self.instances[i].kv.used());
            }
            self.dirty = dirty;
        }
        Ok(())
    }

    /// Apply one event; returns the instance it touched (others it marks dirty itself) and
    /// the requests it completed.
    fn apply(&mut self, ev: Event) -> (Option<u32>, u64) {
        match ev {
            Event::Arrival { request } => (Some(self.arrive(request)), 0),
            Event::StepDone { instance } => (Some(instance), self.step_done(instance)),
            Event::KvTransferTick { generation } => {
                if generation == self.link.generation {
                    self.transfers_tick();
                }
                (None, 0)
            }
        }
    }

    /// Tell the router the load of an instance the simulation just changed.
    fn loads_changed(&mut self, instance: u32) {
        self.router.update(instance, self.instances[instance as usize].load);
    }

    fn touch(&mut self, instance: u32) {
        if !self.dirty.contains(&instance) {
            self.dirty.push(instance);
        }
    }

    /// The KV links changed: each landed transfer frees its blocks on the prefill instance
    /// and lets its request join the decode set; the next tick is planned.
    fn transfers_tick(&mut self) {
        let mut landed = Vec::new();
        let next = self.link.tick(self.now, &mut landed);
        for (req, src, dst) in landed {
            self.instances[src as usize].release_held(self.reqs[req as usize].held_blocks);
            self.instances[dst as usize].land(req, &self.reqs);
            self.loads_changed(src);
            self.loads_changed(dst);
            self.touch(src);
            self.touch(dst);
        }
        if let Some(t) = next {
            self.queue.push(t, Event::KvTransferTick { generation: self.link.generation });
        }
    }

    /// Start the transfers of the pulls a decode instance started while planning.
    fn start_transfers(&mut self, dst: u32) {
        let mut started = std::mem::take(&mut self.instances[dst as usize].started_pulls);
        let Some(x) = &self.sys.transfer else { return };
        let mut next = None;
        for &req in &started {
            let r = &self.reqs[req as usize];
            let tokens = r.input + r.generated;
            next = self.link.start(self.now, req, r.kv_source, dst, x.latency_ns(), x.data_ns(tokens));
        }
        if let Some(t) = next {
            self.queue.push(t, Event::KvTransferTick { generation: self.link.generation });
        }
        started.clear();
        self.instances[dst as usize].started_pulls = started;
    }

    /// Route an arriving request: to a decode instance in a decode-only system (its KV is
    /// taken as transferred), else to an entry instance.
    fn arrive(&mut self, request: u32) -> u32 {
        if self.decode_only {
            let target = self.router.route(Set::Decode, &self.instances);
            self.reqs[request as usize].instance = target;
            self.instances[target as usize].enqueue_transferred(request);
            self.loads_changed(target);
            target
        } else {
            let target = self.router.route(Set::Entry, &self.instances);
            self.reqs[request as usize].instance = target;
            self.instances[target as usize].enqueue(request, &self.reqs);
            self.loads_changed(target);
            target
        }
    }

    /// Complete an instance's step; hand requests finishing their prefill off over the KV
    /// link (or out of a prefill-only system). Returns the requests that left the system.
    fn step_done(&mut self, instance: u32) -> u64 {
        let g = self.group_of[instance as usize];
        let inst = &mut self.instances[instance as usize];
        let step_ms = inst.step_ms;
        inst.complete(&self.sys.groups[g].cfg, &mut self.reqs, self.now, &self.acceptance, &mut self.out);
        let study = self.sys.transfer.is_none() || self.decoders.is_empty();
        if study {
            // Prefill-only study: a request leaves with its first token; nothing is transferred.
            for &r in &self.out.handed_off {
                let req = &mut self.reqs[r as usize];
                inst.release_held(req.held_blocks);
                req.generated = 1;
                req.first_token = Some(self.now);
                req.finish = Some(self.now);
                self.out.tokens += 1;
            }
        }
        if self.open {
            self.itl_steps.push((self.now, step_ms, self.out.decode_seqs));
        } else if !self.closed || self.bench_total.is_some() || self.window_marks.0.is_some() {
            self.itl.record_n(step_ms, self.out.decode_seqs);
        }
        self.tokens_out += self.out.tokens;
        for &r in &self.out.prompts_done {
            let req = &mut self.reqs[r as usize];
            if !req.prompt_counted {
                // Its prompt once, not its recomputes.
                req.prompt_counted = true;
                self.prefilled_input += req.input;
            }
        }
        if self.open {
            self.series.push((self.now, self.tokens_out, self.prefilled_input));
            self.kv_series.push(self.stats.kv_integral);
        }
        self.loads_changed(instance);
        let done_now = self.out.finished.len() as u64;
        if study {
            return done_now + self.out.handed_off.len() as u64;
        }
        for i in 0..self.out.handed_off.len() {
            // Routed at once (the router forwards the request with where its KV is); the decode
            // instance pulls the KV when it can hold it.
            let r = self.out.handed_off[i];
            let target = self.router.route(Set::Decode, &self.instances);
            let req = &mut self.reqs[r as usize];
            req.kv_source = instance;
            req.instance = target;
            self.instances[target as usize].hand_to(r);
            self.loads_changed(target);
            self.touch(target);
        }
        done_now
    }

    /// Closed loop: what the requests leaving in this event add to the stopping rule's batch
    /// (TTFT and TPOT sums of those measured: the first wave is not, as in [`Self::measure`]).
    fn done_latencies(&self, completions: u64) -> steady::Done {
        let mut d = steady::Done { completions, ..Default::default() };
        let handed = if self.decoders.is_empty() { self.out.handed_off.iter() } else { [].iter() };
        for &r in self.out.finished.iter().chain(handed) {
            let rq = &self.reqs[r as usize];
            if (r as u64) < self.sys.run.concurrency {
                continue;
            }
            if let (Some(first), Some(fin)) = (rq.first_token, rq.finish) {
                d.ttft_ms += (first - rq.arrival) as f64 / 1e6;
                d.measured += 1;
                if rq.output > 1 && !self.prefill_only {
                    d.tpot_ms += (fin - first) as f64 / 1e6 / (rq.output - 1) as f64;
                    d.tpot_measured += 1;
                }
            }
        }
        d
    }

    /// Closed loop: latency of requests finishing inside the window, to abandon hopeless
    /// probes.
    fn watch_latencies(&mut self) {
        let run = &self.sys.run;
        let handed = if self.decoders.is_empty() { self.out.handed_off.iter() } else { [].iter() };
        for &r in self.out.finished.iter().chain(handed) {
            let rq = &self.reqs[r as usize];
            if let (Some(first), Some(fin)) = (rq.first_token, rq.finish) {
                self.watch.0 += (first - rq.arrival) as f64 / 1e6;
                if rq.output > 1 && !self.prefill_only {
                    self.watch.1 += (fin - first) as f64 / 1e6 / (rq.output - 1) as f64;
                }
                self.watch.2 += 1;
            }
        }
        let w = self.watch;
        if w.2 >= ABANDON_MIN_REQUESTS
            && (w.0 / w.2 as f64 > ABANDON_FACTOR * run.ttft_limit_ms || w.1 / w.2 as f64 > ABANDON_FACTOR * run.tpot_limit_ms)
        {
            self.abandoned = true;
            self.stop = true;
            self.window_marks.1 = Some(self.mark());
        }
    }

    fn mark(&self) -> Mark {
        (self.now, self.tokens_out, self.prefilled_input)
    }

    /// When a request a benchmark client sends at `t` reaches the server: `t` plus the client
    /// jitter. The steady-state loop and the burst keep exact times: the burst mirrors the
    /// formulas' wave, and the steady-state loop's figures are the ones the search has always
    /// ranked by (jittering it moves the headline's TTFT from 619 ms to 1220 ms at the same
    /// throughput; which one real engines show is for the measured comparison to decide).
    fn client_send(&mut self, t: Nanos) -> Nanos {
        match self.bench_total {
            Some(_) => t + rand::Rng::random_range(&mut self.jitter_rng, 0..CLIENT_JITTER_NS),
            None => t,
        }
    }

    /// Requests left the system: the closed loop replaces them at once and checks its
    /// stopping rule; the open loop releases arrivals the client cap held back.
    fn account_completions(&mut self, done_now: u64) -> Result<(), SimError> {
        self.completed += done_now;
        self.in_flight -= done_now;
        if let Some(total) = self.bench_total {
            // A benchmark run: replace finished requests until `total` were sent, stop when
            // all of them finished.
            for _ in 0..done_now {
                if self.issued < total {
                    let at = self.client_send(self.now);
                    let n = self.factory.make(at);
                    self.issue(n)?;
                }
            }
            if self.completed >= total {
                self.stop = true;
                self.window_marks.1 = Some(self.mark());
            }
        } else if self.closed {
            for _ in 0..done_now {
                let at = self.client_send(self.now);
                let n = self.factory.make(at);
                self.issue(n)?;
            }
            let before = self.win.start;
            let done = self.done_latencies(done_now);
            self.stop = self.win.advance(self.completed, self.now, self.tokens_out, done);
            if before.is_none() && self.win.start.is_some() {
                self.window_marks.0 = Some(self.mark());
                self.kv_at_start = self.stats.kv_integral;
            }
            if self.stop {
                self.window_marks.1 = Some(self.mark());
            }
        } else if !self.burst {
            self.release_open()?;
        }
        Ok(())
    }

    /// Plan an idle instance's next step and schedule its end.
    fn plan(&mut self, touched: u32) -> Result<(), SimError> {
        let grp = &self.sys.groups[self.group_of[touched as usize]];
        let inst = &mut self.instances[touched as usize];
        if inst.busy || !inst.has_work() {
            return Ok(());
        }
        let planned = inst.plan(&grp.cfg, &mut self.reqs, self.now);
        if !inst.started_pulls.is_empty() {
            self.start_transfers(touched);
        }
        let (grp, inst) = (&self.sys.groups[self.group_of[touched as usize]], &mut self.instances[touched as usize]);
        if !planned {
            if inst.idle_for_good() {
                // Nothing runs, nothing is in transfer, and the head of the queue cannot be
                // admitted even alone.
                return Err(SimError::Stalled { instance: touched, waiting: inst.waiting_count() });
            }
            return Ok(());
        }
        let now = self.now;
        let secs = grp.cost.step_seconds(&inst.shape);
        if !(secs.is_finite() && secs <= MAX_STEP_SECONDS) {
            // A step this slow means the device values are not physical; never a result.
            return Err(SimError::StepTooSlow { seconds: secs });
        }
        let ns = ((secs * 1e9).round() as u64).max(1);
        inst.step_ms = ns as f64 / 1e6;
        let st = &mut self.stats;
        st.steps += 1;
        st.batch_sum += inst.shape.prefill.seqs + inst.shape.decode.seqs;
        st.token_sum += inst.shape.tokens();
        st.step_time_sum += inst.step_ms;
        st.kv_peak = st.kv_peak.max(inst.kv.used() as f64 / inst.kv.capacity as f64);
        if st.steps % BREAKDOWN_EVERY == 1 {
            let c = grp.cost.step(&inst.shape);
            st.breakdown.add_scaled(&c.breakdown, 1.0);
            st.breakdown_weight += c.seconds;
        }
        (self.on_step)(StepRecord {
            instance: touched,
            start: now,
            end: now + ns,
            prefill_seqs: inst.shape.prefill.seqs,
            prefill_tokens: inst.shape.prefill.tokens,
            decode_seqs: inst.shape.decode.seqs,
            decode_tokens: inst.shape.decode.tokens,
            kv_used: inst.kv.used(),
        });
        self.queue.push(now + ns, Event::StepDone { instance: touched });
        if st.steps > self.sys.run.max_steps {
            return Err(SimError::StepLimit { steps: self.sys.run.max_steps });
        }
        Ok(())
    }

    /// Whether arrival index `idx` lies between the open loop's edges.
    fn in_open_range(&self, idx: usize) -> bool {
        let (a, b) = self.open_marks;
        b >= a && (a..=b).contains(&(idx as u64))
    }

    /// Open loop: rates are read from one mean lifetime after the first measured request
    /// arrived (the system has filled) to the arrival of the last (arrivals still run), if
    /// that steady part is long enough.
    fn open_window(&self) -> Option<(Nanos, Nanos)> {
        let (a, b) = self.open_marks;
        let (Some(t_a), Some(t_b)) = self.tally.edges else { return None };
        if !(self.open && self.sys.run.measure == Measure::Steady && b >= a) {
            return None;
        }
        let t = &self.tally;
        let life = t.life_sum.checked_div(t.lives).unwrap_or(u64::MAX);
        let t0 = t_a.saturating_add(life);
        (t0 < t_b && (t_b - t0) as f64 >= OPEN_MIN_STEADY_SHARE * (t_b - t_a) as f64).then_some((t0, t_b))
    }

    /// The open loop's cumulative counts at `t`.
    fn series_at(&self, t: Nanos) -> Mark {
        let i = self.series.partition_point(|m| m.0 <= t);
        if i == 0 {
            (t, 0, 0)
        } else {
            (t, self.series[i - 1].1, self.series[i - 1].2)
        }
    }

    /// The open loop's (time, cumulative KV integral) at the last step ending by `t`.
    fn kv_integral_at(&self, t: Nanos) -> (Nanos, f64) {
        let i = self.series.partition_point(|m| m.0 <= t);
        if i == 0 {
            (0, 0.0)
        } else {
            (self.series[i - 1].0, self.kv_series[i - 1])
        }
    }

    /// ITL over the measurement window, and the time-weighted KV use over it (per instance).
    /// Closed loop: the stopping rule's window; open loop: the steady window (the rates'
    /// window) when there is one; otherwise the whole run.
    fn windowed_itl_kv(&self, open_window: Option<(Nanos, Nanos)>, t0: Nanos, t1: Nanos) -> (Stat, f64) {
        let per_instance = |integral: f64, span: Nanos| {
            if span > 0 {
                integral / (span as f64 * self.instances.len() as f64)
            } else {
                0.0
            }
        };
        let integral = self.stats.kv_integral;
        if self.open {
            let (a, b) = open_window.unwrap_or((0, Nanos::MAX));
            let mut itl = Recorder::default();
            for &(_, ms, n) in self.itl_steps.iter().filter(|s| s.0 > a && s.0 <= b) {
                itl.record_n(ms, n);
            }
            let kv = match open_window {
                Some((a, b)) => {
                    // Between the steps ending last by each end: the integral and its span agree.
                    let ((ta, ka), (tb, kb)) = (self.kv_integral_at(a), self.kv_integral_at(b));
                    per_instance(kb - ka, tb.saturating_sub(ta))
                }
                None => per_instance(integral, self.now),
            };
            return (itl.stat(), kv);
        }
        let kv = if self.closed && self.bench_total.is_none() {
            per_instance(integral - self.kv_at_start, t1.saturating_sub(t0))
        } else {
            per_instance(integral, self.now)
        };
        (self.itl.stat(), kv)
    }

    /// The measurement window's ends. Closed loop: the stopping rule's marks. Burst: the whole
    /// run. Open loop: the steady window, or the whole run when there is none.
    fn window(&self, open_window: Option<(Nanos, Nanos)>) -> (Mark, Mark) {
        if self.closed {
            (self.window_marks.0.unwrap_or((0, 0, 0)), self.window_marks.1.unwrap_or(self.mark()))
        } else if let Some((a, b)) = open_window {
            (self.series_at(a), self.series_at(b))
        } else {
            ((self.tally.first_arrival.unwrap_or(0), 0, 0), self.mark())
        }
    }

    /// Latencies of the measured requests. Steady-state closed loop: those finishing inside
    /// the window, read here. Burst and benchmark run: all; open loop: those arriving between
    /// the edges (by arrival order); both folded in as they finished ([`Self::fold_next`]).
    fn measure(&mut self, t0: Nanos, t1: Nanos) -> Measured {
        if self.folds {
            return std::mem::take(&mut self.tally.measured);
        }
        let run = &self.sys.run;
        let mut m = Measured::new(run.bins.len());
        for (idx, r) in self.reqs.iter().enumerate() {
            let Some(fin) = r.finish else { continue };
            if fin > t0 && fin <= t1 {
                m.finished_in_window += 1;
            }
            // The initial wave (all issued at t = 0) prefilled together; with variable output
            // lengths some of it outlives the warm-up, and its TTFT is not steady state.
            if fin > t0 && fin <= t1 && idx as u64 >= run.concurrency {
                self.tally_request(&mut m, r, fin);
            }
        }
        m
    }

    /// Add one measured request, finished at `fin`, to the latencies and counts.
    fn tally_request(&self, m: &mut Measured, r: &RequestState, fin: Nanos) {
        let run = &self.sys.run;
        let first = r.first_token.unwrap_or(fin);
        // The client sees the engine's time plus the API server's.
        let client = run.frontend_ns as f64 / 1e6;
        let ttft = (first - r.arrival) as f64 / 1e6 + client;
        let e2e = (fin - r.arrival) as f64 / 1e6 + client;
        let out_tokens = if self.prefill_only { 1 } else { r.output };
        let inter = if out_tokens > 1 { (fin - first) as f64 / 1e6 / (out_tokens - 1) as f64 } else { 0.0 };
        let amort = e2e / out_tokens as f64;
        m.rec[0].record(ttft);
        m.rec[1].record(inter);
        m.rec[2].record(amort);
        m.rec[3].record(e2e);
        m.rec[4].record((r.scheduled.or(r.decode_admitted).unwrap_or(first) - r.arrival) as f64 / 1e6);
        m.measured += 1;
        m.out_tokens += out_tokens;
        if ttft <= run.ttft_limit_ms && inter <= run.tpot_limit_ms {
            m.good += 1;
        }
        let prompt = r.input - self.image_tokens;
        // Bins are sorted and disjoint (validated): the last one starting at or below.
        let i = run.bins.partition_point(|&(lo, _)| lo <= prompt);
        if i > 0 && prompt < run.bins[i - 1].1 {
            let b = &mut m.per_bin[i - 1];
            b.requests += 1;
            b.ttft.record(ttft);
            b.tpot.record(inter);
        }
    }

    /// The report over the measurement window, and every request's record.
    fn report(mut self) -> (SimReport, Requests) {
        if self.folds {
            while self.tally.folded < self.reqs.issued() {
                self.fold_next();
            }
        }
        let open_window = self.open_window();
        let steady = open_window.is_some();
        let ((t0, tok0, in0), (t1, tok1, in1)) = self.window(open_window);
        let window_s = (t1.saturating_sub(t0)) as f64 / 1e9;
        let m = self.measure(t0, t1);
        let (itl, kv_utilization) = self.windowed_itl_kv(open_window, t0, t1);
        let window_tokens = tok1.saturating_sub(tok0);
        let window_input = in1.saturating_sub(in0);
        let per_s = |x: u64| if window_s > 0.0 { x as f64 / window_s } else { 0.0 };
        let st = &self.stats;
        let mut bd = Breakdown::default();
        if st.breakdown_weight > 0.0 {
            bd.add_scaled(&st.breakdown, 1.0 / st.breakdown_weight);
        }
        let mean = |x: f64| if st.steps > 0 { x / st.steps as f64 } else { 0.0 };
        let report = SimReport {
            latency: LatencyStats {
                ttft: m.rec[0].stat(),
                tpot_inter_token: m.rec[1].stat(),
                tpot_amortized: m.rec[2].stat(),
                itl,
                e2e: m.rec[3].stat(),
                queueing: m.rec[4].stat(),
            },
            output_throughput: per_s(window_tokens),
            input_throughput: per_s(window_input),
            total_throughput: per_s(window_tokens + window_input),
            // Open loop: requests often outlive the window, so the delivered rate is read off
            // the token rate (a saturated system delivers fewer tokens than arrive).
            request_rate: if steady && m.out_tokens > 0 {
                per_s(window_tokens) * m.measured as f64 / m.out_tokens as f64
            } else {
                per_s(m.finished_in_window)
            },
            goodput: if m.measured > 0 { m.good as f64 / m.measured as f64 } else { 0.0 },
            kv_utilization,
            kv_peak_utilization: st.kv_peak,
            mean_batch_size: mean(st.batch_sum as f64),
            mean_step_tokens: mean(st.token_sum as f64),
            mean_step_ms: mean(st.step_time_sum),
            breakdown: bd,
            steps: st.steps,
            completed: self.completed,
            measured: m.measured,
            preemptions: self.instances.iter().map(|i| i.preemptions).sum(),
            window_s,
            makespan_s: self.now as f64 / 1e9,
            converged: if self.open { steady || self.sys.run.measure == Measure::WholeRun } else { self.win.converged && !self.abandoned },
            abandoned: self.abandoned,
            kv_capacity_blocks: self.instances.iter().map(|i| i.kv.capacity).max().unwrap_or(0),
            tokens_emitted: self.tokens_out,
            kv_held_at_end: self.instances.iter().map(|i| i.kv.held()).sum(),
            prefix_cache_hit_rate: self.prefix_hit_rate(),
            bins: self
                .sys
                .run
                .bins
                .iter()
                .zip(&m.per_bin)
                .filter(|(_, b)| b.requests > 0)
                .map(|(&(lo, hi), b)| BinStat {
                    min_tokens: lo,
                    max_tokens: hi,
                    requests: b.requests,
                    ttft: b.ttft.stat(),
                    tpot_inter_token: b.tpot.stat(),
                })
                .collect(),
        };
        (report, self.reqs)
    }
}

/// Latencies and counts of the measured requests.
#[derive(Default)]
struct Measured {
    /// TTFT, inter-token TPOT, amortized TPOT, end-to-end, queueing.
    rec: [Recorder; 5],
    measured: u64,
    /// Measured requests within both latency limits.
    good: u64,
    finished_in_window: u64,
    /// Output tokens of the measured requests.
    out_tokens: u64,
    /// TTFT and inter-token TPOT per input bin (recorded in request order, as the run-wide
    /// recorders are: a histogram per bin, not the samples, so memory does not grow with the
    /// requests).
    per_bin: Vec<BinTally>,
}

impl Measured {
    fn new(bins: usize) -> Self {
        Measured { per_bin: (0..bins).map(|_| BinTally::default()).collect(), ..Default::default() }
    }
}

#[derive(Default)]
struct BinTally {
    requests: u64,
    ttft: Recorder,
    tpot: Recorder,
}

/// A measurement kept as the records are read (in id order), so that they need
/// not stay in memory: the measured latencies, the lifetimes of the requests between the
/// edges, and the arrival times the window is read from.
struct Tally {
    /// Records read so far (ids below).
    folded: usize,
    measured: Measured,
    /// Σ lifetime (finish − arrival) and count over the finished requests between the edges.
    life_sum: u64,
    lives: u64,
    /// Arrival times of the requests at the open loop's edges, once issued.
    edges: (Option<Nanos>, Option<Nanos>),
    /// Earliest arrival of any request.
    first_arrival: Option<Nanos>,
    /// Σ cached and Σ input tokens of the folded requests that were admitted.
    prefix: (u64, u64),
}

impl Tally {
    fn new(bins: usize) -> Self {
        Tally { folded: 0, measured: Measured::new(bins), life_sum: 0, lives: 0, edges: (None, None), first_arrival: None, prefix: (0, 0) }
    }

    /// Request `id` was issued, arriving at `at`.
    fn arrived(&mut self, id: u64, at: Nanos, (a, b): (u64, u64)) {
        self.first_arrival = Some(self.first_arrival.map_or(at, |f| f.min(at)));
        if b >= a && id == a {
            self.edges.0 = Some(at);
        }
        if b >= a && id == b {
            self.edges.1 = Some(at);
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod pd_tests;

#[cfg(test)]
mod properties;
