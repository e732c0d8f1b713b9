//! The raw command line, exactly as typed: clap parses it once into [`RawArgs`], and
//! [`super::plan`] validates it into a [`super::Plan`]. Value parsers here only check the
//! form of a single value (a number, a choice); rules that relate flags live in `plan`.

use clap::{ArgAction, Parser};
use std::path::PathBuf;

const LONG_ABOUT: &str = "\
Finds the deployment (TP / EP / MoE-DP / DP, batch size, mode) that gets the most tokens per \
second out of a set of accelerators under TTFT/TPOT limits. Every candidate is priced by a \
roofline cost model of the model's operators on a device profile; the analytic engine uses \
the closed-form serving formulas of the original tool.

Results come from modelling and are a planning reference: validate on the real serving stack \
before deciding.";

const AFTER_HELP: &str = "\
Examples:
  throughput-optimizer Qwen/Qwen3-32B --device TEST_DEVICE --num-devices 8 --input-length 3500 \\
      --output-length 1500 --compile --tpot-limits 50
  throughput-optimizer Qwen/Qwen3-32B --num-devices 8 --input-length 3500 --output-length 1500 \\
      --disagg --ttft-limits 2000 --tpot-limits 50
  throughput-optimizer deepseek-ai/DeepSeek-V3.1 --input-length 3500 --output-length 1500 \\
      --enable-optimize-prefill-decode-ratio --prefill-devices-per-instance 16 \\
      --decode-devices-per-instance 16 --ttft-limits 2000 --tpot-limits 50
  throughput-optimizer --list-devices
  throughput-optimizer --list-models
  throughput-optimizer calibrate --measured results.csv   (simulator vs measured benchmarks; calibrate --help)";

fn positive_u32(s: &str) -> Result<u32, String> {
    let v: i64 = s.trim().parse().map_err(|_| format!("`{s}` is not an integer"))?;
    if v <= 0 {
        return Err(format!("must be a positive integer, got {v}"));
    }
    u32::try_from(v).map_err(|_| format!("{v} is too large (at most {})", u32::MAX))
}

fn non_negative_u32(s: &str) -> Result<u32, String> {
    let v: i64 = s.trim().parse().map_err(|_| format!("`{s}` is not an integer"))?;
    if v < 0 {
        return Err(format!("must be ≥ 0, got {v}"));
    }
    u32::try_from(v).map_err(|_| format!("{v} is too large"))
}

fn finite_f64(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number"))?;
    if !v.is_finite() {
        return Err(format!("must be a finite number, got {s}"));
    }
    Ok(v)
}

/// A seed: a whole number in 0..=u64::MAX.
fn seed_u64(s: &str) -> Result<u64, String> {
    s.trim().parse().map_err(|_| format!("`{s}` is not a seed; give a whole number from 0 to {}", u64::MAX))
}

/// A latency limit in ms: a positive number or `inf`.
fn limit_ms(s: &str) -> Result<f64, String> {
    if s.trim().eq_ignore_ascii_case("inf") {
        return Ok(f64::INFINITY);
    }
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number of milliseconds or `inf`"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("must be a positive number of milliseconds or `inf`, got {s}"));
    }
    Ok(v)
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "throughput-optimizer",
    version,
    about = "Find the LLM-serving deployment with the most tokens/s under TTFT/TPOT limits.",
    long_about = LONG_ABOUT,
    after_help = "Every option, with units, defaults and examples: --help",
    after_long_help = AFTER_HELP,
    allow_negative_numbers = true
)]
pub struct RawArgs {
    /// Model: a built-in catalog id (see --list-models, case-insensitive), a directory with a
    /// config.json, a path to a config.json, or an id in the local Hugging Face cache.
    #[arg(value_name = "MODEL_ID")]
    pub model_id: Option<String>,
    /// The model, as a flag instead of the positional argument.
    #[arg(long = "model-id", alias = "model_id", value_name = "MODEL_ID")]
    pub model_id_flag: Option<String>,
    /// The command line these arguments were parsed from (empty when built in code); a
    /// scenario run reads it to let flags given next to `--scenario` override the file.
    #[arg(skip)]
    pub argv: Vec<std::ffi::OsString>,

