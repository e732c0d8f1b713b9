use throughput_optimizer::cost::*;
use throughput_optimizer::hardware::DeviceRegistry;
use throughput_optimizer::model::catalog;
use throughput_optimizer::quant::*;
fn main() {
    let reg = DeviceRegistry::builtin();
    let dev = reg.get("TEST_DEVICE").unwrap();
    let model = catalog::find("Qwen/Qwen3-32B").unwrap();
    let o = CostOptions { quant: QuantConfig { linear: LinearQuant::W8A8Dynamic, non_expert: None, kv: KvQuant::Disabled, mxfp4_group_size: 32 }, compile: CompileOptions { enabled: true, ..Default::default() }, mtp_tokens: 0, draft_layers: 0, shared_expert_tp: false, word_embedding_tp: None, with_vision: false };
    for tp in [8u32, 4, 2, 1] {
        let par = ParallelConfig::dense(8, tp);
        let (c, m) = graph::build_both(&model, dev, &par, &o);
        let pf = BatchShape { prefill: PhaseLoad::uniform(4, 3500, 3500), sampled: 4, ..Default::default() };
        let p = c.step(&pf);
        let dec = |b: u64| { let s = BatchShape { decode: PhaseLoad::uniform(b, 1, 4251), sampled: b, ..Default::default() }; c.step(&s) };
        println!("tp{tp}: prefill 4x3500 {:.2} ms [{}]  decode193 {:.2} ms decode1 {:.2} [{}]  w {:.2} GiB kv/tok {}", p.seconds*1e3, p.breakdown.label(), dec(193).seconds*1e3, dec(1).seconds*1e3, dec(193).breakdown.label(), m.weight_bytes/1024f64.powi(3), m.kv_bytes_per_token);
        if tp == 8 { for (n, cnt, t) in c.op_times(&pf) { println!("   {n:24} x{cnt} {:.4} ms (cube {:.4} vec {:.4} mem {:.4} comm {:.4})", t.total()*1e3, t.cube*1e3, t.vector*1e3, t.memory*1e3, t.comm*1e3); } }
    }
}
