//! How much of a device the simulated engine keeps back from its KV pool: what the KV pool of
//! an instance is sized from. Under the msmodeling policy it is the plan's reserve
//! (`--reserved-memory-gb` or the share `--gpu-memory-utilization` leaves), as the original
//! tool sizes it; under vLLM, SGLang and TensorRT-LLM it is what the engine's own memory setting
//! leaves ([`KvMemory`] in the execution profile, its fraction replaced by
//! `--gpu-memory-utilization` when given):
//!
//! - vLLM, `gpu_memory_utilization` (0.9): the engine takes that share of the device; the pool
//!   is what weights, the peak activations of its profiling step (at the token budget) and its
//!   runtime buffers (`overhead_gib`) leave of it;
//! - SGLang, `mem_fraction_static`: weights and the pool take that share, activations and
//!   CUDA graphs the rest; without a fraction, SGLang's own default from the GPU's memory, the
//!   chunked prefill size, `cuda_graph_max_bs` and the TP size
//!   (`ServerArgs._handle_gpu_memory_settings` in 0.5.x);
//! - TensorRT-LLM, `kv_cache_free_gpu_memory_fraction` (0.9): the pool takes that share of
//!   what is free once weights, activations and runtime buffers are in place.
//!
//! Each is expressed as the bytes kept back beside weights, KV and the peak step's activations,
//! so that the memory model (`cost::memory`) sizes the pool and reports the memory picture the
//! same way whichever rule applies.

use crate::cost::memory::bytes_from_gib;
use crate::cost::{BatchShape, MemoryModel};
use crate::hardware::runtime::{KvMemory, KvMemorySetting};

const MIB: f64 = 1024.0 * 1024.0;

/// What an instance keeps back from its KV pool.
#[derive(Debug, Clone)]
pub(super) enum Reserve {
    /// A fixed reserve, GiB (the plan's, msmodeling).
    Fixed(f64),
    /// The serving engine's memory setting.
    Engine(EngineReserve),
}

/// A serving engine's memory setting, as one instance of the candidate applies it.
#[derive(Debug, Clone)]
pub(super) struct EngineReserve {
    setting: KvMemorySetting,
    /// The setting's value (`None`: SGLang's computed default).
    fraction: Option<f64>,
    overhead_bytes: f64,
    /// SGLang's default: `cuda_graph_max_bs` and the GPUs of one instance.
    graph_max_bs: u64,
    instance_devices: u32,
    /// vLLM's profiling step: peak bytes of its sampler per sampled row (0: no sampler
    /// profile) and the rows it samples, `max_num_seqs` (capped by the token budget).
    sampler_bytes_per_row: f64,
    profile_rows: u64,
}

impl Reserve {
    /// The engine's rule (`user_fraction`: `--gpu-memory-utilization`, which replaces the
    /// setting's value).
    /// `profile_rows`: the rows the engine's profiling step samples (its `max_num_seqs`);
    /// `vocab`: the vocabulary entries of a row on this device ([`MemoryModel::sampled_vocab`]).
    pub(super) fn engine(
        m: &KvMemory,
        user_fraction: Option<f64>,
        graph_max_bs: u64,
        instance_devices: u32,
        profile_rows: u64,
        vocab: f64,
    ) -> Self {
        Reserve::Engine(EngineReserve {
            setting: m.setting,
            fraction: user_fraction.or(m.fraction),
            overhead_bytes: bytes_from_gib(m.overhead_gib),
            graph_max_bs,
            instance_devices,
            sampler_bytes_per_row: m.sampler_bytes_per_logit() * vocab,
            profile_rows,
        })
    }

    /// Bytes kept back beside weights, KV and the activations of `peak` (the largest step,
    /// whose token count is the budget).
    pub(super) fn bytes(&self, mem: &MemoryModel, peak: &BatchShape, budget: u64) -> f64 {
        let e = match self {
            Reserve::Fixed(gib) => return bytes_from_gib(*gib),
            Reserve::Engine(e) => e,
        };
        let total = mem.device_bytes;
        let act = mem.activation_bytes(peak);
        match e.setting {
            KvMemorySetting::GpuMemoryUtilization => {
                let kept = total * (1.0 - e.fraction.unwrap_or(0.9)) + e.overhead_bytes;
                if e.sampler_bytes_per_row <= 0.0 || e.profile_rows == 0 {
                    return kept;
                }
                // The pool is what the larger of the profiling forward (the step's tokens) and
                // its sampler (`profile_rows` rows, whatever the probe's batch) leaves: kept
                // back here beside what `peak`'s own activations take.
                let forward = peak.tokens() as f64 * mem.act_bytes_per_token;
                let rows = if budget > 0 { e.profile_rows.min(budget) } else { e.profile_rows };
                kept + forward.max(e.sampler_bytes_per_row * rows as f64) - act
            }
            KvMemorySetting::MemFractionStatic => {
                let f = e.fraction.unwrap_or_else(|| sglang_mem_fraction_static(total, budget, e.graph_max_bs, e.instance_devices));
                // Weights + pool = f × total: what the activations do not take of the rest.
                total * (1.0 - f) - act
            }
            KvMemorySetting::KvCacheFreeGpuMemoryFraction => {
                let free = (total - mem.weight_bytes - act - e.overhead_bytes).max(0.0);
                e.overhead_bytes + (1.0 - e.fraction.unwrap_or(0.9)) * free
            }
        }
    }

