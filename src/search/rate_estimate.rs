//! Where the goodput search looks first: a closed-form estimate of the offered rate at which a
//! deployment's mean TTFT or TPOT reaches its limit, priced with the candidate's own steps.
//!
//! The estimate only chooses the first rate the search simulates; the answer is always the
//! simulator's (see `goodput`). A good first guess saves simulations: the boundary between two
//! adjacent grid rates needs two of them, and a guess within a grid step (5 %) of it often
//! gives exactly those two.
//!
//! The model, per instance, at an offered rate λ spread evenly over `n` instances:
//! - a decode step of `b` running sequences at the mean context (prompt + half the output)
//!   takes `s(b)`, as the simulator prices it (the serving engine's host time, overlap and
//!   CUDA graphs included);
//! - each request's prompt rides in the decode steps as chunks of at most the token budget,
//!   adding `p(b)` seconds in all (the mixed steps' time above `s(b)`);
//! - every step emits one token for each running sequence, so of each second `λ/n · p(b)` goes
//!   to prompts and TPOT = s(b) / (1 − λ/n · p(b));
//! - TTFT = the prompt's chunks (each a mixed step) + half a step of wait for the one running
//!   + the M/D/1 wait for the prompts ahead (ρ · p / (2 (1 − ρ)), ρ = λ/n · p);
//! - Little's law closes it: b = λ/n · (TTFT + (L − 1) · TPOT), the smallest fixed point from
//!   b = 0; none below the engine's running cap means the queue grows without bound.
//!
//! It ignores the spread of the lengths and the tail of a percentile statistic (the search
//! corrects both), and pipeline stages (no estimate: the search starts from the offered rate).

use super::slo_check::OpenLoopDeployment;
use crate::cost::{BatchShape, PhaseLoad, StepCostModel};
use crate::sim::{steady_seconds, InstanceConfig};

/// Fixed-point iterations for the running batch at one rate.
const FIXED_POINT_ITERATIONS: usize = 200;
/// Bisection steps on log(rate) (2⁻⁴⁰ of a factor of 2¹⁴: far below a grid step).
const BISECTION_STEPS: usize = 40;

/// One instance of a deployment under an offered load: its steps priced as asked.
struct LoadModel<'c> {
    cfg: &'c InstanceConfig,
    cost: &'c dyn StepCostModel,
    instances: f64,
    /// Prompt tokens per request after the prefix cache, and its context when done.
    prompt: u64,
    prompt_context: u64,
    /// Mean output tokens, and the mean decode context.
    output: f64,
    decode_context: u64,
}

/// Mean TTFT and TPOT (seconds) of one instance's requests at a per-instance rate.
#[derive(Debug, Clone, Copy)]
struct Latency {
    ttft_s: f64,
    tpot_s: f64,
}

impl LoadModel<'_> {
    /// A decode step of `b` sequences (fractional `b`: between its neighbours), with a
    /// prompt chunk of `chunk` tokens ending at `context` riding in it.
    fn step(&self, b: f64, chunk: Option<(u64, u64)>) -> f64 {
        let at = |seqs: u64| {
            let mut shape = BatchShape::default();
            if seqs > 0 {
                shape.decode = PhaseLoad::uniform(seqs, 1, self.decode_context);
                shape.sampled = seqs;
            }
            if let Some((tokens, context)) = chunk {
                shape.prefill = PhaseLoad::uniform(1, tokens, context);
                shape.sampled += 1;
            }
            if shape.is_empty() {
                return 0.0;
            }
            steady_seconds(self.cfg, self.cost, &shape)
        };
        let lo = b.floor().max(0.0);
        let w = b - lo;
        let t_lo = at(lo as u64);
        if w == 0.0 {
            t_lo
        } else {
            t_lo + w * (at(lo as u64 + 1) - t_lo)
        }
    }

    /// The prompt's chunks: (tokens, context after) under the token budget.
    fn chunks(&self) -> Vec<(u64, u64)> {
        let size = if self.cfg.chunked_prefill { self.cfg.budget.max(1) } else { self.prompt.max(1) };
        let cached = self.prompt_context - self.prompt;
        let mut out = Vec::new();
        let mut done = 0;
        while done < self.prompt {
            let q = size.min(self.prompt - done);
            done += q;
            out.push((q, cached + done));
        }
        out
    }

    /// Latencies at per-instance rate `lambda` (requests per second) with `b` running.
    fn latency(&self, lambda: f64, b: f64, chunks: &[(u64, u64)]) -> Latency {
        // At least the sequence whose latency this is runs: a prompt's share of a step is
        // what it adds to a decode step, never the step's fixed cost.
        let b = b.max(1.0);
        let s = self.step(b, None);
        let mixed: f64 = chunks.iter().map(|&c| self.step(b, Some(c))).sum();
        let p = (mixed - s * chunks.len() as f64).max(0.0);
        let rho = lambda * p;
        if rho >= 1.0 {
            return Latency { ttft_s: f64::INFINITY, tpot_s: f64::INFINITY };
        }
        let wait = rho * p / (2.0 * (1.0 - rho));
        Latency { ttft_s: mixed + 0.5 * s + wait, tpot_s: s / (1.0 - rho) }
    }

    /// Latencies at offered rate `rate` over every instance; infinite past the running cap.
    fn at_rate(&self, rate: f64, chunks: &[(u64, u64)]) -> Latency {
        let lambda = rate / self.instances;
        let cap = self.cfg.max_num_seqs as f64;
        let mut b = 0.0;
        for _ in 0..FIXED_POINT_ITERATIONS {
            let l = self.latency(lambda, b, chunks);
            let next = lambda * (l.ttft_s + (self.output - 1.0).max(0.0) * l.tpot_s);
            if !next.is_finite() || next > cap {
                return Latency { ttft_s: f64::INFINITY, tpot_s: f64::INFINITY };
            }
            if (next - b).abs() <= 1e-6 * (1.0 + b) {
                return self.latency(lambda, next, chunks);
            }
            b = next;
        }
        self.latency(lambda, b, chunks)
    }
}

