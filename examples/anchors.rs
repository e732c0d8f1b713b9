//! Prints the cost model's step time for the original tool's single-forward regression
//! anchors (the original tool's documented numeric facts), for docs/validation.md.
//!
//! `cargo run --release --example anchors`

use throughput_optimizer::cost::{BatchShape, CompileOptions, CostOptions, ParallelConfig, PhaseLoad, RooflineCost, StepCostModel};
use throughput_optimizer::hardware::DeviceRegistry;
use throughput_optimizer::model::catalog;
use throughput_optimizer::quant::{KvQuant, LinearQuant, QuantConfig};

struct Anchor {
    case: &'static str,
    device: &'static str,
    model: &'static str,
    tp: u32,
    dp: u32,
    ep: u32,
    linear: LinearQuant,
    kv: KvQuant,
    mtp: u32,
    matmul_allreduce: bool,
    /// (requests per replica, new tokens each, context) and decode?
    shape: (u64, u64, u64, bool),
    original_s: f64,
    measured_s: f64,
}

fn main() {
    use LinearQuant::*;
    let anchors = [
        Anchor {
            case: "qwen3-8B-decode",
            device: "ATLAS_800_A2_376T_64G",
            model: "Qwen/Qwen3-8B",
            tp: 2,
            dp: 1,
            ep: 1,
            linear: Disabled,
            kv: KvQuant::Disabled,
            mtp: 0,
            matmul_allreduce: true,
            shape: (32, 1, 1536, true),
            original_s: 0.012733,
            measured_s: 0.015406,
        },
        Anchor {
            case: "qwen3-8B-prefill",
            device: "ATLAS_800_A2_376T_64G",
            model: "Qwen/Qwen3-8B",
            tp: 2,
            dp: 1,
            ep: 1,
            linear: Disabled,
            kv: KvQuant::Disabled,
            mtp: 0,
            matmul_allreduce: true,
            shape: (8, 1024, 1024, false),
            original_s: 0.439006,
            measured_s: 0.43772,
        },
        Anchor {
            case: "qwen3-30b-a3b-decode",
            device: "ATLAS_800_A3_752T_128G_DIE",
            model: "Qwen/Qwen3-30B-A3B",
            tp: 4,
            dp: 1,
            ep: 4,
            linear: Disabled,
            kv: KvQuant::Disabled,
            mtp: 0,
            matmul_allreduce: true,
            shape: (1, 1, 3450, true),
            original_s: 0.012712,
            measured_s: 0.012706,
        },
        Anchor {
            case: "qwen3-30b-a3b-prefill",
            device: "ATLAS_800_A3_752T_128G_DIE",
            model: "Qwen/Qwen3-30B-A3B",
            tp: 4,
            dp: 1,
            ep: 4,
            linear: Disabled,
            kv: KvQuant::Disabled,
            mtp: 0,
            matmul_allreduce: false,
            shape: (1, 3200, 3200, false),
            original_s: 0.163197,
            measured_s: 0.151281,
        },
        Anchor {
            case: "deepseek-v3.1-decode",
            device: "ATLAS_800_A3_560T_128G_DIE",
            model: "deepseek-ai/DeepSeek-V3.1",
            tp: 1,
            dp: 32,
            ep: 32,
            linear: W8A8Dynamic,
            kv: KvQuant::Int8,
            mtp: 3,
            matmul_allreduce: false,
            shape: (6, 4, 4200, true),
            original_s: 0.064124,
            measured_s: 0.070849,
        },
        Anchor {
            case: "qwen3.5-27b-3515-prefill",
            device: "ATLAS_800_A3_560T_128G_DIE",
            model: "Qwen/Qwen3.5-27B",
            tp: 2,
            dp: 1,
            ep: 1,
            linear: W8A8Static,
            kv: KvQuant::Disabled,
            mtp: 0,
            matmul_allreduce: false,
            shape: (1, 3510, 3510, false),
            original_s: 0.415842,
            measured_s: 0.4471,
        },
        Anchor {
            case: "qwen3.5-27b-3515-decode",
            device: "ATLAS_800_A3_560T_128G_DIE",
            model: "Qwen/Qwen3.5-27B",
            tp: 2,
            dp: 1,
            ep: 1,
            linear: W8A8Static,
            kv: KvQuant::Disabled,
            mtp: 3,
            matmul_allreduce: false,
            shape: (1, 4, 4250, true),
            original_s: 0.02482,
            measured_s: 0.02733,
        },
        Anchor {
            case: "qwen3.5-27b-1610-prefill",
            device: "ATLAS_800_A3_560T_128G_DIE",
            model: "Qwen/Qwen3.5-27B",
            tp: 2,
            dp: 1,
            ep: 1,
            linear: W8A8Static,
            kv: KvQuant::Disabled,
            mtp: 0,
            matmul_allreduce: false,
            shape: (1, 16824, 16824, false),
            original_s: 2.198,
            measured_s: 2.099,
        },
        Anchor {
            case: "qwen3.5-27b-1610-decode",
            device: "ATLAS_800_A3_560T_128G_DIE",
            model: "Qwen/Qwen3.5-27B",
            tp: 2,
            dp: 1,
            ep: 1,
            linear: W8A8Static,
            kv: KvQuant::Disabled,
            mtp: 3,
            matmul_allreduce: false,
            shape: (3, 4, 16500, true),
            original_s: 0.028161,
            measured_s: 0.03434,
        },
        Anchor {
            case: "qwen3.5-27b-1080-decode",
            device: "ATLAS_800_A3_560T_128G_DIE",
            model: "Qwen/Qwen3.5-27B",
            tp: 2,
            dp: 1,
            ep: 1,
            linear: W8A8Static,
            kv: KvQuant::Disabled,
            mtp: 3,
            matmul_allreduce: false,
            shape: (8, 4, 16500, true),
            original_s: 0.035383,
            measured_s: 0.03984,
        },
    ];
    let reg = DeviceRegistry::builtin();
    println!("| case | device | shape | parallel | ours (ms) | original (ms) | ours / original | measured (ms) | ours / measured |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for a in &anchors {
        let dev = reg.get(a.device).unwrap();
        let model = catalog::find(a.model).unwrap();
        let n = a.tp * a.dp;
        let par = ParallelConfig {
            num_devices: n,
            tp: a.tp,
            dp: a.dp,
            ep: if model.is_moe() { a.ep } else { 1 },
            moe_tp: if model.is_moe() { n / a.ep } else { 1 },
            moe_dp: 1,
            dcp: 1,
            pp: 1,
        };
        let opts = CostOptions {
            quant: QuantConfig { linear: a.linear, non_expert: None, attention: None, kv: a.kv, mxfp4_group_size: 32 },
            compile: CompileOptions { enabled: true, matmul_allreduce: a.matmul_allreduce, ..Default::default() },
            mtp_tokens: a.mtp,
            draft_layers: 0,
            shared_expert_tp: false,
            word_embedding_tp: None,
            with_vision: false,
            causal_attention: false,
            moe_all_reduce: false,
            kernels: None,
        };
        let cost = RooflineCost::new(&model, dev, &par, &opts);
        let (s, q, ctx, decode) = a.shape;
        let load = PhaseLoad::uniform(s, q, ctx);
        let shape = if decode {
            BatchShape { decode: load, sampled: s * q, ..Default::default() }
        } else {
            BatchShape { prefill: load, sampled: s, ..Default::default() }
        };
        let ours = cost.step_seconds(&shape);
        println!(
            "| {} | {} | {} × {}{} | TP{} DP{}{} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            a.case,
            a.device,
            s,
            q,
            if decode { format!(", ctx {ctx}") } else { String::new() },
            a.tp,
            a.dp,
            if model.is_moe() { format!(" EP{}", a.ep) } else { String::new() },
            ours * 1e3,
            a.original_s * 1e3,
            ours / a.original_s,
            a.measured_s * 1e3,
            ours / a.measured_s
        );
    }
}
