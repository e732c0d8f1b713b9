//! One candidate's simulation, configured once. [`SimSetup::new`] is the one place the plan,
//! the device and the candidate become the simulator's configuration: the instance (scheduler,
//! decode mode, images, overlap, front end, CUDA graphs), its role and count, the run
//! (measurement, request count, limits, seed, bins), the request stream, the step cost and
//! what sizes the KV pool (`memory`: the plan's reserve or the engine's memory setting). A
//! probe then fills in only what its batch size and token budget decide
//! ([`SimSetup::config`]): the running cap, the KV blocks and the largest CUDA graph that
//! follow from them.

use super::memory::Reserve;
use super::{DEFAULT_OPEN_REQUESTS, MAX_STEPS};
use crate::cost::memory::{gib, MemoryUse};
use crate::cost::pipeline::StageSend;
use crate::cost::{BatchShape, MemoryModel, PhaseLoad, RooflineCost, StepCostModel};
use crate::hardware::runtime::{CudaGraphProfile, GraphSizeUnit};
use crate::outcome::Phase;
use crate::plan::{Mode, Plan, ServingEngine, SpeculativeMethod};
use crate::search::engine::CandidateCtx;
use crate::sim::scheduler::SchedulerKind;
use crate::sim::{CudaGraphs, DecodeMode, Frontend, GraphUnit, InstanceConfig, Pipeline, Role, RunParams, SimConfig, SimError};
use crate::workload::arrival::{ArrivalProcess, RequestFactory};
use crate::workload::Lengths;

/// Everything one candidate's simulations share (see the module comment).
#[derive(Debug, Clone)]
pub struct SimSetup {
    /// The instance as the candidate configures it; `budget`, `max_num_seqs` and `kv_blocks`
    /// are each probe's ([`SimSetup::instance`]).
    instance: InstanceConfig,
    instances: u32,
    role: Role,
    /// The run as the plan configures it; `concurrency` is each probe's batch size.
    run: RunParams,
    /// The request stream every probe draws from (common random numbers: the same requests
    /// whatever the batch size).
    factory: RequestFactory,
    /// `--max-num-seqs` or the serving engine's default; `None`: the probe's batch size.
    max_num_seqs: Option<u64>,
    /// Open-loop arrivals (every replica simulated, no closed-loop KV demand check).
    open: bool,
    /// The candidate's memory model and what is kept back: they size the KV pool.
    mem: MemoryModel,
    reserve: Reserve,
    /// The largest CUDA graph is at most this many times the running cap × decode tokens
    /// (vLLM's 2).
    graphs_per_running: Option<u64>,
    /// A closed loop's steady-state KV demand per request, checked under the msmodeling policy
    /// and in P/D phase searches (`None` for open loops and the engines' aggregated loops).
    demand: Option<KvDemand>,
    /// The step cost the simulator runs on: the candidate's roofline model plus `--serving-cost`
    /// on every forward of a disaggregated instance (the formulas add it per forward too).
    pub cost: RooflineCost,
    /// Pipeline parallelism: each stage's step cost (`--serving-cost` on the first) and the
    /// send between stages; empty without. A probe's instance is then one micro-batch lane:
    /// the batch size, running cap and KV pool are each lane's share of the replica's.
    stage_costs: Vec<RooflineCost>,
    send: StageSend,
    /// Micro-batch lanes per replica (pipeline stages; 1 without).
    lanes: u64,
    /// The phase's latency limits, ms (prefill ignores TPOT, decode TTFT).
    pub ttft_limit_ms: f64,
    pub tpot_limit_ms: f64,
    /// The serving engine whose scheduler runs.
    pub serving_engine: ServingEngine,
    /// Identical replicas a simulated figure stands for (closed loops simulate one of DP).
    pub replicas: f64,
    /// Prefill tokens per request after the prefix cache (the row's effective input length).
    pub effective_input: u64,
    /// Tokens of KV a running request holds on average (its prompt and half its output): what
    /// a model with per-sequence state needs beside each state it holds.
    held_tokens: u64,
    /// The memory picture of a probe that did not run: weights and the reserve only.
    pub idle_memory: MemoryUse,
}

