//! Writes the synthetic 24-hour trace of the replica-plan scenario and test
//! (`scenarios/data/daily-cycle.jsonl`) in Mooncake's JSON Lines format.
//!
//! `cargo run --example daily_trace > scenarios/data/daily-cycle.jsonl`
//!
//! Arrivals are a Poisson process whose rate follows a daily cycle: a raised cosine from
//! [`TROUGH_RATE`] at 04:00 to [`PEAK_RATE`] at 16:00 (eight times the trough), drawn by thinning
//! a process at the peak rate. The workload is long-context summarisation: prompts of 16k to
//! 48k tokens, answers of 4 to 16 tokens, so that a day of traffic is a few thousand requests
//! (a small file, a fast simulation) that still keep several instances busy at the peak.
//! Everything comes from one seeded ChaCha stream: the file is the same on every machine.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEED: u64 = 25;
const DAY_S: f64 = 86_400.0;
/// Requests per second at the quietest (04:00) and busiest (16:00) time of day.
const TROUGH_RATE: f64 = 0.015;
const PEAK_RATE: f64 = 0.12;

/// The arrival rate at `t` seconds after midnight.
fn rate(t: f64) -> f64 {
    let phase = 2.0 * std::f64::consts::PI * (t - 4.0 * 3600.0) / DAY_S;
    TROUGH_RATE + (PEAK_RATE - TROUGH_RATE) * (1.0 - phase.cos()) / 2.0
}

fn main() {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut t = 0.0;
    let mut out = String::new();
    loop {
        // Exponential gaps at the peak rate, each arrival kept with probability rate(t) / peak.
        let u: f64 = rng.random::<f64>();
        t += -(1.0 - u).ln() / PEAK_RATE;
        if t >= DAY_S {
            break;
        }
        if rng.random::<f64>() * PEAK_RATE > rate(t) {
            continue;
        }
        let input: u64 = rng.random_range(16_000..=48_000);
        let output: u64 = rng.random_range(4..=16);
        out += &format!("{{\"timestamp\":{},\"input_length\":{input},\"output_length\":{output}}}\n", (t * 1000.0).round() as u64);
    }
    print!("{out}");
}
