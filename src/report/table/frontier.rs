//! The deployment plane in aggregation: the Pareto frontier of tokens/s per device against
//! tokens/s per user, and with `--compare-disagg` the aggregated-versus-P/D verdict with the
//! P/D plan simulated as one system.

use super::layout::{f2, fit, new_table, py_float};
use super::verification::{planned_vs_simulated, verification_verdict};
use crate::outcome::{AggVsDisagg, DeploymentKind, DeviceResult, Frontier, FrontierPoint};
use crate::plan::Plan;
use std::fmt::Write;

/// The frontier's points, slowest per user first, the chosen one marked.
pub(super) fn frontier_block(f: &Frontier, w: Option<usize>) -> String {
    let mut on: Vec<(usize, &FrontierPoint)> = f.points.iter().enumerate().filter(|(_, p)| p.on_frontier).collect();
    on.sort_by(|a, b| a.1.tokens_per_s_per_user.total_cmp(&b.1.tokens_per_s_per_user));
    let mut s = String::new();
    let slo = f.slo_tokens_per_s_per_user.map_or(String::new(), |x| format!("; the TPOT limit is {x:.2} tokens/s per user"));
    let _ = writeln!(
        s,
        "Pareto frontier (output tokens/s per device against tokens/s per user = 1000 / TPOT): {} of {} configurations{slo}",
        on.len(),
        f.points.len()
    );
    // The chosen deployment is listed even when it is off the frontier.
    if let Some(c) = f.chosen.filter(|c| !f.points[*c].on_frontier) {
        on.push((c, &f.points[c]));
    }
    // Goodput (open-loop aggregated points): the column is there when any point has it, so a
    // run where nothing meets the SLO at the offered rate still says how much each takes.
    let goodput = on.iter().any(|(_, p)| p.max_request_rate_within_slo.is_some());
    let mut header = vec!["deployment", "configuration", "devices", "tok/s/user", "tok/s/device", "TTFT (ms)", "TPOT (ms)", "SLO met"];
    if goodput {
        header.push("max req/s in SLO");
    }
    header.push("");
    let mut t = new_table(&header);
    for (i, p) in on {
        let mut cells = vec![
            p.kind.label().to_string(),
            p.label.clone(),
            p.devices.to_string(),
            format!("{:.2}", p.tokens_per_s_per_user),
            format!("{:.2}", p.tokens_per_s_per_device),
            format!("{:.2}", p.ttft_ms),
            format!("{:.2}", p.tpot_ms),
            if p.meets_slo { "yes" } else { "no" }.to_string(),
        ];
        if goodput {
            cells.push(p.max_request_rate_within_slo.map_or("-".to_string(), |r| format!("{r:.3}")));
        }
        cells.push(if f.chosen == Some(i) { "<- chosen" } else { "" }.to_string());
        t.add_row(cells);
    }
    s += &fit(t, w, true);
    s.push('\n');
    if f.chosen.is_some_and(|c| !f.points[c].on_frontier) {
        s += "The chosen deployment is off the frontier: the points that beat it on both axes miss the TTFT limit, or are P/D plans that fell short when simulated as one system (below).\n";
    }
    if f.chosen.is_none() && f.points.is_empty() {
        s += "No configuration runs (each layout's reason is above): nothing is chosen.\n";
    } else if f.chosen.is_none() {
        s += "No configuration meets the SLO: nothing is chosen.\n";
        let most = f.points.iter().filter_map(|p| Some((p.max_request_rate_within_slo?, p))).max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((rate, p)) = most.filter(|m| m.0 > 0.0) {
            let _ = writeln!(s, "The most any of them serves within the SLO is {rate:.3} req/s: {} ({} devices).", p.label, p.devices);
        }
    }
    s
}

/// The best of each kind, the winner per device and why, and the P/D plan's simulation.
pub(super) fn comparison_block(plan: &Plan, dev: &DeviceResult, c: &AggVsDisagg) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Aggregated vs disaggregated on {} x {} (TTFT limit {} ms, TPOT limit {} ms):",
        plan.num_devices,
        dev.device,
        py_float(plan.slo.ttft_ms),
        py_float(plan.slo.tpot_ms)
    );
    let mut t = new_table(&[
        "deployment",
        "configuration",
        "devices",
        "tok/s/device (search)",
        "tok/s/device (simulated)",
        "tok/s total",
        "TTFT (ms)",
        "TPOT (ms)",
    ]);
    for d in [&c.aggregated, &c.disaggregated].into_iter().flatten() {
        let p = &d.point;
        t.add_row(vec![
            p.kind.label().to_string(),
            p.label.clone(),
            p.devices.to_string(),
            format!("{:.2}", p.tokens_per_s_per_device),
            f2(d.simulated_tokens_per_s_per_device),
            format!("{:.2}", p.tokens_per_s),
            format!("{:.2}", p.ttft_ms),
            format!("{:.2}", p.tpot_ms),
        ]);
    }
    s += &fit(t, plan.output.width, true);
    s.push('\n');
    let _ = writeln!(s, "Search: aggregated rows are simulated; P/D rows pair simulated prefill and decode instances by the P/D formulas.");
    let winner = c.winner.map_or("none", DeploymentKind::label);
    let _ = writeln!(s, "Chosen per device: {winner} — {}", c.reason);
    if let (Some(v), Some(d)) = (&c.verification, &c.disaggregated) {
        let pd = d.point.pd.as_ref().expect("a disaggregated point has its deployment");
        let _ = writeln!(
            s,
            "The P/D plan simulated as one system ({} P x {} devices + {} D x {} devices, Poisson arrivals at {:.3} req/s, {} requests):",
            v.prefill_instances,
            pd.prefill_devices_per_instance,
            v.decode_instances,
            pd.decode_devices_per_instance,
            v.arrival_rate,
            v.requests
        );
        match (&v.simulated, &v.simulation_error) {
            (Some(sim), _) => {
                s += &planned_vs_simulated(v, sim, plan.output.width);
                s += &verification_verdict(plan, v, sim);
            }
            (None, e) => {
                let _ =
                    writeln!(s, "The simulation could not run: {}", e.as_ref().map_or_else(|| "unknown error".into(), |e| e.to_string()));
            }
        }
    }
    s
}
