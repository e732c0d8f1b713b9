//! Length distributions: YAML `bins` of `[min_tokens, max_tokens)` with weights, the original's
//! representative rows (bin midpoints) and deterministic compositions of a batch by the
//! largest-remainder method.

use crate::yaml;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Most bins a distribution may have: each is a representative row of every batch composition
/// and a line of the per-bin latency table.
pub const MAX_BINS: usize = 1000;
/// Largest bin weight: weights are relative, and [`MAX_BINS`] of them must sum to a finite number.
pub const MAX_WEIGHT: f64 = 1e12;

/// The built-in distribution (`--length-distribution` without a file).
pub const BUILTIN_TEXT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/distributions/default.yaml"));

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthBin {
    pub min_tokens: u64,
    pub max_tokens: u64,
    pub weight: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DistributionFile {
    bins: Vec<LengthBin>,
    #[serde(default)]
    output_bins: Option<Vec<LengthBin>>,
}

/// Validated bins (sorted by `min_tokens`), plus optional output-length bins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LengthDistribution {
    /// Where it came from ("built-in" or the file path).
    pub source: String,
    pub bins: Vec<LengthBin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bins: Option<Vec<LengthBin>>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{flag} {path}: {message}")]
pub struct LengthError {
    pub flag: String,
    pub path: String,
    pub message: String,
}

/// A bin's representative request: original length, prefill length after the prefix cache,
/// and the normalised share of requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Representative {
    pub num_input_tokens: u64,
    pub query_len: u64,
    pub request_ratio: f64,
}

/// How many requests of each representative length make up a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Composition {
    pub rows: Vec<(Representative, u64)>,
}

impl Composition {
    pub fn total(&self) -> u64 {
        self.rows.iter().map(|(_, n)| n).sum()
    }
}

impl LengthDistribution {
    pub fn builtin() -> Self {
        Self::parse(BUILTIN_TEXT, "built-in", "--length-distribution").expect("the built-in distribution is valid")
    }

    pub fn load(path: &Path, flag: &str) -> Result<Self, LengthError> {
        let shown = path.display().to_string();
        let text = crate::util::read_bounded(path, crate::util::MAX_CONFIG_BYTES).map_err(|e| LengthError {
            flag: flag.into(),
            path: shown.clone(),
            message: e.to_string(),
        })?;
        Self::parse(&text, &shown, flag)
    }

    pub fn parse(text: &str, source: &str, flag: &str) -> Result<Self, LengthError> {
        let err = |message: String| LengthError { flag: flag.into(), path: source.into(), message };
        let file: DistributionFile = yaml::from_str(text).map_err(|e| err(e.to_string()))?;
        let bins = validate_bins(file.bins, text, "bins").map_err(&err)?;
        let output_bins = match file.output_bins {
            Some(b) => Some(validate_bins(b, text, "output_bins").map_err(&err)?),
            None => None,
        };
        Ok(LengthDistribution { source: source.to_string(), bins, output_bins })
    }

    /// One row per bin: `floor((min + max) / 2)` tokens, `max(1, rep − floor(rep × hit))`
    /// after the prefix cache, weight / Σ weights.
    pub fn representatives(&self, hit_rate: f64) -> Vec<Representative> {
        representatives(&self.bins, hit_rate)
    }

    pub fn output_representatives(&self) -> Option<Vec<Representative>> {
        self.output_bins.as_ref().map(|b| representatives(b, 0.0))
    }

    /// Mean output length of the `output_bins` (as [`Self::effective_length`] computes it for
    /// prompts), when the file gives output bins.
    pub fn output_mean(&self) -> Option<u64> {
        self.output_representatives()
            .map(|reps| (reps.iter().map(|r| r.query_len as f64 * r.request_ratio).sum::<f64>().floor() as u64).max(1))
    }

    /// `max(1, floor(Σ query_len × ratio))`.
    pub fn effective_length(&self, hit_rate: f64) -> u64 {
        let s: f64 = self.representatives(hit_rate).iter().map(|r| r.query_len as f64 * r.request_ratio).sum();
        (s.floor() as u64).max(1)
    }

