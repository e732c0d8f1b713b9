//! MTP, block speculative decoding and the serving options.

use super::{dedup, Warnings};
use crate::cli::args::RawArgs;
use crate::cost::EmbeddingTp;
use crate::error::Error;
use crate::hardware::DeviceProfile;
use crate::model::{self, ModelArch};
use crate::plan::{EngineKind, Mode, ServingOptions, Speculative, SpeculativeMethod, TpotDefinition};
use crate::quant::{ChoiceError, NamedEnum};

/// `--num-mtp-tokens` candidates and `--mtp-acceptance-rates`.
pub(crate) fn validate_mtp(raw: &RawArgs, model: &ModelArch) -> Result<(Vec<u32>, Vec<f64>), Error> {
    let rates = raw.mtp_acceptance_rates.clone().unwrap_or_else(|| vec![0.9, 0.6, 0.4, 0.2]);
    for r in &rates {
        if !(0.0..=1.0).contains(r) {
            return Err(Error::rejected("--mtp-acceptance-rates", r, format!("--mtp-acceptance-rates: {r} is not in [0, 1]")));
        }
    }
    // A draft is accepted only after its predecessors, so its marginal rate cannot exceed
    // theirs: the simulator and the formulas would read increasing rates differently.
    if let Some(w) = rates.windows(2).find(|w| w[1] > w[0]) {
        let list = rates.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" ");
        return Err(Error::rejected("--mtp-acceptance-rates", &list, format!(
            "--mtp-acceptance-rates {list}: the rates must not increase ({} after {}); each is the share of steps whose draft at that position is accepted, which needs every draft before it accepted",
            w[1], w[0]
        )));
    }
    let mtp = match &raw.num_mtp_tokens {
        None => vec![0],
        Some(v) => {
            if let Some(bad) = v.iter().find(|&&x| x > 9) {
                return Err(Error::invalid("--num-mtp-tokens", bad, "must be between 0 and 9"));
            }
            dedup(v)
        }
    };
    let over: Vec<u32> = mtp.iter().copied().filter(|&m| m as usize > rates.len() + 1).collect();
    if !over.is_empty() {
        return Err(Error::rejected("--num-mtp-tokens", format!("{over:?}"), format!(
            "--num-mtp-tokens: num_mtp_tokens candidates {over:?} exceed the supported mtp_acceptance_rate length ({} rates allow at most {}); give more --mtp-acceptance-rates",
            rates.len(),
            rates.len() + 1
        )));
    }
    if mtp.iter().any(|&m| m > 0) && model.mtp.is_none() {
        let with: Vec<String> = model::catalog::all().into_iter().filter(|m| m.mtp.is_some()).map(|m| m.id).collect();
        return Err(Error::rejected(
            "--num-mtp-tokens",
            &model.id,
            format!(
                "--num-mtp-tokens: {} has no MTP (next-token prediction) layers; MTP needs a model that ships them, e.g. {}",
                model.id,
                with.join(", ")
            ),
        ));
    }
    Ok((mtp, rates))
}

