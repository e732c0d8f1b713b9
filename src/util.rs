//! Small helpers shared across modules.

/// Levenshtein distance, for "did you mean" hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Up to `n` candidates closest to `needle`, nearest first, only those reasonably close.
pub fn closest<'a>(needle: &str, candidates: &[&'a str], n: usize) -> Vec<&'a str> {
    let lower = needle.to_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .iter()
        .map(|c| {
            let cl = c.to_lowercase();
            let d = if cl.contains(&lower) || lower.contains(&cl) { 0 } else { edit_distance(needle, c) };
            (d, *c)
        })
        .filter(|(d, c)| *d <= (c.len().max(needle.len()) / 2).max(2))
        .collect();
    scored.sort_by_key(|(d, c)| (*d, c.len()));
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

/// Python's `round()` (banker's rounding) for the places where the original relies on it.
pub fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn bankers_rounding_matches_python() {
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(3.5), 4.0);
        assert_eq!(round_half_even(1.5), 2.0);
        assert_eq!(round_half_even(1.49), 1.0);
        assert_eq!(round_half_even(-0.5), -0.0);
    }
    #[test]
    fn closest_prefers_substrings_and_small_edits() {
        let c = ["Qwen/Qwen3-32B", "Qwen/Qwen3-8B", "meta-llama/Meta-Llama-3.1-8B"];
        assert_eq!(closest("qwen3-32b", &c, 2)[0], "Qwen/Qwen3-32B");
        assert!(closest("zzzzzzzzzzzz", &c, 2).is_empty());
    }
}
