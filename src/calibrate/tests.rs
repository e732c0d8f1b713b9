//! Unit tests of the calibration harness: reading and mapping measured runs, the error
//! messages of bad input, and the error statistics on hand-made predictions. Each invariant
//! test names the mutation that makes it fail.

use super::*;
use crate::quant::LinearQuant;

const SAMPLE: &str = include_str!("../../tests/fixtures/calibration/measured_sample.csv");
const VLLM_JSON: &str = include_str!("../../tests/fixtures/calibration/vllm_bench_serve.json");
const HEADER: &str = "id,engine,engine_version,model,gpu,precision,isl,osl,concurrency,tp,attention_dp,moe_tp,moe_ep,ttft_ms,tpot_ms";

fn csv(rows: &[&str]) -> String {
    std::iter::once(HEADER).chain(rows.iter().copied()).collect::<Vec<_>>().join("\n")
}

fn read(text: &str) -> Result<Vec<MeasuredRun>, CalibrateError> {
    read_csv(text, "runs.csv", &Resolver::default())
}

#[test]
fn the_sample_reads_end_to_end_with_models_devices_precisions_and_layouts_mapped() {
    let runs = read(SAMPLE).unwrap();
    assert_eq!(runs.len(), 8);
    let qwen = &runs[0];
    assert_eq!((qwen.engine.as_str(), qwen.isl, qwen.osl, qwen.concurrency, qwen.num_prompts), ("vllm", 1024, 128, 8, 80));
    assert_eq!((qwen.target.model.as_str(), qwen.target.device.as_str()), ("Qwen/Qwen3-32B", "H100_SXM"));
    // Blank precision: the checkpoint's own, bf16.
    assert_eq!((qwen.target.precision, qwen.target.quant.linear), (Precision::Bf16, LinearQuant::Disabled));
    assert_eq!((qwen.target.parallel.num_devices, qwen.target.parallel.tp, qwen.target.parallel.dp), (2, 2, 1));
    let llama = &runs[2];
    assert_eq!((llama.target.model.as_str(), llama.target.device.as_str()), ("meta-llama/Meta-Llama-3.1-8B", "H200_SXM"));
    assert_eq!(llama.target.quant.linear, LinearQuant::Fp8);
    let oss = &runs[3];
    assert_eq!(oss.target.device, "B200");
    // gpt-oss: MXFP4 experts, bf16 attention.
    assert_eq!((oss.target.quant.linear, oss.target.quant.non_expert), (LinearQuant::Mxfp4, Some(LinearQuant::Disabled)));
    let p = oss.target.parallel;
    assert_eq!((p.num_devices, p.tp, p.dp, p.ep, p.moe_tp, p.moe_dp), (4, 4, 1, 1, 4, 1));
    // Attention DP 4 × TP 1, experts over EP 4.
    let adp = runs[5].target.parallel;
    assert_eq!((adp.num_devices, adp.tp, adp.dp, adp.ep, adp.moe_tp, adp.moe_dp), (4, 1, 4, 4, 1, 1));
}

#[test]
fn an_fp8_run_of_a_qwen_network_is_served_from_qwens_block_scaled_release() {
    // TensorRT-LLM runs only pre-quantized checkpoints; Qwen's FP8 release has 128 x 128
    // blocks. A Llama FP8 row stays per tensor (above). (Mutation: `quant_for` ignoring the
    // id, Fp8 for every FP8 row, fails this.)
    let text = csv(&[
        "a,trtllm,1.0.0rc3,Qwen/Qwen3-32B,h100_sxm,fp8,1024,128,8,1,,1,1,272,18.6",
        "b,vllm,0.12.0,Qwen/Qwen3-32B,h100_sxm,fp8,1024,128,8,1,,1,1,272,18.6",
    ]);
    let runs = read(&text).unwrap();
    assert_eq!((runs[0].target.precision, runs[0].target.quant.linear), (Precision::Fp8, LinearQuant::Fp8Block));
    // TensorRT-LLM's FP8 runs keep the KV cache in FP8 (`kv_for`: the runs' KV capacity needs
    // it); vLLM's keep the checkpoint's bf16. (Mutation: drop the engine clause of `kv_for` and
    // the first KV assertion fails; drop the engine test and the second does.)
    assert_eq!(runs[0].target.quant.kv, crate::quant::KvQuant::Fp8);
    assert_eq!(runs[1].target.quant.kv, crate::quant::KvQuant::Disabled);
}

