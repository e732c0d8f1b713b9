//! The capacity charts, terminal and SVG alike: the SLO statistic (TTFT and TPOT, each with a
//! finite limit) against the offered request rate for the best deployments, from the
//! simulations their goodput searches ran (`--goodput`) and the sizing answer's headroom
//! search, with the limit as a line. Where a curve crosses the limit is the deployment's
//! highest rate within the SLO.

use crate::outcome::{Phase, Report, SloPoint};

/// Deployments charted per device (the most goodput first).
const CHARTED: usize = 4;

/// One chart: its title, axis labels and series of (rate, ms) points.
pub(super) struct RateChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

/// The curves to chart on one device: the best rows' searches, then the sizing answer's.
fn curves(d: &crate::outcome::DeviceResult) -> Vec<(String, &[SloPoint])> {
    let mut v: Vec<(String, &[SloPoint])> = Vec::new();
    if let Some(s) = d.sizing.as_ref().filter(|s| !s.slo_curve.is_empty()) {
        v.push((format!("sizing: {} ({} devices)", s.parallel, s.devices), s.slo_curve.as_slice()));
    }
    for p in d.phases.iter().filter(|p| p.phase == Phase::Aggregated) {
        // The layouts that serve the most within the SLO, whether or not they meet it at the
        // offered rate.
        let mut rows: Vec<&crate::outcome::Row> = p.rows.iter().filter(|r| !r.slo_curve.is_empty()).collect();
        rows.sort_by(|a, b| b.max_request_rate_within_slo.unwrap_or(0.0).total_cmp(&a.max_request_rate_within_slo.unwrap_or(0.0)));
        for r in rows.into_iter().take(CHARTED) {
            v.push((r.parallel.clone(), r.slo_curve.as_slice()));
        }
    }
    v
}

/// A statistic of a point.
type Statistic = fn(&SloPoint) -> Option<f64>;

/// Every capacity chart of the report, one per device and limited statistic.
pub(super) fn charts(report: &Report) -> Vec<RateChart> {
    let mut out = Vec::new();
    let stats: [(&str, Option<f64>, Statistic); 2] =
        [("TTFT", report.inputs.ttft_limit_ms, |p| p.ttft_ms), ("TPOT", report.inputs.tpot_limit_ms, |p| p.tpot_ms)];
    for d in &report.devices {
        let curves = curves(d);
        if curves.is_empty() {
            continue;
        }
        for (name, limit, stat) in stats {
            let Some(limit) = limit.filter(|l| l.is_finite()) else { continue };
            let mut series: Vec<(String, Vec<(f64, f64)>)> = curves
                .iter()
                .map(|(label, pts)| {
                    (label.clone(), pts.iter().filter_map(|p| stat(p).filter(|y| y.is_finite()).map(|y| (p.rate, y))).collect())
                })
                .collect();
            let rates = curves.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.rate));
            let (lo, hi) = rates.fold((f64::MAX, 0.0f64), |(a, b), r| (a.min(r), b.max(r)));
            series.push((format!("{name} limit ({limit} ms)"), vec![(lo, limit), (hi, limit)]));
            out.push(RateChart {
                title: format!("{}: {name} (SLO statistic) by offered rate", d.device),
                x_label: "offered request rate (req/s)".into(),
                y_label: format!("{name} (ms)"),
                series,
            });
        }
    }
    out
}
