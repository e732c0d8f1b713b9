//! From the names a benchmark result uses to this crate's configuration: a Hugging Face model
//! id to a catalog model, a GPU name to a device profile, a precision to a quantization, and
//! the engine's parallel layout to a [`ParallelConfig`].

use crate::cost::ParallelConfig;
use crate::hardware::DeviceRegistry;
use crate::model::{catalog, ModelArch, WeightFormat};
use crate::quant::{KvQuant, LinearQuant, QuantConfig};
use crate::search::candidates::model_limit;
use serde::Serialize;

/// The weight and GEMM precision a run was served in (`precision` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Bf16,
    Fp8,
    Fp4,
    /// INT4 weights, bf16 activations (Kimi-K2.5's routed experts).
    Int4,
}

impl Precision {
    /// `bf16`, `fp8`, `fp4`, `int4` (case-insensitive); blank is `None` (the checkpoint's own).
    pub fn parse(s: &str) -> Result<Option<Self>, String> {
        match s.trim().to_lowercase().as_str() {
            "" => Ok(None),
            "bf16" | "bfloat16" => Ok(Some(Precision::Bf16)),
            "fp8" => Ok(Some(Precision::Fp8)),
            "fp4" | "mxfp4" | "nvfp4" => Ok(Some(Precision::Fp4)),
            "int4" | "w4a16" => Ok(Some(Precision::Int4)),
            o => Err(format!("`{o}` is not one of bf16, fp8, fp4, int4 (or blank for the checkpoint's own)")),
        }
    }

    /// The precision a checkpoint's weights are stored in.
    pub fn of(weights: WeightFormat) -> Precision {
        match weights {
            WeightFormat::Bf16 => Precision::Bf16,
            WeightFormat::Fp8Tensor | WeightFormat::Fp8Block => Precision::Fp8,
            WeightFormat::Mxfp4Experts
            | WeightFormat::Nvfp4
            | WeightFormat::Nvfp4Mlp
            | WeightFormat::Nvfp4MlpFp8Attention
            | WeightFormat::Nvfp4ExpertsFp8 => Precision::Fp4,
            WeightFormat::Int4Experts => Precision::Int4,
        }
    }
}

/// The catalog and the device profiles, loaded once for a whole file of runs.
#[derive(Debug, Clone)]
pub struct Resolver {
    models: Vec<ModelArch>,
    pub registry: DeviceRegistry,
}

impl Default for Resolver {
    fn default() -> Self {
        Resolver { models: catalog::all(), registry: DeviceRegistry::builtin() }
    }
}

impl Resolver {
    /// The catalog models names resolve to.
    pub fn models(&self) -> &[ModelArch] {
        &self.models
    }

    /// The catalog model a Hugging Face id names: the exact id (case-insensitive), or the same
    /// network under another organisation or with an `-Instruct` / precision suffix
    /// (`nvidia/Llama-3.1-8B-Instruct-FP8` is `meta-llama/Meta-Llama-3.1-8B`).
    pub fn model(&self, id: &str) -> Option<&ModelArch> {
        let id = id.trim();
        if id.is_empty() {
            return None;
        }
        let key = crate::model::network_key(id);
        self.models
            .iter()
            .find(|m| m.id.eq_ignore_ascii_case(id))
            .or_else(|| self.models.iter().find(|m| crate::model::network_key(&m.id) == key))
    }

    /// What the catalog knows of the checkpoint `id` names (its weight format and KV cache:
    /// [`crate::model::checkpoint_in`]), or the catalog network `model` in bf16 when the id is
    /// only an alias the catalog cannot place.
    pub fn checkpoint(&self, id: &str, model: &ModelArch) -> ModelArch {
        crate::model::checkpoint_in(&self.models, id).unwrap_or_else(|| ModelArch {
            weights: WeightFormat::Bf16,
            fp8_kv_cache: false,
            ..model.clone()
        })
    }

    /// The device profile a GPU name means, as `--device` reads it (`h100_sxm` is `H100_SXM`,
    /// `b200_sxm` is `B200`: `DeviceRegistry::get`).
    pub fn device(&self, gpu: &str) -> Option<&crate::hardware::DeviceProfile> {
        self.registry.get(gpu.trim()).ok()
    }
}

