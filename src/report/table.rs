//! The text report: the original's layout (banners, input configuration, memory info, overall
//! best, top-N tables per mode, cross-hardware tables) plus the engine, the TPOT definition,
//! the bottleneck of the best row and the disclaimer; in aggregation the Pareto frontier of
//! the deployment plane and, with `--compare-disagg`, the aggregated-versus-P/D verdict.

use super::layout::fit;
use crate::hardware::DeviceRegistry;
use crate::outcome::Phase;
use crate::outcome::{AggVsDisagg, DeploymentKind, DeviceResult, Frontier, FrontierPoint, PdRatioResult, PhaseResult, Report, Row};
use crate::plan::{Mode, Plan};
use comfy_table::Table;
use std::fmt::Write;

/// PrettyTable's look: `+---+` borders, a `-` line under the header, no lines between rows.
const PRETTY: &str = "||--+-++|    ++++++";

pub fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(PRETTY);
    t.set_header(header.iter().map(|h| h.to_string()));
    t
}

/// Python's `str(float)` for limits: 50.0, 12.5, inf, None.
pub fn py_float(v: Option<f64>) -> String {
    match v {
        None => "None".into(),
        Some(x) if x.is_infinite() => "inf".into(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.1}"),
        Some(x) => format!("{x}"),
    }
}

pub fn f2(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.2}"),
        Some(x) if x.is_infinite() => "inf".into(),
        _ => "-".into(),
    }
}

fn f3(v: f64) -> String {
    format!("{v:.3}")
}

const STARS: usize = 80;

fn banner(width: usize) -> String {
    "*".repeat(width)
}

fn rule(width: usize) -> String {
    format!("    {}", "-".repeat(width - 4))
}

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

fn engine_line(plan: &Plan, report: &Report) -> String {
    let what = match report.engine.as_str() {
        "analytic" => "analytic (the documented closed-form formulas on the roofline cost model)",
        "sim" => "sim (discrete-event simulation of the serving scheduler)",
        _ => "compare (simulator and analytic formulas side by side)",
    };
    let def = match plan.serving.tpot_definition {
        crate::plan::TpotDefinition::Amortized => "amortized (E2E / output length)",
        crate::plan::TpotDefinition::InterToken => "inter-token ((finish - first token) / (output length - 1))",
    };
    let mut s = format!("Engine: {what}\nTPOT definition: {def}");
    if plan.engine != crate::plan::EngineKind::Analytic {
        s += &format!(
            "\nWorkload: {} arrivals; SLO statistic: {}",
            plan.sim.arrival.describe(),
            crate::quant::NamedEnum::name(plan.sim.slo_percentile)
        );
        if crate::search::ranking(plan) == crate::search::Ranking::OpenLoop {
            s += "\nRanking: the offered load sets tokens/s, so layouts rank by the share of requests within both limits, then by lower TTFT";
        }
    }
    s
}

fn input_configuration(plan: &Plan, report: &Report, dev: &DeviceResult) -> String {
    let mut s = String::new();
    let i = &report.inputs;
    let _ = writeln!(s, "Input Configuration:");
    let _ = writeln!(s, "Model: {}", i.model);
    let _ = writeln!(s, "Quantize Linear action: {}", i.quantize_linear_action);
    if let Some(q) = &i.quantize_non_expert_linear_action {
        let _ = writeln!(s, "Quantize Non-expert Linear action: {q}");
    }
    let _ = writeln!(s, "Quantize Attention action: {}", i.quantize_attention_action);
    match &plan.mode {
        Mode::PdRatio { prefill_devices, decode_devices, total_devices } => {
            let _ = writeln!(s, "Devices: {} ({prefill_devices} per prefill instance, {decode_devices} per decode instance)", dev.device);
            if let Some(n) = total_devices {
                let _ = writeln!(s, "Total devices: {n}");
            }
        }
        _ => {
            let _ = writeln!(s, "Devices: {} {}", i.num_devices, dev.device);
        }
    }
    let _ = writeln!(s, "Input length: {}  Output length: {}", i.input_length.description, i.output_length.description);
    if i.prefix_cache_hit_rate > 0.0 {
        let _ = writeln!(s, "Prefix cache hit rate: {} (effective input {} tokens)", i.prefix_cache_hit_rate, i.effective_input_length);
    }
    let _ = writeln!(s, "TTFT Limits: {} ms", py_float(i.ttft_limit_ms));
    let _ = writeln!(s, "TPOT Limits: {} ms", py_float(i.tpot_limit_ms));
    let _ = writeln!(s, "{}", engine_line(plan, report));
    if let Some(sv) = &dev.serving {
        let _ = writeln!(s, "{}", serving_line(sv));
    }
    s
}

