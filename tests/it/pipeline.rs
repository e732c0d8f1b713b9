//! Pipeline parallelism (`--pp-sizes`) end to end: the flag's validation, PP rows from both
//! engines with the replica's devices split over stages, the layout in JSON and in the launch
//! commands, and a run without the flag unchanged by giving it as 1.

use crate::util::{args, array, num, phase, run_json, run_ok, usage_error};

/// Qwen3-32B (64 layers) on 8 devices, short lengths, analytic engine.
const BASE: &[&str] = &["Qwen/Qwen3-32B", "--num-devices", "8", "--input-length", "512", "--output-length", "128", "--compile"];

#[test]
fn pp_above_the_layer_count_is_refused() {
    // Qwen3-0.6B has 28 decoder layers: a stage needs one.
    let a = [
        "Qwen/Qwen3-0.6B",
        "--num-devices",
        "32",
        "--tp-sizes",
        "1",
        "--pp-sizes",
        "32",
        "--engine",
        "analytic",
        "--input-length",
        "64",
        "--output-length",
        "8",
    ];
    usage_error(&a, &["--pp-sizes", "32", "28 decoder layers", "from 1 to 28"]);
}

#[test]
fn pp_above_the_devices_is_refused() {
    usage_error(&args(BASE, &["--pp-sizes", "16", "--engine", "analytic"]), &["--pp-sizes contains 16, which exceeds --num-devices (8)"]);
}

#[test]
fn tp_times_pp_must_divide_the_devices() {
    usage_error(
        &args(BASE, &["--tp-sizes", "8", "--pp-sizes", "2", "--engine", "analytic"]),
        &["No valid parallel combination", "--pp-sizes 2", "TP × PP"],
    );
}

#[test]
fn pp_one_is_the_run_without_the_flag() {
    // Mutation: count the stages in the concurrency even at PP 1 (batch × DP × 2) and the
    // reports differ.
    let without = run_ok(&args(BASE, &["--engine", "analytic", "--output", "json"]));
    let with = run_ok(&args(BASE, &["--engine", "analytic", "--output", "json", "--pp-sizes", "1"]));
    let strip = |s: &str| s.lines().filter(|l| !l.contains("\"elapsed") && !l.contains("completed in")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&without), strip(&with));
    assert!(!without.contains("\"pp\""), "a run without stages writes no pp");
}

#[test]
fn both_engines_give_pp_rows_with_the_stage_split() {
    for engine in ["analytic", "sim"] {
        let r = run_json(&args(BASE, &["--tp-sizes", "2", "--pp-sizes", "1", "2", "--engine", engine, "--batch-range", "1", "8"]));
        let rows = array(&phase(&r, 0, "aggregated")["rows"], "rows");
        let of = |pp: u64| rows.iter().find(|x| x["layout"]["pp"].as_u64().unwrap_or(1) == pp && x["batch_size"] == 4).expect("a row");
        let (one, two) = (of(1), of(2));
        assert!(two["parallel"].as_str().unwrap().starts_with("TP=2 | PP=2 | DP=2"), "{engine}: {}", two["parallel"]);
        // Half the layers per device: about half the weights (each stage holds one of the
        // embedding and the LM head).
        let (w1, w2) = (num(&one["memory"]["weight_gib"], "weights"), num(&two["memory"]["weight_gib"], "weights"));
        assert!(w2 < 0.6 * w1 && w2 > 0.45 * w1, "{engine}: weights {w1} → {w2}");
        // One micro-batch per stage: the batch counts twice per replica.
        assert_eq!(two["concurrency"], 4 * 2 * 2, "{engine}");
        assert!(num(&two["throughput"], "throughput") > 0.0, "{engine}");
    }
}

#[test]
fn launch_commands_carry_the_stages() {
    let base = args(
        BASE,
        &[
            "--tp-sizes",
            "4",
            "--pp-sizes",
            "2",
            "--batch-range",
            "1",
            "8",
            "--tpot-limits",
            "200",
            "--quantize-linear-action",
            "DISABLED",
            "--device",
            "H100_SXM",
        ],
    );
    for (engine, flag) in [("vllm", "--pipeline-parallel-size 2"), ("sglang", "--pp-size 2"), ("trtllm", "--pp_size 2")] {
        let out = run_ok(&args(&base, &["--emit", engine]));
        assert!(out.contains(flag), "{engine}:\n{out}");
        crate::launch_check::check_script(engine, &out, 8);
    }
}
