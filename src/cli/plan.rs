//! Validation of [`RawArgs`] into a [`Plan`] (or one of the listing commands); the rules of
//! each section live in the private `validate` module next to this one.

use super::args::RawArgs;
use super::validate::{self as v, Warnings};
use crate::hardware::DeviceRegistry;
use crate::model::ModelArch;

pub use crate::plan::*;

/// A rejected command line (or a failed run): see [`crate::error::Error`].
pub type PlanError = crate::error::Error;

/// What the command line asks for.
#[derive(Debug, Clone)]
pub enum Command {
    Run(Box<Plan>),
    ListDevices(DeviceRegistry),
    ListModels,
    ShowModel(Box<ModelArch>),
}

/// Validate arguments that do not name a scenario: one validator per section of the plan, in a
/// fixed order (of several mistakes, the earliest section's is reported), then the checks of a
/// planning run (some layout to search, an emittable plan).
pub fn build_checked(raw: RawArgs) -> Result<Command, PlanError> {
    if raw.list_devices {
        return Ok(Command::ListDevices(v::validate_registry(&raw)?));
    }
    if raw.list_models {
        v::validate_registry(&raw)?;
        return Ok(Command::ListModels);
    }
    if raw.show_model {
        v::validate_registry(&raw)?;
        let (model, _) = v::validate_model(&raw)?;
        return Ok(Command::ShowModel(Box::new(model)));
    }
    let plan = validate_plan(raw)?;
    crate::search::check_candidates(&plan).map_err(PlanError::NoLayout)?;
    if let Some(emit) = &plan.output.emit {
        crate::report::launch::check(&plan, emit).map_err(|m| PlanError::rejected("--emit", emit.engine, m))?;
    }
    Ok(Command::Run(Box::new(plan)))
}

/// The checks of a run the user asked for (not of the plans `calibrate` builds from its runs,
/// which read every engine's calibration at once).
pub fn check_user_run(cmd: &Command) -> Result<(), PlanError> {
    match cmd {
        Command::Run(plan) => v::check_calibration_engines(plan),
        _ => Ok(()),
    }
}

/// Every section of a planning run validated into its [`Plan`] (what `price` shares with a
/// planning run), without the search-space checks.
pub fn validate_plan(mut raw: RawArgs) -> Result<Plan, PlanError> {
    let mut warnings = Warnings::default();
    v::apply_target_rate(&mut raw)?;
    let registry = v::validate_registry(&raw)?;
    let (model, model_source) = v::validate_model(&raw)?;
    let quiet = v::validate_log_level(&raw)?;
    let devices = v::validate_devices(&raw, &registry)?;
    let (mode, num_devices) = v::validate_mode(&raw, &mut warnings)?;
    v::validate_device_grids(&devices, &mode, num_devices)?;
    let quant = v::validate_quant(&raw, &model, &devices, &mut warnings)?;
    let compile = v::validate_compile(&raw, &mut warnings)?;
    // An `--arrival trace` file is read once: its lengths size the workload, its arrivals
    // drive the simulator.
    let trace = v::load_arrival_trace(&raw)?;
    let workload = v::validate_workload(&raw, &model, trace.as_ref(), &mut warnings)?;
    let slo = v::validate_slo(&raw);
    let (mtp, rates) = v::validate_mtp(&raw, &model)?;
    let speculative = v::validate_speculative(&raw, &mtp, &mut warnings)?;
    let mut search = v::validate_search(&raw, &model, &mode, num_devices, mtp, &mut warnings)?;
    let engine = v::validate_engine(&raw)?;
    let serving = v::validate_serving(&raw, &devices, &mode, engine, (rates, speculative), &mut warnings)?;
    let mut sim = v::validate_sim(&raw, engine, &workload.input, trace, &mut warnings)?;
    v::validate_engine_vendor(&raw, &sim, &devices)?;
    let mut engines = v::validate_calibration(&raw, &registry)?;
    v::warn_unused_engine_version(&sim, &engines, &mut warnings);
    v::validate_performance_model(&raw, engine, &devices, &sim, &mut engines)?;
    let (output, jobs) = v::validate_output(&raw, devices.len(), quiet, &mut warnings)?;
    search.shard = v::validate_shard(&raw, &mode, &search, &output)?;
    let device_hour_cost = v::validate_device_hour_cost(&raw, &registry, &devices)?;
    let replica_window_s = v::validate_plan_replicas(&raw, &mode, engine, &sim.arrival)?;
    let capacity = v::validate_capacity(&raw, engine, &mode, &search, &mut sim, &mut warnings)?;
    let mut plan = Plan {
        model,
        model_source,
        devices,
        num_devices,
        workload,
        mode,
        slo,
        quant,
        compile,
        search,
        serving,
        sim,
        engine,
        output,
        jobs,
        seed: raw.seed.unwrap_or(0),
        engines,
        warnings: warnings.into_vec(),
        device_hour_cost,
        replica_window_s,
        capacity,
    };
    plan.warnings.extend(v::unused_reserve_warning(&raw, &plan));
    v::check_one_token_tpot_limit(&raw, &plan)?;
    Ok(plan)
}
