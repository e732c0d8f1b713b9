//! Sizing with P/D deployments: with `--disagg` or `--compare-disagg`, a target load
//! (`--target-request-rate`, `--target-concurrency`) is also served by prefill instances of one
//! layout and decode instances of another; this finds the fewest devices of such a deployment
//! that meets the SLO at the target, by simulating the P/D system at the target
//! ([`super::verify::simulate_offered`]).
//!
//! Each role's layouts are searched as the P/D phase searches do (closed loops, the fastest
//! row within its limit per layout) on the instance sizes `--compare-disagg` tries. Per pairing
//! of a prefill and a decode layout, the P/D formulas' per-instance rates give a starting
//! split for the target (each role's share of the rate, rounded up; rounded down where that
//! does not fit the devices left). The formulas' rates are closed-loop figures at the limits,
//! about the most an instance serves within them, so the split rounded down is taken as the
//! pairing's lower bound: pairings are tried from the smallest bound up, and one whose bound
//! is above the best answer so far is not simulated. The simulation then
//! adjusts the split: while it misses, it adds an instance (decode when only TPOT misses; else
//! whichever of one more prefill or one more decode instance lands nearer the limits), and once
//! it meets, it removes instances of either role while the target is still met. More instances
//! of a role never hurt, so the answer is a split from which one instance fewer of either role
//! misses. Ties in devices go to the split farther inside its limits.

use super::verify::{simulate_offered, verify_requests, Offered};
use super::{pair, PdRow};
use crate::analytic::pd::{decode_qps, prefill_qps};
use crate::hardware::DeviceProfile;
use crate::outcome::{Phase, Row, SloPoint};
use crate::plan::{Plan, Target};
use crate::search::candidates::enumerate;
use crate::search::engine::{CandidateCtx, Engine};
use crate::search::frontier::instance_sizes;
use crate::search::goodput;
use crate::search::slo_check::{failed_point, slo_load};
use crate::workload::arrival::ArrivalProcess;
use rayon::prelude::*;

/// One role's layout as sizing pairs it: its instance size and fastest row within its limit
/// (prefill: with the KV transfer added to TTFT).
struct RoleChoice {
    devices: u32,
    row: Row,
    /// Prefill: TTFT, ms (without the transfer); decode: TPOT, ms.
    latency_ms: f64,
    transfer_ms: f64,
}

/// A P/D deployment checked at the target.
#[derive(Clone)]
pub struct PdCheck {
    pub point: SloPoint,
    /// Requests per second the run delivered.
    pub delivered: f64,
    pub load: f64,
}

/// The smallest P/D deployment that serves the target.
pub struct PdAnswer {
    /// The pairing (layouts, batch sizes, formula rates).
    pub row: PdRow,
    pub prefill_row: Row,
    pub decode_row: Row,
    pub prefill_instances: u32,
    pub decode_instances: u32,
    pub devices: u32,
    pub check: PdCheck,
    /// The checks at the target with one prefill, or one decode, instance fewer (`None`: one
    /// instance of that role).
    pub fewer_prefill: Option<SloPoint>,
    pub fewer_decode: Option<SloPoint>,
    /// P/D simulations the sizing ran (the phase searches not included).
    pub simulations: u32,
}

/// The plan the roles' layouts are searched under: P/D phase searches are steady-state closed
/// loops, whatever the sizing run's arrivals.
fn phase_plan(plan: &Plan) -> Plan {
    let mut p = plan.clone();
    p.sim.arrival = ArrivalProcess::Closed;
    p.sim.num_requests = None;
    p.capacity = Default::default();
    p
}

