//! The analytic engine: the formulas of [`crate::analytic`] with forwards priced by the candidate's
//! roofline model, shaped as the original shapes them (global concurrency spread over DP
//! replicas, decode at the mid-generation context `O/2 + input + query`). A pipelined
//! candidate's forward is one micro-batch's step through its stages
//! ([`crate::analytic::pipeline`]), with one micro-batch per stage in flight.

use super::row::{base_row, composition_rows, stats};
use crate::analytic::pipeline::cycle_ms;
use crate::analytic::{
    agg_chunked, agg_single_chunk, agg_varlen, chunk_plan, disagg_decode, disagg_prefill, disagg_prefill_varlen, mtp_tokens_per_step,
    AggOutcome, Forward, ForwardOracle, PhaseOutcome,
};
use crate::cost::pipeline::StageModels;
use crate::cost::{BatchShape, Breakdown, PhaseLoad, StepCostModel};
use crate::outcome::Phase;
use crate::outcome::{Row, StopReason};
use crate::plan::{SpeculativeMethod, TpotDefinition};
use crate::search::batch::{Probe, ProbeStats};
use crate::search::{CandidateCtx, Engine};
use crate::workload::Lengths;

/// Stateless: everything comes from the candidate context.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnalyticEngine;

/// Per-request shape facts of a candidate, derived once per probe.
pub struct Shapes {
    /// Effective prefill tokens per request (after the prefix cache, plus image tokens).
    pub effective: u64,
    /// Raw prompt tokens per request (decode context and throughput count these).
    pub input_raw: u64,
    pub output: u64,
    /// Query tokens per decode step (1 + MTP drafts, or the draft block).
    pub decode_query: u64,
    /// Expected output tokens per decode step.
    pub tokens_per_step: f64,
    /// Extra KV slots reserved per request beyond its context.
    pub kv_extra: u64,
    /// Vision patches per request (0 without images).
    pub image_patches: u64,
}

impl Shapes {
    pub fn new(ctx: &CandidateCtx) -> Self {
        let plan = ctx.plan;
        let hit = plan.workload.prefix_cache_hit_rate;
        let (patches, img_tokens) = match (&plan.workload.images, &plan.model.vision) {
            (Some(im), Some(v)) => {
                let (p, t) = v.image_tokens(im.height, im.width);
                (p * im.per_request as u64, t * im.per_request as u64)
            }
            _ => (0, 0),
        };
        let (decode_query, tokens_per_step, spec_extra) = match &plan.serving.speculative {
            Some(s) => {
                let acc = match s.method {
                    SpeculativeMethod::Dflash => s.acceptance.clamp(0.0, (s.block - 1) as f64),
                    SpeculativeMethod::Dspark => s.acceptance.clamp(0.0, s.block as f64),
                };
                (s.block as u64, acc + 1.0, s.block as u64 - 1)
            }
            None => (1 + ctx.cand.mtp as u64, mtp_tokens_per_step(ctx.cand.mtp, &plan.serving.mtp_acceptance_rates), 0),
        };
        let output = match &plan.workload.output {
            Lengths::Fixed(o) => *o,
            Lengths::Distribution(d) => d.effective_length(0.0),
        };
        Shapes {
            effective: plan.workload.input.effective(hit) + img_tokens,
            input_raw: plan.workload.input.mean_raw() + img_tokens,
            output,
            decode_query,
            tokens_per_step,
            kv_extra: (ctx.cand.mtp as u64).max(spec_extra) + 1,
            image_patches: patches,
        }
    }

    /// Decode context: `O/2 + input + query` (a mid-generation snapshot).
    pub fn decode_seq(&self) -> u64 {
        self.output / 2 + self.input_raw + self.decode_query
    }
}

/// Forwards of one candidate priced by its roofline model.
pub struct RooflineOracle<'a> {
    pub ctx: &'a CandidateCtx<'a>,
    pub shapes: Shapes,
    dp: u64,
    block: u64,
    reserved: f64,
}

impl<'a> RooflineOracle<'a> {
    pub fn new(ctx: &'a CandidateCtx<'a>) -> Self {
        RooflineOracle {
            shapes: Shapes::new(ctx),
            // Micro-batches in flight over the replicas (one per pipeline stage).
            dp: ctx.cand.parallel.dp as u64 * ctx.cand.parallel.pp as u64,
            block: ctx.plan.kv_block_size(ctx.device) as u64,
            reserved: ctx.reserved_bytes(),
            ctx,
        }
    }

