//! `throughput-optimizer calibrate`: the error table on measured runs, bad input as usage
//! errors naming file, row and field, and the prediction's mix of steady state and first wave.

use super::util::{cmd, run_json, run_ok};
use predicates::prelude::*;
use throughput_optimizer::calibrate::{read_files, Predictor};
use throughput_optimizer::cli::calibrate::base_plan;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/calibration/measured_sample.csv");
const VLLM_JSON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/calibration/vllm_bench_serve.json");

#[test]
fn calibrate_prints_the_error_table_of_a_fixture() {
    let out = run_ok(&["calibrate", "--measured", SAMPLE, VLLM_JSON]);
    assert!(out.starts_with("| engine | GPU "), "{out}");
    for line in ["| vllm   | h100_sxm | Qwen/Qwen3-32B ", "| sglang | h200_sxm | meta-llama/Llama-3.1-8B-Instruct ", "| vllm   | all "] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
    // The JSON run joins the two CSV rows of its group.
    assert!(out.contains("| vllm   | h100_sxm | Qwen/Qwen3-32B                   |    3 |      0 |"), "{out}");
    assert!(out.contains("bias: signed median"), "{out}");
}

#[test]
fn calibrate_json_has_one_group_per_engine_gpu_model() {
    let out = run_ok(&["calibrate", "--measured", SAMPLE, "--output", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"].as_array().unwrap().len(), 7);
    assert_eq!(v["engines"].as_array().unwrap().len(), 3);
    assert!(v["groups"][0]["ttft"]["median_abs_pct"].as_f64().unwrap() > 0.0);
}

#[test]
fn bad_measured_input_is_a_usage_error_naming_file_row_and_field_and_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    let text = std::fs::read_to_string(SAMPLE).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[3] = lines[3].replace(",h200_sxm,", ",h300_sxm,");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let shown = bad.display().to_string();
    cmd()
        .args(["calibrate", "--measured", SAMPLE, &shown])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(format!("error: {shown}: row 3, field `gpu`: `h300_sxm` is not a known GPU")));
    cmd().args(["calibrate"]).assert().code(2).stderr(predicate::str::contains("--measured"));
    cmd().args(["calibrate", "--measured", "/nonexistent.csv"]).assert().code(2).stderr(predicate::str::contains("cannot read the file"));
}

#[test]
fn a_prediction_mixes_the_first_wave_and_the_steady_state_by_request_count_deterministically() {
    // Fails if the first-wave weight is applied to the steady state (C / N swapped with
    // 1 − C / N), if a run's plan differs from the main command's for the same layout, or if
    // predictions depend on the order or thread they run in.
    let runs = read_files(&[SAMPLE]).unwrap();
    let predictor = Predictor::new(base_plan().unwrap());
    let mut run = runs[0].clone();
    assert_eq!(run.num_prompts, 10 * run.concurrency);
    let mixed = predictor.predict(&run).unwrap();
    run.num_prompts = run.concurrency;
    let wave = predictor.predict(&run).unwrap();
    run.num_prompts = 1 << 50;
    let steady = predictor.predict(&run).unwrap();
    for (m, w, s) in [(mixed.ttft_ms, wave.ttft_ms, steady.ttft_ms), (mixed.tpot_ms, wave.tpot_ms, steady.tpot_ms)] {
        assert!((m - (0.1 * w + 0.9 * s)).abs() < 1e-6 * m, "mixed {m}, wave {w}, steady {s}");
    }
    // Anchored on the main command: the first wave alone is `--arrival burst`, the steady state
    // `--arrival closed`, for the same layout at the same concurrency.
    for (arrival, p) in [("burst", wave), ("closed", steady)] {
        let v = run_json(&[
            "Qwen/Qwen3-32B",
            "--device",
            "H100_SXM",
            "--num-devices",
            "2",
            "--tp-sizes",
            "2",
            "--input-length",
            "1024",
            "--output-length",
            "128",
            "--quantize-linear-action",
            "DISABLED",
            "--arrival",
            arrival,
            "--batch-range",
            "8",
            "8",
            "-q",
        ]);
        let row = &v["devices"][0]["phases"][0]["rows"][0];
        let (ttft, tpot) = (row["ttft_ms"].as_f64().unwrap(), row["tpot_ms"].as_f64().unwrap());
        assert!((p.ttft_ms - ttft).abs() < 1e-9 * ttft && (p.tpot_ms - tpot).abs() < 1e-9 * tpot, "{arrival}: {p:?} vs {ttft} / {tpot}");
    }
    assert_ne!(wave.ttft_ms, steady.ttft_ms);
    let all = predictor.predict_all(&runs);
    let again: Vec<_> = runs.iter().rev().map(|r| predictor.predict(r)).collect();
    assert_eq!(all, again.into_iter().rev().collect::<Vec<_>>());
}
