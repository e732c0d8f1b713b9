//! Data hygiene of measured runs, between reading them and predicting or fitting them: a run
//! whose layout contradicts itself or its id, and a measurement that appears twice, is dropped
//! and reported (never silently ignored). A wrong row biases every fit it enters: the source
//! of the training file listed 43 gpt-oss-120b runs at TP × EP GPUs where their ids and TPOTs
//! say TP, and exported 55 runs twice.
//!
//! Before them, reading the files sets aside a run of a model, GPU or engine the simulator
//! does not have ([`DropReason::Unsupported`], [`super::read_files`]). The checks run in
//! order, each on the runs the previous ones kept:
//! 1. [`layout_contradiction`]: for MoE models, the GPUs (`tp` × `attention_dp`) must be
//!    `moe_tp` × `moe_ep`; dense models ignore the MoE columns, as [`super::mapping`] does.
//! 2. [`id_contradiction`]: an id naming its layout (`…_tp4_ep4_926`, `…_tp2_0_ep2_0_1009`,
//!    `…_tp2_epnone_1`) must agree with the row: the id's TP is the GPUs (`tp` ×
//!    `attention_dp`: attention-DP runs name their DP there), its EP the MoE models' `moe_ep`
//!    (`epnone` = 1). Ids that name no layout are not checked.
//! 3. [`beyond_hardware`]: the run's measured request rate needs more device time for its
//!    prompts alone than its GPUs have, each prompt priced at the measured kernels' batched
//!    prefill rate ([`super::Predictor::prefill_share`]; decode time not even counted). Such a
//!    run did not compute the prompts it names (a cached prefix, other lengths): the training
//!    file's 13 vLLM runs of Llama-3.1-8B in FP8 on H200 at 100 output tokens need 1.0 to 2.2
//!    times the device time there is.
//! 4. [`repeated_measurements`]: one measurement (the same engine, model, GPU, lengths and
//!    concurrency, TTFT and TPOT equal to [`SAME_MEASUREMENT`]) listed more than once. Under
//!    one layout and precision it is one run exported twice: the first is kept. Under two, at
//!    most one layout can be right and nothing says which: all are dropped. Because the id
//!    check comes first, a pair whose one row disagrees with its id keeps the other.

use super::mapping::Resolver;
use super::measured::{id_layout, MeasuredRun, UnsupportedRun};
use serde::Serialize;
use std::collections::BTreeMap;

/// Why a run was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// A model, GPU or engine the simulator does not have (set aside when the files are read).
    Unsupported,
    /// MoE GPUs ≠ `moe_tp` × `moe_ep`.
    Layout,
    /// The id names another TP or EP than the row.
    IdLayout,
    /// The same measurement as an earlier run of the same layout.
    Duplicate,
    /// The same measurement under another layout or precision.
    ConflictingLayouts,
    /// Faster than the GPUs can prefill its prompts.
    BeyondHardware,
}

impl DropReason {
    /// What the reason means, for the report's summary line ("2 runs …").
    pub fn describe(self) -> &'static str {
        match self {
            DropReason::Unsupported => "of a model, GPU or engine the simulator does not have",
            DropReason::Layout => "whose MoE layout (moe_tp × moe_ep) is not their GPUs (tp × attention_dp)",
            DropReason::IdLayout => "whose layout disagrees with the TP/EP their id names",
            DropReason::Duplicate => "repeating an earlier run's measurement (the earlier one kept)",
            DropReason::ConflictingLayouts => "sharing one measurement under several layouts (none kept)",
            DropReason::BeyondHardware => "needing more device time for their prompts alone than their GPUs have",
        }
    }
}

/// A run left out of everything: the tables, the fit and the cross-validations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DroppedRun {
    pub id: String,
    pub file: String,
    pub row: usize,
    pub reason: DropReason,
    pub why: String,
}

impl From<UnsupportedRun> for DroppedRun {
    fn from(u: UnsupportedRun) -> Self {
        DroppedRun { id: u.id, file: u.file, row: u.row, reason: DropReason::Unsupported, why: u.why }
    }
}

