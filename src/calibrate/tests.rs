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
    let gpu = csv(&["a,vllm,,Qwen/Qwen3-32B,mi300x,,1024,128,8,2,,1,1,150,18"]);
    assert_eq!(
        read(&gpu).unwrap_err().to_string(),
        "runs.csv: row 1, field `gpu`: `mi300x` is not a known GPU: h100_sxm, h200_sxm, b200_sxm or a device profile name (see --list-devices)"
    );
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