/// `--speculative-method` and the flags that tune it; `mtp` are the MTP candidates.
pub(crate) fn validate_speculative(raw: &RawArgs, mtp: &[u32], warnings: &mut Warnings) -> Result<Option<Speculative>, Error> {
    let spec_flags_given = raw.num_speculative_tokens.is_some()
        || raw.acceptance_length.is_some()
        || raw.num_draft_layers.is_some()
        || raw.draft_model_config_path.is_some();
    let markov_given = raw.dspark_markov_rank.is_some() || raw.dspark_markov_head.is_some();
    let Some(m) = &raw.speculative_method else {
        if spec_flags_given {
            return Err(Error::requires("--num-speculative-tokens", "--speculative-method",
                "--num-speculative-tokens / --acceptance-length / --num-draft-layers / --draft-model-config-path need --speculative-method dflash|dspark",
            ));
        }
        if markov_given {
            return Err(markov_needs_dspark());
        }
        return Ok(None);
    };
    let method = SpeculativeMethod::parse_choice(m).map_err(|e| Error::choice("--speculative-method", e))?;
    if method == SpeculativeMethod::Dflash && markov_given {
        return Err(markov_needs_dspark());
    }
    if mtp.iter().any(|&x| x > 0) {
        let name = if method == SpeculativeMethod::Dflash { "Dflash" } else { "DSpark" };
        return Err(Error::conflict(
            "--speculative-method",
            "--num-mtp-tokens",
            format!("{name} and MTP are mutually exclusive: drop --num-mtp-tokens or --speculative-method"),
        ));
    }
    let n = match raw.num_speculative_tokens.unwrap_or(0) {
        0 => 7,
        n if n > 63 => return Err(Error::invalid("--num-speculative-tokens", n, "at most 63")),
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
                return Err(Error::invalid("--dspark-markov-head", h, "not one of vanilla, gated, rnn"));
            }
            Some(h)
        }
    };
    let dspark = method == SpeculativeMethod::Dspark;
    Ok(Some(Speculative {
        method,
        block,
        acceptance,
        draft_layers: raw.num_draft_layers.unwrap_or(0),
        markov_rank: dspark.then(|| raw.dspark_markov_rank.unwrap_or(256)),
        markov_head: dspark.then(|| head.unwrap_or_else(|| "vanilla".into())),
    }))
}

/// What serving costs besides the model: reserved memory, P/D overhead, KV blocks, the TPOT
/// definition the SLO uses. `rates` and `speculative` come from [`validate_mtp`] and
/// [`validate_speculative`].
pub(crate) fn validate_serving(
    raw: &RawArgs,
    devices: &[DeviceProfile],
    mode: &Mode,
    engine: EngineKind,
    (rates, speculative): (Vec<f64>, Option<Speculative>),
    warnings: &mut Warnings,
) -> Result<ServingOptions, Error> {
    let gpu_memory_utilization = validate_memory_share(raw)?;
    let reserved = raw.reserved_memory_gb.unwrap_or(10.0);
    if reserved < 0.0 {
        return Err(Error::invalid("--reserved-memory-gb", reserved, "must be ≥ 0"));
    }
    for d in devices.iter().filter(|_| gpu_memory_utilization.is_none()) {
        if reserved >= d.memory_gib() {
            return Err(Error::rejected(
                "--reserved-memory-gb",
                reserved,
                format!("--reserved-memory-gb {reserved} leaves nothing of {}'s {:.0} GiB; use a smaller reserve", d.name, d.memory_gib()),
            ));
        }
    }
    let serving_cost = raw.serving_cost.unwrap_or(0.0);
    if serving_cost < 0.0 {
        return Err(Error::invalid("--serving-cost", serving_cost, "must be ≥ 0 ms"));
    }
    if serving_cost > 0.0 && matches!(mode, Mode::Aggregation) {
        warnings.push("--serving-cost applies to disaggregation and P/D ratio modes only; it is ignored in aggregation");
    }
    let word_embedding_tp = match raw.word_embedding_tp.as_deref().map(str::to_lowercase).as_deref() {
        None => None,
        Some("col") => Some(EmbeddingTp::Col),
        Some("row") => Some(EmbeddingTp::Row),
        Some(o) => return Err(Error::invalid("--word-embedding-tp", o, "not one of col, row")),
    };
    let kv_block_size = raw.kv_block_size;
    if let Some(kv_block_size) = kv_block_size.filter(|&b| b > 65536) {
        return Err(Error::invalid("--kv-block-size", kv_block_size, "at most 65536 tokens"));
    }
    let tpot_definition = match raw.tpot_definition.as_deref() {
        None if engine == EngineKind::Analytic => TpotDefinition::Amortized,
        None => TpotDefinition::InterToken,
        Some(s) => {
            crate::plan::TpotDefinition::parse(s).map_err(|_| Error::choice("--tpot-definition", ChoiceError::of::<TpotDefinition>(s)))?
        }
    };
    let token_budget_slack = raw.token_budget_slack.unwrap_or(0.15);
    if !(0.0..=1.0).contains(&token_budget_slack) {
        return Err(Error::invalid("--token-budget-slack", token_budget_slack, "must be between 0 and 1"));
    }
    Ok(ServingOptions {
        reserved_memory_gb: reserved,
        gpu_memory_utilization,
        serving_cost_ms: serving_cost,
        mtp_acceptance_rates: rates,
        speculative,
        shared_expert_tp: raw.enable_shared_expert_tp,
        word_embedding_tp,
        kv_block_size,
        token_budget_slack,
        tpot_definition,
        causal_attention: raw.causal_attention,
    })
}

