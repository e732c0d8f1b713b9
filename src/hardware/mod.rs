//! What a device can do: compute peaks per dtype, memory, fixed per-operator costs, the
//! communication grid that prices collectives, the link that carries KV between instances.
//!
//! Profiles are YAML files (built-in ones under `profiles/devices/`, embedded in the binary;
//! custom ones from `--device-file`). Loading validates every field so that the cost model can
//! trust a `DeviceProfile` without re-checking.

pub mod calibration;
mod comm;
pub mod kernels;
pub mod power;
mod registry;
pub mod runtime;
mod version;

pub use comm::CommGroup;
pub use power::{PowerLimit, PowerWindow};
pub use registry::{DeviceError, DeviceRegistry};

use crate::units::{Bandwidth, Bytes};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Element types a peak can be quoted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Fp32,
    Bf16,
    Fp16,
    Int8,
    Fp8,
    Fp4,
}

impl Dtype {
    /// Storage bytes of one element (packed sub-byte types are fractional).
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Fp32 => 4.0,
            Dtype::Bf16 | Dtype::Fp16 => 2.0,
            Dtype::Int8 | Dtype::Fp8 => 1.0,
            Dtype::Fp4 => 0.5,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Fp32 => "fp32",
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Int8 => "int8",
            Dtype::Fp8 => "fp8",
            Dtype::Fp4 => "fp4",
        }
    }
}

/// Peak throughput per dtype in TFLOP/s (TOPS for integer types); absent = not supported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DtypePeaks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp32: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp4: Option<f64>,
}

impl DtypePeaks {
    pub fn get(&self, d: Dtype) -> Option<f64> {
        match d {
            Dtype::Fp32 => self.fp32,
            Dtype::Bf16 => self.bf16,
            Dtype::Fp16 => self.fp16,
            Dtype::Int8 => self.int8,
            Dtype::Fp8 => self.fp8,
            Dtype::Fp4 => self.fp4,
        }
    }
    /// The peaks that are set, mutably.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut f64> {
        [&mut self.fp32, &mut self.bf16, &mut self.fp16, &mut self.int8, &mut self.fp8, &mut self.fp4].into_iter().flatten()
    }
    /// The peaks that are set.
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.entries().filter_map(|(_, v)| v)
    }
    fn entries(&self) -> impl Iterator<Item = (&'static str, Option<f64>)> {
        [("fp32", self.fp32), ("bf16", self.bf16), ("fp16", self.fp16), ("int8", self.int8), ("fp8", self.fp8), ("fp4", self.fp4)]
            .into_iter()
    }
}

/// Fixed cost added to every operator of a kind (kernel launch, scheduling), in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpOverhead {
    pub matrix: f64,
    pub vector: f64,
    pub collective: f64,
}

/// How the devices of one grid level are wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    /// Switched fabric: any group gets the full per-device bandwidth.
    Clos,
    /// Point-to-point links: a device's bandwidth is shared over its peers, so a group of
    /// `n` out of `max` devices gets `(n-1)/(max-1)` of it.
    FullMesh,
}

/// One dimension of the communication grid (outermost first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridLevel {
    pub size: u32,
    /// Per-device, per-direction bandwidth.
    pub bandwidth: Bandwidth,
    pub latency_us: f64,
    pub efficiency: f64,
    pub topology: Topology,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
}

/// A point-to-point link (KV transfer between prefill and decode instances).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    pub bandwidth: Bandwidth,
    pub latency_us: f64,
    pub efficiency: f64,
}

impl Link {
    /// Seconds to move `bytes` over this link.
    pub fn transfer_s(&self, bytes: f64) -> f64 {
        self.latency_us * 1e-6 + bytes / (self.bandwidth.bytes_per_s * self.efficiency)
    }
}

