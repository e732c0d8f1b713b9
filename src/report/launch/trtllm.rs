//! TensorRT-LLM's launch commands: `trtllm-serve` per server with its LLM API options file
//! (a server over several nodes under `mpirun … trtllm-llmapi-launch`) and, for P/D,
//! `trtllm-serve disaggregated` with its configuration.
//!
//! Flag names as TensorRT-LLM 1.1 defines them (`profiles/engines/flags/trtllm-1.1.txt`),
//! read from `tensorrt_llm/commands/serve.py` at 4c05a74 (`trtllm-serve MODEL --backend pytorch
//! --tp_size --ep_size --max_batch_size --max_num_tokens --kv_cache_free_gpu_memory_fraction
//! --enable_chunked_prefill --extra_llm_api_options FILE`), LLM API options in that YAML
//! (`enable_attention_dp`, `kv_cache_config`, `speculative_config`, `cache_transceiver_config`)
//! and `trtllm-serve disaggregated -c FILE` (examples/disaggregated/README.md). KV blocks are
//! TensorRT-LLM's default 32 tokens (`tokens_per_block`), which the simulation uses too.

use super::deployment::{Deployment, Instance, Role, Weights};
use super::placement::{PortBases, FRONT_PORT};
use super::script::{no_dcp, no_int8_kv, pipeline_flag};
use super::{Emitter, Endpoint, LaunchFile, Process, Site};
use crate::cost::ParallelConfig;
use crate::hardware::runtime::KvMemorySetting;
use crate::plan::LaunchEngine;
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
        // The share of free memory the simulation gave TensorRT-LLM's KV cache (this block
        // replaces the command line's kv_cache_config, so it carries the fraction too).
        let _ = writeln!(y, "  free_gpu_memory_fraction: {}", self.free_fraction(d));
        if d.kv == KvQuant::Fp8 {
            y += "  dtype: fp8\n";
        }
        if d.mxfp4_moe_triton {
            // The MoE kernels the plan priced: OpenAI's Triton MXFP4 kernels (TensorRT-LLM's
            // TRITON backend, which its gpt-oss guides name for Hopper; releases before it
            // became the Hopper default run CUTLASS unless told).
            y += "moe_config:\n  backend: TRITON\n";
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

    /// The share of free memory the simulation gave TensorRT-LLM's KV cache: the engine
    /// profile's setting, else TensorRT-LLM's default 0.9.
    fn free_fraction(&self, d: &Deployment) -> f64 {
        match d.kv_memory {
            Some((KvMemorySetting::KvCacheFreeGpuMemoryFraction, f)) => f.unwrap_or(0.9),
            _ => 0.9,
        }
    }

    fn options_file(i: &Instance) -> String {
        format!("{}-options.yaml", i.role.name())
    }

    fn serve(&self, d: &Deployment, i: &Instance, port: u32) -> Result<Vec<String>, String> {
        let (par, _, _) = self.parallel(d, &i.layout)?;
        let mut v: Vec<String> = vec![d.model.clone(), "--backend".into(), "pytorch".into()];
        v.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), port.to_string()]);
        v.extend(par);
        v.extend(["--max_batch_size".into(), i.max_num_seqs.to_string(), "--max_num_tokens".into(), i.max_batched_tokens.to_string()]);
        v.extend(["--kv_cache_free_gpu_memory_fraction".into(), self.free_fraction(d).to_string()]);
        if d.chunked_prefill {
            v.push("--enable_chunked_prefill".into());
        }
        v.extend(["--extra_llm_api_options".into(), Self::options_file(i)]);
        Ok(v)
    }
}

impl Emitter for Trtllm {
    fn title(&self) -> &'static str {
        "TensorRT-LLM"
    }

    fn engine(&self) -> LaunchEngine {
        LaunchEngine::Trtllm
    }

    fn notes(&self, _d: &Deployment) -> Vec<String> {
        vec!["TensorRT-LLM 1.1 trtllm-serve, PyTorch backend: every flag is one of TensorRT-LLM 1.1's (profiles/engines/flags/trtllm-1.1.txt)"
            .to_string()]
    }

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

    fn ports(&self) -> PortBases {
        PortBases { http: 8100, aux: 0, dist: 0 }
    }

    /// A dense model's data-parallel replicas are separate servers.
    fn shape(&self, d: &Deployment, i: &Instance) -> Result<(u32, u32), String> {
        let (_, _, replicas) = self.parallel(d, &i.layout)?;
        Ok((i.count * replicas, i.layout.num_devices / replicas))
    }

    fn files(&self, d: &Deployment) -> Result<Vec<LaunchFile>, String> {
        d.instances
            .iter()
            .map(|i| {
                let (_, attention_dp, _) = self.parallel(d, &i.layout)?;
                Ok(LaunchFile { name: Self::options_file(i), contents: self.options(d, i, attention_dp) })
            })
            .collect()
    }

    fn process(&self, d: &Deployment, i: &Instance, site: &Site) -> Result<Option<Process>, String> {
        let s = site.server;
        let mut p = Process::new("trtllm-serve", self.serve(d, i, s.port)?);
        if s.nodes > 1 {
            if site.k8s {
                return Err("a TensorRT-LLM server over several nodes starts under mpirun; use --emit-format shell".into());
            }
            if !site.rank.is_leader() {
                return Ok(None);
            }
            let per_node = s.devices / s.nodes;
            let hosts: Vec<String> = site.hosts.iter().map(|h| format!("{h}:{per_node}")).collect();
            p.launcher =
                vec!["mpirun".into(), "-H".into(), hosts.join(","), "-np".into(), s.devices.to_string(), "trtllm-llmapi-launch".into()];
        }
        Ok(Some(p))
    }

    fn router(&self, _d: &Deployment, servers: &[Endpoint]) -> (String, Process) {
        // Written when the router starts, so that the node addresses are filled in.
        let mut cfg = format!("cat > disagg-config.yaml <<EOF\nhostname: 0.0.0.0\nport: {FRONT_PORT}\nbackend: pytorch\n");
        for (role, key) in [(Role::Prefill, "context_servers"), (Role::Decode, "generation_servers")] {
            let side: Vec<&Endpoint> = servers.iter().filter(|e| e.role == role).collect();
            let _ = write!(cfg, "{key}:\n  num_instances: {}\n  urls:\n", side.len());
            for e in side {
                let _ = writeln!(cfg, "    - \"{}:{}\"", e.host, e.port);
            }
        }
        cfg += "EOF\n";
        (cfg, Process::new("trtllm-serve disaggregated", vec!["-c".into(), "disagg-config.yaml".into()]))
    }
}
