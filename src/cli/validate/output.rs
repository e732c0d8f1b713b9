//! Logging and output options.

use super::Warnings;
use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::plan::{EmitFormat, EmitOptions, LaunchEngine, OutputFormat, OutputOptions};
use crate::quant::NamedEnum;
use std::path::{Path, PathBuf};

const MAX_JOBS: u32 = 1024;

/// `--width` range: narrower leaves no room for a label and its value; wider is no terminal.
const WIDTHS: std::ops::RangeInclusive<u32> = 40..=1000;

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
    // More threads than cores only contend (each probe owns its own recorders and queues).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_JOBS as usize) as u32;
    let jobs = raw.jobs.unwrap_or(cores);
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
    for (flag, path) in [
        ("--output-file", &raw.output_file),
        ("--plot-file", &plot_file),
        ("--chrome-trace-file", &raw.chrome_trace_file),
        ("--requests-file", &raw.requests_file),
        ("--operator-trace-file", &raw.operator_trace_file),
    ] {
        if let Some(p) = path {
            check_output_path(flag, p, &input_files(raw))?;
        }
    }
    // With --emit and no --emit-dir the commands replace the report on stdout: a report format
    // then needs --output-file to go anywhere.
    if raw.emit.is_some() && raw.emit_dir.is_none() && raw.output_file.is_none() && raw.output.is_some() {
        return Err(Error::conflict(
            "--output",
            "--emit",
            "--emit prints launch commands in place of the report, so --output has no report to format; add --output-file FILE (the report goes there) or --emit-dir DIR (the commands go there)",
        ));
    }
    let output = OutputOptions {
        format,
        file: raw.output_file.clone(),
        top: raw.top.map(|t| t as usize),
        width: validate_width(raw, warnings)?,
        plot,
        dump_original: raw.dump_original_results,
        chrome_trace: raw.chrome_trace_file.clone(),
        requests_file: raw.requests_file.clone(),
        operator_trace: raw.operator_trace_file.clone(),
        plot_file,
        quiet,
        emit: validate_emit(raw, num_device_kinds)?,
    };
    Ok((output, jobs as usize))
}

/// The report's width: `--width`; else, when the report goes to a terminal, `COLUMNS` or the
/// terminal's size; else none, so that a piped or redirected report keeps its layout.
fn validate_width(raw: &RawArgs, warnings: &mut Warnings) -> Result<Option<usize>, Error> {
    if let Some(w) = raw.width {
        if !WIDTHS.contains(&w) {
            return Err(Error::invalid("--width", w, format!("a number of columns from {} to {}", WIDTHS.start(), WIDTHS.end())));
        }
        return Ok(Some(w as usize));
    }
    if raw.output_file.is_some() || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Ok(None);
    }
    let columns = std::env::var("COLUMNS").ok().filter(|c| !c.trim().is_empty());
    let from_env = match columns.as_deref().map(|c| c.trim().parse::<u32>()) {
        Some(Ok(w)) if WIDTHS.contains(&w) => return Ok(Some(w as usize)),
        Some(_) => Some(columns.unwrap_or_default()),
        None => None,
    };
    let term = terminal_size::terminal_size().map(|(terminal_size::Width(w), _)| u32::from(w));
    if let Some(c) = from_env {
        warnings.push(format!(
            "COLUMNS={c} is not a number of columns from {} to {}; the terminal's width is used",
            WIDTHS.start(),
            WIDTHS.end()
        ));
    }
    // A terminal narrower than the minimum still gets the narrowest layout.
    Ok(term.map(|w| w.clamp(*WIDTHS.start(), *WIDTHS.end()) as usize))
}

/// `--emit ENGINE`, `--emit-dir DIR`, `--emit-row N`. Launch commands are for one device
/// type, and the directory must exist before the search runs.
fn validate_emit(raw: &RawArgs, num_device_kinds: usize) -> Result<Option<EmitOptions>, Error> {
    let Some(name) = &raw.emit else { return Ok(None) };
    let engine = LaunchEngine::parse_choice(name).map_err(|e| Error::choice("--emit", e))?;
    if num_device_kinds > 1 {
        return Err(Error::rejected(
            "--emit",
            name,
            format!("--emit {name}: launch commands are for one device type, and this run compares {num_device_kinds}; give one --device"),
        ));
    }
    if let Some(dir) = &raw.emit_dir {
        if !dir.is_dir() {
            return Err(Error::invalid("--emit-dir", dir.display(), "is not an existing directory"));
        }
    }
    let given = raw.model_id.as_ref().or(raw.model_id_flag.as_ref()).cloned().unwrap_or_default();
    // A path to a config.json serves the directory holding it.
    let model = match Path::new(&given) {
        p if p.is_file() => p.parent().filter(|d| !d.as_os_str().is_empty()).map_or(".".to_string(), |d| d.display().to_string()),
        _ => given,
    };
    let format = match raw.emit_format.as_deref() {
        None => EmitFormat::Shell,
        Some(f) => EmitFormat::parse_choice(f).map_err(|e| Error::choice("--emit-format", e))?,
    };
    Ok(Some(EmitOptions { engine, dir: raw.emit_dir.clone(), row: raw.emit_row.unwrap_or(1) as usize, model, format }))
}

/// Every file the run reads (as given), so that no output overwrites one of them.
fn input_files(raw: &RawArgs) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = raw.device_file.clone();
    v.extend(raw.scenario.clone());
    v.extend(raw.length_distribution.iter().chain(raw.input_length.iter()).map(PathBuf::from));
    if let Some([_, f]) = raw.arrival.as_deref() {
        v.push(PathBuf::from(f));
    }
    v.extend(raw.model_id.iter().chain(raw.model_id_flag.iter()).map(|m| Path::new(m).join("config.json")));
    v.extend(raw.model_id.iter().chain(raw.model_id_flag.iter()).map(PathBuf::from));
    v
}

/// An output path is checked before the search, so that a mistake costs no run: its directory
/// must exist, it must not be a directory, and it must not be one of the run's input files.
fn check_output_path(flag: &str, path: &Path, inputs: &[PathBuf]) -> Result<(), Error> {
    if path.as_os_str().is_empty() || path.is_dir() {
        return Err(Error::invalid(flag, path.display(), "is a directory or empty; give a file path"));
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(Error::invalid(flag, path.display(), format!("the directory {} does not exist", parent.display())));
    }
    if let Ok(target) = path.canonicalize() {
        if inputs.iter().filter_map(|i| i.canonicalize().ok()).any(|i| i == target && target.is_file()) {
            return Err(Error::invalid(flag, path.display(), "is an input file of this run; writing there would destroy it"));
        }
    }
    writable(flag, path)
}

/// Whether `path` can be written, tried before the search (a file that did not exist is
/// removed again): /proc, /sys and read-only directories fail here, not after the report.
fn writable(flag: &str, path: &Path) -> Result<(), Error> {
    let existed = path.exists();
    match std::fs::OpenOptions::new().append(true).create(true).open(path) {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(Error::invalid(flag, path.display(), format!("cannot be written ({e})"))),
    }
}
