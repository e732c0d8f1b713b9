//! The chunk-budget study (`--max-batched-tokens A B C …`): for the best layout (or each, with
//! `--sweep-all-layouts`) the same concurrency is evaluated under every budget, so the table
//! shows what the budget alone does — smaller chunks shorten the steps that decodes share
//! (lower inter-token tail latency) but take more steps per prompt (higher TTFT) — next to the
//! best throughput each budget reaches under the SLO.

use super::{CandidateCtx, Engine, Phase};
use crate::hardware::DeviceProfile;
use crate::outcome::{BudgetSweep, Row, SweepPoint};
use crate::plan::Plan;

fn point(budget: u64, row: &Row, best: Option<&Row>) -> SweepPoint {
    let sim = row.sim.as_ref();
    SweepPoint {
        budget,
        chunks_per_prompt: row.prefill_num_chunks,
        ttft_ms: row.ttft_ms,
        ttft_p99_ms: sim.map(|s| s.latency.ttft.p99),
        tpot_ms: row.tpot_ms,
        tpot_p99_ms: sim.map(|s| s.latency.tpot_inter_token.p99),
        itl_p99_ms: sim.map(|s| s.latency.itl.p99),
        throughput: row.throughput,
        feasible: row.feasible(),
        best_batch: best.map(|b| b.batch_size),
        best_throughput: best.map(|b| b.throughput),
    }
}

/// Study each layout in `layouts` (rows of the phase's best table) across the plan's budgets.
pub fn study(plan: &Plan, engine: &dyn Engine, device: &DeviceProfile, rows: &[Row], layouts: &[Row]) -> Vec<BudgetSweep> {
    let budgets = plan.search.max_batched_tokens.clone().unwrap_or_default();
    let (ttft, tpot) = super::phase_limits(plan, Phase::Aggregated);
    let mut out = Vec::new();
    for layout in layouts {
        let cands = super::candidates::enumerate(plan, layout.num_devices, Phase::Aggregated).0;
        let Some(cand) = cands.into_iter().find(|c| c.parallel == layout.layout && c.mtp == layout.mtp) else { continue };
        let ctx = CandidateCtx::new(plan, device, cand, Phase::Aggregated);
        let mut points = Vec::new();
        for &b in &budgets {
            let at_batch = rows
                .iter()
                .find(|r| r.parallel == layout.parallel && r.batch_size == layout.batch_size && r.max_batched_tokens == b)
                .cloned();
            let row = at_batch.unwrap_or_else(|| engine.probe(&ctx, layout.batch_size, b).0.row);
            let best = crate::search::best_per_layout(
                &rows.iter().filter(|r| r.parallel == layout.parallel && r.max_batched_tokens == b).cloned().collect::<Vec<_>>(),
                ttft,
                tpot,
                super::ranking(plan),
            );
            points.push(point(b, &row, best.first()));
        }
        out.push(BudgetSweep { parallel: layout.parallel.clone(), batch_size: layout.batch_size, concurrency: layout.concurrency, points });
    }
    out
}
