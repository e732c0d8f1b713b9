//! Every scenario under `scenarios/` runs and is compared with its `insta` snapshot: a digest
//! of the report (best rows per phase with latencies, P/D plans and their simulated
//! verification, chunk-budget studies), numbers rounded to 2 decimals. A behaviour change
//! shows up as a snapshot diff to review with `cargo insta review`.

use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use throughput_optimizer::cli::{self, Command, RawArgs};
use throughput_optimizer::outcome::Report;

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "yaml")).collect();
    v.sort();
    v
}

fn run(path: &Path) -> (cli::Plan, Report) {
    let raw = RawArgs::parse_argv(["throughput-optimizer", "--scenario", path.to_str().unwrap(), "--quiet"]).unwrap();
    match cli::build(raw).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        Command::Run(plan) => {
            let report = throughput_optimizer::search::run(&plan);
            (*plan, report)
        }
        _ => panic!("{} is not a run", path.display()),
    }
}

/// Round every float to 2 decimals so the digest is readable and stable.
fn rounded(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap();
            json!((x * 100.0).round() / 100.0)
        }
        Value::Array(a) => Value::Array(a.into_iter().map(rounded).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, rounded(v))).collect()),
        other => other,
    }
}

fn row_digest(r: &throughput_optimizer::outcome::Row) -> Value {
    let mut m = Map::new();
    m.insert("parallel".into(), json!(r.parallel));
    m.insert("batch_size".into(), json!(r.batch_size));
    m.insert("concurrency".into(), json!(r.concurrency));
    m.insert("throughput".into(), json!(r.throughput));
    m.insert("ttft_ms".into(), json!(r.ttft_ms));
    m.insert("tpot_ms".into(), json!(r.tpot_ms));
    if let Some(s) = &r.sim {
        m.insert("ttft_p99_ms".into(), json!(s.latency.ttft.p99));
        m.insert("tpot_p99_ms".into(), json!(s.latency.tpot_inter_token.p99));
        m.insert("itl_p99_ms".into(), json!(s.latency.itl.p99));
        m.insert("kv_mean_use".into(), json!(s.kv_utilization));
        m.insert("measured_requests".into(), json!(s.measured_requests));
        m.insert("preemptions".into(), json!(s.preemptions));
    }
    if let Some(a) = &r.analytic {
        m.insert("analytic".into(), json!({"ttft_ms": a.ttft_ms, "tpot_ms": a.tpot_ms, "throughput": a.throughput}));
    }
    // Prices only with --device-hour-cost (the other scenarios' digests stay as they were).
    if let Some(c) = r.usd_per_million_tokens {
        m.insert("usd_per_million_tokens".into(), json!(c));
        m.insert("usd_per_million_output_tokens".into(), json!(r.usd_per_million_output_tokens));
    }
    // `--goodput` rows only (absent from every other scenario's digest).
    if let Some(g) = r.max_request_rate_within_slo {
        m.insert("max_request_rate_within_slo".into(), json!(g));
        m.insert("goodput_simulations".into(), json!(r.slo_curve.len()));
    }
    Value::Object(m)
}

