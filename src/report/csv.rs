//! `--output csv`: every probed row of every device and phase, one line each; in aggregation
//! each row's place on the deployment plane (tokens/s per user, on the Pareto frontier, chosen),
//! and with `--compare-disagg` one line per P/D deployment (phase `disaggregated`).
//! Codes (`phase`, `stop_reason`, `serving_engine`, `pd_split_source`) are the JSON ones.
//! With `--device-hour-cost` every line ends with [`PRICE_COLUMNS`] (without it the columns are
//! not there, so a reader of the plain report sees the same columns as before).

use crate::outcome::{DeviceResult, FrontierPoint, Report};

pub const COLUMNS: &[&str] = &[
    "device",
    "phase",
    "parallel",
    "tp",
    "dp",
    "ep",
    "moe_tp",
    "moe_dp",
    "dcp",
    "mtp",
    "batch_size",
    "concurrency",
    "num_devices",
    "ttft_ms",
    "tpot_ms",
    "tpot_amortized_ms",
    "tpot_inter_token_ms",
    "throughput_tok_s",
    "throughput_per_device_tok_s",
    "qps",
    "weight_gib",
    "kv_cache_gib",
    "activation_gib",
    "avail_gib",
    "max_batched_tokens",
    "prefill_num_chunks",
    "effective_input_length",
    "feasible",
    "stop_reason",
    "best_rank",
    "serving_engine",
    "max_num_seqs",
    "pd_split",
    "pd_split_source",
    "calibration",
    "tokens_per_s_per_user",
    "on_frontier",
    "chosen",
];

/// Columns added after [`COLUMNS`] when the run was given `--device-hour-cost`.
pub const PRICE_COLUMNS: &[&str] = &["usd_per_million_output_tokens", "usd_per_million_tokens"];

/// Appended after [`COLUMNS`] when any row carries it (`--goodput`): the highest request rate
/// within the SLO.
pub const GOODPUT_COLUMN: &str = "max_request_rate_within_slo";

/// Whether any row carries its goodput (the CSV then has [`GOODPUT_COLUMN`]).
fn has_goodput(report: &Report) -> bool {
    report.devices.iter().flat_map(|d| &d.phases).flat_map(|p| &p.rows).any(|r| r.max_request_rate_within_slo.is_some())
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| if x.is_finite() { format!("{x:.4}") } else { "inf".into() })
}

/// The frontier point of aggregated row `i` of device `d`, and whether it is the chosen one.
fn point_of(d: &DeviceResult, i: usize) -> Option<(&FrontierPoint, bool)> {
    let f = d.frontier.as_ref()?;
    let at = f.points.iter().position(|p| p.row == Some(i))?;
    Some((&f.points[at], f.chosen == Some(at)))
}

/// The plane columns of a point: tokens/s per user, on the frontier, chosen.
fn plane(p: Option<(&FrontierPoint, bool)>) -> [String; 3] {
    match p {
        Some((p, chosen)) => [format!("{:.4}", p.tokens_per_s_per_user), p.on_frontier.to_string(), chosen.to_string()],
        None => Default::default(),
    }
}

/// One line per P/D deployment of `--compare-disagg`: the columns that apply, the rest empty.
fn pd_lines(w: &mut ::csv::Writer<Vec<u8>>, d: &DeviceResult, priced: bool, width: usize) -> Result<(), super::ExportError> {
    let Some(f) = &d.frontier else { return Ok(()) };
    for (i, p) in f.points.iter().enumerate() {
        let Some(pd) = &p.pd else { continue };
        let mut rec = vec![String::new(); COLUMNS.len()];
        if priced {
            rec.extend([opt(p.usd_per_million_output_tokens), opt(p.usd_per_million_tokens)]);
        }
        // The goodput column, when there is one, stays empty: P/D points carry none.
        rec.resize(width, String::new());
        let mut set = |col: &str, v: String| {
            let at = COLUMNS.iter().position(|c| *c == col).expect("a CSV column");
            rec[at] = v;
        };
        set("device", d.device.clone());
        set("phase", p.kind.code().to_string());
        set("parallel", p.label.clone());
        set("num_devices", p.devices.to_string());
        set("ttft_ms", format!("{:.4}", p.ttft_ms));
        set("tpot_ms", format!("{:.4}", p.tpot_ms));
        set("throughput_tok_s", format!("{:.4}", p.tokens_per_s));
        set("throughput_per_device_tok_s", format!("{:.4}", p.tokens_per_s_per_device));
        set("qps", format!("{:.4}", pd.request_rate));
        set("feasible", p.meets_slo.to_string());
        set("stop_reason", if p.meets_slo { String::new() } else { crate::outcome::StopReason::TpotLimit.code().to_string() });
        set("pd_split", format!("{}P:{}D", pd.prefill_instances, pd.decode_instances));
        let [user, on, chosen] = plane(Some((p, f.chosen == Some(i))));
        set("tokens_per_s_per_user", user);
        set("on_frontier", on);
        set("chosen", chosen);
        w.write_record(&rec)?;
    }
    Ok(())
}

