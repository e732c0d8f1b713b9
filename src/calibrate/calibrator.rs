//! The whole fit: group measured runs by serving engine × device, run the rounds of
//! [`super::fit`] over every group at once (each round is one simulation of every run), and
//! turn the result into engine profiles that every command accepts; and cross-validate the fit
//! by holding out each model's or each device's runs ([`cross_validate`]).

use super::fit::{fit_block, Member, Params, Prior, Sample, Sensitivity, SLOWER_FRONTEND_TOKEN_US};
use super::measured::MeasuredRun;
use super::predict::{Prediction, Predictor};
use super::table::{error_pct, summarise};
use crate::hardware::calibration::{DeviceCalibration, EngineProfile, EngineProfiles, FitRecord, Overheads};
use std::collections::BTreeMap;

/// Rounds of simulate-then-fit (the calibration after the last one is simulated too).
pub const ROUNDS: usize = 3;

/// (serving engine, device profile name): one calibration.
pub type GroupKey = (String, String);

/// What a fit produced.
#[derive(Debug, Clone)]
pub struct FitOutcome {
    /// The engine profiles with the fitted device entries.
    pub engines: EngineProfiles,
    /// Predictions before (the prior: datasheet efficiencies, engine default overheads) and
    /// after the fit, one per run.
    pub before: Vec<Result<Prediction, String>>,
    pub after: Vec<Result<Prediction, String>>,
    /// The fitted parameters of each group, with its run count.
    pub params: BTreeMap<GroupKey, (Params, usize)>,
    /// Runs left out of the fit by [`inconsistent_runs`] (still predicted and tabulated):
    /// (index into the runs, why).
    pub screened: Vec<(usize, String)>,
    /// Groups whose best calibration leaves their runs' median TTFT error above
    /// [`UNTRUSTED_TTFT_PCT`] (or predicts none of them), with that median: their entries are
    /// not written, and their devices take the engine's defaults.
    pub untrusted: Vec<(GroupKey, f64)>,
}

/// Median |error| of TTFT (percent) above which a group's fit is not trusted to carry engine
/// costs: its best calibration is off by more than a factor of two on its own runs, so what
/// it learned is not the engine's cost but whatever the runs have that the model does not (the
/// training file's SGLang runs of Llama-3.1-8B in FP8 on H200: 176.5 % after the fit, its
/// per-step cost at the 4.5 ms bound, which made every model under SGLang on an H200 slower
/// than on an H100 and, through the defaults, added 1.1 ms a step on every other device).
/// Every other group of the training file fits within 33 % (TensorRT-LLM on H100: 32.8 %).
pub const UNTRUSTED_TTFT_PCT: f64 = 100.0;

/// Share by which a run's TPOT may fall below the run of its series at the next lower
/// concurrency before the fit leaves it out. On the training file, apart from the runs it
/// leaves out, no run falls by more than 20 % and one by 10–20 % (17 %: measurement noise; the
/// source listed it twice).
pub const TPOT_DROP_LIMIT: f64 = 0.3;

