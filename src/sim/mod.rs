//! The discrete-event simulation of serving instances: requests arrive, wait, prefill in
//! chunks, decode one token per step (more with MTP), finish. Time is integer nanoseconds;
//! events pop by (time, push order); a step's latency comes from a [`StepCostModel`] on the
//! step's actual batch shape. Every loop is bounded: a run that cannot finish is a typed
//! [`SimError`], never a hang.
//!
//! Layout: [`queue`] (events), [`kv`] (paged KV pool, prefix cache), [`instance`] (one
//! instance: admission, decode-first scheduling, preemption, step completion), [`metrics`]
//! (latency recorders and the report), [`engine`] (the search's [`crate::search::Engine`]).

pub mod engine;
pub mod instance;
pub mod kv;
pub mod metrics;
pub mod pd;
pub mod queue;
pub mod scheduler;

pub use engine::SimEngine;
pub use instance::{Instance, Role};
pub use metrics::{BinStat, LatencyStats, Percentile, Recorder, SimReport, Stat};
pub use queue::{Event, EventQueue, Nanos};

use crate::cost::{Breakdown, StepCostModel};
use crate::workload::arrival::{rng, ArrivalProcess, NewRequest, RequestFactory, Stream};
use instance::StepOutcome;

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

    pub fn draw_accepted(&self, rng: &mut rand_chacha::ChaCha8Rng) -> u64 {
        instance::draw(self, rng)
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

/// How one instance schedules and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceConfig {
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
}

