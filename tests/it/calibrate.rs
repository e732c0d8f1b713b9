//! `throughput-optimizer calibrate`: the error table on measured runs, bad input as usage
//! errors naming file, row and field, and the prediction's mix of steady state and first wave.

use super::util::{cmd, run_json, run_ok, usage_error};
use predicates::prelude::*;
use throughput_optimizer::calibrate::{read_files, Predictor, Resolver};
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
    // Every run beside its prediction, in file order, and the group medians are those runs'
    // errors. Fails if `runs` is missing, reordered or carries another run's prediction.
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8);
    let file = read_files(&[SAMPLE], &Resolver::default()).unwrap();
    for (r, m) in runs.iter().zip(&file) {
        assert_eq!(r["id"].as_str().unwrap(), m.id);
        assert_eq!(r["measured"]["ttft_ms"].as_f64().unwrap(), m.ttft_ms);
        assert!(r["predicted"]["tpot_ms"].as_f64().unwrap() > 0.0, "{r}");
    }
    let group = v["groups"].as_array().unwrap().iter().find(|g| g["rows"] == 1 && g["engine"] == "sglang").unwrap().clone();
    let one = runs.iter().find(|r| r["engine"] == "sglang" && r["gpu"] == group["gpu"] && r["model"] == group["model"]).unwrap();
    let err = (one["predicted"]["tpot_ms"].as_f64().unwrap() / one["measured"]["tpot_ms"].as_f64().unwrap() - 1.0) * 100.0;
    assert!((group["tpot"]["bias_pct"].as_f64().unwrap() - err).abs() < 1e-9, "{err} vs {group}");
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
    let res = Resolver::default();
    let runs = read_files(&[SAMPLE], &res).unwrap();
    let predictor = Predictor::new(base_plan(&[]).unwrap(), &res);
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
    // The JSON report rounds to 6 significant digits: the prediction, rounded alike, is equal.
    let round = |x: f64| throughput_optimizer::util::round_significant(x, throughput_optimizer::report::json::FLOAT_DIGITS);
    assert!(round(p.ttft_ms) == ttft && round(p.tpot_ms) == tpot, "{p:?} vs {ttft} / {tpot}");
    let all = predictor.predict_all(&runs);
    let again: Vec<_> = runs.iter().rev().map(|r| predictor.predict(r)).collect();
    assert_eq!(all, again.into_iter().rev().collect::<Vec<_>>());
}

