//! Priced steps against real GPUs: Llama-3.1-8B steps (a plain PyTorch decoder, bf16, CUDA
//! graphs) timed on one H100 SXM and one H200 SXM (tests/fixtures/silicon), priced by `price`
//! from the kernel tables `scripts/profile_kernels.py` measured on the same GPUs
//! (profiles/torch-kernels) and from the built-in vLLM tables. docs/validation.md reads the
//! same files.

use super::util::cmd;
use serde_json::Value;
use std::path::PathBuf;

fn repo(p: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(p).display().to_string()
}

/// `price meta-llama/Llama-3.1-8B` of one step under vllm, from the torch tables when `torch`.
fn price(device: &str, step: &[&str], torch: bool) -> Value {
    let mut args = vec!["price", "meta-llama/Llama-3.1-8B", "--device", device, "--serving-engine", "vllm"];
    args.extend_from_slice(step);
    let db = repo("profiles/torch-kernels");
    if torch {
        args.extend(["--performance-model", "profiling", "--profiling-database-path", &db]);
    }
    args.extend(["--output", "json"]);
    let out = cmd().args(&args).assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("price --output json is JSON")
}

/// (batch, length, measured ms) of the graph-timed rows of a silicon CSV
/// (`model,layers_built,batch,context|prompt,ms_median,…,graph,…`).
fn measured(system: &str, file: &str) -> Vec<(u32, u32, f64)> {
    let text = std::fs::read_to_string(repo(&format!("tests/fixtures/silicon/{system}/{file}"))).unwrap();
    let rows: Vec<(u32, u32, f64)> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[6] == "yes" && !f[4].is_empty())
        .map(|f| (f[2].parse().unwrap(), f[3].parse().unwrap(), f[4].parse().unwrap()))
        .collect();
    assert!(rows.len() >= 5, "{system}/{file}: {rows:?}");
    rows
}

fn ops_ms(v: &Value, pick: impl Fn(&Value) -> bool) -> f64 {
    v["operators"].as_array().unwrap().iter().filter(|o| pick(o)).map(|o| o["ms"].as_f64().unwrap()).sum()
}

#[test]
fn the_torch_tables_price_the_same_gpus_kernels_of_a_decode_step() {
    // The H100's profiled eager decode step (32 × 1 token at 2,048, kernels.csv): FlashAttention
    // 3.511 ms, cuBLAS GEMMs (nvjet kernels and their split-K reduction) summed below. The
    // tables were measured on that GPU by the same torch: each family within 6 %.
    // Mutation (tried): price decode attention from the context-attention table: 116 ms.
    let text = std::fs::read_to_string(repo("tests/fixtures/silicon/h100_sxm/kernels.csv")).unwrap();
    let (mut flash, mut gemm) = (0.0, 0.0);
    for line in text.lines().skip(1) {
        let us: f64 = line.rsplit(',').next().unwrap().parse().unwrap();
        if line.contains("flash_fwd") {
            flash += us / 1e3;
        } else if line.contains("nvjet") || line.contains("splitKreduce") {
            gemm += us / 1e3;
        }
    }
    let v = price("H100_SXM", &["--decode", "32x2048"], true);
    let attention = ops_ms(&v, |o| o["kind"] == "attention");
    let gemms = ops_ms(&v, |o| o["kind"] == "gemm");
    assert!((attention / flash - 1.0).abs() < 0.06, "attention priced {attention} ms, measured {flash} ms");
    assert!((gemms / gemm - 1.0).abs() < 0.06, "GEMMs priced {gemms} ms, measured {gemm} ms");
    let sources: Vec<&str> =
        v["operators"].as_array().unwrap().iter().filter(|o| o["kind"] == "attention").map(|o| o["source"].as_str().unwrap()).collect();
    assert_eq!(sources, ["silicon"], "attention at a measured shape is a measured point");
}

/// Every graph-timed step of `file` that `keep(batch, length)` selects, on both GPUs, priced
/// under `flag` (`--decode` or `--prefill`): (device, step, priced / measured).
fn ratios(file: &str, flag: &str, keep: impl Fn(u32, u32) -> bool, torch: bool) -> Vec<(&'static str, String, f64)> {
    let mut out = Vec::new();
    for (system, device) in [("h100_sxm", "H100_SXM"), ("h200_sxm", "H200_SXM")] {
        for (b, l, ms) in measured(system, file).into_iter().filter(|&(b, l, _)| keep(b, l)) {
            let step = format!("{b}x{l}");
            let priced = price(device, &[flag, &step], torch)["device_ms"].as_f64().unwrap();
            out.push((device, step, priced / ms));
        }
    }
    out
}

