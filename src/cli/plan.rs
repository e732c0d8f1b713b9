//! Validation of [`RawArgs`] into a [`Plan`] (or one of the listing commands).

use super::args::RawArgs;
use crate::cost::{CompileOptions, EmbeddingTp};
use crate::hardware::{DeviceProfile, DeviceRegistry};
use crate::model::{self, ModelArch};
use crate::quant::{KvQuant, LinearQuant, NamedEnum, QuantConfig};
use crate::sim::Percentile;
use crate::workload::arrival::{ArrivalProcess, SharedPrefix, Trace};
use crate::workload::{LengthDistribution, Lengths, MAX_LENGTH};
use std::path::Path;

pub use crate::plan::*;

/// A rejected command line. `usage` errors exit with 2, runtime failures with 1.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    pub usage: bool,
    pub message: String,
}

fn usage(message: impl Into<String>) -> PlanError {
    PlanError { usage: true, message: message.into() }
}

/// What the command line asks for.
#[derive(Debug, Clone)]
pub enum Command {
    Run(Box<Plan>),
    ListDevices(DeviceRegistry),
    ListModels,
    ShowModel(Box<ModelArch>),
}

const MAX_BATCH: u32 = 1 << 20;
const MAX_BUDGET: u32 = 100_000_000;
const MAX_JOBS: u32 = 1024;

fn parse_length(flag: &str, raw: &str) -> Result<Option<u64>, PlanError> {
    let t = raw.trim();
    match t.parse::<i128>() {
        Ok(v) if v <= 0 => Err(usage(format!("{flag} {raw}: must be a positive number of tokens (1 to {MAX_LENGTH})"))),
        Ok(v) if v > MAX_LENGTH as i128 => Err(usage(format!("{flag} {raw}: too large; at most {MAX_LENGTH} tokens are modelled"))),
        Ok(v) => Ok(Some(v as u64)),
        Err(_) => {
            if t.parse::<f64>().is_ok() {
                return Err(usage(format!("{flag} {raw}: must be a whole number of tokens (1 to {MAX_LENGTH})")));
            }
            Ok(None)
        }
    }
}

fn dedup(v: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for &x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn model_id_ok(id: &str) -> bool {
    id.len() <= 256 && !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || "_/.-".contains(c))
}

/// Validate the raw arguments into a command.
pub fn build(raw: RawArgs) -> Result<Command, PlanError> {
    if let Some(path) = &raw.scenario {
        return crate::scenario::build_from_file(path, &raw);
    }
    build_checked(raw)
}

