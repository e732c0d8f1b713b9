//! Scheduler behaviour with a fixed-latency cost model: exact step times and token counts.

use super::*;
use crate::cost::{FixedCost, StepCostModel};
use crate::workload::arrival::{ArrivalProcess, RequestFactory};
use crate::workload::Lengths;

fn cfg(budget: u64, concurrency: u64) -> SimConfig {
    SimConfig {
        instance: InstanceConfig::for_tests(budget, 0.15, concurrency, 4),
        instances: 1,
        role: Role::Mixed,
        run: RunParams::closed(concurrency),
    }
}

const MS: FixedCost = FixedCost { per_step_s: 1e-3, per_token_s: 0.0 };

fn burst(input: u64, output: u64) -> RequestFactory {
    RequestFactory::new(Lengths::Fixed(input), Lengths::Fixed(output), None, ArrivalProcess::Burst, 0)
}

fn run(c: &SimConfig, cost: &dyn StepCostModel, f: RequestFactory) -> (SimReport, Vec<RequestState>, Vec<StepRecord>) {
    let mut steps = Vec::new();
    let (r, reqs) = simulate_detailed(c, cost, f, &mut |s| steps.push(s)).unwrap();
    (r, reqs, steps)
}

fn ms(ns: Nanos) -> f64 {
    ns as f64 / 1e6
}

#[test]
fn chunked_prefill_schedules_whole_chunks_decode_first() {
    // Two requests of 5 prompt tokens, 2 output tokens, budget 3 (3.45 with slack → 3), 1 ms
    // per step. R1: chunks 3 and 2 (first token at 2 ms), decode at 3 ms. R2's 3-token chunk
    // never fits beside R1 (room 1, then 2), so it prefills at 4 and 5 ms and decodes at 6.
    let (rep, reqs, steps) = run(&cfg(3, 2), &MS, burst(5, 2));
    let shapes: Vec<(u64, u64, u64)> = steps.iter().map(|s| (s.prefill_tokens, s.decode_tokens, s.end / 1_000_000)).collect();
    assert_eq!(shapes, vec![(3, 0, 1), (2, 0, 2), (0, 1, 3), (3, 0, 4), (2, 0, 5), (0, 1, 6)]);
    assert_eq!(reqs.iter().map(|r| ms(r.first_token.unwrap())).collect::<Vec<_>>(), vec![2.0, 5.0]);
    assert_eq!(reqs.iter().map(|r| ms(r.finish.unwrap())).collect::<Vec<_>>(), vec![3.0, 6.0]);
    assert!((rep.latency.ttft.mean - 3.5).abs() < 1e-9);
    assert!((rep.latency.tpot_inter_token.mean - 1.0).abs() < 1e-9);
    // 4 output tokens over 6 ms.
    assert!((rep.output_throughput - 4.0 / 0.006).abs() < 1e-6);
}

