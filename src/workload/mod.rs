//! What requests look like: fixed lengths or length distributions (bins with weights), their
//! representative rows and largest-remainder compositions, and (for the simulator) seeded
//! sampling of request streams.

pub mod arrival;
pub mod distribution;
pub mod trace;

pub use distribution::{Composition, LengthBin, LengthDistribution, LengthError, Representative};

use serde::{Deserialize, Serialize};

/// Largest accepted token count for a length (the original's `LIMIT_COUNT`).
pub const MAX_LENGTH: u64 = 100_000_000;

/// A request length: one value, or a distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Lengths {
    Fixed(u64),
    Distribution(LengthDistribution),
}

impl Lengths {
    pub fn is_variable(&self) -> bool {
        matches!(self, Lengths::Distribution(_))
    }

    /// Tokens of prefill work per request after the prefix cache (for a distribution: the
    /// weighted mean of the bins' representative lengths, floored, at least 1).
    pub fn effective(&self, hit_rate: f64) -> u64 {
        match self {
            Lengths::Fixed(n) => effective_length(*n, hit_rate),
            Lengths::Distribution(d) => d.effective_length(hit_rate),
        }
    }

    /// Raw mean length (no prefix cache), as the auto budgets and decode context use it.
    pub fn mean_raw(&self) -> u64 {
        self.effective(0.0)
    }

    /// Longest effective request.
    pub fn max_effective(&self, hit_rate: f64) -> u64 {
        match self {
            Lengths::Fixed(n) => effective_length(*n, hit_rate),
            Lengths::Distribution(d) => d.representatives(hit_rate).iter().map(|r| r.query_len).max().unwrap_or(1),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Lengths::Fixed(n) => n.to_string(),
            Lengths::Distribution(d) => format!("distribution {} ({} bins, mean {})", d.source, d.bins.len(), d.effective_length(0.0)),
        }
    }
}

/// `input − floor(input × hit)`: prefill tokens left after a prefix-cache hit (≥ 1).
pub fn effective_length(input: u64, hit_rate: f64) -> u64 {
    let cached = (input as f64 * hit_rate).floor() as u64;
    input.saturating_sub(cached).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn effective_length_after_prefix_cache() {
        assert_eq!(effective_length(200, 0.5), 100);
        assert_eq!(effective_length(3500, 0.0), 3500);
        assert_eq!(effective_length(3, 0.99), 1);
    }
}
