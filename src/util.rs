//! Small helpers shared across modules.

/// Longest text compared by [`edit_distance`]: the distance costs time quadratic in the
/// lengths, and no name worth suggesting is longer.
pub const MAX_EDIT_LEN: usize = 256;

/// Levenshtein distance (case-insensitive), for "did you mean" hints; texts longer than
/// [`MAX_EDIT_LEN`] are as far as their length.
pub fn edit_distance(a: &str, b: &str) -> usize {
    if a.len() > MAX_EDIT_LEN || b.len() > MAX_EDIT_LEN {
        return a.len().max(b.len());
    }
    strsim::levenshtein(&a.to_lowercase(), &b.to_lowercase())
}

/// Up to `n` candidates closest to `needle`, nearest first, only those reasonably close.
pub fn closest<'a>(needle: &str, candidates: &[&'a str], n: usize) -> Vec<&'a str> {
    if needle.len() > MAX_EDIT_LEN {
        return Vec::new();
    }
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

/// `x` rounded to `digits` significant decimal digits (1 to 17), as the nearest `f64` to
/// that decimal: its shortest representation then has at most `digits` digits
/// (`247.72999999999996` → `247.73` at 6). Zero, infinities and NaN are returned as they are.
pub fn round_significant(x: f64, digits: usize) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // Formatting in scientific notation rounds half to even on the exact binary value, and
    // parsing gives the nearest double to that decimal: deterministic on every platform.
    format!("{:.*e}", digits.clamp(1, 17) - 1, x).parse().unwrap_or(x)
}

/// Python's `round()` (banker's rounding) for the places where the original relies on it.
pub fn round_half_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// `x.round() as u64` (half away from zero; saturating; NaN to 0) without a call: on x86-64
/// without SSE4.1, `f64::round` is a libm call, and the simulator rounds every step's time.
///
/// Exact for every `x`: below 2^53 the fractional part `x - trunc(x)` is computed exactly
/// (for x < 1 it is `x`; above, `trunc(x) ≥ x / 2`, so the subtraction is exact by
/// Sterbenz's lemma), and from 2^53 on `x` is an integer (fraction 0). Negative values and NaN
/// truncate to 0 as the cast of their rounding does.
#[inline]
pub fn round_to_u64(x: f64) -> u64 {
    let t = x as u64;
    if x - t as f64 >= 0.5 {
        t.saturating_add(1)
    } else {
        t
    }
}

/// Why an input file was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read the file: {0}")]
    Io(String),
    #[error("not a regular file; give the path of a file")]
    NotAFile,
    #[error("the file is {size} bytes; at most {cap} bytes are read")]
    TooLarge { size: u64, cap: u64 },
}

/// Cap of a scenario, device-profile, length-distribution or model config file: 16 MiB (the
/// largest real ones are a few kB).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;
/// Cap of an arrival-trace file: 256 MiB (about ten million requests of CSV).
pub const MAX_TRACE_BYTES: u64 = 256 << 20;

/// Read a whole text file after checking that it is a regular file of at most `cap` bytes
/// (never a device such as `/dev/zero` or a FIFO that would be read forever). The read itself
/// is also capped, should the file grow meanwhile.
pub fn read_bounded(path: &std::path::Path, cap: u64) -> Result<String, ReadError> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| ReadError::Io(e.to_string()))?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile);
    }
    if meta.len() > cap {
        return Err(ReadError::TooLarge { size: meta.len(), cap });
    }
    let file = std::fs::File::open(path).map_err(|e| ReadError::Io(e.to_string()))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes).map_err(|e| ReadError::Io(e.to_string()))?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge { size: bytes.len() as u64, cap });
    }
    String::from_utf8(bytes).map_err(|e| ReadError::Io(format!("stream did not contain valid UTF-8 ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_to_u64_is_the_cast_of_round() {
        // Mutation: round with `(x + 0.5) as u64` and 0.49999999999999994 comes out 1 (the sum
        // rounds up to 1.0); drop the saturation and infinity overflows.
        let two52 = 4_503_599_627_370_496.0_f64;
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.49999999999999994,
            1.4999999999999998,
            two52 - 0.5,
            two52,
            two52 + 1.0,
            two52 * 2.0 - 1.0,
            two52 * 2.0,
            1e19,
            1.8446744073709552e19,
            1e300,
            -0.4,
            -0.5,
            -0.7,
            -3.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            3600e9,
            3599.9999999995e9,
        ];
        xs.extend((0..10_000).map(|i| i as f64 * 0.25 + (i % 7) as f64 * 1e-9));
        xs.extend((0..2_000).map(|i| 1.37f64.powi(i % 120) * (1.0 + i as f64 * 1e-7)));
        for x in xs {
            assert_eq!(round_to_u64(x), x.round() as u64, "{x:e}");
            let up = f64::from_bits(x.to_bits() + 1);
            if up.is_finite() {
                assert_eq!(round_to_u64(up), up.round() as u64, "{up:e}");
            }
        }
    }

    #[test]
    fn significant_digits() {
        assert_eq!(round_significant(247.72999999999996, 6), 247.73);
        assert_eq!(round_significant(7.699999999999999, 6), 7.7);
        assert_eq!(round_significant(0.022916666666666665, 6), 0.0229167);
        assert_eq!(round_significant(75453.78123, 6), 75453.8);
        assert_eq!(round_significant(-1.23456, 3), -1.23);
        assert_eq!(round_significant(0.0, 6), 0.0);
        assert!(round_significant(f64::NAN, 6).is_nan());
        assert_eq!(round_significant(f64::INFINITY, 6), f64::INFINITY);
        // The shortest representation has at most 6 digits.
        assert_eq!(round_significant(1.0 / 3.0, 6).to_string(), "0.333333");
    }

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
        // Fails if edit_distance drops its length guard (a 2 MB answer would take seconds).
        let long = "q".repeat(2_000_000);
        let started = std::time::Instant::now();
        assert!(closest(&long, &c, 2).is_empty());
        assert!(started.elapsed().as_secs_f64() < 1.0);
    }
    #[test]
    fn inputs_are_regular_files_under_a_cap() {
        // Fails if read_bounded stops checking the file type (/dev/zero would be read forever).
        assert_eq!(read_bounded(std::path::Path::new("/dev/zero"), 10), Err(ReadError::NotAFile));
        let dir = std::env::temp_dir().join(format!("tput-read-{}", std::process::id()));
        std::fs::write(&dir, "0123456789abc").unwrap();
        // Fails if the size cap is not checked before reading.
        assert_eq!(read_bounded(&dir, 10), Err(ReadError::TooLarge { size: 13, cap: 10 }));
        assert_eq!(read_bounded(&dir, 13).unwrap(), "0123456789abc");
        let _ = std::fs::remove_file(&dir);
    }
}
