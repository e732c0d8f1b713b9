//! The search over simulated output, end to end (in process, as the CLI runs it): a batch
//! search that finds what a grid of single-batch runs finds, and best throughputs that never
//! fall when an SLO is loosened.

use throughput_optimizer::cli::{self, Command, RawArgs};

/// The plan and report of a run of `Qwen/Qwen3-8B --num-devices 1` plus `extra`.
fn run(extra: &str) -> (throughput_optimizer::plan::Plan, throughput_optimizer::outcome::Report) {
    run_on(1, extra)
}

/// [`run`] on `devices` devices.
fn run_on(devices: u32, extra: &str) -> (throughput_optimizer::plan::Plan, throughput_optimizer::outcome::Report) {
    let n = devices.to_string();
    let argv =
        ["throughput-optimizer", "Qwen/Qwen3-8B", "--num-devices", n.as_str(), "--quiet"].into_iter().chain(extra.split_whitespace());
    let plan = match cli::build(RawArgs::parse_argv(argv).unwrap()).unwrap() {
        Command::Run(p) => p,
        _ => unreachable!("a run"),
    };
    let report = throughput_optimizer::search::run(&plan);
    (*plan, report)
}

/// The best feasible (throughput, batch size) of [`run`], or `None` when nothing is feasible.
fn best(extra: &str) -> Option<(f64, u32)> {
    run(extra).1.devices[0].phases[0].best.first().map(|r| (r.throughput, r.batch_size))
}

/// Defect: the batch search bisected as if TTFT were monotone in the batch size. With 3000-token
/// prompts and a 12000-token budget the closed loop's TTFT reaches 820 ms by batch 4 and then
/// hovers around it with period 4 up to batch 97, so bisection settled on batch 3 (184 tok/s)
/// while batch 74 meets the limit at 768 tok/s. The search must find ≥ 90 % of the best
/// feasible single-batch run of the grid 1..=100.
#[test]
fn ttft_bound_search_finds_what_a_grid_finds() {
    let flags = "--input-length 3000 --output-length 300 --ttft-limits 820";
    let (found, batch) = best(flags).expect("the search finds a feasible batch");
    let grid = (1..=100u32).filter_map(|b| best(&format!("{flags} --batch-range {b} {b}"))).map(|(t, _)| t).fold(0.0, f64::max);
    assert!(found >= 0.9 * grid, "the search found {found:.1} tok/s at batch {batch}; the grid's best is {grid:.1}");
}

/// Defect: the closed loop stopped once doubling its window moved throughput by < 1 %, which a
/// variable-length workload met on a few dozen requests; p99 latencies read off so few were
/// noise, and a looser TPOT limit gave a lower best throughput (50 → 397.1 tok/s, 52 → 385.0;
/// 68 → 520.6, 70 → 504.8). With batch means, a confidence interval and a minimum sample for
/// the p99, the best throughput must not fall as the limit loosens. The same on H100_SXM under
/// vLLM (issue 24: 52 → 2,049 tok/s, 68 → 2,015 there before the KV-bounded batch search).
/// Mutation: drop `probes.below_the_boundary(min)` from `batch::search` and a pair falls.
#[test]
fn looser_tpot_limit_never_lowers_the_best_throughput() {
    for device in ["TEST_DEVICE", "H100_SXM"] {
        let flags = format!("--device {device} --length-distribution --output-length 500 --slo-percentile p99 --tpot-limits");
        let bests: Vec<f64> = [50, 52, 68, 70].iter().map(|l| best(&format!("{flags} {l}")).expect("feasible").0).collect();
        for (w, limits) in bests.windows(2).zip([(50, 52), (52, 68), (68, 70)]) {
            assert!(
                w[1] >= w[0],
                "{device}: TPOT ≤ {} ms gives {:.1} tok/s, the looser ≤ {} ms only {:.1}",
                limits.0,
                w[0],
                limits.1,
                w[1]
            );
        }
    }
}

/// Defect: the out-of-memory pre-check of a simulated closed loop counted a shared prefix once
/// per request. 16 requests of 16000 tokens sharing a 15872-token prefix peak at 22.9 % of the
/// KV pool, yet batch 19 was reported out of memory. The prefix's blocks count once per group.
#[test]
fn a_shared_prefix_counts_once_in_the_memory_pre_check() {
    let flags = "--input-length 16000 --output-length 256 --prefix-groups 1 --prefix-length 15872 --batch-range 19 19";
    let (t, b) = best(flags).expect("batch 19 fits: the prefix is held once");
    assert_eq!(b, 19);
    assert!(t > 0.0);
    // Without the shared prefix the same batch does not fit.
    assert!(best("--input-length 16000 --output-length 256 --batch-range 19 19").is_none());
}

