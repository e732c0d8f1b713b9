//! One phase's result block (aggregated, or the prefill or decode side of P/D): the Overall
//! Best Configuration and its bottleneck, the top-N table (one row per layout, or per length
//! composition), then the studies beside it and, in aggregation, the deployment plane; or why
//! the phase has no row.

use super::costing::{price_cells, price_line, priced, replica_block, PRICE_COLUMNS};
use super::frontier::{comparison_block, frontier_block};
use super::header::block_header;
use super::layout::{banner, f2, f3, fit, new_table, rule};
use super::study::{compare_table, sim_block, sweep_block};
use crate::outcome::{DeviceResult, Phase, PhaseResult, Report, Row};
use crate::plan::Plan;
use comfy_table::Table;
use std::fmt::Write;

/// The width of a phase block's banners and rules (the P/D-ratio block is wider).
const STARS: usize = 80;

fn phase_title(phase: Phase, n: usize, varlen: bool) -> String {
    match (phase, varlen) {
        (Phase::Aggregated, false) => format!("Top {n} PD Aggregated Configurations: "),
        (Phase::Prefill, false) => format!("Top {n} PD Disaggregated Prefill Configurations: "),
        (Phase::Decode, false) => format!("Top {n} PD Disaggregated Decode Configurations: "),
        (Phase::Aggregated, true) => format!("Top {n} Aggregation Configurations: "),
        (Phase::Prefill, true) => format!("Top {n} Disaggregation (Prefill) Configurations: "),
        (Phase::Decode, true) => format!("Top {n} Disaggregation (Decode) Configurations: "),
    }
}

fn bottleneck_line(r: &Row) -> Option<String> {
    let (which, b) = match (r.phase, r.breakdown_prefill, r.breakdown_decode) {
        (Phase::Prefill, Some(b), _) => ("prefill forward", b),
        // The simulator weighs every step it ran, mixed prefill/decode steps included.
        (Phase::Aggregated, _, Some(b)) if r.sim.is_some() => ("all simulated steps, time-weighted", b),
        (_, _, Some(b)) => ("decode step", b),
        (_, Some(b), _) => ("prefill forward", b),
        _ => return None,
    };
    Some(format!("Bottleneck ({which}): {} — {}", b.bottleneck(), b.label()))
}

fn overall_best(r: &Row) -> String {
    let mut s = String::from("Overall Best Configuration:\n");
    let _ = writeln!(s, "Best Throughput: {:.2} tokens/s", r.throughput);
    if let Some(t) = r.ttft_ms {
        let _ = writeln!(s, "TTFT: {t:.2} ms");
    }
    if let Some(t) = r.tpot_ms {
        let _ = writeln!(s, "TPOT: {t:.2} ms");
    }
    let _ = writeln!(s, "Parallel: {}  batch size {}  concurrency {}", r.parallel, r.batch_size, r.concurrency);
    if let Some(b) = bottleneck_line(r) {
        let _ = writeln!(s, "{b}");
    }
    if let Some(c) = price_line(r) {
        let _ = writeln!(s, "{c}");
    }
    s
}

fn phase_table(p: &PhaseResult, top: Option<usize>, w: Option<usize>) -> String {
    let rows: Vec<&Row> = p.best.iter().take(top.unwrap_or(usize::MAX)).collect();
    let varlen = rows.iter().any(|r| !r.composition.is_empty());
    let mut s = phase_title(p.phase, rows.len(), varlen);
    s.push('\n');
    let t = if varlen { composition_table(p.phase, &rows) } else { best_rows_table(p.phase, &rows) };
    s += &fit(t, w, true);
    s.push('\n');
    s
}

