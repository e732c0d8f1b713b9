//! The guided mode (`--interactive`): ask only for what the command line left out, in the
//! order of the planning workflow (core inputs, deployment mode, SLO, then MoE search space,
//! prefix cache, MTP, image size and quantization — offered, never applied silently), show the
//! equivalent command with a parameter summary and validation warnings, ask for confirmation,
//! run, and summarise the result with the disclaimer.
//!
//! Answering `b` (or `back`) returns to the previous question, the confirmation included: the
//! accepted answers are kept in order, the last one is dropped, and the interview restarts from
//! its beginning replaying the rest silently, so every later question depends on the answers
//! exactly as a fresh session would (a changed mode asks the mode's own questions).
//!
//! It reads answers from any `BufRead` and writes to any `Write`, so a session can be scripted
//! (answers piped on stdin) and tested without a terminal. It only ever runs when asked.

use crate::cli::{self, Command, PlanError, RawArgs};
use crate::model;
use crate::outcome::{Report, DISCLAIMER};
use crate::plan::{Mode, Plan};
use std::collections::VecDeque;
use std::io::{BufRead, Write};

/// Attempts at one question before the session gives up.
const MAX_ATTEMPTS: u32 = 3;

/// Longest answer line read, in bytes (paths and lists of numbers fit easily).
pub const MAX_ANSWER_BYTES: u64 = 4096;

/// The answers that step back to the previous question.
const BACK: [&str; 2] = ["b", "back"];

/// Why an undoable question did not yield a value.
#[derive(Debug)]
pub enum Stop {
    /// The user asked to return to the previous question.
    Back,
    Fail(PlanError),
}

impl From<PlanError> for Stop {
    fn from(e: PlanError) -> Self {
        Stop::Fail(e)
    }
}

/// A question-and-answer channel.
pub struct Prompter<R: BufRead, W: Write> {
    input: R,
    out: W,
    /// Every answer accepted by an undoable question, in order (after defaults are applied).
    history: Vec<String>,
    /// Answers fed back, without asking, while the interview is replayed after a step back.
    replay: VecDeque<String>,
}

impl<R: BufRead, W: Write> Prompter<R, W> {
    pub fn new(input: R, out: W) -> Self {
        Prompter { input, out, history: Vec::new(), replay: VecDeque::new() }
    }

    /// Print a line; silent while replaying, since those questions were already shown.
    pub fn say(&mut self, text: &str) {
        if self.replay.is_empty() {
            let _ = writeln!(self.out, "{text}");
        }
    }

    /// Forget the last accepted answer and queue the others for a replay of the interview.
    fn step_back(&mut self) {
        if self.history.pop().is_none() {
            self.say("  This is the first question: there is nothing to go back to.");
        }
        self.replay = self.history.drain(..).collect();
    }

    /// An undoable question: `b` or `back` stops with [`Stop::Back`]; an accepted answer is
    /// recorded. While replaying, the recorded answer is taken without asking (an answer that
    /// no longer parses, a file deleted meanwhile, ends the replay and the question is asked).
    pub fn answer<T>(&mut self, question: &str, default: Option<&str>, parse: impl Fn(&str) -> Result<T, String>) -> Result<T, Stop> {
        if let Some(a) = self.replay.pop_front() {
            if let Ok(v) = parse(&a) {
                self.history.push(a);
                return Ok(v);
            }
            self.replay.clear();
        }
        let mut accepted = None;
        let v = self.ask_with(question, default, |a| {
            if BACK.contains(&a.to_lowercase().as_str()) {
                return Ok(None);
            }
            let v = parse(a)?;
            accepted = Some(a.to_string());
            Ok(Some(v))
        });
        match (v?, accepted) {
            (Some(v), Some(a)) => {
                self.history.push(a);
                Ok(v)
            }
            _ => Err(Stop::Back),
        }
    }

    /// A yes/no question that can step back.
    pub fn yes_no_step(&mut self, question: &str, default: bool) -> Result<bool, Stop> {
        self.answer(question, Some(if default { "y" } else { "n" }), yes_no_answer)
    }

