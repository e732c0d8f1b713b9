//! Regression tests of issue 24's smaller defects: each fails on the code before its fix.

use crate::util::{args, cmd, run_ok, usage_error};

const SMALL: &[&str] =
    &["Qwen/Qwen3-8B", "--device", "TEST_DEVICE", "--num-devices", "1", "--input-length", "100", "--output-length", "10"];

/// An output file that cannot be written is a usage error before the search (exit 2), not a
/// failure after the whole report. Fails if check_output_path stops at the directory test
/// (/proc exists).
#[test]
fn an_unwritable_output_file_is_refused_before_the_search() {
    usage_error(&args(SMALL, &["--requests-file", "/proc/x.csv"]), &["--requests-file", "/proc/x.csv", "cannot be written"]);
    usage_error(&args(SMALL, &["--chrome-trace-file", "/sys/x.json"]), &["--chrome-trace-file", "cannot be written"]);
}

/// `--emit vllm --output json` has no report to format on stdout: refused, naming the ways out.
/// Fails if --output is ignored silently again.
#[test]
fn a_report_format_with_printed_commands_is_refused() {
    usage_error(&args(SMALL, &["--emit", "vllm", "--output", "json"]), &["--output", "--emit", "--output-file"]);
}

/// `calibrate -q` is accepted and keeps stderr quiet. Fails if the calibrate parser has no -q.
#[test]
fn calibrate_takes_quiet() {
    let csv = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/calibration/measured_sample.csv");
    let out = cmd().args(["calibrate", "--measured", csv, "-q"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("computed in"));
}

/// A scenario file takes a flag's alias as its key (`devices:` as `--devices`). Fails if the
/// scenario's known keys are the long names only.
#[test]
fn a_scenario_takes_the_cli_aliases() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.yaml");
    std::fs::write(&f, "model: Qwen/Qwen3-8B\ndevices: TEST_DEVICE\nnum_devices: 1\ninput_length: 100\noutput_length: 10\n").unwrap();
    run_ok(&["--scenario", f.to_str().unwrap(), "-q"]);
}

/// Without TTFT/TPOT limits, a run where nothing fits is not headed by the limits' message.
/// Fails if the heading names filters that were never given.
#[test]
fn no_rows_without_limits_does_not_blame_the_limits() {
    let oom =
        ["Qwen/Qwen3-235B-A22B", "--device", "TEST_DEVICE", "--num-devices", "1", "--input-length", "100", "--output-length", "10", "-q"];
    let out = cmd().args(oom).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("TTFT/TPOT filters") && text.contains("no TTFT/TPOT limit was given"), "{text}");
}

/// `--max-num-seqs 4294967295` is a usage error, not an out-of-memory at batch size 1.
#[test]
fn an_unbounded_max_num_seqs_is_refused() {
    usage_error(&args(SMALL, &["--max-num-seqs", "4294967295"]), &["--max-num-seqs", "at most 1048576"]);
}

/// A one-token prompt gets a token budget that runs (the automatic 4 × 1 tokens spent the
/// work budget). Fails if the automatic budget has no floor.
#[test]
fn a_one_token_prompt_gets_a_workable_budget() {
    let out =
        run_ok(&["Qwen/Qwen3-8B", "--device", "TEST_DEVICE", "--num-devices", "1", "--input-length", "1", "--output-length", "100", "-q"]);
    assert!(out.contains("Best Throughput"), "{out}");
}

/// A Mooncake timestamp of −500 ms is refused in the file's own field and unit. Fails if the
/// message speaks of −0.5 seconds (the converted arrival time).
#[test]
fn a_negative_mooncake_timestamp_is_named_in_milliseconds() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.jsonl");
    std::fs::write(&f, "{\"timestamp\": -500, \"input_length\": 100, \"output_length\": 10, \"hash_ids\": [1]}\n").unwrap();
    let err = usage_error(&args(SMALL, &["--arrival", "trace", f.to_str().unwrap()]), &["`timestamp`", "-500", "milliseconds"]);
    assert!(!err.contains("-0.5"), "{err}");
}

/// An overloaded open loop is not told to raise --num-requests (no run length settles a queue
/// that grows). Fails if the unsettled-open-loop advice ignores the offered rate.
#[test]
fn an_overloaded_open_loop_is_not_told_to_run_longer() {
    let a = args(SMALL, &["--arrival", "poisson", "--request-rate", "1000", "--num-requests", "2000", "-q"]);
    let out = run_ok(&a);
    assert!(out.contains("open loop overloaded") && !out.contains("raise --num-requests"), "{out}");
}

/// A two-request trace has no steady window: its rates cover the whole run, not the near-empty
/// span between the two arrivals. Fails if the open-loop window opens for two requests.
#[test]
fn a_two_request_trace_is_not_a_steady_window() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.csv");
    std::fs::write(&f, "arrival_s,input_tokens,output_tokens\n0,100,50\n10,120,40\n").unwrap();
    let out = run_ok(&args(SMALL, &["--arrival", "trace", f.to_str().unwrap(), "-q"]));
    assert!(out.contains("open loop too short for a steady window"), "{out}");
    let best: f64 = out.lines().find_map(|l| l.strip_prefix("Best Throughput: ")?.split(' ').next()?.parse().ok()).unwrap();
    assert!(best > 5.0, "{out}");
}