/// Rows over a length composition: each row, then one line per input length it was sized for.
fn composition_table(phase: Phase, rows: &[&Row]) -> Table {
    let lat: &[&str] = match phase {
        Phase::Aggregated => &["TTFT (ms)", "TPOT (ms)"],
        Phase::Prefill => &["TTFT (ms)"],
        Phase::Decode => &["TPOT (ms)"],
    };
    let mut h = vec!["Top", "num_devices", "num_input_tokens", "request_ratio", "samples", "concurrency"];
    h.extend(lat);
    h.extend(["Throughput (token/s)", "parallel", "batch_size"]);
    let mut t = new_table(&h);
    for (i, r) in rows.iter().enumerate() {
        let mut cells = vec![
            (i + 1).to_string(),
            r.num_devices.to_string(),
            "all".into(),
            "1.000".into(),
            r.batch_size.to_string(),
            r.concurrency.to_string(),
        ];
        match phase {
            Phase::Aggregated => cells.extend([f2(r.ttft_ms), f2(r.tpot_ms)]),
            Phase::Prefill => cells.push(f2(r.ttft_ms)),
            Phase::Decode => cells.push(f2(r.tpot_ms)),
        }
        cells.extend([format!("{:.2}", r.throughput), r.parallel.clone(), r.batch_size.to_string()]);
        t.add_row(cells);
        for c in &r.composition {
            let mut cells = vec![
                "-".to_string(),
                r.num_devices.to_string(),
                c.num_input_tokens.to_string(),
                format!("{:.3}", c.request_ratio),
                c.samples.to_string(),
                r.concurrency.to_string(),
            ];
            cells.extend(lat.iter().map(|_| "-".to_string()));
            cells.extend(["-".into(), r.parallel.clone(), r.batch_size.to_string()]);
            t.add_row(cells);
        }
    }
    t
}

/// Rows at one input length: throughput, the phase's latencies (with p99 columns when any row
/// was simulated) and the memory split.
fn best_rows_table(phase: Phase, rows: &[&Row]) -> Table {
    let latency: &[&str] = match phase {
        Phase::Aggregated => &["TTFT (ms)", "TPOT (ms)"],
        Phase::Prefill => &["QPS (req/s)", "TTFT (ms)"],
        Phase::Decode => &["QPS (req/s)", "TPOT (ms)"],
    };
    let simulated = rows.iter().any(|r| r.sim.is_some());
    let mut h = vec!["Top", "Throughput (token/s)"];
    h.extend(latency);
    if simulated {
        match phase {
            Phase::Aggregated => h.extend(["TTFT p99 (ms)", "TPOT p99 (ms)"]),
            Phase::Prefill => h.push("TTFT p99 (ms)"),
            Phase::Decode => h.push("TPOT p99 (ms)"),
        }
    }
    // `--goodput`: the highest rate each layout serves within the SLO.
    let goodput = rows.iter().any(|r| r.max_request_rate_within_slo.is_some());
    if goodput {
        h.push("max req/s in SLO");
    }
    h.extend(["concurrency", "num_devices", "parallel", "batch_size", "weight_GiB", "kv_cache_GiB", "activation_GiB", "avail_GiB"]);
    let priced = priced(rows);
    if priced {
        h.extend(PRICE_COLUMNS);
    }
    let mut t = new_table(&h);
    for (i, r) in rows.iter().enumerate() {
        let mut cells = vec![(i + 1).to_string(), format!("{:.2}", r.throughput)];
        match phase {
            Phase::Aggregated => cells.extend([f2(r.ttft_ms), f2(r.tpot_ms)]),
            Phase::Prefill => cells.extend([f2(r.qps), f2(r.ttft_ms)]),
            Phase::Decode => cells.extend([f2(r.qps), f2(r.tpot_ms)]),
        }
        if simulated {
            let (ttft99, tpot99) = p99_cells(r);
            match phase {
                Phase::Aggregated => cells.extend([ttft99, tpot99]),
                Phase::Prefill => cells.push(ttft99),
                Phase::Decode => cells.push(tpot99),
            }
        }
        if goodput {
            cells.push(r.max_request_rate_within_slo.map_or("-".to_string(), f3));
        }
        cells.extend([
            r.concurrency.to_string(),
            r.num_devices.to_string(),
            r.parallel.clone(),
            r.batch_size.to_string(),
            f3(r.memory.weight_gib),
            f3(r.memory.kv_cache_gib),
            f3(r.memory.activation_gib),
            f3(r.memory.avail_gib),
        ]);
        if priced {
            cells.extend(price_cells(r));
        }
        t.add_row(cells);
    }
    t
}

