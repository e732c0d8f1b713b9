//! The per-thread memo of a step's count-only operators, kept per cost model.
//!
//! Most operators of a step read only token and sequence counts (linear layers, routed
//! experts, collectives, the overlapped dispatch/FFN/combine); attention reads the context,
//! which grows every decode step. Decode batches repeat the same counts step after step, and
//! the simulations that share a cost model (the splits of a P/D verification) repeat them
//! again, so [`StepMemo::seconds`] keeps the count-only operators' seconds per key (the
//! counts they read) and evaluates only the others live. The values are summed in operator
//! order, each the float a live evaluation gives, so a step costs the same bits with or
//! without the memo (the simulator's outputs do not change).
//!
//! The memo lives in a thread-local table per cost model (a cost model is shared by the
//! search's worker threads, immutably): no lock on the hot path, and the outputs cannot
//! depend on which thread priced what. Memory is bounded: a fixed number of slots per table
//! (a key that lands on a taken slot replaces it) and a few tables per thread.

use super::ops::{f, Breakdown, FastOp, Features, Op, OpShare};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Features an operator may read and still be memoised: counts, which repeat across steps
/// (context and attention pairs grow every step, so keys on them would never repeat).
const COUNTS: u16 = (1 << f::ONE)
    | (1 << f::TOKENS)
    | (1 << f::P_TOKENS)
    | (1 << f::D_TOKENS)
    | (1 << f::P_SEQS)
    | (1 << f::D_SEQS)
    | (1 << f::SAMPLED)
    | (1 << f::SEQS)
    | (1 << f::IMG_PATCHES);

/// Slots per table (a power of two): a decode instance sees one key per batch size.
const SLOT_BITS: u32 = 10;
/// Tables per thread: a P/D system prices with two cost models; a search moves through
/// candidates, and the oldest table is reused for the next model.
const TABLES_PER_THREAD: usize = 8;

/// One odd multiplier per feature for the slot hash (the golden ratio's, spread apart).
const KEY_MULS: [u64; f::N] = {
    let mut m = [0u64; f::N];
    let mut i = 0;
    while i < f::N {
        m[i] = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(2 * i as u64 + 1) | 1;
        i += 1;
    }
    m
};

/// Identifies a cost model's operator graph (a clone shares it: same operators).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Clone, Copy)]
enum Term {
    /// The k-th memoised value.
    Memo(usize),
    /// The i-th operator, evaluated on every step.
    Live(usize),
}

/// How a cost model's step is summed: which operators are memoised, and the key they share.
#[derive(Debug, Clone)]
pub struct StepMemo {
    id: u64,
    /// The features the memoised operators read (a subset of [`COUNTS`]).
    key_mask: u16,
    /// One term per operator, in operator order.
    terms: Vec<Term>,
    /// Indices of the memoised operators.
    memoised: Vec<usize>,
}

impl StepMemo {
    pub fn of(ops: &[Op]) -> StepMemo {
        let (mut terms, mut memoised, mut key_mask) = (Vec::with_capacity(ops.len()), Vec::new(), 0);
        for (i, op) in ops.iter().enumerate() {
            let reads = op.reads();
            if reads & !COUNTS == 0 {
                terms.push(Term::Memo(memoised.len()));
                memoised.push(i);
                key_mask |= reads;
            } else {
                terms.push(Term::Live(i));
            }
        }
        StepMemo { id: NEXT_ID.fetch_add(1, Ordering::Relaxed), key_mask, terms, memoised }
    }

    /// The memo's key for features `x`: the bits of the features the memoised operators read.
    #[inline]
    fn key(&self, x: &Features) -> [u64; f::N] {
        let mut key = [0u64; f::N];
        for (i, k) in key.iter_mut().enumerate() {
            if self.key_mask & (1 << i) != 0 {
                *k = x[i].to_bits();
            }
        }
        key
    }

    /// Σ seconds of the operators `fast` (built from `ops`) on features `x` whose non-zero
    /// mask is `xmask`, in operator order: the float of `fast`'s plain sum. Inlined into
    /// `RooflineCost::step_seconds` (the simulator's hot path) whichever codegen unit holds it.
    #[inline]
    pub fn seconds(&self, fast: &[FastOp], ops: &[Op], x: &Features, xmask: u16) -> f64 {
        if self.memoised.is_empty() {
            return fast.iter().map(|op| op.seconds(ops, x, xmask)).sum::<f64>();
        }
        let key = self.key(x);
        SECONDS.with(|tables| {
            let mut tables = tables.borrow_mut();
            let table = tables.table(self.id, self.memoised.len());
            let vals = table.lookup(&key, |vals| {
                for (v, &i) in vals.iter_mut().zip(&self.memoised) {
                    *v = fast[i].seconds(ops, x, xmask);
                }
            });
            self.terms
                .iter()
                .map(|t| match *t {
                    Term::Memo(k) => vals[k],
                    Term::Live(i) => fast[i].seconds(ops, x, xmask),
                })
                .sum::<f64>()
        })
    }

