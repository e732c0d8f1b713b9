//! Measured serving-benchmark results: rows of the benchmark CSV format, and the JSON file
//! `vllm bench serve --save-result` writes (one run per file). Every field is checked and the
//! run's model, GPU, precision and layout are resolved here, so a bad file fails before any
//! simulation with a [`CalibrateError`] naming the file, the row and the field. A well-formed
//! run of a model, GPU or engine the simulator does not have is not a bad file: reading the
//! files sets it aside, reported, and predicts the others.

use super::error::CalibrateError;
use super::mapping::{kv_for, parallel_for, quant_for, Precision, Resolver};
use crate::cost::ParallelConfig;
use crate::quant::QuantConfig;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// The serving engines a measured run may name (`engine` column; vLLM JSON results are vllm).
pub const MEASURED_ENGINES: [&str; 3] = ["vllm", "sglang", "trtllm"];

/// Columns a CSV must have; `id`, `engine_version`, `precision`, `attention_dp`, `moe_tp`,
/// `moe_ep` and `num_prompts` are optional.
pub const REQUIRED_COLUMNS: [&str; 9] = ["engine", "model", "gpu", "isl", "osl", "concurrency", "tp", "ttft_ms", "tpot_ms"];

/// What the simulator runs for a measured run: resolved once when the file is read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Target {
    /// Catalog model id.
    pub model: String,
    /// Device profile name.
    pub device: String,
    pub precision: Precision,
    #[serde(skip)]
    pub quant: QuantConfig,
    #[serde(skip)]
    pub parallel: ParallelConfig,
}

/// Median and p99 latencies where the source gives them (vLLM JSON), in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub median_ttft_ms: Option<f64>,
    pub p99_ttft_ms: Option<f64>,
    pub median_tpot_ms: Option<f64>,
    pub p99_tpot_ms: Option<f64>,
    pub mean_itl_ms: Option<f64>,
    pub median_itl_ms: Option<f64>,
    pub p99_itl_ms: Option<f64>,
}

/// One measured benchmark run: C requests in flight at most, `num_prompts` in total (the
/// first C start together at t = 0), fixed lengths; TTFT and TPOT are means over every request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredRun {
    /// Where the run was read from (row 1 = the first run after the header).
    pub file: String,
    pub row: usize,
    pub id: String,
    /// `vllm`, `sglang`, `trtllm`, … (lower-case).
    pub engine: String,
    pub engine_version: String,
    /// The model and GPU as the source names them.
    pub model: String,
    pub gpu: String,
    pub isl: u64,
    pub osl: u64,
    pub concurrency: u64,
    pub num_prompts: u64,
    pub tp: u32,
    pub attention_dp: u32,
    pub moe_tp: u32,
    pub moe_ep: u32,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub percentiles: Percentiles,
    pub target: Target,
}

impl MeasuredRun {
    /// Requests per second the run completed, from its own latencies: C in flight over the mean
    /// end-to-end latency, TTFT + (output − 1) × TPOT (a closed loop's rate).
    pub fn requests_per_s(&self) -> f64 {
        self.concurrency as f64 / ((self.ttft_ms + self.osl.saturating_sub(1) as f64 * self.tpot_ms) * 1e-3)
    }
}

/// One run's fields before checking: canonical column → (field name shown in errors, text).
struct Record<'a> {
    file: &'a str,
    row: usize,
    values: HashMap<&'static str, (String, String)>,
}

