//! The paged KV cache of one instance: a pool of fixed-size blocks with admission by whole
//! blocks, plus a block-level LRU prefix cache for workloads that declare shared prefixes.
//!
//! Blocks are counted, not individually tracked: a sequence holds `ceil(tokens / block)`
//! private blocks; a cached prefix holds its full blocks once, shared by every running request
//! of its group. Unreferenced prefixes stay cached until the pool needs their blocks (LRU).

use std::collections::BTreeMap;

/// One cached shared prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PrefixEntry {
    blocks: u64,
    refs: u32,
    last_used: u64,
}

#[derive(Debug, Clone)]
pub struct KvBlockPool {
    pub block_size: u64,
    pub capacity: u64,
    /// Blocks held privately by sequences.
    private_used: u64,
    /// Blocks held by cached prefixes (referenced or not).
    prefix_used: u64,
    prefixes: BTreeMap<u32, PrefixEntry>,
    clock: u64,
    /// Highest occupancy seen.
    pub peak_used: u64,
}

impl KvBlockPool {
    pub fn new(capacity: u64, block_size: u64) -> Self {
        KvBlockPool { block_size, capacity, private_used: 0, prefix_used: 0, prefixes: BTreeMap::new(), clock: 0, peak_used: 0 }
    }

    pub fn blocks_for(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.block_size)
    }

    pub fn used(&self) -> u64 {
        self.private_used + self.prefix_used
    }

    pub fn free(&self) -> u64 {
        self.capacity - self.used()
    }

    /// Blocks free now or after evicting unreferenced cached prefixes.
    pub fn available(&self) -> u64 {
        self.free() + self.evictable()
    }

    /// Blocks held privately by sequences.
    pub fn private_used(&self) -> u64 {
        self.private_used
    }

    /// Blocks that could be made free by evicting unreferenced prefixes.
    fn evictable(&self) -> u64 {
        self.prefixes.values().filter(|e| e.refs == 0).map(|e| e.blocks).sum()
    }

    /// Reserve `n` private blocks, evicting unreferenced cached prefixes (least recently used
    /// first) if needed. Fails without side effects when even that is not enough.
    pub fn try_allocate(&mut self, n: u64) -> bool {
        if n == 0 {
            return true;
        }
        if self.free() < n {
            if self.free() + self.evictable() < n {
                return false;
            }
            while self.free() < n {
                let victim = self
                    .prefixes
                    .iter()
                    .filter(|(_, e)| e.refs == 0)
                    .min_by_key(|(g, e)| (e.last_used, **g))
                    .map(|(g, _)| *g)
                    .expect("evictable blocks exist");
                let e = self.prefixes.remove(&victim).expect("present");
                self.prefix_used -= e.blocks;
            }
        }
        self.private_used += n;
        self.peak_used = self.peak_used.max(self.used());
        true
    }

    pub fn release(&mut self, n: u64) {
        debug_assert!(n <= self.private_used, "releasing {n} of {} private blocks", self.private_used);
        self.private_used -= n;
    }

    /// Cached blocks of `group`'s prefix, taking a reference if present.
    pub fn acquire_prefix(&mut self, group: u32) -> u64 {
        self.clock += 1;
        let clock = self.clock;
        match self.prefixes.get_mut(&group) {
            Some(e) => {
                e.refs += 1;
                e.last_used = clock;
                e.blocks
            }
            None => 0,
        }
    }

    /// A request of `group` finished computing its prefix: turn `blocks` of its private blocks
    /// into a shared cached prefix it references. Returns whether it was published (another
    /// request may have published the group first).
    pub fn publish_prefix(&mut self, group: u32, blocks: u64) -> bool {
        if blocks == 0 || self.prefixes.contains_key(&group) {
            return false;
        }
        self.clock += 1;
        self.private_used -= blocks;
        self.prefix_used += blocks;
        self.prefixes.insert(group, PrefixEntry { blocks, refs: 1, last_used: self.clock });
        true
    }

    /// A request holding a reference to `group`'s prefix computed it further, to `blocks` in
    /// all: the cached prefix grows to that length, taking over the blocks beyond what it held
    /// from the request's private ones. Returns the blocks taken over (none when the prefix
    /// already reaches that far). Prefixes of a group form one chain (see
    /// `workload::trace::PrefixTrie`), so a longer prefix extends every shorter one.
    pub fn extend_prefix(&mut self, group: u32, blocks: u64) -> u64 {
        let Some(e) = self.prefixes.get_mut(&group) else { return 0 };
        let moved = blocks.saturating_sub(e.blocks);
        e.blocks += moved;
        self.private_used -= moved;
        self.prefix_used += moved;
        moved
    }

    /// Drop a reference to `group`'s prefix (the blocks stay cached until evicted).
    pub fn release_prefix(&mut self, group: u32) {
        if let Some(e) = self.prefixes.get_mut(&group) {
            e.refs = e.refs.saturating_sub(1);
        }
    }

    /// Blocks requests hold: everything in use but the unreferenced cached prefixes.
    pub fn held(&self) -> u64 {
        self.used() - self.evictable()
    }

    pub fn cached_prefixes(&self) -> usize {
        self.prefixes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_all_or_nothing() {
        let mut p = KvBlockPool::new(10, 128);
        assert_eq!(p.blocks_for(129), 2);
        assert!(p.try_allocate(7));
        assert!(!p.try_allocate(4));
        assert_eq!(p.used(), 7);
        p.release(7);
        assert!(p.try_allocate(10));
        assert_eq!(p.peak_used, 10);
    }

    #[test]
    fn prefixes_are_shared_and_evicted_lru_when_unreferenced() {
        let mut p = KvBlockPool::new(10, 16);
        assert!(p.try_allocate(4));
        assert!(p.publish_prefix(1, 3));
        assert_eq!(p.acquire_prefix(1), 3);
        assert!(p.try_allocate(2));
        assert!(p.publish_prefix(2, 2));
        assert_eq!(p.used(), 6);
        // Both referenced: nothing can be evicted.
        assert!(!p.try_allocate(5));
        p.release_prefix(1);
        p.release_prefix(1);
        p.release_prefix(2);
        // Group 1 (least recently used) goes first; group 2 survives.
        assert!(p.try_allocate(5));
        assert_eq!(p.acquire_prefix(1), 0);
        assert_eq!(p.acquire_prefix(2), 2);
        assert_eq!(p.used(), 1 + 2 + 5);
    }

    #[test]
    fn a_referenced_prefix_grows_by_the_blocks_its_extender_held() {
        // Mutation: add `blocks` instead of the difference and the pool counts 5 + 2 blocks.
        let mut p = KvBlockPool::new(10, 16);
        assert!(p.try_allocate(2));
        assert!(p.publish_prefix(1, 2));
        assert_eq!(p.acquire_prefix(1), 2);
        assert!(p.try_allocate(3));
        assert_eq!(p.extend_prefix(1, 5), 3);
        assert_eq!((p.used(), p.private_used()), (5, 0));
        assert_eq!(p.extend_prefix(1, 4), 0);
        assert_eq!(p.acquire_prefix(1), 5);
    }
}
