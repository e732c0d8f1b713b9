//! SGLang's launch commands: `sglang.launch_server` per instance and, for P/D, the router.
//!
//! Flag names as `server_args.py` documents them in `docs/advanced_features/server_arguments.md`
//! (main at 004813e): `--tp-size`, `--pp-size`, `--dp-size`, `--enable-dp-attention`, `--ep-size`,
//! `--moe-dp-size`, `--max-running-requests`, `--chunked-prefill-size`, `--kv-cache-dtype`
//! (`fp8_e4m3`), `--speculative-algorithm EAGLE` with `--speculative-num-steps`,
//! `--disable-radix-cache`, `--mem-fraction-static`, `--page-size`, `--disaggregation-mode`,
//! `--disaggregation-transfer-backend`; the router is `sglang_router.launch_router`.

use super::deployment::{Deployment, Instance, Role, Weights};
use super::script::{command, header, no_dcp, no_int8_kv, pipeline_flag, placement_note};
use super::{Emitter, LaunchFile};
use crate::cost::ParallelConfig;
use crate::hardware::runtime::KvMemorySetting;
use crate::quant::KvQuant;
use std::fmt::Write as _;

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

    fn serve(&self, d: &Deployment, i: &Instance, port: u32) -> Result<Vec<String>, String> {
        let mut v: Vec<String> = vec!["python".into(), "-m".into(), "sglang.launch_server".into(), "--model-path".into(), d.model.clone()];
        v.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), port.to_string()]);
        v.extend(self.parallel(d, &i.layout)?);
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
        }
        Ok(v)
    }
}

impl Emitter for Sglang {
    fn check(&self, d: &Deployment) -> Result<(), String> {
        no_int8_kv("SGLang", d)
    }

    fn emit(&self, d: &Deployment) -> Result<Vec<LaunchFile>, String> {
        let mut notes = vec!["SGLang server arguments as in python/sglang/srt/server_args.py (main, 2025)".to_string()];
        if d.amd {
            notes.push("AMD: the ROCm build of SGLang (AITER kernels) takes the same arguments".into());
        }
        if !d.is_pd() {
            let s = header("SGLang", d, &notes) + &command("", &self.serve(d, &d.instances[0], 30000)?) + "\n";
            return Ok(vec![LaunchFile { name: "launch.sh".into(), contents: s }]);
        }
        let mut files = Vec::new();
        let mut router: Vec<String> =
            vec!["python".into(), "-m".into(), "sglang_router.launch_router".into(), "--pd-disaggregation".into()];
        for i in &d.instances {
            let (base, var) = if i.role == Role::Prefill { (30000, "PREFILL_HOST") } else { (31000, "DECODE_HOST") };
            let mut n = notes.clone();
            n.push(placement_note(i));
            let mut s = header("SGLang", d, &n);
            for j in 0..i.count {
                let _ = writeln!(s, "\n# {} instance {} of {}", i.role.name(), j + 1, i.count);
                s += &command("", &self.serve(d, i, base + j)?);
                s += " &\n";
                router.extend([format!("--{}", i.role.name()), format!("http://${{{var}_{j}:-localhost}}:{}", base + j)]);
            }
            s += "wait\n";
            files.push(LaunchFile { name: format!("{}.sh", i.role.name()), contents: s });
        }
        router.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), "8000".into()]);
        let s = header(
            "SGLang",
            d,
            &["the router clients send requests to (port 8000); PREFILL_HOST_i / DECODE_HOST_i: where each instance runs".to_string()],
        ) + &command("", &router)
            + "\n";
        files.push(LaunchFile { name: "router.sh".into(), contents: s });
        Ok(files)
    }
}
