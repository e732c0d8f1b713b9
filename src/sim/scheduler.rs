//! The per-step scheduling policy of an instance: which running sequences decode, which
//! prefills get a chunk of how many tokens, which waiting requests are admitted, whom to
//! preempt. A [`Scheduler`] decides; the instance ([`super::instance`]) does the mechanics
//! through a [`StepBuilder`] (KV blocks, the lockstep decode aggregate, slots, completion).
//!
//! The split keeps policies small and the mechanics shared: every `StepBuilder` action does
//! its own KV accounting and fails without side effects when the pool cannot hold it, so a
//! policy only chooses what to try and in which order. Decodes are scheduled as one set (the
//! lockstep aggregate is what keeps a decode step O(1)); a policy that wants fewer decodes
//! preempts sequences instead.
//!
//! [`DecodeFirst`] is the policy of the original msmodeling tool; [`Vllm`] is vLLM V1's
//! (running requests first: decodes, then unfinished partial prefills; then waiting requests
//! FCFS, each prompt chunked to the remaining budget; preempt the most recently admitted on KV
//! exhaustion). Both are the same loop with a different budget and chunk rule: preempting
//! after some work is scheduled takes the victim's work out of the step. [`Sglang`] runs a
//! prefill batch alone whenever it can form one and admits conservatively (each request's output
//! reserved); [`Trtllm`] admits a request only when its whole prompt and output fit the KV left
//! after every running request's own reservation, and so never preempts.

pub use super::config::SchedulerKind;
use super::config::{InstanceConfig, Role};
pub use super::instance::Scheduler;
use super::instance::StepBuilder;
pub use sglang::Sglang;
pub use trtllm::Trtllm;

mod sglang;
mod trtllm;

/// What each kind of policy is (the kind itself is part of the instance's configuration).
impl SchedulerKind {
    /// A fresh scheduler of this kind (one per instance: a policy may keep state).
    pub fn build(self) -> Box<dyn Scheduler> {
        match self {
            SchedulerKind::DecodeFirst => Box::new(DecodeFirst),
            SchedulerKind::Vllm => Box::new(Vllm),
            SchedulerKind::Sglang => Box::new(Sglang::default()),
            SchedulerKind::Trtllm => Box::new(Trtllm),
        }
    }

    /// Whether the policy lets prefill chunks overflow the budget by `InstanceConfig::slack`.
    pub fn uses_slack(self) -> bool {
        self == SchedulerKind::DecodeFirst
    }

    /// How reports name the policy.
    pub fn describe(self) -> &'static str {
        match self {
            SchedulerKind::DecodeFirst => "decode-first, chunks whole within the budget plus slack (msmodeling)",
            SchedulerKind::Vllm => "vLLM V1: running first, waiting FCFS, chunks cut to the remaining budget, no slack",
            SchedulerKind::Sglang => {
                "SGLang: prefill batches first (alone), chunked prefill size, conservative admission reserving outputs"
            }
            SchedulerKind::Trtllm => {
                "TensorRT-LLM: in-flight batching, guaranteed-no-evict admission (whole prompt + output), max_num_tokens"
            }
        }
    }
}

/// Preemption retries within one step before giving up on it (a bound, never reached in
/// practice: each retry frees a running sequence).
const MAX_PREEMPT_RETRIES: u64 = 1_000_000;

/// Decode-first, as msmodeling schedules: every decoding sequence gets its step (preempting
/// the newest running sequence, recompute, while the KV pool cannot hold the new tokens);
/// then prefill chunks, FCFS, into what the decodes left of the budget inflated by
/// `cfg.slack`: running prefills first, then admissions while the running cap and the pool
/// allow. A chunk is `min(budget, prompt left)` tokens (the whole prompt without chunked
/// prefill) and is scheduled whole or not at all; a chunk larger than the room left runs only
/// alone. When nothing at all fits, the newest running sequence is preempted and the step
/// is retried.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecodeFirst;

impl Scheduler for DecodeFirst {
    fn schedule(&mut self, cfg: &InstanceConfig, step: &mut StepBuilder<'_>) {
        // Decode instances load transferred KV first: those requests decode in this step.
        if step.role() == Role::Decode {
            let cap = cfg.running_cap();
            while step.running() < cap && step.admit_transferred() {}
        }
        let mut guard = 0;
        loop {
            guard += 1;
            while !step.try_decodes() {
                if !step.preempt_newest() {
                    break;
                }
            }
            // On a decode instance only the requests it preempted prefill (recompute).
            Self::prefills(cfg, step);
            // Nothing fits: free KV by preempting the newest running sequence and retry.
            if !step.is_empty() || step.running() == 0 || guard > MAX_PREEMPT_RETRIES || !step.preempt_newest() {
                return;
            }
        }
    }

    /// Nothing waiting or prefilling: the decodes fit and `prefills` finds nothing to add.
    fn repeats_decodes(&self) -> bool {
        true
    }
}

