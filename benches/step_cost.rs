//! The cost model's hot path: pricing one engine step. A step costs O(operator kinds), so the
//! time must not grow with the number of sequences in the batch.

use throughput_optimizer::cost::graph::build_both;
use throughput_optimizer::cost::{BatchShape, CostOptions, ParallelConfig, PhaseLoad, RooflineCost, StepCostModel};
use throughput_optimizer::hardware::DeviceRegistry;
use throughput_optimizer::model::catalog;
use throughput_optimizer::quant::LinearQuant;

fn main() {
    divan::main();
}

fn opts() -> CostOptions {
    CostOptions::basic(LinearQuant::W8A8Dynamic, true)
}

fn par(tp: u32, ep: u32) -> ParallelConfig {
    let n = 8.max(ep);
    ParallelConfig { num_devices: n, tp, dp: n / tp, ep, moe_tp: n / ep, moe_dp: 1, dcp: 1, pp: 1 }
}

fn model(id: &str, tp: u32, ep: u32) -> RooflineCost {
    let reg = DeviceRegistry::builtin();
    let dev = reg.get("TEST_DEVICE").unwrap();
    build_both(&catalog::find(id).unwrap(), dev, &par(tp, ep), &opts()).0
}

/// Decode-heavy steps of `seqs` sequences plus one prefill chunk.
#[divan::bench(args = [1, 64, 256, 4096])]
fn qwen3_32b_mixed_step(bencher: divan::Bencher, seqs: u64) {
    let cost = model("Qwen/Qwen3-32B", 8, 1);
    let mut shape = BatchShape { decode: PhaseLoad::uniform(seqs, 1, 4000), sampled: seqs + 1, ..Default::default() };
    shape.prefill = PhaseLoad::uniform(1, 2048, 2048);
    bencher.bench(|| cost.step_seconds(divan::black_box(&shape)));
}

#[divan::bench]
fn deepseek_v3_decode_step(bencher: divan::Bencher) {
    let cost = model("deepseek-ai/DeepSeek-V3.1", 8, 16);
    let shape = BatchShape { decode: PhaseLoad::uniform(256, 1, 4000), sampled: 256, ..Default::default() };
    bencher.bench(|| cost.step_seconds(divan::black_box(&shape)));
}

#[divan::bench]
fn build_qwen3_32b_cost_model(bencher: divan::Bencher) {
    let reg = DeviceRegistry::builtin();
    let dev = reg.get("TEST_DEVICE").unwrap().clone();
    let m = catalog::find("Qwen/Qwen3-32B").unwrap();
    let (p, o) = (par(8, 1), opts());
    bencher.bench(|| build_both(&m, &dev, &p, &o));
}