impl Record<'_> {
    fn err(&self, col: &str, message: impl Into<String>) -> CalibrateError {
        CalibrateError::field(self.file, self.row, self.shown(col), message)
    }

    /// A well-formed field naming what the simulator does not have (a model, GPU or engine).
    fn unsupported(&self, col: &str, message: impl Into<String>) -> CalibrateError {
        CalibrateError::unsupported(self.file, self.row, self.shown(col), message)
    }

    /// The field name of a canonical column as the source spells it.
    fn shown<'a>(&'a self, col: &'a str) -> &'a str {
        self.values.get(col).map_or(col, |(f, _)| f.as_str())
    }

    /// The run's id, or its row when it has none.
    fn id(&self) -> String {
        match self.text("id") {
            "" => format!("row {}", self.row),
            id => id.to_string(),
        }
    }

    fn text(&self, col: &str) -> &str {
        self.values.get(col).map_or("", |(_, v)| v.trim())
    }

    fn required(&self, col: &str) -> Result<&str, CalibrateError> {
        match self.text(col) {
            "" => Err(self.err(col, "is empty")),
            v => Ok(v),
        }
    }

    /// A count ≥ 1. Integral floats (`8.0`) are accepted.
    fn positive(&self, col: &str) -> Result<u64, CalibrateError> {
        let v = self.required(col)?;
        let x: f64 = v.parse().map_err(|_| self.err(col, format!("`{v}` is not a number")))?;
        if x.fract() != 0.0 || !(1.0..=1e9).contains(&x) {
            return Err(self.err(col, format!("must be an integer from 1 to 1000000000, got {v}")));
        }
        Ok(x as u64)
    }

    /// An optional count: blank or 0 mean "not used" (1).
    fn optional(&self, col: &str) -> Result<u32, CalibrateError> {
        match self.text(col) {
            "" | "0" | "0.0" => Ok(1),
            _ => Ok(self.positive(col)?.min(u32::MAX as u64) as u32),
        }
    }

    /// The run's `moe_tp` and `moe_ep`. A MoE run that leaves one blank (or 0) has it from the
    /// other and its GPUs (`gpus` = tp × attention_dp: 8 GPUs at moe_ep 8 are moe_tp 1). One
    /// that leaves both takes the EP its id names (`…_tp4_ep4_…`) where that divides its GPUs,
    /// else has its experts split by TP over its GPUs (moe_tp = GPUs, moe_ep 1), as the engines
    /// run a MoE without expert parallelism. A side the GPUs do not divide by leaves the other at
    /// 1, which the layout mapping then refuses, naming the given side. Dense runs read blank as
    /// 1 (not used).
    fn moe_layout(&self, moe: bool, gpus: u32) -> Result<(u32, u32), CalibrateError> {
        let given = |col: &str| -> Result<Option<u32>, CalibrateError> {
            match self.text(col) {
                "" | "0" | "0.0" => Ok(None),
                _ => self.optional(col).map(Some),
            }
        };
        let (tp, ep) = (given("moe_tp")?, given("moe_ep")?);
        if !moe {
            return Ok((tp.unwrap_or(1), ep.unwrap_or(1)));
        }
        let rest = |side: u32| if gpus.is_multiple_of(side) { gpus / side } else { 1 };
        // The id's EP stands in for the columns only where it could be the run's: at least 1 and
        // dividing its GPUs. Any other (`ep0`, `ep8` on 4 GPUs) is not read into columns the
        // user left blank; the run keeps TP over its experts and the id check drops it, naming
        // the id, instead of an error that blames a column the file does not fill.
        let ep = match (tp, ep) {
            (None, None) => id_layout(self.text("id")).and_then(|l| l.ep).filter(|&e| e >= 1 && gpus.is_multiple_of(e)),
            _ => ep,
        };
        Ok(match (tp, ep) {
            (Some(t), Some(e)) => (t, e),
            (Some(t), None) => (t, rest(t)),
            (None, Some(e)) => (rest(e), e),
            (None, None) => (gpus, 1),
        })
    }

    /// A latency in ms: finite and above zero.
    fn latency(&self, col: &str) -> Result<f64, CalibrateError> {
        let v = self.required(col)?;
        let x: f64 = v.parse().map_err(|_| self.err(col, format!("`{v}` is not a number")))?;
        if !x.is_finite() || x <= 0.0 {
            return Err(self.err(col, format!("must be a positive number of milliseconds, got {v}")));
        }
        Ok(x)
    }

    fn optional_latency(&self, col: &str) -> Result<Option<f64>, CalibrateError> {
        if self.text(col).is_empty() {
            return Ok(None);
        }
        self.latency(col).map(Some)
    }

    /// The checked run, its model, GPU, precision and layout resolved. The fields that need no
    /// model are checked first, so a malformed run is refused even when it also names what the
    /// simulator does not have.
    fn run(&self, res: &Resolver) -> Result<MeasuredRun, CalibrateError> {
        let (isl, osl, concurrency) = (self.positive("isl")?, self.positive("osl")?, self.positive("concurrency")?);
        let (ttft_ms, tpot_ms) = (self.latency("ttft_ms")?, self.latency("tpot_ms")?);
        let tp = self.positive("tp")?.min(u32::MAX as u64) as u32;
        let attention_dp = self.optional("attention_dp")?;
        let gpus = tp.checked_mul(attention_dp).filter(|g| *g <= 1 << 20).ok_or_else(|| {
            self.err("tp", format!("tp {tp} × attention_dp {attention_dp} is more GPUs than any instance has (at most 1048576)"))
        })?;
        let engine = match self.required("engine")?.to_lowercase().as_str() {
            // TensorRT-LLM under its product and package names.
            "tensorrt-llm" | "tensorrt_llm" | "trt-llm" | "trt_llm" => "trtllm".to_string(),
            other => other.to_string(),
        };
        // Only the engines the simulator has a scheduler and a profile for: another engine's
        // run predicted as vLLM's would be scored (and fitted) as if it were one.
        if !MEASURED_ENGINES.contains(&engine.as_str()) {
            return Err(
                self.unsupported("engine", format!("`{engine}` is not an engine the simulator models: {}", MEASURED_ENGINES.join(", ")))
            );
        }
        let model_id = self.required("model")?;
        let model = res
            .model(model_id)
            .ok_or_else(|| self.unsupported("model", format!("`{model_id}` is not a model of the built-in catalog (see --list-models)")))?;
        let gpu = self.required("gpu")?;
        let device = res.device(gpu).ok_or_else(|| {
            self.unsupported(
                "gpu",
                format!("`{gpu}` is not a known GPU: h100_sxm, h200_sxm, b200_sxm or a device profile name (see --list-devices)"),
            )
        })?;
        if engine == "trtllm" && !device.vendor.eq_ignore_ascii_case("nvidia") {
            return Err(self.unsupported(
                "engine",
                format!(
                    "trtllm: TensorRT-LLM runs on NVIDIA GPUs only, and `{gpu}` is a {} device; vllm or sglang serve it",
                    device.vendor
                ),
            ));
        }
        let checkpoint = res.checkpoint(model_id, model);
        let precision =
            Precision::parse(self.text("precision")).map_err(|m| self.err("precision", m))?.unwrap_or(Precision::of(checkpoint.weights));
        let num_prompts = if self.text("num_prompts").is_empty() { 10 * concurrency } else { self.positive("num_prompts")? };
        let (moe_tp, moe_ep) = self.moe_layout(model.is_moe(), gpus)?;
        let parallel = parallel_for(model, tp, attention_dp, moe_tp, moe_ep).map_err(|(f, m)| self.err(f, m))?;
        let percentiles = Percentiles {
            median_ttft_ms: self.optional_latency("median_ttft_ms")?,
            p99_ttft_ms: self.optional_latency("p99_ttft_ms")?,
            median_tpot_ms: self.optional_latency("median_tpot_ms")?,
            p99_tpot_ms: self.optional_latency("p99_tpot_ms")?,
            mean_itl_ms: self.optional_latency("mean_itl_ms")?,
            median_itl_ms: self.optional_latency("median_itl_ms")?,
            p99_itl_ms: self.optional_latency("p99_itl_ms")?,
        };
        let quant = QuantConfig { kv: kv_for(&engine, precision, &checkpoint), ..quant_for(precision, model, &checkpoint, model_id, res) };
        Ok(MeasuredRun {
            file: self.file.to_string(),
            row: self.row,
            id: self.id(),
            engine,
            engine_version: self.text("engine_version").to_string(),
            model: model_id.to_string(),
            gpu: gpu.to_string(),
            isl,
            osl,
            concurrency,
            num_prompts,
            tp,
            attention_dp,
            moe_tp,
            moe_ep,
            ttft_ms,
            tpot_ms,
            percentiles,
            target: Target { model: model.id.clone(), device: device.name.clone(), precision, quant, parallel },
        })
    }
}