/// The simulated serving engine, its policy, token budget and running cap.
fn serving_line(sv: &crate::outcome::ServingSummary) -> String {
    let budgets: Vec<String> = sv.max_batched_tokens.iter().map(u64::to_string).collect();
    let budget = match sv.budget_source.as_str() {
        "flag" => format!("{} tokens (--max-batched-tokens)", budgets.join(", ")),
        "engine-default" => format!("{} tokens ({} default)", budgets.join(", "), sv.engine),
        _ => format!("{} tokens (auto: 4x, 2x, 1x the prompt)", budgets.join(", ")),
    };
    let seqs = match (sv.max_num_seqs, sv.max_num_seqs_default) {
        (None, _) => "the batch size".to_string(),
        (Some(m), true) => format!("{m} (default)"),
        (Some(m), false) => format!("{m} (--max-num-seqs)"),
    };
    format!(
        "Serving engine: {} ({})\nToken budget: {budget}; max-num-seqs: {seqs}\nExecution profile: {}",
        sv.engine, sv.policy, sv.calibration
    )
}

fn memory_info(plan: &Plan, dev: &DeviceResult) -> String {
    let reserved = match (plan.serving.gpu_memory_utilization, plan.devices.iter().find(|d| d.name == dev.device)) {
        (Some(f), Some(d)) => {
            format!("{:.3} GiB (the {:.0} % --gpu-memory-utilization {f} leaves)", plan.serving.reserved_gib(d), (1.0 - f) * 100.0)
        }
        _ => format!("{:.3} GiB", plan.serving.reserved_memory_gb),
    };
    format!("Memory Info:\nTotal device memory: {:.3} GiB\nReserved memory: {reserved}\n", dev.profile.memory_gib)
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
    h.extend(["concurrency", "num_devices", "parallel", "batch_size", "weight_GiB", "kv_cache_GiB", "activation_GiB", "avail_GiB"]);
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

/// Latency percentiles and simulator figures of the best simulated row.
fn sim_block(plan: &Plan, r: &Row) -> String {
    let Some(sm) = &r.sim else { return String::new() };
    let mut s = String::from("Simulated latency (ms) of the best configuration:\n");
    let mut t = new_table(&["metric", "mean", "p50", "p90", "p95", "p99"]);
    let l = &sm.latency;
    let mut metrics = vec![("TTFT", &l.ttft)];
    // A prefill instance hands each request off after its first token: nothing else to time.
    if r.phase != Phase::Prefill {
        metrics.extend([
            ("TPOT inter-token", &l.tpot_inter_token),
            ("TPOT amortized", &l.tpot_amortized),
            ("ITL", &l.itl),
            ("E2E", &l.e2e),
        ]);
    }
    metrics.push(("queueing", &l.queueing));
    for (name, st) in metrics {
        t.add_row(vec![
            name.to_string(),
            format!("{:.2}", st.mean),
            format!("{:.2}", st.p50),
            format!("{:.2}", st.p90),
            format!("{:.2}", st.p95),
            format!("{:.2}", st.p99),
        ]);
    }
    s += &fit(t, plan.output.width, false);
    s.push('\n');
    let _ = writeln!(
        s,
        "Simulator: {} requests measured over {:.1} s{}, {} steps (mean {:.1} sequences, {:.2} ms), KV use {:.1} % mean / {:.1} % peak of {} blocks, goodput {:.1} %, {} preemptions",
        sm.measured_requests,
        sm.window_s,
        match (&plan.sim.arrival, sm.converged) {
            (crate::workload::arrival::ArrivalProcess::Closed, _)
                if plan.sim.num_requests.is_some() && !matches!(plan.mode, crate::plan::Mode::PdRatio { .. }) =>
            {
                " (benchmark run: every request sent, the first wave included, over the whole run)"
            }
            (a, _) if a.is_open() && plan.sim.measures_whole_run() => {
                " (whole run: every request, rates from the first arrival to the last finish)"
            }
            (crate::workload::arrival::ArrivalProcess::Closed, true) => " (steady state: 95 % intervals of the batch means within ±1 % (rate), ±2 % (bounded latencies))",
            (crate::workload::arrival::ArrivalProcess::Closed, false) => " (NOT converged within the window limit)",
            (crate::workload::arrival::ArrivalProcess::Burst, _) => " (one pass from t = 0)",
            (_, true) => " (open loop: the middle 80 % of arrivals; rates from when the system filled to the last of them)",
            (_, false) => " (open loop too short for a steady window: the middle 80 % of arrivals; rates over the whole run, drain included — raise --num-requests)",
        },
        sm.steps,
        sm.mean_batch_size,
        sm.mean_step_ms,
        sm.kv_utilization * 100.0,
        sm.kv_peak_utilization * 100.0,
        sm.kv_capacity_blocks,
        sm.goodput * 100.0,
        sm.preemptions
    );
    if sm.prefix_cache_hit_rate > 0.0 {
        let _ = writeln!(s, "Prefix cache: {:.1} % of the admitted prompts' tokens were cache hits", sm.prefix_cache_hit_rate * 100.0);
    }
    if !sm.bins.is_empty() {
        s += "Simulated latency by prompt length (ms):\n";
        let mut t = new_table(&["prompt tokens", "requests", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"]);
        for b in &sm.bins {
            t.add_row(vec![
                format!("[{}, {})", b.min_tokens, b.max_tokens),
                b.requests.to_string(),
                format!("{:.2}", b.ttft.p50),
                format!("{:.2}", b.ttft.p99),
                format!("{:.2}", b.tpot_inter_token.p50),
                format!("{:.2}", b.tpot_inter_token.p99),
            ]);
        }
        s += &fit(t, plan.output.width, false);
        s.push('\n');
    }
    s
}

fn rel(a: f64, b: Option<f64>) -> String {
    match b {
        Some(b) if b != 0.0 && b.is_finite() && a.is_finite() => format!("{:+.1} %", (a - b) / b * 100.0),
        _ => "-".into(),
    }
}

/// `--engine compare`: simulated and analytic figures of each best row at its batch size.
fn compare_table(p: &PhaseResult, top: Option<usize>, w: Option<usize>) -> String {
    let rows: Vec<&Row> = p.best.iter().filter(|r| r.analytic.is_some()).take(top.unwrap_or(usize::MAX)).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::from("Engine comparison at each configuration's batch size (difference = simulated vs analytic):\n");
    let mut t = new_table(&[
        "Top",
        "parallel",
        "batch_size",
        "TTFT sim (ms)",
        "TTFT analytic (ms)",
        "TTFT diff",
        "TPOT sim (ms)",
        "TPOT analytic (ms)",
        "TPOT diff",
        "Throughput sim",
        "Throughput analytic",
        "Throughput diff",
    ]);
    for (i, r) in rows.iter().enumerate() {
        let a = r.analytic.expect("filtered");
        t.add_row(vec![
            (i + 1).to_string(),
            r.parallel.clone(),
            r.batch_size.to_string(),
            f2(r.ttft_ms),
            f2(a.ttft_ms),
            rel(r.ttft_ms.unwrap_or(f64::NAN), a.ttft_ms),
            f2(r.tpot_ms),
            f2(a.tpot_ms),
            rel(r.tpot_ms.unwrap_or(f64::NAN), a.tpot_ms),
            format!("{:.2}", r.throughput),
            format!("{:.2}", a.throughput),
            rel(r.throughput, Some(a.throughput)),
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    s
}

/// The chunk-budget study: one table per studied layout.
fn sweep_block(p: &PhaseResult, w: Option<usize>) -> String {
    let mut s = String::new();
    for sw in &p.sweeps {
        let _ = writeln!(
            s,
            "Chunk-budget study: {} at batch size {} (concurrency {}), every budget at the same load:",
            sw.parallel, sw.batch_size, sw.concurrency
        );
        let mut t = new_table(&[
            "max_batched_tokens",
            "chunks/prompt",
            "TTFT (ms)",
            "TTFT p99 (ms)",
            "TPOT (ms)",
            "TPOT p99 (ms)",
            "ITL p99 (ms)",
            "Throughput (token/s)",
            "meets SLO",
            "best batch under SLO",
            "best throughput",
        ]);
        for pt in &sw.points {
            t.add_row(vec![
                pt.budget.to_string(),
                pt.chunks_per_prompt.to_string(),
                f2(pt.ttft_ms),
                f2(pt.ttft_p99_ms),
                f2(pt.tpot_ms),
                f2(pt.tpot_p99_ms),
                f2(pt.itl_p99_ms),
                format!("{:.2}", pt.throughput),
                (if pt.feasible { "yes" } else { "no" }).to_string(),
                pt.best_batch.map_or("-".into(), |b| b.to_string()),
                pt.best_throughput.map_or("-".into(), |x| format!("{x:.2}")),
            ]);
        }
        s += &fit(t, w, true);
        s.push('\n');
    }
    s
}

/// Why a phase has no row, in plain words.
fn no_result(p: &PhaseResult) -> String {
    let mut s = String::from("No configurations satisfy the current TTFT/TPOT filters.\n");
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

/// The banner, Input Configuration and Memory Info every result block opens with.
fn block_header(plan: &Plan, report: &Report, dev: &DeviceResult, width: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", banner(width));
    let _ = writeln!(s, "{}", rule(width));
    s += &input_configuration(plan, report, dev);
    let _ = writeln!(s, "{}", rule(width));
    s += &memory_info(plan, dev);
    let _ = writeln!(s, "{}", rule(width));
    s
}

fn phase_block(plan: &Plan, report: &Report, dev: &DeviceResult, p: &PhaseResult) -> String {
    let mut s = block_header(plan, report, dev, STARS);
    match p.best.first() {
        None => s += &no_result(p),
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
    }
    let _ = writeln!(s, "{}", banner(STARS));
    s
}

fn pd_block(plan: &Plan, report: &Report, dev: &DeviceResult, pd: &PdRatioResult) -> String {
    const W: usize = 120;
    let mut s = block_header(plan, report, dev, W);
    let Some(b) = pd.rows.first() else {
        s += "No configurations satisfy the current TTFT/TPOT filters.\n";
        for p in &dev.phases {
            if p.best.is_empty() {
                let what = if p.phase == Phase::Prefill { "prefill" } else { "decode" };
                let _ = writeln!(s, "No feasible {what} instance:");
                s += &no_result(p);
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
    let mut t = new_table(&[
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
    ]);
    for (i, r) in rows.iter().enumerate() {
        t.add_row(vec![
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
        ]);
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

/// Planned load from which a side counts as saturated in the verification.
const SATURATED: f64 = 0.98;

/// The best P/D plan simulated as one system, and the splits simulated within the budget.
fn verification_block(plan: &Plan, row: &crate::outcome::PdRow, v: &crate::outcome::PdVerification, total: Option<u32>) -> String {
    let mut s = String::from(
        "Simulated verification of the plan (prefill and decode instances as one system, Poisson arrivals at the split's balanced rate):\n",
    );
    let _ = writeln!(
        s,
        "Split: {} P instance(s) x {} devices + {} D instance(s) x {} devices; arrival rate {:.3} req/s (prefill side at {:.0} %, decode side at {:.0} % of planned capacity); KV transfer {:.2} ms per request ({} routing); {} requests",
        v.prefill_instances,
        row.p_devices,
        v.decode_instances,
        row.d_devices,
        v.arrival_rate,
        v.prefill_utilization * 100.0,
        v.decode_utilization * 100.0,
        row.p_transfer_ms,
        crate::quant::NamedEnum::name(plan.sim.routing),
        v.requests
    );
    match (&v.simulated, &v.simulation_error) {
        (None, e) => {
            let _ =
                writeln!(s, "The simulation could not run: {}", e.as_ref().map_or_else(|| "unknown error".to_string(), |e| e.to_string()));
        }
        (Some(sim), _) => {
            s += &planned_vs_simulated(v, sim, plan.output.width);
            s += &verification_verdict(plan, v, sim);
        }
    }
    if !v.splits.is_empty() {
        s += &splits_block(v, total, plan.output.width);
    }
    s
}

/// The planned TTFT, TPOT and request rate beside the simulated distribution.
fn planned_vs_simulated(v: &crate::outcome::PdVerification, sim: &crate::outcome::PdSimulated, w: Option<usize>) -> String {
    let mut t = new_table(&["metric", "planned", "simulated mean", "p50", "p90", "p99"]);
    for (name, planned, st) in [("TTFT (ms)", v.planned_ttft_ms, &sim.ttft), ("TPOT (ms)", v.planned_tpot_ms, &sim.tpot)] {
        t.add_row(vec![
            name.to_string(),
            format!("{planned:.2}"),
            format!("{:.2}", st.mean),
            format!("{:.2}", st.p50),
            format!("{:.2}", st.p90),
            format!("{:.2}", st.p99),
        ]);
    }
    t.add_row(vec![
        "delivered req/s".to_string(),
        format!("{:.3}", v.planned_qps),
        format!("{:.3}", sim.request_rate),
        "-".into(),
        "-".into(),
        "-".into(),
    ]);
    let mut s = fit(t, w, false);
    s.push('\n');
    s
}

/// Whether the simulated system meets the SLO, the cautions on how far that holds (run too
/// short, a side near saturation), and the sustainable rate when it does not.
fn verification_verdict(plan: &Plan, v: &crate::outcome::PdVerification, sim: &crate::outcome::PdSimulated) -> String {
    let mut s = String::new();
    let stat = crate::quant::NamedEnum::name(plan.sim.slo_percentile);
    let _ = writeln!(
        s,
        "Verdict: the simulated system {} the SLO ({stat} TTFT {:.2} ms vs limit {}, {stat} TPOT {:.2} ms vs limit {}); {:.1} % of requests met both limits; {:.1} output tokens/s.",
        if sim.slo_met { "MEETS" } else { "does NOT meet" },
        sim.ttft.pick(plan.sim.slo_percentile),
        py_float(plan.slo.ttft_ms),
        sim.tpot.pick(plan.sim.slo_percentile),
        py_float(plan.slo.tpot_ms),
        sim.goodput * 100.0,
        sim.output_throughput
    );
    let (side, load) =
        if v.decode_utilization >= v.prefill_utilization { ("decode", v.decode_utilization) } else { ("prefill", v.prefill_utilization) };
    if !sim.steady {
        let _ = writeln!(
            s,
            "Caution: {} requests are too few to reach a steady state at this rate (a request lives about as long as the arrivals last); the delivered rate includes the drain. Raise --num-requests.",
            v.requests
        );
    }
    if load >= SATURATED {
        let _ = writeln!(
            s,
            "Caution: the {side} side runs at {:.0} % of its planned capacity, where queues never settle; this verdict holds for {} requests and can change with --num-requests.",
            load * 100.0,
            v.requests
        );
    }
    match v.sustainable_rate {
        Some(r) if !sim.slo_met => {
            let _ = writeln!(
                s,
                "Sustainable rate: the split holds the SLO up to about {:.3} req/s ({:.0} % of the planned {:.3}); plan for that, or add headroom.",
                r,
                r / v.arrival_rate * 100.0,
                v.arrival_rate
            );
        }
        None if !sim.slo_met => {
            let _ = writeln!(s, "Sustainable rate: none found down to 1/32 of the planned rate — the layouts themselves miss the SLO in the combined system.");
        }
        _ => {}
    }
    s
}

/// Every instance split within the device budget, simulated, and how the arithmetic split
/// compares with the best of them.
fn splits_block(v: &crate::outcome::PdVerification, total: Option<u32>, w: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Instance splits within {} devices, each simulated at its balanced rate:", total.unwrap_or(0));
    let mut t = new_table(&["P instances", "D instances", "arrival (req/s)", "delivered (req/s)", "within SLO (req/s)", "SLO met"]);
    for e in &v.splits {
        t.add_row(vec![
            e.prefill_instances.to_string(),
            e.decode_instances.to_string(),
            format!("{:.3}", e.arrival_rate),
            format!("{:.3}", e.delivered_qps),
            format!("{:.3}", e.good_qps),
            match &e.error {
                Some(err) => format!("error: {err}"),
                None => format!("{}{}", if e.slo_met { "yes" } else { "no" }, if e.steady { "" } else { " (run too short)" }),
            },
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    let best = &v.splits[0];
    let planned = v.splits.iter().find(|e| e.prefill_instances == v.prefill_instances && e.decode_instances == v.decode_instances);
    match planned {
        Some(p) if p.prefill_instances == best.prefill_instances && p.decode_instances == best.decode_instances => {
            let _ = writeln!(s, "The arithmetic split is also the best by simulation.");
        }
        Some(p) => {
            let _ = writeln!(
                s,
                "The split {} P : {} D beats the arithmetic split {} P : {} D by simulation ({:.3} vs {:.3} requests/s within the SLO).",
                best.prefill_instances, best.decode_instances, p.prefill_instances, p.decode_instances, best.good_qps, p.good_qps
            );
        }
        None => {
            let _ = writeln!(
                s,
                "Best split by simulation: {} P : {} D ({:.3} requests/s within the SLO).",
                best.prefill_instances, best.decode_instances, best.good_qps
            );
        }
    }
    s
}

fn profile_table(report: &Report, w: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", banner(108));
    let _ = writeln!(s, "Cross-hardware - device profile summary (modeling abstraction vs performance merge tables)");
    let _ = writeln!(s, "Device profile parameter comparison (effective compute / memory BW / comm BW)");
    let _ = writeln!(s, "{}", rule(108));
    let mut t = new_table(&[
        "Device",
        "Cube Compute (TFLOPS)",
        "Vector Compute (TFLOPS)",
        "HBM BW (TiB/s)",
        "Memory (GiB)",
        "Comm Grid",
        "Comm BW (GB/s)",
    ]);
    for d in &report.devices {
        let p = &d.profile;
        t.add_row(vec![
            d.device.clone(),
            format!("{:.2}", p.cube_tflops),
            format!("{:.2}", p.vector_tflops),
            format!("{:.3}", p.hbm_tib_s),
            format!("{:.1}", p.memory_gib),
            p.comm_grid.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" x "),
            p.comm_gb_s.iter().map(|&b| crate::hardware::trim_float(b)).collect::<Vec<_>>().join(" | "),
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    s
}

fn cross_phase_table(report: &Report, phase: Phase, w: Option<usize>) -> String {
    let rows = report.cross_hardware(phase);
    let mut s = String::new();
    let title = match phase {
        Phase::Aggregated => "Cross-hardware - PD Aggregated (best throughput config per device under TTFT/TPOT limits)",
        Phase::Prefill => "Cross-hardware - PD Disaggregated Prefill (best throughput config per device under the TTFT limit)",
        Phase::Decode => "Cross-hardware - PD Disaggregated Decode (best throughput config per device under the TPOT limit)",
    };
    let _ = writeln!(s, "{}", banner(100));
    let _ = writeln!(s, "{title}");
    let _ = writeln!(s, "{}", rule(100));
    let mut t = match phase {
        Phase::Aggregated => new_table(&[
            "Top",
            "Device",
            "Throughput (token/s)",
            "TTFT (ms)",
            "TPOT (ms)",
            "Concurrency",
            "Parallel",
            "Batch",
            "num_devices",
        ]),
        Phase::Prefill | Phase::Decode => new_table(&[
            "Top",
            "Device",
            if phase == Phase::Prefill { "Prefill throughput (token/s)" } else { "Decode throughput (token/s)" },
            "QPS (req/s)",
            "TTFT (ms)",
            "TPOT (ms)",
            "Concurrency",
            "Parallel",
            "Batch",
            "num_devices",
        ]),
    };
    for (i, r) in rows.iter().enumerate() {
        let mut cells = vec![(i + 1).to_string(), r.device.clone(), format!("{:.2}", r.throughput)];
        if phase != Phase::Aggregated {
            cells.push(f2(r.qps));
        }
        cells.extend([
            f2(r.ttft_ms),
            f2(r.tpot_ms),
            r.concurrency.to_string(),
            r.parallel.clone(),
            r.batch_size.to_string(),
            r.num_devices.to_string(),
        ]);
        t.add_row(cells);
    }
    let missing: Vec<&str> = report
        .devices
        .iter()
        .filter(|d| d.phases.iter().any(|p| p.phase == phase && p.best.is_empty()))
        .map(|d| d.device.as_str())
        .collect();
    s += &fit(t, w, true);
    s.push('\n');
    if !missing.is_empty() {
        let _ = writeln!(s, "No configuration meets the limits on: {}", missing.join(", "));
    }
    s
}

fn cross_pd_table(report: &Report, w: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", banner(100));
    let _ = writeln!(s, "Cross-hardware - PD Ratio (best balanced QPS per device under TTFT/TPOT limits)");
    let _ = writeln!(s, "{}", rule(100));
    let mut t =
        new_table(&["Top", "Device", "Balanced QPS (req/s)", "PD Ratio (P:D inst)", "P QPS", "D QPS", "TTFT", "TPOT", "P inst", "D inst"]);
    // The split each device's Overall Best reports (the formula's, or the simulated best).
    type Best<'r> = (&'r str, &'r crate::outcome::PdRow, Option<(u32, u32)>);
    let mut best: Vec<Best> = report
        .devices
        .iter()
        .filter_map(|d| {
            let pd = d.pd_ratio.as_ref()?;
            let split = pd.chosen.as_ref().map(|c| (c.prefill_instances, c.decode_instances));
            pd.rows.first().map(|r| (d.device.as_str(), r, split))
        })
        .collect();
    best.sort_by(|a, b| b.1.balanced_qps.total_cmp(&a.1.balanced_qps));
    for (i, (dev, r, split)) in best.iter().enumerate() {
        t.add_row(vec![
            (i + 1).to_string(),
            dev.to_string(),
            format!("{:.2}", r.balanced_qps),
            format!("{:.2}", r.pd_ratio),
            format!("{:.2}", r.p_qps),
            format!("{:.2}", r.d_qps),
            format!("{:.2}", r.ttft_ms),
            format!("{:.2}", r.tpot_ms),
            split.map_or("-".into(), |s| s.0.to_string()),
            split.map_or("-".into(), |s| s.1.to_string()),
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    s += "Note: the P/D instance split is the formula's (P instances ≈ D instances × PD ratio) within --num-devices, or the simulated best split when it serves more requests within the SLO (see each device's Overall Best).\n";
    s
}

/// The raw rows (`--dump-original-results`), every probe, the original's columns.
fn dump(report: &Report, w: Option<usize>) -> String {
    let mut s = String::new();
    for d in &report.devices {
        for p in &d.phases {
            let agg = p.phase == Phase::Aggregated;
            let mut h = vec![
                "device_name",
                "num_devices",
                "model_id",
                "quantize_linear_action",
                "quantize_attention_action",
                "input_length",
                "output_length",
                "effective_input_length",
                "max_batched_tokens",
                "prefill_num_chunks",
                "concurrency",
                "ttft",
                "tpot",
                "token/s",
                "token/s/device",
                "parallel",
                "batch_size",
            ];
            if agg {
                h.extend(["percentage_breakdowns(p)", "percentage_breakdowns(d)"]);
            } else {
                h.push("percentage_breakdowns");
            }
            h.extend(["weight_GB", "kv_cache_GB", "activation_GB", "avail_GB", "stop_reason"]);
            let mut t = new_table(&h);
            for r in &p.rows {
                let br = |b: Option<crate::cost::Breakdown>| b.map_or("-".into(), |b| b.label());
                let mut cells = vec![
                    r.device.clone(),
                    r.num_devices.to_string(),
                    report.inputs.model.clone(),
                    report.inputs.quantize_linear_action.clone(),
                    report.inputs.quantize_attention_action.clone(),
                    report.inputs.input_length.description.clone(),
                    report.inputs.output_length.description.clone(),
                    r.effective_input_length.to_string(),
                    r.max_batched_tokens.to_string(),
                    r.prefill_num_chunks.to_string(),
                    r.concurrency.to_string(),
                    r.ttft_ms.map_or("-".into(), f3),
                    r.tpot_ms.map_or("-".into(), f3),
                    f3(r.throughput),
                    f3(r.throughput_per_device),
                    r.parallel.clone(),
                    r.batch_size.to_string(),
                ];
                if agg {
                    cells.extend([br(r.breakdown_prefill), br(r.breakdown_decode)]);
                } else {
                    cells.push(br(r.breakdown()));
                }
                cells.extend([
                    f3(r.memory.weight_gib),
                    f3(r.memory.kv_cache_gib),
                    f3(r.memory.activation_gib),
                    f3(r.memory.avail_gib),
                    r.stop_reason.map_or("-".into(), |x| x.describe().to_string()),
                ]);
                t.add_row(cells);
            }
            s += &fit(t, w, false);
            s.push('\n');
        }
    }
    s
}

/// The whole text report.
pub fn render(plan: &Plan, report: &Report) -> String {
    if plan.output.dump_original {
        let mut s = dump(report, plan.output.width);
        s += &format!("\n{}\n", report.disclaimer);
        return plan.output.width.map_or(s.clone(), |w| super::layout::wrap(&s, w));
    }
    let mut s = String::new();
    for d in &report.devices {
        if let Some(pd) = &d.pd_ratio {
            s += &pd_block(plan, report, d, pd);
        } else {
            for p in &d.phases {
                s += &phase_block(plan, report, d, p);
            }
        }
        for n in &d.notes {
            let _ = writeln!(s, "Note ({}): {n}", d.device);
        }
    }
    if report.devices.len() >= 2 {
        s += &profile_table(report, plan.output.width);
        match &plan.mode {
            Mode::PdRatio { .. } => s += &cross_pd_table(report, plan.output.width),
            _ => {
                for p in &report.devices[0].phases {
                    s += &cross_phase_table(report, p.phase, plan.output.width);
                }
            }
        }
    }
    let _ = writeln!(s, "\n{}", report.disclaimer);
    match plan.output.width {
        Some(w) => super::layout::wrap(&s, w),
        None => s,
    }
}

/// `--list-devices`
pub fn device_list(reg: &DeviceRegistry) -> String {
    let mut t = new_table(&[
        "Device",
        "Vendor",
        "Cube bf16 (TFLOPS, eff.)",
        "Memory (GiB)",
        "HBM BW (TiB/s, eff.)",
        "Comm Grid",
        "Max devices",
        "Source",
    ]);
    for (p, origin) in reg.profiles() {
        t.add_row(vec![
            p.name.clone(),
            p.vendor.clone(),
            format!("{:.2}", p.display_cube_tflops()),
            format!("{:.1}", p.memory_gib()),
            format!("{:.3}", p.display_hbm_tib_s()),
            p.grid_shape(),
            p.grid_size().to_string(),
            origin.to_string(),
        ]);
    }
    format!("{t}\n")
}

/// `--list-models`
pub fn model_list() -> String {
    let mut t = new_table(&["Model", "Type", "Architecture"]);
    for m in crate::model::catalog::all() {
        t.add_row(vec![m.id.clone(), m.model_type.clone(), m.summary()]);
    }
    format!("{t}\nAlso accepted: a directory with a config.json, a path to a config.json, or a model in the local Hugging Face cache.\n")
}

// ---- The deployment plane (the Pareto frontier and --compare-disagg) ----

/// The frontier's points, slowest per user first, the chosen one marked.
fn frontier_block(f: &Frontier, w: Option<usize>) -> String {
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
    let mut t =
        new_table(&["deployment", "configuration", "devices", "tok/s/user", "tok/s/device", "TTFT (ms)", "TPOT (ms)", "SLO met", ""]);
    for (i, p) in on {
        t.add_row(vec![
            p.kind.label().to_string(),
            p.label.clone(),
            p.devices.to_string(),
            format!("{:.2}", p.tokens_per_s_per_user),
            format!("{:.2}", p.tokens_per_s_per_device),
            format!("{:.2}", p.ttft_ms),
            format!("{:.2}", p.tpot_ms),
            if p.meets_slo { "yes" } else { "no" }.to_string(),
            if f.chosen == Some(i) { "<- chosen" } else { "" }.to_string(),
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    if f.chosen.is_some_and(|c| !f.points[c].on_frontier) {
        s += "The chosen deployment is off the frontier: the points that beat it on both axes miss the TTFT limit, or are P/D plans that fell short when simulated as one system (below).\n";
    }
    if f.chosen.is_none() {
        s += "No configuration meets the SLO: nothing is chosen.\n";
    }
    s
}

/// The best of each kind, the winner per device and why, and the P/D plan's simulation.
fn comparison_block(plan: &Plan, dev: &DeviceResult, c: &AggVsDisagg) -> String {
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