/// Each layout of `phase` on the instance sizes below `--num-devices` with its fastest row
/// within the phase's limit. A dense model's layouts with data parallelism inside one
/// instance are left out: they are that many instances of the smaller layout.
fn role_choices(plan: &Plan, device: &DeviceProfile, engine: &dyn Engine, phase: Phase) -> Vec<RoleChoice> {
    let searched = phase_plan(plan);
    let (ttft_limit, tpot_limit) = (plan.slo.ttft_limit(), plan.slo.tpot_limit());
    let output = plan.workload.output.mean_raw();
    let cands: Vec<(u32, crate::search::Candidate)> = instance_sizes(plan.num_devices)
        .into_iter()
        .flat_map(|s| enumerate(&searched, s, phase).0.into_iter().map(move |c| (s, c)))
        .filter(|(_, c)| plan.model.is_moe() || c.parallel.dp == 1)
        .collect();
    let rows: Vec<(u32, Vec<Row>)> = cands
        .par_iter()
        .map(|&(s, c)| (s, crate::search::search_candidate(engine, &CandidateCtx::new(&searched, device, c, phase)).0))
        .collect();
    let mut out = Vec::new();
    for (devices, rows) in rows {
        let mut best: Option<(f64, RoleChoice)> = None;
        for r in rows.iter().filter(|r| r.feasible() && r.sim_error.is_none()) {
            let (qps, latency_ms, transfer_ms) = match phase {
                Phase::Prefill => {
                    let Some(ttft) = r.ttft_ms.filter(|t| t.is_finite() && *t > 0.0) else { continue };
                    let transfer = crate::search::kv_transfer_ms_for(plan, device, r.layout);
                    if ttft + transfer > ttft_limit {
                        continue;
                    }
                    (prefill_qps(r.concurrency, ttft), ttft, transfer)
                }
                _ => {
                    let Some(tpot) = r.tpot_ms.filter(|t| t.is_finite() && *t > 0.0 && *t <= tpot_limit) else { continue };
                    (decode_qps(r.concurrency, tpot, output), tpot, 0.0)
                }
            };
            if qps.is_finite() && qps > 0.0 && best.as_ref().is_none_or(|b| qps > b.0) {
                best = Some((qps, RoleChoice { devices, row: r.clone(), latency_ms, transfer_ms }));
            }
        }
        out.extend(best.map(|b| b.1));
    }
    out
}

/// What the target offers a P/D system, and the request rate the formulas plan for.
fn offered(plan: &Plan, row: &PdRow) -> (Offered, f64) {
    match plan.capacity.target {
        Some(Target::Concurrency(c)) => {
            // A closed loop of C clients completes about C per request lifetime.
            let life_s = (row.ttft_ms + row.p_transfer_ms + plan.workload.output.mean_raw() as f64 * row.tpot_ms) / 1e3;
            (Offered::Closed(c), c as f64 / life_s.max(1e-9))
        }
        Some(Target::RequestRate(r)) => (Offered::Open(plan.sim.arrival.at_rate(r)), r),
        None => (Offered::Open(plan.sim.arrival.clone()), plan.sim.arrival.mean_rate().unwrap_or(0.0)),
    }
}

/// The P/D simulations of one sizing run, each split simulated once.
struct Checks<'a> {
    plan: &'a Plan,
    device: &'a DeviceProfile,
    seen: Vec<(usize, u32, u32, PdCheck)>,
}

impl Checks<'_> {
    /// Pairing `i` (`row`) with `p` prefill and `d` decode instances at the target.
    fn check(&mut self, i: usize, row: &PdRow, p: u32, d: u32) -> PdCheck {
        if let Some(c) = self.seen.iter().find(|s| (s.0, s.1, s.2) == (i, p, d)) {
            return c.3.clone();
        }
        let (load, rate) = offered(self.plan, row);
        let open_rate = match &load {
            Offered::Open(_) => rate,
            Offered::Closed(_) => 0.0,
        };
        let requests = verify_requests(self.plan, row, rate);
        let c = match simulate_offered(self.plan, self.device, row, (p, d), load, requests) {
            Ok(s) => {
                let pct = self.plan.sim.slo_percentile;
                let shown = if open_rate > 0.0 { open_rate } else { s.request_rate };
                let point =
                    SloPoint { rate: shown, ttft_ms: Some(s.ttft.pick(pct)), tpot_ms: Some(s.tpot.pick(pct)), meets_slo: s.slo_met };
                let load = slo_load(&point, (self.plan.slo.ttft_limit(), self.plan.slo.tpot_limit()));
                PdCheck { point, delivered: s.request_rate, load }
            }
            Err(_) => PdCheck { point: failed_point(open_rate), delivered: 0.0, load: f64::INFINITY },
        };
        self.seen.push((i, p, d, c.clone()));
        c
    }
}

