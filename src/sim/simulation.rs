//! One run of the simulator: the entry points ([`simulate`], [`simulate_detailed`],
//! [`simulate_system`], [`simulate_report`]), the run's state ([`Simulation`]) and its assembly
//! from a [`System`]: the instances of every group with their schedulers, the router over the
//! entry and decode instances, the KV link between them, and the measurement state the arrival
//! process calls for.
//!
//! What a run does is split by responsibility, one submodule each, all methods of
//! [`Simulation`]: [`event_loop`] (the events, step planning and completion, routing and KV
//! hand-off), [`ahead`] (a latencies-only run's instances running ahead through repeated
//! decode steps between arrivals), [`feed`] (the workload: arrivals from the request factory, the closed loop's
//! replacements, the open loop's client cap), [`frontend`] (the engines' front ends: requests
//! on their way in, step outputs on their way out), [`measure`] (folding finished records into
//! the tallies, the measurement window, the report); [`stats`] holds the run's accumulators.

mod ahead;
mod event_loop;
mod feed;
mod frontend;
mod measure;
mod stats;

#[cfg(test)]
pub(super) use ahead::STEPS_RUN_AHEAD;
pub use event_loop::MAX_STEP_SECONDS;
pub use feed::CLIENT_JITTER_NS;

use super::config::{Group, Pipeline, Role, Routing, SimConfig, System};
use super::decode::AcceptanceDraws;
use super::error::SimError;
use super::instance::{Instance, StepOutcome};
use super::metrics::SimReport;
use super::queue::{EventQueue, Nanos};
use super::records::{RequestState, Requests, StepRecord};
use super::steady::Window;
use super::{link, pipeline, router};
use crate::cost::StepCostModel;
use crate::hardware::PowerWindow;
use crate::workload::arrival::{rng, ArrivalProcess, NewRequest, RequestFactory, Stream};
use stats::{KvUse, Mark, StepStats, Tally};

/// Open loop: the share of requests at each end of the run (by arrival order) left out of the
/// measurement, so that neither the empty system at the start nor the drain after the last
/// arrival counts as steady state.
const OPEN_EDGE_SHARE: f64 = 0.1;

/// Simulate a stream of requests over `cfg.instances` identical instances.
pub fn simulate(cfg: &SimConfig, cost: &dyn StepCostModel, factory: RequestFactory) -> Result<SimReport, SimError> {
    simulate_report(&single_group(cfg, cost, None), factory)
}

/// [`simulate`] where each of the `cfg.instances` replicas runs its steps through `pipeline`'s
/// stages (`cfg.instance` is one micro-batch lane; `None`: as [`simulate`]).
pub fn simulate_staged(
    cfg: &SimConfig,
    cost: &dyn StepCostModel,
    pipeline: Option<Pipeline>,
    factory: RequestFactory,
) -> Result<SimReport, SimError> {
    simulate_report(&single_group(cfg, cost, pipeline), factory)
}

/// A homogeneous configuration as a system of one group.
fn single_group<'a>(cfg: &SimConfig, cost: &'a dyn StepCostModel, pipeline: Option<Pipeline<'a>>) -> System<'a> {
    System {
        groups: vec![Group { role: cfg.role, count: cfg.instances, cfg: cfg.instance.clone(), cost, pipeline }],
        transfer: None,
        routing: Routing::LeastLoaded,
        run: cfg.run.clone(),
    }
}

/// [`simulate`], also returning every request's record and reporting each step to `on_step`.
pub fn simulate_detailed(
    cfg: &SimConfig,
    cost: &dyn StepCostModel,
    factory: RequestFactory,
    on_step: &mut dyn FnMut(StepRecord),
) -> Result<(SimReport, Vec<RequestState>), SimError> {
    simulate_system(&single_group(cfg, cost, None), factory, on_step)
}

