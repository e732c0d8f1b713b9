//! How a device's clocks give way under its power limit, and the recent load that decides it.
//!
//! A Hopper GPU at its 700 W limit lowers its SM clock until its draw fits: a memory-bound
//! decode step draws 600 W (H100) to 680 W (H200) at the full 1,980 MHz and keeps it, while
//! back-to-back tensor-core work pulls the clock down to 1,365–1,470 MHz and runs 1.16–1.21
//! times slower than as a burst after idle. The kernel tables, timed one shape at a time, hold
//! the burst rate. How much slower a device runs follows its tensor-core load over the power
//! controller's window: the time its matrix work takes at the profile's effective matrix rate,
//! as a share of the time that passes (1 for a large GEMM, 0.06–0.07 for a memory-bound decode
//! step of Llama-3.1-8B at 32 × 2,048 as the GPU timed it; 0.09 as the engines' fused kernels,
//! which `price` prices, run it). The same decode step and GEMM graph replayed back to
//! back in fixed proportions (a mix probe on one H100 SXM and one H200 SXM, 700 W limit) slow
//! both parts alike, by a factor that grows linearly with the load once it passes an onset
//! ([`PowerLimit::factor`]). The load is the matrix work's, not the compute-bound kernels'
//! time: a kernel that is slow for other reasons (MXFP4 experts dequantized in software on
//! Hopper) draws little. The window is the controller's: a 51 ms prefill replayed after idle
//! runs at the burst rate and the second replay straight after it 6–11 % slower (H200), which
//! an average over the last ~100 ms gives ([`PowerWindow`]).

use serde::{Deserialize, Serialize};

/// A device's sustained clocks under its power limit, as the measured mix probe gives them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerLimit {
    /// Tensor-core load (matrix work at the effective matrix rate over the time) up to which
    /// the clocks hold.
    pub onset: f64,
    /// Extra time per unit of load above the onset (work that keeps the tensor cores busy all
    /// the time runs `1 + slowdown × (1 − onset)` times its burst time).
    pub slowdown: f64,
    /// The power controller's averaging window, in milliseconds.
    pub window_ms: f64,
}

impl PowerLimit {
    /// How many times its burst time a device takes while its tensor-core load, averaged over
    /// the window, is `load` (clamped to [0, 1]).
    pub fn factor(&self, load: f64) -> f64 {
        1.0 + self.slowdown * (load.clamp(0.0, 1.0) - self.onset).max(0.0)
    }

    /// The factor of a step of `device_s` seconds at burst clocks whose matrix work takes
    /// `matrix_s` at the effective rate, repeated back to back (what a step timed as the median
    /// of many replays shows).
    pub fn steady_factor(&self, device_s: f64, matrix_s: f64) -> f64 {
        if device_s > 0.0 {
            self.factor(tensor_core_load(device_s, matrix_s))
        } else {
            1.0
        }
    }

    /// Check every field; the message names the field, the value and the valid range.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.onset.is_finite() && (0.0..1.0).contains(&self.onset)) {
            return Err(format!("field `power_limit.onset` is {}; it must be in [0, 1)", self.onset));
        }
        if !(self.slowdown.is_finite() && (0.0..=1.0).contains(&self.slowdown)) {
            return Err(format!(
                "field `power_limit.slowdown` is {}; it must be in [0, 1] (no power limit halves the clock of a device that runs)",
                self.slowdown
            ));
        }
        if !(self.window_ms.is_finite() && self.window_ms > 0.0 && self.window_ms <= 10_000.0) {
            return Err(format!("field `power_limit.window_ms` is {}; it must be in (0, 10000]", self.window_ms));
        }
        Ok(())
    }
}

