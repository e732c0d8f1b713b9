//! A latencies-only run with its instances running ahead (`simulation::ahead`) against the
//! same run step by step: the measured requests' latencies (TTFT, both TPOTs, ITL, end to end,
//! queueing), the steps counted and the requests measured are the same bits, or both runs
//! fail. [`simulate`] runs ahead; [`simulate_detailed`] keeps the records and so never does.
//!
//! The cases cover the four policies, overlapped scheduling, a cost that grows with the
//! decodes' context (as attention does) on a power-limited device (each step's clocks follow
//! the instance's recent load) beside fixed costs and the roofline model, several
//! instances, constant arrivals (with a fixed step time, arrivals that fall on step ends, and
//! same-nanosecond ties between instances) and bursty ones, variable output lengths, the prefix cache, a KV pool tight enough to preempt, MTP
//! (walked decodes: never repeated) and a step limit the run ends near.
//! Mutation: push the repeated step's token log entry at `end + 1` in `Simulation::run_ahead`,
//! let it run ahead past an arrival at the step's end (`t >= end`), or leave the power window
//! where it was after a step run ahead, and the latencies differ.

use super::config::SchedulerKind;
use super::simulation::STEPS_RUN_AHEAD;
use super::*;
use crate::cost::{BatchShape, Breakdown, CostOptions, FixedCost, ParallelConfig, RooflineCost, StepCostModel, StepParts, StepTime};
use crate::hardware::DeviceRegistry;
use crate::hardware::PowerLimit;
use crate::model::catalog;
use crate::quant::LinearQuant;
use crate::workload::arrival::{ArrivalProcess, RequestFactory, SharedPrefix};
use crate::workload::distribution::{LengthBin, LengthDistribution};
use crate::workload::Lengths;
use proptest::prelude::*;
use std::sync::OnceLock;

/// A step that costs more the more context its decodes and chunks read, so that every
/// repeated decode step is priced anew; on a power-limited device whose window is a few steps
/// long, its tokens loading the tensor cores, so that every step's clocks differ.
struct ContextCost {
    per_step_s: f64,
    per_token_s: f64,
    per_context_s: f64,
}

impl StepCostModel for ContextCost {
    fn step(&self, shape: &BatchShape) -> StepTime {
        if shape.is_empty() {
            return StepTime::default();
        }
        let context = (shape.decode.context + shape.prefill.context) as f64;
        let seconds = self.per_step_s + self.per_token_s * shape.tokens() as f64 + self.per_context_s * context;
        StepTime { seconds, breakdown: Breakdown { fixed: seconds, ..Default::default() } }
    }

    fn step_parts(&self, shape: &BatchShape) -> StepParts {
        let device_s = self.step_seconds(shape);
        StepParts { device_s, matrix_s: 200.0 * self.per_token_s * shape.tokens() as f64, ..StepParts::default() }
    }

    fn power_limit(&self) -> Option<PowerLimit> {
        Some(PowerLimit { onset: 0.1, slowdown: 1.0, window_ms: 10.0 })
    }
}

fn roofline() -> &'static RooflineCost {
    static COST: OnceLock<RooflineCost> = OnceLock::new();
    COST.get_or_init(|| {
        let reg = DeviceRegistry::builtin();
        let dev = reg.get("TEST_DEVICE").unwrap();
        let model = catalog::find("Qwen/Qwen3-32B").unwrap();
        RooflineCost::new(&model, dev, &ParallelConfig::dense(8, 8), &CostOptions::basic(LinearQuant::W8A8Dynamic, true))
    })
}

#[derive(Debug, Clone)]
struct Case {
    cfg: SimConfig,
    input: u64,
    /// Output lengths drawn from [lo, hi) (fixed when equal).
    output: (u64, u64),
    shared: bool,
    arrival: ArrivalProcess,
    /// 0: fixed per token, 1: growing with the context, 2: roofline, 3: fixed per step.
    cost: u8,
}

impl Case {
    fn factory(&self) -> RequestFactory {
        let (lo, hi) = self.output;
        let output = if lo == hi {
            Lengths::Fixed(lo)
        } else {
            let bin = LengthBin { min_tokens: lo, max_tokens: hi, weight: 1.0 };
            Lengths::Distribution(LengthDistribution { source: "test".into(), bins: vec![bin], output_bins: None })
        };
        let shared = self.shared.then_some(SharedPrefix { groups: 3, length: self.input / 2 });
        RequestFactory::new(Lengths::Fixed(self.input), output, shared, self.arrival.clone(), self.cfg.run.seed)
    }