/// A row's simulated TTFT and TPOT p99 (TPOT by the row's definition), or dashes.
fn p99_cells(r: &Row) -> (String, String) {
    match &r.sim {
        Some(sm) => {
            let tpot = if tpot_is_amortized(r) { sm.latency.tpot_amortized.p99 } else { sm.latency.tpot_inter_token.p99 };
            (format!("{:.2}", sm.latency.ttft.p99), format!("{tpot:.2}"))
        }
        None => ("-".to_string(), "-".to_string()),
    }
}

fn tpot_is_amortized(r: &Row) -> bool {
    r.tpot_ms.is_some() && r.tpot_ms == r.tpot_amortized_ms && r.tpot_ms != r.tpot_inter_token_ms
}

/// Why a phase has no row, in plain words.
/// The heading of a table without rows: the limits' when any was given, else what is left
/// (no layout fits at all, e.g. out of memory).
pub(super) fn no_rows_heading(plan: &Plan) -> &'static str {
    if plan.slo.ttft_ms.is_some() || plan.slo.tpot_ms.is_some() {
        "No configurations satisfy the current TTFT/TPOT filters.\n"
    } else {
        "No configuration runs (no TTFT/TPOT limit was given): every layout failed, as below.\n"
    }
}

pub(super) fn no_result(plan: &Plan, p: &PhaseResult) -> String {
    let mut s = String::from(no_rows_heading(plan));
    if !p.failures.is_empty() {
        s += "Why:\n";
        for f in &p.failures {
            let _ = writeln!(s, "  - {f}");
        }
    } else if p.rows.iter().any(|r| r.feasible()) {
        s += "Every layout has feasible batch sizes, but none meets the limits: relax --ttft-limits/--tpot-limits.\n";
    }
    if !p.skipped.is_empty() {
        s += "Layouts the model cannot run:\n";
        for f in &p.skipped {
            let _ = writeln!(s, "  - {f}");
        }
    }
    s
}

pub(super) fn phase_block(plan: &Plan, report: &Report, dev: &DeviceResult, p: &PhaseResult) -> String {
    let mut s = block_header(plan, report, dev, STARS);
    // The sizing answer heads the device's first phase (a P/D answer's: its prefill row).
    if let (true, Some(sizing)) = (dev.phases.first().is_some_and(|f| std::ptr::eq(f, p)), &dev.sizing) {
        s += &super::capacity::sizing_block(plan, sizing);
        let _ = writeln!(s, "{}", rule(STARS));
    }
    match p.best.first() {
        None => s += &no_result(plan, p),
        Some(best) => {
            s += &overall_best(best);
            if best.sim.is_some() {
                let _ = writeln!(s, "{}", rule(STARS));
                s += &sim_block(plan, best);
            }
            let _ = writeln!(s, "{}", rule(STARS));
            s += &phase_table(p, plan.output.top, plan.output.width);
            let cmp = compare_table(p, plan.output.top, plan.output.width);
            if !cmp.is_empty() {
                let _ = writeln!(s, "{}", rule(STARS));
                s += &cmp;
            }
            if !p.sweeps.is_empty() {
                let _ = writeln!(s, "{}", rule(STARS));
                s += &sweep_block(p, plan.output.width);
            }
        }
    }
    if p.phase == Phase::Aggregated {
        if let Some(f) = &dev.frontier {
            let _ = writeln!(s, "{}", rule(STARS));
            s += &frontier_block(f, plan.output.width);
        }
        if let Some(c) = &dev.agg_vs_disagg {
            let _ = writeln!(s, "{}", rule(STARS));
            s += &comparison_block(plan, dev, c);
        }
        if let Some(rp) = &dev.replica_plan {
            let _ = writeln!(s, "{}", rule(STARS));
            s += &replica_block(plan, rp);
        }
    }
    let _ = writeln!(s, "{}", banner(STARS));
    s
}
