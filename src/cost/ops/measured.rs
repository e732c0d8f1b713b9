//! Operators priced from measured kernel tables (`hardware::kernels`) instead of the
//! roofline: GEMMs, attention, routed experts and collectives of a device and serving engine
//! whose kernels were measured.
//!
//! A [`Measured`] operator keeps the roofline kind it replaces: the measured time is split over
//! compute, memory and communication in the proportions of that roofline, so the step's
//! bottleneck breakdown stays meaningful. Its own fixed cost is zero: a measured kernel's
//! launch and tail are in its latency.
//!
//! Each lookup reads the step's features:
//! - a count (`Count`): tokens on this rank for a GEMM, tokens per expert for routed experts,
//!   bytes for a collective, a linear function of the features; the table's slice at the
//!   operator's widths gives the time, and a different dtype than the table's is carried by
//!   the ratio of the two rooflines at that count ([`Transfer`]);
//! - attention (`Attention`): decode sequences at their mean KV length on the generation
//!   table, carried by the roofline ratio when a sequence queries several tokens; prefill
//!   chunks on the context table at the full-prompt length that does the same roofline work (a
//!   cached prefix, uneven chunks), carried by the roofline ratio to another kernel's widths
//!   than the table's (MLA).
//! - a measured attention block (`Block`: MiniMax-M3's sparse layer whole) on its own context
//!   and generation tables, a chunk after a cached prefix as what it adds to the prompt.

use super::{dot, f, Coef, Features, OpKind};
use crate::hardware::kernels::{Dense, Priced, Source};

/// A roofline in one count `v`: max(compute · v, memory₀ + memory₁ · v), seconds at the
/// datasheet rates. What utilisation transfer scales by, and (a GEMM's with its weights read at
/// the device's streaming ceiling) what measured times are floored at.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Roof1 {
    pub compute: f64,
    pub memory0: f64,
    pub memory1: f64,
}

impl Roof1 {
    #[inline]
    pub fn at(&self, v: f64) -> f64 {
        (self.compute * v).max(self.memory0 + self.memory1 * v)
    }
}

/// The roofline of an attention kernel over its work: compute per (query, key) pair per head
/// group, memory per context token (KV read) and per query token (Q in, O out).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AttentionRoof {
    pub per_pair: f64,
    pub per_ctx: f64,
    pub per_query: f64,
}

impl AttentionRoof {
    #[inline]
    pub fn at(&self, pairs: f64, ctx: f64, queries: f64) -> f64 {
        (self.per_pair * pairs).max(self.per_ctx * ctx + self.per_query * queries)
    }
}

/// A table measured for another dtype than the operator's: its time carried by the ratio of
/// the operator's roofline to the table dtype's at the same count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    pub target: Roof1,
    pub measured: Roof1,
}

/// The lookup of a measured operator.
#[derive(Debug, Clone)]
pub enum Lookup {
    Count {
        /// The count as a linear function of the features.
        coef: Coef,
        curve: Dense<1>,
        /// The table's roofline in the count (beyond the measured counts, and the floor).
        roof: Roof1,
        transfer: Option<Transfer>,
        /// The least time the operator can take, if it has one (GEMMs: a table point below it ran
        /// from cache; routed experts and collectives have no exact roofline to floor at).
        floor: Option<Roof1>,
    },
    Attention {
        prefill: Option<AttentionSide>,
        decode: Option<AttentionSide>,
        /// A sliding window: what the kernel reads is clamped to it in the rooflines.
        window: Option<f64>,
        /// The tables are full-attention ones (no table for this window): decode is looked
        /// up at the KV length clamped to the window.
        clamp_lookup: bool,
        /// Decode attention split over decode-context-parallel ranks.
        dcp: f64,
    },
    /// A whole measured attention block (MiniMax-M3's sparse layer: projections, indexer,
    /// attention, o_proj) on its context and generation tables; see [`block`].
    Block {
        prefill: AttentionSide,
        decode: AttentionSide,
        /// What one call of the block costs whatever its shape, for the operators both phases
        /// share (launches and the projections' weight reads), paid once by a step that has
        /// both prefill and decode work.
        once: f64,
    },
}

/// One phase of an attention kernel: its table sliced over (sequences, length), the roofline
/// of the kernel the table measured, and the roofline of this operator's own kernel (the same
/// for attention measured at its own widths; another for MLA, measured at DeepSeek-V3's).
#[derive(Debug, Clone)]
pub struct AttentionSide {
    pub table: Dense<2>,
    pub measured: AttentionRoof,
    pub actual: AttentionRoof,
}

/// An operator priced from a measured table.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The roofline kind it replaces, for the breakdown's proportions.
    pub roofline: OpKind,
    pub lookup: Lookup,
}

