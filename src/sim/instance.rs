//! One serving instance (a DP replica, or a prefill / decode instance in P/D): its waiting
//! queue, running sequences, KV block pool, and the mechanics of a step — what a scheduler
//! may schedule (decodes, prefill chunks, admissions, preemptions: the [`StepBuilder`]) and
//! what completing a step does (tokens, first tokens, finishes). Which of those a step does is
//! the instance's [`Scheduler`]'s decision.
//!
//! Decoding sequences without speculation advance in lockstep (one token per step each), so
//! they are kept in aggregate: Σ context, counts by context modulo the block size (which
//! sequences need a new KV block this step) and a heap of finish steps. A decode step then
//! costs O(1) plus O(log n) per finishing sequence, whatever the batch size. With MTP or
//! block drafts each sequence accepts a random number of tokens, and the set is walked.

pub use super::config::Role;

use super::config::InstanceConfig;
use super::decode::{AcceptanceDraws, DecodeMode};
use super::kv::KvBlockPool;
use super::queue::Nanos;
use super::records::Requests;
use crate::cost::{BatchShape, PhaseLoad};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

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
    /// Private KV blocks the sequence holds once its last token is in the cache (prompt and
    /// every output token): what a guaranteed-no-evict admission reserves.
    reserve: u64,
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
    /// Requests whose prompt was computed to its end in this step (a prefill instance hands
    /// them off; elsewhere the step emits their next token).
    pub prompts_done: Vec<u32>,
    /// Requests that finished (all output tokens) in this step.
    pub finished: Vec<u32>,
    /// Requests handed off after prefill (prefill instances), their KV blocks held until the
    /// driver releases them ([`Instance::release_held`]).
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
    /// Output tokens the decoding sequences still have to produce: lockstep members count
    /// `out_left + base_step` (the set's step count is subtracted when read), walked members
    /// their current `out_left`.
    dec_out_sum: u64,
    /// Σ [`Seq::reserve`] over running sequences.
    reserve_sum: u64,
    /// The step policy; `None` only while it plans a step (it is lent out of the instance
    /// so that it can drive the instance's [`StepBuilder`]).
    scheduler: Option<Box<dyn Scheduler>>,
    // The step in flight.
    pub busy: bool,
    chunks: Vec<Chunk>,
    step_chunk_tokens: u64,
    step_decodes: u64,
    step_dec_ctx: u64,
    /// Requests admitted for the first time in the step being planned (the execution
    /// profile's `admissions_per_step` caps them).
    step_new_admits: u64,
    /// When the step in flight (or the last one) was planned.
    last_plan_at: Nanos,
    /// New requests that arrived after this are not seen by the step being planned (its
    /// start, or the previous step's under overlapped scheduling).
    seen_until: Nanos,
    pub shape: BatchShape,
    /// Σ prompt tokens waiting or prefilling + decoding sequences: the router's load measure.
    pub load: u64,
    pub preemptions: u64,
    /// Latency of the step in flight, ms.
    pub step_ms: f64,
    /// Decode instance (P/D): requests handed to it whose KV is still on their prefill
    /// instance, FCFS. A pull starts when this instance can allocate the KV
    /// ([`Instance::plan`]), as vLLM's decode scheduler allocates blocks before it reads them.
    pull_queue: VecDeque<u32>,
    /// Requests whose KV is being pulled into blocks allocated here.
    pub pulling: u64,
    /// Requests whose KV is here (pulled, or a decode-only arrival), with the blocks already
    /// allocated for it (0: allocated at admission), in landing order.
    landed: VecDeque<(u32, u64)>,
    /// Pulls started while planning the last step: the driver starts their transfers.
    pub started_pulls: Vec<u32>,
    /// Requests admitted from `landed` that have not decoded yet: the first decode step they
    /// run emits their first token (in P/D the client's first token comes from the decode
    /// side).
    fresh: Vec<u32>,
    /// Prefill instance: KV blocks of handed-off requests, held until their transfer lands.
    pub held_for_transfer: u64,
}

