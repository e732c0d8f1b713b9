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
//! [`DecodeFirst`] is the policy of the original msmodeling tool. A vLLM V1 style policy
//! (running requests first: decodes, then unfinished partial prefills; then waiting requests
//! FCFS, each prompt chunked to the remaining budget; preempt the most recently admitted on KV
//! exhaustion) is the same loop with a different budget and chunk rule: preempting after some
//! work is scheduled takes the victim's work out of the step.

pub use super::instance::Scheduler;
use super::instance::{Role, StepBuilder};
use super::InstanceConfig;

/// The policies an instance can run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SchedulerKind {
    #[default]
    DecodeFirst,
}

impl SchedulerKind {
    /// A fresh scheduler of this kind (one per instance: a policy may keep state).
    pub fn build(self) -> Box<dyn Scheduler> {
        match self {
            SchedulerKind::DecodeFirst => Box::new(DecodeFirst),
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
            if step.role() != Role::Decode {
                Self::prefills(cfg, step);
            }
            // Nothing fits: free KV by preempting the newest running sequence and retry.
            if !step.is_empty() || step.running() == 0 || guard > MAX_PREEMPT_RETRIES || !step.preempt_newest() {
                return;
            }
        }
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

#[cfg(test)]
mod tests;
