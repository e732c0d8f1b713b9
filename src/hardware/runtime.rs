//! What a serving engine does around its kernels that its execution profile states and no fit
//! changes: the CUDA graphs it captures ([`CudaGraphProfile`]) and the setting that sizes its KV
//! pool ([`KvMemory`]). Each is the engine's own default, read in the engine's source (the
//! built-in profiles name the file and release); the simulator applies them
//! (`sim::CudaGraphs`, the KV pool in `search::engine::sim::SimSetup`).

use serde::{Deserialize, Serialize};

/// What a captured CUDA graph's size counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphSizeUnit {
    /// Tokens of a step (vLLM's `cudagraph_capture_sizes`).
    Tokens,
    /// Decoding sequences (SGLang's `cuda_graph_bs`, TensorRT-LLM's `cuda_graph_config`).
    Sequences,
}

/// The largest captured size on devices with less than `below_gib` of memory (absent: any),
/// at TP below 4 and at TP 4 or more (SGLang's `cuda_graph_max_bs` defaults depend on both).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxCaptureSize {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below_gib: Option<f64>,
    pub tp_below_4: u64,
    pub tp_4_up: u64,
}

/// The CUDA graphs an engine captures by default, and what an eager step costs its host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaGraphProfile {
    /// Where the figures come from (engine release and source file).
    #[serde(default)]
    pub source: String,
    pub unit: GraphSizeUnit,
    /// Steps with prefill tokens replay (piecewise) graphs too; otherwise decode-only steps do.
    #[serde(default)]
    pub mixed_steps: bool,
    /// A batch between captured sizes is padded up to the next; without it only the captured
    /// sizes replay a graph.
    pub padding: bool,
    /// The captured sizes as `[from, step]` pairs: from `from` on (up to the next pair's),
    /// every `step`-th size.
    pub sizes: Vec<[u64; 2]>,
    /// The largest captured size, by device memory (the first row that applies).
    pub max_size: Vec<MaxCaptureSize>,
    /// The largest size is at most this many times the running cap × the decode tokens per
    /// sequence (vLLM: 2); absent: no such bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_running: Option<u64>,
    /// Host time to launch one kernel of an eager step, µs.
    pub launch_us: f64,
}

impl CudaGraphProfile {
    /// The largest captured size on a device of `memory_gib` at tensor parallelism `tp`.
    pub fn max_size_on(&self, memory_gib: f64, tp: u32) -> u64 {
        let row = self.max_size.iter().find(|r| r.below_gib.is_none_or(|b| memory_gib < b));
        row.map_or(0, |r| if tp < 4 { r.tp_below_4 } else { r.tp_4_up })
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        super::check_field("cuda_graphs.launch_us", self.launch_us, 0.0, 1000.0)?;
        if self.sizes.is_empty() || self.sizes.iter().any(|s| s[1] == 0) || self.sizes.windows(2).any(|w| w[0][0] >= w[1][0]) {
            return Err("field `cuda_graphs.sizes` must list [from, step] pairs with steps ≥ 1 and increasing `from`".into());
        }
        if self.max_size.is_empty() || self.max_size.iter().any(|r| r.tp_below_4 == 0 || r.tp_4_up == 0) {
            return Err("field `cuda_graphs.max_size` must give a size of at least 1 in every row".into());
        }
        Ok(())
    }
}

/// Which engine setting sizes the KV pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvMemorySetting {
    /// vLLM: the engine uses `fraction` of the device's memory; the KV pool is what weights,
    /// the peak activations of its profiling step and `overhead_gib` leave of it.
    GpuMemoryUtilization,
    /// SGLang: weights and KV pool take `mem_fraction_static` of the memory (activations and
    /// CUDA graphs live in the rest); without a `fraction`, SGLang's own default.
    MemFractionStatic,
    /// TensorRT-LLM: the KV pool takes `fraction` of the memory free once the model is loaded
    /// and a forward has run (weights, activations and `overhead_gib` set aside).
    KvCacheFreeGpuMemoryFraction,
}

impl KvMemorySetting {
    /// The engine's name for it.
    pub fn name(self) -> &'static str {
        match self {
            KvMemorySetting::GpuMemoryUtilization => "gpu_memory_utilization",
            KvMemorySetting::MemFractionStatic => "mem_fraction_static",
            KvMemorySetting::KvCacheFreeGpuMemoryFraction => "kv_cache_free_gpu_memory_fraction",
        }
    }
}