#[test]
fn slack_lets_a_full_chunk_join_a_few_decodes() {
    // Budget 10 (11 with 15 % slack). Four 1-token prompts arrive with a 10-token prompt behind
    // them; they decode 2, 3, 4 and 5 tokens. The first step prefills the four (4 ≤ 11); the
    // 10-token chunk then waits while more than one decode runs (11 − 2 = 9 < 10) and joins the
    // step that has a single decode left (11 − 1 = 10). Mutation: drop the slack from the
    // chunk's room in the decode-first policy and it waits until no decode runs.
    let row = |input, output| crate::workload::arrival::TraceRequest {
        arrival_s: 0.0,
        input_tokens: input,
        output_tokens: output,
        prefix_group: None,
        prefix_len: 0,
    };
    let trace = crate::workload::arrival::Trace {
        source: "test".into(),
        ignored_columns: Vec::new(),
        format: Default::default(),
        time_scale: None,
        requests: vec![row(1, 2), row(1, 3), row(1, 4), row(1, 5), row(10, 2)],
    };
    let mut c = cfg(10, 5);
    c.run.num_requests = 5;
    let f = RequestFactory::new(Lengths::Fixed(1), Lengths::Fixed(1), None, ArrivalProcess::Trace(trace), 0);
    let (_, reqs, steps) = run(&c, &MS, f);
    assert_eq!(reqs.len(), 5);
    let shapes: Vec<(u64, u64)> = steps.iter().map(|s| (s.prefill_tokens, s.decode_seqs)).collect();
    assert_eq!(shapes[0], (4, 0), "{shapes:?}");
    let joined = shapes.iter().position(|&(p, _)| p == 10).expect("the 10-token chunk runs");
    assert_eq!(shapes[joined].1, 1, "it joins a step with one decode: {shapes:?}");
    assert!(shapes[1..joined].iter().all(|&(_, d)| d >= 2), "it waited while two or more decoded: {shapes:?}");
    let mut c = cfg(10, 2);
    c.instance.slack = 0.0;
    let f = RequestFactory::new(Lengths::Fixed(10), Lengths::Fixed(3), None, ArrivalProcess::Burst, 0);
    let (_, _, steps) = run(&c, &MS, f);
    // Without slack a 10-token chunk never shares a step with a decode: R2 waits until R1 is done.
    assert_eq!(
        steps.iter().map(|s| (s.prefill_tokens, s.decode_tokens)).collect::<Vec<_>>(),
        vec![(10, 0), (0, 1), (0, 1), (10, 0), (0, 1), (0, 1)]
    );
    let mut c = cfg(10, 2);
    c.instance.slack = 0.1;
    let f = RequestFactory::new(Lengths::Fixed(10), Lengths::Fixed(3), None, ArrivalProcess::Burst, 0);
    let (_, _, steps) = run(&c, &MS, f);
    // With 10 % slack (11 tokens) R2's chunk rides along R1's first decode.
    assert_eq!(steps.iter().map(|s| (s.prefill_tokens, s.decode_tokens)).collect::<Vec<_>>(), vec![(10, 0), (10, 1), (0, 2), (0, 1)]);
}

#[test]
fn step_time_follows_the_cost_model_on_the_actual_batch() {
    // 1 ms per step + 0.1 ms per token: a 3-token prefill step takes 1.3 ms.
    let cost = FixedCost { per_step_s: 1e-3, per_token_s: 1e-4 };
    let (_, reqs, steps) = run(&cfg(8, 1), &cost, burst(3, 3));
    assert_eq!(steps.iter().map(|s| s.end - s.start).collect::<Vec<_>>(), vec![1_300_000, 1_100_000, 1_100_000]);
    assert_eq!(reqs[0].finish, Some(3_500_000));
}

#[test]
fn preemption_recomputes_the_newest_request() {
    // 3 blocks of 4 tokens. Two requests of 4 prompt + 4 output tokens each need 2 blocks at
    // the end; both are admitted (1 block each), then decode growth exhausts the pool and the
    // newest is preempted, recomputed later, and still finishes with all its tokens.
    let mut c = cfg(16, 2);
    c.instance.kv_blocks = 3;
    let (rep, reqs, _) = run(&c, &MS, burst(4, 4));
    assert!(rep.preemptions >= 1);
    assert_eq!(reqs[1].preemptions, 1);
    assert_eq!(reqs[0].preemptions, 0);
    for r in &reqs {
        assert_eq!(r.generated, 4);
        assert!(r.finish.is_some());
    }
    assert!(rep.kv_peak_utilization <= 1.0);
}

