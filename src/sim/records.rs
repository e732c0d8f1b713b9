//! The records of a run's requests, indexed by request id (arrival order). A long open loop
//! does not keep them all: once the report has taken what it needs from the oldest finished
//! records (`Simulation` folds them into its running tallies, in id order), they are dropped
//! from the front, so memory follows the requests in flight, not the requests simulated.
//! Ids never change: index `id` stays valid for every record not yet dropped.

use super::RequestState;
use std::ops::{Index, IndexMut};

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
