//! Sizing for a target load (`--target-request-rate R`, `--target-concurrency C`): the fewest
//! devices, up to `--num-devices` and in whole instances, whose deployment serves the target
//! within the SLO, checked by a simulation at the target. A plain run sizes aggregated
//! deployments (here); `--disagg` sizes P/D deployments and `--compare-disagg` both
//! ([`super::pd::sizing`]): a P/D answer must use fewer devices than the aggregated one, so a
//! tie goes to aggregated serving.
//!
//! A family is a layout the enumeration gives at several device counts with the same
//! instance (TP, MTP, DCP, MoE data parallelism, and EP either spanning the deployment or
//! fixed); its deployments are 1, 2, … instances (DP replicas) of it. Adding an instance never
//! hurts the SLO (the goodput property tests hold the simulator to it), so per family the
//! fewest instances that meet the target are found by bisection on the instance count, and a
//! family whose largest count not above the best answer so far misses the target is dropped
//! after one simulation. Each check is the search's own probe of that deployment: the open
//! loop at the target rate over every replica, or the closed loop of C clients spread over the
//! replicas (⌈C / DP⌉ each). Ties in devices go to the deployment farther inside its limits.
//! The answer's headroom is its goodput ([`super::goodput`]) from the target rate (a
//! concurrency target: from the rate its clients delivered, under Poisson arrivals).

use super::candidates::{enumerate, Candidate};
use super::engine::{CandidateCtx, Engine, SimEngine};
use super::goodput;
use super::pd;
use super::rate_estimate::boundary_rate;
use super::slo_check::{slo_load, OpenLoopDeployment};
use crate::hardware::DeviceProfile;
use crate::outcome::{DeploymentKind, Phase, Row, SizedRole, Sizing, SloPoint};
use crate::plan::{Mode, Plan, Target};
use crate::workload::arrival::ArrivalProcess;

/// Instances of one layout family, by device count.
struct Family {
    /// (devices, candidate), devices ascending.
    members: Vec<(u32, Candidate)>,
}

/// A deployment checked at the target.
struct Checked {
    cand: Candidate,
    row: Row,
    point: SloPoint,
    load: f64,
}

/// What a sizing run found on one device: the answer with its rows, or why there is none (the
/// most the devices serve, in words).
pub struct SizingOutcome {
    pub sizing: Option<Sizing>,
    /// The answer's searched rows: an aggregated answer's check at the target; a P/D
    /// answer's prefill and decode rows (each role's layout as its phase search found it).
    pub rows: Vec<Row>,
    pub unmet: Option<String>,
}

/// What a family's instances share: TP, MTP, DCP, MoE-DP and EP (0: spanning the deployment).
type FamilyKey = (u32, u32, u32, u32, u32);

/// The families of layouts on 1 … `--num-devices` devices, in the order the enumeration
/// first gives them.
fn families(plan: &Plan) -> Vec<Family> {
    let mut keyed: Vec<(FamilyKey, Family)> = Vec::new();
    for n in 1..=plan.num_devices {
        for c in enumerate(plan, n, Phase::Aggregated).0 {
            let p = &c.parallel;
            // A MoE layout's EP either spans the deployment (0 here) or is fixed; a dense
            // model's is always 1.
            let ep = if plan.model.is_moe() && p.ep == n { 0 } else { p.ep };
            let key = (p.tp, c.mtp, p.dcp, p.moe_dp, ep);
            match keyed.iter_mut().find(|(k, _)| *k == key) {
                Some((_, f)) => f.members.push((n, c)),
                None => keyed.push((key, Family { members: vec![(n, c)] })),
            }
        }
    }
    keyed.into_iter().map(|(_, f)| f).collect()
}

