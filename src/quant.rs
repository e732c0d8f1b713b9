//! Quantization actions → bytes per weight / activation / KV element and the dtype a GEMM is
//! priced at (the original tool's quantization conventions).

use crate::hardware::calibration::Mxfp4Kernel;
use crate::hardware::Dtype;
use serde::{Deserialize, Serialize};

/// A value that is not one of an enum's names.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{value}` is not one of {choices}")]
pub struct ChoiceError {
    pub value: String,
    /// The accepted names, joined with ", ".
    pub choices: String,
}

impl ChoiceError {
    pub fn of<E: NamedEnum>(value: &str) -> Self {
        ChoiceError { value: value.to_string(), choices: E::choices() }
    }
}

/// An enum whose values users type on the command line: case-insensitive, `-` or `_`.
pub trait NamedEnum: Sized + Copy + 'static {
    const ALL: &'static [Self];
    fn name(self) -> &'static str;

    fn parse_choice(s: &str) -> Result<Self, ChoiceError> {
        let norm = s.trim().replace('-', "_");
        Self::ALL.iter().copied().find(|v| v.name().replace('-', "_").eq_ignore_ascii_case(&norm)).ok_or_else(|| ChoiceError::of::<Self>(s))
    }
    /// [`Self::parse_choice`] with the message only, for the guided session's prompts.
    fn parse_named(s: &str) -> Result<Self, String> {
        Self::parse_choice(s).map_err(|e| e.to_string())
    }
    fn choices() -> String {
        Self::ALL.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
    }
}

macro_rules! named_enum {
    ($ty:ident { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $crate::quant::NamedEnum for $ty {
            const ALL: &'static [Self] = &[$($ty::$variant),*];
            fn name(self) -> &'static str {
                match self { $($ty::$variant => $name),* }
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str($crate::quant::NamedEnum::name(*self)) }
        }
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> { s.serialize_str($crate::quant::NamedEnum::name(*self)) }
        }
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> { stringify!($ty).into() }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": [$($name),*] })
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                <$ty as $crate::quant::NamedEnum>::parse_choice(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use named_enum;

/// `--quantize-linear-action`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinearQuant {
    Disabled,
    W8A16Static,
    W8A8Static,
    W4A8Static,
    W8A16Dynamic,
    W8A8Dynamic,
    W4A8Dynamic,
    Fp8,
    Mxfp4,
    /// MXFP4 weights dequantized inside the kernel, bf16 activations, bf16 tensor cores.
    W4A16Mxfp4,
    /// MXFP4 weights × MXFP8 activations on tensor cores running FP4 operands at the FP8 rate.
    W4A8Mxfp4Mxfp8,
    /// FP8 E4M3 weights in 128 × 128 blocks with one fp32 scale each, activations quantized
    /// per token in groups of 128 (DeepSeek-V3 and Qwen3 FP8 checkpoints).
    Fp8Block,
    /// NVFP4: FP4 E2M1 weights and activations in groups of 16 with FP8 E4M3 scales (plus one
    /// fp32 scale per tensor), on FP4 tensor cores.
    Nvfp4,
    /// INT4 weights in groups of 32 with one bf16 scale each, dequantized inside the kernel;
    /// bf16 activations on bf16 tensor cores (W4A16, compressed-tensors `pack-quantized`, as
    /// Kimi-K2.5 ships its routed experts; Marlin/Machete kernels).
    W4A16Int4,
}
named_enum!(LinearQuant {
    Disabled => "DISABLED",
    W8A16Static => "W8A16_STATIC",
    W8A8Static => "W8A8_STATIC",
    W4A8Static => "W4A8_STATIC",
    W8A16Dynamic => "W8A16_DYNAMIC",
    W8A8Dynamic => "W8A8_DYNAMIC",
    W4A8Dynamic => "W4A8_DYNAMIC",
    Fp8 => "FP8",
    Mxfp4 => "MXFP4",
    W4A16Mxfp4 => "W4A16_MXFP4",
    W4A8Mxfp4Mxfp8 => "W4A8_MXFP4_MXFP8",
    Fp8Block => "FP8_BLOCK",
    Nvfp4 => "NVFP4",
    W4A16Int4 => "W4A16_INT4",
});

/// `--quantize-attention-action` (KV cache)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvQuant {
    Disabled,
    Int8,
    Fp8,
}
named_enum!(KvQuant { Disabled => "DISABLED", Int8 => "INT8", Fp8 => "FP8" });