/// [`simulate_detailed`] through a pipeline's stages (see [`simulate_staged`]).
pub fn simulate_detailed_staged(
    cfg: &SimConfig,
    cost: &dyn StepCostModel,
    pipeline: Option<Pipeline>,
    factory: RequestFactory,
    on_step: &mut dyn FnMut(StepRecord),
) -> Result<(SimReport, Vec<RequestState>), SimError> {
    simulate_system(&single_group(cfg, cost, pipeline), factory, on_step)
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

/// [`simulate_system`] with the entry instances in use changing over time (a replica plan):
/// `schedule` holds `(from, count)` pairs in time order — from `from` (ns) on, new requests go
/// to the first `count` entry instances of the system (at least one, at most all). An
/// instance taken out of use takes no new request but finishes every request it holds (its
/// queue included) where it started; one brought back takes requests again from that time.
/// Before the first pair every instance is in use.
pub fn simulate_scheduled(
    sys: &System,
    factory: RequestFactory,
    schedule: &[(Nanos, u32)],
) -> Result<(SimReport, Vec<RequestState>), SimError> {
    let mut no_steps = |_: StepRecord| {};
    let mut sim = Simulation::new(sys, factory, &mut no_steps, true)?;
    sim.schedule = schedule.to_vec();
    sim.start()?;
    sim.run()?;
    let (report, reqs) = sim.report();
    Ok((report, reqs.into_vec()))
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
    /// A pipelined group's lanes: the replica whose stages each instance's batches run
    /// through (an index into `stages`; `u32::MAX`: the instance is not pipelined).
    replica_of: Vec<u32>,
    stages: Vec<pipeline::Stages>,
    /// Scratch: the stage times of the batch being planned.
    stage_ns: Vec<Nanos>,
    kv_use: KvUse,
    /// Decode instances (routing among them and the entry instances: `router`).
    decoders: Vec<u32>,
    /// No instance takes prompts: requests arrive with their KV as transferred.
    decode_only: bool,
    prefill_only: bool,
    image_tokens: u64,
    reqs: Requests,
    /// Keep every request's record for the caller; otherwise the caller wants the report
    /// alone ([`simulate_report`], which watches no step), and an open loop drops each record
    /// once it is folded into `tally`.
    keep_records: bool,
    /// A latencies-only run of mixed instances without front ends, pipelines or KV links, for
    /// the report alone: instances may run ahead (see [`ahead`]).
    fast_forward: bool,
    /// The uncapped open loop's next arrival, while it is queued.
    next_arrival: Option<Nanos>,
    /// Per instance: the start times of the steps it last ran ahead to (see [`ahead`]).
    ahead: Vec<Vec<Nanos>>,
    /// Per instance: its devices' recent load, which sets how far a power-limited device's
    /// clocks have fallen ([`PowerWindow`]).
    power: Vec<PowerWindow>,
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
    /// The engines' front ends (state for every instance; used where the group has one).
    frontends: frontend::FrontEnds,
    /// Requests that left the system in the event being applied (their last token reached the
    /// client), for the closed loop's stopping rule and its watch on hopeless probes.
    leaving: Vec<u32>,
    /// Open loop: the cumulative KV integral after every step (aligned with `series`), to read
    /// KV use over the window chosen once the run is over.
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
    /// An open loop whose report reads rates keeps `series` and `kv_series`; a latencies-only
    /// run ([`super::config::RunParams::stop_once_measured`]) reads neither, and they would
    /// grow by an entry every step.
    keeps_series: bool,
    /// (Σ TTFT, Σ TPOT, count) of requests finishing in the window.
    watch: (f64, f64, u64),
    abandoned: bool,
    /// [`simulate_scheduled`]: `(from, count)` in time order — from `from` on, the first
    /// `count` entry instances take new requests; and the next change not yet applied.
    schedule: Vec<(Nanos, u32)>,
    schedule_next: usize,
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
        let (mut replica_of, mut stages) = (Vec::new(), Vec::new());
        for (g, grp) in sys.groups.iter().enumerate() {
            if grp.cfg.kv_blocks == 0 {
                return Err(SimError::NoKvCapacity);
            }
            // A pipelined replica is one lane per stage, sharing the stages.
            let lanes = grp.pipeline.as_ref().map_or(1, |p| p.len().max(1));
            for _ in 0..grp.count {
                for _ in 0..lanes {
                    let id = instances.len() as u32;
                    instances.push(Instance::with_scheduler(id, grp.role, &grp.cfg, grp.cfg.scheduler.build()));
                    group_of.push(g);
                    replica_of.push(if grp.pipeline.is_some() { stages.len() as u32 } else { u32::MAX });
                }
                if grp.pipeline.is_some() {
                    stages.push(pipeline::Stages::new(lanes as usize));
                }
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
        let n_instances = instances.len();
        let fast_forward = !keep_records
            && run.stop_once_measured
            && !closed
            && !burst
            && sys.transfer.is_none()
            && sys.groups.iter().all(|g| g.role == Role::Mixed && g.pipeline.is_none() && g.cfg.frontend.is_none());
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
            replica_of,
            stages,
            stage_ns: Vec::new(),
            decoders,
            link,
            reqs: Requests::default(),
            keep_records,
            fast_forward,
            next_arrival: None,
            ahead: vec![Vec::new(); n_instances],
            power: vec![PowerWindow::default(); n_instances],
            lazy_open: false,
            open_total,
            folds: !closed || bench_total.is_some(),
            tally: Tally::new(bins),
            queue: EventQueue::new(),
            acceptance: AcceptanceDraws::new(run.seed),
            out: StepOutcome::default(),
            frontends: frontend::FrontEnds::new(n_instances),
            leaving: Vec::new(),
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
            keeps_series: !closed && !burst && !run.stop_once_measured,
            watch: (0.0, 0.0, 0),
            abandoned: false,
            schedule: Vec::new(),
            schedule_next: 0,
            factory,
            on_step,
        })
    }
}
