//! Properties of the batch search over simulated closed loops, with the fixed cost model on
//! random small workloads: a looser SLO, a larger KV pool (more devices holding the cache) and
//! a higher prefix-cache hit rate never lower the best throughput the search finds. The probe
//! is the simulator engine's in miniature: the closed loop's KV pre-check, then a simulation
//! judged on its mean TTFT and TPOT. Cases are few and runs short (the whole module takes a
//! few seconds), and the case stream is seeded, so a run is reproducible.
//!
//! What the properties found and what changed: the batch search ended on the largest feasible
//! batch, but throughput need not grow up to it (a batch whose prompts overflow the step's
//! budget doubles TTFT and delivers less; past saturation, extra clients only queue and
//! throughput wanders within a percent). A looser limit then ended lower (2,670 → 2,309 tok/s;
//! 10,854 → 10,536), and so did a larger pool (43,013 → 42,485). The search now walks down
//! from the boundary while throughput holds (`batch::search`).
//!
//! Known limit, left as it is: in a steady-state closed loop of identical requests, which
//! requests prefill together (and so how the loop phase-locks) depends on the prompt left to
//! compute, so a higher prefix-hit rate can raise TTFT at the same batch (38-token prompts,
//! 24 output tokens, a 38-token budget, batch 13: TTFT 3.84 ms at hit rate 0.33, 10.05 ms at
//! 0.57) and a limit between the two lowers the best throughput (3,721 → 3,635 tok/s). That is
//! the simulated loop, not the search; the benchmark-run loop (`--num-requests`) jitters its
//! sends and does not lock. With 400 unseeded cases per property it turned up in about one
//! case in a hundred; the seeded 32 cases here do not include it.

use super::batch::{self, Probe, ProbeStats};
use crate::cost::FixedCost;
use crate::outcome::{Row, StopReason};
use crate::plan::SearchStrategy;
use crate::sim::{simulate, InstanceConfig, Role, RunParams, SimConfig};
use crate::workload::arrival::{ArrivalProcess, RequestFactory};
use crate::workload::Lengths;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    input: u64,
    output: u64,
    budget: u64,
    kv_blocks: u64,
    hit: f64,
    cost: FixedCost,
    ttft_ms: f64,
    tpot_ms: f64,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    ((8u64..160, 2u64..40, 32u64..256, 20u64..200), (0.0f64..0.6, 1u64..40, 0u64..400, any::<u64>()), (2.0f64..60.0, 0.5f64..6.0)).prop_map(
        |((input, output, budget, extra), (hit, per_step, per_tok, seed), (ttft_ms, tpot_ms))| Case {
            input,
            output,
            budget: budget.max(input),
            kv_blocks: (input + output + 1).div_ceil(4) + extra,
            hit,
            cost: FixedCost { per_step_s: per_step as f64 * 1e-4, per_token_s: per_tok as f64 * 1e-7 },
            ttft_ms,
            tpot_ms,
            seed,
        },
    )
}

/// Largest batch a property search may probe (keeps each run short).
const MAX_BATCH: u32 = 48;

/// One probe: out of memory when the closed loop's mean KV demand exceeds the pool (as the
/// simulator engine's pre-check), else a simulation judged on its mean latencies.
fn probe(c: &Case, batch: u32) -> (Probe, ProbeStats) {
    let mut row = Row::probe_stub(batch);
    let blocks = (c.input + c.output / 2 + 1).div_ceil(4);
    let stop = if batch as u64 * blocks > c.kv_blocks {
        Some(StopReason::MemoryOom)
    } else {
        let mut instance = InstanceConfig::for_tests(c.budget, 0.0, batch as u64, 4);
        instance.kv_blocks = c.kv_blocks;
        instance.prefix_hit_rate = c.hit;
        let run = RunParams {
            measure: Default::default(),
            closed_requests: None,
            concurrency: batch as u64,
            num_requests: 0,
            max_concurrency: None,
            min_measured: 0,
            ttft_limit_ms: c.ttft_ms,
            tpot_limit_ms: c.tpot_ms,
            seed: c.seed,
            max_steps: 200_000,
            bins: Vec::new(),
            stop_once_measured: false,
        };
        let cfg = SimConfig { instance, instances: 1, role: Role::Mixed, run };
        let f = RequestFactory::new(Lengths::Fixed(c.input), Lengths::Fixed(c.output), None, ArrivalProcess::Closed, c.seed);
        let rep = simulate(&cfg, &c.cost, f).expect("a small closed loop runs");
        let (ttft, tpot) = (rep.latency.ttft.mean, rep.latency.tpot_inter_token.mean);
        row.ttft_ms = Some(ttft);
        row.tpot_ms = Some(tpot);
        row.throughput = rep.output_throughput;
        if tpot > c.tpot_ms {
            Some(StopReason::TpotLimit)
        } else if ttft > c.ttft_ms {
            Some(StopReason::TtftLimit)
        } else {
            None
        }
    };
    row.stop_reason = stop;
    let st = ProbeStats {
        total_gib: 1.0,
        weight_gib: 0.0,
        reserved_gib: 0.0,
        avail_gib: 1.0,
        latencies: [(row.tpot_ms.unwrap_or(0.0), c.tpot_ms), (row.ttft_ms.unwrap_or(0.0), c.ttft_ms)],
    };
    (Probe { row, stop }, st)
}

