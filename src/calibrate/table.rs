//! How far predictions are from measurements: per engine × GPU × model and per engine, the
//! median and p90 of |error| and the signed median (bias) of TTFT and TPOT, where error =
//! (predicted − measured) / measured in percent.

use super::measured::MeasuredRun;
use super::predict::Prediction;
use serde::Serialize;
use std::collections::BTreeMap;

/// Error statistics of one latency over a group of runs, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ErrorSummary {
    pub median_abs_pct: f64,
    pub p90_abs_pct: f64,
    /// Signed median: positive when the simulator over-predicts.
    pub bias_pct: f64,
}

/// One line of the table: a group of runs (`gpu` and `model` are `all` on an engine's
/// overall line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorGroup {
    pub engine: String,
    pub gpu: String,
    pub model: String,
    /// Runs in the group, failed ones included.
    pub rows: usize,
    /// Runs the simulator could not predict; they are left out of the statistics.
    pub failed: usize,
    pub ttft: Option<ErrorSummary>,
    pub tpot: Option<ErrorSummary>,
}

/// The error table: groups sorted by engine, GPU, model, then one overall line per engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorTable {
    pub groups: Vec<ErrorGroup>,
    pub engines: Vec<ErrorGroup>,
    /// Runs that could not be predicted: (id, why).
    pub failures: Vec<(String, String)>,
}

/// (predicted − measured) / measured, in percent.
pub fn error_pct(predicted: f64, measured: f64) -> f64 {
    (predicted - measured) / measured * 100.0
}

/// The q-quantile (0 ≤ q ≤ 1) of sorted values, interpolating linearly between neighbours
/// (the median of an even count is the mean of the middle two). NaN when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Statistics of signed errors (percent); `None` when there are none.
pub fn summarise(errors: &[f64]) -> Option<ErrorSummary> {
    if errors.is_empty() {
        return None;
    }
    let abs = sorted(errors.iter().map(|e| e.abs()).collect());
    let signed = sorted(errors.to_vec());
    Some(ErrorSummary { median_abs_pct: quantile(&abs, 0.5), p90_abs_pct: quantile(&abs, 0.9), bias_pct: quantile(&signed, 0.5) })
}

#[derive(Default)]
struct Acc {
    rows: usize,
    failed: usize,
    ttft: Vec<f64>,
    tpot: Vec<f64>,
}

impl Acc {
    fn add(&mut self, run: &MeasuredRun, p: &Result<Prediction, String>) {
        self.rows += 1;
        match p {
            Ok(p) => {
                self.ttft.push(error_pct(p.ttft_ms, run.ttft_ms));
                self.tpot.push(error_pct(p.tpot_ms, run.tpot_ms));
            }
            Err(_) => self.failed += 1,
        }
    }

    fn group(&self, (engine, gpu, model): (String, String, String)) -> ErrorGroup {
        ErrorGroup { engine, gpu, model, rows: self.rows, failed: self.failed, ttft: summarise(&self.ttft), tpot: summarise(&self.tpot) }
    }
}

/// The error table of predictions against the runs they predict (same order and length).
pub fn evaluate(runs: &[MeasuredRun], predictions: &[Result<Prediction, String>]) -> ErrorTable {
    assert_eq!(runs.len(), predictions.len(), "one prediction per run");
    let mut groups: BTreeMap<(String, String, String), Acc> = BTreeMap::new();
    let mut engines: BTreeMap<String, Acc> = BTreeMap::new();
    let mut failures = Vec::new();
    for (run, p) in runs.iter().zip(predictions) {
        groups.entry((run.engine.clone(), run.gpu.clone(), run.model.clone())).or_default().add(run, p);
        engines.entry(run.engine.clone()).or_default().add(run, p);
        if let Err(why) = p {
            failures.push((run.id.clone(), why.clone()));
        }
    }
    ErrorTable {
        groups: groups.iter().map(|(k, a)| a.group(k.clone())).collect(),
        engines: engines.iter().map(|(e, a)| a.group((e.clone(), "all".into(), "all".into()))).collect(),
        failures,
    }
}

fn pct(x: f64, signed: bool) -> String {
    if signed {
        format!("{x:+.1} %")
    } else {
        format!("{x:.1} %")
    }
}

/// What the columns mean, printed under the table.
pub const LEGEND: &str = "Error = (predicted − measured) / measured. median, p90: of |error| over the group's predicted runs; \
bias: signed median (+ = the simulator over-predicts). failed: runs the simulator could not predict (left out).";

/// The table as text (a Markdown table), followed by the runs that could not be predicted.
pub fn render_text(t: &ErrorTable) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    table.set_header([
        "engine",
        "GPU",
        "model",
        "rows",
        "failed",
        "TTFT median",
        "TTFT p90",
        "TTFT bias",
        "TPOT median",
        "TPOT p90",
        "TPOT bias",
    ]);
    for g in t.groups.iter().chain(&t.engines) {
        let cells = |s: Option<ErrorSummary>| match s {
            Some(s) => [pct(s.median_abs_pct, false), pct(s.p90_abs_pct, false), pct(s.bias_pct, true)],
            None => ["-".to_string(), "-".to_string(), "-".to_string()],
        };
        let mut row = vec![g.engine.clone(), g.gpu.clone(), g.model.clone(), g.rows.to_string(), g.failed.to_string()];
        row.extend(cells(g.ttft));
        row.extend(cells(g.tpot));
        table.add_row(row);
    }
    for i in 3..11 {
        if let Some(c) = table.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    let mut out = format!("{table}\n\n{LEGEND}\n");
    if !t.failures.is_empty() {
        out += &format!("\n{} run(s) could not be simulated:\n", t.failures.len());
        for (id, why) in t.failures.iter().take(10) {
            out += &format!("  {id}: {why}\n");
        }
        if t.failures.len() > 10 {
            out += &format!("  … and {} more (see --output json)\n", t.failures.len() - 10);
        }
    }
    out
}
