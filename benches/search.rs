//! Whole searches, as a user runs them. Targets (docs/performance.md): the headline example
//! with the analytic engine under 0.1 s.

mod common;

use common::plan;

fn main() {
    divan::main();
}

const HEADLINE: &str = "Qwen/Qwen3-32B --device TEST_DEVICE --num-devices 8 --input-length 3500 --output-length 1500 --compile \
    --quantize-linear-action W8A8_DYNAMIC --quantize-attention-action DISABLED --tpot-limits 50 --jobs 1";

#[divan::bench(sample_count = 20)]
fn headline_analytic(bencher: divan::Bencher) {
    let p = plan(&format!("{HEADLINE} --engine analytic"));
    bencher.bench(|| throughput_optimizer::search::run(&p));
}

/// Target: under 1 s on one core (aim 0.45 s).
#[divan::bench(sample_count = 10)]
fn headline_sim(bencher: divan::Bencher) {
    let p = plan(&format!("{HEADLINE} --engine sim"));
    bencher.bench(|| throughput_optimizer::search::run(&p));
}

const DEEPSEEK_PD: &str = "deepseek-ai/DeepSeek-V3.1 --input-length 3500 --output-length 1500 --compile \
    --enable-optimize-prefill-decode-ratio --prefill-devices-per-instance 16 --decode-devices-per-instance 16 \
    --num-devices 64 --ttft-limits 2000 --tpot-limits 50 --jobs 1";

#[divan::bench(sample_count = 10)]
fn deepseek_pd_ratio_analytic(bencher: divan::Bencher) {
    let p = plan(&format!("{DEEPSEEK_PD} --engine analytic"));
    bencher.bench(|| throughput_optimizer::search::run(&p));
}

/// P/D ratio search plus the simulated verification of the plan, its sustainable rate and
/// every maximal split. Target: under 5 s on one core.
#[divan::bench(sample_count = 3)]
fn deepseek_pd_ratio_sim_with_verification(bencher: divan::Bencher) {
    let p = plan(&format!("{DEEPSEEK_PD} --engine sim"));
    bencher.bench(|| throughput_optimizer::search::run(&p));
}
