//! Operators of a step and their evaluation on a batch summary.
//!
//! A batch is summarised by a small feature vector ([`Features`]): token, sequence, context and
//! attention-pair totals split by phase. Each operator's matrix FLOPs, vector FLOPs, memory
//! bytes and collective bytes are linear in those features (coefficients precomputed per
//! candidate, already divided by the device's effective peaks), except routed experts (how
//! many experts a batch touches) and sliding windows, which get small closed forms. So a step
//! costs O(operator kinds), independent of how many sequences are in it.

pub mod measured;

use crate::hardware::CommGroup;

/// Index of each feature in [`Features`].
pub mod f {
    /// 1 when the step has any work (constant terms: weight reads).
    pub const ONE: usize = 0;
    /// All new tokens in the step (prefill chunks + decode queries).
    pub const TOKENS: usize = 1;
    pub const P_TOKENS: usize = 2;
    pub const D_TOKENS: usize = 3;
    pub const P_SEQS: usize = 4;
    pub const D_SEQS: usize = 5;
    /// Σ context (cached + new) over prefill sequences: KV read by prefill attention.
    pub const P_CTX: usize = 6;
    pub const D_CTX: usize = 7;
    /// Σ new × context over prefill sequences: attention (query, key) pairs.
    pub const P_PAIRS: usize = 8;
    pub const D_PAIRS: usize = 9;
    /// Rows that go through the LM head (sampled positions).
    pub const SAMPLED: usize = 10;
    /// All sequences in the step.
    pub const SEQS: usize = 11;
    /// Vision patches encoded this step and Σ patches² per image (ViT attention pairs).
    pub const IMG_PATCHES: usize = 12;
    pub const IMG_PAIRS: usize = 13;
    /// Σ new² over prefill sequences (causal masking removes q(q−1)/2 pairs per chunk).
    pub const P_QSQ: usize = 14;
    pub const N: usize = 15;
}

pub type Features = [f64; f::N];
pub type Coef = [f64; f::N];

#[inline]
pub fn dot(a: &Coef, b: &Features) -> f64 {
    let mut s = 0.0;
    for i in 0..f::N {
        s += a[i] * b[i];
    }
    s
}

/// Bit `i` set where `x[i]` is not zero.
pub fn nonzero_mask(x: &[f64; f::N]) -> u16 {
    let mut m = 0u16;
    for (i, v) in x.iter().enumerate() {
        if *v != 0.0 {
            m |= 1 << i;
        }
    }
    m
}

/// [`dot`] over the terms of `mask` alone, in the same order. Leaving out a term whose
/// coefficient or feature is zero is exact: the product is ±0, and adding ±0 to the running
/// sum (which starts at +0 and so is never −0) leaves it unchanged bit for bit.
#[inline]
fn masked_dot(a: &Coef, mask: u16, b: &Features) -> f64 {
    let mut s = 0.0;
    let mut m = mask;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        s += a[i] * b[i];
        m &= m - 1;
    }
    s
}

/// An operator as the simulator's hot path prices it. A roofline operator without a sliding
/// window keeps its coefficients with the mask of those not zero, and reads only the features
/// that both it and the step have (most coefficient vectors hold 1 to 4 of the 15 features, and
/// a decode step has no prefill features): the result is exactly [`Op::seconds`]. Any other
/// operator (`Full`: its index in the graph) is evaluated in full.
// Nearly every operator is `Roofline`: boxing it would add a pointer chase per operator per
// step on the hot path to save the few `Full` entries' space.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum FastOp {
    Roofline { gate: usize, count: f64, fixed_s: f64, coefs: [Coef; 3], masks: [u16; 3] },
    Full(usize),
}

/// The step's matrix work (Σ [`Op::matrix_seconds`]) on the simulator's hot path: the operators
/// whose matrix time is linear in the features (a roofline's, or a measured kernel's roofline,
/// without a window) are summed into one coefficient vector per gate, the others (experts,
/// overlapped streams, windowed attention) evaluated one by one.
#[derive(Debug, Clone, Default)]
pub struct MatrixLoad {
    by_gate: Vec<(usize, Coef)>,
    live: Vec<usize>,
}

