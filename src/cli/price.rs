//! `throughput-optimizer price`: the device and host time of one engine step of a given shape,
//! operator by operator, without a search. The subcommand has its own arguments; `main` hands
//! it everything after `price`. Model, device, quantization, engine and calibration are
//! validated by the planner's own validators (through a plan of the same flags), so they take
//! every form a planning run takes.

use super::args::RawArgs;
use super::plan::PlanError;
use crate::outcome::price::{PrefillSpec, StepSpec};
use clap::Parser;
use std::path::PathBuf;

const ABOUT: &str = "\
Price one engine step of a deployment: every operator's time (from the device's measured kernel \
tables where they exist, else the roofline), the step's device time, the engine's host time and \
the step time. A decode of B sequences at context L and prefills of N prompts of P new tokens \
(after C cached) in one step are priced as the engine runs a mixed step: one pass of the GEMMs \
over all its tokens. No memory check: a step can be priced for a deployment that would not fit.";

#[derive(Debug, Clone, Parser)]
#[command(name = "throughput-optimizer price", bin_name = "throughput-optimizer price", about = ABOUT)]
pub struct PriceArgs {
    /// Hugging Face id (the built-in catalog, or a republished checkpoint of a catalog network
    /// such as `Qwen/Qwen3-235B-A22B-FP8`), a directory with a config.json, or a config file.
    #[arg(value_name = "MODEL")]
    pub model: String,
    /// Device profile (see --list-devices on a planning run).
    #[arg(long)]
    pub device: String,
    /// Extra device profiles (YAML), as on a planning run.
    #[arg(long, value_name = "FILE")]
    pub device_file: Vec<PathBuf>,
    /// Tensor-parallel ranks of one attention replica. [default: 1]
    #[arg(long, value_name = "N")]
    pub tp: Option<u64>,
    /// Expert-parallel ranks (MoE models); the MoE TP is (tp × dp) / ep. [default: 1]
    #[arg(long, value_name = "N")]
    pub ep: Option<u64>,
    /// Attention data-parallel ranks: each holds the step's sequences, and MoE routing spreads
    /// all dp × B tokens over the EP ranks. [default: 1]
    #[arg(long, value_name = "N")]
    pub dp: Option<u64>,
    /// B sequences each emitting one token at context (KV length) L: `32x2048`. Repeatable.
    #[arg(long, value_name = "BxL")]
    pub decode: Vec<String>,
    /// N prompts of P new tokens, or a chunk of P new tokens after C cached: `2x2048`,
    /// `1x2048@6144`. Repeatable.
    #[arg(long, value_name = "NxP[@C]")]
    pub prefill: Vec<String>,
    /// Quantization of the linears, as on a planning run. [default: the checkpoint's own]
    #[arg(long, value_name = "ACTION")]
    pub quantize_linear_action: Option<String>,
    /// Quantization of attention, dense-MLP and shared-expert linears, as on a planning run.
    #[arg(long, value_name = "ACTION")]
    pub quantize_non_expert_linear_action: Option<String>,
    /// KV-cache quantization (DISABLED, INT8, FP8). [default: DISABLED, the model's dtype]
    #[arg(long, value_name = "ACTION")]
    pub quantize_attention_action: Option<String>,
    /// MXFP4 group size, as on a planning run.
    #[arg(long, value_name = "N")]
    pub mxfp4_group_size: Option<u32>,
    /// ENGINE or ENGINE@VERSION (vllm, sglang, trtllm, msmodeling). [default: vllm on NVIDIA,
    /// msmodeling elsewhere]
    #[arg(long, value_name = "ENGINE")]
    pub serving_engine: Option<String>,
    /// Engine profiles, as on a planning run (`none`, or a YAML file per engine).
    #[arg(long, value_name = "FILE|none", action = clap::ArgAction::Append)]
    pub calibration: Vec<String>,
    /// `analytic` prices every operator on the roofline; `profiling` reads kernel tables from
    /// --profiling-database-path. [default: the built-in tables where they exist]
    #[arg(long, value_name = "MODEL")]
    pub performance_model: Option<String>,
    /// A kernel database directory (NVIDIA AIConfigurator's layout, or scripts/profile_kernels.py's).
    #[arg(long, visible_alias = "profiling-database", value_name = "DIR")]
    pub profiling_database_path: Option<PathBuf>,
    /// `sustained`: the step repeated back to back, at the clocks a power-limited device
    /// (H100, H200: measured) holds under that load; `burst`: after idle, at full clocks, as
    /// the kernel tables were timed. [default: sustained]
    #[arg(long, value_name = "CLOCKS")]
    pub clocks: Option<String>,
    /// text or json. [default: text]
    #[arg(long, value_name = "FORMAT")]
    pub output: Option<String>,
}