#[test]
fn the_sensitivity_pass_simulates_what_a_prediction_simulates_and_its_slopes_predict_a_change() {
    // The fit's recording pass must price every step as the plain prediction does (fails if the
    // recorder's step time drifts from RooflineCost::step_seconds, e.g. host time left out),
    // and its first-order slopes must say how a 2 ms per-step overhead moves TPOT (fails if a
    // step's weight counts the wrong requests, e.g. W and U swapped, or the count component is
    // scaled by the wrong unit).
    use throughput_optimizer::calibrate::fit::Params;
    use throughput_optimizer::hardware::calibration::{DeviceCalibration, EngineProfiles, Overheads};
    let res = Resolver::default();
    let runs = read_files(&[SAMPLE], &res).unwrap();
    let run = runs.iter().find(|r| r.engine == "vllm" && r.target.device == "H100_SXM").unwrap().clone();
    let calibration_with = |step_us: f64, seq_layer_us: f64, overlap: bool| {
        let mut engines = EngineProfiles::default();
        let mut vllm = engines.get("vllm").clone();
        if !overlap {
            // Host time then adds to every step, as the first-order slopes below assume.
            vllm.overlap_scheduling_from = None;
        }
        vllm.devices = vec![DeviceCalibration {
            device: "H100_SXM".into(),
            memory_efficiency: 0.85,
            matrix_efficiency_scale: 1.0,
            comm_efficiency: 0.75,
            grouped_gemm_efficiency: 1.0,
            overheads: Overheads {
                step_overhead_us: step_us,
                seq_overhead_us: 0.0,
                seq_layer_overhead_us: seq_layer_us,
                frontend_request_us: Some(5000.0),
                frontend_input_token_us: None,
                frontend_output_token_us: None,
            },
            fit: None,
        }];
        engines.replace(vllm);
        engines
    };
    let calibration = |step_us: f64, seq_layer_us: f64| calibration_with(step_us, seq_layer_us, false);
    let base = Predictor::new(base_plan(&[]).unwrap(), &res);
    let at = base.with_engines(calibration(500.0, 0.3));
    let s = at.sensitivity(&run).unwrap();
    let p = at.predict(&run).unwrap();
    assert_eq!((s.ttft_ms, s.tpot_ms), (p.ttft_ms, p.tpot_ms));
    let params = |step, seq_layer| Params {
        memory_efficiency: 0.85,
        matrix_efficiency_scale: 1.0,
        comm_efficiency: 0.75,
        grouped_gemm_efficiency: 1.0,
        step_overhead_us: step,
        seq_layer_overhead_us: seq_layer,
        frontend_request_us: 5000.0,
    };
    let moved = base.with_engines(calibration(2500.0, 0.3)).predict(&run).unwrap();
    let (ttft, tpot) = params(500.0, 0.3).predict(&s, &params(2500.0, 0.3));
    assert!((tpot - moved.tpot_ms).abs() < 0.02 * moved.tpot_ms, "first order {tpot} vs simulated {}", moved.tpot_ms);
    assert!((ttft - moved.ttft_ms).abs() < 0.10 * moved.ttft_ms, "first order {ttft} vs simulated {}", moved.ttft_ms);
    assert!(tpot > s.tpot_ms + 1.5, "2 ms more per step must show in TPOT: {} -> {tpot}", s.tpot_ms);
    // 3 µs more per sequence per layer: the recorded component is sequences × layers (fails if
    // the recorder counts sequences only: the first order then moves TPOT 64 times too little;
    // and if `CandidateCtx::new` forgets the model's layers, the simulated TPOT hardly moves).
    let moved = base.with_engines(calibration(500.0, 3.3)).predict(&run).unwrap();
    let (_, tpot) = params(500.0, 0.3).predict(&s, &params(500.0, 3.3));
    assert!((tpot - moved.tpot_ms).abs() < 0.02 * moved.tpot_ms, "first order {tpot} vs simulated {}", moved.tpot_ms);
    assert!(moved.tpot_ms > s.tpot_ms * 1.05, "a per-layer cost must show: {} -> {}", s.tpot_ms, moved.tpot_ms);
    // Overlapped scheduling hides host time below the device's: 2 ms more per step leave the
    // simulated TPOT where it was, and the slopes, which record only the larger part of each
    // step, say so (fails if the recorder keeps the host components of device-bound steps).
    let at = base.with_engines(calibration_with(500.0, 0.3, true));
    let s = at.sensitivity(&run).unwrap();
    let moved = base.with_engines(calibration_with(2500.0, 0.3, true)).predict(&run).unwrap();
    let (_, tpot) = params(500.0, 0.3).predict(&s, &params(2500.0, 0.3));
    assert!((moved.tpot_ms - s.tpot_ms).abs() < 0.01 * s.tpot_ms, "hidden host time moved TPOT: {} -> {}", s.tpot_ms, moved.tpot_ms);
    assert!((tpot - moved.tpot_ms).abs() < 0.02 * moved.tpot_ms, "first order {tpot} vs simulated {}", moved.tpot_ms);
}

#[test]
fn a_fit_writes_profiles_that_reproduce_its_after_table() {
    // calibrate --fit --write: the written files, read back with --calibration, give the
    // fit's own "after" figures (fails if the file rounds differently from what the fit
    // simulated, or if an entry is written for the wrong device), and the fit improves on
    // the prior on its own runs.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let out = run_ok(&["calibrate", "--measured", SAMPLE, "--fit", "--write", &d, "--output", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let median = |t: &serde_json::Value, e: &str, k: &str| {
        t["engines"].as_array().unwrap().iter().find(|g| g["engine"] == e).unwrap()[k]["median_abs_pct"].as_f64().unwrap()
    };
    let files: Vec<String> = ["vllm", "sglang", "trtllm"].iter().map(|e| format!("{d}/{e}.yaml")).collect();
    let mut args = vec!["calibrate", "--measured", SAMPLE, "--output", "json"];
    for f in &files {
        args.extend(["--calibration", f.as_str()]);
    }
    let again: serde_json::Value = serde_json::from_str(&run_ok(&args)).unwrap();
    for e in ["vllm", "sglang", "trtllm"] {
        for k in ["ttft", "tpot"] {
            assert!((median(&v["after"], e, k) - median(&again, e, k)).abs() < 1e-9, "{e} {k}");
        }
    }
    let loss =
        |t: &serde_json::Value| ["vllm", "sglang", "trtllm"].iter().map(|e| median(t, e, "ttft") + median(t, e, "tpot")).sum::<f64>();
    assert!(loss(&v["after"]) < loss(&v["before"]), "the fit must improve on the prior");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains("device: H100_SXM") && text.contains("fit:"), "{text}");
    // H100 and H200 are one die (GH100): the fit shares their matrix and bus efficiencies and
    // keeps their bandwidth shares apart (fails if CHIP_PARAMS are fitted per device).
    let p: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let entry = |d: &str| p["devices"].as_sequence().unwrap().iter().find(|e| e["device"] == d).unwrap().clone();
    let (h100, h200) = (entry("H100_SXM"), entry("H200_SXM"));
    for k in ["matrix_efficiency_scale", "comm_efficiency"] {
        assert_eq!(h100[k], h200[k], "{k}");
    }
}

