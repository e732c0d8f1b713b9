//! Properties of the simulator over random small workloads, each checked against quantities
//! counted independently of the request records it checks: output tokens counted as the steps
//! emit them add up to the requests' output lengths; prefill tokens the steps computed add up to
//! the uncached prompt tokens plus the recomputed ones; KV blocks in use never exceed capacity
//! and return to zero; each request's events are ordered; simulated time never goes backwards;
//! the same seed gives the same result. Each property names the mutation that breaks it.

use super::*;
use crate::cost::FixedCost;
use crate::workload::arrival::{ArrivalProcess, RequestFactory, SharedPrefix};
use crate::workload::Lengths;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    cfg: SimConfig,
    input: u64,
    output: u64,
    arrival: ArrivalProcess,
    shared: Option<SharedPrefix>,
    cost: FixedCost,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (1u64..200, 1u64..48, 1u64..300, 1u64..16, 0u64..60),
        (1u64..12, 0u32..3, 0.0f64..0.3, any::<bool>(), 0.0f64..0.9),
        (0u8..3, any::<bool>(), 0u64..1000, 1u64..200, any::<u64>()),
    )
        .prop_map(
            |((input, output, budget, block, extra), (conc, mtp, slack, chunked, hit), (arr, shared, per_tok, per_step, seed))| {
                let decode = DecodeMode::mtp(mtp, &[0.8, 0.5]);
                let q = decode.query_tokens();
                let kv_blocks = (input + output + q).div_ceil(block) + extra;
                let budget = if chunked { budget.max(q) } else { budget.max(input).max(q) };
                let arrival = match arr {
                    0 => ArrivalProcess::Burst,
                    1 => ArrivalProcess::Closed,
                    _ => ArrivalProcess::Poisson { rate: 500.0 },
                };
                Case {
                    cfg: SimConfig {
                        instance: InstanceConfig {
                            scheduler: Default::default(),
                            budget,
                            slack,
                            max_num_seqs: conc,
                            chunked_prefill: chunked,
                            block_size: block,
                            kv_blocks,
                            decode,
                            prefix_hit_rate: hit,
                            images_per_request: 0,
                            image_patches_per_image: 0,
                            image_patches: 0,
                            image_tokens: 0,
                            overlap_scheduling: false,
                            frontend: None,
                            graphs: None,
                        },
                        instances: if arr == 2 { 2 } else { 1 },
                        role: Role::Mixed,
                        run: RunParams {
                            measure: Default::default(),
                            closed_requests: None,
                            concurrency: conc,
                            num_requests: 40,
                            max_concurrency: None,
                            min_measured: 0,
                            ttft_limit_ms: f64::INFINITY,
                            tpot_limit_ms: f64::INFINITY,
                            seed,
                            max_steps: 2_000_000,
                            bins: Vec::new(),
                            stop_once_measured: false,
                        },
                    },
                    input,
                    output,
                    arrival,
                    shared: if shared { Some(SharedPrefix { groups: 2, length: input / 2 }) } else { None },
                    cost: FixedCost { per_step_s: per_step as f64 * 1e-5, per_token_s: per_tok as f64 * 1e-8 },
                }
            },
        )
}

