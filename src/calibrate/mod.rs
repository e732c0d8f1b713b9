//! Calibration against measured serving benchmarks: it reads measured runs ([`measured`]: the
//! benchmark CSV format and `vllm bench serve --save-result` JSON), maps each to a catalog
//! model, a device profile, a quantization and a layout ([`mapping`]), drops the runs whose
//! layout contradicts itself or its id and the repeated measurements ([`hygiene`]), predicts
//! each run's mean TTFT and TPOT with the simulator ([`predict`]), tabulates the errors per
//! engine × GPU × model ([`table`]), and fits the serving engines' per-device calibrations
//! ([`fit`]: the first-order model and its optimiser; [`calibrator`]: the rounds, the groups,
//! the written profiles and the leave-one-model-out and leave-one-device-out
//! cross-validations).
//!
//! Layer: above `search` (it builds candidates and simulation configurations through the
//! search's engine adapter), below `report` and `cli` (the command line builds the base plan).

pub mod calibrator;
pub mod error;
pub mod fit;
pub mod hygiene;
pub mod mapping;
pub mod measured;
pub mod predict;
pub mod table;

pub use error::CalibrateError;
pub use mapping::{Precision, Resolver};
pub use measured::{read_csv, read_files, read_vllm_json, MeasuredFiles, MeasuredRun, Target};
pub use predict::{Prediction, Predictor};
pub use table::{evaluate, render_text, ErrorGroup, ErrorSummary, ErrorTable};

#[cfg(test)]
mod tests;
