//! Capacity planning's results: a deployment's SLO statistics at one offered rate
//! ([`SloPoint`], the points of a goodput search and its chart) and the answer of a sizing run
//! ([`Sizing`]: the fewest devices that serve a target load within the SLO).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One simulation of a deployment at an offered rate: the SLO statistics it measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SloPoint {
    /// Offered request rate, req/s.
    pub rate: f64,
    /// The `--slo-percentile` statistic of TTFT and TPOT, ms (`None`: the simulation failed).
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    /// Within both limits.
    pub meets_slo: bool,
}

/// One side of a P/D sizing answer: its instances and their layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SizedRole {
    pub instances: u32,
    /// Devices of the role's instances together (`instances` × `devices_per_instance`).
    pub devices: u32,
    pub devices_per_instance: u32,
    /// One instance's layout: tensor, data (replicas inside the instance) and expert
    /// parallelism.
    pub tp: u32,
    pub dp: u32,
    pub ep: u32,
    /// The layout as the tables print it.
    pub parallel: String,
    /// Sequences one instance runs at most (the batch size of the role's searched row).
    pub batch_size: u32,
    /// The check at the target with one instance fewer of this role (`None` with one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_fewer: Option<SloPoint>,
}

/// The smallest deployment that serves a target load within the SLO (`--target-request-rate`,
/// `--target-concurrency`), checked by a simulation at the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Sizing {
    /// Devices the deployment uses.
    pub devices: u32,
    /// Serving instances: data-parallel replicas of `tp` devices (a MoE layout's attention-DP
    /// ranks share its expert-parallel group); a P/D answer's prefill and decode instances.
    pub instances: u32,
    /// The layout of the whole deployment: tensor, data (= `instances`) and expert parallelism
    /// (a P/D answer: its decode instances' layout, each role's in `prefill_instances` and
    /// `decode_instances`).
    pub tp: u32,
    pub dp: u32,
    pub ep: u32,
    /// `aggregated` or `disaggregated`.
    pub deployment: super::DeploymentKind,
    /// The layout as the tables print it.
    pub parallel: String,
    /// The target: a request rate (req/s) or a number of concurrent clients.
    pub target_request_rate: Option<f64>,
    pub target_concurrency: Option<u64>,
    /// Requests per second delivered at the target (the target rate, or what the closed loop
    /// of `target_concurrency` clients completes).
    pub request_rate: f64,
    /// Headroom: the highest Poisson rate at which the deployment still meets the SLO (to the
    /// goodput search's tolerance).
    pub max_request_rate_within_slo: f64,
    /// The `--slo-percentile` statistic of TTFT and TPOT at the target, ms.
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// Simulations the sizing ran (checks at the target, aggregated and P/D, and the headroom
    /// search; not the P/D roles' phase searches).
    pub simulations: u32,
    /// The check at the target one instance fewer would miss (`None` with one instance; a P/D
    /// answer: one instance fewer of the role whose check misses by more).
    pub one_fewer: Option<SloPoint>,
    /// The headroom search's simulations, by rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_curve: Vec<SloPoint>,
    /// P/D answers only: each role's instances and layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_instances: Option<SizedRole>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_instances: Option<SizedRole>,
    /// With `--device-hour-cost`: what the answer's devices cost per hour, USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_hour: Option<f64>,
}
