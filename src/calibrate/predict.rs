//! The simulator's prediction for one measured run: the run's layout at the run's concurrency,
//! measured as the benchmark measured it.
//!
//! A benchmark client sends `num_prompts` requests (10 × C in the training file), the first C
//! together at t = 0, keeps C in flight, and averages over all of them: the simulator's closed
//! loop with `--num-requests` does exactly that (see `sim::RunParams::closed_requests`). The
//! scheduler and its default limits are the run's own serving engine's (vLLM, SGLang or
//! TensorRT-LLM; any other engine name runs under vLLM's), which the error tables show per
//! engine.

use super::measured::MeasuredRun;
use crate::hardware::DeviceProfile;
use crate::model::{ModelArch, ModelSource};
use crate::outcome::Phase;
use crate::plan::{Mode, Plan};
use crate::search::engine::sim::{sim_config, step_cost};
use crate::search::{budgets, Candidate, CandidateCtx};
use crate::sim::{simulate, SimError};
use crate::workload::arrival::ArrivalProcess;
use crate::workload::Lengths;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;

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

/// Predicts measured runs with the simulator. `base` carries every option a run does not set
/// (scheduler, token budget rule, reserved memory, compile, seed…): the command line builds it
/// with its defaults; each run replaces the model, device, quantization, lengths and layout.
///
/// This is where a fitted calibration (per device × engine parameters) will enter: it will
/// adjust each run's device profile and serving options in [`Predictor::plan_for`]. Until
/// then predictions use the uncalibrated profiles.
pub struct Predictor {
    base: Plan,
    models: HashMap<String, ModelArch>,
    devices: HashMap<String, DeviceProfile>,
}

impl Predictor {
    pub fn new(base: Plan) -> Self {
        let res = super::mapping::Resolver::default();
        let models = crate::model::catalog::all().into_iter().map(|m| (m.id.clone(), m)).collect();
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
        let engine = match run.engine.as_str() {
            "sglang" => crate::plan::ServingEngine::Sglang,
            "trtllm" => crate::plan::ServingEngine::Trtllm,
            _ => crate::plan::ServingEngine::Vllm,
        };
        plan.sim.serving_engine = Some(engine);

        // vLLM, TensorRT-LLM and SGLang run fused graphs by default (torch.compile and CUDA
        // graphs; TensorRT engines): fused element-wise kernels and grouped MoE GEMMs, which
        // is what `--compile` prices. Eager pricing over-stated gpt-oss TPOT 3–7 times.
        plan.compile.enabled = true;
        // A benchmark at concurrency C needs C running sequences, whatever the engine's default.
        plan.sim.max_num_seqs = plan.engine_limits(device).max_num_seqs.map(|m| m.max(run.concurrency));
        Ok((plan, device.clone()))
    }

    /// The prediction for one run; `Err` says why the simulator could not run it.
    pub fn predict(&self, run: &MeasuredRun) -> Result<Prediction, String> {
        let (plan, device) = self.plan_for(run)?;
        let cand = Candidate { parallel: run.target.parallel, mtp: 0 };
        let ctx = CandidateCtx::new(&plan, &device, cand, Phase::Aggregated);
        // Closed-loop runs simulate one DP replica; the client's requests spread over them.
        let per_replica = run.concurrency.div_ceil(cand.parallel.dp.max(1) as u64).min(u32::MAX as u64) as u32;
        let mut last = String::new();
        for budget in budgets(&plan, &device).0 {
            match simulate_means(&ctx, per_replica, budget) {
                Ok(m) => return Ok(Prediction { ttft_ms: m.ttft, tpot_ms: m.tpot }),
                Err(e) => last = format!("token budget {budget}: {e}"),
            }
        }
        Err(last)
    }

    /// Predictions for every run, in order (rayon over runs; each is deterministic).
    pub fn predict_all(&self, runs: &[MeasuredRun]) -> Vec<Result<Prediction, String>> {
        runs.par_iter().map(|r| self.predict(r)).collect()
    }
}

fn simulate_means(ctx: &CandidateCtx, batch: u32, budget: u64) -> Result<Means, SimError> {
    let (mut cfg, factory) = sim_config(ctx, batch, budget);
    cfg.run.max_steps = MAX_STEPS;
    let rep = simulate(&cfg, &step_cost(ctx), factory)?;
    Ok(Means { ttft: rep.latency.ttft.mean, tpot: rep.latency.tpot_inter_token.mean })
}