/// The best feasible throughput the batch search finds (0 when nothing is feasible).
fn best(c: &Case) -> f64 {
    let res = batch::search(1, Some(MAX_BATCH), SearchStrategy::Exponential, &mut |b| probe(c, b));
    res.feasible().map(|p| p.row.throughput).fold(0.0, f64::max)
}

/// How much lower a best throughput may come out and still count as "not lower": the closed
/// loop's stopping rule reads the rate to ±1 % ([`crate::sim::steady::REL_HALF_WIDTH`]), so the
/// search cannot rank rows closer than that. It matters past saturation, where extra clients
/// only queue: a plateau of batch sizes (e.g. 6, 7, 8 at 48,436 tok/s after 48,635 at batch 5,
/// when a 103-token prompt fills the step's budget) ends a search with more KV 0.4 % lower.
const RESOLUTION: f64 = crate::sim::steady::REL_HALF_WIDTH;

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, rng_seed: proptest::test_runner::RngSeed::Fixed(10), ..ProptestConfig::default() })]

    /// A looser SLO (both limits raised) never lowers the best throughput: every batch
    /// feasible before still is, and the search must not end lower.
    /// Mutation: drop `probes.below_the_boundary(min)` from `batch::search`: with a looser
    /// limit the search ends on a boundary batch whose prompts overflow the step budget
    /// (2,309 tok/s at batch 6) and misses batch 5 (2,670 tok/s), the tighter limit's boundary
    /// (the regression file keeps the case).
    #[test]
    fn a_looser_slo_never_lowers_the_best_throughput(c in case(), looser in 1.0f64..3.0) {
        let loose = Case { ttft_ms: c.ttft_ms * looser, tpot_ms: c.tpot_ms * looser, ..c.clone() };
        let (t, l) = (best(&c), best(&loose));
        prop_assert!(l >= t * (1.0 - RESOLUTION), "limits ×{looser:.2}: {t} → {l}");
    }

    /// More devices holding the KV cache (a larger pool, the same step costs) never lower the
    /// best throughput. Mutation: drop `probes.down_from_the_boundary(min)` from
    /// `batch::search`: the larger pool's search ends on a later, saturated batch (200 → 240
    /// blocks: 12,449 → 11,935 tok/s; the regression file keeps the case).
    #[test]
    fn a_larger_kv_pool_never_lowers_the_best_throughput(c in case(), more in 1u64..200) {
        let big = Case { kv_blocks: c.kv_blocks + more, ..c.clone() };
        let (s, b) = (best(&c), best(&big));
        prop_assert!(b >= s * (1.0 - RESOLUTION), "{} → {} blocks: {s} → {b}", c.kv_blocks, big.kv_blocks);
    }

    /// A higher prefix-cache hit rate (fewer prompt tokens to compute, the same KV) never
    /// lowers the best throughput. Mutation: in `StepBuilder::open_admission` take the cached
    /// share as `1 − prefix_hit_rate` (a higher hit rate computes more of the prompt).
    /// Checked where the KV pool holds every request's whole context at the largest batch
    /// searched, so requests never preempt each other: in a steady-state closed loop of
    /// identical requests, shorter prompts to compute change which requests prefill together
    /// and so how they phase-lock, and where the pool is tight, requests that run in step peak
    /// together and preempt (104-token prompts, 28 output tokens, 195 blocks of 4, batch 6:
    /// 8,571 tok/s at hit rate 0.29, 8,279 at 0.61 with TTFT 0.70 → 1.29 ms). That is the
    /// simulated dynamics of a tight pool, not the search.
    #[test]
    fn a_higher_prefix_hit_rate_never_lowers_the_best_throughput(c in case(), more in 0.0f64..0.4) {
        let roomy = (c.input + c.output + 1).div_ceil(4) * MAX_BATCH as u64;
        let c = Case { kv_blocks: c.kv_blocks.max(roomy), ..c };
        let hot = Case { hit: c.hit + more, ..c.clone() };
        let (s, h) = (best(&c), best(&hot));
        prop_assert!(h >= s * (1.0 - RESOLUTION), "hit {:.2} → {:.2}: {s} → {h}", c.hit, hot.hit);
    }
}