#[test]
fn preemption_on_a_decode_instance_recomputes_the_context() {
    // A decode-only instance of 3 blocks of 4 tokens; two requests arrive with 3 prompt tokens
    // and their first token (4 tokens: one block each) and decode 5 tokens. Their first decode
    // needs a block each, one is free: the newest is preempted. Its KV is gone, so it comes
    // back as a prefill of its prompt and the token it had generated (3 + 1), on this instance,
    // before it decodes again — not as a free re-admission of its full context. Every token
    // it owes is recomputed: Σ prefill tokens = Σ preemptions × prompt + generated then.
    // Mutation: in `Instance::preempt_newest`, queue a decode instance's victim on `landed`
    // (`self.landed.push_front((req, 0))`, the old behaviour) instead of the waiting queue: it
    // is re-admitted with its context and no step prefills.
    let mut c = cfg(16, 2);
    c.role = Role::Decode;
    c.instance.kv_blocks = 3;
    let (rep, reqs, steps) = run(&c, &MS, burst(3, 5));
    assert!(rep.preemptions >= 1);
    let recomputed: u64 = steps.iter().map(|s| s.prefill_tokens).sum();
    let owed: u64 = reqs.iter().map(|r| r.preemptions as u64 * r.input + r.generated_at_preemptions).sum();
    assert!(reqs.iter().all(|r| r.preempted_in_prefill == 0));
    // R1 is preempted after its first token (recompute 3 + 1 into one block beside R0's two)
    // and again when its recomputed context needs a second block (3 + 2).
    assert_eq!((reqs[0].preemptions, reqs[1].preemptions, reqs[1].generated_at_preemptions), (0, 2, 3), "{:?}", reqs[1]);
    assert_eq!(recomputed, owed);
    assert_eq!(recomputed, 9);
    for r in &reqs {
        assert_eq!(r.generated, 5);
        assert!(r.finish.is_some());
    }
}

#[test]
fn mtp_emits_accepted_drafts() {
    // Acceptance 1.0 for one draft: each decode step yields 2 tokens. Output 5 = 1 (prefill)
    // + 2 + 2 → two decode steps.
    let mut c = cfg(8, 1);
    c.instance.decode = DecodeMode::mtp(1, &[1.0]);
    let (_, reqs, steps) = run(&c, &MS, burst(2, 5));
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[1].decode_tokens, 2, "decode queries 1 + 1 draft");
    assert_eq!(reqs[0].finish, Some(3_000_000));
    // Acceptance 0: one token per step → 4 decode steps.
    c.instance.decode = DecodeMode::mtp(1, &[0.0]);
    let (_, _, steps) = run(&c, &MS, burst(2, 5));
    assert_eq!(steps.len(), 5);
}

#[test]
fn speculative_acceptance_is_common_to_every_batch_size() {
    // MTP with two drafts (0.7, 0.5), 1 ms per step whatever the batch: a request's decode
    // time is its number of decode steps, which only its own acceptance draws decide. Run as
    // a benchmark of 24 requests at concurrency 2 and 8, request i decodes in the same time in
    // both: the draws belong to (request, output position), not to the order the decode set
    // is walked (common random numbers across the probes of a candidate).
    // Mutation: pass the member's index `i as u32` instead of `s.req` to `draw_accepted` in
    // `Instance::complete_walked_decodes`: the draws follow the walk order and the times
    // differ between the two batch sizes.
    let decode_ms = |conc: u64| {
        let mut c = cfg(64, conc);
        c.instance.decode = DecodeMode::mtp(2, &[0.7, 0.5]);
        c.run.closed_requests = Some(24);
        c.run.seed = 5;
        let f = RequestFactory::new(Lengths::Fixed(8), Lengths::Fixed(40), None, ArrivalProcess::Closed, 5);
        let (_, reqs, _) = run(&c, &MS, f);
        assert!(reqs.iter().all(|r| r.preemptions == 0));
        reqs.iter().map(|r| ms(r.finish.unwrap() - r.first_token.unwrap())).collect::<Vec<_>>()
    };
    let (a, b) = (decode_ms(2), decode_ms(8));
    assert_eq!(a, b);
    assert!(a.iter().any(|&t| t != a[0]), "acceptance varies by request: {a:?}");
}