    // ---- Core inputs ----
    /// Device profile(s): one or more names (see --list-devices). Several enable cross-hardware
    /// comparison; duplicates are dropped keeping order. [default: TEST_DEVICE]
    #[arg(long, visible_alias = "devices", num_args = 1.., value_name = "DEVICE", help_heading = "Core inputs")]
    pub device: Vec<String>,
    /// Total number of devices (world size) per device profile. [default: 1]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Core inputs")]
    pub num_devices: Option<u32>,
    /// Prompt length in tokens (1 to 100000000), or a length-distribution YAML file
    /// (`bins: [{min_tokens, max_tokens, weight}, …]`). Not needed with --arrival trace.
    #[arg(long, value_name = "TOKENS|FILE", help_heading = "Core inputs")]
    pub input_length: Option<String>,
    /// Generated tokens per request (1 to 100000000). Not needed with --arrival trace or a
    /// length distribution that has `output_bins`.
    #[arg(long, value_name = "TOKENS", help_heading = "Core inputs")]
    pub output_length: Option<String>,
    /// Use a length distribution for input lengths: the built-in one without a value, or a
    /// YAML file with the --input-length FILE format (an optional `output_bins` list sets
    /// output lengths too).
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "FILE", help_heading = "Core inputs")]
    pub length_distribution: Option<String>,
    /// Device memory kept back from the model, in GiB per device. [default: 10]
    #[arg(long, value_parser = finite_f64, value_name = "GIB", help_heading = "Core inputs")]
    pub reserved_memory_gb: Option<f64>,
    /// Share of each device's memory the serving engine may use, as vLLM's
    /// --gpu-memory-utilization sizes it (0 to 1); the rest is kept back. Replaces
    /// --reserved-memory-gb. [default: --reserved-memory-gb]
    #[arg(long, value_parser = finite_f64, value_name = "F", help_heading = "Core inputs")]
    pub gpu_memory_utilization: Option<f64>,

    // ---- Mode ----
    /// Disaggregated serving: a prefill search under --ttft-limits and/or a decode search under
    /// --tpot-limits, each phase on its own.
    #[arg(long, help_heading = "Mode")]
    pub disagg: bool,
    /// P/D instance-ratio planning: search prefill and decode instances separately, match
    /// their request rates, split --num-devices (if given) into P and D instances.
    #[arg(long, help_heading = "Mode")]
    pub enable_optimize_prefill_decode_ratio: bool,
    /// Aggregation: also search disaggregated (P/D) deployments on the same --num-devices
    /// (prefill and decode instances of every power-of-two size that fits), simulate the best
    /// one as a system, and report which serves more tokens/s per device under the SLO. Every
    /// P/D deployment joins the Pareto frontier. Costs about six more phase searches.
    #[arg(long, alias = "disagg-compare", help_heading = "Mode")]
    pub compare_disagg: bool,
    /// Devices per prefill instance (P/D ratio mode).
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Mode")]
    pub prefill_devices_per_instance: Option<u32>,
    /// Devices per decode instance (P/D ratio mode).
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Mode")]
    pub decode_devices_per_instance: Option<u32>,

    // ---- Quantization and compilation ----
    /// Quantization of all linear layers (routed experts included, lm_head never):
    /// DISABLED, W8A16_STATIC, W8A8_STATIC, W4A8_STATIC, W8A16_DYNAMIC, W8A8_DYNAMIC,
    /// W4A8_DYNAMIC, FP8, FP8_BLOCK, MXFP4, W4A16_MXFP4, W4A8_MXFP4_MXFP8, NVFP4, W4A16_INT4
    /// (case-insensitive); FP8 on a checkpoint stored in FP8 blocks is priced as stored
    /// (FP8_BLOCK). [default: the checkpoint's own precision on NVIDIA and AMD GPUs, W8A8_DYNAMIC
    /// elsewhere]
    #[arg(long, value_name = "ACTION", help_heading = "Quantization and compilation")]
    pub quantize_linear_action: Option<String>,
    /// Quantization of attention, dense-MLP and shared-expert linears, overriding
    /// --quantize-linear-action for them (same choices). [default: same as linear]
    #[arg(long, value_name = "ACTION", help_heading = "Quantization and compilation")]
    pub quantize_non_expert_linear_action: Option<String>,
    /// KV-cache quantization: DISABLED, INT8, FP8. [default: as the checkpoint stores it on
    /// NVIDIA and AMD GPUs when --quantize-linear-action is not given, DISABLED otherwise]
    #[arg(long, value_name = "ACTION", help_heading = "Quantization and compilation")]
    pub quantize_attention_action: Option<String>,
    /// MXFP4 scale group size (elements per E8M0 scale). [default: 32]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Quantization and compilation")]
    pub mxfp4_group_size: Option<u32>,
    /// Price the fused operator graph of a compiled model (fused norms, merged QKV and
    /// gate/up GEMMs, fused SwiGLU/RoPE): fewer kernels, less intermediate traffic.
    #[arg(long, help_heading = "Quantization and compilation")]
    pub compile: bool,
    /// Accepted for compatibility: graph breaks do not change the priced graph.
    #[arg(long, help_heading = "Quantization and compilation")]
    pub compile_allow_graph_break: bool,
    /// Extra fusions with --compile: enable_multistream, enable_sequence_parallel,
    /// enable_matmul_allreduce, enable_dispatch_ffn_combine.
    #[arg(long, num_args = 1.., value_name = "OPTION", help_heading = "Quantization and compilation")]
    pub compilation_config: Option<Vec<String>>,

    // ---- Search space ----
    /// TP sizes to search; without values: powers of two up to --num-devices. If none of
    /// --tp-sizes/--ep-sizes/--moe-dp-sizes is given, TP is searched over that default range.
    #[arg(long, num_args = 0.., value_parser = positive_u32, value_name = "N", help_heading = "Search space")]
    pub tp_sizes: Option<Vec<u32>>,
    /// EP sizes to search (MoE models); without values: powers of two. [default when absent:
    /// --num-devices]
    #[arg(long, num_args = 0.., value_parser = positive_u32, value_name = "N", help_heading = "Search space")]
    pub ep_sizes: Option<Vec<u32>>,
    /// MoE data-parallel sizes to search; without values: powers of two. [default when
    /// absent: 1]
    #[arg(long, num_args = 0.., value_parser = positive_u32, value_name = "N", help_heading = "Search space")]
    pub moe_dp_sizes: Option<Vec<u32>>,
    /// Decode context-parallel sizes (decode phases only; TP must be a multiple).
    /// [default when absent: 1]
    #[arg(long, num_args = 0.., value_parser = positive_u32, value_name = "N", help_heading = "Search space")]
    pub dcp_sizes: Option<Vec<u32>>,
    /// Pipeline-parallel sizes to search: the decoder layers split over PP stages, a replica
    /// of TP × PP devices; without values: powers of two up to --num-devices and the model's
    /// layers. [default when absent: 1]
    #[arg(long, num_args = 0.., value_parser = positive_u32, value_name = "N", help_heading = "Search space")]
    pub pp_sizes: Option<Vec<u32>>,
    /// Batch size per DP replica to search: `MAX` or `MIN MAX`. [default: 1 to unbounded,
    /// found by doubling from 512]
    #[arg(long, num_args = 1.., value_parser = positive_u32, value_name = "N", help_heading = "Search space")]
    pub batch_range: Option<Vec<u32>>,
    /// How the upper bound of the batch search is found: exponential or linear_exponential.
    /// [default: exponential]
    #[arg(long, value_name = "STRATEGY", help_heading = "Search space")]
    pub concurrency_search_strategy: Option<String>,
    /// Warn when more parallel combinations than this are searched (0 = never). [default: 100]
    #[arg(long, value_name = "N", help_heading = "Search space")]
    pub max_search_combinations: Option<u64>,
    /// Shard shared experts with TP (adds an all-reduce) instead of replicating them.
    #[arg(long, help_heading = "Search space")]
    pub enable_shared_expert_tp: bool,
    /// Shard the word embedding over TP: col or row. [default: replicated]
    #[arg(long, value_name = "col|row", help_heading = "Search space")]
    pub word_embedding_tp: Option<String>,

    // ---- SLO and serving ----
    /// TTFT limit in ms (positive number or `inf`). [default: none]
    #[arg(long, visible_alias = "ttft-limit", value_parser = limit_ms, allow_hyphen_values = true, value_name = "MS", help_heading = "SLO and serving")]
    pub ttft_limits: Option<f64>,
    /// TPOT limit in ms (positive number or `inf`). [default: none]
    #[arg(long, visible_alias = "tpot-limit", value_parser = limit_ms, allow_hyphen_values = true, value_name = "MS", help_heading = "SLO and serving")]
    pub tpot_limits: Option<f64>,
    /// Token budget of one prefill or mixed step per DP replica; prompts longer than it are
    /// prefilled in chunks. Several values run a chunk-budget sweep. [default: auto: 4×, then
    /// 2×, then 1× the input length on prefill OOM]
    #[arg(long, num_args = 1.., value_parser = positive_u32, value_name = "TOKENS", help_heading = "SLO and serving")]
    pub max_batched_tokens: Option<Vec<u32>>,
    /// Deprecated name of --max-batched-tokens.
    #[arg(long, num_args = 1.., value_parser = positive_u32, value_name = "TOKENS", hide = true)]
    pub max_prefill_tokens: Option<Vec<u32>>,
    /// Share of each prompt served from the prefix cache, in [0, 1). [default: 0]
    #[arg(long, value_parser = finite_f64, value_name = "RATE", help_heading = "SLO and serving")]
    pub prefix_cache_hit_rate: Option<f64>,
    /// Fixed serving overhead per forward in ms, added in disaggregation mode. [default: 0]
    #[arg(long, value_parser = finite_f64, value_name = "MS", help_heading = "SLO and serving")]
    pub serving_cost: Option<f64>,
    /// MTP draft tokens per decode step (0-9); several values are searched. Needs a model
    /// with MTP layers (DeepSeek-V3/R1/V3.1, Qwen3.5). [default: 0]
    #[arg(long, num_args = 1.., value_parser = non_negative_u32, value_name = "N", help_heading = "SLO and serving")]
    pub num_mtp_tokens: Option<Vec<u32>>,
    /// Acceptance rate of each MTP draft position, each in [0, 1].
    /// [default: 0.9 0.6 0.4 0.2]
    #[arg(long, visible_alias = "mtp-acceptance-rate", num_args = 1.., value_parser = finite_f64, value_name = "RATE", help_heading = "SLO and serving")]
    pub mtp_acceptance_rates: Option<Vec<f64>>,
    /// Block speculative decoding: dflash or dspark (exclusive with MTP).
    #[arg(long, value_name = "METHOD", help_heading = "SLO and serving")]
    pub speculative_method: Option<String>,
    /// Draft tokens per block (block = N + 1; 0 = the built-in block of 8). [default: 0]
    #[arg(long, value_parser = non_negative_u32, value_name = "N", help_heading = "SLO and serving")]
    pub num_speculative_tokens: Option<u32>,
    /// Mean accepted draft tokens per block. [default: 5.0]
    #[arg(long, value_parser = finite_f64, value_name = "TOKENS", help_heading = "SLO and serving")]
    pub acceptance_length: Option<f64>,
    /// Draft-model layers run per decode step. [default: 0]
    #[arg(long, value_parser = non_negative_u32, value_name = "N", help_heading = "SLO and serving")]
    pub num_draft_layers: Option<u32>,
    /// Draft model config (accepted for compatibility; the draft is priced as target layers).
    #[arg(long, value_name = "PATH", help_heading = "SLO and serving")]
    pub draft_model_config_path: Option<PathBuf>,
    /// DSpark Markov rank. [default: 256]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "SLO and serving")]
    pub dspark_markov_rank: Option<u32>,
    /// DSpark Markov head: vanilla, gated or rnn. [default: vanilla]
    #[arg(long, value_name = "HEAD", help_heading = "SLO and serving")]
    pub dspark_markov_head: Option<String>,
    /// Images per request (vision-language models). [default: 1 when an image size is given]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "SLO and serving")]
    pub image_batch_size: Option<u32>,
    /// Image height in pixels (vision-language models).
    #[arg(long, value_parser = positive_u32, value_name = "PIXELS", help_heading = "SLO and serving")]
    pub image_height: Option<u32>,
    /// Image width in pixels (vision-language models).
    #[arg(long, value_parser = positive_u32, value_name = "PIXELS", help_heading = "SLO and serving")]
    pub image_width: Option<u32>,
    /// KV-cache block size in tokens. [default: the serving engine's on NVIDIA GPUs (vLLM 16,
    /// 64 for MLA models; SGLang 1; TensorRT-LLM 32), else 128]
    #[arg(long, value_parser = positive_u32, value_name = "TOKENS", help_heading = "SLO and serving")]
    pub kv_block_size: Option<u32>,
    /// Which TPOT the SLO filter applies: inter-token = (finish − first token)/(O − 1), as
    /// serving benchmarks measure it, or amortized = E2E / O (the documented formula's).
    /// [default: inter-token for sim and compare, amortized for analytic]
    #[arg(long, value_name = "DEFINITION", help_heading = "SLO and serving")]
    pub tpot_definition: Option<String>,

    // ---- Simulator ----
    /// Request arrivals: closed (the candidate's concurrency kept in flight, steady state),
    /// burst (all requests at t=0, one pass), poisson, constant (fixed gaps), gamma (need
    /// --request-rate), or
    /// `trace FILE`: the tool's CSV or JSON Lines (arrival_s, input_tokens, output_tokens), an
    /// Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens) or Mooncake
    /// JSON Lines (timestamp, input_length, output_length, hash_ids), told apart by content.
    /// [default: closed]
    #[arg(long, num_args = 1..=2, value_name = "PROCESS [FILE]", help_heading = "Simulator")]
    pub arrival: Option<Vec<String>>,
    /// Multiply a trace's arrival times by X: below 1 replays it faster (0.5 = twice the
    /// request rate), above 1 slower. Only with --arrival trace. [default: 1]
    #[arg(long, value_parser = finite_f64, value_name = "X", help_heading = "Simulator")]
    pub trace_time_scale: Option<f64>,
    /// Spread fixed --input-length / --output-length uniformly over [(1 - R)·L, (1 + R)·L]
    /// per simulated request, as `vllm bench serve --random-range-ratio R` draws them (0 to
    /// below 1). [default: fixed lengths]
    #[arg(long, value_parser = finite_f64, value_name = "R", help_heading = "Simulator")]
    pub random_range_ratio: Option<f64>,
    /// Every request generates exactly --output-length tokens, as a benchmark client that sends
    /// `ignore_eos` gets them. [default: the serving engine's own benchmark client's default:
    /// vllm and trtllm honour end-of-sequence (outputs spread around the length, see the
    /// profile's `benchmark_client`), sglang ignores it]
    #[arg(long, help_heading = "Simulator")]
    pub ignore_eos: bool,
    /// Mean request rate for poisson/constant/gamma arrivals, requests per second over all
    /// replicas.
    #[arg(long, value_parser = finite_f64, value_name = "REQ/S", help_heading = "Simulator")]
    pub request_rate: Option<f64>,
    /// Gamma arrival shape: 1 = Poisson, below 1 = burstier. [default: 1]
    #[arg(long, value_parser = finite_f64, value_name = "SHAPE", help_heading = "Simulator")]
    pub burstiness: Option<f64>,
    /// Requests per open-loop simulation. With the closed loop: run as a serving benchmark
    /// does (`vllm bench serve --num-prompts N`): the concurrency starts at t = 0, a new request
    /// as each finishes until N were sent, statistics over all N. [default: 1000 open loop;
    /// closed loop: the steady state; a P/D verification: enough for four planned request
    /// lifetimes of arrivals, 600 to 20000]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Simulator")]
    pub num_requests: Option<u32>,
    /// Open loop: at most this many requests in flight (client side). [default: unlimited]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Simulator")]
    pub max_concurrency: Option<u32>,
    /// Running sequences per DP replica. In a simulated closed-loop or burst search it also
    /// bounds the batch sizes tried (more clients would only queue) unless --batch-range says
    /// otherwise. [default: the searched batch size; 256 with open-loop arrivals]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Simulator")]
    pub max_num_seqs: Option<u32>,
    /// Serving engine whose scheduler is simulated: vllm (vLLM V1: chunks cut to the remaining
    /// budget, no slack; without --max-batched-tokens / --max-num-seqs, vLLM's defaults: 8192
    /// tokens and 1024 sequences on GPUs of 70 GiB or more except A100, else 2048 and 256) or
    /// sglang (a prefill batch runs alone whenever one can be formed; conservative admission
    /// reserving running requests' outputs; defaults: chunked prefill size 2048 / 4096 / 8192 /
    /// 16384 tokens by GPU memory (<35, <60, <160 GiB, more), 2048 sequences), trtllm (in-flight
    /// batching, a request admitted only when its whole prompt and output fit the KV left: never
    /// a preemption; defaults max_num_tokens 8192, max_batch_size 2048; TensorRT-LLM's own default
    /// is --no-chunked-prefill) or msmodeling (decode-first with --token-budget-slack, auto
    /// budgets of 4×, 2×, 1× the prompt). ENGINE@VERSION (e.g. vllm@0.11) simulates that
    /// release's version-dependent defaults: overlapped scheduling, which vLLM runs from 0.14
    /// and TensorRT-LLM from 1.0 (without a version: the current release). [default: vllm on
    /// NVIDIA devices, msmodeling on the others]
    #[arg(long, value_name = "ENGINE[@VERSION]", help_heading = "Simulator")]
    pub serving_engine: Option<String>,
    /// Serving-engine execution profile and calibration: `none` prices steps with the device
    /// profile's datasheet efficiencies and the engine's default overheads; a YAML file (as
    /// `calibrate --fit --write` writes it) replaces its engine's built-in profile; repeatable,
    /// one file per engine. [default: the built-in calibrations of vllm, sglang and trtllm on
    /// H100_SXM, H200_SXM and B200, fitted on measured benchmarks]
    #[arg(long, value_name = "FILE|none", action = ArgAction::Append, help_heading = "Simulator")]
    pub calibration: Vec<String>,
    /// Share by which prefill chunks may overflow the token budget after the decodes
    /// (msmodeling's scheduler only). [default: 0.15]
    #[arg(long, value_parser = finite_f64, value_name = "SHARE", help_heading = "Simulator")]
    pub token_budget_slack: Option<f64>,
    /// Schedule whole prompts only (no chunked prefill).
    #[arg(long, help_heading = "Simulator")]
    pub no_chunked_prefill: bool,
    /// What the statistics cover: `steady` (closed loop: a settled window after warm-up; open
    /// loop: the middle 80 % of arrivals while the system is full) or `whole-run` (every
    /// request, rates from the first arrival to the last finish, as a benchmark client reports
    /// them; a closed loop needs --num-requests for it, and is measured so whenever it has
    /// them). [default: steady, or whole-run for a closed loop with --num-requests]
    #[arg(long, value_name = "SPAN", help_heading = "Simulator")]
    pub measure: Option<String>,
    /// Statistic the SLO filter applies to TTFT and TPOT: mean, p50, p90, p95, p99.
    /// [default: mean]
    #[arg(long, value_name = "STAT", help_heading = "Simulator")]
    pub slo_percentile: Option<String>,
    /// Requests share one of N cached prefixes (block-level prefix cache).
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Simulator")]
    pub prefix_groups: Option<u32>,
    /// Tokens of the shared prefix (with --prefix-groups).
    #[arg(long, value_parser = positive_u32, value_name = "TOKENS", help_heading = "Simulator")]
    pub prefix_length: Option<u32>,
    /// How simulated P/D systems route requests to instances: least-loaded or round-robin.
    /// [default: least-loaded]
    #[arg(long, value_name = "POLICY", help_heading = "Simulator")]
    pub pd_routing: Option<String>,
    // ---- Capacity planning ----
    /// Give every candidate row the highest request rate at which it still meets the SLO
    /// (`max_request_rate_within_slo`), found by simulating the same seeded arrivals at other
    /// rates (from an estimate of the boundary, bracketed, then narrowed to 5 %; at most 10
    /// simulations per layout), and chart the SLO statistic against the offered rate. Asking
    /// for it where it does not apply is an error. [default: on for open-loop arrivals
    /// (poisson, constant, gamma, a trace) in aggregated searches of the simulator]
    #[arg(long, help_heading = "Capacity planning", conflicts_with = "no_goodput")]
    pub goodput: bool,
    /// Skip the per-row goodput search that open-loop runs do by default (each layout then
    /// costs one simulation, at the offered rate).
    #[arg(long, help_heading = "Capacity planning")]
    pub no_goodput: bool,
    /// Size a deployment for this load: the fewest devices (up to --num-devices, in whole
    /// instances) and the layout that serve R requests/s within the SLO (Poisson arrivals
    /// unless --arrival says otherwise), checked by a simulation at R, with the headroom (the
    /// highest rate still within the SLO). Aggregated deployments; with --disagg P/D ones
    /// (prefill and decode instances), with --compare-disagg either.
    #[arg(long, value_parser = finite_f64, value_name = "REQ/S", help_heading = "Capacity planning")]
    pub target_request_rate: Option<f64>,
    /// Size a deployment for C concurrent clients (a closed loop of C requests over all
    /// instances), as --target-request-rate does for a rate.
    #[arg(long, value_parser = positive_u32, value_name = "C", help_heading = "Capacity planning")]
    pub target_concurrency: Option<u32>,
    /// Run a scenario file (a whole run in YAML); flags given alongside override its values.
    #[arg(long, value_name = "FILE", help_heading = "Simulator")]
    pub scenario: Option<PathBuf>,

    // ---- Capacity planning ----
    /// Price of one device for one hour, USD: a number for every device profile, or a YAML
    /// file (`.yaml`/`.yml`) mapping device profile names to prices (`H100_SXM: 2.5`). Every
    /// row then shows USD per million output tokens and per million tokens (prompt + output)
    /// of its whole deployment, and aggregation adds a cost frontier across the devices.
    #[arg(long, value_name = "USD|FILE", help_heading = "Capacity planning")]
    pub device_hour_cost: Option<String>,
    /// With --arrival trace: plan the instance count per WINDOW of the trace (a duration with
    /// its unit: 900s, 15m, 1h) for the best aggregated deployment, simulate the day with the
    /// count changing at window edges, and compare its instance-hours with a fleet sized for
    /// the peak window.
    #[arg(long, value_name = "WINDOW", help_heading = "Capacity planning")]
    pub plan_replicas: Option<String>,

    // ---- Engine and performance model ----
    /// Evaluation engine: sim (discrete-event simulation of the serving scheduler), analytic
    /// (the documented closed-form formulas) or compare (both per candidate, side by side).
    /// [default: sim]
    #[arg(long, value_name = "ENGINE", help_heading = "Engine")]
    pub engine: Option<String>,
    /// Per-operator model: analytic (the roofline alone) or profiling (kernel times from
    /// --profiling-database-path). [default: the built-in measured kernel tables where the
    /// device and serving engine have them, the roofline elsewhere]
    #[arg(long, value_name = "MODEL", help_heading = "Engine")]
    pub performance_model: Option<String>,
    /// Directory of measured operator timings (for --performance-model profiling).
    #[arg(long, visible_alias = "profiling-database", value_name = "DIR", help_heading = "Engine")]
    pub profiling_database_path: Option<PathBuf>,
    /// Write the simulated timeline of the best configuration as a Chrome trace (Perfetto,
    /// chrome://tracing): a track per instance, a span per engine step with its batch, requests
    /// as async spans, KV use as a counter (first 100000 steps and 20000 requests). One file
    /// per device profile.
    #[arg(long, visible_alias = "chrome-trace", value_name = "FILE", help_heading = "Engine")]
    pub chrome_trace_file: Option<PathBuf>,
    /// Write one CSV row per simulated request of the best configuration: arrival, queueing,
    /// first scheduled, first token and finish times (ms), input, cached and output tokens,
    /// preemptions, instance.
    #[arg(long, value_name = "FILE.csv", help_heading = "Engine")]
    pub requests_file: Option<PathBuf>,
    /// Write a Chrome trace of the best configuration's operators: one prefill forward and one
    /// decode step, each operator kind summed over layers.
    #[arg(long, value_name = "FILE", help_heading = "Engine")]
    pub operator_trace_file: Option<PathBuf>,
    /// Worker threads for the candidate search; results do not depend on it. [default: the
    /// cores available to the process]
    #[arg(long, short = 'j', value_parser = positive_u32, value_name = "N", help_heading = "Engine")]
    pub jobs: Option<u32>,
    /// Seed of every random stream (arrivals, lengths, MTP acceptance). [default: 0]
    #[arg(long, value_parser = seed_u64, value_name = "SEED", help_heading = "Engine")]
    pub seed: Option<u64>,

    /// Search only slice K of N of the candidate layouts (K from 1 to N, round-robin by
    /// candidate index) and write its JSON for `throughput-optimizer merge`. Needs
    /// --output json.
    #[arg(long, value_name = "K/N", help_heading = "Engine", conflicts_with = "interactive")]
    pub shard: Option<String>,

    // ---- Output ----
    /// Output format: table, json or csv. [default: table]
    #[arg(long, value_name = "FORMAT", help_heading = "Output")]
    pub output: Option<String>,
    /// Write the output to this file instead of stdout.
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub output_file: Option<PathBuf>,
    /// Rows per top-N table. [default: all distinct parallel configurations]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Output")]
    pub top: Option<u32>,
    /// Lay the text report out for N columns (40-1000): tables that do not fit have their
    /// headers wrapped, or become one record per block when narrower still, and long lines wrap
    /// at word boundaries. [default: the terminal's width (COLUMNS first) when stdout is a
    /// terminal; otherwise no limit]
    #[arg(long, value_parser = positive_u32, value_name = "N", help_heading = "Output")]
    pub width: Option<u32>,
    /// Print terminal charts (throughput vs concurrency and vs latency) for a single device.
    /// [default: when stdout is a terminal]
    #[arg(long, help_heading = "Output", conflicts_with = "no_plot")]
    pub plot: bool,
    /// Write SVG charts (throughput vs concurrency and latency; the chunk-budget study) here.
    #[arg(long, value_name = "PATH.svg", help_heading = "Output")]
    pub plot_file: Option<PathBuf>,
    /// Print ready-to-run launch commands of the recommended configuration for a serving
    /// engine (vllm, sglang or trtllm) on stdout, in place of the report (which still goes to
    /// --output-file). P/D plans get one command per prefill and decode instance and a router.
    #[arg(long, value_name = "ENGINE", help_heading = "Launch commands", conflicts_with = "interactive")]
    pub emit: Option<String>,
    /// Write the --emit files into this existing directory instead (each file whole or not at
    /// all); the report stays on stdout.
    #[arg(long, value_name = "DIR", requires = "emit", help_heading = "Launch commands")]
    pub emit_dir: Option<PathBuf>,
    /// Launch output as shell scripts (one per node, and the router's) or as Kubernetes
    /// manifests (k8s: Deployments or LeaderWorkerSets, Services, the router). [default: shell]
    #[arg(long, value_name = "FORMAT", requires = "emit", help_heading = "Launch commands")]
    pub emit_format: Option<String>,
    /// Emit row N of the top table (P/D ratio: of the P/D table; --disagg: row N of each
    /// phase) instead of the recommended row 1. [default: 1]
    #[arg(long, value_parser = positive_u32, value_name = "N", requires = "emit", help_heading = "Launch commands")]
    pub emit_row: Option<u32>,
    /// Price prefill attention with causal masking: a chunk of q new tokens at context c
    /// attends to q·c − q(q−1)/2 pairs. [default: off — the original's convention, every
    /// query attends to the whole context]
    #[arg(long, help_heading = "Quantization and compilation")]
    pub causal_attention: bool,
    /// With several --max-batched-tokens, study every layout, not only the best.
    #[arg(long, help_heading = "SLO and serving")]
    pub sweep_all_layouts: bool,
    /// Never print terminal charts.
    #[arg(long, help_heading = "Output")]
    pub no_plot: bool,
    /// Print the raw result rows (every column) instead of the formatted tables.
    #[arg(long, help_heading = "Output")]
    pub dump_original_results: bool,
    /// Add custom device profiles from a YAML file (one profile or a list); repeatable.
    #[arg(long, value_name = "PATH", action = ArgAction::Append, help_heading = "Output")]
    pub device_file: Vec<PathBuf>,
    /// List the device profiles and exit.
    #[arg(long, help_heading = "Output")]
    pub list_devices: bool,
    /// List the built-in models and exit.
    #[arg(long, help_heading = "Output")]
    pub list_models: bool,
    /// Guided mode: ask for whatever the command line leaves out, show the equivalent command,
    /// confirm, run and summarise. Reads answers from stdin (a pipe works too).
    #[arg(long, help_heading = "Output")]
    pub interactive: bool,
    /// Print MODEL_ID's architecture in the catalog's YAML format and exit (how to add a model).
    #[arg(long, help_heading = "Output")]
    pub show_model: bool,

    // ---- Logging ----
    /// Log level: debug, info, warning, error, critical. [default: warning]
    #[arg(long, alias = "log_level", value_name = "LEVEL", help_heading = "Logging")]
    pub log_level: Option<String>,
    /// Same as --log-level debug.
    #[arg(short, long, help_heading = "Logging", conflicts_with = "quiet")]
    pub verbose: bool,
    /// Same as --log-level error: no warnings on stderr.
    #[arg(short, long, help_heading = "Logging")]
    pub quiet: bool,
}

