//! Properties of the goodput search over simulated open loops with the fixed cost model on
//! random small workloads: the highest rate within the SLO never drops when the SLO is looser
//! or when there are more instances, with the routing (least loaded) and the measurement
//! window (the middle 80 % of arrivals) held fixed. The check is `slo_check`'s in miniature:
//! the same seeded Poisson requests offered at each rate over the instances, judged on p90
//! TTFT and TPOT. The case stream is seeded, so a run is reproducible.
//!
//! Why they hold: the search answers on a fixed grid of rates, and with common random numbers
//! a looser limit or another instance only lowers the statistic at every rate, so the
//! boundary between adjacent grid rates can only move up. The search starts from the
//! boundary's estimate (`rate_estimate`), as a planning run's does. Mutation tried: seed each
//! rate's arrivals by the rate (`seed ^ rate.to_bits()` in `check`: no common random
//! numbers), and the statistic stops growing with the rate: the looser-SLO property fails
//! (limits × 1.03: 191.9 → 143.2 req/s). The instance property did not catch that mutation in
//! its 48 cases (an extra instance moves the boundary by more than the noise); a router that
//! sends requests to the most loaded instance trips the router's own debug check first.

use super::goodput;
use super::rate_estimate::{self, MeanLengths};
use crate::cost::FixedCost;
use crate::outcome::SloPoint;
use crate::sim::{simulate, InstanceConfig, Percentile, Role, RunParams, SimConfig};
use crate::workload::arrival::{ArrivalProcess, RequestFactory};
use crate::workload::Lengths;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    input: u64,
    output: u64,
    cost: FixedCost,
    instances: u32,
    ttft_ms: f64,
    tpot_ms: f64,
    rate: f64,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    ((8u64..120, 2u64..30, 1u32..4), (1u64..40, 0u64..400, any::<u64>()), (5.0f64..200.0, 0.5f64..8.0, 2.0f64..400.0)).prop_map(
        |((input, output, instances), (per_step, per_tok, seed), (ttft_ms, tpot_ms, rate))| Case {
            input,
            output,
            cost: FixedCost { per_step_s: per_step as f64 * 1e-4, per_token_s: per_tok as f64 * 1e-7 },
            instances,
            ttft_ms,
            tpot_ms,
            rate,
            seed,
        },
    )
}

/// Requests per simulation (enough for a p90, short enough for many cases).
const REQUESTS: u64 = 160;

/// The case's deployment at `rate`: its p90 statistics against its limits.
fn instance(c: &Case) -> InstanceConfig {
    let mut instance = InstanceConfig::for_tests(256, 0.0, 64, 16);
    // Room for every request's whole context at the running cap: the pool never preempts.
    instance.kv_blocks = 64 * (c.input + c.output + 1).div_ceil(16);
    instance
}

fn check(c: &Case, rate: f64) -> SloPoint {
    let instance = instance(c);
    let run = RunParams {
        num_requests: REQUESTS,
        ttft_limit_ms: c.ttft_ms,
        tpot_limit_ms: c.tpot_ms,
        seed: c.seed,
        max_steps: 400_000,
        ..RunParams::closed(0)
    };
    let cfg = SimConfig { instance, instances: c.instances, role: Role::Mixed, run };
    let f = RequestFactory::new(Lengths::Fixed(c.input), Lengths::Fixed(c.output), None, ArrivalProcess::Poisson { rate }, c.seed);
    match simulate(&cfg, &c.cost, f) {
        Ok(rep) => {
            let (ttft, tpot) = (rep.latency.ttft.pick(Percentile::P90), rep.latency.tpot_inter_token.pick(Percentile::P90));
            SloPoint { rate, ttft_ms: Some(ttft), tpot_ms: Some(tpot), meets_slo: ttft <= c.ttft_ms && tpot <= c.tpot_ms }
        }
        Err(_) => SloPoint { rate, ttft_ms: None, tpot_ms: None, meets_slo: false },
    }
}

fn goodput(c: &Case) -> goodput::Goodput {
    let lengths = MeanLengths { prompt: c.input, context: c.input, output: c.output };
    let estimate = rate_estimate::estimate(&instance(c), &c.cost, c.instances, lengths, c.rate, (c.ttft_ms, c.tpot_ms));
    goodput::search(c.rate, None, goodput::Hints { delivered: None, estimate }, (c.ttft_ms, c.tpot_ms), &mut |r| check(c, r))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(25), ..ProptestConfig::default() })]

    /// Raising both limits never lowers the highest rate within the SLO.
    #[test]
    fn a_looser_slo_never_lowers_goodput(c in case(), looser in 1.0f64..1.25) {
        let loose = Case { ttft_ms: c.ttft_ms * looser, tpot_ms: c.tpot_ms * looser, ..c.clone() };
        let (t, l) = (goodput(&c), goodput(&loose));
        prop_assume!(t.exact && l.exact);
        prop_assert!(l.rate >= t.rate, "limits ×{looser:.2}: {} → {} req/s", t.rate, l.rate);
    }

    /// Another instance (the same routing and window) never lowers it.
    #[test]
    fn more_instances_never_lower_goodput(c in case(), more in 1u32..3) {
        let wide = Case { instances: c.instances + more, ..c.clone() };
        let (n, w) = (goodput(&c), goodput(&wide));
        prop_assume!(n.exact && w.exact);
        prop_assert!(w.rate >= n.rate, "{} → {} instances: {} → {} req/s", c.instances, wide.instances, n.rate, w.rate);
    }
}
