//! The deployment plane: every probed configuration as a point of output tokens/s per device
//! against tokens/s per user (1000 / TPOT), the Pareto frontier among them, the deployment
//! chosen (the most tokens/s per device within the SLO), and with `--compare-disagg` the P/D
//! deployments on the same device budget and the aggregated-versus-disaggregated verdict.
//!
//! Per device, because that is what an operator buys: an aggregated layout always uses every
//! device, a P/D split often leaves some idle, and total tokens/s would favour whichever uses
//! more of them. Per user, because TPOT is what a user feels and what the SLO limits.

use crate::hardware::DeviceProfile;
use crate::outcome::{
    AggVsDisagg, ComparedDeployment, DeploymentKind, Frontier, FrontierPoint, PdDeployment, PdRow, PdVerification, Row, StopReason,
};
use crate::plan::{EngineKind, Plan};

/// Largest prefill or decode instance `--compare-disagg` tries: larger instances only add
/// data-parallel replicas inside one instance, which more instances of a smaller size give.
pub const MAX_INSTANCE_DEVICES: u32 = 64;

/// A probe is a point when it ran in memory and has a finite, positive TPOT and throughput
/// (over-the-limit probes are points too: they show where the SLO cuts).
fn plotted(r: &Row) -> bool {
    matches!(r.stop_reason, None | Some(StopReason::TpotLimit) | Some(StopReason::TtftLimit))
        && r.throughput.is_finite()
        && r.throughput > 0.0
        && r.tpot_ms.is_some_and(|t| t.is_finite() && t > 0.0)
}

/// Every aggregated probe as a point.
pub fn aggregated_points(rows: &[Row], ttft_limit: f64, tpot_limit: f64) -> Vec<FrontierPoint> {
    rows.iter()
        .enumerate()
        .filter(|(_, r)| plotted(r))
        .map(|(i, r)| {
            let tpot = r.tpot_ms.unwrap_or(f64::INFINITY);
            let ttft = r.ttft_ms.unwrap_or(0.0);
            FrontierPoint {
                kind: DeploymentKind::Aggregated,
                label: format!("{} batch {}", r.parallel, r.batch_size),
                devices: r.num_devices,
                tokens_per_s: r.throughput,
                tokens_per_s_per_device: r.throughput_per_device,
                tokens_per_s_per_user: 1000.0 / tpot,
                ttft_ms: ttft,
                tpot_ms: tpot,
                meets_slo: r.feasible() && tpot <= tpot_limit && ttft <= ttft_limit,
                on_frontier: false,
                row: Some(i),
                parallel: Some(r.parallel.clone()),
                batch_size: Some(r.batch_size),
                pd: None,
                usd_per_million_output_tokens: None,
                usd_per_million_tokens: None,
                max_request_rate_within_slo: r.max_request_rate_within_slo,
            }
        })
        .collect()
}

/// Mark the points no other point beats on both axes (ties: the first of equal points).
/// Mutation that `frontier_is_the_upper_right_staircase` catches: `>=` for `>` below (a point
/// equal in per-device throughput but slower per user would join the frontier).
pub fn mark_frontier(points: &mut [FrontierPoint]) {
    let mut order: Vec<usize> = (0..points.len()).collect();
    // Fastest per user first; among equals the most per device first.
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&points[a], &points[b]);
        pb.tokens_per_s_per_user
            .total_cmp(&pa.tokens_per_s_per_user)
            .then(pb.tokens_per_s_per_device.total_cmp(&pa.tokens_per_s_per_device))
            .then(a.cmp(&b))
    });
    let mut best = f64::NEG_INFINITY;
    for i in order {
        let y = points[i].tokens_per_s_per_device;
        points[i].on_frontier = y > best;
        best = best.max(y);
    }
}

/// The point with the most tokens/s per device within the SLO (ties: faster per user, then
/// the first).
pub fn choose(points: &[FrontierPoint]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, p) in points.iter().enumerate().filter(|(_, p)| p.meets_slo) {
        let better = best.is_none_or(|b| {
            let q = &points[b];
            p.tokens_per_s_per_device > q.tokens_per_s_per_device
                || (p.tokens_per_s_per_device == q.tokens_per_s_per_device && p.tokens_per_s_per_user > q.tokens_per_s_per_user)
        });
        if better {
            best = Some(i);
        }
    }
    best
}

/// The frontier of `points`, with the choice made by [`choose`].
pub fn frontier(plan: &Plan, mut points: Vec<FrontierPoint>) -> Frontier {
    mark_frontier(&mut points);
    let chosen = choose(&points);
    Frontier { points, chosen, slo_tokens_per_s_per_user: plan.slo.tpot_ms.filter(|t| t.is_finite() && *t > 0.0).map(|t| 1000.0 / t) }
}