/// How one operator's matrix work enters [`MatrixLoad`].
enum MatrixTerm<'a> {
    /// None (a collective).
    Nothing,
    /// Linear in the features: these coefficients, times the count.
    Linear(&'a Coef),
    /// Evaluated each step (experts, overlapped streams, a window).
    Live,
}

impl MatrixTerm<'_> {
    fn of(op: &Op) -> MatrixTerm<'_> {
        // A measured kernel's matrix work is its roofline's, read as the kernel reads the
        // features: clamped to its lookup's window when it has one.
        let kind = match &op.kind {
            OpKind::Measured(m) if m.window().is_none() => &m.roofline,
            OpKind::Measured(_) => return MatrixTerm::Live,
            k => k,
        };
        match (kind, op.window) {
            (OpKind::Collective { .. }, _) => MatrixTerm::Nothing,
            (OpKind::Roofline { mma, .. }, None) => MatrixTerm::Linear(mma),
            _ => MatrixTerm::Live,
        }
    }
}

impl MatrixLoad {
    pub fn of(ops: &[Op]) -> MatrixLoad {
        let mut load = MatrixLoad::default();
        for (i, op) in ops.iter().enumerate() {
            let mma = match MatrixTerm::of(op) {
                MatrixTerm::Nothing => continue,
                MatrixTerm::Live => {
                    load.live.push(i);
                    continue;
                }
                MatrixTerm::Linear(mma) => mma,
            };
            let at = match load.by_gate.iter().position(|(g, _)| *g == op.gate) {
                Some(at) => at,
                None => {
                    load.by_gate.push((op.gate, [0.0; f::N]));
                    load.by_gate.len() - 1
                }
            };
            for (c, m) in load.by_gate[at].1.iter_mut().zip(mma) {
                *c += m * op.count;
            }
        }
        load
    }

    /// Seconds of matrix work in a step on features `x`: Σ [`Op::matrix_seconds`] over `ops`
    /// (to rounding; never below 0).
    pub fn seconds(&self, ops: &[Op], x: &Features) -> f64 {
        let linear: f64 = self.by_gate.iter().filter(|(g, _)| x[*g] > 0.0).map(|(_, c)| dot(c, x)).sum();
        let live: f64 = self.live.iter().map(|&i| ops[i].matrix_seconds(x)).sum();
        (linear + live).max(0.0)
    }
}

impl FastOp {
    pub fn of(ops: &[Op]) -> Vec<FastOp> {
        ops.iter()
            .enumerate()
            .map(|(i, op)| match (&op.kind, op.window) {
                (OpKind::Roofline { mma, gp, mem }, None) => FastOp::Roofline {
                    gate: op.gate,
                    count: op.count,
                    fixed_s: op.fixed_s,
                    coefs: [*mma, *gp, *mem],
                    masks: [nonzero_mask(mma), nonzero_mask(gp), nonzero_mask(mem)],
                },
                _ => FastOp::Full(i),
            })
            .collect()
    }

    /// [`Op::seconds`] of this operator on features `x` whose non-zero mask is `xmask`.
    #[inline]
    pub fn seconds(&self, ops: &[Op], x: &Features, xmask: u16) -> f64 {
        match self {
            FastOp::Roofline { gate, count, fixed_s, coefs, masks } => {
                if x[*gate] <= 0.0 {
                    return 0.0;
                }
                let mut t = OpTime {
                    cube: masked_dot(&coefs[0], masks[0] & xmask, x),
                    vector: masked_dot(&coefs[1], masks[1] & xmask, x),
                    memory: masked_dot(&coefs[2], masks[2] & xmask, x),
                    ..Default::default()
                };
                if t.total() > 0.0 {
                    t.fixed = *fixed_s;
                }
                t.total() * count
            }
            FastOp::Full(i) => ops[*i].seconds(x),
        }
    }
}

/// A coefficient vector with one entry.
pub fn unit(idx: usize, v: f64) -> Coef {
    let mut c = [0.0; f::N];
    c[idx] = v;
    c
}

pub fn scaled(c: &Coef, k: f64) -> Coef {
    let mut o = *c;
    for x in o.iter_mut() {
        *x *= k;
    }
    o
}