/// Runs whose measurement a batching server cannot produce: a series (same engine, GPU,
/// model, layout and lengths) whose TPOT falls by more than [`TPOT_DROP_LIMIT`] from one
/// concurrency to the next higher one. More sequences per step never make a step faster, so
/// such a run did not hold its concurrency (the server capped or failed requests). In the
/// training file these are vLLM gpt-oss-120b runs on H100 at 512 requests: TPOT 3.6–5.6 ms
/// where 64 requests measured 7.1–16.7 ms, and mean TTFTs of 20–120 s. Left in, the fit
/// explains them by dropping the per-sequence overhead of every vLLM H100 run to zero.
/// Returns (index, why), in run order.
pub fn inconsistent_runs(runs: &[MeasuredRun]) -> Vec<(usize, String)> {
    type Series<'a> = (&'a str, &'a str, &'a str, u32, u32, u32, u32, u64, u64);
    let mut series: BTreeMap<Series, BTreeMap<u64, Vec<usize>>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        let key = (r.engine.as_str(), r.gpu.as_str(), r.model.as_str(), r.tp, r.attention_dp, r.moe_tp, r.moe_ep, r.isl, r.osl);
        series.entry(key).or_default().entry(r.concurrency).or_default().push(i);
    }
    let mut out = Vec::new();
    for by_c in series.values() {
        // Mean TPOT per concurrency (repeated runs of one point averaged), in concurrency order.
        let points: Vec<(u64, f64, &Vec<usize>)> =
            by_c.iter().map(|(&c, idx)| (c, idx.iter().map(|&i| runs[i].tpot_ms).sum::<f64>() / idx.len() as f64, idx)).collect();
        for w in points.windows(2) {
            let ((c0, t0, _), (c1, _, idx)) = (w[0], w[1]);
            for &i in idx {
                if runs[i].tpot_ms < (1.0 - TPOT_DROP_LIMIT) * t0 {
                    out.push((
                        i,
                        format!(
                            "TPOT {:.2} ms at {c1} requests is {:.0} % below {t0:.2} ms at {c0}",
                            runs[i].tpot_ms,
                            (1.0 - runs[i].tpot_ms / t0) * 100.0
                        ),
                    ));
                }
            }
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out
}

/// The engine profile a run is priced with.
fn engine_of(run: &MeasuredRun) -> String {
    crate::quant::NamedEnum::name(super::predict::serving_engine_of(run)).to_string()
}

/// Host overheads the fit starts from and is pulled toward, the same for every engine so that
/// no engine's figures are presumed: 0.5 ms a step of gap the device waits (the graph's
/// launch, the hand-over of inputs and sampled tokens: the prior's per-step cost before the
/// host's work was split from it) and 0.5 ms of the host's own work for the step (the
/// scheduler's Python pass, building the inputs: hidden behind the device under overlapped
/// scheduling); 10 µs a running sequence a step (the scheduler's, the input
/// preparation's and the output processing's work for it); 2 ms of the front end's time a
/// request (HTTP and the tokenizer call; the per-token front-end times are not fitted and keep
/// the profile's). The per-sequence cost is fitted per step: it is the engine's host work for a
/// running request (Python loops over the requests, not over the layers). A synchronous engine
/// (vLLM before 0.14) pays all of the host's work on every step; an overlapped one only the gap
/// and what of its work outlasts the device, so runs of both kinds on one device tell the two
/// per-step parts apart. Fixed here, not read from the profiles, so that re-fitting the
/// built-in profiles gives the same result.
pub const PRIOR_OVERHEADS: Overheads = Overheads {
    step_overhead_us: 500.0,
    step_host_us: 500.0,
    seq_overhead_us: 10.0,
    frontend_request_us: Some(2000.0),
    frontend_input_token_us: None,
    frontend_output_token_us: None,
};

/// The prior of every group: [`PRIOR_OVERHEADS`].
fn prior() -> Prior {
    let o = PRIOR_OVERHEADS;
    Prior::new(Params {
        step_overhead_us: o.step_overhead_us,
        step_host_us: o.step_host_us,
        seq_overhead_us: o.seq_overhead_us,
        frontend_request_us: o.frontend_request_us.unwrap_or(0.0),
        frontend_output_token_us: o.frontend_output_token_us,
    })
}

/// `p` rounded as a profile keeps it (whole µs per step, tenths of a µs per sequence, whole µs
/// of front end per request), within the per-step bound, so that what the fit simulates and
/// reports is what the file says.
fn rounded(p: &Params) -> Params {
    let r = |x: f64, per_unit: f64| (x * per_unit).round() / per_unit;
    Params {
        step_overhead_us: r(p.step_overhead_us, 1.0),
        step_host_us: r(p.step_host_us, 1.0),
        seq_overhead_us: r(p.seq_overhead_us, 10.0),
        frontend_request_us: r(p.frontend_request_us, 1.0),
        frontend_output_token_us: p.frontend_output_token_us.map(|t| r(t, 1.0)),
    }
    .within_step_bound()
}

/// The device entry of `p` (rounded).
fn entry(device: &str, p: &Params) -> DeviceCalibration {
    let p = rounded(p);
    DeviceCalibration {
        device: device.to_string(),
        overheads: Overheads {
            step_overhead_us: p.step_overhead_us,
            step_host_us: p.step_host_us,
            seq_overhead_us: p.seq_overhead_us,
            frontend_request_us: Some(p.frontend_request_us),
            frontend_input_token_us: None,
            frontend_output_token_us: p.frontend_output_token_us,
        },
        fit: None,
    }
}

/// Engine profiles with one device entry per group set to `params`.
fn profiles_with(base: &EngineProfiles, engines: &[String], params: &BTreeMap<GroupKey, Params>) -> EngineProfiles {
    let mut out = base.clone();
    out.calibrated = true;
    let mut engines = engines.to_vec();
    engines.extend(params.keys().map(|(e, _)| e.clone()));
    engines.sort();
    engines.dedup();
    for e in engines {
        let mut profile = base.get(&e).clone();
        profile.devices = params.iter().filter(|((pe, _), _)| *pe == e).map(|((_, d), p)| entry(d, p)).collect();
        profile.file = None;
        out.replace(profile);
    }
    out
}

/// Fit every engine × device group of `runs` from the two [`starts`] (the prior and a
/// host-heavy one; `predictor`'s device entries, if any, are ignored), keeping per group the
/// best simulated calibration of either; then simulate each slower front end
/// ([`slower_front_ends`]) at that best.
pub fn fit(predictor: &Predictor, runs: &[MeasuredRun]) -> FitOutcome {
    let base = predictor.engines().clone();
    let screened = inconsistent_runs(runs);
    let left_out: std::collections::BTreeSet<usize> = screened.iter().map(|(i, _)| *i).collect();
    let mut groups: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        if predictor.device(&r.target.device).is_some() && !left_out.contains(&i) {
            groups.entry((engine_of(r), r.target.device.clone())).or_default().push(i);
        }
    }
    let priors: BTreeMap<GroupKey, Prior> = groups.keys().map(|k| (k.clone(), prior())).collect();
    let mut before = Vec::new();
    // Per group, the simulated calibration with the lowest loss so far, and its predictions:
    // the first-order fit can overshoot, so the result is the best simulated round, never
    // the linear model's promise.
    let mut best: BTreeMap<GroupKey, (f64, Params)> = BTreeMap::new();
    let mut after: Vec<Result<Prediction, String>> = vec![Err("not predicted".into()); runs.len()];
    let mut rounds = Rounds { predictor, base: &base, runs, groups: &groups, priors: &priors, best: &mut best, after: &mut after };
    for (n, start) in starts().iter().enumerate() {
        let all = groups.keys().map(|k| (k.clone(), *start)).collect();
        let first = rounds.run(all, ROUNDS);
        if n == 0 {
            before = first.iter().map(prediction_of).collect();
        }
    }
    let anchors: BTreeMap<GroupKey, Params> = rounds.best.iter().map(|(k, (_, p))| (k.clone(), *p)).collect();
    for trial in slower_front_ends(&anchors) {
        rounds.run(trial, 0);
    }
    let mut current: BTreeMap<GroupKey, Params> = BTreeMap::new();
    let mut untrusted = Vec::new();
    for (k, (_, params)) in best {
        let ttft = medians(runs, &groups[&k], &after)[0];
        if ttft.is_nan() || ttft > UNTRUSTED_TTFT_PCT {
            untrusted.push((k, ttft));
        } else {
            current.insert(k, params);
        }
    }
    let names: Vec<String> = groups.keys().map(|(e, _)| e.clone()).collect();
    let mut engines = profiles_with(&base, &names, &current);
    record_fits(&mut engines, &groups, runs, &before, &after);
    let params = current.iter().map(|(k, p)| (k.clone(), (rounded(p), groups[k].len()))).collect();
    // Screened runs, and the runs of a group whose entry is not written (its device now takes
    // the engine's defaults), are predicted by the written profiles: they stay in the tables.
    let fitted = predictor.with_engines(engines.clone());
    let repredicted = untrusted.iter().flat_map(|(k, _)| groups[k].iter().copied());
    for i in left_out.iter().copied().chain(repredicted) {
        after[i] = fitted.predict(&runs[i]);
    }
    FitOutcome { engines, before, after, params, screened, untrusted }
}

