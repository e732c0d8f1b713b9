use throughput_optimizer::cost::*;
use throughput_optimizer::hardware::{calibration::EngineProfiles, DeviceRegistry};
use throughput_optimizer::model::resolve_model;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dev_name = args.get(1).map(String::as_str).unwrap_or("H200_SXM");
    let engine = args.get(2).map(String::as_str).unwrap_or("vllm");
    let (model, _) = resolve_model("meta-llama/Meta-Llama-3.1-8B").unwrap();
    let reg = DeviceRegistry::builtin();
    let dev = reg.get(dev_name).unwrap();
    let engines = EngineProfiles::default();
    let eff = engines.effective(engine, dev, None);
    let mut opts = CostOptions::basic(throughput_optimizer::quant::LinearQuant::Disabled, true);
    opts.causal_attention = true;
    opts.kernels = eff.kernels.clone();
    let par = ParallelConfig::dense(1, 1);
    let (cost, _) = graph::build_both(&model, &eff.device, &par, &opts);
    let roof = { let mut o = opts.clone(); o.kernels = None; graph::build_both(&model, &eff.device, &par, &o).0 };
    for (b, l) in [(1u64, 512u64), (8, 512), (32, 512), (64,512),(128,512),(256,512), (1, 2048), (8, 2048), (32, 2048), (64,2048),(128,2048),(1, 8192), (8, 8192), (32, 8192)] {
        let shape = BatchShape { decode: PhaseLoad::uniform(b, 1, l), sampled: b, ..Default::default() };
        let t: f64 = cost.op_times(&shape).iter().map(|(_, c, t)| c * t.total()).sum();
        let r: f64 = roof.op_times(&shape).iter().map(|(_, c, t)| c * t.total()).sum();
        println!("decode B={b} L={l}: tables {:.3} ms  roofline(calibrated) {:.3} ms", t * 1e3, r * 1e3);
        if b == 1 && l == 512 { for (n, c, t) in cost.op_times(&shape) { println!("   {n:24} x{c:3} {:.2} us", t.total()*1e6); } }
    }
    for (b, p) in [(1u64, 128u64), (1, 512), (1, 2048), (1, 8192), (2, 2048)] {
        let shape = BatchShape { prefill: PhaseLoad::uniform(b, p, p), sampled: b, ..Default::default() };
        let t: f64 = cost.op_times(&shape).iter().map(|(_, c, t)| c * t.total()).sum();
        println!("prefill B={b} P={p}: tables {:.3} ms", t * 1e3);
        if p == 2048 && b == 1 { for (n, c, t) in cost.op_times(&shape) { println!("   {n:24} x{c:3} {:.2} us", t.total()*1e6); } }
    }
}
