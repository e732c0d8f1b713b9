//! Traces in and timelines out: public trace formats replayed (`--arrival trace` with Azure and
//! Mooncake files, `--trace-time-scale`), the simulated timeline of `--chrome-trace-file`
//! checked for the structure Perfetto needs, and `--requests-file`.

use crate::util::{array, num, run_json, run_ok, usage_error, README_HEADLINE};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const SMALL: &[&str] = &["Qwen/Qwen3-8B", "--num-devices", "2", "--compile", "--tpot-limits", "40", "--tp-sizes", "2"];

fn sample(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces").join(name).display().to_string()
}

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

/// Every span has ph/ts/dur/pid/tid, every track it uses is named, async spans pair up, and
/// counters carry values. Returns the complete events.
fn check_structure(doc: &Value) -> Vec<Value> {
    let events = array(&doc["traceEvents"], "traceEvents");
    let (mut processes, mut threads) = (BTreeSet::new(), BTreeSet::new());
    for e in events.iter().filter(|e| e["ph"] == "M") {
        assert!(e["args"]["name"].is_string() || e["name"] == "process_sort_index", "{e}");
        match e["name"].as_str() {
            Some("process_name") => processes.insert(e["pid"].as_u64().expect("pid")),
            Some("thread_name") => threads.insert((e["pid"].as_u64().expect("pid"), e["tid"].as_u64().expect("tid"))),
            _ => false,
        };
    }
    let mut open: BTreeMap<(u64, String), Vec<f64>> = BTreeMap::new();
    let mut spans = Vec::new();
    for e in events {
        let ph = e["ph"].as_str().unwrap_or_else(|| panic!("an event without ph: {e}"));
        if ph == "M" {
            continue;
        }
        let (pid, tid) = (e["pid"].as_u64().expect("pid"), e["tid"].as_u64().expect("tid"));
        let ts = num(&e["ts"], "ts");
        assert!(ts >= 0.0 && e["name"].is_string(), "{e}");
        assert!(processes.contains(&pid), "process {pid} has no name: {e}");
        match ph {
            "X" => {
                assert!(num(&e["dur"], "dur") > 0.0, "{e}");
                assert!(threads.contains(&(pid, tid)), "track ({pid}, {tid}) has no name: {e}");
                spans.push(e.clone());
            }
            "C" => assert!(e["args"].as_object().is_some_and(|a| a.values().all(Value::is_number)), "{e}"),
            "b" | "e" => {
                assert!(e["cat"].is_string() && e["id"].is_u64(), "{e}");
                let key = (e["id"].as_u64().unwrap(), e["name"].as_str().unwrap().to_string());
                if ph == "b" {
                    open.entry(key).or_default().push(ts);
                } else {
                    let start = open.get_mut(&key).and_then(Vec::pop).unwrap_or_else(|| panic!("an end without a begin: {e}"));
                    assert!(ts >= start, "{e}");
                }
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    assert!(open.values().all(Vec::is_empty), "async spans left open");
    spans
}

#[test]
fn the_headline_timeline_is_a_perfetto_trace_of_the_simulated_steps() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, reqs) = (dir.path().join("t.json"), dir.path().join("r.csv"));
    let report =
        run_json(&with(README_HEADLINE, &["--chrome-trace-file", trace.to_str().unwrap(), "--requests-file", reqs.to_str().unwrap()]));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    // Mutation: leave out the thread_name metadata and check_structure fails on the first step.
    let spans = check_structure(&doc);
    let meta = &doc["otherData"];
    assert_eq!(spans.len() as f64, num(&meta["steps_drawn"], "steps_drawn"));
    // The re-simulation is the search's probe: as many steps as the best row reports.
    let best = &array(&report["devices"][0]["phases"][0]["best"], "best")[0];
    assert_eq!(num(&meta["steps_simulated"], "steps_simulated"), num(&best["sim"]["steps"], "steps"));
    assert_eq!(meta["truncated"], false);
    // Steps of one instance do not overlap, and the batch is in the args.
    for w in spans.windows(2) {
        assert!(num(&w[1]["ts"], "ts") >= num(&w[0]["ts"], "ts") + num(&w[0]["dur"], "dur") - 1e-3, "{} {}", w[0], w[1]);
    }
    assert!(spans.iter().any(|s| s["args"]["prefill_tokens"].as_u64() > Some(0) && s["args"]["decode_seqs"].as_u64() > Some(0)));
    // One CSV row per simulated request, times in order.
    let text = std::fs::read_to_string(&reqs).unwrap();
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let mut n = 0;
    for r in rows.records() {
        let r = r.unwrap();
        n += 1;
        let t: Vec<f64> = [2, 4, 5, 6].iter().filter_map(|&i| r[i].parse().ok()).collect();
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "{r:?}");
    }
    assert_eq!(n as f64, num(&meta["requests_simulated"], "requests_simulated"));
}

#[test]
fn azure_and_mooncake_traces_run() {
    for (file, format) in [("azure_sample.csv", "Azure LLM inference CSV"), ("mooncake_sample.jsonl", "Mooncake JSON Lines")] {
        let path = sample(file);
        let out = run_ok(&with(SMALL, &["--arrival", "trace", &path]));
        assert!(out.contains(&format!("({format}, 60 requests)")), "{out}");
        assert!(out.contains("48 requests measured"), "{out}");
    }
}

