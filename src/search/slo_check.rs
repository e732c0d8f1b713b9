//! Does a deployment meet the SLO at an offered load? The one question goodput and sizing
//! both ask, answered by a simulation of the candidate as the search probes open loops (its
//! running cap, its first token budget, every replica routed), with the plan's arrivals
//! offered at another rate ([`ArrivalProcess::at_rate`]: the same seeded requests, sooner or
//! later) and, for sizing, another number of replicas.
//!
//! [`OpenLoopDeployment::check`] gives an [`SloPoint`]: the `--slo-percentile` statistics of
//! TTFT and TPOT under the plan's TPOT definition, and whether both are within the limits.
//! [`slo_point`] reads the same from any simulated report, so the closed loop of a
//! concurrency target is judged alike.
//!
//! [`ArrivalProcess::at_rate`]: crate::workload::arrival::ArrivalProcess::at_rate

use super::engine::sim::request_factory;
use super::engine::CandidateCtx;
use crate::outcome::SloPoint;
use crate::plan::TpotDefinition;
use crate::sim::{simulate, SimError, SimReport};

/// Steps one check may simulate (about two seconds of the event loop): a check that needs
/// more counts as missing the SLO, and the searches say the answer is a lower bound.
pub const CHECK_MAX_STEPS: u64 = 2_000_000;

/// The SLO statistics of a simulated report at `rate` under `plan`'s percentile and TPOT
/// definition, judged against the limits `(ttft_ms, tpot_ms)`.
pub fn slo_point(ctx: &CandidateCtx, rep: &SimReport, rate: f64, limits: (f64, f64)) -> SloPoint {
    let pct = ctx.plan.sim.slo_percentile;
    let ttft = rep.latency.ttft.pick(pct);
    let tpot = match ctx.plan.serving.tpot_definition {
        TpotDefinition::InterToken => rep.latency.tpot_inter_token.pick(pct),
        TpotDefinition::Amortized => rep.latency.tpot_amortized.pick(pct),
    };
    SloPoint { rate, ttft_ms: Some(ttft), tpot_ms: Some(tpot), meets_slo: ttft <= limits.0 && tpot <= limits.1 }
}

/// A point for a simulation that could not finish: it does not meet the SLO.
pub fn failed_point(rate: f64) -> SloPoint {
    SloPoint { rate, ttft_ms: None, tpot_ms: None, meets_slo: false }
}

/// How far a point is from its limits: the larger of statistic / limit over the finite
/// limits (1 at the boundary; infinite for a failed simulation, 0 without limits).
pub fn slo_load(p: &SloPoint, limits: (f64, f64)) -> f64 {
    match (p.ttft_ms, p.tpot_ms) {
        (Some(ttft), Some(tpot)) => {
            let share = |x: f64, limit: f64| if limit.is_finite() && limit > 0.0 { x / limit } else { 0.0 };
            share(ttft, limits.0).max(share(tpot, limits.1))
        }
        _ => f64::INFINITY,
    }
}

/// A candidate served by `instances` replicas under open-loop arrivals, as the search runs
/// it (the running cap and token budget of its open-loop probe).
pub struct OpenLoopDeployment<'c, 'a> {
    pub ctx: &'c CandidateCtx<'a>,
    /// Replicas the arrivals are routed over (the candidate's DP, or a sizing's count).
    pub instances: u32,
    pub max_num_seqs: u32,
    pub budget: u64,
}

impl<'c, 'a> OpenLoopDeployment<'c, 'a> {
    /// The candidate as its open-loop probe runs it, over `instances` replicas.
    pub fn new(ctx: &'c CandidateCtx<'a>, instances: u32) -> Self {
        let max_num_seqs = super::open_loop_max_num_seqs(ctx.plan, ctx.device);
        let budget = super::budgets(ctx.plan, ctx.device).0[0];
        OpenLoopDeployment { ctx, instances, max_num_seqs, budget }
    }

    /// The phase's limits `(ttft_ms, tpot_ms)`.
    pub fn limits(&self) -> (f64, f64) {
        let s = self.ctx.sim_setup();
        (s.ttft_limit_ms, s.tpot_limit_ms)
    }

    /// Simulate the deployment with the plan's arrivals offered at `rate` req/s.
    pub fn simulate(&self, rate: f64) -> Result<SimReport, SimError> {
        self.run(rate, false)
    }

    /// [`Self::simulate`]; with `latencies_only` the run stops once every measured request
    /// has finished ([`crate::sim::RunParams::stop_once_measured`]): the SLO statistics are
    /// the full run's, the rest of the report is not.
    fn run(&self, rate: f64, latencies_only: bool) -> Result<SimReport, SimError> {
        let setup = self.ctx.sim_setup();
        let (mut cfg, _) = setup.config(self.max_num_seqs, self.budget);
        cfg.instances = self.instances;
        cfg.run.max_steps = CHECK_MAX_STEPS;
        cfg.run.stop_once_measured = latencies_only;
        let plan = self.ctx.plan;
        let factory = request_factory(plan, plan.sim.arrival.at_rate(rate), plan.output_spread(self.ctx.device));
        match setup.kv_oversubscribed(&cfg) {
            Some(e) => Err(e),
            None => simulate(&cfg, &setup.cost, factory),
        }
    }

    /// Whether the deployment meets the SLO at `rate` req/s, with its statistics. The run
    /// ends with its last measured request (the drain after it changes no latency), so the
    /// step cap counts the steps up to then.
    pub fn check(&self, rate: f64) -> SloPoint {
        match self.run(rate, true) {
            Ok(rep) => slo_point(self.ctx, &rep, rate, self.limits()),
            Err(_) => failed_point(rate),
        }
    }
}
