//! The scheduler seam: exact step traces of [`DecodeFirst`] on one instance, and policies
//! written in the tests driving the same instance mechanics.

use super::*;
use crate::cost::{FixedCost, StepCostModel};
use crate::sim::instance::{Instance, StepOutcome};
use crate::sim::{DecodeMode, RequestState};
use crate::workload::arrival::{rng, Stream};

fn cfg(budget: u64, slack: f64, max_num_seqs: u64, block_size: u64) -> InstanceConfig {
    InstanceConfig {
        scheduler: Default::default(),
        budget,
        slack,
        max_num_seqs,
        chunked_prefill: true,
        block_size,
        kv_blocks: 1000,
        decode: DecodeMode::Plain,
        prefix_hit_rate: 0.0,
        images_per_request: 0,
        image_patches_per_image: 0,
        image_patches: 0,
        image_tokens: 0,
    }
}

/// One planned step: the requests decoding, and each prefill chunk as (request, tokens).
type Step = (Vec<u32>, Vec<(u32, u64)>);

/// Run `(input, output)` requests, all waiting at t = 0, on one mixed instance with
/// `scheduler` and 1 ms steps until every request finished; returns every step and the
/// instance (to inspect its KV pool) and the requests.
fn trace(scheduler: Box<dyn Scheduler>, cfg: &InstanceConfig, lens: &[(u64, u64)]) -> (Vec<Step>, Instance, Vec<RequestState>) {
    let cost = FixedCost { per_step_s: 1e-3, per_token_s: 0.0 };
    let mut inst = Instance::with_scheduler(0, Role::Mixed, cfg, scheduler);
    let mut reqs: Vec<RequestState> = lens.iter().map(|&(input, output)| RequestState { input, output, ..Default::default() }).collect();
    for i in 0..reqs.len() as u32 {
        inst.enqueue(i, &reqs);
    }
    let (mut now, mut rng, mut out, mut steps) = (0, rng(0, Stream::MtpAcceptance), StepOutcome::default(), Vec::new());
    while inst.has_work() {
        assert!(steps.len() < 100, "runaway: {steps:?}");
        assert!(inst.plan(cfg, &mut reqs, now), "stalled after {steps:?}");
        steps.push(inst.planned());
        now += (cost.step_seconds(&inst.shape) * 1e9).round() as u64;
        inst.complete(cfg, &mut reqs, now, &mut rng, &mut out);
    }
    (steps, inst, reqs)
}

#[test]
fn decode_first_chunks_whole_into_the_slack_budget() {
    // Budget 4, 25 % slack: 5 tokens per step. R0 (6 prompt tokens) gets a 4-token chunk; R1's
    // 3-token chunk does not fit the 1 token left and is not cut to fit: it waits. Step 2: R0's
    // last 2 and R1's 3. Step 3: the two decodes first, then R2's 2 in the 3 left. Step 4: R0
    // and R2 decode their last tokens (R1 finished with 2 tokens).
    // Fails if a chunk is cut to the room left (vLLM style: `left.min(room)` in
    // `DecodeFirst::prefills`): step 1 becomes [(0, 4), (1, 1)].
    let c = cfg(4, 0.25, 3, 4);
    let (steps, inst, reqs) = trace(Box::new(DecodeFirst), &c, &[(6, 3), (3, 2), (2, 2)]);
    let want: Vec<Step> = vec![(vec![], vec![(0, 4)]), (vec![], vec![(0, 2), (1, 3)]), (vec![0, 1], vec![(2, 2)]), (vec![0, 2], vec![])];
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output && r.preemptions == 0));
    assert_eq!(inst.kv.used(), 0);
}

/// A policy written against the seam alone: decodes, then at most one prefill per step,
/// the whole prompt left at once (no budget).
#[derive(Debug)]
struct OnePrefillPerStep;

impl Scheduler for OnePrefillPerStep {
    fn schedule(&mut self, _cfg: &InstanceConfig, step: &mut StepBuilder<'_>) {
        while !step.try_decodes() {
            if !step.preempt_newest() {
                return;
            }
        }
        if step.partial_prefills() > 0 {
            let left = step.prefill_left(0);
            let _ = step.try_chunk(0, left);
        } else if let Some(adm) = step.open_admission() {
            let left = adm.left();
            let _ = step.admit(adm, left);
        }
    }
}

#[test]
fn the_seam_drives_the_instance_with_any_policy() {
    // Under DecodeFirst all three prompts (6 tokens) fit the first step of 64; one prefill per
    // step admits them one by one, decoding R0 beside R1's prompt.
    // Fails if `Instance::plan` ignores its scheduler (e.g. calls `DecodeFirst` directly).
    let c = cfg(64, 0.0, 8, 4);
    let lens = [(2, 2), (3, 1), (1, 2)];
    let (steps, ..) = trace(Box::new(DecodeFirst), &c, &lens);
    assert_eq!(steps[0], (vec![], vec![(0, 2), (1, 3), (2, 1)]));
    let (steps, inst, reqs) = trace(Box::new(OnePrefillPerStep), &c, &lens);
    let want: Vec<Step> = vec![(vec![], vec![(0, 2)]), (vec![0], vec![(1, 3)]), (vec![], vec![(2, 1)]), (vec![2], vec![])];
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output));
    assert_eq!(inst.kv.used(), 0);
}

/// DecodeFirst, then, once (state kept across steps), preempt the newest sequence after the
/// step is filled, as a vLLM policy does when a later request runs out of KV.
#[derive(Debug, Default)]
struct PreemptAfterScheduling {
    done: bool,
}

impl Scheduler for PreemptAfterScheduling {
    fn schedule(&mut self, cfg: &InstanceConfig, step: &mut StepBuilder<'_>) {
        DecodeFirst.schedule(cfg, step);
        if !self.done && step.decoding() >= 2 {
            self.done = step.preempt_newest();
        }
    }
}

#[test]
fn preempting_a_scheduled_decode_takes_it_and_its_block_out_of_the_step() {
    // Block size 1: every decode takes a new block, so the preempted decode had reserved one.
    // Step 1 prefills both prompts, step 2 decodes R0 alone (R1 preempted after its decode was
    // scheduled), step 3 recomputes R1's prompt plus its first output token beside R0's last
    // decode, step 4 decodes R1's last.
    // Fails if the preempted lockstep decode keeps its block (drop `self.kv.release(1)` in
    // `Instance::preempt_newest`): the pool ends with 1 block in use.
    let c = cfg(64, 0.0, 8, 1);
    let (steps, inst, reqs) = trace(Box::new(PreemptAfterScheduling::default()), &c, &[(2, 3), (2, 3)]);
    let want: Vec<Step> = vec![(vec![], vec![(0, 2), (1, 2)]), (vec![0], vec![]), (vec![0], vec![(1, 3)]), (vec![1], vec![])];
    assert_eq!(steps, want);
    assert_eq!(reqs.iter().map(|r| (r.generated, r.preemptions)).collect::<Vec<_>>(), vec![(3, 0), (3, 1)]);
    assert_eq!(inst.kv.used(), 0);
}
