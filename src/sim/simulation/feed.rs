//! The workload feed: the first requests (the closed loop's or burst's concurrency at t = 0,
//! the open loop's first arrivals), each request drawn from the [`RequestFactory`] and
//! checked against every group's KV cache before it is issued, the closed loop's replacement
//! of every request that leaves (and its stopping rule), the open loop's arrivals one at a
//! time or under the client-side concurrency cap, and the benchmark client's send jitter.
//!
//! [`RequestFactory`]: crate::workload::arrival::RequestFactory

use super::Simulation;
use crate::sim::config::Role;
use crate::sim::error::SimError;
use crate::sim::queue::{Event, Nanos};
use crate::sim::records::RequestState;
use crate::workload::arrival::NewRequest;

/// A benchmark client's requests reach the server spread over this span (uniform, seeded): its
/// tasks send them one after another, and the engine picks up whatever has arrived when it
/// plans a step. Without it, requests sent "together" are one admission decision, prefill in
/// the same steps and stay in lockstep for the whole run, which real engines never see (a 1 µs
/// stagger alone moved an H200 TP8 TTFT at concurrency 4 from 125 ms to 81 ms; measured 73 ms).
pub const CLIENT_JITTER_NS: u64 = 1_000_000;

impl<'s, 'a> Simulation<'s, 'a> {
    /// A request must fit every group's KV cache (and budget, without chunked prefill).
    fn check_fits(&self, r: &RequestState) -> Result<(), SimError> {
        for g in &self.sys.groups {
            let c = &g.cfg;
            let tokens = match g.role {
                Role::Prefill => r.input + 1,
                _ => r.input + r.output + c.decode.query_tokens(),
            };
            let needed = tokens.div_ceil(c.block_size);
            if needed > c.kv_blocks {
                return Err(SimError::KvTooSmall { needed, capacity: c.kv_blocks, block_size: c.block_size, tokens });
            }
            if g.role != Role::Decode && !c.chunked_prefill && r.input > c.budget {
                return Err(SimError::PromptTooLong { prompt: r.input, budget: c.budget });
            }
        }
        Ok(())
    }

    /// Record a new request and schedule its arrival; it counts as issued and in flight.
    fn issue(&mut self, n: NewRequest) -> Result<(), SimError> {
        let mut r = RequestState::from_new(&n, self.image_tokens);
        self.check_fits(&r)?;
        if self.decode_only {
            // The prompt was prefilled elsewhere: the first token exists on arrival.
            r.first_token = Some(n.arrival_ns);
            r.generated = 1;
        }
        let id = self.reqs.issued() as u32;
        if self.lazy_open {
            self.next_arrival = Some(n.arrival_ns);
            self.queue.push_reserved(n.arrival_ns, id as u64, Event::Arrival { request: id });
        } else {
            self.queue.push(n.arrival_ns, Event::Arrival { request: id });
        }
        self.tally.arrived(id as u64, r.arrival, self.open_marks);
        self.reqs.push(r);
        self.issued += 1;
        self.in_flight += 1;
        Ok(())
    }

    /// Open loop: release arrivals respecting the client-side concurrency cap.
    fn release_open(&mut self) -> Result<(), SimError> {
        let run = &self.sys.run;
        while let Some(n) = self.pending_open {
            if self.issued >= run.num_requests {
                self.pending_open = None;
                break;
            }
            if run.max_concurrency.is_some_and(|m| self.in_flight >= m) {
                break;
            }
            let mut n = n;
            n.arrival_ns = n.arrival_ns.max(self.now);
            self.issue(n)?;
            self.pending_open = self.factory.next_open();
        }
        Ok(())
    }

    /// The first requests: the closed loop's or burst's concurrency at t = 0, or the open
    /// loop's first arrivals.
    pub(super) fn start(&mut self) -> Result<(), SimError> {
        if self.closed || self.burst {
            let first_wave = self.bench_total.map_or(self.sys.run.concurrency, |n| n.min(self.sys.run.concurrency));
            for _ in 0..first_wave {
                let at = self.client_send(0);
                let n = self.factory.make(at);
                self.issue(n)?;
            }
        } else if self.sys.run.max_concurrency.is_none() {
            self.lazy_open = true;
            self.check_all_fit()?;
            self.queue.reserve(self.open_total);
            self.issue_next_open()?;
        } else {
            self.pending_open = self.factory.next_open();
            self.release_open()?;
        }
        Ok(())
    }

    /// An uncapped open loop: fail on a request that cannot fit before simulating anything, as
    /// when every request was issued at the start (a copy of the factory draws them).
    fn check_all_fit(&self) -> Result<(), SimError> {
        let mut f = self.factory.clone();
        for _ in 0..self.open_total {
            let Some(n) = f.next_open() else { break };
            self.check_fits(&RequestState::from_new(&n, self.image_tokens))?;
        }
        Ok(())
    }

    /// An uncapped open loop: issue the next arrival (called when the one before it arrives).
    pub(super) fn issue_next_open(&mut self) -> Result<(), SimError> {
        if self.issued < self.open_total {
            if let Some(n) = self.factory.next_open() {
                self.issue(n)?;
            }
        }
        Ok(())
    }

    /// When a request a benchmark client sends at `t` reaches the server: `t` plus the client
    /// jitter. The steady-state loop and the burst keep exact times: the burst mirrors the
    /// formulas' wave, and the steady-state loop's figures are the ones the search has always
    /// ranked by (jittering it moves the headline's TTFT from 619 ms to 1220 ms at the same
    /// throughput; which one real engines show is for the measured comparison to decide).
    fn client_send(&mut self, t: Nanos) -> Nanos {
        match self.bench_total {
            Some(_) => t + rand::Rng::random_range(&mut self.jitter_rng, 0..CLIENT_JITTER_NS),
            None => t,
        }
    }

    /// Requests left the system: the closed loop replaces them at once and checks its
    /// stopping rule; the open loop releases arrivals the client cap held back.
    pub(super) fn account_completions(&mut self, done_now: u64) -> Result<(), SimError> {
        self.completed += done_now;
        self.in_flight -= done_now;
        if let Some(total) = self.bench_total {
            // A benchmark run: replace finished requests until `total` were sent, stop when
            // all of them finished.
            for _ in 0..done_now {
                if self.issued < total {
                    let at = self.client_send(self.now);
                    let n = self.factory.make(at);
                    self.issue(n)?;
                }
            }
            if self.completed >= total {
                self.stop = true;
                self.window_marks.1 = Some(self.mark());
            }
        } else if self.closed {
            for _ in 0..done_now {
                let at = self.client_send(self.now);
                let n = self.factory.make(at);
                self.issue(n)?;
            }
            let before = self.win.start;
            let done = self.done_latencies(done_now);
            self.stop = self.win.advance(self.completed, self.now, self.tokens_out, done);
            if before.is_none() && self.win.start.is_some() {
                self.window_marks.0 = Some(self.mark());
                self.kv_at_start = self.stats.kv_integral;
            }
            if self.stop {
                self.window_marks.1 = Some(self.mark());
            }
        } else if !self.burst {
            self.release_open()?;
        }
        Ok(())
    }
}