fn factory(c: &Case) -> RequestFactory {
    RequestFactory::new(Lengths::Fixed(c.input), Lengths::Fixed(c.output), c.shared, c.arrival.clone(), c.cfg.run.seed)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Σ output tokens emitted (counted by the steps as they emit them, not read off the
    /// request records, which `finish` sets by assignment) = Σ output lengths: every token once.
    /// Mutation: delete the preemption settlement in `Instance::preempt_newest`
    /// (`generated += dec_steps − base_step`): a preempted lockstep request is re-admitted owing
    /// tokens it already emitted, and emits them twice.
    #[test]
    fn every_output_token_is_emitted_once(c in case()) {
        let (rep, reqs) = simulate_detailed(&c.cfg, &c.cost, factory(&c), &mut |_| {}).unwrap();
        let finished: u64 = reqs.iter().filter(|r| r.finish.is_some()).map(|r| r.output).sum();
        let issued: u64 = reqs.iter().map(|r| r.output).sum();
        prop_assert_eq!(reqs.iter().filter(|r| r.finish.is_some()).count() as u64, rep.completed);
        if matches!(c.arrival, ArrivalProcess::Closed) {
            // The loop stops with requests in flight: the finished ones emitted all their
            // tokens, the others some of theirs.
            prop_assert!(finished <= rep.tokens_emitted && rep.tokens_emitted <= issued, "{} {} {}", finished, rep.tokens_emitted, issued);
        } else {
            prop_assert!(reqs.iter().all(|r| r.finish.is_some()), "a burst or an open loop runs every request to the end");
            prop_assert_eq!(rep.tokens_emitted, issued);
        }
    }

    /// Σ prefill tokens of the steps = Σ uncached prompt tokens + Σ recomputed tokens: each
    /// admission computes its prompt (plus what it had generated before a preemption) less the
    /// cached part. A request preempted while still prefilling had computed only part of a
    /// prompt, so then the sum lies between the final admissions' uncached prompts and every
    /// admission's whole.
    /// Mutation: make `RequestState::prompt_tokens` return `self.input` (a preempted request
    /// recomputes only its prompt, not the tokens it had generated) or drop the token-level
    /// hit in `open_admission` (cached tokens computed again).
    #[test]
    fn prefill_computes_uncached_and_recomputed_tokens(c in case()) {
        prop_assume!(c.shared.is_none() && !matches!(c.arrival, ArrivalProcess::Closed));
        let mut prefill = 0u64;
        let (_, reqs) = simulate_detailed(&c.cfg, &c.cost, factory(&c), &mut |s| prefill += s.prefill_tokens).unwrap();
        let h = c.cfg.instance.prefix_hit_rate;
        let uncached = |r: &RequestState| r.input - ((r.input as f64) * h).floor() as u64;
        let every: u64 = reqs.iter().map(|r| (1 + r.preemptions as u64) * uncached(r) + r.generated_at_preemptions).sum();
        if reqs.iter().all(|r| r.preempted_in_prefill == 0) {
            prop_assert_eq!(prefill, every);
        } else {
            // Every request's last admission completes at least its uncached prompt.
            let last: u64 = reqs.iter().map(uncached).sum();
            prop_assert!(prefill <= every, "{} > {}", prefill, every);
            prop_assert!(prefill >= last, "{} < {}", prefill, last);
        }
    }

    /// Each request's events are ordered: arrival ≤ first scheduled ≤ first token ≤ finish.
    /// Mutation: set `scheduled` on every admission in `StepBuilder::admit` (a re-admission
    /// after preemption then moves it past the first token).
    #[test]
    fn request_events_are_ordered(c in case()) {
        let (_, reqs) = simulate_detailed(&c.cfg, &c.cost, factory(&c), &mut |_| {}).unwrap();
        for r in &reqs {
            let Some(sched) = r.scheduled else { continue };
            prop_assert!(r.arrival <= sched, "{:?}", r);
            if let Some(first) = r.first_token {
                prop_assert!(sched <= first, "{:?}", r);
                if let Some(fin) = r.finish {
                    prop_assert!(first <= fin, "{:?}", r);
                }
            }
        }
        prop_assert!(reqs.iter().filter(|r| r.finish.is_some()).all(|r| r.scheduled.is_some() && r.first_token.is_some()));
    }

    /// KV blocks in use never exceed capacity in any step, and return to zero (cached, unreferenced
    /// prefixes aside) once every request has finished. Mutation: skip the KV release of a
    /// finished request (`self.kv.release(blocks)` in `Instance::release` when called from
    /// `finish`): blocks leak and are still held at the end.
    #[test]
    fn kv_is_bounded_and_returned(c in case()) {
        let mut steps: Vec<StepRecord> = Vec::new();
        let (rep, _) = simulate_detailed(&c.cfg, &c.cost, factory(&c), &mut |s| steps.push(s)).unwrap();
        prop_assert!(steps.iter().all(|s| s.kv_used <= c.cfg.instance.kv_blocks), "{:?}", steps.iter().map(|s| s.kv_used).max());
        if !matches!(c.arrival, ArrivalProcess::Closed) {
            prop_assert_eq!(rep.kv_held_at_end, 0);
        }
    }

    #[test]
    fn kv_never_exceeds_capacity_and_time_moves_forward(c in case()) {
        let mut steps: Vec<StepRecord> = Vec::new();
        let (rep, _) = simulate_detailed(&c.cfg, &c.cost, factory(&c), &mut |s| steps.push(s)).unwrap();
        prop_assert!(rep.kv_peak_utilization <= 1.0 + 1e-12);
        prop_assert!(rep.kv_utilization <= 1.0 + 1e-12);
        // Steps start in time order, and an instance never overlaps two steps.
        for w in steps.windows(2) {
            prop_assert!(w[1].start >= w[0].start);
        }
        let mut last_end = vec![0u64; c.cfg.instances as usize];
        for s in &steps {
            prop_assert!(s.end > s.start);
            prop_assert!(s.start >= last_end[s.instance as usize]);
            last_end[s.instance as usize] = s.end;
            // A step stays within the slack-inflated budget, except a whole recompute (prompt
            // plus the tokens generated before preemption) without chunked prefill, which may
            // only run alone.
            let tokens = s.prefill_tokens + s.decode_tokens;
            let cap = (c.cfg.instance.budget as f64 * (1.0 + c.cfg.instance.slack)).floor() as u64;
            if tokens > cap.max(c.cfg.instance.budget) {
                prop_assert!(!c.cfg.instance.chunked_prefill, "{:?}", s);
                prop_assert_eq!((s.prefill_seqs, s.decode_seqs), (1, 0), "{:?}", s);
                prop_assert!(tokens <= c.input + c.output, "{:?}", s);
            }
        }
    }

    #[test]
    fn same_seed_same_result(c in case()) {
        let a = simulate_detailed(&c.cfg, &c.cost, factory(&c), &mut |_| {}).unwrap();
        let b = simulate_detailed(&c.cfg, &c.cost, factory(&c), &mut |_| {}).unwrap();
        prop_assert_eq!(a, b);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// P/D systems conserve requests and tokens: every request is prefilled once on a prefill
    /// instance, transferred, decoded to its full output on a decode instance (its first
    /// token included), and finishes once; time moves forward, no pool overflows, and every
    /// block held for a transfer comes back.
    #[test]
    fn pd_systems_conserve_requests_and_tokens(c in case(), p in 1u32..3, d in 1u32..4, bw in 1u64..1000) {
        let cost = c.cost;
        let sys = System {
            groups: vec![
                Group { role: Role::Prefill, count: p, cfg: c.cfg.instance.clone(), cost: &cost, pipeline: None },
                Group { role: Role::Decode, count: d, cfg: c.cfg.instance.clone(), cost: &cost, pipeline: None },
            ],
            transfer: Some(KvTransfer {
                bytes_per_token: 64.0,
                link: crate::hardware::Link { bandwidth: crate::units::Bandwidth::gb_s(bw as f64 * 1e-3), latency_us: 5.0, efficiency: 0.8 },
            }),
            routing: if bw % 2 == 0 { Routing::LeastLoaded } else { Routing::RoundRobin },
            run: RunParams { num_requests: 30, ..c.cfg.run.clone() },
        };
        let arrival = if matches!(c.arrival, ArrivalProcess::Closed) { ArrivalProcess::Burst } else { c.arrival.clone() };
        let f = RequestFactory::new(Lengths::Fixed(c.input), Lengths::Fixed(c.output), c.shared, arrival, c.cfg.run.seed);
        let mut steps: Vec<StepRecord> = Vec::new();
        let (rep, reqs) = simulate_system(&sys, f, &mut |s| steps.push(s)).unwrap();
        prop_assert!(rep.kv_peak_utilization <= 1.0 + 1e-12);
        // Output tokens counted at emission: the decode side emits every token the client sees,
        // the first included, once each (not read off `generated`, which `finish` assigns).
        prop_assert_eq!(rep.tokens_emitted, reqs.iter().map(|r| r.output).sum::<u64>());
        prop_assert_eq!(rep.kv_held_at_end, 0, "every pool is empty once all requests finished");
        for r in &reqs {
            prop_assert!(r.finish.is_some(), "every request finishes");
            let first = r.first_token.unwrap();
            prop_assert!(r.arrival <= first && first <= r.finish.unwrap());
            // Every token comes from a decode instance, after the transfer landed.
            prop_assert!(r.instance >= p);
            prop_assert!(r.decode_admitted.unwrap() < first, "{:?}", r);
        }
        let mut last_end = vec![0u64; (p + d) as usize];
        let mut decode_side_prefill = 0u64;
        for s in &steps {
            prop_assert!(s.start >= last_end[s.instance as usize]);
            last_end[s.instance as usize] = s.end;
            if s.instance < p {
                prop_assert_eq!(s.decode_seqs, 0, "prefill instances never decode");
            } else {
                decode_side_prefill += s.prefill_tokens;
            }
        }
        // Decode instances prefill only what they preempted: the tokens it had generated
        // (preemptions after the first token happen only there) and its prompt less the cache.
        // Mutation: in `Instance::preempt_newest`, queue a decode instance's victim on `landed`
        // (re-admitted with its KV for free): the decode side prefills nothing.
        // A request preempted again while recomputing owes its generated tokens a second time
        // though its first recompute was cut short (with a high prefix hit rate that recompute
        // is little more than those tokens), so the bound counts only requests never caught
        // prefilling (found by proptest: prefix hits 0.89, chunked recompute of 13 tokens).
        let owed: u64 = reqs.iter().filter(|r| r.preempted_in_prefill == 0).map(|r| r.generated_at_preemptions).sum();
        prop_assert!(decode_side_prefill >= owed, "{} < {}", decode_side_prefill, owed);
        prop_assert!(owed == 0 || decode_side_prefill > 0);
    }
}