/// The layout an id names: its TP (`tp4`, or `tp4_0` as the source prints 4.0) and, if it
/// follows, its EP (`ep4`, `ep4_0`, `epnone` = 1). The last `tp` token counts (model names
/// come first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdLayout {
    pub tp: u32,
    pub ep: Option<u32>,
}

/// The layout `id` names, or `None` when it names none.
pub fn id_layout(id: &str) -> Option<IdLayout> {
    let tokens: Vec<&str> = id.split('_').collect();
    let number = |t: &str, prefix: &str| t.strip_prefix(prefix).filter(|d| !d.is_empty()).and_then(|d| d.parse::<u32>().ok());
    let at = tokens.iter().rposition(|t| number(t, "tp").is_some())?;
    let tp = number(tokens[at], "tp")?;
    // `tp4_0`: the source printed 4.0; the `0` is not a token of its own.
    let next = if tokens.get(at + 1) == Some(&"0") { at + 2 } else { at + 1 };
    let ep = tokens.get(next).and_then(|t| if *t == "epnone" { Some(1) } else { number(t, "ep") });
    Some(IdLayout { tp, ep })
}

/// The runs of a CSV text (`file` names it in errors). Every run must be one the simulator
/// can predict: the first that names a model, GPU or engine it does not have is refused
/// ([`CalibrateError::Unsupported`]; [`read_files`] drops such runs instead).
pub fn read_csv(text: &str, file: &str, res: &Resolver) -> Result<Vec<MeasuredRun>, CalibrateError> {
    let read = read_csv_noted(text, file, res)?;
    match read.unsupported.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(read.runs),
    }
}

