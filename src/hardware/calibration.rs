//! Serving-engine execution profiles and their per-device calibrations: what a real serving
//! engine adds to the roofline price of a step, and how far its kernels fall short of (or
//! exceed) the device profile's efficiencies.
//!
//! An [`EngineProfile`] is one engine's data (`profiles/engines/<engine>.yaml`, embedded; a
//! `--calibration FILE` replaces an engine's profile): whether the engine runs a fused graph
//! (torch.compile + CUDA graphs, TensorRT engines: fused element-wise kernels and grouped MoE
//! GEMMs), the host-side overheads it adds when no device entry says otherwise, and one
//! [`DeviceCalibration`] per device the measured benchmarks covered, written by
//! `throughput-optimizer calibrate --fit`.
//!
//! The overheads are host work the roofline cannot see: a per-step part (scheduling, input
//! preparation, launching the graph), a per-running-sequence part (sampling, block tables,
//! output processing), and the front end's service times (the API server in front of the
//! engine: per request and per prompt token on the way in, per output token on the way out).
//! Beside them a profile states what no fit changes (`super::runtime`): the CUDA graphs the
//! engine captures and the setting that sizes its KV pool. [`Effective`] is what one engine on
//! one device amounts to, and it is the only thing the cost model and the engines read.

use super::runtime::{BenchmarkClient, BorrowedMoeKernels, CudaGraphProfile, KvMemory};
pub use super::version::EngineVersion;
use super::{check_field, DeviceProfile};
use crate::yaml;
use serde::{Deserialize, Serialize};

/// Host-side overheads of a serving engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overheads {
    /// Per engine step, µs: the gap the device waits on the host whatever the scheduling (the
    /// graph's launch, the hand-over of the step's inputs and sampled tokens), never hidden.
    pub step_overhead_us: f64,
    /// Per engine step, µs: the host's own work for the step (the scheduler's pass, building
    /// the step's input tensors). A synchronous engine does it between two steps, so it adds to
    /// each; an overlapped one does it for step n + 1 while the device runs step n, so only what
    /// exceeds the device time shows (together with the per-sequence work).
    #[serde(default)]
    pub step_host_us: f64,
    /// Per running sequence per step, µs, whatever the model (the engine's host work for the
    /// request: scheduling, input preparation, output processing); hidden like
    /// `step_host_us` under overlapped scheduling.
    pub seq_overhead_us: f64,
    /// The front end's service time per request on its way in, µs: HTTP, request validation,
    /// the tokenizer call, handing the request to the engine. Absent (here and in `defaults`):
    /// no front end, requests reach the engine when they arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend_request_us: Option<f64>,
    /// The front end's service time per prompt token (tokenization), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend_input_token_us: Option<f64>,
    /// The front end's service time per output token (detokenization, streaming), µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend_output_token_us: Option<f64>,
}

/// The service times of an engine's front end, seconds (see `sim::Frontend`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrontendCosts {
    pub request_s: f64,
    pub input_token_s: f64,
    pub output_token_s: f64,
}

impl Overheads {
    /// The front end these overheads give, each field falling back to `defaults`' (`None`
    /// when neither sets the per-request time).
    fn frontend(&self, defaults: &Overheads) -> Option<FrontendCosts> {
        let request = self.frontend_request_us.or(defaults.frontend_request_us)?;
        let input = self.frontend_input_token_us.or(defaults.frontend_input_token_us).unwrap_or(0.0);
        let output = self.frontend_output_token_us.or(defaults.frontend_output_token_us).unwrap_or(0.0);
        Some(FrontendCosts { request_s: request * 1e-6, input_token_s: input * 1e-6, output_token_s: output * 1e-6 })
    }
}

/// How one fit went, kept in the file so a user can see what a calibration rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitRecord {
    /// Measured runs the fit used.
    pub runs: u32,
    /// Models of those runs.
    pub models: Vec<String>,
    /// Median |error| of TTFT and TPOT on those runs before and after the fit, percent.
    pub ttft_median_pct: [f64; 2],
    pub tpot_median_pct: [f64; 2],
    /// Smallest and largest concurrency per data-parallel replica of those runs (absent in a
    /// fit recorded before it was kept): a plan running more sequences per replica is
    /// extrapolated, and says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<[u64; 2]>,
    /// Smallest and largest context (prompt + output tokens) of those runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<[u64; 2]>,
}

