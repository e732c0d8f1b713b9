//! SGLang's launch commands: `sglang.launch_server` per instance (over several nodes with
//! `--nnodes`, `--node-rank`, `--dist-init-addr`) and, for P/D, the router.
//!
//! Flag names as SGLang 0.5 defines them (`profiles/engines/flags/sglang-0.5.txt`), from
//! `server_args.py` as `docs/advanced_features/server_arguments.md` documents it (main at
//! 004813e): `--tp-size`, `--dp-size`, `--enable-dp-attention`, `--ep-size`, `--moe-dp-size`,
//! `--max-running-requests`, `--chunked-prefill-size`, `--kv-cache-dtype` (`fp8_e4m3`),
//! `--speculative-algorithm EAGLE` with `--speculative-num-steps`, `--disable-radix-cache`,
//! `--mem-fraction-static`, `--page-size`, `--disaggregation-mode`,
//! `--disaggregation-transfer-backend`, `--disaggregation-bootstrap-port`; the router is
//! `sglang_router.launch_router` (`--prefill URL BOOTSTRAP_PORT`, `--decode URL`).

use super::deployment::{Deployment, Instance, Role, Weights};
use super::placement::{PortBases, FRONT_PORT};
use super::script::{no_dcp, no_int8_kv, pipeline_flag};
use super::{Emitter, Endpoint, Process, Site};
use crate::cost::ParallelConfig;
use crate::hardware::runtime::KvMemorySetting;
use crate::plan::LaunchEngine;
use crate::quant::KvQuant;

/// SGLang's [`Emitter`].
pub struct Sglang;

impl Sglang {
    /// SGLang's `--tp-size` counts every device of an instance. A dense model's DP replicas
    /// are `--dp-size` copies of a TP group; an MoE model with DP runs attention data-parallel
    /// (`--enable-dp-attention`) and its experts over the whole instance.
    fn parallel(&self, d: &Deployment, l: &ParallelConfig) -> Result<Vec<String>, String> {
        no_dcp("SGLang", l)?;
        let mut v = Vec::new();
        if !d.moe {
            v.extend(["--tp-size".into(), l.tp.to_string()]);
            v.extend(pipeline_flag("--pp-size", l));
            if l.dp > 1 {
                v.extend(["--dp-size".into(), l.dp.to_string()]);
            }
            return Ok(v);
        }
        // `--tp-size` counts the devices of one pipeline stage.
        v.extend(["--tp-size".into(), (l.num_devices / l.pp.max(1)).to_string()]);
        v.extend(pipeline_flag("--pp-size", l));
        if l.dp > 1 {
            v.extend(["--dp-size".into(), l.dp.to_string(), "--enable-dp-attention".into()]);
        }
        if l.ep > 1 {
            v.extend(["--ep-size".into(), l.ep.to_string()]);
        }
        if l.moe_dp > 1 {
            v.extend(["--moe-dp-size".into(), l.moe_dp.to_string()]);
        }
        Ok(v)
    }

