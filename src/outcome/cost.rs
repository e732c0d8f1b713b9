//! What serving costs, as data: the prices a run was given (`--device-hour-cost`, echoed in
//! the inputs) and the cost frontier across devices: every point of the deployment planes
//! priced per million tokens, against tokens/s per user. `search::cost` fills them in.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `--device-hour-cost` as the run used it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostInput {
    /// USD per device-hour of each device profile the run searched.
    pub usd_per_device_hour: BTreeMap<String, f64>,
    /// `flag` (one price for every device) or the YAML file the prices came from.
    pub source: String,
}

/// One deployment of some device's plane, priced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostPoint {
    pub device: String,
    /// Its index in that device's `frontier.points`.
    pub point: usize,
    pub kind: super::DeploymentKind,
    pub label: String,
    pub devices: u32,
    /// USD per million tokens (prompt + output) and per million output tokens of the whole
    /// deployment (see `Row::usd_per_million_tokens`).
    pub usd_per_million_tokens: f64,
    pub usd_per_million_output_tokens: f64,
    pub tokens_per_s_per_user: f64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub meets_slo: bool,
    /// No other point is both cheaper per million tokens and faster per user.
    pub on_frontier: bool,
}

/// Every device's deployments priced, the Pareto frontier of cost per million tokens (lower is
/// better) against tokens/s per user (higher is better), and the cheapest point within the
/// SLO. With one device profile it holds the same points as the throughput frontier (one price:
/// cost is devices ÷ tokens/s); across profiles it says which hardware is cheapest at each
/// speed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostFrontier {
    /// Devices in run order, each device's points in its frontier's order.
    pub points: Vec<CostPoint>,
    /// Index in `points` of the cheapest point that meets the SLO.
    pub cheapest: Option<usize>,
}
