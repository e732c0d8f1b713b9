//! The scheduler seam: exact step traces of [`DecodeFirst`] on one instance, and policies
//! written in the tests driving the same instance mechanics.

use super::*;
use crate::cost::{FixedCost, StepCostModel};
use crate::sim::instance::{Instance, StepOutcome};
use crate::sim::AcceptanceDraws;
use crate::sim::{RequestState, Requests};

fn cfg(budget: u64, slack: f64, max_num_seqs: u64, block_size: u64) -> InstanceConfig {
    InstanceConfig::for_tests(budget, slack, max_num_seqs, block_size)
}

/// One planned step: the requests decoding, and each prefill chunk as (request, tokens).
type Step = (Vec<u32>, Vec<(u32, u64)>);

/// Run `(input, output)` requests, all waiting at t = 0, on one mixed instance with
/// `scheduler` and 1 ms steps until every request finished; returns every step and the
/// instance (to inspect its KV pool) and the requests.
fn trace(scheduler: Box<dyn Scheduler>, cfg: &InstanceConfig, lens: &[(u64, u64)]) -> (Vec<Step>, Instance, Vec<RequestState>) {
    trace_up_to(scheduler, cfg, lens, 100)
}

/// [`trace`] for runs of up to 1,000 steps.
fn trace_long(scheduler: Box<dyn Scheduler>, cfg: &InstanceConfig, lens: &[(u64, u64)]) -> (Vec<Step>, Instance, Vec<RequestState>) {
    trace_up_to(scheduler, cfg, lens, 1000)
}

fn trace_up_to(
    scheduler: Box<dyn Scheduler>,
    cfg: &InstanceConfig,
    lens: &[(u64, u64)],
    max: usize,
) -> (Vec<Step>, Instance, Vec<RequestState>) {
    let cost = FixedCost { per_step_s: 1e-3, per_token_s: 0.0 };
    let mut inst = Instance::with_scheduler(0, Role::Mixed, cfg, scheduler);
    let mut reqs: Requests = lens.iter().map(|&(input, output)| RequestState { input, output, ..Default::default() }).collect();
    for i in 0..reqs.issued() as u32 {
        inst.enqueue(i, &reqs);
    }
    let (mut now, draws, mut out, mut steps) = (0, AcceptanceDraws::new(0), StepOutcome::default(), Vec::new());
    while inst.has_work() {
        assert!(steps.len() < max, "runaway: {steps:?}");
        assert!(inst.plan(cfg, &mut reqs, now), "stalled after {steps:?}");
        steps.push(inst.planned());
        now += (cost.step_seconds(&inst.shape) * 1e9).round() as u64;
        inst.complete(cfg, &mut reqs, now, &draws, &mut out);
    }
    (steps, inst, reqs.into_vec())
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

#[test]
fn vllm_cuts_the_next_chunk_to_the_remaining_budget() {
    // Budget 4, no slack (the 25 % in the config is ignored). Step 1: R0's first 4 of 6. Step 2:
    // R0's last 2, then R1 (3 tokens) cut to the 2 left. Step 3: R0 decodes (1), R1's last 1,
    // R2's 2 fill the budget. Step 4: the three decodes.
    // Fails if the waiting prompt is not cut to the room left (`left.min(cfg.budget)` instead of
    // `left.min(room)` in `Vllm::chunk`, tried): R1's whole 3 tokens do not fit the 2 left and
    // wait, step 2 becomes [(0, 2)].
    let c = cfg(4, 0.25, 3, 4);
    let (steps, inst, reqs) = trace(Box::new(Vllm), &c, &[(6, 3), (3, 2), (2, 2)]);
    let want: Vec<Step> =
        vec![(vec![], vec![(0, 4)]), (vec![], vec![(0, 2), (1, 2)]), (vec![0], vec![(1, 1), (2, 2)]), (vec![0, 1, 2], vec![])];
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output && r.preemptions == 0));
    assert_eq!(inst.kv.used(), 0);
}