#[test]
fn acceptance_draws_have_the_planned_means() {
    // The hashed uniforms give each mode its expected acceptance: MTP (0.8, 0.5) accepts
    // 1.3 drafts per step on average, blocks of 4 drafts at a mean of 2 accept 2, and a
    // block's drafts are independent (exactly 2 of 4 with probability 6/16).
    // Mutation: drop the draft index from the key in `AcceptanceDraws::uniform`: a block's
    // drafts share one uniform (all or none accepted; the mean holds, the spread does not).
    let d = AcceptanceDraws::new(11);
    let mean = |mode: &DecodeMode| {
        let n: u64 = (0..200u32).flat_map(|r| (0..500u64).map(move |p| (r, p))).map(|(r, p)| mode.draw_accepted(&d, r, p)).sum();
        n as f64 / 100_000.0
    };
    let mtp = mean(&DecodeMode::mtp(2, &[0.8, 0.5]));
    assert!((mtp - 1.3).abs() < 0.01, "{mtp}");
    let block = DecodeMode::Block { block: 5, drafts: 4, mean_accepted: 2.0 };
    let m = mean(&block);
    assert!((m - 2.0).abs() < 0.02, "{m}");
    let two = (0..100_000u64).filter(|&p| block.draw_accepted(&d, 1, p) == 2).count() as f64 / 100_000.0;
    assert!((two - 0.375).abs() < 0.01, "{two}");
}

#[test]
fn closed_loop_keeps_concurrency_and_converges() {
    let c = cfg(64, 8);
    let f = RequestFactory::new(Lengths::Fixed(16), Lengths::Fixed(32), None, ArrivalProcess::Closed, 0);
    let (rep, _, steps) = run(&c, &MS, f);
    assert!(rep.converged);
    // In steady state every step serves the 8 requests in flight.
    let tail = &steps[steps.len() / 2..];
    assert!(tail.iter().all(|s| s.prefill_seqs + s.decode_seqs == 8), "{:?}", &tail[..4]);
    // 8 tokens per 1 ms step.
    assert!((rep.output_throughput - 8000.0).abs() / 8000.0 < 0.05, "{}", rep.output_throughput);
}

#[test]
fn kv_smaller_than_one_request_is_a_typed_error() {
    let mut c = cfg(16, 1);
    c.instance.kv_blocks = 2;
    let e = simulate(&c, &MS, burst(8, 8)).unwrap_err();
    assert_eq!(e, SimError::KvTooSmall { needed: 5, capacity: 2, block_size: 4, tokens: 17 });
    c.instance.kv_blocks = 0;
    assert_eq!(simulate(&c, &MS, burst(8, 8)).unwrap_err(), SimError::NoKvCapacity);
}

#[test]
fn prefix_cache_shares_blocks_and_skips_prefill() {
    // Two groups... one group: the second request reuses the first's 8-token prefix (2 blocks).
    let mut c = cfg(64, 1);
    c.instance.max_num_seqs = 1;
    let shared = crate::workload::arrival::SharedPrefix { groups: 1, length: 8 };
    let f = RequestFactory::new(Lengths::Fixed(12), Lengths::Fixed(2), Some(shared), ArrivalProcess::Closed, 0);
    let mut steps = Vec::new();
    let _ = simulate_detailed(&c, &MS, f, &mut |s| steps.push(s)).unwrap();
    // The first prompt computes all 12 tokens, later ones only the 4 after the cached prefix.
    assert_eq!(steps[0].prefill_tokens, 12);
    assert!(steps.iter().skip(2).filter(|s| s.prefill_seqs > 0).all(|s| s.prefill_tokens == 4));
    // Token-level hit rate: half of each prompt is served from the cache.
    let mut c = cfg(64, 1);
    c.instance.prefix_hit_rate = 0.5;
    let (_, _, steps) = run(&c, &MS, burst(12, 2));
    assert_eq!(steps[0].prefill_tokens, 6);
}

fn poisson(rate: f64, input: u64, output: u64) -> RequestFactory {
    RequestFactory::new(Lengths::Fixed(input), Lengths::Fixed(output), None, ArrivalProcess::Poisson { rate }, 7)
}

#[test]
fn open_loop_below_capacity_delivers_the_offered_rate_in_a_steady_window() {
    // 8 running sequences, 1 ms per step: at most 8 tokens/ms, about 400 requests/s of 20
    // tokens. At 100 req/s the system keeps up, so the steady window sees the offered rate.
    let mut c = cfg(64, 8);
    c.run.num_requests = 2000;
    let (rep, _, _) = run(&c, &MS, poisson(100.0, 4, 20));
    assert!(rep.converged, "a 20 s run of 21 ms requests has a steady window");
    assert!((rep.request_rate - 100.0).abs() < 5.0, "delivered {} req/s", rep.request_rate);
    assert!((rep.output_throughput - 2000.0).abs() < 100.0, "{} tokens/s", rep.output_throughput);
    // The edges (10 % each side) are left out of the latencies.
    assert_eq!(rep.measured, 1600);
}