/// What one CSV text holds: its runs, the runs it names that the simulator cannot predict
/// (id and why), and the note on the header's columns it did not read.
struct CsvRead {
    runs: Vec<MeasuredRun>,
    unsupported: Vec<(String, CalibrateError)>,
    note: Option<String>,
}

/// The runs of a CSV text, those the simulator cannot predict set aside, and the note on the
/// header's columns it did not read (see [`unread_columns_note`]), from the one parse of the
/// header. Any other bad field fails the whole text.
fn read_csv_noted(text: &str, file: &str, res: &Resolver) -> Result<CsvRead, CalibrateError> {
    let read_err = |e: csv::Error| CalibrateError::Read { file: file.to_string(), message: format!("not a readable CSV file: {e}") };
    let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
    let header: Vec<String> = rdr.headers().map_err(read_err)?.iter().map(|h| h.trim().to_lowercase()).collect();
    if let Some(missing) = REQUIRED_COLUMNS.iter().find(|c| !header.iter().any(|h| h == *c)) {
        return Err(CalibrateError::MissingColumn {
            file: file.to_string(),
            column: missing.to_string(),
            expected: REQUIRED_COLUMNS.join(", "),
        });
    }
    let known = known_columns();
    // Only a column calibrate reads must be unique (two `note` columns are nobody's business).
    if let Some((i, dup)) = header.iter().enumerate().find(|(i, h)| known.contains(&h.as_str()) && header[..*i].contains(h)) {
        return Err(CalibrateError::Read {
            file: file.to_string(),
            message: format!(
                "column `{dup}` appears twice in the header (columns {} and {})",
                header.iter().position(|h| h == dup).unwrap_or(0) + 1,
                i + 1
            ),
        });
    }
    let (mut runs, mut unsupported) = (Vec::new(), Vec::new());
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(read_err)?;
        let mut values = HashMap::new();
        for (h, v) in header.iter().zip(rec.iter()) {
            if let Some(col) = known.iter().find(|k| **k == h) {
                values.insert(*col, (h.clone(), v.to_string()));
            }
        }
        let record = Record { file, row: i + 1, values };
        match record.run(res) {
            Ok(run) => runs.push(run),
            Err(e @ CalibrateError::Unsupported { .. }) => unsupported.push((record.id(), e)),
            Err(e) => return Err(e),
        }
    }
    Ok(CsvRead { runs, unsupported, note: unread_columns_note(&header, &known, file) })
}

fn known_columns() -> Vec<&'static str> {
    REQUIRED_COLUMNS.iter().copied().chain(OPTIONAL_COLUMNS).collect()
}