/// The runs kept, in their order, and those dropped, in the order of the checks.
#[derive(Debug, Clone, Default)]
pub struct Screened {
    pub kept: Vec<MeasuredRun>,
    pub dropped: Vec<DroppedRun>,
}

/// Relative difference under which two TTFTs (or TPOTs) are one measurement. The training
/// file's repeated exports differ in the last printed digit (TPOT 11.052209836596267 and
/// …269 ms); two separate runs never agree to nine digits.
pub const SAME_MEASUREMENT: f64 = 1e-9;

/// The GPUs of a run's instance: attention TP × attention DP.
fn gpus(run: &MeasuredRun) -> u32 {
    run.tp * run.attention_dp.max(1)
}

/// Why an MoE run's layout contradicts itself, or `None`.
pub fn layout_contradiction(run: &MeasuredRun, moe: bool) -> Option<String> {
    let (n, experts) = (gpus(run), run.moe_tp.max(1) * run.moe_ep.max(1));
    (moe && n != experts).then(|| {
        format!(
            "moe_tp {} × moe_ep {} = {experts} is not its {n} GPUs (tp {} × attention_dp {})",
            run.moe_tp, run.moe_ep, run.tp, run.attention_dp
        )
    })
}

/// Why a run's layout disagrees with the one its id names, or `None` (also when the id names
/// none). EP is compared for MoE models only.
pub fn id_contradiction(run: &MeasuredRun, moe: bool) -> Option<String> {
    let named = id_layout(&run.id)?;
    let n = gpus(run);
    if named.tp != n {
        return Some(format!("its id names tp {} but the row runs {n} GPUs (tp {} × attention_dp {})", named.tp, run.tp, run.attention_dp));
    }
    match named.ep {
        Some(ep) if moe && ep != run.moe_ep.max(1) => Some(format!("its id names ep {ep} but the row has moe_ep {}", run.moe_ep)),
        _ => None,
    }
}

/// The share of its GPUs' time above which a run's prompts alone rule it out: 1, all of it.
/// The share is a lower bound on what the run needed (no decode step, no host time, prompts
/// batched to the engine's token budget at the measured kernels' rate), so a run above it did
/// not compute the prompts it names.
pub const MAX_PREFILL_SHARE: f64 = 1.0;

/// Why a run is beyond what its hardware can do, or `None`: `share` is the device time its
/// measured request rate needs for its prompts alone, as a share of the time there is.
pub fn beyond_hardware(run: &MeasuredRun, share: f64) -> Option<String> {
    (share > MAX_PREFILL_SHARE).then(|| {
        format!(
            "its {:.1} requests/s of {}-token prompts need {share:.2} times the device time its GPUs have to prefill them at the measured kernels' rate",
            run.requests_per_s(),
            run.isl
        )
    })
}

/// Whether two runs carry one measurement: TTFT and TPOT each within [`SAME_MEASUREMENT`].
pub fn same_measurement(a: &MeasuredRun, b: &MeasuredRun) -> bool {
    let close = |x: f64, y: f64| (x - y).abs() <= SAME_MEASUREMENT * x.abs().max(y.abs());
    close(a.ttft_ms, b.ttft_ms) && close(a.tpot_ms, b.tpot_ms)
}

/// The layout and precision a run is simulated with, as a report names it.
fn setup(run: &MeasuredRun) -> String {
    let p = run.target.parallel;
    let precision = format!("{:?}", run.target.precision).to_lowercase();
    format!("{} GPUs, tp {}, ep {}, moe_tp {}, {precision}", p.num_devices, p.tp, p.ep, p.moe_tp)
}