/// Where the fit's rounds start: the prior, and a calibration whose host work per running
/// sequence is half its bound, both with the engine's own front end. Under overlapped
/// scheduling host work hidden behind the device moves no latency, so the first-order fit sees
/// no slope toward it from the prior; a run whose steps are host-bound at high concurrency
/// (many sequences, little device time per step: Llama-3.1-8B at TP 8 and 512 requests under
/// SGLang measured 29 ms a token where its kernels take about 10) is only found from a start
/// on the other side of that kink. Each group keeps whichever start's rounds simulated best.
fn starts() -> [Params; 2] {
    let p = prior().at;
    [p, Params { seq_overhead_us: crate::hardware::calibration::MAX_SEQ_OVERHEAD_US / 2.0, ..p }]
}

/// The calibrations the slower front ends are tried at: for each of
/// [`SLOWER_FRONTEND_TOKEN_US`], every group's best calibration from the starts (`anchors`)
/// with that front-end time per output token, simulated once (no rounds: one pass of every run
/// per value instead of eight). Re-fitting the four costs around each value did not change
/// the choice on the training file: with three rounds from both starts at every value the fit
/// chose the same values (TensorRT-LLM on H100 at 75 µs, every other group the engine's own)
/// and TensorRT-LLM's medians within 0.2 points (31.0 / 6.5 % against 31.2 / 6.5 % here), in
/// 141 s of fit against 50 s on two cores.
fn slower_front_ends(anchors: &BTreeMap<GroupKey, Params>) -> Vec<BTreeMap<GroupKey, Params>> {
    SLOWER_FRONTEND_TOKEN_US
        .iter()
        .map(|&t| anchors.iter().map(|(k, p)| (k.clone(), Params { frontend_output_token_us: Some(t), ..*p })).collect())
        .collect()
}