/// Instance sizes `--compare-disagg` searches on `n` devices: powers of two that leave room for
/// an instance of the other kind, at most [`MAX_INSTANCE_DEVICES`].
pub fn instance_sizes(n: u32) -> Vec<u32> {
    (0..7).map(|k| 1u32 << k).filter(|&s| s < n && s <= MAX_INSTANCE_DEVICES).collect()
}

/// The split of `n` devices into P prefill instances of `sp` devices and D decode instances of
/// `sd` with the most requests per second per device used: (P, D, rate). For each D the best P
/// is one of the two integers around D × d_qps / p_qps, so this is linear in n / sd.
pub fn best_split(p_qps: f64, d_qps: f64, sp: u32, sd: u32, n: u32) -> Option<(u32, u32, f64)> {
    let mut best: Option<(u32, u32, f64, f64)> = None;
    for d in 1..=n / sd.max(1) {
        let max_p = (n - d * sd) / sp.max(1);
        let ideal = d as f64 * d_qps / p_qps;
        for p in [ideal.floor() as u32, ideal.ceil() as u32] {
            let p = p.clamp(1, max_p.max(1));
            if max_p == 0 || p * sp + d * sd > n {
                continue;
            }
            let rate = (p as f64 * p_qps).min(d as f64 * d_qps);
            let per_device = rate / (p * sp + d * sd) as f64;
            if best.is_none_or(|b| per_device > b.3 || (per_device == b.3 && rate > b.2)) {
                best = Some((p, d, rate, per_device));
            }
        }
    }
    best.map(|(p, d, rate, _)| (p, d, rate))
}

/// One phase's rows at one instance size.
pub struct SizedRows<'a> {
    pub devices: u32,
    pub rows: &'a [Row],
}

/// Every P/D deployment on `n` devices as a point, with the pairing behind it (KV transfer
/// time included). One point per decode probe: the prefill row and split that give it the
/// most tokens/s per device. Only each prefill layout's fastest row within the TTFT limit is
/// paired (a slower one only needs more prefill devices).
pub fn disaggregated_points(
    plan: &Plan,
    device: &DeviceProfile,
    prefill: &[SizedRows],
    decode: &[SizedRows],
    n: u32,
) -> Vec<(FrontierPoint, PdRow)> {
    let (ttft_limit, tpot_limit) = (plan.slo.ttft_limit(), plan.slo.tpot_limit());
    let output = plan.workload.output.mean_raw();
    // Per prefill size: each layout's fastest row within the TTFT limit once the KV transfer is added.
    let mut fast: Vec<(u32, &Row, f64, f64)> = Vec::new();
    for ps in prefill {
        let mut per_layout: Vec<(u32, &Row, f64, f64)> = Vec::new();
        for r in ps.rows.iter().filter(|r| r.feasible()) {
            let Some(ttft) = r.ttft_ms.filter(|t| t.is_finite() && *t > 0.0) else { continue };
            let transfer = super::kv_transfer_ms_for(plan, device, r.layout);
            if ttft + transfer > ttft_limit {
                continue;
            }
            let qps = crate::analytic::pd::prefill_qps(r.concurrency, ttft);
            match per_layout.iter_mut().find(|e| e.1.parallel == r.parallel) {
                Some(e) if crate::analytic::pd::prefill_qps(e.1.concurrency, e.1.ttft_ms.unwrap_or(f64::INFINITY)) >= qps => {}
                Some(e) => *e = (ps.devices, r, ttft, transfer),
                None => per_layout.push((ps.devices, r, ttft, transfer)),
            }
        }
        fast.extend(per_layout);
    }
    let mut out = Vec::new();
    for ds in decode {
        for d in ds.rows.iter().filter(|r| plotted(r)) {
            let tpot = d.tpot_ms.unwrap_or(f64::INFINITY);
            let mut best: Option<(FrontierPoint, PdRow)> = None;
            for &(sp, p, ttft, transfer) in fast.iter().filter(|f| f.0 + ds.devices <= n) {
                let mut row = super::pd::pair(p, ttft, d, tpot, output);
                row.p_transfer_ms = transfer;
                let Some((np, nd, rate)) = best_split(row.p_qps, row.d_qps, sp, ds.devices, n) else { continue };
                let devices = np * sp + nd * ds.devices;
                let tokens = rate * output as f64;
                if best.as_ref().is_some_and(|b| b.0.tokens_per_s_per_device >= tokens / devices as f64) {
                    continue;
                }
                let pd = PdDeployment {
                    prefill_parallel: p.parallel.clone(),
                    decode_parallel: d.parallel.clone(),
                    prefill_instances: np,
                    decode_instances: nd,
                    prefill_devices_per_instance: sp,
                    decode_devices_per_instance: ds.devices,
                    prefill_batch_size: p.batch_size,
                    decode_batch_size: d.batch_size,
                    request_rate: rate,
                    prefill_utilization: rate / (np as f64 * row.p_qps),
                    decode_utilization: rate / (nd as f64 * row.d_qps),
                };
                let point = FrontierPoint {
                    kind: DeploymentKind::Disaggregated,
                    label: format!("{np} P ({}) + {nd} D ({} batch {})", p.parallel, d.parallel, d.batch_size),
                    devices,
                    tokens_per_s: tokens,
                    tokens_per_s_per_device: tokens / devices as f64,
                    tokens_per_s_per_user: 1000.0 / tpot,
                    ttft_ms: ttft + transfer,
                    tpot_ms: tpot,
                    meets_slo: d.feasible() && tpot <= tpot_limit,
                    on_frontier: false,
                    row: None,
                    parallel: None,
                    batch_size: None,
                    pd: Some(pd),
                    usd_per_million_output_tokens: None,
                    usd_per_million_tokens: None,
                    max_request_rate_within_slo: None,
                };
                best = Some((point, row));
            }
            out.extend(best);
        }
    }
    out
}

