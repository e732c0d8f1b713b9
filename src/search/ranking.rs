//! Which feasible rows win: filter probes by the SLO, order them (by throughput, or for open
//! loops by the share of requests within the limits), keep the best row per parallel layout.

use crate::outcome::Row;
use crate::plan::{EngineKind, Plan};

/// How the plan's feasible rows are ranked.
pub fn ranking(plan: &Plan) -> Ranking {
    if plan.engine != EngineKind::Analytic && plan.sim.arrival.is_open() {
        Ranking::OpenLoop
    } else {
        Ranking::Throughput
    }
}

/// How feasible rows are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    /// Most tokens/s first (closed loop, burst, analytic: the load is the searched variable).
    Throughput,
    /// Open-loop arrivals fix the load, so the delivered tokens/s of every layout that keeps up
    /// is the offered rate give or take sampling noise: rank by the share of requests within
    /// both limits, then by the lower TTFT, then by throughput.
    OpenLoop,
}

/// Filter rows by the SLO, rank them and keep the best row per parallel layout.
pub fn best_per_layout(rows: &[Row], ttft_limit: f64, tpot_limit: f64, ranking: Ranking) -> Vec<Row> {
    let mut ok: Vec<&Row> = rows
        .iter()
        .filter(|r| r.feasible())
        .filter(|r| r.tpot_ms.unwrap_or(0.0) <= tpot_limit && r.ttft_ms.unwrap_or(0.0) <= ttft_limit)
        .collect();
    let by_throughput = |a: &&Row, b: &&Row| b.throughput.total_cmp(&a.throughput).then(a.concurrency.cmp(&b.concurrency));
    match ranking {
        Ranking::Throughput => ok.sort_by(by_throughput),
        Ranking::OpenLoop => {
            let good = |r: &Row| r.sim.as_ref().map_or(0.0, |s| s.goodput);
            ok.sort_by(|a, b| {
                good(b)
                    .total_cmp(&good(a))
                    .then(a.ttft_ms.unwrap_or(f64::INFINITY).total_cmp(&b.ttft_ms.unwrap_or(f64::INFINITY)))
                    .then(by_throughput(a, b))
            })
        }
    }
    let mut out: Vec<Row> = Vec::new();
    for r in ok {
        if !out.iter().any(|o| o.parallel == r.parallel) {
            out.push(r.clone());
        }
    }
    out
}
