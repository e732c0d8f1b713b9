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
fn a_chunk_after_a_cached_prefix_is_carried_by_its_causal_pairs() {
    // One chunk of 16 new tokens after 48 cached: the table at (1, 16) is 16 µs for 16·17/2
    // = 136 causal pairs; the chunk attends to 16·64 − 16·15/2 = 904 pairs: 16 × 904 / 136.
    // Mutation: count the chunk's pairs without the causal saving (1024) and this fails.
    let shape = BatchShape { prefill: PhaseLoad::uniform(1, 16, 64), sampled: 1, ..Default::default() };
    let p = attention(None).priced(&shape.features());
    let want = 16e-6 * 904.0 / 136.0;
    assert!((p.seconds - want).abs() < 1e-12, "{} vs {want}", p.seconds);
    // With nothing cached the chunk is the table's shape exactly.
    let shape = BatchShape { prefill: PhaseLoad::uniform(1, 16, 16), sampled: 1, ..Default::default() };
    let p = attention(None).priced(&shape.features());
    assert!((p.seconds - 16e-6).abs() < 1e-15 && p.source == Source::Silicon, "{p:?}");
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
    let p = count(8.0, &curve, &roof, None, true);
    assert!((p.seconds - 3e-6).abs() < 1e-15, "{}", p.seconds);
    assert!((count(8.0, &curve, &roof, None, false).seconds - 2e-6).abs() < 1e-15);
    // A dtype with half the bytes of the table's, memory-bound: half the time, extrapolated.
    let measured = Roof1 { compute: 0.0, memory0: 1e-6, memory1: 0.0 };
    let target = Roof1 { compute: 0.0, memory0: 0.5e-6, memory1: 0.0 };
    let p = count(8.0, &curve, &measured, Some(&Transfer { target, measured }), false);
    assert!((p.seconds - 1e-6).abs() < 1e-15 && p.source == Source::Extrapolated, "{p:?}");
}