/// Share of its loss a calibration with a front end slower than its engine's own must save to
/// be kept. On the training file the best slower value saved 0.0 % (SGLang on H100), 0.1 %
/// (SGLang on H200), 1.1 % (TensorRT-LLM on H200), 5.1 % (vLLM on H100) and 10.5 %
/// (TensorRT-LLM on H100, whose Llama-3.1-8B runs at 128 requests are bound by it), and was
/// worse for the other three groups. vLLM's 5.1 % is not a front end's: 60 % of it is one run
/// (gpt-oss-120b at 512 requests, TP 4, 1024 in / 8,192 out, mean TTFT 303 s, which a 100 µs
/// front end brings from 0.5 to 4 s), the rest a few Qwen3-32B TTFTs at TP 8; 8 % keeps it
/// out and TensorRT-LLM's in.
const SLOWER_FRONTEND_CHARGE: f64 = 0.08;

/// A group's simulated `loss` at `p` as the fit ranks calibrations (see
/// [`SLOWER_FRONTEND_CHARGE`]).
fn charged(loss: f64, p: &Params) -> f64 {
    match p.frontend_output_token_us {
        Some(_) => loss / (1.0 - SLOWER_FRONTEND_CHARGE),
        None => loss,
    }
}

/// The rounds of one start: each simulates every run at the current calibrations, keeps each
/// group's best simulated calibration (`best`, with its predictions in `after`), and fits the
/// next calibrations from the sensitivities.
struct Rounds<'a> {
    predictor: &'a Predictor,
    base: &'a EngineProfiles,
    runs: &'a [MeasuredRun],
    groups: &'a BTreeMap<GroupKey, Vec<usize>>,
    priors: &'a BTreeMap<GroupKey, Prior>,
    best: &'a mut BTreeMap<GroupKey, (f64, Params)>,
    after: &'a mut Vec<Result<Prediction, String>>,
}

impl Rounds<'_> {
    /// Run `rounds` rounds from `current` (a calibration per group); returns the first
    /// round's sensitivities.
    fn run(&mut self, mut current: BTreeMap<GroupKey, Params>, rounds: usize) -> Vec<Result<Sensitivity, String>> {
        let mut first = Vec::new();
        for round in 0..=rounds {
            let sens = self.predictor.with_engines(profiles_with(self.base, &[], &current)).sensitivity_all(self.runs);
            for (key, loss) in group_losses(self.groups, self.runs, &sens) {
                let loss = charged(loss, &current[&key]);
                if self.best.get(&key).is_none_or(|(b, _)| loss < *b) {
                    self.best.insert(key.clone(), (loss, current[&key]));
                    for &i in &self.groups[&key] {
                        self.after[i] = prediction_of(&sens[i]);
                    }
                }
            }
            if round == rounds {
                break;
            }
            let at = current.clone();
            for (k, idx) in self.groups {
                let m: Vec<Member> = idx
                    .iter()
                    .filter_map(|&i| sample(&self.runs[i], &sens[i]))
                    .map(|s| Member { sample: s, at: at[k], cur: at[k] })
                    .collect();
                let all: Vec<usize> = (0..super::fit::P).collect();
                let v = fit_block(&m, &all, &self.priors[k]);
                current.insert(k.clone(), current[k].with_values(&all, &v));
            }
            if round == 0 {
                first = sens;
            }
        }
        first
    }
}

