//! Sizing with P/D deployments (`--disagg`, `--compare-disagg`): a P/D answer re-simulated at
//! the target from its roles' rows meets the SLO and one instance fewer of either role does
//! not; it beats the aggregated answer where disaggregation serves with fewer devices, and a
//! tie goes to aggregated serving; the flags' errors.

use crate::util::{args, run_json, usage_error};
use throughput_optimizer::cli::{self, Command, RawArgs};
use throughput_optimizer::outcome::{DeploymentKind, Phase, Report};
use throughput_optimizer::plan::Plan;
use throughput_optimizer::search::pd::{pair, verify::simulate_split};

/// Llama-3.1-8B on H100 under vLLM with long prompts (8000 / 200 tokens), p99 TTFT ≤ 3 s and
/// TPOT ≤ 25 ms, 20 req/s on up to 16 devices, 2000 requests a check: prefill batches stall
/// an aggregated instance's decodes, so a P/D deployment needs fewer devices.
const LONG: &str = "meta-llama/Meta-Llama-3.1-8B --device H100_SXM --serving-engine vllm --input-length 8000 --output-length 200 \
    --ttft-limits 3000 --tpot-limits 25 --slo-percentile p99 --seed 7 --num-requests 2000 --num-devices 16 --target-request-rate 20 --quiet";

fn run(argv: &str) -> (Plan, Report) {
    let argv = std::iter::once("throughput-optimizer").chain(argv.split_whitespace());
    let plan = match cli::build(RawArgs::parse_argv(argv).unwrap()).unwrap() {
        Command::Run(p) => *p,
        _ => unreachable!("a run"),
    };
    let report = throughput_optimizer::search::run(&plan);
    (plan, report)
}

/// The P/D answer: `--compare-disagg` sizes both kinds and answers with P/D, on fewer
/// devices than the aggregated answer. Re-simulated at the target from the report's own
/// prefill and decode rows (the P/D system as verification runs it, 2000 requests, same
/// seed), the answer meets the SLO; one prefill or one decode instance fewer misses it.
/// Mutations tried: drop `fit`'s shrinking loop (the answer keeps the formulas' starting split
/// and one prefill instance fewer still meets); `below` not reduced by one (caught by
/// `the_tie_goes_to_aggregated_serving`). Not caught: growing only the decode side on a miss
/// (here the formulas' split already meets, so the search never grows).
#[test]
fn a_pd_answer_is_the_smallest_split_a_resimulation_confirms() {
    let (plan, report) = run(&format!("{LONG} --compare-disagg"));
    let d = &report.devices[0];
    let s = d.sizing.as_ref().expect("a sizing answer");
    assert_eq!(s.deployment, DeploymentKind::Disaggregated, "{s:?}");
    let (p, dd) = (s.prefill_instances.as_ref().unwrap(), s.decode_instances.as_ref().unwrap());
    assert_eq!(s.devices, p.devices + dd.devices);
    assert_eq!(s.instances, p.instances + dd.instances);
    assert_eq!((p.devices, dd.devices), (p.instances * p.devices_per_instance, dd.instances * dd.devices_per_instance));
    assert!(p.instances >= 2, "the prefill side can lose an instance: {s:?}");
    assert!(s.max_request_rate_within_slo >= 20.0 * 0.95, "{s:?}");
    // The aggregated answer alone needs more devices.
    let (_, agg) = run(LONG);
    let a = agg.devices[0].sizing.as_ref().unwrap();
    assert_eq!(a.deployment, DeploymentKind::Aggregated);
    assert!(a.devices > s.devices, "P/D {} devices, aggregated {}", s.devices, a.devices);
    // Re-simulate from the report's rows.
    assert_eq!([d.phases[0].phase, d.phases[1].phase], [Phase::Prefill, Phase::Decode]);
    let (prow, drow) = (&d.phases[0].rows[0], &d.phases[1].rows[0]);
    assert_eq!((prow.parallel.as_str(), drow.parallel.as_str()), (p.parallel.as_str(), dd.parallel.as_str()));
    let row = pair(prow, prow.ttft_ms.unwrap(), drow, drow.tpot_ms.unwrap(), 200);
    let device = &plan.devices[0];
    let at = |np: u32, nd: u32| simulate_split(&plan, device, &row, np, nd, 20.0, 2000).unwrap();
    let answer = at(p.instances, dd.instances);
    assert!(answer.slo_met, "{answer:?}");
    assert_eq!(answer.ttft.p99, s.ttft_ms, "the sizing's check is that very simulation");
    assert_eq!(answer.tpot.p99, s.tpot_ms);
    assert!(!at(p.instances - 1, dd.instances).slo_met, "one prefill instance fewer misses");
    assert_eq!(p.one_fewer.map(|f| f.meets_slo), Some(false));
    if dd.instances > 1 {
        assert!(!at(p.instances, dd.instances - 1).slo_met, "one decode instance fewer misses");
        assert_eq!(dd.one_fewer.map(|f| f.meets_slo), Some(false));
    } else {
        assert_eq!(dd.one_fewer, None);
    }
    assert_eq!(s.one_fewer.map(|f| f.meets_slo), Some(false));
    // The JSON names the issue gives.
    let j = serde_json::to_value(&report).unwrap();
    let js = &j["devices"][0]["sizing"];
    assert_eq!(js["deployment"], "disaggregated");
    for role in ["prefill_instances", "decode_instances"] {
        for key in ["instances", "devices", "devices_per_instance", "tp", "dp", "ep", "parallel"] {
            assert!(js[role].get(key).is_some(), "{role}.{key}: {js}");
        }
    }
}

