//! `throughput-optimizer calibrate`: compare the simulator with measured serving benchmarks.
//! The subcommand has its own arguments; `main` hands it everything after `calibrate`.

use super::args::RawArgs;
use super::plan::{build_checked, Command, PlanError};
use crate::calibrate::calibrator::{self, CrossValidation, HoldOut};
use crate::calibrate::hygiene::{self, DroppedRun};
use crate::calibrate::{evaluate, read_files, render_text, CalibrateError, MeasuredRun, Prediction, Predictor, Resolver};
use clap::Parser;
use std::path::PathBuf;

const ABOUT: &str = "\
Compare the simulator with measured serving benchmarks: predict every measured run (its model, \
GPU, precision and layout at its concurrency) and print the error of TTFT and TPOT per engine × \
GPU × model (median and p90 of |error|, signed median). Runs of a model, GPU or engine the \
simulator does not have, runs whose layout contradicts itself or its id, and measurements listed \
twice, are dropped first and reported on stderr.";

#[derive(Debug, Clone, Parser)]
#[command(name = "throughput-optimizer calibrate", bin_name = "throughput-optimizer calibrate", about = ABOUT)]
pub struct CalibrateArgs {
    /// Measured results: CSV files (columns id, engine, engine_version, model, gpu, precision,
    /// isl, osl, concurrency, tp, attention_dp, moe_tp, moe_ep, ttft_ms, tpot_ms) or
    /// `vllm bench serve --save-result` JSON files (one run each; pass `--metadata gpu=… tp=…`
    /// to the client). Each run is simulated at its `engine_version` (blank or not a number: the
    /// current release), which decides version-dependent defaults such as overlapped
    /// scheduling.
    #[arg(long, num_args = 1.., required = true, value_name = "FILE")]
    pub measured: Vec<PathBuf>,
    /// table (Markdown) or json. [default: table]
    #[arg(long, value_name = "FORMAT")]
    pub output: Option<String>,
    /// Engine profiles to predict with, as on every command: `none` (datasheet efficiencies
    /// and the engines' default overheads) or a YAML file per engine. [default: the built-in
    /// calibrations]
    #[arg(long, value_name = "FILE|none", action = clap::ArgAction::Append)]
    pub calibration: Vec<String>,
    /// Fit a calibration per serving engine × device to the measured runs (three rounds of
    /// simulation with the fitted parameters, regularised toward the datasheet values) and print
    /// the error tables before and after, and the fitted parameters. Runs whose TPOT falls more
    /// than 30 % from one concurrency to the next higher one of their series are left out of
    /// the fit (not of the tables) and listed.
    #[arg(long)]
    pub fit: bool,
    /// With --fit: write the fitted engine profiles into this directory (`<engine>.yaml`, the
    /// format --calibration reads; `profiles/engines` re-fits the built-in ones).
    #[arg(long, value_name = "DIR", requires = "fit")]
    pub write: Option<PathBuf>,
    /// With --fit: also fit once without each model and predict that model's runs with the
    /// result (leave-one-model-out cross-validation).
    #[arg(long, requires = "fit")]
    pub leave_one_model_out: bool,
    /// With --fit: also fit once without each device and predict that device's runs with the
    /// result (leave-one-device-out cross-validation). The held-out device has no fitted entry:
    /// it is priced like any device the profiles were not fitted on, with its datasheet
    /// efficiencies and its engine's default overheads (the mean of the fitted devices').
    #[arg(long, requires = "fit")]
    pub leave_one_device_out: bool,
    /// No notes on stderr (the dropped runs, the time taken), as on every command.
    #[arg(short, long)]
    pub quiet: bool,
}

/// What `calibrate` prints: the tables (stdout) and the report of the runs it dropped (stderr,
/// empty when none).
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrateOutput {
    pub text: String,
    /// For stderr: the columns not read and the dropped runs.
    pub dropped: String,
}

/// Dropped runs listed one per line on stderr; the JSON output lists them all.
const DROPPED_LISTED: usize = 20;