/// How activations entering a quantized GEMM are produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActQuant {
    /// bf16 activations straight into the GEMM.
    None,
    /// A `quantize` op with a calibrated scale.
    Static,
    /// A per-token dynamic quantization op (abs-max, scale, round).
    Dynamic,
    /// Dynamic MXFP4 quantization (payload + one scale per group).
    Mxfp4,
    /// Dynamic MXFP8 quantization (fp8 payload + one scale per group).
    Mxfp8,
    /// Dynamic FP8 quantization per token in groups of 128 (one fp32 scale each).
    Fp8Group,
    /// Dynamic NVFP4 quantization (FP4 payload + one FP8 scale per 16).
    Nvfp4,
}

/// The model's native dtype for weights, activations and unquantized KV.
pub const MODEL_DTYPE: Dtype = Dtype::Bf16;

impl LinearQuant {
    pub fn is_quantized(self) -> bool {
        self != LinearQuant::Disabled
    }

    /// Bytes per weight element including group scales.
    pub fn weight_bytes(self, mxfp4_group: u32) -> f64 {
        match self {
            LinearQuant::Disabled => 2.0,
            LinearQuant::W8A16Static
            | LinearQuant::W8A16Dynamic
            | LinearQuant::W8A8Static
            | LinearQuant::W8A8Dynamic
            | LinearQuant::Fp8 => 1.0,
            LinearQuant::W4A8Static | LinearQuant::W4A8Dynamic => 0.5,
            LinearQuant::Mxfp4 | LinearQuant::W4A16Mxfp4 | LinearQuant::W4A8Mxfp4Mxfp8 => 0.5 + 1.0 / mxfp4_group.max(1) as f64,
            LinearQuant::Fp8Block => 1.0 + 4.0 / (128.0 * 128.0),
            LinearQuant::Nvfp4 => 0.5 + 1.0 / 16.0,
            LinearQuant::W4A16Int4 => 0.5 + 2.0 / 32.0,
        }
    }

    /// Whether the weights are stored as MXFP4 (payload + one scale per group).
    pub fn is_mxfp4(self) -> bool {
        matches!(self, LinearQuant::Mxfp4 | LinearQuant::W4A16Mxfp4 | LinearQuant::W4A8Mxfp4Mxfp8)
    }

    /// MXFP4 weights as a serving engine's kernels multiply them (`kernel`) on a device with
    /// or without FP4 tensor cores; any other quantization is returned as it is.
    pub fn with_mxfp4_kernel(self, kernel: Mxfp4Kernel, fp4_tensor_cores: bool) -> LinearQuant {
        if !self.is_mxfp4() {
            return self;
        }
        match kernel {
            Mxfp4Kernel::Native => self,
            Mxfp4Kernel::Bf16 => LinearQuant::W4A16Mxfp4,
            Mxfp4Kernel::Mxfp8 if fp4_tensor_cores => LinearQuant::W4A8Mxfp4Mxfp8,
            Mxfp4Kernel::Mxfp8 => LinearQuant::W4A16Mxfp4,
        }
    }

    /// Bytes per per-output-channel scale (fp32) for the integer formats.
    pub fn channel_scale_bytes(self) -> f64 {
        match self {
            LinearQuant::Disabled
            | LinearQuant::Mxfp4
            | LinearQuant::W4A16Mxfp4
            | LinearQuant::W4A8Mxfp4Mxfp8
            | LinearQuant::Fp8Block
            | LinearQuant::Nvfp4
            | LinearQuant::W4A16Int4 => 0.0,
            _ => 4.0,
        }
    }

    /// The dtype whose matrix peak prices the GEMM. The original keys quantized GEMMs on the
    /// activation dtype: int8 for W8A8/W8A16/W4A8/FP8 (its FP8 path quantizes activations to
    /// int8), fp4 for MXFP4. The MXFP4-weight kernels of serving engines run at the rate of
    /// their activation type: bf16 (W4A16), fp8 (MXFP8 activations).
    pub fn gemm_dtype(self) -> Dtype {
        match self {
            LinearQuant::Disabled | LinearQuant::W4A16Mxfp4 | LinearQuant::W4A16Int4 => MODEL_DTYPE,
            LinearQuant::Mxfp4 | LinearQuant::Nvfp4 => Dtype::Fp4,
            LinearQuant::W4A8Mxfp4Mxfp8 | LinearQuant::Fp8Block => Dtype::Fp8,
            _ => Dtype::Int8,
        }
    }

