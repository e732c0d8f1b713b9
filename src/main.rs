//! The binary: parse arguments, validate them into a plan, run it, print the report.
//! Usage errors exit with 2, runtime failures with 1.

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use throughput_optimizer::cli::{self, Command, PlanError, RawArgs};

fn main() -> ExitCode {
    let raw = match RawArgs::try_parse() {
        Ok(r) => r,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(raw) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::from(if e.usage { 2 } else { 1 })
        }
    }
}

fn run(raw: RawArgs) -> Result<(), PlanError> {
    let runtime = |m: String| PlanError { usage: false, message: m };
    match cli::build(raw)? {
        Command::ListDevices(reg) => {
            print!("{}", throughput_optimizer::report::table::device_list(&reg));
            Ok(())
        }
        Command::ListModels => {
            print!("{}", throughput_optimizer::report::table::model_list());
            Ok(())
        }
        Command::ShowModel(m) => {
            let text = throughput_optimizer::yaml::to_string(&*m).map_err(|e| runtime(e.to_string()))?;
            print!("# {}\n{text}", m.summary());
            Ok(())
        }
        Command::Run(plan) => {
            if !plan.output.quiet {
                for w in &plan.warnings {
                    eprintln!("warning: {w}");
                }
            }
            let started = std::time::Instant::now();
            let report = throughput_optimizer::search::run(&plan);
            let text = throughput_optimizer::report::render(&plan, &report).map_err(runtime)?;
            match &plan.output.file {
                Some(path) => {
                    std::fs::write(path, text).map_err(|e| runtime(format!("--output-file {}: cannot write: {e}", path.display())))?
                }
                None => {
                    let mut out = std::io::stdout().lock();
                    // A closed pipe (e.g. `| head`) is not an error worth reporting.
                    let _ = out.write_all(text.as_bytes());
                }
            }
            if let Some(path) = &plan.output.plot_file {
                throughput_optimizer::report::svg::write(&report, path).map_err(runtime)?;
            }
            if let Some(path) = &plan.output.chrome_trace {
                throughput_optimizer::report::trace::write(&plan, &report, path).map_err(runtime)?;
            }
            if !plan.output.quiet {
                eprintln!("All experiments completed in {:.2} seconds.", started.elapsed().as_secs_f64());
            }
            Ok(())
        }
    }
}
