//! The emitters' layouts per engine and the row range of `--emit-row`.

use super::deployment::nth;
use super::*;
use crate::cost::ParallelConfig;
use crate::quant::KvQuant;

fn moe(layout: ParallelConfig) -> Deployment {
    Deployment {
        model: "Qwen/Qwen3-30B-A3B".into(),
        device: "H100_SXM".into(),
        nvidia: true,
        amd: false,
        ascend: false,
        moe: true,
        weights: Weights::Bf16,
        kv: KvQuant::Disabled,
        chunked_prefill: true,
        prefix_caching: false,
        memory_fraction: 0.86,
        kv_memory: None,
        block_size: 128,
        max_input: 3500,
        instances: vec![Instance { role: Role::Mixed, count: 1, layout, max_num_seqs: 64, max_batched_tokens: 8192, mtp: 0 }],
        source: "test".into(),
    }
}

fn layout(tp: u32, dp: u32, ep: u32, moe_tp: u32, moe_dp: u32) -> ParallelConfig {
    ParallelConfig { num_devices: tp * dp, tp, dp, ep, moe_tp, moe_dp, dcp: 1, pp: 1 }
}

fn text(e: &dyn Emitter, d: &Deployment) -> String {
    e.emit(d).unwrap().into_iter().map(|f| f.contents).collect()
}

/// vLLM expresses experts over every device by TP or by EP, nothing in between. Fails if
/// the EP arm of `Vllm::parallel` drops `--enable-expert-parallel` or accepts a partial EP.
#[test]
fn vllm_moe_is_all_tp_or_all_ep() {
    let ep = text(&Vllm, &moe(layout(1, 8, 8, 1, 1)));
    assert!(
        ep.contains("--tensor-parallel-size 1") && ep.contains("--data-parallel-size 8") && ep.contains("--enable-expert-parallel"),
        "{ep}"
    );
    let tp = text(&Vllm, &moe(layout(8, 1, 1, 8, 1)));
    assert!(!tp.contains("--enable-expert-parallel"), "{tp}");
    let err = Vllm.emit(&moe(layout(8, 1, 4, 2, 1))).unwrap_err();
    assert!(err.contains("EP4 x MoE-TP2 x MoE-DP1"), "{err}");
}

/// SGLang counts every device in `--tp-size` and runs attention data-parallel with DP; its
/// limits are divided by `--dp-size` there, so the plan's per-replica values are multiplied.
#[test]
fn sglang_moe_with_dp_attention() {
    let s = text(&Sglang, &moe(layout(1, 8, 8, 1, 1)));
    for part in ["--tp-size 8", "--dp-size 8", "--enable-dp-attention", "--ep-size 8", "--max-running-requests 512"] {
        assert!(s.contains(part), "{part} in {s}");
    }
}

/// TensorRT-LLM's attention DP runs attention with TP 1: TP2 x DP4 is refused, TP1 x DP8
/// becomes `enable_attention_dp`.
#[test]
fn trtllm_attention_dp_needs_tp_one() {
    assert!(Trtllm.emit(&moe(layout(2, 4, 8, 1, 1))).unwrap_err().contains("attention with TP 1"));
    let files = Trtllm.emit(&moe(layout(1, 8, 8, 1, 1))).unwrap();
    assert!(files[0].contents.contains("enable_attention_dp: true"), "{}", files[0].contents);
    assert!(files[1].contents.contains("--tp_size 8 --ep_size 8") || files[1].contents.contains("--ep_size 8"), "{}", files[1].contents);
}

/// `--emit-row` past the table names its range; an empty table says there is nothing to
/// launch. Fails if `nth` indexes from 0 (row 3 would be out of range).
#[test]
fn rows_out_of_range_name_the_range() {
    let rows = [1, 2, 3];
    assert_eq!(nth(&rows, 3, "x"), Ok(&3));
    assert_eq!(nth(&rows, 4, "aggregated").unwrap_err(), "--emit-row 4: the aggregated table has 3 rows (1 to 3)");
    assert!(nth::<u32>(&[], 1, "decode").unwrap_err().contains("no decode configuration"));
}

/// Each emitter passes the memory setting the simulation sized its own engine's KV cache by:
/// vLLM's utilization, TensorRT-LLM's free-memory fraction; SGLang's computed default is left to
/// SGLang. Another engine's setting (or none) keeps the plan's reserve. Fails if an emitter
/// ignores `Deployment::kv_memory`.
#[test]
fn emitters_pass_the_memory_setting_the_simulation_used() {
    use crate::hardware::runtime::KvMemorySetting;
    let with = |m| Deployment { kv_memory: Some(m), ..moe(layout(8, 1, 1, 8, 1)) };
    let vllm = text(&Vllm, &with((KvMemorySetting::GpuMemoryUtilization, Some(0.9))));
    assert!(vllm.contains("--gpu-memory-utilization 0.90"), "{vllm}");
    let trtllm = text(&Trtllm, &with((KvMemorySetting::KvCacheFreeGpuMemoryFraction, Some(0.9))));
    assert!(trtllm.contains("free_gpu_memory_fraction: 0.9"), "{trtllm}");
    let sglang = text(&Sglang, &with((KvMemorySetting::MemFractionStatic, None)));
    assert!(!sglang.contains("--mem-fraction-static"), "{sglang}");
    let sglang = text(&Sglang, &with((KvMemorySetting::GpuMemoryUtilization, Some(0.9))));
    assert!(sglang.contains("--mem-fraction-static 0.86"), "{sglang}");
    assert!(text(&Vllm, &moe(layout(8, 1, 1, 8, 1))).contains("--gpu-memory-utilization 0.86"));
}