/// The P/D plan's output tokens/s per device by simulation: the delivered rate when the
/// system holds the SLO at the planned rate, else the sustainable rate (none: it holds it at no
/// rate tried, or could not run).
fn simulated_per_device(v: &PdVerification, output: u64, devices: u32) -> Option<f64> {
    let rate = match &v.simulated {
        Some(s) if s.slo_met => Some(s.request_rate),
        Some(_) => Some(v.sustainable_rate.unwrap_or(0.0)),
        None => None,
    }?;
    Some(rate * output as f64 / devices as f64)
}

/// Compare the best aggregated point with the best P/D point (simulated as one system with a
/// simulator engine) and say which serves more per device, and why.
pub fn compare(plan: &Plan, device: &DeviceProfile, agg: Option<&FrontierPoint>, pd: Option<(&FrontierPoint, &PdRow)>) -> AggVsDisagg {
    let output = plan.workload.output.mean_raw();
    let simulated = plan.engine != EngineKind::Analytic;
    let verification = match pd {
        Some((p, row)) if simulated => {
            let d = p.pd.as_ref().expect("a disaggregated point has its deployment");
            Some(super::pd::verify::verify(plan, device, row, Some((d.prefill_instances, d.decode_instances)), None))
        }
        _ => None,
    };
    let aggregated = agg.map(|a| ComparedDeployment {
        point: a.clone(),
        simulated_tokens_per_s_per_device: simulated.then_some(a.tokens_per_s_per_device),
    });
    let disaggregated = pd.map(|(p, _)| ComparedDeployment {
        point: p.clone(),
        simulated_tokens_per_s_per_device: verification.as_ref().and_then(|v| simulated_per_device(v, output, p.devices)),
    });
    let (winner, reason) =
        verdict(aggregated.as_ref(), disaggregated.as_ref(), verification.as_ref(), plan.slo.ttft_ms.is_some_and(f64::is_finite));
    AggVsDisagg { aggregated, disaggregated, verification, winner, reason }
}

/// The figure a deployment is judged by: simulated when there is one, else planned.
fn judged(c: &ComparedDeployment) -> f64 {
    c.simulated_tokens_per_s_per_device.unwrap_or(c.point.tokens_per_s_per_device)
}