    fn read_line(&mut self) -> Result<String, PlanError> {
        let mut line = String::new();
        // At most MAX_ANSWER_BYTES + 1 bytes are read: an endless line (`< /dev/zero`) is refused.
        match std::io::Read::take(&mut self.input, MAX_ANSWER_BYTES + 1).read_line(&mut line) {
            Ok(0) => Err(PlanError::Interactive("the input ended before the session was complete".into())),
            Ok(n) if n as u64 > MAX_ANSWER_BYTES => {
                Err(PlanError::Interactive(format!("an answer is longer than {MAX_ANSWER_BYTES} bytes; answers are one short line")))
            }
            Ok(_) => Ok(line.trim().to_string()),
            Err(e) => Err(PlanError::Io { what: "--interactive: cannot read the answer".into(), message: e.to_string() }),
        }
    }

    /// Ask until `parse` accepts the answer; an empty answer takes `default` when there is one.
    pub fn ask<T>(&mut self, question: &str, default: Option<&str>, parse: impl Fn(&str) -> Result<T, String>) -> Result<T, PlanError> {
        self.ask_with(question, default, parse)
    }

    fn ask_with<T>(
        &mut self,
        question: &str,
        default: Option<&str>,
        mut parse: impl FnMut(&str) -> Result<T, String>,
    ) -> Result<T, PlanError> {
        for _ in 0..MAX_ATTEMPTS {
            match default {
                Some(d) => {
                    let _ = write!(self.out, "{question} [{d}]: ");
                }
                None => {
                    let _ = write!(self.out, "{question}: ");
                }
            }
            let _ = self.out.flush();
            let mut answer = self.read_line()?;
            let _ = writeln!(self.out);
            if answer.is_empty() {
                if let Some(d) = default {
                    answer = d.to_string();
                }
            }
            match parse(&answer) {
                Ok(v) => return Ok(v),
                Err(e) => self.say(&format!("  {e}")),
            }
        }
        Err(PlanError::Interactive(format!("no valid answer to \"{question}\" after {MAX_ATTEMPTS} attempts")))
    }

    pub fn yes_no(&mut self, question: &str, default: bool) -> Result<bool, PlanError> {
        self.ask(question, Some(if default { "y" } else { "n" }), yes_no_answer)
    }
}

fn yes_no_answer(a: &str) -> Result<bool, String> {
    match a.to_lowercase().as_str() {
        "y" | "yes" | "是" | "是的" => Ok(true),
        "n" | "no" | "否" | "不" => Ok(false),
        _ => Err("answer y or n".into()),
    }
}

fn positive(a: &str) -> Result<u32, String> {
    match a.parse::<u32>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(format!("`{a}` is not a positive whole number")),
    }
}

