//! A P/D plan simulated as one system: the planned figures beside the simulated
//! distribution, the verdict on the SLO with its cautions, and every instance split within the
//! device budget. Shared by the P/D-ratio block and the `--compare-disagg` comparison.

use super::layout::{fit, new_table, py_float};
use crate::plan::Plan;
use std::fmt::Write;

/// Planned load from which a side counts as saturated in the verification.
const SATURATED: f64 = 0.98;

/// The best P/D plan simulated as one system, and the splits simulated within the budget.
pub(super) fn verification_block(
    plan: &Plan,
    row: &crate::outcome::PdRow,
    v: &crate::outcome::PdVerification,
    total: Option<u32>,
) -> String {
    let mut s = String::from(
        "Simulated verification of the plan (prefill and decode instances as one system, Poisson arrivals at the split's balanced rate):\n",
    );
    let _ = writeln!(
        s,
        "Split: {} P instance(s) x {} devices + {} D instance(s) x {} devices; arrival rate {:.3} req/s (prefill side at {:.0} %, decode side at {:.0} % of planned capacity); KV transfer {:.2} ms per request ({} routing); {} requests",
        v.prefill_instances,
        row.p_devices,
        v.decode_instances,
        row.d_devices,
        v.arrival_rate,
        v.prefill_utilization * 100.0,
        v.decode_utilization * 100.0,
        row.p_transfer_ms,
        crate::quant::NamedEnum::name(plan.sim.routing),
        v.requests
    );
    match (&v.simulated, &v.simulation_error) {
        (None, e) => {
            let _ =
                writeln!(s, "The simulation could not run: {}", e.as_ref().map_or_else(|| "unknown error".to_string(), |e| e.to_string()));
        }
        (Some(sim), _) => {
            s += &planned_vs_simulated(v, sim, plan.output.width);
            s += &verification_verdict(plan, v, sim);
        }
    }
    if !v.splits.is_empty() {
        s += &splits_block(v, total, plan.output.width);
    }
    s
}

/// The planned TTFT, TPOT and request rate beside the simulated distribution.
pub(super) fn planned_vs_simulated(v: &crate::outcome::PdVerification, sim: &crate::outcome::PdSimulated, w: Option<usize>) -> String {
    let mut t = new_table(&["metric", "planned", "simulated mean", "p50", "p90", "p99"]);
    for (name, planned, st) in [("TTFT (ms)", v.planned_ttft_ms, &sim.ttft), ("TPOT (ms)", v.planned_tpot_ms, &sim.tpot)] {
        t.add_row(vec![
            name.to_string(),
            format!("{planned:.2}"),
            format!("{:.2}", st.mean),
            format!("{:.2}", st.p50),
            format!("{:.2}", st.p90),
            format!("{:.2}", st.p99),
        ]);
    }
    t.add_row(vec![
        "delivered req/s".to_string(),
        format!("{:.3}", v.planned_qps),
        format!("{:.3}", sim.request_rate),
        "-".into(),
        "-".into(),
        "-".into(),
    ]);
    let mut s = fit(t, w, false);
    s.push('\n');
    s
}

/// Whether the simulated system meets the SLO, the cautions on how far that holds (run too
/// short, a side near saturation), and the sustainable rate when it does not.
pub(super) fn verification_verdict(plan: &Plan, v: &crate::outcome::PdVerification, sim: &crate::outcome::PdSimulated) -> String {
    let mut s = String::new();
    let stat = crate::quant::NamedEnum::name(plan.sim.slo_percentile);
    let _ = writeln!(
        s,
        "Verdict: the simulated system {} the SLO ({stat} TTFT {:.2} ms vs limit {}, {stat} TPOT {:.2} ms vs limit {}); {:.1} % of requests met both limits; {:.1} output tokens/s.",
        if sim.slo_met { "MEETS" } else { "does NOT meet" },
        sim.ttft.pick(plan.sim.slo_percentile),
        py_float(plan.slo.ttft_ms),
        sim.tpot.pick(plan.sim.slo_percentile),
        py_float(plan.slo.tpot_ms),
        sim.goodput * 100.0,
        sim.output_throughput
    );
    let (side, load) =
        if v.decode_utilization >= v.prefill_utilization { ("decode", v.decode_utilization) } else { ("prefill", v.prefill_utilization) };
    if !sim.steady {
        let _ = writeln!(
            s,
            "Caution: {} requests are too few to reach a steady state at this rate (a request lives about as long as the arrivals last); the delivered rate includes the drain. Raise --num-requests.",
            v.requests
        );
    }
    if load >= SATURATED {
        let _ = writeln!(
            s,
            "Caution: the {side} side runs at {:.0} % of its planned capacity, where queues never settle; this verdict holds for {} requests and can change with --num-requests.",
            load * 100.0,
            v.requests
        );
    }
    match v.sustainable_rate {
        Some(r) if !sim.slo_met => {
            let _ = writeln!(
                s,
                "Sustainable rate: the split holds the SLO up to about {:.3} req/s ({:.0} % of the planned {:.3}); plan for that, or add headroom.",
                r,
                r / v.arrival_rate * 100.0,
                v.arrival_rate
            );
        }
        None if !sim.slo_met => {
            let _ = writeln!(s, "Sustainable rate: none found down to 1/32 of the planned rate — the layouts themselves miss the SLO in the combined system.");
        }
        _ => {}
    }
    s
}

/// Every instance split within the device budget, simulated, and how the arithmetic split
/// compares with the best of them.
fn splits_block(v: &crate::outcome::PdVerification, total: Option<u32>, w: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Instance splits within {} devices, each simulated at its balanced rate:", total.unwrap_or(0));
    let mut t = new_table(&["P instances", "D instances", "arrival (req/s)", "delivered (req/s)", "within SLO (req/s)", "SLO met"]);
    for e in &v.splits {
        t.add_row(vec![
            e.prefill_instances.to_string(),
            e.decode_instances.to_string(),
            format!("{:.3}", e.arrival_rate),
            format!("{:.3}", e.delivered_qps),
            format!("{:.3}", e.good_qps),
            match &e.error {
                Some(err) => format!("error: {err}"),
                None => format!("{}{}", if e.slo_met { "yes" } else { "no" }, if e.steady { "" } else { " (run too short)" }),
            },
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    let best = &v.splits[0];
    let planned = v.splits.iter().find(|e| e.prefill_instances == v.prefill_instances && e.decode_instances == v.decode_instances);
    match planned {
        Some(p) if p.prefill_instances == best.prefill_instances && p.decode_instances == best.decode_instances => {
            let _ = writeln!(s, "The arithmetic split is also the best by simulation.");
        }
        Some(p) => {
            let _ = writeln!(
                s,
                "The split {} P : {} D beats the arithmetic split {} P : {} D by simulation ({:.3} vs {:.3} requests/s within the SLO).",
                best.prefill_instances, best.decode_instances, p.prefill_instances, p.decode_instances, best.good_qps, p.good_qps
            );
        }
        None => {
            let _ = writeln!(
                s,
                "Best split by simulation: {} P : {} D ({:.3} requests/s within the SLO).",
                best.prefill_instances, best.decode_instances, best.good_qps
            );
        }
    }
    s
}
