//! The simulator's event loop on decode-heavy batches: target ≥ 1 million engine steps per
//! second with 256 running sequences (docs/performance.md).

use throughput_optimizer::cost::graph::build_both;
use throughput_optimizer::cost::{CostOptions, FixedCost, ParallelConfig, RooflineCost};
use throughput_optimizer::hardware::DeviceRegistry;
use throughput_optimizer::model::catalog;
use throughput_optimizer::quant::LinearQuant;
use throughput_optimizer::sim::{simulate, DecodeMode, InstanceConfig, Role, RunParams, SimConfig};
use throughput_optimizer::workload::arrival::{ArrivalProcess, RequestFactory};
use throughput_optimizer::workload::Lengths;

fn main() {
    divan::main();
}

fn config(decode: DecodeMode) -> SimConfig {
    SimConfig {
        instance: InstanceConfig {
            scheduler: Default::default(),
            budget: 8192,
            slack: 0.15,
            max_num_seqs: 256,
            chunked_prefill: true,
            block_size: 128,
            kv_blocks: 1 << 20,
            decode,
            prefix_hit_rate: 0.0,
            images_per_request: 0,
            image_patches_per_image: 0,
            image_patches: 0,
            image_tokens: 0,
            overlap_scheduling: false,
            frontend: None,
            graphs: None,
        },
        instances: 1,
        role: Role::Mixed,
        run: RunParams { max_steps: u64::MAX, ..RunParams::closed(256) },
    }
}

fn roofline() -> RooflineCost {
    let reg = DeviceRegistry::builtin();
    let dev = reg.get("TEST_DEVICE").unwrap();
    let m = catalog::find("Qwen/Qwen3-32B").unwrap();
    let opts = CostOptions::basic(LinearQuant::W8A8Dynamic, true);
    build_both(&m, dev, &ParallelConfig::dense(8, 8), &opts).0
}

fn factory() -> RequestFactory {
    RequestFactory::new(Lengths::Fixed(128), Lengths::Fixed(4096), None, ArrivalProcess::Closed, 0)
}

/// Closed loop of 256 sequences, 128-token prompts, 4096-token outputs: almost every step is
/// a decode step of ~256 sequences. Reports steps per iteration via the counter.
#[divan::bench(sample_count = 10)]
fn decode_heavy_256_roofline(bencher: divan::Bencher) {
    let cost = roofline();
    let cfg = config(DecodeMode::Plain);
    let steps = simulate(&cfg, &cost, factory()).unwrap().steps;
    bencher.counter(divan::counter::ItemsCount::new(steps)).bench(|| simulate(&cfg, &cost, factory()).unwrap());
}

#[divan::bench(sample_count = 10)]
fn decode_heavy_256_fixed_cost(bencher: divan::Bencher) {
    let cost = FixedCost { per_step_s: 0.03, per_token_s: 0.0 };
    let cfg = config(DecodeMode::Plain);
    let steps = simulate(&cfg, &cost, factory()).unwrap().steps;
    bencher.counter(divan::counter::ItemsCount::new(steps)).bench(|| simulate(&cfg, &cost, factory()).unwrap());
}

#[divan::bench(sample_count = 10)]
fn decode_heavy_256_mtp2_roofline(bencher: divan::Bencher) {
    let cost = roofline();
    let cfg = config(DecodeMode::mtp(2, &[0.9, 0.6]));
    let steps = simulate(&cfg, &cost, factory()).unwrap().steps;
    bencher.counter(divan::counter::ItemsCount::new(steps)).bench(|| simulate(&cfg, &cost, factory()).unwrap());
}

/// The roofline run under vLLM's scheduler (no slack, chunks cut to the budget left) and the
/// vLLM execution profile's overlapped scheduling.
#[divan::bench(sample_count = 10)]
fn decode_heavy_256_roofline_vllm(bencher: divan::Bencher) {
    let cost = roofline();
    let mut cfg = config(DecodeMode::Plain);
    cfg.instance.scheduler = throughput_optimizer::sim::scheduler::SchedulerKind::Vllm;
    cfg.instance.overlap_scheduling = true;
    let steps = simulate(&cfg, &cost, factory()).unwrap().steps;
    bencher.counter(divan::counter::ItemsCount::new(steps)).bench(|| simulate(&cfg, &cost, factory()).unwrap());
}

/// Cost per simulated step as the replica count grows (issue "Performance at scale": within
/// 1.5× of 8 replicas at 2,048): an open loop of Qwen3-8B TP=1 replicas, 500-token prompts,
/// 50-token outputs, Poisson at 4 req/s per replica, 10 requests per replica. The counter is
/// steps, so the throughput column reads as steps per second.
#[divan::bench(args = [8, 512, 2048], sample_count = 5)]
fn open_loop_replicas(bencher: divan::Bencher, replicas: u32) {
    let reg = DeviceRegistry::builtin();
    let dev = reg.get("TEST_DEVICE").unwrap();
    let m = catalog::find("Qwen/Qwen3-8B").unwrap();
    let cost = build_both(&m, dev, &ParallelConfig::dense(1, 1), &CostOptions::basic(LinearQuant::W8A8Dynamic, true)).0;
    let mut cfg = config(DecodeMode::Plain);
    cfg.instances = replicas;
    cfg.run = RunParams { num_requests: 10 * replicas as u64, max_steps: u64::MAX, ..RunParams::closed(0) };
    let rate = 4.0 * replicas as f64;
    let f = || RequestFactory::new(Lengths::Fixed(500), Lengths::Fixed(50), None, ArrivalProcess::Poisson { rate }, 0);
    let steps = simulate(&cfg, &cost, f()).unwrap().steps;
    bencher.counter(divan::counter::ItemsCount::new(steps)).bench(|| simulate(&cfg, &cost, f()).unwrap());
}
