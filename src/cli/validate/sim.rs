//! The engine, the simulator's options and the performance model.

use super::Warnings;
use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::hardware::calibration::EngineVersion;
use crate::plan::{EngineKind, ServingEngine, SimOptions};
use crate::quant::NamedEnum;
use crate::sim::Percentile;
use crate::workload::arrival::{ArrivalProcess, SharedPrefix, Trace, MAX_REQUESTS};
use crate::workload::trace::TraceFormat;
use crate::workload::Lengths;

/// `--engine` (the simulator when not given).
pub(crate) fn validate_engine(raw: &RawArgs) -> Result<EngineKind, Error> {
    match raw.engine.as_deref() {
        None => Ok(EngineKind::Sim),
        Some(e) => EngineKind::parse_choice(e).map_err(|m| Error::choice("--engine", m)),
    }
}

/// Flags only the simulator reads, as given.
fn sim_flags(raw: &RawArgs) -> Vec<&'static str> {
    [
        (raw.arrival.is_some(), "--arrival"),
        (raw.trace_time_scale.is_some(), "--trace-time-scale"),
        (raw.request_rate.is_some(), "--request-rate"),
        (raw.burstiness.is_some(), "--burstiness"),
        (raw.num_requests.is_some(), "--num-requests"),
        (raw.max_concurrency.is_some(), "--max-concurrency"),
        (raw.max_num_seqs.is_some(), "--max-num-seqs"),
        (raw.no_chunked_prefill, "--no-chunked-prefill"),
        (raw.slo_percentile.is_some(), "--slo-percentile"),
        (raw.measure.is_some(), "--measure"),
        (raw.random_range_ratio.is_some(), "--random-range-ratio"),
        (raw.ignore_eos, "--ignore-eos"),
        (raw.prefix_groups.is_some(), "--prefix-groups"),
        (raw.prefix_length.is_some(), "--prefix-length"),
        (raw.pd_routing.is_some(), "--pd-routing"),
        (raw.serving_engine.is_some(), "--serving-engine"),
    ]
    .iter()
    .filter(|(given, _)| *given)
    .map(|(_, f)| *f)
    .collect()
}

