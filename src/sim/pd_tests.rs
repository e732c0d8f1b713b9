//! P/D systems with a fixed-latency cost model: the hand-off's timing (TTFT from the decode
//! side, the KV held on the prefill side until the pull lands, transfers sharing the link,
//! routing that counts transfers), step by step.

use super::*;
use crate::cost::FixedCost;
use crate::workload::arrival::{ArrivalProcess, RequestFactory};
use crate::workload::Lengths;

/// 1 ms per step, whatever the batch.
const MS: FixedCost = FixedCost { per_step_s: 1e-3, per_token_s: 0.0 };

fn ms(ns: Nanos) -> f64 {
    ns as f64 / 1e6
}

/// A prefill group and a decode group joined by a link: budget 64, 4 running sequences,
/// blocks of 4 tokens; a link of 1000 bytes/s effective with 2 ms latency, 10 bytes of KV per
/// prompt token (8 tokens: 80 ms of data).
fn pd_system(cost: &FixedCost, p: u32, d: u32) -> System<'_> {
    let inst = InstanceConfig::for_tests(64, 0.15, 4, 4);
    System {
        groups: vec![
            Group { role: Role::Prefill, count: p, cfg: inst.clone(), cost, pipeline: None },
            Group { role: Role::Decode, count: d, cfg: inst, cost, pipeline: None },
        ],
        transfer: Some(KvTransfer {
            bytes_per_token: 10.0,
            link: crate::hardware::Link { bandwidth: crate::units::Bandwidth::gb_s(1e-6), latency_us: 2000.0, efficiency: 1.0 },
        }),
        routing: Routing::LeastLoaded,
        run: RunParams::closed(1),
    }
}

fn burst(input: u64, output: u64) -> RequestFactory {
    RequestFactory::new(Lengths::Fixed(input), Lengths::Fixed(output), None, ArrivalProcess::Burst, 0)
}

fn run(sys: &System, f: RequestFactory) -> (SimReport, Vec<RequestState>, Vec<StepRecord>) {
    let mut steps = Vec::new();
    let (rep, reqs) = simulate_system(sys, f, &mut |s| steps.push(s)).unwrap();
    (rep, reqs, steps)
}

#[test]
fn a_slow_link_delays_the_first_token() {
    // One request: 8 prompt tokens, 3 output tokens. The prefill step ends at 1 ms; the decode
    // instance allocates the KV and pulls it: 2 ms latency + 80 bytes at 1000 B/s = 82 ms, so
    // it lands at 83 ms; the first decode step (83–84 ms) emits the first token, two more
    // steps the rest: TTFT 84 ms, TPOT 1 ms, finish at 86 ms.
    // Mutation: set `first_token` when the prompt completes on the prefill instance (the old
    // rule): TTFT 1 ms, and the transfer moves into TPOT (42.5 ms).
    let sys = pd_system(&MS, 1, 1);
    let (rep, reqs, steps) = run(&sys, burst(8, 3));
    let r = &reqs[0];
    assert_eq!(r.decode_admitted, Some(83_000_000));
    assert_eq!(r.first_token, Some(84_000_000));
    assert_eq!(r.finish, Some(86_000_000));
    assert_eq!(r.generated, 3);
    assert_eq!(
        steps.iter().map(|s| (s.instance, s.start / 1_000_000, s.decode_seqs)).collect::<Vec<_>>(),
        vec![(0, 0, 0), (1, 83, 1), (1, 84, 1), (1, 85, 1)]
    );
    assert!((rep.latency.ttft.mean - 84.0).abs() < 1e-9);
    assert!((rep.latency.tpot_inter_token.mean - 1.0).abs() < 1e-9);
    // A ten times faster link: TTFT 1 + 2 + 8 + 1 = 12 ms.
    let mut fast = pd_system(&MS, 1, 1);
    fast.transfer.as_mut().unwrap().link.bandwidth = crate::units::Bandwidth::gb_s(1e-5);
    let (rep, _, _) = run(&fast, burst(8, 3));
    assert!((rep.latency.ttft.mean - 12.0).abs() < 1e-9, "{}", rep.latency.ttft.mean);
}

