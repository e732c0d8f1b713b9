//! What a run records: each request's life ([`RequestState`]), what each engine step did
//! ([`StepRecord`]), and the store of the requests' records ([`Requests`]).
//!
//! The records of a run's requests are indexed by request id (arrival order). A long open loop
//! does not keep them all: once the report has taken what it needs from the oldest finished
//! records (`Simulation` folds them into its running tallies, in id order), they are dropped
//! from the front, so memory follows the requests in flight, not the requests simulated.
//! Ids never change: index `id` stays valid for every record not yet dropped.

use super::queue::Nanos;
use crate::workload::arrival::NewRequest;
use std::ops::{Index, IndexMut};

/// A request's life, as the simulation records it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestState {
    /// When the client sent it (its TTFT and end-to-end latency run from here).
    pub arrival: Nanos,
    /// When it reached the engine's waiting queue: its arrival, or later when the engine's
    /// front end processed it first (`InstanceConfig::frontend`).
    pub engine_arrival: Nanos,
    pub input: u64,
    pub output: u64,
    pub prefix_group: Option<u32>,
    pub prefix_len: u64,
    /// First time a scheduler admitted it.
    pub scheduled: Option<Nanos>,
    /// Prompt tokens found in the KV cache at that first admission (prefix-cache hits).
    pub cached: u64,
    /// When the client received its first token, and its last (with a front end, when the
    /// front end delivered the step's output; until then `None`).
    pub first_token: Option<Nanos>,
    pub finish: Option<Nanos>,
    /// Admission on a decode instance (P/D).
    pub decode_admitted: Option<Nanos>,
    pub generated: u64,
    pub preemptions: u32,
    /// Σ over its preemptions of the tokens it had generated then (recomputed with the prompt).
    pub generated_at_preemptions: u64,
    /// Preemptions that caught it still prefilling (part of its prompt computed, then dropped).
    pub preempted_in_prefill: u32,
    /// P/D: the prefill instance that computed its prompt, and the KV blocks it holds there
    /// until the transfer to the decode instance lands.
    pub kv_source: u32,
    pub held_blocks: u64,
    /// P/D: the blocks the decode instance allocated for its KV when the pull started.
    pub pull_blocks: u64,
    /// Its prompt counts in the input throughput (once, not again when recomputed).
    pub prompt_counted: bool,
    pub instance: u32,
    /// Its runs of consecutive decode steps, for its inter-token gaps (ITL); the last one is
    /// open while it decodes.
    pub decoded: Vec<DecodeSegment>,
}

/// A run of one request's tokens on one instance: a token of its own at `start` (a prompt
/// completed in the step: its first token, or the next one after a preemption), then one token
/// at each of the instance's decode steps `from..to` (indices into its token log, the delivery
/// time of each of its decode steps). A preemption or the request's end closes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeSegment {
    pub instance: u32,
    pub start: Option<Nanos>,
    pub from: u64,
    pub to: u64,
}

impl DecodeSegment {
    /// `to` of a segment still decoding.
    pub const OPEN: u64 = u64::MAX;
}

impl RequestState {
    /// Tokens to (re)compute when admitted: the prompt plus anything generated before a
    /// preemption.
    pub fn prompt_tokens(&self) -> u64 {
        self.input + self.generated
    }

    pub(super) fn from_new(n: &NewRequest, image_tokens: u64) -> Self {
        RequestState {
            arrival: n.arrival_ns,
            engine_arrival: n.arrival_ns,
            input: n.input + image_tokens,
            output: n.output,
            prefix_group: n.prefix_group,
            prefix_len: n.prefix_len,
            ..Default::default()
        }
    }
}

/// What one engine step did, for tests and traces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRecord {
    pub instance: u32,
    pub start: Nanos,
    pub end: Nanos,
    pub prefill_seqs: u64,
    pub prefill_tokens: u64,
    pub decode_seqs: u64,
    pub decode_tokens: u64,
    /// KV blocks in use on the instance once the step's blocks are allocated.
    pub kv_used: u64,
}

/// Records of ids `base..base + len`, in id order.
#[derive(Debug, Clone, Default)]
pub struct Requests {
    base: usize,
    live: Vec<RequestState>,
}

/// Dropped records are removed from the front of the vector once they are at least this many
/// and half of it, so the move costs O(1) per record.
const COMPACT_MIN: usize = 4096;

impl Requests {
    /// Requests recorded so far (the next id).
    pub fn issued(&self) -> usize {
        self.base + self.live.len()
    }

    pub fn push(&mut self, r: RequestState) {
        self.live.push(r);
    }

    /// The record of `id`, if it was not dropped.
    pub fn get(&self, id: usize) -> Option<&RequestState> {
        id.checked_sub(self.base).and_then(|i| self.live.get(i))
    }

    /// Forget the records of ids below `id` (the caller has read them).
    pub fn drop_before(&mut self, id: usize) {
        let n = id.saturating_sub(self.base).min(self.live.len());
        if n >= COMPACT_MIN && 2 * n >= self.live.len() {
            self.live.drain(..n);
            self.base += n;
        }
    }

    /// The records kept, in id order (every record, when none was dropped).
    pub fn into_vec(self) -> Vec<RequestState> {
        self.live
    }

    pub fn iter(&self) -> impl Iterator<Item = &RequestState> {
        self.live.iter()
    }
}

impl FromIterator<RequestState> for Requests {
    fn from_iter<I: IntoIterator<Item = RequestState>>(iter: I) -> Self {
        Requests { base: 0, live: iter.into_iter().collect() }
    }
}

impl Index<usize> for Requests {
    type Output = RequestState;
    fn index(&self, id: usize) -> &RequestState {
        &self.live[id - self.base]
    }
}

impl IndexMut<usize> for Requests {
    fn index_mut(&mut self, id: usize) -> &mut RequestState {
        &mut self.live[id - self.base]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_valid_after_the_front_is_dropped() {
        // Mutation: drain without moving `base` and the id 5000 reads the record of 9096.
        let mut r: Requests = (0..10_000).map(|i| RequestState { input: i, ..Default::default() }).collect();
        r.drop_before(100); // too few to move
        assert_eq!(r[0].input, 0);
        r.drop_before(5000);
        assert_eq!((r[5000].input, r[9999].input, r.issued()), (5000, 9999, 10_000));
        assert!(r.get(4999).is_none());
        r.push(RequestState { input: 10_000, ..Default::default() });
        assert_eq!(r[10_000].input, 10_000);
    }
}
