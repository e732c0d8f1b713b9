//! What serving costs, in the text report (`--device-hour-cost`, `--plan-replicas`): the
//! price cells of the best-rows table, the cost frontier across the devices, and a trace's
//! replica plan window by window.

use super::layout::{f2, fit, new_table};
use crate::outcome::{CostFrontier, ReplicaPlan, Report, Row};
use crate::plan::Plan;
use std::fmt::Write;

/// The price columns' headers.
pub(super) const PRICE_COLUMNS: [&str; 2] = ["USD/M tokens", "USD/M output"];

/// Whether a table of `rows` shows prices (the run was given `--device-hour-cost`).
pub(super) fn priced(rows: &[&Row]) -> bool {
    rows.iter().any(|r| r.usd_per_million_tokens.is_some())
}

/// A row's price cells: USD per million tokens and per million output tokens.
pub(super) fn price_cells(r: &Row) -> [String; 2] {
    [f3_or_dash(r.usd_per_million_tokens), f3_or_dash(r.usd_per_million_output_tokens)]
}

fn f3_or_dash(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.3}"))
}

/// The Overall Best's price line, when it has one.
pub(super) fn price_line(r: &Row) -> Option<String> {
    let total = r.usd_per_million_tokens?;
    let out = r.usd_per_million_output_tokens.map_or(String::new(), |o| format!(", {o:.3} USD per million output tokens"));
    Some(format!("Cost: {total:.3} USD per million tokens (prompt + output){out}"))
}

/// The cost frontier across the devices, slowest per user first, the cheapest within the SLO
/// marked.
pub(super) fn cost_frontier_block(report: &Report, f: &CostFrontier, w: Option<usize>) -> String {
    let mut s = String::new();
    let mut on: Vec<usize> = (0..f.points.len()).filter(|&i| f.points[i].on_frontier).collect();
    on.sort_by(|&a, &b| f.points[a].tokens_per_s_per_user.total_cmp(&f.points[b].tokens_per_s_per_user));
    if let Some(c) = f.cheapest.filter(|c| !f.points[*c].on_frontier) {
        on.push(c);
    }
    let prices: Vec<String> =
        report.inputs.device_hour_cost.iter().flat_map(|c| &c.usd_per_device_hour).map(|(d, p)| format!("{d} {p} USD")).collect();
    let _ = writeln!(
        s,
        "\nCost frontier (USD per million tokens, prompt + output, against tokens/s per user = 1000 / TPOT; per device-hour: {}): {} of {} deployments",
        prices.join(", "),
        on.len(),
        f.points.len()
    );
    let mut t = new_table(&[
        "device",
        "deployment",
        "configuration",
        "devices",
        "USD/M tokens",
        "USD/M output",
        "tok/s/user",
        "TTFT (ms)",
        "TPOT (ms)",
        "SLO met",
        "",
    ]);
    for i in on {
        let p = &f.points[i];
        t.add_row(vec![
            p.device.clone(),
            p.kind.label().to_string(),
            p.label.clone(),
            p.devices.to_string(),
            format!("{:.3}", p.usd_per_million_tokens),
            format!("{:.3}", p.usd_per_million_output_tokens),
            format!("{:.2}", p.tokens_per_s_per_user),
            format!("{:.2}", p.ttft_ms),
            format!("{:.2}", p.tpot_ms),
            if p.meets_slo { "yes" } else { "no" }.to_string(),
            if f.cheapest == Some(i) { "<- cheapest" } else { "" }.to_string(),
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    if f.cheapest.is_none() {
        s += "No deployment meets the SLO: none is the cheapest.\n";
    }
    s
}

/// A trace's replica plan: one line per window, then the totals against the peak fleet.
pub(super) fn replica_block(plan: &Plan, rp: &ReplicaPlan) -> String {
    let mut s = String::new();
    let stat = crate::quant::NamedEnum::name(plan.sim.slo_percentile);
    let _ = writeln!(
        s,
        "Replica plan ({} windows of {} s; instances of {}, {} device(s) each, at most {}; SLO statistic: {stat}):",
        rp.windows.len(),
        rp.window_s,
        rp.parallel,
        rp.devices_per_instance,
        rp.max_instances
    );
    if let Some(e) = &rp.error {
        let _ = writeln!(s, "The replica plan could not be simulated: {e}");
        return s;
    }
    let mut t = new_table(&["window", "start", "instances", "searched alone", "arrivals", "req/s", "TTFT (ms)", "TPOT (ms)", "SLO met"]);
    for (k, w) in rp.windows.iter().enumerate() {
        t.add_row(vec![
            (k + 1).to_string(),
            clock(w.start_s),
            w.instances.to_string(),
            w.searched_instances.to_string(),
            w.arrivals.to_string(),
            format!("{:.3}", w.request_rate),
            f2(w.ttft_ms),
            f2(w.tpot_ms),
            if w.slo_met { "yes" } else { "no" }.to_string(),
        ]);
    }
    s += &fit(t, plan.output.width, true);
    s.push('\n');
    let usd = match (rp.usd, rp.peak_usd) {
        (Some(a), Some(b)) => format!("; {a:.2} USD against {b:.2} USD"),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "Instance-hours: {:.2} against {:.2} for a fixed fleet of {} (the peak window's count) — {:.1} % fewer; device-hours {:.2} against {:.2}{usd}.",
        rp.instance_hours,
        rp.peak_instance_hours,
        rp.peak_instances,
        rp.saving * 100.0,
        rp.device_hours,
        rp.peak_device_hours
    );
    let _ = writeln!(
        s,
        "{} ({} simulations of single windows, {} of the whole trace).",
        if rp.slo_met {
            "Every window meets the SLO in the whole-trace simulation"
        } else {
            "Some windows miss the SLO even at the most instances"
        },
        rp.window_simulations,
        rp.trace_simulations
    );
    s
}

/// Seconds from the trace's start as h:mm:ss.
fn clock(s: f64) -> String {
    let t = s.round() as u64;
    format!("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
}
