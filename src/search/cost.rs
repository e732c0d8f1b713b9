//! What serving costs (`--device-hour-cost`): every row and every point of the deployment
//! planes priced per million tokens of the whole deployment, and the cost frontier across the
//! run's devices.
//!
//! The arithmetic, in one place: a deployment of `n` devices at `p` USD per device-hour costs
//! `n × p` USD per hour ([`hourly_usd`]); serving `t` tokens/s it serves `3600 t` tokens per
//! hour, so a million tokens cost `n × p ÷ (3600 t) × 10⁶` USD ([`usd_per_million`]). The
//! throughput is the whole deployment's (every DP replica, every device of the row), as the
//! row reports it: output tokens/s for aggregated and decode rows, prompt tokens/s for prefill
//! rows. Tokens "in total" add the prompt tokens the same requests carry: output tokens/s ×
//! mean prompt ÷ mean output (image tokens count as prompt tokens).

use crate::outcome::{CostFrontier, CostInput, CostPoint, DeviceResult, FrontierPoint, PdRow, Phase, Row};
use crate::plan::{DeviceHourCost, Plan};

/// USD per hour of `devices` devices of profile `profile` (`None`: no price for the profile).
/// This is what a sizing answer prints as its hourly cost.
pub fn hourly_usd(devices: u32, profile: &str, cost: &DeviceHourCost) -> Option<f64> {
    cost.usd_per_device_hour(profile).map(|p| devices as f64 * p)
}

/// USD per million tokens of a deployment costing `usd_per_hour` that serves `tokens_per_s`
/// (`None` when it serves none, or the figure is not finite).
pub fn usd_per_million(usd_per_hour: f64, tokens_per_s: f64) -> Option<f64> {
    let v = usd_per_hour / (tokens_per_s * 3600.0) * 1e6;
    (tokens_per_s > 0.0 && v.is_finite()).then_some(v)
}

/// Prompt tokens per output token of the run's requests (mean prompt, images included, ÷ mean
/// output).
fn prompt_per_output(plan: &Plan) -> f64 {
    let prompt = plan.workload.input.mean_raw() + super::image_tokens(plan);
    prompt as f64 / plan.workload.output.mean_raw().max(1) as f64
}

/// The prices the run was given, as the report echoes them.
pub fn input(plan: &Plan) -> Option<CostInput> {
    let cost = plan.device_hour_cost.as_ref()?;
    let usd_per_device_hour = plan.devices.iter().filter_map(|d| Some((d.name.clone(), cost.usd_per_device_hour(&d.name)?))).collect();
    let source = match cost {
        DeviceHourCost::All(_) => "flag".to_string(),
        DeviceHourCost::PerProfile { file, .. } => file.clone(),
    };
    Some(CostInput { usd_per_device_hour, source })
}

/// Set a row's prices (see [`Row::usd_per_million_tokens`]).
pub fn price_row(plan: &Plan, cost: &DeviceHourCost, r: &mut Row) {
    let Some(hourly) = hourly_usd(r.num_devices, &r.device, cost) else { return };
    let (output, total) = match r.phase {
        Phase::Aggregated => (Some(r.throughput), r.throughput * (1.0 + prompt_per_output(plan))),
        Phase::Prefill => (None, r.throughput),
        Phase::Decode => (Some(r.throughput), r.throughput),
    };
    r.usd_per_million_output_tokens = output.and_then(|t| usd_per_million(hourly, t));
    r.usd_per_million_tokens = usd_per_million(hourly, total);
}

/// Set a plane point's prices: its devices, its output tokens/s and the prompts they carry.
fn price_point(plan: &Plan, cost: &DeviceHourCost, device: &str, p: &mut FrontierPoint) {
    let Some(hourly) = hourly_usd(p.devices, device, cost) else { return };
    p.usd_per_million_output_tokens = usd_per_million(hourly, p.tokens_per_s);
    p.usd_per_million_tokens = usd_per_million(hourly, p.tokens_per_s * (1.0 + prompt_per_output(plan)));
}

/// Set a P/D pairing's prices: serving 1 req/s takes `p_devices / p_qps` prefill and
/// `d_devices / d_qps` decode devices (the pairing's ratio, fractional instances), which serve
/// the mean output tokens per second.
pub fn price_pd_row(plan: &Plan, cost: &DeviceHourCost, device: &str, r: &mut PdRow) {
    let devices_per_rate = r.p_devices as f64 / r.p_qps + r.d_devices as f64 / r.d_qps;
    let Some(price) = cost.usd_per_device_hour(device) else { return };
    if !devices_per_rate.is_finite() {
        return;
    }
    let hourly = devices_per_rate * price;
    let output = plan.workload.output.mean_raw() as f64;
    r.usd_per_million_output_tokens = usd_per_million(hourly, output);
    r.usd_per_million_tokens = usd_per_million(hourly, output * (1.0 + prompt_per_output(plan)));
}

/// Price every row (probes and the ranked best), every P/D pairing and every plane point of a
/// device's result.
pub fn price_device(plan: &Plan, d: &mut DeviceResult) {
    let Some(cost) = &plan.device_hour_cost else { return };
    for p in &mut d.phases {
        p.rows.iter_mut().chain(p.best.iter_mut()).for_each(|r| price_row(plan, cost, r));
    }
    let device = d.device.clone();
    for r in d.pd_ratio.iter_mut().flat_map(|pd| pd.rows.iter_mut()) {
        price_pd_row(plan, cost, &device, r);
    }
    let name = d.device.clone();
    let compared = d.agg_vs_disagg.iter_mut().flat_map(|c| [&mut c.aggregated, &mut c.disaggregated]).flatten().map(|c| &mut c.point);
    d.frontier.iter_mut().flat_map(|f| f.points.iter_mut()).chain(compared).for_each(|p| price_point(plan, cost, &name, p));
}