/// KV blocks one running request of a closed loop holds at steady state: its private blocks,
/// and the shared prefix's full blocks held once per prefix group in use.
#[derive(Debug, Clone, Copy)]
struct KvDemand {
    private_blocks: u64,
    shared_blocks: u64,
    groups: u64,
}

impl SimSetup {
    /// The simulation of `ctx`'s candidate in its phase, as far as the plan decides it.
    pub fn new(ctx: &CandidateCtx) -> Self {
        let plan = ctx.plan;
        let so = &plan.sim;
        let open = so.arrival.is_open();
        let serving_engine = plan.serving_engine(ctx.device);
        let mut instance = instance_template(ctx, serving_engine);
        if let Some(g) = &mut instance.graphs {
            // Each stage launches its own layers' kernels.
            g.eager_launch_s /= ctx.cand.parallel.pp.max(1) as f64;
        }
        let factory = request_factory(plan, so.arrival.clone(), plan.output_spread(ctx.device));
        let (ttft_limit_ms, tpot_limit_ms) = crate::search::phase_limits(plan, ctx.phase);
        let run = RunParams {
            measure: so.measure,
            concurrency: 0,
            // A trace runs whole unless --num-requests cuts it (the CLI warns then).
            num_requests: so.num_requests.or(factory.trace_len()).unwrap_or(DEFAULT_OPEN_REQUESTS),
            // A closed loop with --num-requests runs as a benchmark client does; the search
            // simulates one replica, which receives its share of the requests.
            // In P/D ratio planning --num-requests sizes the verification runs; the phase
            // searches stay steady-state closed loops.
            closed_requests: match (&so.arrival, so.num_requests, &plan.mode) {
                (_, _, Mode::PdRatio { .. }) => None,
                (ArrivalProcess::Closed, Some(n), _) => Some(n.div_ceil(ctx.cand.parallel.dp as u64).max(1)),
                _ => None,
            },
            max_concurrency: so.max_concurrency,
            min_measured: so.slo_percentile.min_sample(),
            ttft_limit_ms,
            tpot_limit_ms,
            seed: plan.seed,
            max_steps: MAX_STEPS,
            bins: input_bins(plan),
            stop_once_measured: false,
        };
        let mut cost = ctx.cost.clone();
        let mut stage_costs: Vec<RooflineCost> = ctx.stages.as_ref().map_or_else(Vec::new, |s| s.costs.clone());
        if ctx.phase != Phase::Aggregated {
            cost.host_s += plan.serving.serving_cost_ms * 1e-3;
            if let Some(first) = stage_costs.first_mut() {
                first.host_s += plan.serving.serving_cost_ms * 1e-3;
            }
        }
        let lanes = stage_costs.len().max(1) as u64;
        let reserve = match &ctx.kv_memory {
            Some(m) => {
                let p = &ctx.cand.parallel;
                let graph_max_bs = ctx.cuda_graphs.as_ref().map_or(0, |g| g.max_size_on(ctx.device.memory_gib(), p.tp));
                let profile_rows = plan.engine_limits(ctx.device).max_num_seqs.unwrap_or(0);
                Reserve::engine(
                    m,
                    plan.serving.gpu_memory_utilization,
                    graph_max_bs,
                    p.num_devices / p.dp.max(1),
                    profile_rows,
                    ctx.mem.sampled_vocab,
                )
            }
            None => Reserve::Fixed(plan.serving.reserved_gib(ctx.device)),
        };
        let mem = ctx.mem.clone();
        let idle_reserve = reserve.bytes(&mem, &BatchShape::default(), 0);
        SimSetup {
            // An aggregated closed loop's batch is the clients' concurrency: the engines queue,
            // preempt or hold back what does not fit, and only the original tool's policy calls
            // it out of memory. A P/D phase's batch is an instance's running batch, which the P/D
            // formulas price as running: one the pool cannot hold stays out of memory.
            demand: (!open && (instance.scheduler == SchedulerKind::DecodeFirst || ctx.phase != Phase::Aggregated))
                .then(|| KvDemand::new(ctx, &instance)),
            instances: if open { ctx.cand.parallel.dp } else { 1 },
            role: match ctx.phase {
                Phase::Aggregated => Role::Mixed,
                Phase::Prefill => Role::Prefill,
                Phase::Decode => Role::Decode,
            },
            instance,
            run,
            factory,
            max_num_seqs: plan.engine_limits(ctx.device).max_num_seqs,
            open,
            idle_memory: MemoryUse {
                weight_gib: gib(mem.weight_bytes),
                kv_cache_gib: 0.0,
                activation_gib: 0.0,
                avail_gib: gib(mem.device_bytes - mem.weight_bytes - idle_reserve),
            },
            mem,
            reserve,
            graphs_per_running: ctx.cuda_graphs.as_ref().and_then(|g| g.max_per_running),
            cost,
            stage_costs,
            send: ctx.stages.as_ref().map_or(StageSend::NONE, |s| s.send),
            lanes,
            ttft_limit_ms,
            tpot_limit_ms,
            serving_engine,
            replicas: if open { 1.0 } else { ctx.cand.parallel.dp as f64 },
            effective_input: plan.workload.input.effective(plan.workload.prefix_cache_hit_rate),
            held_tokens: plan.workload.input.mean_raw() + output_mean(&plan.workload.output) / 2,
        }
    }