pub fn add(a: &Coef, b: &Coef) -> Coef {
    let mut o = *a;
    for i in 0..f::N {
        o[i] += b[i];
    }
    o
}

/// Time of one operator (seconds), by the component that bounds it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpTime {
    pub cube: f64,
    pub vector: f64,
    pub memory: f64,
    pub comm: f64,
    pub fixed: f64,
}

impl OpTime {
    /// max(compute, memory, comm) + fixed.
    pub fn total(&self) -> f64 {
        (self.cube + self.vector).max(self.memory).max(self.comm) + self.fixed
    }
}

/// Seconds attributed to each bound, summed over a step's operators: each operator adds
/// only its dominant component (compute adds both cube and vector), as the original's
/// bottleneck analysis does; fixed per-op and host costs are kept separately.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Breakdown {
    pub memory: f64,
    pub comm: f64,
    pub cube: f64,
    pub vector: f64,
    pub fixed: f64,
}

impl Breakdown {
    pub fn add_op(&mut self, t: &OpTime, count: f64) {
        let compute = t.cube + t.vector;
        if t.memory >= compute && t.memory >= t.comm {
            self.memory += t.memory * count;
        } else if t.comm >= compute {
            self.comm += t.comm * count;
        } else {
            self.cube += t.cube * count;
            self.vector += t.vector * count;
        }
        self.fixed += t.fixed * count;
    }
    pub fn total(&self) -> f64 {
        self.memory + self.comm + self.cube + self.vector + self.fixed
    }
    pub fn add_scaled(&mut self, other: &Breakdown, w: f64) {
        self.memory += other.memory * w;
        self.comm += other.comm * w;
        self.cube += other.cube * w;
        self.vector += other.vector * w;
        self.fixed += other.fixed * w;
    }
    /// The components' bits, to compare breakdowns float for float.
    pub fn to_bits(&self) -> [u64; 5] {
        [self.memory, self.comm, self.cube, self.vector, self.fixed].map(f64::to_bits)
    }
    /// Percent shares in the order Mem, Comm, Cube, Vec, Fixed.
    pub fn percents(&self) -> [f64; 5] {
        let t = self.total();
        if t <= 0.0 {
            return [0.0; 5];
        }
        [self.memory, self.comm, self.cube, self.vector, self.fixed].map(|x| 100.0 * x / t)
    }
    /// "Mem 81.25 | Comm 6.25 | Cube 6.25 | Vec 6.25 | Fixed 0.00"
    pub fn label(&self) -> String {
        let p = self.percents();
        format!("Mem {:.2} | Comm {:.2} | Cube {:.2} | Vec {:.2} | Fixed {:.2}", p[0], p[1], p[2], p[3], p[4])
    }
    /// The dominant component's name.
    pub fn bottleneck(&self) -> &'static str {
        let p = self.percents();
        let names = ["memory bandwidth", "communication", "matrix compute", "vector compute", "fixed per-op overhead"];
        let (i, _) = p.iter().enumerate().fold((0, f64::MIN), |acc, (i, &v)| if v > acc.1 { (i, v) } else { acc });
        names[i]
    }
}

/// What one operator adds to a step: its seconds, and the amounts its breakdown adds, in the
/// order they are added (an overlap adds its slowest stream's breakdown, then its own fixed
/// cost, to `fixed`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpShare {
    pub seconds: f64,
    pub parts: Breakdown,
    pub fixed_after: f64,
}

impl OpShare {
    /// Adds the parts to `b`. A part the operator does not touch is +0, and adding +0 leaves
    /// a sum of non-negative terms that started at +0 unchanged bit for bit: the same floats
    /// as adding only the parts it touches.
    pub fn add_to(&self, b: &mut Breakdown) {
        b.add_scaled(&self.parts, 1.0);
        b.fixed += self.fixed_after;
    }
}

/// Which collective an operator performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
}

