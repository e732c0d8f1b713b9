//! Capacity planning's flags: `--goodput` / `--no-goodput` (goodput per open-loop row, on by
//! default where it applies) and the sizing targets
//! `--target-request-rate` / `--target-concurrency`. A target rate becomes the arrival rate
//! before the simulator's options are validated ([`apply_target_rate`]), so an open loop at
//! the target is validated as any other; the rest checks what the targets combine with.

use super::Warnings;
use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::plan::{Capacity, EngineKind, Mode, SearchSpace, SimOptions, Target};
use crate::workload::arrival::ArrivalProcess;

/// Highest target rate, req/s (the highest `--request-rate`).
const MAX_TARGET_RATE: f64 = 1e6;
/// Most clients a concurrency target may name.
const MAX_TARGET_CONCURRENCY: u32 = 1_000_000;

/// `--target-request-rate R` stands for the open loop at R: `--arrival poisson` unless
/// `--arrival` names another open process, and `--request-rate R` for a generated one (a trace
/// is rescaled to R once it is read: [`validate_capacity`]). A closed loop or a burst cannot
/// carry a rate, and `--request-rate` beside it would be a second rate.
pub(crate) fn apply_target_rate(raw: &mut RawArgs) -> Result<(), Error> {
    let Some(rate) = raw.target_request_rate else { return Ok(()) };
    if !(rate > 0.0 && rate <= MAX_TARGET_RATE) {
        return Err(Error::invalid("--target-request-rate", rate, format!("must be a positive rate up to {MAX_TARGET_RATE} req/s")));
    }
    if let Some(c) = raw.target_concurrency {
        return Err(Error::conflict(
            "--target-request-rate",
            "--target-concurrency",
            format!("--target-request-rate {rate} and --target-concurrency {c}: size for one target at a time"),
        ));
    }
    if let Some(r) = raw.request_rate {
        return Err(Error::conflict(
            "--target-request-rate",
            "--request-rate",
            format!("--target-request-rate {rate} is the arrival rate of the sizing run; drop --request-rate {r}"),
        ));
    }
    let kind = raw.arrival.as_ref().map(|v| v[0].to_lowercase());
    match kind.as_deref() {
        None => raw.arrival = Some(vec!["poisson".into()]),
        Some("closed" | "burst") => {
            let k = kind.unwrap_or_default();
            return Err(Error::conflict(
                "--target-request-rate",
                "--arrival",
                format!("--target-request-rate needs open-loop arrivals (poisson, constant, gamma or a trace), not --arrival {k}; for a closed loop use --target-concurrency"),
            ));
        }
        Some("trace") => return Ok(()),
        Some(_) => {}
    }
    raw.request_rate = Some(rate);
    Ok(())
}

/// The capacity-planning part of the plan. `sim` is the validated simulator options; a trace
/// is rescaled here to a target rate.
pub(crate) fn validate_capacity(
    raw: &RawArgs,
    engine: EngineKind,
    mode: &Mode,
    search: &SearchSpace,
    sim: &mut SimOptions,
    warnings: &mut Warnings,
) -> Result<Capacity, Error> {
    let target = match (raw.target_request_rate, raw.target_concurrency) {
        (Some(r), _) => Some(("--target-request-rate", Target::RequestRate(r))),
        (None, Some(c)) if c > MAX_TARGET_CONCURRENCY => {
            return Err(Error::invalid("--target-concurrency", c, format!("must be 1 to {MAX_TARGET_CONCURRENCY} clients")))
        }
        (None, Some(c)) => Some(("--target-concurrency", Target::Concurrency(c as u64))),
        (None, None) => None,
    };
    let mut flags: Vec<&str> = target.iter().map(|t| t.0).collect();
    if raw.goodput {
        flags.push("--goodput");
    }
    if raw.no_goodput {
        no_goodput_applies(target.map(|t| t.0), &sim.arrival, warnings);
    }
    let Some(&first) = flags.first() else {
        // Per-row goodput by default wherever it applies: open-loop arrivals, the simulator,
        // aggregated layouts.
        let applies = engine != EngineKind::Analytic && sim.arrival.is_open() && matches!(mode, Mode::Aggregation);
        return Ok(Capacity { goodput: applies && !raw.no_goodput, target: None });
    };
    if engine == EngineKind::Analytic {
        return Err(Error::conflict(first, "--engine analytic", format!("{first} simulates deployments; use --engine sim (or compare)")));
    }
    check_mode(raw, first, target.is_some(), mode)?;
    if let Some((flag, t)) = target {
        check_target(flag, t, search, sim)?;
    }
    if raw.goodput && !sim.arrival.is_open() && target.is_none() {
        return Err(Error::requires(
            "--goodput",
            "--arrival",
            "--goodput searches the request rate of open-loop arrivals: give --arrival poisson (constant, gamma or a trace) and --request-rate",
        ));
    }
    if raw.goodput && target.is_some() {
        warnings.push(format!("--goodput is implied by {first}: the sizing answer carries its headroom; per-row goodput is not computed"));
    }
    Ok(Capacity { goodput: raw.goodput && target.is_none(), target: target.map(|t| t.1) })
}

