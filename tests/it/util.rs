//! Helpers shared by the CLI tests: build a command for the binary, run it, and pick apart
//! its table and JSON output.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::PathBuf;

pub const BIN: &str = "throughput-optimizer";

/// The headline aggregation example of the original tool (Qwen3-32B on 8 × TEST_DEVICE,
/// 3500 in / 1500 out, TPOT ≤ 50 ms), on the analytic engine.
pub const HEADLINE: &[&str] = &[
    "Qwen/Qwen3-32B",
    "--device",
    "TEST_DEVICE",
    "--num-devices",
    "8",
    "--input-length",
    "3500",
    "--output-length",
    "1500",
    "--compile",
    "--quantize-linear-action",
    "W8A8_DYNAMIC",
    "--quantize-attention-action",
    "DISABLED",
    "--tpot-limits",
    "50",
    "--engine",
    "analytic",
];

/// The headline example exactly as the README runs it (the default simulator engine).
pub const README_HEADLINE: &[&str] = &[
    "Qwen/Qwen3-32B",
    "--device",
    "TEST_DEVICE",
    "--num-devices",
    "8",
    "--input-length",
    "3500",
    "--output-length",
    "1500",
    "--compile",
    "--tpot-limits",
    "50",
];

/// A command for the binary under test.
pub fn cmd() -> Command {
    Command::cargo_bin(BIN).expect("the binary is built by cargo test")
}

/// `base` followed by `extra`.
pub fn args<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra.iter()).copied().collect()
}

/// Run with `args`, assert success and no panic, return stdout.
pub fn run_ok(args: &[&str]) -> String {
    let out = cmd().args(args).assert().success().stderr(predicate::str::contains("panicked").not()).get_output().clone();
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// Run with `args` and parse stdout as JSON (`--output json` is added).
pub fn run_json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--output", "json"]);
    let text = run_ok(&a);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{text}"))
}

/// Run with `args`, assert a usage error (exit 2) without a panic whose stderr contains every
/// one of `parts`; return stderr.
pub fn usage_error(args: &[&str], parts: &[&str]) -> String {
    let out = cmd().args(args).assert().code(2).stderr(predicate::str::contains("panicked").not()).get_output().clone();
    let stderr = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    for p in parts {
        assert!(stderr.contains(p), "stderr of {args:?} does not contain {p:?}:\n{stderr}");
    }
    assert!(out.stdout.is_empty(), "a usage error prints nothing on stdout, got:\n{}", String::from_utf8_lossy(&out.stdout));
    stderr
}

/// The table section that starts at the line containing `title` and ends before the next
/// banner line of `*` (or the end of the text).
pub fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let start = text.find(title).unwrap_or_else(|| panic!("no section titled {title:?} in:\n{text}"));
    let rest = &text[start..];
    // A section ends at the block's closing banner, or where the frontier's section begins.
    let end = ["\n***", "\n    ----------------------------------------------------------------------------\nPareto frontier"]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// The header row (the first line starting with `| Top`) of a table section.
pub fn header(section: &str) -> &str {
    section.lines().find(|l| l.starts_with("| Top")).unwrap_or_else(|| panic!("no table header in:\n{section}"))
}

/// The data rows (lines starting with `|` after the header) of a table section.
pub fn data_rows(section: &str) -> Vec<&str> {
    section.lines().filter(|l| l.starts_with('|') && !l.starts_with("| Top")).collect()
}

/// The trimmed cells of a table row.
pub fn cells(row: &str) -> Vec<&str> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(str::trim).collect()
}

/// N of the first "Top N <suffix>" title in `text`.
pub fn top_n(text: &str, suffix: &str) -> Option<usize> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("Top ")?;
        let (n, tail) = rest.split_once(' ')?;
        tail.starts_with(suffix).then(|| n.parse().ok()).flatten()
    })
}

/// The results of `phase` ("aggregated", "prefill", "decode") of the `i`-th device.
pub fn phase<'a>(report: &'a Value, device: usize, phase: &str) -> &'a Value {
    report["devices"][device]["phases"]
        .as_array()
        .expect("devices[].phases is an array")
        .iter()
        .find(|p| p["phase"] == phase)
        .unwrap_or_else(|| panic!("no {phase} phase in device {device}"))
}

pub fn array<'a>(v: &'a Value, what: &str) -> &'a Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("{what} is not an array: {v}"))
}

pub fn num(v: &Value, what: &str) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{what} is not a number: {v}"))
}

/// The parallel labels of a list of rows.
pub fn labels(rows: &[Value]) -> Vec<String> {
    rows.iter().map(|r| r["parallel"].as_str().expect("parallel is a string").to_string()).collect()
}

/// A file in this test binary's fixture directory.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures").join(name)
}

/// The text of a built-in device profile YAML.
pub fn builtin_profile(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("profiles/devices").join(format!("{name}.yaml"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// `a` and `b` agree to a relative tolerance.
/// Relative tolerance of a relation between figures read from the JSON report: each is
/// rounded to 6 significant digits (a relative error up to 5e-6), and a formula combines a few.
pub const JSON_REL: f64 = 3e-5;

pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-12)
}

/// The validated plan of a command line (the library, no process).
pub fn plan_of(argv: &[&str]) -> throughput_optimizer::plan::Plan {
    let raw = throughput_optimizer::cli::RawArgs::parse_argv(argv).unwrap();
    match throughput_optimizer::cli::build(raw).unwrap_or_else(|e| panic!("{argv:?}: {e}")) {
        throughput_optimizer::cli::Command::Run(plan) => *plan,
        _ => panic!("not a run"),
    }
}