/// Validate arguments that do not name a scenario.
pub(crate) fn build_checked(raw: RawArgs) -> Result<Command, PlanError> {
    let mut warnings = Vec::new();
    // Device profiles first: --list-devices shows custom ones too.
    let mut registry = DeviceRegistry::builtin();
    for f in &raw.device_file {
        registry.add_file(f).map_err(|e| usage(e.to_string()))?;
    }
    if raw.list_devices {
        return Ok(Command::ListDevices(registry));
    }
    if raw.list_models {
        return Ok(Command::ListModels);
    }

    // ---- model ----
    let id = match (&raw.model_id, &raw.model_id_flag) {
        (Some(_), Some(_)) => return Err(usage("pass either a positional MODEL_ID or --model-id, not both")),
        (None, None) => {
            return Err(usage(
                "MODEL_ID is required: a catalog id such as Qwen/Qwen3-32B (see --list-models), a directory with a config.json, or a config.json path",
            ))
        }
        (Some(m), None) | (None, Some(m)) => m.clone(),
    };
    if !Path::new(&id).exists() && !model_id_ok(&id) {
        return Err(usage(format!(
            "MODEL_ID `{id}`: a model id may only contain letters, digits, `_`, `/`, `.` and `-` (at most 256 characters), or be an existing path"
        )));
    }
    let (model, model_source) = model::resolve_model(&id).map_err(|e| usage(e.to_string()))?;
    if raw.show_model {
        return Ok(Command::ShowModel(Box::new(model)));
    }

    // ---- logging / output basics ----
    let level = match raw.log_level.as_deref() {
        None => {
            if raw.verbose {
                "debug"
            } else if raw.quiet {
                "error"
            } else {
                "warning"
            }
        }
        Some(l) => {
            let l = l.to_lowercase();
            const LEVELS: [&str; 5] = ["debug", "info", "warning", "error", "critical"];
            if !LEVELS.contains(&l.as_str()) {
                return Err(usage(format!("--log-level {l}: not one of {}", LEVELS.join(", "))));
            }
            if l == "debug" {
                "debug"
            } else if l == "info" {
                "info"
            } else if l == "warning" {
                "warning"
            } else {
                "error"
            }
        }
    };
    let quiet = level == "error";

    // ---- devices ----
    let names: Vec<String> = if raw.device.is_empty() { vec!["TEST_DEVICE".to_string()] } else { raw.device.clone() };
    let mut devices: Vec<DeviceProfile> = Vec::new();
    for n in &names {
        let p = registry.get(n).map_err(|e| usage(e.to_string()))?;
        if !devices.iter().any(|d| d.name == p.name) {
            devices.push(p.clone());
        }
    }

    // ---- mode ----
    let ratio = raw.enable_optimize_prefill_decode_ratio;
    if ratio && raw.disagg {
        return Err(usage(
            "--enable-optimize-prefill-decode-ratio cannot be combined with --disagg: P/D ratio planning runs both phases itself; drop --disagg",
        ));
    }
    if !ratio && (raw.prefill_devices_per_instance.is_some() || raw.decode_devices_per_instance.is_some()) {
        return Err(usage("--prefill-devices-per-instance / --decode-devices-per-instance require --enable-optimize-prefill-decode-ratio"));
    }
    let num_devices_given = raw.num_devices;
    let num_devices = raw.num_devices.unwrap_or(1);
    let mode = if ratio {
        let (Some(p), Some(d)) = (raw.prefill_devices_per_instance, raw.decode_devices_per_instance) else {
            return Err(usage(
                "--enable-optimize-prefill-decode-ratio needs both --prefill-devices-per-instance and --decode-devices-per-instance",
            ));
        };
        if let Some(n) = num_devices_given {
            if n < p + d {
                return Err(usage(format!(
                    "--num-devices {n} cannot hold one prefill instance ({p} devices) and one decode instance ({d} devices); use at least {} or smaller instances",
                    p + d
                )));
            }
        }
        Mode::PdRatio { prefill_devices: p, decode_devices: d, total_devices: num_devices_given }
    } else if raw.disagg {
        let (p, d) = (raw.ttft_limits.is_some(), raw.tpot_limits.is_some());
        if !p && !d {
            return Err(usage("--disagg needs --ttft-limits (prefill search) and/or --tpot-limits (decode search); neither was given"));
        }
        Mode::Disaggregation { prefill: p, decode: d }
    } else {
        Mode::Aggregation
    };
    if ratio && raw.ttft_limits.is_none() {
        warnings.push("P/D ratio mode without --ttft-limits: prefill instances are searched without a TTFT limit".into());
    }

    // Largest instance a device profile must model.
    let needed = match &mode {
        Mode::PdRatio { prefill_devices, decode_devices, total_devices } => {
            (*prefill_devices).max(*decode_devices).max(total_devices.unwrap_or(0))
        }
        _ => num_devices,
    };
    for d in &devices {
        if d.grid_size() < needed as u64 {
            return Err(usage(format!(
                "device profile {} cannot model {needed} devices (its communication grid {} holds {}); use at most {} devices or another profile",
                d.name,
                d.grid_shape(),
                d.grid_size(),
                d.grid_size()
            )));
        }
    }

    // ---- quantization ----
    let parse_q = |flag: &str, v: &Option<String>| -> Result<Option<LinearQuant>, PlanError> {
        v.as_deref().map(|s| LinearQuant::parse_named(s).map_err(|e| usage(format!("{flag}: {e}")))).transpose()
    };
    let linear = parse_q("--quantize-linear-action", &raw.quantize_linear_action)?.unwrap_or(LinearQuant::W8A8Dynamic);
    let non_expert = parse_q("--quantize-non-expert-linear-action", &raw.quantize_non_expert_linear_action)?;
    let kv = raw
        .quantize_attention_action
        .as_deref()
        .map(|s| KvQuant::parse_named(s).map_err(|e| usage(format!("--quantize-attention-action: {e}"))))
        .transpose()?
        .unwrap_or(KvQuant::Disabled);
    let mxfp4_group_size = raw.mxfp4_group_size.unwrap_or(32);
    if raw.mxfp4_group_size.is_some() && linear != LinearQuant::Mxfp4 && non_expert != Some(LinearQuant::Mxfp4) {
        warnings.push(format!("--mxfp4-group-size {mxfp4_group_size} has no effect without MXFP4 quantization"));
    }
    let quant = QuantConfig { linear, non_expert, kv, mxfp4_group_size };

    // ---- compile ----
    let mut compile = CompileOptions { enabled: raw.compile, ..Default::default() };
    if let Some(opts) = &raw.compilation_config {
        const CHOICES: [&str; 4] =
            ["enable_multistream", "enable_sequence_parallel", "enable_matmul_allreduce", "enable_dispatch_ffn_combine"];
        for o in opts {
            let n = o.trim().replace('-', "_").to_lowercase();
            match n.as_str() {
                "enable_multistream" => compile.multistream = true,
                "enable_sequence_parallel" => compile.sequence_parallel = true,
                "enable_matmul_allreduce" => compile.matmul_allreduce = true,
                "enable_dispatch_ffn_combine" => compile.dispatch_ffn_combine = true,
                _ => return Err(usage(format!("--compilation-config `{o}` is not one of {}", CHOICES.join(", ")))),
            }
        }
        if !raw.compile {
            warnings.push("--compilation-config options only apply with --compile; they are ignored".into());
        }
    }
    if raw.compile_allow_graph_break && !raw.compile {
        warnings.push("--compile-allow-graph-break has no effect without --compile".into());
    }

    // ---- lengths ----
    let hit = raw.prefix_cache_hit_rate.unwrap_or(0.0);
    if !(0.0..1.0).contains(&hit) {
        return Err(usage(format!("--prefix-cache-hit-rate {hit} is not in the valid range [0, 1)")));
    }
    // A trace gives every request's lengths; its means size the budgets and the formulas.
    let trace_means = match raw.arrival.as_deref() {
        Some([kind, file]) if kind.eq_ignore_ascii_case("trace") => {
            let t = Trace::load(Path::new(file)).map_err(|e| usage(e.to_string()))?;
            Some(t.mean_lengths())
        }
        _ => None,
    };
    if let Some((mi, mo)) = trace_means {
        for (given, flag, mean) in [
            (raw.input_length.is_some() || raw.length_distribution.is_some(), "--input-length/--length-distribution", mi),
            (raw.output_length.is_some(), "--output-length", mo),
        ] {
            if given {
                warnings
                    .push(format!("{flag} is not used with --arrival trace: the trace gives every request's lengths (mean {mean} tokens)"));
            }
        }
    }
    let input = match (&raw.input_length, &raw.length_distribution, trace_means) {
        (_, _, Some((mi, _))) => Lengths::Fixed(mi),
        (Some(_), Some(_), None) => return Err(usage(
            "give either --input-length or --length-distribution, not both (a distribution file can also be passed as --input-length FILE)",
        )),
        (None, None, None) => return Err(usage("--input-length is required: a number of tokens or a length-distribution YAML file")),
        (None, Some(f), None) if f.is_empty() => Lengths::Distribution(LengthDistribution::builtin()),
        (None, Some(f), None) => {
            Lengths::Distribution(LengthDistribution::load(Path::new(f), "--length-distribution").map_err(|e| usage(e.to_string()))?)
        }
        (Some(v), None, None) => match parse_length("--input-length", v)? {
            Some(n) => Lengths::Fixed(n),
            None => {
                let p = Path::new(v);
                if !p.is_file() {
                    return Err(usage(format!(
                        "--input-length {v}: neither a positive number of tokens nor an existing length-distribution file"
                    )));
                }
                Lengths::Distribution(LengthDistribution::load(p, "--input-length").map_err(|e| usage(e.to_string()))?)
            }
        },
    };
    let output_bins_mean = match &input {
        Lengths::Distribution(d) => d.output_mean(),
        Lengths::Fixed(_) => None,
    };
    let output = match (&raw.output_length, trace_means, output_bins_mean) {
        (_, Some((_, mo)), _) => Lengths::Fixed(mo),
        (given, None, Some(m)) => {
            if let Some(v) = given {
                warnings.push(format!(
                    "--output-length {v} is not used: the length distribution gives output lengths (output_bins, mean {m} tokens)"
                ));
            }
            Lengths::Fixed(m)
        }
        (None, None, None) => return Err(usage("--output-length is required: the number of generated tokens per request")),
        (Some(v), None, None) => match parse_length("--output-length", v)? {
            Some(n) => Lengths::Fixed(n),
            None => return Err(usage(format!("--output-length {v}: must be a positive number of tokens (1 to {MAX_LENGTH})"))),
        },
    };
    let (input_label, output_label) = match (trace_means, output_bins_mean) {
        (Some((mi, mo)), _) => (format!("from the trace (mean {mi})"), format!("from the trace (mean {mo})")),
        (None, Some(m)) => (input.describe(), format!("from the distribution's output_bins (mean {m})")),
        (None, None) => (input.describe(), output.describe()),
    };
    if let (Lengths::Fixed(i), Lengths::Fixed(o), Some(maxpos)) = (&input, &output, model.max_position_embeddings) {
        if i + o > maxpos {
            warnings.push(format!(
                "input {i} + output {o} tokens exceed the model's max_position_embeddings ({maxpos}); results extrapolate beyond its context window"
            ));
        }
    }

    // ---- images ----
    let images = match (raw.image_height, raw.image_width) {
        (None, None) => {
            if raw.image_batch_size.is_some() {
                warnings.push("--image-batch-size is ignored without --image-height and --image-width".into());
            }
            None
        }
        (Some(h), Some(w)) => {
            if model.vision.is_none() {
                warnings.push(format!("--image-height/--image-width are ignored: {} has no vision tower", model.id));
                None
            } else {
                if h > 16384 || w > 16384 {
                    return Err(usage(format!("--image-height {h} / --image-width {w}: at most 16384 pixels per side")));
                }
                Some(ImageSpec { height: h, width: w, per_request: raw.image_batch_size.unwrap_or(1) })
            }
        }
        (h, w) => {
            let (given, missing) = match (h, w) {
                (Some(h), _) => (format!("--image-height {h}"), "--image-width"),
                (_, Some(w)) => (format!("--image-width {w}"), "--image-height"),
                _ => unreachable!(),
            };
            return Err(usage(format!("{given} needs {missing} too: image sizes are given together")));
        }
    };

    // ---- SLO ----
    let slo = Slo { ttft_ms: raw.ttft_limits, tpot_ms: raw.tpot_limits };

    // ---- MTP and speculative decoding ----
    let rates = raw.mtp_acceptance_rates.clone().unwrap_or_else(|| vec![0.9, 0.6, 0.4, 0.2]);
    for r in &rates {
        if !(0.0..=1.0).contains(r) {
            return Err(usage(format!("--mtp-acceptance-rates: {r} is not in [0, 1]")));
        }
    }
    let mtp = match &raw.num_mtp_tokens {
        None => vec![0],
        Some(v) => {
            if let Some(bad) = v.iter().find(|&&x| x > 9) {
                return Err(usage(format!("--num-mtp-tokens {bad}: must be between 0 and 9")));
            }
            dedup(v)
        }
    };
    let over: Vec<u32> = mtp.iter().copied().filter(|&m| m as usize > rates.len() + 1).collect();
    if !over.is_empty() {
        return Err(usage(format!(
            "--num-mtp-tokens: num_mtp_tokens candidates {over:?} exceed the supported mtp_acceptance_rate length ({} rates allow at most {}); give more --mtp-acceptance-rates",
            rates.len(),
            rates.len() + 1
        )));
    }
    if mtp.iter().any(|&m| m > 0) && model.mtp.is_none() {
        let with: Vec<String> = model::catalog::all().into_iter().filter(|m| m.mtp.is_some()).map(|m| m.id).collect();
        return Err(usage(format!(
            "--num-mtp-tokens: {} has no MTP (next-token prediction) layers; MTP needs a model that ships them, e.g. {}",
            model.id,
            with.join(", ")
        )));
    }
    let spec_flags_given = raw.num_speculative_tokens.is_some()
        || raw.acceptance_length.is_some()
        || raw.num_draft_layers.is_some()
        || raw.draft_model_config_path.is_some();
    let speculative = match &raw.speculative_method {
        None => {
            if spec_flags_given {
                return Err(usage(
                    "--num-speculative-tokens / --acceptance-length / --num-draft-layers / --draft-model-config-path need --speculative-method dflash|dspark",
                ));
            }
            if raw.dspark_markov_rank.is_some() || raw.dspark_markov_head.is_some() {
                return Err(usage("--dspark-markov-rank / --dspark-markov-head need --speculative-method dspark"));
            }
            None
        }
        Some(m) => {
            let method = SpeculativeMethod::parse_named(m).map_err(|e| usage(format!("--speculative-method: {e}")))?;
            if method == SpeculativeMethod::Dflash && (raw.dspark_markov_rank.is_some() || raw.dspark_markov_head.is_some()) {
                return Err(usage("--dspark-markov-rank / --dspark-markov-head need --speculative-method dspark"));
            }
            if mtp.iter().any(|&x| x > 0) {
                let name = if method == SpeculativeMethod::Dflash { "Dflash" } else { "DSpark" };
                return Err(usage(format!("{name} and MTP are mutually exclusive: drop --num-mtp-tokens or --speculative-method")));
            }
            let n = match raw.num_speculative_tokens.unwrap_or(0) {
                0 => 7,
                n if n > 63 => return Err(usage(format!("--num-speculative-tokens {n}: at most 63"))),
                n => n,
            };
            let block = n + 1;
            let acc = raw.acceptance_length.unwrap_or(5.0);
            let hi = if method == SpeculativeMethod::Dflash { (block - 1) as f64 } else { block as f64 };
            let acceptance = acc.clamp(0.0, hi);
            if acceptance != acc {
                warnings.push(format!("--acceptance-length {acc} is outside [0, {hi}] for a block of {block}; {acceptance} is used"));
            }
            let head = match &raw.dspark_markov_head {
                None => None,
                Some(h) => {
                    let h = h.to_lowercase();
                    if !["vanilla", "gated", "rnn"].contains(&h.as_str()) {
                        return Err(usage(format!("--dspark-markov-head {h}: not one of vanilla, gated, rnn")));
                    }
                    Some(h)
                }
            };
            Some(Speculative {
                method,
                block,
                acceptance,
                draft_layers: raw.num_draft_layers.unwrap_or(0),
                markov_rank: if method == SpeculativeMethod::Dspark { Some(raw.dspark_markov_rank.unwrap_or(256)) } else { None },
                markov_head: if method == SpeculativeMethod::Dspark { Some(head.unwrap_or_else(|| "vanilla".into())) } else { None },
            })
        }
    };

    // ---- search space ----
    let (pdev, ddev) = match &mode {
        Mode::PdRatio { prefill_devices, decode_devices, .. } => (*prefill_devices, *decode_devices),
        _ => (num_devices, num_devices),
    };
    let limit = pdev.max(ddev);
    let limit_flag = if matches!(mode, Mode::PdRatio { .. }) { "the larger per-instance device count" } else { "--num-devices" };
    let mut check_sizes = |flag: &str, v: &Option<Vec<u32>>| -> Result<Option<Vec<u32>>, PlanError> {
        let Some(v) = v else { return Ok(None) };
        if let Some(bad) = v.iter().find(|&&x| x > limit) {
            return Err(usage(format!(
                "{flag} contains {bad}, which exceeds {limit_flag} ({limit}); use values ≤ {limit} or raise the device count"
            )));
        }
        let d = dedup(v);
        if d.len() != v.len() {
            warnings.push(format!("{flag}: duplicate values removed"));
        }
        Ok(Some(d))
    };
    let tp = check_sizes("--tp-sizes", &raw.tp_sizes)?;
    let ep = check_sizes("--ep-sizes", &raw.ep_sizes)?;
    let moe_dp = check_sizes("--moe-dp-sizes", &raw.moe_dp_sizes)?;
    let dcp = check_sizes("--dcp-sizes", &raw.dcp_sizes)?;
    // Ignored for a dense model, and then they must not change the TP default either.
    let (ep, moe_dp) = if !model.is_moe() && (ep.is_some() || moe_dp.is_some()) {
        warnings.push(format!("--ep-sizes/--moe-dp-sizes are ignored: {} is a dense model", model.id));
        (None, None)
    } else {
        (ep, moe_dp)
    };
    // None of the three given ⇒ TP search over the default range.
    let tp = if tp.is_none() && ep.is_none() && moe_dp.is_none() { Some(vec![]) } else { tp };
    let (batch_min, batch_max) = match raw.batch_range.as_deref() {
        None => (1, None),
        Some([max]) => (1, Some(*max)),
        Some([min, max]) => {
            if min > max {
                return Err(usage(format!("--batch-range {min} {max}: MIN must not exceed MAX; use --batch-range {max} {min}")));
            }
            (*min, Some(*max))
        }
        Some(v) => return Err(usage(format!("--batch-range takes MAX or MIN MAX (1 or 2 values), got {} values", v.len()))),
    };
    if let Some(m) = batch_max {
        if m > MAX_BATCH {
            return Err(usage(format!("--batch-range {m}: at most {MAX_BATCH} requests per replica")));
        }
    }
    let strategy = match raw.concurrency_search_strategy.as_deref() {
        None => SearchStrategy::Exponential,
        Some(s) => SearchStrategy::parse_named(s).map_err(|e| usage(format!("--concurrency-search-strategy: {e}")))?,
    };
    let mut budgets = raw.max_batched_tokens.clone();
    if let Some(old) = &raw.max_prefill_tokens {
        if budgets.is_some() {
            return Err(usage("give --max-batched-tokens only (--max-prefill-tokens is its deprecated name)"));
        }
        warnings.push("WARNING: --max-prefill-tokens is deprecated; use --max-batched-tokens instead.".into());
        budgets = Some(old.clone());
    }
    if let Some(b) = &budgets {
        if let Some(bad) = b.iter().find(|&&x| x > MAX_BUDGET) {
            return Err(usage(format!("--max-batched-tokens {bad}: at most {MAX_BUDGET} tokens")));
        }
        if b.len() > 1 && !matches!(mode, Mode::Aggregation) {
            return Err(usage(format!(
                "--max-batched-tokens {}: several budgets (the chunk-budget study) apply to aggregation mode; give one value with --disagg or P/D ratio planning",
                b.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ")
            )));
        }
    }
    let max_batched_tokens = budgets.map(|b| dedup(&b).into_iter().map(u64::from).collect());

    let combos = tp.as_ref().map_or(1, |v| if v.is_empty() { pow2_count(limit) } else { v.len() })
        * ep.as_ref().map_or(1, |v| if v.is_empty() { pow2_count(limit) } else { v.len() })
        * moe_dp.as_ref().map_or(1, |v| if v.is_empty() { pow2_count(limit) } else { v.len() })
        * dcp.as_ref().map_or(1, |v| if v.is_empty() { pow2_count(limit) } else { v.len() })
        * mtp.len();
    let max_combos = raw.max_search_combinations.unwrap_or(100);
    if max_combos > 0 && combos as u64 > max_combos {
        warnings.push(format!(
            "[WARNING] Large number of parallel search combinations ({combos}) exceeds --max-search-combinations ({max_combos})."
        ));
    }

    // ---- serving ----
    let reserved = raw.reserved_memory_gb.unwrap_or(10.0);
    if reserved < 0.0 {
        return Err(usage(format!("--reserved-memory-gb {reserved}: must be ≥ 0")));
    }
    for d in &devices {
        if reserved >= d.memory_gib() {
            return Err(usage(format!(
                "--reserved-memory-gb {reserved} leaves nothing of {}'s {:.0} GiB; use a smaller reserve",
                d.name,
                d.memory_gib()
            )));
        }
    }
    let serving_cost = raw.serving_cost.unwrap_or(0.0);
    if serving_cost < 0.0 {
        return Err(usage(format!("--serving-cost {serving_cost}: must be ≥ 0 ms")));
    }
    if serving_cost > 0.0 && matches!(mode, Mode::Aggregation) {
        warnings.push("--serving-cost applies to disaggregation and P/D ratio modes only; it is ignored in aggregation".into());
    }
    let word_embedding_tp = match raw.word_embedding_tp.as_deref().map(str::to_lowercase).as_deref() {
        None => None,
        Some("col") => Some(EmbeddingTp::Col),
        Some("row") => Some(EmbeddingTp::Row),
        Some(o) => return Err(usage(format!("--word-embedding-tp {o}: not one of col, row"))),
    };
    let kv_block_size = raw.kv_block_size.unwrap_or(128);
    if kv_block_size > 65536 {
        return Err(usage(format!("--kv-block-size {kv_block_size}: at most 65536 tokens")));
    }

    // ---- engine ----
    let engine = match raw.engine.as_deref() {
        None => EngineKind::Sim,
        Some(e) => EngineKind::parse_named(e).map_err(|m| usage(format!("--engine: {m}")))?,
    };
    let tpot_definition = match raw.tpot_definition.as_deref() {
        None if engine == EngineKind::Analytic => TpotDefinition::Amortized,
        None => TpotDefinition::InterToken,
        Some(s) => TpotDefinition::parse(s).map_err(|e| usage(format!("--tpot-definition: {e}")))?,
    };
    let sim = sim_options(&raw, engine, &input, &search_budgets(&raw), &mut warnings)?;
    match raw.performance_model.as_deref().map(str::to_lowercase).as_deref() {
        None | Some("analytic") => {}
        Some("profiling") => {
            if raw.profiling_database_path.is_none() {
                return Err(usage("--performance-model profiling requires --profiling-database-path DIR"));
            }
            return Err(usage(
                "--performance-model profiling: measured operator databases are not supported by this build; use --performance-model analytic",
            ));
        }
        Some(o) => return Err(usage(format!("--performance-model {o}: not one of analytic, profiling"))),
    }

    // ---- output ----
    let format = match raw.output.as_deref() {
        None => OutputFormat::Table,
        Some(f) => OutputFormat::parse_named(f).map_err(|e| usage(format!("--output: {e}")))?,
    };
    let jobs = raw.jobs.unwrap_or(8);
    if jobs > MAX_JOBS {
        return Err(usage(format!("--jobs {jobs}: at most {MAX_JOBS}")));
    }
    let plot = if raw.plot {
        Some(true)
    } else if raw.no_plot {
        Some(false)
    } else {
        None
    };
    if raw.plot && devices.len() > 1 {
        warnings.push("--plot draws charts for a single device; with several devices the cross-hardware tables are printed instead".into());
    }

    let plan = Plan {
        model,
        model_source,
        devices,
        num_devices,
        workload: Workload { input, output, prefix_cache_hit_rate: hit, images, input_label, output_label },
        mode,
        slo,
        quant,
        compile,
        search: SearchSpace {
            tp,
            ep,
            moe_dp,
            dcp,
            mtp,
            batch_min,
            batch_max,
            strategy,
            max_batched_tokens,
            sweep_all_layouts: raw.sweep_all_layouts,
        },
        serving: ServingOptions {
            reserved_memory_gb: reserved,
            serving_cost_ms: serving_cost,
            mtp_acceptance_rates: rates,
            speculative,
            shared_expert_tp: raw.enable_shared_expert_tp,
            word_embedding_tp,
            kv_block_size,
            token_budget_slack: slack(&raw)?,
            tpot_definition,
            causal_attention: raw.causal_attention,
        },
        sim,
        engine,
        output: OutputOptions {
            format,
            file: raw.output_file.clone(),
            top: raw.top.map(|t| t as usize),
            plot,
            dump_original: raw.dump_original_results,
            chrome_trace: raw.chrome_trace_file.clone(),
            plot_file: match &raw.plot_file {
                Some(p) if p.extension().is_none_or(|e| !e.eq_ignore_ascii_case("svg")) => {
                    return Err(usage(format!("--plot-file {}: charts are written as SVG; give a path ending in .svg", p.display())))
                }
                other => other.clone(),
            },
            quiet,
        },
        jobs: jobs as usize,
        seed: raw.seed.unwrap_or(0),
        warnings,
    };
    crate::search::check_candidates(&plan).map_err(usage)?;
    Ok(Command::Run(Box::new(plan)))
}

