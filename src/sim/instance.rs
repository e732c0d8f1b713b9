//! One serving instance (a DP replica, or a prefill / decode instance in P/D): its waiting
//! queue, running sequences, KV block pool, and the mechanics of a step — what a scheduler
//! may schedule (decodes, prefill chunks, admissions, preemptions) and what completing a step
//! does (tokens, first tokens, finishes).
//!
//! Decoding sequences without speculation advance in lockstep (one token per step each), so
//! they are kept in aggregate: Σ context, counts by context modulo the block size (which
//! sequences need a new KV block this step) and a heap of finish steps. A decode step then
//! costs O(1) plus O(log n) per finishing sequence, whatever the batch size. With MTP or
//! block drafts each sequence accepts a random number of tokens, and the set is walked.

use super::kv::KvBlockPool;
use super::queue::Nanos;
use super::{DecodeMode, InstanceConfig, RequestState};
use crate::cost::{BatchShape, PhaseLoad};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

/// What an instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Prefill and decode (aggregated serving).
    Mixed,
    /// Prefill only: a request leaves after its first token, its KV sent to a decode instance.
    Prefill,
    /// Decode only: requests arrive with their prompt's KV.
    Decode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Free,
    Prefill,
    Decode,
}

/// A running sequence.
#[derive(Debug, Clone)]
struct Seq {
    req: u32,
    admit_seq: u64,
    epoch: u32,
    phase: Phase,
    /// Prompt tokens still to compute (recompute after preemption included).
    prompt_left: u64,
    /// Tokens in the KV cache (for lockstep decode members: at `base_step`).
    ctx: u64,
    out_left: u64,
    /// Lockstep decode: the set's step count when this sequence joined.
    base_step: u64,
    private_blocks: u64,
    shared_blocks: u64,
    group: Option<u32>,
    /// Context length at which the group's prefix is complete (0 = nothing to publish).
    publish_at: u64,
    /// The next chunk is the prompt's first (vision encoding runs with it).
    first_chunk: bool,
}

/// A prefill chunk scheduled in the current step.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    slot: u32,
    tokens: u64,
}

/// Per-step outcome handed back to the driver.
#[derive(Debug, Default)]
pub struct StepOutcome {
    /// Requests that produced their first token in this step.
    pub first_tokens: Vec<u32>,
    /// Requests that finished (all output tokens) in this step.
    pub finished: Vec<u32>,
    /// Requests handed off after prefill (prefill instances).
    pub handed_off: Vec<u32>,
    /// Output tokens emitted.
    pub tokens: u64,
    /// Decode sequences that received tokens (one inter-token gap each).
    pub decode_seqs: u64,
}

#[derive(Debug)]
pub struct Instance {
    pub id: u32,
    pub role: Role,
    pub kv: KvBlockPool,
    waiting: VecDeque<u32>,
    /// Prefilling sequences in admission order.
    prefilling: VecDeque<u32>,
    seqs: Vec<Seq>,
    free_slots: Vec<u32>,
    /// Every running sequence by admission order (victims are the newest).
    running: BTreeSet<(u64, u32)>,
    next_admit: u64,
    // Decode set.
    lockstep: bool,
    dec_steps: u64,
    dec_count: u64,
    dec_ctx_sum: u64,
    residue: Vec<u64>,
    finish_heap: BinaryHeap<Reverse<(u64, u64, u32, u32)>>,
    dec_members: Vec<u32>,
    // The step in flight.
    pub busy: bool,
    chunks: Vec<Chunk>,
    step_decodes: u64,
    step_dec_ctx: u64,
    pub shape: BatchShape,
    /// Σ prompt tokens waiting or prefilling + decoding sequences: the router's load measure.
    pub load: u64,
    pub preemptions: u64,
    /// Latency of the step in flight, ms.
    pub step_ms: f64,
}

