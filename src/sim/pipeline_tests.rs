//! Pipelined replicas with a fixed-latency cost model: the schedule's timing by hand (S stages
//! each taking t: a lone batch takes S × t, S batches in flight finish one every t), the send
//! between stages, and one stage equal to today's instance.

use super::*;
use crate::cost::pipeline::StageSend;
use crate::cost::FixedCost;
use crate::workload::arrival::{ArrivalProcess, RequestFactory};
use crate::workload::Lengths;

/// 2 ms per stage, whatever the batch.
const T: FixedCost = FixedCost { per_step_s: 2e-3, per_token_s: 0.0 };
const T_NS: Nanos = 2_000_000;

fn cfg(concurrency: u64) -> SimConfig {
    SimConfig { instance: InstanceConfig::for_tests(64, 0.0, 16, 4), instances: 1, role: Role::Mixed, run: RunParams::closed(concurrency) }
}

fn burst(input: u64, output: u64) -> RequestFactory {
    RequestFactory::new(Lengths::Fixed(input), Lengths::Fixed(output), None, ArrivalProcess::Burst, 0)
}

fn pipeline(stages: usize, send: StageSend) -> Pipeline<'static> {
    Pipeline { stages: vec![&T as &dyn crate::cost::StepCostModel; stages], send }
}

fn steps_of(c: &SimConfig, p: Option<Pipeline>, f: RequestFactory) -> (Vec<StepRecord>, Vec<RequestState>) {
    let mut steps = Vec::new();
    let (_, reqs) = simulate_detailed_staged(c, &T, p, f, &mut |s| steps.push(s)).unwrap();
    (steps, reqs)
}

#[test]
fn a_lone_batch_takes_every_stage_in_turn() {
    // One request (4-token prompt, 5 output tokens) on 4 stages of 2 ms: each of its 5 steps
    // (a prefill, then 4 decodes) takes 4 × 2 = 8 ms, so it finishes at 40 ms.
    // Mutation: run the batch through the first stage only (`Stages::run` returning after
    // k = 0) and each step reads 2 ms.
    let mut c = cfg(1);
    c.run.num_requests = 1;
    let (steps, reqs) = steps_of(&c, Some(pipeline(4, StageSend::NONE)), burst(4, 5));
    assert_eq!(steps.len(), 5);
    assert!(steps.iter().all(|s| s.end - s.start == 4 * T_NS), "{steps:?}");
    assert_eq!(reqs[0].finish, Some(5 * 4 * T_NS));
}

#[test]
fn sends_between_stages_add_to_a_batch() {
    // The same lone request with a 1 ms + 0.5 ms per token send: three hand-overs per step. Its
    // prefill step (4 tokens: 3 ms a send) takes 8 + 9 = 17 ms, each decode (1 token: 1.5 ms)
    // 8 + 4.5 = 12.5 ms. Mutation: send after the last stage as well and these read 20 and 14.
    let mut c = cfg(1);
    c.run.num_requests = 1;
    let send = StageSend { fixed_s: 1e-3, per_token_s: 0.5e-3 };
    let (steps, _) = steps_of(&c, Some(pipeline(4, send)), burst(4, 3));
    let took: Vec<Nanos> = steps.iter().map(|s| s.end - s.start).collect();
    assert_eq!(took, vec![17_000_000, 12_500_000, 12_500_000]);
}

#[test]
fn s_batches_in_flight_finish_one_every_stage_time() {
    // Four requests on 4 stages: one per lane. Every lane's step still takes 4 × 2 ms once the
    // pipeline is full, and steps end 2 ms apart (the steady step interval is t): the stages
    // work on four batches at once. The first wave queues behind one another at the first
    // stage (lane k's first batch waits k × 2 ms).
    // Mutation: let a lane's batch enter a stage that another batch holds (drop the
    // `max(*free)`) and the ends bunch up at 8 ms apart.
    let mut c = cfg(4);
    c.run.num_requests = 4;
    let (steps, reqs) = steps_of(&c, Some(pipeline(4, StageSend::NONE)), burst(4, 9));
    let mut ends: Vec<Nanos> = steps.iter().map(|s| s.end).collect();
    ends.sort_unstable();
    let steady = &ends[4..ends.len() - 4];
    assert!(steady.windows(2).all(|w| w[1] - w[0] == T_NS), "{ends:?}");
    assert!(steps[4..].iter().all(|s| s.end - s.start == 4 * T_NS), "{steps:?}");
    // Each request decodes alone in its lane: nine steps of 8 ms after its first wait.
    let mut finish: Vec<Nanos> = reqs.iter().map(|r| r.finish.unwrap()).collect();
    finish.sort_unstable();
    assert_eq!(finish, vec![72_000_000, 74_000_000, 76_000_000, 78_000_000]);
}

#[test]
fn fewer_ready_batches_leave_bubbles() {
    // Two requests on 4 stages: two lanes work, two stages idle at any time. Each request
    // still steps every 8 ms (the pipeline's latency), not every 2 ms × its share.
    // Mutation: make a lane's step the steady interval (t) instead of its pass through the
    // stages and the finishes read 18 and 20 ms.
    let mut c = cfg(2);
    c.run.num_requests = 2;
    let (_, reqs) = steps_of(&c, Some(pipeline(4, StageSend::NONE)), burst(4, 9));
    let mut finish: Vec<Nanos> = reqs.iter().map(|r| r.finish.unwrap()).collect();
    finish.sort_unstable();
    assert_eq!(finish, vec![72_000_000, 74_000_000]);
}

#[test]
fn one_stage_is_the_plain_instance() {
    // A pipeline of one stage with no send runs as the instance without one: the same steps at
    // the same times. Mutation: add a send after every stage and the ends differ.
    let c = cfg(3);
    let (plain, _) = steps_of(&c, None, burst(6, 7));
    let (staged, _) = steps_of(&c, Some(pipeline(1, StageSend::NONE)), burst(6, 7));
    let key = |s: &StepRecord| (s.start, s.end, s.prefill_tokens, s.decode_seqs);
    assert_eq!(plain.iter().map(key).collect::<Vec<_>>(), staged.iter().map(key).collect::<Vec<_>>());
}
