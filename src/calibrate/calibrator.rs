//! The whole fit: group measured runs by serving engine × device, run the rounds of
//! [`super::fit`] over every group at once (each round is one simulation of every run), and
//! turn the result into engine profiles that every command accepts.

use super::fit::{fit_block, Member, Params, Prior, Sample, Sensitivity};
use super::measured::MeasuredRun;
use super::predict::{Prediction, Predictor};
use super::table::{error_pct, summarise};
use crate::hardware::calibration::{DeviceCalibration, EngineProfile, EngineProfiles, FitRecord, Overheads};
use crate::hardware::DeviceProfile;
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
}

/// Share by which a run's TPOT may fall below the run of its series at the next lower
/// concurrency before the fit leaves it out. On the training file, apart from the runs it
/// leaves out, no run falls by more than 20 % and two fall by 10–20 % (measurement noise).
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
/// no engine's figures are presumed: 0.5 ms a step (a CUDA-graph replay and the scheduler's
/// Python), 0.2 µs a running sequence per decoder layer (10 µs a sequence in a 48-layer
/// model), 2 ms of the front end's time a request (HTTP and the tokenizer call; the per-token
/// front-end times are not fitted and keep the profile's). The per-sequence cost is fitted per layer
/// only (`seq_overhead_us`, the part that does not grow with the model, stays 0): fitted per
/// sequence, it came out at 50 µs on Qwen3-32B's 64 layers and 24 µs once Llama-3.1-8B's 32
/// were added, and left out, Llama's TPOT was 13 % too high. Fixed here, not read from the
/// profiles, so that re-fitting the built-in profiles gives the same result.
pub const PRIOR_OVERHEADS: Overheads = Overheads {
    step_overhead_us: 500.0,
    seq_overhead_us: 0.0,
    seq_layer_overhead_us: 0.2,
    frontend_request_us: Some(2000.0),
    frontend_input_token_us: None,
    frontend_output_token_us: None,
};

/// The prior of one group: the device profile's efficiencies and [`PRIOR_OVERHEADS`].
fn prior_for(device: &DeviceProfile) -> Prior {
    let o = PRIOR_OVERHEADS;
    let comm = device.comm_grid.last().map_or(1.0, |l| l.efficiency);
    let at = Params {
        memory_efficiency: device.memory_efficiency,
        matrix_efficiency_scale: 1.0,
        comm_efficiency: comm,
        grouped_gemm_efficiency: device.grouped_gemm_efficiency,
        step_overhead_us: o.step_overhead_us,
        seq_layer_overhead_us: o.seq_layer_overhead_us,
        frontend_request_us: o.frontend_request_us.unwrap_or(0.0),
    };
    let top = std::iter::once(device.compute_efficiency).chain(device.matrix_efficiency.values()).fold(0.0, f64::max);
    Prior::new(at, 1.0 / top.max(1e-3))
}

/// `p` rounded as a profile keeps it (3 decimals of an efficiency, whole µs per step,
/// hundredths of a µs per sequence per layer, whole µs of front end per request), so what the fit
/// simulates and reports is what the file says.
fn rounded(p: &Params) -> Params {
    let r = |x: f64, per_unit: f64| (x * per_unit).round() / per_unit;
    Params {
        memory_efficiency: r(p.memory_efficiency, 1e3),
        matrix_efficiency_scale: r(p.matrix_efficiency_scale, 1e3),
        comm_efficiency: r(p.comm_efficiency, 1e3),
        grouped_gemm_efficiency: r(p.grouped_gemm_efficiency, 1e3),
        step_overhead_us: r(p.step_overhead_us, 1.0),
        seq_layer_overhead_us: r(p.seq_layer_overhead_us, 100.0),
        frontend_request_us: r(p.frontend_request_us, 1.0),
    }
}

/// The device entry of `p` (rounded).
fn entry(device: &str, p: &Params) -> DeviceCalibration {
    let p = rounded(p);
    DeviceCalibration {
        device: device.to_string(),
        memory_efficiency: p.memory_efficiency,
        matrix_efficiency_scale: p.matrix_efficiency_scale,
        comm_efficiency: p.comm_efficiency,
        grouped_gemm_efficiency: p.grouped_gemm_efficiency,
        overheads: Overheads {
            step_overhead_us: p.step_overhead_us,
            seq_overhead_us: 0.0,
            seq_layer_overhead_us: p.seq_layer_overhead_us,
            frontend_request_us: Some(p.frontend_request_us),
            frontend_input_token_us: None,
            frontend_output_token_us: None,
        },
        fit: None,
    }
}

/// Engine profiles with one device entry per group set to `params`.
fn profiles_with(base: &EngineProfiles, params: &BTreeMap<GroupKey, Params>) -> EngineProfiles {
    let mut out = base.clone();
    out.calibrated = true;
    let engines: Vec<String> = params.keys().map(|(e, _)| e.clone()).collect();
    for e in engines {
        let mut profile = base.get(&e).clone();
        profile.devices = params.iter().filter(|((pe, _), _)| *pe == e).map(|((_, d), p)| entry(d, p)).collect();
        profile.file = None;
        out.replace(profile);
    }
    out
}