    fn serve(&self, d: &Deployment, i: &Instance, site: &Site) -> Result<Vec<String>, String> {
        let s = site.server;
        let mut v: Vec<String> = vec!["--model-path".into(), d.model.clone()];
        v.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), s.port.to_string()]);
        v.extend(self.parallel(d, &i.layout)?);
        if s.nodes > 1 {
            v.extend(["--nnodes".into(), s.nodes.to_string(), "--node-rank".into(), site.rank.word()]);
            v.extend(["--dist-init-addr".into(), format!("{}:{}", site.leader, s.dist_port)]);
        }
        // The plan's limits are per DP replica. With DP attention SGLang divides
        // --max-running-requests and --chunked-prefill-size by --dp-size; plain DP replicas
        // each take the values as given.
        let dp_attention = d.moe && i.layout.dp > 1;
        let scale = if dp_attention { i.layout.dp as u64 } else { 1 };
        v.extend(["--max-running-requests".into(), (i.max_num_seqs * scale).to_string()]);
        let chunk = if d.chunked_prefill { (i.max_batched_tokens * scale).to_string() } else { "-1".into() };
        v.extend(["--chunked-prefill-size".into(), chunk, "--max-prefill-tokens".into(), i.max_batched_tokens.to_string()]);
        // The static share the simulation sized SGLang's KV pool by: SGLang's own default is
        // left to SGLang (it computes the same), else the plan's reserve.
        match d.kv_memory {
            Some((KvMemorySetting::MemFractionStatic, None)) => {}
            Some((KvMemorySetting::MemFractionStatic, Some(f))) => v.extend(["--mem-fraction-static".into(), format!("{f:.2}")]),
            _ => v.extend(["--mem-fraction-static".into(), format!("{:.2}", d.memory_fraction)]),
        }
        v.extend(["--page-size".into(), d.block_size.to_string()]);
        if d.weights == Weights::Fp8Online {
            v.extend(["--quantization".into(), "fp8".into()]);
        }
        if d.kv == KvQuant::Fp8 {
            v.extend(["--kv-cache-dtype".into(), "fp8_e4m3".into()]);
        }
        if i.mtp > 0 {
            v.extend(["--speculative-algorithm".into(), "EAGLE".into(), "--speculative-num-steps".into(), i.mtp.to_string()]);
            v.extend(["--speculative-eagle-topk".into(), "1".into(), "--speculative-num-draft-tokens".into(), (i.mtp + 1).to_string()]);
        }
        // The radix cache is on by default; the plan priced no hits when it has none.
        if !d.prefix_caching {
            v.push("--disable-radix-cache".into());
        }
        if d.ascend {
            v.extend(["--device".into(), "npu".into(), "--attention-backend".into(), "ascend".into()]);
        }
        if i.role != Role::Mixed {
            let backend = if d.ascend { "ascend" } else { "mooncake" };
            v.extend(["--disaggregation-mode".into(), i.role.name().into(), "--disaggregation-transfer-backend".into(), backend.into()]);
            if i.role == Role::Prefill {
                // Its own bootstrap port (SGLang's default 8998 would be shared on a node).
                v.extend(["--disaggregation-bootstrap-port".into(), s.aux_port.to_string()]);
            }
        }
        Ok(v)
    }
}

impl Emitter for Sglang {
    fn title(&self) -> &'static str {
        "SGLang"
    }

    fn engine(&self) -> LaunchEngine {
        LaunchEngine::Sglang
    }

    fn notes(&self, d: &Deployment) -> Vec<String> {
        let mut notes = vec!["SGLang 0.5: every flag is one of SGLang 0.5's (profiles/engines/flags/sglang-0.5.txt)".to_string()];
        if d.amd {
            notes.push("AMD: the ROCm build of SGLang (AITER kernels) takes the same arguments".into());
        }
        notes
    }

    fn check(&self, d: &Deployment) -> Result<(), String> {
        no_int8_kv("SGLang", d)
    }

    fn ports(&self) -> PortBases {
        PortBases { http: 30000, aux: 8998, dist: 20000 }
    }

    fn process(&self, d: &Deployment, i: &Instance, site: &Site) -> Result<Option<Process>, String> {
        Ok(Some(Process::new("python -m sglang.launch_server", self.serve(d, i, site)?)))
    }

    fn router(&self, _d: &Deployment, servers: &[Endpoint]) -> (String, Process) {
        let mut args: Vec<String> = vec!["--pd-disaggregation".into()];
        for e in servers {
            args.extend([format!("--{}", e.role.name()), format!("http://{}:{}", e.host, e.port)]);
            if e.role == Role::Prefill {
                args.push(e.aux_port.to_string());
            }
        }
        args.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), FRONT_PORT.to_string()]);
        (String::new(), Process::new("python -m sglang_router.launch_router", args))
    }
}
