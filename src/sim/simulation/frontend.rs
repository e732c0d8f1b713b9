//! The engines' front ends (`InstanceConfig::frontend`): one first-come-first-served server per
//! instance, in front of it. A request arriving at an instance occupies its front end for its
//! service time (per request plus per prompt token) and reaches the engine's waiting queue when
//! that is done (`Event::EngineArrival`); each step's output tokens occupy it on their way to
//! the client (per token), and the client sees them when that is done (`Event::Delivered`):
//! the step's first tokens end their requests' TTFT there, its last tokens their end-to-end
//! latency, and a closed loop's client sends its next request then.
//!
//! One server per instance because vLLM's API server is one process of asyncio (HTTP,
//! tokenization, detokenization, streaming), separate from the engine core, and `vllm serve`
//! runs one per engine unless `--api-server-count` says otherwise; SGLang's tokenizer manager
//! and TensorRT-LLM's `trtllm-serve` are likewise one event loop per server.
//!
//! Jobs reach a server in time order (events pop in time order), so a FIFO server's completion
//! is known when the job arrives: max(now, when the server frees up) + service time. Nothing
//! waits in a queue here; only the step outputs not yet delivered are kept, to hand their
//! times to the records when they are.

use super::Simulation;
use crate::sim::queue::{Event, Nanos};
use std::collections::VecDeque;

/// The front ends of a run's instances.
#[derive(Debug, Default)]
pub(super) struct FrontEnds {
    /// When each instance's front end finishes the work handed to it so far.
    free_at: Vec<Nanos>,
    /// When each instance's last step output reached the client.
    last_delivery: Vec<Nanos>,
    /// Step outputs handed to each front end and not yet delivered, in order.
    pending: Vec<VecDeque<Delivery>>,
}

/// One step's output on its way to the clients.
#[derive(Debug)]
struct Delivery {
    at: Nanos,
    /// Requests whose first token the step emitted.
    first: Vec<u32>,
    /// Requests whose last token it emitted.
    done: Vec<u32>,
}

impl FrontEnds {
    pub(super) fn new(instances: usize) -> Self {
        FrontEnds {
            free_at: vec![0; instances],
            last_delivery: vec![0; instances],
            pending: (0..instances).map(|_| VecDeque::new()).collect(),
        }
    }

    /// Give instance `i`'s front end `service` ns of work at `now`; returns when it is done.
    fn serve(&mut self, i: usize, now: Nanos, service: Nanos) -> Nanos {
        let done = self.free_at[i].max(now) + service;
        self.free_at[i] = done;
        done
    }
}

impl Simulation<'_, '_> {
    /// Whether requests and tokens of `instance` pass through a front end.
    #[inline]
    pub(super) fn has_frontend(&self, instance: u32) -> bool {
        self.sys.groups[self.group_of[instance as usize]].cfg.frontend.is_some()
    }

    /// A request routed to `instance` enters its front end; it reaches the engine when the
    /// front end is done with it. It counts in the instance's load from now on.
    pub(super) fn enter_frontend(&mut self, instance: u32, request: u32) {
        let fe = self.sys.groups[self.group_of[instance as usize]].cfg.frontend.expect("a front end");
        let prompt = self.reqs[request as usize].prompt_tokens();
        self.instances[instance as usize].expect(prompt);
        let done = self.frontends.serve(instance as usize, self.now, fe.request_ns(prompt));
        self.queue.push(done, Event::EngineArrival { request });
    }

    /// The front end is done with a request: it joins its instance's waiting queue.
    pub(super) fn reach_engine(&mut self, request: u32) -> u32 {
        let r = &mut self.reqs[request as usize];
        r.engine_arrival = self.now;
        let instance = r.instance;
        self.instances[instance as usize].enqueue_expected(request);
        instance
    }

    /// Instance `instance` finished a step emitting `tokens` tokens to clients: hand them to
    /// its front end. The step's first tokens and finishes are taken off the records until
    /// they are delivered (the delivery event sets them). Returns when the clients get them
    /// and the gap since the instance's previous delivery (the inter-token gap its decoding
    /// requests see), ns.
    pub(super) fn hand_to_frontend(&mut self, instance: u32, tokens: u64, done: &[u32]) -> (Nanos, Nanos) {
        let i = instance as usize;
        let fe = self.sys.groups[self.group_of[i]].cfg.frontend.expect("a front end");
        let at = self.frontends.serve(i, self.now, fe.tokens_ns(tokens));
        // A request decoding through the last step got its previous token at the last
        // delivery; one that joined the decode set in this step, when the step started.
        let since = self.frontends.last_delivery[i].max(self.instances[i].step_started_at());
        self.frontends.last_delivery[i] = at;
        let mut first = Vec::new();
        for &r in &self.out.first_tokens {
            if self.reqs[r as usize].first_token.take().is_some() {
                first.push(r);
            }
        }
        for &r in done {
            self.reqs[r as usize].finish = None;
        }
        if !(first.is_empty() && done.is_empty()) {
            self.frontends.pending[i].push_back(Delivery { at, first, done: done.to_vec() });
            self.queue.push(at, Event::Delivered { instance });
        }
        (at, at - since)
    }

    /// A step of `instance` with a front end ended: its output goes to the front end (a
    /// prefill-only study's hand-offs are first and last tokens). Returns when the clients
    /// get it.
    pub(super) fn deliver_step(&mut self, instance: u32, study: bool) -> Nanos {
        if study {
            let handed = std::mem::take(&mut self.out.handed_off);
            self.out.first_tokens.extend_from_slice(&handed);
            self.out.handed_off = handed;
        }
        let done = std::mem::take(&mut self.leaving);
        let (at, _) = self.hand_to_frontend(instance, self.out.tokens, &done);
        self.leaving = done;
        self.leaving.clear();
        at
    }

    /// The front end delivered the oldest pending output of `instance`: its first tokens and
    /// finishes take effect now. Returns the requests that left the system.
    pub(super) fn delivered(&mut self, instance: u32) -> u64 {
        let d = self.frontends.pending[instance as usize].pop_front().expect("a delivery is pending");
        debug_assert_eq!(d.at, self.now, "deliveries of one front end arrive in order");
        for &r in &d.first {
            // A request preempted before its first token was delivered emits it again; the
            // client saw the earlier one.
            let f = &mut self.reqs[r as usize].first_token;
            *f = Some(f.map_or(d.at, |t| t.min(d.at)));
        }
        for &r in &d.done {
            self.reqs[r as usize].finish = Some(d.at);
        }
        self.leaving.clear();
        self.leaving.extend_from_slice(&d.done);
        d.done.len() as u64
    }
}