/// The fitted costs of one engine on one device: host work only. What the device's kernels
/// can do (bandwidth share, matrix efficiency, grouped GEMMs, collectives) is the device's,
/// from its profile and its measured kernel tables, shared by every engine on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceCalibration {
    /// Device profile name (`H100_SXM`).
    pub device: String,
    #[serde(flatten)]
    pub overheads: Overheads,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitRecord>,
}

/// How an engine multiplies weights stored as MXFP4 (gpt-oss's routed experts): the kernels
/// decide the tensor-core data type, so the rate depends on the engine and the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mxfp4Kernel {
    /// MXFP4 × MXFP4 at the device's FP4 peak (activations quantized on the fly): the
    /// original tool's convention, kept by the `msmodeling` profile.
    #[default]
    Native,
    /// MXFP4 weights dequantized in the kernel, bf16 activations, bf16 tensor cores (vLLM's
    /// Triton and FlashInfer MXFP4-BF16 MoE kernels; TensorRT-LLM on Hopper).
    Bf16,
    /// MXFP8 activations × MXFP4 weights on tensor cores that take FP4 operands at the FP8
    /// rate (TensorRT-LLM's CUTLASS/TRTLLM MoE on Blackwell; vLLM's FlashInfer MXFP4 × MXFP8
    /// MoE, which `VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1` selects); bf16 on devices without FP4
    /// tensor cores, as both engines run gpt-oss on Hopper.
    Mxfp8,
}

/// One serving engine's execution profile and calibrations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineProfile {
    /// `vllm`, `sglang`, `trtllm` or `msmodeling`.
    pub engine: String,
    /// Where the figures come from.
    #[serde(default)]
    pub description: String,
    /// The engine runs fused element-wise kernels and grouped MoE GEMMs (what `--compile`
    /// prices) whatever `--compile` says.
    pub fused_graph: bool,
    /// Prefill attention skips the causally masked (query, key) pairs, as FlashAttention-style
    /// kernels do (what `--causal-attention` prices) whatever `--causal-attention` says.
    #[serde(default)]
    pub causal_attention: bool,
    /// How the engine's kernels multiply MXFP4 weights.
    #[serde(default, skip_serializing_if = "is_native")]
    pub mxfp4_kernel: Mxfp4Kernel,
    /// Another engine's kernels that run the MXFP4 experts on devices without FP4 tensor
    /// cores (absent: the engine's own tables price them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mxfp4_bf16_moe: Option<BorrowedMoeKernels>,
    /// Under tensor parallelism (no attention DP) the MoE block keeps every token on every TP
    /// rank and sums the experts with one all-reduce, as vLLM's fused MoE layer
    /// (`reduce_results`), SGLang's and TensorRT-LLM's (the all-reduce fused with the next
    /// norm) do; absent: the original's sliced tokens with three collectives per MoE layer.
    #[serde(default)]
    pub moe_all_reduce: bool,
    /// The first engine version whose scheduler plans the next step while the current one
    /// runs (vLLM's async scheduling, SGLang's overlap scheduler, TensorRT-LLM's overlap
    /// scheduler, each on by default from that version); absent: never. A request that reaches
    /// an overlapping engine during a step misses the next step, already planned, and enters
    /// the one after; a step takes the larger of its device and host times, not their sum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap_scheduling_from: Option<EngineVersion>,
    /// The CUDA graphs the engine captures by default (absent: every step priced as the cost
    /// model prices it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graphs: Option<CudaGraphProfile>,
    /// The setting that sizes the engine's KV pool (absent: `--reserved-memory-gb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_memory: Option<KvMemory>,
    /// What the engine's own benchmark client does to output lengths (absent: nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benchmark_client: Option<BenchmarkClient>,
    /// Overheads on devices without an entry of their own.
    pub defaults: Overheads,
    #[serde(default)]
    pub devices: Vec<DeviceCalibration>,
    /// The `--calibration` file the profile was read from (`None`: built in).
    #[serde(skip)]
    pub file: Option<String>,
}