#[test]
fn concurrent_transfers_share_the_prefill_link() {
    // Two requests prefill in one step (ends at 1 ms) and go to two decode instances: their
    // pulls leave the same prefill instance together, so each moves at half the link's speed
    // and lands at 1 + 2 + 160 = 163 ms (first tokens at 164 ms), not 83 ms.
    // Mutation: give every transfer the whole link in `SharedLink::reshare` (share 1).
    let mut sys = pd_system(&MS, 1, 2);
    sys.run.concurrency = 2;
    let (_, reqs, _) = run(&sys, burst(8, 3));
    assert_eq!(reqs.iter().map(|r| r.instance).collect::<Vec<_>>(), vec![1, 2], "one per decode instance");
    assert_eq!(reqs.iter().map(|r| ms(r.first_token.unwrap())).collect::<Vec<_>>(), vec![164.0, 164.0]);
}

#[test]
fn the_prefill_instance_holds_the_kv_until_the_pull_lands() {
    // The prefill pool holds 3 blocks of 4 tokens: one 8-token prompt (2 blocks) at a time.
    // R0 is prefilled in 0–1 ms and handed off; its blocks stay held until its pull lands at
    // 83 ms, so R1 (waiting since 0) is admitted only then.
    // Mutation: release the blocks at hand-off (`self.release(slot)` instead of
    // `self.hand_off(slot)` in `Instance::complete`): R1 is admitted at 1 ms.
    let mut sys = pd_system(&MS, 1, 1);
    sys.groups[0].cfg.kv_blocks = 3;
    sys.run.concurrency = 2;
    let (rep, reqs, _) = run(&sys, burst(8, 3));
    assert_eq!(reqs[0].scheduled, Some(0));
    assert_eq!(reqs[1].scheduled, Some(83_000_000));
    assert_eq!(rep.kv_held_at_end, 0, "every block comes back");
}

#[test]
fn decode_saturation_raises_ttft_not_tpot() {
    // Eight requests prefilled together, a fast link (2 ms + 0.08 ms). One decode instance that
    // runs one sequence at a time pulls one request's KV at a time: the others wait on the
    // decode side, and that wait is time to their first token. Their decode cadence stays
    // 1 ms per token. With room for all eight, nobody waits.
    // Mutation: count the wait in TPOT by setting `first_token` at hand-off (the old rule):
    // TTFT is 1 ms in both runs and TPOT grows instead.
    let mut sys = pd_system(&MS, 1, 1);
    sys.transfer.as_mut().unwrap().link.bandwidth = crate::units::Bandwidth::gb_s(1e-3);
    sys.run.concurrency = 8;
    for g in &mut sys.groups {
        g.cfg.max_num_seqs = 8;
    }
    let (roomy, _, _) = run(&sys, burst(8, 3));
    sys.groups[1].cfg.max_num_seqs = 1;
    let (tight, _, _) = run(&sys, burst(8, 3));
    let (t_roomy, t_tight) = (roomy.latency.ttft.mean, tight.latency.ttft.mean);
    assert!(t_tight > 2.0 * t_roomy, "TTFT {t_tight} vs {t_roomy}");
    assert!((tight.latency.tpot_inter_token.mean - 1.0).abs() < 1e-9, "{}", tight.latency.tpot_inter_token.mean);
    assert!((roomy.latency.tpot_inter_token.mean - 1.0).abs() < 1e-9, "{}", roomy.latency.tpot_inter_token.mean);
}

#[test]
fn routing_counts_transfers_headed_to_a_decode_instance() {
    // Four requests prefilled together are routed at once, before any KV lands: the
    // least-loaded router sees each transfer it already sent and spreads them 2 + 2.
    // Mutation: drop `self.load += 1` from `Instance::hand_to`: all four go to instance 1.
    let mut sys = pd_system(&MS, 1, 2);
    sys.run.concurrency = 4;
    let (_, reqs, _) = run(&sys, burst(8, 3));
    let mut per = [0u32; 3];
    for r in &reqs {
        per[r.instance as usize] += 1;
    }
    assert_eq!(per, [0, 2, 2]);
}

#[test]
fn routing_spreads_requests_over_decode_instances() {
    let f = || RequestFactory::new(Lengths::Fixed(4), Lengths::Fixed(4), None, ArrivalProcess::Poisson { rate: 2000.0 }, 3);
    for routing in [Routing::LeastLoaded, Routing::RoundRobin] {
        let mut sys = pd_system(&MS, 1, 3);
        sys.routing = routing;
        sys.run.num_requests = 30;
        let (_, reqs) = simulate_system(&sys, f(), &mut |_| {}).unwrap();
        let mut per = [0u32; 4];
        for r in &reqs {
            per[r.instance as usize] += 1;
        }
        assert_eq!(per[0], 0, "every request ends on a decode instance");
        assert!(per[1..].iter().all(|&n| n >= 5), "{routing:?}: {per:?}");
    }
}
