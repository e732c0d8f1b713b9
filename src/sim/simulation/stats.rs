//! The run's accumulators, kept as it goes and read by the report: the KV use summed over
//! instances ([`KvUse`]), the step statistics ([`StepStats`]), the measured requests' latencies
//! and counts ([`Measured`], per input bin [`BinTally`]), and what the report needs from the
//! records already folded and dropped ([`Tally`]).

use crate::cost::{BatchShape, Breakdown};
use crate::sim::instance::Instance;
use crate::sim::metrics::Recorder;
use crate::sim::queue::Nanos;

/// (time, output tokens, prefilled prompt tokens) at a window boundary.
pub(super) type Mark = (Nanos, u64, u64);

/// Σ over instances of KV utilization, kept as used blocks per group (instances of a group
/// share one capacity), so accounting it per event costs O(groups), not O(instances). An
/// instance's count is refreshed whenever it was touched: every KV change happens in an
/// event that marks its instance dirty, or while that instance plans.
pub(super) struct KvUse {
    pub(super) seen: Vec<u64>,
    pub(super) by_group: Vec<u64>,
    pub(super) capacity: Vec<f64>,
}

impl KvUse {
    pub(super) fn new(instances: &[Instance], group_of: &[usize], groups: usize) -> Self {
        let mut capacity = vec![1.0; groups];
        for (i, &g) in group_of.iter().enumerate() {
            capacity[g] = instances[i].kv.capacity as f64;
        }
        KvUse { seen: vec![0; instances.len()], by_group: vec![0; groups], capacity }
    }

    pub(super) fn refresh(&mut self, i: usize, g: usize, used: u64) {
        self.by_group[g] = self.by_group[g] + used - self.seen[i];
        self.seen[i] = used;
    }

    /// Σ used / capacity over every instance.
    pub(super) fn utilization_sum(&self) -> f64 {
        self.by_group.iter().zip(&self.capacity).map(|(&u, &c)| u as f64 / c).sum()
    }
}

/// Run-wide step statistics for the report.
#[derive(Default)]
pub(super) struct StepStats {
    pub(super) steps: u64,
    pub(super) batch_sum: u64,
    pub(super) token_sum: u64,
    pub(super) step_time_sum: f64,
    /// ∫ KV utilization dt, summed over instances (ns).
    pub(super) kv_integral: f64,
    pub(super) kv_peak: f64,
    pub(super) breakdown: Breakdown,
    pub(super) breakdown_weight: f64,
}

impl StepStats {
    /// A step of `shape` taking `step_ms`, planned with the instance's KV at `kv_use` of its
    /// capacity.
    pub(super) fn count(&mut self, shape: &BatchShape, step_ms: f64, kv_use: f64) {
        self.steps += 1;
        self.batch_sum += shape.prefill.seqs + shape.decode.seqs;
        self.token_sum += shape.tokens();
        self.step_time_sum += step_ms;
        self.kv_peak = self.kv_peak.max(kv_use);
    }
}

/// Latencies and counts of the measured requests.
#[derive(Default)]
pub(super) struct Measured {
    /// TTFT, inter-token TPOT, amortized TPOT, end-to-end, queueing.
    pub(super) rec: [Recorder; 5],
    /// Inter-token gaps of the measured requests (ITL) recorded one by one: those around the
    /// ends of their decode segments.
    pub(super) itl: Recorder,
    /// Per instance, over its token log: at index k, the change in how many measured requests
    /// have the gap between its decode steps k − 1 and k (a difference array, summed once at
    /// the end), so that a segment of n steps costs O(1), not n histogram records.
    pub(super) itl_cover: Vec<Vec<i64>>,
    pub(super) measured: u64,
    /// Measured requests within both latency limits.
    pub(super) good: u64,
    pub(super) finished_in_window: u64,
    /// Output tokens of the measured requests.
    pub(super) out_tokens: u64,
    /// TTFT and inter-token TPOT per input bin (recorded in request order, as the run-wide
    /// recorders are: a histogram per bin, not the samples, so memory does not grow with the
    /// requests).
    pub(super) per_bin: Vec<BinTally>,
}

impl Measured {
    pub(super) fn new(bins: usize) -> Self {
        Measured { per_bin: (0..bins).map(|_| BinTally::default()).collect(), ..Default::default() }
    }
}

#[derive(Default)]
pub(super) struct BinTally {
    pub(super) requests: u64,
    pub(super) ttft: Recorder,
    pub(super) tpot: Recorder,
}

/// A measurement kept as the records are read (in id order), so that they need
/// not stay in memory: the measured latencies, the lifetimes of the requests between the
/// edges, and the arrival times the window is read from.
pub(super) struct Tally {
    /// Records read so far (ids below).
    pub(super) folded: usize,
    /// `None` only while a request is being folded in: it is taken out so the record can be
    /// read beside it (a placeholder `Measured` would allocate five histograms per request).
    pub(super) measured: Option<Measured>,
    /// Σ lifetime (finish − arrival) and count over the finished requests between the edges.
    pub(super) life_sum: u64,
    pub(super) lives: u64,
    /// Arrival times of the requests at the open loop's edges, once issued.
    pub(super) edges: (Option<Nanos>, Option<Nanos>),
    /// Earliest arrival of any request.
    pub(super) first_arrival: Option<Nanos>,
    /// Σ cached and Σ input tokens of the folded requests that were admitted.
    pub(super) prefix: (u64, u64),
}

impl Tally {
    pub(super) fn new(bins: usize) -> Self {
        Tally {
            folded: 0,
            measured: Some(Measured::new(bins)),
            life_sum: 0,
            lives: 0,
            edges: (None, None),
            first_arrival: None,
            prefix: (0, 0),
        }
    }

    /// Request `id` was issued, arriving at `at`.
    pub(super) fn arrived(&mut self, id: u64, at: Nanos, (a, b): (u64, u64)) {
        self.first_arrival = Some(self.first_arrival.map_or(at, |f| f.min(at)));
        if b >= a && id == a {
            self.edges.0 = Some(at);
        }
        if b >= a && id == b {
            self.edges.1 = Some(at);
        }
    }
}