/// Simulate `cand` at the target with the search's own probe.
fn check(plan: &Plan, device: &DeviceProfile, engine: &SimEngine, cand: Candidate) -> Checked {
    let ctx = CandidateCtx::new(plan, device, cand, Phase::Aggregated);
    let budget = super::budgets(plan, device).0[0];
    let batch = match plan.capacity.target {
        Some(Target::Concurrency(c)) => u32::try_from(c.div_ceil(cand.parallel.dp as u64)).unwrap_or(u32::MAX),
        _ => super::open_loop_max_num_seqs(plan, device),
    };
    let (probe, _) = engine.probe(&ctx, batch, budget);
    let row = probe.row;
    let rate = match plan.capacity.target {
        Some(Target::RequestRate(r)) => r,
        _ => row.qps.unwrap_or(0.0),
    };
    let point = SloPoint { rate, ttft_ms: row.ttft_ms, tpot_ms: row.tpot_ms, meets_slo: row.feasible() };
    let limits = (plan.slo.ttft_limit(), plan.slo.tpot_limit());
    let load = if row.sim_error.is_some() { f64::INFINITY } else { slo_load(&point, limits) };
    Checked { cand, row, point, load }
}

/// The fewest devices of `family` that meet the target, at most `bound`: bisection on the
/// instance count, the largest count first.
fn smallest_in(family: &Family, bound: u32, checked: &mut dyn FnMut(Candidate) -> std::rc::Rc<Checked>) -> Option<std::rc::Rc<Checked>> {
    let members: Vec<&(u32, Candidate)> = family.members.iter().filter(|(n, _)| *n <= bound).collect();
    let (mut lo, mut hi) = (0usize, members.len().checked_sub(1)?);
    let top = checked(members[hi].1);
    if !top.point.meets_slo {
        return None;
    }
    let mut best = top;
    // Invariant: members[hi] meets; every member below `lo` is not known to.
    while lo < hi {
        let mid = (lo + hi) / 2;
        let c = checked(members[mid].1);
        if c.point.meets_slo {
            hi = mid;
            best = c;
        } else {
            lo = mid + 1;
        }
    }
    Some(best)
}

/// Which deployments a sizing run considers: (aggregated, P/D). `--disagg` sizes P/D
/// deployments only, `--compare-disagg` both, a plain run aggregated ones only.
fn kinds(plan: &Plan) -> (bool, bool) {
    match plan.mode {
        Mode::Aggregation => (true, plan.search.compare_disagg),
        _ => (false, true),
    }
}

/// The smallest aggregated deployment, the check one instance fewer and the simulations run.
struct AggregatedBest {
    best: std::rc::Rc<Checked>,
    one_fewer: Option<SloPoint>,
    sims: u32,
}

/// The fewest devices of any family that meet the target (ties: farther inside the limits).
fn smallest_aggregated(plan: &Plan, device: &DeviceProfile, engine: &SimEngine, families: &[Family]) -> Option<AggregatedBest> {
    let mut cache: Vec<std::rc::Rc<Checked>> = Vec::new();
    let mut sims = 0u32;
    let mut checked = |cand: Candidate| {
        if let Some(c) = cache.iter().find(|c| c.cand == cand) {
            return c.clone();
        }
        sims += 1;
        let c = std::rc::Rc::new(check(plan, device, engine, cand));
        cache.push(c.clone());
        c
    };
    let mut best: Option<std::rc::Rc<Checked>> = None;
    for f in families {
        let bound = best.as_ref().map_or(plan.num_devices, |b| b.cand.parallel.num_devices);
        if let Some(c) = smallest_in(f, bound, &mut checked) {
            let better = match &best {
                None => true,
                Some(b) => {
                    let (n, m) = (c.cand.parallel.num_devices, b.cand.parallel.num_devices);
                    n < m || (n == m && c.load < b.load)
                }
            };
            if better {
                best = Some(c);
            }
        }
    }
    let best = best?;
    let one_fewer = fewer(families, &best.cand).map(|c| checked(c).point);
    Some(AggregatedBest { best, one_fewer, sims })
}