/// The simulated means a run's sensitivities were recorded at.
fn prediction_of(s: &Result<Sensitivity, String>) -> Result<Prediction, String> {
    s.as_ref().map(|s| Prediction { ttft_ms: s.ttft_ms, tpot_ms: s.tpot_ms }).map_err(Clone::clone)
}

/// Mean simulated loss of each group's runs, as the fit scores them.
fn group_losses(
    groups: &BTreeMap<GroupKey, Vec<usize>>,
    runs: &[MeasuredRun],
    sens: &[Result<Sensitivity, String>],
) -> Vec<(GroupKey, f64)> {
    let mut acc: BTreeMap<GroupKey, (f64, usize)> = BTreeMap::new();
    for (k, idx) in groups {
        let e = acc.entry(k.clone()).or_default();
        for &i in idx {
            if let Some(s) = sample(&runs[i], &sens[i]) {
                e.0 += super::fit::run_loss(s.sens.ttft_ms, s.sens.tpot_ms, &s);
                e.1 += 1;
            } else {
                // A run the calibration cannot simulate counts as a large error.
                e.0 += 10.0;
                e.1 += 1;
            }
        }
    }
    acc.into_iter().map(|(d, (sum, n))| (d, sum / n.max(1) as f64)).collect()
}

fn sample(run: &MeasuredRun, s: &Result<Sensitivity, String>) -> Option<Sample> {
    s.as_ref().ok().map(|s| Sample { ttft_ms: run.ttft_ms, tpot_ms: run.tpot_ms, sens: *s })
}

/// Median |error| (percent, to a tenth) of TTFT and TPOT over the predicted runs among `idx`.
fn medians(runs: &[MeasuredRun], idx: &[usize], preds: &[Result<Prediction, String>]) -> [f64; 2] {
    let (mut t, mut p) = (Vec::new(), Vec::new());
    for &i in idx {
        if let Ok(pr) = &preds[i] {
            t.push(error_pct(pr.ttft_ms, runs[i].ttft_ms));
            p.push(error_pct(pr.tpot_ms, runs[i].tpot_ms));
        }
    }
    let median = |e: &[f64]| summarise(e).map_or(f64::NAN, |s| (s.median_abs_pct * 10.0).round() / 10.0);
    [median(&t), median(&p)]
}