/// Simulator options; flags that only the simulator reads are refused with the analytic engine.
/// `trace` is the `--arrival trace` file as the workload's validation loaded it.
pub(crate) fn validate_sim(
    raw: &RawArgs,
    engine: EngineKind,
    input: &Lengths,
    trace: Option<Trace>,
    warnings: &mut Warnings,
) -> Result<SimOptions, Error> {
    let given = sim_flags(raw);
    if engine == EngineKind::Analytic && !given.is_empty() {
        return Err(Error::conflict(
            &given.join(", "),
            "--engine analytic",
            format!("{} only apply to the simulator; drop them or use --engine sim (or compare)", given.join(", ")),
        ));
    }
    let arrival = arrival(raw, trace, warnings)?;
    if raw.request_rate.is_some()
        && !matches!(arrival, ArrivalProcess::Poisson { .. } | ArrivalProcess::Constant { .. } | ArrivalProcess::Gamma { .. })
    {
        warnings.push("--request-rate only applies to --arrival poisson, constant or gamma; it is ignored");
    }
    if raw.burstiness.is_some() && !matches!(arrival, ArrivalProcess::Gamma { .. }) {
        warnings.push("--burstiness only applies to --arrival gamma; it is ignored");
    }
    // With a closed loop, --num-requests makes the run a benchmark client's: every request
    // counted, the first wave included.
    if raw.num_requests.is_some() && matches!(arrival, ArrivalProcess::Burst) {
        warnings.push("--num-requests applies to closed and open-loop arrivals; with --arrival burst it is ignored");
    }
    if let (ArrivalProcess::Trace(t), Some(n)) = (&arrival, raw.num_requests) {
        if (n as usize) < t.requests.len() {
            warnings.push(format!("--num-requests {n} simulates only the first {n} of the trace's {} requests", t.requests.len()));
        }
    }
    if raw.max_concurrency.is_some() && !arrival.is_open() {
        warnings.push("--max-concurrency applies to open-loop arrivals (poisson, gamma, trace); it is ignored");
    }
    let slo_percentile = match raw.slo_percentile.as_deref() {
        None => Percentile::Mean,
        Some(p) => Percentile::parse_choice(p).map_err(|e| Error::choice("--slo-percentile", e))?,
    };
    let shared_prefix = match (raw.prefix_groups, raw.prefix_length) {
        (None, None) => None,
        (Some(g), Some(l)) => Some(SharedPrefix { groups: g, length: l as u64 }),
        _ => {
            return Err(Error::requires("--prefix-groups", "--prefix-length", "--prefix-groups and --prefix-length must be given together"))
        }
    };
    let chunked_prefill = !raw.no_chunked_prefill;
    let budgets = raw.max_batched_tokens.as_ref().or(raw.max_prefill_tokens.as_ref());
    check_budget_work(budgets.map(Vec::as_slice).unwrap_or_default(), input)?;
    if let (false, Some(b)) = (chunked_prefill, budgets) {
        let longest = input.max_effective(0.0);
        if let Some(&small) = b.iter().find(|&&x| (x as u64) < longest) {
            return Err(Error::conflict("--no-chunked-prefill", "--max-batched-tokens", format!(
                "--no-chunked-prefill with --max-batched-tokens {small}: prompts of up to {longest} tokens cannot be scheduled whole; raise the budget or allow chunked prefill"
            )));
        }
    }
    if let Some(n) = raw.num_requests.filter(|&n| u64::from(n) > MAX_REQUESTS) {
        return Err(Error::invalid(
            "--num-requests",
            n,
            format!("at most {MAX_REQUESTS} requests per simulation (each candidate layout simulates all of them)"),
        ));
    }
    // More running sequences than any batch the search probes (2^20) is no limit at all.
    if let Some(n) = raw.max_num_seqs.filter(|&n| n > 1 << 20) {
        return Err(Error::invalid("--max-num-seqs", n, "at most 1048576 running sequences per replica"));
    }
    let measure = validate_measure(raw, &arrival)?;
    Ok(SimOptions {
        measure,
        arrival,
        num_requests: raw.num_requests.map(u64::from),
        max_concurrency: raw.max_concurrency.map(u64::from),
        max_num_seqs: raw.max_num_seqs.map(u64::from),
        chunked_prefill,
        slo_percentile,
        shared_prefix,
        routing: match raw.pd_routing.as_deref() {
            None => crate::sim::Routing::LeastLoaded,
            Some(r) => crate::sim::Routing::parse_choice(r).map_err(|e| Error::choice("--pd-routing", e))?,
        },
        serving_engine: serving_engine(raw, engine)?,
        engine_version: engine_version(raw.serving_engine.as_deref())?,
    })
}

/// `--serving-engine`, else the engine `--emit` writes commands for: the commands must run
/// what was simulated, so an explicit engine that differs from `--emit`, or the formulas
/// (`--engine analytic`, which simulate no engine's scheduler), are refused.
fn serving_engine(raw: &RawArgs, engine: EngineKind) -> Result<Option<ServingEngine>, Error> {
    let given = match raw.serving_engine.as_deref() {
        None => None,
        Some(e) => {
            let name = e.split_once('@').map_or(e, |(name, _)| name);
            Some(ServingEngine::parse_choice(name).map_err(|m| Error::choice("--serving-engine", m))?)
        }
    };
    // An unknown --emit engine is reported by the output section.
    let Some(emit) = raw.emit.as_deref().and_then(|e| crate::plan::LaunchEngine::parse_choice(e).ok()) else { return Ok(given) };
    let planned = ServingEngine::parse_choice(emit.name()).ok();
    if engine == EngineKind::Analytic {
        return Err(Error::conflict(
            "--emit",
            "--engine analytic",
            format!("--emit {emit} writes {emit}'s commands, sized by a simulation of {emit}'s scheduler; the formulas of --engine analytic simulate none: drop --engine analytic (the simulator plans under {emit})"),
        ));
    }
    match given {
        Some(g) if Some(g) != planned => Err(Error::conflict(
            "--serving-engine",
            "--emit",
            format!("--serving-engine {g} plans under {g}'s scheduler, but --emit {emit} writes {emit}'s commands, which would run another; give --serving-engine {emit} or drop it (--emit {emit} then plans under {emit})"),
        )),
        Some(g) => Ok(Some(g)),
        None => Ok(planned),
    }
}

