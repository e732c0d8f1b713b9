//! The event queue: events ordered by (time, sequence number), so events at equal times pop
//! in the order they were pushed and runs are deterministic.

use priority_queue::PriorityQueue;
use std::cmp::Reverse;
use std::hash::{Hash, Hasher};

/// Simulated time in integer nanoseconds.
pub type Nanos = u64;

/// What happens at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A request reaches the router.
    Arrival { request: u32 },
    /// An instance finishes the step it was running.
    StepDone { instance: u32 },
    /// Something changes on the KV links (a latency ends, a transfer lands); ticks of an
    /// older generation than the link's are stale (see `sim::link`).
    KvTransferTick { generation: u64 },
}

/// An event with its unique sequence number (the queue's key).
#[derive(Debug, Clone, Copy)]
struct Keyed {
    seq: u64,
    event: Event,
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}
impl Eq for Keyed {}
impl Hash for Keyed {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.seq.hash(state);
    }
}

/// Min-queue of events by (time, push order).
#[derive(Debug, Default)]
pub struct EventQueue {
    queue: PriorityQueue<Keyed, Reverse<(Nanos, u64)>>,
    next_seq: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, at: Nanos, event: Event) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push(Keyed { seq, event }, Reverse((at, seq)));
    }

    pub fn pop(&mut self) -> Option<(Nanos, Event)> {
        self.queue.pop().map(|(k, Reverse((t, _)))| (t, k.event))
    }

    pub fn peek_time(&self) -> Option<Nanos> {
        self.queue.peek().map(|(_, Reverse((t, _)))| *t)
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
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
}
