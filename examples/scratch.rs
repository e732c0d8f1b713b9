use throughput_optimizer::cost::*;
use throughput_optimizer::hardware::DeviceRegistry;
use throughput_optimizer::model::catalog;
use throughput_optimizer::quant::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reg = DeviceRegistry::builtin();
    let dev = reg.get(&args.get(1).cloned().unwrap_or("TEST_DEVICE".into())).unwrap();
    let model = catalog::find(&args.get(3).cloned().unwrap_or("deepseek-ai/DeepSeek-V3.1".into())).unwrap();
    let compile = args.get(2).map(|s| s == "compile").unwrap_or(true);
    let o = CostOptions {
        quant: QuantConfig { linear: LinearQuant::W8A8Dynamic, non_expert: None, kv: KvQuant::Disabled, mxfp4_group_size: 32 },
        compile: CompileOptions { enabled: compile, ..Default::default() },
        mtp_tokens: 0,
        draft_layers: 0,
        shared_expert_tp: false,
        word_embedding_tp: None,
        with_vision: false,
        causal_attention: false,
    };
    let n: u32 = args.get(4).map(|s| s.parse().unwrap()).unwrap_or(16);
    let cfgs: Vec<(u32, u32, u32)> = args
        .get(5)
        .map(|s| {
            s.split(',')
                .map(|c| {
                    let v: Vec<u32> = c.split(':').map(|x| x.parse().unwrap()).collect();
                    (v[0], v[1], v[2])
                })
                .collect()
        })
        .unwrap_or(vec![(8, 16, 1), (16, 16, 1), (2, 16, 1)]);
    for (tp, ep, md) in cfgs {
        let par = ParallelConfig { num_devices: n, tp, dp: n / tp, ep, moe_tp: n / (ep * md), moe_dp: md, dcp: 1 };
        let (c, m) = graph::build_both(&model, dev, &par, &o);
        let b = 8u64;
        let s = BatchShape { decode: PhaseLoad::uniform(b, 1, 4251), sampled: b, ..Default::default() };
        let st = c.step(&s);
        println!(
            "tp{tp} ep{ep}: decode b{b} {:.2} ms [{}] weights {:.2} GiB kv/tok {}",
            st.seconds * 1e3,
            st.breakdown.label(),
            m.weight_bytes / 1024f64.powi(3),
            m.kv_bytes_per_token
        );
        if std::env::var("OPS").is_ok() {
            for (name, cnt, t) in c.op_times(&s) {
                println!(
                    "   {name:28} x{cnt:4} {:8.4} ms total {:8.3} (cube {:.4} vec {:.4} mem {:.4} comm {:.4} fixed {:.4})",
                    t.total() * 1e3,
                    t.total() * cnt * 1e3,
                    t.cube * 1e3,
                    t.vector * 1e3,
                    t.memory * 1e3,
                    t.comm * 1e3,
                    t.fixed * 1e3
                );
            }
        }
    }
}