/// The cost frontier over every device's plane (aggregation with `--device-hour-cost`).
pub fn cost_frontier(plan: &Plan, devices: &[DeviceResult]) -> Option<CostFrontier> {
    plan.device_hour_cost.as_ref()?;
    let mut points = Vec::new();
    for d in devices {
        for (i, p) in d.frontier.iter().flat_map(|f| f.points.iter().enumerate()) {
            let (Some(total), Some(output)) = (p.usd_per_million_tokens, p.usd_per_million_output_tokens) else { continue };
            points.push(CostPoint {
                device: d.device.clone(),
                point: i,
                kind: p.kind,
                label: p.label.clone(),
                devices: p.devices,
                usd_per_million_tokens: total,
                usd_per_million_output_tokens: output,
                tokens_per_s_per_user: p.tokens_per_s_per_user,
                ttft_ms: p.ttft_ms,
                tpot_ms: p.tpot_ms,
                meets_slo: p.meets_slo,
                on_frontier: false,
            });
        }
    }
    if points.is_empty() {
        return None;
    }
    mark_cost_frontier(&mut points);
    let cheapest = cheapest(&points);
    Some(CostFrontier { points, cheapest })
}

/// Mark the points no other point beats on both axes: cheaper per million tokens and faster
/// per user (ties: the first of equal points). Mutation that
/// `the_cost_frontier_is_the_lower_right_staircase` catches: `<=` for `<` below (an equally
/// cheap but slower point would join).
pub fn mark_cost_frontier(points: &mut [CostPoint]) {
    let mut order: Vec<usize> = (0..points.len()).collect();
    // Fastest per user first; among equals the cheapest first.
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&points[a], &points[b]);
        pb.tokens_per_s_per_user
            .total_cmp(&pa.tokens_per_s_per_user)
            .then(pa.usd_per_million_tokens.total_cmp(&pb.usd_per_million_tokens))
            .then(a.cmp(&b))
    });
    let mut best = f64::INFINITY;
    for i in order {
        let c = points[i].usd_per_million_tokens;
        points[i].on_frontier = c < best;
        best = best.min(c);
    }
}

/// The cheapest point within the SLO (ties: faster per user, then the first).
fn cheapest(points: &[CostPoint]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, p) in points.iter().enumerate().filter(|(_, p)| p.meets_slo) {
        let better = best.is_none_or(|b| {
            let q = &points[b];
            p.usd_per_million_tokens < q.usd_per_million_tokens
                || (p.usd_per_million_tokens == q.usd_per_million_tokens && p.tokens_per_s_per_user > q.tokens_per_s_per_user)
        });
        if better {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::DeploymentKind;

    #[test]
    fn prices_by_hand() {
        // 8 devices at 2.5 USD/h: 20 USD/h. 1000 tokens/s is 3.6 M tokens/h: 20 / 3.6 =
        // 5.5556 USD per million. Mutations: drop the 3600 (seconds, not hours) and this is
        // 20000 USD; multiply by the price per device only (no device count) and it is 0.694.
        let cost = DeviceHourCost::All(2.5);
        assert_eq!(hourly_usd(8, "H100_SXM", &cost), Some(20.0));
        let v = usd_per_million(20.0, 1000.0).unwrap();
        assert!((v - 5.555_555_555_6).abs() < 1e-9, "{v}");
        assert_eq!(usd_per_million(20.0, 0.0), None);
        assert_eq!(usd_per_million(20.0, f64::NAN), None);
        // A map prices each profile on its own; a profile it lacks has no price.
        let map = DeviceHourCost::PerProfile {
            file: "p.yaml".into(),
            prices: [("H100_SXM".to_string(), 2.0), ("B200".to_string(), 5.0)].into_iter().collect(),
        };
        assert_eq!(hourly_usd(4, "B200", &map), Some(20.0));
        assert_eq!(hourly_usd(4, "H200", &map), None);
    }

    fn cp(user: f64, usd: f64, meets: bool) -> CostPoint {
        CostPoint {
            device: "D".into(),
            point: 0,
            kind: DeploymentKind::Aggregated,
            label: String::new(),
            devices: 8,
            usd_per_million_tokens: usd,
            usd_per_million_output_tokens: usd * 2.0,
            tokens_per_s_per_user: user,
            ttft_ms: 0.0,
            tpot_ms: 1000.0 / user,
            meets_slo: meets,
            on_frontier: false,
        }
    }

    #[test]
    fn the_cost_frontier_is_the_lower_right_staircase() {
        // (10 tok/s/user, 1 USD), (20, 2), (15, 2.5: beaten by (20, 2)), a duplicate (20, 2)
        // and (30, 4) missing the SLO.
        let mut v = vec![cp(10.0, 1.0, true), cp(20.0, 2.0, true), cp(15.0, 2.5, true), cp(20.0, 2.0, false), cp(30.0, 4.0, false)];
        mark_cost_frontier(&mut v);
        assert_eq!(v.iter().map(|p| p.on_frontier).collect::<Vec<_>>(), [true, true, false, false, true]);
        assert_eq!(cheapest(&v), Some(0));
        v[0].meets_slo = false;
        assert_eq!(cheapest(&v), Some(1));
    }
}
