//! The simulator's prediction for one measured run: the run's layout at the run's concurrency,
//! measured as the benchmark measured it.
//!
//! A benchmark client sends `num_prompts` requests (10 × C in the training file), the first C
//! together at t = 0, keeps C in flight, and averages over all of them: the simulator's closed
//! loop with `--num-requests` does exactly that (see `sim::RunParams::closed_requests`). The
//! scheduler and its default limits are the run's own serving engine's (vLLM, SGLang or
//! TensorRT-LLM; the reader refuses any other engine), which the error tables show per engine.

use super::fit::{Sensitivity, COMPONENTS};
use super::mapping::Resolver;
use super::measured::MeasuredRun;
use crate::cost::{BatchShape, StepCostModel, StepParts, StepTime};
use crate::hardware::DeviceProfile;
use crate::model::{ModelArch, ModelSource};
use crate::outcome::Phase;
use crate::plan::{Mode, Plan};
use crate::search::{budgets, Candidate, CandidateCtx};
use crate::sim::{simulate, simulate_detailed, RequestState, SimError, StepRecord};
use crate::workload::arrival::ArrivalProcess;
use crate::workload::Lengths;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// Steps after which one simulation of a run is abandoned (the row counts as failed).
pub const MAX_STEPS: u64 = 5_000_000;

/// Predicted mean TTFT and TPOT of a run, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    pub ttft_ms: f64,
    pub tpot_ms: f64,
}

/// Mean TTFT and inter-token TPOT of one simulation.
#[derive(Debug, Clone, Copy)]
struct Means {
    ttft: f64,
    tpot: f64,
}

/// The serving engine a run is simulated under, its own (the reader admits only
/// [`super::measured::MEASURED_ENGINES`], so the last arm is vLLM's).
pub fn serving_engine_of(run: &MeasuredRun) -> crate::plan::ServingEngine {
    match run.engine.as_str() {
        "sglang" => crate::plan::ServingEngine::Sglang,
        "trtllm" => crate::plan::ServingEngine::Trtllm,
        _ => crate::plan::ServingEngine::Vllm,
    }
}

/// Predicts measured runs with the simulator. `base` carries every option a run does not set
/// (scheduler, token budget rule, reserved memory, compile, seed…): the command line builds it
/// with its defaults; each run replaces the model, device, quantization, lengths and layout.
///
/// The engine profiles of `base` (built-in, `--calibration FILE` or `none`) price the steps,
/// as on every command; the fit swaps them with [`Predictor::with_engines`].
pub struct Predictor {
    base: Plan,
    models: HashMap<String, ModelArch>,
    devices: HashMap<String, DeviceProfile>,
}

impl Predictor {
    /// Predictions under `base` for the catalog models and device profiles of `res` (the
    /// resolver that read the runs, so both are loaded once).
    pub fn new(base: Plan, res: &Resolver) -> Self {
        let models = res.models().iter().map(|m| (m.id.clone(), m.clone())).collect();
        let devices = res.registry.profiles().map(|(p, _)| (p.name.clone(), p.clone())).collect();
        Predictor { base, models, devices }
    }