/// What one engine on one device amounts to for the cost model and the engines.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    /// The device profile with the calibrated efficiencies and the per-step overhead.
    pub device: DeviceProfile,
    pub fused_graph: bool,
    pub causal_attention: bool,
    pub mxfp4_kernel: Mxfp4Kernel,
    /// One all-reduce per MoE layer under TP (see [`EngineProfile::moe_all_reduce`]).
    pub moe_all_reduce: bool,
    /// The engine plans each step while the previous one runs (see
    /// [`EngineProfile::overlap_scheduling_from`]).
    pub overlap_scheduling: bool,
    /// The host's own work per step, seconds (see [`Overheads::step_host_us`]); the gap the
    /// device waits is `device.host_overhead_us`.
    pub step_host_s: f64,
    /// Per running sequence per step, seconds, whatever the model.
    pub per_seq_s: f64,
    /// The engine's front end (`None`: requests reach the engine when they arrive).
    pub frontend: Option<FrontendCosts>,
    /// The CUDA graphs it captures (see [`EngineProfile::cuda_graphs`]).
    pub cuda_graphs: Option<CudaGraphProfile>,
    /// What sizes its KV pool (see [`EngineProfile::kv_memory`]).
    pub kv_memory: Option<KvMemory>,
    pub engine: String,
    /// Whether a device entry (a fitted calibration) applies.
    pub calibrated: bool,
    /// Which profile and calibration apply, for the report.
    pub source: String,
    /// Measured kernel tables of the device under this engine (`None`: the roofline alone).
    pub kernels: Option<super::kernels::KernelRef>,
    /// The engine whose measured MXFP4 MoE tables price the routed experts instead of this
    /// engine's (see [`EngineProfile::mxfp4_bf16_moe`]); `None`: the engine's own.
    pub mxfp4_moe_tables_from: Option<String>,
}

impl Effective {
    /// What the report says of the execution profile: where it comes from and what it adds.
    pub fn describe(&self) -> String {
        let adds = self.per_seq_s > 0.0
            || self.step_host_s > 0.0
            || self.frontend.is_some()
            || self.fused_graph
            || self.causal_attention
            || self.moe_all_reduce;
        if !adds && !self.calibrated {
            return format!("{}: the device profile as it is (no engine overheads, no calibration)", self.engine);
        }
        let mut kinds = Vec::new();
        if self.fused_graph {
            kinds.push("fused graph");
        }
        if self.causal_attention {
            kinds.push("causal attention");
        }
        if self.moe_all_reduce {
            kinds.push("one all-reduce per MoE layer");
        }
        let kinds = if kinds.is_empty() { String::new() } else { format!("{}; ", kinds.join(", ")) };
        let admits = if self.overlap_scheduling { "; overlapped scheduling" } else { "" };
        let us = |s: f64| crate::hardware::trim_float(s * 1e6);
        // The host's work (hidden behind the device when scheduling overlaps) beside the gap.
        let per_seq = if self.step_host_s > 0.0 {
            format!("host work {} µs per step + {} µs per sequence", us(self.step_host_s), us(self.per_seq_s))
        } else {
            format!("{} µs per sequence", us(self.per_seq_s))
        };
        let frontend = match self.frontend {
            Some(f) => format!(
                "front end {} µs per request + {} µs per prompt token + {} µs per output token",
                us(f.request_s),
                us(f.input_token_s),
                us(f.output_token_s)
            ),
            None => "no front end".to_string(),
        };
        // A device whose clocks under its power limit were measured is priced at them.
        let clocks = if self.device.power_limit.is_some() { "; clocks follow the load (measured power limit)" } else { "" };
        format!(
            "{}: {kinds}{} µs per step, {per_seq}; {frontend}; HBM efficiency {}{clocks}{admits}",
            self.source,
            crate::hardware::trim_float(self.device.host_overhead_us),
            crate::hardware::trim_float(self.device.memory_efficiency),
        )
    }
}