/// A `--calibration` file whose engine the run does not simulate on any device would be
/// ignored without a word: refused, naming the engine it is for and the one simulated.
pub(crate) fn check_calibration_engines(plan: &crate::plan::Plan) -> Result<(), Error> {
    if plan.engine == EngineKind::Analytic {
        return Ok(());
    }
    let simulated: Vec<ServingEngine> = plan.devices.iter().map(|d| plan.serving_engine(d)).collect();
    for engine in ServingEngine::ALL {
        let Some(file) = plan.engines.get(engine.name()).file.as_deref() else { continue };
        if !simulated.contains(engine) {
            let names: Vec<&str> = simulated.iter().map(|e| e.name()).collect();
            return Err(Error::rejected(
                "--calibration",
                file,
                format!(
                    "--calibration {file} calibrates {engine}, but the run simulates {}; give --serving-engine {engine}, or a calibration of {}",
                    names.join(", "),
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// TensorRT-LLM on a device it does not run on: it is NVIDIA's, and AMD GPUs are served by the
/// ROCm builds of vLLM and SGLang. Named by the flag that asked for it (`--serving-engine`, or
/// `--emit trtllm`, which plans under TensorRT-LLM when no engine is given).
pub(crate) fn validate_engine_vendor(raw: &RawArgs, sim: &SimOptions, devices: &[crate::hardware::DeviceProfile]) -> Result<(), Error> {
    if sim.serving_engine != Some(ServingEngine::Trtllm) {
        return Ok(());
    }
    let (flag, instead) = if raw.serving_engine.is_some() {
        ("--serving-engine", "--serving-engine vllm or sglang")
    } else {
        ("--emit", "--emit vllm or --emit sglang")
    };
    match devices.iter().find(|d| d.vendor.eq_ignore_ascii_case("amd")) {
        Some(d) => Err(Error::rejected(
            flag,
            "trtllm",
            format!(
                "{flag} trtllm: TensorRT-LLM runs on NVIDIA GPUs only, and {} is an AMD GPU; serve it with vllm or sglang (their ROCm builds): {instead}",
                d.name
            ),
        )),
        None => Ok(()),
    }
}

/// `--serving-engine ENGINE@VERSION` for an engine whose profile has no version-dependent
/// default: the version names the release on the profile line and changes nothing else.
pub(crate) fn warn_unused_engine_version(
    sim: &SimOptions,
    engines: &crate::hardware::calibration::EngineProfiles,
    warnings: &mut Warnings,
) {
    if let (Some(engine), Some(v)) = (sim.serving_engine, sim.engine_version) {
        if engines.get(engine.name()).overlap_scheduling_from.is_none() {
            warnings.push(format!(
                "--serving-engine {}@{v}: the {} profile has no version-dependent defaults (overlap_scheduling_from); the version changes nothing but the profile line",
                engine.name(),
                engine.name()
            ));
        }
    }
}

/// `--reserved-memory-gb` sizes the KV cache under the msmodeling policy and the formulas only:
/// a simulated vLLM, SGLang or TensorRT-LLM sizes it by its own memory setting (the profile's
/// `kv_memory`, which `--gpu-memory-utilization` changes). Said once, naming the engines.
pub(crate) fn unused_reserve_warning(raw: &RawArgs, plan: &crate::plan::Plan) -> Option<String> {
    raw.reserved_memory_gb?;
    if plan.engine == EngineKind::Analytic {
        return None;
    }
    let mut engines: Vec<String> = plan
        .devices
        .iter()
        .filter_map(|d| plan.effective(d).kv_memory.map(|m| format!("{} ({})", plan.serving_engine(d).name(), m.setting.name())))
        .collect();
    engines.dedup();
    (!engines.is_empty()).then(|| {
        format!(
            "--reserved-memory-gb does not size the KV cache under {}: the engine's own memory setting does; --gpu-memory-utilization changes it",
            engines.join(", ")
        )
    })
}

/// The `@VERSION` of `--serving-engine ENGINE@VERSION`.
fn engine_version(flag: Option<&str>) -> Result<Option<EngineVersion>, Error> {
    let Some((name, v)) = flag.and_then(|e| e.split_once('@')) else { return Ok(None) };
    if name.eq_ignore_ascii_case("msmodeling") {
        return Err(Error::rejected(
            "--serving-engine",
            v,
            "--serving-engine: msmodeling (the original tool's scheduler) has no releases; give it without @VERSION",
        ));
    }
    let parsed = if v.contains(['@', ' ']) { None } else { EngineVersion::parse(v) };
    parsed.map(Some).ok_or_else(|| {
        Error::rejected(
            "--serving-engine",
            v,
            format!("--serving-engine: `{v}` after `@` is not a version; give MAJOR.MINOR[.PATCH] (e.g. vllm@0.11)"),
        )
    })
}

/// Most `--max-batched-tokens` values one run sweeps (each is a whole search).
const MAX_BUDGET_VALUES: usize = 32;
/// Most prefill chunks (engine steps) the longest prompt may need under a token budget.
const MAX_CHUNKS: u64 = 1000;

/// Refuse token budgets that would make the simulation crawl: too many values, or a budget so
/// small that the longest prompt needs more than [`MAX_CHUNKS`] steps to prefill.
fn check_budget_work(budgets: &[u32], input: &Lengths) -> Result<(), Error> {
    if budgets.len() > MAX_BUDGET_VALUES {
        return Err(Error::invalid(
            "--max-batched-tokens",
            format!("({} values)", budgets.len()),
            format!("at most {MAX_BUDGET_VALUES} values are swept; each is a whole search"),
        ));
    }
    let longest = input.max_effective(0.0);
    if let Some(&b) = budgets.iter().find(|&&b| longest.div_ceil(b as u64) > MAX_CHUNKS) {
        return Err(Error::invalid(
            "--max-batched-tokens",
            b,
            format!(
                "a {longest}-token prompt would take {} prefill steps; at most {MAX_CHUNKS} are simulated, so give at least {} tokens",
                longest.div_ceil(b as u64),
                longest.div_ceil(MAX_CHUNKS)
            ),
        ));
    }
    Ok(())
}

/// `--arrival` with `--request-rate` and `--burstiness`; `loaded` is the trace of `--arrival
/// trace FILE`, already read.
fn arrival(raw: &RawArgs, loaded: Option<Trace>, warnings: &mut Warnings) -> Result<ArrivalProcess, Error> {
    let rate = |name: &str| -> Result<f64, Error> {
        match raw.request_rate {
            None => {
                Err(Error::requires("--arrival", "--request-rate", format!("--arrival {name} needs --request-rate (requests per second)")))
            }
            Some(r) if r <= 0.0 || r > 1e6 => Err(Error::invalid("--request-rate", r, "must be a positive rate up to 1000000 req/s")),
            Some(r) => Ok(r),
        }
    };
    let kind = raw.arrival.as_deref().map(|v| v[0].to_lowercase());
    match raw.trace_time_scale {
        Some(x) if kind.as_deref() != Some("trace") => {
            return Err(Error::requires("--trace-time-scale", "--arrival", format!("--trace-time-scale {x} needs --arrival trace FILE")))
        }
        Some(x) if !(x > 0.0 && x <= 1e6) => {
            return Err(Error::invalid("--trace-time-scale", x, "must be a positive factor up to 1000000 (below 1 = faster)"))
        }
        _ => {}
    }
    let Some(v) = raw.arrival.as_deref() else { return Ok(ArrivalProcess::Closed) };
    let kind = kind.unwrap_or_default();
    if kind != "trace" && v.len() > 1 {
        return Err(Error::invalid("--arrival", v.join(" "), "only `trace` takes a FILE"));
    }
    Ok(match kind.as_str() {
        "closed" => ArrivalProcess::Closed,
        "burst" => ArrivalProcess::Burst,
        "poisson" => ArrivalProcess::Poisson { rate: rate("poisson")? },
        "constant" => ArrivalProcess::Constant { rate: rate("constant")? },
        "gamma" => {
            let b = raw.burstiness.unwrap_or(1.0);
            if b <= 0.0 || b > 1000.0 {
                return Err(Error::invalid("--burstiness", b, "must be positive (1 = Poisson, below 1 = burstier), at most 1000"));
            }
            ArrivalProcess::Gamma { rate: rate("gamma")?, burstiness: b }
        }
        "trace" => {
            // `loaded` is there exactly when the FILE is.
            let (Some(f), Some(mut trace)) = (v.get(1), loaded) else {
                return Err(Error::missing(
                    "--arrival",
                    "--arrival trace needs a FILE (the tool's CSV or JSON Lines, an Azure LLM inference trace CSV, or Mooncake JSON Lines)",
                ));
            };
            if !trace.ignored_columns.is_empty() {
                warnings.push(format!(
                    "--arrival trace {f}: {} {} are not read (the tool reads {})",
                    if trace.format == TraceFormat::MooncakeJsonLines { "key(s)" } else { "column(s)" },
                    trace.ignored_columns.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", "),
                    match trace.format {
                        TraceFormat::AzureCsv => "TIMESTAMP, ContextTokens, GeneratedTokens",
                        TraceFormat::MooncakeJsonLines => "timestamp, input_length, output_length, hash_ids",
                        _ => "arrival_s, input_tokens, output_tokens, prefix_group, prefix_len",
                    }
                ));
            }
            if let Some(x) = raw.trace_time_scale {
                trace.scale_time(x)?;
            }
            ArrivalProcess::Trace(trace)
        }
        other => {
            return Err(Error::rejected(
                "--arrival",
                other,
                format!("--arrival `{other}` is not one of closed, burst, poisson, constant, gamma, trace FILE"),
            ))
        }
    })
}

/// A device whose `kernel_system` no built-in table set has would be priced by the roofline
/// alone: refused, naming the systems there are.
fn builtin_kernel_systems(devices: &[crate::hardware::DeviceProfile]) -> Result<(), Error> {
    let known: std::collections::BTreeSet<&str> = crate::hardware::kernels::builtin::available().map(|(s, _)| s).collect();
    match devices.iter().find(|d| !d.kernel_system.is_empty() && !known.contains(d.kernel_system.as_str())) {
        None => Ok(()),
        Some(d) => Err(Error::rejected(
            "--device-file",
            &d.kernel_system,
            format!(
                "device `{}`: field `kernel_system` is `{}`, which no built-in kernel table set has ({}); leave it empty (or give --performance-model analytic) for the roofline alone, or --performance-model profiling --profiling-database-path DIR with that system's tables",
                d.name,
                d.kernel_system,
                known.into_iter().collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// `--performance-model`: the built-in kernel tables where they ship (the default), the
/// roofline alone (`analytic`), or tables read from a database (`profiling`, which needs
/// `--profiling-database-path DIR`), loaded here for each device under its serving engine.
pub(crate) fn validate_performance_model(
    raw: &RawArgs,
    engine: EngineKind,
    devices: &[crate::hardware::DeviceProfile],
    sim: &crate::plan::SimOptions,
    engines: &mut crate::hardware::calibration::EngineProfiles,
) -> Result<(), Error> {
    use crate::hardware::kernels::{DatabaseTables, KernelChoice};
    use crate::quant::NamedEnum;
    let model = raw.performance_model.as_deref().map(str::to_lowercase);
    if raw.profiling_database_path.is_some() && model.as_deref() != Some("profiling") {
        return Err(Error::requires(
            "--profiling-database-path",
            "--performance-model",
            "--profiling-database-path is read only with --performance-model profiling",
        ));
    }
    engines.kernels = match model.as_deref() {
        None => {
            // The analytic engine never reads kernel tables.
            if engine != EngineKind::Analytic {
                builtin_kernel_systems(devices)?;
            }
            KernelChoice::Builtin
        }
        Some("analytic") => KernelChoice::Roofline,
        Some("profiling") => {
            let Some(dir) = &raw.profiling_database_path else {
                return Err(Error::requires(
                    "--performance-model",
                    "--profiling-database-path",
                    "--performance-model profiling requires --profiling-database-path DIR",
                ));
            };
            let engine_of = |d: &crate::hardware::DeviceProfile| {
                sim.serving_engine.unwrap_or_else(|| crate::plan::ServingEngine::default_for(d)).name()
            };
            let wanted: Vec<(&crate::hardware::DeviceProfile, &str)> = devices.iter().map(|d| (d, engine_of(d))).collect();
            // Another engine's kernels an engine runs (TensorRT-LLM's Triton experts on Hopper).
            let borrowed: Vec<(&crate::hardware::DeviceProfile, &str)> =
                wanted.iter().filter_map(|(d, e)| engines.get(e).mxfp4_bf16_moe.as_ref().map(|b| (*d, b.tables.as_str()))).collect();
            let db = DatabaseTables::load(dir, &wanted, &borrowed)
                .map_err(|e| Error::rejected("--profiling-database-path", dir.display().to_string(), e.to_string()))?;
            KernelChoice::Database(std::sync::Arc::new(db))
        }
        Some(o) => return Err(Error::invalid("--performance-model", o, "not one of analytic, profiling")),
    };
    Ok(())
}

/// `--measure`: a closed loop is measured over the whole run exactly when it is a benchmark run
/// (`--num-requests`); an endless closed loop has no whole run, and a burst is one pass anyway.
fn validate_measure(raw: &RawArgs, arrival: &ArrivalProcess) -> Result<crate::sim::Measure, Error> {
    use crate::sim::Measure;
    let Some(m) = raw.measure.as_deref() else {
        return Ok(if matches!(arrival, ArrivalProcess::Closed) && raw.num_requests.is_some() {
            Measure::WholeRun
        } else {
            Measure::Steady
        });
    };
    let m = Measure::parse_choice(m).map_err(|e| Error::choice("--measure", e))?;
    match (arrival, m, raw.num_requests.is_some()) {
        (ArrivalProcess::Closed, Measure::WholeRun, false) => Err(Error::requires(
            "--measure",
            "--num-requests",
            "--measure whole-run with the closed loop needs --num-requests N (an endless loop has no whole run)",
        )),
        (ArrivalProcess::Closed, Measure::Steady, true) => Err(Error::conflict(
            "--measure",
            "--num-requests",
            "--measure steady conflicts with --num-requests on the closed loop: a benchmark run of N requests is measured whole",
        )),
        (ArrivalProcess::Burst, _, _) => {
            Err(Error::invalid("--measure", m.name(), "does not apply to --arrival burst (one pass, always measured whole)"))
        }
        _ => Ok(m),
    }
}