fn limit(a: &str) -> Result<f64, String> {
    match a.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{a}` is not a positive number of milliseconds")),
    }
}

/// What the user said about the deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeAnswer {
    Aggregation,
    /// PD分离 without saying which kind yet.
    Disaggregated,
    Ratio,
}

/// Map the workflow's domain terms to a mode: PD混部 / PD聚合 / 聚合部署 → aggregation,
/// PD分离 → disaggregated (phase capability or ratio planning, asked next), PD ratio /
/// P/D配比 / 实例配比 → ratio planning.
pub fn parse_mode(a: &str) -> Result<ModeAnswer, String> {
    let n = a.trim().to_lowercase().replace([' ', '-', '_'], "");
    match n.as_str() {
        "1" | "aggregation" | "aggregated" | "pdmixed" | "mixed" | "pd混部" | "pd聚合" | "聚合部署" | "混部" | "聚合" => {
            Ok(ModeAnswer::Aggregation)
        }
        "2" | "disaggregation" | "disaggregated" | "disagg" | "pd分离" | "分离" => Ok(ModeAnswer::Disaggregated),
        "3" | "ratio" | "pdratio" | "p/dratio" | "p/d配比" | "pd配比" | "实例配比" | "配比" => Ok(ModeAnswer::Ratio),
        _ => Err(format!("`{a}` is not a deployment mode: answer 1 (aggregation), 2 (disaggregation) or 3 (P/D ratio planning)")),
    }
}

/// A value in the summary, and where it came from.
struct Param {
    name: &'static str,
    value: String,
    source: &'static str,
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Ask for what `raw` leaves out; returns the complete argv (without `--interactive`) and the
/// parameter summary. A step back restarts the interview, replaying the answers kept.
pub fn complete_args<R: BufRead, W: Write>(
    p: &mut Prompter<R, W>,
    raw: &RawArgs,
    argv: &[String],
) -> Result<(Vec<String>, Vec<String>), PlanError> {
    loop {
        match interview(p, raw, argv) {
            Ok(done) => return Ok(done),
            Err(Stop::Back) => p.step_back(),
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// One pass of the interview, from the first question.
fn interview<R: BufRead, W: Write>(p: &mut Prompter<R, W>, raw: &RawArgs, argv: &[String]) -> Result<(Vec<String>, Vec<String>), Stop> {
    let args: Vec<String> = argv.iter().filter(|a| *a != "--interactive").cloned().collect();
    let mut s = Interview { p, raw, args, summary: Vec::new() };
    s.p.say(
        "Guided throughput planning. Press Enter to take the value in brackets; answer b (or back) to return to the previous question.",
    );

    // ---- core inputs ----
    let model_id = s.model()?;
    let (arch, _) = model::resolve_model(&model_id).map_err(PlanError::from)?;
    let devices = s.devices()?;
    let mode = s.mode()?;
    s.device_counts(&mode)?;
    s.lengths()?;
    // ---- SLO ----
    s.slo(&mode)?;
    // ---- search space for MoE ----
    s.moe_search_space(&arch)?;
    // ---- prefix cache, MTP, images ----
    s.prefix_cache()?;
    s.mtp(&arch)?;
    s.image_size(&arch)?;
    // ---- quantization: offered, not applied silently ----
    s.quantization(&arch, &devices)?;
    s.compile()?;
    let lines = s.summary.iter().map(|param| format!("  {:<22} {:<40} ({})", param.name, param.value, param.source)).collect();
    Ok((s.args, lines))
}

/// One guided session's progress: the argv being completed and the summary of what was given.
/// Each step asks only when the command line left its inputs out.
struct Interview<'a, R: BufRead, W: Write> {
    p: &'a mut Prompter<R, W>,
    raw: &'a RawArgs,
    args: Vec<String>,
    summary: Vec<Param>,
}

impl<R: BufRead, W: Write> Interview<'_, R, W> {
    fn push(&mut self, flag: &str, vals: Vec<String>) {
        self.args.push(flag.to_string());
        self.args.extend(vals);
    }

    fn note(&mut self, name: &'static str, value: String, source: &'static str) {
        self.summary.push(Param { name, value, source });
    }

    /// The model id, from the command line or asked (then inserted as the positional argument).
    fn model(&mut self) -> Result<String, Stop> {
        match self.raw.model_id.clone().or(self.raw.model_id_flag.clone()) {
            Some(m) => {
                self.note("model", m.clone(), "command line");
                Ok(m)
            }
            None => {
                let m: String = self.p.answer("Model (a catalog id such as Qwen/Qwen3-32B, or a path to a config.json)", None, |a| {
                    model::resolve_model(a).map(|_| a.to_string()).map_err(|e| e.to_string())
                })?;
                self.args.insert(1, m.clone());
                self.note("model", m.clone(), "user-provided");
                Ok(m)
            }
        }
    }

    /// The device profiles of the run (from the command line, or asked).
    fn devices(&mut self) -> Result<Vec<String>, Stop> {
        if !self.raw.device.is_empty() {
            self.note("devices", self.raw.device.join(" "), "command line");
            return Ok(self.raw.device.clone());
        }
        let names = crate::hardware::DeviceRegistry::builtin().names().iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let devs: Vec<String> =
            self.p.answer("Device profile(s), space-separated (several = cross-hardware comparison)", Some("TEST_DEVICE"), |a| {
                let v: Vec<String> = a.split_whitespace().map(str::to_string).collect();
                let reg = crate::hardware::DeviceRegistry::builtin();
                for d in &v {
                    reg.get(d).map_err(|e| e.to_string())?;
                }
                if v.is_empty() {
                    return Err(format!("name at least one of {}", names.join(", ")));
                }
                Ok(v)
            })?;
        self.note("devices", devs.join(" "), "user-provided");
        self.push("--device", devs.clone());
        Ok(devs)
    }

    /// The deployment mode; PD分离 is either phase capability evaluation or ratio planning.
    fn mode(&mut self) -> Result<ModeAnswer, Stop> {
        let (raw, p) = (self.raw, &mut *self.p);
        let mode = if raw.enable_optimize_prefill_decode_ratio {
            ModeAnswer::Ratio
        } else if raw.disagg {
            ModeAnswer::Disaggregated
        } else {
            // The original workflow's names (PD混部 / PD聚合 / 聚合部署, PD分离, P/D配比) are
            // accepted answers too (`parse_mode`).
            p.say("Deployment mode: 1) aggregation (prefill and decode on the same instances)");
            p.say("                 2) disaggregation (prefill and decode on separate instances)");
            p.say("                 3) P/D ratio (plan the prefill/decode instance ratio)");
            p.answer("Mode", Some("1"), parse_mode)?
        };
        let mode = if mode == ModeAnswer::Disaggregated && !raw.disagg {
            p.say("Disaggregation: 1) evaluate the prefill and decode phases separately (--disagg)");
            p.say("        2) give devices per P and D instance and compute the matched ratio");
            let k = p.answer("Which", Some("1"), |a| match a {
                "1" => Ok(ModeAnswer::Disaggregated),
                "2" => Ok(ModeAnswer::Ratio),
                _ => Err("answer 1 or 2".into()),
            })?;
            if k == ModeAnswer::Disaggregated {
                self.args.push("--disagg".into());
            }
            k
        } else {
            mode
        };
        if mode == ModeAnswer::Ratio && !raw.enable_optimize_prefill_decode_ratio {
            self.args.push("--enable-optimize-prefill-decode-ratio".into());
        }
        Ok(mode)
    }

    /// Ratio planning: devices per P and D instance and an optional total; otherwise the total.
    fn device_counts(&mut self, mode: &ModeAnswer) -> Result<(), Stop> {
        let raw = self.raw;
        if *mode == ModeAnswer::Ratio {
            if raw.prefill_devices_per_instance.is_none() {
                let v = self.p.answer("Devices per prefill instance", None, positive)?;
                self.push("--prefill-devices-per-instance", vec![v.to_string()]);
            }
            if raw.decode_devices_per_instance.is_none() {
                let v = self.p.answer("Devices per decode instance", None, positive)?;
                self.push("--decode-devices-per-instance", vec![v.to_string()]);
            }
            if raw.num_devices.is_none() {
                let v: Option<u32> = self.p.answer("Total devices to split into P and D instances (Enter to skip)", Some("skip"), |a| {
                    if a == "skip" {
                        Ok(None)
                    } else {
                        positive(a).map(Some)
                    }
                })?;
                if let Some(v) = v {
                    self.push("--num-devices", vec![v.to_string()]);
                }
            }
        } else if raw.num_devices.is_none() {
            let v = self.p.answer("Total number of devices (the same count applies to every device profile)", Some("8"), positive)?;
            self.note("num_devices", v.to_string(), "user-provided");
            self.push("--num-devices", vec![v.to_string()]);
        }
        Ok(())
    }

    /// Input (or a length distribution) and output lengths.
    fn lengths(&mut self) -> Result<(), Stop> {
        if self.raw.input_length.is_none() && self.raw.length_distribution.is_none() {
            let v: String = self.p.answer("Input (prompt) length in tokens, or a length-distribution YAML file", None, |a| {
                if a.parse::<u64>().is_ok_and(|v| v > 0) || std::path::Path::new(a).is_file() {
                    Ok(a.to_string())
                } else {
                    Err(format!("`{a}` is neither a positive number of tokens nor an existing file"))
                }
            })?;
            self.note("input_length", v.clone(), "user-provided");
            self.push("--input-length", vec![v]);
        }
        if self.raw.output_length.is_none() {
            let v = self.p.answer("Output length in tokens", None, positive)?;
            self.note("output_length", v.to_string(), "user-provided");
            self.push("--output-length", vec![v.to_string()]);
        }
        Ok(())
    }

    /// Which latency limits apply (by mode), then their values.
    fn slo(&mut self, mode: &ModeAnswer) -> Result<(), Stop> {
        if self.raw.ttft_limits.is_some() || self.raw.tpot_limits.is_some() {
            return Ok(());
        }
        let p = &mut *self.p;
        let (want_ttft, want_tpot) = match mode {
            ModeAnswer::Disaggregated => {
                let k = p.answer("Run which phases: 1) prefill only (TTFT), 2) decode only (TPOT), 3) both", Some("3"), |a| match a {
                    "1" => Ok((true, false)),
                    "2" => Ok((false, true)),
                    "3" => Ok((true, true)),
                    _ => Err("answer 1, 2 or 3".into()),
                })?;
                if k.0 && k.1 {
                    p.say("  Both limits given: the prefill and the decode searches run separately.");
                }
                k
            }
            ModeAnswer::Ratio => (true, true),
            ModeAnswer::Aggregation => p.answer("SLO target: 1) TTFT, 2) TPOT, 3) both", Some("2"), |a| match a {
                "1" => Ok((true, false)),
                "2" => Ok((false, true)),
                "3" => Ok((true, true)),
                _ => Err("answer 1, 2 or 3".into()),
            })?,
        };
        if want_ttft {
            let v = self.p.answer("TTFT limit in ms", None, limit)?;
            self.note("ttft_limit_ms", v.to_string(), "user-provided");
            self.push("--ttft-limits", vec![v.to_string()]);
        }
        if want_tpot {
            let v = self.p.answer("TPOT limit in ms", None, limit)?;
            self.note("tpot_limit_ms", v.to_string(), "user-provided");
            self.push("--tpot-limits", vec![v.to_string()]);
        }
        Ok(())
    }

    /// For a MoE model with no search flags: TP only, or TP, EP and MoE-DP.
    fn moe_search_space(&mut self, arch: &model::ModelArch) -> Result<(), Stop> {
        let raw = self.raw;
        let asked = arch.is_moe() && raw.ep_sizes.is_none() && raw.moe_dp_sizes.is_none() && raw.tp_sizes.is_none();
        if !asked {
            return Ok(());
        }
        let all =
            self.p.answer(
                "MoE model: search 1) TP only (recommended for a first run) or 2) TP, EP and MoE-DP",
                Some("1"),
                |a| match a {
                    "1" => Ok(false),
                    "2" => Ok(true),
                    _ => Err("answer 1 or 2".into()),
                },
            )?;
        if all {
            for f in ["--tp-sizes", "--ep-sizes", "--moe-dp-sizes"] {
                self.args.push(f.into());
            }
            self.note("search", "TP x EP x MoE-DP (powers of two)".into(), "user-provided");
        } else {
            self.note("search", "TP only (powers of two)".into(), "explicit heuristic: narrow first run");
        }
        Ok(())
    }

    fn prefix_cache(&mut self) -> Result<(), Stop> {
        if self.raw.prefix_cache_hit_rate.is_none() && self.p.yes_no_step("Is prefix caching enabled?", false)? {
            let v: f64 = self.p.answer("Prefix cache hit rate in [0, 1)", None, |a| match a.parse::<f64>() {
                Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
                _ => Err(format!("`{a}` is not in the valid range [0, 1)")),
            })?;
            self.note("prefix_cache_hit_rate", v.to_string(), "user-provided");
            self.push("--prefix-cache-hit-rate", vec![v.to_string()]);
        }
        Ok(())
    }

    /// MTP draft tokens and acceptance rates, offered when the model ships MTP layers.
    fn mtp(&mut self, arch: &model::ModelArch) -> Result<(), Stop> {
        let offered = self.raw.num_mtp_tokens.is_none() && arch.mtp.is_some();
        if !offered || !self.p.yes_no_step(&format!("{} ships MTP layers. Is MTP enabled?", arch.id), false)? {
            return Ok(());
        }
        let k = self.p.answer("Draft tokens per step (1-5)", Some("1"), |a| match a.parse::<u32>() {
            Ok(v) if (1..=5).contains(&v) => Ok(v),
            _ => Err("answer a number from 1 to 5".into()),
        })?;
        self.push("--num-mtp-tokens", vec![k.to_string()]);
        let rates: Vec<String> = self.p.answer("Acceptance rate of each draft position", Some("0.9 0.6 0.4 0.2"), |a| {
            let v: Result<Vec<f64>, _> = a.split_whitespace().map(str::parse::<f64>).collect();
            match v {
                Ok(v) if !v.is_empty() && v.iter().all(|r| (0.0..=1.0).contains(r)) => Ok(v.iter().map(|r| r.to_string()).collect()),
                _ => Err("give rates in [0, 1], space-separated".into()),
            }
        })?;
        self.note("mtp", format!("{k} drafts, acceptance {}", rates.join(" ")), "user-provided (default rates are a heuristic)");
        self.push("--mtp-acceptance-rates", rates);
        Ok(())
    }

    /// For a vision model: an image size, or text-only requests.
    fn image_size(&mut self, arch: &model::ModelArch) -> Result<(), Stop> {
        let asked = arch.vision.is_some() && self.raw.image_height.is_none() && self.raw.image_width.is_none();
        if !asked {
            return Ok(());
        }
        let hw: Option<(u32, u32)> =
            self.p.answer("Vision model: image size as HEIGHTxWIDTH pixels (Enter for text-only requests)", Some("none"), |a| {
                if a == "none" {
                    return Ok(None);
                }
                let (h, w) = a.split_once(['x', 'X']).ok_or("write HEIGHTxWIDTH, e.g. 1080x1920")?;
                Ok(Some((positive(h.trim())?, positive(w.trim())?)))
            })?;
        if let Some((h, w)) = hw {
            self.push("--image-height", vec![h.to_string()]);
            self.push("--image-width", vec![w.to_string()]);
        }
        Ok(())
    }

    /// The recommended quantization is offered; declining asks for each action. On NVIDIA and
    /// AMD GPUs the recommendation is the checkpoint's own precision (what vLLM, SGLang and
    /// TensorRT-LLM serve, and the plan's default there); elsewhere the original tool's
    /// W8A8_DYNAMIC weights with a bf16 KV cache.
    fn quantization(&mut self, arch: &model::ModelArch, devices: &[String]) -> Result<(), Stop> {
        if self.raw.quantize_linear_action.is_some() || self.raw.quantize_attention_action.is_some() {
            return Ok(());
        }
        let reg = crate::hardware::DeviceRegistry::builtin();
        let gpu = !devices.is_empty()
            && devices
                .iter()
                .all(|d| reg.get(d).is_ok_and(|p| p.vendor.eq_ignore_ascii_case("nvidia") || p.vendor.eq_ignore_ascii_case("amd")));
        if gpu {
            let q = crate::quant::QuantConfig::checkpoint(arch);
            let weights = if q.for_experts() == q.for_non_experts() {
                q.for_experts().to_string()
            } else {
                format!("experts {}, other linears {}", q.for_experts(), q.for_non_experts())
            };
            let weights = match q.attention {
                Some(a) => format!("{weights}, attention projections {a}"),
                None => weights,
            };
            let what = format!("linear {weights}, attention/KV {}", q.kv);
            if self.p.yes_no_step(&format!("Use the checkpoint's own precision ({what})?"), true)? {
                // Nothing to pass: without the flags a GPU plan serves the checkpoint as published.
                self.note("quantization", what, "the checkpoint's own, confirmed");
                return Ok(());
            }
        } else if self.p.yes_no_step("Use the recommended quantization (linear W8A8_DYNAMIC, attention/KV DISABLED)?", true)? {
            self.push("--quantize-linear-action", vec!["W8A8_DYNAMIC".into()]);
            self.push("--quantize-attention-action", vec!["DISABLED".into()]);
            self.note("quantization", "W8A8_DYNAMIC / DISABLED".into(), "recommended default, confirmed");
            return Ok(());
        }
        {
            use crate::quant::{KvQuant, LinearQuant, NamedEnum};
            let lin = self.p.answer(&format!("Linear quantization ({})", LinearQuant::choices()), None, LinearQuant::parse_named)?;
            let kv = self.p.answer(&format!("Attention/KV quantization ({})", KvQuant::choices()), None, KvQuant::parse_named)?;
            self.push("--quantize-linear-action", vec![lin.to_string()]);
            self.push("--quantize-attention-action", vec![kv.to_string()]);
            if lin.is_mxfp4() {
                let g = self.p.answer("MXFP4 group size", Some("32"), positive)?;
                self.push("--mxfp4-group-size", vec![g.to_string()]);
            }
            self.note("quantization", format!("{lin} / {kv}"), "user-provided");
        }
        Ok(())
    }

    fn compile(&mut self) -> Result<(), Stop> {
        if !self.raw.compile && self.p.yes_no_step("Price the compiled operator graph (--compile, recommended)?", true)? {
            self.args.push("--compile".into());
        }
        Ok(())
    }
}

/// A short summary of a finished run, as the planning workflow asks for.
pub fn summarise(plan: &Plan, report: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("\nSummary\n");
    let mode = match &plan.mode {
        Mode::Aggregation => "aggregation (PD mixed)",
        Mode::Disaggregation { .. } => "disaggregation (phases evaluated separately)",
        Mode::PdRatio { .. } => "P/D ratio planning",
    };
    let _ = writeln!(s, "  mode: {mode}; engine: {}", report.engine);
    for d in &report.devices {
        if let Some(pd) = &d.pd_ratio {
            match pd.rows.first() {
                Some(r) => {
                    let _ = writeln!(
                        s,
                        "  {}: PD ratio {:.2}, balanced {:.3} req/s; P {} (batch {}, TTFT {:.2} ms), D {} (batch {}, TPOT {:.2} ms)",
                        d.device,
                        r.pd_ratio,
                        r.balanced_qps,
                        r.p_parallel,
                        r.p_batch_size,
                        r.ttft_ms,
                        r.d_parallel,
                        r.d_batch_size,
                        r.tpot_ms
                    );
                    if let Some(sp) = pd.split {
                        let _ = writeln!(s, "    split: {} P instance(s), {} D instance(s)", sp.prefill_instances, sp.decode_instances);
                    }
                    if let Some(Some(v)) = pd.verification.as_ref().map(|v| &v.simulated) {
                        let _ = writeln!(s, "    simulated: SLO {}", if v.slo_met { "met" } else { "NOT met" });
                    }
                }
                None => {
                    let _ = writeln!(s, "  {}: no P/D pairing meets the limits", d.device);
                }
            }
            continue;
        }
        for p in &d.phases {
            match p.best.first() {
                Some(b) => {
                    let _ = writeln!(
                        s,
                        "  {} {:?}: best {} — batch {}, concurrency {}, {:.2} tokens/s, TTFT {}, TPOT {}",
                        d.device,
                        p.phase,
                        b.parallel,
                        b.batch_size,
                        b.concurrency,
                        b.throughput,
                        b.ttft_ms.map_or("-".into(), |v| format!("{v:.2} ms")),
                        b.tpot_ms.map_or("-".into(), |v| format!("{v:.2} ms"))
                    );
                    for (i, r) in p.best.iter().enumerate().skip(1).take(2) {
                        let _ = writeln!(s, "    #{}: {} — {:.2} tokens/s", i + 1, r.parallel, r.throughput);
                    }
                }
                None => {
                    let _ = writeln!(s, "  {} {:?}: no configuration satisfies the limits", d.device, p.phase);
                }
            }
        }
    }
    let _ = writeln!(s, "\n{DISCLAIMER}");
    s
}

/// The whole guided session: complete the arguments, summarise, confirm, run.
pub fn run_session<R: BufRead, W: Write>(
    p: &mut Prompter<R, W>,
    raw: &RawArgs,
    argv: &[String],
) -> Result<Option<(Plan, Report)>, PlanError> {
    if raw.scenario.is_some() {
        // The answers would be command-line values next to the file's; refuse rather than drop them.
        return Err(PlanError::conflict(
            "--interactive",
            "--scenario",
            "--interactive cannot be combined with --scenario: the scenario file already describes the run; drop one of them",
        ));
    }
    loop {
        let (args, summary) = complete_args(p, raw, argv)?;
        let plan = confirmable_plan(p, &args, &summary)?;
        match p.yes_no_step("Run it?", true) {
            Ok(true) => {
                let report = crate::search::run(&plan);
                return Ok(Some((plan, report)));
            }
            Ok(false) => {
                p.say("Not run.");
                return Ok(None);
            }
            // Back to the last question of the interview, then to this confirmation again.
            Err(Stop::Back) => p.step_back(),
            Err(Stop::Fail(e)) => return Err(e),
        }
    }
}

/// Show the equivalent command and the parameters, then validate them into a plan.
fn confirmable_plan<R: BufRead, W: Write>(p: &mut Prompter<R, W>, args: &[String], summary: &[String]) -> Result<Plan, PlanError> {
    let command = std::iter::once("throughput-optimizer".to_string())
        .chain(args.iter().skip(1).map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ");
    p.say("\nEquivalent command:");
    p.say(&format!("  {command}"));
    p.say("Parameters:");
    for l in summary {
        p.say(l);
    }
    let raw = RawArgs::parse_argv(args).map_err(|e| PlanError::Args(e.to_string().lines().next().unwrap_or("").to_string()))?;
    let plan = match cli::build(raw) {
        Ok(Command::Run(plan)) => *plan,
        Ok(_) => return Err(PlanError::conflict("--interactive", "--list-devices", "--interactive runs a search; drop the listing flags")),
        Err(e) => {
            p.say("Validation failed:");
            p.say(&format!("  {e}"));
            return Err(e);
        }
    };
    if plan.warnings.is_empty() {
        p.say("Validation: no issues.");
    } else {
        p.say("Validation warnings:");
        for w in &plan.warnings {
            p.say(&format!("  - {w}"));
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests;