/// Write each group's provenance into its entry, and set each fitted engine's default
/// overheads (used on devices it was not fitted on) to the run-weighted mean of its entries.
fn record_fits(
    engines: &mut EngineProfiles,
    groups: &BTreeMap<GroupKey, Vec<usize>>,
    runs: &[MeasuredRun],
    before: &[Result<Prediction, String>],
    after: &[Result<Prediction, String>],
) {
    let mut names: Vec<String> = groups.keys().map(|(e, _)| e.clone()).collect();
    names.dedup();
    for e in names {
        let mut profile = engines.get(&e).clone();
        let mut weighted = [0.0; 4];
        let mut total = 0.0;
        for d in profile.devices.iter_mut() {
            let idx = &groups[&(e.clone(), d.device.clone())];
            let mut models: Vec<String> = idx.iter().map(|&i| runs[i].target.model.clone()).collect();
            models.sort();
            models.dedup();
            let (b, a) = (medians(runs, idx, before), medians(runs, idx, after));
            // The ranges the fit covers, so that a plan outside them can say it extrapolates.
            let range = |v: &dyn Fn(&MeasuredRun) -> u64| {
                let x: Vec<u64> = idx.iter().map(|&i| v(&runs[i])).collect();
                Some([x.iter().copied().min().unwrap_or(0), x.iter().copied().max().unwrap_or(0)])
            };
            d.fit = Some(FitRecord {
                runs: idx.len() as u32,
                models,
                ttft_median_pct: [b[0], a[0]],
                tpot_median_pct: [b[1], a[1]],
                concurrency: range(&|r| r.concurrency / u64::from(r.attention_dp.max(1))),
                context: range(&|r| r.isl + r.osl),
            });
            let o = d.overheads;
            let n = idx.len() as f64;
            weighted[0] += o.step_overhead_us * n;
            weighted[1] += o.seq_overhead_us * n;
            weighted[2] += o.step_host_us * n;
            weighted[3] += o.frontend_request_us.unwrap_or(0.0) * n;
            total += n;
        }
        if total == 0.0 {
            // No entry this fit trusts: the prior's costs, not whatever the profile the fit
            // started from had learned (in a cross-validation, from the held-out runs too).
            let own = profile.defaults;
            profile.defaults = Overheads {
                frontend_input_token_us: own.frontend_input_token_us,
                frontend_output_token_us: own.frontend_output_token_us,
                ..entry("", &prior().at).overheads
            };
        } else {
            let r = |x: f64| (x / total).round();
            profile.defaults = Overheads {
                step_overhead_us: r(weighted[0]),
                seq_overhead_us: (weighted[1] / total * 10.0).round() / 10.0,
                step_host_us: r(weighted[2]),
                frontend_request_us: Some(r(weighted[3])),
                // Not fitted, or chosen per device only where its runs show it (the front
                // end's time per output token): the profile's own, so that re-fitting the
                // built-in profiles starts from the same values and gives the same result.
                ..profile.defaults
            };
        }
        engines.replace(profile);
    }
}

/// What a cross-validation holds out of each fit: every run of one model, or of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldOut {
    Model,
    Device,
}

impl HoldOut {
    /// The catalog model or the device profile a run belongs to.
    fn of(self, run: &MeasuredRun) -> &str {
        match self {
            HoldOut::Model => &run.target.model,
            HoldOut::Device => &run.target.device,
        }
    }

    /// `model` or `device`, as the reports name the held-out thing.
    pub fn name(self) -> &'static str {
        match self {
            HoldOut::Model => "model",
            HoldOut::Device => "device",
        }
    }
}

/// A cross-validation's predictions (one per run, each by a fit without the runs of its
/// model or device) and their error table.
#[derive(Debug, Clone)]
pub struct CrossValidation {
    pub held_out: HoldOut,
    pub predictions: Vec<Result<Prediction, String>>,
    pub table: super::table::ErrorTable,
}

/// Cross-validation: for each model (or device), fit on the runs of the others and predict its
/// runs with that fit. A group left with no runs falls back to its engine's default overheads
/// and the datasheet efficiencies: a held-out device is predicted as a device the profiles
/// were never fitted on (its die's shared efficiencies, fitted on the other device of the
/// die, do not carry over). The table covers every run once.
pub fn cross_validate(predictor: &Predictor, runs: &[MeasuredRun], held_out: HoldOut) -> CrossValidation {
    let mut keys: Vec<&str> = runs.iter().map(|r| held_out.of(r)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut predictions: Vec<Result<Prediction, String>> = vec![Err("not predicted".into()); runs.len()];
    for k in keys {
        let train: Vec<MeasuredRun> = runs.iter().filter(|r| held_out.of(r) != k).cloned().collect();
        let (test_idx, test): (Vec<usize>, Vec<MeasuredRun>) =
            runs.iter().enumerate().filter(|(_, r)| held_out.of(r) == k).map(|(i, r)| (i, r.clone())).unzip();
        let engines = if train.is_empty() { predictor.engines().clone() } else { fit(predictor, &train).engines };
        for (i, p) in test_idx.into_iter().zip(predictor.with_engines(engines).predict_all(&test)) {
            predictions[i] = p;
        }
    }
    let table = super::table::evaluate(runs, &predictions);
    CrossValidation { held_out, predictions, table }
}

/// Leave-one-model-out cross-validation's error table (see [`cross_validate`]).
pub fn leave_one_model_out(predictor: &Predictor, runs: &[MeasuredRun]) -> super::table::ErrorTable {
    cross_validate(predictor, runs, HoldOut::Model).table
}

/// Leave-one-device-out cross-validation's error table (see [`cross_validate`]).
pub fn leave_one_device_out(predictor: &Predictor, runs: &[MeasuredRun]) -> super::table::ErrorTable {
    cross_validate(predictor, runs, HoldOut::Device).table
}

/// The comment a written profile starts with: what it is and how to re-fit it.
pub fn file_header(profile: &EngineProfile) -> String {
    format!(
        "# Execution profile and calibration of the {} serving engine, written by\n\
         #   throughput-optimizer calibrate --measured FILE… --fit --write DIR\n\
         # Each device entry was fitted on the measured runs its `fit` names (median |error| of\n\
         # TTFT and TPOT before and after, percent); `defaults` apply on other devices.\n",
        profile.engine
    )
}

/// The fitted parameters as a Markdown table, one line per engine × device.
pub fn render_params(params: &BTreeMap<GroupKey, (Params, usize)>) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    let mut header = vec!["engine".to_string(), "device".to_string(), "runs".to_string()];
    header.extend(super::fit::PARAM_NAMES.iter().map(|s| s.to_string()));
    header.push("frontend_output_token_us".to_string());
    table.set_header(header);
    for ((e, d), (p, n)) in params {
        let mut row = vec![e.clone(), d.clone(), n.to_string()];
        let v = p.to_vec();
        row.extend([format!("{:.0}", v[0]), format!("{:.0}", v[1]), format!("{:.2}", v[2]), format!("{:.1}", v[3])]);
        row.push(p.frontend_output_token_us.map_or_else(|| "engine's own".to_string(), |t| format!("{t:.0}")));
        table.add_row(row);
    }
    format!("{table}\n")
}