/// Defect: an open loop simulated `--num-requests` or 1000 requests, so a 3,000-row trace was
/// cut to its first 1,000 ("800 requests measured", the middle 80 %) without a word. A trace
/// now runs whole; an explicit `--num-requests` cut is simulated as asked, with a warning.
#[test]
fn a_trace_is_simulated_whole_and_a_cut_is_announced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.csv");
    let rows: String = (0..3000).map(|i| format!("{:.3},{},{}\n", i as f64 * 0.05, 300 + (i * 37) % 500, 50 + (i * 13) % 100)).collect();
    std::fs::write(&path, format!("arrival_s,input_tokens,output_tokens\n{rows}")).unwrap();
    let trace = format!("--arrival trace {} --input-length 500 --output-length 100", path.display());
    let measured =
        |report: &throughput_optimizer::outcome::Report| report.devices[0].phases[0].best[0].sim.as_ref().unwrap().measured_requests;
    let (plan, report) = run(&trace);
    assert_eq!(measured(&report), 2400, "the middle 80 % of all 3000 requests");
    assert!(plan.warnings.iter().all(|w| !w.contains("--num-requests")), "{:?}", plan.warnings);
    let (plan, report) = run(&format!("{trace} --num-requests 1000"));
    assert_eq!(measured(&report), 800);
    assert!(plan.warnings.iter().any(|w| w.contains("only the first 1000 of the trace's 3000")), "{:?}", plan.warnings);
}

/// The best throughput of a run on `devices` devices (0 when nothing is feasible).
fn best_on(devices: u32, extra: &str) -> f64 {
    run_on(devices, extra).1.devices[0].phases[0].best.first().map_or(0.0, |r| r.throughput)
}

/// Search properties on the real cost model, end to end: a looser TTFT limit, more devices and
/// a higher prefix-cache hit rate raise the best throughput here (src/search/properties.rs
/// checks "never lower" over random small workloads with the fixed cost model). Here: 198 →
/// 771 tok/s; 771, 1,543, 3,085 on 1, 2, 4 devices; 771, 929, 1,173 at hit rates 0, 0.3, 0.6.
/// Mutation: set `prefix_hit_rate: 0.0` in `search::engine::sim::setup::instance_template` (the flag
/// is then ignored by the simulator and the three hit rates tie).
#[test]
fn looser_limits_more_devices_and_prefix_hits_raise_the_best() {
    let w = "--input-length 2000 --output-length 300 --tpot-limits 30";
    let (tight, loose) = (best_on(1, &format!("{w} --ttft-limits 400")), best_on(1, &format!("{w} --ttft-limits 800")));
    assert!(tight > 0.0 && loose > tight, "TTFT ≤ 400 ms: {tight:.1} tok/s, ≤ 800 ms: {loose:.1}");
    let by_devices: Vec<f64> = [1, 2, 4].iter().map(|&n| best_on(n, w)).collect();
    assert!(by_devices.windows(2).all(|p| p[1] > p[0]), "best by 1, 2, 4 devices: {by_devices:?}");
    let by_hits: Vec<f64> = ["0", "0.3", "0.6"].iter().map(|h| best_on(1, &format!("{w} --prefix-cache-hit-rate {h}"))).collect();
    assert!(by_hits.windows(2).all(|p| p[1] > p[0]), "best by hit rate 0, 0.3, 0.6: {by_hits:?}");
}

/// Common random numbers: every probe of one candidate draws its requests from the same seeded
/// streams, so request i has the same lengths (and, in an open loop, the same arrival time)
/// whatever the batch size probed, and probe-to-probe differences come from the configuration.
/// Checked on the probes' own simulations: a benchmark-run closed loop of variable lengths
/// (spread lengths, client jitter) at batch 4 and 16, and a Poisson open loop whose running cap
/// differs. Mutation: derive the request stream's seed from the batch in
/// `search::engine::sim::SimSetup::config` (`factory` with `plan.seed + batch`): lengths and
/// arrivals then differ by batch.
#[test]
fn every_probe_of_a_candidate_draws_the_same_requests() {
    use throughput_optimizer::outcome::Phase;
    use throughput_optimizer::search::{candidates, CandidateCtx};
    let requests = |extra: &str, batches: [u32; 2]| {
        let (plan, _) = run(&format!("--input-length 500 --output-length 100 --batch-range 1 1 {extra}"));
        let cand = candidates::enumerate(&plan, 1, Phase::Aggregated).0[0];
        let ctx = CandidateCtx::new(&plan, &plan.devices[0], cand, Phase::Aggregated);
        batches.map(|b| {
            let (cfg, factory) = ctx.sim_setup().config(b, 4096);
            let (_, reqs) = throughput_optimizer::sim::simulate_detailed(&cfg, &ctx.sim_setup().cost, factory, &mut |_| {}).unwrap();
            reqs
        })
    };
    let [a, b] = requests("--random-range-ratio 0.5 --num-requests 64", [4, 16]);
    assert_eq!((a.len(), b.len()), (64, 64));
    let lengths = |r: &[throughput_optimizer::sim::RequestState]| r.iter().map(|q| (q.input, q.output)).collect::<Vec<_>>();
    assert_eq!(lengths(&a), lengths(&b));
    assert!(a.iter().any(|q| q.input != a[0].input), "lengths vary");
    // The first wave is sent at t = 0: its arrivals are the client jitter's first draws.
    assert_eq!(a[..4].iter().map(|q| q.arrival).collect::<Vec<_>>(), b[..4].iter().map(|q| q.arrival).collect::<Vec<_>>());
    assert!(a[..4].iter().any(|q| q.arrival > 0), "jittered sends");
    let [a, b] = requests("--arrival poisson --request-rate 20 --num-requests 64 --random-range-ratio 0.5", [4, 16]);
    let arrivals = |r: &[throughput_optimizer::sim::RequestState]| r.iter().map(|q| (q.arrival, q.input, q.output)).collect::<Vec<_>>();
    assert_eq!(arrivals(&a), arrivals(&b));
    assert!(a[1..].iter().zip(&a).all(|(x, y)| x.arrival >= y.arrival));
}

