//! Quantization actions → bytes per weight / activation / KV element and the dtype a GEMM is
//! priced at (the original tool's quantization conventions).

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
            LinearQuant::Mxfp4 => 0.5 + 1.0 / mxfp4_group.max(1) as f64,
        }
    }

    /// Bytes per per-output-channel scale (fp32) for the integer formats.
    pub fn channel_scale_bytes(self) -> f64 {
        match self {
            LinearQuant::Disabled | LinearQuant::Mxfp4 => 0.0,
            _ => 4.0,
        }
    }

    /// The dtype whose matrix peak prices the GEMM. The original keys quantized GEMMs on the
    /// activation dtype: int8 for W8A8/W8A16/W4A8/FP8 (its FP8 path quantizes activations to
    /// int8), fp4 for MXFP4.
    pub fn gemm_dtype(self) -> Dtype {
        match self {
            LinearQuant::Disabled => MODEL_DTYPE,
            LinearQuant::Mxfp4 => Dtype::Fp4,
            _ => Dtype::Int8,
        }
    }

    /// Bytes per activation element read by the GEMM.
    pub fn activation_bytes(self, mxfp4_group: u32) -> f64 {
        match self.act_quant() {
            ActQuant::None => 2.0,
            ActQuant::Static | ActQuant::Dynamic => 1.0,
            ActQuant::Mxfp4 => 0.5 + 1.0 / mxfp4_group.max(1) as f64,
        }
    }

    pub fn act_quant(self) -> ActQuant {
        match self {
            LinearQuant::Disabled => ActQuant::None,
            LinearQuant::W8A16Static | LinearQuant::W8A8Static | LinearQuant::W4A8Static => ActQuant::Static,
            LinearQuant::W8A16Dynamic | LinearQuant::W8A8Dynamic | LinearQuant::W4A8Dynamic | LinearQuant::Fp8 => ActQuant::Dynamic,
            LinearQuant::Mxfp4 => ActQuant::Mxfp4,
        }
    }

    /// fp32 vector FLOPs per weight element spent dequantizing weights at every call (W4A8).
    pub fn dequant_flops_per_weight(self) -> f64 {
        match self {
            LinearQuant::W4A8Static | LinearQuant::W4A8Dynamic => 1.0,
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
    pub kv: KvQuant,
    pub mxfp4_group_size: u32,
}

impl QuantConfig {
    pub fn for_experts(&self) -> LinearQuant {
        self.linear
    }
    pub fn for_non_experts(&self) -> LinearQuant {
        self.non_expert.unwrap_or(self.linear)
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
    fn bytes_follow_the_reference_table() {
        assert_eq!(LinearQuant::Disabled.weight_bytes(32), 2.0);
        assert_eq!(LinearQuant::W8A8Dynamic.weight_bytes(32), 1.0);
        assert_eq!(LinearQuant::W4A8Static.weight_bytes(32), 0.5);
        assert_eq!(LinearQuant::Mxfp4.weight_bytes(32), 0.53125);
        assert_eq!(LinearQuant::Fp8.gemm_dtype(), Dtype::Int8);
        assert_eq!(KvQuant::Int8.bytes(), 1.0);
        assert_eq!(KvQuant::Disabled.bytes(), 2.0);
    }
}