    fn cost(&self) -> Box<dyn StepCostModel> {
        match self.cost {
            0 => Box::new(FixedCost { per_step_s: 2e-3, per_token_s: 3e-6 }),
            // Every step 2 ms: constant arrivals 50 ms apart fall on step ends (ties).
            3 => Box::new(FixedCost { per_step_s: 2e-3, per_token_s: 0.0 }),
            1 => Box::new(ContextCost { per_step_s: 2e-3, per_token_s: 3e-6, per_context_s: 7e-9 }),
            _ => Box::new(roofline().clone()),
        }
    }
}

fn case() -> impl Strategy<Value = Case> {
    (
        (0u8..4, any::<bool>(), 0u8..4, 1u32..4, 0u8..3),
        (16u64..400, 1u64..200, 0u64..200, any::<bool>(), any::<bool>()),
        (0u64..3, 1u64..64, prop::sample::select(vec![4u64, 16]), any::<u64>(), 0u32..8),
    )
        .prop_map(
            |((policy, overlap, cost, instances, arr), (input, out_lo, out_extra, shared, chunked), (kv, cap, block, seed, mtp))| {
                let scheduler =
                    [SchedulerKind::DecodeFirst, SchedulerKind::Vllm, SchedulerKind::Sglang, SchedulerKind::Trtllm][policy as usize];
                let output = (out_lo, out_lo + out_extra);
                // One MTP case in eight: its decodes are walked, never repeated.
                let decode = DecodeMode::mtp(u32::from(mtp == 0), &[0.7]);
                let q = decode.query_tokens();
                let one = (input + output.1 + q).div_ceil(block);
                // A pool for one request (preemptions), a few, or many.
                let kv_blocks = [one + 2, one * 4, one * 64][kv as usize];
                let budget = if chunked { 256 } else { input.max(256) };
                let mut instance = InstanceConfig::for_tests(budget, 0.1, cap, block);
                instance.scheduler = scheduler;
                instance.overlap_scheduling = overlap;
                instance.chunked_prefill = chunked;
                instance.kv_blocks = kv_blocks;
                instance.decode = decode;
                instance.prefix_hit_rate = if shared { 0.2 } else { 0.0 };
                let mut run = RunParams::closed(0);
                run.num_requests = 60;
                run.seed = seed;
                run.stop_once_measured = true;
                // Short enough for a few runs to end at it, long enough for most not to.
                run.max_steps = if seed % 5 == 0 { 1_500 } else { 200_000 };
                let rate = [20.0, 60.0, 200.0][(seed % 3) as usize] * instances as f64;
                let arrival = match arr {
                    0 => ArrivalProcess::Poisson { rate },
                    1 => ArrivalProcess::Constant { rate },
                    _ => ArrivalProcess::Gamma { rate, burstiness: 0.3 },
                };
                Case { cfg: SimConfig { instance, instances, role: Role::Mixed, run }, input, output, shared, arrival, cost }
            },
        )
}

/// What a latencies-only report is read for.
fn summary(r: &SimReport) -> String {
    format!("{:?} steps {} measured {}", r.latency, r.steps, r.measured)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn running_ahead_gives_the_step_by_step_latencies(c in case()) {
        let cost = c.cost();
        let fast = simulate(&c.cfg, cost.as_ref(), c.factory());
        let slow = simulate_detailed(&c.cfg, cost.as_ref(), c.factory(), &mut |_| {}).map(|(r, _)| r);
        match (&fast, &slow) {
            (Ok(f), Ok(s)) => prop_assert_eq!(summary(f), summary(s)),
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "one run failed: {:?} against {:?}", fast.map(|r| summary(&r)), slow.map(|r| summary(&r))),
        }
    }
}

#[test]
fn the_shortcut_is_taken_and_agrees_on_the_headline_shape() {
    // A roofline model, two instances, variable outputs, well below capacity (as the goodput
    // search's boundary runs are): most steps are repeated decodes.
    let mut instance = InstanceConfig::for_tests(2048, 0.1, 64, 16);
    instance.scheduler = SchedulerKind::Vllm;
    let mut run = RunParams::closed(0);
    run.num_requests = 120;
    run.stop_once_measured = true;
    run.max_steps = 2_000_000;
    let c = Case {
        cfg: SimConfig { instance, instances: 2, role: Role::Mixed, run },
        input: 1000,
        output: (200, 800),
        shared: false,
        arrival: ArrivalProcess::Poisson { rate: 2.0 },
        cost: 2,
    };
    let cost = c.cost();
    let before = STEPS_RUN_AHEAD.with(|s| s.get());
    let fast = simulate(&c.cfg, cost.as_ref(), c.factory()).unwrap();
    let ahead = STEPS_RUN_AHEAD.with(|s| s.get()) - before;
    let slow = simulate_detailed(&c.cfg, cost.as_ref(), c.factory(), &mut |_| {}).unwrap().0;
    assert_eq!(summary(&fast), summary(&slow));
    assert!(ahead * 2 > fast.steps, "{ahead} of {} steps run ahead", fast.steps);
}
