//! Rendering only: the [`Report`] value that `search` built becomes text, JSON, CSV, terminal
//! and SVG charts or launch commands, and the [`Recordings`] it made of the best configurations
//! become Chrome traces and a per-request CSV. Each output format is an [`Exporter`];
//! [`exporters`] picks the ones the plan asks for, and [`write()`] puts each [`Artifact`] where
//! it belongs. Nothing here decides a result, simulates or prices: ranking and feasibility come
//! from `search`, the data from `outcome`.

mod capacity_chart;
pub mod chart;
pub mod csv;
pub mod json;
pub mod launch;
pub mod price;
pub mod svg;
pub mod svg_frontier;
pub mod table;
pub mod timeline;
pub mod trace;

use crate::outcome::recording::Recordings;
use crate::outcome::Report;
use crate::plan::{OutputFormat, Plan};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why an output could not be produced or written (a runtime failure: exit 1).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot serialize the report: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write CSV: {0}")]
    Csv(#[from] ::csv::Error),
    /// The chart library failed to draw (its errors carry no structure worth keeping).
    #[error("{0}")]
    Chart(String),
    /// The simulation of the best configuration recorded for a timeline failed.
    #[error("--chrome-trace-file/--requests-file: simulating the best configuration on {device} failed: {message}")]
    Simulation { device: String, message: String },
    #[error("{flag} {}: cannot write: {source}", path.display())]
    Write { flag: &'static str, path: PathBuf, source: std::io::Error },
    /// `--emit`: the engine cannot run the chosen row as planned, or there is no such row.
    #[error("{message}")]
    Launch { engine: String, message: String },
    /// Standard output failed for a reason other than a closed pipe (a full disk, `/dev/full`).
    #[error("cannot write the report to standard output: {0}")]
    Stdout(std::io::Error),
}

/// Where an artifact goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    /// A notice for standard error (the exporter leaves it out under `--quiet`).
    Stderr,
    /// A file, with the option that named it (for error messages).
    File {
        flag: &'static str,
        path: PathBuf,
    },
}

/// One rendered output and where it goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub destination: Destination,
    pub contents: String,
}

/// One output format: renders the report (and the plan it answers, and what the search
/// recorded of its best configurations) into artifacts.
pub trait Exporter {
    fn export(&self, plan: &Plan, report: &Report, recordings: &Recordings) -> Result<Vec<Artifact>, ExportError>;
}

/// The main report (`--output table|json|csv`) to stdout or `--output-file`.
pub struct MainReport;

/// `--plot-file`: every chart as one SVG.
pub struct SvgCharts(pub PathBuf);

/// `--chrome-trace-file` and `--requests-file`: the recorded simulation of the best
/// configuration (one simulation serves both).
pub struct Timeline {
    pub chrome: Option<PathBuf>,
    pub requests: Option<PathBuf>,
}

/// `--operator-trace-file`: the recorded per-operator breakdown of one prefill forward and one
/// decode step of the best configuration, per device.
pub struct OperatorTrace(pub PathBuf);

impl Exporter for MainReport {
    fn export(&self, plan: &Plan, report: &Report, _: &Recordings) -> Result<Vec<Artifact>, ExportError> {
        let destination = match &plan.output.file {
            Some(path) => Destination::File { flag: "--output-file", path: path.clone() },
            None => Destination::Stdout,
        };
        Ok(vec![Artifact { destination, contents: render(plan, report)? }])
    }
}

impl Exporter for SvgCharts {
    fn export(&self, _plan: &Plan, report: &Report, _: &Recordings) -> Result<Vec<Artifact>, ExportError> {
        let contents = svg::render(report).map_err(ExportError::Chart)?;
        Ok(vec![Artifact { destination: Destination::File { flag: "--plot-file", path: self.0.clone() }, contents }])
    }
}

impl Exporter for Timeline {
    fn export(&self, plan: &Plan, _: &Report, recordings: &Recordings) -> Result<Vec<Artifact>, ExportError> {
        timeline::render(plan, &recordings.timelines, self.chrome.as_deref(), self.requests.as_deref())
    }
}

impl Exporter for OperatorTrace {
    fn export(&self, plan: &Plan, report: &Report, recordings: &Recordings) -> Result<Vec<Artifact>, ExportError> {
        trace::render(plan, report, &recordings.operator_traces, &self.0)
    }
}

/// `--emit ENGINE`: launch commands, printed on stdout in place of the report, or written as
/// files into `--emit-dir`.
pub struct LaunchCommands(pub crate::plan::EmitOptions);

impl Exporter for LaunchCommands {
    fn export(&self, plan: &Plan, report: &Report, _: &Recordings) -> Result<Vec<Artifact>, ExportError> {
        let files =
            launch::render(plan, report, &self.0).map_err(|message| ExportError::Launch { engine: self.0.engine.to_string(), message })?;
        Ok(match &self.0.dir {
            None => vec![Artifact { destination: Destination::Stdout, contents: launch::as_script(&files) }],
            Some(dir) => files
                .into_iter()
                .map(|f| Artifact { destination: Destination::File { flag: "--emit-dir", path: dir.join(f.name) }, contents: f.contents })
                .collect(),
        })
    }
}

