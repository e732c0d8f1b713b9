//! The seam between the search and the engines: [`Engine`] evaluates one batch size of one
//! candidate under one token budget; [`CandidateCtx`] is everything it needs (the plan, the
//! device, the candidate's cost and memory models). The adapters here turn the plan into each
//! engine's own configuration: [`sim::SimEngine`] simulates the candidate's
//! [`sim::SimSetup`] (built once per candidate) at each probe's batch size and budget,
//! [`analytic::AnalyticEngine`] prices the closed-form formulas, [`CompareEngine`] runs both,
//! [`Stoppable`] lets a caller stop any of them between probes; [`row`] fills what both
//! engines' rows share. The engines themselves (`crate::sim`,
//! `crate::analytic`) never see the plan.

pub mod analytic;
pub mod row;
pub mod sim;

pub use analytic::AnalyticEngine;
pub use sim::SimEngine;

use super::batch::{Probe, ProbeStats};
use super::Candidate;
use crate::cost::graph::build_both;
use crate::cost::pipeline::StageModels;
use crate::cost::{CostOptions, MemoryModel, RooflineCost};
use crate::hardware::calibration::FrontendCosts;
use crate::hardware::runtime::{CudaGraphProfile, KvMemory};
use crate::hardware::DeviceProfile;
use crate::outcome::{AnalyticFigures, Phase};
use crate::plan::Plan;

/// Everything an engine needs to evaluate one candidate in one phase.
pub struct CandidateCtx<'a> {
    pub plan: &'a Plan,
    pub device: &'a DeviceProfile,
    pub cand: Candidate,
    pub phase: Phase,
    pub label: String,
    /// The whole model's step (with pipeline stages: what the operator trace, `price` and a
    /// step's breakdown read).
    pub cost: RooflineCost,
    /// The memory of one device (with pipeline stages: of the stage that leaves the least room
    /// for KV).
    pub mem: MemoryModel,
    /// Pipeline parallelism (`parallel.pp > 1`): each stage's step cost and the send between
    /// stages.
    pub stages: Option<StageModels>,
    /// The serving engine's front end (`None`: requests reach the engine as they arrive).
    pub frontend: Option<FrontendCosts>,
    /// The CUDA graphs the serving engine captures (`None`: steps priced as the cost model
    /// prices them).
    pub cuda_graphs: Option<CudaGraphProfile>,
    /// What sizes the serving engine's KV pool (`None`: the plan's reserve).
    pub kv_memory: Option<KvMemory>,
    /// The serving engine plans each step while the previous one runs.
    pub overlap_scheduling: bool,
    /// The candidate's simulation, configured on first use ([`CandidateCtx::sim_setup`]).
    sim: std::sync::OnceLock<sim::SimSetup>,
}

/// `q` as the engine's kernels multiply it on the device of `eff`: MXFP4 weights at the rate of
/// the engine's MXFP4 kernel (MXFP8 activations only where the device has FP4 tensor cores);
/// any other quantization as it is. What the cost model prices and the launch commands select.
pub fn mxfp4_as_run(eff: &crate::hardware::calibration::Effective, q: crate::quant::LinearQuant) -> crate::quant::LinearQuant {
    q.with_mxfp4_kernel(eff.mxfp4_kernel, eff.device.has_fp4_tensor_cores())
}

