//! `throughput-optimizer price`: a priced step as a table a person reads, or as JSON
//! (`{"device_ms", "host_ms", "step_ms", "operators": [{"name", "kind", "count", "ms",
//! "source"}], …}`). Both show the same numbers: the table rounds them for reading, the JSON
//! keeps them whole, so its operators add up to its `device_ms`.

use super::table::new_table;
use super::ExportError;
use crate::outcome::price::{Clocks, StepPrice};
use std::fmt::Write as _;

pub fn json(p: &StepPrice) -> Result<String, ExportError> {
    Ok(serde_json::to_string_pretty(p)? + "\n")
}

fn step_line(p: &StepPrice) -> String {
    let mut parts: Vec<String> = p.step.decodes.iter().map(|(b, l)| format!("decode {b} × 1 token at context {l}")).collect();
    for f in &p.step.prefills {
        let cached = if f.cached > 0 { format!(" after {} cached", f.cached) } else { String::new() };
        parts.push(format!("prefill {} × {} tokens{cached}", f.prompts, f.tokens));
    }
    parts.join(", ")
}

fn clocks_line(c: &Clocks) -> String {
    match *c {
        Clocks::Sustained { tensor_core_load, slowdown } => format!(
            "the step repeated back to back under the device's power limit: {slowdown:.3} × its burst time (tensor-core load {tensor_core_load:.2}; `--clocks burst` for full clocks)"
        ),
        Clocks::Unlimited => "at the kernel tables' burst clocks (no power limit measured for this device)".into(),
        Clocks::Burst => "at burst clocks (after idle)".into(),
    }
}

pub fn text(p: &StepPrice) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Step of {} on {} ({}): {}", p.model, p.device, p.serving_engine, step_line(p));
    // The MoE layout only means something where the step has routed experts (a dense model's
    // layout has no MoE-TP to show).
    let has_experts = p.operators.iter().any(|o| o.kind == crate::cost::priced::OperatorKind::MoeExperts);
    let moe = if has_experts && (p.ep > 1 || p.moe_tp != p.tp) { format!(" | EP={} | MOE-TP={}", p.ep, p.moe_tp) } else { String::new() };
    let _ = writeln!(out, "Layout: TP={} | DP={}{moe}    Quantization: {}", p.tp, p.dp, p.quantization);
    let _ = writeln!(out, "Execution profile: {}", p.execution_profile);
    let tables = p.kernel_tables.as_deref().unwrap_or("none (every operator on the roofline)");
    let _ = writeln!(out, "Kernel tables: {tables}");
    let mut t = new_table(&["operator", "kind", "calls", "ms", "% of device", "source"]);
    for o in &p.operators {
        let share = if p.device_ms > 0.0 { 100.0 * o.ms / p.device_ms } else { 0.0 };
        t.add_row(vec![
            o.name.clone(),
            o.kind.name().to_string(),
            format!("{}", o.count),
            format!("{:.4}", o.ms),
            format!("{share:.1}"),
            o.source.name().to_string(),
        ]);
    }
    let _ = writeln!(out, "{t}");
    let hidden = if p.overlap_scheduling {
        format!("{:.4} ms of it between steps, the rest overlapped with the device (overlapped scheduling)", p.host_gap_ms)
    } else {
        "added to the device time".to_string()
    };
    let _ = writeln!(out, "Device time: {:.4} ms, {}", p.device_ms, clocks_line(&p.clocks));
    let _ = writeln!(out, "Host time:   {:.4} ms, {hidden}", p.host_ms);
    let _ = writeln!(out, "Step time:   {:.4} ms", p.step_ms);
    for w in &p.warnings {
        let _ = writeln!(out, "note: {w}");
    }
    out
}