    /// Seconds of the operators `ops` on features `x`, and where they went: each operator's
    /// [`OpShare`] added in operator order, as [`Op::seconds_into`] over them adds it.
    pub fn step(&self, ops: &[Op], x: &Features) -> (f64, Breakdown) {
        let (mut total, mut b) = (0.0, Breakdown::default());
        if self.memoised.is_empty() {
            for op in ops {
                total += op.seconds_into(x, &mut b);
            }
            return (total, b);
        }
        let key = self.key(x);
        SHARES.with(|tables| {
            let mut tables = tables.borrow_mut();
            let table = tables.table(self.id, SHARE_WIDTH * self.memoised.len());
            let vals = table.lookup(&key, |vals| {
                for (v, &i) in vals.chunks_exact_mut(SHARE_WIDTH).zip(&self.memoised) {
                    v.copy_from_slice(&to_values(&ops[i].share(x)));
                }
            });
            for t in &self.terms {
                total += match *t {
                    Term::Memo(k) => {
                        let share = from_values(&vals[k * SHARE_WIDTH..(k + 1) * SHARE_WIDTH]);
                        share.add_to(&mut b);
                        share.seconds
                    }
                    Term::Live(i) => ops[i].seconds_into(x, &mut b),
                };
            }
        });
        (total, b)
    }
}

/// An [`OpShare`] as stored in a table: seconds, the five parts, the fixed cost added after.
const SHARE_WIDTH: usize = 7;

fn to_values(s: &OpShare) -> [f64; SHARE_WIDTH] {
    let p = &s.parts;
    [s.seconds, p.memory, p.comm, p.cube, p.vector, p.fixed, s.fixed_after]
}

fn from_values(v: &[f64]) -> OpShare {
    let parts = Breakdown { memory: v[1], comm: v[2], cube: v[3], vector: v[4], fixed: v[5] };
    OpShare { seconds: v[0], parts, fixed_after: v[6] }
}

thread_local! {
    /// Per operator: its seconds ([`StepMemo::seconds`], every step).
    static SECONDS: RefCell<Tables> = const { RefCell::new(Tables { list: Vec::new(), next: 0 }) };
    /// Per operator: its [`OpShare`] ([`StepMemo::step`], the steps whose breakdown is sampled).
    static SHARES: RefCell<Tables> = const { RefCell::new(Tables { list: Vec::new(), next: 0 }) };
}

/// One thread's tables, the oldest replaced first once there are [`TABLES_PER_THREAD`].
struct Tables {
    list: Vec<Table>,
    next: usize,
}

/// Memoised values of one cost model: `width` values per slot.
struct Table {
    owner: u64,
    width: usize,
    keys: Vec<[u64; f::N]>,
    filled: Vec<bool>,
    vals: Vec<f64>,
}

impl Tables {
    fn table(&mut self, owner: u64, width: usize) -> &mut Table {
        if let Some(i) = self.list.iter().position(|t| t.owner == owner) {
            return &mut self.list[i];
        }
        let slots = 1 << SLOT_BITS;
        let fresh = Table { owner, width, keys: vec![[0; f::N]; slots], filled: vec![false; slots], vals: Vec::new() };
        let i = if self.list.len() < TABLES_PER_THREAD {
            self.list.push(fresh);
            self.list.len() - 1
        } else {
            // Reuse the oldest table's buffers for the new model.
            let i = self.next;
            self.next = (self.next + 1) % TABLES_PER_THREAD;
            let t = &mut self.list[i];
            t.owner = owner;
            t.width = width;
            t.filled.iter_mut().for_each(|f| *f = false);
            i
        };
        let t = &mut self.list[i];
        t.vals.resize(slots * width, 0.0);
        t
    }
}

impl Table {
    /// The values stored under `key`, computed by `fill` first unless that slot holds them.
    fn lookup(&mut self, key: &[u64; f::N], fill: impl FnOnce(&mut [f64])) -> &[f64] {
        // Every step looks a key up: the products are independent (not a chain of multiplies),
        // and the comparison ORs the differences without branching (or calling `memcmp`).
        // Which slot a key lands on only decides what is recomputed, never a value.
        let mut h = 0u64;
        for (k, m) in key.iter().zip(KEY_MULS) {
            // A feature's bits sit high (an integer's exponent and leading mantissa bits).
            h = h.wrapping_add(k.rotate_left(20).wrapping_mul(m));
        }
        h = (h ^ (h >> 29)).wrapping_mul(0x517c_c1b7_2722_0a95);
        let slot = (h >> (64 - SLOT_BITS)) as usize;
        let vals = &mut self.vals[slot * self.width..(slot + 1) * self.width];
        let differs = self.keys[slot].iter().zip(key).fold(0, |d, (a, b)| d | (a ^ b));
        if !(self.filled[slot] && differs == 0) {
            fill(vals);
            self.keys[slot] = *key;
            self.filled[slot] = true;
        }
        vals
    }
}