/// Everything the cost model needs to know about one accelerator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    pub name: String,
    #[serde(default)]
    pub vendor: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Where the figures come from (the datasheet, the measurement), shown by `--list-devices`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// The compute die (`GH100`): devices built on the same die share a calibration's matrix
    /// and bus efficiencies (`calibrate --fit`); empty = the device is its own.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub chip: String,
    /// Matrix-unit (tensor core / cube) peaks.
    pub matrix_tflops: DtypePeaks,
    /// Vector-unit (CUDA core / vector) peaks for element-wise work.
    pub vector_tflops: DtypePeaks,
    /// Fraction of peak compute that real kernels reach.
    pub compute_efficiency: f64,
    /// Optional per-dtype matrix efficiency overriding `compute_efficiency`.
    #[serde(default, skip_serializing_if = "DtypePeaks::is_empty")]
    pub matrix_efficiency: DtypePeaks,
    /// Device memory (HBM) per device.
    pub memory: Bytes,
    pub memory_bandwidth: Bandwidth,
    pub memory_efficiency: f64,
    pub op_overhead_us: OpOverhead,
    /// Outermost level first; ranks are laid out row-major (last level fastest).
    pub comm_grid: Vec<GridLevel>,
    /// Devices one host (one operating system, one engine process tree) holds, when it is
    /// fewer than the innermost grid level: a GB200 NVL72 rack is one 72-GPU NVLink domain of
    /// 4-GPU hosts, so TP and EP groups of up to 72 stay on NVLink while an instance of more
    /// than 4 GPUs spans hosts. `None`: a host holds the innermost level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_host: Option<u32>,
    pub kv_transfer: Link,
    /// Host-side time per engine step (scheduling, launch) not hidden by the device.
    #[serde(default)]
    pub host_overhead_us: f64,
    /// Efficiency of grouped (MoE expert) GEMM kernels relative to the dense ones: the routed
    /// experts' compute and memory times are divided by it. 1 unless a calibration says
    /// otherwise (grouped kernels over many small expert GEMMs rarely reach dense efficiency).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub grouped_gemm_efficiency: f64,
    /// The system whose measured kernel tables price this device's GEMMs, attention, routed
    /// experts and collectives under a serving engine, as NVIDIA AIConfigurator's database
    /// names it (`h200_sxm`); empty = no tables, the roofline alone.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_system: String,
    /// How the clocks give way under sustained load at the power limit, where it was measured;
    /// `None`: the burst rate at every load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit: Option<PowerLimit>,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// The largest share of the datasheet memory bandwidth a profile may claim. Measured: a 4 GiB
/// device-to-device copy reaches 0.89 of the datasheet on an H200 (4.28 of 4.8 TB/s) and 0.90 on
/// an H100; cuBLAS bf16 GEMMs at M ≤ 64 stream weights at 0.79–0.91 of it.
pub const MAX_HBM_SHARE: f64 = 0.92;

impl DtypePeaks {
    pub fn is_empty(&self) -> bool {
        self.entries().all(|(_, v)| v.is_none())
    }
}

impl DeviceProfile {
    /// Effective matrix FLOP/s for `d` (peak × efficiency); `None` if the dtype is absent.
    pub fn matrix_flops(&self, d: Dtype) -> Option<f64> {
        let peak = self.matrix_tflops.get(d)?;
        let eff = self.matrix_efficiency.get(d).unwrap_or(self.compute_efficiency);
        Some(peak * 1e12 * eff)
    }

    /// Whether the tensor cores take FP4 operands (Blackwell): where they do not, FP4 weights
    /// are converted in software and engines feed MXFP4 experts bf16 activations.
    pub fn has_fp4_tensor_cores(&self) -> bool {
        self.matrix_flops(Dtype::Fp4).is_some()
    }

    /// Effective vector FLOP/s for `d`, falling back to the nearest wider type.
    pub fn vector_flops(&self, d: Dtype) -> f64 {
        let order: &[Dtype] = match d {
            Dtype::Fp32 => &[Dtype::Fp32, Dtype::Bf16, Dtype::Fp16],
            _ => &[d, Dtype::Bf16, Dtype::Fp16, Dtype::Fp32],
        };
        let peak = order.iter().find_map(|&x| self.vector_tflops.get(x)).expect("validated: a profile has a vector peak");
        peak * 1e12 * self.compute_efficiency
    }

    /// Effective HBM bandwidth in bytes/s.
    pub fn hbm_bytes_per_s(&self) -> f64 {
        self.memory_bandwidth.bytes_per_s * self.memory_efficiency
    }

    /// Number of devices the communication grid can model.
    /// Devices the grid holds (saturating: a product that would overflow is `u64::MAX`, which
    /// [`Self::validate`] refuses).
    pub fn grid_size(&self) -> u64 {
        self.comm_grid.iter().fold(1u64, |n, l| n.saturating_mul(l.size as u64))
    }

    /// "256 x 8"
    pub fn grid_shape(&self) -> String {
        self.comm_grid.iter().map(|l| l.size.to_string()).collect::<Vec<_>>().join(" x ")
    }

