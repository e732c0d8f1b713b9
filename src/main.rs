//! The binary: parse arguments, validate them into a plan, run it, print the report.
//! Usage errors exit with 2, runtime failures with 1.

use std::io::Write as _;
use std::process::ExitCode;
use throughput_optimizer::cli::{self, Command, PlanError, RawArgs};
use throughput_optimizer::report;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "calibrate") {
        return calibrate(&argv[1..]);
    }
    if argv.get(1).is_some_and(|a| a == "merge") {
        return merge(&argv[1..]);
    }
    if argv.get(1).is_some_and(|a| a == "price") {
        return price(&argv[1..]);
    }
    match RawArgs::parse_argv(std::env::args_os()) {
        Ok(raw) => exit_with(run(raw)),
        Err(e) => clap_exit(e),
    }
}

/// The exit of a clap parse that did not produce arguments: help and version go to stdout
/// (exit 0), errors to stderr (exit 2), as clap prints them.
fn clap_exit(e: clap::Error) -> ExitCode {
    let _ = e.print();
    ExitCode::from(if e.use_stderr() { 2 } else { 0 })
}

/// Success, or the error on stderr with its exit code (2 for usage, 1 for runtime). A closed
/// stderr must not turn a clean error into a panic, so nothing here uses `eprintln!`.
fn exit_with(result: Result<(), PlanError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// `throughput-optimizer calibrate …`: its own arguments; the output is printed only once
/// everything succeeded.
fn calibrate(argv: &[std::ffi::OsString]) -> ExitCode {
    use clap::Parser;
    let args = match cli::calibrate::CalibrateArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => return clap_exit(e),
    };
    let started = std::time::Instant::now();
    exit_with(cli::calibrate::run(&args).and_then(|out| {
        report::write_stdout(&out.text)?;
        if !args.quiet {
            let _ = write!(std::io::stderr(), "{}", out.dropped);
            let _ = writeln!(std::io::stderr(), "Calibration table computed in {:.2} seconds.", started.elapsed().as_secs_f64());
        }
        Ok(())
    }))
}

/// `throughput-optimizer price MODEL …`: its own arguments; the priced step is printed only
/// once everything succeeded.
fn price(argv: &[std::ffi::OsString]) -> ExitCode {
    use clap::Parser;
    let args = match cli::price::PriceArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => return clap_exit(e),
    };
    exit_with(cli::price::run(&args).and_then(|text| Ok(report::write_stdout(&text)?)))
}

/// `throughput-optimizer merge FILES…`: its own arguments; the merged report is written like a
/// run's (stdout or --output-file, whole or not at all).
fn merge(argv: &[std::ffi::OsString]) -> ExitCode {
    use clap::Parser;
    let args = match cli::merge::MergeArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => return clap_exit(e),
    };
    exit_with(cli::merge::run(&args).and_then(|(plan, merged)| {
        let recordings = throughput_optimizer::search::record(&plan, &merged);
        for exporter in report::exporters(&plan) {
            for artifact in exporter.export(&plan, &merged, &recordings)? {
                report::write(&artifact)?;
            }
        }
        Ok(())
    }))
}

/// A progress bar on stderr that appears only when stderr is a terminal and the search has run
/// for more than a second.
struct Bar {
    bar: indicatif::ProgressBar,
    started: std::time::Instant,
    shown: std::sync::atomic::AtomicBool,
    enabled: bool,
}

impl Bar {
    fn new(quiet: bool) -> Self {
        use std::io::IsTerminal;
        let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} searching {pos}/{len} candidates [{elapsed}] {wide_bar}") {
            bar.set_style(style);
        }
        Bar { bar, started: std::time::Instant::now(), shown: false.into(), enabled: !quiet && std::io::stderr().is_terminal() }
    }

    fn update(&self, done: u64, total: u64) {
        if !self.enabled {
            return;
        }
        self.bar.set_length(total);
        self.bar.set_position(done);
        if self.started.elapsed().as_secs_f64() > 1.0 && !self.shown.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn interactive(raw: RawArgs) -> Result<(), PlanError> {
    let argv: Vec<String> = std::env::args().collect();
    let stdin = std::io::stdin();
    let mut p = throughput_optimizer::interactive::Prompter::new(stdin.lock(), std::io::stdout());
    if let Some((plan, report)) = throughput_optimizer::interactive::run_session(&mut p, &raw, &argv)? {
        if let Some(why) = throughput_optimizer::search::work_budget_spent(&report) {
            return Err(PlanError::WorkBudget(why));
        }
        let text = report::render(&plan, &report)?;
        // The summary closes with the disclaimer; do not print it twice.
        let text = text.trim_end().strip_suffix(throughput_optimizer::outcome::DISCLAIMER).unwrap_or(&text).trim_end();
        report::write_stdout(&format!("{text}\n{}", throughput_optimizer::interactive::summarise(&plan, &report)))?;
    }
    Ok(())
}

fn run(raw: RawArgs) -> Result<(), PlanError> {
    if raw.interactive {
        return interactive(raw);
    }
    match cli::build(raw)? {
        Command::ListDevices(reg) => Ok(report::write_stdout(&throughput_optimizer::report::table::device_list(&reg))?),
        Command::ListModels => Ok(report::write_stdout(&throughput_optimizer::report::table::model_list())?),
        Command::ShowModel(m) => {
            let text = throughput_optimizer::yaml::to_string(&*m).map_err(|e| PlanError::Output(e.to_string()))?;
            Ok(report::write_stdout(&format!("# {}\n{text}", m.summary()))?)
        }
        Command::Run(plan) => {
            if !plan.output.quiet {
                for w in &plan.warnings {
                    let _ = writeln!(std::io::stderr(), "warning: {w}");
                }
            }
            let started = std::time::Instant::now();
            let bar = Bar::new(plan.output.quiet);
            let report = throughput_optimizer::search::run_with_progress(&plan, &|d, t| bar.update(d, t));
            bar.finish();
            if let Some(why) = throughput_optimizer::search::work_budget_spent(&report) {
                return Err(PlanError::WorkBudget(why));
            }
            // What the search found that needs saying (the plan's own warnings came first).
            if !plan.output.quiet {
                for w in report.warnings.iter().skip(plan.warnings.len()) {
                    let _ = writeln!(std::io::stderr(), "warning: {w}");
                }
            }
            // The per-configuration outputs' simulations and pricing (only those the plan asks for).
            let recordings = throughput_optimizer::search::record(&plan, &report);
            for exporter in report::exporters(&plan) {
                for artifact in exporter.export(&plan, &report, &recordings)? {
                    report::write(&artifact)?;
                }
            }
            if !plan.output.quiet {
                let _ = writeln!(std::io::stderr(), "All experiments completed in {:.2} seconds.", started.elapsed().as_secs_f64());
            }
            Ok(())
        }
    }
}
