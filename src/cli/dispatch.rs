//! One command line run end to end, shared by the binary and by embedders (the Python
//! package): [`parse`] tells the subcommand it names (`calibrate`, `merge`, `price`) from a
//! plan, and
//! [`execute`] runs it and hands every output, as an [`Artifact`], to the caller's [`Session`]
//! in the order the binary writes them. The session decides where they go (the binary writes
//! them, an embedder keeps them), shows progress and may stop a search. The guided
//! `--interactive` session talks to a terminal and stays with the binary.

use super::args::RawArgs;
use super::calibrate::CalibrateArgs;
use super::merge::MergeArgs;
use super::plan::{Command, Plan, PlanError};
use super::price::PriceArgs;
use crate::report::{self, Artifact, Destination};
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};

/// A parsed command line: the command it names, with that command's own arguments.
#[derive(Debug, Clone)]
pub enum Invocation {
    /// A plan (or a listing: `--list-devices`, `--list-models`, `--show-model`).
    Plan(Box<RawArgs>),
    /// `throughput-optimizer calibrate …`.
    Calibrate(CalibrateArgs),
    /// `throughput-optimizer merge FILES…`.
    Merge(MergeArgs),
    /// `throughput-optimizer price MODEL …`.
    Price(Box<PriceArgs>),
}

/// What runs a command line: where its outputs go, what it shows of a search's progress, and
/// whether it asks the search to stop. Progress comes from the search's worker threads.
pub trait Session: Sync {
    /// One output, in the order the binary writes them: written, kept or forwarded. An error
    /// stops the run (the binary's: a file that cannot be written).
    fn emit(&mut self, artifact: Artifact) -> Result<(), PlanError>;

    /// The search of `plan` is about to start.
    fn search_started(&mut self, _plan: &Plan) {}

    /// After each searched candidate: (candidates done, candidates in the run).
    fn progress(&self, _done: u64, _total: u64) {}

    /// The search has finished (before anything of its report is rendered).
    fn search_finished(&mut self) {}

    /// Set to stop the search: the candidates not yet started are skipped and the run ends
    /// with [`PlanError::Stopped`]. `None`: the run cannot be stopped.
    fn stop_flag(&self) -> Option<&AtomicBool> {
        None
    }
}

/// Parse `argv` (the program name first) into the command it names; clap's own error
/// otherwise (`--help` and `--version` included: [`clap::Error::use_stderr`] is false for
/// them).
pub fn parse(argv: &[OsString]) -> Result<Invocation, clap::Error> {
    use clap::Parser;
    match argv.get(1).and_then(|a| a.to_str()) {
        Some("calibrate") => CalibrateArgs::try_parse_from(&argv[1..]).map(Invocation::Calibrate),
        Some("merge") => MergeArgs::try_parse_from(&argv[1..]).map(Invocation::Merge),
        Some("price") => PriceArgs::try_parse_from(&argv[1..]).map(|args| Invocation::Price(Box::new(args))),
        _ => RawArgs::parse_argv(argv.iter().cloned()).map(|raw| Invocation::Plan(Box::new(raw))),
    }
}

/// Run a parsed command line, handing its outputs to `session`.
pub fn execute(invocation: Invocation, session: &mut dyn Session) -> Result<(), PlanError> {
    match invocation {
        Invocation::Plan(raw) if raw.interactive => {
            Err(PlanError::Interactive("the guided session needs a terminal: run it with the binary".into()))
        }
        Invocation::Plan(raw) => run(*raw, session),
        Invocation::Calibrate(args) => calibrate(&args, session),
        Invocation::Merge(args) => merge(&args, session),
        Invocation::Price(args) => {
            let out = super::price::run(&args)?;
            session.emit(stdout(out.text))?;
            out.warnings.into_iter().try_for_each(|w| session.emit(stderr(format!("warning: {w}\n"))))
        }
    }
}

fn stdout(contents: String) -> Artifact {
    Artifact { destination: Destination::Stdout, contents }
}

fn stderr(contents: String) -> Artifact {
    Artifact { destination: Destination::Stderr, contents }
}

/// `calibrate`: the tables once everything succeeded, then (unless `-q`) the dropped runs and the
/// time taken on stderr.
fn calibrate(args: &CalibrateArgs, session: &mut dyn Session) -> Result<(), PlanError> {
    let started = std::time::Instant::now();
    let out = super::calibrate::run(args)?;
    session.emit(stdout(out.text))?;
    if args.quiet {
        return Ok(());
    }
    session.emit(stderr(out.dropped))?;
    session.emit(stderr(format!("Calibration table computed in {:.2} seconds.\n", started.elapsed().as_secs_f64())))
}

/// `merge`: the merged report, written like a run's.
fn merge(args: &MergeArgs, session: &mut dyn Session) -> Result<(), PlanError> {
    let (plan, merged) = super::merge::run(args)?;
    export(&plan, &merged, session)
}

/// Every output the plan asks for, exporter by exporter: each one's artifacts are handed on
/// before the next renders, so a failure leaves what came before it written.
fn export(plan: &Plan, report: &crate::outcome::Report, session: &mut dyn Session) -> Result<(), PlanError> {
    // The per-configuration outputs' simulations and pricing (only those the plan asks for).
    let recordings = crate::search::record(plan, report);
    for exporter in report::exporters(plan) {
        for artifact in exporter.export(plan, report, &recordings)? {
            session.emit(artifact)?;
        }
    }
    Ok(())
}

/// A plan: the listings print at once; a run warns, searches, records and exports.
fn run(raw: RawArgs, session: &mut dyn Session) -> Result<(), PlanError> {
    let plan = match super::build(raw)? {
        Command::ListDevices(reg) => return session.emit(stdout(report::table::device_list(&reg))),
        Command::ListModels => return session.emit(stdout(report::table::model_list())),
        Command::ShowModel(m) => {
            let text = crate::yaml::to_string(&*m).map_err(|e| PlanError::Output(e.to_string()))?;
            return session.emit(stdout(format!("# {}\n{text}", m.summary())));
        }
        Command::Run(plan) => plan,
    };
    if !plan.output.quiet {
        for w in &plan.warnings {
            session.emit(stderr(format!("warning: {w}\n")))?;
        }
    }
    let started = std::time::Instant::now();
    session.search_started(&plan);
    let never = AtomicBool::new(false);
    let stop = session.stop_flag().unwrap_or(&never);
    let progress = |done, total| session.progress(done, total);
    let report = crate::search::run_stoppable(&plan, &progress, stop);
    let stopped = stop.load(Ordering::Relaxed);
    session.search_finished();
    if stopped {
        return Err(PlanError::Stopped);
    }
    if let Some(why) = crate::search::work_budget_spent(&report) {
        return Err(PlanError::WorkBudget(why));
    }
    // What the search found that needs saying (the plan's own warnings came first).
    if !plan.output.quiet {
        for w in report.warnings.iter().skip(plan.warnings.len()) {
            session.emit(stderr(format!("warning: {w}\n")))?;
        }
    }
    if let Some(why) = crate::search::sizing_unmet(&plan, &report) {
        return Err(PlanError::Unserved(why));
    }
    export(&plan, &report, session)?;
    if !plan.output.quiet {
        session.emit(stderr(format!("All experiments completed in {:.2} seconds.\n", started.elapsed().as_secs_f64())))?;
    }
    Ok(())
}