impl Instance {
    /// An empty instance whose steps `scheduler` plans (the driver builds it from
    /// `cfg.scheduler`; the instance itself knows no policy).
    pub fn with_scheduler(id: u32, role: Role, cfg: &InstanceConfig, scheduler: Box<dyn Scheduler>) -> Self {
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
            dec_out_sum: 0,
            reserve_sum: 0,
            scheduler: Some(scheduler),
            busy: false,
            chunks: Vec::new(),
            step_chunk_tokens: 0,
            step_decodes: 0,
            step_dec_ctx: 0,
            step_new_admits: 0,
            last_plan_at: 0,
            seen_until: 0,
            shape: BatchShape::default(),
            load: 0,
            preemptions: 0,
            step_ms: 0.0,
            pull_queue: VecDeque::new(),
            pulling: 0,
            landed: VecDeque::new(),
            started_pulls: Vec::new(),
            fresh: Vec::new(),
            held_for_transfer: 0,
        }
    }

    pub fn running_count(&self) -> u64 {
        self.running.len() as u64
    }

    /// Requests waiting: to be admitted or recomputed, for their KV to be pulled, or to join
    /// the decode set with their KV here.
    pub fn waiting_count(&self) -> u64 {
        (self.waiting.len() + self.pull_queue.len() + self.landed.len()) as u64
    }

    pub fn decoding_count(&self) -> u64 {
        self.dec_count
    }

    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty() || !self.pull_queue.is_empty() || !self.landed.is_empty()
    }

    /// Nothing runs and nothing is under way that could free KV or bring work: with requests
    /// waiting, the instance is stalled.
    pub fn idle_for_good(&self) -> bool {
        self.running.is_empty() && self.pulling == 0 && self.held_for_transfer == 0
    }

    /// A request joins the back of the waiting queue.
    pub fn enqueue(&mut self, req: u32, reqs: &Requests) {
        self.load += reqs[req as usize].prompt_tokens();
        self.waiting.push_back(req);
    }

    /// A request arrives on a decode instance with its prompt's KV (a decode-only system): it
    /// waits to join the decode set with nothing to prefill, and counts one in the load.
    pub fn enqueue_transferred(&mut self, req: u32) {
        self.load += 1;
        self.landed.push_back((req, 0));
    }

    /// A request handed off by a prefill instance is routed here (P/D): its KV is still there.
    /// It counts one in the load at once, so the router sees transfers headed here.
    pub fn hand_to(&mut self, req: u32) {
        self.load += 1;
        self.pull_queue.push_back(req);
    }

    /// Decode instance: start pulling the KV of the requests handed here, FCFS, while the
    /// running cap (counting pulls and landed requests) and the pool allow; each pull's blocks
    /// are allocated now. The driver starts the transfers of [`Instance::started_pulls`].
    fn start_pulls(&mut self, cfg: &InstanceConfig, reqs: &mut Requests) {
        let cap = cfg.running_cap();
        while let Some(&req) = self.pull_queue.front() {
            if self.running.len() as u64 + self.pulling + self.landed.len() as u64 >= cap {
                return;
            }
            let r = &mut reqs[req as usize];
            let need = self.kv.blocks_for(r.input + r.generated);
            if !self.kv.try_allocate(need) {
                return;
            }
            r.pull_blocks = need;
            self.pull_queue.pop_front();
            self.pulling += 1;
            self.started_pulls.push(req);
        }
    }

    /// Decode instance: a request's KV has landed in the blocks its pull allocated.
    pub fn land(&mut self, req: u32, reqs: &Requests) {
        self.pulling -= 1;
        self.landed.push_back((req, reqs[req as usize].pull_blocks));
    }

    /// Prefill instance: the transfer of a handed-off request's KV has landed; its blocks are
    /// free.
    pub fn release_held(&mut self, blocks: u64) {
        self.kv.release(blocks);
        self.held_for_transfer -= blocks;
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
            self.dec_out_sum += s.out_left + s.base_step;
        } else {
            self.dec_out_sum += s.out_left;
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
            self.dec_out_sum -= s.out_left + s.base_step;
        } else if let Some(p) = self.dec_members.iter().position(|&m| m == slot) {
            self.dec_out_sum -= self.seqs[slot as usize].out_left;
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
        self.drop_refs(slot);
    }

    /// A prefill instance hands a sequence off: it stops running, but its private KV blocks
    /// stay allocated until its transfer lands. Returns them.
    fn hand_off(&mut self, slot: u32) -> u64 {
        let blocks = self.private_blocks(slot);
        self.drop_refs(slot);
        self.held_for_transfer += blocks;
        blocks
    }

    /// A sequence stops running: its prefix reference, its place among the running and its
    /// reservation go (its private blocks are the caller's business).
    fn drop_refs(&mut self, slot: u32) {
        if let Some(g) = self.seqs[slot as usize].group {
            if self.seqs[slot as usize].shared_blocks > 0 || self.seqs[slot as usize].publish_at == 0 {
                self.kv.release_prefix(g);
            }
        }
        let admit = self.seqs[slot as usize].admit_seq;
        self.running.remove(&(admit, slot));
        self.reserve_sum -= self.seqs[slot as usize].reserve;
    }

    /// Preempt (recompute) the newest running sequence; it goes back to the front of the
    /// waiting queue, and whatever it had in the step being planned leaves the step. Returns
    /// whether one was preempted.
    fn preempt_newest(&mut self, reqs: &mut Requests) -> bool {
        let Some(&(_, slot)) = self.running.iter().next_back() else { return false };
        let phase = self.seqs[slot as usize].phase;
        if phase == Phase::Decode {
            if self.step_decodes > 0 {
                // Its decode is in the step: take it out, with the block its next token took
                // if its context filled its last block (lockstep members' blocks are counted
                // from their context, which does not include that token yet).
                let ctx = self.seq_ctx(&self.seqs[slot as usize]);
                self.step_decodes -= 1;
                self.step_dec_ctx -= ctx;
                if self.lockstep && ctx.is_multiple_of(self.kv.block_size) {
                    self.kv.release(1);
                }
            }
            if self.lockstep {
                // Lockstep members' output counts live in aggregate; settle this one's.
                let s = &self.seqs[slot as usize];
                reqs[s.req as usize].generated += self.dec_steps - s.base_step;
            }
            self.leave_decode(slot);
        } else if let Some(p) = self.prefilling.iter().position(|&x| x == slot) {
            self.prefilling.remove(p);
            reqs[self.seqs[slot as usize].req as usize].preempted_in_prefill += 1;
            self.load = self.load.saturating_sub(self.seqs[slot as usize].prompt_left);
            if let Some(c) = self.chunks.iter().position(|c| c.slot == slot) {
                // Its chunk's blocks are among its private blocks, released below.
                self.step_chunk_tokens -= self.chunks.remove(c).tokens;
            }
        }
        self.release(slot);
        let req = self.seqs[slot as usize].req;
        self.free_slot(slot);
        // Not decoded yet: its first token is still to come.
        self.fresh.retain(|&f| f != req);
        let r = &mut reqs[req as usize];
        r.preemptions += 1;
        r.generated_at_preemptions += r.generated;
        self.preemptions += 1;
        self.load += r.prompt_tokens();
        self.waiting.push_front(req);
        true
    }

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
        self.step_new_admits = 0;
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

    fn step_is_empty(&self) -> bool {
        self.chunks.is_empty() && self.step_decodes == 0
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
    pub fn complete(&mut self, cfg: &InstanceConfig, reqs: &mut Requests, now: Nanos, draws: &AcceptanceDraws, out: &mut StepOutcome) {
        self.busy = false;
        out.prompts_done.clear();
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
                self.complete_walked_decodes(cfg, reqs, now, draws, out);
            }
            // Every decoding sequence decoded: those that joined with their KV emitted their
            // first token.
            for req in self.fresh.drain(..) {
                reqs[req as usize].first_token.get_or_insert(now);
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

    /// Speculative decodes (MTP, block drafts): each sequence accepts its own number of tokens.
    fn complete_walked_decodes(
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

    fn finish(&mut self, slot: u32, reqs: &mut Requests, now: Nanos, out: &mut StepOutcome) {
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

/// A per-step scheduling policy. The instance calls [`Scheduler::schedule`] once per step it
/// plans, with an empty step; whatever the policy leaves scheduled runs. Leaving the step empty
/// means nothing can run now (the driver then waits for the next event, or reports a stall
/// when nothing is running either).
///
/// Called through a trait object once per step: the dynamic call is noise next to the step's
/// own work, and it lets a policy keep state across steps (`&mut self`).
pub trait Scheduler: std::fmt::Debug + Send {
    fn schedule(&mut self, cfg: &InstanceConfig, step: &mut StepBuilder<'_>);
}

/// The step being planned, as a [`Scheduler`] sees it: what runs, waits and is already in the
/// step, and the actions a policy may take. Every action does its own KV accounting and fails
/// without side effects when the pool cannot hold it.
pub struct StepBuilder<'a> {
    inst: &'a mut Instance,
    reqs: &'a mut Requests,
    cfg: &'a InstanceConfig,
    now: Nanos,
}

/// The head of the waiting queue on its way in: its cached prefix is referenced (which also
/// marks the prefix recently used), so the prompt left to compute is known. Hand it to
/// [`StepBuilder::admit`] or [`StepBuilder::cancel_admission`].
#[must_use]
#[derive(Debug)]
pub struct Admission {
    req: u32,
    prompt: u64,
    /// Prompt tokens already in the KV cache (token-level hits or the shared prefix).
    start: u64,
    shared: u64,
}

impl Admission {
    pub fn request(&self) -> u32 {
        self.req
    }

    /// Prompt tokens left to compute.
    pub fn left(&self) -> u64 {
        self.prompt - self.start
    }
}

impl StepBuilder<'_> {
    pub fn role(&self) -> Role {
        self.inst.role
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Running sequences (decoding or prefilling).
    pub fn running(&self) -> u64 {
        self.inst.running.len() as u64
    }

    pub fn waiting(&self) -> u64 {
        self.inst.waiting.len() as u64
    }

    pub fn decoding(&self) -> u64 {
        self.inst.dec_count
    }

    /// Nothing scheduled yet.
    pub fn is_empty(&self) -> bool {
        self.inst.step_is_empty()
    }

    /// Tokens in the step so far: decode queries and prefill chunks.
    pub fn tokens(&self) -> u64 {
        self.inst.step_decodes * self.cfg.decode.query_tokens() + self.inst.step_chunk_tokens
    }

    /// Output tokens the decoding sequences still have to produce (O(1) in lockstep).
    pub fn decode_output_left(&self) -> u64 {
        let inst = &*self.inst;
        if inst.lockstep {
            inst.dec_out_sum - inst.dec_count * inst.dec_steps
        } else {
            inst.dec_out_sum
        }
    }

    /// Output tokens the `i`-th prefilling sequence has to produce.
    pub fn prefill_output_left(&self, i: usize) -> u64 {
        self.inst.seqs[self.inst.prefilling[i] as usize].out_left
    }

    /// Output tokens the request of an open admission has to produce.
    pub fn admission_output_left(&self, a: &Admission) -> u64 {
        let r = &self.reqs[a.req as usize];
        r.output - r.generated
    }

    /// KV cache tokens free now or after evicting unreferenced cached prefixes.
    pub fn kv_available_tokens(&self) -> u64 {
        self.inst.kv.available() * self.inst.kv.block_size
    }

    /// KV blocks free now or after evicting unreferenced cached prefixes.
    pub fn kv_available_blocks(&self) -> u64 {
        self.inst.kv.available()
    }

    /// KV blocks the running sequences still need to hold their prompt and every output token
    /// (their full reservations minus what they hold).
    pub fn kv_blocks_to_completion(&self) -> u64 {
        self.inst.reserve_sum.saturating_sub(self.inst.kv.private_used())
    }

    /// Private KV blocks an open admission's request holds once its last token is cached: its
    /// prompt left to compute plus its whole output.
    pub fn admission_reserve(&self, a: &Admission) -> u64 {
        self.inst.kv.blocks_for(a.prompt + self.admission_output_left(a)).saturating_sub(a.shared)
    }

    /// Schedule the next step of every decoding sequence, allocating the KV blocks their new
    /// tokens need. Returns false, changing nothing, when the pool cannot hold them; true when
    /// they are scheduled (or none decode, or they already are).
    pub fn try_decodes(&mut self) -> bool {
        let inst = &mut *self.inst;
        if inst.dec_count == 0 || inst.step_decodes > 0 {
            return true;
        }
        let q = self.cfg.decode.query_tokens();
        let need = if inst.lockstep {
            // Members whose context fills its last block need one more.
            let bs = inst.kv.block_size;
            let r = ((bs - inst.dec_steps % bs) % bs) as usize;
            inst.residue[r]
        } else {
            let mut n = 0;
            for &slot in &inst.dec_members {
                let s = &inst.seqs[slot as usize];
                let want = inst.kv.blocks_for(s.ctx + q).saturating_sub(s.shared_blocks);
                n += want.saturating_sub(s.private_blocks);
            }
            n
        };
        if !inst.kv.try_allocate(need) {
            return false;
        }
        if !inst.lockstep {
            for i in 0..inst.dec_members.len() {
                let slot = inst.dec_members[i];
                let want = {
                    let s = &inst.seqs[slot as usize];
                    inst.kv.blocks_for(s.ctx + q).saturating_sub(s.shared_blocks)
                };
                let s = &mut inst.seqs[slot as usize];
                s.private_blocks = s.private_blocks.max(want);
            }
        }
        inst.step_decodes = inst.dec_count;
        inst.step_dec_ctx = inst.dec_ctx_sum;
        true
    }

    /// Sequences with prompt left to compute, in admission order (admissions in this step
    /// join the end). Index them with [`StepBuilder::prefill_left`] and
    /// [`StepBuilder::try_chunk`].
    pub fn partial_prefills(&self) -> usize {
        self.inst.prefilling.len()
    }

    /// Prompt tokens left to compute for the `i`-th prefilling sequence.
    pub fn prefill_left(&self, i: usize) -> u64 {
        self.inst.seqs[self.inst.prefilling[i] as usize].prompt_left
    }

    /// The request of the `i`-th prefilling sequence.
    pub fn prefill_request(&self, i: usize) -> u32 {
        self.inst.seqs[self.inst.prefilling[i] as usize].req
    }

    /// The most recently admitted running request (the next [`StepBuilder::preempt_newest`]
    /// victim), if any runs.
    pub fn newest_running(&self) -> Option<u32> {
        self.inst.running.iter().next_back().map(|&(_, slot)| self.inst.seqs[slot as usize].req)
    }

    /// Schedule the next `tokens` of the `i`-th prefilling sequence's prompt (one chunk per
    /// sequence and step). Returns false, changing nothing, when the pool cannot hold them.
    pub fn try_chunk(&mut self, i: usize, tokens: u64) -> bool {
        let inst = &mut *self.inst;
        let slot = inst.prefilling[i];
        debug_assert!(inst.chunks.iter().all(|c| c.slot != slot), "one chunk per sequence and step");
        let (left, ctx, held, shared) = {
            let s = &inst.seqs[slot as usize];
            (s.prompt_left, s.ctx, s.private_blocks, s.shared_blocks)
        };
        debug_assert!(tokens > 0 && tokens <= left, "a chunk of {tokens} tokens of {left} left");
        let need = inst.kv.blocks_for(ctx + tokens).saturating_sub(shared).saturating_sub(held);
        if !inst.kv.try_allocate(need) {
            return false;
        }
        inst.seqs[slot as usize].private_blocks += need;
        inst.chunks.push(Chunk { slot, tokens });
        inst.step_chunk_tokens += tokens;
        true
    }

    /// Open the admission of the head of the waiting queue (`None` when nobody waits, or when
    /// the head is new and the step already took in `admissions_per_step` new requests). On a
    /// decode instance the waiting queue holds only the requests it preempted, to recompute.
    pub fn open_admission(&mut self) -> Option<Admission> {
        let inst = &mut *self.inst;
        let &req = inst.waiting.front()?;
        let r = &self.reqs[req as usize];
        // A request entering the engine for the first time waits for the next step once this
        // one took in its share; a requeued (preempted) request is already inside, whichever
        // instance prefilled it (a decode instance's queue holds only the ones it preempted).
        if r.preemptions == 0
            && (self.cfg.admissions_per_step.is_some_and(|cap| inst.step_new_admits >= cap) || r.arrival > inst.seen_until)
        {
            return None;
        }
        let prompt = r.prompt_tokens();
        let cached = ((r.input as f64) * self.cfg.prefix_hit_rate).floor() as u64;
        // A group's cached prefix may be longer than this request's (prefix chains from a
        // trace's hash ids): it hits its own part. A prefix shorter than a block is never cached.
        let bs = inst.kv.block_size;
        let shared = match r.prefix_group {
            Some(g) if r.prefix_len >= bs => inst.kv.acquire_prefix(g).min(r.prefix_len / bs),
            _ => 0,
        };
        let shared_tokens = (shared * inst.kv.block_size).min(prompt.saturating_sub(1));
        let start = cached.max(shared_tokens).min(prompt.saturating_sub(1));
        Some(Admission { req, prompt, start, shared })
    }

    /// Leave the head of the queue waiting: drop the prefix reference its admission took.
    pub fn cancel_admission(&mut self, a: Admission) {
        if a.shared > 0 {
            if let Some(g) = self.reqs[a.req as usize].prefix_group {
                self.inst.kv.release_prefix(g);
            }
        }
    }

    /// Admit the head of the queue with a first chunk of `tokens` prompt tokens. Returns
    /// false when the pool cannot hold them (the admission is then cancelled).
    pub fn admit(&mut self, a: Admission, tokens: u64) -> bool {
        debug_assert_eq!(self.inst.waiting.front(), Some(&a.req), "an admission is for the head of the queue");
        debug_assert!(tokens > 0 && tokens <= a.left(), "a chunk of {tokens} tokens of {} left", a.left());
        let inst = &mut *self.inst;
        let need = inst.kv.blocks_for(a.start + tokens).saturating_sub(a.shared);
        if !inst.kv.try_allocate(need) {
            self.cancel_admission(a);
            return false;
        }
        let r = &self.reqs[a.req as usize];
        // The first of its group computes and publishes the prefix; one that hit a shorter
        // cached prefix than its own extends it.
        let publish_at = match r.prefix_group {
            Some(_) if r.prefix_len / inst.kv.block_size > a.shared => r.prefix_len,
            _ => 0,
        };
        let left = a.left();
        let seq = Seq {
            req: a.req,
            admit_seq: inst.next_admit,
            epoch: 0,
            phase: Phase::Prefill,
            prompt_left: left,
            ctx: a.start,
            out_left: r.output - r.generated,
            base_step: 0,
            private_blocks: need,
            shared_blocks: a.shared,
            group: r.prefix_group.filter(|_| a.shared > 0 || publish_at > 0),
            publish_at,
            first_chunk: true,
            reserve: inst.kv.blocks_for(a.prompt + r.output - r.generated).saturating_sub(a.shared),
        };
        inst.reserve_sum += seq.reserve;
        inst.next_admit += 1;
        inst.waiting.pop_front();
        inst.load = inst.load.saturating_sub(a.prompt) + left;
        let rs = &mut self.reqs[a.req as usize];
        if rs.preemptions == 0 {
            inst.step_new_admits += 1;
        }
        if rs.scheduled.is_none() {
            rs.scheduled = Some(self.now);
            rs.cached = a.start;
        }
        let slot = inst.alloc_slot(seq);
        let admit = inst.seqs[slot as usize].admit_seq;
        inst.running.insert((admit, slot));
        inst.prefilling.push_back(slot);
        inst.chunks.push(Chunk { slot, tokens });
        inst.step_chunk_tokens += tokens;
        true
    }

    /// Decode instance: admit the first request whose prompt's KV is here into the decode
    /// set; it decodes from this step on, and its first decode emits its first token if it has
    /// none yet. Call it before [`StepBuilder::try_decodes`]. Returns false when no KV has
    /// landed or the pool cannot hold it. A request this instance preempted is not among these:
    /// its KV is gone, and it waits to be recomputed as a prefill of its prompt and generated
    /// tokens ([`StepBuilder::open_admission`]), as vLLM's decode instance recomputes it.
    pub fn admit_transferred(&mut self) -> bool {
        let inst = &mut *self.inst;
        debug_assert!(inst.step_decodes == 0, "transferred requests join before the decodes are scheduled");
        let Some(&(req, pulled)) = inst.landed.front() else { return false };
        let r = &self.reqs[req as usize];
        let ctx = r.input + r.generated;
        let blocks = inst.kv.blocks_for(ctx);
        if !inst.kv.try_allocate(blocks.saturating_sub(pulled)) {
            return false;
        }
        let need = blocks;
        let seq = Seq {
            req,
            admit_seq: inst.next_admit,
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
            reserve: inst.kv.blocks_for(ctx + r.output - r.generated),
        };
        inst.reserve_sum += seq.reserve;
        inst.next_admit += 1;
        inst.landed.pop_front();
        inst.load = inst.load.saturating_sub(1);
        let rs = &mut self.reqs[req as usize];
        if rs.decode_admitted.is_none() {
            rs.decode_admitted = Some(self.now);
        }
        if rs.first_token.is_none() {
            inst.fresh.push(req);
        }
        let slot = inst.alloc_slot(seq);
        let admit = inst.seqs[slot as usize].admit_seq;
        inst.running.insert((admit, slot));
        inst.join_decode(slot);
        true
    }

    /// Preempt (recompute) the most recently admitted running sequence: it returns to the
    /// front of the waiting queue, and whatever it had in this step leaves the step. Returns
    /// false when nothing runs.
    pub fn preempt_newest(&mut self) -> bool {
        self.inst.preempt_newest(self.reqs)
    }
}
