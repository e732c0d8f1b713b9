//! The original msmodeling tool's closed-form serving formulas, on top of the same cost model
//! the simulator uses.
//!
//! Each formula is a pure function over a [`ForwardOracle`] — "how long does a forward of this
//! shape take, and what memory does it leave" — so the conformance facts of the original can
//! be checked with scripted latencies, and the search's analytic engine
//! (`search::engine::analytic`) supplies an oracle backed by the roofline model. Nothing here
//! knows the command line: a formula that runs out of memory says so with [`Oom`].
//! [`pipeline`] holds the step of a pipelined replica's micro-batch, what its oracle prices as
//! a forward.

pub mod pd;
pub mod pipeline;

use crate::cost::memory::MemoryUse;
use crate::cost::Breakdown;
use crate::workload::Composition;
use std::collections::VecDeque;

/// Which forward of a probe runs out of memory (the only way a formula itself finds a probe
/// infeasible; latency limits are the search's business).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oom {
    Prefill,
    Decode,
}

/// One priced forward.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Forward {
    pub ms: f64,
    pub mem: MemoryUse,
    pub breakdown: Breakdown,
}

/// Latency and memory of forwards, with concurrency given globally (over all DP replicas) as
/// the original passes it to its model runner.
pub trait ForwardOracle {
    /// `conc` requests each with `query` new tokens at context `seq`.
    fn prefill(&self, conc: u64, query: u64, seq: u64) -> Forward;
    /// One replica's varlen prefill chunk: pieces of (new tokens, context).
    fn prefill_varlen(&self, pieces: &[(u64, u64)]) -> Forward;
    /// A decode step of `conc` requests at the standard decode shape (unfolded).
    fn decode(&self, conc: u64) -> Forward;
    /// Divide a raw decode latency by the expected tokens per step (MTP / draft).
    fn fold(&self, ms: f64) -> f64;
}

/// What an aggregation probe yields.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AggOutcome {
    pub ttft_ms: f64,
    /// E2E / O.
    pub tpot_amortized_ms: f64,
    /// (finish − first token) / (O − 1).
    pub tpot_inter_token_ms: f64,
    pub throughput: f64,
    /// The tightest memory picture among the forwards evaluated.
    pub mem: MemoryUse,
    pub stop: Option<Oom>,
    pub breakdown_prefill: Breakdown,
    pub breakdown_decode: Breakdown,
    pub prefill_num_chunks: u64,
}

fn tighter(a: MemoryUse, b: MemoryUse) -> MemoryUse {
    if b.avail_gib < a.avail_gib {
        b
    } else {
        a
    }
}

fn start_mem() -> MemoryUse {
    MemoryUse { avail_gib: f64::INFINITY, ..Default::default() }
}

/// The decode-first split of one mixed step: every ready decode first (up to the budget), then
/// as many prefill chunks of `chunk_len` as fit in the budget inflated by `slack`.
/// Returns (prefill requests, decode requests).
pub fn decode_first_split(budget: u64, slack: f64, ready_decode: u64, front_prefill: u64, chunk_len: u64) -> (u64, u64) {
    let d = ready_decode.min(budget);
    let inflated = (budget as f64 * (1.0 + slack)).floor() as u64;
    let room = inflated.saturating_sub(d);
    let p = front_prefill.min(room / chunk_len.max(1));
    (p, d)
}

/// Short prompts (E ≤ budget): prefill in waves of `floor(G / E)` requests, then decode.
/// TTFT = [P·t_P·k(k+1)/2 + r·(k·t_P + t_r)] / C; TPOT = (TTFT + t_D·O) / O.
pub fn agg_single_chunk(o: &dyn ForwardOracle, c: u64, e: u64, out: u64, global_budget: u64) -> AggOutcome {
    let mut res = AggOutcome { mem: start_mem(), prefill_num_chunks: 1, ..Default::default() };
    let p = (global_budget / e).max(1);
    let (k, r) = (c / p, c % p);
    let mut t_p = 0.0;
    let mut t_r = 0.0;
    let mut weight = 0.0;
    if k > 0 {
        let f = o.prefill(p, e, e);
        res.mem = tighter(res.mem, f.mem);
        t_p = f.ms;
        res.breakdown_prefill.add_scaled(&f.breakdown, k as f64);
        weight += k as f64;
        if f.mem.is_oom() {
            return oom(res, Oom::Prefill);
        }
    }
    if r > 0 {
        let f = o.prefill(r, e, e);
        res.mem = tighter(res.mem, f.mem);
        t_r = f.ms;
        res.breakdown_prefill.add_scaled(&f.breakdown, 1.0);
        weight += 1.0;
        if f.mem.is_oom() {
            return oom(res, Oom::Prefill);
        }
    }
    if weight > 0.0 {
        res.breakdown_prefill = scale(res.breakdown_prefill, 1.0 / weight);
    }
    let (kf, pf, rf) = (k as f64, p as f64, r as f64);
    res.ttft_ms = (pf * t_p * kf * (kf + 1.0) / 2.0 + rf * (kf * t_p + t_r)) / c as f64;
    let d = o.decode(c);
    res.mem = tighter(res.mem, d.mem);
    res.breakdown_decode = d.breakdown;
    if d.mem.is_oom() {
        return oom(res, Oom::Decode);
    }
    let t_d = o.fold(d.ms);
    finish(res, c, out, t_d)
}