fn digest(name: &str, report: &Report) -> Value {
    let devices: Vec<Value> = report
        .devices
        .iter()
        .map(|d| {
            let phases: Vec<Value> = d
                .phases
                .iter()
                .map(|p| {
                    json!({
                        "phase": p.phase,
                        "probes": p.rows.len(),
                        "feasible_probes": p.rows.iter().filter(|r| r.feasible()).count(),
                        "best": p.best.iter().take(4).map(row_digest).collect::<Vec<_>>(),
                        "failures": p.failures,
                        "sweeps": p.sweeps,
                    })
                })
                .collect();
            let pd = d.pd_ratio.as_ref().map(|pd| {
                json!({
                    "rows": pd.rows.iter().take(3).map(|r| json!({
                        "pd_ratio": r.pd_ratio, "balanced_qps": r.balanced_qps, "p_parallel": r.p_parallel,
                        "d_parallel": r.d_parallel, "ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms,
                    })).collect::<Vec<_>>(),
                    "split": pd.split,
                    "chosen": pd.chosen,
                    "verification": pd.verification,
                })
            });
            // The deployment plane: how many points, which are on the frontier, the choice.
            let point = |p: &throughput_optimizer::outcome::FrontierPoint| {
                json!({"kind": p.kind, "label": p.label, "devices": p.devices, "per_device": p.tokens_per_s_per_device,
                       "per_user": p.tokens_per_s_per_user, "meets_slo": p.meets_slo})
            };
            let frontier = d.frontier.as_ref().map(|f| {
                json!({
                    "points": f.points.len(),
                    "on_frontier": f.points.iter().filter(|p| p.on_frontier).count(),
                    "chosen": f.chosen.map(|i| point(&f.points[i])),
                })
            });
            let cmp = d.agg_vs_disagg.as_ref().map(|c| {
                let side = |x: &Option<throughput_optimizer::outcome::ComparedDeployment>| {
                    x.as_ref().map(|x| json!({"point": point(&x.point), "simulated_per_device": x.simulated_tokens_per_s_per_device}))
                };
                json!({"aggregated": side(&c.aggregated), "disaggregated": side(&c.disaggregated), "winner": c.winner,
                       "sustainable_rate": c.verification.as_ref().and_then(|v| v.sustainable_rate)})
            });
            let mut m = json!({"device": d.device, "phases": phases, "pd_ratio": pd});
            if let Some(f) = frontier {
                m["frontier"] = f;
            }
            if let Some(c) = cmp {
                m["agg_vs_disagg"] = c;
            }
            if let Some(rp) = &d.replica_plan {
                m["replica_plan"] = replica_digest(rp);
            }
            // Sizing runs only: the answer without its simulations' curve.
            if let Some(s) = &d.sizing {
                let mut s = serde_json::to_value(s).unwrap();
                s.as_object_mut().unwrap().remove("slo_curve");
                m["sizing"] = s;
            }
            m
        })
        .collect();
    let mut out = json!({"scenario": name, "engine": report.engine, "devices": devices});
    if let Some(f) = &report.cost_frontier {
        let point = |p: &throughput_optimizer::outcome::CostPoint| {
            json!({"device": p.device, "label": p.label, "usd_per_million_tokens": p.usd_per_million_tokens,
                   "usd_per_million_output_tokens": p.usd_per_million_output_tokens, "per_user": p.tokens_per_s_per_user})
        };
        out["cost_frontier"] = json!({
            "points": f.points.len(),
            "on_frontier": f.points.iter().filter(|p| p.on_frontier).count(),
            "cheapest": f.cheapest.map(|i| point(&f.points[i])),
        });
    }
    rounded(out)
}

/// A replica plan: the instances per window, the windows the whole-trace simulation had to
/// raise, and the totals.
fn replica_digest(rp: &throughput_optimizer::outcome::ReplicaPlan) -> Value {
    json!({
        "parallel": rp.parallel,
        "instances": rp.windows.iter().map(|w| w.instances).collect::<Vec<_>>(),
        "raised_windows": rp.windows.iter().filter(|w| w.instances != w.searched_instances).count(),
        "arrivals": rp.windows.iter().map(|w| w.arrivals).sum::<u64>(),
        "instance_hours": rp.instance_hours,
        "peak_instances": rp.peak_instances,
        "peak_instance_hours": rp.peak_instance_hours,
        "usd": rp.usd,
        "peak_usd": rp.peak_usd,
        "slo_met": rp.slo_met,
        "trace_simulations": rp.trace_simulations,
        "window_simulations": rp.window_simulations,
        "error": rp.error,
    })
}

#[test]
fn every_scenario_matches_its_snapshot() {
    let files = scenario_files();
    assert!(files.len() >= 8, "expected the scenario suite, found {}", files.len());
    for f in files {
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        let (_, report) = run(&f);
        insta::assert_yaml_snapshot!(name.clone(), digest(&name, &report));
    }
}

