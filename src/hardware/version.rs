//! A serving engine's release ([`EngineVersion`]): what the engines' version-dependent
//! defaults key on (overlapped scheduling, the sampler of vLLM's memory profiling step).

use serde::{Deserialize, Serialize};

/// A serving engine's release, as its leading numbers (`0.12`, `0.15.1`, `1.0.0rc3` → 1.0.0):
/// what decides the engine's version-dependent defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EngineVersion(pub(super) [u32; 3]);

impl EngineVersion {
    /// The leading `MAJOR[.MINOR[.PATCH]]` of `text` (a suffix such as `rc3` or `.post1` is
    /// ignored, and so is the `v` of a release tag, `v0.12.0`); `None` when `text` does not
    /// start with a number.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = [0u32; 3];
        let text = text.trim();
        let mut rest = text.strip_prefix(['v', 'V']).filter(|r| r.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(text);
        for (i, slot) in parts.iter_mut().enumerate() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return (i > 0).then_some(EngineVersion(parts));
            }
            *slot = rest[..digits].parse().ok()?;
            rest = &rest[digits..];
            match rest.strip_prefix('.') {
                Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => rest = r,
                _ => break,
            }
        }
        Some(EngineVersion(parts))
    }
}

impl std::fmt::Display for EngineVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c] = self.0;
        write!(f, "{a}.{b}.{c}")
    }
}

impl Serialize for EngineVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for EngineVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        EngineVersion::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("`{text}` is not a version (MAJOR.MINOR[.PATCH], e.g. 0.14)")))
    }
}