pub fn render(report: &Report) -> Result<String, super::ExportError> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let priced = report.inputs.device_hour_cost.is_some();
    let goodput = has_goodput(report);
    let mut header = COLUMNS.to_vec();
    if priced {
        header.extend(PRICE_COLUMNS);
    }
    header.extend(goodput.then_some(GOODPUT_COLUMN));
    w.write_record(&header)?;
    for d in &report.devices {
        // P/D ratio planning: the split "Overall Best" reports, on every row of the device.
        let chosen = d.pd_ratio.as_ref().and_then(|pd| pd.chosen.as_ref());
        let split = chosen.map(|c| format!("{}P:{}D", c.prefill_instances, c.decode_instances)).unwrap_or_default();
        let source = chosen.map(|c| c.source.name().to_string()).unwrap_or_default();
        for p in &d.phases {
            let aggregated = p.phase == crate::outcome::Phase::Aggregated;
            for (i, r) in p.rows.iter().enumerate() {
                let [user, on, chosen] = plane(if aggregated { point_of(d, i) } else { None });
                let rank = p
                    .best
                    .iter()
                    .position(|b| b.parallel == r.parallel && b.batch_size == r.batch_size)
                    .map(|i| (i + 1).to_string())
                    .unwrap_or_default();
                let l = &r.layout;
                let mut rec = vec![
                    r.device.clone(),
                    r.phase.code().to_string(),
                    r.parallel.clone(),
                    l.tp.to_string(),
                    l.dp.to_string(),
                    l.ep.to_string(),
                    l.moe_tp.to_string(),
                    l.moe_dp.to_string(),
                    l.dcp.to_string(),
                    r.mtp.to_string(),
                    r.batch_size.to_string(),
                    r.concurrency.to_string(),
                    r.num_devices.to_string(),
                    opt(r.ttft_ms),
                    opt(r.tpot_ms),
                    opt(r.tpot_amortized_ms),
                    opt(r.tpot_inter_token_ms),
                    format!("{:.4}", r.throughput),
                    format!("{:.4}", r.throughput_per_device),
                    opt(r.qps),
                    format!("{:.4}", r.memory.weight_gib),
                    format!("{:.4}", r.memory.kv_cache_gib),
                    format!("{:.4}", r.memory.activation_gib),
                    format!("{:.4}", r.memory.avail_gib),
                    r.max_batched_tokens.to_string(),
                    r.prefill_num_chunks.to_string(),
                    r.effective_input_length.to_string(),
                    r.feasible().to_string(),
                    r.stop_reason.map(|s| s.code().to_string()).unwrap_or_default(),
                    rank,
                    r.serving_engine.map(|e| e.to_string()).unwrap_or_default(),
                    r.max_num_seqs.map(|m| m.to_string()).unwrap_or_default(),
                    split.clone(),
                    source.clone(),
                    d.serving.as_ref().map(|s| s.calibration.clone()).unwrap_or_default(),
                    user,
                    on,
                    chosen,
                ];
                if priced {
                    rec.extend([opt(r.usd_per_million_output_tokens), opt(r.usd_per_million_tokens)]);
                }
                if goodput {
                    rec.push(opt(r.max_request_rate_within_slo));
                }
                w.write_record(&rec)?;
            }
        }
        pd_lines(&mut w, d, priced, header.len())?;
    }
    let bytes = w.into_inner().map_err(|e| ::csv::Error::from(e.into_error()))?;
    // Every field is a Rust string, so the bytes are UTF-8.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