#[test]
fn open_loop_above_capacity_delivers_only_the_capacity() {
    let mut c = cfg(64, 8);
    c.run.num_requests = 2000;
    let (rep, _, _) = run(&c, &MS, poisson(1000.0, 4, 20));
    // 8 tokens per 1 ms step at most, i.e. 400 requests/s of 20 tokens.
    assert!(rep.request_rate < 410.0 && rep.request_rate > 300.0, "delivered {} req/s", rep.request_rate);
    assert!(rep.latency.ttft.mean > 100.0, "the queue grows: TTFT {} ms", rep.latency.ttft.mean);
}

#[test]
fn open_loop_shorter_than_a_request_lifetime_is_not_steady() {
    // 10 arrivals in about 0.1 s, each living about 0.5 s: no steady state to measure.
    let mut c = cfg(64, 8);
    c.run.num_requests = 10;
    let (rep, _, _) = run(&c, &MS, poisson(100.0, 4, 500));
    assert!(!rep.converged);
    assert_eq!(rep.measured, 8, "one request left out at each end");
}

fn closed(input: u64, output: u64) -> RequestFactory {
    RequestFactory::new(Lengths::Fixed(input), Lengths::Fixed(output), None, ArrivalProcess::Closed, 0)
}

/// Step time grows with the tokens in the step, so a first wave that prefills together waits
/// behind its own prompts.
const PER_TOKEN: FixedCost = FixedCost { per_step_s: 1e-3, per_token_s: 1e-5 };

#[test]
fn benchmark_closed_loop_counts_the_first_wave_and_approaches_steady_state() {
    // 16 clients, 2000-token prompts, 64 output tokens, budget 2048: the first wave of 16
    // prompts queues behind itself (one prefill per ~21 ms step), later requests arrive spread
    // out and wait less. A benchmark run of N = 10 C requests averages over all of them, the
    // first wave included, so its TTFT is well above that of a long run; as N grows the first
    // wave's share shrinks and the mean TTFT settles at the loop's steady state.
    // Mutation: count only the requests after the first wave in benchmark runs (`measure`):
    // the first wave's excess disappears and TTFT no longer falls with N.
    let mut c = cfg(2048, 16);
    c.instance.kv_blocks = 20_000;
    let mut ttft = Vec::new();
    for n in [160, 640, 2560, 10240] {
        c.run.closed_requests = Some(n);
        let (rep, reqs, _) = run(&c, &PER_TOKEN, closed(2000, 64));
        assert_eq!(rep.measured, n, "every request of the run is measured");
        assert_eq!(reqs.len() as u64, n, "exactly N requests are sent");
        ttft.push(rep.latency.ttft.mean);
    }
    let steady = ttft[3];
    assert!(ttft[0] > 1.2 * steady, "10 C includes the first wave: {ttft:?}");
    assert!(ttft[0] > ttft[1] && ttft[1] > ttft[2], "the first wave's weight falls with N: {ttft:?}");
    assert!((ttft[2] - steady).abs() < (ttft[0] - steady).abs() / 4.0, "160 C is close to the steady state: {ttft:?}");
}

#[test]
fn benchmark_requests_are_not_released_in_lockstep() {
    // Identical requests sent "together" by a benchmark client reach the engine spread over
    // CLIENT_JITTER_NS, so the first wave does not form one admission decision and TTFTs
    // differ (p50 < max). Mutation: return `t` unchanged from `client_send` and every request
    // of the first wave gets the same arrival time.
    let mut c = cfg(4096, 4);
    c.run.closed_requests = Some(40);
    let (_, reqs, _) = run(&c, &PER_TOKEN, closed(1000, 16));
    let first: Vec<Nanos> = reqs.iter().take(4).map(|r| r.arrival).collect();
    assert!(first.iter().all(|&a| a < CLIENT_JITTER_NS), "{first:?}");
    let distinct: std::collections::BTreeSet<Nanos> = first.iter().copied().collect();
    assert_eq!(distinct.len(), 4, "arrivals are staggered: {first:?}");
}

