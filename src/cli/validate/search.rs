//! The search space: parallel sizes, batch range, token budgets.

use super::{dedup, Warnings};
use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::model::ModelArch;
use crate::plan::{Mode, SearchSpace, SearchStrategy};
use crate::quant::NamedEnum;

const MAX_BATCH: u32 = 1 << 20;
/// The words of the note on the default EP search range (`price`, which prices one layout,
/// leaves that note out by them).
pub(crate) const DEFAULT_EP_RANGE_NOTE: &str = "the default EP range stops at";
const MAX_BUDGET: u32 = 100_000_000;

fn pow2_count(n: u32) -> usize {
    (32 - n.leading_zeros()) as usize
}

/// The parallel sizes, batch range, concurrency strategy and token budgets to search; `mtp`
/// are the MTP candidates of [`super::validate_mtp`].
pub(crate) fn validate_search(
    raw: &RawArgs,
    model: &ModelArch,
    mode: &Mode,
    num_devices: u32,
    mtp: Vec<u32>,
    warnings: &mut Warnings,
) -> Result<SearchSpace, Error> {
    let limit = match mode {
        Mode::PdRatio { prefill_devices, decode_devices, .. } => (*prefill_devices).max(*decode_devices),
        _ => num_devices,
    };
    let limit_flag = if matches!(mode, Mode::PdRatio { .. }) { "the larger per-instance device count" } else { "--num-devices" };
    let mut check_sizes = |flag: &str, v: &Option<Vec<u32>>| -> Result<Option<Vec<u32>>, Error> {
        let Some(v) = v else { return Ok(None) };
        if let Some(bad) = v.iter().find(|&&x| x > limit) {
            return Err(Error::rejected(
                flag,
                bad,
                format!("{flag} contains {bad}, which exceeds {limit_flag} ({limit}); use values ≤ {limit} or raise the device count"),
            ));
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
    let pp = check_sizes("--pp-sizes", &raw.pp_sizes)?;
    let pp = check_stages(pp, model, limit)?;
    // Ignored for a dense model, and then they must not change the TP default either.
    let (ep, moe_dp) = if !model.is_moe() && (ep.is_some() || moe_dp.is_some()) {
        warnings.push(format!("--ep-sizes/--moe-dp-sizes are ignored: {} is a dense model", model.id));
        (None, None)
    } else {
        (ep, moe_dp)
    };
    // EP shards the routed experts: more EP ranks than experts have nothing to hold.
    if let Some(experts) = model.num_experts() {
        if let Some(bad) = ep.iter().flatten().find(|&&e| e > experts) {
            return Err(Error::rejected(
                "--ep-sizes",
                bad,
                format!("--ep-sizes contains {bad}, more than {}'s {experts} routed experts; use values ≤ {experts}", model.id),
            ));
        }
        if ep.as_ref().is_none_or(Vec::is_empty) && limit > experts {
            let cap = crate::search::candidates::ep_cap(limit, experts);
            warnings.push(format!(
                "{}: {DEFAULT_EP_RANGE_NOTE} the model's {experts} routed experts (EP ≤ {cap} on {limit} devices, the rest MoE-TP)",
                model.id
            ));
        }
    }
    // None of the three given ⇒ TP search over the default range.
    let tp = if tp.is_none() && ep.is_none() && moe_dp.is_none() { Some(vec![]) } else { tp };
    let (batch_min, batch_max) = batch_range(raw)?;
    let strategy = match raw.concurrency_search_strategy.as_deref() {
        None => SearchStrategy::Exponential,
        Some(s) => SearchStrategy::parse_choice(s).map_err(|e| Error::choice("--concurrency-search-strategy", e))?,
    };
    let max_batched_tokens = budgets(raw, mode, warnings)?;
    let count = |v: &Option<Vec<u32>>| v.as_ref().map_or(1, |v| if v.is_empty() { pow2_count(limit) } else { v.len() });
    let combos = count(&tp) * count(&ep) * count(&moe_dp) * count(&dcp) * count(&pp) * mtp.len();
    let max_combos = raw.max_search_combinations.unwrap_or(100);
    if max_combos > 0 && combos as u64 > max_combos {
        warnings.push(format!(
            "[WARNING] Large number of parallel search combinations ({combos}) exceeds --max-search-combinations ({max_combos})."
        ));
    }
    Ok(SearchSpace {
        tp,
        ep,
        moe_dp,
        dcp,
        pp,
        mtp,
        batch_min,
        batch_max,
        strategy,
        max_batched_tokens,
        sweep_all_layouts: raw.sweep_all_layouts,
        compare_disagg: raw.compare_disagg,
        // Set by `validate_shard` once the whole plan is known.
        shard: None,
    })
}

/// `--pp-sizes`: a stage holds at least one decoder layer, so PP is at most the model's layer
/// count (the layers are split as evenly as possible: PP need not divide them). Without values:
/// the powers of two up to the device limit and the layer count.
fn check_stages(pp: Option<Vec<u32>>, model: &ModelArch, limit: u32) -> Result<Option<Vec<u32>>, Error> {
    let layers = model.num_layers();
    match pp {
        Some(v) if v.is_empty() => Ok(Some((0..32).map(|k| 1u32 << k).take_while(|&p| p <= limit && p <= layers).collect())),
        Some(v) => match v.iter().find(|&&p| p > layers) {
            Some(bad) => Err(Error::rejected(
                "--pp-sizes",
                bad,
                format!(
                    "--pp-sizes contains {bad}, but {} has {layers} decoder layers and each pipeline stage needs at least one; use values from 1 to {}",
                    model.id,
                    layers.min(limit)
                ),
            )),
            None => Ok(Some(v)),
        },
        None => Ok(None),
    }
}

fn batch_range(raw: &RawArgs) -> Result<(u32, Option<u32>), Error> {
    let (batch_min, batch_max) = match raw.batch_range.as_deref() {
        None => (1, None),
        Some([max]) => (1, Some(*max)),
        Some([min, max]) => {
            if min > max {
                return Err(Error::invalid(
                    "--batch-range",
                    format!("{min} {max}"),
                    format!("MIN must not exceed MAX; use --batch-range {max} {min}"),
                ));
            }
            (*min, Some(*max))
        }
        Some(v) => {
            return Err(Error::rejected(
                "--batch-range",
                v.len(),
                format!("--batch-range takes MAX or MIN MAX (1 or 2 values), got {} values", v.len()),
            ))
        }
    };
    if let Some(m) = batch_max {
        if m > MAX_BATCH {
            return Err(Error::invalid("--batch-range", m, format!("at most {MAX_BATCH} requests per replica")));
        }
    }
    Ok((batch_min, batch_max))
}

/// `--max-batched-tokens` (or its deprecated name `--max-prefill-tokens`), each value once.
fn budgets(raw: &RawArgs, mode: &Mode, warnings: &mut Warnings) -> Result<Option<Vec<u64>>, Error> {
    let mut budgets = raw.max_batched_tokens.clone();
    if let Some(old) = &raw.max_prefill_tokens {
        if budgets.is_some() {
            return Err(Error::conflict(
                "--max-prefill-tokens",
                "--max-batched-tokens",
                "give --max-batched-tokens only (--max-prefill-tokens is its deprecated name)",
            ));
        }
        warnings.push("WARNING: --max-prefill-tokens is deprecated; use --max-batched-tokens instead.");
        budgets = Some(old.clone());
    }
    if let Some(b) = &budgets {
        if let Some(bad) = b.iter().find(|&&x| x > MAX_BUDGET) {
            return Err(Error::invalid("--max-batched-tokens", bad, format!("at most {MAX_BUDGET} tokens")));
        }
        if b.len() > 1 && !matches!(mode, Mode::Aggregation) {
            return Err(Error::invalid(
                "--max-batched-tokens",
                b.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" "),
                "several budgets (the chunk-budget study) apply to aggregation mode; give one value with --disagg or P/D ratio planning",
            ));
        }
    }
    Ok(budgets.map(|b| dedup(&b).into_iter().map(u64::from).collect()))
}
