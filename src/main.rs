//! The binary: the command line run by [`dispatch`] (parse, validate into a plan, search,
//! render) with every output written as it comes and a progress bar on a terminal; the guided
//! `--interactive` session. Usage errors exit with 2, runtime failures with 1.

use std::io::Write as _;
use std::process::ExitCode;
use throughput_optimizer::cli::dispatch::{self, Invocation};
use throughput_optimizer::cli::{self, PlanError, RawArgs};
use throughput_optimizer::report;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match dispatch::parse(&argv) {
        Ok(Invocation::Plan(raw)) if raw.interactive => exit_with(interactive(*raw)),
        Ok(invocation) => exit_with(dispatch::execute(invocation, &mut Terminal { bar: None })),
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

/// The binary's session: every output written where it belongs as soon as it is rendered,
/// and a progress bar while the search runs.
struct Terminal {
    bar: Option<Bar>,
}

impl dispatch::Session for Terminal {
    fn emit(&mut self, artifact: report::Artifact) -> Result<(), PlanError> {
        Ok(report::write(&artifact)?)
    }

    fn search_started(&mut self, plan: &cli::Plan) {
        self.bar = Some(Bar::new(plan.output.quiet));
    }

    fn progress(&self, done: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.update(done, total);
        }
    }

    fn search_finished(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
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
        if let Some(why) = throughput_optimizer::search::sizing_unmet(&plan, &report) {
            return Err(PlanError::Unserved(why));
        }
        let text = report::render(&plan, &report)?;
        // The summary closes with the disclaimer; do not print it twice.
        let text = text.trim_end().strip_suffix(throughput_optimizer::outcome::DISCLAIMER).unwrap_or(&text).trim_end();
        report::write_stdout(&format!("{text}\n{}", throughput_optimizer::interactive::summarise(&plan, &report)))?;
    }
    Ok(())
}
