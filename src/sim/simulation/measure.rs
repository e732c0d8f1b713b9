//! What a run measures and its report: finished requests' records folded into the tallies in
//! id order (and dropped unless the caller keeps them), the closed loop's watch on hopeless
//! probes and its stopping rule's batches, the measurement window (the stopping rule's, the
//! open loop's steady window, or the whole run), and the [`SimReport`] read over it.

use super::stats::{Mark, Measured};
use super::Simulation;
use crate::cost::Breakdown;
use crate::sim::config::Measure;
use crate::sim::metrics::{BinStat, LatencyStats, SimReport};
use crate::sim::queue::Nanos;
use crate::sim::records::{RequestState, Requests};
use crate::sim::steady;

/// A probe whose measured mean latency exceeds its limit by this factor is abandoned: the
/// search only needs to know it is infeasible.
const ABANDON_FACTOR: f64 = 1.5;
/// Measured requests needed before abandoning.
const ABANDON_MIN_REQUESTS: u64 = 16;
/// Open loop: the steady part of the measured arrivals (after the system filled) must cover at
/// least this share of their span for rates to be read from it; otherwise the run is too short
/// and rates cover the whole run, drain included.
const OPEN_MIN_STEADY_SHARE: f64 = 0.25;
/// Open loop: fewer measured arrivals than this have no steady window (two requests ten
/// seconds apart are not a steady state, and rates read between them are near zero).
const OPEN_MIN_STEADY_REQUESTS: u64 = 8;

impl<'s, 'a> Simulation<'s, 'a> {
    /// Share of the admitted prompts' tokens found in the prefix cache: the folded records'
    /// tally plus the records still held.
    fn prefix_hit_rate(&self) -> f64 {
        let (mut cached, mut input) = self.tally.prefix;
        for r in (self.tally.folded..self.reqs.issued()).filter_map(|i| self.reqs.get(i)).filter(|r| r.scheduled.is_some()) {
            cached += r.cached;
            input += r.input;
        }
        if input > 0 {
            cached as f64 / input as f64
        } else {
            0.0
        }
    }

    /// Fold the finished records at the front into the tally (in id order, as the report reads
    /// them) and, unless the caller wants them, drop them. With
    /// [`RunParams::stop_once_measured`](crate::sim::RunParams::stop_once_measured), stop the
    /// run once the last measured request is folded: every latency the report reads is in.
    pub(super) fn fold_finished(&mut self) {
        while self.tally.folded < self.reqs.issued() && self.reqs[self.tally.folded].finish.is_some() {
            self.fold_next();
        }
        if !self.keep_records {
            self.reqs.drop_before(self.tally.folded);
        }
        if self.sys.run.stop_once_measured && self.steady_open() && self.tally.folded as u64 > self.open_marks.1 {
            self.stop = true;
        }
    }

    /// An open loop measured over its steady window: only the requests between the edges count.
    fn steady_open(&self) -> bool {
        self.open && self.sys.run.measure == Measure::Steady && self.open_marks.1 >= self.open_marks.0
    }

    fn fold_next(&mut self) {
        let idx = self.tally.folded;
        let r = &self.reqs[idx];
        self.tally.folded += 1;
        if r.scheduled.is_some() {
            self.tally.prefix.0 += r.cached;
            self.tally.prefix.1 += r.input;
        }
        let Some(fin) = r.finish else { return };
        // The window of a burst, a benchmark run or an open loop, when it is not the steady
        // one, runs from the first arrival (a benchmark: t = 0) to the end, and every request
        // finishes strictly after it arrived: it holds every finished request. (The steady
        // window reads its request rate from the token rate instead.)
        self.tally.measured.as_mut().expect("the tally is put back after each request").finished_in_window += 1;
        let steady_open = self.steady_open();
        if steady_open && self.in_open_range(idx) {
            self.tally.life_sum += fin - r.arrival;
            self.tally.lives += 1;
        }
        // A benchmark averages over every request it sent, the first wave included.
        let counted = !steady_open || self.in_open_range(idx);
        if counted {
            let mut m = self.tally.measured.take().expect("the tally is put back after each request");
            self.tally_request(&mut m, &self.reqs[idx], fin);
            self.tally.measured = Some(m);
        }
    }

