//! The discrete-event simulation of serving instances: requests arrive, wait, prefill in
//! chunks, decode one token per step (more with MTP), finish. Time is integer nanoseconds;
//! events pop by (time, push order); a step's latency comes from a [`StepCostModel`] on the
//! step's actual batch shape. Every loop is bounded: a run that cannot finish is a typed
//! [`SimError`], never a hang.
//!
//! Layout: `config` (what a run simulates: [`InstanceConfig`], [`SimConfig`], a P/D
//! [`System`], [`RunParams`]), `decode` (speculative decoding: [`DecodeMode`],
//! [`AcceptanceDraws`]), `error` ([`SimError`]), [`records`] (each request's and step's record,
//! the store of request records), [`queue`] (events), [`kv`] (paged KV pool, prefix cache),
//! [`link`] (KV transfers sharing the links between prefill and decode instances),
//! `step_time` (what a planned step takes on the clock: device and host time combined as
//! the engine runs them, CUDA graphs or eager launches), `pipeline` (a pipelined replica's
//! stages on the clock: micro-batch lanes sharing the stages, the sends between them),
//! [`instance`] (one instance's mechanics: queues, running sequences, KV accounting, the step
//! builder, step completion), [`scheduler`] (the per-step policy behind the
//! [`scheduler::Scheduler`] trait: msmodeling's [`scheduler::DecodeFirst`] or vLLM V1's
//! [`scheduler::Vllm`]), [`router`] (which instance receives a request), `simulation` (one
//! run: its assembly and entry points, the event loop, the workload feed, the measurement and
//! the report), [`steady`] (the closed loop's stopping rule), [`metrics`] (latency recorders
//! and the report). The simulator knows nothing of the command line or the
//! search: it takes a [`SimConfig`] (or a P/D [`System`]) and a [`StepCostModel`], and returns
//! a [`SimReport`] or a [`SimError`].
//!
//! [`StepCostModel`]: crate::cost::StepCostModel

mod config;
mod decode;
mod error;
pub mod instance;
pub mod kv;
pub mod link;
pub mod metrics;
mod pipeline;
pub mod queue;
pub mod records;
pub mod router;
pub mod scheduler;
mod simulation;
pub mod steady;
mod step_time;

pub use config::{
    CudaGraphs, Frontend, GraphUnit, Group, InstanceConfig, KvTransfer, Measure, Pipeline, Role, Routing, RunParams, SimConfig, System,
};
pub use decode::{AcceptanceDraws, DecodeMode};
pub use error::SimError;
pub use instance::Instance;
pub use metrics::{BinStat, LatencyStats, Percentile, Recorder, SimReport, Stat};
pub use queue::{Event, EventQueue, Nanos};
pub use records::{RequestState, Requests, StepRecord};
pub use simulation::{
    simulate, simulate_detailed, simulate_detailed_staged, simulate_report, simulate_scheduled, simulate_staged, simulate_system,
    CLIENT_JITTER_NS, MAX_STEP_SECONDS,
};
pub use step_time::{steady_seconds, wall_seconds};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod pd_tests;

#[cfg(test)]
mod pipeline_tests;

#[cfg(test)]
mod engine_tests;

#[cfg(test)]
mod schedule_tests;

#[cfg(test)]
mod properties;

#[cfg(test)]
mod ahead_tests;
