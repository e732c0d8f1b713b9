//! The serving engines as they run (issue 22): every waiting request the budget fits is
//! admitted, so TPOT grows with the load; a client concurrency the KV pool cannot hold at once
//! is queued or preempted as the engine does, never out of memory; front-end profile fields are
//! checked by name.

use super::util::{phase, run_json, usage_error};

/// The row of a one-batch run: `--batch-range C C` on one layout.
fn row(args: &[&str]) -> serde_json::Value {
    let v = run_json(args);
    let rows = phase(&v, 0, "aggregated")["rows"].as_array().expect("rows").clone();
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0].clone()
}

#[test]
fn tpot_grows_with_the_load_under_vllm() {
    // Llama-3.1-8B on one H100, 1024/128, a benchmark client of 10 C requests at C in flight.
    // With one new request per step (the profile until issue 22) TPOT stopped at 35.9 / 37.1 ms
    // from C = 128 on (fails if the admission limit comes back: TPOT(512) < 1.5 × TPOT(128)).
    let tpot = |c: u32| {
        let (c_s, n) = (c.to_string(), (10 * c).to_string());
        let args = [
            "meta-llama/Meta-Llama-3.1-8B",
            "--device",
            "H100_SXM",
            "--num-devices",
            "1",
            "--tp-sizes",
            "1",
            "--batch-range",
            &c_s,
            &c_s,
            "--input-length",
            "1024",
            "--output-length",
            "128",
            "--quantize-linear-action",
            "DISABLED",
            "--quantize-attention-action",
            "DISABLED",
            "--serving-engine",
            "vllm",
            "--arrival",
            "closed",
            "--num-requests",
            &n,
            "-q",
        ];
        row(&args)["tpot_inter_token_ms"].as_f64().unwrap_or_else(|| panic!("no TPOT at {c}"))
    };
    let t: Vec<f64> = [64, 128, 256, 512].map(tpot).to_vec();
    assert!(t.windows(2).all(|w| w[1] >= w[0]), "TPOT must not fall as the load grows: {t:?}");
    assert!(t[3] >= 1.5 * t[1], "TPOT(512) {} < 1.5 × TPOT(128) {}", t[3], t[1]);
}

#[test]
fn a_concurrency_the_kv_pool_cannot_hold_runs_under_the_engines_and_is_out_of_memory_only_under_msmodeling() {
    // Qwen3-32B on two H100s at TP 2, 4096-token prompts, 96 in flight: ~400k tokens of KV
    // against a pool of ~280k. vLLM preempts, SGLang retracts, TensorRT-LLM holds requests
    // back: each reports latencies. The original tool's policy calls it out of memory.
    // Fails if `kv_oversubscribed` is checked under every policy (memory_oom under vllm).
    let args = |engine: &'static str| {
        vec![
            "Qwen/Qwen3-32B",
            "--device",
            "H100_SXM",
            "--num-devices",
            "2",
            "--tp-sizes",
            "2",
            "--batch-range",
            "96",
            "96",
            "--input-length",
            "4096",
            "--output-length",
            "128",
            "--quantize-linear-action",
            "DISABLED",
            "--serving-engine",
            engine,
            "--arrival",
            "closed",
            "--num-requests",
            "192",
            "-q",
        ]
    };
    for engine in ["vllm", "sglang", "trtllm"] {
        let r = row(&args(engine));
        assert!(r["stop_reason"].is_null() && r["ttft_ms"].as_f64().is_some_and(|t| t > 0.0), "{engine}: {r}");
        assert!(r["sim"]["kv_peak_utilization"].as_f64().unwrap() > 0.9, "{engine}: the pool is full: {r}");
    }
    let r = row(&args("msmodeling"));
    assert_eq!(r["stop_reason"], "memory_oom", "{r}");
}

#[test]
fn a_model_with_per_sequence_state_runs_what_fits_and_queues_the_rest() {
    // Qwen3.5-35B-A3B in bf16 on one H100 leaves about 2.5 GiB beside its weights: its
    // linear-attention states and KV hold about 11 running requests of 1,056 tokens, not the
    // clients' 512. vLLM queues the rest; the row runs with a running cap below 512. Mutation:
    // size the pool for all 512 states (`state_held_seqs` returning `seqs`) and it is out of
    // memory.
    let args = "Qwen/Qwen3.5-35B-A3B --device H100_SXM --tp-sizes 1 --batch-range 512 512 --input-length 1024 \
                --output-length 64 --quantize-linear-action DISABLED --serving-engine vllm --arrival closed \
                --num-requests 600 -q";
    let r = row(&args.split_whitespace().collect::<Vec<_>>());
    assert!(r["stop_reason"].is_null(), "{r}");
    let cap = r["max_num_seqs"].as_u64().unwrap();
    assert!((2..64).contains(&cap), "running cap {cap}: {r}");
}

#[test]
fn the_batch_search_of_a_model_with_state_is_bounded_by_the_states_it_runs() {
    // Without --batch-range the search stops at the prompts the KV pool holds at once. Sized
    // for vLLM's default 1,024 running sequences, Qwen3.5-27B's pool (151 MB of linear-attention
    // state a sequence) holds no prompt on a B200; sized for what it runs, it holds over a
    // hundred 2,048-token prompts. Mutation: bound by the pool at 1,024 sequences and the search
    // ends at batch 1.
    let args = "Qwen/Qwen3.5-27B --device B200 --tp-sizes 1 --input-length 2048 --output-length 256 \
                --ttft-limits 2000 --tpot-limits 50 --serving-engine vllm -q";
    let v = run_json(&args.split_whitespace().collect::<Vec<_>>());
    let best = &phase(&v, 0, "aggregated")["best"][0];
    let batch = best["batch_size"].as_u64().unwrap();
    assert!(batch >= 64, "best batch {batch}: {best}");
}

#[test]
fn a_front_end_field_out_of_its_bounds_is_a_usage_error_naming_it() {
    // 50 ms a request, 1 ms a token: a profile beyond them is refused (exit 2), naming the field.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vllm.yaml");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/vllm.yaml")).unwrap();
    std::fs::write(&path, text.replace("frontend_output_token_us: 25.0", "frontend_output_token_us: 2500.0")).unwrap();
    let args = ["Qwen/Qwen3-8B", "--device", "H100_SXM", "--input-length", "100", "--output-length", "10"];
    let p = path.to_str().unwrap();
    usage_error(&[&args[..], &["--calibration", p]].concat(), &["frontend_output_token_us", "2500", "1000"]);
}