#[test]
fn a_run_without_a_precision_is_served_in_its_checkpoints_own_and_fp4_from_nvidias_release() {
    // DeepSeek-R1 and Kimi-K2 ship FP8 in 128 x 128 blocks: blank is FP8, not a bf16 model
    // twice the size (8 H200s could not hold it). Kimi-K2.5 ships INT4 experts. An fp4 run of a
    // network whose checkpoint is not FP4 is NVIDIA's NVFP4 release (attention kept in bf16 for
    // DeepSeek), not gpt-oss's MXFP4; gpt-oss in fp4 stays MXFP4. (Mutations: the blank
    // precision read from the id's suffix alone makes the first three bf16; the fp4 rule of
    // MXFP4 for every MoE fails the DeepSeek fp4 assertion.)
    let text = csv(&[
        "a,vllm,,deepseek-ai/DeepSeek-R1,h200_sxm,,1024,128,8,8,,8,1,100,10",
        "b,vllm,,moonshotai/Kimi-K2-Instruct,h200_sxm,,1024,128,8,8,,8,1,100,10",
        "c,vllm,,moonshotai/Kimi-K2.5,h200_sxm,,1024,128,8,8,,8,1,100,10",
        "d,trtllm,,deepseek-ai/DeepSeek-R1,b200_sxm,fp4,1024,128,8,8,,8,1,100,10",
        "e,vllm,,openai/gpt-oss-120b,b200_sxm,fp4,1024,128,8,8,,8,1,100,10",
        "f,vllm,,meta-llama/Llama-3.1-70B-Instruct,b200_sxm,fp4,1024,128,8,8,,1,1,100,10",
    ]);
    let runs = read(&text).unwrap();
    let q = |i: usize| (runs[i].target.precision, runs[i].target.quant.linear, runs[i].target.quant.non_expert);
    assert_eq!(q(0), (Precision::Fp8, LinearQuant::Fp8Block, None));
    assert_eq!(q(1), (Precision::Fp8, LinearQuant::Fp8Block, None));
    assert_eq!(q(2), (Precision::Int4, LinearQuant::W4A16Int4, Some(LinearQuant::Disabled)));
    assert_eq!(q(3), (Precision::Fp4, LinearQuant::Nvfp4, Some(LinearQuant::Disabled)));
    assert_eq!(q(4), (Precision::Fp4, LinearQuant::Mxfp4, Some(LinearQuant::Disabled)));
    assert_eq!(q(5), (Precision::Fp4, LinearQuant::Nvfp4, None));
}

#[test]
fn a_missing_column_is_named() {
    let text = "engine,model,gpu,isl,osl,concurrency,tp,ttft_ms\nvllm,Qwen/Qwen3-32B,h100_sxm,1024,128,8,2,150";
    assert_eq!(
        read(text).unwrap_err().to_string(),
        "runs.csv: missing column `tpot_ms` (the header must name engine, model, gpu, isl, osl, concurrency, tp, ttft_ms, tpot_ms)"
    );
}

#[test]
fn a_negative_latency_names_file_row_and_field() {
    let text =
        csv(&["a,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,18", "b,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,-3"]);
    assert_eq!(read(&text).unwrap_err().to_string(), "runs.csv: row 2, field `tpot_ms`: must be a positive number of milliseconds, got -3");
    let zero = csv(&["a,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,0,18"]);
    assert_eq!(read(&zero).unwrap_err().to_string(), "runs.csv: row 1, field `ttft_ms`: must be a positive number of milliseconds, got 0");
}

#[test]
fn an_unknown_gpu_or_model_and_a_non_number_are_named() {
    // MI300X has a built-in profile since issue 23: an MI250X is still unknown.
    let gpu = csv(&["a,vllm,,Qwen/Qwen3-32B,mi250x,,1024,128,8,2,,1,1,150,18"]);
    assert_eq!(
        read(&gpu).unwrap_err().to_string(),
        "runs.csv: row 1, field `gpu`: `mi250x` is not a known GPU: h100_sxm, h200_sxm, b200_sxm or a device profile name (see --list-devices)"
    );
    // A device profile's name is a known GPU (the run maps to it).
    let mi300x = csv(&["a,vllm,,Qwen/Qwen3-32B,mi300x,,1024,128,8,2,,1,1,150,18"]);
    assert_eq!(read(&mi300x).unwrap()[0].target.device, "MI300X");
    let model = csv(&["a,vllm,,acme/Nonesuch-7B,h100_sxm,,1024,128,8,2,,1,1,150,18"]);
    assert_eq!(
        read(&model).unwrap_err().to_string(),
        "runs.csv: row 1, field `model`: `acme/Nonesuch-7B` is not a model of the built-in catalog (see --list-models)"
    );
    let nan = csv(&["a,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,eight,2,,1,1,150,18"]);
    assert_eq!(read(&nan).unwrap_err().to_string(), "runs.csv: row 1, field `concurrency`: `eight` is not a number");
    // Qwen3-32B has 64 heads: TP 3 does not divide them.
    let tp = csv(&["a,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,3,,1,1,150,18"]);
    assert!(read(&tp).unwrap_err().to_string().starts_with("runs.csv: row 1, field `tp`: Qwen/Qwen3-32B cannot run this layout: TP=3"));
}

