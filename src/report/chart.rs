//! Terminal charts for a single device: throughput vs concurrency and throughput vs latency
//! (TPOT; TTFT for prefill), one curve per parallel layout, over every probe that fits in
//! memory (SLO violations included, so the curve shows where the limit cuts); and the Pareto
//! frontier of tokens/s per device against tokens/s per user.

use crate::outcome::Phase;
use crate::outcome::{DeploymentKind, Report, Row, StopReason};
use crate::plan::Plan;
use std::fmt::Write;
use std::io::IsTerminal;
use textplots::{Chart, ColorPlot, Plot, Shape};

/// Charts print for one device with fixed-length input, when forced or stdout is a terminal.
pub fn enabled(plan: &Plan) -> bool {
    let single = plan.devices.len() == 1 && !plan.workload.input.is_variable();
    match plan.output.plot {
        Some(forced) => forced && single,
        None => single && std::io::stdout().is_terminal(),
    }
}

const PALETTE: [(u8, u8, u8); 6] = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75)];

fn plotted(r: &Row) -> bool {
    matches!(r.stop_reason, None | Some(StopReason::TpotLimit) | Some(StopReason::TtftLimit))
        && r.throughput.is_finite()
        && r.throughput > 0.0
}

fn chart(title: &str, series: &[(String, Vec<(f32, f32)>)], color: bool) -> String {
    let pts: Vec<(f32, f32)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    if pts.is_empty() {
        return String::new();
    }
    let (mut xmin, mut xmax) = pts.iter().fold((f32::MAX, f32::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let pad = ((xmax - xmin) * 0.08).max(1e-3);
    // Concurrency and latency are never negative: do not pad the axis below zero.
    xmin = if xmin >= 0.0 { (xmin - pad).max(0.0) } else { xmin - pad };
    xmax += pad;
    let shapes: Vec<Shape> = series.iter().map(|(_, p)| Shape::Lines(p.as_slice())).collect();
    let mut c = Chart::new(200, 60, xmin, xmax);
    let mut c = &mut c;
    for (i, s) in shapes.iter().enumerate() {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        c = if color { c.linecolorplot(s, rgb::RGB8 { r, g, b }) } else { c.lineplot(s) };
    }
    c.axis();
    c.figures();
    let mut out = format!("\n{title}\n");
    let _ = write!(out, "{c}");
    for (i, (label, _)) in series.iter().enumerate() {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        if color {
            let _ = writeln!(out, "  \x1b[38;2;{r};{g};{b}m━━\x1b[0m {label}");
        } else {
            let _ = writeln!(out, "  curve {}: {label}", i + 1);
        }
    }
    out
}

fn series(rows: &[Row], x: impl Fn(&Row) -> Option<f64>) -> Vec<(String, Vec<(f32, f32)>)> {
    let mut out: Vec<(String, Vec<(f32, f32)>)> = Vec::new();
    for r in rows.iter().filter(|r| plotted(r)) {
        let Some(xv) = x(r).filter(|v| v.is_finite()) else { continue };
        let p = (xv as f32, r.throughput as f32);
        match out.iter_mut().find(|(l, _)| *l == r.parallel) {
            Some((_, v)) => v.push(p),
            None => out.push((r.parallel.clone(), vec![p])),
        }
    }
    for (_, v) in out.iter_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The chunk-budget study's charts: latencies and throughput against log2(budget).
fn sweep_charts(report: &Report, color: bool) -> String {
    let mut s = String::new();
    for d in &report.devices {
        for p in &d.phases {
            for sw in &p.sweeps {
                let x = |b: u64| (b as f64).log2() as f32;
                let line = |f: &dyn Fn(&crate::outcome::SweepPoint) -> Option<f64>| -> Vec<(f32, f32)> {
                    sw.points.iter().filter_map(|pt| f(pt).filter(|v| v.is_finite()).map(|v| (x(pt.budget), v as f32))).collect()
                };
                let title = format!("{}: chunk-budget study of {} (x = log2 max_batched_tokens)", d.device, sw.parallel);
                s += &chart(
                    &format!("{title}: TTFT (ms)"),
                    &[("TTFT mean".to_string(), line(&|p| p.ttft_ms)), ("TTFT p99".to_string(), line(&|p| p.ttft_p99_ms))],
                    color,
                );
                s += &chart(
                    &format!("{title}: inter-token latency (ms)"),
                    &[("TPOT mean".to_string(), line(&|p| p.tpot_ms)), ("ITL p99".to_string(), line(&|p| p.itl_p99_ms))],
                    color,
                );
            }
        }
    }
    s
}

/// A labelled series drawn as a line (`true`) or as points.
type Drawn = (String, Vec<(f32, f32)>, bool);

/// The deployment plane: aggregated and P/D points, the frontier and the TPOT limit.
fn frontier_chart(report: &Report, color: bool) -> String {
    let mut s = String::new();
    for d in &report.devices {
        let Some(f) = d.frontier.as_ref().filter(|f| !f.points.is_empty()) else { continue };
        let pts = |k: DeploymentKind| -> Vec<(f32, f32)> {
            f.points.iter().filter(|p| p.kind == k).map(|p| (p.tokens_per_s_per_user as f32, p.tokens_per_s_per_device as f32)).collect()
        };
        let mut front: Vec<(f32, f32)> =
            f.points.iter().filter(|p| p.on_frontier).map(|p| (p.tokens_per_s_per_user as f32, p.tokens_per_s_per_device as f32)).collect();
        front.sort_by(|a, b| a.0.total_cmp(&b.0));
        let top = f.points.iter().map(|p| p.tokens_per_s_per_device as f32).fold(0.0, f32::max);
        let (agg, pd) = (pts(DeploymentKind::Aggregated), pts(DeploymentKind::Disaggregated));
        let mut series: Vec<Drawn> = vec![("Pareto frontier".into(), front, true)];
        if let Some(x) = f.slo_tokens_per_s_per_user {
            series.push((format!("TPOT limit ({x:.1} tokens/s per user)"), vec![(x as f32, 0.0), (x as f32, top)], true));
        }
        series.push(("aggregated probes".into(), agg, false));
        if !pd.is_empty() {
            series.push(("P/D deployments".into(), pd, false));
        }
        let mut title = format!("{}: output tokens/s per device (y) vs tokens/s per user (x)", d.device);
        if let Some(c) = f.chosen.map(|i| &f.points[i]) {
            title += &format!("; chosen: {:.1} per device at {:.1} per user", c.tokens_per_s_per_device, c.tokens_per_s_per_user);
        }
        s += &points_chart(&title, &series, color);
    }
    s
}

/// Like [`chart`], with each series drawn as a line or as points.
fn points_chart(title: &str, series: &[Drawn], color: bool) -> String {
    let all: Vec<(f32, f32)> = series.iter().flat_map(|(_, p, _)| p.iter().copied()).collect();
    if all.is_empty() {
        return String::new();
    }
    let xmax = all.iter().fold(0.0f32, |a, p| a.max(p.0)) * 1.05 + 1e-3;
    let shapes: Vec<Shape> =
        series.iter().map(|(_, p, line)| if *line { Shape::Lines(p.as_slice()) } else { Shape::Points(p.as_slice()) }).collect();
    let mut c = Chart::new(200, 60, 0.0, xmax);
    let mut c = &mut c;
    for (i, sh) in shapes.iter().enumerate() {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        c = if color { c.linecolorplot(sh, rgb::RGB8 { r, g, b }) } else { c.lineplot(sh) };
    }
    c.axis();
    c.figures();
    let mut out = format!("\n{title}\n");
    let _ = write!(out, "{c}");
    for (i, (label, _, _)) in series.iter().enumerate() {
        let (r, g, b) = PALETTE[i % PALETTE.len()];
        if color {
            let _ = writeln!(out, "  \x1b[38;2;{r};{g};{b}m━━\x1b[0m {label}");
        } else {
            let _ = writeln!(out, "  series {}: {label}", i + 1);
        }
    }
    out
}

pub fn render(report: &Report) -> String {
    let color = std::io::stdout().is_terminal();
    let mut s = sweep_charts(report, color);
    for d in &report.devices {
        for p in &d.phases {
            let prefix = match p.phase {
                Phase::Aggregated => format!("{}_{}", d.device, report.inputs.model),
                Phase::Prefill => format!("{}_{}_disagg_prefill", d.device, report.inputs.model),
                Phase::Decode => format!("{}_{}_disagg_decode", d.device, report.inputs.model),
            };
            let unit = if p.phase == Phase::Prefill { "input token/s" } else { "token/s" };
            s += &chart(&format!("{prefix}: Throughput ({unit}) vs concurrency"), &series(&p.rows, |r| Some(r.concurrency as f64)), color);
            let (lat, name): (fn(&Row) -> Option<f64>, &str) =
                if p.phase == Phase::Prefill { (|r| r.ttft_ms, "TTFT (ms)") } else { (|r| r.tpot_ms, "TPOT (ms)") };
            s += &chart(&format!("{prefix}: Throughput ({unit}) vs {name}"), &series(&p.rows, lat), color);
        }
    }
    s += &frontier_chart(report, color);
    for c in super::capacity_chart::charts(report) {
        let series: Vec<(String, Vec<(f32, f32)>)> =
            c.series.iter().map(|(l, p)| (l.clone(), p.iter().map(|&(x, y)| (x as f32, y as f32)).collect())).collect();
        s += &chart(&format!("{}: {} (y) vs {} (x)", c.title, c.y_label, c.x_label), &series, color);
    }
    s
}
