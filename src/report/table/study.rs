//! The studies printed beside a phase's table: the simulator's latency percentiles and run
//! figures of the best row, `--engine compare` (simulated against analytic figures) and the
//! chunk-budget study.

use super::layout::{f2, fit, new_table};
use crate::outcome::{Phase, PhaseResult, Row};
use crate::plan::Plan;
use std::fmt::Write;

/// Latency percentiles and simulator figures of the best simulated row.
pub(super) fn sim_block(plan: &Plan, r: &Row) -> String {
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
            (a, false) if overloaded(a, sm) => {
                " (open loop overloaded: requests arrive faster than they are served, so the queue grows however long the run; rates over the whole run, drain included — lower --request-rate or add capacity)"
            }
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
pub(super) fn compare_table(p: &PhaseResult, top: Option<usize>, w: Option<usize>) -> String {
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
pub(super) fn sweep_block(p: &PhaseResult, w: Option<usize>) -> String {
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

/// An open loop whose offered rate exceeds what the run served by more than a tenth: no
/// longer run reaches a steady window, so more requests are not the advice.
fn overloaded(a: &crate::workload::arrival::ArrivalProcess, sm: &crate::outcome::SimSummary) -> bool {
    use crate::workload::arrival::ArrivalProcess::{Constant, Gamma, Poisson};
    let offered = match a {
        Poisson { rate } | Constant { rate } | Gamma { rate, .. } => *rate,
        _ => return false,
    };
    sm.window_s > 0.0 && (sm.measured_requests as f64 / sm.window_s) < 0.9 * offered
}