/// How an operator's time is computed.
#[derive(Debug, Clone)]
pub enum OpKind {
    /// Roofline: matrix + vector seconds vs memory seconds, all linear in the features.
    Roofline { mma: Coef, gp: Coef, mem: Coef },
    /// A collective over `group` of `bytes` (linear in features), vs its HBM traffic.
    Collective { algo: Collective, group: CommGroup, bytes: Coef, mem: Coef },
    /// Routed experts on the busiest rank under uniform routing.
    Experts(ExpertCost),
    /// Streams of operators that run concurrently: the slowest stream sets the time. With
    /// `fused`, the streams are one kernel: members' fixed costs are replaced by the op's own.
    Overlap { streams: Vec<Vec<Op>>, fused: bool },
    /// A kernel priced from a measured table (see [`measured`]).
    Measured(Box<measured::Measured>),
}

/// Per-pair and per-active-expert costs of one routed-expert operator.
///
/// Departure from the original: it spreads assignments evenly with the remainder on the
/// first experts (which live on the priced rank), so a small decode batch reads every local
/// expert's weights. Here the priced rank is the expected busiest rank under random routing.
#[derive(Debug, Clone)]
pub struct ExpertCost {
    /// Tokens on this rank's replica are sliced over `tp` ranks before routing.
    pub tp: f64,
    /// Ranks whose tokens are routed within one MoE replica (EP × MoE-TP).
    pub group_ranks: f64,
    pub top_k: f64,
    pub experts: f64,
    pub local_experts: f64,
    /// Seconds per (token, expert) pair on this rank.
    pub mma_per_pair: f64,
    pub gp_per_pair: f64,
    pub mem_per_pair: f64,
    /// Seconds per active local expert (weight reads, W4A8 dequant).
    pub mem_per_expert: f64,
    pub gp_per_expert: f64,
    /// Fixed cost per active expert (eager: one kernel each) or once (grouped GEMM).
    pub fixed_per_expert: bool,
}

impl ExpertCost {
    /// (token-expert pairs, active local experts) on the busiest rank for `tokens` on this
    /// replica, under uniform random top-k routing.
    ///
    /// Each replica's tokens are sliced over TP and routed within a MoE replica of
    /// `group_ranks` ranks, giving `A` assignments over `E` experts. An expert is hit with
    /// probability `p = 1 − (1 − 1/E)^A`; a rank's active experts are ~Binomial(E_local, p)
    /// and its pairs ~Binomial(A, 1/ranks). The step waits for the busiest of the `ranks`
    /// ranks: mean + σ·√(2 ln ranks) (the Gaussian approximation of the expected maximum),
    /// capped by what is possible.
    pub fn load(&self, tokens: f64) -> (f64, f64) {
        if tokens <= 0.0 {
            return (0.0, 0.0);
        }
        let sliced = (tokens / self.tp).ceil();
        let assignments = sliced * self.group_ranks * self.top_k;
        let ranks = (self.experts / self.local_experts).max(1.0);
        let z = if ranks > 1.0 { (2.0 * ranks.ln()).sqrt() } else { 0.0 };
        let mean_pairs = assignments / ranks;
        let pairs = (mean_pairs + z * (mean_pairs * (1.0 - 1.0 / ranks)).sqrt()).min(assignments);
        let p = 1.0 - (1.0 - 1.0 / self.experts).powf(assignments);
        let mean_active = self.local_experts * p;
        let active = (mean_active + z * (mean_active * (1.0 - p)).sqrt()).clamp(1.0, self.local_experts);
        (pairs, active)
    }
}

/// One operator kind, repeated `count` times per step (layers × calls per layer).
#[derive(Debug, Clone)]
pub struct Op {
    pub name: &'static str,
    pub count: f64,
    /// The operator runs only if this feature is positive.
    pub gate: usize,
    pub fixed_s: f64,
    /// Sliding-window attention: clamp context and pairs to the window.
    pub window: Option<f64>,
    pub kind: OpKind,
}