    /// Split `count` requests over the bins: `floor(count × ratio)` each, the rest one by one
    /// to the largest fractional remainders (ties to the longer request).
    pub fn compose(&self, count: u64, hit_rate: f64) -> Composition {
        compose(&self.representatives(hit_rate), count)
    }
}

fn representatives(bins: &[LengthBin], hit_rate: f64) -> Vec<Representative> {
    let total: f64 = bins.iter().map(|b| b.weight).sum();
    bins.iter()
        .map(|b| {
            let rep = (b.min_tokens + b.max_tokens) / 2;
            let query = crate::workload::effective_length(rep, hit_rate);
            Representative { num_input_tokens: rep, query_len: query, request_ratio: b.weight / total }
        })
        .collect()
}

pub(crate) fn compose(reps: &[Representative], count: u64) -> Composition {
    let ideal: Vec<f64> = reps.iter().map(|r| count as f64 * r.request_ratio).collect();
    let mut n: Vec<u64> = ideal.iter().map(|x| x.floor() as u64).collect();
    let assigned: u64 = n.iter().sum();
    let mut order: Vec<usize> = (0..reps.len()).collect();
    order.sort_by(|&a, &b| {
        let ra = ideal[a] - ideal[a].floor();
        let rb = ideal[b] - ideal[b].floor();
        rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal).then(reps[b].query_len.cmp(&reps[a].query_len))
    });
    for &i in order.iter().take(count.saturating_sub(assigned) as usize) {
        n[i] += 1;
    }
    Composition { rows: reps.iter().copied().zip(n).filter(|(_, k)| *k > 0).collect() }
}