/// Fit every engine × device group of `runs`, starting from the prior of `predictor`'s
/// engine profiles (their device entries, if any, are ignored).
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
    let priors: BTreeMap<GroupKey, Prior> =
        groups.keys().map(|k| (k.clone(), prior_for(predictor.device(&k.1).expect("grouped runs have a device")))).collect();
    let chips: BTreeMap<String, String> = groups
        .keys()
        .map(|(_, d)| {
            let dev = predictor.device(d).expect("grouped runs have a device");
            (d.clone(), if dev.chip.is_empty() { d.clone() } else { dev.chip.clone() })
        })
        .collect();
    let mut current: BTreeMap<GroupKey, Params> = priors.iter().map(|(k, p)| (k.clone(), p.at)).collect();
    let to_pred =
        |s: &Result<Sensitivity, String>| s.as_ref().map(|s| Prediction { ttft_ms: s.ttft_ms, tpot_ms: s.tpot_ms }).map_err(Clone::clone);
    let mut before = Vec::new();
    // Per chip, the simulated calibration with the lowest loss so far, and its predictions:
    // the first-order fit can overshoot, so the result is the best simulated round, never
    // the linear model's promise. (Per chip, not per device: devices on one die share
    // parameters, so their rounds must be chosen together.)
    let mut best: BTreeMap<String, (f64, BTreeMap<GroupKey, Params>)> = BTreeMap::new();
    let mut after: Vec<Result<Prediction, String>> = vec![Err("not predicted".into()); runs.len()];
    for round in 0..=ROUNDS {
        let sens = predictor.with_engines(profiles_with(&base, &current)).sensitivity_all(runs);
        if round == 0 {
            before = sens.iter().map(to_pred).collect();
        }
        for (chip, loss) in chip_losses(&groups, &chips, runs, &sens) {
            if best.get(&chip).is_none_or(|(b, _)| loss < *b) {
                let params = current.iter().filter(|((_, d), _)| chips[d] == chip).map(|(k, p)| (k.clone(), *p)).collect();
                best.insert(chip.clone(), (loss, params));
                for (_, idx) in groups.iter().filter(|((_, d), _)| chips[d] == chip) {
                    for &i in idx {
                        after[i] = to_pred(&sens[i]);
                    }
                }
            }
        }
        if round == ROUNDS {
            break;
        }
        let at = current.clone();
        let members: BTreeMap<GroupKey, Vec<Member>> = groups
            .iter()
            .map(|(k, idx)| {
                (
                    k.clone(),
                    idx.iter().filter_map(|&i| sample(&runs[i], &sens[i])).map(|s| Member { sample: s, at: at[k], cur: at[k] }).collect(),
                )
            })
            .collect();
        fit_blocks(&groups, &chips, &members, &priors, &mut current);
    }
    for (_, params) in best.into_values() {
        current.extend(params);
    }
    let mut engines = profiles_with(&base, &current);
    record_fits(&mut engines, &groups, runs, &before, &after);
    let params = current.iter().map(|(k, p)| (k.clone(), (rounded(p), groups[k].len()))).collect();
    // Screened runs are predicted by the fit too: they stay in the error tables.
    let fitted = predictor.with_engines(engines.clone());
    for &i in &left_out {
        after[i] = fitted.predict(&runs[i]);
    }
    FitOutcome { engines, before, after, params, screened }
}

/// Parameters of the hardware, shared by every engine on a device: the bandwidth share (its
/// memory); and by every device on the same die: matrix efficiency and bus efficiency (H100
/// and H200 are one GH100 die with different HBM, so a GEMM or an NVLink transfer runs
/// alike on both). The engine's own on each device: grouped-GEMM kernels and the host
/// overheads.
const DEVICE_PARAMS: [usize; 1] = [0];
const CHIP_PARAMS: [usize; 2] = [1, 2];
const ENGINE_PARAMS: [usize; 4] = [3, 4, 5, 6];
/// Alternations between the device block and the engine blocks per round.
const BLOCK_PASSES: usize = 3;