/// The fewest devices of pairing `i` that meet the target from `start`, at most `cap`
/// devices (`sizes`: devices per prefill and per decode instance).
fn fit(checks: &mut Checks, i: usize, row: &PdRow, start: (u32, u32), sizes: (u32, u32), cap: u32) -> Option<(u32, u32)> {
    let devices = |(p, d): (u32, u32)| p * sizes.0 + d * sizes.1;
    let (ttft_limit, tpot_limit) = (checks.plan.slo.ttft_limit(), checks.plan.slo.tpot_limit());
    let mut at = start;
    loop {
        if devices(at) > cap {
            return None;
        }
        let c = checks.check(i, row, at.0, at.1);
        if c.point.meets_slo {
            break;
        }
        let ttft_ok = c.point.ttft_ms.is_some_and(|t| t <= ttft_limit);
        let tpot_ok = c.point.tpot_ms.is_some_and(|t| t <= tpot_limit);
        at = if ttft_ok && !tpot_ok {
            (at.0, at.1 + 1)
        } else {
            // TTFT also waits on the decode side: try one more instance of each role.
            let tries: Vec<(u32, u32)> = [(at.0 + 1, at.1), (at.0, at.1 + 1)].into_iter().filter(|&s| devices(s) <= cap).collect();
            let checked: Vec<((u32, u32), PdCheck)> = tries.iter().map(|&s| (s, checks.check(i, row, s.0, s.1))).collect();
            let pick = checked.iter().min_by(|a, b| {
                b.1.point.meets_slo.cmp(&a.1.point.meets_slo).then(a.1.load.total_cmp(&b.1.load)).then(devices(a.0).cmp(&devices(b.0)))
            })?;
            pick.0
        };
    }
    // It meets: drop instances, the larger instances first, while it still does.
    let order = if sizes.0 >= sizes.1 { [0, 1] } else { [1, 0] };
    loop {
        let mut moved = false;
        for role in order {
            let fewer = if role == 0 { (at.0.saturating_sub(1), at.1) } else { (at.0, at.1.saturating_sub(1)) };
            if fewer.0 >= 1 && fewer.1 >= 1 && checks.check(i, row, fewer.0, fewer.1).point.meets_slo {
                at = fewer;
                moved = true;
            }
        }
        if !moved {
            return Some(at);
        }
    }
}

/// A pairing's instances for the target by the formulas: each role's rate share rounded up
/// (where the search starts) and down (its lower bound: each role at or above its formula
/// rate).
#[derive(Clone, Copy)]
struct Start {
    ceil: (u32, u32),
    floor: (u32, u32),
}

impl Start {
    /// The rounded-up split, rounded down role by role (the larger instances first) while it
    /// needs more than `cap` devices.
    fn within(self, sizes: (u32, u32), cap: u32) -> (u32, u32) {
        let devices = |(p, d): (u32, u32)| p.saturating_mul(sizes.0).saturating_add(d.saturating_mul(sizes.1));
        let mut at = self.ceil;
        for role in if sizes.0 >= sizes.1 { [0, 1] } else { [1, 0] } {
            if devices(at) > cap {
                at = if role == 0 { (self.floor.0, at.1) } else { (at.0, self.floor.1) };
            }
        }
        at
    }
}

/// The pairings of every prefill with every decode layout, with each one's formula split for
/// the target and its lower bound in devices, smallest first.
fn pairings(plan: &Plan, prefill: &[RoleChoice], decode: &[RoleChoice]) -> Vec<(PdRow, usize, usize, Start, u32)> {
    let output = plan.workload.output.mean_raw();
    let mut v = Vec::new();
    for (pi, p) in prefill.iter().enumerate() {
        for (di, d) in decode.iter().enumerate() {
            let mut row = pair(&p.row, p.latency_ms, &d.row, d.latency_ms, output);
            row.p_transfer_ms = p.transfer_ms;
            let rate = offered(plan, &row).1;
            let n = |qps: f64, round: fn(f64) -> f64| (round(rate / qps).max(1.0)).min(u32::MAX as f64) as u32;
            let start = Start {
                ceil: (n(row.p_qps, f64::ceil), n(row.d_qps, f64::ceil)),
                floor: (n(row.p_qps, f64::floor), n(row.d_qps, f64::floor)),
            };
            let devices = start.floor.0.saturating_mul(p.devices).saturating_add(start.floor.1.saturating_mul(d.devices));
            v.push((row, pi, di, start, devices));
        }
    }
    v.sort_by_key(|e| e.4);
    v
}