/// `--no-goodput` where there is no per-row goodput to skip: said, not silently ignored.
fn no_goodput_applies(target: Option<&str>, arrival: &ArrivalProcess, warnings: &mut Warnings) {
    if let Some(flag) = target {
        warnings.push(format!("--no-goodput: {flag} computes no per-row goodput anyway; the sizing answer's headroom is still searched"));
    } else if !arrival.is_open() {
        warnings
            .push(format!("--no-goodput has no effect: goodput is searched for open-loop arrivals only, not --arrival {}", arrival.name()));
    }
}

/// The modes capacity planning serves: `--goodput` rates aggregated rows only; a sizing
/// target sizes aggregated deployments, P/D ones with `--disagg` (both phases: TTFT and TPOT
/// limits) and both with `--compare-disagg`, but not P/D ratio planning's fixed instances.
fn check_mode(raw: &RawArgs, first: &str, sizing: bool, mode: &Mode) -> Result<(), Error> {
    match mode {
        Mode::Aggregation => Ok(()),
        Mode::Disaggregation { prefill: true, decode: true } if sizing => Ok(()),
        Mode::Disaggregation { .. } if sizing => Err(Error::requires(
            first,
            if raw.ttft_limits.is_none() { "--ttft-limits" } else { "--tpot-limits" },
            format!("{first} with --disagg sizes prefill and decode instances together: give both --ttft-limits and --tpot-limits"),
        )),
        Mode::PdRatio { .. } if sizing => Err(Error::conflict(
            first,
            "--enable-optimize-prefill-decode-ratio",
            format!("{first} chooses the instances itself: drop --enable-optimize-prefill-decode-ratio and its instance sizes (size P/D deployments with --disagg, or compare both with --compare-disagg)"),
        )),
        _ => Err(Error::conflict(
            first,
            "--disagg",
            format!("{first} plans aggregated deployments; drop --disagg / --enable-optimize-prefill-decode-ratio"),
        )),
    }
}

/// What a target combines with: the shards search a fixed device count; a concurrency is a
/// closed loop's; a trace is rescaled to a target rate.
fn check_target(flag: &str, target: Target, search: &SearchSpace, sim: &mut SimOptions) -> Result<(), Error> {
    if search.shard.is_some() {
        return Err(Error::conflict(flag, "--shard", format!("{flag} searches device counts in one process; drop --shard")));
    }
    match target {
        Target::Concurrency(c) if sim.arrival != ArrivalProcess::Closed => Err(Error::conflict(
            "--target-concurrency",
            "--arrival",
            format!(
                "--target-concurrency {c} is a closed loop of {c} clients; drop --arrival {} (or use --target-request-rate)",
                sim.arrival.name()
            ),
        )),
        Target::RequestRate(rate) => {
            if let ArrivalProcess::Trace(_) = &sim.arrival {
                if sim.arrival.mean_rate().is_none() {
                    return Err(Error::rejected(
                        "--target-request-rate",
                        rate,
                        "the trace's arrivals share one instant: it has no rate to rescale to the target",
                    ));
                }
                sim.arrival = sim.arrival.at_rate(rate);
            }
            Ok(())
        }
        Target::Concurrency(_) => Ok(()),
    }
}