/// Size the deployment on `device` for the plan's target: the smallest aggregated deployment
/// and, when the run plans P/D, the smallest P/D one with fewer devices ([`pd::sizing`]).
pub fn size(plan: &Plan, device: &DeviceProfile) -> SizingOutcome {
    let engine = SimEngine::default();
    let (aggregated, disaggregated) = kinds(plan);
    let families = if aggregated { families(plan) } else { Vec::new() };
    let agg = smallest_aggregated(plan, device, &engine, &families);
    let below = agg.as_ref().map(|a| a.best.cand.parallel.num_devices);
    let (pd_answer, pd_sims) = if disaggregated { pd::sizing::size(plan, device, &engine, below) } else { (None, 0) };
    if let Some(a) = pd_answer {
        return pd_outcome(plan, device, a, agg.map_or(0, |a| a.sims));
    }
    let Some(agg) = agg else {
        return SizingOutcome { sizing: None, rows: Vec::new(), unmet: Some(unmet(plan, device, &families, disaggregated)) };
    };
    let (headroom, curve, headroom_sims) = headroom(plan, device, &agg.best);
    let best = &agg.best;
    let p = best.cand.parallel;
    let sizing = Sizing {
        devices: p.num_devices,
        instances: p.dp,
        tp: p.tp,
        dp: p.dp,
        ep: p.ep,
        deployment: DeploymentKind::Aggregated,
        parallel: best.row.parallel.clone(),
        target_request_rate: target_rate(plan),
        target_concurrency: target_concurrency(plan),
        request_rate: best.point.rate,
        max_request_rate_within_slo: headroom,
        ttft_ms: best.row.ttft_ms.unwrap_or(f64::NAN),
        tpot_ms: best.row.tpot_ms.unwrap_or(f64::NAN),
        simulations: agg.sims + pd_sims + headroom_sims,
        one_fewer: agg.one_fewer,
        slo_curve: curve,
        prefill_instances: None,
        decode_instances: None,
        usd_per_hour: None,
    };
    SizingOutcome { sizing: Some(sizing), rows: vec![best.row.clone()], unmet: None }
}

fn target_rate(plan: &Plan) -> Option<f64> {
    match plan.capacity.target {
        Some(Target::RequestRate(r)) => Some(r),
        _ => None,
    }
}

fn target_concurrency(plan: &Plan) -> Option<u64> {
    match plan.capacity.target {
        Some(Target::Concurrency(c)) => Some(c),
        _ => None,
    }
}

/// One role of a P/D answer as the sizing reports it.
fn sized_role(instances: u32, per_instance: u32, row: &Row, one_fewer: Option<SloPoint>) -> SizedRole {
    SizedRole {
        instances,
        devices: instances * per_instance,
        devices_per_instance: per_instance,
        tp: row.layout.tp,
        dp: row.layout.dp,
        ep: row.layout.ep,
        parallel: row.parallel.clone(),
        batch_size: row.batch_size,
        one_fewer,
    }
}

/// The sizing answer of a P/D deployment (`agg_sims`: the aggregated checks run before it),
/// with its roles' searched rows as the phases' rows.
fn pd_outcome(plan: &Plan, device: &DeviceProfile, a: pd::sizing::PdAnswer, agg_sims: u32) -> SizingOutcome {
    let (headroom, curve, headroom_sims) = pd::sizing::headroom(plan, device, &a);
    let (row, limits) = (&a.row, (plan.slo.ttft_limit(), plan.slo.tpot_limit()));
    // The role whose one-fewer check misses by more binds.
    let one_fewer = match (a.fewer_prefill, a.fewer_decode) {
        (Some(p), Some(d)) => Some(if slo_load(&p, limits) >= slo_load(&d, limits) { p } else { d }),
        (p, d) => p.or(d),
    };
    let sizing = Sizing {
        devices: a.devices,
        instances: a.prefill_instances + a.decode_instances,
        tp: row.d_layout.tp,
        dp: row.d_layout.dp,
        ep: row.d_layout.ep,
        deployment: DeploymentKind::Disaggregated,
        parallel: format!(
            "{} P ({}) + {} D ({} batch {})",
            a.prefill_instances, row.p_parallel, a.decode_instances, row.d_parallel, row.d_batch_size
        ),
        target_request_rate: target_rate(plan),
        target_concurrency: target_concurrency(plan),
        request_rate: a.check.point.rate,
        max_request_rate_within_slo: headroom,
        ttft_ms: a.check.point.ttft_ms.unwrap_or(f64::NAN),
        tpot_ms: a.check.point.tpot_ms.unwrap_or(f64::NAN),
        simulations: agg_sims + a.simulations + headroom_sims,
        one_fewer,
        slo_curve: curve,
        prefill_instances: Some(sized_role(a.prefill_instances, row.p_devices, &a.prefill_row, a.fewer_prefill)),
        decode_instances: Some(sized_role(a.decode_instances, row.d_devices, &a.decode_row, a.fewer_decode)),
        usd_per_hour: None,
    };
    SizingOutcome { sizing: Some(sizing), rows: vec![a.prefill_row, a.decode_row], unmet: None }
}

