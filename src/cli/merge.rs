//! `throughput-optimizer merge FILES…`: read the JSON reports of the `--shard K/N` slices of
//! one search, check that they belong together (the same command line and inputs, every
//! shard exactly once), rebuild the plan from the recorded command line and write the report
//! the unsharded run writes ([`crate::search::merge`] does the merging).

use super::args::RawArgs;
use super::plan::{Command, Plan, PlanError};
use crate::outcome::{Report, ShardInfo};
use clap::Parser;
use std::path::PathBuf;

const ABOUT: &str = "\
Merge the JSON reports of the slices of one search (`--shard K/N --output json`, K = 1..N) into \
the report the unsharded run writes.";

#[derive(Debug, Clone, Parser)]
#[command(name = "throughput-optimizer merge", bin_name = "throughput-optimizer merge", about = ABOUT)]
pub struct MergeArgs {
    /// The shards' JSON reports, one per shard, in any order.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output format of the merged report: table, json or csv. [default: table]
    #[arg(long, value_name = "FORMAT")]
    pub output: Option<String>,
    /// Write the merged report to this file instead of stdout.
    #[arg(long, value_name = "PATH")]
    pub output_file: Option<PathBuf>,
}

fn error(file: &std::path::Path, message: impl Into<String>) -> PlanError {
    PlanError::Merge { file: file.display().to_string(), message: message.into() }
}

/// Read and check the shards, rebuild the plan, merge: the plan (for rendering) and the report.
pub fn run(args: &MergeArgs) -> Result<(Box<Plan>, Report), PlanError> {
    let shards = read(&args.files)?;
    let first = &shards[0].1;
    let info = |r: &Report| r.shard.clone().unwrap_or(ShardInfo { index: 0, count: 0, args: Vec::new() });
    let count = info(first).count;
    let mut seen: Vec<Option<&PathBuf>> = vec![None; count as usize];
    for (path, r) in &shards {
        let i = info(r);
        if i.count != count {
            return Err(error(path, format!("is shard {}/{}, but {} is one of {count}", i.index, i.count, args.files[0].display())));
        }
        if r.inputs != first.inputs
            || r.engine != first.engine
            || r.version != first.version
            || same_plan(&i.args) != same_plan(&info(first).args)
        {
            return Err(error(
                path,
                format!(
                    "comes from a different plan than {} (its command line or inputs differ); merge the shards of one run",
                    args.files[0].display()
                ),
            ));
        }
        let slot = &mut seen[(i.index - 1) as usize];
        if let Some(other) = slot {
            return Err(error(path, format!("shard {}/{count} is given twice (also {})", i.index, other.display())));
        }
        *slot = Some(path);
    }
    let missing: Vec<String> = seen.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(k, _)| format!("{}/{count}", k + 1)).collect();
    if !missing.is_empty() {
        return Err(error(&args.files[0], format!("shard(s) {} missing: merge needs all {count} shards of the run", missing.join(", "))));
    }
    let plan = rebuild(args, &args.files[0], &info(first).args)?;
    let reports: Vec<Report> = shards.into_iter().map(|(_, r)| r).collect();
    let merged = crate::search::merge::merge(&plan, &reports).map_err(|(k, m)| error(&args.files[k], m))?;
    if merged.inputs != reports[0].inputs {
        return Err(error(
            &args.files[0],
            "the plan rebuilt from its recorded command line has other inputs than the shards (did a model, profile or length file change?)",
        ));
    }
    Ok((plan, merged))
}

/// Every file parsed as the report of a `--shard` run.
fn read(files: &[PathBuf]) -> Result<Vec<(PathBuf, Report)>, PlanError> {
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|e| error(path, format!("cannot read: {e}")))?;
        let report: Report = serde_json::from_str(&text).map_err(|e| {
            error(path, format!("not a throughput-optimizer JSON report ({e}); give the --output json files of --shard runs"))
        })?;
        if report.schema_version != crate::outcome::SCHEMA_VERSION {
            return Err(error(
                path,
                format!("schema version {} (this build reads {})", report.schema_version, crate::outcome::SCHEMA_VERSION),
            ));
        }
        match &report.shard {
            None => return Err(error(path, "not the report of a --shard K/N run; merge reads only shard reports")),
            Some(s) if s.index == 0 || s.index > s.count => return Err(error(path, format!("invalid shard {}/{}", s.index, s.count))),
            Some(_) => out.push((path.clone(), report)),
        }
    }
    Ok(out)
}

/// The recorded command line without what may differ between the shards of one run: the
/// shard itself, where its report went and the worker threads (results do not depend on them).
fn same_plan(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        let a = a.as_str();
        if ["--shard", "--output-file", "--jobs", "-j"].contains(&a) {
            it.next();
            continue;
        }
        if ["--shard=", "--output-file=", "--jobs=", "-j"].iter().any(|p| a.starts_with(p)) {
            continue;
        }
        out.push(a);
    }
    out
}

/// The plan of the unsharded run: the recorded command line without `--shard`, with merge's
/// own output format and file.
fn rebuild(args: &MergeArgs, file: &std::path::Path, recorded: &[String]) -> Result<Box<Plan>, PlanError> {
    let argv = std::iter::once("throughput-optimizer".to_string()).chain(recorded.iter().cloned());
    let mut raw = RawArgs::parse_argv(argv).map_err(|e| error(file, format!("its recorded command line does not parse: {}", e.kind())))?;
    raw.shard = None;
    raw.output = args.output.clone();
    raw.output_file = args.output_file.clone();
    match super::build(raw)? {
        Command::Run(plan) => Ok(plan),
        _ => Err(error(file, "its recorded command line is not a search")),
    }
}

#[cfg(test)]
mod tests {
    use super::same_plan;

    #[test]
    fn shard_output_and_jobs_do_not_make_another_plan() {
        let a: Vec<String> = ["M", "--shard", "1/3", "--output-file", "a.json", "-j2", "--tpot-limits", "50"].map(String::from).to_vec();
        let b: Vec<String> = ["M", "--shard=2/3", "--jobs", "1", "--tpot-limits", "50"].map(String::from).to_vec();
        // Fails if same_plan kept --shard or --output-file (every merge would be refused).
        assert_eq!(same_plan(&a), same_plan(&b));
        let c: Vec<String> = ["M", "--shard", "3/3", "--tpot-limits", "60"].map(String::from).to_vec();
        // Fails if same_plan dropped other flags' values.
        assert_ne!(same_plan(&a), same_plan(&c));
    }
}
