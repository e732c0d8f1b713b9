//! SGLang's scheduler ([`Sglang`]).

use super::{Role, Scheduler, StepBuilder};
use crate::sim::InstanceConfig;

/// SGLang's `new_token_ratio` defaults (`SGLANG_INIT_NEW_TOKEN_RATIO` 0.7 ×
/// `--schedule-conservativeness` 1.0; floor `SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR` 0.14 × the
/// initial ratio; reached after `SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS` 600 decode steps).
const INIT_RATIO: f64 = 0.7;
const MIN_RATIO: f64 = INIT_RATIO * 0.14;
const DECAY_STEPS: f64 = 600.0;

/// SGLang's scheduler, as `Scheduler.get_next_batch_to_run` / `get_new_batch_prefill`
/// (`python/sglang/srt/managers/scheduler.py`) and `PrefillAdder`
/// (`python/sglang/srt/managers/schedule_policy.py`) do it with the defaults (FCFS order, no
/// mixed chunk, page size 1); read on SGLang's main branch (scheduler.py at d51c1c2,
/// schedule_policy.py at 00550cd, server_args.py at 469c63e; the rules are those of v0.4–v0.5):
///
/// - **prefill first**: a step runs either a prefill batch or a decode batch, never both. If a
///   prefill batch can be formed (a chunked prompt to continue, or a waiting request admitted)
///   it runs alone; otherwise every running request decodes;
/// - the prefill batch: first the unfinished chunked prompt, then waiting requests FCFS while
///   fewer than `max_running_requests` run; chunk tokens per step are `chunked_prefill_size`
///   (`cfg.budget`): a prompt that fits the tokens left goes whole, a longer one is cut to them
///   and becomes the chunked request (one per step);
/// - **conservative admission**: the KV tokens left for admission are the free and evictable
///   tokens minus, for each decoding request, its remaining output × `new_token_ratio`, minus
///   what this batch already took (each chunk, and each request's whole output when its last
///   chunk is in the batch). A request is admitted only if its remaining prompt plus its whole
///   output is below that (`total_tokens >= rem_total_tokens` → `NO_TOKEN` stops admission);
/// - `new_token_ratio` starts at 0.7, falls by (0.7 − 0.098) / 600 per decode step to 0.098,
///   and is reset to 0.7 when the scheduler idles (here: when nothing runs) or retracts;
/// - when the decodes do not fit the KV pool, requests are retracted (recompute) until they do.
///
/// Left out: SGLang retracts the request with the fewest output tokens (longest prompt on
/// ties), here the most recently admitted, which is the same request when all decode in step;
/// the post-retraction ratio estimate (here: back to the initial ratio); the 4,096-token clip of
/// each request's output estimate (`CLIP_MAX_NEW_TOKENS`: it matters only for outputs longer
/// than that, and keeping it would cost a walk of the decode set per step); `max_prefill_tokens`
/// (16,384, above the default chunk size, so it never binds with chunked prefill; without it
/// the budget plays its role: a prompt above it runs only alone); the radix-cache-aware
/// orderings (LPM applies only to a long queue with prefix hits; FCFS is the default).
#[derive(Debug, Clone, Copy)]
pub struct Sglang {
    new_token_ratio: f64,
}

impl Default for Sglang {
    fn default() -> Self {
        Sglang { new_token_ratio: INIT_RATIO }
    }
}

impl Scheduler for Sglang {
    fn schedule(&mut self, cfg: &InstanceConfig, step: &mut StepBuilder<'_>) {
        if step.running() == 0 {
            self.new_token_ratio = INIT_RATIO;
        }
        if step.role() == Role::Decode {
            let cap = cfg.max_num_seqs.max(1);
            while step.running() < cap && step.admit_transferred() {}
        }
        // On a decode instance only the requests it retracted prefill (recompute).
        if self.prefill_batch(cfg, step) {
            return;
        }
        while !step.try_decodes() {
            if !step.preempt_newest() {
                break;
            }
            self.new_token_ratio = INIT_RATIO;
        }
        if step.decoding() > 0 {
            self.decay();
        }
    }

    /// Nothing waiting or prefilling: the prefill batch is empty, the decodes fit, and the
    /// ratio decays.
    fn repeats_decodes(&self) -> bool {
        true
    }

    fn repeated_decodes(&mut self) {
        self.decay();
    }
}

impl Sglang {
    /// A decode step lowers the new-token ratio, down to its floor.
    fn decay(&mut self) {
        self.new_token_ratio = (self.new_token_ratio - (INIT_RATIO - MIN_RATIO) / DECAY_STEPS).max(MIN_RATIO);
    }

    /// The prefill batch, if one can be formed; returns whether the step holds one.
    fn prefill_batch(&self, cfg: &InstanceConfig, step: &mut StepBuilder<'_>) -> bool {
        // The KV tokens left for admission, with every decoding request's expected output
        // reserved (`PrefillAdder.rem_total_token_offset`).
        let mut rem_total = step.kv_available_tokens() as f64 - step.decode_output_left() as f64 * self.new_token_ratio;
        let mut rem_chunk = cfg.budget;
        // The chunked request first: its next chunk, whatever the reservation.
        let mut i = 0;
        while i < step.partial_prefills() && rem_chunk > 0 {
            let left = step.prefill_left(i);
            let chunk = if cfg.chunked_prefill { left.min(rem_chunk) } else { left };
            if !step.try_chunk(i, chunk) {
                break;
            }
            rem_chunk = rem_chunk.saturating_sub(chunk);
            rem_total -= (chunk + if chunk == left { step.prefill_output_left(i) } else { 0 }) as f64;
            i += 1;
        }
        // `max_running_requests`; decodes do not count against the chunk size (a step holds
        // prefills or decodes), so the running cap is not cut to the budget as vLLM's is.
        let cap = cfg.max_num_seqs.max(1);
        while step.running() < cap && rem_total > 0.0 && rem_chunk > 0 {
            let Some(adm) = step.open_admission() else { break };
            let (left, out) = (adm.left(), step.admission_output_left(&adm));
            // Conservative admission: the whole prompt and output must fit what is left.
            let whole_too_long = !cfg.chunked_prefill && left > rem_chunk && !step.is_empty();
            if (left + out) as f64 >= rem_total || whole_too_long {
                step.cancel_admission(adm);
                break;
            }
            let chunk = if cfg.chunked_prefill { left.min(rem_chunk) } else { left };
            if !step.admit(adm, chunk) {
                break;
            }
            rem_chunk = rem_chunk.saturating_sub(chunk);
            rem_total -= (chunk + if chunk == left { out } else { 0 }) as f64;
        }
        !step.is_empty()
    }
}
