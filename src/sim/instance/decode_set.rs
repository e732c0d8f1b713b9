//! The decode set's bookkeeping: sequences join it when their prompt is done (or their KV has
//! landed), leave it when they finish or are preempted, and a sequence's context and private
//! KV blocks are read through it.
//!
//! Decoding sequences without speculation advance in lockstep (one token per step each), so
//! they are kept in aggregate: Σ context, counts by context modulo the block size (which
//! sequences need a new KV block this step) and a heap of finish steps. A decode step then
//! costs O(1) plus O(log n) per finishing sequence, whatever the batch size. With MTP or
//! block drafts each sequence accepts a random number of tokens, and the set is walked.

use super::{Instance, Phase, Seq, StepOutcome};
use crate::sim::config::InstanceConfig;
use crate::sim::decode::AcceptanceDraws;
use crate::sim::queue::Nanos;
use crate::sim::records::Requests;
use std::cmp::Reverse;

impl Instance {
    pub(super) fn seq_ctx(&self, s: &Seq) -> u64 {
        if s.phase == Phase::Decode && self.lockstep {
            s.ctx + (self.dec_steps - s.base_step)
        } else {
            s.ctx
        }
    }

    pub(super) fn join_decode(&mut self, slot: u32) {
        let bs = self.kv.block_size;
        let s = &mut self.seqs[slot as usize];
        s.phase = Phase::Decode;
        self.dec_count += 1;
        self.dec_ctx_sum += s.ctx;
        if self.lockstep {
            s.base_step = self.dec_steps;
            let r = ((s.ctx + bs - (self.dec_steps % bs)) % bs) as usize;
            self.residue[r] += 1;
            self.finish_heap.push(Reverse((self.dec_steps + s.out_left, s.admit_seq, slot, s.epoch)));
            self.dec_out_sum += s.out_left + s.base_step;
        } else {
            self.dec_out_sum += s.out_left;
            self.dec_members.push(slot);
        }
        self.load = self.load.saturating_add(1);
    }

    /// Remove a decode member; returns its current context.
    pub(super) fn leave_decode(&mut self, slot: u32) -> u64 {
        let bs = self.kv.block_size;
        let ctx = self.seq_ctx(&self.seqs[slot as usize]);
        self.dec_count -= 1;
        self.dec_ctx_sum -= ctx;
        if self.lockstep {
            let s = &self.seqs[slot as usize];
            let r = ((s.ctx + bs - (s.base_step % bs)) % bs) as usize;
            self.residue[r] -= 1;
            self.dec_out_sum -= s.out_left + s.base_step;
        } else if let Some(p) = self.dec_members.iter().position(|&m| m == slot) {
            self.dec_out_sum -= self.seqs[slot as usize].out_left;
            self.dec_members.swap_remove(p);
        }
        self.load = self.load.saturating_sub(1);
        ctx
    }

    pub(super) fn private_blocks(&self, slot: u32) -> u64 {
        let s = &self.seqs[slot as usize];
        if s.phase == Phase::Decode && self.lockstep {
            self.kv.blocks_for(self.seq_ctx(s)).saturating_sub(s.shared_blocks)
        } else {
            s.private_blocks
        }
    }

    /// Speculative decodes (MTP, block drafts): each sequence accepts its own number of tokens.
    pub(super) fn complete_walked_decodes(
        &mut self,
        cfg: &InstanceConfig,
        reqs: &mut Requests,
        now: Nanos,
        draws: &AcceptanceDraws,
        out: &mut StepOutcome,
    ) {
        let mut i = 0;
        while i < self.dec_members.len() {
            let slot = self.dec_members[i];
            let s = &mut self.seqs[slot as usize];
            let accepted = cfg.decode.draw_accepted(draws, s.req, reqs[s.req as usize].generated);
            let emitted = (1 + accepted).min(s.out_left);
            s.ctx += emitted;
            s.out_left -= emitted;
            self.dec_out_sum -= emitted;
            self.dec_ctx_sum += emitted;
            out.tokens += emitted;
            reqs[s.req as usize].generated += emitted;
            if s.out_left == 0 {
                self.leave_decode(slot);
                self.finish(slot, reqs, now, out);
            } else {
                i += 1;
            }
        }
    }
}