#[test]
fn an_engine_the_simulator_does_not_model_is_refused_not_run_as_vllm() {
    // Mutation tried: drop the `MEASURED_ENGINES` check and the llamacpp run reads as one
    // (predicted, and fitted into vllm.yaml, with vLLM's scheduler).
    let other = csv(&["a,llamacpp,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,18"]);
    assert_eq!(
        read(&other).unwrap_err().to_string(),
        "runs.csv: row 1, field `engine`: `llamacpp` is not an engine the simulator models: vllm, sglang, trtllm"
    );
    // TensorRT-LLM under its product and package names is trtllm (mutation tried: drop the
    // aliases and `TensorRT-LLM` is refused as an engine the simulator does not model).
    for name in ["TensorRT-LLM", "tensorrt_llm"] {
        let row = format!("a,{name},,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,18");
        assert_eq!(read(&csv(&[row.as_str()])).unwrap()[0].engine, "trtllm", "{name}");
    }
    // TensorRT-LLM on an AMD GPU, which the planner refuses too.
    let amd = csv(&["a,trtllm,,Qwen/Qwen3-32B,mi300x,,1024,128,8,2,,1,1,150,18"]);
    let e = read(&amd).unwrap_err().to_string();
    assert!(e.starts_with("runs.csv: row 1, field `engine`: trtllm: TensorRT-LLM runs on NVIDIA GPUs only"), "{e}");
    // vLLM's client names the server it spoke to in `backend` when no engine metadata is given.
    let sglang = VLLM_JSON.replace("\"backend\": \"vllm\",", "\"backend\": \"sglang\",");
    assert_ne!(sglang, VLLM_JSON, "the fixture names its backend");
    assert_eq!(read_vllm_json(&sglang, "run.json", &Resolver::default()).unwrap().engine, "sglang");
    let tgi = VLLM_JSON.replace("\"backend\": \"vllm\",", "\"backend\": \"tgi\",");
    // An engine given as metadata wins over the backend (a generic OpenAI client, say).
    let meta = VLLM_JSON.replace("\"backend\": \"vllm\",", "\"backend\": \"tgi\", \"engine\": \"trtllm\",");
    assert_eq!(read_vllm_json(&meta, "run.json", &Resolver::default()).unwrap().engine, "trtllm");
    let e = read_vllm_json(&tgi, "run.json", &Resolver::default()).unwrap_err().to_string();
    assert!(e.starts_with("run.json: row 1, field `backend`: `tgi` is a server the simulator does not model"), "{e}");
}

#[test]
fn a_measured_path_that_is_not_a_regular_file_is_refused_before_reading() {
    // Mutation tried: read with `std::fs::read_to_string` and /dev/zero is read until memory
    // runs out.
    let e = super::measured::read_files(&["/dev/zero"], &Resolver::default()).unwrap_err().to_string();
    assert_eq!(e, "/dev/zero: not a regular file; give the path of a file");
}

#[test]
fn a_column_named_twice_is_refused_and_an_unread_one_is_noted() {
    // Mutation tried: drop the duplicate check and the second `tpot_ms` silently wins.
    let twice = format!("{HEADER},tpot_ms\na,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,18,99");
    assert_eq!(read(&twice).unwrap_err().to_string(), "runs.csv: column `tpot_ms` appears twice in the header (columns 15 and 16)");
    // A misspelt optional column is read as absent (num_prompts falls back to 10 × the
    // concurrency), so calibrate says which columns it did not read.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.csv");
    std::fs::write(&path, format!("{HEADER},num_prompt\na,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,18,40\n")).unwrap();
    let files = super::measured::read_files(&[&path], &Resolver::default()).unwrap();
    assert_eq!(files.runs[0].num_prompts, 80);
    assert_eq!(files.notes.len(), 1);
    assert!(files.notes[0].contains("typo.csv: columns not read: `num_prompt` (calibrate reads engine, model"), "{}", files.notes[0]);
    // Two columns calibrate does not read may share a name; an unnamed one (a pandas index)
    // is noted by its position.
    std::fs::write(&path, format!(",{HEADER},note,note\n0,a,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,18,x,y\n")).unwrap();
    let files = super::measured::read_files(&[&path], &Resolver::default()).unwrap();
    assert!(files.notes[0].contains("columns not read: column 1 (unnamed), `note`, `note`"), "{}", files.notes[0]);
    // Mutation tried: note every column and the clean file gets a note too.
    std::fs::write(&path, format!("{HEADER}\na,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,18\n")).unwrap();
    assert!(super::measured::read_files(&[&path], &Resolver::default()).unwrap().notes.is_empty());
}