fn finish(mut res: AggOutcome, c: u64, out: u64, t_d: f64) -> AggOutcome {
    let e2e = res.ttft_ms + t_d * out as f64;
    res.tpot_amortized_ms = e2e / out as f64;
    res.tpot_inter_token_ms = t_d;
    res.throughput = 1000.0 * out as f64 * c as f64 / e2e;
    res
}

fn scale(b: Breakdown, w: f64) -> Breakdown {
    let mut o = Breakdown::default();
    o.add_scaled(&b, w);
    o
}

fn oom(mut res: AggOutcome, why: Oom) -> AggOutcome {
    res.stop = Some(why);
    res.ttft_ms = f64::INFINITY;
    res.tpot_amortized_ms = f64::INFINITY;
    res.tpot_inter_token_ms = f64::INFINITY;
    res.throughput = 0.0;
    res
}

/// Cut an effective prompt of `e` tokens into chunks of `budget`: (new tokens, context).
pub fn chunk_plan(e: u64, budget: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    let mut done = 0;
    while done < e {
        let q = budget.min(e - done);
        done += q;
        v.push((q, done));
    }
    v
}

/// Long prompts (E > budget): replay of the decode-first mixed scheduler over groups of
/// requests. A step's time is max(prefill forward, decode forward) — the original's overlap
/// assumption. TTFT = mean first-token time; inter-token TPOT = mean (finish − first)/(O − 1);
/// throughput = O·C / makespan.
pub fn agg_chunked(o: &dyn ForwardOracle, c: u64, chunks: &[(u64, u64)], out: u64, global_budget: u64, slack: f64) -> AggOutcome {
    let mut res = AggOutcome { mem: start_mem(), prefill_num_chunks: chunks.len() as u64, ..Default::default() };
    // All C requests hold KV once prefilled: check memory at the full batch, as the one-chunk
    // path's decode forward does. (The original only counts the KV of each step's batch, so a
    // small budget never runs out of memory and the batch search never stops growing.)
    let full = o.decode(c);
    res.mem = tighter(res.mem, full.mem);
    if full.mem.is_oom() {
        return oom(res, Oom::Decode);
    }
    let mut replay = ChunkedReplay::new(c, chunks, out);
    // Every step serves at least one request, so this bound is never reached by a valid plan.
    let max_steps = (c as usize + 1) * (chunks.len() + out as usize + 1) + 16;
    for _ in 0..max_steps {
        if replay.is_drained() {
            break;
        }
        let (front_idx, p, d) = replay.next_split(global_budget, slack);
        if p == 0 && d == 0 {
            // A chunk larger than the inflated budget can never be scheduled.
            res.stop = Some(Oom::Prefill);
            return oom(res, Oom::Prefill);
        }
        let mut lat_p = 0.0;
        let mut lat_d = 0.0;
        if p > 0 {
            match replay.price_prefill(o, &mut res, chunks[front_idx.unwrap()], p) {
                Ok(ms) => lat_p = ms,
                Err(why) => return oom(res, why),
            }
        }
        if d > 0 {
            match replay.price_decode(o, &mut res, d) {
                Ok(ms) => lat_d = ms,
                Err(why) => return oom(res, why),
            }
        }
        replay.t += lat_p.max(lat_d);
        // Prefill groups advance first; newly finished prefills join the back of the decode queue.
        replay.advance_prefill(p);
        replay.advance_decode(d);
    }
    replay.finish(res, c, out)
}

