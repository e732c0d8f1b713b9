//! `throughput-optimizer price`: one step priced from a fixture kernel database with round
//! numbers (tests/fixtures/kernels: a 100 TFLOPS / 1 TB/s device, a two-layer 1024-wide model,
//! bf16 GEMM latencies at a few shapes), checked against values computed by hand; the text and
//! JSON outputs agree; bad input is refused.

use super::util::cmd;
use serde_json::Value;
use std::path::PathBuf;

fn fixture(p: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels").join(p).display().to_string()
}

/// `price` on the fixture model, device and database, with `extra` arguments.
fn price(extra: &[&str]) -> assert_cmd::assert::Assert {
    let (model, device, db) = (fixture("model/config.json"), fixture("device.yaml"), fixture("db"));
    let mut args = vec!["price".to_string(), model, "--device".into(), "TINY_GPU".into(), "--device-file".into(), device];
    args.extend(["--serving-engine", "vllm", "--performance-model", "profiling", "--profiling-database-path"].map(String::from));
    args.push(db);
    args.extend(extra.iter().map(|s| s.to_string()));
    cmd().args(&args).assert()
}

fn json(extra: &[&str]) -> Value {
    let mut a = extra.to_vec();
    a.extend(["--output", "json"]);
    let out = price(&a).success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("price --output json is JSON")
}

