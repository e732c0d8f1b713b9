//! The closed loop's stopping rule: batch means with a confidence interval.
//!
//! After warm-up (the first C completions), completions are grouped into consecutive batches of
//! `m` completions (`m = max(C, 8)` to start with: one generation of the loop, so that in a
//! periodic steady state every batch spans one period and batch means of a noisy one are nearly
//! independent); each batch gives one observation of the output-token rate and of the mean TTFT
//! and TPOT of the requests finishing in it. The run stops once at least [`MIN_BATCHES`]
//! batches and the minimum sample are in (the caller's: a tail percentile needs a tail) and the
//! 95 % confidence interval (Student t over the batch means) of the token rate is within
//! ±[`REL_HALF_WIDTH`] of its mean, and that of each latency with a finite limit within
//! ±[`LAT_REL_HALF_WIDTH`]. When [`MAX_BATCHES`] batches are in, adjacent pairs merge and `m`
//! doubles (the classic fixed-number-of-batches scheme: batches grow until their means are
//! nearly independent). A run that has not settled after `32 · max(C, 8)` completions stops
//! there, marked not converged.

use super::queue::Nanos;

/// Completions per batch, at least.
pub const MIN_BATCH: u64 = 8;
/// Batches before the interval is trusted (the t quantile widens the interval of few: with two,
/// t = 12.7 and the batches must agree within 0.16 % for a ±1 % interval).
pub const MIN_BATCHES: usize = 2;
/// Batches kept before adjacent pairs merge.
pub const MAX_BATCHES: usize = 32;
/// Half-width of the token rate's 95 % interval, relative to its mean.
pub const REL_HALF_WIDTH: f64 = 0.01;
/// Half-width of a bounded latency's 95 % interval, relative to its mean.
pub const LAT_REL_HALF_WIDTH: f64 = 0.02;
/// The run stops unsettled after this many times max(C, 8) measured completions.
pub const MAX_GENERATIONS: u64 = 32;

/// Student t quantiles (0.975) for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093,
    2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

fn t975(df: usize) -> f64 {
    T975.get(df.wrapping_sub(1)).copied().unwrap_or(2.03)
}

/// What one event's completions add: how many left, and the latency sums (ms) of those
/// measured (the first wave excluded, as in the report).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Done {
    pub completions: u64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// Requests the TTFT sum covers.
    pub measured: u64,
    /// Requests the TPOT sum covers.
    pub tpot_measured: u64,
}

/// Sums over one batch.
#[derive(Debug, Clone, Copy, Default)]
struct Batch {
    ns: f64,
    tokens: f64,
    lat: [(f64, f64); 2],
}

impl Batch {
    fn merge(a: Batch, b: Batch) -> Batch {
        Batch { ns: a.ns + b.ns, tokens: a.tokens + b.tokens, lat: [0, 1].map(|k| (a.lat[k].0 + b.lat[k].0, a.lat[k].1 + b.lat[k].1)) }
    }
}