/// The state of the chunked-prefill replay: request groups and the running sums the means
/// are taken from.
struct ChunkedReplay<'a> {
    chunks: &'a [(u64, u64)],
    remaining_after_first: u64,
    /// Groups waiting for a prefill chunk: (requests, index of their next chunk).
    pending: VecDeque<(u64, usize)>,
    /// Groups decoding: (requests, tokens left, time of their first token).
    ready: VecDeque<(u64, u64, f64)>,
    /// The replay clock (ms).
    t: f64,
    ttft_sum: f64,
    tpot_sum: f64,
    e2e_sum: f64,
    /// Prefill and decode forward time, the weights of the breakdowns.
    pw: f64,
    dw: f64,
}

impl<'a> ChunkedReplay<'a> {
    fn new(c: u64, chunks: &'a [(u64, u64)], out: u64) -> Self {
        ChunkedReplay {
            chunks,
            remaining_after_first: out.saturating_sub(1),
            pending: VecDeque::from([(c, 0usize)]),
            ready: VecDeque::new(),
            t: 0.0,
            ttft_sum: 0.0,
            tpot_sum: 0.0,
            e2e_sum: 0.0,
            pw: 0.0,
            dw: 0.0,
        }
    }

    fn is_drained(&self) -> bool {
        self.pending.is_empty() && self.ready.is_empty()
    }

    /// The next step's decode-first split: (chunk index of the front prefill groups, prefill
    /// requests, decode requests). Only the groups at the front's chunk index prefill together.
    fn next_split(&self, global_budget: u64, slack: f64) -> (Option<usize>, u64, u64) {
        let front_idx = self.pending.front().map(|g| g.1);
        let front: u64 = match front_idx {
            Some(i) => self.pending.iter().take_while(|g| g.1 == i).map(|g| g.0).sum(),
            None => 0,
        };
        let chunk_len = front_idx.map_or(global_budget, |i| self.chunks[i].0);
        let ready_count: u64 = self.ready.iter().map(|g| g.0).sum();
        let (p, d) = decode_first_split(global_budget, slack, ready_count, front, chunk_len);
        (front_idx, p, d)
    }

    /// The step's prefill forward of `p` requests on chunk (new tokens, context): its latency,
    /// or why the replay stops (out of memory; the outcome keeps the time reached).
    fn price_prefill(&mut self, o: &dyn ForwardOracle, res: &mut AggOutcome, (q, s): (u64, u64), p: u64) -> Result<f64, Oom> {
        let f = o.prefill(p, q, s);
        res.mem = tighter(res.mem, f.mem);
        if f.mem.is_oom() {
            res.ttft_ms = self.t;
            return Err(Oom::Prefill);
        }
        res.breakdown_prefill.add_scaled(&f.breakdown, f.ms);
        self.pw += f.ms;
        Ok(f.ms)
    }

    /// The step's decode forward of `d` requests: its folded latency, or why the replay stops.
    fn price_decode(&mut self, o: &dyn ForwardOracle, res: &mut AggOutcome, d: u64) -> Result<f64, Oom> {
        let f = o.decode(d);
        res.mem = tighter(res.mem, f.mem);
        if f.mem.is_oom() {
            return Err(Oom::Decode);
        }
        let lat = o.fold(f.ms);
        res.breakdown_decode.add_scaled(&f.breakdown, f.ms);
        self.dw += f.ms;
        Ok(lat)
    }

    /// Move `p` prefilled requests on to their next chunk, or into decode after the last one.
    fn advance_prefill(&mut self, p: u64) {
        let k_chunks = self.chunks.len();
        let t = self.t;
        let mut take = p;
        while take > 0 {
            let (n, idx) = self.pending.pop_front().expect("p ≤ front count");
            let m = n.min(take);
            take -= m;
            if n > m {
                self.pending.push_front((n - m, idx));
            }
            if idx + 1 < k_chunks {
                self.pending.push_back((m, idx + 1));
            } else {
                self.ttft_sum += m as f64 * t;
                if self.remaining_after_first > 0 {
                    self.ready.push_back((m, self.remaining_after_first, t));
                } else {
                    self.e2e_sum += m as f64 * t;
                }
            }
        }
    }