    /// Closed loop: what the requests leaving in this event add to the stopping rule's batch
    /// (TTFT and TPOT sums of those measured: the first wave is not, as in [`Self::measure`]).
    pub(super) fn done_latencies(&self, completions: u64) -> steady::Done {
        let mut d = steady::Done { completions, ..Default::default() };
        for &r in &self.leaving {
            let rq = &self.reqs[r as usize];
            if (r as u64) < self.sys.run.concurrency {
                continue;
            }
            if let (Some(first), Some(fin)) = (rq.first_token, rq.finish) {
                d.ttft_ms += (first - rq.arrival) as f64 / 1e6;
                d.measured += 1;
                if rq.output > 1 && !self.prefill_only {
                    d.tpot_ms += (fin - first) as f64 / 1e6 / (rq.output - 1) as f64;
                    d.tpot_measured += 1;
                }
            }
        }
        d
    }

    /// Closed loop: latency of requests finishing inside the window, to abandon hopeless
    /// probes.
    pub(super) fn watch_latencies(&mut self) {
        let run = &self.sys.run;
        for &r in &self.leaving {
            let rq = &self.reqs[r as usize];
            if let (Some(first), Some(fin)) = (rq.first_token, rq.finish) {
                self.watch.0 += (first - rq.arrival) as f64 / 1e6;
                if rq.output > 1 && !self.prefill_only {
                    self.watch.1 += (fin - first) as f64 / 1e6 / (rq.output - 1) as f64;
                }
                self.watch.2 += 1;
            }
        }
        let w = self.watch;
        if w.2 >= ABANDON_MIN_REQUESTS
            && (w.0 / w.2 as f64 > ABANDON_FACTOR * run.ttft_limit_ms || w.1 / w.2 as f64 > ABANDON_FACTOR * run.tpot_limit_ms)
        {
            self.abandoned = true;
            self.stop = true;
            self.window_marks.1 = Some(self.mark());
        }
    }

    pub(super) fn mark(&self) -> Mark {
        (self.now, self.tokens_out, self.prefilled_input)
    }

    /// Whether arrival index `idx` lies between the open loop's edges.
    fn in_open_range(&self, idx: usize) -> bool {
        let (a, b) = self.open_marks;
        b >= a && (a..=b).contains(&(idx as u64))
    }

    /// Open loop: rates are read from one mean lifetime after the first measured request
    /// arrived (the system has filled) to the arrival of the last (arrivals still run), if
    /// that steady part is long enough.
    fn open_window(&self) -> Option<(Nanos, Nanos)> {
        let (a, b) = self.open_marks;
        let (Some(t_a), Some(t_b)) = self.tally.edges else { return None };
        if !(self.open && self.sys.run.measure == Measure::Steady && b >= a && b - a + 1 >= OPEN_MIN_STEADY_REQUESTS) {
            return None;
        }
        let t = &self.tally;
        let life = t.life_sum.checked_div(t.lives).unwrap_or(u64::MAX);
        let t0 = t_a.saturating_add(life);
        (t0 < t_b && (t_b - t0) as f64 >= OPEN_MIN_STEADY_SHARE * (t_b - t_a) as f64).then_some((t0, t_b))
    }

    /// The open loop's cumulative counts at `t`.
    fn series_at(&self, t: Nanos) -> Mark {
        let i = self.series.partition_point(|m| m.0 <= t);
        if i == 0 {
            (t, 0, 0)
        } else {
            (t, self.series[i - 1].1, self.series[i - 1].2)
        }
    }

    /// The open loop's (time, cumulative KV integral) at the last step ending by `t`.
    fn kv_integral_at(&self, t: Nanos) -> (Nanos, f64) {
        let i = self.series.partition_point(|m| m.0 <= t);
        if i == 0 {
            (0, 0.0)
        } else {
            (self.series[i - 1].0, self.kv_series[i - 1])
        }
    }

    /// The time-weighted KV use over the measurement window (per instance). Closed loop: the
    /// stopping rule's window; open loop: the steady window (the rates' window) when there is
    /// one; otherwise the whole run.
    fn windowed_kv(&self, open_window: Option<(Nanos, Nanos)>, t0: Nanos, t1: Nanos) -> f64 {
        let per_instance = |integral: f64, span: Nanos| {
            if span > 0 {
                integral / (span as f64 * self.instances.len() as f64)
            } else {
                0.0
            }
        };
        let integral = self.stats.kv_integral;
        if self.open {
            return match open_window {
                Some((a, b)) => {
                    // Between the steps ending last by each end: the integral and its span agree.
                    let ((ta, ka), (tb, kb)) = (self.kv_integral_at(a), self.kv_integral_at(b));
                    per_instance(kb - ka, tb.saturating_sub(ta))
                }
                None => per_instance(integral, self.now),
            };
        }
        if self.closed && self.bench_total.is_none() {
            per_instance(integral - self.kv_at_start, t1.saturating_sub(t0))
        } else {
            per_instance(integral, self.now)
        }
    }