/// Whether the 95 % interval of the mean of `xs` is within ±`rel` of it (needs two values).
fn settled(xs: &[f64], rel: f64) -> bool {
    let n = xs.len();
    if n < 2 {
        return false;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    t975(n - 1) * (var / n as f64).sqrt() <= rel * mean.abs()
}

/// The closed loop's measurement window and its stopping rule (see the module doc).
#[derive(Debug, Clone)]
pub struct Window {
    pub warm_completions: u64,
    /// (time, output tokens) where the measurement began.
    pub start: Option<(Nanos, u64)>,
    pub converged: bool,
    batch_size: u64,
    min_measured: u64,
    max_measured: u64,
    /// Which latency means must settle: TTFT, TPOT.
    bounded: [bool; 2],
    cur_start: (Nanos, u64),
    cur_completions: u64,
    cur: Batch,
    batches: Vec<Batch>,
    measured: u64,
}

impl Window {
    /// A closed loop of `concurrency` requests warming up for `warm` completions; `bounded`
    /// says which of TTFT and TPOT have a limit; at least `min_measured` completions are
    /// measured (within the cap).
    pub fn closed(concurrency: u64, warm: u64, bounded: [bool; 2], min_measured: u64) -> Self {
        let max_measured = MAX_GENERATIONS * concurrency.max(MIN_BATCH);
        Window {
            warm_completions: warm,
            start: None,
            converged: false,
            batch_size: concurrency.max(MIN_BATCH),
            min_measured: min_measured.min(max_measured),
            max_measured,
            bounded,
            cur_start: (0, 0),
            cur_completions: 0,
            cur: Batch::default(),
            batches: Vec::new(),
            measured: 0,
        }
    }

    /// A run measured from its start with no stopping rule (benchmark runs, open loops).
    pub fn whole(from_start: bool) -> Self {
        Window { start: from_start.then_some((0, 0)), converged: true, ..Window::closed(0, 0, [false; 2], 0) }
    }

    /// Completions measured so far.
    pub fn measured(&self) -> u64 {
        self.measured
    }

    /// Account the completions of one event at `now` (`completed`: all completions so far;
    /// `tokens`: output tokens emitted so far). Returns whether the run may stop.
    pub fn advance(&mut self, completed: u64, now: Nanos, tokens: u64, done: Done) -> bool {
        let Some(_) = self.start else {
            if completed >= self.warm_completions {
                self.start = Some((now, tokens));
                self.cur_start = (now, tokens);
            }
            return false;
        };
        self.measured += done.completions;
        self.cur_completions += done.completions;
        self.cur.lat[0].0 += done.ttft_ms;
        self.cur.lat[0].1 += done.measured as f64;
        self.cur.lat[1].0 += done.tpot_ms;
        self.cur.lat[1].1 += done.tpot_measured as f64;
        if self.cur_completions >= self.batch_size {
            self.cur.ns = (now - self.cur_start.0) as f64;
            self.cur.tokens = (tokens - self.cur_start.1) as f64;
            self.batches.push(std::mem::take(&mut self.cur));
            self.cur_start = (now, tokens);
            // Completions past the batch's end count towards the next, so that batch ends stay
            // C completions apart (one period of a periodic steady state).
            self.cur_completions -= self.batch_size;
            if self.batches.len() >= MAX_BATCHES {
                self.batches = self.batches.chunks(2).map(|p| p.iter().copied().reduce(Batch::merge).unwrap_or_default()).collect();
                self.batch_size *= 2;
            }
            if self.measured >= self.min_measured && self.batches.len() >= MIN_BATCHES && self.settled() {
                self.converged = true;
                return true;
            }
        }
        self.measured >= self.max_measured
    }

    /// Whether every watched mean's interval is narrow enough.
    fn settled(&self) -> bool {
        let rates: Vec<f64> = self.batches.iter().map(|b| b.tokens / b.ns.max(1.0)).collect();
        if !settled(&rates, REL_HALF_WIDTH) {
            return false;
        }
        (0..2).filter(|&k| self.bounded[k]).all(|k| {
            let means: Vec<f64> = self.batches.iter().filter(|b| b.lat[k].1 > 0.0).map(|b| b.lat[k].0 / b.lat[k].1).collect();
            means.len() >= MIN_BATCHES && settled(&means, LAT_REL_HALF_WIDTH)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(n: u64, ttft: f64) -> Done {
        Done { completions: n, ttft_ms: ttft * n as f64, tpot_ms: 0.0, measured: n, tpot_measured: 0 }
    }

    /// Feed `w` one completion per `dt(i)` ns with `rate` tokens per ns until it stops.
    fn run(w: &mut Window, dt: impl Fn(u64) -> u64, ttft: impl Fn(u64) -> f64, limit: u64) -> Option<u64> {
        let (mut now, mut tokens) = (0u64, 0u64);
        for i in 1..=limit {
            let d = dt(i);
            now += d;
            tokens += 10;
            if w.advance(i, now, tokens, done(1, ttft(i))) {
                return Some(i);
            }
        }
        None
    }

    #[test]
    fn a_steady_stream_stops_at_the_minimum_sample() {
        // Constant rate and latency: the interval is zero-wide as soon as the minimum sample
        // is in (warm-up 16, batches of 16: two batches, or the caller's 200).
        let mut w = Window::closed(16, 16, [true, false], 0);
        assert_eq!(run(&mut w, |_| 1000, |_| 50.0, 10_000), Some(16 + 32));
        assert!(w.converged);
        let mut w = Window::closed(16, 16, [true, false], 200);
        assert_eq!(run(&mut w, |_| 1000, |_| 50.0, 10_000), Some(16 + 208));
    }

    #[test]
    fn a_periodic_stream_settles_on_whole_periods() {
        // Completions in clumps: 16 requests finish together every 16 ms (a closed loop in
        // lockstep). Batches of C = 16 completions each span one period and agree exactly, so
        // the minimum of two batches after warm-up suffices. Mutation: require more batches
        // (MIN_BATCHES) and the stop comes later.
        let mut w = Window::closed(16, 16, [false, false], 0);
        let (mut now, mut tokens) = (0u64, 0u64);
        let mut stop = None;
        for k in 1..=200u64 {
            now += 16_000_000;
            tokens += 16 * 100;
            if w.advance(16 * k, now, tokens, done(16, 1.0)) {
                stop = Some(k);
                break;
            }
        }
        assert_eq!(stop, Some(1 + 2));
        assert!(w.converged);
    }

    #[test]
    fn a_noisy_latency_needs_more_batches() {
        // The token rate is steady but TTFT alternates in long runs (a slow phase of 40
        // completions at 100 ms, then 40 at 50 ms): batches of 16 see whole phases, so the
        // interval stays wide. Mutation: drop the latency check in `settled` and the run stops
        // at the minimum sample.
        let mut w = Window::closed(16, 16, [true, false], 0);
        let stop = run(&mut w, |_| 1000, |i| if (i / 40) % 2 == 0 { 100.0 } else { 50.0 }, 100_000).unwrap();
        assert!(stop > 16 + 32, "stopped after {stop}");
        // Without a TTFT limit only the token rate counts.
        let mut w = Window::closed(16, 16, [false, false], 0);
        assert_eq!(run(&mut w, |_| 1000, |i| if (i / 40) % 2 == 0 { 100.0 } else { 50.0 }, 100_000), Some(16 + 32));
    }

    #[test]
    fn an_unsettled_rate_stops_at_the_cap_not_converged() {
        // Completion gaps that keep growing: no steady rate. Stops after 32 · max(C, 8) = 512
        // measured completions, not converged.
        let mut w = Window::closed(16, 16, [false, false], 0);
        assert_eq!(run(&mut w, |i| 1000 + i * i, |_| 1.0, 100_000), Some(16 + 512));
        assert!(!w.converged);
    }

    #[test]
    fn t_quantiles_fall_towards_the_normal() {
        assert!(t975(1) > 12.0 && t975(9) > 2.26 && t975(31) < 2.05 && t975(31) > 1.96);
    }
}
