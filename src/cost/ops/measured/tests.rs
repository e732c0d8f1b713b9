use super::*;
use crate::cost::ops::f;
use crate::cost::{BatchShape, PhaseLoad};
use crate::hardware::kernels::Grid;

/// A 2-D table t(b, s) = b · s µs on b ∈ {1, 2, 4}, s ∈ {1, 16, 64} (the fixed axes empty).
fn dense2() -> Dense<2> {
    let mut pts = Vec::new();
    for b in [1.0, 2.0, 4.0] {
        for s in [1.0, 16.0, 64.0] {
            pts.push((vec![b, s], b * s * 1e-6));
        }
    }
    Dense::slice(&Grid::from_points(2, pts).unwrap(), &[], &|_| 1.0)
}

/// Compute-bound attention: one second per (query, key) pair keeps the arithmetic exact.
const ROOF: AttentionRoof = AttentionRoof { per_pair: 1e-6, per_ctx: 0.0, per_query: 0.0 };

fn attention(window: Option<f64>) -> Measured {
    let side = || AttentionSide { table: dense2(), measured: ROOF, actual: ROOF };
    let lookup = Lookup::Attention { prefill: Some(side()), decode: Some(side()), window, clamp_lookup: false, dcp: 1.0 };
    Measured { roofline: OpKind::Roofline { mma: [0.0; f::N], gp: [0.0; f::N], mem: [0.0; f::N] }, lookup }
}

#[test]
fn a_decode_at_a_measured_shape_is_the_table() {
    // 2 sequences at KV length 16 (one query each): t(2, 16) = 32 µs.
    let shape = BatchShape { decode: PhaseLoad::uniform(2, 1, 16), sampled: 2, ..Default::default() };
    let p = attention(None).priced(&shape.features());
    assert!((p.seconds - 32e-6).abs() < 1e-15, "{}", p.seconds);
    assert_eq!(p.source, Source::Silicon);
}

#[test]
fn several_query_tokens_per_decode_are_carried_by_the_pairs() {
    // MTP: 2 sequences × 2 query tokens at KV length 16 read the table at (2, 16) (32 µs) and
    // scale by actual pairs / table pairs = (2·2·16) / (2·16) = 2 on a compute-bound roofline.
    // Mutation: drop the ratio and this prices 32 µs.
    let shape = BatchShape { decode: PhaseLoad::uniform(2, 2, 16), sampled: 4, ..Default::default() };
    let p = attention(None).priced(&shape.features());
    assert!((p.seconds - 64e-6).abs() < 1e-12, "{}", p.seconds);
    assert_eq!(p.source, Source::Extrapolated);
}

#[test]
fn a_chunk_after_a_cached_prefix_is_priced_at_the_equal_work_prompt_length() {
    // One chunk of 16 new tokens after 48 cached attends to 16·64 − 16·15/2 = 904 causal pairs;
    // a full prompt of s tokens has s(s+1)/2, equal at s = (√(1 + 8·904) − 1)/2 = 42.02…, and
    // the table there interpolates to 42.02… µs (t = b·s µs). Mutation: look up the chunk's own
    // length (16) and scale by the work ratio 904/136, the old rule: 106.4 µs.
    let shape = BatchShape { prefill: PhaseLoad::uniform(1, 16, 64), sampled: 1, ..Default::default() };
    let p = attention(None).priced(&shape.features());
    let want = ((1.0f64 + 8.0 * 904.0).sqrt() - 1.0) / 2.0 * 1e-6;
    assert!((p.seconds - want).abs() < 1e-12, "{} vs {want}", p.seconds);
    assert_eq!(p.source, Source::Extrapolated);
    // With nothing cached the chunk is the table's shape exactly.
    let shape = BatchShape { prefill: PhaseLoad::uniform(1, 16, 16), sampled: 1, ..Default::default() };
    let p = attention(None).priced(&shape.features());
    assert!((p.seconds - 16e-6).abs() < 1e-15 && p.source == Source::Silicon, "{p:?}");
}