    /// Bytes per activation element read by the GEMM.
    pub fn activation_bytes(self, mxfp4_group: u32) -> f64 {
        match self.act_quant() {
            ActQuant::None => 2.0,
            ActQuant::Static | ActQuant::Dynamic => 1.0,
            ActQuant::Mxfp4 => 0.5 + 1.0 / mxfp4_group.max(1) as f64,
            ActQuant::Mxfp8 => 1.0 + 1.0 / mxfp4_group.max(1) as f64,
            ActQuant::Fp8Group => 1.0 + 4.0 / 128.0,
            ActQuant::Nvfp4 => 0.5 + 1.0 / 16.0,
        }
    }

    pub fn act_quant(self) -> ActQuant {
        match self {
            LinearQuant::Disabled | LinearQuant::W4A16Mxfp4 | LinearQuant::W4A16Int4 => ActQuant::None,
            LinearQuant::W8A16Static | LinearQuant::W8A8Static | LinearQuant::W4A8Static => ActQuant::Static,
            LinearQuant::W8A16Dynamic | LinearQuant::W8A8Dynamic | LinearQuant::W4A8Dynamic | LinearQuant::Fp8 => ActQuant::Dynamic,
            LinearQuant::Mxfp4 => ActQuant::Mxfp4,
            LinearQuant::W4A8Mxfp4Mxfp8 => ActQuant::Mxfp8,
            LinearQuant::Fp8Block => ActQuant::Fp8Group,
            LinearQuant::Nvfp4 => ActQuant::Nvfp4,
        }
    }

    /// fp32 vector FLOPs per weight element spent dequantizing weights at every call (W4A8).
    ///
    /// MXFP4 weights feeding bf16 tensor cores are converted in software on the CUDA cores
    /// (Hopper has no FP4 conversion instruction). The kernel vLLM and TensorRT-LLM run on
    /// Hopper (OpenAI's `triton_kernels` grouped GEMM, its Hopper value layout) unpacks each
    /// 32-bit word of eight FP4 values with 13 integer instructions (shifts, masks, ors) and
    /// four paired bf16 multiplies that restore the exponent bias, then multiplies each value
    /// by its group scale (eight bf16 multiplies). Priced at the FP32 issue rate (an FMA = 2
    /// FLOPs; Hopper issues integer instructions at half that rate, 4 FLOP-equivalents each;
    /// a bf16 multiply issues like an FMA, 2): (13 × 4 + 4 × 2 + 8 × 2) / 8 = 9.5 per weight.
    /// This is why vLLM's gpt-oss decode on H200 measures within 5 % of H100 despite 43 % more
    /// HBM bandwidth: the conversion, not the weight stream, bounds the kernel. Fitted on the
    /// measured runs with this price, vLLM's grouped-GEMM efficiency on H100 and H200 comes out
    /// at 1.02 and 0.99 (docs/validation.md). Devices with FP4 tensor cores (Blackwell) convert FP4
    /// pairs in one instruction: 1.
    pub fn dequant_flops_per_weight(self, fp4_tensor_cores: bool) -> f64 {
        match self {
            LinearQuant::W4A16Mxfp4 if fp4_tensor_cores => 1.0,
            LinearQuant::W4A16Mxfp4 => 9.5,
            // INT4 → bf16 in registers by magic-number bit tricks (Marlin: one lop3 and one
            // bf16 FMA per pair of values), then one multiply by the group scale.
            LinearQuant::W4A8Static | LinearQuant::W4A8Dynamic | LinearQuant::W4A16Int4 => 1.0,
            _ => 0.0,
        }
    }
}

impl KvQuant {
    pub fn bytes(self) -> f64 {
        match self {
            KvQuant::Disabled => MODEL_DTYPE.bytes(),
            KvQuant::Int8 | KvQuant::Fp8 => 1.0,
        }
    }
    /// Vector FLOPs per (query, key) pair and head spent dequantizing KV in attention.
    pub fn dequant_flops_per_pair_head(self) -> f64 {
        match self {
            KvQuant::Disabled => 0.0,
            KvQuant::Int8 => 4.0,
            KvQuant::Fp8 => 2.0,
        }
    }
}

/// The quantization of one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QuantConfig {
    /// All decoder linears, routed experts included (lm_head is never quantized).
    pub linear: LinearQuant,
    /// Overrides `linear` for attention, dense-MLP and shared-expert projections.
    pub non_expert: Option<LinearQuant>,
    /// Overrides both for the token mixer's projections (attention's, a linear-attention or
    /// Mamba-2 mixer's): a checkpoint that stores them apart from its MLPs (NVIDIA's mixed
    /// NVFP4 releases keep them in FP8). Only a checkpoint sets it; no flag does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<LinearQuant>,
    pub kv: KvQuant,
    pub mxfp4_group_size: u32,
}

