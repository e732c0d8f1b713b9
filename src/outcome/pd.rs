//! P/D planning's results: each pairing of a prefill and a decode row, the instance split
//! chosen and why, and the plan simulated as one system (verification).

use super::{sim_error_message, InstanceSplit};
use crate::cost::ParallelConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
/// One P/D pairing of a prefill row and a decode row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PdRow {
    pub pd_ratio: f64,
    pub balanced_qps: f64,
    pub p_qps: f64,
    pub d_qps: f64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub p_parallel: String,
    pub d_parallel: String,
    pub p_devices: u32,
    pub d_devices: u32,
    pub p_batch_size: u32,
    pub d_batch_size: u32,
    pub p_concurrency: u64,
    pub d_concurrency: u64,
    pub p_layout: ParallelConfig,
    pub d_layout: ParallelConfig,
    pub d_mtp: u32,
    /// Token budgets the phase searches used.
    pub p_budget: u64,
    pub d_budget: u64,
    /// Time to move one request's KV from a prefill to a decode device, ms.
    pub p_transfer_ms: f64,
    /// With `--device-hour-cost`: what the pairing serves a million output tokens, and a
    /// million tokens in total (prompt tokens included), for, USD, with prefill and decode
    /// devices in the pairing's ratio (P QPS and D QPS per instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_tokens: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PdRatioResult {
    pub rows: Vec<PdRow>,
    /// The formula's split of the device budget (P ≈ D × ratio, the original tool's rule).
    pub split: Option<InstanceSplit>,
    pub total_devices: Option<u32>,
    /// The best row's plan simulated as one P/D system (simulator engines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<PdVerification>,
    /// The split "Overall Best" reports: the formula's, or the best simulated split when it
    /// serves more requests within the SLO; and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<ChosenSplit>,
}

/// Where the split "Overall Best" reports comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SplitSource {
    /// The formula's split (P ≈ D × ratio within the device budget).
    Formula,
    /// The maximal split that served the most requests within the SLO by simulation.
    Simulation,
}

impl SplitSource {
    pub fn name(self) -> &'static str {
        match self {
            SplitSource::Formula => "formula",
            SplitSource::Simulation => "simulation",
        }
    }
}

/// The P/D split "Overall Best" reports, and why it is that one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChosenSplit {
    pub prefill_instances: u32,
    pub decode_instances: u32,
    pub prefill_devices: u32,
    pub decode_devices: u32,
    pub source: SplitSource,
    /// Requests per second within the SLO by simulation (none when not simulated).
    pub good_qps: Option<f64>,
    /// The formula split's simulated requests per second within the SLO, when simulated.
    pub formula_good_qps: Option<f64>,
    pub reason: String,
}

/// What the simulated P/D system delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PdSimulated {
    pub ttft: crate::sim::Stat,
    /// TPOT under the plan's definition: the decode cadence after the first token (TTFT holds the
    /// KV transfer and any decode-side wait).
    pub tpot: crate::sim::Stat,
    pub output_throughput: f64,
    pub request_rate: f64,
    pub goodput: f64,
    pub kv_transfer_ms: f64,
    pub slo_met: bool,
    /// Whether the run reached a steady state to measure (else it was too short: the rates
    /// cover the whole run, drain included).
    pub steady: bool,
}

/// One instance split simulated at its balanced rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PdSplitEval {
    pub prefill_instances: u32,
    pub decode_instances: u32,
    pub arrival_rate: f64,
    pub delivered_qps: f64,
    /// Requests per second that met both limits.
    pub good_qps: f64,
    pub slo_met: bool,
    /// See [`PdSimulated::steady`].
    pub steady: bool,
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "sim_error_message", skip_deserializing)]
    #[schemars(with = "Option<String>")]
    pub error: Option<crate::sim::SimError>,
}

/// The planned split simulated, with the planned figures beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PdVerification {
    pub prefill_instances: u32,
    pub decode_instances: u32,
    /// Poisson arrival rate simulated: the split's balanced rate.
    pub arrival_rate: f64,
    pub planned_ttft_ms: f64,
    pub planned_tpot_ms: f64,
    pub planned_qps: f64,
    /// Share of the prefill and of the decode side's planned capacity the arrival rate uses;
    /// the balanced rate puts the binding side at 1.0, where queues have no steady state.
    pub prefill_utilization: f64,
    pub decode_utilization: f64,
    /// Requests each verification run simulates.
    pub requests: u64,
    /// The simulated system, or why it could not run (`simulation_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<PdSimulated>,
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "sim_error_message", skip_deserializing)]
    #[schemars(with = "Option<String>")]
    pub simulation_error: Option<crate::sim::SimError>,
    /// The highest arrival rate at which the split still meets the SLO (the balanced rate
    /// itself when it does; none when even a small fraction of it fails).
    pub sustainable_rate: Option<f64>,
    /// Maximal splits within the device budget, best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub splits: Vec<PdSplitEval>,
}
