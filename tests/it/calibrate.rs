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
fn a_prediction_is_the_main_commands_benchmark_run_deterministically() {
    // A measured run is predicted as the benchmark ran it: the main command's closed loop with
    // --num-requests N (first wave included), vLLM's policy and limits, the fused graph.
    // Fails if a run's plan differs from the main command's for the same layout (e.g. the
    // first wave left out, another scheduler, eager kernels), or if predictions depend on the
    // order or thread they run in.
    let runs = read_files(&[SAMPLE]).unwrap();
    let predictor = Predictor::new(base_plan().unwrap());
    let run = runs[0].clone();
    assert_eq!(run.num_prompts, 10 * run.concurrency);
    let p = predictor.predict(&run).unwrap();
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
        "--serving-engine",
        "vllm",
        "--compile",
        "--num-requests",
        "80",
        "--batch-range",
        "8",
        "8",
        "-q",
    ]);
    let row = &v["devices"][0]["phases"][0]["rows"][0];
    let (ttft, tpot) = (row["ttft_ms"].as_f64().unwrap(), row["tpot_ms"].as_f64().unwrap());
    assert!((p.ttft_ms - ttft).abs() < 1e-9 * ttft && (p.tpot_ms - tpot).abs() < 1e-9 * tpot, "{p:?} vs {ttft} / {tpot}");
    let all = predictor.predict_all(&runs);
    let again: Vec<_> = runs.iter().rev().map(|r| predictor.predict(r)).collect();
    assert_eq!(all, again.into_iter().rev().collect::<Vec<_>>());
}
