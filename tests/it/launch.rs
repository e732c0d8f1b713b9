//! `--emit ENGINE`: launch commands for vLLM, SGLang and TensorRT-LLM, for an aggregated plan
//! and a P/D ratio plan (golden files in tests/it/snapshots), and the refusals: an unknown
//! engine, a plan an engine cannot serve, a row that does not exist.

use crate::util::{args, cmd, run_ok, usage_error};

/// Qwen3-32B on 8 × H100 with BF16 weights and an FP8 KV cache, aggregated.
const AGG: &[&str] = &[
    "Qwen/Qwen3-32B",
    "--device",
    "H100_SXM",
    "--num-devices",
    "8",
    "--input-length",
    "3500",
    "--output-length",
    "1500",
    "--tpot-limits",
    "50",
    "--quantize-linear-action",
    "DISABLED",
    "--quantize-attention-action",
    "FP8",
    "-q",
];

/// The same model planned as P/D instances of 4 devices within 16.
const PD: &[&str] = &[
    "Qwen/Qwen3-32B",
    "--device",
    "H100_SXM",
    "--num-devices",
    "16",
    "--input-length",
    "3500",
    "--output-length",
    "1500",
    "--ttft-limits",
    "2000",
    "--tpot-limits",
    "50",
    "--quantize-linear-action",
    "DISABLED",
    "--enable-optimize-prefill-decode-ratio",
    "--prefill-devices-per-instance",
    "4",
    "--decode-devices-per-instance",
    "4",
    "-q",
];

fn emit(base: &[&str], engine: &str) -> String {
    run_ok(&args(base, &["--emit", engine]))
}

#[test]
fn vllm_aggregated() {
    insta::assert_snapshot!("launch-vllm-aggregated", emit(AGG, "vllm"));
}

#[test]
fn sglang_aggregated() {
    insta::assert_snapshot!("launch-sglang-aggregated", emit(AGG, "sglang"));
}

#[test]
fn trtllm_aggregated() {
    insta::assert_snapshot!("launch-trtllm-aggregated", emit(AGG, "trtllm"));
}

#[test]
fn vllm_pd() {
    insta::assert_snapshot!("launch-vllm-pd", emit(PD, "vllm"));
}

#[test]
fn sglang_pd() {
    insta::assert_snapshot!("launch-sglang-pd", emit(PD, "sglang"));
}

#[test]
fn trtllm_pd() {
    insta::assert_snapshot!("launch-trtllm-pd", emit(PD, "trtllm"));
}

/// `--emit-dir` writes the same files the printed script holds, and the report stays on stdout.
/// Fails if the directory gets a different text than stdout shows (e.g. the wait lines), or if
/// the report is dropped.
#[test]
fn emit_dir_writes_the_files_and_keeps_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run_ok(&args(PD, &["--emit", "trtllm", "--emit-dir", d]));
    assert!(out.contains("Overall Best Configuration"), "the report stays on stdout:\n{out}");
    let mut names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    // One script per node, the router's (which writes the disaggregated server's configuration
    // with the nodes' addresses), and each kind's options.
    assert_eq!(names, ["decode-options.yaml", "node0.sh", "node1.sh", "prefill-options.yaml", "router.sh"]);
    let printed = emit(PD, "trtllm");
    let node0 = std::fs::read_to_string(dir.path().join("node0.sh")).unwrap();
    // Printed, it loses its shebang and its wait (the next node's script comes after it).
    let body = node0.strip_prefix("#!/bin/sh\n").unwrap().strip_suffix("wait\n").unwrap();
    assert!(printed.contains(body), "node0.sh is part of the printed script:\n{printed}");
    let yaml = std::fs::read_to_string(dir.path().join("prefill-options.yaml")).unwrap();
    assert!(printed.contains(&format!("cat > prefill-options.yaml <<'EOF'\n{yaml}EOF")));
    let router = std::fs::read_to_string(dir.path().join("router.sh")).unwrap();
    assert!(router.contains("cat > disagg-config.yaml <<EOF") && printed.ends_with(router.strip_prefix("#!/bin/sh\n").unwrap()));
}

/// `--emit-row N` takes row N of the table; past the last row it names the range.
#[test]
fn emit_row_picks_a_row_and_names_the_range() {
    let row2 = run_ok(&args(AGG, &["--emit", "vllm", "--emit-row", "2"]));
    assert!(row2.contains("row 2 of the aggregated table"), "{row2}");
    assert_ne!(row2, emit(AGG, "vllm"), "row 2 is not row 1");
    usage_error(&args(AGG, &["--emit", "vllm", "--emit-row", "99"]), &["--emit-row 99", "(1 to "]);
}

#[test]
fn unknown_engine_names_the_flag_and_the_choices() {
    usage_error(&args(AGG, &["--emit", "tgi"]), &["--emit", "`tgi`", "vllm, sglang, trtllm"]);
    usage_error(&args(AGG, &["--emit-dir", "."]), &["--emit"]);
}

