//! An instance's step: planning it (the scheduler fills it through a [`StepBuilder`], and
//! its batch shape is what the cost model prices) and completing it when it ends (decodes
//! emit tokens, prefill chunks advance their prompts and publish shared prefixes, finished
//! prompts emit their first token, join the decode set or, on a prefill instance, are handed
//! off).

use super::{Instance, Phase, StepBuilder, StepOutcome};
use crate::cost::{BatchShape, PhaseLoad};
use crate::sim::config::{InstanceConfig, Role};
use crate::sim::decode::AcceptanceDraws;
use crate::sim::queue::Nanos;
use crate::sim::records::Requests;
use std::cmp::Reverse;

impl Instance {
    /// Plan the next step: the scheduler fills it through a [`StepBuilder`]. Returns false when
    /// there is nothing to run.
    pub fn plan(&mut self, cfg: &InstanceConfig, reqs: &mut Requests, now: Nanos) -> bool {
        if self.role == Role::Decode {
            self.start_pulls(cfg, reqs);
        }
        self.chunks.clear();
        self.shape = BatchShape::default();
        self.step_chunk_tokens = 0;
        self.step_decodes = 0;
        self.step_dec_ctx = 0;
        // An overlapping engine planned this step while the previous one ran, so it saw the
        // requests that had arrived by then; an idle one plans when a request arrives.
        self.seen_until = if cfg.overlap_scheduling && !self.running.is_empty() { self.last_plan_at } else { now };
        self.last_plan_at = now;
        let mut scheduler = self.scheduler.take().expect("an instance plans one step at a time");
        scheduler.schedule(cfg, &mut StepBuilder { inst: self, reqs, cfg, now });
        self.scheduler = Some(scheduler);
        if self.step_is_empty() {
            return false;
        }
        self.fill_shape(cfg);
        self.busy = true;
        true
    }

    pub(super) fn step_is_empty(&self) -> bool {
        self.chunks.is_empty() && self.step_decodes == 0
    }

    pub(super) fn fill_shape(&mut self, cfg: &InstanceConfig) {
        let mut shape = decodes_shape(self.step_decodes, self.step_dec_ctx, cfg.decode.query_tokens());
        for c in &self.chunks {
            let s = &self.seqs[c.slot as usize];
            shape.prefill.add_seq(c.tokens, s.ctx + c.tokens);
            if c.tokens == s.prompt_left {
                shape.sampled += 1;
            }
            if s.first_chunk && cfg.image_patches > 0 {
                shape.image_patches += cfg.image_patches;
                shape.image_pairs += (cfg.image_patches_per_image as f64).powi(2) * cfg.images_per_request as f64;
            }
        }
        self.shape = shape;
    }

    /// Tokens scheduled in the planned step.
    pub fn planned_tokens(&self) -> u64 {
        self.shape.tokens()
    }