/// The same family's deployment one instance smaller than `cand`, if the enumeration has it.
fn fewer(families: &[Family], cand: &Candidate) -> Option<Candidate> {
    let f = families.iter().find(|f| f.members.iter().any(|(_, c)| c == cand))?;
    let dp = cand.parallel.dp;
    f.members.iter().map(|(_, c)| *c).find(|c| c.parallel.dp + 1 == dp && c.parallel.tp == cand.parallel.tp)
}

/// The plan a deployment's headroom is searched under: the plan itself for a target rate;
/// for a concurrency target, Poisson arrivals at the rate its clients delivered.
fn open_plan(plan: &Plan, rate: f64) -> Option<Plan> {
    if plan.sim.arrival.is_open() {
        return None;
    }
    let mut open = plan.clone();
    open.sim.arrival = ArrivalProcess::Poisson { rate };
    Some(open)
}

/// The answer's goodput from the rate at the target, its simulations and their count.
fn headroom(plan: &Plan, device: &DeviceProfile, best: &Checked) -> (f64, Vec<SloPoint>, u32) {
    let r0 = best.point.rate;
    if r0.is_nan() || r0 <= 0.0 {
        return (0.0, Vec::new(), 0);
    }
    let open = open_plan(plan, r0);
    let plan = open.as_ref().unwrap_or(plan);
    let ctx = CandidateCtx::new(plan, device, best.cand, Phase::Aggregated);
    let deployment = OpenLoopDeployment::new(&ctx, best.cand.parallel.dp);
    let first = plan.sim.arrival.is_open().then_some(best.point).filter(|_| open.is_none());
    let mut sims = 0;
    let limits = deployment.limits();
    let hints = goodput::Hints { delivered: None, estimate: boundary_rate(&deployment, r0, limits) };
    let g = goodput::search(r0, first, hints, limits, &mut |r| {
        sims += 1;
        deployment.check(r)
    });
    (g.rate, g.points, sims)
}

/// Why nothing fits: the most any family serves on its largest deployment, in words.
fn unmet(plan: &Plan, device: &DeviceProfile, families: &[Family], disaggregated: bool) -> String {
    let target = match plan.capacity.target {
        Some(Target::RequestRate(r)) => format!("{r} req/s"),
        Some(Target::Concurrency(c)) => format!("{c} concurrent clients"),
        None => String::new(),
    };
    if families.is_empty() && disaggregated {
        return format!(
            "no P/D deployment of up to {} {} devices serves {target} within the SLO; raise --num-devices or relax the limits",
            plan.num_devices, device.name
        );
    }
    let kind = if disaggregated { "aggregated or P/D" } else { "aggregated" };

    let r0 = match plan.capacity.target {
        Some(Target::RequestRate(r)) => r,
        _ => 1.0,
    };
    let open = open_plan(plan, r0);
    let plan_open = open.as_ref().unwrap_or(plan);
    let mut most: Option<(f64, u32, String)> = None;
    for f in families {
        let Some(&(n, cand)) = f.members.last() else { continue };
        let ctx = CandidateCtx::new(plan_open, device, cand, Phase::Aggregated);
        let d = OpenLoopDeployment::new(&ctx, cand.parallel.dp);
        let hints = goodput::Hints { delivered: None, estimate: boundary_rate(&d, r0, d.limits()) };
        let g = goodput::search(r0, None, hints, d.limits(), &mut |r| d.check(r));
        if most.as_ref().is_none_or(|m| g.rate > m.0) {
            most = Some((g.rate, n, ctx.label.clone()));
        }
    }
    let most = match most {
        Some((rate, n, label)) if rate > 0.0 => {
            format!("the most it serves within the SLO is {rate:.3} req/s (Poisson), by {label} on {n} devices")
        }
        _ => "no layout meets the SLO at any rate searched (down to 1/64 of the target)".to_string(),
    };
    format!(
        "no {kind} deployment of up to {} {} devices serves {target} within the SLO: {most}; raise --num-devices or relax the limits",
        plan.num_devices, device.name
    )
}
