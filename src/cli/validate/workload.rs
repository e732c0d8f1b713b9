//! Prompt and output lengths, prefix caching, images and the latency limits.

use super::Warnings;
use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::model::ModelArch;
use crate::plan::{ImageSpec, Slo, Workload};
use crate::workload::arrival::Trace;
use crate::workload::{LengthDistribution, Lengths, MAX_LENGTH};
use std::path::Path;

/// Most images one request may carry (their tokens join the prompt).
const MAX_IMAGES_PER_REQUEST: u32 = 256;

fn parse_length(flag: &str, raw: &str) -> Result<Option<u64>, Error> {
    let t = raw.trim();
    match t.parse::<i128>() {
        Ok(v) if v <= 0 => Err(Error::invalid(flag, raw, format!("must be a positive number of tokens (1 to {MAX_LENGTH})"))),
        Ok(v) if v > MAX_LENGTH as i128 => Err(Error::invalid(flag, raw, format!("too large; at most {MAX_LENGTH} tokens are modelled"))),
        Ok(v) => Ok(Some(v as u64)),
        Err(_) => {
            if t.parse::<f64>().is_ok() {
                return Err(Error::invalid(flag, raw, format!("must be a whole number of tokens (1 to {MAX_LENGTH})")));
            }
            Ok(None)
        }
    }
}

/// Lengths, prefix-cache hit rate and images.
/// `trace` is the `--arrival trace` file, loaded once by [`load_arrival_trace`] (the simulator's
/// options take it over afterwards).
pub(crate) fn validate_workload(
    raw: &RawArgs,
    model: &ModelArch,
    trace: Option<&Trace>,
    warnings: &mut Warnings,
) -> Result<Workload, Error> {
    let hit = raw.prefix_cache_hit_rate.unwrap_or(0.0);
    if !(0.0..1.0).contains(&hit) {
        return Err(Error::rejected(
            "--prefix-cache-hit-rate",
            hit,
            format!("--prefix-cache-hit-rate {hit} is not in the valid range [0, 1)"),
        ));
    }
    let trace_means = trace_means(raw, trace, warnings);
    let input = input_lengths(raw, trace_means)?;
    let output_bins_mean = match &input {
        Lengths::Distribution(d) => d.output_mean(),
        Lengths::Fixed(_) => None,
    };
    let output = output_lengths(raw, trace_means, output_bins_mean, warnings)?;
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
    let images = validate_images(raw, model, warnings)?;
    let range_ratio = validate_range_ratio(raw, &input, &output, warnings)?;
    let ignore_eos = raw.ignore_eos;
    Ok(Workload { input, output, prefix_cache_hit_rate: hit, images, range_ratio, ignore_eos, input_label, output_label })
}

/// `--arrival trace FILE`: the trace, read once for the whole validation (its lengths size the
/// workload, its arrivals drive the simulator); `None` for any other arrival process.
pub(crate) fn load_arrival_trace(raw: &RawArgs) -> Result<Option<Trace>, Error> {
    match raw.arrival.as_deref() {
        Some([kind, file]) if kind.eq_ignore_ascii_case("trace") => Ok(Some(Trace::load(Path::new(file))?)),
        _ => Ok(None),
    }
}

/// With `--arrival trace FILE`, the trace's mean (input, output) lengths: a trace gives every
/// request's lengths, its means size the budgets and the formulas.
fn trace_means(raw: &RawArgs, trace: Option<&Trace>, warnings: &mut Warnings) -> Option<(u64, u64)> {
    let trace_means = trace.map(Trace::mean_lengths);
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
    trace_means
}

fn input_lengths(raw: &RawArgs, trace_means: Option<(u64, u64)>) -> Result<Lengths, Error> {
    Ok(match (&raw.input_length, &raw.length_distribution, trace_means) {
        (_, _, Some((mi, _))) => Lengths::Fixed(mi),
        (Some(_), Some(_), None) => return Err(Error::conflict(
            "--input-length",
            "--length-distribution",
            "give either --input-length or --length-distribution, not both (a distribution file can also be passed as --input-length FILE)",
        )),
        (None, None, None) => {
            return Err(Error::missing(
                "--input-length",
                "--input-length is required: a number of tokens or a length-distribution YAML file",
            ))
        }
        (None, Some(f), None) if f.is_empty() => Lengths::Distribution(LengthDistribution::builtin()),
        (None, Some(f), None) => Lengths::Distribution(LengthDistribution::load(Path::new(f), "--length-distribution")?),
        (Some(v), None, None) => match parse_length("--input-length", v)? {
            Some(n) => Lengths::Fixed(n),
            None => {
                let p = Path::new(v);
                if !p.is_file() {
                    return Err(Error::invalid(
                        "--input-length",
                        v,
                        "neither a positive number of tokens nor an existing length-distribution file",
                    ));
                }
                Lengths::Distribution(LengthDistribution::load(p, "--input-length")?)
            }
        },
    })
}