    fn price(&self, shape: &BatchShape, seqs: u64, kv_tokens: u64) -> Forward {
        if let Some(st) = &self.ctx.stages {
            return self.price_stages(st, shape, seqs, kv_tokens);
        }
        let t = self.ctx.cost.step(shape);
        let kv = self.ctx.mem.kv_bytes(seqs, kv_tokens, self.block);
        Forward { ms: t.seconds * 1e3, mem: self.ctx.mem.usage(shape, kv, self.reserved), breakdown: t.breakdown }
    }

    /// A micro-batch's forward through the pipeline ([`cycle_ms`]); each stage holds the KV
    /// of its layers for every micro-batch in flight.
    fn price_stages(&self, st: &StageModels, shape: &BatchShape, seqs: u64, kv_tokens: u64) -> Forward {
        let mut breakdown = Breakdown::default();
        let stage_ms: Vec<f64> = st
            .costs
            .iter()
            .map(|c| {
                let t = c.step(shape);
                breakdown.add_scaled(&t.breakdown, 1.0);
                t.seconds * 1e3
            })
            .collect();
        let ms = cycle_ms(&stage_ms, st.send.seconds(shape.tokens()) * 1e3);
        let lanes = st.costs.len() as u64;
        let kv = self.ctx.mem.kv_bytes(seqs * lanes, kv_tokens * lanes, self.block);
        Forward { ms, mem: self.ctx.mem.usage(shape, kv, self.reserved), breakdown }
    }

    /// Requests of one micro-batch: one replica's batch, or with pipeline stages one of its
    /// micro-batches.
    fn per_replica(&self, conc: u64) -> u64 {
        conc.div_ceil(self.dp)
    }

    fn with_images(&self, shape: &mut BatchShape, first_chunk_seqs: u64) {
        let p = self.shapes.image_patches;
        if p > 0 && first_chunk_seqs > 0 {
            shape.image_patches = first_chunk_seqs * p;
            shape.image_pairs = first_chunk_seqs as f64 * (p as f64).powi(2);
        }
    }
}

impl ForwardOracle for RooflineOracle<'_> {
    fn prefill(&self, conc: u64, query: u64, seq: u64) -> Forward {
        let s = self.per_replica(conc);
        let mut shape = BatchShape { prefill: PhaseLoad::uniform(s, query, seq), sampled: s, ..Default::default() };
        self.with_images(&mut shape, if seq == query { s } else { 0 });
        self.price(&shape, s, s * (seq + self.shapes.kv_extra))
    }

    fn prefill_varlen(&self, pieces: &[(u64, u64)]) -> Forward {
        let mut shape = BatchShape::default();
        let mut firsts = 0;
        for &(q, s) in pieces {
            shape.prefill.add_seq(q, s);
            if q == s {
                firsts += 1;
            }
        }
        shape.sampled = pieces.len() as u64;
        self.with_images(&mut shape, firsts);
        let n = pieces.len() as u64;
        self.price(&shape, n, shape.prefill.context + n * self.shapes.kv_extra)
    }

    fn decode(&self, conc: u64) -> Forward {
        let s = self.per_replica(conc);
        let (q, seq) = (self.shapes.decode_query, self.shapes.decode_seq());
        let shape = BatchShape { decode: PhaseLoad::uniform(s, q, seq), sampled: s * q, ..Default::default() };
        self.price(&shape, s, s * (seq + self.shapes.kv_extra))
    }

    fn fold(&self, ms: f64) -> f64 {
        ms / self.shapes.tokens_per_step
    }
}

impl AnalyticEngine {
    fn aggregated(&self, ctx: &CandidateCtx, o: &RooflineOracle, batch: u32, budget: u64) -> (Row, AggOutcome) {
        let sh = &o.shapes;
        // With pipeline stages every micro-batch in flight has its batch and its budget.
        let dp = ctx.cand.parallel.dp as u64 * ctx.cand.parallel.pp as u64;
        let c = batch as u64 * dp;
        let mut row = base_row(ctx, batch, budget, sh.effective);
        let res = match &ctx.plan.workload.input {
            Lengths::Distribution(d) => {
                let comp = d.compose(batch as u64, ctx.plan.workload.prefix_cache_hit_rate);
                row.composition = composition_rows(&comp);
                agg_varlen(o, c, &comp, sh.output, budget)
            }
            Lengths::Fixed(_) if sh.effective <= budget => agg_single_chunk(o, c, sh.effective, sh.output, budget * dp),
            Lengths::Fixed(_) => {
                agg_chunked(o, c, &chunk_plan(sh.effective, budget), sh.output, budget * dp, ctx.plan.serving.token_budget_slack)
            }
        };
        row.prefill_num_chunks = res.prefill_num_chunks;
        row.memory = res.mem;
        row.breakdown_prefill = Some(res.breakdown_prefill);
        row.breakdown_decode = Some(res.breakdown_decode);
        (row, res)
    }