/// The best row's prefix-cache hit rate and the requests file's cached tokens.
fn cache_hits(trace: &str) -> (f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let reqs = dir.path().join("r.csv");
    let report = run_json(&with(SMALL, &["--arrival", "trace", trace, "--requests-file", reqs.to_str().unwrap()]));
    let best = &array(&report["devices"][0]["phases"][0]["best"], "best")[0];
    let rate = best["sim"]["prefix_cache_hit_rate"].as_f64().unwrap_or(0.0);
    let text = std::fs::read_to_string(&reqs).unwrap();
    let cached = csv::Reader::from_reader(text.as_bytes()).records().map(|r| r.unwrap()[8].parse::<u64>().unwrap()).sum();
    (rate, cached)
}

#[test]
fn shared_hash_ids_are_prefix_cache_hits() {
    // The mutation of the brief: the same trace with every hash id made unique hits nothing.
    let (rate, cached) = cache_hits(&sample("mooncake_sample.jsonl"));
    assert!(rate > 0.3 && cached > 0, "{rate} {cached}");
    let dir = tempfile::tempdir().unwrap();
    let unique = dir.path().join("unique.jsonl");
    let text = std::fs::read_to_string(sample("mooncake_sample.jsonl")).unwrap();
    let lines: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let n = v["hash_ids"].as_array().unwrap().len();
            v["hash_ids"] = (0..n).map(|j| i * 1000 + j).collect();
            v.to_string()
        })
        .collect();
    std::fs::write(&unique, lines.join("\n")).unwrap();
    assert_eq!(cache_hits(unique.to_str().unwrap()), (0.0, 0));
}

#[test]
fn trace_time_scale_stretches_arrivals_and_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let last_arrival = |scale: &str| {
        let reqs = dir.path().join(format!("r{scale}.csv"));
        let path = sample("azure_sample.csv");
        run_ok(&with(SMALL, &["--arrival", "trace", &path, "--trace-time-scale", scale, "--requests-file", reqs.to_str().unwrap()]));
        let text = std::fs::read_to_string(&reqs).unwrap();
        csv::Reader::from_reader(text.as_bytes()).records().map(|r| r.unwrap()[2].parse::<f64>().unwrap()).fold(0.0, f64::max)
    };
    // Mutation: divide by the factor instead and the half-scale run ends later.
    let (full, half) = (last_arrival("1"), last_arrival("0.5"));
    assert!((half - full / 2.0).abs() < 1e-3, "{full} {half}");
    usage_error(
        &with(SMALL, &["--arrival", "trace", &sample("azure_sample.csv"), "--trace-time-scale", "0"]),
        &["--trace-time-scale", "positive"],
    );
    usage_error(
        &with(SMALL, &["--input-length", "100", "--output-length", "10", "--trace-time-scale", "2"]),
        &["--trace-time-scale", "--arrival trace"],
    );
}

#[test]
fn unknown_trace_formats_name_the_file_and_the_accepted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("other.csv");
    std::fs::write(&f, "Timestamp,Request tokens,Response tokens\n1,2,3\n").unwrap();
    let p = f.to_str().unwrap();
    usage_error(&with(SMALL, &["--arrival", "trace", p]), &[p, "`Timestamp`, `Request tokens`", "Azure", "Mooncake"]);
}

/// The search records only what the outputs ask for, and the report renders the recording: a
/// failed simulation recorded for the timeline is the timeline's error, with its message.
/// Mutation: record the timeline whatever the plan asks for in `search::record` (the first
/// assertion fails), or drop the failure in `report::timeline::render` (the last one does).
#[test]
fn the_search_records_only_what_the_outputs_ask_for() {
    use throughput_optimizer::outcome::recording::{RecordingFailure, Recordings};
    use throughput_optimizer::report::{Exporter, Timeline};
    let argv = with(&["throughput-optimizer"], &with(SMALL, &["--input-length", "1000", "--output-length", "100"]));
    let plan = crate::util::plan_of(&argv);
    let report = throughput_optimizer::search::run(&plan);
    let none = throughput_optimizer::search::record(&plan, &report);
    assert_eq!(none, Recordings::default(), "nothing asked, nothing recorded");
    let mut asked = plan.clone();
    asked.output.requests_file = Some("r.csv".into());
    asked.output.operator_trace = Some("o.json".into());
    let rec = throughput_optimizer::search::record(&asked, &report);
    let timelines = rec.timelines.as_ref().unwrap();
    let best = &report.devices[0].phases[0].best[0];
    assert_eq!((timelines.len(), &timelines[0].row), (1, best));
    assert_eq!(timelines[0].steps_total, best.sim.as_ref().unwrap().steps, "the recorded run is the search's probe");
    assert_eq!(rec.operator_traces.len(), 1);
    assert!(rec.operator_traces[0].passes.iter().all(|p| !p.operators.is_empty()));
    let failed = Recordings { timelines: Err(RecordingFailure { device: "D".into(), message: "boom".into() }), ..rec };
    let e = Timeline { chrome: None, requests: Some("r.csv".into()) }.export(&asked, &report, &failed).unwrap_err();
    assert_eq!(e.to_string(), "--chrome-trace-file/--requests-file: simulating the best configuration on D failed: boom");
}
