//! The P/D-ratio result block: the Overall Best Configuration of a prefill/decode pairing
//! (ratio, balanced QPS, each side's layout, the instance split within `--num-devices`), the
//! top-N PD Ratio table and the simulated verification of the plan.

use super::header::block_header;
use super::layout::{banner, fit, new_table, rule};
use super::phase::no_result;
use super::verification::verification_block;
use crate::outcome::{DeviceResult, PdRatioResult, Phase, Report};
use crate::plan::Plan;
use std::fmt::Write;

fn price(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.4}"))
}

pub(super) fn pd_block(plan: &Plan, report: &Report, dev: &DeviceResult, pd: &PdRatioResult) -> String {
    const W: usize = 120;
    let mut s = block_header(plan, report, dev, W);
    let Some(b) = pd.rows.first() else {
        s += super::phase::no_rows_heading(plan);
        for p in &dev.phases {
            if p.best.is_empty() {
                let what = if p.phase == Phase::Prefill { "prefill" } else { "decode" };
                let _ = writeln!(s, "No feasible {what} instance:");
                s += &no_result(plan, p);
            }
        }
        let _ = writeln!(s, "{}", banner(W));
        return s;
    };
    s += "Overall Best Configuration:\n";
    let _ = writeln!(s, "PD Ratio: {:.2} (P Instance:D Instance)", b.pd_ratio);
    let _ = writeln!(s, "Balanced QPS: {:.2} req/s", b.balanced_qps);
    let _ = writeln!(
        s,
        "Prefill QPS: {:.2} req/s (TTFT: {:.2} ms, Parallel: {}, Batch: {}, Concurrency: {})",
        b.p_qps, b.ttft_ms, b.p_parallel, b.p_batch_size, b.p_concurrency
    );
    let _ = writeln!(
        s,
        "Decode QPS: {:.2} req/s (TPOT: {:.2} ms, Parallel: {}, Batch: {}, Concurrency: {})",
        b.d_qps, b.tpot_ms, b.d_parallel, b.d_batch_size, b.d_concurrency
    );
    if let (Some(total), Some(output)) = (b.usd_per_million_tokens, b.usd_per_million_output_tokens) {
        let _ = writeln!(
            s,
            "Cost: {total:.4} USD per million tokens, {output:.4} per million output tokens (devices in the P:D ratio, --device-hour-cost)"
        );
    }
    match (&pd.chosen, pd.total_devices) {
        (Some(c), Some(n)) => {
            let _ = writeln!(s, "P Instances: {} ({} devices)", c.prefill_instances, c.prefill_devices);
            let _ = writeln!(s, "D Instances: {} ({} devices)", c.decode_instances, c.decode_devices);
            let _ = writeln!(s, "Devices used: {} of {n}", c.prefill_devices + c.decode_devices);
            let _ = writeln!(s, "Split chosen by {}: {}", c.source.name(), c.reason);
        }
        (None, Some(n)) => {
            let _ = writeln!(s, "No P/D instance split fits in {n} devices.");
        }
        _ => {}
    }
    let _ = writeln!(s, "{}", rule(W));
    let rows: Vec<_> = pd.rows.iter().take(plan.output.top.unwrap_or(usize::MAX)).collect();
    let _ = writeln!(s, "Top {} PD Ratio Configurations:", rows.len());
    let priced = rows.iter().any(|r| r.usd_per_million_tokens.is_some());
    let mut header = vec![
        "Top",
        "PD Ratio",
        "Balanced QPS (req/s)",
        "P QPS (req/s)",
        "D QPS (req/s)",
        "TTFT (ms)",
        "TPOT (ms)",
        "P Parallel",
        "D Parallel",
        "P Devices/Instance",
        "D Devices/Instance",
        "P Batch Size",
        "D Batch Size",
        "P Concurrency",
        "D Concurrency",
    ];
    if priced {
        header.extend(["USD/M tokens", "USD/M output tokens"]);
    }
    let mut t = new_table(&header);
    for (i, r) in rows.iter().enumerate() {
        t.add_row(
            vec![
                (i + 1).to_string(),
                format!("{:.2}", r.pd_ratio),
                format!("{:.2}", r.balanced_qps),
                format!("{:.2}", r.p_qps),
                format!("{:.2}", r.d_qps),
                format!("{:.2}", r.ttft_ms),
                format!("{:.2}", r.tpot_ms),
                r.p_parallel.clone(),
                r.d_parallel.clone(),
                r.p_devices.to_string(),
                r.d_devices.to_string(),
                r.p_batch_size.to_string(),
                r.d_batch_size.to_string(),
                r.p_concurrency.to_string(),
                r.d_concurrency.to_string(),
            ]
            .into_iter()
            .chain(priced.then(|| [price(r.usd_per_million_tokens), price(r.usd_per_million_output_tokens)]).into_iter().flatten())
            .collect::<Vec<_>>(),
        );
    }
    s += &fit(t, plan.output.width, true);
    s.push('\n');
    if let Some(v) = &pd.verification {
        let _ = writeln!(s, "{}", rule(W));
        s += &verification_block(plan, b, v, pd.total_devices);
    }
    let _ = writeln!(s, "{}", banner(W));
    s
}
