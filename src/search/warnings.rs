//! What the search's results need said beside them (on stderr and in the JSON `warnings`):
//! a best row whose simulation never settled, a best row outside what the serving engine's
//! calibration was fitted on (concurrency per replica, context, model family, device), and a
//! device whose measured kernel tables the simulated engine's kernels could not use.

use crate::hardware::DeviceProfile;
use crate::outcome::{DeviceResult, Row};
use crate::plan::{EngineKind, Plan, ServingEngine};
use crate::quant::NamedEnum;

/// The warnings of a finished search, in device order.
pub fn after_search(plan: &Plan, devices: &[DeviceResult]) -> Vec<String> {
    let mut out = Vec::new();
    for (profile, result) in plan.devices.iter().zip(devices) {
        for phase in &result.phases {
            let Some(best) = phase.best.first() else { continue };
            if best.sim.as_ref().is_some_and(|s| !s.converged && !s.abandoned) {
                out.push(format!(
                    "{}: the best {} row ({}) did not reach a steady state within the simulation's window limit; its figures are from an unsettled run (give --num-requests to simulate more requests)",
                    result.device, format!("{:?}", phase.phase).to_lowercase(), best.parallel
                ));
            }
            if plan.engine != EngineKind::Analytic {
                out.extend(outside_calibration(plan, profile, best));
            }
        }
        out.extend(roofline_on_tables(plan, profile));
    }
    out.dedup();
    out
}

/// The family of a model id: its name without the organisation, the size and what follows
/// (`Qwen/Qwen3-32B` → `qwen3`, `openai/gpt-oss-120b` → `gpt-oss`; Meta's `Meta-Llama-3.1-8B`
/// and a republished `nvidia/Llama-3.1-8B-Instruct-FP8` → `llama-3.1`).
pub fn model_family(id: &str) -> String {
    let id = id.to_ascii_lowercase();
    let name = id.rsplit('/').next().unwrap_or(&id);
    let name = name.strip_prefix("meta-").unwrap_or(name);
    let is_size = |t: &str| {
        let t = t.strip_prefix('a').unwrap_or(t);
        t.len() > 1 && (t.ends_with('b') || t.ends_with('m')) && t[..t.len() - 1].chars().all(|c| c.is_ascii_digit() || c == '.')
    };
    let kept: Vec<&str> = name.split('-').take_while(|t| !is_size(t)).collect();
    kept.join("-")
}

/// Where the best row lies outside the fit of the simulated engine's calibration on `device`.
fn outside_calibration(plan: &Plan, device: &DeviceProfile, best: &Row) -> Vec<String> {
    let engine = plan.serving_engine(device);
    if engine == ServingEngine::Msmodeling || !plan.engines.calibrated {
        return Vec::new();
    }
    let profile = plan.engines.get(engine.name());
    let Some(entry) = profile.device(&device.name) else {
        return vec![format!(
            "{}: the {engine} calibration has no entry for this device; its default overheads (fitted on {}) are extrapolated to it",
            device.name,
            profile.devices.iter().map(|d| d.device.as_str()).collect::<Vec<_>>().join(", ")
        )];
    };
    let Some(fit) = &entry.fit else { return Vec::new() };
    let mut out = Vec::new();
    let family = model_family(&plan.model.id);
    if !fit.models.iter().any(|m| model_family(m) == family) {
        out.push(format!(
            "{}: the {engine} calibration was fitted on {} only; {} is of another family, so its engine overheads are extrapolated",
            device.name,
            fit.models.join(", "),
            plan.model.id
        ));
    }
    let per_replica = best.max_num_seqs.unwrap_or(best.batch_size as u64).min(best.concurrency.div_ceil(best.layout.dp.max(1) as u64));
    if let Some([lo, hi]) = fit.concurrency {
        if per_replica > hi || per_replica < lo {
            out.push(format!(
                "{}: the best row runs up to {per_replica} sequences per replica, but the {engine} calibration's runs span {lo} to {hi}: its per-sequence costs are extrapolated",
                device.name
            ));
        }
    }
    if let Some([lo, hi]) = fit.context {
        let context = plan.workload.input.max_effective(0.0) + plan.workload.output.max_effective(0.0);
        if context > hi || context < lo {
            out.push(format!(
                "{}: requests of up to {context} tokens (prompt + output) are outside the {lo} to {hi} of the {engine} calibration's runs: its costs are extrapolated",
                device.name
            ));
        }
    }
    out
}

/// A device with measured kernel tables whose simulated engine has none there: every kernel
/// is priced by the roofline instead.
fn roofline_on_tables(plan: &Plan, device: &DeviceProfile) -> Option<String> {
    use crate::hardware::kernels::KernelChoice;
    if device.kernel_system.is_empty() || plan.engine == EngineKind::Analytic || !matches!(plan.engines.kernels, KernelChoice::Builtin) {
        return None;
    }
    let effective = plan.effective(device);
    if effective.kernels.is_some() {
        return None;
    }
    Some(format!(
        "{}: its measured kernel tables ({}) have none for {}'s kernels, so every kernel is priced by the roofline (less accurate); --serving-engine vllm, sglang or trtllm uses the tables",
        device.name,
        device.kernel_system,
        plan.serving_engine(device)
    ))
}

#[cfg(test)]
mod tests {
    use super::model_family;

    /// Sizes drop out of a model id, the rest is its family. Fails if a size token survives
    /// (Qwen3-8B and Qwen3-32B would be different families) or a version is cut.
    #[test]
    fn families_drop_the_size() {
        assert_eq!(model_family("Qwen/Qwen3-32B"), "qwen3");
        assert_eq!(model_family("Qwen/Qwen3-30B-A3B"), "qwen3");
        assert_eq!(model_family("openai/gpt-oss-120b"), "gpt-oss");
        assert_eq!(model_family("meta-llama/Meta-Llama-3.1-8B"), model_family("nvidia/Llama-3.1-8B-Instruct-FP8"));
        assert_eq!(model_family("deepseek-ai/DeepSeek-V3"), "deepseek-v3");
    }
}