/// How an engine sizes its KV pool (absent from a profile: the tool's reserve,
/// `--reserved-memory-gb`, as the original tool does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvMemory {
    /// Where the rule comes from (engine release and source file).
    #[serde(default)]
    pub source: String,
    pub setting: KvMemorySetting,
    /// The setting's default value (absent: computed as the engine computes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// Memory the engine holds beside weights, KV and activations (CUDA context, communication
    /// and graph buffers), GiB.
    #[serde(default)]
    pub overhead_gib: f64,
    /// What the engine's memory profiling step samples (vLLM): absent where the pool is not
    /// sized by profiling one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler_profile: Option<SamplerProfile>,
}

/// vLLM sizes its KV pool by profiling one forward at the token budget and then sampling its
/// largest batch, `min(max_num_seqs, max_num_batched_tokens)` rows of logits over the whole
/// vocabulary with top-k and top-p on (`GPUModelRunner._dummy_sampler_run`): the peak of the two
/// is kept back from the pool. The sampler's peak is a number of bytes per (row, vocabulary
/// entry) that depends on how the release applies top-k and top-p.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplerProfile {
    /// Where the figures come from (release, source file, measurement).
    #[serde(default)]
    pub source: String,
    /// Peak bytes per row and vocabulary entry, logits included, before the first of
    /// `releases`.
    pub bytes_per_logit: f64,
    /// Releases from which the peak changes, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<SamplerRelease>,
}

/// The sampler's peak from release `from` on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplerRelease {
    pub from: super::version::EngineVersion,
    pub bytes_per_logit: f64,
}

impl SamplerProfile {
    /// Peak bytes per row and vocabulary entry in `release` (`None`: the current release, the
    /// last one listed).
    pub fn bytes_per_logit(&self, release: Option<super::version::EngineVersion>) -> f64 {
        self.releases.iter().rev().find(|r| release.is_none_or(|v| v >= r.from)).map_or(self.bytes_per_logit, |r| r.bytes_per_logit)
    }
}

impl KvMemory {
    /// What the report says of the rule for `engine` (`user_fraction`: the
    /// `--gpu-memory-utilization` that replaces the setting's value).
    pub fn describe(&self, engine: &str, user_fraction: Option<f64>) -> String {
        let fraction = user_fraction.or(self.fraction);
        let value = match (fraction, user_fraction) {
            (Some(f), Some(_)) => format!(" {f} (--gpu-memory-utilization)"),
            (Some(f), None) => format!(" {f}"),
            (None, _) => " (the engine's default for this GPU, chunked prefill size, CUDA graphs and TP)".to_string(),
        };
        let share = fraction.map_or("that share".to_string(), |f| format!("{} %", super::trim_float(f * 100.0)));
        let buffers = format!("{} GiB of runtime buffers", super::trim_float(self.overhead_gib));
        let what = match self.setting {
            KvMemorySetting::GpuMemoryUtilization => match &self.sampler_profile {
                Some(sp) => format!(
                    "the KV pool is what weights, the larger of the profiling step's activations and its sampler's ({} bytes per logit over max_num_seqs rows) and {buffers} leave of {share} of the memory",
                    super::trim_float(sp.bytes_per_logit)
                ),
                None => format!("the KV pool is what weights, the peak activations and {buffers} leave of {share} of the memory"),
            },
            KvMemorySetting::MemFractionStatic => format!("weights and the KV pool take {share} of the memory"),
            KvMemorySetting::KvCacheFreeGpuMemoryFraction => {
                format!("the KV pool takes {share} of what weights, the peak activations and {buffers} leave")
            }
        };
        format!("sized by {engine}'s {}{value}: {what}", self.setting.name())
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        if let Some(f) = self.fraction {
            super::check_field("kv_memory.fraction", f, 0.01, 1.0)?;
        }
        super::check_field("kv_memory.overhead_gib", self.overhead_gib, 0.0, 64.0)?;
        if let Some(sp) = &self.sampler_profile {
            super::check_field("kv_memory.sampler_profile.bytes_per_logit", sp.bytes_per_logit, 0.0, 256.0)?;
            for r in &sp.releases {
                super::check_field("kv_memory.sampler_profile.releases.bytes_per_logit", r.bytes_per_logit, 0.0, 256.0)?;
            }
            if sp.releases.windows(2).any(|w| w[0].from >= w[1].from) {
                return Err("kv_memory.sampler_profile.releases: list the releases oldest first, each once".to_string());
            }
        }
        Ok(())
    }

