//! The head of every result block: the banner, the Input Configuration (model, weights,
//! devices, lengths, limits, the engine and TPOT definition, the simulated serving engine) and
//! the Memory Info.

use super::layout::{banner, py_float, rule};
use crate::outcome::{DeviceResult, Report};
use crate::plan::{Mode, Plan};
use std::fmt::Write;

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
    if let Some(q) = &i.attention_projections {
        let _ = writeln!(s, "Attention projections: {q} (as the checkpoint stores them)");
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
    if let Some(line) = output_spread_line(plan, dev) {
        let _ = writeln!(s, "{line}");
    }
    s
}

/// How the simulator spread the output lengths, when the serving engine's benchmark client
/// honours end-of-sequence (`Plan::output_spread`).
fn output_spread_line(plan: &Plan, dev: &DeviceResult) -> Option<String> {
    use crate::quant::NamedEnum;
    if plan.engine == crate::plan::EngineKind::Analytic {
        return None;
    }
    let d = plan.devices.iter().find(|d| d.name == dev.device)?;
    let k = plan.output_spread(d)?;
    let engine = plan.serving_engine(d).name();
    Some(format!(
        "Output lengths: {} ± {k} tokens per request ({engine}'s benchmark client honours end-of-sequence; --ignore-eos for exact lengths)",
        plan.workload.output.mean_raw()
    ))
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
    let profile = plan.devices.iter().find(|d| d.name == dev.device);
    // The simulated engines size their KV pool by their own memory setting; the formulas (and
    // msmodeling) keep the reserve.
    let simulated = plan.engine != crate::plan::EngineKind::Analytic;
    if let Some((d, m)) = profile.filter(|_| simulated).and_then(|d| plan.effective(d).kv_memory.map(|m| (d, m))) {
        use crate::quant::NamedEnum;
        let rule = m.describe(plan.serving_engine(d).name(), plan.serving.gpu_memory_utilization);
        return format!("Memory Info:\nTotal device memory: {:.3} GiB\nKV cache: {rule}\n", dev.profile.memory_gib);
    }
    let reserved = match (plan.serving.gpu_memory_utilization, profile) {
        (Some(f), Some(d)) => {
            format!("{:.3} GiB (the {:.0} % --gpu-memory-utilization {f} leaves)", plan.serving.reserved_gib(d), (1.0 - f) * 100.0)
        }
        _ => format!("{:.3} GiB", plan.serving.reserved_memory_gb),
    };
    format!("Memory Info:\nTotal device memory: {:.3} GiB\nReserved memory: {reserved}\n", dev.profile.memory_gib)
}

/// The banner, Input Configuration and Memory Info every result block opens with.
pub(super) fn block_header(plan: &Plan, report: &Report, dev: &DeviceResult, width: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", banner(width));
    let _ = writeln!(s, "{}", rule(width));
    s += &input_configuration(plan, report, dev);
    let _ = writeln!(s, "{}", rule(width));
    s += &memory_info(plan, dev);
    let _ = writeln!(s, "{}", rule(width));
    s
}