fn pow2_count(n: u32) -> usize {
    (32 - n.leading_zeros()) as usize
}

fn search_budgets(raw: &RawArgs) -> Option<Vec<u32>> {
    raw.max_batched_tokens.clone().or_else(|| raw.max_prefill_tokens.clone())
}

fn slack(raw: &RawArgs) -> Result<f64, PlanError> {
    let v = raw.token_budget_slack.unwrap_or(0.15);
    if !(0.0..=1.0).contains(&v) {
        return Err(usage(format!("--token-budget-slack {v}: must be between 0 and 1")));
    }
    Ok(v)
}

/// Simulator options; flags that only the simulator reads are refused with the analytic engine.
fn sim_options(
    raw: &RawArgs,
    engine: EngineKind,
    input: &Lengths,
    budgets: &Option<Vec<u32>>,
    warnings: &mut Vec<String>,
) -> Result<SimOptions, PlanError> {
    let sim_flags: Vec<&str> = [
        (raw.arrival.is_some(), "--arrival"),
        (raw.request_rate.is_some(), "--request-rate"),
        (raw.burstiness.is_some(), "--burstiness"),
        (raw.num_requests.is_some(), "--num-requests"),
        (raw.max_concurrency.is_some(), "--max-concurrency"),
        (raw.max_num_seqs.is_some(), "--max-num-seqs"),
        (raw.no_chunked_prefill, "--no-chunked-prefill"),
        (raw.slo_percentile.is_some(), "--slo-percentile"),
        (raw.prefix_groups.is_some(), "--prefix-groups"),
        (raw.prefix_length.is_some(), "--prefix-length"),
        (raw.pd_routing.is_some(), "--pd-routing"),
    ]
    .iter()
    .filter(|(given, _)| *given)
    .map(|(_, f)| *f)
    .collect();
    if engine == EngineKind::Analytic && !sim_flags.is_empty() {
        return Err(usage(format!("{} only apply to the simulator; drop them or use --engine sim (or compare)", sim_flags.join(", "))));
    }
    let rate = |name: &str| -> Result<f64, PlanError> {
        match raw.request_rate {
            None => Err(usage(format!("--arrival {name} needs --request-rate (requests per second)"))),
            Some(r) if r <= 0.0 || r > 1e6 => Err(usage(format!("--request-rate {r}: must be a positive rate up to 1000000 req/s"))),
            Some(r) => Ok(r),
        }
    };
    let arrival = match raw.arrival.as_deref() {
        None => ArrivalProcess::Closed,
        Some(v) => {
            let kind = v[0].to_lowercase();
            if kind != "trace" && v.len() > 1 {
                return Err(usage(format!("--arrival {}: only `trace` takes a FILE", v.join(" "))));
            }
            match kind.as_str() {
                "closed" => ArrivalProcess::Closed,
                "burst" => ArrivalProcess::Burst,
                "poisson" => ArrivalProcess::Poisson { rate: rate("poisson")? },
                "gamma" => {
                    let b = raw.burstiness.unwrap_or(1.0);
                    if b <= 0.0 || b > 1000.0 {
                        return Err(usage(format!("--burstiness {b}: must be positive (1 = Poisson, below 1 = burstier), at most 1000")));
                    }
                    ArrivalProcess::Gamma { rate: rate("gamma")?, burstiness: b }
                }
                "trace" => {
                    let Some(f) = v.get(1) else {
                        return Err(usage("--arrival trace needs a FILE (CSV or JSON Lines of arrival_s, input_tokens, output_tokens)"));
                    };
                    ArrivalProcess::Trace(Trace::load(Path::new(f)).map_err(|e| usage(e.to_string()))?)
                }
                other => return Err(usage(format!("--arrival `{other}` is not one of closed, burst, poisson, gamma, trace FILE"))),
            }
        }
    };
    if raw.request_rate.is_some() && !matches!(arrival, ArrivalProcess::Poisson { .. } | ArrivalProcess::Gamma { .. }) {
        warnings.push("--request-rate only applies to --arrival poisson or gamma; it is ignored".into());
    }
    if raw.burstiness.is_some() && !matches!(arrival, ArrivalProcess::Gamma { .. }) {
        warnings.push("--burstiness only applies to --arrival gamma; it is ignored".into());
    }
    if (raw.num_requests.is_some() || raw.max_concurrency.is_some()) && !arrival.is_open() {
        warnings.push("--num-requests / --max-concurrency apply to open-loop arrivals (poisson, gamma, trace); they are ignored".into());
    }
    let slo_percentile = match raw.slo_percentile.as_deref() {
        None => Percentile::Mean,
        Some(p) => Percentile::parse_named(p).map_err(|e| usage(format!("--slo-percentile: {e}")))?,
    };
    let shared_prefix = match (raw.prefix_groups, raw.prefix_length) {
        (None, None) => None,
        (Some(g), Some(l)) => Some(SharedPrefix { groups: g, length: l as u64 }),
        _ => return Err(usage("--prefix-groups and --prefix-length must be given together")),
    };
    let chunked_prefill = !raw.no_chunked_prefill;
    if !chunked_prefill {
        if let Some(b) = budgets {
            let longest = input.max_effective(0.0);
            if let Some(&small) = b.iter().find(|&&x| (x as u64) < longest) {
                return Err(usage(format!(
                    "--no-chunked-prefill with --max-batched-tokens {small}: prompts of up to {longest} tokens cannot be scheduled whole; raise the budget or allow chunked prefill"
                )));
            }
        }
    }
    Ok(SimOptions {
        arrival,
        num_requests: raw.num_requests.map(u64::from),
        max_concurrency: raw.max_concurrency.map(u64::from),
        max_num_seqs: raw.max_num_seqs.map(u64::from),
        chunked_prefill,
        slo_percentile,
        shared_prefix,
        routing: match raw.pd_routing.as_deref() {
            None => crate::sim::Routing::LeastLoaded,
            Some(r) => crate::sim::Routing::parse_named(r).map_err(|e| usage(format!("--pd-routing: {e}")))?,
        },
    })
}
