//! What a simulation measures: per-request latencies (TTFT, TPOT both ways, E2E, queueing),
//! inter-token gaps per step, throughput over the measurement window, KV utilisation, batch
//! sizes and where step time went. Percentiles come from hdrhistogram; means are exact.

use crate::cost::Breakdown;
use crate::util::round_to_u64;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Mean and percentiles of one latency, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stat {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub count: u64,
}

impl Stat {
    /// The statistic `--slo-percentile` selects.
    pub fn pick(&self, which: Percentile) -> f64 {
        match which {
            Percentile::Mean => self.mean,
            Percentile::P50 => self.p50,
            Percentile::P90 => self.p90,
            Percentile::P95 => self.p95,
            Percentile::P99 => self.p99,
        }
    }
}

/// Which statistic of a latency the SLO applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Percentile {
    Mean,
    P50,
    P90,
    P95,
    P99,
}
crate::quant::named_enum!(Percentile { Mean => "mean", P50 => "p50", P90 => "p90", P95 => "p95", P99 => "p99" });

impl Percentile {
    /// Requests a measurement needs for this statistic to rest on more than a handful of
    /// values: five beyond a tail percentile (none for the mean and median).
    pub fn min_sample(self) -> u64 {
        match self {
            Percentile::Mean | Percentile::P50 => 0,
            Percentile::P90 => 50,
            Percentile::P95 => 100,
            Percentile::P99 => 500,
        }
    }
}

/// A latency recorder: exact sum for the mean, a histogram (µs, 3 significant digits) for
/// percentiles. The histogram starts small and grows to the largest value recorded (up to
/// 11.6 days, the clamp): a recorder sized for that range up front costs 254 KB zeroed per
/// recorder and dozens of recorders per probe, while latencies of a second need about 80 KB.
/// Quantiles do not depend on the range (the buckets of 3 significant digits are the same).
#[derive(Debug, Clone)]
pub struct Recorder {
    hist: Histogram<u64>,
    sum_ms: f64,
    count: u64,
}

const MAX_US: u64 = 1_000_000_000_000; // 11.6 days

impl Default for Recorder {
    fn default() -> Self {
        let mut hist = Histogram::new(3).expect("3 significant digits are valid");
        hist.auto(true);
        Recorder { hist, sum_ms: 0.0, count: 0 }
    }
}

impl Recorder {
    /// Record `n` samples of `ms` milliseconds with one call.
    pub fn record_n(&mut self, ms: f64, n: u64) {
        if n == 0 || !ms.is_finite() {
            return;
        }
        let us = round_to_u64(ms * 1000.0).clamp(1, MAX_US);
        // `record_n` grows the histogram; the saturating variant would clamp to its current
        // top instead (and `us` is already within the range it can grow to).
        if self.hist.record_n(us, n).is_err() {
            self.hist.saturating_record_n(us, n);
        }
        self.sum_ms += ms * n as f64;
        self.count += n;
    }

    pub fn record(&mut self, ms: f64) {
        self.record_n(ms, 1);
    }

    /// A recorder holding `samples` (in milliseconds).
    pub fn of(samples: &[f64]) -> Self {
        let mut r = Recorder::default();
        for &ms in samples {
            r.record(ms);
        }
        r
    }

    pub fn stat(&self) -> Stat {
        if self.count == 0 {
            return Stat::default();
        }
        let q = |p: f64| self.hist.value_at_quantile(p) as f64 / 1000.0;
        Stat { mean: self.sum_ms / self.count as f64, p50: q(0.50), p90: q(0.90), p95: q(0.95), p99: q(0.99), count: self.count }
    }

    pub fn count(&self) -> u64 {
        self.count
    }
}

/// Latency statistics of a simulated run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyStats {
    pub ttft: Stat,
    /// (finish − first token) / (O − 1) per request.
    pub tpot_inter_token: Stat,
    /// E2E / O per request.
    pub tpot_amortized: Stat,
    /// Gap between consecutive token deliveries of a sequence.
    pub itl: Stat,
    pub e2e: Stat,
    /// Arrival → first scheduled.
    pub queueing: Stat,
}

/// Latencies of the requests whose prompt length fell in one bin of the input distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BinStat {
    pub min_tokens: u64,
    pub max_tokens: u64,
    pub requests: u64,
    pub ttft: Stat,
    pub tpot_inter_token: Stat,
}

/// Everything a simulation reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimReport {
    pub latency: LatencyStats,
    /// Output tokens/s over the measurement window, all simulated instances.
    pub output_throughput: f64,
    /// Prompt tokens/s of requests whose prefill completed in the window.
    pub input_throughput: f64,
    /// Input + output tokens/s over the window.
    pub total_throughput: f64,
    /// Completed requests/s over the window.
    pub request_rate: f64,
    /// Share of measured requests meeting both latency limits.
    pub goodput: f64,
    /// Time-weighted mean share of KV blocks in use.
    pub kv_utilization: f64,
    /// Peak share of KV blocks in use.
    pub kv_peak_utilization: f64,
    /// Mean sequences per step.
    pub mean_batch_size: f64,
    /// Mean new tokens per step.
    pub mean_step_tokens: f64,
    /// Mean step time, ms.
    pub mean_step_ms: f64,
    /// Time-weighted share of step time by bound.
    pub breakdown: Breakdown,
    pub steps: u64,
    pub completed: u64,
    pub measured: u64,
    pub preemptions: u64,
    /// The measurement window in simulated seconds.
    pub window_s: f64,
    pub makespan_s: f64,
    /// Whether the stopping rule was met (closed loop: the batch means settled, see [`super::steady`]).
    pub converged: bool,
    /// The run stopped early because its latencies were far past the limits.
    pub abandoned: bool,
    pub kv_capacity_blocks: u64,
    /// Output tokens the steps emitted over the whole run, counted as they are emitted.
    #[serde(default)]
    pub tokens_emitted: u64,
    /// KV blocks requests still held when the run ended, over all instances (unreferenced
    /// cached prefixes excluded): zero once every request has finished.
    #[serde(default)]
    pub kv_held_at_end: u64,
    /// Share of the admitted requests' prompt tokens found in the KV cache when first admitted
    /// (shared prefixes and `--prefix-cache-hit-rate`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prefix_cache_hit_rate: f64,
    /// Per input-length bin (variable-length workloads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<BinStat>,
}

/// Serde: figures that are absent when zero.
pub fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

#[cfg(test)]
mod recorder_tests {
    use super::*;

    #[test]
    fn a_growing_recorder_gives_the_percentiles_of_one_sized_for_the_whole_range() {
        // Mutation: record with `saturating_record_n` on the growing histogram — values above
        // its initial top are clamped and every tail percentile comes out wrong (0 or tiny).
        let samples: Vec<f64> = (0..2000).map(|i| 0.001 * 1.013f64.powi(i)).collect();
        let growing = Recorder::of(&samples);
        let mut fixed = Histogram::<u64>::new_with_bounds(1, MAX_US, 3).unwrap();
        for &ms in &samples {
            fixed.saturating_record(((ms * 1000.0).round() as u64).clamp(1, MAX_US));
        }
        let s = growing.stat();
        for (p, got) in [(0.5, s.p50), (0.9, s.p90), (0.99, s.p99)] {
            assert_eq!(got, fixed.value_at_quantile(p) as f64 / 1000.0, "p{p}");
        }
        assert!(s.p99 > 1e6, "the tail reaches past 1000 s: {}", s.p99);
    }
}