impl InstanceConfig {
    /// Running sequences are capped so that every decode fits the step's token budget.
    pub fn running_cap(&self) -> u64 {
        self.max_num_seqs.min((self.budget / self.decode.query_tokens()).max(1))
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
    /// Open loop: at most this many requests in flight (client side).
    pub max_concurrency: Option<u64>,
    /// Limits for goodput (ms).
    pub ttft_limit_ms: f64,
    pub tpot_limit_ms: f64,
    pub seed: u64,
    /// Steps after which a run is abandoned.
    pub max_steps: u64,
    /// Input-length bins `[min, max)` to break latencies down by (variable-length workloads).
    pub bins: Vec<(u64, u64)>,
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
    pub fn duration_ns(&self, tokens: u64) -> Nanos {
        (self.link.transfer_s(self.bytes_per_token * tokens as f64) * 1e9).round() as Nanos
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
    pub first_token: Option<Nanos>,
    pub finish: Option<Nanos>,
    /// Admission on a decode instance (P/D).
    pub decode_admitted: Option<Nanos>,
    pub generated: u64,
    pub preemptions: u32,
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

/// Why a simulation could not run to completion.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("the KV cache holds {capacity} blocks of {block_size} tokens, but one request needs {needed} ({tokens} tokens)")]
    KvTooSmall { needed: u64, capacity: u64, block_size: u64, tokens: u64 },
    #[error("no KV capacity is left for the cache after weights and activations")]
    NoKvCapacity,
    #[error("the simulation did not finish within {steps} engine steps")]
    StepLimit { steps: u64 },
    #[error("a prompt of {prompt} tokens cannot be scheduled whole in a budget of {budget} tokens without chunked prefill")]
    PromptTooLong { prompt: u64, budget: u64 },
    #[error("instance {instance} stalled: {waiting} requests wait but none can be scheduled")]
    Stalled { instance: u32, waiting: u64 },
    #[error("{batch} requests in flight need about {needed} KV blocks at their mean context, but the cache holds {capacity}")]
    KvOversubscribed { needed: u64, capacity: u64, batch: u64 },
}

/// Completion counts at which the closed loop checks its stopping rule, relative to warm-up.
const MIN_WINDOW: u64 = 8;
const MAX_DOUBLINGS: u32 = 5;
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
/// Break down every n-th step's time by bound (the breakdown costs more than the latency).
const BREAKDOWN_EVERY: u64 = 16;

/// (time, output tokens, prefilled prompt tokens) at a window boundary.
type Mark = (Nanos, u64, u64);

struct Window {
    warm_completions: u64,
    window: u64,
    start: Option<(Nanos, u64)>,
    prev_throughput: Option<f64>,
    end: Option<(Nanos, u64)>,
    converged: bool,
    doublings: u32,
}

/// Simulate a stream of requests over `cfg.instances` identical instances.
pub fn simulate(cfg: &SimConfig, cost: &dyn StepCostModel, factory: RequestFactory) -> Result<SimReport, SimError> {
    simulate_detailed(cfg, cost, factory, &mut |_| {}).map(|(r, _)| r)
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
}

/// [`simulate`], also returning every request's record and reporting each step to `on_step`.
pub fn simulate_detailed(
    cfg: &SimConfig,
    cost: &dyn StepCostModel,
    factory: RequestFactory,
    on_step: &mut dyn FnMut(StepRecord),
) -> Result<(SimReport, Vec<RequestState>), SimError> {
    let system = System {
        groups: vec![Group { role: cfg.role, count: cfg.instances, cfg: cfg.instance.clone(), cost }],
        transfer: None,
        routing: Routing::LeastLoaded,
        run: cfg.run.clone(),
    };
    simulate_system(&system, factory, on_step)
}

/// Route to the least-loaded (or next round-robin) instance among `ids`.
fn route(instances: &[Instance], ids: &[u32], routing: Routing, rr: &mut usize) -> u32 {
    match routing {
        Routing::LeastLoaded => *ids.iter().min_by_key(|&&i| (instances[i as usize].load, i)).expect("a group has instances"),
        Routing::RoundRobin => {
            let i = ids[*rr % ids.len()];
            *rr += 1;
            i
        }
    }
}

/// Run a system of instance groups over a request stream.
///
/// Requests enter the mixed or prefill group (a decode-only system receives them as if their
/// prompt's KV had been transferred). A prefill instance hands a request off after its first
/// token: with a decode group it is sent over the KV link to a decode instance; without one
/// (a prefill-only study) it leaves the system there.
pub fn simulate_system(
    sys: &System,
    mut factory: RequestFactory,
    on_step: &mut dyn FnMut(StepRecord),
) -> Result<(SimReport, Vec<RequestState>), SimError> {
    let run = &sys.run;
    let closed = matches!(factory.process(), ArrivalProcess::Closed);
    let burst = matches!(factory.process(), ArrivalProcess::Burst);
    let open = !closed && !burst;
    // Arrival indices whose arrival times bound the open-loop measurement window.
    let open_total = factory.trace_len().map_or(run.num_requests, |l| l.min(run.num_requests));
    let edge = (open_total as f64 * OPEN_EDGE_SHARE).floor() as u64;
    let open_marks = (edge, open_total.saturating_sub(1 + edge));
    let mut instances: Vec<Instance> = Vec::new();
    let mut group_of: Vec<usize> = Vec::new();
    for (g, grp) in sys.groups.iter().enumerate() {
        if grp.cfg.kv_blocks == 0 {
            return Err(SimError::NoKvCapacity);
        }
        for _ in 0..grp.count {
            let id = instances.len() as u32;
            instances.push(Instance::new(id, grp.role, &grp.cfg));
            group_of.push(g);
        }
    }
    let ids_with = |pred: &dyn Fn(Role) -> bool| -> Vec<u32> { instances.iter().filter(|i| pred(i.role)).map(|i| i.id).collect() };
    let entry: Vec<u32> = ids_with(&|r| r != Role::Decode);
    let decoders: Vec<u32> = ids_with(&|r| r == Role::Decode);
    let decode_only = entry.is_empty();
    let prefill_only = !decoders.is_empty() || instances.iter().all(|i| i.role == Role::Prefill);
    let prefill_only = prefill_only && decoders.is_empty();
    let image_tokens = sys.groups.iter().map(|g| g.cfg.image_tokens).max().unwrap_or(0);
    let mut reqs: Vec<RequestState> = Vec::new();
    let mut queue = EventQueue::new();
    let mut mtp_rng = rng(run.seed, Stream::MtpAcceptance);
    let mut out = StepOutcome::default();
    let mut itl = Recorder::default();
    let mut now: Nanos = 0;
    let (mut rr_entry, mut rr_decode) = (0usize, 0usize);

    let check_fits = |r: &RequestState| -> Result<(), SimError> {
        for g in &sys.groups {
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
    };
    let admit_request = |n: NewRequest, reqs: &mut Vec<RequestState>, queue: &mut EventQueue| -> Result<(), SimError> {
        let mut r = RequestState::from_new(&n, image_tokens);
        check_fits(&r)?;
        if decode_only {
            // The prompt was prefilled elsewhere: the first token exists on arrival.
            r.first_token = Some(n.arrival_ns);
            r.generated = 1;
        }
        let id = reqs.len() as u32;
        queue.push(n.arrival_ns, Event::Arrival { request: id });
        reqs.push(r);
        Ok(())
    };
    let mut in_flight: u64 = 0;
    let mut issued: u64 = 0;
    let mut pending_open: Option<NewRequest> = None;
    if closed || burst {
        for _ in 0..run.concurrency {
            admit_request(factory.make(0), &mut reqs, &mut queue)?;
            issued += 1;
            in_flight += 1;
        }
    } else {
        pending_open = factory.next_open();
    }
    let mut win = Window {
        warm_completions: if closed { run.concurrency } else { 0 },
        window: run.concurrency.max(MIN_WINDOW),
        start: None,
        prev_throughput: None,
        end: None,
        converged: !closed,
        doublings: 0,
    };
    let mut completed: u64 = 0;
    let mut tokens_out: u64 = 0;
    let mut prefilled_input: u64 = 0;
    let mut steps: u64 = 0;
    let mut batch_sum: u64 = 0;
    let mut token_sum: u64 = 0;
    let mut step_time_sum: f64 = 0.0;
    let mut kv_integral: f64 = 0.0;
    let mut kv_peak: f64 = 0.0;
    let mut breakdown = Breakdown::default();
    let mut breakdown_weight = 0.0;
    let mut stop = false;
    let mut dirty: Vec<u32> = Vec::with_capacity(instances.len());
    let mut window_marks: (Option<Mark>, Option<Mark>) = (None, None);
    // Open loop: cumulative (time, output tokens, prefilled tokens) after every step, to read
    // the rates of a window chosen once the run is over.
    let mut series: Vec<Mark> = Vec::new();
    // (Σ TTFT, Σ TPOT, count) of requests finishing in the window; whether the run was abandoned.
    let mut watch = (0.0f64, 0.0f64, 0u64);
    let mut abandoned = false;

    // Open loop: release arrivals respecting the client-side concurrency cap.
    let release_open = |pending: &mut Option<NewRequest>,
                        factory: &mut RequestFactory,
                        reqs: &mut Vec<RequestState>,
                        queue: &mut EventQueue,
                        issued: &mut u64,
                        in_flight: &mut u64,
                        now: Nanos|
     -> Result<(), SimError> {
        while let Some(n) = *pending {
            if *issued >= run.num_requests {
                *pending = None;
                break;
            }
            if run.max_concurrency.is_some_and(|m| *in_flight >= m) {
                break;
            }
            let mut n = n;
            n.arrival_ns = n.arrival_ns.max(now);
            admit_request(n, reqs, queue)?;
            *issued += 1;
            *in_flight += 1;
            *pending = factory.next_open();
        }
        Ok(())
    };
    if !closed && !burst {
        release_open(&mut pending_open, &mut factory, &mut reqs, &mut queue, &mut issued, &mut in_flight, 0)?;
    }

    while let Some((t, ev)) = queue.pop() {
        debug_assert!(t >= now, "time went backwards: {t} < {now}");
        let dt = (t - now) as f64;
        for inst in &instances {
            kv_integral += dt * inst.kv.used() as f64 / inst.kv.capacity as f64;
        }
        now = t;
        let mut done_now: u64 = 0;
        let touched = match ev {
            Event::Arrival { request } => {
                let r = &mut reqs[request as usize];
                if decode_only {
                    let target = route(&instances, &decoders, sys.routing, &mut rr_decode);
                    r.instance = target;
                    instances[target as usize].reserve();
                    instances[target as usize].enqueue_transferred(request);
                    target
                } else {
                    let target = route(&instances, &entry, sys.routing, &mut rr_entry);
                    r.instance = target;
                    instances[target as usize].enqueue(request, &reqs);
                    target
                }
            }
            Event::StepDone { instance } => {
                let g = group_of[instance as usize];
                let inst = &mut instances[instance as usize];
                let step_ms = inst.step_ms;
                inst.complete(&sys.groups[g].cfg, &mut reqs, now, &mut mtp_rng, &mut out);
                itl.record_n(step_ms, out.decode_seqs);
                tokens_out += out.tokens;
                for &r in &out.first_tokens {
                    prefilled_input += reqs[r as usize].input;
                }
                if open {
                    series.push((now, tokens_out, prefilled_input));
                }
                done_now += out.finished.len() as u64;
                for &r in &out.handed_off {
                    if let (Some(x), false) = (&sys.transfer, decoders.is_empty()) {
                        let target = route(&instances, &decoders, sys.routing, &mut rr_decode);
                        instances[target as usize].reserve();
                        let at = now + x.duration_ns(reqs[r as usize].input);
                        queue.push(at, Event::KvTransferDone { request: r, instance: target });
                    } else {
                        // Prefill-only study: the request leaves after its first token.
                        reqs[r as usize].finish = Some(now);
                        done_now += 1;
                    }
                }
                instance
            }
            Event::KvTransferDone { request, instance } => {
                reqs[request as usize].instance = instance;
                instances[instance as usize].enqueue_transferred(request);
                instance
            }
        };
        if done_now > 0 && closed && win.start.is_some() {
            // Latency of requests finishing inside the window, to abandon hopeless probes.
            for &r in out.finished.iter().chain(if decoders.is_empty() { out.handed_off.iter() } else { [].iter() }) {
                let rq = &reqs[r as usize];
                if let (Some(first), Some(fin)) = (rq.first_token, rq.finish) {
                    watch.0 += (first - rq.arrival) as f64 / 1e6;
                    if rq.output > 1 && !prefill_only {
                        watch.1 += (fin - first) as f64 / 1e6 / (rq.output - 1) as f64;
                    }
                    watch.2 += 1;
                }
            }
            if watch.2 >= ABANDON_MIN_REQUESTS
                && (watch.0 / watch.2 as f64 > ABANDON_FACTOR * run.ttft_limit_ms
                    || watch.1 / watch.2 as f64 > ABANDON_FACTOR * run.tpot_limit_ms)
            {
                abandoned = true;
                stop = true;
                window_marks.1 = Some((now, tokens_out, prefilled_input));
            }
        }
        if done_now > 0 && !stop {
            completed += done_now;
            in_flight -= done_now;
            if closed && !stop {
                // Closed loop: a finished request is replaced at once.
                for _ in 0..done_now {
                    admit_request(factory.make(now), &mut reqs, &mut queue)?;
                    issued += 1;
                    in_flight += 1;
                }
            }
            if closed {
                let before = win.start;
                stop = closed_loop_stop(&mut win, completed, now, tokens_out);
                if before.is_none() && win.start.is_some() {
                    window_marks.0 = Some((now, tokens_out, prefilled_input));
                }
                if stop {
                    window_marks.1 = Some((now, tokens_out, prefilled_input));
                }
            } else if !burst {
                release_open(&mut pending_open, &mut factory, &mut reqs, &mut queue, &mut issued, &mut in_flight, now)?;
            }
        }
        if stop {
            break;
        }
        if !dirty.contains(&touched) {
            dirty.push(touched);
        }
        // Idle instances plan only once every event of this instant has been applied, so a
        // burst of simultaneous arrivals (or replacements) is seen as one.
        if queue.peek_time() == Some(now) {
            continue;
        }
        dirty.sort_unstable();
        for touched in dirty.drain(..) {
            let g = group_of[touched as usize];
            let grp = &sys.groups[g];
            let inst = &mut instances[touched as usize];
            if inst.busy || !inst.has_work() {
                continue;
            }
            if inst.plan(&grp.cfg, &mut reqs, now) {
                let secs = grp.cost.step_seconds(&inst.shape);
                let ns = ((secs * 1e9).round() as u64).max(1);
                inst.step_ms = ns as f64 / 1e6;
                steps += 1;
                batch_sum += inst.shape.prefill.seqs + inst.shape.decode.seqs;
                token_sum += inst.shape.tokens();
                step_time_sum += inst.step_ms;
                kv_peak = kv_peak.max(inst.kv.used() as f64 / inst.kv.capacity as f64);
                if steps % BREAKDOWN_EVERY == 1 {
                    let st = grp.cost.step(&inst.shape);
                    breakdown.add_scaled(&st.breakdown, 1.0);
                    breakdown_weight += st.seconds;
                }
                on_step(StepRecord {
                    instance: touched,
                    start: now,
                    end: now + ns,
                    prefill_seqs: inst.shape.prefill.seqs,
                    prefill_tokens: inst.shape.prefill.tokens,
                    decode_seqs: inst.shape.decode.seqs,
                    decode_tokens: inst.shape.decode.tokens,
                });
                queue.push(now + ns, Event::StepDone { instance: touched });
                if steps > run.max_steps {
                    return Err(SimError::StepLimit { steps: run.max_steps });
                }
            } else if inst.running_count() == 0 {
                // Nothing runs and the head of the queue cannot be admitted even alone.
                return Err(SimError::Stalled { instance: touched, waiting: inst.waiting_count() });
            }
        }
    }
    let _ = prefill_only;

    // The measurement window. Closed loop: between the stopping rule's marks, requests that
    // finish inside it. Burst: the whole run. Open loop: latencies of the requests arriving
    // between the edges (by arrival order); rates from one mean lifetime after the first of
    // them arrived (the system has filled) to the arrival of the last (arrivals still run).
    let measured_range = open_marks.0..=open_marks.1;
    let in_range = |idx: usize| open_marks.1 >= open_marks.0 && measured_range.contains(&(idx as u64));
    let open_window = if open && open_marks.1 >= open_marks.0 && (open_marks.1 as usize) < reqs.len() {
        let (t_a, t_b) = (reqs[open_marks.0 as usize].arrival, reqs[open_marks.1 as usize].arrival);
        let lives: Vec<u64> =
            reqs.iter().enumerate().filter(|(i, _)| in_range(*i)).filter_map(|(_, r)| r.finish.map(|f| f - r.arrival)).collect();
        let life = if lives.is_empty() { u64::MAX } else { lives.iter().sum::<u64>() / lives.len() as u64 };
        let t0 = t_a.saturating_add(life);
        (t0 < t_b && (t_b - t0) as f64 >= OPEN_MIN_STEADY_SHARE * (t_b - t_a) as f64).then_some((t0, t_b))
    } else {
        None
    };
    let at = |t: Nanos| -> Mark {
        let i = series.partition_point(|m| m.0 <= t);
        if i == 0 {
            (t, 0, 0)
        } else {
            (t, series[i - 1].1, series[i - 1].2)
        }
    };
    let steady = open_window.is_some();
    let (t0, tok0, in0, t1, tok1, in1) = if closed {
        let (t0, k0, i0) = window_marks.0.unwrap_or((0, 0, 0));
        let (t1, k1, i1) = window_marks.1.unwrap_or((now, tokens_out, prefilled_input));
        (t0, k0, i0, t1, k1, i1)
    } else if let Some((a, b)) = open_window {
        let ((t0, k0, i0), (t1, k1, i1)) = (at(a), at(b));
        (t0, k0, i0, t1, k1, i1)
    } else {
        (reqs.iter().map(|r| r.arrival).min().unwrap_or(0), 0, 0, now, tokens_out, prefilled_input)
    };
    let window_s = (t1.saturating_sub(t0)) as f64 / 1e9;
    let mut rec = [Recorder::default(), Recorder::default(), Recorder::default(), Recorder::default(), Recorder::default()];
    let (mut measured, mut good, mut finished_in_window, mut measured_out) = (0u64, 0u64, 0u64, 0u64);
    let mut per_bin: Vec<(u64, Recorder, Recorder)> = run.bins.iter().map(|_| (0, Recorder::default(), Recorder::default())).collect();
    for (idx, r) in reqs.iter().enumerate() {
        let Some(fin) = r.finish else { continue };
        if fin > t0 && fin <= t1 {
            finished_in_window += 1;
        }
        let counted = if closed {
            // The initial wave (all issued at t = 0) prefilled together; with variable output
            // lengths some of it outlives the warm-up, and its TTFT is not steady state.
            fin > t0 && fin <= t1 && idx as u64 >= run.concurrency
        } else if open && open_marks.1 >= open_marks.0 {
            in_range(idx)
        } else {
            true
        };
        if !counted {
            continue;
        }
        let first = r.first_token.unwrap_or(fin);
        let ttft = (first - r.arrival) as f64 / 1e6;
        let e2e = (fin - r.arrival) as f64 / 1e6;
        let out_tokens = if prefill_only { 1 } else { r.output };
        let inter = if out_tokens > 1 { (fin - first) as f64 / 1e6 / (out_tokens - 1) as f64 } else { 0.0 };
        let amort = e2e / out_tokens as f64;
        rec[0].record(ttft);
        rec[1].record(inter);
        rec[2].record(amort);
        rec[3].record(e2e);
        rec[4].record((r.scheduled.or(r.decode_admitted).unwrap_or(first) - r.arrival) as f64 / 1e6);
        measured += 1;
        measured_out += out_tokens;
        if ttft <= run.ttft_limit_ms && inter <= run.tpot_limit_ms {
            good += 1;
        }
        let prompt = r.input - image_tokens;
        if let Some(i) = run.bins.iter().position(|&(lo, hi)| prompt >= lo && prompt < hi) {
            per_bin[i].0 += 1;
            per_bin[i].1.record(ttft);
            per_bin[i].2.record(inter);
        }
    }
    let window_tokens = tok1.saturating_sub(tok0);
    let window_input = in1.saturating_sub(in0);
    let per_s = |x: u64| if window_s > 0.0 { x as f64 / window_s } else { 0.0 };
    let mut bd = Breakdown::default();
    if breakdown_weight > 0.0 {
        bd.add_scaled(&breakdown, 1.0 / breakdown_weight);
    }
    let report = SimReport {
        latency: LatencyStats {
            ttft: rec[0].stat(),
            tpot_inter_token: rec[1].stat(),
            tpot_amortized: rec[2].stat(),
            itl: itl.stat(),
            e2e: rec[3].stat(),
            queueing: rec[4].stat(),
        },
        output_throughput: per_s(window_tokens),
        input_throughput: per_s(window_input),
        total_throughput: per_s(window_tokens + window_input),
        // Open loop: requests often outlive the window, so the delivered rate is read off the
        // token rate (a saturated system delivers fewer tokens than arrive).
        request_rate: if steady && measured_out > 0 {
            per_s(window_tokens) * measured as f64 / measured_out as f64
        } else {
            per_s(finished_in_window)
        },
        goodput: if measured > 0 { good as f64 / measured as f64 } else { 0.0 },
        kv_utilization: if now > 0 { kv_integral / (now as f64 * instances.len() as f64) } else { 0.0 },
        kv_peak_utilization: kv_peak,
        mean_batch_size: if steps > 0 { batch_sum as f64 / steps as f64 } else { 0.0 },
        mean_step_tokens: if steps > 0 { token_sum as f64 / steps as f64 } else { 0.0 },
        mean_step_ms: if steps > 0 { step_time_sum / steps as f64 } else { 0.0 },
        breakdown: bd,
        steps,
        completed,
        measured,
        preemptions: instances.iter().map(|i| i.preemptions).sum(),
        window_s,
        makespan_s: now as f64 / 1e9,
        converged: if open { steady } else { win.converged && !abandoned },
        abandoned,
        kv_capacity_blocks: instances.iter().map(|i| i.kv.capacity).max().unwrap_or(0),
        bins: run
            .bins
            .iter()
            .zip(&per_bin)
            .filter(|(_, b)| b.0 > 0)
            .map(|(&(lo, hi), b)| BinStat { min_tokens: lo, max_tokens: hi, requests: b.0, ttft: b.1.stat(), tpot_inter_token: b.2.stat() })
            .collect(),
    };
    Ok((report, reqs))
}

/// Closed loop: after warm-up (the first C completions), measure throughput over a window of
/// W completions, then 2W, 4W, …; stop once doubling moves throughput by less than 1 %.
fn closed_loop_stop(w: &mut Window, completed: u64, now: Nanos, tokens: u64) -> bool {
    if w.start.is_none() {
        if completed >= w.warm_completions {
            w.start = Some((now, tokens));
        }
        return false;
    }
    let (t0, k0) = w.start.unwrap();
    if completed < w.warm_completions + w.window {
        return false;
    }
    let thr = (tokens - k0) as f64 / (now - t0).max(1) as f64;
    if let Some(prev) = w.prev_throughput {
        if (thr - prev).abs() <= 0.01 * thr {
            w.converged = true;
            w.end = Some((now, tokens));
            return true;
        }
    }
    w.prev_throughput = Some(thr);
    w.doublings += 1;
    if w.doublings > MAX_DOUBLINGS {
        w.end = Some((now, tokens));
        return true;
    }
    w.window *= 2;
    false
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod properties;