    /// The simulation of one probe: `batch` requests per replica under a `budget`-token step,
    /// and its request stream.
    /// With pipeline stages, `batch` is one lane's (a micro-batch): the replica's closed loop
    /// runs `batch` × stages requests, and the engine's running cap is shared by the lanes.
    pub fn config(&self, batch: u32, budget: u64) -> (SimConfig, RequestFactory) {
        let max_num_seqs = self.max_num_seqs.map_or(batch as u64, |m| m.div_ceil(self.lanes));
        let mut instance = self.instance(budget, max_num_seqs);
        let seqs = self.kv_sized_seqs(max_num_seqs, batch as u64);
        let held = self.state_held_seqs(budget, seqs);
        if held < seqs {
            instance.max_num_seqs = held;
        }
        if held != max_num_seqs {
            instance.kv_blocks = self.kv_blocks(budget, held);
        }
        let run = RunParams { concurrency: batch as u64 * self.lanes, ..self.run.clone() };
        (SimConfig { instance, instances: self.instances, role: self.role, run }, self.factory.clone())
    }

    /// Sequences an engine runs at once when each holds a per-sequence state (Mamba-2, linear
    /// attention) beside its KV: the engines allocate both from one memory pool as a request
    /// runs (vLLM's hybrid KV cache manager) and queue what does not fit, so a closed loop of
    /// `seqs` runs the most that fit with their average KV (`held_tokens`), at least one. Models
    /// without state, the original tool's policy and P/D phases (whose batch is priced as
    /// running) keep `seqs`.
    fn state_held_seqs(&self, budget: u64, seqs: u64) -> u64 {
        if self.open || self.demand.is_some() || self.mem.state_bytes_per_seq <= 0.0 || seqs <= 1 {
            return seqs;
        }
        self.seqs_that_fit(budget, seqs, self.held_tokens)
    }

    /// The most sequences, from one to `seqs`, whose pool (sized for that many, states
    /// included) holds `tokens` tokens of each: fewer sequences leave more of the memory to KV,
    /// so the count is bisected.
    fn seqs_that_fit(&self, budget: u64, seqs: u64, tokens: u64) -> u64 {
        let block = self.instance.block_size.max(1);
        let fits = |n: u64| self.kv_blocks(budget, n) >= n * tokens.div_ceil(block);
        if fits(seqs) {
            return seqs;
        }
        let (mut lo, mut hi) = (1, seqs);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The pipeline a probe's instances run through (`None` without pipeline stages).
    pub fn pipeline(&self) -> Option<Pipeline<'_>> {
        (!self.stage_costs.is_empty())
            .then(|| Pipeline { stages: self.stage_costs.iter().map(|c| c as &dyn StepCostModel).collect(), send: self.send })
    }

    /// Micro-batch lanes per replica (1 without pipeline stages).
    pub fn lanes(&self) -> u64 {
        self.lanes
    }