    fn phase_row(&self, ctx: &CandidateCtx, o: &RooflineOracle, batch: u32, budget: u64) -> (Row, PhaseOutcome) {
        let sh = &o.shapes;
        let dp = ctx.cand.parallel.dp as u64 * ctx.cand.parallel.pp as u64;
        let c = batch as u64 * dp;
        let serving = ctx.plan.serving.serving_cost_ms;
        let mut row = base_row(ctx, batch, budget, sh.effective);
        let res = if ctx.phase == Phase::Prefill {
            match &ctx.plan.workload.input {
                Lengths::Distribution(d) => {
                    let comp = d.compose(batch as u64, ctx.plan.workload.prefix_cache_hit_rate);
                    row.composition = composition_rows(&comp);
                    disagg_prefill_varlen(o, &comp, dp, budget, serving)
                }
                Lengths::Fixed(_) => disagg_prefill(o, c, sh.input_raw, &chunk_plan(sh.effective, budget), budget * dp, serving),
            }
        } else {
            disagg_decode(o, c, serving)
        };
        row.prefill_num_chunks = res.prefill_num_chunks;
        row.memory = res.mem;
        if ctx.phase == Phase::Prefill {
            row.breakdown_prefill = Some(res.breakdown);
        } else {
            row.breakdown_decode = Some(res.breakdown);
        }
        (row, res)
    }
}

impl Engine for AnalyticEngine {
    fn probe(&self, ctx: &CandidateCtx, batch: u32, budget: u64) -> (Probe, ProbeStats) {
        let o = RooflineOracle::new(ctx);
        let plan = ctx.plan;
        let (ttft_limit, tpot_limit) = crate::search::phase_limits(plan, ctx.phase);
        let out = o.shapes.output as f64;
        // The serving engine's front end adds its uncontended service to the first token the
        // client sees: the request and its prompt on the way in, the token on the way out (the
        // simulator queues them too).
        let client_ms = ctx.frontend.map_or(0.0, |f| (f.request_s + f.input_token_s * o.shapes.input_raw as f64 + f.output_token_s) * 1e3);
        let (mut row, stop, lat) = match ctx.phase {
            Phase::Aggregated => {
                let (mut row, mut r) = self.aggregated(ctx, &o, batch, budget);
                r.ttft_ms += client_ms;
                let tpot = match plan.serving.tpot_definition {
                    TpotDefinition::Amortized => r.tpot_amortized_ms,
                    TpotDefinition::InterToken => r.tpot_inter_token_ms,
                };
                row.ttft_ms = Some(r.ttft_ms);
                row.tpot_ms = Some(tpot);
                row.tpot_amortized_ms = Some(r.tpot_amortized_ms);
                row.tpot_inter_token_ms = Some(r.tpot_inter_token_ms);
                row.throughput = r.throughput;
                row.qps = Some(r.throughput / out);
                let stop = r.stop.map(StopReason::from).or(if tpot > tpot_limit {
                    Some(StopReason::TpotLimit)
                } else if r.ttft_ms > ttft_limit {
                    Some(StopReason::TtftLimit)
                } else {
                    None
                });
                (row, stop, [(tpot, tpot_limit), (r.ttft_ms, ttft_limit)])
            }
            Phase::Prefill => {
                let (mut row, r) = self.phase_row(ctx, &o, batch, budget);
                let ttft = r.ttft_ms + client_ms;
                row.ttft_ms = Some(ttft);
                row.throughput = r.throughput;
                row.qps = Some(row.concurrency as f64 / r.ttft_ms * 1000.0);
                let stop = r.stop.map(StopReason::from).or((ttft > ttft_limit).then_some(StopReason::TtftLimit));
                (row, stop, [(ttft, ttft_limit), (0.0, f64::INFINITY)])
            }
            Phase::Decode => {
                let (mut row, r) = self.phase_row(ctx, &o, batch, budget);
                row.tpot_ms = Some(r.tpot_ms);
                row.tpot_inter_token_ms = Some(r.tpot_ms);
                row.throughput = r.throughput;
                row.qps = Some(row.concurrency as f64 / (r.tpot_ms * out) * 1000.0);
                let stop = r.stop.map(StopReason::from).or((r.tpot_ms > tpot_limit).then_some(StopReason::TpotLimit));
                (row, stop, [(r.tpot_ms, tpot_limit), (0.0, f64::INFINITY)])
            }
        };
        if stop.is_some() && !row.throughput.is_finite() {
            row.throughput = 0.0;
        }
        row.throughput_per_device = row.throughput / ctx.cand.parallel.num_devices as f64;
        row.stop_reason = stop;
        let st = stats(ctx, &row, ctx.plan.serving.reserved_gib(ctx.device), lat);
        (Probe { row, stop }, st)
    }
}
