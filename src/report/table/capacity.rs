//! The sizing answer of `--target-request-rate` / `--target-concurrency`, as the text report
//! prints it above the deployment's own Overall Best block: devices, instances and layout (a
//! P/D answer: each role's), the SLO statistics at the target, the headroom, and the check one
//! instance fewer (a P/D answer: of each role).

use crate::outcome::{SizedRole, Sizing, SloPoint};
use crate::plan::Plan;
use std::fmt::Write;

fn ms(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.2} ms"))
}

fn one_fewer_line(s: &Sizing, p: &SloPoint) -> String {
    let verdict = if p.meets_slo { "also meets the SLO (a layout of another family is smaller)" } else { "misses the SLO" };
    format!(
        "One instance fewer ({} devices): TTFT {}, TPOT {} at the target: {verdict}",
        s.devices - s.devices / s.instances.max(1),
        ms(p.ttft_ms),
        ms(p.tpot_ms)
    )
}

/// One role of a P/D answer: its instances, their devices and layout.
fn role_line(name: &str, r: &SizedRole) -> String {
    format!(
        "  {name}: {} instance(s) x {} devices = {} devices, TP={} DP={} EP={} ({}), up to {} sequences each",
        r.instances, r.devices_per_instance, r.devices, r.tp, r.dp, r.ep, r.parallel, r.batch_size
    )
}

/// A P/D answer's check with one instance fewer of a role.
fn role_fewer_line(s: &Sizing, role: &str, r: &SizedRole, p: &SloPoint) -> String {
    let verdict = if p.meets_slo { "also meets the SLO" } else { "misses the SLO" };
    format!(
        "One {role} instance fewer ({} devices): TTFT {}, TPOT {} at the target: {verdict}",
        s.devices - r.devices_per_instance,
        ms(p.ttft_ms),
        ms(p.tpot_ms)
    )
}

/// The sizing block.
pub(super) fn sizing_block(plan: &Plan, s: &Sizing) -> String {
    let pct = plan.sim.slo_percentile.to_string();
    let target = match (s.target_request_rate, s.target_concurrency) {
        (Some(r), _) => format!("{r} req/s ({})", plan.sim.arrival.describe()),
        (None, Some(c)) => format!("{c} concurrent clients (closed loop, {:.3} req/s delivered)", s.request_rate),
        _ => String::new(),
    };
    let mut out = format!("Sizing for {target}:\n");
    match (&s.prefill_instances, &s.decode_instances) {
        (Some(p), Some(d)) => {
            let _ = writeln!(out, "Smallest deployment within the SLO: {} devices, P/D: {}", s.devices, s.parallel);
            let _ = writeln!(out, "{}", role_line("Prefill", p));
            let _ = writeln!(out, "{}", role_line("Decode", d));
        }
        _ => {
            let _ = writeln!(
                out,
                "Smallest deployment within the SLO: {} devices, {} {} instance(s) of TP={} (EP={}): {}",
                s.devices,
                s.instances,
                s.deployment.label(),
                s.tp,
                s.ep,
                s.parallel
            );
        }
    }
    let _ = writeln!(out, "At the target ({pct}): TTFT {:.2} ms, TPOT {:.2} ms", s.ttft_ms, s.tpot_ms);
    let _ = writeln!(
        out,
        "Headroom: meets the SLO up to {:.3} req/s (Poisson, to {:.0} %), {:.2}x the target rate",
        s.max_request_rate_within_slo,
        crate::search::goodput::TOLERANCE * 100.0,
        if s.request_rate > 0.0 { s.max_request_rate_within_slo / s.request_rate } else { 0.0 }
    );
    if let Some(usd) = s.usd_per_hour {
        let _ = writeln!(out, "Cost: {usd:.2} USD per hour for the {} devices (--device-hour-cost)", s.devices);
    }
    match (&s.prefill_instances, &s.decode_instances) {
        (Some(p), Some(d)) => {
            for (role, r) in [("prefill", p), ("decode", d)] {
                if let Some(f) = &r.one_fewer {
                    let _ = writeln!(out, "{}", role_fewer_line(s, role, r, f));
                }
            }
        }
        _ => {
            if let Some(p) = &s.one_fewer {
                let _ = writeln!(out, "{}", one_fewer_line(s, p));
            }
        }
    }
    let _ = writeln!(out, "Simulations: {}", s.simulations);
    out
}
