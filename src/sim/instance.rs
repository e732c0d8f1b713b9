//! One serving instance (a DP replica, or a prefill / decode instance in P/D): its waiting
//! queue, running sequences, KV block pool, and the mechanics of a step — what a scheduler
//! may schedule (decodes, prefill chunks, admissions, preemptions: the [`StepBuilder`]) and
//! what completing a step does (tokens, first tokens, finishes). Which of those a step does is
//! the instance's [`Scheduler`]'s decision.
//!
//! This file holds the instance's state ([`Instance`], its sequences and the step in flight),
//! the requests' ways in (the waiting queue, P/D hand-off and KV pulls), sequence slots and
//! KV release, preemption, and the types a policy sees ([`Scheduler`], [`StepBuilder`]). The
//! rest is split by what it does, all on the same state: `step` plans a step and completes
//! it, `builder` is the [`StepBuilder`]'s actions, `decode_set` keeps the decoding sequences
//! (in lockstep aggregate, or walked when they speculate), `repeat` completes a lockstep decode
//! step and plans the same one again without the scheduler (a latencies-only run's shortcut).

mod builder;
mod decode_set;
mod repeat;
mod step;

pub use super::config::Role;
pub use builder::Admission;

use super::config::InstanceConfig;
use super::decode::DecodeMode;
use super::kv::KvBlockPool;
use super::queue::Nanos;
use super::records::{DecodeSegment, Requests};
use crate::cost::BatchShape;
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
    /// Requests whose first token this step emitted (their `first_token` is now).
    pub first_tokens: Vec<u32>,
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
    /// When the client got the tokens of each decode step this instance ran (the driver
    /// pushes one entry per step that decoded): the requests' [`DecodeSegment`]s index it.
    pub token_log: Vec<Nanos>,
    chunks: Vec<Chunk>,
    step_chunk_tokens: u64,
    step_decodes: u64,
    step_dec_ctx: u64,
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
            token_log: Vec::new(),
            chunks: Vec::new(),
            step_chunk_tokens: 0,
            step_decodes: 0,
            step_dec_ctx: 0,
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

    /// A request on its way through the instance's front end counts in the load from its
    /// arrival, so that the router sees it.
    pub fn expect(&mut self, prompt_tokens: u64) {
        self.load += prompt_tokens;
    }

    /// The front end is done with a request [`Instance::expect`]ed: it joins the back of the
    /// waiting queue.
    pub fn enqueue_expected(&mut self, req: u32) {
        self.waiting.push_back(req);
    }

    /// When the step in flight (or the last one) started.
    pub fn step_started_at(&self) -> Nanos {
        self.last_plan_at
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
        // Its last token came with the last decode step logged.
        let logged = self.token_log.len() as u64;
        if let Some(s) = r.decoded.last_mut().filter(|s| s.to == DecodeSegment::OPEN) {
            s.to = logged;
        }
        r.preemptions += 1;
        r.generated_at_preemptions += r.generated;
        self.preemptions += 1;
        self.load += r.prompt_tokens();
        self.waiting.push_front(req);
        true
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

    /// Whether, on a mixed instance where nothing waits or prefills and every running sequence
    /// decodes, this policy's step is exactly the decode set as [`StepBuilder::try_decodes`]
    /// schedules it whenever that succeeds. Then [`Instance::repeat_decodes`] may plan such a
    /// step without [`Scheduler::schedule`], calling [`Scheduler::repeated_decodes`] instead.
    /// A policy that does not say so is always asked.
    fn repeats_decodes(&self) -> bool {
        false
    }

    /// What [`Scheduler::schedule`] changes in the policy's own state on a step as
    /// [`Scheduler::repeats_decodes`] describes (nothing for a policy without state).
    fn repeated_decodes(&mut self) {}
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
