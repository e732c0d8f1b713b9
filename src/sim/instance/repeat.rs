//! A lockstep decode step repeated without the scheduler. While every running sequence of a
//! mixed instance decodes, nothing waits or prefills and no sequence finishes with the step in
//! flight, the next step its scheduler plans is the same decode set with every context one
//! token longer (the policies that say so: [`Scheduler::repeats_decodes`]), as long as the KV
//! blocks the contexts crossing a block edge need are at hand. [`Instance::repeat_decodes`]
//! completes the step in flight and plans that step, with the same state changes as
//! [`Instance::complete`] and [`Instance::plan`] would make; a latencies-only run uses it to run
//! an instance ahead between arrivals (`sim::simulation::ahead`).
//!
//! [`Scheduler::repeats_decodes`]: super::Scheduler::repeats_decodes

use super::step::decodes_shape;
use super::Instance;
use crate::cost::BatchShape;
use crate::sim::config::{InstanceConfig, Role};
use crate::sim::queue::Nanos;
use std::cmp::Reverse;

impl Instance {
    /// Whether the step in flight can be completed and the same decode step planned by
    /// [`Instance::repeat_decodes`]: it decodes every decoding sequence and nothing else, on a
    /// mixed instance in lockstep where nothing waits or prefills; no sequence finishes with it
    /// (a stale entry of the finish heap due by then counts as one: it is rare, and the
    /// scheduler sorts it out); the next step's KV blocks can be allocated; and the scheduler
    /// would plan exactly that step.
    pub fn repeatable(&self) -> bool {
        self.busy
            && self.lockstep
            && self.role == Role::Mixed
            && self.step_decodes > 0
            && self.step_decodes == self.dec_count
            && self.chunks.is_empty()
            && self.waiting.is_empty()
            && self.prefilling.is_empty()
            && self.fresh.is_empty()
            && self.finish_heap.peek().is_none_or(|&Reverse((finish, ..))| finish > self.dec_steps + 1)
            && self.scheduler.as_ref().is_some_and(|s| s.repeats_decodes())
            && {
                let need = self.repeat_blocks();
                self.kv.free() >= need || self.kv.available() >= need
            }
    }

    /// KV blocks the repeated step allocates: one per sequence whose context, one token longer
    /// once the step in flight completes, fills its last block (as `try_decodes` counts them
    /// then). Read before the step in flight is completed.
    fn repeat_blocks(&self) -> u64 {
        let bs = self.kv.block_size;
        self.residue[((bs - (self.dec_steps + 1) % bs) % bs) as usize]
    }

    /// The shape of the step [`Instance::repeat_decodes`] would plan: the same decodes, each
    /// context one token longer.
    pub fn repeated_shape(&self, cfg: &InstanceConfig) -> BatchShape {
        decodes_shape(self.dec_count, self.dec_ctx_sum + self.dec_count, cfg.decode.query_tokens())
    }

    /// Complete the step in flight at `now` and plan the same decode step then, of `shape`
    /// ([`Instance::repeated_shape`], which the caller has priced); call only when
    /// [`Instance::repeatable`]. Returns the output tokens the completed step emitted (one per
    /// decoding sequence; no first token, no finish).
    pub fn repeat_decodes(&mut self, cfg: &InstanceConfig, now: Nanos, shape: BatchShape) -> u64 {
        debug_assert!(self.repeatable());
        let need = self.repeat_blocks();
        // `complete`: a lockstep decode step where nobody finishes.
        self.busy = false;
        self.dec_steps += 1;
        self.dec_ctx_sum += self.dec_count;
        // `plan`, with the scheduler's step: the decode set (`try_decodes`) and nothing else.
        self.seen_until = if cfg.overlap_scheduling && !self.running.is_empty() { self.last_plan_at } else { now };
        self.last_plan_at = now;
        let allocated = self.kv.try_allocate(need);
        debug_assert!(allocated, "repeatable() checked the blocks");
        self.step_chunk_tokens = 0;
        self.step_decodes = self.dec_count;
        self.step_dec_ctx = self.dec_ctx_sum;
        self.scheduler.as_mut().expect("an instance plans one step at a time").repeated_decodes();
        self.shape = shape;
        #[cfg(debug_assertions)]
        {
            self.fill_shape(cfg);
            debug_assert_eq!(self.shape, shape, "the repeated step's shape is the one planning it gives");
        }
        self.busy = true;
        self.dec_count
    }
}