impl QuantConfig {
    /// The quantization a checkpoint ships in: its linears as stored (MXFP4 experts with the
    /// rest bf16 for gpt-oss), the KV cache in the model's dtype.
    pub fn checkpoint(model: &crate::model::ModelArch) -> QuantConfig {
        use crate::model::WeightFormat;
        let (linear, non_expert) = match model.weights {
            WeightFormat::Bf16 => (LinearQuant::Disabled, None),
            WeightFormat::Fp8Tensor => (LinearQuant::Fp8, None),
            WeightFormat::Fp8Block => (LinearQuant::Fp8Block, None),
            WeightFormat::Nvfp4 => (LinearQuant::Nvfp4, None),
            WeightFormat::Mxfp4Experts if model.is_moe() => (LinearQuant::Mxfp4, Some(LinearQuant::Disabled)),
            WeightFormat::Mxfp4Experts => (LinearQuant::Mxfp4, None),
            WeightFormat::Int4Experts if model.is_moe() => (LinearQuant::W4A16Int4, Some(LinearQuant::Disabled)),
            WeightFormat::Int4Experts => (LinearQuant::W4A16Int4, None),
            // Attention's projections stay bf16; the shared experts and dense MLPs (NVFP4 in the
            // checkpoint) are priced with them, in bf16: `non_expert` covers all three.
            WeightFormat::Nvfp4Mlp if model.is_moe() => (LinearQuant::Nvfp4, Some(LinearQuant::Disabled)),
            WeightFormat::Nvfp4Mlp => (LinearQuant::Nvfp4, None),
            WeightFormat::Nvfp4MlpFp8Attention => (LinearQuant::Nvfp4, None),
            WeightFormat::Nvfp4ExpertsFp8 if model.is_moe() => (LinearQuant::Nvfp4, Some(LinearQuant::Fp8)),
            WeightFormat::Nvfp4ExpertsFp8 => (LinearQuant::Fp8, None),
        };
        let attention = match model.weights {
            WeightFormat::Nvfp4MlpFp8Attention => Some(LinearQuant::Fp8),
            // A dense network's MLPs in NVFP4 and its attention in bf16 (a MoE's `non_expert`
            // already keeps attention in bf16).
            WeightFormat::Nvfp4Mlp if !model.is_moe() => Some(LinearQuant::Disabled),
            _ => None,
        };
        let kv = if model.fp8_kv_cache { KvQuant::Fp8 } else { KvQuant::Disabled };
        QuantConfig { linear, non_expert, attention, kv, mxfp4_group_size: 32 }
    }

