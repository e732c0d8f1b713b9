//! Fitting a serving engine's costs on one device to measured runs, with the simulator in the
//! loop.
//!
//! Four parameters per serving engine on one device ([`Params`]): the per-step gap the device
//! waits on the host, the host's own per-step work (which overlapped scheduling hides), its
//! per-running-sequence host time per step and its per-request front-end time; and a fifth,
//! the front end's time per streamed output token: the engine's own, or one of a few slower
//! values ([`SLOWER_FRONTEND_TOKEN_US`]) tried by simulation, because it acts through the front
//! end's queue (a saturated front end delays every token and every new request), which no
//! first-order sensitivity follows. What the
//! device's kernels do (bandwidth, matrix efficiency, grouped GEMMs, collectives) is not
//! fitted: it comes from the device profile and the measured kernel tables, and every engine on
//! a device shares it. A full re-simulation per trial would cost seconds per trial, so the fit
//! alternates two steps:
//!
//! 1. Simulate every run under the current calibration, recording how its mean TTFT and TPOT
//!    depend on each priced component of its steps ([`Sensitivity`]: milliseconds of mean
//!    latency per second of each component).
//! 2. Minimise the error of the first-order prediction those sensitivities give, per device ×
//!    engine, with a derivative-free simplex search ([`nelder_mead`]), regularised toward the
//!    engines' documented overheads ([`Prior`]) and held inside the bounds a real engine stays
//!    within (`hardware::calibration`'s `MAX_*`).
//!
//! Three rounds from each of two starts (`calibrator::starts`: the prior, and a start with
//! host work per sequence that overlapped scheduling would hide at the prior), each simulated:
//! what the fit reports is always a simulated figure, never the linear model's.

use crate::hardware::calibration::{MAX_FRONTEND_REQUEST_US, MAX_SEQ_OVERHEAD_US, MAX_STEP_OVERHEAD_US};
use serde::Serialize;

/// Components of a step's price the calibration scales: one per step (the per-step gap); one
/// per step where the host's work shows (the per-step host work: every step of a synchronous
/// engine, the steps an overlapped engine's host work outlasts the device); running sequences
/// where the host's work shows (the per-sequence host time).
pub const COMPONENTS: usize = 3;
pub const STEP: usize = 0;
pub const HOST: usize = 1;
pub const SEQS: usize = 2;
/// Parameters of one calibration.
pub const P: usize = 4;

/// A run's simulated means and how they move: `ttft[k]` is the mean TTFT (ms) per second of
/// component `k` at the current calibration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Sensitivity {
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub ttft: [f64; COMPONENTS],
    pub tpot: [f64; COMPONENTS],
}

/// The fitted costs of one engine on one device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Params {
    pub step_overhead_us: f64,
    pub step_host_us: f64,
    pub seq_overhead_us: f64,
    pub frontend_request_us: f64,
    /// The front end's time per streamed output token; `None`: the engine profile's own
    /// (`defaults.frontend_output_token_us`). Chosen, not fitted by the simplex (see the
    /// module's doc): the first-order model holds it fixed.
    pub frontend_output_token_us: Option<f64>,
}

/// The front ends slower than the engine profile's own (25 µs a token under vLLM and
/// TensorRT-LLM, 15 under SGLang) a fit tries for each engine × device, µs per output token.
/// TensorRT-LLM's `trtllm-serve` detokenizes each response and builds its OpenAI protocol
/// object in Python on every iteration, which its developers name as the host bottleneck of
/// streaming at high concurrency (their `stream_interval` and `num_postprocess_workers`
/// settings exist to relieve it); its Llama-3.1-8B runs at 128 requests on 4 and 8 H100s
/// stream about 9,000 tokens a second whatever the GPUs, some 110 µs a token all told. 100 µs
/// is the largest value tried: well inside the 1,000 µs a profile may hold, and no slower
/// than what those runs show.
pub const SLOWER_FRONTEND_TOKEN_US: [f64; 3] = [50.0, 75.0, 100.0];

/// Names of the parameters, in [`Params::to_vec`] order.
pub const PARAM_NAMES: [&str; P] = ["step_overhead_us", "step_host_us", "seq_overhead_us", "frontend_request_us"];