#[test]
fn vllm_preempts_the_newest_and_admits_nothing_in_that_step() {
    // Block size 2, 7 blocks, budget 4. Steps 1–3: R0 and R1 prefill, then decode while R2's
    // 8-token prompt gets 2-token chunks. Step 4: both decodes need a block (contexts 4), one is
    // free: R2, the most recently admitted, is preempted (its 2 blocks freed, 1 left after the
    // decodes). Its 2-token recompute chunk would fit that block and the 2 tokens of budget
    // left, but nothing is admitted in a step that preempted: it comes back in step 5.
    // Fails if admission runs after a preemption (`if true` for `if !preempted ||
    // step.is_empty()` in `Vllm::schedule`, tried): step 4 becomes ([0, 1], [(2, 2)]). Preempting
    // the oldest instead (`.next()` for `.next_back()` in `Instance::preempt_newest`, tried)
    // preempts R0: step 4 becomes ([1], [(2, 3)]).
    let mut c = cfg(4, 0.0, 3, 2);
    c.kv_blocks = 7;
    let (steps, inst, reqs) = trace(Box::new(Vllm), &c, &[(2, 5), (2, 5), (8, 2)]);
    let want: Vec<Step> = vec![
        (vec![], vec![(0, 2), (1, 2)]),
        (vec![0, 1], vec![(2, 2)]),
        (vec![0, 1], vec![(2, 2)]),
        (vec![0, 1], vec![]),
        (vec![0, 1], vec![(2, 2)]),
        (vec![], vec![(2, 4)]),
        (vec![], vec![(2, 2)]),
        (vec![2], vec![]),
    ];
    assert_eq!(steps, want);
    assert_eq!(reqs.iter().map(|r| (r.generated, r.preemptions)).collect::<Vec<_>>(), vec![(5, 0), (5, 0), (2, 1)]);
    assert_eq!(inst.kv.used(), 0);
}

#[test]
fn vllm_caps_running_requests_at_max_num_seqs() {
    // Budget 64 holds all three 2-token prompts, but at most 2 run: R2 waits until R0 and R1
    // finish (their decode in step 2 is their last token), then runs alone.
    // Fails if admission ignores the cap (drop `step.running() < cap` in `Vllm::admissions`,
    // tried): step 1 becomes [(0, 2), (1, 2), (2, 2)].
    let c = cfg(64, 0.0, 2, 4);
    let (steps, _, reqs) = trace(Box::new(Vllm), &c, &[(2, 2), (2, 2), (2, 2)]);
    let want: Vec<Step> = vec![(vec![], vec![(0, 2), (1, 2)]), (vec![0, 1], vec![]), (vec![], vec![(2, 2)]), (vec![2], vec![])];
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output));
}

/// Mean and p99 TTFT (ms) and output tokens/s of a closed loop of `concurrency` requests of
/// 1,024 prompt and 1,024 output tokens under `kind`: budget 256, 15 % slack (read by
/// decode-first only), a step costs 5 ms + 20 µs per token.
fn cliff_point(kind: SchedulerKind, concurrency: u64) -> (f64, f64, f64) {
    use crate::sim::{simulate, RunParams, SimConfig};
    use crate::workload::{arrival::ArrivalProcess, arrival::RequestFactory, Lengths};
    let mut instance = cfg(256, 0.15, 256, 16);
    instance.scheduler = kind;
    instance.kv_blocks = 100_000;
    let run = RunParams {
        concurrency,
        num_requests: 0,
        closed_requests: None,
        measure: Default::default(),
        min_measured: 0,
        max_concurrency: None,
        ttft_limit_ms: f64::INFINITY,
        tpot_limit_ms: f64::INFINITY,
        seed: 0,
        max_steps: 10_000_000,
        bins: Vec::new(),
        stop_once_measured: false,
    };
    let c = SimConfig { instance, instances: 1, role: Role::Mixed, run };
    let cost = FixedCost { per_step_s: 5e-3, per_token_s: 2e-5 };
    let f = RequestFactory::new(Lengths::Fixed(1024), Lengths::Fixed(1024), None, ArrivalProcess::Closed, 0);
    let rep = simulate(&c, &cost, f).unwrap();
    (rep.latency.ttft.mean, rep.latency.ttft.p99, rep.output_throughput)
}