/// The offered rate (req/s) at which the estimated mean TTFT or TPOT of `dep` reaches its
/// limit (`limits` in ms); `None` without a finite limit, with pipeline stages, or when no
/// rate from `r0 / 2¹⁴` to `r0 · 2¹⁴` is estimated to meet ([`estimate`]).
pub fn boundary_rate(dep: &OpenLoopDeployment, r0: f64, limits: (f64, f64)) -> Option<f64> {
    let setup = dep.ctx.sim_setup();
    if setup.pipeline().is_some() {
        return None;
    }
    let (cfg, _) = setup.config(dep.max_num_seqs, dep.budget);
    let w = &dep.ctx.plan.workload;
    let lengths =
        MeanLengths { prompt: w.input.effective(w.prefix_cache_hit_rate), context: w.input.mean_raw(), output: w.output.mean_raw() };
    estimate(&cfg.instance, &setup.cost, dep.instances, lengths, r0, limits)
}

/// A request's mean lengths, tokens.
#[derive(Debug, Clone, Copy)]
pub struct MeanLengths {
    /// Prompt tokens to prefill (after the prefix cache).
    pub prompt: u64,
    /// The whole prompt (cached tokens included).
    pub context: u64,
    pub output: u64,
}

/// The estimate on `instances` instances configured as `cfg`, priced by `cost`.
pub fn estimate(
    cfg: &InstanceConfig,
    cost: &dyn StepCostModel,
    instances: u32,
    lengths: MeanLengths,
    r0: f64,
    limits: (f64, f64),
) -> Option<f64> {
    if !(limits.0.is_finite() || limits.1.is_finite()) || !(r0 > 0.0 && r0.is_finite()) {
        return None;
    }
    let output = lengths.output as f64;
    let model = LoadModel {
        cfg,
        cost,
        instances: instances.max(1) as f64,
        prompt: lengths.prompt,
        prompt_context: lengths.context.max(lengths.prompt),
        output,
        decode_context: lengths.context + (output / 2.0) as u64,
    };
    let chunks = model.chunks();
    let load = |rate: f64| {
        let l = model.at_rate(rate, &chunks);
        let share = |x: f64, limit: f64| if limit.is_finite() { x * 1e3 / limit } else { 0.0 };
        share(l.ttft_s, limits.0).max(share(l.tpot_s, limits.1))
    };
    // The load grows with the rate; bisect log(rate) for load = 1.
    let span = 14.0 * std::f64::consts::LN_2;
    let (mut lo, mut hi) = (r0.ln() - span, r0.ln() + span);
    if load(lo.exp()) > 1.0 {
        return None;
    }
    if load(hi.exp()) <= 1.0 {
        return Some(hi.exp());
    }
    for _ in 0..BISECTION_STEPS {
        let mid = 0.5 * (lo + hi);
        if load(mid.exp()) <= 1.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo.exp())
}

#[cfg(test)]
mod tests;
