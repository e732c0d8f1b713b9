//! TensorRT-LLM's launch commands: `trtllm-serve` per server with its LLM API options file
//! and, for P/D, `trtllm-serve disaggregated` with its configuration.
//!
//! Flag names were checked in `tensorrt_llm/commands/serve.py` at 4c05a74 (`trtllm-serve MODEL
//! --backend pytorch --tp_size --ep_size --max_batch_size --max_num_tokens
//! --enable_chunked_prefill --extra_llm_api_options FILE`), LLM API options in that YAML
//! (`enable_attention_dp`, `kv_cache_config`, `speculative_config`, `cache_transceiver_config`)
//! and `trtllm-serve disaggregated -c FILE` (examples/disaggregated/README.md).

use super::deployment::{Deployment, Instance, Role, Weights};
use super::script::{command, header, no_dcp, no_int8_kv, pipeline_flag, placement_note};
use super::{Emitter, LaunchFile};
use crate::cost::ParallelConfig;
use crate::hardware::runtime::KvMemorySetting;
use crate::quant::KvQuant;
use std::fmt::Write as _;

/// TensorRT-LLM's [`Emitter`] (the PyTorch backend).
pub struct Trtllm;

impl Trtllm {
    /// `--tp_size` counts every device of a server. Attention data parallelism
    /// (`enable_attention_dp`) runs attention with TP 1; a dense model's DP replicas are
    /// separate servers.
    fn parallel(&self, d: &Deployment, l: &ParallelConfig) -> Result<(Vec<String>, bool, u32), String> {
        no_dcp("TensorRT-LLM", l)?;
        if !d.moe {
            let mut v = vec!["--tp_size".into(), l.tp.to_string()];
            v.extend(pipeline_flag("--pp_size", l));
            return Ok((v, false, l.dp));
        }
        if l.moe_dp > 1 {
            return Err(format!("TensorRT-LLM has no MoE data parallelism (the plan's MoE-DP{})", l.moe_dp));
        }
        if l.dp > 1 && l.tp > 1 {
            return Err(format!(
                "TensorRT-LLM's attention data parallelism runs attention with TP 1; the plan's TP{} x DP{} has no TensorRT-LLM setting",
                l.tp, l.dp
            ));
        }
        // `--tp_size` counts the devices of one pipeline stage.
        let mut v = vec!["--tp_size".into(), (l.num_devices / l.pp.max(1)).to_string()];
        v.extend(pipeline_flag("--pp_size", l));
        if l.ep > 1 {
            v.extend(["--ep_size".into(), l.ep.to_string()]);
        }
        Ok((v, l.dp > 1, 1))
    }

    /// The YAML of `--extra_llm_api_options` for one instance kind.
    fn options(&self, d: &Deployment, i: &Instance, attention_dp: bool) -> String {
        let mut y = String::new();
        if attention_dp {
            y += "enable_attention_dp: true\n";
        }
        y += "kv_cache_config:\n";
        let _ = writeln!(y, "  enable_block_reuse: {}", d.prefix_caching);
        // The share of free memory the simulation gave TensorRT-LLM's KV cache.
        if let Some((KvMemorySetting::KvCacheFreeGpuMemoryFraction, f)) = d.kv_memory {
            let _ = writeln!(y, "  free_gpu_memory_fraction: {}", f.unwrap_or(0.9));
        }
        if d.kv == KvQuant::Fp8 {
            y += "  dtype: fp8\n";
        }
        if i.mtp > 0 {
            let _ = write!(y, "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: {}\n", i.mtp);
        }
        match i.role {
            Role::Mixed => {}
            Role::Prefill => {
                // Not supported on context servers in disaggregated serving.
                y += "disable_overlap_scheduler: true\n";
                let _ = write!(
                    y,
                    "cache_transceiver_config:\n  backend: UCX\n  max_tokens_in_buffer: {}\n",
                    d.max_input.max(i.max_batched_tokens)
                );
            }
            Role::Decode => {
                let _ = write!(
                    y,
                    "cache_transceiver_config:\n  backend: UCX\n  max_tokens_in_buffer: {}\n",
                    d.max_input.max(i.max_batched_tokens)
                );
            }
        }
        y
    }

