//! From the command line to an immutable, validated [`Plan`].
//!
//! [`args::RawArgs`] is what clap parsed; [`plan::build`] checks every rule (each failure is a
//! [`PlanError`] naming the flag, the value and what is allowed) and resolves models, device
//! profiles and length files. Nothing after this module re-validates user input.

pub mod args;
pub mod plan;
mod validate;

pub use args::RawArgs;
pub use plan::{
    build, Command, EngineKind, ImageSpec, Mode, OutputFormat, OutputOptions, Plan, PlanError, SearchSpace, SearchStrategy, ServingOptions,
    Slo, Speculative, SpeculativeMethod, TpotDefinition, Workload,
};