    /// Give `d` decoding requests one token each; those on their last token finish.
    fn advance_decode(&mut self, d: u64) {
        let t = self.t;
        let mut take = d;
        while take > 0 {
            let (n, left, first) = self.ready.pop_front().expect("d ≤ ready count");
            let m = n.min(take);
            take -= m;
            if n > m {
                self.ready.push_front((n - m, left, first));
            }
            if left == 1 {
                self.tpot_sum += m as f64 * (t - first) / self.remaining_after_first as f64;
                self.e2e_sum += m as f64 * t;
            } else {
                self.ready.push_back((m, left - 1, first));
            }
        }
    }

    /// Means over the `c` requests and the time-weighted breakdowns.
    fn finish(&self, mut res: AggOutcome, c: u64, out: u64) -> AggOutcome {
        if self.pw > 0.0 {
            res.breakdown_prefill = scale(res.breakdown_prefill, 1.0 / self.pw);
        }
        if self.dw > 0.0 {
            res.breakdown_decode = scale(res.breakdown_decode, 1.0 / self.dw);
        }
        let cf = c as f64;
        res.ttft_ms = self.ttft_sum / cf;
        res.tpot_inter_token_ms = self.tpot_sum / cf;
        res.tpot_amortized_ms = self.e2e_sum / cf / out as f64;
        res.throughput = 1000.0 * out as f64 * cf / self.t;
        res
    }
}

/// Pack a composition's requests (in bin order) greedily into chunks of `budget` tokens; a
/// request may straddle chunks. Returns per chunk its pieces (new tokens, context) and how
/// many requests complete in it.
pub fn pack_varlen(comp: &Composition, budget: u64) -> Vec<(Vec<(u64, u64)>, u64)> {
    let mut chunks: Vec<(Vec<(u64, u64)>, u64)> = Vec::new();
    let mut cur: Vec<(u64, u64)> = Vec::new();
    let mut room = budget;
    let mut done_here = 0;
    for (rep, n) in &comp.rows {
        for _ in 0..*n {
            let mut left = rep.query_len;
            let mut ctx = 0;
            while left > 0 {
                let q = left.min(room);
                ctx += q;
                left -= q;
                room -= q;
                cur.push((q, ctx));
                if left == 0 {
                    done_here += 1;
                }
                if room == 0 {
                    chunks.push((std::mem::take(&mut cur), done_here));
                    done_here = 0;
                    room = budget;
                }
            }
        }
    }
    if !cur.is_empty() {
        chunks.push((cur, done_here));
    }
    chunks
}

/// Variable-length aggregation: packed prefill chunks, then one decode forward.
/// TTFT = Σ(completions × cumulative time) / Σ samples; TPOT = (TTFT + t_D·O) / O.
pub fn agg_varlen(o: &dyn ForwardOracle, c: u64, comp: &Composition, out: u64, budget: u64) -> AggOutcome {
    let run = run_packed(o, comp, budget, 0.0);
    let mut res = AggOutcome { mem: run.mem, prefill_num_chunks: run.chunks, breakdown_prefill: run.breakdown, ..Default::default() };
    if run.oom {
        return oom(res, Oom::Prefill);
    }
    res.ttft_ms = run.ttft_sum / comp.total().max(1) as f64;
    let d = o.decode(c);
    res.mem = tighter(res.mem, d.mem);
    res.breakdown_decode = d.breakdown;
    if d.mem.is_oom() {
        return oom(res, Oom::Decode);
    }
    finish(res, c, out, o.fold(d.ms))
}

/// Packed variable-length chunks run back to back.
struct PackedRun {
    /// Time at the end of the last chunk (from the start offset).
    t: f64,
    /// Σ (requests completing in a chunk × time at its end).
    ttft_sum: f64,
    /// Time-weighted breakdown of the chunks.
    breakdown: Breakdown,
    mem: MemoryUse,
    oom: bool,
    chunks: u64,
}

fn run_packed(o: &dyn ForwardOracle, comp: &Composition, budget: u64, start_ms: f64) -> PackedRun {
    let chunks = pack_varlen(comp, budget);
    let mut r = PackedRun {
        t: start_ms,
        ttft_sum: 0.0,
        breakdown: Breakdown::default(),
        mem: start_mem(),
        oom: false,
        chunks: chunks.len() as u64,
    };
    let mut w = 0.0;
    for (pieces, completes) in &chunks {
        let f = o.prefill_varlen(pieces);
        r.mem = tighter(r.mem, f.mem);
        if f.mem.is_oom() {
            r.oom = true;
            return r;
        }
        r.t += f.ms;
        r.breakdown.add_scaled(&f.breakdown, f.ms);
        w += f.ms;
        r.ttft_sum += *completes as f64 * r.t;
    }
    if w > 0.0 {
        r.breakdown = scale(r.breakdown, 1.0 / w);
    }
    r
}