fn output_lengths(
    raw: &RawArgs,
    trace_means: Option<(u64, u64)>,
    output_bins_mean: Option<u64>,
    warnings: &mut Warnings,
) -> Result<Lengths, Error> {
    Ok(match (&raw.output_length, trace_means, output_bins_mean) {
        (_, Some((_, mo)), _) => Lengths::Fixed(mo),
        (given, None, Some(m)) => {
            if let Some(v) = given {
                warnings.push(format!(
                    "--output-length {v} is not used: the length distribution gives output lengths (output_bins, mean {m} tokens)"
                ));
            }
            Lengths::Fixed(m)
        }
        (None, None, None) => {
            return Err(Error::missing("--output-length", "--output-length is required: the number of generated tokens per request"))
        }
        (Some(v), None, None) => match parse_length("--output-length", v)? {
            Some(n) => Lengths::Fixed(n),
            None => return Err(Error::invalid("--output-length", v, format!("must be a positive number of tokens (1 to {MAX_LENGTH})"))),
        },
    })
}

fn validate_images(raw: &RawArgs, model: &ModelArch, warnings: &mut Warnings) -> Result<Option<ImageSpec>, Error> {
    Ok(match (raw.image_height, raw.image_width) {
        (None, None) => {
            if raw.image_batch_size.is_some() {
                warnings.push("--image-batch-size is ignored without --image-height and --image-width");
            }
            None
        }
        (Some(h), Some(w)) => {
            if model.vision.is_none() {
                warnings.push(format!("--image-height/--image-width are ignored: {} has no vision tower", model.id));
                None
            } else {
                if h > 16384 || w > 16384 {
                    return Err(Error::rejected(
                        "--image-height",
                        h,
                        format!("--image-height {h} / --image-width {w}: at most 16384 pixels per side"),
                    ));
                }
                let per_request = raw.image_batch_size.unwrap_or(1);
                if per_request > MAX_IMAGES_PER_REQUEST {
                    return Err(Error::invalid(
                        "--image-batch-size",
                        per_request,
                        format!("at most {MAX_IMAGES_PER_REQUEST} images per request are modelled"),
                    ));
                }
                Some(ImageSpec { height: h, width: w, per_request })
            }
        }
        (h, w) => {
            let (given, missing) = match (h, w) {
                (Some(h), _) => (format!("--image-height {h}"), "--image-width"),
                (_, Some(w)) => (format!("--image-width {w}"), "--image-height"),
                _ => unreachable!(),
            };
            let field = if h.is_some() { "--image-height" } else { "--image-width" };
            return Err(Error::requires(field, missing, format!("{given} needs {missing} too: image sizes are given together")));
        }
    })
}

/// Latency limits: clap already checked each value.
pub(crate) fn validate_slo(raw: &RawArgs) -> Slo {
    Slo { ttft_ms: raw.ttft_limits, tpot_ms: raw.tpot_limits }
}

/// `--random-range-ratio R` in [0, 1): only fixed lengths are spread (a distribution or a trace
/// already varies them), and only the simulator draws them.
fn validate_range_ratio(raw: &RawArgs, input: &Lengths, output: &Lengths, warnings: &mut Warnings) -> Result<Option<f64>, Error> {
    let Some(r) = raw.random_range_ratio else { return Ok(None) };
    if !(0.0..1.0).contains(&r) {
        return Err(Error::invalid("--random-range-ratio", r, "must be in [0, 1): lengths are drawn from [(1 - R)·L, (1 + R)·L]"));
    }
    if !matches!((input, output), (Lengths::Fixed(_), Lengths::Fixed(_))) {
        warnings.push("--random-range-ratio spreads fixed lengths only; lengths from a distribution or a trace are drawn as given");
    }
    Ok(Some(r))
}

/// `--tpot-limits` on a run where every request generates exactly one token: the first token
/// is the last, so under the inter-token definition no request has a time per output token
/// and the limit would pass every batch (the search then climbs to the memory limit for
/// nothing). Only where the lengths really are all 1: `--output-length 1` with no benchmark
/// client spreading it (`--ignore-eos`, or an engine without that client), a finite limit.
pub(crate) fn check_one_token_tpot_limit(raw: &RawArgs, plan: &crate::plan::Plan) -> Result<(), Error> {
    let Some(limit) = raw.tpot_limits.filter(|l| l.is_finite()) else { return Ok(()) };
    let given_one = raw.output_length.as_deref().is_some_and(|v| v.trim() == "1");
    let all_one =
        given_one && matches!(plan.workload.output, Lengths::Fixed(1)) && plan.devices.iter().all(|d| plan.output_spread(d).is_none());
    if !all_one || plan.serving.tpot_definition != crate::plan::TpotDefinition::InterToken {
        return Ok(());
    }
    Err(Error::rejected(
        "--tpot-limits",
        limit,
        format!("--tpot-limits {limit} cannot be checked: with --output-length 1 every request generates one token, so none has an inter-token time; drop the limit, raise --output-length, or give --tpot-definition amortized"),
    ))
}
