//! Per-section validators: each checks one part of [`RawArgs`] and returns the matching piece
//! of the [`super::Plan`]. [`super::plan::build_checked`] calls them in a fixed order, so that
//! of several mistakes the first section's is reported.

mod capacity;
mod costing;
mod mode;
mod model;
mod output;
mod quant;
mod search;
mod serving;
mod shard;
mod sim;
mod workload;

pub(crate) use capacity::{apply_target_rate, validate_capacity};
pub(crate) use costing::{validate_device_hour_cost, validate_plan_replicas};
pub(crate) use mode::{validate_device_grids, validate_mode};
pub(crate) use model::{validate_devices, validate_model, validate_registry};
pub(crate) use output::{validate_log_level, validate_output};
pub(crate) use quant::{validate_compile, validate_quant};
pub(crate) use search::{validate_search, DEFAULT_EP_RANGE_NOTE};
pub(crate) use serving::{validate_calibration, validate_mtp, validate_serving, validate_speculative};
pub(crate) use shard::validate_shard;
pub(crate) use sim::{
    check_calibration_engines, unused_reserve_warning, validate_engine, validate_engine_vendor, validate_performance_model, validate_sim,
    warn_unused_engine_version,
};
pub(crate) use workload::{check_one_token_tpot_limit, load_arrival_trace, validate_slo, validate_workload};

/// Notes for stderr, in the order the sections produce them.
#[derive(Debug, Default)]
pub(crate) struct Warnings(Vec<String>);

impl Warnings {
    pub(crate) fn push(&mut self, warning: impl Into<String>) {
        self.0.push(warning.into());
    }

    pub(crate) fn into_vec(self) -> Vec<String> {
        self.0
    }
}

