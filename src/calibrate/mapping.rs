//! From the names a benchmark result uses to this crate's configuration: a Hugging Face model
//! id to a catalog model, a GPU name to a device profile, a precision to a quantization, and
//! the engine's parallel layout to a [`ParallelConfig`].

use crate::cost::ParallelConfig;
use crate::hardware::DeviceRegistry;
use crate::model::{catalog, ModelArch};
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
}

impl Precision {
    /// `bf16`, `fp8`, `fp4` (case-insensitive); blank is `None` (the checkpoint's own).
    pub fn parse(s: &str) -> Result<Option<Self>, String> {
        match s.trim().to_lowercase().as_str() {
            "" => Ok(None),
            "bf16" | "bfloat16" => Ok(Some(Precision::Bf16)),
            "fp8" => Ok(Some(Precision::Fp8)),
            "fp4" | "mxfp4" | "nvfp4" => Ok(Some(Precision::Fp4)),
            o => Err(format!("`{o}` is not one of bf16, fp8, fp4 (or blank for the checkpoint's own)")),
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

    /// The device profile a GPU name means, as `--device` reads it (`h100_sxm` is `H100_SXM`,
    /// `b200_sxm` is `B200`: `DeviceRegistry::get`).
    pub fn device(&self, gpu: &str) -> Option<&crate::hardware::DeviceProfile> {
        self.registry.get(gpu.trim()).ok()
    }
}

/// The precision a checkpoint ships in when the run does not say: FP8 for `…-FP8` ids, FP4
/// (MXFP4 experts) for gpt-oss, bf16 otherwise.
pub fn native_precision(id: &str) -> Precision {
    let lower = id.to_lowercase();
    if lower.ends_with("-fp8") {
        Precision::Fp8
    } else if lower.ends_with("fp4") || lower.contains("gpt-oss") {
        Precision::Fp4
    } else {
        Precision::Bf16
    }
}

/// The quantization a precision means for a model with Hugging Face id `id`: bf16 → none;
/// fp8 → FP8 weights and GEMMs in every linear, block-scaled where the publisher's FP8 release
/// is (Qwen; [`crate::model::fp8_release_weights`]), per tensor otherwise; fp4 → MXFP4, on
/// the routed experts only for MoE models (gpt-oss ships MXFP4 experts and bf16 attention), on
/// every linear for dense ones. The KV cache is bf16 here; [`kv_for`] says which runs kept it
/// in FP8.
pub fn quant_for(precision: Precision, model: &ModelArch, id: &str) -> QuantConfig {
    let fp8 = match crate::model::fp8_release_weights(id) {
        crate::model::WeightFormat::Fp8Block => LinearQuant::Fp8Block,
        _ => LinearQuant::Fp8,
    };
    let (linear, non_expert) = match precision {
        Precision::Bf16 => (LinearQuant::Disabled, None),
        Precision::Fp8 => (fp8, None),
        Precision::Fp4 if model.is_moe() => (LinearQuant::Mxfp4, Some(LinearQuant::Disabled)),
        Precision::Fp4 => (LinearQuant::Mxfp4, None),
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
pub fn kv_for(engine: &str, precision: Precision, id: &str) -> KvQuant {
    let checkpoint_fp8 = precision == native_precision(id) && crate::model::modelopt_kv(id);
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