fn op<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["operators"].as_array().unwrap().iter().find(|o| o["name"] == name).unwrap_or_else(|| panic!("no operator {name} in {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-6)
}

#[test]
fn gemms_interpolate_per_axis_between_measured_shapes() {
    let v = json(&["--decode", "4x100"]);
    // o_proj (n = k = 1024) at m = 4, between m = 1 (4 µs) and m = 16 (7 µs): 4 + 3/15 × 3 =
    // 4.6 µs a call, two layers. Mutation: blend with the weight of the wrong neighbour and
    // this gives 6.4 µs.
    let o = op(&v, "o_proj");
    assert!(close(o["ms"].as_f64().unwrap(), 2.0 * 0.0046), "{o}");
    assert_eq!(o["source"], "interpolated");
    assert_eq!(o["kind"], "gemm");
    // qkv_proj (n = 3072, k = 1024): halfway between n = 2048 (6 + 0.2 × 4 = 6.8 µs at m = 4)
    // and n = 4096 (10 + 0.2 × 8 = 11.6 µs): 9.2 µs a call.
    let q = op(&v, "qkv_proj");
    assert!(close(q["ms"].as_f64().unwrap(), 2.0 * 0.0092), "{q}");
    assert_eq!(q["source"], "interpolated");
}

#[test]
fn beyond_the_data_the_measured_utilisation_is_carried_onto_the_roofline() {
    let v = json(&["--decode", "32x100"]);
    // m = 32 is past the largest measured m = 16 (7 µs). The roofline of a bf16 1024 × 1024
    // GEMM at 100 TFLOPS and 1 TB/s is memory-bound: (1024·1024·2 + m·(1024·2 + 1024·2)) bytes
    // / 1e12 B/s: 2.162688 µs at m = 16, 2.228224 µs at m = 32. So 7 × 2.228224 / 2.162688 µs.
    // Mutation: carry the time unscaled (7 µs) or scale by the inverse ratio, and this fails.
    let want = 0.007 * 2.228224 / 2.162688;
    let o = op(&v, "o_proj");
    assert!(close(o["ms"].as_f64().unwrap(), 2.0 * want), "{o} vs {}", 2.0 * want);
    assert_eq!(o["source"], "extrapolated");
    // Attention has no table in the fixture: the roofline prices it.
    assert_eq!(op(&v, "attention")["source"], "roofline");
}

#[test]
fn no_gemm_reads_its_weights_faster_than_the_devices_streaming_ceiling() {
    // down_proj (n = 1024, k = 4096, 8 MiB of bf16 weights) is measured at 5 µs at m = 1 and
    // 12 µs at m = 16: faster than the fixture device streams (0.9 of 1 TB/s), as a collector
    // that loops one GEMM whose weights stay in L2 times it. At m = 4 the table reads 6.4 µs;
    // the floor is the weights at 0.9 TB/s plus the activations at the datasheet rate:
    // 8,388,608 / 0.9e12 + 4 · (4096 + 1024) · 2 / 1e12 s = 9.32068 + 0.04096 µs a call, two
    // layers. Mutation: floor at the datasheet rate (the weights at 1 TB/s) and this gives
    // 2 × 8.42957 µs.
    let v = json(&["--decode", "4x100"]);
    let d = op(&v, "down_proj");
    let want = 2.0 * (8_388_608.0 / 0.9e12 + 4.0 * 5120.0 * 2.0 / 1e12) * 1e3;
    assert!(close(d["ms"].as_f64().unwrap(), want), "{d} vs {want}");
    // A shape the table times slower than the ceiling keeps its measured time (o_proj, above).
    assert!(close(op(&v, "o_proj")["ms"].as_f64().unwrap(), 2.0 * 0.0046));
}

#[test]
fn an_all_gather_is_looked_up_by_the_gathered_size() {
    // The fixture's NCCL table (nccl-tests' message sizes: an all-gather's whole output, in
    // 16-bit elements) has 64,000 elements at 10 µs and 128,000 at 14 µs on two GPUs. At TP 2
    // each rank's logits of 4 sequences are 4 × 16,000 bf16 values (128,000 bytes); gathered,
    // 128,000 elements: 14 µs, a measured point. Mutation: look the rank's own bytes up as the
    // message (64,000 elements) and this gives 10 µs.
    let v = json(&["--decode", "4x100", "--tp", "2"]);
    let g = op(&v, "logits_all_gather");
    assert!(close(g["ms"].as_f64().unwrap(), 0.014), "{g}");
    assert_eq!(g["source"], "silicon");
    assert_eq!(g["kind"], "all_gather");
}

#[test]
fn operators_add_up_to_the_device_time_and_the_step_adds_the_host() {
    let v = json(&["--decode", "4x100", "--prefill", "1x64@128"]);
    let sum: f64 = v["operators"].as_array().unwrap().iter().map(|o| o["ms"].as_f64().unwrap()).sum();
    let device = v["device_ms"].as_f64().unwrap();
    assert!(close(sum, device), "{sum} vs {device}");
    let (host, step) = (v["host_ms"].as_f64().unwrap(), v["step_ms"].as_f64().unwrap());
    let gap = v["host_gap_ms"].as_f64().unwrap();
    // vLLM overlaps its scheduling: the per-sequence host work hides behind the device time,
    // the gap between steps adds (mutation: `overlapped()` without `+ gap_s` fails here).
    assert_eq!(v["overlap_scheduling"], true);
    assert!(gap > 0.0 && gap <= host, "{gap} of {host}");
    assert!(close(step, device.max(host - gap) + gap), "{step} vs max({device}, {host} - {gap}) + {gap}");
    for o in v["operators"].as_array().unwrap() {
        let kind = o["kind"].as_str().unwrap();
        assert!(
            [
                "gemm",
                "attention",
                "moe_experts",
                "moe_routing",
                "all_reduce",
                "all_gather",
                "reduce_scatter",
                "all_to_all",
                "send_recv",
                "quantize",
                "elementwise",
                "norm",
                "embedding",
                "sampler"
            ]
            .contains(&kind),
            "{kind}"
        );
        assert!(["silicon", "interpolated", "extrapolated", "roofline"].contains(&o["source"].as_str().unwrap()));
    }
}

#[test]
fn the_text_table_shows_the_json_figures() {
    let v = json(&["--decode", "8x512"]);
    let text = String::from_utf8(price(&["--decode", "8x512"]).success().get_output().stdout.clone()).unwrap();
    for o in v["operators"].as_array().unwrap() {
        let name = o["name"].as_str().unwrap();
        let row =
            text.lines().find(|l| l.split('|').nth(1).is_some_and(|c| c.trim() == name)).unwrap_or_else(|| panic!("{name} not in\n{text}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[2], o["kind"].as_str().unwrap(), "{row}");
        assert_eq!(cells[4], format!("{:.4}", o["ms"].as_f64().unwrap()), "{row}");
        assert_eq!(cells[6], o["source"].as_str().unwrap(), "{row}");
    }
    for (label, key) in [("Device time:", "device_ms"), ("Host time:", "host_ms"), ("Step time:", "step_ms")] {
        let line = text.lines().find(|l| l.starts_with(label)).unwrap();
        assert!(line.contains(&format!("{:.4} ms", v[key].as_f64().unwrap())), "{line} vs {}", v[key]);
    }
}

#[test]
fn the_layout_line_shows_the_moe_layout_only_for_a_model_with_experts() {
    // A dense model at TP 8 has no MoE layout; gpt-oss with EP 8 has one. (Mutation: drop the
    // experts check and the dense line shows "EP=1 | MOE-TP=1".)
    let layout = |model: &str, extra: &[&str]| {
        let mut args = vec!["price", model, "--device", "H200_SXM", "--tp", "8", "--decode", "8x1024"];
        args.extend(extra);
        let out = String::from_utf8(cmd().args(&args).assert().success().get_output().stdout.clone()).unwrap();
        out.lines().find(|l| l.starts_with("Layout:")).unwrap().to_string()
    };
    assert!(layout("meta-llama/Meta-Llama-3.1-70B", &[]).starts_with("Layout: TP=8 | DP=1    Quantization"), "dense");
    assert!(layout("openai/gpt-oss-120b", &["--ep", "8"]).starts_with("Layout: TP=8 | DP=1 | EP=8 | MOE-TP=1 "), "MoE");
}

#[test]
fn bad_steps_and_layouts_are_refused_naming_the_flag() {
    for (extra, flag) in [
        (vec!["--decode", "0x100"], "--decode"),
        (vec!["--decode", "4y100"], "--decode"),
        (vec!["--prefill", "1x64@-3"], "--prefill"),
        (vec!["--decode", "4x100", "--ep", "2"], "--ep"),
        (vec!["--decode", "4x100", "--tp", "0"], "--tp"),
        // 8 heads: no engine shards them over 3 ranks (mutation: drop the `model_limit` check in
        // `cli::price::layout` and this prices with exit 0).
        (vec!["--decode", "4x100", "--tp", "3"], "--tp"),
        (vec!["--decode", "4x100", "--output", "yaml"], "--output"),
        (vec![], "--decode"),
    ] {
        // Mutation: drop the check that a step names some work and the empty case prices
        // nothing with exit 0.
        let out = price(&extra).code(2).get_output().clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn the_checkpoint_precision_is_the_default() {
    // gpt-oss ships MXFP4 experts; the planner's own default (W8A8_DYNAMIC) must not apply.
    let out =
        cmd().args(["price", "openai/gpt-oss-120b", "--device", "H200_SXM", "--decode", "8x1024", "--output", "json"]).assert().success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let q = v["quantization"].as_str().unwrap();
    // Mutation: keep the plan's quantization and this reads W8A8_DYNAMIC.
    assert!(q.contains("MXFP4") && q.contains("DISABLED"), "{q}");
    // And a republished FP8 checkpoint of a catalog network prices its FP8 GEMMs.
    let out = cmd()
        .args(["price", "Qwen/Qwen3-235B-A22B-FP8", "--device", "H200_SXM", "--tp", "8", "--decode", "8x1024", "--output", "json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(v["quantization"].as_str().unwrap().contains("FP8_BLOCK"), "{}", v["quantization"]);
}

#[test]
fn fp8_asked_of_a_block_scaled_fp8_checkpoint_is_priced_as_stored_and_said() {
    // Qwen3-235B-A22B-FP8 ships 128 x 128 blocks; engines serve them as stored. Priced per
    // tensor, vLLM's Hopper MoE table makes the step 3.5 times slower. A bf16 checkpoint asked
    // for FP8 stays per tensor (online quantization). (Mutation: drop `fp8_as_stored` and the
    // first quantization reads FP8 with no warning.)
    let run = |model: &str| {
        let args = ["price", model, "--device", "H200_SXM", "--tp", "8", "--ep", "8", "--decode", "32x1500"];
        let out = cmd().args(args).args(["--quantize-linear-action", "FP8", "--output", "json"]).assert().success();
        let o = out.get_output();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        (v["quantization"].as_str().unwrap().to_string(), String::from_utf8_lossy(&o.stderr).to_string())
    };
    let (q, err) = run("Qwen/Qwen3-235B-A22B-FP8");
    assert!(q.contains("FP8_BLOCK"), "{q}");
    assert!(err.contains("stores its weights in FP8 128 x 128 blocks"), "{err}");
    let (q, err) = run("Qwen/Qwen3-235B-A22B");
    assert!(q.contains("FP8") && !q.contains("FP8_BLOCK"), "{q}");
    assert!(!err.contains("128 x 128 blocks"), "{err}");
}

#[test]
fn no_shipped_nvidia_profile_streams_weights_faster_than_the_hardware_can() {
    // Llama-3.1-8B bf16 reads 15.0 GB of weights in a decode step of one sequence (its 7.5 B
    // parameters outside the embedding lookup, the LM head included). On every NVIDIA device
    // profile under every serving engine, that step takes at least 15.0 GB / (0.92 × the
    // datasheet bandwidth), and the engine's host time stays within 5 ms. Mutation: let a
    // calibration raise a device's bandwidth share to 0.993 (as the built-in vLLM × H200 entry
    // once did) and the H200 rows fail.
    let registry = throughput_optimizer::hardware::DeviceRegistry::builtin();
    let mut checked = 0;
    for (device, _) in registry.profiles().filter(|(d, _)| d.vendor == "NVIDIA") {
        for engine in ["vllm", "sglang", "trtllm"] {
            let out = cmd()
                .args(["price", "meta-llama/Meta-Llama-3.1-8B", "--device", &device.name, "--tp", "1", "--decode", "1x128"])
                .args(["--serving-engine", engine, "--quantize-linear-action", "DISABLED", "--output", "json"])
                .assert()
                .success();
            let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
            let device_s = v["device_ms"].as_f64().unwrap() * 1e-3;
            let rate = 15.0e9 / device_s;
            let limit = 0.92 * device.memory_bandwidth.bytes_per_s;
            assert!(rate <= limit, "{} under {engine}: {:.2} TB/s > 0.92 × datasheet ({:.2} TB/s)", device.name, rate / 1e12, limit / 1e12);
            let host = v["host_ms"].as_f64().unwrap();
            assert!(host <= 5.0, "{} under {engine}: host {host} ms", device.name);
            checked += 1;
        }
    }
    assert!(checked >= 9, "too few NVIDIA profiles checked: {checked}");
}

#[test]
fn tensorrt_llm_and_sglang_run_gpt_oss_experts_on_hopper_with_the_triton_kernels_vllm_runs() {
    // TensorRT-LLM's TRITON MoE backend and SGLang's triton_kernel backend on Hopper run
    // OpenAI's Triton MXFP4 kernels, timed by the tables under vLLM: an 8,192-token prefill's
    // experts cost what vLLM's cost. On B200 TensorRT-LLM runs its own MXFP4 x MXFP8 kernels.
    // (Mutation: remove `mxfp4_bf16_moe` from profiles/engines/trtllm.yaml and the H200 figures
    // differ, 5.66 against 3.94 ms a layer; from sglang.yaml, and SGLang's plain Triton MoE
    // table prices them at about twice vLLM's.)
    // At burst clocks: the steps' other operators differ, and so would their sustained clocks.
    let experts = |device: &str, engine: &str| -> f64 {
        let out = cmd()
            .args(["price", "openai/gpt-oss-120b", "--device", device, "--tp", "1", "--prefill", "1x8192", "--clocks", "burst"])
            .args(["--serving-engine", engine, "--output", "json"])
            .assert()
            .success();
        let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        v["operators"].as_array().unwrap().iter().filter(|o| o["kind"] == "moe_experts").map(|o| o["ms"].as_f64().unwrap()).sum()
    };
    let (trt, vllm) = (experts("H200_SXM", "trtllm"), experts("H200_SXM", "vllm"));
    assert!(close(trt, vllm), "H200: trtllm {trt} ms, vllm {vllm} ms");
    let (sgl, vllm_h100) = (experts("H100_SXM", "sglang"), experts("H100_SXM", "vllm"));
    assert!(close(sgl, vllm_h100), "H100: sglang {sgl} ms, vllm {vllm_h100} ms");
    // Only MXFP4 experts borrow: a bf16 MoE keeps SGLang's own tables, and its kernel-table line
    // names no borrowing. (Mutation, tried: borrow whatever the experts' format.)
    let out = cmd()
        .args(["price", "Qwen/Qwen3-30B-A3B", "--device", "H200_SXM", "--decode", "8x1024", "--serving-engine", "sglang"])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let line = text.lines().find(|l| l.starts_with("Kernel tables:")).unwrap();
    assert!(line.starts_with("Kernel tables: h200_sxm sglang 0.5.14 (") && !line.contains("experts from"), "{line}");
    let (trt_b, vllm_b) = (experts("B200", "trtllm"), experts("B200", "vllm"));
    assert!(!close(trt_b, vllm_b), "B200: both {trt_b} ms");
}

#[test]
fn a_mamba2_decode_reads_and_writes_each_sequences_state_once_a_step() {
    // Nemotron 3 Nano on TEST_DEVICE (no kernel tables; HBM 1.6 TiB/s × 0.6): a sequence more
    // adds, in each of the 23 Mamba-2 layers, its fp32 state read and written (2 × 64 heads ×
    // 64 × 128 × 4 bytes) and its token's x, B, C, z and dt ((4096 + 2048 + 4096 + 64) × 2
    // bytes). Mutation: drop the state term and the slope is 0.02 µs a layer.
    let state_update_ms = |b: u32| -> f64 {
        let out = cmd()
            .args(["price", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "--device", "TEST_DEVICE"])
            .args(["--decode", &format!("{b}x1024"), "--output", "json"])
            .assert()
            .success();
        let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        op(&v, "mamba_state_update")["ms"].as_f64().unwrap()
    };
    let per_seq_layer_us = (state_update_ms(64) - state_update_ms(32)) / 32.0 / 23.0 * 1e3;
    let hbm = 1.6 * (1u64 << 40) as f64 * 0.6;
    let want = (2.0 * 64.0 * 64.0 * 128.0 * 4.0 + (4096.0 + 2048.0 + 4096.0 + 64.0) * 2.0) / hbm * 1e6;
    assert!((per_seq_layer_us / want - 1.0).abs() < 1e-6, "{per_seq_layer_us} µs against {want}");
}

#[test]
fn operators_of_one_name_kind_and_source_are_one_row() {
    // DeepSeek-V3's 3 dense and 58 MoE layers each have an input norm: one row of 61 calls.
    // Mutation: list the layer groups' operators apart and there are two rows of 3 and 58.
    let out = cmd()
        .args(["price", "deepseek-ai/DeepSeek-V3", "--device", "H200_SXM", "--tp", "8", "--decode", "8x1024", "--output", "json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let norms: Vec<&Value> = v["operators"].as_array().unwrap().iter().filter(|o| o["name"] == "input_norm").collect();
    assert_eq!(norms.len(), 1, "{norms:?}");
    assert_eq!(norms[0]["count"].as_f64(), Some(61.0));
}

#[test]
fn a_latent_moe_projects_the_routed_tokens_down_and_back_up_in_each_moe_block() {
    // Nemotron 3 Super: 40 MoE blocks, each with fc1 (4,096 → 1,024) before its experts and fc2
    // after; the experts' weights at the latent width. Mutation: leave `latent_ops` out and
    // neither row exists.
    let out = cmd()
        .args(["price", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "--device", "TEST_DEVICE", "--tp", "8", "--decode", "8x1024"])
        .args(["--output", "json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    for name in ["fc1_latent_proj", "fc2_latent_proj"] {
        assert_eq!(op(&v, name)["count"].as_f64(), Some(40.0), "{name}");
        assert_eq!(op(&v, name)["kind"], "gemm");
    }
}

#[test]
fn a_modelopt_checkpoint_directory_is_priced_as_its_hf_quant_config_says() {
    // A Hugging Face snapshot of nvidia/Qwen3.6-35B-A3B-NVFP4: its config.json leaves the KV
    // cache unsaid, its hf_quant_config.json says FP8. (Mutation: stop reading the sibling file
    // and the KV reads DISABLED.)
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf-configs");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(src.join("nvidia--Qwen3.6-35B-A3B-NVFP4.json"), dir.path().join("config.json")).unwrap();
    let out = cmd().args(["price", &dir.path().display().to_string(), "--device", "B200", "--decode", "8x1024"]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("Quantization: linear NVFP4, FP8 (attention projections); KV DISABLED"), "{text}");
    let hf_quant = src.join("nvidia--Qwen3.6-35B-A3B-NVFP4.hf_quant_config.json");
    std::fs::copy(hf_quant, dir.path().join("hf_quant_config.json")).unwrap();
    let out = cmd().args(["price", &dir.path().display().to_string(), "--device", "B200", "--decode", "8x1024"]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("Quantization: linear NVFP4, FP8 (attention projections); KV FP8"), "{text}");
}

/// `price MiniMaxAI/MiniMax-M3` at TP 8 / EP 8 on the fixture device and database, whose MSA
/// module tables (tests/fixtures/kernels/db/tiny_gpu/msa) hold MiniMax-M3's attention block at
/// 8 local heads: decode at batch 16 and 32 × KV 4,096 and 8,192 (40, 50, 60, 80 µs), prefill of
/// one prompt of 1,024, 2,048 and 4,096 tokens (100, 150 and 400 µs). A row of another model
/// (16 × 6,144, 9 ms) and a context row with a cached prefix (3,072 tokens after 128, 7 ms) are
/// in the files too and must not be read.
fn minimax_m3(extra: &[&str]) -> Value {
    let (device, db) = (fixture("device.yaml"), fixture("db"));
    let mut args = vec!["price", "MiniMaxAI/MiniMax-M3", "--device", "TINY_GPU", "--device-file", &device, "--tp", "8", "--ep", "8"];
    args.extend(["--serving-engine", "vllm", "--performance-model", "profiling", "--profiling-database-path", &db, "--output", "json"]);
    args.extend_from_slice(extra);
    let out = cmd().args(&args).assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("price --output json is JSON")
}

#[test]
fn minimax_m3_sparse_layers_are_priced_as_the_measured_attention_block() {
    // 57 sparse layers, each one `msa_attention` call in place of its projections, indexer,
    // attention and o_proj. Mutations (tried): read the other model's row (24 × 6,144 then
    // blends its 9 ms), the prefix row (3,072 then reads 7 ms), or key a decode by its cached
    // tokens instead of cached + 1 (32 × 8,192 leaves the grid): each fails an assertion here.
    let v = minimax_m3(&["--decode", "32x8192"]);
    let m = op(&v, "msa_attention");
    assert!(close(m["ms"].as_f64().unwrap(), 57.0 * 0.080), "{m}");
    assert_eq!((m["source"].as_str(), m["kind"].as_str(), m["count"].as_f64()), (Some("silicon"), Some("attention"), Some(57.0)));
    let names: Vec<&str> = v["operators"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    for gone in ["msa_indexer", "sparse_attention", "msa_index_qk_proj"] {
        assert!(!names.contains(&gone), "{gone} is inside the measured block: {names:?}");
    }
    // The three dense layers keep their own operators, and the TP all-reduce stays a collective.
    assert_eq!(op(&v, "qkv_proj")["count"].as_f64(), Some(3.0));
    assert_eq!(op(&v, "attn_all_reduce")["count"].as_f64(), Some(60.0));
    // Between the measured batches and lengths: the bilinear blend, (40 + 50 + 60 + 80) / 4 µs.
    let m = op(&minimax_m3(&["--decode", "24x6144"]), "msa_attention").clone();
    assert!(close(m["ms"].as_f64().unwrap(), 57.0 * 0.0575), "{m}");
    assert_eq!(m["source"], "interpolated");
    // Halfway between the lengths at batch 16, where only the other model was measured.
    let m = op(&minimax_m3(&["--decode", "16x6144"]), "msa_attention").clone();
    assert!(close(m["ms"].as_f64().unwrap(), 57.0 * 0.045), "{m}");
    // A prompt of 4,096 is the step-0 row (400 µs), 3,072 halfway from 2,048 (150 µs).
    let m = op(&minimax_m3(&["--prefill", "1x4096"]), "msa_attention").clone();
    assert!(close(m["ms"].as_f64().unwrap(), 57.0 * 0.400), "{m}");
    let m = op(&minimax_m3(&["--prefill", "1x3072"]), "msa_attention").clone();
    assert!(close(m["ms"].as_f64().unwrap(), 57.0 * 0.275), "{m}");
}

#[test]
fn a_chunk_after_a_cached_prefix_costs_what_it_adds_to_the_prompt() {
    // 2,048 new tokens after 2,048 cached: the 4,096-token prompt's 400 µs less the 2,048-token
    // one's 150 µs, more than a 2,048-token prompt alone (150 µs) and less than 2,048 separate
    // decodes at 4,096. Mutation (tried): look the chunk up at its own length: 150 µs.
    let m = op(&minimax_m3(&["--prefill", "1x2048@2048"]), "msa_attention").clone();
    assert!(close(m["ms"].as_f64().unwrap(), 57.0 * 0.250), "{m}");
    assert_eq!(m["source"], "extrapolated");
    // A step with a prompt and decodes pays the block's per-call cost once: less than the two
    // apart, at least the larger. Mutation (tried): add the two sides whole.
    let mixed = op(&minimax_m3(&["--prefill", "1x4096", "--decode", "32x8192"]), "msa_attention")["ms"].as_f64().unwrap();
    assert!((57.0 * 0.400..57.0 * (0.400 + 0.080) - 1e-9).contains(&mixed), "{mixed}");
}

#[test]
fn a_sparse_layer_the_module_tables_did_not_measure_keeps_its_operators() {
    // An INT8 KV cache has no module table (bf16 and FP8 only): the layer is priced operator by
    // operator. Mutation (tried): fall back to the bf16 table for INT8 and `msa_attention`
    // appears here.
    let v = minimax_m3(&["--decode", "32x8192", "--quantize-attention-action", "INT8"]);
    let names: Vec<&str> = v["operators"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert!(!names.contains(&"msa_attention") && names.contains(&"msa_indexer") && names.contains(&"sparse_attention"), "{names:?}");
    assert_eq!(op(&v, "qkv_proj")["count"].as_f64(), Some(60.0));
}

#[test]
fn a_sparse_layer_that_differs_from_the_measured_block_keeps_its_operators() {
    // MiniMax-M3's config read from a file is the measured block; the same widths without the
    // q/k norms, with rotary over a quarter of each head, or with a projection bias are not what
    // the tables timed, so each layer keeps its nine operators. Mutations (tried, each): drop
    // the q/k-norm, the rotary or the bias check from `is_measured_block` and `msa_attention`
    // replaces that variant's layers too.
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf-configs/MiniMaxAI--MiniMax-M3.json");
    let text = std::fs::read_to_string(src).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let names_of = |config: &str| {
        let path = dir.path().join("config.json");
        std::fs::write(&path, config).unwrap();
        let (device, db) = (fixture("device.yaml"), fixture("db"));
        let p = path.display().to_string();
        let mut args = vec!["price", &p, "--device", "TINY_GPU", "--device-file", &device, "--tp", "8", "--ep", "8"];
        args.extend(["--serving-engine", "vllm", "--performance-model", "profiling", "--profiling-database-path", &db]);
        args.extend(["--output", "json", "--decode", "32x8192"]);
        let out = cmd().args(&args).assert().success().get_output().stdout.clone();
        let v: Value = serde_json::from_slice(&out).unwrap();
        v["operators"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert!(names_of(&text).contains(&"msa_attention".to_string()));
    let variants = [
        ("\"use_qk_norm\": true", "\"use_qk_norm\": false"),
        ("\"rotary_dim\": 64", "\"rotary_dim\": 32"),
        ("\"use_qk_norm\": true", "\"use_qk_norm\": true, \"attention_bias\": true"),
    ];
    for (from, to) in variants {
        assert!(text.contains(from), "{from}");
        let names = names_of(&text.replace(from, to));
        let kept = !names.contains(&"msa_attention".to_string()) && names.contains(&"sparse_attention".to_string());
        assert!(kept, "{to}: {names:?}");
    }
}

#[test]
fn a_measured_sliding_window_attention_loads_the_tensor_cores_within_its_window() {
    // gpt-oss-120b's alternate layers attend to a 128-token window; on the H200 their attention
    // is priced from the kernel tables, which keep the window in their lookup. The power
    // limit's tensor-core load counts their matrix work within it, as the kernel does: a
    // 8,192-token prefill at TP 4 loads the tensor cores 0.35 of its time.
    // Mutation (tried): ignore the lookup's window in `Op::matrix_seconds`: 0.39.
    let out = cmd()
        .args(["price", "openai/gpt-oss-120b", "--device", "H200_SXM", "--tp", "4", "--prefill", "1x8192"])
        .args(["--serving-engine", "vllm", "--output", "json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let load = v["clocks"]["tensor_core_load"].as_f64().unwrap();
    assert!((0.33..0.37).contains(&load), "tensor-core load {load}");
}

/// `price` on the fixture model and device with the FP8-cache fixture database
/// (tests/fixtures/kernels/db_fp8_cache: a bf16-cache prefill table at the model's heads, an
/// FP8-cache one at 512-wide heads only, generation tables of both at the model's heads).
fn fp8_cache_attention(extra: &[&str]) -> Value {
    let (model, device, db) = (fixture("model/config.json"), fixture("device.yaml"), fixture("db_fp8_cache"));
    let mut args = vec!["price".to_string(), model, "--device".into(), "TINY_GPU".into(), "--device-file".into(), device];
    args.extend(["--serving-engine", "vllm", "--performance-model", "profiling", "--profiling-database-path"].map(String::from));
    args.push(db);
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--output", "json"].map(String::from));
    let out = cmd().args(&args).assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("price --output json is JSON")
}

#[test]
fn a_cache_dtype_whose_table_lacks_the_heads_takes_the_other_dtypes_table_at_them() {
    // A 1,000-token prompt attends over 500,500 causal pairs: 20.5 µs of tensor-core work at
    // 100 TFLOPS against 8.2 µs of bytes with a bf16 cache, so the bf16-cache kernel's time
    // (20 µs a layer, measured) is also the FP8-cache kernel's (the rooflines' ratio is 1).
    // Mutation: drop the other dtype's arm in `measured_attention`'s pick and the FP8 prompt
    // is carried from the 512-wide heads' 0.5 ms instead (25x this).
    let bf16 = op(&fp8_cache_attention(&["--prefill", "1x1000"]), "attention").clone();
    assert!(close(bf16["ms"].as_f64().unwrap(), 2.0 * 0.02) && bf16["source"] == "silicon", "{bf16}");
    let fp8 = op(&fp8_cache_attention(&["--prefill", "1x1000", "--quantize-attention-action", "FP8"]), "attention").clone();
    assert!(close(fp8["ms"].as_f64().unwrap(), 2.0 * 0.02), "{fp8}");
    // Another kernel's measurement, so never reported as this one's.
    assert_eq!(fp8["source"], "extrapolated");
    // Between measured prompts: halfway from 20 to 60 µs.
    let mid = op(&fp8_cache_attention(&["--prefill", "1x1500", "--quantize-attention-action", "FP8"]), "attention").clone();
    assert!(close(mid["ms"].as_f64().unwrap(), 2.0 * 0.04), "{mid}");
    // Decode keeps the FP8 cache's own table, which measured these heads: 12 µs at 4 × 1,000.
    let dec = op(&fp8_cache_attention(&["--decode", "4x1000", "--quantize-attention-action", "FP8"]), "attention").clone();
    assert!(close(dec["ms"].as_f64().unwrap(), 2.0 * 0.012) && dec["source"] == "silicon", "{dec}");
}

/// `price` of DeepSeek-V3 (block-FP8 projections, bf16 cache) at TP 8 on the fixture device
/// and database, whose MLA module tables hold the block at 16 local heads (and a row of
/// another model that must not be read).
fn deepseek_v3(extra: &[&str]) -> Value {
    let (device, db) = (fixture("device.yaml"), fixture("db"));
    let mut args = vec!["price", "deepseek-ai/DeepSeek-V3", "--device", "TINY_GPU", "--device-file", &device, "--tp", "8"];
    args.extend(["--serving-engine", "vllm", "--performance-model", "profiling", "--profiling-database-path", &db, "--output", "json"]);
    args.extend_from_slice(extra);
    let out = cmd().args(&args).assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("price --output json is JSON")
}

#[test]
fn deepseek_mla_layers_are_priced_as_the_measured_attention_block() {
    // 61 MLA layers, each one `mla_attention` call in place of its projections, norms, cache
    // write, absorption and attention; the TP all-reduce stays a collective. Mutations (tried):
    // read the other model's row (the 1,500-token prompt then blends its 9 ms), or drop the
    // call in `mla` (the decode is priced by its operators, `mla_decode_attention` appears).
    let v = deepseek_v3(&["--decode", "4x1000"]);
    let m = op(&v, "mla_attention");
    assert!(close(m["ms"].as_f64().unwrap(), 61.0 * 0.080), "{m}");
    assert_eq!((m["source"].as_str(), m["kind"].as_str(), m["count"].as_f64()), (Some("silicon"), Some("attention"), Some(61.0)));
    let names: Vec<&str> = v["operators"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    for gone in ["fused_qkv_a_proj", "q_b_proj", "mla_decode_attention", "mla_absorb_bmm", "o_proj"] {
        assert!(!names.contains(&gone), "{gone} is inside the measured block: {names:?}");
    }
    assert_eq!(op(&v, "attn_all_reduce")["count"].as_f64(), Some(61.0));
    // Batch 2 is a third of the way from 1 to 4, 1,500 halfway from 1,000 to 2,000:
    // 55 + (90 − 55) / 3 µs.
    let m = op(&deepseek_v3(&["--decode", "2x1500"]), "mla_attention").clone();
    assert!(close(m["ms"].as_f64().unwrap(), 61.0 * (0.055 + 0.035 / 3.0)), "{m}");
    assert_eq!(m["source"], "interpolated");
    // A 1,500-token prompt halfway from 200 to 500 µs.
    let m = op(&deepseek_v3(&["--prefill", "1x1500"]), "mla_attention").clone();
    assert!(close(m["ms"].as_f64().unwrap(), 61.0 * 0.35), "{m}");
    // A mixed step pays the operators both phases share once: the projections, norms, rotary
    // and cache write at one token on the fixture device's roofline (about 45 µs here), at most
    // the whole block at one sequence and the shortest KV (50 µs). So between 200 + 80 − 50 and
    // 200 + 80 µs, exclusive. Mutations (tried): add both sides whole (280 µs), or subtract the
    // whole one-sequence block (230 µs, what a decode-only kernel of the block would not save).
    let m = op(&deepseek_v3(&["--prefill", "1x1000", "--decode", "4x1000"]), "mla_attention").clone();
    let per_layer = m["ms"].as_f64().unwrap() / 61.0;
    assert!(per_layer > 0.23 + 1e-9 && per_layer < 0.28 - 1e-9, "{m}");
}

#[test]
fn an_mla_layer_the_module_tables_did_not_measure_keeps_its_operators() {
    // bf16 projections (the fixture holds block-FP8 rows only) and an FP8 cache (bf16 rows
    // only): no module table, so each layer keeps its operators. Mutation (tried): take the
    // block-FP8 table for any projection dtype and `mla_attention` appears in the first case.
    for extra in [["--quantize-linear-action", "DISABLED"], ["--quantize-attention-action", "FP8"]] {
        let mut args = vec!["--decode", "4x1000"];
        args.extend(extra);
        let v = deepseek_v3(&args);
        let names: Vec<&str> = v["operators"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
        assert!(!names.contains(&"mla_attention") && names.contains(&"mla_decode_attention"), "{extra:?}: {names:?}");
    }
}
