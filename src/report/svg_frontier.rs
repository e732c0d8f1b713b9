//! The Pareto chart of the SVG output: every probed configuration as a point of output
//! tokens/s per device against tokens/s per user, aggregated (circles) and P/D (triangles),
//! filled within the SLO and hollow beyond it, the frontier as a line, the TPOT limit as a
//! dashed vertical line, the chosen deployment ringed. The legend has its own panel right of
//! the plot, so it never covers a point.

use crate::outcome::{AggVsDisagg, DeploymentKind, Frontier, FrontierPoint};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Height of one device's frontier chart (it spans the document's width, 1280).
pub const HEIGHT: u32 = 560;
/// Width of the legend panel.
const LEGEND_W: u32 = 340;

const AGG: RGBColor = RGBColor(31, 119, 180);
const PD: RGBColor = RGBColor(255, 127, 14);
const FRONT: RGBColor = RGBColor(70, 70, 70);
const SLO: RGBColor = RGBColor(214, 39, 40);
const CHOSEN: RGBColor = RGBColor(0, 0, 0);

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn err(e: &dyn std::fmt::Display) -> String {
    format!("cannot draw the chart: {e}")
}

fn color(k: DeploymentKind) -> RGBColor {
    match k {
        DeploymentKind::Aggregated => AGG,
        DeploymentKind::Disaggregated => PD,
    }
}

/// A point's marker style: its kind's colour, filled within the SLO, hollow beyond it.
fn style(kind: DeploymentKind, meets_slo: bool) -> ShapeStyle {
    let c = color(kind);
    if meets_slo {
        c.filled()
    } else {
        c.stroke_width(1)
    }
}

/// Aggregated points are circles, P/D points triangles (pixel offsets from the point;
/// plotters' own triangle marker is always filled).
const CIRCLE_R: i32 = 4;
const TRIANGLE: [(i32, i32); 4] = [(0, -7), (6, 4), (-6, 4), (0, -7)];

/// Draw one device's frontier chart into `area`.
pub fn draw(area: &Area, device: &str, f: &Frontier, cmp: Option<&AggVsDisagg>) -> Result<(), String> {
    let (w, _) = area.dim_in_pixel();
    let (plot, legend) = area.split_horizontally(w.saturating_sub(LEGEND_W));
    let slo = f.slo_tokens_per_s_per_user.filter(|x| x.is_finite());
    let x_max = f.points.iter().map(|p| p.tokens_per_s_per_user).chain(slo).fold(0.0f64, f64::max).max(1e-9);
    let y_max = f.points.iter().map(|p| p.tokens_per_s_per_device).fold(0.0f64, f64::max).max(1e-9);
    // Headroom above the highest point keeps the SLO line's label clear of the data.
    let (x1, y1) = (x_max * 1.06, y_max * 1.15);
    let mut chart = ChartBuilder::on(&plot)
        .caption(format!("{device}: Pareto frontier of every probed configuration"), ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..x1, 0.0..y1)
        .map_err(|e| err(&e))?;
    chart.configure_mesh().x_desc("tokens/s per user (1000 / TPOT)").y_desc("output tokens/s per device").draw().map_err(|e| err(&e))?;
    let mut front: Vec<(f64, f64)> =
        f.points.iter().filter(|p| p.on_frontier).map(|p| (p.tokens_per_s_per_user, p.tokens_per_s_per_device)).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    chart.draw_series(LineSeries::new(front, FRONT.stroke_width(2))).map_err(|e| err(&e))?;
    if let Some(x) = slo {
        chart.draw_series(DashedLineSeries::new([(x, 0.0), (x, y1)], 8, 5, SLO.stroke_width(2))).map_err(|e| err(&e))?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" TPOT limit ({:.0} ms)", 1000.0 / x),
                (x, y1 * 0.985),
                ("sans-serif", 13).into_font().color(&SLO),
            )))
            .map_err(|e| err(&e))?;
    }
    // P/D first, aggregated on top: aggregated points are fewer and smaller.
    let at = |p: &FrontierPoint| (p.tokens_per_s_per_user, p.tokens_per_s_per_device);
    let of = |k: DeploymentKind| f.points.iter().filter(move |p| p.kind == k);
    let pd = |meets: bool| of(DeploymentKind::Disaggregated).filter(move |p| p.meets_slo == meets);
    chart.draw_series(pd(true).map(|p| EmptyElement::at(at(p)) + Polygon::new(TRIANGLE.to_vec(), PD.filled()))).map_err(|e| err(&e))?;
    chart
        .draw_series(pd(false).map(|p| EmptyElement::at(at(p)) + PathElement::new(TRIANGLE.to_vec(), PD.stroke_width(1))))
        .map_err(|e| err(&e))?;
    chart
        .draw_series(of(DeploymentKind::Aggregated).map(|p| Circle::new(at(p), CIRCLE_R, style(p.kind, p.meets_slo))))
        .map_err(|e| err(&e))?;
    if let Some(c) = f.chosen.map(|i| &f.points[i]) {
        let at = (c.tokens_per_s_per_user, c.tokens_per_s_per_device);
        chart.draw_series(std::iter::once(Circle::new(at, 11, CHOSEN.stroke_width(2)))).map_err(|e| err(&e))?;
    }
    draw_legend(&legend, f, cmp)
}