    /// The rule as `release` of the engine applies it (`None`: the current release): the
    /// sampler's peak resolved to that release's figure.
    pub fn for_release(&self, release: Option<super::version::EngineVersion>) -> KvMemory {
        let mut m = self.clone();
        if let Some(sp) = &mut m.sampler_profile {
            sp.bytes_per_logit = sp.bytes_per_logit(release);
            sp.releases.clear();
        }
        m
    }

    /// Peak bytes per row and vocabulary entry of the profiling step's sampler (0 without one),
    /// once resolved for a release ([`KvMemory::for_release`]).
    pub fn sampler_bytes_per_logit(&self) -> f64 {
        self.sampler_profile.as_ref().map_or(0.0, |s| s.bytes_per_logit)
    }
}

/// What the engine's own benchmark client does to output lengths by default. A client that
/// honours end-of-sequence (`vllm bench serve` and TensorRT-LLM's `benchmark_serving.py` send
/// no `ignore_eos` unless asked) gets outputs of different lengths for the same
/// `--random-output-len`; one that ignores it (SGLang's `bench_serving.py`, unless
/// `--disable-ignore-eos`) gets the requested length every time.
///
/// It matters beyond the mean: in a closed loop of identical requests, the requests that
/// prefill in the same step finish in the same step and come back together, so the loop stays
/// in lockstep waves and every TTFT waits behind a wave's prefills. Lengths that differ break
/// the waves. The measured runs show both: SGLang's TTFTs are the waves' (840 ms for Qwen3-32B
/// at 16 concurrent 1024-token prompts on 2 × H100), vLLM's and TensorRT-LLM's a lone
/// prefill's (154 and 165 ms at 8), which no engine could reach with the waves (a step that
/// prefills seven such prompts takes 390 ms on measured kernels).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchmarkClient {
    /// Where the default comes from (client, release, flag).
    #[serde(default)]
    pub source: String,
    /// Output lengths spread uniformly over [L − k, L + k] tokens around the requested L, at
    /// least one (0: every request generates L tokens).
    pub output_spread_tokens: u64,
}

/// Another engine's measured kernels that price this engine's MXFP4 routed experts on devices
/// without FP4 tensor cores, where the experts take bf16 activations. TensorRT-LLM's TRITON MoE
/// backend, the one its gpt-oss guides name for Hopper, runs OpenAI's Triton MXFP4 kernels
/// (`triton_kernels`), which vLLM runs on Hopper too. The database times them under both, but
/// TensorRT-LLM's table covers one expert-TP width only (moe_tp 1) and is 44 % slower at 8,192
/// tokens on an H200 (5.66 against 3.94 ms a layer, gpt-oss-120b's experts), more than
/// TensorRT-LLM's own runs allow (docs/validation.md §7); vLLM's measures every width.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BorrowedMoeKernels {
    /// Where the choice comes from (release, setting, kernels).
    #[serde(default)]
    pub source: String,
    /// The engine whose measured `w4a16_mxfp4` MoE tables price the experts.
    pub tables: String,
}

impl BorrowedMoeKernels {
    pub(crate) fn validate(&self, own: &str) -> Result<(), String> {
        let valid = ["vllm", "sglang", "trtllm"];
        if !valid.contains(&self.tables.as_str()) || self.tables == own {
            let others: Vec<&str> = valid.into_iter().filter(|e| *e != own).collect();
            return Err(format!("field `mxfp4_bf16_moe.tables` is `{}`; valid: {}", self.tables, others.join(", ")));
        }
        Ok(())
    }
}

/// The widest spread a profile may give, tokens.
pub const MAX_OUTPUT_SPREAD_TOKENS: u64 = 1_000;

impl BenchmarkClient {
    pub(crate) fn validate(&self) -> Result<(), String> {
        super::check_field("benchmark_client.output_spread_tokens", self.output_spread_tokens as f64, 0.0, MAX_OUTPUT_SPREAD_TOKENS as f64)
    }
}
