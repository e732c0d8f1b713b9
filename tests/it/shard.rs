//! `--shard K/N` and `merge`: the merge of a run's slices is the unsharded run's report, byte
//! for byte (stdout only: the elapsed-time line goes to stderr), and files that do not belong
//! together are refused naming the file.

use crate::util::{args, cmd, run_ok, usage_error, HEADLINE, README_HEADLINE};
use std::path::{Path, PathBuf};

/// Run shards 1..=n of `base` into `dir`, returning their files.
fn shards(dir: &Path, base: &[&str], n: u32) -> Vec<PathBuf> {
    (1..=n)
        .map(|k| {
            let file = dir.join(format!("shard-{k}.json"));
            let spec = format!("{k}/{n}");
            run_ok(&args(base, &["--output", "json", "--shard", &spec, "--output-file", file.to_str().unwrap()]));
            file
        })
        .collect()
}

fn merge(files: &[&PathBuf], extra: &[&str]) -> String {
    let mut a: Vec<&str> = vec!["merge"];
    a.extend(files.iter().map(|f| f.to_str().unwrap()));
    a.extend(extra);
    run_ok(&a)
}

#[test]
fn merged_shards_are_the_unsharded_report() {
    let dir = tempfile::tempdir().unwrap();
    let f = shards(dir.path(), README_HEADLINE, 3);
    // Every shard searched something: a slice that took all candidates would prove nothing.
    for file in &f {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let cands = v["devices"][0]["phases"][0]["shard_candidates"].as_array().unwrap().len();
        assert!((1..4).contains(&cands), "{}: {cands} candidates", file.display());
    }
    // Fails if merge forgot to put the rows back in candidate order (e.g. no sort by index:
    // the files are given out of order here), re-ranked with other code than the search's,
    // or read back rounded floats (a shard's JSON must be exact).
    let single_json = run_ok(&args(README_HEADLINE, &["--output", "json"]));
    assert_eq!(merge(&[&f[2], &f[0], &f[1]], &["--output", "json"]), single_json);
    let single_text = run_ok(README_HEADLINE);
    assert_eq!(merge(&[&f[1], &f[2], &f[0]], &[]), single_text);
    let single_csv = run_ok(&args(HEADLINE, &["--output", "csv"]));
    let g = shards(&dir.path().join("."), HEADLINE, 2);
    assert_eq!(merge(&[&g[0], &g[1]], &["--output", "csv"]), single_csv);
}

#[test]
fn more_shards_than_candidates_and_disaggregation() {
    let dir = tempfile::tempdir().unwrap();
    // Prefill and decode each have 4 layouts: shards 5..=6 search nothing, and still merge.
    let base = args(HEADLINE, &["--disagg", "--ttft-limits", "2000"]);
    let f = shards(dir.path(), &base, 6);
    let refs: Vec<&PathBuf> = f.iter().collect();
    assert_eq!(merge(&refs, &["--output", "json"]), run_ok(&args(&base, &["--output", "json"])));
}

#[test]
fn shard_flag_errors() {
    // Fails if --shard counted K from 0 (0/3 would pass) or accepted K > N.
    for bad in ["0/3", "4/3", "3", "x/2"] {
        usage_error(&args(HEADLINE, &["--output", "json", "--shard", bad]), &["--shard", bad, "K/N"]);
    }
    usage_error(&args(HEADLINE, &["--shard", "1/2"]), &["--shard 1/2", "--output json"]);
    usage_error(&args(HEADLINE, &["--output", "json", "--shard", "1/2", "--compare-disagg"]), &["--shard 1/2", "--compare-disagg"]);
    usage_error(
        &args(
            HEADLINE,
            &[
                "--output",
                "json",
                "--shard",
                "1/2",
                "--enable-optimize-prefill-decode-ratio",
                "--prefill-devices-per-instance",
                "4",
                "--decode-devices-per-instance",
                "4",
            ],
        ),
        &["--shard 1/2", "P/D ratio"],
    );
    usage_error(
        &args(HEADLINE, &["--output", "json", "--shard", "1/2", "--max-batched-tokens", "4096", "8192"]),
        &["--shard 1/2", "chunk-budget"],
    );
}

#[test]
fn merge_refuses_files_that_do_not_belong_together() {
    let dir = tempfile::tempdir().unwrap();
    let f = shards(dir.path(), HEADLINE, 3);
    let name = |p: &PathBuf| p.to_str().unwrap().to_string();
    // A missing shard (fails if merge merged what it had).
    let missing = usage_error(&["merge", &name(&f[0]), &name(&f[2])], &["merge", "2/3", "missing"]);
    assert!(missing.contains(&name(&f[0])), "{missing}");
    // A shard given twice.
    usage_error(&["merge", &name(&f[0]), &name(&f[1]), &name(&f[1]), &name(&f[2])], &[&name(&f[1]), "twice"]);
    // A shard of another plan (another TPOT limit), named.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let o = shards(&other, &args(&HEADLINE[..HEADLINE.len() - 4], &["--tpot-limits", "60", "--engine", "analytic"]), 3);
    usage_error(&["merge", &name(&f[0]), &name(&o[1]), &name(&f[2])], &[&name(&o[1]), "different plan"]);
    // An unsharded report, and a file that is not JSON.
    let plain = dir.path().join("plain.json");
    std::fs::write(&plain, run_ok(&args(HEADLINE, &["--output", "json"]))).unwrap();
    usage_error(&["merge", &name(&plain)], &[&name(&plain), "--shard"]);
    usage_error(&["merge", "Cargo.toml"], &["Cargo.toml", "JSON report"]);
    cmd().args(["merge"]).assert().code(2);
}
