//! Calibration against measured serving benchmarks. This increment measures: it reads measured
//! runs ([`measured`]: the benchmark CSV format and `vllm bench serve --save-result` JSON),
//! maps each to a catalog model, a device profile, a quantization and a layout ([`mapping`]),
//! predicts its mean TTFT and TPOT with the simulator ([`predict`]) and tabulates the errors
//! per engine × GPU × model ([`table`]).
//!
//! Fitting per device × engine parameters (a `Calibration` the other commands accept) is the
//! next increment; it plugs into [`Predictor::plan_for`].
//!
//! Layer: above `search` (it builds candidates and simulation configurations through the
//! search's engine adapter), below `report` and `cli` (the command line builds the base plan).

pub mod error;
pub mod mapping;
pub mod measured;
pub mod predict;
pub mod table;

pub use error::CalibrateError;
pub use mapping::{Precision, Resolver};
pub use measured::{read_csv, read_files, read_vllm_json, MeasuredRun, Target};
pub use predict::{Prediction, Predictor};
pub use table::{evaluate, render_text, ErrorGroup, ErrorSummary, ErrorTable};

#[cfg(test)]
mod tests;