/// Decode steps of at most 8 sequences and 16,384 cached tokens: they read little but the weights.
fn weight_bound(b: u32, l: u32) -> bool {
    b <= 8 && b * l <= 16_384
}

#[test]
fn weight_bound_decode_steps_priced_from_the_torch_tables_match_the_gpu() {
    // Priced from the same GPU's torch tables each weight-bound decode step is within
    // 0.88–1.06 of the timed step on both GPUs: below 1 by the torch decoder's unfused
    // element-wise kernels, above it at one sequence by the tables' m = 1 GEMM rows, slower
    // than the same product timed back to back (docs/validation.md). Mutation (tried): price decode attention from the
    // context-attention table: the H100's 1 × 512 step comes out at 1.080.
    for (device, step, ratio) in ratios("decode.csv", "--decode", weight_bound, true) {
        assert!((0.88..=1.06).contains(&ratio), "{device} decode {step}: priced / measured {ratio:.3}");
    }
}

#[test]
fn the_built_in_tables_price_real_steps_inside_the_acceptance_ranges() {
    // Issue 22's acceptance for the shipped vLLM tables: weight-bound decode steps within
    // 0.80–1.02 of the GPU, prefills of at least 512 tokens within 0.70–1.05 (the timed
    // decoder's unfused element-wise kernels and the 700 W power cap make the GPU's steps
    // slower than an engine's). Mutation (tried): price decode attention from the
    // context-attention table: the H100's 8 × 512 step comes out at 1.245.
    for (device, step, ratio) in ratios("decode.csv", "--decode", weight_bound, false) {
        assert!((0.80..=1.02).contains(&ratio), "{device} decode {step}: priced / measured {ratio:.3}");
    }
    for (device, step, ratio) in ratios("prefill.csv", "--prefill", |_, p| p >= 512, false) {
        assert!((0.70..=1.05).contains(&ratio), "{device} prefill {step}: priced / measured {ratio:.3}");
    }
}