/// `x` with context and attention pairs clamped to a sliding window of `window` tokens.
fn windowed(x: &Features, window: Option<f64>) -> Features {
    let mut y = *x;
    if let Some(w) = window {
        y[f::P_CTX] = y[f::P_CTX].min(y[f::P_SEQS] * w);
        y[f::D_CTX] = y[f::D_CTX].min(y[f::D_SEQS] * w);
        y[f::P_PAIRS] = y[f::P_PAIRS].min(y[f::P_TOKENS] * w);
        y[f::D_PAIRS] = y[f::D_PAIRS].min(y[f::D_TOKENS] * w);
        // The causal saving (half of Σ chunk² per sequence, see `causal` in the graph)
        // happens only inside the window: at most half a window² per sequence. Without this
        // clamp a long prefill chunk's saving exceeded its clamped pairs and the matrix
        // time went negative.
        y[f::P_QSQ] = y[f::P_QSQ].min(y[f::P_SEQS] * w * w);
    }
    y
}

impl Op {
    fn windowed(&self, x: &Features) -> Features {
        windowed(x, self.window)
    }

    /// Seconds the matrix units would be busy with all `count` calls at the device's effective
    /// matrix rate: the roofline's matrix time, whatever bounds the operator and whatever a
    /// table measured. Over a step's device time it is the step's tensor-core load, which a
    /// power-limited device's clocks follow.
    pub fn matrix_seconds(&self, x: &Features) -> f64 {
        if x[self.gate] <= 0.0 {
            return 0.0;
        }
        // A measured sliding-window attention keeps its window in its lookup; its roofline reads
        // the clamped features as the kernel does.
        let window = self.window.or(match &self.kind {
            OpKind::Measured(m) => m.window(),
            _ => None,
        });
        let clamped = window.map(|w| windowed(x, Some(w)));
        let x = clamped.as_ref().unwrap_or(x);
        let one = match &self.kind {
            OpKind::Overlap { streams, .. } => streams.iter().flatten().map(|o| o.matrix_seconds(x)).sum(),
            OpKind::Measured(m) => kind_time(&m.roofline, x).cube,
            kind => kind_time(kind, x).cube,
        };
        one.max(0.0) * self.count
    }

    /// Bit `i` set where the operator's seconds may depend on feature `i` (its gate
    /// included): a term whose coefficient is zero adds ±0 whatever the feature, so it is not
    /// read.
    pub fn reads(&self) -> u16 {
        let kind = match &self.kind {
            OpKind::Roofline { mma, gp, mem } => nonzero_mask(mma) | nonzero_mask(gp) | nonzero_mask(mem),
            OpKind::Collective { bytes, mem, .. } => nonzero_mask(bytes) | nonzero_mask(mem),
            OpKind::Experts(_) => 1 << f::TOKENS,
            OpKind::Overlap { streams, .. } => streams.iter().flatten().fold(0, |m, op| m | op.reads()),
            OpKind::Measured(m) => m.reads(),
        };
        // The window clamps context and pairs by sequences and tokens.
        let window = match self.window {
            Some(_) => [f::P_CTX, f::D_CTX, f::P_PAIRS, f::D_PAIRS, f::P_SEQS, f::D_SEQS, f::P_TOKENS, f::D_TOKENS, f::P_QSQ]
                .iter()
                .fold(0, |m, i| m | 1 << i),
            None => 0,
        };
        kind | window | 1 << self.gate
    }

    /// Components of one repetition (an overlap reports its slowest stream as fixed time).
    pub fn eval(&self, x: &Features) -> OpTime {
        if x[self.gate] <= 0.0 {
            return OpTime::default();
        }
        // Only sliding-window attention clamps its features; everything else reads them as is.
        let clamped = self.window.map(|_| self.windowed(x));
        let x = clamped.as_ref().unwrap_or(x);
        let mut t = match &self.kind {
            OpKind::Overlap { .. } => {
                let mut b = Breakdown::default();
                return OpTime { fixed: self.seconds_into(x, &mut b) / self.count.max(1e-300), ..Default::default() };
            }
            OpKind::Measured(m) => return measured_time(m, x, self.fixed_s),
            OpKind::Experts(e) if e.fixed_per_expert => {
                let (_, active) = e.load(x[f::TOKENS]);
                let mut t = kind_time(&self.kind, x);
                t.fixed = self.fixed_s * active;
                return t;
            }
            kind => kind_time(kind, x),
        };
        if t.total() > 0.0 {
            t.fixed = self.fixed_s;
        }
        t
    }