impl Instance {
    pub fn new(id: u32, role: Role, cfg: &InstanceConfig) -> Self {
        let lockstep = matches!(cfg.decode, DecodeMode::Plain);
        Instance {
            id,
            role,
            kv: KvBlockPool::new(cfg.kv_blocks, cfg.block_size),
            waiting: VecDeque::new(),
            prefilling: VecDeque::new(),
            seqs: Vec::new(),
            free_slots: Vec::new(),
            running: BTreeSet::new(),
            next_admit: 0,
            lockstep,
            dec_steps: 0,
            dec_count: 0,
            dec_ctx_sum: 0,
            residue: vec![0; cfg.block_size as usize],
            finish_heap: BinaryHeap::new(),
            dec_members: Vec::new(),
            busy: false,
            chunks: Vec::new(),
            step_decodes: 0,
            step_dec_ctx: 0,
            shape: BatchShape::default(),
            load: 0,
            preemptions: 0,
            step_ms: 0.0,
        }
    }

    pub fn running_count(&self) -> u64 {
        self.running.len() as u64
    }

    pub fn waiting_count(&self) -> u64 {
        self.waiting.len() as u64
    }

    pub fn decoding_count(&self) -> u64 {
        self.dec_count
    }

    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    /// A request joins the back of the waiting queue.
    pub fn enqueue(&mut self, req: u32, reqs: &[RequestState]) {
        self.load += reqs[req as usize].prompt_tokens();
        self.waiting.push_back(req);
    }

    /// A request has been routed here and is on its way (its KV is in transfer): it counts in
    /// the load at once, so requests handed off meanwhile spread over the decode instances.
    pub fn reserve(&mut self) {
        self.load += 1;
    }

    /// A request arrives on a decode instance with its prompt's KV (P/D): it joins the
    /// waiting queue with nothing to prefill. Its load was counted by [`Instance::reserve`].
    pub fn enqueue_transferred(&mut self, req: u32) {
        self.waiting.push_back(req);
    }

    fn seq_ctx(&self, s: &Seq) -> u64 {
        if s.phase == Phase::Decode && self.lockstep {
            s.ctx + (self.dec_steps - s.base_step)
        } else {
            s.ctx
        }
    }

    fn alloc_slot(&mut self, seq: Seq) -> u32 {
        match self.free_slots.pop() {
            Some(i) => {
                let epoch = self.seqs[i as usize].epoch + 1;
                self.seqs[i as usize] = Seq { epoch, ..seq };
                i
            }
            None => {
                self.seqs.push(seq);
                (self.seqs.len() - 1) as u32
            }
        }
    }

    fn free_slot(&mut self, slot: u32) {
        self.seqs[slot as usize].phase = Phase::Free;
        self.free_slots.push(slot);
    }