    /// The plan a run is simulated under: the base plan with the run's model, device,
    /// quantization, fixed lengths and one aggregated instance of its layout.
    pub fn plan_for(&self, run: &MeasuredRun) -> Result<(Plan, DeviceProfile), String> {
        let t = &run.target;
        let model = self.models.get(&t.model).ok_or_else(|| format!("model {} is not in the catalog", t.model))?;
        let device = self.devices.get(&t.device).ok_or_else(|| format!("device {} is not a profile", t.device))?;
        let mut plan = self.base.clone();
        plan.model = model.clone();
        plan.model_source = ModelSource::Catalog;
        plan.devices = vec![device.clone()];
        plan.num_devices = t.parallel.num_devices;
        plan.mode = Mode::Aggregation;
        plan.quant = t.quant;
        plan.workload.input = Lengths::Fixed(run.isl);
        plan.workload.output = Lengths::Fixed(run.osl);
        plan.workload.input_label = run.isl.to_string();
        plan.workload.output_label = run.osl.to_string();
        plan.sim.arrival = ArrivalProcess::Closed;
        plan.sim.num_requests = Some(run.num_prompts.max(1));
        plan.sim.measure = crate::sim::Measure::WholeRun;
        plan.sim.serving_engine = Some(serving_engine_of(run));
        // The release decides version-dependent defaults (overlapped scheduling); a blank or
        // non-numeric version (`gpt-oss-dev`) is taken as the current release.
        plan.sim.engine_version = crate::hardware::calibration::EngineVersion::parse(&run.engine_version);

        // Fused graph, causal attention, overheads and efficiencies: the engine's execution
        // profile and calibration on the device (`--calibration`), as on every command.
        // A benchmark at concurrency C needs C running sequences, whatever the engine's default.
        plan.sim.max_num_seqs = plan.engine_limits(device).max_num_seqs.map(|m| m.max(run.concurrency));
        Ok((plan, device.clone()))
    }

    /// The share of its GPUs' time a run's measured request rate needs to prefill its prompts
    /// alone: requests per second ([`MeasuredRun::requests_per_s`]) × the device time of a
    /// prompt in a step that batches prompts up to the engine's token budget, priced as `price`
    /// prices it at burst clocks (measured kernels where the engine and device have them), over the
    /// attention-DP replicas. A lower bound
    /// on what the run used: no decode work, no host time. `None` when the run cannot be
    /// planned.
    pub fn prefill_share(&self, run: &MeasuredRun) -> Option<f64> {
        let (plan, device) = self.plan_for(run).ok()?;
        let budget = budgets(&plan, &device).0.first().copied()?.max(1);
        let prompts = (budget / run.isl.max(1)).max(1);
        let step = crate::outcome::price::StepSpec {
            decodes: Vec::new(),
            prefills: vec![crate::outcome::price::PrefillSpec { prompts, tokens: run.isl, cached: 0 }],
        };
        // At burst clocks: a lower bound stays one under a power limit.
        let priced = crate::search::price::price(&plan, run.target.parallel, &step, false);
        let s_per_prompt = priced.device_ms * 1e-3 / prompts as f64;
        let share = run.requests_per_s() * s_per_prompt / run.target.parallel.dp.max(1) as f64;
        share.is_finite().then_some(share)
    }

    /// The prediction for one run; `Err` says why the simulator could not run it.
    pub fn predict(&self, run: &MeasuredRun) -> Result<Prediction, String> {
        self.simulate_run(run, |ctx, batch, budget| {
            simulate_means(ctx, batch, budget).map(|m| Prediction { ttft_ms: m.ttft, tpot_ms: m.tpot })
        })
    }

    /// The prediction for one run with how its mean TTFT and TPOT move with each priced
    /// component of the steps ([`Sensitivity`]), for the fit.
    pub fn sensitivity(&self, run: &MeasuredRun) -> Result<Sensitivity, String> {
        self.simulate_run(run, simulate_sensitivity)
    }

    /// Simulate `run` with `sim` (candidate, requests per replica, token budget): the run's
    /// layout as one aggregated candidate, each of the plan's budgets in turn until one runs.
    fn simulate_run<T>(&self, run: &MeasuredRun, sim: impl Fn(&CandidateCtx, u32, u64) -> Result<T, SimError>) -> Result<T, String> {
        let (plan, device) = self.plan_for(run)?;
        let cand = Candidate { parallel: run.target.parallel, mtp: 0 };
        let ctx = CandidateCtx::new(&plan, &device, cand, Phase::Aggregated);
        // Closed-loop runs simulate one DP replica; the client's requests spread over them.
        let per_replica = run.concurrency.div_ceil(cand.parallel.dp.max(1) as u64).min(u32::MAX as u64) as u32;
        let mut last = String::new();
        for budget in budgets(&plan, &device).0 {
            match sim(&ctx, per_replica, budget) {
                Ok(x) => return Ok(x),
                Err(e) => last = format!("token budget {budget}: {e}"),
            }
        }
        Err(last)
    }

