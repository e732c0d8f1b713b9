//! Conformance with the original's unit-level numeric facts (the formulas and unit facts its documentation and tests state), using scripted
//! forward latencies.

use super::*;
use crate::workload::LengthDistribution;
use std::cell::RefCell;

/// Latencies by rule; records every call as (conc, is_decode, query, seq).
struct Scripted<'a> {
    prefill_ms: &'a dyn Fn(u64, u64, u64) -> f64,
    decode_ms: f64,
    divisor: f64,
    calls: RefCell<Vec<(u64, bool, u64, u64)>>,
    varlen: RefCell<Vec<Vec<(u64, u64)>>>,
}

impl<'a> Scripted<'a> {
    fn new(prefill_ms: &'a dyn Fn(u64, u64, u64) -> f64, decode_ms: f64) -> Self {
        Scripted { prefill_ms, decode_ms, divisor: 1.0, calls: RefCell::default(), varlen: RefCell::default() }
    }
}

fn ok(ms: f64) -> Forward {
    Forward { ms, mem: MemoryUse { avail_gib: 1.0, ..Default::default() }, breakdown: Breakdown::default() }
}

impl ForwardOracle for Scripted<'_> {
    fn prefill(&self, conc: u64, q: u64, s: u64) -> Forward {
        self.calls.borrow_mut().push((conc, false, q, s));
        ok((self.prefill_ms)(conc, q, s))
    }
    fn prefill_varlen(&self, pieces: &[(u64, u64)]) -> Forward {
        self.varlen.borrow_mut().push(pieces.to_vec());
        ok((self.prefill_ms)(pieces.len() as u64, 0, 0))
    }
    fn decode(&self, conc: u64) -> Forward {
        self.calls.borrow_mut().push((conc, true, 0, 0));
        ok(self.decode_ms)
    }
    fn fold(&self, ms: f64) -> f64 {
        ms / self.divisor
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-3
}

#[test]
fn single_chunk_wave_formula() {
    // E=10, O=5, C=5, G=20 ⇒ P=2, k=2, r=1; t_P=10, t_r=4, t_D=2.
    let f = |conc: u64, _: u64, _: u64| if conc == 2 { 10.0 } else { 4.0 };
    let o = Scripted::new(&f, 2.0);
    let r = agg_single_chunk(&o, 5, 10, 5, 20);
    assert!(close(r.ttft_ms, 16.8), "{}", r.ttft_ms);
    assert!(close(r.tpot_amortized_ms, 5.36));
    assert!(close(r.throughput, 932.8358), "{}", r.throughput);
    assert!(close(r.tpot_inter_token_ms, 2.0));
    // dp=4: G=80, C=8 ⇒ one wave of 8; t_P=10, t_D=2 ⇒ 10 / 4 / 2000.
    let g = |_: u64, _: u64, _: u64| 10.0;
    let o = Scripted::new(&g, 2.0);
    let r = agg_single_chunk(&o, 8, 10, 5, 80);
    assert!(close(r.ttft_ms, 10.0) && close(r.tpot_amortized_ms, 4.0) && close(r.throughput, 2000.0));
}

#[test]
fn chunk_replay_with_the_default_scheduler() {
    // input 5, out 2, C=2, budget 3, every forward 1 ms ⇒ TTFT 3.5, TPOT 1.0, 800 tok/s.
    let f = |_: u64, _: u64, _: u64| 1.0;
    let o = Scripted::new(&f, 1.0);
    let chunks = chunk_plan(5, 3);
    assert_eq!(chunks, vec![(3, 3), (2, 5)]);
    let r = agg_chunked(&o, 2, &chunks, 2, 3, 0.15);
    assert!(close(r.ttft_ms, 3.5), "{}", r.ttft_ms);
    assert!(close(r.tpot_inter_token_ms, 1.0), "{}", r.tpot_inter_token_ms);
    assert!(close(r.throughput, 800.0), "{}", r.throughput);
    // Finishes at 4 and 5 ms: amortized TPOT = mean E2E / O = 4.5 / 2.
    assert!(close(r.tpot_amortized_ms, 2.25));
    assert_eq!(chunk_plan(10, 4).len(), 3);
    assert_eq!(chunk_plan(10000, 4096).iter().map(|c| c.0).collect::<Vec<_>>(), vec![4096, 4096, 1808]);
}