impl Params {
    pub fn to_vec(self) -> [f64; P] {
        [self.step_overhead_us, self.step_host_us, self.seq_overhead_us, self.frontend_request_us]
    }
    /// The four simplex-fitted values `v` (in [`Params::to_vec`] order) with the engine
    /// profile's own front-end time per output token.
    pub fn from_vec(v: [f64; P]) -> Self {
        Params {
            step_overhead_us: v[0],
            step_host_us: v[1],
            seq_overhead_us: v[2],
            frontend_request_us: v[3],
            frontend_output_token_us: None,
        }
    }

    /// These parameters with the per-step host work cut so that the step's two fixed parts
    /// together stay within the bound a profile is held to (the fit's penalty keeps them near
    /// it; this makes it exact).
    pub fn within_step_bound(mut self) -> Params {
        self.step_host_us = self.step_host_us.min(MAX_STEP_OVERHEAD_US - self.step_overhead_us).max(0.0);
        self
    }

    /// These parameters with `values` at indices `idx` (of [`Params::to_vec`]).
    pub fn with_values(&self, idx: &[usize], values: &[f64]) -> Params {
        let mut v = self.to_vec();
        for (&i, &x) in idx.iter().zip(values) {
            v[i] = x;
        }
        Params { frontend_output_token_us: self.frontend_output_token_us, ..Params::from_vec(v) }
    }

    /// First-order (TTFT, TPOT) of a run simulated at `self` (`s`), at `next`.
    pub fn predict(&self, s: &Sensitivity, next: &Params) -> (f64, f64) {
        let mut scale = [0.0; COMPONENTS];
        scale[STEP] = (next.step_overhead_us - self.step_overhead_us) * 1e-6;
        scale[HOST] = (next.step_host_us - self.step_host_us) * 1e-6;
        scale[SEQS] = (next.seq_overhead_us - self.seq_overhead_us) * 1e-6;
        let dot = |w: &[f64; COMPONENTS]| w.iter().zip(&scale).map(|(a, b)| a * b).sum::<f64>();
        // The front end's time per request is in every TTFT (uncontended, before any queueing).
        let ttft = s.ttft_ms + dot(&s.ttft) + (next.frontend_request_us - self.frontend_request_us) * 1e-3;
        let tpot = s.tpot_ms + dot(&s.tpot);
        (ttft.max(1e-3), tpot.max(1e-3))
    }
}

/// Where the fit starts and what it is pulled toward, with the bounds of each parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prior {
    pub at: Params,
    pub lower: [f64; P],
    pub upper: [f64; P],
}

impl Prior {
    /// The engines' documented overheads, within the bounds a real engine stays inside
    /// (`hardware::calibration`: 4.5 ms a step for each per-step part and for both together,
    /// 100 µs a sequence a step, 50 ms of front end a request).
    pub fn new(at: Params) -> Self {
        Prior { at, lower: [0.0; P], upper: [MAX_STEP_OVERHEAD_US, MAX_STEP_OVERHEAD_US, MAX_SEQ_OVERHEAD_US, MAX_FRONTEND_REQUEST_US] }
    }

    /// Regularisation toward the prior of parameter `i` at `v`: the squared difference in units
    /// of a typical value (5 ms a step for either per-step part, 50 µs a sequence a step, 5 ms
    /// of the front end's time a request).
    fn penalty_of(&self, i: usize, v: f64) -> f64 {
        let a = self.at.to_vec()[i];
        match i {
            2 => ((v - a) / 50.0).powi(2),
            _ => ((v - a) / 5_000.0).powi(2),
        }
    }

    /// Unbounded coordinates ↔ parameters (a logistic map into each bound).
    fn params_at(&self, z: &[f64; P]) -> [f64; P] {
        std::array::from_fn(|i| self.lower[i] + (self.upper[i] - self.lower[i]) / (1.0 + (-z[i]).exp()))
    }
    fn coords_of(&self, p: &[f64; P]) -> [f64; P] {
        std::array::from_fn(|i| {
            let span = self.upper[i] - self.lower[i];
            let t = ((p[i] - self.lower[i]) / span).clamp(1e-6, 1.0 - 1e-6);
            (t / (1.0 - t)).ln()
        })
    }
}