    /// Add a measured request's inter-token gaps to `itl`: between consecutive tokens of its
    /// [`crate::sim::records::DecodeSegment`]s (a preemption's gap runs from the last token before it to the next
    /// one after it), so ITL and TPOT describe the same requests.
    /// The gaps inside a segment go to `m.itl_cover` (read by [`Self::itl_stat`]); those
    /// between its first token and the token before it are recorded here.
    fn record_gaps(&self, m: &mut Measured, r: &RequestState) {
        let gap_ms = |a: Nanos, b: Nanos| b.saturating_sub(a) as f64 / 1e6;
        let mut last: Option<Nanos> = None;
        for s in &r.decoded {
            if let Some(t) = s.start {
                if let Some(p) = last {
                    m.itl.record(gap_ms(p, t));
                }
                last = Some(t);
            }
            let log = &self.instances[s.instance as usize].token_log;
            let to = (s.to.min(log.len() as u64)) as usize;
            let from = (s.from as usize).min(to);
            if from == to {
                continue;
            }
            if let Some(p) = last {
                m.itl.record(gap_ms(p, log[from]));
            }
            if to - from > 1 {
                let i = s.instance as usize;
                if m.itl_cover.len() <= i {
                    m.itl_cover.resize_with(i + 1, Vec::new);
                }
                let cover = &mut m.itl_cover[i];
                if cover.len() <= log.len() {
                    cover.resize(log.len() + 1, 0);
                }
                cover[from + 1] += 1;
                cover[to] -= 1;
            }
            last = Some(log[to - 1]);
        }
    }

    /// ITL of the measured requests: the gaps recorded one by one, and each instance's gaps
    /// between consecutive decode steps times the measured requests that had them.
    fn itl_stat(&self, m: &mut Measured) -> crate::sim::metrics::Stat {
        for (i, cover) in m.itl_cover.iter().enumerate() {
            let log = &self.instances[i].token_log;
            let mut n = 0i64;
            for k in 1..cover.len().min(log.len()) {
                n += cover[k];
                if n > 0 {
                    m.itl.record_n((log[k] - log[k - 1]) as f64 / 1e6, n as u64);
                }
            }
        }
        m.itl.stat()
    }

    /// The measurement window's ends. Closed loop: the stopping rule's marks. Burst: the whole
    /// run. Open loop: the steady window, or the whole run when there is none.
    fn window(&self, open_window: Option<(Nanos, Nanos)>) -> (Mark, Mark) {
        if self.closed {
            (self.window_marks.0.unwrap_or((0, 0, 0)), self.window_marks.1.unwrap_or(self.mark()))
        } else if let Some((a, b)) = open_window {
            (self.series_at(a), self.series_at(b))
        } else {
            ((self.tally.first_arrival.unwrap_or(0), 0, 0), self.mark())
        }
    }

    /// Latencies of the measured requests. Steady-state closed loop: those finishing inside
    /// the window, read here. Burst and benchmark run: all; open loop: those arriving between
    /// the edges (by arrival order); both folded in as they finished ([`Self::fold_next`]).
    fn measure(&mut self, t0: Nanos, t1: Nanos) -> Measured {
        if self.folds {
            return self.tally.measured.take().expect("the tally is read once");
        }
        let run = &self.sys.run;
        let mut m = Measured::new(run.bins.len());
        for (idx, r) in self.reqs.iter().enumerate() {
            let Some(fin) = r.finish else { continue };
            if fin > t0 && fin <= t1 {
                m.finished_in_window += 1;
            }
            // The initial wave (all issued at t = 0) prefilled together; with variable output
            // lengths some of it outlives the warm-up, and its TTFT is not steady state.
            if fin > t0 && fin <= t1 && idx as u64 >= run.concurrency {
                self.tally_request(&mut m, r, fin);
            }
        }
        m
    }