/// The options `-h` shows, with a one-line text each; `--help` shows every option with its full
/// text. Everything else is hidden from `-h` so that it fits a screen (≤ 60 lines).
const SHORT_HELP: &[(&str, &str)] = &[
    ("model_id", "Model: a catalog id (--list-models), a directory or config.json, or a cached Hugging Face id"),
    ("device", "Device profile(s) (--list-devices); several compare hardware [default: TEST_DEVICE]"),
    ("num_devices", "Devices in total (world size) [default: 1]"),
    ("input_length", "Prompt tokens, or a length-distribution YAML file"),
    ("output_length", "Generated tokens per request"),
    ("ttft_limits", "TTFT limit in ms (or inf)"),
    ("tpot_limits", "TPOT limit in ms (or inf)"),
    ("disagg", "Disaggregated serving: prefill and decode searched on their own"),
    ("enable_optimize_prefill_decode_ratio", "P/D instance-ratio planning"),
    ("quantize_linear_action", "Weight quantization [default: the checkpoint's own on NVIDIA and AMD, else W8A8_DYNAMIC]"),
    ("engine", "Evaluation engine: sim, analytic or compare [default: sim]"),
    ("serving_engine", "Serving engine simulated: vllm, sglang, trtllm or msmodeling"),
    ("output", "Report format: table, json or csv [default: table]"),
    ("output_file", "Write the report to this file"),
    ("emit", "Print launch commands for vllm, sglang or trtllm instead of the report"),
    ("emit_dir", "Write the --emit files into this directory"),
    ("scenario", "Run a scenario file (a whole run in YAML)"),
    ("interactive", "Guided mode: asks for what is missing"),
    ("list_models", "List the built-in models"),
    ("list_devices", "List the device profiles"),
    ("jobs", "Worker threads [default: the cores available]"),
    ("quiet", "No warnings on stderr"),
];