/// Where a P/D deployment needs as many devices as the aggregated answer (the 8B case
/// at 60 req/s: 3 devices either way), `--compare-disagg` answers aggregated; `--disagg` alone
/// answers P/D. Mutation: `below` itself instead of one fewer as the P/D bound, and the P/D
/// answer of 3 devices replaces the aggregated one.
#[test]
fn the_tie_goes_to_aggregated_serving() {
    let base = "meta-llama/Meta-Llama-3.1-8B --device H100_SXM --serving-engine vllm --input-length 1000 --output-length 200 \
        --ttft-limits 2000 --tpot-limits 50 --slo-percentile p99 --seed 7 --num-requests 3000 --num-devices 16 --target-request-rate 60";
    let both = run_json(&base.split_whitespace().chain(["--compare-disagg"]).collect::<Vec<_>>());
    let pd = run_json(&base.split_whitespace().chain(["--disagg"]).collect::<Vec<_>>());
    let (b, p) = (&both["devices"][0]["sizing"], &pd["devices"][0]["sizing"]);
    assert_eq!(p["deployment"], "disaggregated");
    assert_eq!(b["deployment"], "aggregated");
    assert_eq!(b["devices"], p["devices"], "a tie: {b} / {p}");
}

#[test]
fn pd_sizing_flags_name_what_is_missing() {
    let base =
        &["meta-llama/Meta-Llama-3.1-8B", "--device", "H100_SXM", "--input-length", "1000", "--output-length", "200", "--num-devices", "4"];
    usage_error(&args(base, &["--target-request-rate", "5", "--disagg", "--tpot-limits", "50"]), &["--ttft-limits", "--tpot-limits"]);
    usage_error(
        &args(
            base,
            &[
                "--target-concurrency",
                "4",
                "--enable-optimize-prefill-decode-ratio",
                "--prefill-devices-per-instance",
                "1",
                "--decode-devices-per-instance",
                "1",
            ],
        ),
        &["--enable-optimize-prefill-decode-ratio", "--disagg", "chooses the instances itself"],
    );
    usage_error(
        &args(base, &["--goodput", "--arrival", "poisson", "--request-rate", "3", "--disagg", "--ttft-limits", "9"]),
        &["aggregated"],
    );
    usage_error(&args(&base[..base.len() - 2], &["--target-request-rate", "5", "--compare-disagg"]), &["--num-devices of at least 2"]);
    usage_error(&args(base, &["--target-request-rate", "5", "--compare-disagg", "--shard", "1/2"]), &["--shard"]);
}