fn markov_needs_dspark() -> Error {
    Error::requires(
        "--dspark-markov-rank",
        "--speculative-method dspark",
        "--dspark-markov-rank / --dspark-markov-head need --speculative-method dspark",
    )
}

/// `--gpu-memory-utilization F` in (0, 1], instead of (never beside) `--reserved-memory-gb`.
fn validate_memory_share(raw: &RawArgs) -> Result<Option<f64>, Error> {
    let Some(f) = raw.gpu_memory_utilization else { return Ok(None) };
    if !(f > 0.0 && f <= 1.0) {
        return Err(Error::invalid("--gpu-memory-utilization", f, "must be a share of device memory in (0, 1], e.g. 0.9"));
    }
    if raw.reserved_memory_gb.is_some() {
        return Err(Error::conflict(
            "--gpu-memory-utilization",
            "--reserved-memory-gb",
            "--gpu-memory-utilization and --reserved-memory-gb both size the reserve; give one",
        ));
    }
    Ok(Some(f))
}

/// `--calibration`: the built-in engine profiles, `none` (no per-device calibration), or files
/// that replace their engines' profiles.
pub(crate) fn validate_calibration(
    raw: &RawArgs,
    registry: &crate::hardware::DeviceRegistry,
) -> Result<crate::hardware::calibration::EngineProfiles, Error> {
    use crate::hardware::calibration::EngineProfile;
    let mut profiles = crate::hardware::calibration::EngineProfiles::default();
    if raw.calibration.iter().any(|c| c == "none") {
        if raw.calibration.len() > 1 {
            return Err(Error::conflict(
                "--calibration none",
                "--calibration FILE",
                "--calibration none turns calibration off; give it alone, without --calibration FILE",
            ));
        }
        profiles.calibrated = false;
        return Ok(profiles);
    }
    let mut seen: Vec<String> = Vec::new();
    for file in &raw.calibration {
        let text = crate::util::read_bounded(std::path::Path::new(file), crate::util::MAX_CONFIG_BYTES)
            .map_err(|e| Error::rejected("--calibration", file, format!("--calibration {file}: {e}")))?;
        // A byte-order mark is not YAML: without this the first key reads as `\u{feff}engine`.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let mut p = EngineProfile::parse(text).map_err(|e| Error::rejected("--calibration", file, format!("--calibration {file}: {e}")))?;
        check_calibrated_devices(&p, file, registry)?;
        p.file = Some(file.clone());
        if seen.contains(&p.engine) {
            return Err(Error::rejected(
                "--calibration",
                file,
                format!("a second profile of engine `{}`; give one file per engine", p.engine),
            ));
        }
        seen.push(p.engine.clone());
        profiles.replace(p);
    }
    Ok(profiles)
}

/// Every device entry of a calibration file names a device of the registry exactly (the
/// entries are looked up by name: `h200_sxm` or a device no profile describes would be read
/// and never used).
fn check_calibrated_devices(
    p: &crate::hardware::calibration::EngineProfile,
    file: &str,
    registry: &crate::hardware::DeviceRegistry,
) -> Result<(), Error> {
    let names = registry.names();
    for (i, d) in p.devices.iter().enumerate() {
        if names.contains(&d.device.as_str()) {
            continue;
        }
        let hint = match names.iter().find(|n| n.eq_ignore_ascii_case(&d.device)) {
            Some(n) => format!("device names are matched exactly: write `{n}`"),
            None => "no device profile has that name (see --list-devices; --device-file adds one)".to_string(),
        };
        return Err(Error::rejected(
            "--calibration",
            file,
            format!("--calibration {file}: field `devices[{i}].device` is `{}`; {hint}", d.device),
        ));
    }
    Ok(())
}