impl DecodeFirst {
    fn prefills(cfg: &InstanceConfig, step: &mut StepBuilder<'_>) {
        let total = (cfg.budget as f64 * (1.0 + cfg.slack)).floor() as u64;
        let chunk_of = |left: u64| if cfg.chunked_prefill { left.min(cfg.budget) } else { left };
        // Running prefills, oldest first.
        for i in 0..step.partial_prefills() {
            let chunk = chunk_of(step.prefill_left(i));
            if chunk > total.saturating_sub(step.tokens()) && !step.is_empty() {
                return;
            }
            if !step.try_chunk(i, chunk) {
                return;
            }
        }
        // Admissions.
        let cap = cfg.running_cap();
        while step.running() < cap {
            let Some(adm) = step.open_admission() else { return };
            let chunk = chunk_of(adm.left());
            // A whole prompt longer than the budget (a recompute without chunked prefill) may
            // only run alone.
            if chunk > total.saturating_sub(step.tokens()) && !step.is_empty() {
                step.cancel_admission(adm);
                return;
            }
            if !step.admit(adm, chunk) {
                return;
            }
        }
    }
}

/// vLLM V1's scheduler, as `Scheduler.schedule` in `vllm/v1/core/sched/scheduler.py` does
/// it with the default FCFS policy (modelled on that file on vLLM's main branch at commit
/// 00024d3):
///
/// - one token budget per step, `cfg.budget` (`max_num_batched_tokens`), and no slack;
/// - RUNNING requests first, in admission order: every decode (its query tokens, spec-decode
///   drafts included), then every unfinished partial prefill, each chunk cut to the budget
///   left (`min(tokens left, budget left)`);
/// - when the KV pool cannot hold a running request's tokens, the most recently admitted
///   running request is preempted (recompute; `self.running.pop()`) until it can, or until the
///   request itself is the victim, which ends the running pass;
/// - then, only if nothing was preempted in this step, WAITING requests FCFS while fewer than
///   `max_num_seqs` run and budget is left: each prompt's chunk is cut to the budget left (a
///   partial chunk fills the budget), and the first that the free KV blocks cannot hold stops
///   admission (no preemption for waiting requests, no reservation for `max_num_seqs` up
///   front). Prefix hits come from the KV pool ([`StepBuilder::open_admission`]).
///
/// Decodes are scheduled as one set (the lockstep aggregate keeps a step O(1)): the running
/// cap ([`InstanceConfig::running_cap`], `max_num_seqs` and at most `budget / query tokens`
/// sequences) guarantees they all fit the budget, as vLLM's own check that
/// `max_num_batched_tokens ≥ max_num_seqs` does; preempting the newest until the set fits frees
/// the same victims as vLLM's per-request loop, since the survivors are a prefix in admission
/// order either way. Without chunked prefill a prompt is scheduled whole, and one larger than the
/// budget left runs only alone. When preemptions leave the step empty, vLLM's next `schedule`
/// call (an empty step costs nothing) would admit the requeued requests: they are admitted at
/// once.
#[derive(Debug, Clone, Copy, Default)]
pub struct Vllm;

impl Scheduler for Vllm {
    fn schedule(&mut self, cfg: &InstanceConfig, step: &mut StepBuilder<'_>) {
        // Decode instances load transferred KV first: those requests decode in this step.
        if step.role() == Role::Decode {
            let cap = cfg.running_cap();
            while step.running() < cap && step.admit_transferred() {}
        }
        let mut preempted = false;
        while !step.try_decodes() {
            if !step.preempt_newest() {
                break;
            }
            preempted = true;
        }
        // On a decode instance only the requests it preempted prefill (recompute).
        preempted |= Self::running_prefills(cfg, step);
        if !preempted || step.is_empty() {
            Self::admissions(cfg, step);
        }
    }

    /// Nothing waiting or prefilling: the decodes fit, nothing is preempted or admitted.
    fn repeats_decodes(&self) -> bool {
        true
    }
}

impl Vllm {
    /// The chunk of a prompt with `left` tokens to compute when `room` budget is left.
    fn chunk(cfg: &InstanceConfig, left: u64, room: u64) -> u64 {
        if cfg.chunked_prefill {
            left.min(room)
        } else {
            left
        }
    }

    /// Unfinished partial prefills, oldest first; returns whether a request was preempted.
    fn running_prefills(cfg: &InstanceConfig, step: &mut StepBuilder<'_>) -> bool {
        let mut preempted = false;
        let mut i = 0;
        while i < step.partial_prefills() {
            let room = cfg.budget.saturating_sub(step.tokens());
            if room == 0 {
                break;
            }
            let chunk = Self::chunk(cfg, step.prefill_left(i), room);
            if chunk > room && !step.is_empty() {
                break;
            }
            while !step.try_chunk(i, chunk) {
                // KV exhausted: preempt the newest running request, perhaps this one.
                let this = step.prefill_request(i);
                let victim = step.newest_running();
                preempted |= step.preempt_newest();
                if victim.is_none() || victim == Some(this) {
                    return preempted;
                }
            }
            i += 1;
        }
        preempted
    }

    /// Waiting requests, FCFS, each chunked to the budget left.
    fn admissions(cfg: &InstanceConfig, step: &mut StepBuilder<'_>) {
        let cap = cfg.running_cap();
        while step.running() < cap {
            let room = cfg.budget.saturating_sub(step.tokens());
            if room == 0 {
                return;
            }
            let Some(adm) = step.open_admission() else { return };
            let chunk = Self::chunk(cfg, adm.left(), room);
            if chunk > room && !step.is_empty() {
                step.cancel_admission(adm);
                return;
            }
            if !step.admit(adm, chunk) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