/// The columns of a CSV header that calibrate does not read (a typo of an optional column
/// would otherwise fall back to its default unseen), as a note for stderr.
fn unread_columns_note(header: &[String], known: &[&str], file: &str) -> Option<String> {
    let unread: Vec<String> = header
        .iter()
        .enumerate()
        .filter(|(_, h)| !known.contains(&h.as_str()))
        .map(|(i, h)| if h.is_empty() { format!("column {} (unnamed)", i + 1) } else { format!("`{h}`") })
        .collect();
    (!unread.is_empty()).then(|| format!("{file}: columns not read: {} (calibrate reads {})", unread.join(", "), known.join(", ")))
}

const OPTIONAL_COLUMNS: [&str; 14] = [
    "id",
    "engine_version",
    "precision",
    "attention_dp",
    "moe_tp",
    "moe_ep",
    "num_prompts",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
];

/// A JSON value as field text: strings as they are, numbers printed, null and absent empty.
fn json_text(v: Option<&serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The run of a `vllm bench serve --save-result` JSON text. The client does not record the
/// GPU or the layout: pass them as `--metadata gpu=h100_sxm tp=2` (also `precision`,
/// `attention_dp`, `moe_tp`, `moe_ep`, `engine`, `engine_version`), which vLLM stores as
/// top-level keys. Lengths are total tokens over completed requests.
pub fn read_vllm_json(text: &str, file: &str, res: &Resolver) -> Result<MeasuredRun, CalibrateError> {
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| CalibrateError::Read { file: file.to_string(), message: format!("not a JSON file: {e}") })?;
    let get = |k: &str| json_text(v.get(k));
    let mut values: HashMap<&'static str, (String, String)> = HashMap::new();
    let mut put = |col: &'static str, field: &str, value: String| {
        values.insert(col, (field.to_string(), value));
    };
    let num = |k: &str| -> Result<f64, CalibrateError> {
        let t = get(k);
        let x: f64 = t.trim().parse().map_err(|_| {
            CalibrateError::field(file, 1, k, if t.is_empty() { "is missing".into() } else { format!("`{t}` is not a number") })
        })?;
        Ok(x)
    };
    let completed = num("completed")?;
    if completed < 1.0 {
        return Err(CalibrateError::field(file, 1, "completed", format!("no request completed ({completed})")));
    }
    let per_request = |k: &str| -> Result<String, CalibrateError> { Ok(format!("{}", (num(k)? / completed).round())) };
    put("isl", "total_input_tokens", per_request("total_input_tokens")?);
    put("osl", "total_output_tokens", per_request("total_output_tokens")?);
    let concurrency = match (get("max_concurrency").as_str(), get("request_rate").as_str()) {
        // No client cap and every request sent at once: all of them are in flight.
        ("", "inf" | "") => get("num_prompts"),
        ("", rate) => {
            return Err(CalibrateError::field(file, 1, "max_concurrency", format!(
                "is missing: an open-loop run (request_rate {rate}) is not a closed-loop benchmark; only runs with --max-concurrency are supported"
            )))
        }
        (c, _) => c.to_string(),
    };
    put("concurrency", "max_concurrency", concurrency);
    put("num_prompts", "num_prompts", get("num_prompts"));
    put("model", "model_id", get("model_id"));
    put("ttft_ms", "mean_ttft_ms", get("mean_ttft_ms"));
    put("tpot_ms", "mean_tpot_ms", get("mean_tpot_ms"));
    // Without `--metadata engine=…` the client's backend says which server it spoke to:
    // vLLM's own and the generic OpenAI ones are taken as vLLM (this is vLLM's client);
    // another engine's backend as that engine; any other server's run is set aside.
    match (get("engine"), get("backend")) {
        (e, _) if !e.is_empty() => put("engine", "engine", e),
        (_, b) => {
            let engine = match b.as_str() {
                "" | "vllm" | "openai" | "openai-chat" => "vllm",
                "sglang" => "sglang",
                "tensorrt-llm" => "trtllm",
                other => {
                    return Err(CalibrateError::unsupported(
                        file,
                        1,
                        "backend",
                        format!("`{other}` is a server the simulator does not model; pass `--metadata engine=vllm` (or sglang, trtllm) to vllm bench serve if one of those served it"),
                    ))
                }
            };
            put("engine", "backend", engine.to_string());
        }
    }
    for key in ["id", "engine_version", "gpu", "precision", "tp", "attention_dp", "moe_tp", "moe_ep"] {
        put(key, key, get(key));
    }
    for key in ["median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms"] {
        put(key, key, get(key));
    }
    let rec = Record { file, row: 1, values };
    for (col, hint) in [("gpu", "gpu=h100_sxm"), ("tp", "tp=2")] {
        if rec.text(col).is_empty() {
            return Err(rec.err(col, format!("is missing: vLLM does not record it; pass `--metadata {hint}` to vllm bench serve")));
        }
    }
    rec.run(res)
}

