//! The routed experts' load model (`ExpertCost::load`): how many experts a batch touches and
//! how evenly.

use super::*;

fn deepseek_ep16() -> ExpertCost {
    ExpertCost {
        tp: 8.0,
        group_ranks: 16.0,
        top_k: 8.0,
        experts: 256.0,
        local_experts: 16.0,
        mma_per_pair: 0.0,
        gp_per_pair: 0.0,
        mem_per_pair: 0.0,
        mem_per_expert: 0.0,
        gp_per_expert: 0.0,
        fixed_per_expert: false,
    }
}

#[test]
fn small_batches_touch_a_fraction_of_the_experts() {
    let e = deepseek_ep16();
    // 8 tokens per replica, sliced over TP8 ⇒ 1 per rank ⇒ 128 assignments over 256 experts.
    let (pairs, active) = e.load(8.0);
    let p: f64 = 1.0 - (255.0f64 / 256.0).powf(128.0);
    let mean = 16.0 * p;
    let z = (2.0 * 16f64.ln()).sqrt();
    assert!((active - (mean + z * (mean * (1.0 - p)).sqrt())).abs() < 1e-9);
    assert!(active > 10.0 && active < 12.0, "{active}");
    assert!(pairs > 8.0 && pairs < 16.0, "{pairs}");
}

#[test]
fn large_batches_touch_every_expert_and_balance() {
    let e = deepseek_ep16();
    let (pairs, active) = e.load(8.0 * 4096.0);
    assert_eq!(active, 16.0);
    let mean = 4096.0 * 16.0 * 8.0 / 16.0;
    assert!(pairs > mean && pairs < mean * 1.02, "{pairs} vs {mean}");
    assert_eq!(e.load(0.0), (0.0, 0.0));
}

#[test]
fn a_single_rank_holds_every_expert() {
    let e = ExpertCost { local_experts: 256.0, group_ranks: 1.0, tp: 1.0, ..deepseek_ep16() };
    let (pairs, active) = e.load(4.0);
    assert_eq!(pairs, 32.0);
    assert!((active - 256.0 * (1.0 - (255.0f64 / 256.0).powf(32.0))).abs() < 1e-9);
}
