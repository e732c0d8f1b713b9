//! One engine step priced by `throughput-optimizer price`: what was asked (the step's decodes
//! and prefills, the layout), and the answer (device, host and step time, every operator).

use crate::cost::priced::OperatorKind;
use crate::hardware::kernels::Source;
use serde::Serialize;

/// Prompts in one step: `prompts` chunks of `tokens` new tokens after `cached` in the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PrefillSpec {
    pub prompts: u64,
    pub tokens: u64,
    pub cached: u64,
}

/// What runs in the step on one attention rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StepSpec {
    /// (sequences, context): sequences that each emit one token at that KV length.
    pub decodes: Vec<(u64, u64)>,
    pub prefills: Vec<PrefillSpec>,
}

/// The clocks a step is priced at. The kernel tables hold burst rates (each shape timed alone,
/// after idle); under sustained load a power-limited device lowers its clocks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Clocks {
    /// Repeated back to back on a device whose sustained clocks were measured: every operator
    /// takes `slowdown` times its burst time, set by the step's tensor-core load (its matrix
    /// work at the device's effective matrix rate over its device time at burst clocks).
    Sustained { tensor_core_load: f64, slowdown: f64 },
    /// Repeated back to back on a device without a measured power limit: the burst rate.
    Unlimited,
    /// After idle, at full clocks (`--clocks burst`).
    Burst,
}

/// One operator kind of the step, over all its calls.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PricedOperator {
    pub name: String,
    pub kind: OperatorKind,
    pub count: f64,
    /// Milliseconds over all `count` calls.
    pub ms: f64,
    pub source: Source,
}

/// The priced step.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StepPrice {
    pub model: String,
    pub device: String,
    pub serving_engine: String,
    /// The engine profile and calibration in words.
    pub execution_profile: String,
    /// Where measured kernel times come from (system, engine, version, origin), if anywhere.
    pub kernel_tables: Option<String>,
    pub quantization: String,
    pub tp: u32,
    pub ep: u32,
    pub dp: u32,
    pub moe_tp: u32,
    pub step: StepSpec,
    /// Σ of the operators' `ms`.
    pub device_ms: f64,
    /// The engine's host time of the step (scheduling, input preparation, sampling), the gap
    /// between steps included.
    pub host_ms: f64,
    /// The part of `host_ms` the device waits for however the engine schedules (the sampled
    /// tokens' copy back, the next step's launch).
    pub host_gap_ms: f64,
    /// Whether the engine plans the next step while this one runs (host time other than the
    /// gap hidden behind device time).
    pub overlap_scheduling: bool,
    /// `device_ms` plus the host time not hidden: max(device, host − gap) + gap with
    /// overlapped scheduling, their sum without.
    pub step_ms: f64,
    /// The clocks the step is priced at.
    pub clocks: Clocks,
    pub operators: Vec<PricedOperator>,
    /// Notes on approximations taken (a dtype peak missing, a layout the engine would not run).
    pub warnings: Vec<String>,
}