#[test]
fn vllm_has_no_ttft_cliff_at_a_small_budget() {
    // The cliff: budget 256. Under decode-first, 40 requests leave 39 decoding beside a
    // waiting prompt, and its 256-token chunk no longer fits the 294 − 39 = 255 tokens left: it
    // waits until a decode finishes. Measured (mean / p99 TTFT ms, output tok/s):
    //   decode-first  39: 43.5 / 43.6, 5,933    40: 212.9 / 5,124, 5,917    64: 4,342 / 6,169, 5,938
    //   vllm          39: 84.3 / 172.2, 5,912   40: 85.8 / 182.3, 6,026     64: 133.0 / 425.2, 8,406
    // (over the batch-means stopping rule's window).
    // Under vllm a partial chunk takes whatever the decodes leave: TTFT grows smoothly with the
    // load and throughput keeps rising (+41 % over decode-first at 64).
    // Fails if the vLLM policy schedules chunks whole (`left.min(cfg.budget)` in `Vllm::chunk`,
    // tried): with no slack a 256-token chunk never fits beside a decode, prompts wait for the
    // decodes to drain, and at 64 the mean TTFT is 326 s at 198 tok/s.
    let [d39, d40, d64] = [39, 40, 64].map(|n| cliff_point(SchedulerKind::DecodeFirst, n));
    let [v39, v40, v64] = [39, 40, 64].map(|n| cliff_point(SchedulerKind::Vllm, n));
    assert!(d40.0 > 4.0 * d39.0 && d40.1 > 100.0 * d39.1, "decode-first has the cliff: {d39:?} {d40:?}");
    assert!(v40.0 < 1.1 * v39.0 && v40.1 < 1.1 * v39.1, "no cliff at 40: {v39:?} {v40:?}");
    assert!(v64.0 < 64.0 / 40.0 * 1.5 * v40.0 && v64.1 < 3.0 * v40.1, "smooth to 64: {v40:?} {v64:?}");
    assert!(v64.2 > 1.25 * d64.2, "vllm's throughput at 64: {v64:?} vs {d64:?}");
    assert!((v39.0 - 84.29).abs() < 0.01 && (v40.0 - 85.85).abs() < 0.01 && (v64.0 - 132.97).abs() < 0.01, "{v39:?} {v40:?} {v64:?}");
}

#[test]
fn sglang_runs_a_waiting_prefill_before_the_next_decode_step() {
    // Chunked prefill size 2, KV plentiful. Step 1: R0's prompt. Step 2: R1's prompt runs alone
    // although R0 could decode: a prefill batch runs whenever one can be formed, without the
    // decodes. Steps 3–4: R2's 3 tokens in two chunks (the chunked request continues first),
    // still without decodes. Step 5: the three decode; R1 and R2 finish. Step 6: R0's last.
    // Fails if decodes run beside the prefill batch (`return` after `prefill_batch` in
    // `Sglang::schedule` replaced by a fall-through to the decodes, tried): step 2 becomes
    // ([0], [(1, 2)]).
    let c = cfg(2, 0.0, 8, 4);
    let (steps, inst, reqs) = trace(Box::new(Sglang::default()), &c, &[(2, 3), (2, 2), (3, 2)]);
    let want: Vec<Step> = vec![
        (vec![], vec![(0, 2)]),
        (vec![], vec![(1, 2)]),
        (vec![], vec![(2, 2)]),
        (vec![], vec![(2, 1)]),
        (vec![0, 1, 2], vec![]),
        (vec![0], vec![]),
    ];
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output && r.preemptions == 0));
    assert_eq!(inst.kv.used(), 0);
}

#[test]
fn sglang_admits_conservatively_reserving_outputs() {
    // 10 KV blocks of 1 token, budget 64: memory, not the budget, decides. Step 1: R0 needs its
    // 2 prompt + 4 output tokens (6 < 10 free): admitted, leaving 10 − 6 = 4; R1's 6 do not fit.
    // Steps 2–4: 8, 7, 6 blocks free, minus R0's remaining output × new_token_ratio (≈ 0.7):
    // 5.9, 5.6, 5.3 < 6, so R1 waits while R0 decodes. Step 5: R0 has finished; R1 admitted,
    // R2 waits for it, and so on: one request at a time, never a retraction.
    // Fails if the running requests' outputs are not reserved (drop the
    // `decode_output_left() * new_token_ratio` term in `Sglang::prefill_batch`, tried): step 2
    // admits R1, ([], [(1, 2)]). Without the request's own output in the check (`left + out` →
    // `left`) step 1 admits all three.
    let mut c = cfg(64, 0.0, 8, 1);
    c.kv_blocks = 10;
    let (steps, inst, reqs) = trace(Box::new(Sglang::default()), &c, &[(2, 4), (2, 4), (2, 4)]);
    let one = |r: u32| -> Vec<Step> { vec![(vec![], vec![(r, 2)]), (vec![r], vec![]), (vec![r], vec![]), (vec![r], vec![])] };
    let want: Vec<Step> = [one(0), one(1), one(2)].concat();
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output && r.preemptions == 0));
    assert_eq!(inst.kv.used(), 0);
}