/// Built-in engine profiles, embedded from `profiles/engines/`.
const BUILTIN: &[(&str, &str)] = &[
    ("vllm.yaml", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/vllm.yaml"))),
    ("sglang.yaml", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/sglang.yaml"))),
    ("trtllm.yaml", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/trtllm.yaml"))),
    ("msmodeling.yaml", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/msmodeling.yaml"))),
];

/// Engine names a profile may carry.
pub const ENGINES: [&str; 4] = ["vllm", "sglang", "trtllm", "msmodeling"];

fn is_native(k: &Mxfp4Kernel) -> bool {
    *k == Mxfp4Kernel::Native
}

/// Bounds a serving engine's host costs stay within (what a fit may reach and a profile may
/// say): a step's fixed host time within 4.5 ms, so that with a small batch's per-sequence work
/// a step's whole host time stays within the 5 ms no engine needs on a current host (vLLM's
/// whole CPU step on a busy H100 is about 1 ms); a sequence's per-step host work within 100 µs
/// (vLLM's Python spends tens of µs per running request a step: scheduling, input preparation,
/// output processing); the front end's work within 50 ms a request (HTTP,
/// tokenisation) and 1 ms a token.
pub const MAX_STEP_OVERHEAD_US: f64 = 4_500.0;
pub const MAX_SEQ_OVERHEAD_US: f64 = 100.0;
pub const MAX_FRONTEND_REQUEST_US: f64 = 50_000.0;
pub const MAX_FRONTEND_TOKEN_US: f64 = 1_000.0;

impl Overheads {
    fn validate(&self, at: &str) -> Result<(), String> {
        check_field(&format!("{at}step_overhead_us"), self.step_overhead_us, 0.0, MAX_STEP_OVERHEAD_US)?;
        check_field(&format!("{at}seq_overhead_us"), self.seq_overhead_us, 0.0, MAX_SEQ_OVERHEAD_US)?;
        check_field(&format!("{at}step_host_us"), self.step_host_us, 0.0, MAX_STEP_OVERHEAD_US)?;
        // The two per-step parts together are the step's fixed host time.
        check_field(&format!("{at}step_overhead_us + step_host_us"), self.step_overhead_us + self.step_host_us, 0.0, MAX_STEP_OVERHEAD_US)?;
        let optional = |name: &str, v: Option<f64>, hi: f64| v.map_or(Ok(()), |v| check_field(&format!("{at}{name}"), v, 0.0, hi));
        optional("frontend_request_us", self.frontend_request_us, MAX_FRONTEND_REQUEST_US)?;
        optional("frontend_input_token_us", self.frontend_input_token_us, MAX_FRONTEND_TOKEN_US)?;
        optional("frontend_output_token_us", self.frontend_output_token_us, MAX_FRONTEND_TOKEN_US)
    }
}

impl DeviceCalibration {
    fn validate(&self, i: usize) -> Result<(), String> {
        let at = format!("devices[{i}].");
        if self.device.trim().is_empty() {
            return Err(format!("field `{at}device` must not be empty"));
        }
        self.overheads.validate(&at)
    }

    /// `device` with this calibration's per-step overhead.
    pub fn apply(&self, device: &DeviceProfile) -> DeviceProfile {
        let mut d = device.clone();
        d.host_overhead_us = self.overheads.step_overhead_us;
        d
    }
}

/// Fields a profile once had, with what took their place: a file that still sets one is
/// refused by name rather than read as if it still priced something.
const RETIRED_FIELDS: [(&str, &str); 3] = [
    (
        "seq_layer_overhead_us",
        "the per-sequence host time per decoder layer was retired (issue 22); the engine's host work for a running sequence is `seq_overhead_us`, per step, whatever the model's depth",
    ),
    ("admissions_per_step", "no engine limits the requests it admits per step; remove it"),
    ("request_overhead_ms", "the per-request time is the front end's `frontend_request_us`"),
];

/// `message` (a parse error) with the reason and the replacement when it names a retired field.
fn explain_retired(message: String) -> String {
    match RETIRED_FIELDS.iter().find(|(name, _)| message.contains(&format!("unknown field `{name}`"))) {
        Some((name, instead)) => format!("field `{name}` is no longer read: {instead} ({message})"),
        None => message,
    }
}

impl EngineProfile {
    /// Parse and check a profile; the message names the field and the allowed range.
    pub fn parse(text: &str) -> Result<Self, String> {
        let p: EngineProfile = yaml::from_str(text).map_err(|e| explain_retired(e.to_string()))?;
        if !ENGINES.contains(&p.engine.as_str()) {
            return Err(format!("field `engine` is `{}`; valid engines: {}", p.engine, ENGINES.join(", ")));
        }
        p.defaults.validate("defaults.")?;
        if let Some(g) = &p.cuda_graphs {
            g.validate()?;
        }
        if let Some(m) = &p.kv_memory {
            m.validate()?;
        }
        if let Some(c) = &p.benchmark_client {
            c.validate()?;
        }
        if let Some(b) = &p.mxfp4_bf16_moe {
            b.validate(&p.engine)?;
        }
        for (i, d) in p.devices.iter().enumerate() {
            d.validate(i)?;
            if p.devices[..i].iter().any(|o| o.device == d.device) {
                return Err(format!("field `devices[{i}].device`: `{}` appears twice", d.device));
            }
        }
        Ok(p)
    }

    /// The built-in profiles. They are part of the binary, so a broken one is a build bug.
    pub fn builtin() -> Vec<EngineProfile> {
        BUILTIN.iter().map(|(file, text)| Self::parse(text).unwrap_or_else(|e| panic!("profiles/engines/{file}: {e}"))).collect()
    }

    /// The entry for `device`, if the fit covered it.
    pub fn device(&self, name: &str) -> Option<&DeviceCalibration> {
        self.devices.iter().find(|d| d.device == name)
    }

    /// What release `version` of this engine (`None`: the current release) amounts to on
    /// `device`; `calibrated` = false keeps the profile's efficiencies and the engine's default
    /// overheads. The release decides overlapped scheduling: from `overlap_scheduling_from` on.
    pub fn effective(&self, device: &DeviceProfile, calibrated: bool, version: Option<EngineVersion>) -> Effective {
        let entry = if calibrated { self.device(&device.name) } else { None };
        let (dev, o, source) = match entry {
            Some(c) => {
                // The fit's own residual travels with it: a user reads how well this entry
                // reproduced its training runs beside the fact that it was fitted.
                let fit = c
                    .fit
                    .as_ref()
                    .map(|f| {
                        format!(
                            ", fitted on {} measured runs (median error after the fit: TTFT {:.1} %, TPOT {:.1} %)",
                            f.runs, f.ttft_median_pct[1], f.tpot_median_pct[1]
                        )
                    })
                    .unwrap_or_default();
                (c.apply(device), c.overheads, format!("{} × {} calibration{fit}", self.engine, device.name))
            }
            None => {
                let mut d = device.clone();
                // A profile without a per-step overhead (msmodeling) keeps the device's own.
                if self.defaults.step_overhead_us > 0.0 {
                    d.host_overhead_us = self.defaults.step_overhead_us;
                }
                let source = if calibrated {
                    format!("{} defaults, no calibration for {}", self.engine, device.name)
                } else {
                    format!("{} defaults, calibration off", self.engine)
                };
                (d, self.defaults, source)
            }
        };
        let source = match &self.file {
            Some(f) => format!("{source} (from {f})"),
            None => source,
        };
        let source = match version {
            Some(v) => format!("{source} (release {v})"),
            None => source,
        };
        Effective {
            device: dev,
            fused_graph: self.fused_graph,
            causal_attention: self.causal_attention,
            mxfp4_kernel: self.mxfp4_kernel,
            moe_all_reduce: self.moe_all_reduce,
            overlap_scheduling: self.overlap_scheduling_from.is_some_and(|from| version.is_none_or(|v| v >= from)),
            step_host_s: o.step_host_us * 1e-6,
            per_seq_s: o.seq_overhead_us * 1e-6,
            frontend: o.frontend(&self.defaults),
            cuda_graphs: self.cuda_graphs.clone(),
            kv_memory: self.kv_memory.as_ref().map(|m| m.for_release(version)),
            engine: self.engine.clone(),
            calibrated: entry.is_some(),
            source,
            kernels: None,
            mxfp4_moe_tables_from: None,
        }
    }

    /// The profile as YAML, as `calibrate --fit` writes it.
    pub fn to_yaml(&self) -> String {
        yaml::to_string(self).expect("an engine profile always serialises")
    }
}

/// The engine profiles a run uses: the built-in ones, any replaced by `--calibration FILE`,
/// and whether per-device calibrations apply (`--calibration none` turns them off).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineProfiles {
    profiles: Vec<EngineProfile>,
    pub calibrated: bool,
    /// Which measured kernel tables price the engines' kernels.
    pub kernels: super::kernels::KernelChoice,
}

impl Default for EngineProfiles {
    fn default() -> Self {
        EngineProfiles { profiles: EngineProfile::builtin(), calibrated: true, kernels: Default::default() }
    }
}

impl EngineProfiles {
    /// Replace the profile of `p.engine` by `p`.
    pub fn replace(&mut self, p: EngineProfile) {
        match self.profiles.iter_mut().find(|o| o.engine == p.engine) {
            Some(slot) => *slot = p,
            None => self.profiles.push(p),
        }
    }

    /// The profile of `engine` (one of [`ENGINES`]).
    pub fn get(&self, engine: &str) -> &EngineProfile {
        self.profiles.iter().find(|p| p.engine == engine).expect("every engine has a built-in profile")
    }

    /// What release `version` of `engine` amounts to on `device`, for a model whose routed
    /// experts are MXFP4 (`mxfp4_experts`: only those borrow another engine's expert kernels).
    pub fn effective(&self, engine: &str, device: &DeviceProfile, version: Option<EngineVersion>, mxfp4_experts: bool) -> Effective {
        let profile = self.get(engine);
        let mut eff = profile.effective(device, self.calibrated, version);
        eff.kernels = self.kernels.tables(device, engine);
        // Without FP4 tensor cores the experts run on bf16 activations; an engine that runs
        // another engine's kernels there is priced from that engine's tables of them.
        if let (Some(b), Some(own), false, true) = (&profile.mxfp4_bf16_moe, &eff.kernels, device.has_fp4_tensor_cores(), mxfp4_experts) {
            if let Some(donor) = self.kernels.tables(device, &b.tables) {
                let merged = super::kernels::with_moe_from(&own.0, &donor.0, super::kernels::MoeDtype::W4a16Mxfp4);
                if !std::sync::Arc::ptr_eq(&merged, &own.0) {
                    eff.kernels = Some(super::kernels::KernelRef(merged));
                    eff.mxfp4_moe_tables_from = Some(b.tables.clone());
                }
            }
        }
        eff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profiles_parse_and_name_each_engine_once() {
        let all = EngineProfile::builtin();
        let names: Vec<&str> = all.iter().map(|p| p.engine.as_str()).collect();
        assert_eq!(names, ENGINES);
    }

    #[test]
    fn a_device_entry_replaces_the_overheads_and_keeps_the_hardware() {
        let text = "engine: vllm\nfused_graph: true\ndefaults: {step_overhead_us: 1, seq_overhead_us: 2, frontend_request_us: 3000}\n\
devices:\n  - {device: H100_SXM, step_overhead_us: 4000, seq_overhead_us: 20, frontend_request_us: 15000, frontend_output_token_us: 30}\n";
        let p = EngineProfile::parse(text).unwrap();
        let reg = crate::hardware::DeviceRegistry::builtin();
        let h100 = reg.get("H100_SXM").unwrap();
        let e = p.effective(h100, true, None);
        // The device's kernels are the device's, whatever the engine: every efficiency stays.
        // Mutation: let `apply` copy a calibrated bandwidth share back in and this fails.
        assert_eq!(e.device.memory_efficiency, h100.memory_efficiency);
        assert_eq!(e.device.compute_efficiency, h100.compute_efficiency);
        assert_eq!(e.device.comm_grid, h100.comm_grid);
        assert_eq!(e.device.host_overhead_us, 4000.0);
        let fe = e.frontend.expect("the entry's front end");
        assert!((e.per_seq_s - 20e-6).abs() < 1e-15 && (fe.request_s - 0.015).abs() < 1e-15 && (fe.output_token_s - 30e-6).abs() < 1e-18);
        // Calibration off: the profile's efficiencies, the engine's default overheads.
        let off = p.effective(h100, false, None);
        assert_eq!(off.device.memory_efficiency, h100.memory_efficiency);
        assert_eq!(off.device.host_overhead_us, 1.0);
        let fe = off.frontend.expect("the defaults' front end");
        assert!((fe.request_s - 0.003).abs() < 1e-15 && fe.output_token_s == 0.0);
    }

    /// A minimal valid vLLM profile with `extra` YAML lines.
    fn valid_vllm_with(extra: &str) -> String {
        format!(
            "engine: vllm\nfused_graph: true\n{extra}defaults: {{step_overhead_us: 1, seq_overhead_us: 2, frontend_request_us: 3000}}\n"
        )
    }

    #[test]
    fn out_of_range_values_name_the_field() {
        let text = "engine: vllm\nfused_graph: true\ndefaults: {step_overhead_us: 1, seq_overhead_us: 2, frontend_request_us: 3000}\n\
devices:\n  - {device: H100_SXM, step_overhead_us: 6000, seq_overhead_us: 20, frontend_request_us: 15000, frontend_output_token_us: 30}\n";
        let e = EngineProfile::parse(text).unwrap_err();
        // Mutation: raise MAX_STEP_OVERHEAD_US past 6 ms and this parses.
        assert!(e.contains("devices[0].step_overhead_us") && e.contains("6000") && e.contains("4500"), "{e}");
        // Hardware parameters are not an engine's to set.
        let hw =
            EngineProfile::parse(&text.replace("step_overhead_us: 6000", "memory_efficiency: 0.99, step_overhead_us: 100")).unwrap_err();
        assert!(hw.contains("memory_efficiency"), "{hw}");
        // Mutation: print the value with `{v}` alone and the message carries 309 digits.
        let huge = EngineProfile::parse(&text.replace("seq_overhead_us: 2,", "seq_overhead_us: 2, step_host_us: 1e308,")).unwrap_err();
        assert!(huge.contains("defaults.step_host_us` is 1e308; it must be between 0 and 4500"), "{huge}");
        // The two per-step parts share the step's bound. Mutation: drop the sum's check and this parses.
        let both = EngineProfile::parse(&text.replace("step_overhead_us: 1,", "step_overhead_us: 3000, step_host_us: 3000,")).unwrap_err();
        assert!(both.contains("defaults.step_overhead_us + step_host_us` is 6000; it must be between 0 and 4500"), "{both}");
        let bad_engine = EngineProfile::parse(
            "engine: tgi\nfused_graph: true\ndefaults: {step_overhead_us: 1, seq_overhead_us: 2, frontend_request_us: 3000}\n",
        )
        .unwrap_err();
        assert!(bad_engine.contains("tgi") && bad_engine.contains("vllm"), "{bad_engine}");
        // Borrowed expert kernels name another engine with kernel tables (fails if
        // `BorrowedMoeKernels::validate` is not called).
        let own = EngineProfile::parse(&valid_vllm_with("mxfp4_bf16_moe: {tables: vllm}\n")).unwrap_err();
        assert!(own.contains("mxfp4_bf16_moe.tables` is `vllm`; valid: sglang, trtllm"), "{own}");
        assert!(EngineProfile::parse(&valid_vllm_with("mxfp4_bf16_moe: {tables: sglang}\n")).is_ok());
        // The front end's bounds: 50 ms a request, 1 ms a token (fails if a field is left
        // unchecked, and the message names it).
        let slow =
            EngineProfile::parse(&text.replace("frontend_request_us: 3000}", "frontend_request_us: 3000, frontend_output_token_us: 1500}"))
                .unwrap_err();
        assert!(slow.contains("defaults.frontend_output_token_us` is 1500; it must be between 0 and 1000"), "{slow}");
        let valid = text.replace("step_overhead_us: 6000", "step_overhead_us: 100");
        let slow = EngineProfile::parse(&valid.replace("frontend_request_us: 15000", "frontend_request_us: 60000")).unwrap_err();
        assert!(slow.contains("frontend_request_us` is 60000; it must be between 0 and 50000"), "{slow}");
        // `request_overhead_ms`, a constant added to every TTFT, gave way to the front end.
        let old = EngineProfile::parse(
            "engine: vllm\nfused_graph: true\ndefaults: {step_overhead_us: 1, seq_overhead_us: 2, request_overhead_ms: 3}\n",
        )
        .unwrap_err();
        assert!(old.contains("request_overhead_ms"), "{old}");
        // `admissions_per_step` is gone (issue 22): a profile that still carries it is refused
        // by name rather than read as if it limited anything.
        let gone = EngineProfile::parse(
            "engine: vllm\nfused_graph: true\nadmissions_per_step: 1\ndefaults: {step_overhead_us: 1, seq_overhead_us: 2, frontend_request_us: 3000}\n",
        )
        .unwrap_err();
        assert!(gone.contains("admissions_per_step"), "{gone}");
    }

    #[test]
    fn a_profile_that_sets_the_retired_per_layer_cost_is_refused_by_name() {
        // `seq_layer_overhead_us` (per sequence per decoder layer) was retired in issue 22: a
        // profile or `--calibration` file that still sets it, at any value and in any entry, is
        // refused with the field's name and its replacement, never read as 0. Mutation: take it
        // out of RETIRED_FIELDS and the message no longer names `seq_overhead_us`.
        let head = "engine: vllm\nfused_graph: true\n";
        for text in [
            format!("{head}defaults: {{step_overhead_us: 1, seq_overhead_us: 2, seq_layer_overhead_us: 0.0}}\n"),
            format!("{head}defaults: {{step_overhead_us: 1, seq_overhead_us: 2}}\ndevices:\n  - device: H100_SXM\n    step_overhead_us: 5\n    seq_overhead_us: 0\n    seq_layer_overhead_us: 0.57\n"),
        ] {
            let e = EngineProfile::parse(&text).unwrap_err();
            assert!(e.contains("field `seq_layer_overhead_us` is no longer read") && e.contains("`seq_overhead_us`, per step"), "{e}");
        }
        // The same file without it parses: the refusal is the field's, not the file's.
        assert!(EngineProfile::parse(&format!("{head}defaults: {{step_overhead_us: 1, seq_overhead_us: 2}}\n")).is_ok());
    }

    #[test]
    fn engine_versions_read_their_leading_numbers_and_gate_overlapped_scheduling() {
        // Fails if a suffix breaks the parse (`1.0.0rc3`, the training file's TensorRT-LLM) or
        // if versions compare as text (`0.9` after `0.14`).
        let v = |t: &str| EngineVersion::parse(t);
        assert_eq!(v("1.0.0rc3"), Some(EngineVersion([1, 0, 0])));
        assert_eq!(v("1.2.0rc2.post2"), Some(EngineVersion([1, 2, 0])));
        assert_eq!(v("0.12"), Some(EngineVersion([0, 12, 0])));
        assert_eq!(v("0.15.1"), Some(EngineVersion([0, 15, 1])));
        // A release tag's `v` (mutation: drop the strip and this is None).
        assert_eq!(v("v0.12.0"), Some(EngineVersion([0, 12, 0])));
        assert_eq!(v("v"), None);
        assert_eq!(v("gpt-oss-dev"), None);
        assert_eq!(v(""), None);
        assert!(v("0.9").unwrap() < v("0.14").unwrap());
        // vLLM overlaps from its profile's version on; the current release (no version) does.
        // Fails if `effective` ignores the version (`self.overlap_scheduling_from.is_some()`).
        let reg = crate::hardware::DeviceRegistry::builtin();
        let h100 = reg.get("H100_SXM").unwrap();
        let vllm = EngineProfile::builtin().into_iter().find(|p| p.engine == "vllm").unwrap();
        let at = |t: Option<&str>| vllm.effective(h100, true, t.and_then(EngineVersion::parse)).overlap_scheduling;
        // Async scheduling became vLLM's default in 0.14.0 (vLLM PR #27614): 0.12 and 0.13 ran
        // synchronously unless told otherwise.
        assert_eq!((at(Some("0.11.2")), at(Some("0.12.0")), at(Some("0.13.0"))), (false, false, false));
        assert_eq!((at(Some("0.14.0")), at(Some("0.18.0")), at(None)), (true, true, true));
        assert!(vllm.effective(h100, true, None).describe().ends_with("; overlapped scheduling"));
    }

    #[test]
    fn vllm_samples_its_profiling_batch_as_its_release_does() {
        // Top-k and top-p sort the logits in PyTorch before 0.17.0 (37.2 bytes an entry at the
        // peak) and run as a Triton kernel from 0.17.0 on (12); the current release is the
        // latest. Fails if `effective` keeps the unresolved profile (every release at 37.2).
        let reg = crate::hardware::DeviceRegistry::builtin();
        let h100 = reg.get("H100_SXM").unwrap();
        let vllm = EngineProfile::builtin().into_iter().find(|p| p.engine == "vllm").unwrap();
        let at =
            |t: Option<&str>| vllm.effective(h100, true, t.and_then(EngineVersion::parse)).kv_memory.unwrap().sampler_bytes_per_logit();
        assert_eq!(
            (at(Some("0.12.0")), at(Some("0.16.1")), at(Some("0.17.0")), at(Some("0.18.0")), at(None)),
            (37.2, 37.2, 12.0, 12.0, 12.0)
        );
    }

    #[test]
    fn no_engine_limits_its_admissions_per_step() {
        // The engines' schedulers admit every waiting request the token budget and the KV pool
        // fit; a one-new-request-per-step limit (vLLM's and TensorRT-LLM's profiles until issue
        // 22) capped the running set near the output length and stopped TPOT growing with load.
        let reg = crate::hardware::DeviceRegistry::builtin();
        let h100 = reg.get("H100_SXM").unwrap();
        for p in &EngineProfile::builtin() {
            let d = p.effective(h100, true, None).describe();
            assert!(!d.contains("per step;") && !d.contains("new request"), "{d}");
        }
    }
}
