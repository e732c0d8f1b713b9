//! The event queue: events ordered by (time, sequence number), so events at equal times pop
//! in the order they were pushed and runs are deterministic. A plain binary heap of
//! (time, sequence) keys: the simulator never changes or removes a queued event (stale link
//! ticks are skipped when they pop), so an indexed priority queue (hash map beside the heap)
//! would only add hashing to every push and pop.
//!
//! An open loop without a client-side cap used to queue every arrival at t = 0, numbered
//! 0, 1, … before any other event. It now queues one arrival at a time, pushed with
//! [`EventQueue::push_reserved`] under the sequence number it had then (the first
//! [`EventQueue::reserve`]d numbers), so the pop order, and every output, is unchanged.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Simulated time in integer nanoseconds.
pub type Nanos = u64;

/// What happens at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A request reaches the router.
    Arrival { request: u32 },
    /// A request's instance's front end is done with it: it reaches the engine.
    EngineArrival { request: u32 },
    /// An instance's front end delivered its oldest pending step output to the clients.
    Delivered { instance: u32 },
    /// An instance finishes the step it was running.
    StepDone { instance: u32 },
    /// Something changes on the KV links (a latency ends, a transfer lands); ticks of an
    /// older generation than the link's are stale (see `sim::link`).
    KvTransferTick { generation: u64 },
}

/// An event under its (time, sequence) key; ordered by the key alone (sequence numbers are
/// unique).
#[derive(Debug, Clone, Copy)]
struct Keyed {
    key: (Nanos, u64),
    event: Event,
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for Keyed {}
impl PartialOrd for Keyed {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Keyed {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

/// Min-queue of events by (time, push order).
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Keyed>>,
    next_seq: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the first `n` sequence numbers aside for [`Self::push_reserved`]: events pushed
    /// later by [`Self::push`] come after all of them at equal times. Call before any push.
    pub fn reserve(&mut self, n: u64) {
        debug_assert!(self.next_seq == 0, "sequence numbers are reserved before the first push");
        self.next_seq = n;
    }

    pub fn push(&mut self, at: Nanos, event: Event) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Keyed { key: (at, seq), event }));
    }

    /// Push under reserved sequence number `seq` (below the count given to [`Self::reserve`],
    /// each used once).
    pub fn push_reserved(&mut self, at: Nanos, seq: u64, event: Event) {
        debug_assert!(seq < self.next_seq, "sequence number {seq} was not reserved");
        self.heap.push(Reverse(Keyed { key: (at, seq), event }));
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, Event)> {
        self.heap.pop().map(|Reverse(k)| (k.key.0, k.event))
    }

    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse(k)| k.key.0)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_push_order() {
        let mut q = EventQueue::new();
        q.push(10, Event::StepDone { instance: 1 });
        q.push(5, Event::Arrival { request: 7 });
        q.push(10, Event::StepDone { instance: 0 });
        q.push(5, Event::Arrival { request: 8 });
        let order: Vec<(Nanos, Event)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (5, Event::Arrival { request: 7 }),
                (5, Event::Arrival { request: 8 }),
                (10, Event::StepDone { instance: 1 }),
                (10, Event::StepDone { instance: 0 }),
            ]
        );
    }

    #[test]
    fn reserved_numbers_pop_before_later_pushes_at_equal_times() {
        // An arrival pushed late under its reserved number still pops before a step pushed
        // earlier at the same time, as when every arrival was queued first. Mutation: make
        // `push_reserved` take the next free number (as `push` does) and the order flips.
        let mut q = EventQueue::new();
        q.reserve(2);
        q.push_reserved(3, 0, Event::Arrival { request: 0 });
        q.push(7, Event::StepDone { instance: 0 });
        assert_eq!(q.pop(), Some((3, Event::Arrival { request: 0 })));
        q.push_reserved(7, 1, Event::Arrival { request: 1 });
        assert_eq!(q.pop(), Some((7, Event::Arrival { request: 1 })));
        assert_eq!(q.pop(), Some((7, Event::StepDone { instance: 0 })));
        assert!(q.is_empty());
    }
}