    /// Cube compute shown in the profile comparison: bf16 peak (fp16 if absent) × efficiency, TFLOP/s.
    pub fn display_cube_tflops(&self) -> f64 {
        let p = self.matrix_tflops.bf16.or(self.matrix_tflops.fp16).unwrap_or(0.0);
        p * self.compute_efficiency
    }
    pub fn display_vector_tflops(&self) -> f64 {
        let p = self.vector_tflops.bf16.or(self.vector_tflops.fp16).unwrap_or(0.0);
        p * self.compute_efficiency
    }
    /// Effective HBM bandwidth in TiB/s as the original's comparison table prints it.
    pub fn display_hbm_tib_s(&self) -> f64 {
        self.hbm_bytes_per_s() / 1024f64.powi(4)
    }
    pub fn memory_gib(&self) -> f64 {
        self.memory.bytes / 1024f64.powi(3)
    }
    /// Effective bandwidth per grid level, GB/s, joined with " | ".
    pub fn display_comm_gb_s(&self) -> String {
        self.comm_gb_s().into_iter().map(trim_float).collect::<Vec<_>>().join(" | ")
    }

    /// Effective bandwidth per device of each grid level (bandwidth × efficiency), GB/s,
    /// outermost level first.
    pub fn comm_gb_s(&self) -> Vec<f64> {
        self.comm_grid.iter().map(|l| l.bandwidth.bytes_per_s * l.efficiency / 1e9).collect()
    }

    /// Devices one host (one node) holds: `gpus_per_host`, else 8, the board of an HGX / DGX
    /// server, an MI300X platform or an Atlas 800 server. Launch output places each server's
    /// processes on whole nodes of this many devices.
    pub fn host_size(&self) -> u32 {
        self.gpus_per_host.unwrap_or(8)
    }

    /// Devices per grid level, outermost first.
    pub fn grid_sizes(&self) -> Vec<u64> {
        self.comm_grid.iter().map(|l| l.size as u64).collect()
    }

    /// Check every field; the message names the field, the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        let name = &self.name;
        if name.trim().is_empty() {
            return Err("field `name` must not be empty".into());
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.') {
            return Err(format!("field `name`: `{name}` may only contain letters, digits, `_`, `-` and `.`"));
        }
        let frac = |field: &str, v: f64| -> Result<(), String> {
            if v > 0.0 && v <= 1.0 {
                Ok(())
            } else {
                Err(format!("field `{field}` is {v}; it must be in (0, 1]"))
            }
        };
        let positive = |field: &str, v: f64| -> Result<(), String> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("field `{field}` is {v}; it must be a positive number"))
            }
        };
        let non_negative = |field: &str, v: f64| -> Result<(), String> {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(format!("field `{field}` is {v}; it must be ≥ 0"))
            }
        };
        frac("compute_efficiency", self.compute_efficiency)?;
        if !(self.grouped_gemm_efficiency.is_finite() && self.grouped_gemm_efficiency >= 0.05 && self.grouped_gemm_efficiency <= 1.0) {
            return Err(format!(
                "field `grouped_gemm_efficiency` is {}; it must be between 0.05 and 1 (no grouped GEMM outruns the dense kernels' efficiency)",
                self.grouped_gemm_efficiency
            ));
        }
        frac("memory_efficiency", self.memory_efficiency)?;
        if self.memory_efficiency > MAX_HBM_SHARE {
            return Err(format!(
                "field `memory_efficiency` is {}; it must be at most {MAX_HBM_SHARE}: no kernel streams HBM faster than about 0.9 of the datasheet (a device-to-device copy reaches 0.89 on an H200, 0.90 on an H100)",
                self.memory_efficiency
            ));
        }
        for (dt, v) in self.matrix_efficiency.entries() {
            if let Some(v) = v {
                frac(&format!("matrix_efficiency.{dt}"), v)?;
            }
        }
        for (table, peaks) in [("matrix_tflops", &self.matrix_tflops), ("vector_tflops", &self.vector_tflops)] {
            for (dt, v) in peaks.entries() {
                if let Some(v) = v {
                    positive(&format!("{table}.{dt}"), v)?;
                    physical(&format!("{table}.{dt}"), v, TFLOPS_RANGE)?;
                }
            }
        }
        if self.matrix_tflops.bf16.is_none() && self.matrix_tflops.fp16.is_none() {
            return Err("field `matrix_tflops` needs at least a `bf16` or `fp16` peak".into());
        }
        if self.vector_tflops.is_empty() {
            return Err("field `vector_tflops` needs at least one peak (e.g. `bf16`)".into());
        }
        positive("memory", self.memory.bytes)?;
        physical("memory", self.memory.bytes, MEMORY_RANGE)?;
        positive("memory_bandwidth", self.memory_bandwidth.bytes_per_s)?;
        physical("memory_bandwidth", self.memory_bandwidth.bytes_per_s, MEMORY_BANDWIDTH_RANGE)?;
        for (field, v) in [
            ("op_overhead_us.matrix", self.op_overhead_us.matrix),
            ("op_overhead_us.vector", self.op_overhead_us.vector),
            ("op_overhead_us.collective", self.op_overhead_us.collective),
            ("host_overhead_us", self.host_overhead_us),
        ] {
            non_negative(field, v)?;
            physical(field, v, OVERHEAD_US_RANGE)?;
        }
        if self.comm_grid.is_empty() {
            return Err("field `comm_grid` needs at least one level".into());
        }
        for (i, l) in self.comm_grid.iter().enumerate() {
            if l.size < 2 {
                return Err(format!("field `comm_grid[{i}].size` is {}; each level must have ≥ 2 devices", l.size));
            }
            positive(&format!("comm_grid[{i}].bandwidth"), l.bandwidth.bytes_per_s)?;
            physical(&format!("comm_grid[{i}].bandwidth"), l.bandwidth.bytes_per_s, LINK_BANDWIDTH_RANGE)?;
            non_negative(&format!("comm_grid[{i}].latency_us"), l.latency_us)?;
            physical(&format!("comm_grid[{i}].latency_us"), l.latency_us, OVERHEAD_US_RANGE)?;
            frac(&format!("comm_grid[{i}].efficiency"), l.efficiency)?;
        }
        if let Some(h) = self.gpus_per_host {
            let inner = self.comm_grid.last().map_or(1, |l| l.size);
            if h == 0 || !inner.is_multiple_of(h) {
                return Err(format!(
                    "field `gpus_per_host` is {h}; it must divide the innermost grid level's {inner} devices (a host's devices share its fastest link)"
                ));
            }
        }
        if self.grid_size() > 1 << 20 {
            return Err(format!("field `comm_grid` models {} devices; at most 1048576 are supported", self.grid_shape()));
        }
        positive("kv_transfer.bandwidth", self.kv_transfer.bandwidth.bytes_per_s)?;
        physical("kv_transfer.bandwidth", self.kv_transfer.bandwidth.bytes_per_s, LINK_BANDWIDTH_RANGE)?;
        non_negative("kv_transfer.latency_us", self.kv_transfer.latency_us)?;
        physical("kv_transfer.latency_us", self.kv_transfer.latency_us, OVERHEAD_US_RANGE)?;
        frac("kv_transfer.efficiency", self.kv_transfer.efficiency)?;
        if let Some(p) = &self.power_limit {
            p.validate()?;
        }
        Ok(())
    }
}