    /// Add one measured request, finished at `fin`, to the latencies and counts.
    fn tally_request(&self, m: &mut Measured, r: &RequestState, fin: Nanos) {
        let run = &self.sys.run;
        let first = r.first_token.unwrap_or(fin);
        let ttft = (first - r.arrival) as f64 / 1e6;
        let e2e = (fin - r.arrival) as f64 / 1e6;
        let out_tokens = if self.prefill_only { 1 } else { r.output };
        let inter = if out_tokens > 1 { (fin - first) as f64 / 1e6 / (out_tokens - 1) as f64 } else { 0.0 };
        let amort = e2e / out_tokens as f64;
        m.rec[0].record(ttft);
        m.rec[1].record(inter);
        m.rec[2].record(amort);
        m.rec[3].record(e2e);
        self.record_gaps(m, r);
        m.rec[4].record((r.scheduled.or(r.decode_admitted).unwrap_or(first) - r.arrival) as f64 / 1e6);
        m.measured += 1;
        m.out_tokens += out_tokens;
        if ttft <= run.ttft_limit_ms && inter <= run.tpot_limit_ms {
            m.good += 1;
        }
        let prompt = r.input - self.image_tokens;
        // Bins are sorted and disjoint (validated): the last one starting at or below.
        let i = run.bins.partition_point(|&(lo, _)| lo <= prompt);
        if i > 0 && prompt < run.bins[i - 1].1 {
            let b = &mut m.per_bin[i - 1];
            b.requests += 1;
            b.ttft.record(ttft);
            b.tpot.record(inter);
        }
    }

    /// The report over the measurement window, and every request's record.
    pub(super) fn report(mut self) -> (SimReport, Requests) {
        if self.folds {
            while self.tally.folded < self.reqs.issued() {
                self.fold_next();
            }
        }
        let open_window = self.open_window();
        let steady = open_window.is_some();
        let ((t0, tok0, in0), (t1, tok1, in1)) = self.window(open_window);
        let window_s = (t1.saturating_sub(t0)) as f64 / 1e9;
        let mut m = self.measure(t0, t1);
        let itl = self.itl_stat(&mut m);
        let kv_utilization = self.windowed_kv(open_window, t0, t1);
        let window_tokens = tok1.saturating_sub(tok0);
        let window_input = in1.saturating_sub(in0);
        let per_s = |x: u64| if window_s > 0.0 { x as f64 / window_s } else { 0.0 };
        let st = &self.stats;
        let mut bd = Breakdown::default();
        if st.breakdown_weight > 0.0 {
            bd.add_scaled(&st.breakdown, 1.0 / st.breakdown_weight);
        }
        let mean = |x: f64| if st.steps > 0 { x / st.steps as f64 } else { 0.0 };
        let report = SimReport {
            latency: LatencyStats {
                ttft: m.rec[0].stat(),
                tpot_inter_token: m.rec[1].stat(),
                tpot_amortized: m.rec[2].stat(),
                itl,
                e2e: m.rec[3].stat(),
                queueing: m.rec[4].stat(),
            },
            output_throughput: per_s(window_tokens),
            input_throughput: per_s(window_input),
            total_throughput: per_s(window_tokens + window_input),
            // Open loop: requests often outlive the window, so the delivered rate is read off
            // the token rate (a saturated system delivers fewer tokens than arrive).
            request_rate: if steady && m.out_tokens > 0 {
                per_s(window_tokens) * m.measured as f64 / m.out_tokens as f64
            } else {
                per_s(m.finished_in_window)
            },
            goodput: if m.measured > 0 { m.good as f64 / m.measured as f64 } else { 0.0 },
            kv_utilization,
            kv_peak_utilization: st.kv_peak,
            mean_batch_size: mean(st.batch_sum as f64),
            mean_step_tokens: mean(st.token_sum as f64),
            mean_step_ms: mean(st.step_time_sum),
            breakdown: bd,
            steps: st.steps,
            completed: self.completed,
            measured: m.measured,
            preemptions: self.instances.iter().map(|i| i.preemptions).sum(),
            window_s,
            makespan_s: self.now as f64 / 1e9,
            converged: if self.open { steady || self.sys.run.measure == Measure::WholeRun } else { self.win.converged && !self.abandoned },
            abandoned: self.abandoned,
            kv_capacity_blocks: self.instances.iter().map(|i| i.kv.capacity).max().unwrap_or(0),
            tokens_emitted: self.tokens_out,
            kv_held_at_end: self.instances.iter().map(|i| i.kv.held()).sum(),
            prefix_cache_hit_rate: self.prefix_hit_rate(),
            bins: self
                .sys
                .run
                .bins
                .iter()
                .zip(&m.per_bin)
                .filter(|(_, b)| b.requests > 0)
                .map(|(&(lo, hi), b)| BinStat {
                    min_tokens: lo,
                    max_tokens: hi,
                    requests: b.requests,
                    ttft: b.ttft.stat(),
                    tpot_inter_token: b.tpot.stat(),
                })
                .collect(),
        };
        (report, self.reqs)
    }
}
