//! A replica plan's changing instance count ([`simulate_scheduled`]) with a fixed-latency cost
//! model: which instance each request joins and when it finishes, exactly.

use super::*;
use crate::cost::FixedCost;
use crate::workload::arrival::{ArrivalProcess, RequestFactory, Trace, TraceRequest};
use crate::workload::Lengths;

const MS: FixedCost = FixedCost { per_step_s: 1e-3, per_token_s: 0.0 };

/// Requests of a 2-token prompt arriving at `(ms, output tokens)`.
fn trace(arrivals: &[(f64, u64)]) -> RequestFactory {
    let requests = arrivals
        .iter()
        .map(|&(ms, output)| TraceRequest {
            arrival_s: ms / 1e3,
            input_tokens: 2,
            output_tokens: output,
            prefix_group: None,
            prefix_len: 0,
        })
        .collect();
    let t = Trace { source: "test".into(), requests, ignored_columns: Vec::new(), format: Default::default(), time_scale: None };
    RequestFactory::new(Lengths::Fixed(1), Lengths::Fixed(1), None, ArrivalProcess::Trace(t), 0)
}

fn system(cost: &FixedCost, requests: u64) -> System<'_> {
    let mut run = RunParams::closed(0);
    run.num_requests = requests;
    System {
        groups: vec![Group { role: Role::Mixed, count: 2, cfg: InstanceConfig::for_tests(100, 0.0, 10, 4), cost, pipeline: None }],
        transfer: None,
        routing: Routing::LeastLoaded,
        run,
    }
}

#[test]
fn a_removed_instance_finishes_what_it_holds_and_takes_nothing_new() {
    // Two instances, 1 ms per step. R0 (10 output tokens) and R1 (5) arrive at 0 and go to
    // instances 0 and 1: first tokens at 1 ms, finishes at 10 and 5 ms. From 2 ms on one
    // instance takes new requests: instance 1 keeps R1 and finishes it at 5 ms, where it
    // started. Rx (2 tokens, 3.5 ms) joins instance 0 (prefill beside R0's decode in the 4–5 ms
    // step, finish at 6 ms). R2 (2 tokens) arrives at 6.5 ms, when instance 1 is idle and
    // instance 0 still decodes R0: it joins instance 0 (first token at 8, finish at 9 ms). From
    // 8 ms on both take requests again: R3 (2 tokens, 9.5 ms) joins the idle instance 1 (first
    // token 10.5, finish 11.5 ms).
    // Mutations: drop `follow_schedule()` before routing, or let `Router::update` refresh an
    // instance out of use (instance 1's finish at 5 ms would bring it back), and R2 joins
    // instance 1 (finish 8.5 ms).
    let schedule = [(0, 2), (2_000_000, 1), (8_000_000, 2)];
    let f = trace(&[(0.0, 10), (0.0, 5), (3.5, 2), (6.5, 2), (9.5, 2)]);
    let (_, reqs) = simulate_scheduled(&system(&MS, 5), f, &schedule).unwrap();
    let ms = |t: Option<Nanos>| t.map(|t| t as f64 / 1e6);
    assert_eq!(reqs.iter().map(|r| r.instance).collect::<Vec<_>>(), [0, 1, 0, 0, 1]);
    assert_eq!(reqs.iter().map(|r| ms(r.first_token)).collect::<Vec<_>>(), [Some(1.0), Some(1.0), Some(5.0), Some(8.0), Some(10.5)]);
    assert_eq!(reqs.iter().map(|r| ms(r.finish)).collect::<Vec<_>>(), [Some(10.0), Some(5.0), Some(6.0), Some(9.0), Some(11.5)]);
    assert!(reqs.iter().all(|r| r.generated == r.output));
}

#[test]
fn without_a_schedule_least_loaded_routing_is_unchanged() {
    // The same requests with every instance in use: R2 joins the idle instance 1 at 6.5 ms.
    let f = trace(&[(0.0, 10), (0.0, 5), (3.5, 2), (6.5, 2), (9.5, 2)]);
    let (_, reqs) = simulate_scheduled(&system(&MS, 5), f, &[]).unwrap();
    assert_eq!(reqs.iter().map(|r| r.instance).collect::<Vec<_>>(), [0, 1, 0, 1, 1]);
    assert_eq!(reqs[3].finish, Some(8_500_000));
}
