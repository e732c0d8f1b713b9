//! Per-section validators: each checks one part of [`RawArgs`] and returns the matching piece
//! of the [`super::Plan`]. [`super::plan::build_checked`] calls them in a fixed order, so that
//! of several mistakes the first section's is reported.

mod mode;
mod model;
mod output;
mod quant;
mod search;
mod serving;
mod sim;
mod workload;

pub(crate) use mode::{validate_device_grids, validate_mode};
pub(crate) use model::{validate_devices, validate_model, validate_registry};
pub(crate) use output::{validate_log_level, validate_output};
pub(crate) use quant::{validate_compile, validate_quant};
pub(crate) use search::validate_search;
pub(crate) use serving::{validate_mtp, validate_serving, validate_speculative};
pub(crate) use sim::{validate_engine, validate_performance_model, validate_sim};
pub(crate) use workload::{validate_slo, validate_workload};

use super::plan::PlanError;

/// Notes for stderr, in the order the sections produce them.
#[derive(Debug, Default)]
pub(crate) struct Warnings(Vec<String>);

impl Warnings {
    pub(crate) fn push(&mut self, warning: impl Into<String>) {
        self.0.push(warning.into());
    }

    pub(crate) fn into_vec(self) -> Vec<String> {
        self.0
    }
}

pub(crate) fn usage(message: impl Into<String>) -> PlanError {
    PlanError { usage: true, message: message.into() }
}

/// `v` without repeated values, first occurrences kept in order.
pub(crate) fn dedup(v: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for &x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}