/// Lines of at most `width` characters, split at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(l) if l.len() + 1 + word.len() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// The legend panel: one line per kind of mark, then the chosen deployment in words.
fn draw_legend(area: &Area, f: &Frontier, cmp: Option<&AggVsDisagg>) -> Result<(), String> {
    let font = ("sans-serif", 13).into_font();
    let (x0, mut y) = (14i32, 60i32);
    let has = |k: DeploymentKind, meets: bool| f.points.iter().any(|p| p.kind == k && p.meets_slo == meets);
    let text = |area: &Area, t: &str, y: i32, indent: i32| {
        area.draw(&Text::new(t.to_string(), (x0 + indent, y - 7), font.clone())).map_err(|e| err(&e))
    };
    for (k, meets, t) in [
        (DeploymentKind::Aggregated, true, "aggregated, within the SLO"),
        (DeploymentKind::Aggregated, false, "aggregated, beyond the SLO"),
        (DeploymentKind::Disaggregated, true, "P/D, within the SLO"),
        (DeploymentKind::Disaggregated, false, "P/D, beyond the SLO"),
    ] {
        if !has(k, meets) {
            continue;
        }
        let drawn = match k {
            DeploymentKind::Aggregated => area.draw(&Circle::new((x0 + 10, y), CIRCLE_R, style(k, meets))),
            DeploymentKind::Disaggregated if meets => {
                area.draw(&(EmptyElement::at((x0 + 10, y)) + Polygon::new(TRIANGLE.to_vec(), PD.filled())))
            }
            DeploymentKind::Disaggregated => {
                area.draw(&(EmptyElement::at((x0 + 10, y)) + PathElement::new(TRIANGLE.to_vec(), PD.stroke_width(1))))
            }
        };
        drawn.map_err(|e| err(&e))?;
        text(area, t, y, 30)?;
        y += 24;
    }
    area.draw(&PathElement::new(vec![(x0, y), (x0 + 20, y)], FRONT.stroke_width(2))).map_err(|e| err(&e))?;
    text(area, "Pareto frontier", y, 30)?;
    y += 24;
    if let Some(x) = f.slo_tokens_per_s_per_user.filter(|x| x.is_finite()) {
        area.draw(&PathElement::new(vec![(x0, y), (x0 + 8, y)], SLO.stroke_width(2))).map_err(|e| err(&e))?;
        area.draw(&PathElement::new(vec![(x0 + 12, y), (x0 + 20, y)], SLO.stroke_width(2))).map_err(|e| err(&e))?;
        text(area, &format!("TPOT limit: {x:.1} tokens/s per user"), y, 30)?;
        y += 24;
    }
    area.draw(&Circle::new((x0 + 10, y), 9, CHOSEN.stroke_width(2))).map_err(|e| err(&e))?;
    text(area, "chosen: most tokens/s per device", y, 30)?;
    text(area, "within the SLO", y + 16, 30)?;
    y += 44;
    let Some(c) = f.chosen.map(|i| &f.points[i]) else {
        return text(area, "nothing meets the SLO", y, 0);
    };
    let kind = c.kind.label();
    let mut lines = wrap(&format!("{kind}: {}", c.label), 44);
    lines.push(format!("{:.1} tokens/s per device, {:.1} per user", c.tokens_per_s_per_device, c.tokens_per_s_per_user));
    if let Some(sim) = cmp
        .and_then(|m| if c.kind == DeploymentKind::Disaggregated { m.disaggregated.as_ref() } else { m.aggregated.as_ref() })
        .and_then(|d| d.simulated_tokens_per_s_per_device)
        .filter(|_| c.kind == DeploymentKind::Disaggregated)
    {
        lines.push(format!("simulated as a system: {sim:.1} per device"));
    }
    for l in lines {
        text(area, &l, y, 0)?;
        y += 17;
    }
    Ok(())
}