#[test]
fn trtllm_admits_only_when_the_whole_reservation_fits() {
    // 10 KV blocks of 1 token, budget 64. Each request reserves its 2 prompt + 4 output = 6
    // blocks. Step 1: R0 admitted (6 ≤ 10); R1 does not fit the 10 − 6 left. Steps 2–4: R0
    // decodes (in-flight batching would run R1's prompt beside it, but 8 − 1 free blocks minus
    // R0's 3 still to come leave 4 < 6). Step 5: R1 is admitted in the step R0 no longer runs.
    // Fails if the running requests' remaining reservations are not set aside (drop
    // `- step.kv_blocks_to_completion()` in `Trtllm::schedule`, tried): only the prompts' blocks
    // then count, step 1 admits all three, [(0, 2), (1, 2), (2, 2)], and R2 is preempted in step 5.
    // Reserving the prompt without the output (`a.prompt + self.admission_output_left(a)` →
    // `a.prompt` in `StepBuilder::admission_reserve`, tried): step 1 admits R0 and R1.
    let mut c = cfg(64, 0.0, 8, 1);
    c.kv_blocks = 10;
    let (steps, inst, reqs) = trace(Box::new(Trtllm), &c, &[(2, 4), (2, 4), (2, 4)]);
    let one = |r: u32| -> Vec<Step> { vec![(vec![], vec![(r, 2)]), (vec![r], vec![]), (vec![r], vec![]), (vec![r], vec![])] };
    let want: Vec<Step> = [one(0), one(1), one(2)].concat();
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output && r.preemptions == 0));
    assert_eq!(inst.kv.used(), 0);
}

#[test]
fn trtllm_runs_prefill_beside_decodes_within_max_num_tokens() {
    // KV plentiful, max_num_tokens 4, no chunked context. Step 1: R0's 3 tokens; R1's 2 do not
    // fit the 1 left and wait (a whole prompt, not cut). Step 2: R0 decodes (1) beside R1's 2;
    // R2's 2 do not fit the 1 left. Step 3: R0 and R1 decode beside R2's prompt. Step 4: R1
    // and R2 decode their last tokens (R0 finished with 3).
    // Fails if context chunks are cut to the room left (`cfg.chunked_prefill` ignored in
    // `Trtllm::schedule`'s `chunk_of`, tried): step 1 becomes [(0, 3), (1, 1)].
    let mut c = cfg(4, 0.0, 8, 4);
    c.chunked_prefill = false;
    let (steps, inst, reqs) = trace(Box::new(Trtllm), &c, &[(3, 3), (2, 3), (2, 2)]);
    let want: Vec<Step> = vec![(vec![], vec![(0, 3)]), (vec![0], vec![(1, 2)]), (vec![0, 1], vec![(2, 2)]), (vec![1, 2], vec![])];
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output && r.preemptions == 0));
    assert_eq!(inst.kv.used(), 0);
}

#[test]
fn trtllm_never_preempts_under_kv_pressure() {
    // Twenty requests of mixed lengths on a pool that holds a few of them at once (block size
    // 4): vLLM preempts there; guaranteed-no-evict admission never does, and every request
    // finishes. Fails if the running requests' remaining reservations are not set aside (drop
    // `- step.kv_blocks_to_completion()` in `Trtllm::schedule`, tried): 2 preemptions.
    let mut c = cfg(16, 0.0, 64, 4);
    c.kv_blocks = 12;
    let lens: Vec<(u64, u64)> = (0..20).map(|i| (3 + (i * 7) % 11, 2 + (i * 5) % 13)).collect();
    let run = |s: Box<dyn Scheduler>| {
        let (steps, inst, reqs) = trace_long(s, &c, &lens);
        assert!(reqs.iter().all(|r| r.generated == r.output), "{steps:?}");
        assert_eq!(inst.kv.used(), 0);
        reqs.iter().map(|r| r.preemptions).sum::<u32>()
    };
    assert!(run(Box::new(Vllm)) > 0, "the pool is tight enough for vLLM to preempt");
    assert_eq!(run(Box::new(Trtllm)), 0);
}

#[test]
fn vllm_admits_every_waiting_request_the_budget_fits() {
    // Budget 64 holds all three 2-token prompts: all three enter the first step, as vLLM's
    // scheduler admits waiting requests while budget, running cap and KV blocks allow. (Until
    // issue 22 the vLLM and TensorRT-LLM profiles let one new request in per step: R1 entered
    // beside R0's last decode, R2 beside R1's, and TPOT stopped growing with load.)
    let c = cfg(64, 0.0, 8, 4);
    let (steps, _, reqs) = trace(Box::new(Vllm), &c, &[(2, 2), (2, 2), (2, 2)]);
    let want: Vec<Step> = vec![(vec![], vec![(0, 2), (1, 2), (2, 2)]), (vec![0, 1, 2], vec![])];
    assert_eq!(steps, want);
    assert!(reqs.iter().all(|r| r.generated == r.output));
}