    /// Seconds all `count` repetitions add to a step, accumulating where the time went.
    pub fn seconds_into(&self, x: &Features, b: &mut Breakdown) -> f64 {
        let share = self.share(x);
        share.add_to(b);
        share.seconds
    }

    /// What all `count` repetitions add to a step: [`Op::seconds_into`] as a value.
    pub fn share(&self, x: &Features) -> OpShare {
        if x[self.gate] <= 0.0 {
            return OpShare::default();
        }
        match &self.kind {
            OpKind::Overlap { streams, fused } => {
                let mut best = (0.0, Breakdown::default());
                for s in streams {
                    let mut sb = Breakdown::default();
                    let mut secs = 0.0;
                    for op in s {
                        secs += op.seconds_into(x, &mut sb);
                    }
                    if *fused {
                        secs -= sb.fixed;
                        sb.fixed = 0.0;
                    }
                    if secs > best.0 {
                        best = (secs, sb);
                    }
                }
                let fixed = if best.0 > 0.0 { self.fixed_s * self.count } else { 0.0 };
                OpShare { seconds: best.0 + fixed, parts: best.1, fixed_after: fixed }
            }
            _ => {
                let t = self.eval(x);
                let mut parts = Breakdown::default();
                parts.add_op(&t, self.count);
                OpShare { seconds: t.total() * self.count, parts, fixed_after: 0.0 }
            }
        }
    }

    /// Seconds only (the hot path). A measured kernel skips its roofline (which only splits
    /// the breakdown): the same float as `eval(x).total() * count`.
    pub fn seconds(&self, x: &Features) -> f64 {
        match &self.kind {
            OpKind::Overlap { .. } => self.seconds_into(x, &mut Breakdown::default()),
            OpKind::Measured(m) if x[self.gate] > 0.0 => {
                let s = m.priced(x).seconds;
                let fixed = if s > 0.0 { self.fixed_s } else { 0.0 };
                (s + fixed) * self.count
            }
            _ => self.eval(x).total() * self.count,
        }
    }
}

/// The components of one call of a roofline, collective or expert kind, without its fixed
/// cost (an overlap or a measured kernel has none of its own).
fn kind_time(kind: &OpKind, x: &Features) -> OpTime {
    match kind {
        OpKind::Roofline { mma, gp, mem } => OpTime { cube: dot(mma, x), vector: dot(gp, x), memory: dot(mem, x), ..Default::default() },
        OpKind::Collective { algo, group, bytes, mem } => {
            let b = dot(bytes, x);
            let comm = match algo {
                Collective::AllReduce => group.all_reduce(b),
                Collective::AllGather => group.all_gather(b),
                Collective::ReduceScatter => group.reduce_scatter(b),
                Collective::AllToAll => group.all_to_all(b),
            };
            OpTime { comm, memory: dot(mem, x), ..Default::default() }
        }
        OpKind::Experts(e) => {
            let (pairs, active) = e.load(x[f::TOKENS]);
            OpTime {
                cube: pairs * e.mma_per_pair,
                vector: pairs * e.gp_per_pair + active * e.gp_per_expert,
                memory: pairs * e.mem_per_pair + active * e.mem_per_expert,
                ..Default::default()
            }
        }
        OpKind::Overlap { .. } | OpKind::Measured(_) => OpTime::default(),
    }
}

/// A measured kernel's time, attributed whole to the component that bounds the roofline it
/// replaces (memory, communication or compute; memory when that roofline is empty), so that
/// its total is the measured time exactly. `fixed_s` is zero for the tables' kernels: their
/// launch is in their latency.
fn measured_time(m: &measured::Measured, x: &Features, fixed_s: f64) -> OpTime {
    let p = m.priced(x);
    if p.seconds <= 0.0 {
        return OpTime::default();
    }
    let r = kind_time(&m.roofline, x);
    let compute = r.cube + r.vector;
    let mut t = if r.comm > r.memory && r.comm >= compute {
        OpTime { comm: p.seconds, ..Default::default() }
    } else if compute > r.memory {
        OpTime { cube: p.seconds, ..Default::default() }
    } else {
        OpTime { memory: p.seconds, ..Default::default() }
    };
    t.fixed = fixed_s;
    t
}

#[cfg(test)]
mod tests;
