//! Logging and output options.

use super::Warnings;
use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::plan::{OutputFormat, OutputOptions};
use crate::quant::NamedEnum;

const MAX_JOBS: u32 = 1024;

/// `--log-level` (or `--verbose` / `--quiet`): whether only errors are shown.
pub(crate) fn validate_log_level(raw: &RawArgs) -> Result<bool, Error> {
    let level = match raw.log_level.as_deref() {
        None if raw.verbose => "debug".to_string(),
        None if raw.quiet => "error".to_string(),
        None => "warning".to_string(),
        Some(l) => {
            let l = l.to_lowercase();
            const LEVELS: [&str; 5] = ["debug", "info", "warning", "error", "critical"];
            if !LEVELS.contains(&l.as_str()) {
                return Err(Error::invalid("--log-level", &l, format!("not one of {}", LEVELS.join(", "))));
            }
            l
        }
    };
    Ok(level == "error" || level == "critical")
}

/// Report format and destinations, charts, `--jobs`; `quiet` from [`validate_log_level`].
pub(crate) fn validate_output(
    raw: &RawArgs,
    num_device_kinds: usize,
    quiet: bool,
    warnings: &mut Warnings,
) -> Result<(OutputOptions, usize), Error> {
    let format = match raw.output.as_deref() {
        None => OutputFormat::Table,
        Some(f) => OutputFormat::parse_choice(f).map_err(|e| Error::choice("--output", e))?,
    };
    let jobs = raw.jobs.unwrap_or(8);
    if jobs > MAX_JOBS {
        return Err(Error::invalid("--jobs", jobs, format!("at most {MAX_JOBS}")));
    }
    let plot = if raw.plot {
        Some(true)
    } else if raw.no_plot {
        Some(false)
    } else {
        None
    };
    if raw.plot && num_device_kinds > 1 {
        warnings.push("--plot draws charts for a single device; with several devices the cross-hardware tables are printed instead");
    }
    let plot_file = match &raw.plot_file {
        Some(p) if p.extension().is_none_or(|e| !e.eq_ignore_ascii_case("svg")) => {
            return Err(Error::invalid("--plot-file", p.display(), "charts are written as SVG; give a path ending in .svg"))
        }
        other => other.clone(),
    };
    let output = OutputOptions {
        format,
        file: raw.output_file.clone(),
        top: raw.top.map(|t| t as usize),
        plot,
        dump_original: raw.dump_original_results,
        chrome_trace: raw.chrome_trace_file.clone(),
        plot_file,
        quiet,
    };
    Ok((output, jobs as usize))
}