/// A plan of the CLI arguments `argv` (the binary's name first).
fn plan_of_argv(argv: &[&str]) -> throughput_optimizer::plan::Plan {
    match cli::build(RawArgs::parse_argv(argv.iter().copied()).unwrap()).unwrap() {
        Command::Run(p) => *p,
        _ => unreachable!("a run"),
    }
}

/// Issue 24: the frontier of an 8B on one H100 had 2 points (batch 1 and the best, 199): the
/// search probes its boundary only. The spread pass probes batch sizes spread along
/// [1, boundary], so the frontier has at least 8 points; they only add points, so the best row
/// is still batch 199 (7494.66 tokens/s before the pass and after it; 7727.35 since vLLM's H100
/// calibration was re-fitted with a per-sequence host cost, issue 22; 7888.04 since the host's
/// per-step work, which the current release overlaps, was split from the gap; 8012.45 at batch 216
/// since the H100 holds the 79.19 GiB CUDA reports, not 80 × 10⁹ bytes; 7812.44 since its clocks
/// follow its load under the 700 W limit). Mutation: make
/// `spread::fill_frontier` return at once and the frontier has 2 points.
#[test]
fn the_frontier_of_an_8b_on_one_h100_has_eight_points() {
    let plan = plan_of_argv(&[
        "throughput-optimizer",
        "meta-llama/Meta-Llama-3.1-8B",
        "--device",
        "H100_SXM",
        "--num-devices",
        "1",
        "--input-length",
        "1024",
        "--output-length",
        "1024",
        "--quantize-linear-action",
        "DISABLED",
        "--quiet",
    ]);
    let report = throughput_optimizer::search::run(&plan);
    let d = &report.devices[0];
    let f = d.frontier.as_ref().unwrap();
    let on: Vec<u32> = f.points.iter().filter(|p| p.on_frontier).filter_map(|p| p.batch_size).collect();
    assert!(on.len() >= 8, "frontier batches {on:?}");
    let best = &d.phases[0].best[0];
    assert_eq!((format!("{:.2}", best.throughput), best.batch_size), ("7812.44".to_string(), 216));
    // The chosen point is still Overall Best's row.
    assert_eq!(f.points[f.chosen.unwrap()].batch_size, Some(216));
}

/// Issue 24: ITL was collected from every step of a time window while TPOT is over the measured
/// requests: an open loop of 500 requests measured 400 and counted 73,992 gaps. ITL is now the
/// gaps between the tokens of the measured requests: 400 × 199, and its mean is their
/// inter-token TPOT's (fixed lengths: every request has the same number of gaps). The same on
/// a decode-only (P/D) search, whose requests arrive with their first token. Mutation: drop
/// the segment `instance::builder` opens when a request joins a decode instance with its KV
/// and the decode-only counts are 0.
#[test]
fn itl_counts_the_gaps_of_the_measured_requests() {
    let (_, report) = run("--input-length 1000 --output-length 200 --arrival poisson --request-rate 5 --num-requests 500");
    let sim = report.devices[0].phases[0].best[0].sim.as_ref().unwrap();
    assert_eq!(sim.measured_requests, 400);
    let itl = &sim.latency.itl;
    assert_eq!(itl.count, 400 * 199);
    assert!((itl.mean - sim.latency.tpot_inter_token.mean).abs() < 1e-3, "{itl:?}");
    let (_, report) = run("--input-length 1000 --output-length 200 --disagg --tpot-limits 50");
    let decode = report.devices[0].phases.iter().find(|p| p.phase == throughput_optimizer::outcome::Phase::Decode).unwrap();
    let sims: Vec<_> = decode.rows.iter().filter_map(|r| r.sim.as_ref()).filter(|s| s.measured_requests > 0).collect();
    assert!(!sims.is_empty());
    for s in sims {
        assert_eq!(s.latency.itl.count, s.measured_requests * 199, "{:?}", s.latency.itl);
    }
}