    fn join_decode(&mut self, slot: u32) {
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
        } else {
            self.dec_members.push(slot);
        }
        self.load = self.load.saturating_add(1);
    }

    /// Remove a decode member; returns its current context.
    fn leave_decode(&mut self, slot: u32) -> u64 {
        let bs = self.kv.block_size;
        let ctx = self.seq_ctx(&self.seqs[slot as usize]);
        self.dec_count -= 1;
        self.dec_ctx_sum -= ctx;
        if self.lockstep {
            let s = &self.seqs[slot as usize];
            let r = ((s.ctx + bs - (s.base_step % bs)) % bs) as usize;
            self.residue[r] -= 1;
        } else if let Some(p) = self.dec_members.iter().position(|&m| m == slot) {
            self.dec_members.swap_remove(p);
        }
        self.load = self.load.saturating_sub(1);
        ctx
    }

    fn private_blocks(&self, slot: u32) -> u64 {
        let s = &self.seqs[slot as usize];
        if s.phase == Phase::Decode && self.lockstep {
            self.kv.blocks_for(self.seq_ctx(s)).saturating_sub(s.shared_blocks)
        } else {
            s.private_blocks
        }
    }

    /// Drop a sequence's KV and its prefix reference.
    fn release(&mut self, slot: u32) {
        let blocks = self.private_blocks(slot);
        self.kv.release(blocks);
        if let Some(g) = self.seqs[slot as usize].group {
            if self.seqs[slot as usize].shared_blocks > 0 || self.seqs[slot as usize].publish_at == 0 {
                self.kv.release_prefix(g);
            }
        }
        let admit = self.seqs[slot as usize].admit_seq;
        self.running.remove(&(admit, slot));
    }

    /// Preempt (recompute) the newest running sequence other than those in `protect`;
    /// it goes back to the front of the waiting queue. Returns whether one was preempted.
    fn preempt_newest(&mut self, reqs: &mut [RequestState], protect: Option<u32>) -> bool {
        let victim = self.running.iter().rev().map(|&(_, s)| s).find(|&s| Some(s) != protect);
        let Some(slot) = victim else { return false };
        let phase = self.seqs[slot as usize].phase;
        if phase == Phase::Decode {
            if self.lockstep {
                // Lockstep members' output counts live in aggregate; settle this one's.
                let s = &self.seqs[slot as usize];
                reqs[s.req as usize].generated += self.dec_steps - s.base_step;
            }
            self.leave_decode(slot);
        } else if let Some(p) = self.prefilling.iter().position(|&x| x == slot) {
            self.prefilling.remove(p);
            self.load = self.load.saturating_sub(self.seqs[slot as usize].prompt_left);
        }
        self.release(slot);
        let req = self.seqs[slot as usize].req;
        self.free_slot(slot);
        let r = &mut reqs[req as usize];
        r.preemptions += 1;
        self.preemptions += 1;
        self.load += r.prompt_tokens();
        self.waiting.push_front(req);
        true
    }

    /// Plan the next step with `sched`. Returns false when there is nothing to run.
    pub fn plan(&mut self, cfg: &InstanceConfig, reqs: &mut [RequestState], now: Nanos) -> bool {
        self.chunks.clear();
        self.shape = BatchShape::default();
        self.step_decodes = 0;
        self.step_dec_ctx = 0;
        let mut guard = 0;
        // Decode instances load transferred KV first: those requests decode in this step.
        if self.role == Role::Decode {
            self.admit_transferred(cfg, reqs, now);
        }
        loop {
            guard += 1;
            self.schedule_decodes(cfg, reqs);
            if self.role != Role::Decode {
                self.schedule_prefills(cfg, reqs, now);
            }
            if !self.chunks.is_empty() || self.step_decodes > 0 {
                break;
            }
            // Nothing fits: free KV by preempting the newest running sequence and retry.
            if self.running.is_empty() || guard > 1_000_000 || !self.preempt_newest(reqs, None) {
                return false;
            }
        }
        self.fill_shape(cfg);
        self.busy = true;
        true
    }

    /// Decode-first: every decoding sequence gets its step, preempting the newest running
    /// sequences (recompute) while the KV pool cannot hold the new tokens.
    fn schedule_decodes(&mut self, cfg: &InstanceConfig, reqs: &mut [RequestState]) {
        let q = cfg.decode.query_tokens();
        loop {
            if self.dec_count == 0 {
                return;
            }
            let need = if self.lockstep {
                // Members whose context fills its last block need one more.
                let bs = self.kv.block_size;
                let r = ((bs - self.dec_steps % bs) % bs) as usize;
                self.residue[r]
            } else {
                let mut n = 0;
                for &slot in &self.dec_members {
                    let s = &self.seqs[slot as usize];
                    let want = self.kv.blocks_for(s.ctx + q).saturating_sub(s.shared_blocks);
                    n += want.saturating_sub(s.private_blocks);
                }
                n
            };
            if self.kv.try_allocate(need) {
                if !self.lockstep {
                    for i in 0..self.dec_members.len() {
                        let slot = self.dec_members[i];
                        let want = {
                            let s = &self.seqs[slot as usize];
                            self.kv.blocks_for(s.ctx + q).saturating_sub(s.shared_blocks)
                        };
                        let s = &mut self.seqs[slot as usize];
                        s.private_blocks = s.private_blocks.max(want);
                    }
                }
                self.step_decodes = self.dec_count;
                self.step_dec_ctx = self.dec_ctx_sum;
                return;
            }
            if !self.preempt_newest(reqs, None) {
                return;
            }
        }
    }

    /// Prefill chunks, FCFS, into what the decodes left of the slack-inflated budget: running
    /// prefills first, then admissions while the running cap and the KV pool allow. A chunk
    /// is `min(budget, prompt left)` tokens (the whole prompt without chunked prefill) and is
    /// scheduled whole or not at all.
    fn schedule_prefills(&mut self, cfg: &InstanceConfig, reqs: &mut [RequestState], now: Nanos) {
        let q = cfg.decode.query_tokens();
        let total = (cfg.budget as f64 * (1.0 + cfg.slack)).floor() as u64;
        let mut room = total.saturating_sub(self.step_decodes * q);
        // Running prefills, oldest first.
        for i in 0..self.prefilling.len() {
            let slot = self.prefilling[i];
            let (left, ctx, held, shared) = {
                let s = &self.seqs[slot as usize];
                (s.prompt_left, s.ctx, s.private_blocks, s.shared_blocks)
            };
            let chunk = if cfg.chunked_prefill { left.min(cfg.budget) } else { left };
            if chunk > room && !self.step_is_empty() {
                return;
            }
            let need = self.kv.blocks_for(ctx + chunk).saturating_sub(shared).saturating_sub(held);
            if !self.kv.try_allocate(need) {
                return;
            }
            self.seqs[slot as usize].private_blocks += need;
            self.chunks.push(Chunk { slot, tokens: chunk });
            room = room.saturating_sub(chunk);
        }
        // Admissions.
        let cap = cfg.running_cap();
        while let Some(&req) = self.waiting.front() {
            if self.running.len() as u64 >= cap {
                return;
            }
            let r = &reqs[req as usize];
            let prompt = r.prompt_tokens();
            let cached = ((r.input as f64) * cfg.prefix_hit_rate).floor() as u64;
            let shared = match r.prefix_group {
                Some(g) if r.prefix_len > 0 => self.kv.acquire_prefix(g),
                _ => 0,
            };
            let shared_tokens = (shared * self.kv.block_size).min(prompt.saturating_sub(1));
            let start = cached.max(shared_tokens).min(prompt.saturating_sub(1));
            let left = prompt - start;
            let chunk = if cfg.chunked_prefill { left.min(cfg.budget) } else { left };
            let undo = |kv: &mut KvBlockPool| {
                if shared > 0 {
                    if let Some(g) = r.prefix_group {
                        kv.release_prefix(g);
                    }
                }
            };
            // A whole prompt longer than the budget (a recompute without chunked prefill) may
            // only run alone.
            if chunk > room && !self.step_is_empty() {
                undo(&mut self.kv);
                return;
            }
            let need = self.kv.blocks_for(start + chunk).saturating_sub(shared);
            if !self.kv.try_allocate(need) {
                undo(&mut self.kv);
                return;
            }
            let publish_at = match (r.prefix_group, shared) {
                (Some(_), 0) if r.prefix_len >= self.kv.block_size => r.prefix_len,
                _ => 0,
            };
            let seq = Seq {
                req,
                admit_seq: self.next_admit,
                epoch: 0,
                phase: Phase::Prefill,
                prompt_left: left,
                ctx: start,
                out_left: r.output - r.generated,
                base_step: 0,
                private_blocks: need,
                shared_blocks: shared,
                group: r.prefix_group.filter(|_| shared > 0 || publish_at > 0),
                publish_at,
                first_chunk: true,
            };
            self.next_admit += 1;
            self.waiting.pop_front();
            self.load = self.load.saturating_sub(prompt) + left;
            let rs = &mut reqs[req as usize];
            if rs.scheduled.is_none() {
                rs.scheduled = Some(now);
            }
            let slot = self.alloc_slot(seq);
            let admit = self.seqs[slot as usize].admit_seq;
            self.running.insert((admit, slot));
            self.prefilling.push_back(slot);
            self.chunks.push(Chunk { slot, tokens: chunk });
            room = room.saturating_sub(chunk);
        }
    }

    fn step_is_empty(&self) -> bool {
        self.chunks.is_empty() && self.step_decodes == 0
    }

    /// Decode instance: admit transferred requests while the cap and the pool allow; they
    /// start decoding at the next step.
    fn admit_transferred(&mut self, cfg: &InstanceConfig, reqs: &mut [RequestState], now: Nanos) {
        let cap = cfg.running_cap();
        while let Some(&req) = self.waiting.front() {
            if self.running.len() as u64 >= cap {
                return;
            }
            let r = &reqs[req as usize];
            let ctx = r.input + r.generated;
            let need = self.kv.blocks_for(ctx);
            if !self.kv.try_allocate(need) {
                return;
            }
            let seq = Seq {
                req,
                admit_seq: self.next_admit,
                epoch: 0,
                phase: Phase::Prefill,
                prompt_left: 0,
                ctx,
                out_left: r.output - r.generated,
                base_step: 0,
                private_blocks: need,
                shared_blocks: 0,
                group: None,
                publish_at: 0,
                first_chunk: false,
            };
            self.next_admit += 1;
            self.waiting.pop_front();
            self.load = self.load.saturating_sub(1);
            let rs = &mut reqs[req as usize];
            if rs.decode_admitted.is_none() {
                rs.decode_admitted = Some(now);
            }
            let slot = self.alloc_slot(seq);
            let admit = self.seqs[slot as usize].admit_seq;
            self.running.insert((admit, slot));
            self.join_decode(slot);
        }
    }

    fn fill_shape(&mut self, cfg: &InstanceConfig) {
        let q = cfg.decode.query_tokens();
        let mut shape = BatchShape::default();
        if self.step_decodes > 0 {
            let n = self.step_decodes;
            // Each decode query attends to its cached context plus the new tokens.
            let ctx = self.step_dec_ctx + n * q;
            shape.decode = PhaseLoad { seqs: n, tokens: n * q, context: ctx, pairs: (q * ctx) as f64, query_sq: (n * q * q) as f64 };
            shape.sampled += n * q;
        }
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
    pub fn complete(&mut self, cfg: &InstanceConfig, reqs: &mut [RequestState], now: Nanos, rng: &mut ChaCha8Rng, out: &mut StepOutcome) {
        self.busy = false;
        out.first_tokens.clear();
        out.finished.clear();
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
                let mut i = 0;
                while i < self.dec_members.len() {
                    let slot = self.dec_members[i];
                    let accepted = cfg.decode.draw_accepted(rng);
                    let s = &mut self.seqs[slot as usize];
                    let emitted = (1 + accepted).min(s.out_left);
                    s.ctx += emitted;
                    s.out_left -= emitted;
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
        // Prefill chunks.
        let chunks = std::mem::take(&mut self.chunks);
        for c in &chunks {
            let slot = c.slot;
            let s = &mut self.seqs[slot as usize];
            s.prompt_left -= c.tokens;
            s.ctx += c.tokens;
            s.first_chunk = false;
            self.load = self.load.saturating_sub(c.tokens);
            if s.publish_at > 0 && s.ctx >= s.publish_at {
                let blocks = s.publish_at / self.kv.block_size;
                let g = s.group.expect("publishing requires a group");
                s.publish_at = 0;
                if self.kv.publish_prefix(g, blocks) {
                    let s = &mut self.seqs[slot as usize];
                    s.private_blocks -= blocks;
                    s.shared_blocks = blocks;
                } else {
                    self.seqs[slot as usize].group = None;
                }
            }
            let s = &mut self.seqs[slot as usize];
            if s.prompt_left > 0 {
                continue;
            }
            // Prompt done: the step emits a token.
            let req = s.req;
            s.out_left -= 1;
            let r = &mut reqs[req as usize];
            r.generated += 1;
            out.tokens += 1;
            if r.first_token.is_none() {
                r.first_token = Some(now);
                out.first_tokens.push(req);
            }
            if let Some(p) = self.prefilling.iter().position(|&x| x == slot) {
                self.prefilling.remove(p);
            }
            if self.seqs[slot as usize].out_left == 0 {
                self.finish(slot, reqs, now, out);
            } else if self.role == Role::Prefill {
                self.release(slot);
                self.free_slot(slot);
                out.handed_off.push(req);
            } else {
                self.join_decode(slot);
            }
        }
        self.chunks = chunks;
        self.chunks.clear();
    }

    fn finish(&mut self, slot: u32, reqs: &mut [RequestState], now: Nanos, out: &mut StepOutcome) {
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
}

/// Draw accepted drafts for one sequence.
pub(crate) fn draw(mode: &DecodeMode, rng: &mut ChaCha8Rng) -> u64 {
    match mode {
        DecodeMode::Plain => 0,
        DecodeMode::Mtp { rates } => {
            // Position i is accepted with marginal probability rates[i] (made non-increasing,
            // since a draft needs its predecessors): one uniform draw decides them all.
            let u: f64 = rng.random();
            rates.iter().take_while(|&&r| u < r).count() as u64
        }
        DecodeMode::Block { drafts, mean_accepted, .. } => {
            let p = if *drafts == 0 { 0.0 } else { (mean_accepted / *drafts as f64).clamp(0.0, 1.0) };
            (0..*drafts).filter(|_| rng.random::<f64>() < p).count() as u64
        }
    }
}
