//! throughput-optimizer: which LLM-serving deployment gets the most tokens per second out of
//! a set of accelerators under TTFT/TPOT SLOs.
//!
//! Layers only look down (checked by `tests/it/layers.rs`): [`units`], [`util`] → [`yaml`] →
//! [`model`] (what the network computes), [`hardware`] (what the device can do) → [`quant`] →
//! [`cost`] (what one step of a batch costs) → [`workload`] (lengths, arrivals) → the engines,
//! [`sim`] (the discrete-event simulator) and [`analytic`] (the original tool's closed-form
//! formulas), which never see the command line → [`plan`] (the validated request) →
//! [`outcome`] (the result model) → [`search`] (which candidate wins; builds each engine's
//! configuration from the plan) → [`calibrate`] (measured benchmarks against the same
//! simulations) → [`report`] (rendering only) → [`error`] → [`cli`] (arguments
//! and scenario files validated into a [`plan::Plan`]) → [`interactive`].

pub mod analytic;
pub mod calibrate;
pub mod cli;
pub mod cost;
pub mod error;
pub mod hardware;
pub mod interactive;
pub mod model;
pub mod outcome;
pub mod plan;
pub mod quant;
pub mod report;
pub mod search;
pub mod sim;
pub mod units;
pub mod util;
pub mod workload;
pub mod yaml;