    /// Sensitivities of every run, in order (rayon over runs; each is deterministic).
    pub fn sensitivity_all(&self, runs: &[MeasuredRun]) -> Vec<Result<Sensitivity, String>> {
        runs.par_iter().map(|r| self.sensitivity(r)).collect()
    }

    /// The same predictor with other engine profiles (the fit's trial calibrations).
    pub fn with_engines(&self, engines: crate::hardware::calibration::EngineProfiles) -> Self {
        let mut base = self.base.clone();
        base.engines = engines;
        Predictor { base, models: self.models.clone(), devices: self.devices.clone() }
    }

    /// A device profile by name.
    pub fn device(&self, name: &str) -> Option<&DeviceProfile> {
        self.devices.get(name)
    }

    /// The engine profiles predictions run under.
    pub fn engines(&self) -> &crate::hardware::calibration::EngineProfiles {
        &self.base.engines
    }

    /// Predictions for every run, in order (rayon over runs; each is deterministic).
    pub fn predict_all(&self, runs: &[MeasuredRun]) -> Vec<Result<Prediction, String>> {
        runs.par_iter().map(|r| self.predict(r)).collect()
    }
}

fn simulate_means(ctx: &CandidateCtx, batch: u32, budget: u64) -> Result<Means, SimError> {
    let setup = ctx.sim_setup();
    let (mut cfg, factory) = setup.config(batch, budget);
    cfg.run.max_steps = MAX_STEPS;
    let rep = simulate(&cfg, &setup.cost, factory)?;
    Ok(Means { ttft: rep.latency.ttft.mean, tpot: rep.latency.tpot_inter_token.mean })
}

/// Prices steps with the candidate's cost model and keeps, for every step the simulator runs,
/// the amount of each component the calibration scales (see [`COMPONENTS`]): one step's gap,
/// one step's host work, and its running sequences.
struct Recorder<'a> {
    inner: &'a crate::cost::RooflineCost,
    /// The engine overlaps scheduling: a step takes the larger of its device and host parts,
    /// so only the larger one's components move it (the other's weights are recorded as 0).
    overlap: bool,
    steps: Mutex<Vec<[f64; COMPONENTS]>>,
}

impl StepCostModel for Recorder<'_> {
    fn step(&self, shape: &BatchShape) -> StepTime {
        self.inner.step(shape)
    }

    fn step_seconds(&self, shape: &BatchShape) -> f64 {
        self.step_parts(shape).serial()
    }

    // Mutation: leave this out and the fit simulates every run at burst clocks, while `calibrate`
    // without `--fit` does not (the fit's "after" table then differs from a plain run's).
    fn power_limit(&self) -> Option<crate::hardware::PowerLimit> {
        self.inner.power_limit()
    }

    fn step_parts(&self, shape: &BatchShape) -> StepParts {
        if shape.is_empty() {
            return StepParts::default();
        }
        let seqs = (shape.prefill.seqs + shape.decode.seqs) as f64;
        let parts = self.inner.step_parts(shape);
        // The per-step gap adds to every step; the host's work (per step and per sequence) only
        // where it is not overlapped behind a longer device part.
        let shows = if self.overlap && parts.host_s <= parts.device_s { 0.0 } else { 1.0 };
        let comps = [1.0, shows, shows * seqs];
        self.steps.lock().expect("no panic holds the lock").push(comps);
        parts
    }
}

