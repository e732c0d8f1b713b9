//! `--shard K/N`: which slice of the candidates this run searches, and the modes and outputs
//! a slice cannot serve (their result needs every candidate in one process).

use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::plan::{Mode, OutputFormat, OutputOptions, SearchSpace, Shard};

/// Shards a run may be cut into: more than this would leave most shards empty for any
/// realistic search space, and keeps `merge`'s bookkeeping small.
pub const MAX_SHARDS: u32 = 10_000;

/// Parse `--shard K/N` and refuse it where a slice cannot stand for the whole.
pub(crate) fn validate_shard(raw: &RawArgs, mode: &Mode, search: &SearchSpace, output: &OutputOptions) -> Result<Option<Shard>, Error> {
    let Some(text) = &raw.shard else { return Ok(None) };
    let (index, count) = parse(text).ok_or_else(|| {
        Error::invalid("--shard", text, format!("expected K/N with 1 ≤ K ≤ N ≤ {MAX_SHARDS} (K counts from 1, e.g. --shard 1/3, 2/3, 3/3)"))
    })?;
    let refuse = |why: &str| Err(Error::rejected("--shard", text, format!("--shard {text}: {why}")));
    if matches!(mode, Mode::PdRatio { .. }) {
        return refuse(
            "P/D ratio planning matches prefill and decode rows across all candidates and verifies the best pair; run it unsharded",
        );
    }
    if search.compare_disagg {
        return refuse("--compare-disagg searches P/D deployments of every instance size; run it unsharded");
    }
    if search.max_batched_tokens.as_ref().is_some_and(|b| b.len() > 1) {
        return refuse("the chunk-budget study (several --max-batched-tokens) re-simulates the best layouts; run it unsharded");
    }
    if output.format != OutputFormat::Json {
        return refuse("a shard writes JSON for `throughput-optimizer merge`; add --output json");
    }
    let per_best = [
        ("--emit", output.emit.is_some()),
        ("--plot-file", output.plot_file.is_some()),
        ("--chrome-trace-file", output.chrome_trace.is_some()),
        ("--requests-file", output.requests_file.is_some()),
        ("--operator-trace-file", output.operator_trace.is_some()),
        ("--dump-original-results", output.dump_original),
    ];
    if let Some((flag, _)) = per_best.iter().find(|(_, on)| *on) {
        return refuse(&format!("{flag} needs the best configuration of the whole search, which one shard does not know; leave it out"));
    }
    Ok(Some(Shard { index, count, args: raw.argv.iter().skip(1).map(|a| a.to_string_lossy().into_owned()).collect() }))
}

/// `K/N` with 1 ≤ K ≤ N ≤ [`MAX_SHARDS`].
fn parse(text: &str) -> Option<(u32, u32)> {
    let (k, n) = text.trim().split_once('/')?;
    let (k, n): (u32, u32) = (k.trim().parse().ok()?, n.trim().parse().ok()?);
    (1..=n).contains(&k).then_some(())?;
    (n <= MAX_SHARDS).then_some((k, n))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn shard_specs() {
        // Fails if K were taken 0-based (0/3 accepted, 3/3 refused) or N unbounded.
        assert_eq!(parse("1/3"), Some((1, 3)));
        assert_eq!(parse("3/3"), Some((3, 3)));
        for bad in ["0/3", "4/3", "1/0", "3", "a/b", "-1/3", "1/10001", "", "/"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