/// The exporters a plan asks for, in the order their outputs are written. Launch commands on
/// stdout take the report's place there (it still goes to `--output-file`); they come first
/// so that a row that cannot be launched fails before anything is written.
pub fn exporters(plan: &Plan) -> Vec<Box<dyn Exporter>> {
    let mut v: Vec<Box<dyn Exporter>> = Vec::new();
    if let Some(emit) = &plan.output.emit {
        v.push(Box::new(LaunchCommands(emit.clone())));
    }
    let emit_on_stdout = plan.output.emit.as_ref().is_some_and(|e| e.dir.is_none());
    if !emit_on_stdout || plan.output.file.is_some() {
        v.push(Box::new(MainReport));
    }
    if let Some(path) = &plan.output.plot_file {
        v.push(Box::new(SvgCharts(path.clone())));
    }
    if plan.output.chrome_trace.is_some() || plan.output.requests_file.is_some() {
        v.push(Box::new(Timeline { chrome: plan.output.chrome_trace.clone(), requests: plan.output.requests_file.clone() }));
    }
    if let Some(path) = &plan.output.operator_trace {
        v.push(Box::new(OperatorTrace(path.clone())));
    }
    v
}

/// Render the report in the plan's output format (charts appended to tables when enabled).
pub fn render(plan: &Plan, report: &Report) -> Result<String, ExportError> {
    match plan.output.format {
        OutputFormat::Table => {
            let mut s = table::render(plan, report);
            if chart::enabled(plan) {
                s += &chart::render(report);
            }
            Ok(s)
        }
        OutputFormat::Json => json::render(report),
        OutputFormat::Csv => csv::render(report),
    }
}

/// Put an artifact where it belongs. A closed stdout pipe (e.g. `| head`) is not reported;
/// any other stdout failure is. A file is written whole or not at all (see [`write_file`]).
pub fn write(artifact: &Artifact) -> Result<(), ExportError> {
    match &artifact.destination {
        Destination::Stdout => write_stdout(&artifact.contents),
        Destination::Stderr => {
            let _ = std::io::stderr().write_all(artifact.contents.as_bytes());
            Ok(())
        }
        Destination::File { flag, path } => {
            write_file(path, &artifact.contents).map_err(|source| ExportError::Write { flag, path: path.clone(), source })
        }
    }
}

/// Write `text` to standard output and flush it. A closed pipe (EPIPE) is not an error: the
/// reader has seen what it wanted.
pub fn write_stdout(text: &str) -> Result<(), ExportError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(ExportError::Stdout(e)),
        _ => Ok(()),
    }
}

/// Write `contents` to `path` atomically: into a temporary file beside it, flushed to disk,
/// then renamed over the target, so a failure (a full disk) leaves the previous file intact
/// and never a truncated one. A target that exists and is not a regular file (`/dev/null`, a
/// FIFO) is written directly: renaming over a device would replace it.
pub fn write_file(path: &Path, contents: &str) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        return f.write_all(contents.as_bytes()).and_then(|()| f.flush());
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "output".into());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Write several files together: every target must be a regular file or absent, every
/// contents is staged in a temporary file beside its target, and only then are they renamed
/// over their targets, so a target that cannot be written leaves every old file in place (only
/// a rename failing after another succeeded, which a full disk does not cause, could split
/// the set).
pub fn write_files(files: &[(std::path::PathBuf, String)]) -> Result<(), (std::path::PathBuf, std::io::Error)> {
    for (path, _) in files {
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            let e = std::io::Error::new(std::io::ErrorKind::InvalidInput, "exists and is not a regular file");
            return Err((path.clone(), e));
        }
    }
    let mut staged: Vec<(std::path::PathBuf, &std::path::Path)> = Vec::new();
    let unstage = |staged: &[(std::path::PathBuf, &std::path::Path)]| {
        for (tmp, _) in staged {
            let _ = std::fs::remove_file(tmp);
        }
    };
    for (path, contents) in files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "output".into());
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(contents.as_bytes())?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            unstage(&staged);
            return Err((path.clone(), e));
        }
        staged.push((tmp, path));
    }
    for (i, (tmp, path)) in staged.iter().enumerate() {
        if let Err(e) = std::fs::rename(tmp, path) {
            unstage(&staged[i..]);
            return Err((path.to_path_buf(), e));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_of_files_is_written_all_or_none() {
        // Mutation tried: skip the up-front check of the targets and a.yaml is renamed into
        // place before b.yaml (a directory) fails.
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, "old").unwrap();
        std::fs::create_dir(&b).unwrap();
        let (failed, _) = write_files(&[(a.clone(), "new".into()), (b.clone(), "new".into())]).unwrap_err();
        assert_eq!(failed, b);
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "no temporary file is left");
        std::fs::remove_dir(&b).unwrap();
        write_files(&[(a.clone(), "new a".into()), (b.clone(), "new b".into())]).unwrap();
        assert_eq!((std::fs::read_to_string(&a).unwrap(), std::fs::read_to_string(&b).unwrap()), ("new a".into(), "new b".into()));
    }

    #[test]
    fn a_failed_write_leaves_the_previous_file() {
        let dir = std::env::temp_dir().join(format!("tput-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("report.json");
        std::fs::write(&target, "previous").unwrap();
        // The temporary file cannot be created (a directory holds its name): the write fails.
        let tmp = dir.join(format!(".report.json.{}.tmp", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        // Fails if write_file writes the target in place (std::fs::write): it would succeed and
        // replace the contents instead of leaving them.
        assert!(write_file(&target, "new").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "previous");
        std::fs::remove_dir(&tmp).unwrap();
        write_file(&target, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // Fails if a device is renamed over instead of written to.
        write_file(Path::new("/dev/null"), "x").unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_char_device(&Path::new("/dev/null").metadata().unwrap().file_type()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
