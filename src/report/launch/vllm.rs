//! vLLM's launch commands: `vllm serve` per instance and, for P/D, the NixlConnector proxy.
//!
//! Flag names were checked in vLLM's sources: `vllm/engine/arg_utils.py` at 99d7eb5 (v0.11
//! line: `--tensor-parallel-size`, `--pipeline-parallel-size`, `--data-parallel-size`, `--enable-expert-parallel`,
//! `--decode-context-parallel-size`, `--max-num-seqs`, `--max-num-batched-tokens`,
//! `--kv-cache-dtype`, `--quantization`, `--speculative-config`, `--kv-transfer-config`,
//! `--enable-prefix-caching`, `--gpu-memory-utilization`, `--block-size`), the `mtp` method of
//! `vllm/config/speculative.py` (main at 002e77c) and the NixlConnector guide
//! (`kv_role: kv_both`, `toy_proxy_server.py`).

use super::deployment::{Deployment, Instance, Role, Weights};
use super::script::{command, header, no_int8_kv, pipeline_flag, placement_note, quote};
use super::{Emitter, LaunchFile};
use crate::cost::ParallelConfig;
use crate::hardware::runtime::KvMemorySetting;
use crate::quant::KvQuant;
use std::fmt::Write as _;

/// vLLM's [`Emitter`].
pub struct Vllm;

impl Vllm {
    /// vLLM shards an MoE layer over all TP × DP devices: by TP, or by EP with
    /// `--enable-expert-parallel`. Other splits of the experts have no flag.
    fn parallel(&self, d: &Deployment, l: &ParallelConfig) -> Result<Vec<String>, String> {
        let mut v = vec!["--tensor-parallel-size".into(), l.tp.to_string()];
        v.extend(pipeline_flag("--pipeline-parallel-size", l));
        if l.dp > 1 {
            v.extend(["--data-parallel-size".into(), l.dp.to_string()]);
        }
        // A pipeline stage's devices hold its MoE layers.
        let stage = l.num_devices / l.pp.max(1);
        if d.moe {
            match (l.ep, l.moe_tp, l.moe_dp) {
                (1, t, 1) if t == stage => {}
                (e, 1, 1) if e == stage => v.push("--enable-expert-parallel".into()),
                _ => {
                    return Err(format!(
                        "vLLM shards MoE layers over all {} devices of an instance (TP, or EP with --enable-expert-parallel); \
                         the plan's EP{} x MoE-TP{} x MoE-DP{} has no vLLM flag",
                        l.num_devices, l.ep, l.moe_tp, l.moe_dp
                    ))
                }
            }
        }
        if l.dcp > 1 {
            v.extend(["--decode-context-parallel-size".into(), l.dcp.to_string()]);
        }
        Ok(v)
    }

    fn serve(&self, d: &Deployment, i: &Instance, port: u32) -> Result<Vec<String>, String> {
        let mut v: Vec<String> = vec!["vllm".into(), "serve".into(), d.model.clone(), "--port".into(), port.to_string()];
        v.extend(self.parallel(d, &i.layout)?);
        v.extend([
            "--max-num-seqs".into(),
            i.max_num_seqs.to_string(),
            "--max-num-batched-tokens".into(),
            i.max_batched_tokens.to_string(),
        ]);
        if !d.chunked_prefill {
            v.push("--no-enable-chunked-prefill".into());
        }
        // The utilization the simulation sized vLLM's KV cache by, else the plan's reserve.
        let utilization = match d.kv_memory {
            Some((KvMemorySetting::GpuMemoryUtilization, Some(f))) => f,
            _ => d.memory_fraction,
        };
        v.extend(["--gpu-memory-utilization".into(), format!("{utilization:.2}"), "--block-size".into(), d.block_size.to_string()]);
        if d.weights == Weights::Fp8Online {
            v.extend(["--quantization".into(), "fp8".into()]);
        }
        if d.kv == KvQuant::Fp8 {
            v.extend(["--kv-cache-dtype".into(), "fp8".into()]);
        }
        if i.mtp > 0 {
            v.extend(["--speculative-config".into(), quote(&format!("{{\"method\":\"mtp\",\"num_speculative_tokens\":{}}}", i.mtp))]);
        }
        if d.prefix_caching {
            v.push("--enable-prefix-caching".into());
        }
        if i.role != Role::Mixed {
            v.extend(["--kv-transfer-config".into(), quote("{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}")]);
        }
        Ok(v)
    }
}

impl Emitter for Vllm {
    fn check(&self, d: &Deployment) -> Result<(), String> {
        no_int8_kv("vLLM", d)
    }

    fn emit(&self, d: &Deployment) -> Result<Vec<LaunchFile>, String> {
        let mut notes = vec!["vLLM v0.11 or newer (vllm serve flags as in vllm/engine/arg_utils.py)".to_string()];
        if d.ascend {
            notes.push("Ascend: vLLM with the vllm-ascend plugin takes the same flags".into());
        }
        if d.amd {
            notes.push("AMD: the ROCm build of vLLM (AITER kernels) takes the same flags".into());
        }
        if !d.is_pd() {
            let i = &d.instances[0];
            let s = header("vLLM", d, &notes) + &command("", &self.serve(d, i, 8000)?) + "\n";
            return Ok(vec![LaunchFile { name: "launch.sh".into(), contents: s }]);
        }
        notes.push("KV hand-off: NixlConnector (each instance needs its own VLLM_NIXL_SIDE_CHANNEL_PORT if several share a host)".into());
        let mut files = Vec::new();
        let mut ports: Vec<(Role, Vec<u32>)> = Vec::new();
        for (k, i) in d.instances.iter().enumerate() {
            let base = if i.role == Role::Prefill { 8100 } else { 8200 };
            let mut n = notes.clone();
            n.push(placement_note(i));
            let mut s = header("vLLM", d, &n);
            let mut used = Vec::new();
            for j in 0..i.count {
                let port = base + j;
                let _ = writeln!(s, "\n# {} instance {} of {}", i.role.name(), j + 1, i.count);
                s += &command("", &self.serve(d, i, port)?);
                s += " &\n";
                used.push(port);
            }
            s += "wait\n";
            files.push(LaunchFile { name: format!("{}.sh", i.role.name()), contents: s });
            ports.push((d.instances[k].role, used));
        }
        let hosts = |role: Role, var: &str| -> (Vec<String>, Vec<String>) {
            let p = &ports.iter().find(|(r, _)| *r == role).expect("both roles").1;
            (p.iter().enumerate().map(|(j, _)| format!("${{{var}_{j}:-localhost}}")).collect(), p.iter().map(u32::to_string).collect())
        };
        let (ph, pp) = hosts(Role::Prefill, "PREFILL_HOST");
        let (dh, dp) = hosts(Role::Decode, "DECODE_HOST");
        let mut words: Vec<String> =
            vec!["python".into(), "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py".into(), "--port".into(), "8000".into()];
        words.push("--prefiller-hosts".into());
        words.extend(ph);
        words.push("--prefiller-ports".into());
        words.extend(pp);
        words.push("--decoder-hosts".into());
        words.extend(dh);
        words.push("--decoder-ports".into());
        words.extend(dp);
        let mut s = header(
            "vLLM",
            d,
            &["the proxy clients send requests to (port 8000); run from a vLLM source checkout, \
            with PREFILL_HOST_i / DECODE_HOST_i set to where each instance runs"
                .to_string()],
        );
        s += &command("", &words);
        s += "\n";
        files.push(LaunchFile { name: "router.sh".into(), contents: s });
        Ok(files)
    }
}
