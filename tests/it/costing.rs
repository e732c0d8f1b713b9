//! `--device-hour-cost` (rows priced per million tokens, the cost frontier, the rejected
//! prices) and `--plan-replicas` (the replica plan of a day of traffic, the rejected windows).

use crate::util::{close, num, phase, run_json, run_ok, usage_error, HEADLINE, JSON_REL};
use std::path::Path;
use throughput_optimizer::cli::{self, Command, RawArgs};

fn scenario(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(name).display().to_string()
}

fn tmp(name: &str, contents: &str) -> String {
    let dir = std::env::temp_dir().join(format!("tput-costing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p.display().to_string()
}

/// Every row's prices follow from its devices, its throughput and the price, by hand: the
/// headline run on the analytic engine (8 devices, 3500 → 1500 tokens) at 2.5 USD per device-hour costs 20 USD an
/// hour; at T output tokens/s a million output tokens cost 20 ÷ (3600 T) × 10⁶ and a million
/// tokens in all 20 ÷ (3600 T × (1 + 3500/1500)) × 10⁶. Mutations: price per device only (no
/// device count), or count output tokens alone in the total, and the figures move.
#[test]
fn rows_are_priced_per_million_tokens_of_the_whole_deployment() {
    let r = run_json(&crate::util::args(HEADLINE, &["--device-hour-cost", "2.5"]));
    let rows = phase(&r, 0, "aggregated")["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let t = num(&row["throughput"], "throughput");
        if t <= 0.0 {
            // A probe that served nothing has no price.
            assert!(row.get("usd_per_million_tokens").is_none(), "{row}");
            continue;
        }
        let devices = num(&row["num_devices"], "num_devices");
        assert_eq!(devices, 8.0);
        let out = 20.0 / (3600.0 * t) * 1e6;
        let total = 20.0 / (3600.0 * t * (1.0 + 3500.0 / 1500.0)) * 1e6;
        assert!(close(num(&row["usd_per_million_output_tokens"], "usd_per_million_output_tokens"), out, JSON_REL), "{row}");
        assert!(close(num(&row["usd_per_million_tokens"], "usd_per_million_tokens"), total, JSON_REL), "{row}");
    }
    assert_eq!(r["inputs"]["device_hour_cost"]["usd_per_device_hour"]["TEST_DEVICE"], 2.5);
    // The cost frontier holds the one device's plane; its cheapest point within the SLO is the
    // device's chosen deployment (one price: cost is devices ÷ tokens/s).
    let f = &r["cost_frontier"];
    let cheapest = &f["points"][f["cheapest"].as_u64().unwrap() as usize];
    let chosen = &r["devices"][0]["frontier"]["points"][r["devices"][0]["frontier"]["chosen"].as_u64().unwrap() as usize];
    assert_eq!(cheapest["label"], chosen["label"]);
    // Without the flag nothing is priced and the CSV keeps its columns.
    let plain = run_json(HEADLINE);
    assert!(phase(&plain, 0, "aggregated")["rows"][0].get("usd_per_million_tokens").is_none());
    assert!(plain.get("cost_frontier").is_none());
}

#[test]
fn csv_and_text_show_prices_only_when_asked() {
    let base = crate::util::args(HEADLINE, &["--output", "csv"]);
    let plain = run_ok(&base);
    assert!(!plain.lines().next().unwrap().contains("usd_per_million"));
    let priced = run_ok(&crate::util::args(&base, &["--device-hour-cost", "2.5"]));
    let header: Vec<&str> = priced.lines().next().unwrap().split(',').collect();
    assert_eq!(&header[header.len() - 2..], ["usd_per_million_output_tokens", "usd_per_million_tokens"]);
    let text = run_ok(&crate::util::args(HEADLINE, &["--device-hour-cost", "2.5"]));
    assert!(text.contains("USD/M tokens") && text.contains("Cost frontier") && text.contains("USD per million tokens"), "{text}");
}

/// A price map names every device the run uses; prices are finite and not negative.
#[test]
fn rejected_prices_name_what_is_wrong() {
    let base = HEADLINE.to_vec();
    for bad in ["-1", "nan", "inf", "cheap"] {
        usage_error(&crate::util::args(&base, &["--device-hour-cost", bad]), &["--device-hour-cost"]);
    }
    let unknown = tmp("unknown.yaml", "TEST_DEVICE: 1\nH999: 2\n");
    usage_error(&crate::util::args(&base, &["--device-hour-cost", &unknown]), &["--device-hour-cost", "H999", "not a device profile"]);
    let missing = tmp("missing.yaml", "H100_SXM: 2.5\n");
    usage_error(&crate::util::args(&base, &["--device-hour-cost", &missing]), &["no price for device profile TEST_DEVICE"]);
    let negative = tmp("negative.yaml", "TEST_DEVICE: -3\n");
    usage_error(&crate::util::args(&base, &["--device-hour-cost", &negative]), &["TEST_DEVICE", "not a price"]);
    usage_error(&crate::util::args(&base, &["--device-hour-cost", "/nonexistent/prices.yaml"]), &["--device-hour-cost"]);
    // A profile given by another spelling `--device` accepts is priced under its own name.
    let ok = tmp("ok.yaml", "test_device: 1.5\n");
    let r = run_json(&crate::util::args(&base, &["--device-hour-cost", &ok]));
    assert_eq!(r["inputs"]["device_hour_cost"]["usd_per_device_hour"]["TEST_DEVICE"], 1.5);
}

#[test]
fn rejected_replica_windows_name_what_is_wrong() {
    let trace = scenario("data/daily-cycle.jsonl");
    let base = ["Qwen/Qwen3-32B", "--num-devices", "8", "--tp-sizes", "1", "--arrival", "trace", &trace];
    for (bad, part) in [("900", "no unit"), ("15d", "not a unit"), ("0.2s", "shorter than a second"), ("1s", "more than 4096")] {
        usage_error(&crate::util::args(&base, &["--plan-replicas", bad]), &["--plan-replicas", part]);
    }
    usage_error(&crate::util::args(HEADLINE, &["--plan-replicas", "15m"]), &["--plan-replicas", "--arrival trace"]);
    usage_error(
        &crate::util::args(&base, &["--plan-replicas", "15m", "--disagg", "--tpot-limits", "50"]),
        &["--plan-replicas", "--disagg"],
    );
}

/// The acceptance test of the replica plan: on the committed synthetic day (peak at least 4×
/// the trough), 15-minute windows use fewer instance-hours than a fleet sized for the peak
/// window, and every window meets the SLO in the whole-day simulation.
#[test]
fn a_day_of_traffic_needs_fewer_instance_hours_than_the_peak_fleet() {
    let trace = throughput_optimizer::workload::arrival::Trace::load(Path::new(&scenario("data/daily-cycle.jsonl"))).unwrap();
    let mut hourly = [0u32; 24];
    for r in &trace.requests {
        hourly[(r.arrival_s / 3600.0) as usize] += 1;
    }
    let (lo, hi) = (*hourly.iter().min().unwrap(), *hourly.iter().max().unwrap());
    assert!(hi >= 4 * lo, "the trace's busiest hour has {hi} arrivals, its quietest {lo}");
    assert!(trace.requests.last().unwrap().arrival_s > 23.5 * 3600.0);

    let raw = RawArgs::parse_argv(["throughput-optimizer", "--scenario", &scenario("replica-plan-daily.yaml"), "--quiet"]).unwrap();
    let Command::Run(plan) = cli::build(raw).unwrap() else { panic!("a run") };
    let report = throughput_optimizer::search::run(&plan);
    let rp = report.devices[0].replica_plan.as_ref().expect("a replica plan");
    assert_eq!(rp.error, None);
    assert_eq!(rp.windows.len(), 96);
    assert_eq!(rp.windows.iter().map(|w| w.arrivals).sum::<u64>(), trace.requests.len() as u64);
    assert!(rp.windows.iter().all(|w| w.slo_met), "{:?}", rp.windows.iter().filter(|w| !w.slo_met).collect::<Vec<_>>());
    assert!(rp.slo_met);
    assert!(rp.instance_hours < rp.peak_instance_hours, "{} against {}", rp.instance_hours, rp.peak_instance_hours);
    assert!(rp.peak_instances >= 2 && rp.windows.iter().any(|w| w.instances == 1), "{:?}", rp.windows);
    // The totals follow from the windows: Σ instances × 0.25 h, the peak count over 24 h.
    let hours: f64 = rp.windows.iter().map(|w| w.instances as f64 * 0.25).sum();
    assert!((rp.instance_hours - hours).abs() < 1e-9);
    assert!((rp.peak_instance_hours - rp.peak_instances as f64 * 24.0).abs() < 1e-9);
    assert!((rp.usd.unwrap() - 2.0 * rp.device_hours).abs() < 1e-9);
}

#[test]
fn the_replica_plan_is_in_the_text_and_json_reports() {
    let text = run_ok(&["--scenario", &scenario("replica-plan-daily.yaml"), "-q"]);
    assert!(text.contains("Replica plan (96 windows of 900 s") && text.contains("Instance-hours:"), "{text}");
    let json = run_json(&["--scenario", &scenario("replica-plan-daily.yaml"), "-q"]);
    let rp = &json["devices"][0]["replica_plan"];
    assert_eq!(rp["windows"].as_array().unwrap().len(), 96);
    assert!(num(&rp["instance_hours"], "instance_hours") < num(&rp["peak_instance_hours"], "peak_instance_hours"));
}

/// P/D ratio planning with `--device-hour-cost`: every pairing is priced with prefill and
/// decode devices in its ratio (serving 1 req/s takes P devices / P QPS + D devices / D QPS
/// devices), per million output tokens and per million tokens (prompt included), in JSON and in
/// the text (Overall Best's `Cost:` line, two table columns). Mutation (tried): price the
/// prefill devices only (drop the decode term in `price_pd_row`) and the figures fall short.
#[test]
fn pd_pairings_are_priced_in_their_ratio() {
    let argv = [
        "Qwen/Qwen3-32B",
        "--device",
        "H100_SXM",
        "--input-length",
        "2000",
        "--output-length",
        "500",
        "--ttft-limits",
        "2000",
        "--tpot-limits",
        "50",
        "--enable-optimize-prefill-decode-ratio",
        "--prefill-devices-per-instance",
        "2",
        "--decode-devices-per-instance",
        "4",
        "--num-devices",
        "16",
        "--device-hour-cost",
        "2.5",
        "--engine",
        "analytic",
    ];
    let j = run_json(&argv);
    let rows = j["devices"][0]["pd_ratio"]["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        let n = |k: &str| num(&r[k], k);
        let per_rate = n("p_devices") / n("p_qps") + n("d_devices") / n("d_qps");
        let output = per_rate * 2.5 / (500.0 * 3600.0) * 1e6;
        // The JSON's figures are rounded: a few of their digits' worth of tolerance.
        let rel = 1e-3;
        assert!(close(n("usd_per_million_output_tokens"), output, rel), "{r}: {output}");
        assert!(close(n("usd_per_million_tokens"), output / 5.0, rel), "{r}: {}", output / 5.0);
    }
    let text = run_ok(&argv);
    assert!(text.contains("Cost: ") && text.contains("per million output tokens (devices in the P:D ratio"), "{text}");
    assert!(text.contains("USD/M output tokens"), "{text}");
}
