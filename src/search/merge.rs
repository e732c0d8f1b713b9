//! `throughput-optimizer merge`: the report of a whole search rebuilt from the reports of its
//! `--shard K/N` slices. Each shard searched the candidates whose index is K − 1 modulo N and
//! wrote every probe (row) of them, exactly, with the candidate each came from. The union of
//! the shards is therefore every row the unsharded search produces; put back in candidate
//! order it goes through the same ranking, frontier and summary code ([`super::assemble`]),
//! so the merged report is the one a single run writes. (A shard keeping only its own top-N
//! rows would also suffice for the ranked tables — the global top-N is a subset of the union
//! of per-shard top-Ns — but not for the frontier and the charts, which use every probe.)
//!
//! Reading the files and checking that they belong together (same inputs, every shard once)
//! is the CLI's; this module checks what only the plan knows: that the shards' candidates are
//! exactly the plan's.

use super::{candidates, Searched};
use crate::outcome::{Phase, Report};
use crate::plan::{Mode, Plan};
use std::collections::HashMap;

/// Every candidate's results, by device name, phase and devices per instance.
#[derive(Debug, Default)]
pub struct Pieces(HashMap<(String, Phase, u32), Vec<Searched>>);

impl Pieces {
    /// The results of one phase, in candidate order.
    pub(super) fn take(&self, device: &str, phase: Phase, n: u32) -> Vec<Searched> {
        self.0.get(&(device.to_string(), phase, n)).cloned().unwrap_or_default()
    }
}

/// A shard (its position in the list given) and what is wrong with it.
pub type MergeError = (usize, String);

/// The report of `plan` (built from the shards' recorded command line, without `--shard`)
/// from its shards' reports.
pub fn merge(plan: &Plan, shards: &[Report]) -> Result<Report, MergeError> {
    let mut pieces: HashMap<(String, Phase, u32), Vec<Searched>> = HashMap::new();
    for (k, shard) in shards.iter().enumerate() {
        let Some(info) = &shard.shard else { return Err((k, "not the report of a --shard run".into())) };
        for dev in &shard.devices {
            for ph in &dev.phases {
                let mut rows = ph.rows.iter();
                for c in &ph.shard_candidates {
                    if c.index % info.count as usize != (info.index - 1) as usize {
                        return Err((
                            k,
                            format!(
                                "candidate {} of the {} phase does not belong to shard {}/{}",
                                c.index,
                                ph.phase.code(),
                                info.index,
                                info.count
                            ),
                        ));
                    }
                    let mut taken: Vec<_> = rows.by_ref().take(c.rows).cloned().collect();
                    if taken.len() != c.rows {
                        return Err((k, format!("{} on {}: its candidates claim more rows than it holds", ph.phase.code(), dev.device)));
                    }
                    restore_non_finite(&mut taken, &c.non_finite).map_err(|m| (k, format!("candidate {}: {m}", c.index)))?;
                    let piece = Searched { index: c.index, rows: taken, failure: c.failure.clone() };
                    pieces.entry((dev.device.clone(), ph.phase, ph.num_devices)).or_default().push(piece);
                }
                if rows.next().is_some() {
                    return Err((k, format!("{} on {}: rows that no candidate accounts for", ph.phase.code(), dev.device)));
                }
            }
        }
    }
    for results in pieces.values_mut() {
        results.sort_by_key(|r| r.index);
    }
    check_complete(plan, shards, &pieces)?;
    let quiet = |_: u64, _: u64| {};
    Ok(super::assemble(plan, &quiet, &super::NEVER_STOPPED, super::Source::Merged(&Pieces(pieces))))
}

/// The non-finite latencies of `rows`, as [`crate::outcome::ShardCandidate::non_finite`] lists them.
pub fn non_finite(rows: &[crate::outcome::Row]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let mut row = row.clone();
        for (name, v) in row.optional_floats_mut() {
            if let Some(x) = v.filter(|x| !x.is_finite()) {
                out.push(format!("{i} {name} {x}"));
            }
        }
    }
    out
}

/// Put back what [`non_finite`] listed.
fn restore_non_finite(rows: &mut [crate::outcome::Row], list: &[String]) -> Result<(), String> {
    for entry in list {
        let bad = || format!("unreadable non_finite entry {entry:?}");
        let mut parts = entry.split(' ');
        let (Some(i), Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else { return Err(bad()) };
        let i: usize = i.parse().map_err(|_| bad())?;
        let x: f64 = value.parse().map_err(|_| bad())?;
        let row = rows.get_mut(i).ok_or_else(bad)?;
        let (_, field) = row.optional_floats_mut().into_iter().find(|(n, _)| *n == name).ok_or_else(bad)?;
        if x.is_finite() {
            return Err(bad());
        }
        *field = Some(x);
    }
    Ok(())
}

/// Every candidate of every phase on every device exactly once; else the shard that should
/// have held the first one missing or repeated.
fn check_complete(plan: &Plan, shards: &[Report], pieces: &HashMap<(String, Phase, u32), Vec<Searched>>) -> Result<(), MergeError> {
    let phases: Vec<(u32, Phase)> = match &plan.mode {
        Mode::Aggregation => vec![(plan.num_devices, Phase::Aggregated)],
        Mode::Disaggregation { prefill, decode } => {
            [(*prefill, Phase::Prefill), (*decode, Phase::Decode)].into_iter().filter(|p| p.0).map(|p| (plan.num_devices, p.1)).collect()
        }
        // `--shard` refuses P/D ratio planning, so no shard of one exists.
        Mode::PdRatio { .. } => return Err((0, "P/D ratio planning cannot be merged".into())),
    };
    let count = shards.first().and_then(|s| s.shard.as_ref()).map_or(1, |s| s.count as usize);
    let owner = |i: usize| shards.iter().position(|s| s.shard.as_ref().is_some_and(|x| x.index as usize - 1 == i % count)).unwrap_or(0);
    for device in &plan.devices {
        for &(n, phase) in &phases {
            let total = candidates::enumerate(plan, n, phase).0.len();
            let got: Vec<usize> = pieces.get(&(device.name.clone(), phase, n)).map_or(Vec::new(), |v| v.iter().map(|r| r.index).collect());
            if let Some(i) = (0..total).find(|&i| got.get(i) != Some(&i)) {
                return Err((owner(i), format!("candidate {i} of the {} phase on {} is missing or repeated", phase.code(), device.name)));
            }
            if got.len() > total {
                return Err((
                    owner(total),
                    format!("the {} phase on {} has more candidates than the plan ({total})", phase.code(), device.name),
                ));
            }
        }
    }
    Ok(())
}