/// Which deployment serves more per device, and why in words.
fn verdict(
    agg: Option<&ComparedDeployment>,
    pd: Option<&ComparedDeployment>,
    v: Option<&PdVerification>,
    ttft_limited: bool,
) -> (Option<DeploymentKind>, String) {
    match (agg, pd) {
        (None, None) => (None, "neither an aggregated nor a P/D deployment meets the SLO".into()),
        (Some(_), None) => (Some(DeploymentKind::Aggregated), "no P/D deployment on these devices meets the SLO".into()),
        (None, Some(_)) => (Some(DeploymentKind::Disaggregated), "no aggregated layout meets the SLO".into()),
        (Some(a), Some(p)) => {
            let (ya, yp) = (judged(a), judged(p));
            let d = p.point.pd.as_ref().expect("a disaggregated point has its deployment");
            let mut why = Vec::new();
            // How the P/D split uses its devices at its planned rate.
            let idle = |u: f64| (1.0 - u).max(0.0) * 100.0;
            why.push(format!(
                "the P/D split runs {} prefill device(s) at {:.0} % and {} decode device(s) at {:.0} % of their capacity",
                d.prefill_instances * d.prefill_devices_per_instance,
                100.0 - idle(d.prefill_utilization),
                d.decode_instances * d.decode_devices_per_instance,
                100.0 - idle(d.decode_utilization)
            ));
            if let (Some(v), Some(sim)) = (v, p.simulated_tokens_per_s_per_device) {
                let planned = p.point.tokens_per_s_per_device;
                match &v.simulated {
                    Some(s) if s.slo_met => why.push(format!("simulated as one system it holds the SLO at the planned rate ({sim:.1} tokens/s per device)")),
                    Some(_) => why.push(format!(
                        "simulated as one system it misses the SLO at the planned rate and holds it up to {:.3} req/s ({:.0} % of plan): {sim:.1} instead of the planned {planned:.1} tokens/s per device",
                        v.sustainable_rate.unwrap_or(0.0),
                        100.0 * sim / planned.max(1e-12)
                    )),
                    None => {}
                }
            }
            why.push(format!(
                "TTFT {:.0} ms for P/D against {:.0} ms aggregated{}",
                p.point.ttft_ms,
                a.point.ttft_ms,
                if ttft_limited { "" } else { " (no --ttft-limits: neither is bounded)" }
            ));
            if p.point.devices < a.point.devices {
                why.push(format!("it uses {} of the {} devices", p.point.devices, a.point.devices));
            }
            let (winner, hi, lo) = if yp > ya { (DeploymentKind::Disaggregated, yp, ya) } else { (DeploymentKind::Aggregated, ya, yp) };
            let basis = if a.simulated_tokens_per_s_per_device.is_some() { "simulated" } else { "planned, not simulated" };
            let head = format!(
                "{} serves {:.1} tokens/s per device against {:.1} ({:+.0} %, {basis})",
                if winner == DeploymentKind::Aggregated { "aggregated" } else { "P/D" },
                hi,
                lo,
                100.0 * (hi - lo) / lo.max(1e-12)
            );
            (Some(winner), format!("{head}; {}", why.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(user: f64, device: f64, meets: bool) -> FrontierPoint {
        FrontierPoint {
            kind: DeploymentKind::Aggregated,
            label: String::new(),
            devices: 8,
            tokens_per_s: device * 8.0,
            tokens_per_s_per_device: device,
            tokens_per_s_per_user: user,
            ttft_ms: 0.0,
            tpot_ms: 1000.0 / user,
            meets_slo: meets,
            on_frontier: false,
            row: None,
            parallel: None,
            batch_size: None,
            pd: None,
            usd_per_million_output_tokens: None,
            usd_per_million_tokens: None,
            max_request_rate_within_slo: None,
        }
    }

    #[test]
    fn frontier_is_the_upper_right_staircase() {
        let mut v =
            vec![pt(10.0, 400.0, true), pt(20.0, 300.0, true), pt(15.0, 250.0, true), pt(20.0, 300.0, false), pt(30.0, 100.0, false)];
        mark_frontier(&mut v);
        let on: Vec<bool> = v.iter().map(|p| p.on_frontier).collect();
        // (15, 250) is beaten by (20, 300); the second (20, 300) duplicates the first.
        assert_eq!(on, [true, true, false, false, true]);
        // The choice: the most per device within the SLO; (30, 100) misses the SLO.
        assert_eq!(choose(&v), Some(0));
        v[0].meets_slo = false;
        assert_eq!(choose(&v), Some(1));
    }

    #[test]
    fn best_split_maximises_rate_per_device() {
        // One prefill instance serves 3 req/s, a decode instance 1: 1 P : 3 D on 4 devices is
        // fully used (0.75 req/s per device); on 8 devices 2 P : 6 D.
        assert_eq!(best_split(3.0, 1.0, 1, 1, 4), Some((1, 3, 3.0)));
        assert_eq!(best_split(3.0, 1.0, 1, 1, 8), Some((2, 6, 6.0)));
        // Instances of 4 devices on 8: one of each, bound by decode.
        assert_eq!(best_split(3.0, 1.0, 4, 4, 8), Some((1, 1, 1.0)));
        assert_eq!(best_split(3.0, 1.0, 4, 4, 7), None);
        // Mutation: drop the `ceil` candidate — 2 D at 1.4 req/s each are best fed by 3 P of
        // 1 req/s (2.8 req/s on 5 devices), not 2 (2 req/s on 4).
        assert_eq!(best_split(1.0, 1.4, 1, 1, 5), Some((3, 2, 2.8)));
    }

    #[test]
    fn instance_sizes_leave_room_for_the_other_kind() {
        assert_eq!(instance_sizes(8), vec![1, 2, 4]);
        assert_eq!(instance_sizes(2), vec![1]);
        assert_eq!(instance_sizes(1), Vec::<u32>::new());
        assert_eq!(instance_sizes(1024), vec![1, 2, 4, 8, 16, 32, 64]);
    }
}
