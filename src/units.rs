//! Quantities with units as written in profile files ("64 GiB", "1.6 TiB/s", "196 GB/s").
//!
//! Profiles mix binary (the original tool's Ascend numbers are TiB/s and GiB) and decimal units
//! (NVIDIA datasheets); writing the unit next to the number keeps both exact and readable.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

const KIB: f64 = 1024.0;

/// A quantity that is not a number followed by a known unit; `what` is "size" or "bandwidth".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("`{text}` is not a number followed by a {what} unit")]
    NotANumber { text: String, what: &'static str },
    #[error("`{text}` must be a non-negative finite {what}")]
    OutOfRange { text: String, what: &'static str },
    #[error("`{text}` has no {what} unit; write a number followed by one of: {units}")]
    NoUnit { text: String, what: &'static str, units: String },
}

fn parse_scaled(text: &str, suffixes: &[(&str, f64)], what: &'static str) -> Result<f64, ParseError> {
    let t = text.trim();
    // Longest suffix first so "TiB/s" wins over "B/s".
    let mut sorted: Vec<&(&str, f64)> = suffixes.iter().collect();
    sorted.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    for (suffix, scale) in sorted {
        if let Some(num) = t.strip_suffix(suffix) {
            let num = num.trim();
            let v: f64 = num.parse().map_err(|_| ParseError::NotANumber { text: text.to_string(), what })?;
            if !v.is_finite() || v < 0.0 {
                return Err(ParseError::OutOfRange { text: text.to_string(), what });
            }
            return Ok(v * scale);
        }
    }
    let units: Vec<&str> = suffixes.iter().map(|(s, _)| *s).collect();
    Err(ParseError::NoUnit { text: text.to_string(), what, units: units.join(", ") })
}

const BYTE_UNITS: &[(&str, f64)] =
    &[("TiB", KIB * KIB * KIB * KIB), ("GiB", KIB * KIB * KIB), ("MiB", KIB * KIB), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)];

const BANDWIDTH_UNITS: &[(&str, f64)] =
    &[("TiB/s", KIB * KIB * KIB * KIB), ("GiB/s", KIB * KIB * KIB), ("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6)];

/// A size in bytes, written with a unit in YAML.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bytes {
    pub bytes: f64,
    text: UnitText,
}

/// A bandwidth in bytes per second, written with a unit in YAML.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bandwidth {
    pub bytes_per_s: f64,
    text: UnitText,
}

/// The number and unit as the user wrote them, so a profile round-trips unchanged.
#[derive(Debug, Clone, Copy, PartialEq)]
struct UnitText {
    value: f64,
    unit: &'static str,
}

impl Bytes {
    pub fn gib(v: f64) -> Self {
        Bytes { bytes: v * KIB * KIB * KIB, text: UnitText { value: v, unit: "GiB" } }
    }
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let bytes = parse_scaled(text, BYTE_UNITS, "size")?;
        Ok(Bytes { bytes, text: unit_text(text, BYTE_UNITS) })
    }
}

impl Bandwidth {
    pub fn gb_s(v: f64) -> Self {
        Bandwidth { bytes_per_s: v * 1e9, text: UnitText { value: v, unit: "GB/s" } }
    }
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let b = parse_scaled(text, BANDWIDTH_UNITS, "bandwidth")?;
        Ok(Bandwidth { bytes_per_s: b, text: unit_text(text, BANDWIDTH_UNITS) })
    }
}

fn unit_text(text: &str, units: &[(&'static str, f64)]) -> UnitText {
    let t = text.trim();
    let mut best: Option<&'static str> = None;
    for (u, _) in units {
        if t.ends_with(u) && best.is_none_or(|b| u.len() > b.len()) {
            best = Some(u);
        }
    }
    let unit = best.unwrap_or("");
    let value = t[..t.len() - unit.len()].trim().parse().unwrap_or(0.0);
    UnitText { value, unit }
}

impl fmt::Display for UnitText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.value, self.unit)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.text.fmt(f)
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.text.fmt(f)
    }
}

macro_rules! serde_via_text {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                <$ty>::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_via_text!(Bytes);
serde_via_text!(Bandwidth);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_and_decimal_units() {
        assert_eq!(Bytes::parse("64 GiB").unwrap().bytes, 64.0 * 1024f64.powi(3));
        assert_eq!(Bytes::parse("80GB").unwrap().bytes, 80e9);
        assert_eq!(Bandwidth::parse("1.6 TiB/s").unwrap().bytes_per_s, 1.6 * 1024f64.powi(4));
        assert_eq!(Bandwidth::parse("196 GB/s").unwrap().bytes_per_s, 196e9);
        assert_eq!(Bandwidth::parse("3.35 TB/s").unwrap().to_string(), "3.35 TB/s");
    }

    #[test]
    fn rejects_missing_unit_and_negative() {
        let e = Bytes::parse("64").unwrap_err();
        assert!(e.to_string().contains("no size unit"), "{e}");
        // Fails if parse_scaled lets negative quantities through.
        assert!(matches!(Bandwidth::parse("-1 GB/s"), Err(ParseError::OutOfRange { what: "bandwidth", .. })));
        assert!(Bandwidth::parse("fast GB/s").is_err());
    }
}
