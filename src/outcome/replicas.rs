//! The replica plan of a trace (`--plan-replicas WINDOW`), as data: per window of the trace the
//! instances of the chosen deployment, the requests that arrived and their SLO statistics from
//! one simulation of the whole trace with the count changing at window edges; the total
//! instance-hours against a fleet sized for the peak window. `search::replicas` builds it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One window of the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReplicaWindow {
    /// Seconds from the trace's start: [start_s, end_s).
    pub start_s: f64,
    pub end_s: f64,
    /// Instances taking new requests during the window.
    pub instances: u32,
    /// The count the window's own search found (its requests simulated alone); `instances` is
    /// larger where the whole-trace simulation missed the SLO with it.
    pub searched_instances: u32,
    /// Requests that arrived in the window, and their rate.
    pub arrivals: u64,
    pub request_rate: f64,
    /// The `--slo-percentile` statistic of TTFT and of TPOT (the plan's definition) over the
    /// window's arrivals in the whole-trace simulation (`None`: no arrival).
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub slo_met: bool,
}

/// The replica plan of one device's chosen aggregated deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReplicaPlan {
    /// The deployment whose instances are counted (the Overall Best row): its layout, its
    /// running cap per instance, and the devices one instance uses.
    pub parallel: String,
    pub max_num_seqs: u32,
    pub devices_per_instance: u32,
    /// The most instances a window may have: `--num-devices` ÷ devices per instance.
    pub max_instances: u32,
    pub window_s: f64,
    pub windows: Vec<ReplicaWindow>,
    /// Σ instances × window length, hours; the fleet sized for the peak window over every
    /// window; and the same in device-hours.
    pub instance_hours: f64,
    pub peak_instances: u32,
    pub peak_instance_hours: f64,
    pub device_hours: f64,
    pub peak_device_hours: f64,
    /// 1 − instance_hours ÷ peak_instance_hours.
    pub saving: f64,
    /// With `--device-hour-cost`: the plan's and the peak fleet's price, USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_usd: Option<f64>,
    /// Every window meets the SLO in the whole-trace simulation.
    pub slo_met: bool,
    /// Whole-trace simulations run (the first, then one more per round that added instances
    /// to windows that missed the SLO), and simulations of single windows in the search.
    pub trace_simulations: u32,
    pub window_simulations: u32,
    /// Why the plan could not be simulated, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
