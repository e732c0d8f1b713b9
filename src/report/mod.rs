//! Rendering only: the [`Report`] value that `search` built becomes text, JSON, CSV, terminal
//! and SVG charts, or a Chrome trace. Each output format is an [`Exporter`]; [`exporters`] picks
//! the ones the plan asks for, and [`write()`] puts each [`Artifact`] where it belongs. Nothing
//! here decides a result: ranking and feasibility come from `search`, the data from `outcome`.

pub mod chart;
pub mod csv;
pub mod json;
pub mod svg;
pub mod table;
pub mod trace;

use crate::outcome::Report;
use crate::plan::{OutputFormat, Plan};
use std::io::Write as _;
use std::path::PathBuf;

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
    #[error("{flag} {}: cannot write: {source}", path.display())]
    Write { flag: &'static str, path: PathBuf, source: std::io::Error },
}

/// Where an artifact goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Stdout,
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

/// One output format: renders the report (and the plan it answers) into artifacts.
pub trait Exporter {
    fn export(&self, plan: &Plan, report: &Report) -> Result<Vec<Artifact>, ExportError>;
}

/// The main report (`--output table|json|csv`) to stdout or `--output-file`.
pub struct MainReport;

/// `--plot-file`: every chart as one SVG.
pub struct SvgCharts(pub PathBuf);

/// `--chrome-trace-file`: the operator timeline of the best configuration, per device.
pub struct ChromeTrace(pub PathBuf);

impl Exporter for MainReport {
    fn export(&self, plan: &Plan, report: &Report) -> Result<Vec<Artifact>, ExportError> {
        let destination = match &plan.output.file {
            Some(path) => Destination::File { flag: "--output-file", path: path.clone() },
            None => Destination::Stdout,
        };
        Ok(vec![Artifact { destination, contents: render(plan, report)? }])
    }
}

impl Exporter for SvgCharts {
    fn export(&self, _plan: &Plan, report: &Report) -> Result<Vec<Artifact>, ExportError> {
        let contents = svg::render(report).map_err(ExportError::Chart)?;
        Ok(vec![Artifact { destination: Destination::File { flag: "--plot-file", path: self.0.clone() }, contents }])
    }
}

impl Exporter for ChromeTrace {
    fn export(&self, plan: &Plan, report: &Report) -> Result<Vec<Artifact>, ExportError> {
        trace::render(plan, report, &self.0)
    }
}

/// The exporters a plan asks for, in the order their outputs are written.
pub fn exporters(plan: &Plan) -> Vec<Box<dyn Exporter>> {
    let mut v: Vec<Box<dyn Exporter>> = vec![Box::new(MainReport)];
    if let Some(path) = &plan.output.plot_file {
        v.push(Box::new(SvgCharts(path.clone())));
    }
    if let Some(path) = &plan.output.chrome_trace {
        v.push(Box::new(ChromeTrace(path.clone())));
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

/// Put an artifact where it belongs. A closed stdout pipe (e.g. `| head`) is not reported.
pub fn write(artifact: &Artifact) -> Result<(), ExportError> {
    match &artifact.destination {
        Destination::Stdout => {
            let _ = std::io::stdout().lock().write_all(artifact.contents.as_bytes());
            Ok(())
        }
        Destination::File { flag, path } => {
            std::fs::write(path, &artifact.contents).map_err(|source| ExportError::Write { flag, path: path.clone(), source })
        }
    }
}
