//! The guided mode driven by scripted answers on stdin.

use crate::util::cmd;

#[test]
fn a_scripted_session_reaches_a_run_and_summarises() {
    // model, device, mode (PD混部 = aggregation), devices, input, output, SLO kind (TPOT),
    // TPOT limit, prefix cache (no), recommended quantization (yes), compile (yes), run (yes).
    let answers = "Qwen/Qwen3-32B\nTEST_DEVICE\nPD混部\n8\n3500\n1500\n2\n50\nn\ny\ny\ny\n";
    let out = cmd().args(["--interactive", "--engine", "analytic", "--tp-sizes", "8"]).write_stdin(answers).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("Deployment mode"), "{text}");
    assert!(text.contains("recommended quantization"));
    assert!(text.contains(
        "Equivalent command:\n  throughput-optimizer Qwen/Qwen3-32B --engine analytic --tp-sizes 8 --device TEST_DEVICE --num-devices 8 --input-length 3500 --output-length 1500 --tpot-limits 50 --quantize-linear-action W8A8_DYNAMIC --quantize-attention-action DISABLED --compile"
    ));
    assert!(text.contains("Validation: no issues."));
    assert!(text.contains("Top 1 PD Aggregated Configurations"));
    assert!(text.contains("Summary\n  mode: aggregation (PD mixed); engine: analytic"));
    assert!(text.contains("best TP=8 | PP=1 | DP=1"));
    assert_eq!(text.matches("planning reference").count(), 1, "one disclaimer, at the end");
}

#[test]
fn pd_separation_asks_which_kind_and_maps_to_ratio_planning() {
    // PD分离 → 2 (ratio planning) → devices per P and D instance → no total → limits.
    let answers = "deepseek-ai/DeepSeek-V3.1\nTEST_DEVICE\nPD分离\n2\n16\n16\n\n3500\n1500\n2000\n50\n1\nn\nn\ny\ny\nn\n";
    let out = cmd().args(["--interactive", "--engine", "analytic"]).write_stdin(answers).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("--enable-optimize-prefill-decode-ratio --prefill-devices-per-instance 16 --decode-devices-per-instance 16"),
        "{text}"
    );
    assert!(text.contains("ships MTP layers. Is MTP enabled?"));
    assert!(text.contains("Not run."));
}

#[test]
fn an_invalid_plan_is_reported_with_exit_2() {
    // 3 devices cannot hold TP=8 of --tp-sizes 8.
    let answers = "Qwen/Qwen3-32B\nTEST_DEVICE\n1\n3\n3500\n1500\n2\n50\nn\ny\ny\n";
    let out = cmd().args(["--interactive", "--tp-sizes", "8"]).write_stdin(answers).assert().code(2);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("Validation failed"), "{text}");
}

#[test]
fn an_input_that_ends_early_is_a_usage_error() {
    cmd().args(["--interactive"]).write_stdin("Qwen/Qwen3-32B\n").assert().code(2);
}

#[test]
fn back_returns_to_the_previous_question_and_the_run_uses_the_changed_answer() {
    // b at the first question (nothing before it), model, device, mode, devices, input,
    // output, SLO kind (TPOT), TPOT limit 50, then `back` at the prefix-cache question returns
    // to the TPOT limit (changed to 40); prefix cache (no), quantization (yes), compile (yes),
    // then `b` at the confirmation returns to the compile question (changed to no), run (yes).
    // Mutation: make `Prompter::step_back` keep the last answer (skip `history.pop()`) → the
    // replay re-applies 50 and the next answer lands on the wrong question: fails.
    let answers = "b\nQwen/Qwen3-32B\nTEST_DEVICE\n1\n8\n3500\n1500\n2\n50\nback\n40\nn\ny\ny\nb\nn\ny\n";
    let out = cmd().args(["--interactive", "--engine", "analytic", "--tp-sizes", "8"]).write_stdin(answers).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("answer b (or back) to return to the previous question"), "{text}");
    assert!(text.contains("nothing to go back to"), "{text}");
    assert_eq!(text.matches("TPOT limit in ms").count(), 2, "asked again after the step back: {text}");
    assert_eq!(text.matches("Run it?").count(), 2, "{text}");
    let commands: Vec<&str> = text.lines().filter(|l| l.starts_with("  throughput-optimizer ")).collect();
    let base = "  throughput-optimizer Qwen/Qwen3-32B --engine analytic --tp-sizes 8 --device TEST_DEVICE --num-devices 8 --input-length 3500 --output-length 1500 --tpot-limits 40 --quantize-linear-action W8A8_DYNAMIC --quantize-attention-action DISABLED";
    assert_eq!(commands, [format!("{base} --compile"), base.to_string()], "{text}");
    // The plan that ran carries the changed answers.
    assert!(text.contains("TPOT Limits: 40.0 ms"), "{text}");
    assert!(!text.contains("TPOT Limits: 50.0 ms"), "{text}");
    assert!(text.contains("Summary\n  mode: aggregation (PD mixed); engine: analytic"));
}