/// The `id` a vLLM result file carries (`--metadata id=…`), if any.
fn json_id(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(json_text(v.get("id"))).filter(|id| !id.trim().is_empty())
}

/// A well-formed run the simulator cannot predict: where it is and why (the field that names
/// what the simulator does not have).
#[derive(Debug, Clone, PartialEq)]
pub struct UnsupportedRun {
    pub id: String,
    pub file: String,
    pub row: usize,
    pub why: String,
}

/// The runs of the measured files, and what a user should hear about how they were read.
#[derive(Debug, Clone)]
pub struct MeasuredFiles {
    pub runs: Vec<MeasuredRun>,
    /// Well-formed runs of a model, GPU or engine the simulator does not have, in file order:
    /// left out of everything and reported, as the hygiene checks' drops are.
    pub unsupported: Vec<UnsupportedRun>,
    /// One line per CSV file with columns calibrate does not read.
    pub notes: Vec<String>,
}

/// Every run of the given files, in order: `.json` files (or any file starting with `{`) are
/// read as vLLM results, the others as CSV, their names resolved by `res`. A run naming a
/// model, GPU or engine the simulator does not have is set aside in `unsupported` (a file of
/// many models still predicts the others); any other bad field fails the whole read.
pub fn read_files(paths: &[impl AsRef<Path>], res: &Resolver) -> Result<MeasuredFiles, CalibrateError> {
    let mut runs = Vec::new();
    let mut unsupported = Vec::new();
    let mut notes = Vec::new();
    // Only `Unsupported` errors reach here (the callers match them); any other is a bug in
    // this function, not the user's file, so it is kept as a run set aside with its message.
    let mut set_aside = |id: String, e: CalibrateError| {
        let run = match e {
            CalibrateError::Unsupported { file, row, field, message } => {
                UnsupportedRun { id, file, row, why: format!("field `{field}`: {message}") }
            }
            other => UnsupportedRun { id, file: String::new(), row: 0, why: other.to_string() },
        };
        unsupported.push(run);
    };
    for p in paths {
        let p = p.as_ref();
        let file = p.display().to_string();
        // A regular file of at most the trace cap (a measured file of a million runs is ~200
        // MB): never /dev/zero, a FIFO or a sparse giant read into memory.
        let text = crate::util::read_bounded(p, crate::util::MAX_TRACE_BYTES)
            .map_err(|e| CalibrateError::Read { file: file.clone(), message: e.to_string() })?;
        let json = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) || text.trim_start().starts_with('{');
        if json {
            match read_vllm_json(&text, &file, res) {
                Ok(run) => runs.push(run),
                // Listed under the run's `--metadata id=…` when it has one, else its file.
                Err(e @ CalibrateError::Unsupported { .. }) => set_aside(json_id(&text).unwrap_or_else(|| file.clone()), e),
                Err(e) => return Err(e),
            }
        } else {
            let read = read_csv_noted(&text, &file, res)?;
            runs.extend(read.runs);
            read.unsupported.into_iter().for_each(|(id, e)| set_aside(id, e));
            notes.extend(read.note);
        }
    }
    if runs.is_empty() && unsupported.is_empty() {
        let files: Vec<String> = paths.iter().map(|p| p.as_ref().display().to_string()).collect();
        return Err(CalibrateError::Empty { files: files.join(", ") });
    }
    Ok(MeasuredFiles { runs, unsupported, notes })
}