    /// One instance of the candidate under a `budget`-token step with `max_num_seqs` running,
    /// its KV pool sized for that many sequences (with pipeline stages: one lane, its share).
    pub fn instance(&self, budget: u64, max_num_seqs: u64) -> InstanceConfig {
        let mut ic = InstanceConfig { budget, max_num_seqs, kv_blocks: self.kv_blocks(budget, max_num_seqs), ..self.instance.clone() };
        let q = ic.decode.query_tokens();
        if let Some(g) = &mut ic.graphs {
            // vLLM captures up to min(2 × max_num_seqs × decode tokens, 512, the token budget).
            if g.unit == GraphUnit::Tokens {
                g.max_size = g.max_size.min(budget);
            }
            if let Some(k) = self.graphs_per_running {
                g.max_size = g.max_size.min(k * max_num_seqs * q);
            }
        }
        ic
    }

    /// Tokens the KV pool of one instance (with pipeline stages: one lane) holds under a
    /// `budget`-token step with `max_num_seqs` running in the replica, where the engine's own scheduler runs a closed loop (`None` for open loops, the
    /// decode-first policy and P/D phase searches, whose KV demand is checked instead).
    ///
    /// A model with per-sequence state (Mamba-2, linear attention) sizes its pool for the
    /// sequences it runs: a pool sized for all `max_num_seqs` states may hold no prompt at all
    /// (Qwen3.5-27B's 48 linear-attention layers keep 151 MB a sequence: 1,024 of them fill a
    /// B200). Its tokens are then those of the largest running count whose pool still holds that
    /// many prompts of `prompt_tokens`.
    pub fn closed_loop_kv_tokens(&self, budget: u64, max_num_seqs: u64, prompt_tokens: u64) -> Option<u64> {
        let engine_loop = !self.open && self.demand.is_none() && self.instance.scheduler != SchedulerKind::DecodeFirst;
        if !engine_loop {
            return None;
        }
        let seqs = max_num_seqs.div_ceil(self.lanes);
        let running = if self.mem.state_bytes_per_seq > 0.0 { self.seqs_that_fit(budget, seqs, prompt_tokens) } else { seqs };
        Some(self.kv_blocks(budget, running) * self.instance.block_size)
    }

    /// KV blocks one instance holds once weights, the reserve and the largest step's
    /// activations are set aside.
    /// With pipeline stages: one lane's share of the replica's pool, sized for `max_seqs`
    /// sequences on every lane.
    fn kv_blocks(&self, budget: u64, max_seqs: u64) -> u64 {
        let peak_tokens = (budget as f64 * (1.0 + self.instance.slack)).floor() as u64;
        let peak = BatchShape { prefill: PhaseLoad::uniform(1, peak_tokens, peak_tokens), sampled: max_seqs, ..Default::default() };
        let bytes = self.mem.kv_budget_bytes(&peak, self.reserve.bytes(&self.mem, &peak, budget));
        let blocks = self.mem.kv_capacity_blocks(bytes, self.instance.block_size, max_seqs * self.lanes);
        if self.lanes > 1 {
            blocks / self.lanes
        } else {
            blocks
        }
    }

    /// Running sequences an instance's memory is sized for (activations and per-sequence state
    /// beside the KV pool), in one place for the pool and the reported memory: decode-first, as
    /// the original tool does, reserves for `max_num_seqs`; vLLM, SGLang and TensorRT-LLM
    /// reserve nothing up front, so a closed loop holds at most its concurrency.
    fn kv_sized_seqs(&self, max_num_seqs: u64, concurrency: u64) -> u64 {
        if self.open || self.instance.scheduler == SchedulerKind::DecodeFirst {
            max_num_seqs
        } else {
            max_num_seqs.min(concurrency)
        }
    }