#[test]
fn scheduler_split_facts() {
    assert_eq!(decode_first_split(4000, 0.15, 512, 1, 4000), (1, 512));
    assert_eq!(decode_first_split(4000, 0.15, 700, 1, 4000), (0, 700));
    assert_eq!(decode_first_split(3, 0.15, 0, 2, 3), (1, 0));
}

#[test]
fn variable_length_aggregation() {
    // Bins [0,100) and [100,200) 1:1, batch 4, budget 200, 10 ms per chunk, t_D = 2, O = 5.
    let d = LengthDistribution::parse(
        "bins:\n  - {min_tokens: 0, max_tokens: 100, weight: 1}\n  - {min_tokens: 100, max_tokens: 200, weight: 1}\n",
        "t",
        "x",
    )
    .unwrap();
    let comp = d.compose(4, 0.0);
    let f = |_: u64, _: u64, _: u64| 10.0;
    let o = Scripted::new(&f, 2.0);
    let r = agg_varlen(&o, 4, &comp, 5, 200);
    assert!(close(r.ttft_ms, 15.0), "{}", r.ttft_ms);
    assert!(close(r.tpot_amortized_ms, 5.0));
    let shapes = o.varlen.borrow().clone();
    assert_eq!(shapes, vec![vec![(50, 50), (50, 50), (100, 100)], vec![(50, 150), (150, 150)]]);
}

#[test]
fn disaggregated_prefill_waves_and_decode() {
    // dp=4, C=4, input 10, budget 4 (G=16): chunks (4,4),(4,8),(2,10), one wave each, 1 ms,
    // serving cost 2 ⇒ TTFT 5 ms, 8000 tok/s.
    let f = |_: u64, _: u64, _: u64| 1.0;
    let o = Scripted::new(&f, 1.0);
    let chunks = chunk_plan(10, 4);
    let r = disagg_prefill(&o, 4, 10, &chunks, 16, 2.0);
    assert!(close(r.ttft_ms, 5.0) && close(r.throughput, 8000.0), "{r:?}");
    let calls = o.calls.borrow().clone();
    assert_eq!(calls, vec![(4, false, 4, 4), (4, false, 4, 8), (4, false, 2, 10)]);
    // Fits one chunk: one forward with all 4 requests.
    let o = Scripted::new(&f, 1.0);
    let r = disagg_prefill(&o, 4, 4, &chunk_plan(4, 4), 16, 0.0);
    assert!(close(r.ttft_ms, 1.0));
    assert_eq!(o.calls.borrow().len(), 1);
    // Decode: 2 ms forward + 3 ms serving cost ⇒ TPOT 5.
    let o = Scripted::new(&f, 2.0);
    let r = disagg_decode(&o, 8, 3.0);
    assert!(close(r.tpot_ms, 5.0) && close(r.throughput, 1600.0));
}

#[test]
fn mtp_and_draft_folding() {
    // 140 ms raw decode, MTP 2, rates [0.5, 0.25, 1.0] ⇒ 80 ms.
    assert!(close(140.0 / mtp_tokens_per_step(2, &[0.5, 0.25, 1.0]), 80.0));
    assert!(close(100.0 / mtp_tokens_per_step(2, &[0.5, 0.5]), 50.0));
    assert!(close(100.0 / mtp_tokens_per_step(2, &[1.0, 1.0]), 33.333));
    // A fifth draft with four rates adds nothing beyond the four.
    assert!(close(mtp_tokens_per_step(5, &[0.9, 0.6, 0.4, 0.2]), 3.1));
    assert!(close(mtp_tokens_per_step(1, &[0.9, 0.6, 0.4, 0.2]), 1.9));
}