    /// GiB kept back beside weights, KV and the activations of `peak` (the plan's reserve as
    /// given, under msmodeling).
    pub(super) fn gib(&self, mem: &MemoryModel, peak: &BatchShape, budget: u64) -> f64 {
        match *self {
            Reserve::Fixed(gib) => gib,
            Reserve::Engine(_) => crate::cost::memory::gib(self.bytes(mem, peak, budget)),
        }
    }
}

/// SGLang's default `mem_fraction_static` (`ServerArgs._handle_gpu_memory_settings`, SGLang
/// 0.5.x): `(memory − reserved) / memory`, rounded to 3 decimals, with `reserved` MiB = 512
/// (constant metadata) + 1.5 × max(chunked prefill size, 2048) (activations of a large prefill)
/// + 2 × `cuda_graph_max_bs` (graph buffers) + 1024 × TP × PP / 8, and at least 10 GiB on GPUs
///   above 60 GiB.
pub(super) fn sglang_mem_fraction_static(total_bytes: f64, chunked_prefill: u64, graph_max_bs: u64, tp: u32) -> f64 {
    let gpu_mib = total_bytes / MIB;
    let mut reserved = 512.0 + (chunked_prefill.max(2048) as f64) * 1.5 + graph_max_bs as f64 * 2.0 + tp as f64 / 8.0 * 1024.0;
    if gpu_mib > 60.0 * 1024.0 {
        reserved = reserved.max(10.0 * 1024.0);
    }
    ((gpu_mib - reserved) / gpu_mib * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::PhaseLoad;
    use crate::hardware::runtime::{KvMemory, SamplerProfile};

    #[test]
    fn vllm_keeps_back_its_profiling_samplers_peak_whatever_the_probes_batch() {
        // 80 GB, 30 GB of weights, 0.9 utilization, 1 GiB of buffers; the profiling forward at
        // 8,192 tokens takes 8.192 MB, the sampler 1,024 rows × 100,000 entries × 37.2 bytes =
        // 3,809,280,000 bytes: the pool is 72e9 − 30e9 − 2^30 − 3,809,280,000 bytes, for a
        // probe of 1,024 sequences or of 64. Mutation: size the sampler by `peak.sampled`
        // instead of `profile_rows` and the 64-sequence probe gets a larger pool.
        let mem = MemoryModel {
            device_bytes: 80e9,
            weight_bytes: 30e9,
            kv_bytes_per_token: 1.0,
            state_bytes_per_seq: 0.0,
            kv_capacity_factor: 1.0,
            act_bytes_per_token: 1000.0,
            act_bytes_per_sampled: 10.0,
            sampled_vocab: 100_000.0,
        };
        let kv = KvMemory {
            source: String::new(),
            setting: KvMemorySetting::GpuMemoryUtilization,
            fraction: Some(0.9),
            overhead_gib: 1.0,
            sampler_profile: Some(SamplerProfile { source: String::new(), bytes_per_logit: 37.2, releases: vec![] }),
        };
        let reserve = Reserve::engine(&kv, None, 0, 1, 1024, mem.sampled_vocab);
        let expected = 72e9 - 30e9 - 1_073_741_824.0 - 3_809_280_000.0;
        for sampled in [1024, 64] {
            let peak = BatchShape { prefill: PhaseLoad::uniform(1, 8192, 8192), sampled, ..Default::default() };
            let pool = mem.kv_budget_bytes(&peak, reserve.bytes(&mem, &peak, 8192));
            assert!((pool - expected).abs() < 1.0, "{sampled} sequences: {pool} against {expected}");
        }
        // Without a sampler profile the peak's own activations stand for the profiling step.
        let plain = Reserve::engine(&KvMemory { sampler_profile: None, ..kv }, None, 0, 1, 1024, mem.sampled_vocab);
        let peak = BatchShape { prefill: PhaseLoad::uniform(1, 8192, 8192), sampled: 1024, ..Default::default() };
        let pool = mem.kv_budget_bytes(&peak, plain.bytes(&mem, &peak, 8192));
        assert!((pool - (72e9 - 30e9 - 1_073_741_824.0 - 8_192_000.0 - 10_240.0)).abs() < 1.0, "{pool}");
    }

    #[test]
    fn sglang_reserves_as_its_server_args_do() {
        // An 80 × 10⁹-byte GPU (76,294 MiB), TP 1, chunked prefill 8192, 256 graphs:
        // 512 + 12,288 + 512 + 128 = 13,440 MiB → 0.824. H200 (141 GB): 0.9. A 48 GB GPU at
        // 4096 and 32 graphs: 512 + 6,144 + 64 + 128 = 6,848 MiB (no 10 GiB floor) → 0.85.
        // Fails if the floor applies below 60 GiB (0.776) or the TP term is left out (0.826).
        let gb = |g: f64| g * 1e9;
        assert_eq!(sglang_mem_fraction_static(gb(80.0), 8192, 256, 1), 0.824);
        assert_eq!(sglang_mem_fraction_static(gb(141.0), 8192, 256, 1), 0.9);
        assert_eq!(sglang_mem_fraction_static(gb(48.0), 4096, 32, 1), 0.85);
    }
}