/// The smallest P/D deployment on `device` for the plan's target, using fewer than `below`
/// devices (an aggregated answer's count: a tie goes to aggregated serving), if any; and the
/// P/D simulations run.
pub fn size(plan: &Plan, device: &DeviceProfile, engine: &dyn Engine, below: Option<u32>) -> (Option<PdAnswer>, u32) {
    let prefill = role_choices(plan, device, engine, Phase::Prefill);
    let decode = role_choices(plan, device, engine, Phase::Decode);
    let mut checks = Checks { plan, device, seen: Vec::new() };
    let limit = below.map_or(plan.num_devices, |b| plan.num_devices.min(b.saturating_sub(1)));
    let mut best: Option<(usize, (u32, u32), u32, f64)> = None;
    let all = pairings(plan, &prefill, &decode);
    for (i, (row, pi, di, start, lower)) in all.iter().enumerate() {
        let cap = best.as_ref().map_or(limit, |b| b.2);
        if *lower > cap {
            break;
        }
        let sizes = (prefill[*pi].devices, decode[*di].devices);
        let Some(split) = fit(&mut checks, i, row, start.within(sizes, cap), sizes, cap) else { continue };
        let devices = split.0 * sizes.0 + split.1 * sizes.1;
        let load = checks.check(i, row, split.0, split.1).load;
        if best.as_ref().is_none_or(|b| devices < b.2 || (devices == b.2 && load < b.3)) {
            best = Some((i, split, devices, load));
        }
    }
    let Some((i, (p, d), devices, _)) = best else { return (None, checks.seen.len() as u32) };
    let (row, pi, di, _, _) = &all[i];
    let check = checks.check(i, row, p, d);
    let fewer_prefill = (p > 1).then(|| checks.check(i, row, p - 1, d).point);
    let fewer_decode = (d > 1).then(|| checks.check(i, row, p, d - 1).point);
    let answer = PdAnswer {
        row: row.clone(),
        prefill_row: prefill[*pi].row.clone(),
        decode_row: decode[*di].row.clone(),
        prefill_instances: p,
        decode_instances: d,
        devices,
        check,
        fewer_prefill,
        fewer_decode,
        simulations: checks.seen.len() as u32,
    };
    (Some(answer), checks.seen.len() as u32)
}

/// The answer's headroom: its goodput from the rate at the target (a concurrency target:
/// from the rate its clients delivered, under Poisson arrivals), its simulations and their
/// count.
pub fn headroom(plan: &Plan, device: &DeviceProfile, a: &PdAnswer) -> (f64, Vec<SloPoint>, u32) {
    let open = plan.sim.arrival.is_open();
    let r0 = if open { a.check.point.rate } else { a.check.delivered };
    if r0.is_nan() || r0 <= 0.0 {
        return (0.0, Vec::new(), 0);
    }
    let limits = (plan.slo.ttft_limit(), plan.slo.tpot_limit());
    let pct = plan.sim.slo_percentile;
    let mut sims = 0;
    let first = open.then_some(a.check.point);
    let g = goodput::search(r0, first, goodput::Hints::default(), limits, &mut |r| {
        sims += 1;
        let arrival = if open { plan.sim.arrival.at_rate(r) } else { ArrivalProcess::Poisson { rate: r } };
        let requests = verify_requests(plan, &a.row, r);
        match simulate_offered(plan, device, &a.row, (a.prefill_instances, a.decode_instances), Offered::Open(arrival), requests) {
            Ok(s) => SloPoint { rate: r, ttft_ms: Some(s.ttft.pick(pct)), tpot_ms: Some(s.tpot.pick(pct)), meets_slo: s.slo_met },
            Err(_) => failed_point(r),
        }
    });
    (g.rate, g.points, sims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_rounds_down_the_larger_instances_first_to_fit_the_devices_left() {
        // Formula shares 2.3 prefill and 1.02 decode instances: ceil (3, 2), floor (2, 1).
        let s = Start { ceil: (3, 2), floor: (2, 1) };
        // Everything fits: the rounded-up split.
        assert_eq!(s.within((1, 1), 16), (3, 2));
        // 5 devices of 1-device instances do not fit 4: prefill (listed first on a tie) goes
        // down first; 3 then still does not fit, so decode goes down too.
        assert_eq!(s.within((1, 1), 4), (2, 2));
        assert_eq!(s.within((1, 1), 3), (2, 1));
        // Decode instances of 4 devices are the larger: they go down first.
        // Mutation: always round the prefill side first, and (2, 1) comes out, a prefill
        // instance fewer than fits.
        assert_eq!(s.within((1, 4), 7), (3, 1));
        // Below the lower bound nothing more is taken away: the search then finds it too big.
        assert_eq!(s.within((1, 1), 1), (2, 1));
    }
}