#[test]
fn reading_files_sets_aside_the_runs_the_simulator_cannot_predict_and_one_text_refuses_them() {
    // Mutations tried: `read_files` returning the first `Unsupported` error fails the first
    // assertion; treating every field error as unsupported reads the `eight` file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.csv");
    let rows = [
        "a,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,1,1,150,18",
        "b,vllm,,acme/Nonesuch-7B,h100_sxm,,1024,128,8,2,,1,1,150,18",
        "c,trtllm,,Qwen/Qwen3-32B,mi300x,,1024,128,8,2,,1,1,150,18",
    ];
    std::fs::write(&path, csv(&rows)).unwrap();
    let tgi = dir.path().join("tgi.json");
    std::fs::write(&tgi, VLLM_JSON.replace("\"backend\": \"vllm\",", "\"backend\": \"tgi\",")).unwrap();
    // A result file with `--metadata id=…` is listed under that id, one without under its name
    // (mutation tried: always the file name, and `tgi-c8` is not found).
    let tgi_id = dir.path().join("tgi_id.json");
    std::fs::write(&tgi_id, VLLM_JSON.replace("\"backend\": \"vllm\",", "\"backend\": \"tgi\", \"id\": \"tgi-c8\",")).unwrap();
    let files = super::measured::read_files(&[&path, &tgi, &tgi_id], &Resolver::default()).unwrap();
    assert_eq!(files.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a"]);
    let set_aside: Vec<(&str, usize)> = files.unsupported.iter().map(|d| (d.id.as_str(), d.row)).collect();
    let tgi_name = tgi.display().to_string();
    assert_eq!(set_aside, [("b", 2), ("c", 3), (tgi_name.as_str(), 1), ("tgi-c8", 1)]);
    assert_eq!(hygiene::DroppedRun::from(files.unsupported[0].clone()).reason, hygiene::DropReason::Unsupported);
    assert_eq!(files.unsupported[0].why, "field `model`: `acme/Nonesuch-7B` is not a model of the built-in catalog (see --list-models)");
    // One CSV text must be predictable whole: the first such run is the error.
    assert_eq!(
        read(&csv(&rows)).unwrap_err().to_string(),
        "runs.csv: row 2, field `model`: `acme/Nonesuch-7B` is not a model of the built-in catalog (see --list-models)"
    );
    // A malformed field is not set aside, even in a run that also names an unknown model
    // (mutation tried: resolving the model before the numbers reads this file).
    std::fs::write(&path, csv(&[rows[0], "d,vllm,,acme/Nonesuch-7B,h100_sxm,,1024,128,eight,2,,1,1,150,18"])).unwrap();
    let e = super::measured::read_files(&[&path], &Resolver::default()).unwrap_err().to_string();
    assert!(e.ends_with("mixed.csv: row 2, field `concurrency`: `eight` is not a number"), "{e}");
}

#[test]
fn a_vllm_result_reads_lengths_from_totals_and_layout_from_metadata() {
    let run = read_vllm_json(VLLM_JSON, "run.json", &Resolver::default()).unwrap();
    assert_eq!((run.engine.as_str(), run.isl, run.osl, run.concurrency, run.num_prompts), ("vllm", 1024, 128, 8, 80));
    assert_eq!(
        (run.ttft_ms, run.tpot_ms, run.percentiles.p99_ttft_ms, run.percentiles.median_itl_ms),
        (154.25, 18.04, Some(402.7), Some(17.6))
    );
    assert_eq!((run.target.device.as_str(), run.target.parallel.tp), ("H100_SXM", 2));
    let no_gpu = VLLM_JSON.replace("\"gpu\": \"h100_sxm\",", "");
    assert_eq!(
        read_vllm_json(&no_gpu, "run.json", &Resolver::default()).unwrap_err().to_string(),
        "run.json: row 1, field `gpu`: is missing: vLLM does not record it; pass `--metadata gpu=h100_sxm` to vllm bench serve"
    );
    let bad = VLLM_JSON.replace("\"mean_ttft_ms\": 154.25", "\"mean_ttft_ms\": -1");
    assert_eq!(
        read_vllm_json(&bad, "run.json", &Resolver::default()).unwrap_err().to_string(),
        "run.json: row 1, field `mean_ttft_ms`: must be a positive number of milliseconds, got -1"
    );
}

/// Measured TTFT 100 ms and TPOT 10 ms on every run, so a prediction's error is its offset.
fn hand_made() -> (Vec<MeasuredRun>, Vec<Result<Prediction, String>>) {
    let rows: Vec<String> = (0..6)
        .map(|i| {
            let (engine, gpu) = if i < 5 { ("vllm", "h100_sxm") } else { ("sglang", "h200_sxm") };
            format!("r{i},{engine},,Qwen/Qwen3-32B,{gpu},,1024,128,8,2,,1,1,100,10")
        })
        .collect();
    let runs = read(&csv(&rows.iter().map(String::as_str).collect::<Vec<_>>())).unwrap();
    let p = |ttft: f64, tpot: f64| Ok(Prediction { ttft_ms: ttft, tpot_ms: tpot });
    let preds = vec![p(110.0, 10.5), p(80.0, 9.0), p(130.0, 12.0), p(140.0, 10.0), Err("out of memory".into()), p(50.0, 10.0)];
    (runs, preds)
}

#[test]
fn evaluate_gives_exact_medians_p90_and_bias_on_hand_made_predictions() {
    // Fails if the bias is taken over |error| (it would be +25 %), if p90 is nearest-rank
    // (40 %), if the even-count median takes one middle value (20 % or 30 %), or if failed runs
    // enter the statistics or leave the row count.
    let (runs, preds) = hand_made();
    let t = evaluate(&runs, &preds);
    assert_eq!(t.groups.len(), 2);
    let vllm = t.groups.iter().find(|g| g.engine == "vllm").unwrap();
    assert_eq!((vllm.gpu.as_str(), vllm.model.as_str(), vllm.rows, vllm.failed), ("h100_sxm", "Qwen/Qwen3-32B", 5, 1));
    // TTFT errors +10, −20, +30, +40 %: |e| sorted 10, 20, 30, 40.
    let ttft = vllm.ttft.unwrap();
    assert_eq!((ttft.median_abs_pct, ttft.bias_pct), (25.0, 20.0));
    assert!((ttft.p90_abs_pct - 37.0).abs() < 1e-9, "{}", ttft.p90_abs_pct);
    // TPOT errors +5, −10, +20, 0 %.
    let tpot = vllm.tpot.unwrap();
    assert_eq!((tpot.median_abs_pct, tpot.bias_pct), (7.5, 2.5));
    assert!((tpot.p90_abs_pct - 17.0).abs() < 1e-9, "{}", tpot.p90_abs_pct);
    // Overall per engine, sorted by name; the failure is listed with its reason.
    assert_eq!(
        t.engines.iter().map(|g| (g.engine.as_str(), g.gpu.as_str(), g.rows)).collect::<Vec<_>>(),
        [("sglang", "all", 1), ("vllm", "all", 5)]
    );
    assert_eq!(t.engines[0].ttft.unwrap().bias_pct, -50.0);
    assert_eq!(t.failures, [("r4".to_string(), "out of memory".to_string())]);
}

#[test]
fn quantiles_interpolate_between_neighbours() {
    // Fails if the index is rounded instead of interpolated.
    assert_eq!(table::quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
    assert_eq!(table::quantile(&[1.0, 2.0, 3.0], 0.5), 2.0);
    assert_eq!(table::quantile(&[5.0], 0.9), 5.0);
    assert!(table::quantile(&[], 0.5).is_nan());
    assert_eq!(table::error_pct(90.0, 100.0), -10.0);
}

#[test]
fn the_text_table_is_markdown_with_one_line_per_group_and_engine() {
    let (runs, preds) = hand_made();
    let text = render_text(&evaluate(&runs, &preds));
    assert!(text.contains("| vllm   | h100_sxm | Qwen/Qwen3-32B |    5 |      1 |      25.0 % |"), "{text}");
    assert!(text.contains("| sglang | all      | all            |    1 |      0 |"), "{text}");
    assert!(text.contains("1 run(s) could not be simulated:\n  r4: out of memory"), "{text}");
}

#[test]
fn a_run_whose_tpot_falls_as_concurrency_rises_is_left_out_of_the_fit() {
    // One series at 16, 32 (twice: averaged to 12 ms), 64 and 512 requests, and one other
    // series that must not be compared with it. 64 requests at 9 ms is within 30 % of 12 ms
    // (kept); 512 at 4 ms is 56 % below 9 ms (left out); the other series' 3 ms at 8 requests
    // has no lower point. Fails if the comparison is flipped (64 → 512 would pass and 16 → 32
    // be flagged), if series are not told apart by lengths, or if the limit is read as a
    // ratio of the lower run (4 < 0.3 × 9 is false).
    let row =
        |osl: u32, c: u32, tpot: f64| format!("r{osl}_{c}_{tpot},vllm,0.12.0,Qwen/Qwen3-32B,h100_sxm,,1024,{osl},{c},2,,1,1,100,{tpot}");
    let rows = [row(128, 16, 10.0), row(128, 32, 11.0), row(128, 32, 13.0), row(128, 64, 9.0), row(128, 512, 4.0), row(512, 8, 3.0)];
    let refs: Vec<&str> = rows.iter().map(String::as_str).collect();
    let runs = read(&csv(&refs)).unwrap();
    let out = calibrator::inconsistent_runs(&runs);
    assert_eq!(out.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![4], "{out:?}");
    assert!(out[0].1.contains("at 512 requests") && out[0].1.contains("9.00 ms at 64"), "{}", out[0].1);
}

/// gpt-oss-120b rows of the training file's shape (engine, version, model, GPU, precision and
/// lengths fixed): `run(id, concurrency, tp, attention_dp, moe_tp, moe_ep, ttft, tpot)`.
fn oss(id: &str, c: u32, layout: [u32; 4], ttft: &str, tpot: &str) -> String {
    let [tp, dp, mtp, ep] = layout;
    format!("{id},trtllm,1.2.0rc2,openai/gpt-oss-120b,b200_sxm,fp4,1024,1024,{c},{tp},{dp},{mtp},{ep},{ttft},{tpot}")
}

fn read_rows(rows: &[String]) -> Vec<MeasuredRun> {
    read(&csv(&rows.iter().map(String::as_str).collect::<Vec<_>>())).unwrap()
}

#[test]
fn an_id_names_its_tp_and_ep_in_every_form_of_the_training_file() {
    // Fails if the `0` of `tp2_0` (the source's 2.0) is not skipped (EP would be lost), if
    // `epnone` is not EP 1, or if the first `tp` token counts instead of the last.
    use measured::{id_layout, IdLayout};
    assert_eq!(
        id_layout("2026_04_06_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_8192x1024_c16_tp4_ep4_926"),
        Some(IdLayout { tp: 4, ep: Some(4) })
    );
    assert_eq!(
        id_layout("2026_03_25_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp2_0_ep2_0_1009"),
        Some(IdLayout { tp: 2, ep: Some(2) })
    );
    assert_eq!(
        id_layout("qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_trtllm_agg_4000x1000_c_tp2_epnone_1"),
        Some(IdLayout { tp: 2, ep: Some(1) })
    );
    assert_eq!(id_layout("tp8_model_tp2_x"), Some(IdLayout { tp: 2, ep: None }));
    assert_eq!(id_layout("row 3"), None);
    assert_eq!(id_layout("a_tpx_ep2"), None);
}

#[test]
fn an_moe_layout_must_cover_its_gpus_and_a_dense_one_is_not_asked() {
    // gpt-oss on 4 GPUs with experts over moe_tp 2 × moe_ep 1 (2 GPUs): the mapping reads MoE
    // DP 2, which these benchmarks never run. Attention DP 4 × TP 1 with EP 4 covers 4 GPUs.
    // Fails if the GPUs leave out attention DP (the DP row is dropped) or if dense models are
    // checked (Qwen's MoE columns mean nothing).
    let rows = [
        oss("bad", 8, [4, 1, 2, 1], "100", "10"),
        oss("dp", 8, [1, 4, 1, 4], "100", "10"),
        "dense,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,2,2,150,18".to_string(),
    ];
    let runs = read_rows(&rows);
    assert_eq!(runs[0].target.parallel.moe_dp, 2, "the mapping accepts it");
    let why = hygiene::layout_contradiction(&runs[0], true).unwrap();
    assert_eq!(why, "moe_tp 2 × moe_ep 1 = 2 is not its 4 GPUs (tp 4 × attention_dp 1)");
    assert_eq!(hygiene::layout_contradiction(&runs[1], true), None);
    assert_eq!(hygiene::layout_contradiction(&runs[2], false), None);
    let out = hygiene::screen(runs, &Resolver::default(), |_| None);
    assert_eq!(out.kept.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["dp", "dense"]);
    assert_eq!((out.dropped[0].id.as_str(), out.dropped[0].reason), ("bad", hygiene::DropReason::Layout));
}

#[test]
fn a_blank_moe_column_is_read_from_the_other_and_the_gpus() {
    // gpt-oss on 8 GPUs: both blank is TP over the experts (moe_tp 8, moe_ep 1), the engines'
    // layout without expert parallelism; moe_ep 8 alone is moe_tp 1; moe_tp 2 alone (or
    // moe_ep 0) is moe_ep 4; with attention DP 8 × TP 1 and moe_ep 8, moe_tp 1. A dense
    // model's blanks stay 1; both blank under an id naming `_tp8_ep8_` is moe_ep 8, and under
    // `_tp8_epnone_` TP over the experts. Fails if blanks read as 1 on a MoE model (the first run
    // is then dropped as covering one GPU of 8), if one column is not taken from the other, or
    // if the id's EP is not read (that run is then dropped for disagreeing with its id). An id
    // EP that cannot be the run's (`ep0`; `ep8` on 4 GPUs) is not read into the blank columns:
    // TP over the experts, then dropped for disagreeing with the id (mutation tried: drop the
    // `filter` on the id's EP, and the `ep8` row is an error blaming `moe_tp`, the `ep0` row
    // reads moe_ep 0).
    // Distinct measurements, so that no two rows read as one run under two layouts.
    let blank = |id: &str, tp: u32, dp: &str, mtp: &str, ep: &str| {
        format!("{id},vllm,0.15.1,openai/gpt-oss-120b,b200_sxm,fp4,1024,1024,8,{tp},{dp},{mtp},{ep},{},10", 100 + id.len())
    };
    let rows = [
        blank("both", 8, "", "", ""),
        blank("ep_only", 8, "", "", "8"),
        blank("tp_and_zero", 8, "", "2", "0"),
        blank("attention_dp", 1, "8", "", "8"),
        "dense,vllm,,Qwen/Qwen3-32B,h100_sxm,,1024,128,8,2,,,,150,18".to_string(),
        blank("oss_c8_tp8_ep8_7", 8, "", "", ""),
        blank("oss_c8_tp8_epnone_7", 8, "", "", ""),
        blank("oss_c8_tp8_ep0_7", 8, "", "", ""),
        blank("oss_c8_tp4_ep8_7", 4, "", "", ""),
    ];
    let runs = read_rows(&rows);
    let layouts: Vec<(u32, u32)> = runs.iter().map(|r| (r.moe_tp, r.moe_ep)).collect();
    assert_eq!(layouts, [(8, 1), (1, 8), (2, 4), (1, 8), (1, 1), (1, 8), (8, 1), (8, 1), (4, 1)]);
    let p = runs[0].target.parallel;
    assert_eq!((p.num_devices, p.tp, p.moe_tp, p.ep), (8, 8, 8, 1));
    let out = hygiene::screen(runs, &Resolver::default(), |_| None);
    let dropped: Vec<(&str, hygiene::DropReason)> = out.dropped.iter().map(|d| (d.id.as_str(), d.reason)).collect();
    assert_eq!(dropped, [("oss_c8_tp8_ep0_7", hygiene::DropReason::IdLayout), ("oss_c8_tp4_ep8_7", hygiene::DropReason::IdLayout)]);
}

#[test]
fn a_layout_that_disagrees_with_its_id_is_dropped() {
    // The source's H200 row `…_tp4_ep4_926` listed as tp 16, moe_tp 4, moe_ep 4 (consistent in
    // itself, wrong against its id); an attention-DP row names its GPUs (DP 4) in `tp4`; an
    // `epnone` gpt-oss row with moe_ep 2; a dense `epnone` row with moe_ep 0. Fails if the id's
    // TP is compared with the `tp` column instead of the GPUs (the DP row is dropped), if
    // `epnone` is not read as EP 1 (the third row is kept), or if dense rows' EP is compared.
    let rows = [
        oss("x_c16_tp4_ep4_926", 16, [16, 1, 4, 4], "100", "10"),
        oss("x_c32_tp4_ep1_296", 32, [1, 4, 4, 1], "100", "10"),
        oss("x_c320_tp4_epnone_4", 320, [4, 1, 2, 2], "100", "10"),
        "q_c_tp2_epnone_1,trtllm,,Qwen/Qwen3-32B,h100_sxm,fp8,4000,1000,64,2,,1,0,651,19".to_string(),
        "q_c_tp2_ep4_1,trtllm,,Qwen/Qwen3-32B,h100_sxm,fp8,4000,1000,64,2,,1,0,651,19.5".to_string(),
    ];
    let out = hygiene::screen(read_rows(&rows), &Resolver::default(), |_| None);
    assert_eq!(out.kept.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["x_c32_tp4_ep1_296", "q_c_tp2_epnone_1", "q_c_tp2_ep4_1"]);
    let why: Vec<(&str, &str)> = out.dropped.iter().map(|d| (d.id.as_str(), d.why.as_str())).collect();
    assert_eq!(
        why,
        [
            ("x_c16_tp4_ep4_926", "its id names tp 4 but the row runs 16 GPUs (tp 16 × attention_dp 1)"),
            ("x_c320_tp4_epnone_4", "its id names ep 1 but the row has moe_ep 2"),
        ]
    );
    assert!(out.dropped.iter().all(|d| d.reason == hygiene::DropReason::IdLayout));
}

#[test]
fn a_measurement_exported_twice_keeps_one_run_and_one_under_two_layouts_keeps_none() {
    // The training file's repeated exports differ in the last digit of TPOT (…267 and …269).
    // Fails if measurements are compared exactly (the repeat is kept), if the point leaves out
    // the concurrency (the run at 128 requests is taken for a repeat), or if the conflicting
    // pair keeps one of its runs.
    let rows = [
        oss("a_tp2_0_ep2_0_1009", 256, [1, 2, 1, 2], "280.28394545071933", "11.052209836596267"),
        oss("b_tp2_ep2_1741", 256, [1, 2, 1, 2], "280.28394545071933", "11.052209836596269"),
        oss("c_tp2_ep2_7", 128, [1, 2, 1, 2], "280.28394545071933", "11.052209836596267"),
        oss("d_tp4_ep4_1", 64, [1, 4, 1, 4], "194.05", "6.42"),
        oss("e", 64, [4, 1, 4, 1], "194.05", "6.42"),
    ];
    let runs = read_rows(&rows);
    let repeated = hygiene::repeated_measurements(&runs);
    let reasons: Vec<(usize, hygiene::DropReason)> = repeated.iter().map(|(i, r, _)| (*i, *r)).collect();
    use hygiene::DropReason::{ConflictingLayouts, Duplicate};
    assert_eq!(reasons, [(1, Duplicate), (3, ConflictingLayouts), (4, ConflictingLayouts)]);
    assert_eq!(repeated[0].2, "the same measurement as a_tp2_0_ep2_0_1009");
    assert!(
        repeated[1].2.contains("d_tp4_ep4_1 (4 GPUs, tp 1, ep 4, moe_tp 1, fp4); e (4 GPUs, tp 4, ep 1, moe_tp 4, fp4)"),
        "{}",
        repeated[1].2
    );
}

#[test]
fn of_one_measurement_under_two_layouts_the_run_whose_id_agrees_is_kept() {
    // The source's pair `…_tp4_0_ep4_0_1007` (DP 4, EP 4: right) and `…_tp4_ep4_1904` (DP 16,
    // moe_tp 4: TP × EP GPUs). The id check runs first, so the pair is no longer a conflict.
    // Fails if the repeated-measurement check runs before the id check (both are dropped).
    let rows = [
        oss("x_c64_tp4_0_ep4_0_1007", 64, [1, 4, 1, 4], "194.0538869210286", "6.423807455536409"),
        oss("x_c64_tp4_ep4_1904", 64, [1, 16, 4, 4], "194.0538869210286", "6.423807455536409"),
    ];
    let out = hygiene::screen(read_rows(&rows), &Resolver::default(), |_| None);
    assert_eq!(out.kept.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["x_c64_tp4_0_ep4_0_1007"]);
    assert_eq!(out.dropped.iter().map(|d| d.reason).collect::<Vec<_>>(), [hygiene::DropReason::IdLayout]);
    let text = hygiene::render_dropped(&out.dropped, 2, 0);
    assert_eq!(
        text,
        "Dropped 1 of 2 measured runs: 1 whose layout disagrees with the TP/EP their id names.\n  … and 1 more (see --output json)\n"
    );
}