/// A physical range of a device field: (lowest, highest, how the range reads in messages).
type Range = (f64, f64, &'static str, &'static str);

/// Peak TFLOPS of one data type: a gigaflop to an exaflop per device.
const TFLOPS_RANGE: Range = (1e-3, 1e6, "TFLOPS", "between 0.001 and 1000000 TFLOPS");
/// Device memory: 1 GiB to 1 PiB.
const MEMORY_RANGE: Range = (1_073_741_824.0, 1_125_899_906_842_624.0, "bytes", "between 1 GiB and 1 PiB");
/// Memory bandwidth: 1 GB/s to 1 PB/s.
const MEMORY_BANDWIDTH_RANGE: Range = (1e9, 1e15, "B/s", "between 1 GB/s and 1 PB/s");
/// Link bandwidth (comm grid, KV transfer): 1 MB/s to 1 PB/s.
const LINK_BANDWIDTH_RANGE: Range = (1e6, 1e15, "B/s", "between 1 MB/s and 1 PB/s");
/// Overheads and latencies: at most one second.
const OVERHEAD_US_RANGE: Range = (0.0, 1e6, "µs", "between 0 and 1000000 µs (one second)");

/// A value outside what hardware can be: the cost model would price steps at zero or at
/// centuries, and the search would rank nonsense.
fn physical(field: &str, v: f64, (lo, hi, unit, what): Range) -> Result<(), String> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(format!("field `{field}` is {v:e} {unit}; a physical device has it {what}"))
    }
}

/// A profile value outside what real hardware or a serving engine on it can be: the message
/// names the field, the value and the range.
pub(crate) fn check_field(field: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        // A huge value is written as the user would have (1e308), not as its 309 digits.
        let shown = if v.abs() >= 1e15 { format!("{v:e}") } else { v.to_string() };
        Err(format!("field `{field}` is {shown}; it must be between {lo} and {hi}"))
    }
}

/// Format without trailing zeros: 35.0 → "35", 137.2 → "137.2".
pub fn trim_float(v: f64) -> String {
    let s = format!("{:.3}", v);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