/// Measurements listed more than once among `runs`: (index, reason, why), in run order. A
/// measurement under one setup keeps its first run; under several, none.
pub fn repeated_measurements(runs: &[MeasuredRun]) -> Vec<(usize, DropReason, String)> {
    type Point<'a> = (&'a str, &'a str, &'a str, u64, u64, u64);
    let mut points: BTreeMap<Point, Vec<Vec<usize>>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        let same = points.entry((&r.engine, &r.target.model, &r.target.device, r.isl, r.osl, r.concurrency)).or_default();
        match same.iter_mut().find(|c| same_measurement(&runs[c[0]], r)) {
            Some(c) => c.push(i),
            None => same.push(vec![i]),
        }
    }
    let mut out = Vec::new();
    for cluster in points.into_values().flatten().filter(|c| c.len() > 1) {
        let first = &runs[cluster[0]];
        let one_setup =
            cluster.iter().all(|&i| runs[i].target.parallel == first.target.parallel && runs[i].target.precision == first.target.precision);
        if one_setup {
            out.extend(cluster[1..].iter().map(|&i| (i, DropReason::Duplicate, format!("the same measurement as {}", first.id))));
        } else {
            let setups: Vec<String> = cluster.iter().map(|&i| format!("{} ({})", runs[i].id, setup(&runs[i]))).collect();
            let why = format!("one measurement under several layouts or precisions: {}", setups.join("; "));
            out.extend(cluster.iter().map(|&i| (i, DropReason::ConflictingLayouts, why.clone())));
        }
    }
    out.sort_by_key(|(i, _, _)| *i);
    out
}

fn dropped(run: &MeasuredRun, reason: DropReason, why: String) -> DroppedRun {
    DroppedRun { id: run.id.clone(), file: run.file.clone(), row: run.row, reason, why }
}

/// Every check of the module, in order, on the runs `read_files` returned; `prefill_share`
/// gives the run at an index its prompts' share of the device time (`None`: not priced, kept).
pub fn screen(runs: Vec<MeasuredRun>, res: &Resolver, prefill_share: impl Fn(usize) -> Option<f64>) -> Screened {
    let mut out = Screened::default();
    let mut consistent = Vec::with_capacity(runs.len());
    for (i, run) in runs.into_iter().enumerate() {
        let moe = res.model(&run.target.model).is_some_and(|m| m.is_moe());
        let failed = layout_contradiction(&run, moe)
            .map(|why| (DropReason::Layout, why))
            .or_else(|| id_contradiction(&run, moe).map(|why| (DropReason::IdLayout, why)))
            .or_else(|| prefill_share(i).and_then(|share| beyond_hardware(&run, share)).map(|why| (DropReason::BeyondHardware, why)));
        match failed {
            Some((reason, why)) => out.dropped.push(dropped(&run, reason, why)),
            None => consistent.push(run),
        }
    }
    let repeated = repeated_measurements(&consistent);
    let mut next = repeated.iter().peekable();
    for (i, run) in consistent.into_iter().enumerate() {
        match next.next_if(|d| d.0 == i) {
            Some((_, reason, why)) => out.dropped.push(dropped(&run, *reason, why.clone())),
            None => out.kept.push(run),
        }
    }
    out
}

/// The report of the dropped runs (empty when none): a line with the counts by reason, then
/// one line per run, at most `listed` of them.
pub fn render_dropped(dropped: &[DroppedRun], read: usize, listed: usize) -> String {
    if dropped.is_empty() {
        return String::new();
    }
    let mut by_reason: BTreeMap<DropReason, usize> = BTreeMap::new();
    for d in dropped {
        *by_reason.entry(d.reason).or_default() += 1;
    }
    let counts: Vec<String> = by_reason.iter().map(|(r, n)| format!("{n} {}", r.describe())).collect();
    // "Dropped 16 of 981 measured runs: 2 whose layout …; 14 repeating …."
    let mut out = format!("Dropped {} of {read} measured runs: {}.\n", dropped.len(), counts.join("; "));
    for d in dropped.iter().take(listed) {
        out += &format!("  {} ({} row {}): {}\n", d.id, d.file, d.row, d.why);
    }
    if dropped.len() > listed {
        out += &format!("  … and {} more (see --output json)\n", dropped.len() - listed);
    }
    out
}