#[test]
fn a_short_tail_chunk_pays_the_launch_cost_once() {
    // A table whose every point is a 10 µs launch plus 1 ns per causal pair (a few-token prefill
    // is all launch). A 1-token chunk after 63 cached does 64 pairs, the work of a full prompt of
    // (√513 − 1)/2 = 10.82 tokens: 10 µs + that prompt's pairs (64) → 10.064 µs. Mutation:
    // the old rule (the 1-token table point, 10.001 µs, times 64 pairs / 1 pair) prices 640 µs.
    let mut pts = Vec::new();
    for b in [1.0, 2.0] {
        for s in [1.0, 4.0, 16.0, 64.0] {
            pts.push((vec![b, s], 10e-6 + 1e-9 * b * s * (s + 1.0) / 2.0));
        }
    }
    let table = Dense::slice(&Grid::from_points(2, pts).unwrap(), &[], &|_| 1.0);
    let side = AttentionSide { table, measured: ROOF, actual: ROOF };
    let lookup = Lookup::Attention { prefill: Some(side), decode: None, window: None, clamp_lookup: false, dcp: 1.0 };
    let op = Measured { roofline: OpKind::Roofline { mma: [0.0; f::N], gp: [0.0; f::N], mem: [0.0; f::N] }, lookup };
    let shape = BatchShape { prefill: PhaseLoad::uniform(1, 1, 64), sampled: 1, ..Default::default() };
    let p = op.priced(&shape.features());
    // The table interpolates linearly in s between 4 and 16: the pairs there are 10 and 136.
    let s = (513f64.sqrt() - 1.0) / 2.0;
    let want = 10e-6 + 1e-9 * (10.0 + (s - 4.0) / 12.0 * 126.0);
    assert!((p.seconds - want).abs() < 1e-15, "{} vs {want}", p.seconds);
    assert!(p.seconds < 11e-6, "{}", p.seconds);
}

#[test]
fn the_equal_work_length_takes_the_side_that_reaches_the_work_first() {
    // Compute side alone: s(s+1)/2 pairs; 2 sequences with 2·36 = 72 µs of pairs → s = 8.
    let r = AttentionRoof { per_pair: 1e-6, per_ctx: 0.0, per_query: 0.0 };
    assert!((equal_work_length(&r, None, 2.0, 72e-6).unwrap() - 8.0).abs() < 1e-12);
    // Past a 4-token window the pairs grow as 4·s: 4·10 = 40 pairs → s = 10 (7·4 = 28 at 2w − 1).
    assert!((equal_work_length(&r, Some(4.0), 1.0, 40e-6).unwrap() - 10.0).abs() < 1e-12);
    // A memory side that reaches the work sooner wins: 1 µs per key and query → s = 36 / 2 = 18,
    // where the compute side alone would need 8. Mutation: take the larger length → 18 vs 8.
    let both = AttentionRoof { per_pair: 1e-6, per_ctx: 1e-6, per_query: 1e-6 };
    assert!((equal_work_length(&both, None, 1.0, 36e-6).unwrap() - 8.0).abs() < 1e-12);
    let mem = AttentionRoof { per_pair: 1e-9, per_ctx: 1e-6, per_query: 1e-6 };
    assert!((equal_work_length(&mem, None, 1.0, 36e-6).unwrap() - 18.0).abs() < 1e-12);
    // An empty roofline has no such length.
    assert_eq!(equal_work_length(&AttentionRoof::default(), None, 1.0, 1e-6), None);
}

#[test]
fn a_window_clamps_what_the_kernel_reads() {
    // A 16-token window: one query at KV length 64 reads 16 keys; the exact-window table is
    // looked up at the sequence's length (64 → t(1, 64) = 64 µs) and its roofline clamps alike,
    // so the ratio is 1. Mutation: clamp only the actual side and the ratio becomes 1/4.
    let shape = BatchShape { decode: PhaseLoad::uniform(1, 1, 64), sampled: 1, ..Default::default() };
    let p = attention(Some(16.0)).priced(&shape.features());
    assert!((p.seconds - 64e-6).abs() < 1e-12, "{}", p.seconds);
}

#[test]
fn a_count_lookup_floors_at_its_roofline_and_carries_another_dtype() {
    let g = Grid::from_points(1, [(vec![1.0], 1e-6), (vec![8.0], 2e-6)]).unwrap();
    let curve: Dense<1> = Dense::slice(&g, &[], &|x: &[f64]| x[0]);
    // A roofline above the table at 8 (3 µs): the floor wins. Mutation: drop the floor → 2 µs.
    let roof = Roof1 { compute: 0.375e-6, memory0: 0.0, memory1: 0.0 };
    let p = count(8.0, &curve, &roof, None, Some(&roof));
    assert!((p.seconds - 3e-6).abs() < 1e-15, "{}", p.seconds);
    assert!((count(8.0, &curve, &roof, None, None).seconds - 2e-6).abs() < 1e-15);
    // A dtype with half the bytes of the table's, memory-bound: half the time, extrapolated.
    let measured = Roof1 { compute: 0.0, memory0: 1e-6, memory1: 0.0 };
    let target = Roof1 { compute: 0.0, memory0: 0.5e-6, memory1: 0.0 };
    let p = count(8.0, &curve, &measured, Some(&Transfer { target, measured }), None);
    assert!((p.seconds - 1e-6).abs() < 1e-15 && p.source == Source::Extrapolated, "{p:?}");
}