/// What an engine cannot serve is refused before the search, naming the engine and the way
/// out; nothing is printed on stdout.
#[test]
fn an_engine_that_cannot_serve_the_plan_says_why() {
    // W8A8 weights need a quantized checkpoint; Qwen/Qwen3-32B is BF16.
    let w8a8: Vec<&str> = AGG.iter().map(|a| if *a == "DISABLED" { "W8A8_DYNAMIC" } else { a }).collect();
    usage_error(&args(&w8a8, &["--emit", "vllm"]), &["--emit vllm", "W8A8_DYNAMIC", "--quantize-linear-action DISABLED or FP8"]);
    // Without a quantization flag an NVIDIA plan runs the checkpoint's own weights (BF16 here),
    // which vLLM serves. Mutation: default NVIDIA plans to W8A8_DYNAMIC again and this exits 2.
    let no_quant: Vec<&str> = {
        let i = AGG.iter().position(|a| *a == "--quantize-linear-action").unwrap();
        AGG.iter().enumerate().filter(|(j, _)| *j != i && *j != i + 1).map(|(_, a)| *a).collect()
    };
    let out = run_ok(&args(&no_quant, &["--emit", "vllm"]));
    assert!(out.contains("vllm serve") && !out.contains("W8A8"), "{out}");
    // INT8 KV cache: none of the three has one.
    let int8: Vec<&str> = AGG.iter().map(|a| if *a == "FP8" { "INT8" } else { a }).collect();
    for e in ["vllm", "sglang", "trtllm"] {
        usage_error(&args(&int8, &["--emit", e]), &[&format!("--emit {e}"), "INT8 KV cache"]);
    }
    // TensorRT-LLM on an Ascend device.
    let ascend: Vec<&str> = AGG.iter().map(|a| if *a == "H100_SXM" { "ATLAS_800_A2_376T_64G" } else { a }).collect();
    usage_error(&args(&ascend, &["--emit", "trtllm"]), &["--emit trtllm", "NVIDIA GPUs only", "ATLAS_800_A2_376T_64G"]);
    // The FP8-block checkpoint of DeepSeek-V3 (128 × 128 blocks, as its quantization_config says)
    // cannot serve the BF16 weights a plan priced; the refusal names the checkpoint's own.
    usage_error(
        &[
            "deepseek-ai/DeepSeek-V3",
            "--device",
            "H100_SXM",
            "--num-devices",
            "16",
            "--input-length",
            "100",
            "--output-length",
            "10",
            "--quantize-linear-action",
            "DISABLED",
            "--emit",
            "sglang",
        ],
        &["--emit sglang", "FP8_BLOCK weights", "--quantize-linear-action FP8_BLOCK"],
    );
    let out = cmd().args(args(AGG, &["--emit", "vllm"])).output().unwrap();
    assert!(out.status.success());
}

/// Llama-3.1-8B on 8 × H100 with BF16 weights (the examples).
const LLAMA8: &[&str] = &[
    "meta-llama/Meta-Llama-3.1-8B",
    "--device",
    "H100_SXM",
    "--num-devices",
    "8",
    "--input-length",
    "1024",
    "--output-length",
    "1024",
    "--quantize-linear-action",
    "DISABLED",
    "-q",
];

/// ... planned as P/D instances of 1 (prefill) and 2 (decode) devices.
const LLAMA8_PD: &[&str] =
    &["--enable-optimize-prefill-decode-ratio", "--prefill-devices-per-instance", "1", "--decode-devices-per-instance", "2"];