/// What a disaggregated-phase probe yields.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseOutcome {
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// Makespan of the prefill batch (prefill) or one decode step (decode).
    pub latency_ms: f64,
    pub throughput: f64,
    pub mem: MemoryUse,
    pub stop: Option<Oom>,
    pub breakdown: Breakdown,
    pub prefill_num_chunks: u64,
}

/// Prefill-only instance: one forward with all C requests when they fit one chunk, else
/// chunk-major waves of `max(floor(G / chunk), 1)` requests. Throughput counts raw input
/// tokens per second.
pub fn disagg_prefill(
    o: &dyn ForwardOracle,
    c: u64,
    input_raw: u64,
    chunks: &[(u64, u64)],
    global_budget: u64,
    serving_ms: f64,
) -> PhaseOutcome {
    let mut res = PhaseOutcome { mem: start_mem(), prefill_num_chunks: chunks.len() as u64, ..Default::default() };
    let mut t = serving_ms;
    let mut ttft_sum = 0.0;
    let mut w = 0.0;
    let one_forward = chunks.len() == 1 && c * chunks[0].0 <= global_budget;
    for (i, &(q, s)) in chunks.iter().enumerate() {
        let wave = if one_forward { c } else { (global_budget / q).max(1) };
        let mut left = c;
        while left > 0 {
            let n = wave.min(left);
            left -= n;
            let f = o.prefill(n, q, s);
            res.mem = tighter(res.mem, f.mem);
            if f.mem.is_oom() {
                res.stop = Some(Oom::Prefill);
                res.ttft_ms = f64::INFINITY;
                return res;
            }
            t += f.ms;
            res.breakdown.add_scaled(&f.breakdown, f.ms);
            w += f.ms;
            if i + 1 == chunks.len() {
                ttft_sum += n as f64 * t;
            }
        }
    }
    if w > 0.0 {
        res.breakdown = scale(res.breakdown, 1.0 / w);
    }
    res.latency_ms = t;
    res.ttft_ms = ttft_sum / c as f64;
    res.throughput = c as f64 * input_raw as f64 / t * 1000.0;
    res
}

/// Variable-length prefill-only instance: packed chunks per replica.
pub fn disagg_prefill_varlen(o: &dyn ForwardOracle, comp: &Composition, dp: u64, budget: u64, serving_ms: f64) -> PhaseOutcome {
    let run = run_packed(o, comp, budget, serving_ms);
    let mut res = PhaseOutcome { mem: run.mem, prefill_num_chunks: run.chunks, breakdown: run.breakdown, ..Default::default() };
    if run.oom {
        res.stop = Some(Oom::Prefill);
        res.ttft_ms = f64::INFINITY;
        return res;
    }
    let tokens: u64 = comp.rows.iter().map(|(r, n)| r.num_input_tokens * n).sum();
    res.latency_ms = run.t;
    res.ttft_ms = run.ttft_sum / comp.total().max(1) as f64;
    res.throughput = dp as f64 * tokens as f64 / run.t * 1000.0;
    res
}

/// Decode-only instance: one decode step of C requests plus the serving cost, folded by
/// MTP/draft acceptance; throughput = C / TPOT output tokens per second.
pub fn disagg_decode(o: &dyn ForwardOracle, c: u64, serving_ms: f64) -> PhaseOutcome {
    let f = o.decode(c);
    let mut res = PhaseOutcome { mem: f.mem, breakdown: f.breakdown, ..Default::default() };
    if f.mem.is_oom() {
        res.stop = Some(Oom::Decode);
        res.tpot_ms = f64::INFINITY;
        return res;
    }
    res.latency_ms = f.ms + serving_ms;
    res.tpot_ms = o.fold(res.latency_ms);
    res.throughput = c as f64 / res.tpot_ms * 1000.0;
    res
}

/// Expected tokens per decode step with `mtp` drafts: 1 + Σ of the first `mtp` rates (only
/// the rates given count, so a fifth draft with four rates adds nothing).
pub fn mtp_tokens_per_step(mtp: u32, rates: &[f64]) -> f64 {
    1.0 + rates.iter().take(mtp as usize).sum::<f64>()
}

#[cfg(test)]
mod tests;