#[test]
fn calibration_flags_are_checked() {
    let base = ["Qwen/Qwen3-32B", "--device", "H100_SXM", "--input-length", "100", "--output-length", "10"];
    cmd()
        .args(base)
        .args(["--calibration", "none", "--calibration", "x.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--calibration"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "engine: vllm\nfused_graph: true\ndefaults: {step_overhead_us: -1, seq_overhead_us: 0}\n").unwrap();
    cmd().args(base).args(["--calibration", &bad.display().to_string()]).assert().code(2).stderr(
        predicate::str::contains("defaults.step_overhead_us")
            .and(predicate::str::contains("-1"))
            .and(predicate::str::contains(format!("--calibration {}", bad.display()))),
    );
    cmd().args(["calibrate", "--measured", SAMPLE, "--write", "/tmp"]).assert().code(2).stderr(predicate::str::contains("--fit"));
}

#[test]
fn the_report_names_the_execution_profile() {
    // Fails if the serving line stops saying which calibration priced the steps.
    let args = [
        "Qwen/Qwen3-32B",
        "--device",
        "H100_SXM",
        "--num-devices",
        "2",
        "--input-length",
        "1024",
        "--output-length",
        "128",
        "--tp-sizes",
        "2",
        "--batch-range",
        "8",
        "8",
    ];
    let on = run_ok(&args);
    assert!(on.contains("Execution profile: vllm × H100_SXM calibration, fitted on"), "{on}");
    let off = run_ok(&[&args[..], &["--calibration", "none"]].concat());
    assert!(off.contains("Execution profile: vllm defaults, calibration off: fused graph"), "{off}");
}

#[test]
fn an_engine_version_selects_the_release_defaults() {
    // vLLM 0.11 planned each step after the previous one; the current release overlaps them.
    // Fails if `@VERSION` is dropped on the way to the plan (`engine_version: None` in
    // `cli::validate::sim`).
    let args = ["Qwen/Qwen3-32B", "--device", "H100_SXM", "--num-devices", "2", "--input-length", "1024"];
    let args = [&args[..], &["--output-length", "128", "--tp-sizes", "2", "--batch-range", "8", "8"]].concat();
    let current = run_ok(&[&args[..], &["--serving-engine", "vllm"]].concat());
    assert!(current.contains("; overlapped scheduling\n"), "{current}");
    let old = run_ok(&[&args[..], &["--serving-engine", "vllm@0.11"]].concat());
    assert!(!old.contains("overlapped"), "{old}");
    assert!(old.contains("calibration, fitted on 154 measured runs (release 0.11.0)"), "{old}");
    usage_error(&[&args[..], &["--serving-engine", "vllm@next"]].concat(), &["--serving-engine", "`next`"]);
    // SGLang's overlap scheduler is on from 0.4 (`disable_overlap_schedule` false).
    let sglang = run_ok(&[&args[..], &["--serving-engine", "sglang"]].concat());
    assert!(sglang.contains("; overlapped scheduling\n"), "{sglang}");
    let old = run_ok(&[&args[..], &["--serving-engine", "sglang@0.3"]].concat());
    assert!(!old.contains("overlapped"), "{old}");
    // A profile without a version-dependent default: the version is accepted with a warning
    // (fails if `warn_unused_engine_version` is not called).
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("sglang.yaml");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/sglang.yaml")).unwrap();
    std::fs::write(&plain, text.lines().filter(|l| !l.starts_with("overlap_scheduling_from")).collect::<Vec<_>>().join("\n")).unwrap();
    cmd()
        .args(&args)
        .args(["--serving-engine", "sglang@0.4", "--calibration", plain.to_str().unwrap()])
        .assert()
        .success()
        .stderr(predicate::str::contains("sglang@0.4.0").and(predicate::str::contains("changes nothing")));
    // The original tool's scheduler has no releases: a version would be ignored, so it is refused.
    usage_error(&[&args[..], &["--serving-engine", "msmodeling@1.0"]].concat(), &["msmodeling", "no releases"]);
}

#[test]
fn tensorrt_llm_context_servers_run_without_the_overlap_scheduler() {
    // TensorRT-LLM overlaps scheduling, but not on the context (prefill) servers of a
    // disaggregated plan, which `--emit trtllm` writes with `disable_overlap_scheduler: true`;
    // vLLM's prefill instances keep async scheduling.
    // Fails if `SimSetup`'s instance ignores the role (`overlap_scheduling: ctx.overlap_scheduling`).
    use throughput_optimizer::cost::ParallelConfig;
    use throughput_optimizer::outcome::Phase;
    use throughput_optimizer::search::candidates::Candidate;
    use throughput_optimizer::search::engine::CandidateCtx;
    let overlap = |engine: &str, phase: Phase| {
        let argv = ["throughput-optimizer", "Qwen/Qwen3-32B", "--device", "H100_SXM", "--num-devices", "2", "--input-length", "1024"];
        let plan = super::util::plan_of(&[&argv[..], &["--output-length", "128", "--serving-engine", engine]].concat());
        let cand = Candidate { parallel: ParallelConfig::dense(2, 2), mtp: 0 };
        let ctx = CandidateCtx::new(&plan, &plan.devices[0], cand, phase);
        ctx.sim_setup().instance(8192, 64).overlap_scheduling
    };
    assert!(overlap("trtllm", Phase::Aggregated) && overlap("trtllm", Phase::Decode));
    assert!(!overlap("trtllm", Phase::Prefill));
    assert!(overlap("vllm", Phase::Prefill));
}

/// The per-sequence, per-layer overhead multiplies every decoder-layer pass a step prices: the
/// model's layers and, with MTP, its MTP layer once per draft token (DeepSeek-V3: 61 layers,
/// one MTP layer). Mutation: multiply by `plan.model.num_layers()` in `CandidateCtx::new` (as
/// first landed) and a step drafting two tokens costs per sequence what a plain one does.
#[test]
fn the_per_layer_overhead_counts_every_layer_pass_a_step_runs() {
    use throughput_optimizer::cost::ParallelConfig;
    use throughput_optimizer::outcome::Phase;
    use throughput_optimizer::search::candidates::Candidate;
    use throughput_optimizer::search::engine::CandidateCtx;
    let argv = ["throughput-optimizer", "deepseek-ai/DeepSeek-V3", "--device", "H100_SXM", "--num-devices", "8"];
    let plan = super::util::plan_of(
        &[&argv[..], &["--input-length", "1024", "--output-length", "128", "--serving-engine", "vllm", "--num-mtp-tokens", "2"]].concat(),
    );
    let per_layer = plan.effective(&plan.devices[0]).per_seq_layer_s;
    assert!(per_layer > 0.0, "the built-in vLLM H100 entry has a per-layer overhead");
    let parallel = ParallelConfig { num_devices: 8, tp: 8, dp: 1, ep: 8, moe_tp: 1, moe_dp: 1, dcp: 1 };
    let ctx = |mtp: u32| CandidateCtx::new(&plan, &plan.devices[0], Candidate { parallel, mtp }, Phase::Decode);
    let (plain, drafting) = (ctx(0), ctx(2));
    assert_eq!((plain.layer_passes, drafting.layer_passes), (61, 63));
    assert!((plain.cost.per_seq_s - 61.0 * per_layer).abs() < 1e-15, "{}", plain.cost.per_seq_s);
    assert!((drafting.cost.per_seq_s - 63.0 * per_layer).abs() < 1e-15, "{}", drafting.cost.per_seq_s);
}
