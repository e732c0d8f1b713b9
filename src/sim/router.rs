//! Which instance of a set (the entry instances, or the decode instances) receives the next
//! request. Least-loaded routing reads the minimum of a segment tree over (load, id), so ties
//! go to the lowest id as a scan would; an instance's leaf is updated whenever the simulation
//! has touched it, so routing costs O(1) and an update O(log n) instead of a scan over every
//! instance per request (2,048 replicas: a scan of 2,048 loads per arrival).

use super::config::Routing;
use super::instance::Instance;

/// The two sets requests are routed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    /// Mixed or prefill instances: where requests enter.
    Entry = 0,
    Decode = 1,
}

/// Minimum of (load, id) over a fixed set of instances.
#[derive(Debug)]
struct LoadTree {
    /// Leaves start here (a power of two); node `i` holds the minimum of nodes `2i` and `2i + 1`.
    leaves: usize,
    node: Vec<(u64, u32)>,
}

const EMPTY: (u64, u32) = (u64::MAX, u32::MAX);

impl LoadTree {
    fn new(ids: &[u32]) -> Self {
        let leaves = ids.len().next_power_of_two();
        let mut node = vec![EMPTY; 2 * leaves];
        for (p, &id) in ids.iter().enumerate() {
            node[leaves + p] = (0, id);
        }
        for i in (1..leaves).rev() {
            node[i] = node[2 * i].min(node[2 * i + 1]);
        }
        LoadTree { leaves, node }
    }

    fn set(&mut self, pos: usize, load: u64) {
        let mut i = self.leaves + pos;
        if self.node[i].0 == load {
            return;
        }
        self.node[i].0 = load;
        while i > 1 {
            i /= 2;
            let m = self.node[2 * i].min(self.node[2 * i + 1]);
            if self.node[i] == m {
                break;
            }
            self.node[i] = m;
        }
    }

    fn min_id(&self) -> Option<u32> {
        let m = self.node[1];
        (m != EMPTY).then_some(m.1)
    }
}

/// The routing state of a run.
#[derive(Debug)]
pub struct Router {
    routing: Routing,
    ids: [Vec<u32>; 2],
    trees: [LoadTree; 2],
    /// Per instance: its set and position there.
    place: Vec<(Set, usize)>,
    rr: [usize; 2],
    /// Per set: how many of its instances (the first ones) take new requests; the others only
    /// finish what they hold (a replica plan's count changing at window edges).
    active: [usize; 2],
}

impl Router {
    /// Every instance starts with no load.
    pub fn new(routing: Routing, entry: &[u32], decoders: &[u32], instances: usize) -> Self {
        let mut place = vec![(Set::Entry, 0); instances];
        for (p, &id) in decoders.iter().enumerate() {
            place[id as usize] = (Set::Decode, p);
        }
        for (p, &id) in entry.iter().enumerate() {
            place[id as usize] = (Set::Entry, p);
        }
        Router {
            routing,
            ids: [entry.to_vec(), decoders.to_vec()],
            trees: [LoadTree::new(entry), LoadTree::new(decoders)],
            place,
            rr: [0, 0],
            active: [entry.len(), decoders.len()],
        }
    }

    /// Instance `id` has load `load` now (call whenever it may have changed).
    pub fn update(&mut self, id: u32, load: u64) {
        if self.routing == Routing::LeastLoaded {
            let (set, pos) = self.place[id as usize];
            // An instance out of use keeps the largest load, so it is never the least loaded.
            if pos < self.active[set as usize] {
                self.trees[set as usize].set(pos, load);
            }
        }
    }

    /// From now on only the first `count` instances of `set` (at least one) take new requests;
    /// the others keep what they hold and finish it. Instances brought back into use take
    /// requests by their present load.
    pub fn set_active(&mut self, set: Set, count: usize, instances: &[Instance]) {
        let s = set as usize;
        let count = count.clamp(1, self.ids[s].len().max(1));
        for pos in count..self.active[s] {
            self.trees[s].set(pos, u64::MAX);
        }
        for pos in self.active[s]..count {
            self.trees[s].set(pos, instances[self.ids[s][pos] as usize].load);
        }
        self.active[s] = count;
    }

    /// The instance of `set` the next request goes to. `instances` only checks, in debug
    /// builds, that every load was reported (the minimum is the one a scan finds).
    pub fn route(&mut self, set: Set, instances: &[Instance]) -> u32 {
        let ids = &self.ids[set as usize][..self.active[set as usize]];
        match self.routing {
            Routing::LeastLoaded => {
                let id = self.trees[set as usize].min_id().expect("a group has instances");
                // Mutation: drop the update after an instance plans, and this fires in the
                // multi-replica simulator tests.
                debug_assert_eq!(
                    Some(id),
                    ids.iter().copied().min_by_key(|&i| (instances[i as usize].load, i)),
                    "an instance's load changed without the router being told"
                );
                id
            }
            Routing::RoundRobin => {
                let rr = &mut self.rr[set as usize];
                let i = ids[*rr % ids.len()];
                *rr += 1;
                i
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_finds_the_least_load_and_the_lowest_id_on_ties() {
        // Mutation: compare loads alone in `LoadTree` (no id) and a tie can go to id 6.
        let ids: Vec<u32> = vec![2, 4, 6, 8, 10];
        let mut t = LoadTree::new(&ids);
        assert_eq!(t.min_id(), Some(2));
        for (p, load) in [(0, 5), (1, 3), (2, 3), (3, 9), (4, 4)] {
            t.set(p, load);
        }
        assert_eq!(t.min_id(), Some(4));
        t.set(1, 7);
        assert_eq!(t.min_id(), Some(6));
        t.set(2, 8);
        assert_eq!(t.min_id(), Some(10));
        t.set(0, 4);
        assert_eq!(t.min_id(), Some(2));
        assert_eq!(LoadTree::new(&[]).min_id(), None);
    }
}
