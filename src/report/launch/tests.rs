//! The emitters' layouts per engine and the row range of `--emit-row`.

use super::deployment::nth;
use super::placement::{place, PortBases};
use super::*;
use crate::cost::ParallelConfig;
use crate::plan::EmitFormat;
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
        mxfp4_moe_mxfp8: false,
        mxfp4_moe_triton: false,
        kv: KvQuant::Disabled,
        chunked_prefill: true,
        prefix_caching: false,
        memory_fraction: 0.86,
        kv_memory: None,
        block_size: 16,
        gpus_per_node: 8,
        max_input: 3500,
        instances: vec![Instance { role: Role::Mixed, count: 1, layout, max_num_seqs: 64, max_batched_tokens: 8192, mtp: 0 }],
        source: "test".into(),
    }
}

fn layout(tp: u32, dp: u32, ep: u32, moe_tp: u32, moe_dp: u32) -> ParallelConfig {
    ParallelConfig { num_devices: tp * dp, tp, dp, ep, moe_tp, moe_dp, dcp: 1, pp: 1 }
}

fn emit(e: &dyn Emitter, d: &Deployment) -> Result<Vec<LaunchFile>, String> {
    files(e, d, EmitFormat::Shell)
}

fn text(e: &dyn Emitter, d: &Deployment) -> String {
    emit(e, d).unwrap().into_iter().map(|f| f.contents).collect()
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
    let err = emit(&Vllm, &moe(layout(8, 1, 4, 2, 1))).unwrap_err();
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
    assert!(emit(&Trtllm, &moe(layout(2, 4, 8, 1, 1))).unwrap_err().contains("attention with TP 1"));
    let files = emit(&Trtllm, &moe(layout(1, 8, 8, 1, 1))).unwrap();
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

fn kinds(instances: &[(Role, u32)]) -> Deployment {
    let mut d = moe(layout(1, 1, 1, 1, 1));
    let one = d.instances[0].clone();
    d.instances = instances.iter().map(|&(role, count)| Instance { role, count, ..one.clone() }).collect();
    d
}

const PORTS: PortBases = PortBases { http: 8100, aux: 5600, dist: 13345 };

/// Eight 1-device prefill servers fill node 0, two 4-device decode servers node 1; a
/// 16-device server takes two whole nodes. Fails if servers share GPUs or ports, or if a
/// server straddles a node it does not fill.
#[test]
fn servers_pack_onto_whole_nodes() {
    let d = kinds(&[(Role::Prefill, 8), (Role::Decode, 2)]);
    let p = place(&d, &[(8, 1), (2, 4)], PORTS).unwrap();
    assert_eq!(p.nodes, 2);
    assert_eq!(p.servers[7].gpus, [7]);
    assert_eq!((p.servers[8].node, p.servers[9].node), (1, 1));
    assert_eq!((p.servers[8].visible_devices().as_str(), p.servers[9].visible_devices().as_str()), ("0,1,2,3", "4,5,6,7"));
    let ports: std::collections::BTreeSet<u32> = p.servers.iter().map(|s| s.port).collect();
    assert_eq!(ports.len(), 10);
    assert_eq!(p.servers[9].aux_port, 5600 + 12);
    let big = place(&kinds(&[(Role::Prefill, 1), (Role::Decode, 1)]), &[(1, 2), (1, 16)], PORTS).unwrap();
    assert_eq!((big.servers[1].node, big.servers[1].nodes, big.nodes), (1, 2, 3));
    assert_eq!(big.host(2), "${NODE2_HOST}");
    assert_eq!(big.on_node(2).count(), 1);
    assert!(place(&kinds(&[(Role::Mixed, 1)]), &[(1, 12)], PORTS).unwrap_err().contains("whole nodes of 8"));
}

/// Every flag an emitter writes is in its version's list; a flag the list lacks is refused.
/// Fails if an emitter writes a flag its version does not have (e.g. `--block-size` spelt
/// another way), or if the check lets one through.
#[test]
fn emitted_flags_are_the_versions_own() {
    let list = FlagList::of(crate::plan::LaunchEngine::Vllm);
    assert!(list.knows("vllm serve", "--block-size") && !list.knows("vllm serve", "--page-size"));
    let bad = Process::new("vllm serve", vec!["M".into(), "--page-size".into(), "16".into(), "--chunked-prefill-size".into(), "-1".into()]);
    assert_eq!(list.unknown_in(&bad), ["--page-size", "--chunked-prefill-size"]);
    assert!(list.check(&bad).unwrap_err().contains("vLLM 0.11 has no --page-size"));
    for e in [&Vllm as &dyn Emitter, &Sglang, &Trtllm] {
        for d in [moe(layout(1, 8, 8, 1, 1)), kinds(&[(Role::Prefill, 3), (Role::Decode, 2)])] {
            for format in [EmitFormat::Shell, EmitFormat::K8s] {
                files(e, &d, format).unwrap();
            }
        }
    }
}

/// TensorRT-LLM commands carry the KV share the simulation used, on the command line and in
/// the options file (whose kv_cache_config replaces the command line's). Fails if either is
/// dropped when the engine profile sets no value.
#[test]
fn trtllm_carries_the_kv_free_memory_fraction() {
    let t = text(&Trtllm, &moe(layout(8, 1, 1, 8, 1)));
    assert!(t.contains("--kv_cache_free_gpu_memory_fraction 0.9") && t.contains("free_gpu_memory_fraction: 0.9"), "{t}");
}

#[test]
fn vllm_exports_the_mxfp4_mxfp8_moe_switch_only_where_the_plan_priced_that_kernel() {
    // Mutation: drop the env push in Vllm::process and the first assertion fails.
    let on = Deployment { mxfp4_moe_mxfp8: true, ..moe(layout(4, 1, 1, 4, 1)) };
    assert!(text(&Vllm, &on).contains("VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1"), "{}", text(&Vllm, &on));
    assert!(!text(&Vllm, &moe(layout(4, 1, 1, 4, 1))).contains("MXFP4_MXFP8"));
}

#[test]
fn trtllm_selects_the_triton_moe_backend_only_where_the_plan_priced_it() {
    // Mutation: drop the moe_config block in Trtllm::options and the first assertion fails.
    let on = Deployment { mxfp4_moe_triton: true, ..moe(layout(4, 1, 1, 4, 1)) };
    assert!(text(&Trtllm, &on).contains("moe_config:\n  backend: TRITON\n"), "{}", text(&Trtllm, &on));
    assert!(!text(&Trtllm, &moe(layout(4, 1, 1, 4, 1))).contains("moe_config"));
}