/// Most sequences, prompts, tokens or GPUs one priced step may name.
const MAX_COUNT: u64 = 1 << 24;
/// Most tokens of context one sequence may hold.
const MAX_CONTEXT: u64 = 1 << 26;

/// A whole number written as digits alone (no sign, no blank: `+1` or ` 1` are not read as 1).
fn digits(s: &str) -> Option<u64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// `BxL` (or `NxP`) of `shown` (the flag's whole value, echoed in errors): two counts.
fn pair(flag: &str, s: &str, shown: &str) -> Result<(u64, u64), PlanError> {
    let bad = || PlanError::invalid(flag, shown, "not of the form NxM with whole numbers N, M ≥ 1 (e.g. 32x2048)");
    let (a, b) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (a, b) = (digits(a).ok_or_else(bad)?, digits(b).ok_or_else(bad)?);
    if a == 0 || b == 0 {
        return Err(bad());
    }
    if a > MAX_COUNT || b > MAX_CONTEXT {
        return Err(PlanError::invalid(flag, shown, format!("at most {MAX_COUNT} sequences of at most {MAX_CONTEXT} tokens")));
    }
    Ok((a, b))
}

/// The step's decodes and prefills.
fn step_spec(args: &PriceArgs) -> Result<StepSpec, PlanError> {
    let mut step = StepSpec::default();
    for d in &args.decode {
        let (seqs, context) = pair("--decode", d, d)?;
        step.decodes.push((seqs, context));
    }
    for p in &args.prefill {
        let (shape, cached) = match p.split_once('@') {
            Some((a, c)) => {
                let cached = digits(c).ok_or_else(|| {
                    PlanError::invalid("--prefill", p, "the cached tokens after `@` must be a whole number (e.g. 1x2048@6144)")
                })?;
                (a, cached)
            }
            None => (p.as_str(), 0),
        };
        let (prompts, tokens) = pair("--prefill", shape, p)?;
        if cached + tokens > MAX_CONTEXT {
            return Err(PlanError::invalid("--prefill", p, format!("a prompt holds at most {MAX_CONTEXT} tokens")));
        }
        step.prefills.push(PrefillSpec { prompts, tokens, cached });
    }
    if step.decodes.is_empty() && step.prefills.is_empty() {
        return Err(PlanError::requires("price", "--decode", "price needs at least one --decode BxL or --prefill NxP"));
    }
    Ok(step)
}

fn layout_value(flag: &str, v: Option<u64>) -> Result<u32, PlanError> {
    match v {
        None => Ok(1),
        Some(n) if (1..=4096).contains(&n) => Ok(n as u32),
        Some(n) => Err(PlanError::invalid(flag, n.to_string(), "a number of ranks from 1 to 4096")),
    }
}

/// The planner's flags this command shares, as a planning command line.
fn plan_argv(args: &PriceArgs, gpus: u32) -> Vec<String> {
    let mut argv: Vec<String> =
        ["throughput-optimizer", "--input-length", "1", "--output-length", "2"].iter().map(|s| s.to_string()).collect();
    argv.push(format!("--model-id={}", args.model));
    argv.push(format!("--device={}", args.device));
    argv.push(format!("--num-devices={gpus}"));
    let flags: [(&str, &Option<String>); 5] = [
        ("--quantize-linear-action", &args.quantize_linear_action),
        ("--quantize-non-expert-linear-action", &args.quantize_non_expert_linear_action),
        ("--quantize-attention-action", &args.quantize_attention_action),
        ("--serving-engine", &args.serving_engine),
        ("--performance-model", &args.performance_model),
    ];
    for (flag, v) in flags {
        if let Some(v) = v {
            argv.push(format!("{flag}={v}"));
        }
    }
    if let Some(g) = args.mxfp4_group_size {
        argv.push(format!("--mxfp4-group-size={g}"));
    }
    if let Some(p) = &args.profiling_database_path {
        argv.push(format!("--profiling-database-path={}", p.display()));
    }
    for f in &args.device_file {
        argv.push(format!("--device-file={}", f.display()));
    }
    for c in &args.calibration {
        argv.push(format!("--calibration={c}"));
    }
    argv
}

