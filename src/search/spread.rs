//! Points spread along the batch range for the deployment plane. Bracketing and bisection
//! probe a layout near its boundary only, so its points on the plane are its smallest batch and
//! a cluster at the boundary: the Pareto frontier of an 8B on one H100 had 2 points (batch 1
//! and 199). Once every layout of a phase is searched, a frontier of fewer than
//! [`MIN_FRONTIER_POINTS`] points gets [`SPREAD_POINTS`] batch sizes spread geometrically over
//! each of its layouts' ranges, so it shows how throughput per device trades against speed per
//! user all along them.
//!
//! Cheap by design: only a sparse frontier is filled, and only the layouts with a point on it
//! are probed (a layout whose smallest batch and boundary are both beaten elsewhere rarely
//! reaches it in between). The extra probes come after every search decision, so they only
//! add points: no boundary moves. The pass needs the whole phase, so a `--shard` run leaves it
//! to `merge`, which runs it on the merged phase as the unsharded run does.

use super::batch::Probe;
use super::candidates::Candidate;
use super::engine::{CandidateCtx, Engine};
use super::frontier;
use crate::hardware::DeviceProfile;
use crate::outcome::{Phase, Row};
use crate::plan::Plan;
use rayon::prelude::*;

/// Batch sizes over `[min, boundary]`, both ends included, that a filled layout has probed.
pub const SPREAD_POINTS: u32 = 8;
/// A frontier with at least this many points is left as it is.
pub const MIN_FRONTIER_POINTS: usize = 8;

/// The sizes the pass probes in a layout whose smallest batch is `min` and largest feasible
/// batch `top`: [`SPREAD_POINTS`] spread geometrically over `[min, top]`, less the two ends.
pub fn spread_sizes(min: u32, top: u32) -> Vec<u32> {
    let min = min.max(1);
    let ratio = top as f64 / min as f64;
    let mut sizes: Vec<u32> = (1..SPREAD_POINTS - 1)
        .map(|i| crate::util::round_half_even(min as f64 * ratio.powf(i as f64 / (SPREAD_POINTS - 1) as f64)) as u32)
        .filter(|&b| b > min && b < top)
        .collect();
    sizes.dedup();
    sizes
}

/// Fill a sparse frontier of an aggregated phase: each layout (its candidate and its probed rows,
/// in batch order) with a point on the frontier gets its [`spread_sizes`] probed under the
/// budget its search settled on, the rows kept in batch order.
/// Mutation: return at once here and `the_frontier_of_an_8b_on_one_h100_has_eight_points` sees 2.
pub fn fill_frontier(plan: &Plan, engine: &dyn Engine, device: &DeviceProfile, phase: Phase, layouts: &mut [(Candidate, &mut Vec<Row>)]) {
    let open_loop = plan.engine != crate::plan::EngineKind::Analytic && plan.sim.arrival.is_open();
    // An open loop probes each layout once at its running cap; a chunk-budget study searches
    // several budgets per layout, whose rows are not one curve.
    let studies_budgets = plan.search.max_batched_tokens.as_ref().is_some_and(|b| b.len() > 1);
    if phase != Phase::Aggregated || open_loop || studies_budgets {
        return;
    }
    let owners: Vec<usize> = layouts.iter().enumerate().flat_map(|(i, (_, rows))| std::iter::repeat_n(i, rows.len())).collect();
    let rows: Vec<Row> = layouts.iter().flat_map(|(_, rows)| rows.iter().cloned()).collect();
    let mut points = frontier::aggregated_points(&rows, plan.slo.ttft_limit(), plan.slo.tpot_limit());
    frontier::mark_frontier(&mut points);
    if points.iter().filter(|p| p.on_frontier).count() >= MIN_FRONTIER_POINTS {
        return;
    }
    let mut reaching = vec![false; layouts.len()];
    for p in points.iter().filter(|p| p.on_frontier) {
        if let Some(i) = p.row {
            reaching[owners[i]] = true;
        }
    }
    layouts.par_iter_mut().zip(reaching).filter(|(_, r)| *r).for_each(|((cand, rows), _)| {
        let ctx = CandidateCtx::new(plan, device, *cand, phase);
        spread_layout(engine, &ctx, rows);
    });
}

/// Probe one layout's [`spread_sizes`] that it has not probed.
fn spread_layout(engine: &dyn Engine, ctx: &CandidateCtx, rows: &mut Vec<Row>) {
    let Some(top) = rows.iter().filter(|r| r.feasible()).max_by_key(|r| r.batch_size) else { return };
    let (top, budget) = (top.batch_size, top.max_batched_tokens);
    let added: Vec<Row> = spread_sizes(ctx.plan.search.batch_min, top)
        .into_iter()
        .filter(|&b| !rows.iter().any(|r| r.batch_size == b))
        .map(|b| {
            let (Probe { row, .. }, _) = engine.probe(ctx, b, budget);
            row
        })
        .collect();
    rows.extend(added);
    rows.sort_by_key(|r| r.batch_size);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_sizes_are_geometric_between_the_ends() {
        // 398^(i/7) for i = 1..6: 2.35, 5.53, 13.0, 30.6, 71.9, 169.2.
        assert_eq!(spread_sizes(1, 398), [2, 6, 13, 31, 72, 169]);
        // A short range: duplicates and the ends fall away.
        assert_eq!(spread_sizes(1, 4), [2, 3]);
        assert_eq!(spread_sizes(3, 3), Vec::<u32>::new());
        // 8^(i/7): 1.35, 1.81, 2.44, 3.28, 4.42, 5.94.
        assert_eq!(spread_sizes(0, 8), [2, 3, 4, 6]);
    }
}