    /// The memory picture of a simulated probe: its peak KV use and the largest step's
    /// activations.
    pub fn memory_use(&self, cfg: &SimConfig, kv_peak_utilization: f64) -> MemoryUse {
        let ic = &cfg.instance;
        let kv_bytes = kv_peak_utilization * (ic.kv_blocks * self.lanes) as f64 * ic.block_size as f64 * self.mem.kv_bytes_per_token;
        let peak_tokens = (ic.budget as f64 * (1.0 + ic.slack)) as u64;
        let seqs = self.kv_sized_seqs(ic.max_num_seqs, cfg.run.concurrency / self.lanes);
        let peak = BatchShape { prefill: PhaseLoad::uniform(1, peak_tokens, ic.budget), sampled: seqs, ..Default::default() };
        self.mem.usage(&peak, kv_bytes, self.reserve.bytes(&self.mem, &peak, ic.budget))
    }

    /// GiB kept back beside weights, KV and activations under a `budget`-token step (what the
    /// batch search's memory extrapolation subtracts).
    pub fn reserved_gib(&self, budget: u64) -> f64 {
        let peak = BatchShape { prefill: PhaseLoad::uniform(1, budget, budget), ..Default::default() };
        self.reserve.gib(&self.mem, &peak, budget)
    }

    /// Under the msmodeling policy, a closed-loop batch whose steady-state KV demand exceeds
    /// the pool would only thrash (preempt and recompute without end): it is out of memory, as
    /// the analytic engine's decode check at the mid-generation context says. vLLM, SGLang and
    /// TensorRT-LLM run an aggregated client concurrency the pool cannot hold as the engines do
    /// (vLLM preempts by recompute, SGLang retracts, TensorRT-LLM's capacity scheduler holds
    /// requests back), so it is simulated; only a request that cannot fit the pool alone is an
    /// error (`SimError::KvTooSmall`). A P/D phase's batch is the running batch of one instance,
    /// which the P/D formulas take as running: there the check stays under every policy. Open
    /// loops are left to admission control.
    pub fn kv_oversubscribed(&self, cfg: &SimConfig) -> Option<SimError> {
        let d = self.demand?;
        let ic = &cfg.instance;
        let running = (cfg.run.concurrency / self.lanes).min(ic.running_cap());
        let needed = running * d.private_blocks + running.min(d.groups) * d.shared_blocks;
        (needed > ic.kv_blocks).then_some(SimError::KvOversubscribed { needed, capacity: ic.kv_blocks, batch: cfg.run.concurrency })
    }
}

impl KvDemand {
    /// A request's context at mid-generation (its prompt alone on a prefill instance). A
    /// shared prefix (`--prefix-groups/--prefix-length`) is held once per group, as the pool
    /// holds it: its full blocks count once for each group in use, not once per request
    /// (decode-only instances receive whole contexts and share nothing).
    fn new(ctx: &CandidateCtx, ic: &InstanceConfig) -> Self {
        let w = &ctx.plan.workload;
        let input = w.input.mean_raw() + ic.image_tokens;
        let output = match &w.output {
            Lengths::Fixed(o) => *o,
            Lengths::Distribution(d) => d.effective_length(0.0),
        };
        let per_request = match ctx.phase {
            Phase::Prefill => input,
            _ => input + output / 2 + ic.decode.query_tokens(),
        };
        let (shared_blocks, groups) = match ctx.plan.sim.shared_prefix {
            Some(p) if p.groups > 0 && ctx.phase != Phase::Decode => (p.length.min(input) / ic.block_size, p.groups as u64),
            _ => (0, 0),
        };
        let private_blocks = (per_request - shared_blocks * ic.block_size).div_ceil(ic.block_size);
        KvDemand { private_blocks, shared_blocks, groups }
    }
}

