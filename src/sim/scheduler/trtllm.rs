//! TensorRT-LLM's scheduler ([`Trtllm`]).

use super::{Role, Scheduler, StepBuilder};
use crate::sim::InstanceConfig;

/// TensorRT-LLM's in-flight batching with its default capacity scheduler,
/// `GuaranteedNoEvictScheduler` (`cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp`), and
/// its micro-batch scheduler (`microBatchScheduler.cpp`), as the PyTorch backend runs them
/// (`CapacitySchedulerPolicy.GUARANTEED_NO_EVICT` is the LLM API's and `trtllm-serve`'s default);
/// read on TensorRT-LLM's main branch (capacityScheduler.cpp at 02a10fe, microBatchScheduler.cpp
/// at b8b7b78; the policy is unchanged since v0.10):
///
/// - **guaranteed no evict**: requests in progress are scheduled first, and the KV blocks they
///   still need to run to completion are set aside (`NoEvictScheduledBlocksManager`); a new
///   request is admitted, FCFS, only if the blocks of its whole prompt and its whole output
///   (`max_new_tokens`) fit what is left, and the first that does not fit stops admission. So
///   the KV pool can never run out: nothing is ever preempted;
/// - at most `max_batch_size` requests (`cfg.max_num_seqs`, default 2,048) and `max_num_tokens`
///   tokens per step (`cfg.budget`, default 8,192): every generation request (one token each;
///   their reservations guarantee their KV), then context requests in order;
/// - context and generation requests run in the same step (in-flight batching). With chunked
///   context (`enable_chunked_prefill`, off by default in the LLM API) each context chunk is cut
///   to the tokens left (the first-come-first-served chunking policy); without it a prompt runs
///   whole and one that does not fit the tokens left waits (one larger than the budget runs alone:
///   the tool raises the budget to the longest prompt as TensorRT-LLM requires).
///
/// Left out: `MAX_UTILIZATION` (pauses the newest started request when blocks run out, as vLLM
/// does) and the KV-reuse rule that skips a request whose prefix another request is computing;
/// chunk sizes are not rounded to the chunk unit (the KV block size).
#[derive(Debug, Clone, Copy, Default)]
pub struct Trtllm;

impl Scheduler for Trtllm {
    fn schedule(&mut self, cfg: &InstanceConfig, step: &mut StepBuilder<'_>) {
        let cap = cfg.running_cap();
        if step.role() == Role::Decode {
            while step.running() < cap && step.admit_transferred() {}
        }
        // Reservations make the decodes fit; the preemption is only a guard that never fires
        // unless the reservation invariant is broken (a test checks it does not).
        while !step.try_decodes() {
            if !step.preempt_newest() {
                break;
            }
        }
        // On a decode instance only the requests it preempted prefill (recompute).
        let chunk_of = |left: u64, room: u64| if cfg.chunked_prefill { left.min(room) } else { left };
        let mut i = 0;
        while i < step.partial_prefills() {
            let room = cfg.budget.saturating_sub(step.tokens());
            let chunk = chunk_of(step.prefill_left(i), room);
            if room == 0 || (chunk > room && !step.is_empty()) || !step.try_chunk(i, chunk) {
                return;
            }
            i += 1;
        }
        while step.running() < cap {
            let room = cfg.budget.saturating_sub(step.tokens());
            if room == 0 {
                return;
            }
            let Some(adm) = step.open_admission() else { return };
            let chunk = chunk_of(adm.left(), room);
            let fits = step.admission_reserve(&adm) <= step.kv_available_blocks().saturating_sub(step.kv_blocks_to_completion());
            if !fits || (chunk > room && !step.is_empty()) {
                step.cancel_admission(adm);
                return;
            }
            if !step.admit(adm, chunk) {
                return;
            }
        }
    }

    /// Nothing waiting or prefilling: the decodes fit, nothing is chunked or admitted.
    fn repeats_decodes(&self) -> bool {
        true
    }
}