/// One round's fit, block by block: each die's and each device's hardware parameters on the
/// runs of every engine on them (a model measured under one engine informs the hardware's
/// efficiencies for the others), then each engine × device's own parameters on its runs.
fn fit_blocks(
    groups: &BTreeMap<GroupKey, Vec<usize>>,
    chips: &BTreeMap<String, String>,
    members: &BTreeMap<GroupKey, Vec<Member>>,
    priors: &BTreeMap<GroupKey, Prior>,
    current: &mut BTreeMap<GroupKey, Params>,
) {
    let chip_set: std::collections::BTreeSet<&String> = chips.values().collect();
    for _ in 0..BLOCK_PASSES {
        for c in &chip_set {
            fit_shared(groups, members, priors, current, &CHIP_PARAMS, |d| chips[d] == **c);
        }
        for d in chips.keys() {
            fit_shared(groups, members, priors, current, &DEVICE_PARAMS, |gd| gd == d);
        }
        for k in groups.keys() {
            let block: Vec<Member> = members[k].iter().map(|m| Member { cur: current[k], ..*m }).collect();
            let v = fit_block(&block, &ENGINE_PARAMS, &priors[k]);
            current.insert(k.clone(), current[k].with_values(&ENGINE_PARAMS, &v));
        }
    }
}

/// Fit `params`, shared by every group whose device `on` selects, on all their runs.
fn fit_shared(
    groups: &BTreeMap<GroupKey, Vec<usize>>,
    members: &BTreeMap<GroupKey, Vec<Member>>,
    priors: &BTreeMap<GroupKey, Prior>,
    current: &mut BTreeMap<GroupKey, Params>,
    params: &[usize],
    on: impl Fn(&String) -> bool,
) {
    let keys: Vec<&GroupKey> = groups.keys().filter(|(_, d)| on(d)).collect();
    let block: Vec<Member> = keys.iter().flat_map(|k| members[*k].iter().map(|m| Member { cur: current[*k], ..*m })).collect();
    let v = fit_block(&block, params, &priors[keys[0]]);
    for k in keys {
        current.insert(k.clone(), current[k].with_values(params, &v));
    }
}

/// Mean simulated loss of each die's runs (every engine on every device of it), as the fit
/// scores them.
fn chip_losses(
    groups: &BTreeMap<GroupKey, Vec<usize>>,
    chips: &BTreeMap<String, String>,
    runs: &[MeasuredRun],
    sens: &[Result<Sensitivity, String>],
) -> Vec<(String, f64)> {
    let mut acc: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for ((_, d), idx) in groups {
        let e = acc.entry(chips[d].clone()).or_default();
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
    let names: Vec<String> = groups.keys().map(|(e, _)| e.clone()).collect();
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
            d.fit = Some(FitRecord { runs: idx.len() as u32, models, ttft_median_pct: [b[0], a[0]], tpot_median_pct: [b[1], a[1]] });
            let o = d.overheads;
            let n = idx.len() as f64;
            weighted[0] += o.step_overhead_us * n;
            weighted[1] += o.seq_overhead_us * n;
            weighted[2] += o.seq_layer_overhead_us * n;
            weighted[3] += o.frontend_request_us.unwrap_or(0.0) * n;
            total += n;
        }
        if total > 0.0 {
            let r = |x: f64| (x / total).round();
            profile.defaults = Overheads {
                step_overhead_us: r(weighted[0]),
                seq_overhead_us: r(weighted[1]),
                seq_layer_overhead_us: (weighted[2] / total * 100.0).round() / 100.0,
                frontend_request_us: Some(r(weighted[3])),
                // Not fitted: the profile's own.
                ..profile.defaults
            };
        }
        engines.replace(profile);
    }
}

/// Leave-one-model-out cross-validation: for each model, fit on the runs of the other models
/// and predict its runs with that fit (a group left with no runs falls back to its engine's
/// default overheads and the datasheet efficiencies). The table covers every run once.
pub fn leave_one_model_out(predictor: &Predictor, runs: &[MeasuredRun]) -> super::table::ErrorTable {
    let mut models: Vec<&str> = runs.iter().map(|r| r.target.model.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    let mut preds: Vec<Result<Prediction, String>> = vec![Err("not predicted".into()); runs.len()];
    for m in models {
        let train: Vec<MeasuredRun> = runs.iter().filter(|r| r.target.model != m).cloned().collect();
        let (test_idx, test): (Vec<usize>, Vec<MeasuredRun>) =
            runs.iter().enumerate().filter(|(_, r)| r.target.model == m).map(|(i, r)| (i, r.clone())).unzip();
        let engines = if train.is_empty() { predictor.engines().clone() } else { fit(predictor, &train).engines };
        for (i, p) in test_idx.into_iter().zip(predictor.with_engines(engines).predict_all(&test)) {
            preds[i] = p;
        }
    }
    super::table::evaluate(runs, &preds)
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
    table.set_header(header);
    for ((e, d), (p, n)) in params {
        let mut row = vec![e.clone(), d.clone(), n.to_string()];
        let v = p.to_vec();
        row.extend([
            format!("{:.3}", v[0]),
            format!("{:.3}", v[1]),
            format!("{:.3}", v[2]),
            format!("{:.3}", v[3]),
            format!("{:.0}", v[4]),
            format!("{:.2}", v[5]),
            format!("{:.1}", v[6]),
        ]);
        table.add_row(row);
    }
    format!("{table}\n")
}