/// Simulate one run, recording each step's components, and turn them into the run's
/// sensitivities: Σ TTFT = Σ_s W_s · dur_s − J and Σ TPOT = Σ_s U_s · dur_s, where W_s counts
/// the requests that arrived before step s ended and had no first token before it ended, and
/// U_s sums 1 / (output − 1) over the requests between their first token and their finish.
/// The schedule of a fixed-length closed loop does not depend on step times (requests are
/// admitted by tokens and blocks, never by the clock), so a change of a component's price
/// moves the means by these weights; the fit re-simulates to follow what it does not capture.
fn simulate_sensitivity(ctx: &CandidateCtx, batch: u32, budget: u64) -> Result<Sensitivity, SimError> {
    let setup = ctx.sim_setup();
    let (mut cfg, factory) = setup.config(batch, budget);
    cfg.run.max_steps = MAX_STEPS;
    let rec = Recorder { inner: &setup.cost, overlap: cfg.instance.overlap_scheduling, steps: Mutex::new(Vec::new()) };
    let mut ends: Vec<u64> = Vec::new();
    let (rep, reqs) = simulate_detailed(&cfg, &rec, factory, &mut |r: StepRecord| ends.push(r.end))?;
    let comps = rec.steps.into_inner().expect("no panic holds the lock");
    debug_assert_eq!(comps.len(), ends.len(), "one record per priced step");
    let (w, u) = step_weights(&reqs, &ends);
    let done: Vec<&RequestState> = reqs.iter().filter(|r| r.finish.is_some()).collect();
    let n = done.len().max(1) as f64;
    let n_tpot = done.iter().filter(|r| r.output > 1).count().max(1) as f64;
    let mut s = Sensitivity { ttft_ms: rep.latency.ttft.mean, tpot_ms: rep.latency.tpot_inter_token.mean, ..Default::default() };
    for ((c, wi), ui) in comps.iter().zip(&w).zip(&u) {
        for ((t, p), ck) in s.ttft.iter_mut().zip(s.tpot.iter_mut()).zip(c) {
            *t += wi * ck * 1e3 / n;
            *p += ui * ck * 1e3 / n_tpot;
        }
    }
    Ok(s)
}

/// Per step (by end time): W = requests waiting for their first token through the step's end,
/// U = Σ 1 / (output − 1) over requests decoding through it.
fn step_weights(reqs: &[RequestState], ends: &[u64]) -> (Vec<f64>, Vec<f64>) {
    let done = || reqs.iter().filter(|r| r.finish.is_some());
    let mut arrivals: Vec<u64> = done().map(|r| r.arrival).collect();
    let mut firsts: Vec<u64> = done().map(|r| r.first_token.unwrap_or(r.arrival)).collect();
    let inv = |r: &RequestState| if r.output > 1 { 1.0 / (r.output - 1) as f64 } else { 0.0 };
    let mut starts: Vec<(u64, f64)> = done().map(|r| (r.first_token.unwrap_or(r.arrival), inv(r))).collect();
    let mut stops: Vec<(u64, f64)> = done().map(|r| (r.finish.unwrap_or(0), inv(r))).collect();
    arrivals.sort_unstable();
    firsts.sort_unstable();
    starts.sort_unstable_by_key(|x| x.0);
    stops.sort_unstable_by_key(|x| x.0);
    let (mut ia, mut iff, mut is, mut it) = (0, 0, 0, 0);
    let (mut decoding, mut w, mut u) = (0.0, Vec::with_capacity(ends.len()), Vec::with_capacity(ends.len()));
    for &end in ends {
        while ia < arrivals.len() && arrivals[ia] < end {
            ia += 1;
        }
        while iff < firsts.len() && firsts[iff] < end {
            iff += 1;
        }
        while is < starts.len() && starts[is].0 < end {
            decoding += starts[is].1;
            is += 1;
        }
        while it < stops.len() && stops[it].0 < end {
            decoding -= stops[it].1;
            it += 1;
        }
        w.push((ia - iff) as f64);
        u.push(decoding.max(0.0));
    }
    (w, u)
}
