//! vLLM's launch commands: `vllm serve` per instance (a data-parallel instance over several
//! nodes as a head and `--headless` members) and, for P/D, the NixlConnector proxy.
//!
//! Flag names as vLLM 0.11 defines them (`profiles/engines/flags/vllm-0.11.txt`, read from
//! `vllm/engine/arg_utils.py` at 99d7eb5), the `mtp` method of `vllm/config/speculative.py`
//! (main at 002e77c), the multi-node data-parallel guide (`--data-parallel-size-local`,
//! `--data-parallel-start-rank`, `--data-parallel-address`, `--headless`) and the
//! NixlConnector guide (`kv_role: kv_both`, `VLLM_NIXL_SIDE_CHANNEL_HOST/PORT`,
//! `toy_proxy_server.py`).

use super::deployment::{Deployment, Instance, Role, Weights};
use super::placement::{PortBases, FRONT_PORT};
use super::script::{no_int8_kv, pipeline_flag, quote};
use super::{Emitter, Endpoint, Process, Site};
use crate::cost::ParallelConfig;
use crate::hardware::runtime::KvMemorySetting;
use crate::plan::LaunchEngine;
use crate::quant::KvQuant;

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

    /// Data parallelism over the server's nodes: each node runs `local` replicas, the first
    /// node the API server, the others `--headless` from their first rank.
    fn nodes(&self, l: &ParallelConfig, site: &Site) -> Result<Vec<String>, String> {
        let s = site.server;
        let mut v = Vec::new();
        if s.nodes == 1 {
            if l.dp > 1 {
                // Its own RPC port, so that several instances can share a node.
                v.extend(["--data-parallel-rpc-port".into(), s.dist_port.to_string()]);
            }
            return Ok(v);
        }
        let per_node = s.devices / s.nodes;
        if l.tp > per_node || !per_node.is_multiple_of(l.tp) {
            return Err(format!(
                "vLLM 0.11 runs a tensor-parallel group within one node (multi-node TP needs a Ray cluster); the plan's TP{} does not fit the {per_node} GPUs of a node",
                l.tp
            ));
        }
        let local = per_node / l.tp;
        v.extend(["--data-parallel-size-local".into(), local.to_string(), "--data-parallel-address".into(), site.leader.clone()]);
        v.extend(["--data-parallel-rpc-port".into(), s.dist_port.to_string()]);
        if !site.rank.is_leader() {
            v.extend(["--headless".into(), "--data-parallel-start-rank".into(), site.rank.times(local)]);
        }
        Ok(v)
    }

    fn serve(&self, d: &Deployment, i: &Instance, site: &Site) -> Result<Vec<String>, String> {
        let mut v: Vec<String> = vec![d.model.clone(), "--port".into(), site.server.port.to_string()];
        v.extend(self.parallel(d, &i.layout)?);
        v.extend(self.nodes(&i.layout, site)?);
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
        // vLLM V1 caches prefixes by default; the plan priced hits only where it has some.
        v.push(if d.prefix_caching { "--enable-prefix-caching" } else { "--no-enable-prefix-caching" }.into());
        if i.role != Role::Mixed {
            v.extend(["--kv-transfer-config".into(), quote("{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}")]);
        }
        Ok(v)
    }
}

impl Emitter for Vllm {
    fn title(&self) -> &'static str {
        "vLLM"
    }

    fn engine(&self) -> LaunchEngine {
        LaunchEngine::Vllm
    }

    fn notes(&self, d: &Deployment) -> Vec<String> {
        let mut notes = vec!["vLLM 0.11 or newer: every flag is one of vLLM 0.11's (profiles/engines/flags/vllm-0.11.txt)".to_string()];
        if d.ascend {
            notes.push("Ascend: vLLM with the vllm-ascend plugin takes the same flags".into());
        }
        if d.amd {
            notes.push("AMD: the ROCm build of vLLM (AITER kernels) takes the same flags".into());
        }
        if d.is_pd() {
            notes.push(
                "KV hand-off: NixlConnector, each instance on its own side-channel ports (VLLM_NIXL_SIDE_CHANNEL_PORT and up)".into(),
            );
        }
        notes
    }

    fn check(&self, d: &Deployment) -> Result<(), String> {
        if d.nvidia && d.block_size > 32 && d.block_size != 64 {
            return Err(format!(
                "vLLM on CUDA takes KV blocks of at most 32 tokens (64 for MLA models), and the plan simulated {}; plan with --kv-block-size 16",
                d.block_size
            ));
        }
        no_int8_kv("vLLM", d)
    }

    fn ports(&self) -> PortBases {
        PortBases { http: 8100, aux: 5600, dist: 13345 }
    }

    fn process(&self, d: &Deployment, i: &Instance, site: &Site) -> Result<Option<Process>, String> {
        let mut p = Process::new("vllm serve", self.serve(d, i, site)?);
        if d.mxfp4_moe_mxfp8 {
            // The MoE kernel the plan priced: FlashInfer's MXFP4 x MXFP8 on Blackwell; without
            // the switch vLLM runs its MXFP4 x BF16 kernel (about 3x slower on long prefills).
            p.env.push(("VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8".into(), "1".into()));
        }
        if i.role != Role::Mixed {
            // The side channel other instances pull KV from: this node's address, this
            // instance's own ports.
            let host = if site.k8s { "${POD_IP}".to_string() } else { site.host.clone() };
            p.env.push(("VLLM_NIXL_SIDE_CHANNEL_HOST".into(), host));
            p.env.push(("VLLM_NIXL_SIDE_CHANNEL_PORT".into(), site.server.aux_port.to_string()));
        }
        Ok(Some(p))
    }

    fn router(&self, _d: &Deployment, servers: &[Endpoint]) -> (String, Process) {
        let mut args: Vec<String> = vec!["--port".into(), FRONT_PORT.to_string()];
        for (role, hosts, ports) in
            [(Role::Prefill, "--prefiller-hosts", "--prefiller-ports"), (Role::Decode, "--decoder-hosts", "--decoder-ports")]
        {
            let side: Vec<&Endpoint> = servers.iter().filter(|e| e.role == role).collect();
            args.push(hosts.into());
            args.extend(side.iter().map(|e| e.host.clone()));
            args.push(ports.into());
            args.extend(side.iter().map(|e| e.port.to_string()));
        }
        let pre = "# run from a vLLM source checkout (the proxy is vLLM's NixlConnector example)\n".to_string();
        (pre, Process::new("python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py", args))
    }
}