/// The instance a candidate configures, before a probe sets its budget, running cap and KV
/// blocks.
fn instance_template(ctx: &CandidateCtx, engine: ServingEngine) -> InstanceConfig {
    let plan = ctx.plan;
    let (images_per_request, patches, tokens) = match (&plan.workload.images, &plan.model.vision) {
        (Some(im), Some(v)) => {
            let (p, t) = v.image_tokens(im.height, im.width);
            (im.per_request as u64, p, t * im.per_request as u64)
        }
        _ => (0, 0, 0),
    };
    let scheduler = engine.scheduler();
    // TensorRT-LLM's context servers (the prefill instances of a disaggregated plan) do not
    // support the overlap scheduler, so they run without it (and `--emit trtllm` writes
    // `disable_overlap_scheduler: true` for them).
    let trtllm_context_server = ctx.phase == Phase::Prefill && engine == ServingEngine::Trtllm;
    InstanceConfig {
        scheduler,
        budget: 0,
        // The share by which the scheduler lets chunks overflow the budget (none but
        // decode-first's).
        slack: if scheduler.uses_slack() { plan.serving.token_budget_slack } else { 0.0 },
        max_num_seqs: 0,
        chunked_prefill: plan.sim.chunked_prefill,
        block_size: plan.kv_block_size(ctx.device) as u64,
        kv_blocks: 0,
        decode: if ctx.phase == Phase::Prefill { DecodeMode::Plain } else { decode_mode(ctx) },
        prefix_hit_rate: plan.workload.prefix_cache_hit_rate,
        images_per_request,
        image_patches_per_image: patches,
        image_patches: patches * images_per_request,
        image_tokens: tokens,
        overlap_scheduling: ctx.overlap_scheduling && !trtllm_context_server,
        frontend: ctx.frontend.map(|f| Frontend {
            request_s: f.request_s,
            input_token_s: f.input_token_s,
            output_token_s: f.output_token_s,
        }),
        graphs: ctx.cuda_graphs.as_ref().map(|g| graphs_template(ctx, g)),
    }
}

/// The CUDA graphs of a candidate's instances before a probe caps their largest size: the
/// profile's largest size on this device at this TP, and what launching every kernel of an
/// eager step costs the host (the cost model's operators × their calls per step, each at the
/// profile's launch cost).
fn graphs_template(ctx: &CandidateCtx, g: &CudaGraphProfile) -> CudaGraphs {
    let kernels: f64 = ctx.cost.ops().iter().map(|o| o.count).sum();
    CudaGraphs {
        unit: match g.unit {
            GraphSizeUnit::Tokens => GraphUnit::Tokens,
            GraphSizeUnit::Sequences => GraphUnit::Sequences,
        },
        max_size: g.max_size_on(ctx.device.memory_gib(), ctx.cand.parallel.tp),
        mixed_steps: g.mixed_steps,
        padding: g.padding,
        grid: g.sizes.iter().map(|s| (s[0], s[1])).collect(),
        eager_launch_s: kernels * g.launch_us * 1e-6,
    }
}

/// The decode mode a candidate implies.
fn decode_mode(ctx: &CandidateCtx) -> DecodeMode {
    let plan = ctx.plan;
    match &plan.serving.speculative {
        Some(s) => {
            let drafts = match s.method {
                SpeculativeMethod::Dflash => s.block as u64 - 1,
                SpeculativeMethod::Dspark => s.block as u64,
            };
            DecodeMode::Block { block: s.block as u64, drafts, mean_accepted: s.acceptance.min(drafts as f64) }
        }
        None => DecodeMode::mtp(ctx.cand.mtp, &plan.serving.mtp_acceptance_rates),
    }
}

/// The plan's request stream under `arrival` (the plan's own, or a P/D verification's rate).
/// `output_spread`: see [`Plan::output_spread`].
pub fn request_factory(plan: &Plan, arrival: ArrivalProcess, output_spread: Option<u64>) -> RequestFactory {
    RequestFactory::new(plan.workload.input.clone(), plan.workload.output.clone(), plan.sim.shared_prefix, arrival, plan.seed)
        .with_range_ratio(plan.workload.range_ratio)
        .with_output_spread(output_spread)
}

/// Bins of a variable-length input, for per-bin latencies.
pub fn input_bins(plan: &Plan) -> Vec<(u64, u64)> {
    match &plan.workload.input {
        Lengths::Distribution(d) => d.bins.iter().map(|b| (b.min_tokens, b.max_tokens)).collect(),
        _ => Vec::new(),
    }
}

/// Mean output tokens of a workload's requests.
fn output_mean(output: &Lengths) -> u64 {
    match output {
        Lengths::Fixed(o) => *o,
        Lengths::Distribution(d) => d.effective_length(0.0),
    }
}