fn validate_bins(mut bins: Vec<LengthBin>, text: &str, key: &str) -> Result<Vec<LengthBin>, String> {
    if bins.is_empty() {
        let line = yaml::line_of_key(text, key, 1).map(|l| format!("line {l}: ")).unwrap_or_default();
        return Err(format!("{line}`{key}` needs at least one bin"));
    }
    if bins.len() > MAX_BINS {
        let line = yaml::line_of_key(text, key, 1).map(|l| format!("line {l}: ")).unwrap_or_default();
        return Err(format!("{line}`{key}` has {} bins; at most {MAX_BINS} are modelled (merge neighbouring bins)", bins.len()));
    }
    let start = yaml::line_of_key(text, key, 1).unwrap_or(1);
    // Line of the i-th bin in file order, for messages.
    let mut lines = Vec::new();
    let mut from = start;
    for _ in 0..bins.len() {
        let l = yaml::line_of_key(text, "min_tokens", from).unwrap_or(from);
        lines.push(l);
        from = l + 1;
    }
    for (i, b) in bins.iter().enumerate() {
        let at = format!("line {}: {key}[{i}]", lines[i]);
        if b.max_tokens <= b.min_tokens {
            return Err(format!("{at}: `max_tokens` ({}) must be greater than `min_tokens` ({})", b.max_tokens, b.min_tokens));
        }
        if b.max_tokens > crate::workload::MAX_LENGTH {
            return Err(format!("{at}: `max_tokens` ({}) exceeds the limit of {} tokens", b.max_tokens, crate::workload::MAX_LENGTH));
        }
        if !(b.weight.is_finite() && b.weight > 0.0) {
            return Err(format!("{at}: `weight` is {}; it must be a positive number", b.weight));
        }
        if b.weight > MAX_WEIGHT {
            return Err(format!(
                "{at}: `weight` is {:e}; weights are relative, at most {MAX_WEIGHT:e} (their sum must stay finite)",
                b.weight
            ));
        }
    }
    let mut idx: Vec<usize> = (0..bins.len()).collect();
    idx.sort_by_key(|&i| bins[i].min_tokens);
    for w in idx.windows(2) {
        let (a, b) = (&bins[w[0]], &bins[w[1]]);
        if b.min_tokens < a.max_tokens {
            return Err(format!(
                "line {}: {key}[{}] [{}, {}) overlaps {key}[{}] [{}, {})",
                lines[w[1]], w[1], b.min_tokens, b.max_tokens, w[0], a.min_tokens, a.max_tokens
            ));
        }
    }
    bins.sort_by_key(|b| b.min_tokens);
    Ok(bins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_distribution_facts() {
        let d = LengthDistribution::builtin();
        assert_eq!(d.bins.len(), 35);
        // Weighted mean of midpoints 4230.82 ⇒ effective length 4230 (the built-in distribution's documented figure).
        assert_eq!(d.effective_length(0.0), 4230);
        let c8 = d.compose(8, 0.0);
        let got: Vec<(u64, u64)> = c8.rows.iter().map(|(r, n)| (r.num_input_tokens, *n)).collect();
        assert_eq!(got, vec![(250, 2), (750, 1), (1750, 1), (2250, 1), (2750, 1), (3250, 1), (11000, 1)]);
        let c16 = d.compose(16, 0.0);
        let got: Vec<(u64, u64)> = c16.rows.iter().map(|(r, n)| (r.num_input_tokens, *n)).collect();
        assert_eq!(
            got,
            vec![
                (250, 4),
                (750, 1),
                (1250, 1),
                (1750, 1),
                (2250, 1),
                (2750, 1),
                (3250, 1),
                (3750, 1),
                (4250, 1),
                (4750, 1),
                (6250, 1),
                (11000, 1),
                (13000, 1)
            ]
        );
    }

    #[test]
    fn midpoint_average_and_prefix_cache() {
        let d = LengthDistribution::parse(
            "bins:\n  - {min_tokens: 0, max_tokens: 100, weight: 1}\n  - {min_tokens: 1000, max_tokens: 1100, weight: 1}\n",
            "t",
            "--input-length",
        )
        .unwrap();
        assert_eq!(d.effective_length(0.0), 550);
        assert_eq!(d.effective_length(0.5), 275);
        let w = LengthDistribution::parse(
            "bins:\n  - {min_tokens: 0, max_tokens: 100, weight: 3}\n  - {min_tokens: 100, max_tokens: 200, weight: 1}\n",
            "t",
            "x",
        )
        .unwrap();
        let r = w.representatives(0.0);
        assert_eq!((r[0].request_ratio, r[1].request_ratio), (0.75, 0.25));
    }

    #[test]
    fn largest_remainder_sums_to_the_count() {
        let d = LengthDistribution::parse(
            "bins:\n  - {min_tokens: 0, max_tokens: 10, weight: 0.55}\n  - {min_tokens: 10, max_tokens: 20, weight: 0.3}\n  - {min_tokens: 20, max_tokens: 30, weight: 0.15}\n",
            "t",
            "x",
        )
        .unwrap();
        let c = d.compose(7, 0.0);
        assert_eq!(c.rows.iter().map(|(_, n)| *n).collect::<Vec<_>>(), vec![4, 2, 1]);
        assert_eq!(c.total(), 7);
    }

    #[test]
    fn bad_bins_name_line_and_field() {
        let e =
            LengthDistribution::parse("bins:\n  - {min_tokens: 10, max_tokens: 5, weight: 1}\n", "f.yaml", "--input-length").unwrap_err();
        assert_eq!(e.to_string(), "--input-length f.yaml: line 2: bins[0]: `max_tokens` (5) must be greater than `min_tokens` (10)");
        let e = LengthDistribution::parse(
            "bins:\n  - {min_tokens: 0, max_tokens: 50, weight: 1}\n  - {min_tokens: 40, max_tokens: 60, weight: 1}\n",
            "f",
            "x",
        )
        .unwrap_err();
        assert!(e.message.contains("line 3: bins[1] [40, 60) overlaps bins[0] [0, 50)"), "{e}");
        let e = LengthDistribution::parse("bins:\n  - {min_tokens: 0, max_tokens: 50, weight: 0}\n", "f", "x").unwrap_err();
        assert!(e.message.contains("`weight` is 0"), "{e}");
        let e = LengthDistribution::parse("bins:\n  - {min_tokens: 0, max_tokens: 50, wieght: 1}\n", "f", "x").unwrap_err();
        assert!(e.message.contains("unknown field `wieght`") && e.message.contains("line 2"), "{e}");
        let e = LengthDistribution::parse("bins: []\n", "f", "x").unwrap_err();
        assert!(e.message.contains("needs at least one bin"), "{e}");
    }
}
