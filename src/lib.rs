//! throughput-optimizer: which LLM-serving deployment gets the most tokens per second out of
//! a set of accelerators under TTFT/TPOT SLOs.
//!
//! Data flows one way: [`model`] (what the network computes) → [`hardware`] (what the device
//! can do) → [`cost`] (what one step of a batch costs) → engines ([`analytic`] closed-form
//! formulas; the discrete-event simulator) → [`search`] (which candidate wins) → [`report`].
//! [`cli`] turns arguments into an immutable, validated [`cli::Plan`] that every later stage
//! trusts.

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
