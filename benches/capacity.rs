//! Capacity planning, as a user runs it. Targets (docs/performance.md): sizing on 64 devices in
//! at most 5 s on one core; per-row goodput (on by default for open loops) on the headline
//! example as an open loop, against the same run with `--no-goodput`; sizing with P/D deployments (`--compare-disagg`, `--disagg`) on 64 devices.

mod common;

use common::plan;

fn main() {
    divan::main();
}

/// The headline example as an open loop at 10 req/s (README), on one core.
const HEADLINE_OPEN: &str = "Qwen/Qwen3-32B --device TEST_DEVICE --num-devices 8 --input-length 3500 --output-length 1500 \
    --compile --tpot-limits 50 --arrival poisson --request-rate 10 --jobs 1";

#[divan::bench(sample_count = 10)]
fn headline_open_loop(bencher: divan::Bencher) {
    let p = plan(&format!("{HEADLINE_OPEN} --no-goodput"));
    bencher.bench(|| throughput_optimizer::search::run(&p));
}

#[divan::bench(sample_count = 5)]
fn headline_open_loop_goodput(bencher: divan::Bencher) {
    let p = plan(HEADLINE_OPEN);
    bencher.bench(|| throughput_optimizer::search::run(&p));
}

/// Sizing Llama-3.1-8B on up to 64 H100s for 600 req/s. Target: at most 5 s on one core.
#[divan::bench(sample_count = 3)]
fn sizing_64_devices(bencher: divan::Bencher) {
    let p = plan(
        "meta-llama/Meta-Llama-3.1-8B --device H100_SXM --serving-engine vllm --input-length 1000 --output-length 200 \
         --ttft-limits 2000 --tpot-limits 50 --slo-percentile p99 --num-devices 64 --target-request-rate 600 --num-requests 20000 --jobs 1",
    );
    bencher.bench(|| throughput_optimizer::search::run(&p));
}

/// The same sizing with P/D deployments too (`--compare-disagg`): each role's layouts searched
/// as P/D phases, then the P/D pairings that could beat the aggregated answer simulated.
#[divan::bench(sample_count = 3)]
fn sizing_64_devices_pd(bencher: divan::Bencher) {
    let p = plan(
        "meta-llama/Meta-Llama-3.1-8B --device H100_SXM --serving-engine vllm --input-length 1000 --output-length 200 \
         --ttft-limits 2000 --tpot-limits 50 --slo-percentile p99 --num-devices 64 --target-request-rate 600 --num-requests 20000 \
         --compare-disagg --jobs 1",
    );
    bencher.bench(|| throughput_optimizer::search::run(&p));
}

/// P/D only (`--disagg`) on 64 devices: every pairing whose formula split could fit is checked.
#[divan::bench(sample_count = 3)]
fn sizing_64_devices_disagg(bencher: divan::Bencher) {
    let p = plan(
        "meta-llama/Meta-Llama-3.1-8B --device H100_SXM --serving-engine vllm --input-length 1000 --output-length 200 \
         --ttft-limits 2000 --tpot-limits 50 --slo-percentile p99 --num-devices 64 --target-request-rate 600 --num-requests 20000 \
         --disagg --jobs 1",
    );
    bencher.bench(|| throughput_optimizer::search::run(&p));
}