#[test]
fn every_scenario_has_a_snapshot() {
    // `INSTA_UPDATE=always` is the request to write missing snapshots; the other test does so,
    // perhaps after this one has looked.
    if std::env::var("INSTA_UPDATE").is_ok_and(|v| v == "always") {
        return;
    }
    let snaps = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    for f in scenario_files() {
        let stem = f.file_stem().unwrap().to_string_lossy().to_string();
        let snap = snaps.join(format!("it__scenarios__{stem}.snap"));
        assert!(snap.is_file(), "scenario {} has no snapshot {}; run `cargo insta review`", f.display(), snap.display());
    }
}

#[test]
fn command_line_flags_override_the_scenario_and_say_so() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/aggregation-short-prompt.yaml");
    let f = f.to_str().unwrap();
    let plain = crate::util::plan_of(&["throughput-optimizer", "--scenario", f]);
    assert_eq!(plain.num_devices, 8);
    assert_eq!(plain.slo.tpot_ms, Some(50.0));
    assert!(plain.warnings.iter().all(|w| !w.contains("replaces")), "{:?}", plain.warnings);

    let p = crate::util::plan_of(&["throughput-optimizer", "--scenario", f, "--num-devices", "4", "--tpot-limits", "40", "--top", "2"]);
    assert_eq!(p.num_devices, 4);
    assert_eq!(p.slo.tpot_ms, Some(40.0));
    assert_eq!(p.output.top, Some(2));
    // Values the file does not set are simply added; replaced ones are named.
    let replaced: Vec<&String> = p.warnings.iter().filter(|w| w.contains("replaces")).collect();
    assert_eq!(replaced.len(), 2, "{replaced:?}");
    assert!(replaced[0].starts_with("--num-devices on the command line replaces the value in"), "{}", replaced[0]);

    let m = crate::util::plan_of(&["throughput-optimizer", "Qwen/Qwen3-8B", "--scenario", f]);
    assert_eq!(m.model.id, "Qwen/Qwen3-8B");
    assert!(m.warnings.iter().any(|w| w.starts_with("MODEL_ID on the command line replaces")), "{:?}", m.warnings);
    let m = crate::util::plan_of(&["throughput-optimizer", "--scenario", f, "--model-id", "Qwen/Qwen3-8B"]);
    assert_eq!(m.model.id, "Qwen/Qwen3-8B");
}

#[test]
fn a_list_flag_replaces_the_scenario_list() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let trace = dir.join("trace-replay.yaml");
    let p = crate::util::plan_of(&["throughput-optimizer", "--scenario", trace.to_str().unwrap(), "--tp-sizes", "2"]);
    assert_eq!(p.search.tp, Some(vec![2]), "the file's [1, 2] is replaced, not extended");
    assert!(p.warnings.iter().all(|w| !w.contains("duplicate")), "{:?}", p.warnings);
    let study = dir.join("chunk-budget-study.yaml");
    let p = crate::util::plan_of(&["throughput-optimizer", "--scenario", study.to_str().unwrap(), "--max-batched-tokens", "4096"]);
    assert_eq!(p.search.max_batched_tokens, Some(vec![4096]));
    // A multi-token flag of another shape replaces the file's too.
    let poisson = dir.join("open-loop-poisson.yaml");
    let p = crate::util::plan_of(&[
        "throughput-optimizer",
        "--scenario",
        poisson.to_str().unwrap(),
        "--arrival",
        "gamma",
        "--burstiness",
        "0.5",
    ]);
    assert!(matches!(p.sim.arrival, throughput_optimizer::workload::arrival::ArrivalProcess::Gamma { .. }), "{:?}", p.sim.arrival);
}

#[test]
fn the_analytic_headline_table_is_stable() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/analytic-headline.yaml");
    let (plan, report) = run(&f);
    insta::assert_snapshot!("analytic-headline-table", throughput_optimizer::report::table::render(&plan, &report));
}
