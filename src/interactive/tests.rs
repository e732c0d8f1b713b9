//! The guided session's questions, answers and replays.

use super::*;

#[test]
fn domain_terms_map_to_modes() {
    for a in ["PD混部", "PD聚合", "聚合部署", "1", "aggregation"] {
        assert_eq!(parse_mode(a).unwrap(), ModeAnswer::Aggregation, "{a}");
    }
    for a in ["PD分离", "disagg", "2"] {
        assert_eq!(parse_mode(a).unwrap(), ModeAnswer::Disaggregated, "{a}");
    }
    for a in ["PD ratio", "P/D配比", "实例配比", "3"] {
        assert_eq!(parse_mode(a).unwrap(), ModeAnswer::Ratio, "{a}");
    }
    assert!(parse_mode("hybrid").unwrap_err().contains("1 (aggregation)"));
}

#[test]
fn only_missing_inputs_are_asked() {
    let base: Vec<String> =
        "t Qwen/Qwen3-32B --device TEST_DEVICE --num-devices 8 --input-length 3500 --output-length 1500 --tpot-limits 50 --compile --engine analytic"
            .split_whitespace()
            .map(str::to_string)
            .collect();
    let raw = RawArgs::parse_argv(&base).unwrap();
    // Remaining questions: mode, prefix cache, quantization.
    let answers = "1\nn\ny\n";
    let mut out = Vec::new();
    let mut p = Prompter::new(answers.as_bytes(), &mut out);
    let (args, _) = complete_args(&mut p, &raw, &base).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("Model ("), "the model was given");
    assert!(text.contains("Deployment mode"));
    assert!(text.contains("recommended quantization"));
    assert!(args.ends_with(&[
        "--quantize-linear-action".into(),
        "W8A8_DYNAMIC".into(),
        "--quantize-attention-action".into(),
        "DISABLED".into()
    ]));
}

/// Issue 24: on an NVIDIA GPU the recommendation is the checkpoint's own precision (gpt-oss's
/// MXFP4 experts), not the original tool's Ascend default W8A8_DYNAMIC, and accepting it
/// passes no quantization flag (the plan then serves the checkpoint as published).
/// Mutation: recommend W8A8_DYNAMIC whatever the device and this fails.
#[test]
fn a_gpu_is_offered_the_checkpoints_own_precision() {
    let base: Vec<String> =
        "t openai/gpt-oss-120b --device H200_SXM --num-devices 8 --input-length 1024 --output-length 1024 --tpot-limits 50 --compile --engine analytic"
            .split_whitespace()
            .map(str::to_string)
            .collect();
    let raw = RawArgs::parse_argv(&base).unwrap();
    // Remaining questions: mode, then the defaults (MoE search space, prefix cache,
    // quantization).
    let mut out = Vec::new();
    let mut p = Prompter::new("1\n\n\n\n\n\n\n\n".as_bytes(), &mut out);
    let (args, _) = complete_args(&mut p, &raw, &base).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("checkpoint's own precision (linear experts MXFP4, other linears DISABLED"), "{text}");
    assert!(!text.contains("W8A8_DYNAMIC") && !args.iter().any(|a| a.starts_with("--quantize")), "{args:?}");
}

#[test]
fn invalid_answers_are_asked_again_then_give_up() {
    let mut out = Vec::new();
    let mut p = Prompter::new("zero\n-1\n0\n".as_bytes(), &mut out);
    let e = p.ask("Output length in tokens", None, positive).unwrap_err();
    assert!(e.exit_code() == 2 && e.to_string().contains("after 3 attempts"), "{e}");
    let mut out = Vec::new();
    let mut p = Prompter::new("".as_bytes(), &mut out);
    assert!(p.ask("x", None, positive).unwrap_err().to_string().contains("input ended"));
}