/// `v` without repeated values, first occurrences kept in order.
pub(crate) fn dedup(v: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for &x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::cli::args::RawArgs;
    use crate::cli::plan::build_checked;
    use crate::error::{Error, ErrorKind};
    use clap::Parser;

    const BASE: &[&str] = &["t", "Qwen/Qwen3-32B", "--num-devices", "8", "--input-length", "3500", "--output-length", "1500"];

    fn reject(extra: &[&str]) -> Error {
        let argv: Vec<&str> = BASE.iter().chain(extra).copied().collect();
        build_checked(RawArgs::try_parse_from(argv).unwrap()).map(|_| ()).unwrap_err()
    }

    #[test]
    fn out_of_range_values_name_field_value_and_limit() {
        // Fails if validate_output stops checking MAX_JOBS or names another flag.
        let e = reject(&["--jobs", "2000"]);
        assert_eq!(e, Error::invalid("--jobs", 2000, "at most 1024"));
        assert_eq!(e.kind(), ErrorKind::Usage);
        // Fails if validate_serving drops the negative check on --reserved-memory-gb.
        assert_eq!(reject(&["--reserved-memory-gb", "-1"]).field(), Some("--reserved-memory-gb"));
    }

    #[test]
    fn bad_choices_carry_the_choices() {
        // Fails if validate_engine maps the parse error to a message instead of Error::Choice.
        match reject(&["--engine", "fast"]) {
            Error::Choice { field, source } => {
                assert_eq!(field, "--engine");
                assert_eq!(source.value, "fast");
                assert_eq!(source.choices, "analytic, sim, compare");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn conflicts_and_dependencies_name_both_flags() {
        // Fails if validate_mode stops refusing --disagg with P/D ratio planning.
        match reject(&["--disagg", "--enable-optimize-prefill-decode-ratio", "--tpot-limits", "50"]) {
            Error::Conflict { field, other, .. } => {
                assert_eq!((field.as_str(), other.as_str()), ("--enable-optimize-prefill-decode-ratio", "--disagg"))
            }
            other => panic!("{other:?}"),
        }
        // Fails if validate_sim accepts --prefix-groups alone.
        match reject(&["--prefix-groups", "4"]) {
            Error::Requires { field, needs, .. } => assert_eq!((field.as_str(), needs.as_str()), ("--prefix-groups", "--prefix-length")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_device_is_the_device_error() {
        // Fails if validate_devices stringifies the registry's error instead of wrapping it.
        assert!(matches!(reject(&["--device", "NOPE"]), Error::Device(crate::hardware::DeviceError::Unknown { .. })));
    }

    fn plan(argv: &[&str]) -> Result<crate::plan::Plan, Error> {
        let argv: Vec<&str> = ["t"].iter().chain(argv).copied().collect();
        let cmd = build_checked(RawArgs::try_parse_from(argv).unwrap())?;
        crate::cli::plan::check_user_run(&cmd)?;
        match cmd {
            crate::cli::plan::Command::Run(p) => Ok(*p),
            other => panic!("{other:?}"),
        }
    }

    /// Without --serving-engine, `--emit E` plans under E; an explicit engine that differs, or
    /// the formulas, are refused naming both flags. Fails if the emit engine stops choosing the
    /// simulated one, or a mismatch is planned silently.
    #[test]
    fn emit_picks_the_simulated_engine_and_refuses_another() {
        use crate::plan::ServingEngine;
        let h100 = ["Qwen/Qwen3-8B", "--device", "H100_SXM", "--num-devices", "1", "--input-length", "100", "--output-length", "10"];
        let with = |extra: &[&str]| plan(&h100.iter().chain(extra).copied().collect::<Vec<_>>());
        assert_eq!(with(&["--emit", "sglang"]).unwrap().sim.serving_engine, Some(ServingEngine::Sglang));
        assert_eq!(with(&["--emit", "trtllm", "--serving-engine", "trtllm"]).unwrap().sim.serving_engine, Some(ServingEngine::Trtllm));
        let e = with(&["--emit", "vllm", "--serving-engine", "msmodeling"]).unwrap_err();
        assert!(matches!(&e, Error::Conflict { field, other, .. } if field == "--serving-engine" && other == "--emit"), "{e:?}");
        assert_eq!(e.kind(), ErrorKind::Usage);
        let e = with(&["--emit", "vllm", "--engine", "analytic"]).unwrap_err();
        assert!(e.to_string().contains("--engine analytic") && e.kind() == ErrorKind::Usage, "{e}");
    }

    /// A --calibration file of an engine the run does not simulate is refused (it would be
    /// ignored). Fails if validate_calibration's engine goes unchecked.
    #[test]
    fn a_calibration_of_another_engine_is_refused() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/sglang.yaml");
        let base = ["Qwen/Qwen3-8B", "--device", "H100_SXM", "--num-devices", "1", "--input-length", "100", "--output-length", "10"];
        let argv: Vec<&str> = base.iter().copied().chain(["--calibration", file]).collect();
        let e = plan(&argv).unwrap_err();
        assert!(e.to_string().contains("calibrates sglang, but the run simulates vllm"), "{e}");
        let argv: Vec<&str> = argv.iter().copied().chain(["--serving-engine", "sglang"]).collect();
        assert!(plan(&argv).is_ok());
    }

    /// EP above the expert count: the default range stops at the experts (with a warning),
    /// an explicit size above them is a usage error. Fails (NoLayout) for DeepSeek-V3 on 1,024
    /// devices if the default EP is the device count again.
    #[test]
    fn ep_stops_at_the_expert_count() {
        let ds =
            ["deepseek-ai/DeepSeek-V3", "--device", "H100_SXM", "--num-devices", "1024", "--input-length", "100", "--output-length", "10"];
        let p = plan(&ds).unwrap();
        assert!(p.warnings.iter().any(|w| w.contains("stops at the model's 256 routed experts")), "{:?}", p.warnings);
        let argv: Vec<&str> = ds.iter().copied().chain(["--ep-sizes", "512"]).collect();
        let e = plan(&argv).unwrap_err();
        assert!(e.field() == Some("--ep-sizes") && e.to_string().contains("256 routed experts"), "{e}");
    }
}