#[test]
fn names_with_hyphens_parse_in_both_spellings() {
    // Mutation: compare the user's normalised text with the raw name in `parse_choice` and
    // "round-robin" / "whole-run" stop parsing (as they once did).
    use crate::quant::NamedEnum;
    assert_eq!(Routing::parse_choice("round-robin").unwrap(), Routing::RoundRobin);
    assert_eq!(Routing::parse_choice("Least_Loaded").unwrap(), Routing::LeastLoaded);
    assert_eq!(Measure::parse_choice("whole-run").unwrap(), Measure::WholeRun);
    assert!(Measure::parse_choice("whole").is_err());
}

#[test]
fn itl_and_kv_use_cover_the_measurement_window() {
    // A closed loop of fixed lengths: every request has the same number of gaps, so over the
    // stopping rule's window the mean ITL (over gaps) equals the mean inter-token TPOT (over
    // requests). The warm-up, where the first wave prefills together and its decodes stall
    // behind 16 prompts, is not in either. Mutation: record ITL on every step in `step_done`
    // (as before the fix) and the warm-up's stalls lift the ITL mean above the TPOT.
    let mut c = cfg(2048, 16);
    c.instance.kv_blocks = 20_000;
    let (rep, _, _) = run(&c, &PER_TOKEN, closed(2000, 64));
    let (itl, tpot) = (rep.latency.itl.mean, rep.latency.tpot_inter_token.mean);
    assert!((itl - tpot).abs() < 0.01 * tpot, "ITL mean {itl} ms against TPOT {tpot} ms");
    // KV use is read over the same window (a time average, so at most the run's peak).
    assert!(rep.kv_utilization > 0.0 && rep.kv_utilization <= rep.kv_peak_utilization + 1e-12);
}

#[test]
fn reports_do_not_depend_on_keeping_the_records() {
    // A run that drops its finished requests' records (`simulate`) reports exactly what one
    // keeping them all reports, for an open loop of variable lengths with bins and for a
    // benchmark-run closed loop, each long enough for records to be dropped. Mutation: drain
    // the front in `Requests::drop_before` without moving `base`, and the folded records are
    // the wrong ones (or an index falls outside).
    let d = crate::workload::LengthDistribution::builtin();
    let mut c = cfg(8192, 64);
    c.instance.kv_blocks = 1 << 20;
    c.instances = 2;
    c.run.num_requests = 12_000;
    c.run.bins = d.bins.iter().map(|b| (b.min_tokens, b.max_tokens)).collect();
    let open =
        || RequestFactory::new(Lengths::Distribution(d.clone()), Lengths::Fixed(20), None, ArrivalProcess::Poisson { rate: 400.0 }, 3);
    let (kept, reqs) = simulate_detailed(&c, &PER_TOKEN, open(), &mut |_| {}).unwrap();
    assert_eq!(reqs.len(), 12_000);
    assert_eq!(simulate(&c, &PER_TOKEN, open()).unwrap(), kept);
    assert!(kept.measured > 9_000 && !kept.bins.is_empty(), "{} measured", kept.measured);
    c.run.closed_requests = Some(9_000);
    let bench = || RequestFactory::new(Lengths::Fixed(30), Lengths::Fixed(20), None, ArrivalProcess::Closed, 3);
    let (kept, _) = simulate_detailed(&c, &PER_TOKEN, bench(), &mut |_| {}).unwrap();
    assert_eq!(simulate(&c, &PER_TOKEN, bench()).unwrap(), kept);
    assert_eq!(kept.measured, 9_000);
}