/// Steps of `Vllm` on one instance with 1 ms steps: R0 and R1 (2 prompt tokens, 3 output
/// tokens) wait at t = 0, R2 arrives at 1.5 ms, during step 2.
fn late_arrival_trace(overlap: bool) -> Vec<Step> {
    let mut c = cfg(64, 0.0, 8, 4);
    c.overlap_scheduling = overlap;
    let mut inst = Instance::with_scheduler(0, Role::Mixed, &c, Box::new(Vllm));
    let mut reqs: Requests = [(0, 2, 3), (0, 2, 3), (1_500_000, 2, 3)]
        .iter()
        .map(|&(arrival, input, output)| RequestState { arrival, engine_arrival: arrival, input, output, ..Default::default() })
        .collect();
    inst.enqueue(0, &reqs);
    inst.enqueue(1, &reqs);
    let (mut now, draws, mut out, mut steps) = (0, AcceptanceDraws::new(0), StepOutcome::default(), Vec::new());
    let mut r2_in = false;
    while inst.has_work() || !r2_in {
        if !r2_in && now >= 1_500_000 {
            inst.enqueue(2, &reqs);
            r2_in = true;
        }
        assert!(steps.len() < 20 && inst.plan(&c, &mut reqs, now), "{steps:?}");
        steps.push(inst.planned());
        now += 1_000_000;
        inst.complete(&c, &mut reqs, now, &draws, &mut out);
    }
    steps
}

#[test]
fn overlapped_scheduling_makes_a_late_request_miss_the_planned_step() {
    // R2 arrives at 1.5 ms, while step 2 (1–2 ms) runs. A synchronous engine plans step 3 at
    // 2 ms and takes R2 in; an overlapping one planned step 3 while step 2 ran, from 1 ms, before
    // R2 arrived, so R2 enters at step 4.
    // Fails if the instance ignores `overlap_scheduling` (`seen_until` always `now` in
    // `Instance::plan`, tried): both traces are the synchronous one.
    let sync = late_arrival_trace(false);
    assert_eq!(sync[2], (vec![0, 1], vec![(2, 2)]));
    let overlap = late_arrival_trace(true);
    let want: Vec<Step> = vec![
        (vec![], vec![(0, 2), (1, 2)]),
        (vec![0, 1], vec![]),
        (vec![0, 1], vec![]),
        (vec![], vec![(2, 2)]),
        (vec![2], vec![]),
        (vec![2], vec![]),
    ];
    assert_eq!(overlap, want);
}

/// Steps of `Vllm` on a decode instance of a decode-only system (each request arrives with
/// its prompt's KV and first token) with 1 ms steps, until every request finished.
fn decode_only_trace(c: &InstanceConfig, lens: &[(u64, u64)]) -> (Vec<Step>, Vec<RequestState>) {
    let mut inst = Instance::with_scheduler(0, Role::Decode, c, Box::new(Vllm));
    let mut reqs: Requests = lens
        .iter()
        .map(|&(input, output)| RequestState { input, output, generated: 1, first_token: Some(0), ..Default::default() })
        .collect();
    for i in 0..reqs.issued() as u32 {
        inst.enqueue_transferred(i);
    }
    let (mut now, draws, mut out, mut steps) = (0, AcceptanceDraws::new(0), StepOutcome::default(), Vec::new());
    while inst.has_work() {
        assert!(steps.len() < 100 && inst.plan(c, &mut reqs, now), "{steps:?}");
        steps.push(inst.planned());
        now += 1_000_000;
        inst.complete(c, &mut reqs, now, &draws, &mut out);
    }
    (steps, reqs.into_vec())
}

#[test]
fn a_decode_instance_recomputes_its_preempted_requests_without_the_late_arrival_rule() {
    // A decode-only system's waiting queue holds only requests its decode instance preempted:
    // they were admitted before (their KV landed), so overlapped scheduling's late-arrival
    // rule does not hold them back, as on aggregated instances, though the prefill side never
    // set their `scheduled`.
    let mut c = cfg(64, 0.0, 8, 1);
    c.kv_blocks = 16;
    let lens = [(1, 3), (3, 8), (3, 8), (3, 8)];
    let (free, _) = decode_only_trace(&c, &lens);
    assert!(free.iter().any(|(_, chunks)| chunks.len() >= 2), "two recomputes in one step: {free:?}");
    c.overlap_scheduling = true;
    let (limited, reqs) = decode_only_trace(&c, &lens);
    assert_eq!(limited, free);
    assert!(reqs.iter().all(|r| r.generated == r.output && r.preemptions <= 1), "{reqs:?}");
}