impl Measured {
    /// Seconds of one call on features `x`, and where they came from.
    pub fn priced(&self, x: &Features) -> Priced {
        match &self.lookup {
            Lookup::Count { coef, curve, roof, transfer, floor } => count(dot(coef, x), curve, roof, transfer.as_ref(), floor.as_ref()),
            Lookup::Attention { prefill, decode, window, clamp_lookup, dcp } => {
                let mut out = Priced { seconds: 0.0, source: Source::Silicon };
                if let Some(side) = prefill.as_ref().filter(|_| x[f::P_SEQS] > 0.0) {
                    let p = context(x, side, *window);
                    out = Priced { seconds: out.seconds + p.seconds, source: out.source.worst(p.source) };
                }
                if let Some(side) = decode.as_ref().filter(|_| x[f::D_SEQS] > 0.0) {
                    let p = generation(x, side, *window, *clamp_lookup, *dcp);
                    out = Priced { seconds: out.seconds + p.seconds, source: out.source.worst(p.source) };
                }
                out
            }
            Lookup::Block { prefill, decode, once } => block(x, prefill, decode, *once),
        }
    }

    /// The sliding window the kernel's lookup clamps to, if any.
    pub fn window(&self) -> Option<f64> {
        match &self.lookup {
            Lookup::Attention { window, .. } => *window,
            _ => None,
        }
    }

    /// Features the lookup reads (for the step memo: a count-only operator is memoised).
    pub fn reads(&self) -> u16 {
        match &self.lookup {
            Lookup::Count { coef, .. } => super::nonzero_mask(coef),
            Lookup::Attention { .. } | Lookup::Block { .. } => {
                [f::P_SEQS, f::P_TOKENS, f::P_CTX, f::P_PAIRS, f::P_QSQ, f::D_SEQS, f::D_TOKENS, f::D_CTX, f::D_PAIRS]
                    .iter()
                    .fold(0, |m, i| m | 1 << i)
            }
        }
    }
}

fn count(v: f64, curve: &Dense<1>, roof: &Roof1, transfer: Option<&Transfer>, floor: Option<&Roof1>) -> Priced {
    if v <= 0.0 {
        return Priced { seconds: 0.0, source: Source::Silicon };
    }
    let mut p = curve.at([v], |y| roof.at(y[0]));
    if let Some(floor) = floor {
        p.seconds = p.seconds.max(floor.at(v));
    }
    if let Some(t) = transfer {
        let (to, from) = (t.target.at(v), t.measured.at(v));
        if to > 0.0 && from > 0.0 {
            p.seconds *= to / from;
        }
        p.source = p.source.worst(Source::Extrapolated);
    }
    p
}

/// Pairs and context a window leaves of `pairs` over `tokens` queries and `ctx` over `seqs`.
#[inline]
pub(crate) fn clamp(window: Option<f64>, pairs: f64, tokens: f64, ctx: f64, seqs: f64) -> (f64, f64) {
    match window {
        Some(w) => (pairs.min(tokens * w), ctx.min(seqs * w)),
        None => (pairs, ctx),
    }
}

/// Prefill chunks: the context table at the full-prompt length that does the same roofline
/// work as the chunks (per sequence), carried by the ratio of this operator's kernel roofline
/// to the table kernel's. Uniform chunks with nothing cached are exactly the table's shape.
///
/// Why the equal-work length and not the chunk's own length scaled by the work ratio: a short
/// chunk after a long cached prefix (the 3-token tail of an 8,192-token prompt cut by the
/// token budget) looks up a few-token prefill, whose measured time is all launch and tail, and
/// a work ratio of thousands would multiply that fixed cost too (it priced such a step at
/// 86 ms against 3.4 ms for the whole prompt's attention). Looked up at the equal-work length,
/// the chunk pays the measured time of a kernel doing the same number of causal pairs (or KV
/// reads, where those bound it), launch cost once.
fn context(x: &Features, side: &AttentionSide, window: Option<f64>) -> Priced {
    let (d, r, own) = (&side.table, &side.measured, &side.actual);
    let (b, tokens) = (x[f::P_SEQS], x[f::P_TOKENS]);
    let s = tokens / b;
    // Causal pairs: a chunk of q new tokens after c − q cached ones attends to q·c − q(q − 1)/2.
    let (pairs, ctx) = clamp(window, x[f::P_PAIRS] - 0.5 * (x[f::P_QSQ] - tokens), tokens, x[f::P_CTX], b);
    let table_roof = |y: [f64; 2]| {
        let (p, c) = clamp(window, y[0] * y[1] * (y[1] + 1.0) / 2.0, y[0] * y[1], y[0] * y[1], y[0]);
        r.at(p, c, y[0] * y[1])
    };
    let work = r.at(pairs, ctx, tokens);
    let len = equal_work_length(r, window, b, work).unwrap_or(s);
    let mut p = d.at([b, len], table_roof);
    if (len - s).abs() > 1e-9 * s.max(1.0) {
        p.source = p.source.worst(Source::Extrapolated);
    }
    let actual = own.at(pairs, ctx, tokens);
    if work > 0.0 && (actual / work - 1.0).abs() > 1e-9 {
        p.seconds *= actual / work;
        p.source = p.source.worst(Source::Extrapolated);
    }
    p
}