#[test]
fn itl_is_the_measured_requests_gaps_between_their_tokens() {
    // Issue 24: ITL was every step's gap in a time window, TPOT the measured requests'. Two
    // requests of 4 prompt and 3 output tokens, a 5-token budget (whole prompts), 1 ms per
    // step + 0.1 ms per token. Steps: R0's prompt (1.4 ms: R0's first token at 1.4), R0's
    // decode beside R1's prompt (1.5 ms: 2.9, R1's first token), both decoding (1.2 ms: 4.1,
    // R0's last), R1's last decode (1.1 ms: 5.2). Gaps: R0 1.5, 1.2; R1 1.2, 1.1: Σ (output −
    // 1) = 4 gaps, mean 1.25 ms, the largest 1.5 ms.
    // Mutation: drop a segment's `start` token in `record_gaps` and each request loses the gap
    // after its first token (2 gaps, mean 1.15 ms).
    let (rep, reqs, steps) = run(&cfg(5, 2), &FixedCost { per_step_s: 1e-3, per_token_s: 1e-4 }, burst(4, 3));
    let ends: Vec<f64> = steps.iter().map(|s| ms(s.end)).collect();
    assert_eq!(ends.len(), 4, "{ends:?}");
    for (a, b) in ends.iter().zip([1.4, 2.9, 4.1, 5.2]) {
        assert!((a - b).abs() < 1e-9, "{ends:?}");
    }
    assert_eq!(reqs.iter().map(|r| r.first_token.map(ms)).collect::<Vec<_>>(), vec![Some(1.4), Some(2.9)]);
    let itl = &rep.latency.itl;
    assert_eq!(itl.count, 4);
    assert!((itl.mean - 1.25).abs() < 1e-3 && (itl.p99 - 1.5).abs() < 2e-3, "{itl:?}");
}

#[test]
fn itl_counts_every_measured_gap_and_spans_a_preemption() {
    // The preemption case above: the preempted request's gaps still number output − 1 and add
    // up to its finish − first token (one gap spans its recompute); ITL counts Σ (output − 1).
    let mut c = cfg(16, 2);
    c.instance.kv_blocks = 3;
    let (rep, reqs, _) = run(&c, &MS, burst(4, 4));
    assert_eq!(reqs[1].preemptions, 1);
    assert_eq!(rep.latency.itl.count, 2 * 3);
    let span: f64 = reqs.iter().map(|r| ms(r.finish.unwrap() - r.first_token.unwrap())).sum();
    assert!((rep.latency.itl.mean * 6.0 - span).abs() < 1e-2, "{:?} against {span} ms", rep.latency.itl);
}

#[test]
fn an_slo_check_stops_with_its_last_measured_request() {
    // 10 requests, one every 10 ms, 4 prompt tokens and 3 output tokens, 1 ms a step: each
    // prefills in one step (first token 1 ms after arrival) and decodes in two (TPOT 1 ms),
    // alone. The edges leave out request 0 and request 9, so a check stops when request 8
    // finishes: 27 steps instead of 30, 9 requests completed, and the same latencies.
    // Mutation: stop once `folded >= open_marks.1` (request 8 not yet folded) and 7 requests
    // are measured, with 24 steps; drop the steady-window condition and a whole-run
    // measurement stops early too (its 10 measured requests drop to 9).
    let constant = || RequestFactory::new(Lengths::Fixed(4), Lengths::Fixed(3), None, ArrivalProcess::Constant { rate: 100.0 }, 0);
    let mut c = cfg(64, 8);
    c.run.num_requests = 10;
    let (full, _, _) = run(&c, &MS, constant());
    c.run.stop_once_measured = true;
    let (check, _, _) = run(&c, &MS, constant());
    assert_eq!((full.steps, full.completed, full.measured), (30, 10, 8));
    assert_eq!((check.steps, check.completed, check.measured), (27, 9, 8));
    assert_eq!((check.latency.ttft.mean, check.latency.tpot_inter_token.mean), (1.0, 1.0));
    assert_eq!(check.latency.ttft, full.latency.ttft);
    assert_eq!(check.latency.tpot_inter_token, full.latency.tpot_inter_token);
    // A whole-run measurement counts every request: nothing to stop for.
    c.run.measure = Measure::WholeRun;
    let (whole, _, _) = run(&c, &MS, constant());
    assert_eq!((whole.steps, whole.completed, whole.measured), (30, 10, 10));
}
