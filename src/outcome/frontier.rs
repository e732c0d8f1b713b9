//! The deployment plane: every probe as a point of output tokens per device against tokens
//! per user, the Pareto frontier, and the aggregated-versus-P/D comparison.

use super::PdVerification;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
/// How a deployment serves requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentKind {
    /// Every instance runs prefill and decode (mixed batching).
    Aggregated,
    /// Prefill instances hand the KV cache to decode instances (P/D).
    Disaggregated,
}

impl DeploymentKind {
    /// The kind as the text report and the charts say it.
    pub fn label(self) -> &'static str {
        match self {
            DeploymentKind::Aggregated => "aggregated",
            DeploymentKind::Disaggregated => "P/D",
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            DeploymentKind::Aggregated => "aggregated",
            DeploymentKind::Disaggregated => "disaggregated",
        }
    }
}

/// A P/D deployment on the device budget: instance layouts, counts and batch sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PdDeployment {
    pub prefill_parallel: String,
    pub decode_parallel: String,
    pub prefill_instances: u32,
    pub decode_instances: u32,
    pub prefill_devices_per_instance: u32,
    pub decode_devices_per_instance: u32,
    /// Requests per prefill / decode DP replica.
    pub prefill_batch_size: u32,
    pub decode_batch_size: u32,
    /// Requests per second the split sustains by the P/D formulas: min(P × prefill QPS,
    /// D × decode QPS).
    pub request_rate: f64,
    /// Share of the prefill and of the decode side's capacity that rate uses (1 = 100 %).
    pub prefill_utilization: f64,
    pub decode_utilization: f64,
}

/// One probed configuration as a point of the throughput-per-device against
/// throughput-per-user plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FrontierPoint {
    pub kind: DeploymentKind,
    /// Aggregated: the layout and batch size; disaggregated: both sides and the split.
    pub label: String,
    /// Devices the deployment uses.
    pub devices: u32,
    /// Output tokens/s of the whole deployment.
    pub tokens_per_s: f64,
    /// Output tokens/s per device used.
    pub tokens_per_s_per_device: f64,
    /// Output tokens/s each request sees while decoding: 1000 / TPOT.
    pub tokens_per_s_per_user: f64,
    /// TTFT (P/D: the prefill's plus the KV transfer) and TPOT, ms.
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// Within the TTFT and TPOT limits (and in memory).
    pub meets_slo: bool,
    /// No other point has both more tokens/s per device and more tokens/s per user.
    pub on_frontier: bool,
    /// Aggregated points: the probe's index in the aggregated phase's `rows`.
    pub row: Option<usize>,
    /// Aggregated points: the layout label and the batch size per replica.
    pub parallel: Option<String>,
    pub batch_size: Option<u32>,
    /// Disaggregated points: the deployment.
    pub pd: Option<PdDeployment>,
    /// With `--device-hour-cost`: USD per million output tokens and per million tokens (prompt
    /// + output) of the whole deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_tokens: Option<f64>,
    /// `--goodput`, aggregated points: the probe's highest rate within the SLO, req/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_rate_within_slo: Option<f64>,
}

/// Every probed configuration of a device as a point, the Pareto frontier among them and the
/// deployment chosen: the most tokens/s per device within the SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Frontier {
    /// Aggregated points first (probe order), then disaggregated ones.
    pub points: Vec<FrontierPoint>,
    /// Index in `points` of the chosen deployment, if any meets the SLO.
    pub chosen: Option<usize>,
    /// The TPOT limit as tokens/s per user (1000 / limit), if there is one.
    pub slo_tokens_per_s_per_user: Option<f64>,
}

/// A deployment of the aggregated-versus-disaggregated comparison, with the figure it is
/// judged by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComparedDeployment {
    pub point: FrontierPoint,
    /// Output tokens/s per device by simulation: the aggregated search's own figure; for P/D,
    /// the simulated system's delivered rate when it holds the SLO at the planned rate, else
    /// its sustainable rate, times the mean output length. None with the analytic engine.
    pub simulated_tokens_per_s_per_device: Option<f64>,
}

/// The best aggregated and the best P/D deployment for the same model, devices and SLO, and
/// which serves more per device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AggVsDisagg {
    pub aggregated: Option<ComparedDeployment>,
    pub disaggregated: Option<ComparedDeployment>,
    /// The P/D plan simulated as one system (simulator engines).
    pub verification: Option<PdVerification>,
    pub winner: Option<DeploymentKind>,
    /// Why, in words, with the figures.
    pub reason: String,
}