/// The layout of `tp × dp` GPUs with `ep` expert-parallel ranks, checked against the model.
fn layout(plan: &crate::plan::Plan, tp: u32, ep: u32, dp: u32, args: &PriceArgs) -> Result<crate::cost::ParallelConfig, PlanError> {
    let gpus = tp * dp;
    let m = &plan.model;
    let experts = m.layers.iter().find_map(|g| match g.mlp {
        crate::model::Mlp::Moe { experts, .. } => Some(experts),
        _ => None,
    });
    match experts {
        None if ep > 1 => return Err(PlanError::invalid("--ep", ep.to_string(), format!("{} is a dense model: EP must be 1", args.model))),
        Some(e) if ep > e => return Err(PlanError::invalid("--ep", ep.to_string(), format!("at most the model's {e} experts"))),
        Some(e) if !e.is_multiple_of(ep) => {
            return Err(PlanError::invalid("--ep", ep.to_string(), format!("must divide the model's {e} experts")));
        }
        _ if !gpus.is_multiple_of(ep) => {
            return Err(PlanError::invalid("--ep", ep.to_string(), format!("must divide the GPUs, tp × dp = {gpus}")));
        }
        _ => {}
    }
    let par = crate::cost::ParallelConfig {
        num_devices: gpus,
        tp,
        dp,
        ep,
        moe_tp: if experts.is_some() { gpus / ep } else { 1 },
        moe_dp: 1,
        dcp: 1,
        pp: 1,
    };
    // The layouts a planning run refuses (heads, KV heads, widths TP must divide) are refused
    // here too: no engine shards a model that way.
    match crate::search::candidates::model_limit(m, &par, plan.workload.images.is_some()) {
        Some(why) => Err(PlanError::invalid("--tp", tp.to_string(), why)),
        None => Ok(par),
    }
}

/// What `price` prints: the rendered step on stdout, and the plan's warnings (a flag that does
/// not apply, a precision priced as the checkpoint stores it) for stderr.
pub struct PriceOutput {
    pub text: String,
    pub warnings: Vec<String>,
}

/// Parse, validate, price: the rendered output, or the first error (nothing is printed then).
pub fn run(args: &PriceArgs) -> Result<PriceOutput, PlanError> {
    let json = match args.output.as_deref().map(str::to_lowercase).as_deref() {
        None | Some("text") => false,
        Some("json") => true,
        Some(o) => return Err(PlanError::invalid("--output", o, "not one of text, json")),
    };
    let sustained = match args.clocks.as_deref().map(str::to_lowercase).as_deref() {
        None | Some("sustained") => true,
        Some("burst") => false,
        Some(c) => return Err(PlanError::invalid("--clocks", c, "not one of sustained, burst")),
    };
    let (tp, ep, dp) = (layout_value("--tp", args.tp)?, layout_value("--ep", args.ep)?, layout_value("--dp", args.dp)?);
    let step = step_spec(args)?;
    let raw = RawArgs::try_parse_from(plan_argv(args, tp * dp)).map_err(|e| PlanError::Args(super::scenario::first_line(&e)))?;
    let mut plan = super::plan::validate_plan(raw)?;
    // A `--calibration` of another engine than the one priced would be read and never used.
    super::validate::check_calibration_engines(&plan)?;
    if args.quantize_linear_action.is_none() && args.quantize_non_expert_linear_action.is_none() {
        // The checkpoint's own precision, whatever the planner's default.
        let checkpoint = crate::quant::QuantConfig::checkpoint(&plan.model);
        // The KV cache as the flag says, else as the checkpoint stores it.
        let kv = if args.quantize_attention_action.is_some() { plan.quant.kv } else { checkpoint.kv };
        plan.quant = crate::quant::QuantConfig { kv, mxfp4_group_size: plan.quant.mxfp4_group_size, ..checkpoint };
    }
    let par = layout(&plan, tp, ep, dp, args)?;
    let priced = crate::search::price::price(&plan, par, &step, sustained);
    let text = if json { crate::report::price::json(&priced).map_err(PlanError::from)? } else { crate::report::price::text(&priced) };
    // The planner's note on its default EP search range is about a search; price prices the
    // one layout its flags give.
    let warnings = plan.warnings.into_iter().filter(|w| !w.contains(super::validate::DEFAULT_EP_RANGE_NOTE)).collect();
    Ok(PriceOutput { text, warnings })
}
