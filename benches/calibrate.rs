//! `calibrate` on the measured training sample (981 runs): read, predict every run with the
//! simulator (rayon over runs), tabulate. Target: 1,000 runs ≤ 60 s on 2 cores
//! (docs/validation.md records the baseline).

use throughput_optimizer::calibrate::{evaluate, read_files, Predictor, Resolver};
use throughput_optimizer::cli::calibrate::base_plan;

const TRAIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/calibration/measured_train.csv");
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/calibration/measured_sample.csv");

fn main() {
    divan::main();
}

/// Reading and mapping the 981 runs (no simulation).
#[divan::bench(sample_count = 5)]
fn read_training_file() -> usize {
    read_files(&[TRAIN], &Resolver::default()).unwrap().runs.len()
}

/// The whole evaluation of the training file.
#[divan::bench(sample_count = 2, sample_size = 1)]
fn evaluate_training_file() -> usize {
    let res = Resolver::default();
    let runs = read_files(&[TRAIN], &res).unwrap().runs;
    let predictor = Predictor::new(base_plan(&[]).unwrap(), &res);
    evaluate(&runs, &predictor.predict_all(&runs)).groups.len()
}

/// The eight-run sample: a quick check of the per-run cost.
#[divan::bench(sample_count = 10)]
fn evaluate_sample() -> usize {
    let res = Resolver::default();
    let runs = read_files(&[SAMPLE], &res).unwrap().runs;
    let predictor = Predictor::new(base_plan(&[]).unwrap(), &res);
    evaluate(&runs, &predictor.predict_all(&runs)).groups.len()
}

/// The fit of every engine × device calibration on the training file (four simulation passes
/// of the 981 runs and the optimiser between them). Target: ≤ 60 s on 2 cores.
#[divan::bench(sample_count = 1, sample_size = 1)]
fn fit_training_file() -> usize {
    let res = Resolver::default();
    let runs = read_files(&[TRAIN], &res).unwrap().runs;
    let predictor = Predictor::new(base_plan(&[]).unwrap(), &res);
    throughput_optimizer::calibrate::calibrator::fit(&predictor, &runs).params.len()
}
