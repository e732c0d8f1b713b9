//! `throughput-optimizer calibrate`: compare the simulator with measured serving benchmarks.
//! The subcommand has its own arguments; `main` hands it everything after `calibrate`.

use super::args::RawArgs;
use super::plan::{build_checked, Command, PlanError};
use crate::calibrate::{evaluate, read_files, render_text, Predictor};
use clap::Parser;
use std::path::PathBuf;

const ABOUT: &str = "\
Compare the simulator with measured serving benchmarks: predict every measured run (its model, \
GPU, precision and layout at its concurrency) and print the error of TTFT and TPOT per engine × \
GPU × model (median and p90 of |error|, signed median).";

#[derive(Debug, Clone, Parser)]
#[command(name = "throughput-optimizer calibrate", bin_name = "throughput-optimizer calibrate", about = ABOUT)]
pub struct CalibrateArgs {
    /// Measured results: CSV files (columns id, engine, engine_version, model, gpu, precision,
    /// isl, osl, concurrency, tp, attention_dp, moe_tp, moe_ep, ttft_ms, tpot_ms) or
    /// `vllm bench serve --save-result` JSON files (one run each; pass `--metadata gpu=… tp=…`
    /// to the client).
    #[arg(long, num_args = 1.., required = true, value_name = "FILE")]
    pub measured: Vec<PathBuf>,
    /// table (Markdown) or json. [default: table]
    #[arg(long, value_name = "FORMAT")]
    pub output: Option<String>,
}

/// The plan every prediction starts from: the tool's defaults for a simulated aggregated run
/// (each measured run then sets its model, device, quantization, lengths and layout).
pub fn base_plan() -> Result<crate::plan::Plan, PlanError> {
    let argv = ["throughput-optimizer", "Qwen/Qwen3-32B", "--device", "H100_SXM", "--input-length", "1024", "--output-length", "128"];
    let raw = RawArgs::try_parse_from(argv).map_err(|e| PlanError::Args(e.to_string()))?;
    match build_checked(raw)? {
        Command::Run(plan) => Ok(*plan),
        _ => Err(PlanError::Output("calibrate: the base plan is not a run".into())),
    }
}

/// Read, predict, tabulate: the whole output, or the first error (nothing is printed then).
pub fn run(args: &CalibrateArgs) -> Result<String, PlanError> {
    let json = match args.output.as_deref().map(str::to_lowercase).as_deref() {
        None | Some("table") => false,
        Some("json") => true,
        Some(o) => return Err(PlanError::invalid("--output", o, "not one of table, json")),
    };
    let runs = read_files(&args.measured)?;
    let predictor = Predictor::new(base_plan()?);
    let table = evaluate(&runs, &predictor.predict_all(&runs));
    if json {
        serde_json::to_string_pretty(&table).map(|s| s + "\n").map_err(|e| PlanError::Output(e.to_string()))
    } else {
        Ok(render_text(&table))
    }
}