/// Weight of TPOT's error against TTFT's in the loss. TTFT carries queueing dynamics that no
/// per-device parameter can represent (cohorts of requests that prefill together, the
/// benchmark harness's own timing), while a TPOT error moves every token of every request.
/// Median TTFT / TPOT errors on the training file (vLLM; TensorRT-LLM) with the current model:
/// 22.7 / 7.0 %; 25.8 / 8.9 % at 1, 21.9 / 7.4 %; 26.1 / 8.6 % at 1.5 (the built-in fit),
/// 21.1 / 7.3 %; 26.3 / 8.6 % at 2. Equal weights trade TensorRT-LLM's TPOT for TTFT; 1.5 and
/// 2 differ by less than the fit moves under any small change of the model (about a point), so
/// the weight was not re-tuned.
pub const TPOT_WEIGHT: f64 = 1.5;

/// Weight of the prior against the mean loss of the runs.
pub const PRIOR_WEIGHT: f64 = 0.03;

/// Error of one latency: |ln(predicted / measured)|, smoothed near zero so the simplex sees a
/// slope (a median-seeking loss: large errors weigh linearly, not squared).
pub fn loss(pred: f64, measured: f64) -> f64 {
    let d = (pred / measured).ln();
    (d * d + 1e-4).sqrt()
}

/// One run the fit sees: what was measured, and its sensitivities at `at`.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub sens: Sensitivity,
}

/// The error of one run's predicted (TTFT, TPOT) against its measurement, as the fit weighs it.
pub fn run_loss(ttft: f64, tpot: f64, measured: &Sample) -> f64 {
    loss(ttft, measured.ttft_ms) + TPOT_WEIGHT * loss(tpot, measured.tpot_ms)
}

/// The parameters that minimise the mean loss of `samples` (simulated at `at`) plus the prior.
pub fn fit_group(samples: &[Sample], at: &Params, prior: &Prior) -> Params {
    let members: Vec<Member> = samples.iter().map(|s| Member { sample: *s, at: *at, cur: *at }).collect();
    let all: Vec<usize> = (0..P).collect();
    at.with_values(&all, &fit_block(&members, &all, prior))
}

/// One run in a block fit: its sample, the calibration it was simulated at, and the current
/// values of the parameters the block does not fit.
#[derive(Debug, Clone, Copy)]
pub struct Member {
    pub sample: Sample,
    pub at: Params,
    pub cur: Params,
}

/// Fit the parameters at indices `free` (shared by every member; the others stay at each
/// member's `cur`), minimising the members' mean loss plus the prior on the free ones. Starts
/// from the first member's current values; returns the fitted values in `free` order.
pub fn fit_block(members: &[Member], free: &[usize], prior: &Prior) -> Vec<f64> {
    let Some(first) = members.first() else {
        return free.iter().map(|&i| prior.at.to_vec()[i]).collect();
    };
    let z0 = prior.coords_of(&first.cur.to_vec());
    // The free coordinates, clamped to ±Z_MAX, mapped back to parameter values.
    let values = |x: &[f64]| -> Vec<f64> {
        let mut z = z0;
        for (&i, &xi) in free.iter().zip(x) {
            z[i] = xi.clamp(-Z_MAX, Z_MAX);
        }
        let full = prior.params_at(&z);
        free.iter().map(|&i| full[i]).collect()
    };
    let objective = |x: &[f64]| {
        // Beyond ±Z_MAX the logistic map is flat (a parameter at its bound): the excess costs a
        // little, so the simplex does not run off along a saturated coordinate and drag the
        // others with it.
        let excess: f64 = x.iter().map(|xi| (xi - xi.clamp(-Z_MAX, Z_MAX)).powi(2)).sum();
        let v = values(x);
        let sum: f64 = members
            .iter()
            .map(|m| {
                let (ttft, tpot) = m.at.predict(&m.sample.sens, &m.cur.with_values(free, &v));
                run_loss(ttft, tpot, &m.sample)
            })
            .sum();
        let pen: f64 = free.iter().zip(&v).map(|(&i, &vi)| prior.penalty_of(i, vi)).sum();
        // The two per-step parts share one bound: past it, a steep cost per 100 µs.
        let fixed = first.cur.with_values(free, &v);
        let over = ((fixed.step_overhead_us + fixed.step_host_us - MAX_STEP_OVERHEAD_US) / 100.0).max(0.0);
        sum / members.len() as f64 + PRIOR_WEIGHT * pen + 1e-3 * excess + over * over
    };
    let x0: Vec<f64> = free.iter().map(|&i| z0[i]).collect();
    values(&nelder_mead(objective, &x0, 0.5, 600 * free.len().max(1)))
}