    pub fn for_experts(&self) -> LinearQuant {
        self.linear
    }
    pub fn for_non_experts(&self) -> LinearQuant {
        self.non_expert.unwrap_or(self.linear)
    }
    pub fn for_attention(&self) -> LinearQuant {
        self.attention.unwrap_or(self.for_non_experts())
    }
    /// How a report names the linears' precision: one format, or experts and the rest apart,
    /// and the mixers' projections where a checkpoint stores them apart.
    pub fn describe_linears(&self) -> String {
        let (e, o) = (self.for_experts(), self.for_non_experts());
        let mut s = if e == o { e.name().to_string() } else { format!("{} (experts), {} (other linears)", e.name(), o.name()) };
        if let Some(a) = self.attention.filter(|a| *a != o) {
            s = format!("{s}, {} (attention projections)", a.name());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_is_case_insensitive_and_accepts_kebab_case() {
        assert_eq!(LinearQuant::parse_named("w8a8-dynamic").unwrap(), LinearQuant::W8A8Dynamic);
        assert_eq!(LinearQuant::parse_named("MXFP4").unwrap(), LinearQuant::Mxfp4);
        assert_eq!(KvQuant::parse_named("disabled").unwrap(), KvQuant::Disabled);
        let e = KvQuant::parse_choice("int4").unwrap_err();
        assert_eq!(e, ChoiceError { value: "int4".into(), choices: "DISABLED, INT8, FP8".into() });
        assert_eq!(e.to_string(), "`int4` is not one of DISABLED, INT8, FP8");
    }

    #[test]
    fn mxfp4_weights_run_at_the_rate_of_the_engines_kernels() {
        // Fails if an MXFP8-activation kernel is assumed on a device without FP4 tensor cores
        // (TensorRT-LLM runs gpt-oss's experts as W4A16 on Hopper), or if the native MXFP4
        // convention (msmodeling) is rewritten.
        use Mxfp4Kernel::*;
        let q = LinearQuant::Mxfp4;
        assert_eq!(q.with_mxfp4_kernel(Native, true), LinearQuant::Mxfp4);
        assert_eq!(q.with_mxfp4_kernel(Bf16, true), LinearQuant::W4A16Mxfp4);
        assert_eq!(q.with_mxfp4_kernel(Mxfp8, true), LinearQuant::W4A8Mxfp4Mxfp8);
        assert_eq!(q.with_mxfp4_kernel(Mxfp8, false), LinearQuant::W4A16Mxfp4);
        assert_eq!(LinearQuant::Fp8.with_mxfp4_kernel(Bf16, true), LinearQuant::Fp8);
        // Same bytes in memory whatever the kernel; the GEMM rate and the activations differ.
        assert_eq!(LinearQuant::W4A16Mxfp4.weight_bytes(32), LinearQuant::Mxfp4.weight_bytes(32));
        assert_eq!(LinearQuant::W4A16Mxfp4.gemm_dtype(), Dtype::Bf16);
        assert_eq!(LinearQuant::W4A16Mxfp4.act_quant(), ActQuant::None);
        assert_eq!(LinearQuant::W4A8Mxfp4Mxfp8.gemm_dtype(), Dtype::Fp8);
        assert_eq!(LinearQuant::W4A8Mxfp4Mxfp8.activation_bytes(32), 1.03125);
    }

    #[test]
    fn bytes_follow_the_reference_table() {
        assert_eq!(LinearQuant::Disabled.weight_bytes(32), 2.0);
        assert_eq!(LinearQuant::W8A8Dynamic.weight_bytes(32), 1.0);
        assert_eq!(LinearQuant::W4A8Static.weight_bytes(32), 0.5);
        assert_eq!(LinearQuant::Mxfp4.weight_bytes(32), 0.53125);
        assert_eq!(LinearQuant::Fp8.gemm_dtype(), Dtype::Int8);
        assert_eq!(KvQuant::Int8.bytes(), 1.0);
        assert_eq!(KvQuant::Disabled.bytes(), 2.0);
        // INT4 in groups of 32 with a bf16 scale: 4.5 bits a weight; bf16 activations and MMA.
        assert_eq!(LinearQuant::W4A16Int4.weight_bytes(32), 0.5625);
        assert_eq!(LinearQuant::W4A16Int4.gemm_dtype(), Dtype::Bf16);
        assert_eq!(LinearQuant::W4A16Int4.activation_bytes(32), 2.0);
        assert_eq!(LinearQuant::W4A16Int4.channel_scale_bytes(), 0.0);
    }

    #[test]
    fn checkpoints_of_kimi_k25_and_nvidias_nvfp4_glm5_price_their_experts_apart() {
        // Kimi-K2.5: INT4 weight-only routed experts, every other linear bf16, bf16 KV.
        let kimi = crate::model::catalog::find("moonshotai/Kimi-K2.5").unwrap();
        let q = QuantConfig::checkpoint(&kimi);
        assert_eq!((q.linear, q.non_expert, q.kv), (LinearQuant::W4A16Int4, Some(LinearQuant::Disabled), KvQuant::Disabled));
        // NVIDIA's NVFP4 GLM-5: NVFP4 experts, bf16 attention, FP8 KV.
        let mut glm = crate::model::catalog::find("zai-org/GLM-5").unwrap();
        (glm.weights, glm.fp8_kv_cache) = (crate::model::WeightFormat::Nvfp4Mlp, true);
        let q = QuantConfig::checkpoint(&glm);
        assert_eq!((q.linear, q.non_expert, q.kv), (LinearQuant::Nvfp4, Some(LinearQuant::Disabled), KvQuant::Fp8));
        // NVIDIA's NVFP4 Gemma 4 31B, a dense network: NVFP4 MLPs, bf16 attention. (Mutation:
        // drop the dense case and its attention reads NVFP4.)
        let gemma = crate::model::catalog::find("nvidia/Gemma-4-31B-IT-NVFP4").unwrap();
        let q = QuantConfig::checkpoint(&gemma);
        assert_eq!((q.for_non_experts(), q.for_attention()), (LinearQuant::Nvfp4, LinearQuant::Disabled));
    }
}