/// The plan every prediction starts from: the tool's defaults for a simulated aggregated run
/// (each measured run then sets its model, device, quantization, lengths and layout).
pub fn base_plan(calibration: &[String]) -> Result<crate::plan::Plan, PlanError> {
    let mut argv: Vec<String> =
        ["throughput-optimizer", "Qwen/Qwen3-32B", "--device", "H100_SXM", "--input-length", "1024", "--output-length", "128"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    for c in calibration {
        argv.push(format!("--calibration={c}"));
    }
    let raw = RawArgs::try_parse_from(argv).map_err(|e| PlanError::Args(e.to_string()))?;
    match build_checked(raw)? {
        Command::Run(plan) => Ok(*plan),
        _ => Err(PlanError::Output("calibrate: the base plan is not a run".into())),
    }
}

/// Read, screen, predict, tabulate: the whole output, or the first error (nothing is printed
/// then).
pub fn run(args: &CalibrateArgs) -> Result<CalibrateOutput, PlanError> {
    let json = match args.output.as_deref().map(str::to_lowercase).as_deref() {
        None | Some("table") => false,
        Some("json") => true,
        Some(o) => return Err(PlanError::invalid("--output", o, "not one of table, json")),
    };
    // One catalog and device registry for reading the runs and predicting them.
    let resolver = Resolver::default();
    let files = read_files(&args.measured, &resolver)?;
    let read = files.runs;
    let read_count = read.len() + files.unsupported.len();
    let base = base_plan(&args.calibration)?;
    unused_calibrations(&base, &read)?;
    let predictor = Predictor::new(base, &resolver);
    let shares: Vec<Option<f64>> = {
        use rayon::prelude::*;
        read.par_iter().map(|r| predictor.prefill_share(r)).collect()
    };
    let mut screened = hygiene::screen(read, &resolver, |i| shares[i]);
    // Runs the simulator cannot predict failed the first check of all: listed first.
    screened.dropped.splice(0..0, files.unsupported.into_iter().map(DroppedRun::from));
    let notes: String = files.notes.iter().map(|n| format!("{n}\n")).collect();
    let dropped = notes + &hygiene::render_dropped(&screened.dropped, read_count, DROPPED_LISTED);
    if screened.kept.is_empty() {
        return Err(CalibrateError::AllDropped { read: read_count, report: dropped }.into());
    }
    let runs = screened.kept;
    let text = if args.fit {
        fit_and_report(args, &predictor, &runs, &screened.dropped, json)?
    } else {
        let preds = predictor.predict_all(&runs);
        let table = evaluate(&runs, &preds);
        if json {
            // The table's fields, then every run beside its prediction (the residuals a user
            // studies when a group's median hides a pattern by concurrency or length).
            let mut v = serde_json::to_value(&table).map_err(|e| PlanError::Output(e.to_string()))?;
            v["runs"] = serde_json::Value::Array(runs.iter().zip(&preds).map(|(r, p)| run_json(r, &[("predicted", p)])).collect());
            v["dropped"] = serde_json::to_value(&screened.dropped).map_err(|e| PlanError::Output(e.to_string()))?;
            pretty(&v)?
        } else {
            render_text(&table)
        }
    };
    Ok(CalibrateOutput { text, dropped })
}

/// A `--calibration FILE` of an engine no measured run was served by would be read and never
/// used: refused, as a planning run refuses one for an engine it does not simulate.
fn unused_calibrations(base: &crate::plan::Plan, runs: &[MeasuredRun]) -> Result<(), PlanError> {
    use crate::quant::NamedEnum;
    for engine in crate::plan::ServingEngine::ALL {
        let Some(file) = base.engines.get(engine.name()).file.as_deref() else { continue };
        if !runs.iter().any(|r| r.engine == engine.name()) {
            return Err(PlanError::rejected(
                "--calibration",
                file,
                format!("--calibration {file} calibrates {engine}, but no measured run was served by {engine} (runs are vllm, sglang or trtllm)"),
            ));
        }
    }
    Ok(())
}

fn pretty(v: &serde_json::Value) -> Result<String, PlanError> {
    serde_json::to_string_pretty(v).map(|s| s + "\n").map_err(|e| PlanError::Output(e.to_string()))
}

/// `--fit`: the fit, its tables, the files it writes and the cross-validations.
fn fit_and_report(
    args: &CalibrateArgs,
    predictor: &Predictor,
    runs: &[MeasuredRun],
    dropped: &[DroppedRun],
    json: bool,
) -> Result<String, PlanError> {
    if let Some(dir) = &args.write {
        if !dir.is_dir() {
            return Err(PlanError::invalid("--write", dir.display(), "an existing directory"));
        }
    }
    let out = calibrator::fit(predictor, runs);
    let before = evaluate(runs, &out.before);
    let after = evaluate(runs, &out.after);
    let held_out: Vec<HoldOut> = [(args.leave_one_model_out, HoldOut::Model), (args.leave_one_device_out, HoldOut::Device)]
        .into_iter()
        .filter_map(|(on, h)| on.then_some(h))
        .collect();
    let cvs: Vec<CrossValidation> = held_out.into_iter().map(|h| calibrator::cross_validate(predictor, runs, h)).collect();
    if let Some(dir) = &args.write {
        // Every fitted engine, also one whose every group was not written (its profile then
        // carries the prior's costs as defaults, as the tables after the fit predicted it).
        let files: Vec<(std::path::PathBuf, String)> = out
            .params
            .keys()
            .chain(out.untrusted.iter().map(|(k, _)| k))
            .map(|(e, _)| e.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|name| {
                let profile = out.engines.get(&name);
                (dir.join(format!("{name}.yaml")), format!("{}{}", calibrator::file_header(profile), profile.to_yaml()))
            })
            .collect();
        // All or none: a half-written set would mix this fit's engines with an older one's.
        crate::report::write_files(&files).map_err(|(path, e)| PlanError::Output(format!("--write {}: {e}", path.display())))?;
    }
    if json {
        return fit_json(runs, &out, &before, &after, &cvs, dropped);
    }
    let mut text = format!("## Before: the device's own hardware values, the prior's engine costs\n\n{}\n", render_text(&before));
    text += &format!("## After the fit\n\n{}\n", render_text(&after));
    text += &format!("## Fitted parameters\n\n{}\n", calibrator::render_params(&out.params));
    if !out.untrusted.is_empty() {
        text += &format!(
            "## Not written: fits off by more than {:.0} % (median |error| of TTFT) on their own runs; these devices take the engine's defaults\n\n",
            calibrator::UNTRUSTED_TTFT_PCT
        );
        for ((engine, device), ttft) in &out.untrusted {
            text += &match ttft.is_nan() {
                true => format!("- {engine} × {device}: no run predicted at its best fit\n"),
                false => format!("- {engine} × {device}: median TTFT error {ttft:.1} % at its best (unwritten) fit\n"),
            };
        }
        text += "\n";
    }
    if !out.screened.is_empty() {
        text += &format!(
            "## Left out of the fit (in the tables above): runs whose TPOT falls more than {:.0} % from one concurrency to the next higher one of their series\n\n",
            calibrator::TPOT_DROP_LIMIT * 100.0
        );
        for (i, why) in &out.screened {
            text += &format!("- {} ({} row {}): {why}\n", runs[*i].id, runs[*i].file, runs[*i].row);
        }
        text += "\n";
    }
    for cv in &cvs {
        let h = cv.held_out.name();
        text += &format!("## Leave one {h} out: each {h}'s runs predicted by a fit without it\n\n{}\n", render_text(&cv.table));
    }
    Ok(text)
}

/// The JSON output of `--fit`: the tables, the parameters, the cross-validations (`null` when
/// not asked for), the runs left out of the fit and those dropped, and every run beside its
/// predictions.
fn fit_json(
    runs: &[MeasuredRun],
    out: &calibrator::FitOutcome,
    before: &crate::calibrate::ErrorTable,
    after: &crate::calibrate::ErrorTable,
    cvs: &[CrossValidation],
    dropped: &[DroppedRun],
) -> Result<String, PlanError> {
    let key = |h: HoldOut| format!("leave_one_{}_out", h.name());
    let mut v = serde_json::json!({
        "before": before,
        "after": after,
        "params": out.params.iter().map(|((e, d), (p, n))| serde_json::json!({"engine": e, "device": d, "runs": n, "params": p})).collect::<Vec<_>>(),
        "leave_one_model_out": null,
        "leave_one_device_out": null,
        "left_out_of_fit": out.screened.iter().map(|(i, why)| serde_json::json!({"id": runs[*i].id, "why": why})).collect::<Vec<_>>(),
        "not_written": out.untrusted.iter().map(|((e, d), t)| serde_json::json!({"engine": e, "device": d, "ttft_median_abs_pct": t})).collect::<Vec<_>>(),
        "dropped": dropped,
    });
    for cv in cvs {
        v[key(cv.held_out)] = serde_json::to_value(&cv.table).map_err(|e| PlanError::Output(e.to_string()))?;
    }
    // Each run's predictions: before and after the fit, and by each cross-validation's fit
    // without its model or device.
    let per_run = runs.iter().enumerate().map(|(i, r)| {
        let mut preds = vec![("before".to_string(), &out.before[i]), ("after".to_string(), &out.after[i])];
        preds.extend(cvs.iter().map(|cv| (key(cv.held_out), &cv.predictions[i])));
        let named: Vec<(&str, &Result<Prediction, String>)> = preds.iter().map(|(n, p)| (n.as_str(), *p)).collect();
        run_json(r, &named)
    });
    v["runs"] = serde_json::Value::Array(per_run.collect());
    pretty(&v)
}

/// One measured run in JSON output: its identity, layout and measurement, and each named
/// prediction (`null` where the simulator could not predict it).
fn run_json(r: &MeasuredRun, preds: &[(&str, &Result<Prediction, String>)]) -> serde_json::Value {
    let mut v = serde_json::json!({
        "id": r.id, "engine": r.engine, "gpu": r.gpu, "model": r.model, "isl": r.isl, "osl": r.osl,
        "concurrency": r.concurrency, "tp": r.tp, "attention_dp": r.attention_dp, "moe_tp": r.moe_tp, "moe_ep": r.moe_ep,
        "measured": {"ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms},
    });
    for (name, p) in preds {
        v[*name] = serde_json::to_value(p.as_ref().ok()).unwrap_or(serde_json::Value::Null);
    }
    v
}