impl<'a> CandidateCtx<'a> {
    pub fn new(plan: &'a Plan, device: &'a DeviceProfile, cand: Candidate, phase: Phase) -> Self {
        // The serving engine's execution profile: its calibrated efficiencies and per-step
        // overhead (in the device it prices on), its per-sequence overhead, its fused graph.
        let eff = plan.effective(device);
        let mut opts = cost_options(plan, &cand);
        opts.compile.enabled |= eff.fused_graph;
        opts.causal_attention |= eff.causal_attention;
        opts.moe_all_reduce = eff.moe_all_reduce;
        opts.kernels = eff.kernels.clone();
        // MXFP4 weights run at the rate of the engine's kernels on this device.
        opts.quant.linear = mxfp4_as_run(&eff, opts.quant.linear);
        opts.quant.non_expert = opts.quant.non_expert.map(|q| mxfp4_as_run(&eff, q));
        let (mut cost, mem) = build_both(&plan.model, &eff.device, &cand.parallel, &opts);
        cost.step_host_s = eff.step_host_s;
        cost.per_seq_s = eff.per_seq_s;
        let stages = (cand.parallel.pp > 1).then(|| {
            let mut st = StageModels::build(&plan.model, &eff.device, &cand.parallel, &opts);
            // Every stage's worker launches its own step (the per-step gap, in each stage's
            // device profile); the scheduler's pass, sampling and output processing (the host's
            // per-step and per-sequence work) happen once a step, counted with the last stage.
            for (c, span) in st.costs.iter_mut().zip(&st.spans) {
                (c.step_host_s, c.per_seq_s) = if span.last { (eff.step_host_s, eff.per_seq_s) } else { (0.0, 0.0) };
            }
            st
        });
        let mem = stages.as_ref().map_or(mem, |s| s.mem.clone());
        let label = cand.label(&plan.model, plan.serving.speculative.as_ref());
        CandidateCtx {
            plan,
            device,
            cand,
            phase,
            label,
            cost,
            mem,
            stages,
            frontend: eff.frontend,
            cuda_graphs: eff.cuda_graphs,
            kv_memory: eff.kv_memory,
            overlap_scheduling: eff.overlap_scheduling,
            sim: std::sync::OnceLock::new(),
        }
    }

    pub fn reserved_bytes(&self) -> f64 {
        crate::cost::memory::bytes_from_gib(self.plan.serving.reserved_gib(self.device))
    }

    /// The candidate's simulation configuration ([`sim::SimSetup::new`]), built on the first
    /// call and shared by every probe of the candidate after it.
    pub fn sim_setup(&self) -> &sim::SimSetup {
        self.sim.get_or_init(|| sim::SimSetup::new(self))
    }
}

/// The cost-model options a candidate implies.
pub fn cost_options(plan: &Plan, cand: &Candidate) -> CostOptions {
    CostOptions {
        quant: plan.quant,
        compile: plan.compile,
        mtp_tokens: cand.mtp,
        draft_layers: plan.serving.speculative.as_ref().map_or(0, |s| s.draft_layers),
        shared_expert_tp: plan.serving.shared_expert_tp,
        word_embedding_tp: plan.serving.word_embedding_tp,
        with_vision: plan.workload.images.is_some(),
        causal_attention: plan.serving.causal_attention,
        moe_all_reduce: false,
        kernels: None,
    }
}

/// Evaluates one batch size of one candidate under one token budget.
pub trait Engine: Sync {
    fn probe(&self, ctx: &CandidateCtx, batch: u32, budget: u64) -> (Probe, ProbeStats);
}

/// `--engine compare`: the simulator decides feasibility; every row also carries the analytic
/// engine's figures at the same batch size.
#[derive(Debug, Default)]
pub struct CompareEngine(SimEngine);

impl Engine for CompareEngine {
    fn probe(&self, ctx: &CandidateCtx, batch: u32, budget: u64) -> (Probe, ProbeStats) {
        let (mut p, st) = self.0.probe(ctx, batch, budget);
        let (a, _) = AnalyticEngine.probe(ctx, batch, budget);
        p.row.analytic = Some(AnalyticFigures {
            ttft_ms: a.row.ttft_ms,
            tpot_ms: a.row.tpot_ms,
            throughput: a.row.throughput,
            feasible: a.stop.is_none(),
        });
        (p, st)
    }
}

/// Any engine, stoppable between probes by its caller (an embedder's Ctrl-C): once `stop` is
/// set, every probe returns at once as out of memory, so each batch search in flight ends at
/// its next probe rather than at the end of its candidate. A stopped run's report is
/// discarded; until then every probe is the inner engine's own.
pub struct Stoppable<'a> {
    pub inner: &'a dyn Engine,
    pub stop: &'a std::sync::atomic::AtomicBool,
}

impl Engine for Stoppable<'_> {
    fn probe(&self, ctx: &CandidateCtx, batch: u32, budget: u64) -> (Probe, ProbeStats) {
        if !self.stop.load(std::sync::atomic::Ordering::Relaxed) {
            return self.inner.probe(ctx, batch, budget);
        }
        let probe = Probe { row: crate::outcome::Row::probe_stub(batch), stop: Some(crate::outcome::StopReason::MemoryOom) };
        let stats = ProbeStats { total_gib: 0.0, weight_gib: 0.0, reserved_gib: 0.0, avail_gib: 0.0, latencies: [(0.0, f64::INFINITY); 2] };
        (probe, stats)
    }
}
