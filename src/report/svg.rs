//! `--plot-file PATH.svg`: the report's charts as one SVG — each device's Pareto frontier
//! ([`super::svg_frontier`]), throughput against concurrency and against latency for every
//! device and phase (one series per layout), and the chunk-budget studies.

use crate::outcome::Phase;
use crate::outcome::{Report, Row, StopReason};
use plotters::prelude::*;

type Series = Vec<(String, Vec<(f64, f64)>)>;

struct Chart {
    title: String,
    x_label: String,
    y_label: String,
    series: Series,
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn plotted(r: &Row) -> bool {
    matches!(r.stop_reason, None | Some(StopReason::TpotLimit) | Some(StopReason::TtftLimit))
        && r.throughput.is_finite()
        && r.throughput > 0.0
}

fn by_layout(rows: &[Row], x: impl Fn(&Row) -> Option<f64>) -> Series {
    let mut out: Series = Vec::new();
    for r in rows.iter().filter(|r| plotted(r)) {
        let Some(xv) = x(r).filter(|v| v.is_finite()) else { continue };
        match out.iter_mut().find(|(l, _)| *l == r.parallel) {
            Some((_, v)) => v.push((xv, r.throughput)),
            None => out.push((r.parallel.clone(), vec![(xv, r.throughput)])),
        }
    }
    for (_, v) in out.iter_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn charts(report: &Report) -> Vec<Chart> {
    let mut v = Vec::new();
    for d in &report.devices {
        for p in &d.phases {
            let what = match p.phase {
                Phase::Aggregated => "aggregated",
                Phase::Prefill => "prefill",
                Phase::Decode => "decode",
            };
            let unit = if p.phase == Phase::Prefill { "input tokens/s" } else { "output tokens/s" };
            v.push(Chart {
                title: format!("{} {what}: throughput vs concurrency", d.device),
                x_label: "concurrency".into(),
                y_label: unit.into(),
                series: by_layout(&p.rows, |r| Some(r.concurrency as f64)),
            });
            let (lat, name): (fn(&Row) -> Option<f64>, &str) =
                if p.phase == Phase::Prefill { (|r| r.ttft_ms, "TTFT (ms)") } else { (|r| r.tpot_ms, "TPOT (ms)") };
            v.push(Chart {
                title: format!("{} {what}: throughput vs {name}", d.device),
                x_label: name.into(),
                y_label: unit.into(),
                series: by_layout(&p.rows, lat),
            });
            for sw in &p.sweeps {
                let pts = |f: &dyn Fn(&crate::outcome::SweepPoint) -> Option<f64>| -> Vec<(f64, f64)> {
                    sw.points.iter().filter_map(|pt| f(pt).filter(|x| x.is_finite()).map(|y| (pt.budget as f64, y))).collect()
                };
                v.push(Chart {
                    title: format!("{} chunk-budget study, {} at batch {}: latency", d.device, sw.parallel, sw.batch_size),
                    x_label: "max_batched_tokens".into(),
                    y_label: "ms".into(),
                    series: vec![
                        ("TTFT mean".into(), pts(&|p| p.ttft_ms)),
                        ("TTFT p99".into(), pts(&|p| p.ttft_p99_ms)),
                        ("TPOT mean".into(), pts(&|p| p.tpot_ms)),
                        ("ITL p99".into(), pts(&|p| p.itl_p99_ms)),
                    ],
                });
                v.push(Chart {
                    title: format!("{} chunk-budget study, {}: throughput", d.device, sw.parallel),
                    x_label: "max_batched_tokens".into(),
                    y_label: "output tokens/s".into(),
                    series: vec![
                        (format!("at batch {}", sw.batch_size), pts(&|p| Some(p.throughput))),
                        ("best under the SLO".into(), pts(&|p| p.best_throughput)),
                    ],
                });
            }
        }
    }
    v.extend(super::capacity_chart::charts(report).into_iter().map(|c| Chart {
        title: c.title,
        x_label: c.x_label,
        y_label: c.y_label,
        series: c.series,
    }));
    v.retain(|c| c.series.iter().any(|(_, p)| !p.is_empty()));
    v
}

fn range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for x in vals {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
    (lo - pad, hi + pad)
}

fn draw(area: &DrawingArea<SVGBackend, plotters::coord::Shift>, c: &Chart) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot draw the chart: {e}");
    let (x0, x1) = range(c.series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)));
    let (y0, y1) = range(c.series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).chain(std::iter::once(0.0)));
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0.max(0.0)..y1)
        .map_err(|e| err(&e))?;
    chart.configure_mesh().x_desc(c.x_label.as_str()).y_desc(c.y_label.as_str()).draw().map_err(|e| err(&e))?;
    for (i, (label, pts)) in c.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| err(&e))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw().map_err(|e| err(&e))?;
    Ok(())
}

/// Render every chart of the report into one SVG document: each device's Pareto frontier
/// across the whole width first, then the other charts two per row.
pub fn render(report: &Report) -> Result<String, String> {
    let cs = charts(report);
    let fronts: Vec<_> =
        report.devices.iter().filter_map(|d| d.frontier.as_ref().filter(|f| !f.points.is_empty()).map(|f| (d, f))).collect();
    let cols = 2usize;
    let rows = cs.len().div_ceil(cols);
    let (w, h) = (640u32, 440u32);
    let top = super::svg_frontier::HEIGHT * fronts.len() as u32;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (w * cols as u32, (top + h * rows as u32).max(h))).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (upper, lower) = root.split_vertically(top);
        if !fronts.is_empty() {
            for ((d, f), a) in fronts.iter().zip(upper.split_evenly((fronts.len(), 1)).iter()) {
                super::svg_frontier::draw(a, &d.device, f, d.agg_vs_disagg.as_ref())?;
            }
        }
        if rows > 0 {
            for (c, a) in cs.iter().zip(lower.split_evenly((rows, cols)).iter()) {
                draw(a, c)?;
            }
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}