/// The quantization a run in `precision` was served in, for a run naming `checkpoint` (its
/// catalog network `model`; `res` places NVIDIA's releases):
///
/// - the checkpoint's own precision (a blank `precision` column is that too): the checkpoint as
///   stored, as the planner and `price` default to it. DeepSeek-V3 and Kimi-K2 ship FP8 in
///   128 × 128 blocks, gpt-oss MXFP4 experts with bf16 attention, Kimi-K2.5 INT4 experts,
///   NVIDIA's NVFP4 releases NVFP4 MLPs (attention in bf16 where their exclude lists say so);
/// - bf16 of a quantized checkpoint: no quantization;
/// - fp8 of another checkpoint: its publisher's FP8 release, block-scaled where the publisher
///   is Qwen ([`crate::model::fp8_release_weights`]), per tensor otherwise;
/// - fp4 of another checkpoint: NVIDIA's NVFP4 release (NVIDIA publishes the FP4 checkpoints
///   engines serve: `nvidia/Llama-3.1-70B-Instruct-FP4`, `nvidia/DeepSeek-R1-FP4`), with the
///   layers its releases of that architecture keep in bf16;
/// - int4 of another checkpoint: weight-only INT4 routed experts (every linear of a dense
///   network).
///
/// The KV cache is bf16 here; [`kv_for`] says which runs kept it in FP8.
pub fn quant_for(precision: Precision, model: &ModelArch, checkpoint: &ModelArch, id: &str, res: &Resolver) -> QuantConfig {
    let stored = |m: &ModelArch| QuantConfig { kv: KvQuant::Disabled, ..QuantConfig::checkpoint(m) };
    if Precision::of(checkpoint.weights) == precision {
        return stored(checkpoint);
    }
    let (linear, non_expert) = match precision {
        Precision::Bf16 => (LinearQuant::Disabled, None),
        Precision::Fp8 => match crate::model::fp8_release_weights(id) {
            WeightFormat::Fp8Block => (LinearQuant::Fp8Block, None),
            _ => (LinearQuant::Fp8, None),
        },
        Precision::Fp4 => {
            let name = crate::model::network_key(id);
            let release = crate::model::checkpoint_in(&res.models, &format!("nvidia/{name}-NVFP4"));
            match release.filter(|r| Precision::of(r.weights) == Precision::Fp4) {
                Some(r) => return stored(&r),
                None => (LinearQuant::Nvfp4, None),
            }
        }
        Precision::Int4 if model.is_moe() => (LinearQuant::W4A16Int4, Some(LinearQuant::Disabled)),
        Precision::Int4 => (LinearQuant::W4A16Int4, None),
    };
    QuantConfig { linear, non_expert, attention: None, kv: KvQuant::Disabled, mxfp4_group_size: 32 }
}

/// The KV cache a run kept, in FP8 where
///
/// - the run is in its checkpoint's own precision and the checkpoint stores the cache in FP8
///   (NVIDIA's FP8 and NVFP4 republications: `kv_cache_quant_algo: FP8`);
/// - the run is an FP8 run under TensorRT-LLM. The training file's own TensorRT-LLM FP8 runs
///   need it: Qwen3-32B on one H100 held 128 requests of 1,024 + 512 tokens with no queueing
///   (mean TTFT 751 ms), 48.5 GiB of KV in bf16 (256 KiB a token), more than the 42.5 GiB the
///   GPU has beside the 32 GiB of FP8 weights; in FP8 it is 24 GiB. With a bf16 cache the
///   simulation queues those runs for seconds (7.5 s, and 27 s at 2,048 + 512), where the
///   measurements show at most 6.4 s.
///
/// Elsewhere bf16, the engines' default for checkpoints that do not say.
pub fn kv_for(engine: &str, precision: Precision, checkpoint: &ModelArch) -> KvQuant {
    let checkpoint_fp8 = precision == Precision::of(checkpoint.weights) && checkpoint.fp8_kv_cache;
    if checkpoint_fp8 || (engine == "trtllm" && precision == Precision::Fp8) {
        KvQuant::Fp8
    } else {
        KvQuant::Disabled
    }
}

/// The parallel layout of one serving instance as the benchmark tables give it: `tp` ranks of
/// attention tensor parallelism times `attention_dp` attention replicas (blank or 0 = 1), and
/// for MoE models `moe_tp` × `moe_ep` over the same devices (the remainder is MoE data
/// parallelism). Dense models ignore the MoE columns. `Err((field, message))` when the layout
/// does not fit the model.
pub fn parallel_for(
    model: &ModelArch,
    tp: u32,
    attention_dp: u32,
    moe_tp: u32,
    moe_ep: u32,
) -> Result<ParallelConfig, (&'static str, String)> {
    let dp = attention_dp.max(1);
    let n = tp * dp;
    let mut p = ParallelConfig::dense(n, tp);
    if model.is_moe() {
        let (mtp, ep) = (moe_tp.max(1), moe_ep.max(1));
        if !n.is_multiple_of(mtp * ep) {
            return Err((
                "moe_tp",
                format!("moe_tp {mtp} × moe_ep {ep} does not divide the instance's {n} devices (tp {tp} × attention_dp {dp})"),
            ));
        }
        p.ep = ep;
        p.moe_tp = mtp;
        p.moe_dp = n / (mtp * ep);
    }
    match model_limit(model, &p, false) {
        Some(why) => Err(("tp", format!("{} cannot run this layout: {why}", model.id))),
        None => Ok(p),
    }
}