/// The prompt length s at which `b` full prompts of s tokens (the context table's shape) have
/// roofline time `work` on roofline `r`: the smaller of the lengths at which its compute side
/// (causal pairs, clamped to a window) and its memory side (keys read, clamped to a window, plus
/// queries) reach it, since the roofline is the larger of the two and both grow with s. None
/// where neither side grows (an empty roofline).
pub(crate) fn equal_work_length(r: &AttentionRoof, window: Option<f64>, b: f64, work: f64) -> Option<f64> {
    let per_seq = work / b;
    let compute = (r.per_pair > 0.0).then(|| {
        let u = per_seq / r.per_pair;
        match window {
            // s(s+1)/2 pairs up to s = 2w − 1, s·w beyond (the clamp is continuous there).
            Some(w) if u > (2.0 * w - 1.0) * w => u / w,
            _ => (-1.0 + (1.0 + 8.0 * u).sqrt()) / 2.0,
        }
    });
    let slope = r.per_ctx + r.per_query;
    let memory = (slope > 0.0).then(|| {
        let s = per_seq / slope;
        match window {
            // Past the window only the queries keep growing the bytes.
            Some(w) if s > w => (r.per_query > 0.0).then(|| (per_seq - r.per_ctx * w) / r.per_query),
            _ => Some(s),
        }
    });
    let best = [compute, memory.flatten()].into_iter().flatten().filter(|s| s.is_finite()).fold(f64::INFINITY, f64::min);
    best.is_finite().then_some(best.max(0.0))
}

/// Decode sequences: the generation table at their mean KV length (one query token each),
/// carried by the roofline ratio when a sequence queries several tokens (MTP, drafts).
fn generation(x: &Features, side: &AttentionSide, window: Option<f64>, clamp_lookup: bool, dcp: f64) -> Priced {
    let (d, r, own) = (&side.table, &side.measured, &side.actual);
    let (b, tokens) = (x[f::D_SEQS], x[f::D_TOKENS]);
    let (raw_pairs, raw_ctx) = (x[f::D_PAIRS] / dcp, x[f::D_CTX] / dcp);
    let (pairs, ctx) = clamp(window, raw_pairs, tokens, raw_ctx, b);
    let len = if clamp_lookup { ctx / b } else { raw_ctx / b };
    let table_roof = |y: [f64; 2]| {
        let (p, c) = clamp(window, y[0] * y[1], y[0], y[0] * y[1], y[0]);
        r.at(p, c, y[0])
    };
    let mut p = d.at([b, len], table_roof);
    let (actual, shape) = (own.at(pairs, ctx, tokens), table_roof([b, len]));
    if shape > 0.0 && (actual / shape - 1.0).abs() > 1e-9 {
        p.seconds *= actual / shape;
        p.source = p.source.worst(Source::Extrapolated);
    }
    p.seconds = p.seconds.max(actual);
    p
}

/// A measured attention block. Prompts with nothing cached are the context table's own shape.
/// A chunk of q new tokens after c − q cached ones is priced as what the table says extending a
/// prompt from c − q to c tokens adds (the same tokens and pairs), at least the table's time for
/// a q-token prompt and at most what its q tokens cost as q one-token decodes at context c (a
/// chunk reads one shared context, separate decodes read one each). Decode sequences are the
/// generation table's, as attention's are. A step with both pays the block's shared per-call
/// cost (`once`) once.
fn block(x: &Features, prefill: &AttentionSide, decode: &AttentionSide, once: f64) -> Priced {
    let p = (x[f::P_SEQS] > 0.0).then(|| block_prefill(x, prefill, decode));
    let d = (x[f::D_SEQS] > 0.0).then(|| generation(x, decode, None, false, 1.0));
    match (p, d) {
        (Some(p), Some(d)) => {
            let seconds = (p.seconds + d.seconds - once).max(p.seconds.max(d.seconds));
            Priced { seconds, source: p.source.worst(d.source) }
        }
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => Priced { seconds: 0.0, source: Source::Silicon },
    }
}

fn block_prefill(x: &Features, side: &AttentionSide, decode: &AttentionSide) -> Priced {
    let (b, tokens) = (x[f::P_SEQS], x[f::P_TOKENS]);
    let (q, c) = (tokens / b, x[f::P_CTX] / b);
    let r = &side.measured;
    let prompt = |s: f64| side.table.at([b, s], |y| r.at(y[0] * y[1] * (y[1] + 1.0) / 2.0, y[0] * y[1], y[0] * y[1]));
    let own = prompt(q);
    if c - q < 0.5 {
        return own;
    }
    let (whole, cached) = (prompt(c), prompt(c - q));
    let rd = &decode.measured;
    let as_decodes = decode.table.at([tokens, c], |y| rd.at(y[0] * y[1], y[0] * y[1], y[0]));
    let seconds = own.seconds.max(whole.seconds - cached.seconds).min(as_decodes.seconds.max(0.0));
    let source = own.source.worst(whole.source).worst(cached.source).worst(Source::Extrapolated);
    Priced { seconds, source }
}

#[cfg(test)]
mod tests;
