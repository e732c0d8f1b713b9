//! From the command line (or a scenario file) to an immutable, validated [`Plan`].
//!
//! [`args::RawArgs`] is what clap parsed; [`scenario`] turns a scenario file into the same raw
//! arguments; [`build`] runs the per-section validators (`validate`, private) through
//! [`plan::build_checked`]: each failure is a typed [`PlanError`] naming the flag, the value and
//! what is allowed, and models, device profiles and length files are resolved. Nothing after
//! this module re-validates user input. [`dispatch`] runs a whole command line (a plan or a
//! subcommand) for the binary and for embedders.

pub mod args;
pub mod calibrate;
pub mod dispatch;
pub mod merge;
pub mod plan;
pub mod price;
pub mod scenario;
mod validate;

pub use args::RawArgs;
pub use plan::{
    Command, EngineKind, ImageSpec, Mode, OutputFormat, OutputOptions, Plan, PlanError, SearchSpace, SearchStrategy, ServingOptions, Slo,
    Speculative, SpeculativeMethod, TpotDefinition, Workload,
};

/// Validate the raw arguments (or the scenario file they name, with the flags given next to
/// it) into a command.
pub fn build(raw: RawArgs) -> Result<Command, PlanError> {
    let Some(path) = &raw.scenario else {
        let cmd = plan::build_checked(raw)?;
        plan::check_user_run(&cmd)?;
        return Ok(cmd);
    };
    let loaded = scenario::load(path, &raw)?;
    let mut cmd = plan::build_checked(loaded.raw.clone()).map_err(|e| loaded.locate(e))?;
    plan::check_user_run(&cmd).map_err(|e| loaded.locate(e))?;
    if let Command::Run(plan) = &mut cmd {
        plan.warnings.extend(loaded.override_warnings());
    }
    Ok(cmd)
}