impl RawArgs {
    /// The argument parser: `-h` shows [`SHORT_HELP`], `--help` everything.
    pub fn parser() -> clap::Command {
        use clap::CommandFactory;
        Self::command().mut_args(|a| {
            let id = a.get_id().as_str().to_string();
            match SHORT_HELP.iter().find(|(name, _)| *name == id) {
                Some((_, short)) => {
                    let long = a.get_long_help().or(a.get_help()).cloned();
                    let a = a.help(*short);
                    match long {
                        Some(l) => a.long_help(l),
                        None => a,
                    }
                }
                None if id == "help" || id == "version" => a,
                None => a.hide_short_help(true),
            }
        })
    }

    /// Parse a command line and remember it (the first item is the program name).
    pub fn parse_argv<I, T>(argv: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::FromArgMatches;
        let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
        let mut raw = Self::from_arg_matches(&Self::parser().try_get_matches_from(&argv)?)?;
        raw.argv = argv;
        Ok(raw)
    }

    /// The arguments given on the command line, rewritten as `--long value…` tokens (the model
    /// in either form and `--scenario` left out), so that they can stand in for a scenario's
    /// values.
    pub fn explicit_flags(&self) -> Result<Vec<std::ffi::OsString>, clap::Error> {
        use clap::parser::ValueSource;
        use clap::CommandFactory;
        if self.argv.is_empty() {
            return Ok(Vec::new());
        }
        let cmd = Self::command();
        let matches = cmd.clone().try_get_matches_from(&self.argv)?;
        let mut out = Vec::new();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            let Some(long) = arg.get_long() else { continue };
            if id == "scenario" || id == "model_id_flag" || matches.value_source(id) != Some(ValueSource::CommandLine) {
                continue;
            }
            if arg.get_action().takes_values() {
                // One occurrence per flag keeps multi-value lists together.
                let groups: Vec<Vec<std::ffi::OsString>> = matches
                    .get_raw_occurrences(id)
                    .map(|occ| occ.map(|g| g.map(|v| v.to_os_string()).collect()).collect())
                    .unwrap_or_default();
                for g in groups {
                    out.push(format!("--{long}").into());
                    out.extend(g);
                }
            } else {
                out.push(format!("--{long}").into());
            }
        }
        Ok(out)
    }
}
