//! The [`StepBuilder`]'s side of a step: what a [`Scheduler`](super::Scheduler) reads (what
//! runs, waits and is already in the step, the KV left) and the actions it takes (schedule
//! the decodes, a prefill chunk, an admission from the waiting queue or of a transferred
//! request, a preemption), each doing its own KV accounting.

use super::{Chunk, Phase, Seq, StepBuilder};
use crate::sim::config::Role;
use crate::sim::queue::Nanos;
use crate::sim::records::DecodeSegment;

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
    #[inline]
    pub fn request(&self) -> u32 {
        self.req
    }

    /// Prompt tokens left to compute.
    #[inline]
    pub fn left(&self) -> u64 {
        self.prompt - self.start
    }
}

impl StepBuilder<'_> {
    #[inline]
    pub fn role(&self) -> Role {
        self.inst.role
    }

    #[inline]
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Running sequences (decoding or prefilling).
    #[inline]
    pub fn running(&self) -> u64 {
        self.inst.running.len() as u64
    }

    #[inline]
    pub fn waiting(&self) -> u64 {
        self.inst.waiting.len() as u64
    }

    #[inline]
    pub fn decoding(&self) -> u64 {
        self.inst.dec_count
    }

    /// Nothing scheduled yet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.inst.step_is_empty()
    }

    /// Tokens in the step so far: decode queries and prefill chunks.
    #[inline]
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
    #[inline]
    pub fn kv_available_tokens(&self) -> u64 {
        self.inst.kv.available() * self.inst.kv.block_size
    }

    /// KV blocks free now or after evicting unreferenced cached prefixes.
    #[inline]
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
    #[inline]
    pub fn partial_prefills(&self) -> usize {
        self.inst.prefilling.len()
    }

    /// Prompt tokens left to compute for the `i`-th prefilling sequence.
    #[inline]
    pub fn prefill_left(&self, i: usize) -> u64 {
        self.inst.seqs[self.inst.prefilling[i] as usize].prompt_left
    }

    /// The request of the `i`-th prefilling sequence.
    #[inline]
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
    /// the head is new and arrived after the step being planned could see it: overlapped
    /// scheduling). On a decode instance the waiting queue holds only the requests it
    /// preempted, to recompute.
    pub fn open_admission(&mut self) -> Option<Admission> {
        let inst = &mut *self.inst;
        let &req = inst.waiting.front()?;
        let r = &self.reqs[req as usize];
        // A request entering the engine for the first time waits for the next step when it
        // arrived after this one was planned; a requeued (preempted) request is already inside,
        // whichever instance prefilled it (a decode instance's queue holds only the ones it
        // preempted).
        if r.preemptions == 0 && r.engine_arrival > inst.seen_until {
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
        // It decodes from the instance's next decode step on: its first token then, or (its
        // first token out with its prompt, elsewhere) its next one.
        let from = inst.token_log.len() as u64;
        rs.decoded.push(DecodeSegment { instance: inst.id, start: rs.first_token, from, to: DecodeSegment::OPEN });
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
