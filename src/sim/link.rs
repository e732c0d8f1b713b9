//! The KV link between prefill and decode instances as a shared resource: each transfer
//! first waits out the link latency, then moves its bytes while sharing bandwidth with the
//! other transfers in flight. A transfer's share is `1 / k`, where `k` is the larger of the
//! number of data-moving transfers leaving its prefill instance and arriving at its decode
//! instance (each instance's devices send or receive over their own links, so an instance's
//! link is what its transfers share). This is processor sharing at both ends, a conservative
//! form of max-min fairness: no instance's link ever carries more than its bandwidth.
//!
//! Work is integer: a transfer's bytes are nanoseconds of the full link, scaled by
//! `SCALE` (2^16), so progress and finish times are exact integer arithmetic and runs are
//! deterministic. The driver holds one pending tick at the earliest moment anything changes
//! (a latency ends or a transfer finishes); a tick of an older generation is stale.

use super::queue::Nanos;

/// Sub-nanosecond resolution of a transfer's remaining work.
const SCALE: u128 = 1 << 16;

#[derive(Debug, Clone)]
struct Flow {
    req: u32,
    src: u32,
    dst: u32,
    /// When the latency has passed and bytes start to move.
    ready_at: Nanos,
    /// Work left: nanoseconds of the whole link × [`SCALE`].
    left: u128,
    /// Transfers sharing the busier of its two ends (0 until it moves bytes).
    share: u128,
}

/// Transfers in flight over the KV links of one system.
#[derive(Debug, Default)]
pub struct SharedLink {
    flows: Vec<Flow>,
    /// When the flows' progress was last brought up to date.
    last: Nanos,
    /// Bumped at every change; the pending tick carries the generation it was planned for.
    pub generation: u64,
    /// Instances in the system (sizes the per-instance counts).
    instances: usize,
}

impl SharedLink {
    pub fn new(instances: usize) -> Self {
        SharedLink { instances, ..Default::default() }
    }

    /// Transfers in flight (waiting out the latency or moving bytes).
    pub fn in_flight(&self) -> usize {
        self.flows.len()
    }

    /// Bring every flow's progress up to `now` at the shares set at the last change.
    fn advance(&mut self, now: Nanos) {
        for f in &mut self.flows {
            let from = self.last.max(f.ready_at);
            if f.share > 0 && now > from {
                let done = (now - from) as u128 * SCALE / f.share;
                f.left = f.left.saturating_sub(done);
            }
        }
        self.last = now;
    }

    /// Start a transfer of `data_ns` nanoseconds of the whole link after `latency_ns`, from
    /// instance `src` to instance `dst`. Returns the time of the next tick.
    pub fn start(&mut self, now: Nanos, req: u32, src: u32, dst: u32, latency_ns: Nanos, data_ns: Nanos) -> Option<Nanos> {
        self.advance(now);
        self.flows.push(Flow { req, src, dst, ready_at: now + latency_ns, left: data_ns as u128 * SCALE, share: 0 });
        self.reshare(now)
    }

    /// A tick at `now`: the transfers that landed (in start order), and the time of the next
    /// tick if any transfer is still in flight.
    pub fn tick(&mut self, now: Nanos, landed: &mut Vec<(u32, u32, u32)>) -> Option<Nanos> {
        self.advance(now);
        let mut i = 0;
        while i < self.flows.len() {
            let f = &self.flows[i];
            if f.ready_at <= now && f.left == 0 {
                landed.push((f.req, f.src, f.dst));
                self.flows.remove(i);
            } else {
                i += 1;
            }
        }
        self.reshare(now)
    }

    /// Set each moving flow's share from the transfers at its two ends, and return the next
    /// moment anything changes.
    fn reshare(&mut self, now: Nanos) -> Option<Nanos> {
        self.generation += 1;
        let (mut out, mut inn) = (vec![0u128; self.instances], vec![0u128; self.instances]);
        for f in self.flows.iter().filter(|f| f.ready_at <= now) {
            out[f.src as usize] += 1;
            inn[f.dst as usize] += 1;
        }
        let mut next: Option<Nanos> = None;
        for f in &mut self.flows {
            let at = if f.ready_at > now {
                f.share = 0;
                f.ready_at
            } else {
                f.share = out[f.src as usize].max(inn[f.dst as usize]);
                // Smallest dt with dt × SCALE / share ≥ left.
                now + (f.left * f.share).div_ceil(SCALE) as Nanos
            };
            next = Some(next.map_or(at, |n: Nanos| n.min(at)));
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(link: &mut SharedLink, mut next: Option<Nanos>) -> Vec<(u32, Nanos)> {
        let mut done = Vec::new();
        let mut landed = Vec::new();
        while let Some(t) = next {
            next = link.tick(t, &mut landed);
            done.extend(landed.drain(..).map(|(r, _, _)| (r, t)));
        }
        done
    }

    #[test]
    fn concurrent_transfers_share_the_link() {
        // Alone: 10 µs latency + 100 µs of data lands at 110 µs.
        let mut l = SharedLink::new(4);
        let n = l.start(0, 0, 0, 2, 10_000, 100_000);
        assert_eq!(run(&mut l, n), vec![(0, 110_000)]);
        // Two from one prefill instance to two decode instances, started together: each gets
        // half of the sender's link, both land at 10 + 200 µs.
        // Mutation: set every share to 1 in `reshare` (no contention): both land at 110 µs.
        let mut l = SharedLink::new(4);
        l.start(0, 0, 0, 2, 10_000, 100_000);
        let n = l.start(0, 1, 0, 3, 10_000, 100_000);
        assert_eq!(run(&mut l, n), vec![(0, 210_000), (1, 210_000)]);
        // Different senders and receivers do not contend.
        let mut l = SharedLink::new(4);
        l.start(0, 0, 0, 2, 10_000, 100_000);
        let n = l.start(0, 1, 1, 3, 10_000, 100_000);
        assert_eq!(run(&mut l, n), vec![(0, 110_000), (1, 110_000)]);
        // A second transfer starting at 60 µs.
        let mut l = SharedLink::new(4);
        assert_eq!(l.start(0, 0, 0, 2, 10_000, 100_000), Some(10_000));
        assert_eq!(l.tick(10_000, &mut Vec::new()), Some(110_000));
        let n = l.start(60_000, 1, 0, 3, 10_000, 100_000);
        // 0: alone 10→60 (50 done), alone 60→70 (10 done, 40 left), shared from 70: lands at
        // 70 + 80 = 150. 1: shared 70→150 (40 done, 60 left), alone: lands at 210.
        assert_eq!(run(&mut l, n), vec![(0, 150_000), (1, 210_000)]);
    }
}