/// The tensor-core load of work that takes `device_s` at burst clocks, its matrix work
/// `matrix_s` at the effective matrix rate: their ratio in [0, 1] (0 for no work).
pub fn tensor_core_load(device_s: f64, matrix_s: f64) -> f64 {
    if device_s > 0.0 {
        (matrix_s / device_s).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// One device group's recent tensor-core load, averaged (exponentially, over the limit's
/// window) up to the end of its last step. Idle time counts as no load.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PowerWindow {
    load: f64,
    /// When the last step's device work ended, in nanoseconds of simulated time.
    until_ns: u64,
}

impl PowerWindow {
    /// A step whose device work starts at `start_ns` and takes `device_s` seconds at burst
    /// clocks, its matrix work `matrix_s` at the effective rate: the factor its device time
    /// takes (the window's average over the step's span), and the window moved past it.
    pub fn step(&mut self, limit: &PowerLimit, start_ns: u64, device_s: f64, matrix_s: f64) -> f64 {
        if device_s <= 0.0 {
            return 1.0;
        }
        let tau = limit.window_ms * 1e-3;
        let idle = start_ns.saturating_sub(self.until_ns) as f64 * 1e-9;
        let before = self.load * (-idle / tau).exp();
        let load = tensor_core_load(device_s, matrix_s);
        // Mean over the step of load + (before − load)·e^(−t/τ), t from 0 to the step's length.
        let x = device_s / tau;
        // −expm1(−x) keeps its digits for the short steps (x ≈ 1e−4) that 1 − e^(−x) loses.
        let carried = -(-x).exp_m1() / x;
        let factor = limit.factor(load + (before - load) * carried);
        let span = device_s * factor;
        self.load = load + (before - load) * (-span / tau).exp();
        self.until_ns = start_ns.saturating_add((span * 1e9).round() as u64);
        factor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The H200's fitted values (see the device profile).
    const H200: PowerLimit = PowerLimit { onset: 0.2, slowdown: 0.26, window_ms: 100.0 };

    #[test]
    fn the_factor_is_one_below_the_onset_and_linear_above() {
        // Mutation: drop the `.max(0.0)` and an idle or memory-bound device speeds up (load 0 →
        // 0.948).
        assert_eq!(H200.factor(0.0), 1.0);
        assert_eq!(H200.factor(0.2), 1.0);
        assert!((H200.factor(1.0) - 1.208).abs() < 1e-12);
        assert!((H200.factor(0.5) - (1.0 + 0.26 * 0.3)).abs() < 1e-12);
        assert!((H200.factor(2.0) - H200.factor(1.0)).abs() < 1e-15, "loads clamp at 1");
    }

    #[test]
    fn a_step_after_idle_runs_at_burst_and_back_to_back_steps_approach_the_steady_factor() {
        // Mutation: start the window full (the step's own load) and the first replay after idle
        // throttles (1.17 instead of 1.0), against the H200's measured burst.
        let mut w = PowerWindow::default();
        let prefill_s = 0.0515;
        let first = w.step(&H200, 1_000_000_000, prefill_s, 0.85 * prefill_s);
        assert!(first < 1.02, "first replay after idle: {first}");
        let start2 = w.until_ns;
        let second = w.step(&H200, start2, prefill_s, 0.85 * prefill_s);
        // Measured on the H200: the second replay 6-11 % slower than the first.
        assert!(second / first > 1.05 && second / first < 1.11, "second over first: {}", second / first);
        let mut last = second;
        for _ in 0..40 {
            let start = w.until_ns;
            last = w.step(&H200, start, prefill_s, 0.85 * prefill_s);
        }
        assert!((last - H200.steady_factor(prefill_s, 0.85 * prefill_s)).abs() < 1e-6, "steady: {last}");
        // A second of idle empties the window again.
        let after = w.until_ns + 1_000_000_000;
        assert!(w.step(&H200, after, prefill_s, 0.85 * prefill_s) < 1.02);
    }

    #[test]
    fn validation_names_the_field_and_the_range() {
        let bad = PowerLimit { slowdown: 1.5, ..H200 };
        let e = bad.validate().unwrap_err();
        assert!(e.contains("power_limit.slowdown") && e.contains("1.5") && e.contains("[0, 1]"), "{e}");
        let bad = PowerLimit { window_ms: 0.0, ..H200 };
        assert!(bad.validate().unwrap_err().contains("power_limit.window_ms"));
        let bad = PowerLimit { onset: f64::NAN, ..H200 };
        assert!(bad.validate().unwrap_err().contains("power_limit.onset"));
        assert!(H200.validate().is_ok());
    }
}