/// Every emitted script — the README's and the user guide's examples, the P/D emits for
/// the three engines, the launch snapshots, TensorRT-LLM's separate data-parallel servers and
/// an MoE instance over two nodes — starts on real nodes: disjoint GPU sets covering the
/// plan's devices, distinct ports, and only flags the engine version defines. Fails if an
/// emitter drops CUDA_VISIBLE_DEVICES, reuses a port (SGLang's bootstrap 8998, a NIXL side
/// channel) or writes a flag missing from profiles/engines/flags/.
#[test]
fn every_emitted_script_starts_on_real_nodes() {
    use crate::launch_check::check_script;
    let readme = ["Qwen/Qwen3-32B", "--device", "H100_SXM", "--num-devices", "8", "--input-length", "3500", "--output-length", "1500"];
    let readme: Vec<&str> = args(&readme, &["--tpot-limits", "50", "--quantize-linear-action", "FP8", "-q"]);
    check_script("vllm", &emit(&readme, "vllm"), 8);
    for e in ["vllm", "sglang", "trtllm"] {
        check_script(e, &emit(&args(LLAMA8, LLAMA8_PD), e), 8);
        check_script(e, &emit(AGG, e), 8);
        check_script(e, &emit(PD, e), 16);
    }
    let trtllm_agg = run_ok(&args(LLAMA8, &["--serving-engine", "trtllm", "--emit", "trtllm"]));
    check_script("trtllm", &trtllm_agg, 8);
    // gpt-oss on H200 under TensorRT-LLM: the TRITON MoE backend the plan priced.
    let oss = ["openai/gpt-oss-120b", "--device", "H200_SXM", "--num-devices", "4", "--tp-sizes", "4", "--input-length", "1024"];
    let oss = run_ok(&args(&oss, &["--output-length", "1024", "--serving-engine", "trtllm", "-q", "--emit", "trtllm"]));
    assert!(oss.contains("moe_config:\n  backend: TRITON"), "{oss}");
    check_script("trtllm", &oss, 4);
    // Qwen3-30B-A3B's experts over 16 devices: two nodes per instance.
    let moe16 = ["Qwen/Qwen3-30B-A3B", "--device", "H100_SXM", "--num-devices", "16", "--input-length", "1000", "--output-length", "100"];
    for (e, tp) in [("vllm", "1"), ("sglang", "1"), ("trtllm", "1")] {
        let out = run_ok(&args(&moe16, &["--tp-sizes", tp, "--ep-sizes", "16", "--quantize-linear-action", "DISABLED", "-q", "--emit", e]));
        assert!(out.contains("node1.sh") && out.contains("NODE0_HOST"), "{out}");
        check_script(e, &out, 16);
    }
}

/// `--emit-format k8s` requests the plan's devices as nvidia.com/gpu, a Service per kind and
/// the router. Fails if a kind's replicas or a LeaderWorkerSet's size drop out of the sum.
#[test]
fn k8s_manifests_request_the_plans_devices() {
    use crate::launch_check::k8s_gpus;
    for e in ["vllm", "sglang", "trtllm"] {
        let y = run_ok(&args(PD, &["--emit", e, "--emit-format", "k8s"]));
        assert_eq!(k8s_gpus(&y), 16, "{y}");
        assert!(y.contains("kind: Service") && y.contains("-router"), "{y}");
        let agg = run_ok(&args(AGG, &["--emit", e, "--emit-format", "k8s"]));
        assert_eq!(k8s_gpus(&agg), 8, "{agg}");
    }
    let moe16 = ["Qwen/Qwen3-30B-A3B", "--device", "H100_SXM", "--num-devices", "16", "--input-length", "1000", "--output-length", "100"];
    let y = run_ok(&args(
        &moe16,
        &["--tp-sizes", "1", "--ep-sizes", "16", "--quantize-linear-action", "DISABLED", "-q", "--emit", "sglang", "--emit-format", "k8s"],
    ));
    assert!(y.contains("kind: LeaderWorkerSet") && y.contains("size: 2"), "{y}");
    assert_eq!(k8s_gpus(&y), 16, "{y}");
}

#[test]
fn republished_and_int4_checkpoints_serve_as_they_are_stored() {
    // Issue 23: NVIDIA's NVFP4 GLM-5 (named by its id, NVFP4 MLPs and FP8 KV) and Kimi-K2.5's
    // INT4 experts are served as their checkpoints hold them, not refused as BF16 ones.
    // Mutation: drop the republished-checkpoint arm in `deployment::weights` and the first fails.
    let base =
        ["--num-devices", "8", "--input-length", "1024", "--output-length", "256", "--tp-sizes", "8", "--batch-range", "1", "16", "-q"];
    let glm = run_ok(&args(&["nvidia/GLM-5-NVFP4", "--device", "B200", "--emit", "vllm"], &base));
    assert!(glm.contains("# Weights: NVFP4 experts, DISABLED other linears, as the checkpoint stores them; KV cache: FP8"), "{glm}");
    assert!(glm.contains("vllm serve nvidia/GLM-5-NVFP4") && glm.contains("--kv-cache-dtype fp8"), "{glm}");
    let kimi = run_ok(&args(&["moonshotai/Kimi-K2.5", "--device", "H200_SXM", "--emit", "sglang"], &base));
    assert!(kimi.contains("# Weights: W4A16_INT4 experts, DISABLED other linears, as the checkpoint stores them"), "{kimi}");
    // DeepSeek-V3 with no quantization flag plans its checkpoint's FP8 blocks on NVIDIA, and the
    // commands serve them (they were refused: the launch side took the checkpoint for per-tensor
    // FP8). Mutation: compare against LinearQuant::Fp8 for DeepSeek in `deployment::weights`.
    let ds = run_ok(&args(&["deepseek-ai/DeepSeek-V3", "--device", "H200_SXM", "--emit", "vllm"], &base));
    assert!(ds.contains("# Weights: FP8_BLOCK, as the checkpoint stores them") && !ds.contains("--quantization"), "{ds}");
}