/// Coordinates beyond which a parameter sits at its bound (logistic(12) = 0.999994).
const Z_MAX: f64 = 12.0;

/// Minimise `f` from `x0` with the Nelder–Mead simplex (standard coefficients: reflection 1,
/// expansion 2, contraction ½, shrink ½), at most `max_evals` evaluations. Deterministic.
pub fn nelder_mead(f: impl Fn(&[f64]) -> f64, x0: &[f64], step: f64, max_evals: usize) -> Vec<f64> {
    let n = x0.len();
    let mut simplex: Vec<(Vec<f64>, f64)> = Vec::with_capacity(n + 1);
    simplex.push((x0.to_vec(), f(x0)));
    for i in 0..n {
        let mut x = x0.to_vec();
        x[i] += step;
        let fx = f(&x);
        simplex.push((x, fx));
    }
    let mut evals = n + 1;
    let combine = |a: &[f64], b: &[f64], t: f64| -> Vec<f64> { a.iter().zip(b).map(|(ai, bi)| ai + t * (bi - ai)).collect() };
    while evals < max_evals {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        if (simplex[n].1 - simplex[0].1).abs() <= 1e-10 * (1.0 + simplex[0].1.abs()) {
            break;
        }
        let centroid: Vec<f64> = (0..n).map(|i| simplex[..n].iter().map(|s| s.0[i]).sum::<f64>() / n as f64).collect();
        let (worst, f_worst) = simplex[n].clone();
        let reflected = combine(&centroid, &worst, -1.0);
        let fr = f(&reflected);
        evals += 1;
        if fr < simplex[0].1 {
            let expanded = combine(&centroid, &worst, -2.0);
            let fe = f(&expanded);
            evals += 1;
            simplex[n] = if fe < fr { (expanded, fe) } else { (reflected, fr) };
        } else if fr < simplex[n - 1].1 {
            simplex[n] = (reflected, fr);
        } else {
            let contracted = combine(&centroid, &worst, 0.5);
            let fc = f(&contracted);
            evals += 1;
            if fc < f_worst {
                simplex[n] = (contracted, fc);
            } else {
                let best = simplex[0].0.clone();
                for s in simplex.iter_mut().skip(1) {
                    s.0 = combine(&best, &s.0, 0.5);
                    s.1 = f(&s.0);
                }
                evals += n;
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex.swap_remove(0).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nelder_mead_finds_the_minimum_of_a_bowl() {
        // Fails if the reflection sign is flipped (the simplex walks uphill).
        let x = nelder_mead(|x: &[f64]| (x[0] - 3.0).powi(2) + 10.0 * (x[1] + 1.0).powi(2), &[0.0, 0.0], 0.5, 2000);
        assert!((x[0] - 3.0).abs() < 1e-3 && (x[1] + 1.0).abs() < 1e-3, "{x:?}");
    }

    fn params(step_us: f64, seq_us: f64) -> Params {
        Params {
            step_overhead_us: step_us,
            step_host_us: 0.0,
            seq_overhead_us: seq_us,
            frontend_request_us: 0.0,
            frontend_output_token_us: None,
        }
    }

    #[test]
    fn the_first_order_prediction_moves_each_component_by_its_weight() {
        // Weights in ms of TPOT per second of each component: 1 000 (one step per token) and
        // 2 000 000 (2 000 sequences per step): 2 ms more per step adds 2 ms, 1 µs more per
        // sequence adds 2 ms. Mutation: read SEQS's weight for STEP.
        let s = Sensitivity { ttft_ms: 50.0, tpot_ms: 12.0, ttft: [0.0; 3], tpot: [1000.0, 500.0, 2e6] };
        let (_, tpot) = params(1000.0, 0.0).predict(&s, &params(3000.0, 1.0));
        assert!((tpot - (12.0 + 2.0 + 2.0)).abs() < 1e-9, "{tpot}");
        // The host's per-step work moves a run by its own weight (here half the steps show
        // it): 2 ms more adds 1 ms. Mutation: scale HOST by the gap's change.
        let host = Params { step_host_us: 2000.0, ..params(1000.0, 0.0) };
        let (_, tpot) = params(1000.0, 0.0).predict(&s, &host);
        assert!((tpot - 13.0).abs() < 1e-9, "{tpot}");
    }

    #[test]
    fn a_fit_recovers_the_overhead_that_generated_the_measurements() {
        // Runs whose TPOT is some device time plus one step's overhead of 4 ms: simulated at 1 ms
        // overhead, the fit must find 4 ms (within the prior's pull). Mutation: drop the step
        // component from the prediction and the fit stays at 1 ms.
        let at = params(1000.0, 0.2);
        let samples: Vec<Sample> = (1..=20)
            .map(|i| {
                let dev = 2.0 * i as f64;
                let sens = Sensitivity { ttft_ms: 100.0, tpot_ms: dev + 1.0, ttft: [0.0; 3], tpot: [1000.0, 0.0, 0.0] };
                Sample { ttft_ms: 100.0, tpot_ms: dev + 4.0, sens }
            })
            .collect();
        let p = fit_group(&samples, &at, &Prior::new(at));
        assert!((p.step_overhead_us - 4000.0).abs() < 150.0, "{p:?}");
    }

    #[test]
    fn no_fit_leaves_the_bounds() {
        // Measurements 50 ms slower per token than any overhead allows: the step overhead stops
        // at its 5 ms bound. Mutation: widen the prior's upper bound and it goes past.
        let at = params(500.0, 0.2);
        let sens = Sensitivity { ttft_ms: 100.0, tpot_ms: 10.0, ttft: [0.0; 3], tpot: [1000.0, 0.0, 0.0] };
        let samples = vec![Sample { ttft_ms: 100.0, tpot_ms: 60.0, sens }];
        let p = fit_group(&samples, &at, &Prior::new(at));
        assert!(p.step_overhead_us <= MAX_STEP_OVERHEAD_US && p.step_overhead_us > MAX_STEP_OVERHEAD_US - 100.0, "{p:?}");
    }
}

#[cfg(test)]
mod block_tests {
    use super::*;

    #[test]
    fn a_parameter_no_run_depends_on_stays_at_its_prior() {
        // Runs with no sequence sensitivity (no slope for the per-sequence cost): only the
        // prior decides it. Fails if the block fit maps its coordinates onto the wrong
        // parameters, or the prior's pull is lost.
        let at = Params {
            step_overhead_us: 500.0,
            step_host_us: 250.0,
            seq_overhead_us: 10.0,
            frontend_request_us: 10_000.0,
            frontend_output_token_us: None,
        };
        let sens = Sensitivity { ttft_ms: 100.0, tpot_ms: 10.0, ttft: [50.0, 0.0, 0.0], tpot: [900.0, 0.0, 0.0] };
        let members = vec![Member { sample: Sample { ttft_ms: 120.0, tpot_ms: 12.0, sens }, at, cur: at }];
        let prior = Prior::new(at);
        let v = fit_block(&members, &[0, 1, 2, 3], &prior);
        assert!((v[2] - 10.0).abs() < 0.2, "per-sequence cost moved without data: {v:?}");
        assert!((v[1] - 250.0).abs() < 5.0, "per-step host work moved without data: {v:?}");
        // A run the overheads cannot reach (measured far below the simulation even with none):
        // they go to their bound, and the parameter without data still stays. Fails without the
        // clamp of saturated coordinates (the simplex ran off and took it to a bound).
        let fast = vec![Member { sample: Sample { ttft_ms: 10.0, tpot_ms: 1.0, sens }, at, cur: at }];
        let v = fit_block(&fast, &[0, 1, 2, 3], &prior);
        assert!(v[0] < 5.0 && (v[2] - 10.0).abs() < 0.5, "{v:?}");
    }
}