    /// Apply the step that just finished at `now`.
    pub fn complete(&mut self, cfg: &InstanceConfig, reqs: &mut Requests, now: Nanos, draws: &AcceptanceDraws, out: &mut StepOutcome) {
        self.busy = false;
        out.prompts_done.clear();
        out.finished.clear();
        out.first_tokens.clear();
        out.handed_off.clear();
        out.tokens = 0;
        out.decode_seqs = self.step_decodes;
        // Decodes.
        if self.step_decodes > 0 {
            if self.lockstep {
                self.dec_steps += 1;
                self.dec_ctx_sum += self.dec_count;
                out.tokens += self.dec_count;
                while let Some(&Reverse((finish, _, slot, epoch))) = self.finish_heap.peek() {
                    if finish > self.dec_steps {
                        break;
                    }
                    self.finish_heap.pop();
                    let s = &self.seqs[slot as usize];
                    if s.epoch != epoch || s.phase != Phase::Decode {
                        continue;
                    }
                    self.leave_decode(slot);
                    self.finish(slot, reqs, now, out);
                }
            } else {
                self.complete_walked_decodes(cfg, reqs, now, draws, out);
            }
            // Every decoding sequence decoded: those that joined with their KV emitted their
            // first token.
            for req in self.fresh.drain(..) {
                let r = &mut reqs[req as usize];
                if r.first_token.is_none() {
                    r.first_token = Some(now);
                    out.first_tokens.push(req);
                }
            }
        }
        // Prefill chunks.
        let chunks = std::mem::take(&mut self.chunks);
        for c in &chunks {
            let slot = c.slot;
            let s = &mut self.seqs[slot as usize];
            s.prompt_left -= c.tokens;
            s.ctx += c.tokens;
            s.first_chunk = false;
            self.load = self.load.saturating_sub(c.tokens);
            if s.publish_at > 0 && s.ctx >= s.publish_at && s.shared_blocks > 0 {
                // It hit part of its group's prefix and computed more of it: the cached prefix grows.
                let blocks = s.publish_at / self.kv.block_size;
                let g = s.group.expect("publishing requires a group");
                s.publish_at = 0;
                let moved = self.kv.extend_prefix(g, blocks);
                let s = &mut self.seqs[slot as usize];
                s.private_blocks -= moved;
                s.shared_blocks += moved;
                let moved = moved.min(s.reserve);
                s.reserve -= moved;
                self.reserve_sum -= moved;
            } else if s.publish_at > 0 && s.ctx >= s.publish_at {
                let blocks = s.publish_at / self.kv.block_size;
                let g = s.group.expect("publishing requires a group");
                s.publish_at = 0;
                if self.kv.publish_prefix(g, blocks) {
                    let s = &mut self.seqs[slot as usize];
                    s.private_blocks -= blocks;
                    s.shared_blocks = blocks;
                    // Those blocks are the group's now, no longer this sequence's to hold.
                    let moved = blocks.min(s.reserve);
                    s.reserve -= moved;
                    self.reserve_sum -= moved;
                } else {
                    self.seqs[slot as usize].group = None;
                }
            }
            let s = &mut self.seqs[slot as usize];
            if s.prompt_left > 0 {
                continue;
            }
            let req = s.req;
            out.prompts_done.push(req);
            if let Some(p) = self.prefilling.iter().position(|&x| x == slot) {
                self.prefilling.remove(p);
            }
            if self.role == Role::Prefill {
                // The token it samples is not the client's (the decode side emits that, see
                // `fresh`): the request leaves with its KV held here until the transfer lands.
                reqs[req as usize].held_blocks = self.hand_off(slot);
                self.free_slot(slot);
                out.handed_off.push(req);
                continue;
            }
            // Prompt done: the step emits a token.
            let s = &mut self.seqs[slot as usize];
            s.out_left -= 1;
            let r = &mut reqs[req as usize];
            r.generated += 1;
            out.tokens += 1;
            if r.first_token.is_none() {
                r.first_token = Some(now);
                out.first_tokens.push(req);
            }
            if self.seqs[slot as usize].out_left == 0 {
                self.finish(slot, reqs, now, out);
            } else {
                self.join_decode(slot);
            }
        }
        self.chunks = chunks;
        self.chunks.clear();
    }

    pub(super) fn finish(&mut self, slot: u32, reqs: &mut Requests, now: Nanos, out: &mut StepOutcome) {
        self.release(slot);
        let req = self.seqs[slot as usize].req;
        self.free_slot(slot);
        let r = &mut reqs[req as usize];
        r.generated = r.output;
        r.finish = Some(now);
        out.finished.push(req);
    }

    /// Fill a step's shape for the decode set only (tests and benchmarks).
    pub fn step_shape(&self) -> &BatchShape {
        &self.shape
    }

    /// The planned step: the requests decoding (ascending) and each prefill chunk as
    /// (request, tokens), in scheduling order.
    #[cfg(test)]
    pub(crate) fn planned(&self) -> (Vec<u32>, Vec<(u32, u64)>) {
        let mut decodes: Vec<u32> = if self.step_decodes > 0 {
            self.running.iter().map(|&(_, slot)| &self.seqs[slot as usize]).filter(|s| s.phase == Phase::Decode).map(|s| s.req).collect()
        } else {
            Vec::new()
        };
        decodes.sort_unstable();
        (decodes, self.chunks.iter().map(|c| (self.seqs[c.slot as usize].req, c.tokens)).collect())
    }
}

/// The shape of a step whose only work is `n` decodes of `q` query tokens each over `dec_ctx`
/// cached tokens in all (none: an empty shape).
pub(super) fn decodes_shape(n: u64, dec_ctx: u64, q: u64) -> BatchShape {
    let mut shape = BatchShape::default();
    if n > 0 {
        // Each decode query attends to its cached context plus the new tokens.
        let ctx = dec_ctx + n * q;
        shape.decode = PhaseLoad { seqs: n, tokens: n * q, context: ctx, pairs: (q * ctx) as f64, query_sq: (n * q * q) as f64 };
        shape.sampled += n * q;
    }
    shape
}