#[cfg(test)]
mod frontend_choice_tests {
    use super::*;

    fn at(token_us: Option<f64>) -> Params {
        Params {
            step_overhead_us: 500.0,
            step_host_us: 500.0,
            seq_overhead_us: 10.0,
            frontend_request_us: 2000.0,
            frontend_output_token_us: token_us,
        }
    }

    #[test]
    fn a_slower_front_end_is_kept_only_for_a_clear_gain() {
        // The engine's own front end at loss 1.0 against a slower one at 0.95 (5 % better) and
        // at 0.90 (10 % better): only the second beats it as the fit ranks them. Mutation: drop
        // the charge (`charged` returning `loss`) and the 5 % gain wins too.
        let own = charged(1.0, &at(None));
        assert!(charged(0.95, &at(Some(75.0))) > own);
        assert!(charged(0.90, &at(Some(75.0))) < own);
    }

    #[test]
    fn every_slower_front_end_is_tried_from_each_groups_best() {
        // One trial per slower value, each with every group's anchor and only the front end
        // changed. Mutation: build the trials from the prior instead of the anchors, or leave
        // the front end at the engine's own.
        let key = |d: &str| ("trtllm".to_string(), d.to_string());
        let anchors: BTreeMap<GroupKey, Params> =
            [(key("H100_SXM"), Params { step_overhead_us: 880.0, ..at(None) }), (key("B200"), at(None))].into_iter().collect();
        let trials = slower_front_ends(&anchors);
        assert_eq!(trials.len(), SLOWER_FRONTEND_TOKEN_US.len());
        for (trial, &t) in trials.iter().zip(&SLOWER_FRONTEND_TOKEN_US) {
            assert_eq!(trial[&key("H100_SXM")], Params { step_overhead_us: 880.0, ..at(Some(t)) });
            assert_eq!(trial[&key("B200")], at(Some(t)));
        }
    }

    #[test]
    fn a_chosen_front_end_is_written_into_its_device_entry() {
        // The entry carries the chosen value (rounded to a µs) and none when the engine's own
        // was kept, so the engine's defaults apply. Mutation: write `None` always in `entry`.
        let e = entry("H100_SXM", &at(Some(75.4)));
        assert_eq!(e.overheads.frontend_output_token_us, Some(75.0));
        assert_eq!(entry("H100_SXM", &at(None)).overheads.frontend_output_token_us, None);
        // A slower value is also a move the rounds keep: the block fit leaves it alone.
        let moved = at(Some(75.0)).with_values(&[0], &[900.0]);
        assert_eq!(moved.frontend_output_token_us, Some(75.0));
        assert_eq!(moved.step_overhead_us, 900.0);
    }
}