/// Qwen3-32B-FP8's GEMMs in one decode step of `batch` sequences, from the H200's torch tables:
/// (name, ms per call, source).
fn block_fp8_gemms(batch: u32) -> Vec<(String, f64, String)> {
    let db = repo("profiles/torch-kernels");
    let step = format!("{batch}x2048");
    let args = ["price", "Qwen/Qwen3-32B-FP8", "--device", "H200_SXM", "--tp", "1", "--decode", &step];
    let tables = ["--performance-model", "profiling", "--profiling-database-path", &db, "--output", "json"];
    let out = cmd().args(args).args(tables).assert().success().get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let gemm = |o: &&Value| o["kind"] == "gemm";
    v["operators"]
        .as_array()
        .unwrap()
        .iter()
        .filter(gemm)
        .map(|o| {
            let per_call = o["ms"].as_f64().unwrap() / o["count"].as_f64().unwrap();
            (o["name"].as_str().unwrap().to_string(), per_call, o["source"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn the_h200_torch_tables_price_block_scaled_fp8_from_their_rows() {
    // The H200's table holds block-scaled FP8 rows for m = 4, 8, 12 … (cuBLAS refused the other
    // m): o_proj of Qwen3-32B at TP 1 is m × 8,192 × 5,120 (M × K × N), measured at m = 4 in 0.038672 ms
    // (gemm_perf.parquet). One sequence carries that row's utilisation down: the same weights
    // read, so within 1 % of it. Mutation (tried): the reader skips torch's fp8_block rows as it
    // skips vLLM's eager ones (EAGER_GEMMS): o_proj at m = 4 comes out "extrapolated".
    let o_proj = |rows: Vec<(String, f64, String)>| rows.into_iter().find(|r| r.0 == "o_proj").unwrap();
    let (_, ms, source) = o_proj(block_fp8_gemms(4));
    assert_eq!(source, "silicon");
    assert!((ms / 0.038672 - 1.0).abs() < 1e-4, "o_proj at m = 4: {ms} ms");
    let (_, one, source) = o_proj(block_fp8_gemms(1));
    assert_eq!(source, "extrapolated");
    assert!((one / ms - 1.0).abs() < 0.01, "o_proj at m = 1: {one} ms against {ms} at m = 4");
}

/// The mix probe of `system` (`power_mix.csv`): (GEMMs' share of the time, the mix's time over
/// its burst time), the burst row first.
fn power_mix(system: &str) -> Vec<(f64, f64)> {
    let text = std::fs::read_to_string(repo(&format!("tests/fixtures/silicon/{system}/power_mix.csv"))).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split(',').collect()).collect();
    let num = |s: &str| s.parse::<f64>().ok();
    let (burst_decode, burst_gemm) = (num(rows[0][3]).unwrap(), num(rows[0][4]).unwrap());
    rows[1..]
        .iter()
        .map(|r| {
            let share: f64 = r[2].parse().unwrap();
            let per_gemm = num(r[1]).unwrap_or(0.0);
            let slowdown = match (num(r[3]), num(r[4])) {
                (Some(d), Some(g)) => (g + per_gemm * d) / (burst_gemm + per_gemm * burst_decode),
                (Some(d), None) => d / burst_decode,
                (None, Some(g)) => g / burst_gemm,
                (None, None) => panic!("{system}: a mix row without times"),
            };
            (share, slowdown)
        })
        .collect()
}

#[test]
fn the_power_limits_reproduce_the_measured_mix_probe() {
    // Each device's `power_limit` against its own probe: the mix's tensor-core load is the
    // decode step's (as `price` gives it) and the GEMM graph's (1: the 8,192-row GEMM runs
    // faster than the profile's effective matrix rate, 817 TFLOP/s against 0.803 × 989)
    // weighted by their shares of the time; every mix within 1.5 % of its measured slowdown.
    // Mutation (tried): the H200's slowdown 0.26 → 0.22 puts its all-GEMM row 2.6 % short.
    let registry = throughput_optimizer::hardware::DeviceRegistry::builtin();
    for (system, device) in [("h100_sxm", "H100_SXM"), ("h200_sxm", "H200_SXM")] {
        let limit = registry.get(device).unwrap().power_limit.expect("a measured power limit");
        let decode = price(device, &["--decode", "32x2048"], false);
        let decode_load = decode["clocks"]["tensor_core_load"].as_f64().unwrap();
        assert!((0.04..0.10).contains(&decode_load), "{device}: decode load {decode_load}");
        for (share, measured) in power_mix(system) {
            let load = share + (1.0 - share) * decode_load;
            let modelled = limit.factor(load);
            assert!((modelled / measured - 1.0).abs() < 0.015, "{device} at GEMM share {share}: {modelled:.4} against {measured:.4}");
        }
    }
}

#[test]
fn a_prefill_is_priced_at_sustained_clocks_unless_asked_for_burst() {
    // `price` prices a step repeated back to back: on a power-limited device a prefill's
    // operators all take the slowdown its load gives (H200, 2,048 tokens: about 1.16, against
    // the 1.13 the timed decoder's prefill measured, whose unfused element-wise kernels load
    // the tensor cores less); a weight-bound decode keeps its burst time.
    // Mutation (tried): scale only the GEMMs by the slowdown: the operators no longer sum to
    // device_ms times the ratio below.
    let sustained = price("H200_SXM", &["--prefill", "1x2048"], false);
    let burst = price("H200_SXM", &["--prefill", "1x2048", "--clocks", "burst"], false);
    let slowdown = sustained["clocks"]["slowdown"].as_f64().unwrap();
    assert!((1.12..1.20).contains(&slowdown), "prefill slowdown {slowdown}");
    assert_eq!(burst["clocks"]["mode"], "burst");
    let (s, b) = (sustained["device_ms"].as_f64().unwrap(), burst["device_ms"].as_f64().unwrap());
    assert!((s / b / slowdown - 1.0).abs() < 1e-9, "{s} ms sustained against {b} ms burst");
    for (so, bo) in sustained["operators"].as_array().unwrap().iter().zip(burst["operators"].as_array().unwrap()) {
        let ratio = so["ms"].as_f64().unwrap() / bo["ms"].as_f64().unwrap();
        assert!((ratio / slowdown - 1.0).abs() < 1e-9, "{}: {ratio}", so["name"]);
    }
    let decode = price("H200_SXM", &["--decode", "8x2048"], false);
    assert_eq!(decode["clocks"]["slowdown"].as_f64().unwrap(), 1.0, "a weight-bound decode step does not throttle");
    let b200 = price("B200", &["--prefill", "1x2048"], false);
    assert_eq!(b200["clocks"]["mode"], "unlimited", "no power limit measured for the B200");
}