    fn serve(&self, d: &Deployment, i: &Instance, port: u32, par: &[String], yaml: &str) -> Vec<String> {
        let mut v: Vec<String> = vec!["trtllm-serve".into(), d.model.clone(), "--backend".into(), "pytorch".into()];
        v.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), port.to_string()]);
        v.extend(par.iter().cloned());
        v.extend(["--max_batch_size".into(), i.max_num_seqs.to_string(), "--max_num_tokens".into(), i.max_batched_tokens.to_string()]);
        if d.chunked_prefill {
            v.push("--enable_chunked_prefill".into());
        }
        v.extend(["--extra_llm_api_options".into(), yaml.into()]);
        v
    }

    /// Servers of one instance kind: the script and its options file.
    fn servers(&self, d: &Deployment, i: &Instance, base: u32, notes: &[String]) -> Result<(String, LaunchFile, Vec<u32>), String> {
        let (par, attention_dp, replicas) = self.parallel(d, &i.layout)?;
        let yaml = format!("{}-options.yaml", i.role.name());
        let mut n = notes.to_vec();
        let servers = i.count * replicas;
        if replicas > 1 {
            n.push(format!("DP{replicas}: TensorRT-LLM serves each replica as its own server; balance requests over their ports"));
        }
        n.push(placement_note(&Instance {
            count: servers,
            layout: ParallelConfig { num_devices: i.layout.num_devices / replicas, ..i.layout },
            ..i.clone()
        }));
        let mut s = header("TensorRT-LLM", d, &n);
        let mut ports = Vec::new();
        for j in 0..servers {
            let _ = writeln!(s, "\n# {} server {} of {servers}", i.role.name(), j + 1);
            s += &command("", &self.serve(d, i, base + j, &par, &yaml));
            // Several servers, or a P/D side, run side by side: in the background.
            let background = servers > 1 || i.role != Role::Mixed;
            s += if background { " &\n" } else { "\n" };
            ports.push(base + j);
        }
        if servers > 1 || i.role != Role::Mixed {
            s += "wait\n";
        }
        Ok((s, LaunchFile { name: yaml, contents: self.options(d, i, attention_dp) }, ports))
    }
}

impl Emitter for Trtllm {
    fn check(&self, d: &Deployment) -> Result<(), String> {
        if d.amd {
            return Err(format!(
                "TensorRT-LLM runs on NVIDIA GPUs only, and {} is an AMD GPU: emit the ROCm builds' commands with --emit vllm or --emit sglang",
                d.device
            ));
        }
        if !d.nvidia {
            return Err(format!("TensorRT-LLM runs on NVIDIA GPUs only, and {} is not one", d.device));
        }
        no_int8_kv("TensorRT-LLM (PyTorch backend)", d)?;
        if d.weights == Weights::Fp8Online {
            return Err("TensorRT-LLM does not quantize a BF16 checkpoint at load: serve an FP8 checkpoint (e.g. a ModelOpt export, \
                        given as the model) or plan BF16 weights with --quantize-linear-action DISABLED"
                .into());
        }
        Ok(())
    }

    fn emit(&self, d: &Deployment) -> Result<Vec<LaunchFile>, String> {
        let notes = vec!["TensorRT-LLM trtllm-serve (tensorrt_llm/commands/serve.py), PyTorch backend".to_string()];
        if !d.is_pd() {
            let (s, yaml, _) = self.servers(d, &d.instances[0], 8000, &notes)?;
            return Ok(vec![yaml, LaunchFile { name: "launch.sh".into(), contents: s }]);
        }
        let mut files = Vec::new();
        let mut cfg = String::from("hostname: 0.0.0.0\nport: 8000\nbackend: pytorch\n");
        for i in &d.instances {
            let (base, key, var) = if i.role == Role::Prefill {
                (8100, "context_servers", "PREFILL_HOST")
            } else {
                (8200, "generation_servers", "DECODE_HOST")
            };
            let (s, yaml, ports) = self.servers(d, i, base, &notes)?;
            let _ = write!(cfg, "{key}:\n  num_instances: {}\n  urls:\n", ports.len());
            for (j, p) in ports.iter().enumerate() {
                // The disaggregated server reads this file as is: hosts must be filled in.
                let _ = writeln!(cfg, "    - \"localhost:{p}\"  # {var}_{j}");
            }
            files.push(yaml);
            files.push(LaunchFile { name: format!("{}.sh", i.role.name()), contents: s });
        }
        files.push(LaunchFile { name: "disagg-config.yaml".into(), contents: cfg });
        let s = header(
            "TensorRT-LLM",
            d,
            &["the disaggregated server clients send requests to (port 8000); in disagg-config.yaml, replace localhost \
               with the host of each server (PREFILL_HOST_i / DECODE_HOST_i) when they run elsewhere"
                .to_string()],
        ) + "trtllm-serve disaggregated -c disagg-config.yaml\n";
        files.push(LaunchFile { name: "router.sh".into(), contents: s });
        Ok(files)
    }
}
