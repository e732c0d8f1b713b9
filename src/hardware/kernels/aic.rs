//! NVIDIA AIConfigurator's silicon database, read as published.
//!
//! The `aiconfigurator-core` package (PyPI, Apache-2.0) carries kernel measurements under
//! `systems/data/<system>/<family>/<engine>/<version>/<table>.parquet`, with
//! `systems/query_versions.yaml` naming each engine's current version and
//! `systems/<system>.yaml` the NCCL version of a system. This module reads one system under
//! one engine into [`KernelTables`]:
//!
//! - the engine's version is the one `query_versions.yaml` names as current for the system
//!   (its `overrides`, else its `defaults`); without that file, or without an entry, the
//!   newest version present;
//! - a table missing from that version, or a shape it lacks, is filled from the same engine's
//!   strictly older versions, nearest first, a measured shape never replaced by an older
//!   one (the database's own backward fill; it never fills forward);
//! - collectives come from `comm/nccl/<nccl_version>/` and the engine's custom all-reduce
//!   from `comm/<engine>/`, graph-captured rows only (NCCL tables under `comm/<engine>/`, as
//!   `scripts/profile_kernels.py` files them, come first);
//! - where one table holds several kernels for the same shapes (attention backends, MoE
//!   kernels), the kernel measured on the most shapes is taken first and the others fill only
//!   the shapes it lacks.
//!
//! Files may also be CSV with the same columns (what `scripts/profile_kernels.py` writes
//! when pyarrow is missing). Never read: the package's measured serving runs
//! (`systems/silicon_sample.csv`) are not kernel data.

use super::{Grid, KernelOp, KernelTables, Provenance, TableId};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Largest table file read (the biggest published one is about 2 MB).
const MAX_FILE_BYTES: u64 = 256 << 20;
/// Most rows read from one table file.
const MAX_ROWS: usize = 5_000_000;

/// Why a database could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AicError {
    #[error("--profiling-database-path {path}: {message}")]
    Path { path: String, message: String },
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error(
        "--profiling-database-path {path}: no kernel tables for system `{system}` under engine `{engine}` (systems present: {present})"
    )]
    Missing { path: String, system: String, engine: String, present: String },
}

/// A database directory: `systems/` (holding `data/`) or its `data/` directory.
#[derive(Debug, Clone)]
pub struct AicDatabase {
    data: PathBuf,
    /// Where `query_versions.yaml` and the system YAMLs sit, if found.
    systems: Option<PathBuf>,
}

impl AicDatabase {
    pub fn open(dir: &Path) -> Result<AicDatabase, AicError> {
        let err = |m: &str| AicError::Path { path: dir.display().to_string(), message: m.to_string() };
        if !dir.is_dir() {
            return Err(err("not a directory"));
        }
        let (data, systems) = if dir.join("data").is_dir() {
            (dir.join("data"), Some(dir.to_path_buf()))
        } else {
            let parent = dir.parent().filter(|p| p.join("query_versions.yaml").is_file()).map(Path::to_path_buf);
            (dir.to_path_buf(), parent.or_else(|| dir.join("query_versions.yaml").is_file().then(|| dir.to_path_buf())))
        };
        Ok(AicDatabase { data, systems })
    }

    /// Systems with a directory in the database.
    pub fn systems(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(&self.data)
            .map(|rd| rd.flatten().filter(|e| e.path().is_dir()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        out.sort();
        out
    }

    /// The tables of `system` under `engine`'s kernels (`torch` for a profiler's own).
    pub fn load(&self, system: &str, engine: &str) -> Result<KernelTables, AicError> {
        let root = self.data.join(system);
        let version = self.current_version(system, engine);
        let mut acc = Accumulator::default();
        let families: [(&str, &[&str]); 5] = [
            ("gemm", &["gemm_perf"]),
            ("attention", &["context_attention_perf", "generation_attention_perf"]),
            ("moe", &["moe_perf"]),
            ("mla", &["context_mla_perf", "generation_mla_perf", "mla_context_module_perf", "mla_generation_module_perf"]),
            ("msa", &["msa_context_module_perf", "msa_generation_module_perf"]),
        ];
        for (family, files) in families {
            for dir in versions_from(&root.join(family).join(engine), version.as_deref()) {
                for file in files {
                    if let Some(path) = table_file(&dir, file) {
                        let t = read_table(&path)?;
                        ingest(file, engine, &t, &mut acc).map_err(|m| file_err(&path, m))?;
                    }
                }
            }
        }
        // The engine's own collectives first (its custom all-reduce; a profiler's NCCL
        // measurements), then NCCL's directory for what they lack.
        let mut nccl_dirs = versions_from(&root.join("comm").join(engine), version.as_deref());
        for dir in &nccl_dirs {
            if let Some(path) = table_file(dir, "custom_allreduce_perf") {
                let t = read_table(&path)?;
                custom_all_reduce(&t, &mut acc).map_err(|m| file_err(&path, m))?;
            }
        }
        nccl_dirs.extend(self.nccl_dir(system, &root));
        for dir in &nccl_dirs {
            if let Some(path) = table_file(dir, "nccl_perf") {
                let t = read_table(&path)?;
                nccl(&t, &mut acc).map_err(|m| file_err(&path, m))?;
            }
        }
        let tables = acc.finish().map_err(|m| file_err(&root, m))?;
        if tables.is_empty() {
            return Err(AicError::Missing {
                path: self.data.display().to_string(),
                system: system.to_string(),
                engine: engine.to_string(),
                present: self.systems().join(", "),
            });
        }
        let provenance = Provenance {
            system: system.to_string(),
            engine: engine.to_string(),
            version: version.unwrap_or_else(|| "newest".into()),
            origin: format!("kernel database {}", self.data.display()),
        };
        Ok(KernelTables::new(provenance, tables))
    }

    /// The version `query_versions.yaml` names as current, else the newest present.
    fn current_version(&self, system: &str, engine: &str) -> Option<String> {
        let named = self.systems.as_ref().and_then(|s| query_version(&s.join("query_versions.yaml"), system, engine));
        named.or_else(|| {
            let mut all: Vec<String> =
                [self.data.join(system).join("gemm").join(engine), self.data.join(system).join("attention").join(engine)]
                    .iter()
                    .flat_map(|d| subdirs(d))
                    .collect();
            all.sort_by(|a, b| version_cmp(a, b));
            all.pop()
        })
    }

    /// `comm/nccl/<misc.nccl_version>` of the system's YAML, else the newest NCCL present.
    fn nccl_dir(&self, system: &str, root: &Path) -> Option<PathBuf> {
        let base = root.join("comm").join("nccl");
        let named = self.systems.as_ref().and_then(|s| nccl_version(&s.join(format!("{system}.yaml"))));
        if let Some(v) = named.filter(|v| base.join(v).is_dir()) {
            return Some(base.join(v));
        }
        let mut all = subdirs(&base);
        all.sort_by(|a, b| version_cmp(a, b));
        all.pop().map(|v| base.join(v))
    }
}

fn file_err(path: &Path, message: String) -> AicError {
    AicError::File { path: path.display().to_string(), message }
}

fn subdirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter(|e| e.path().is_dir()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// Version directories of one engine to read, in priority order: `version` (or the newest
/// present), then the strictly older ones, nearest first.
fn versions_from(engine_dir: &Path, version: Option<&str>) -> Vec<PathBuf> {
    let mut all = subdirs(engine_dir);
    all.sort_by(|a, b| version_cmp(b, a));
    let start = match version {
        Some(v) => all.iter().position(|a| version_cmp(a, v).is_le()),
        None => (!all.is_empty()).then_some(0),
    };
    let Some(start) = start else { return Vec::new() };
    // A newer version than the current one never fills (the current one may be absent).
    all[start..].iter().map(|v| engine_dir.join(v)).collect()
}

fn table_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    ["parquet", "csv"].iter().map(|ext| dir.join(format!("{stem}.{ext}"))).find(|p| p.is_file())
}

#[derive(serde::Deserialize, Default)]
struct Slot {
    current: Option<String>,
}

#[derive(serde::Deserialize, Default)]
struct QueryVersions {
    #[serde(default)]
    defaults: HashMap<String, Slot>,
    #[serde(default)]
    overrides: HashMap<String, HashMap<String, Slot>>,
}

fn query_version(path: &Path, system: &str, engine: &str) -> Option<String> {
    let text = crate::util::read_bounded(path, 1 << 20).ok()?;
    let q: QueryVersions = crate::yaml::from_str(&text).ok()?;
    let over = q.overrides.get(system).and_then(|m| m.get(engine)).and_then(|s| s.current.clone());
    over.or_else(|| q.defaults.get(engine).and_then(|s| s.current.clone()))
}

#[derive(serde::Deserialize, Default)]
struct SystemYaml {
    #[serde(default)]
    misc: Option<Misc>,
}

#[derive(serde::Deserialize, Default)]
struct Misc {
    nccl_version: Option<String>,
}

fn nccl_version(path: &Path) -> Option<String> {
    let text = crate::util::read_bounded(path, 1 << 20).ok()?;
    let s: SystemYaml = crate::yaml::from_str(&text).ok()?;
    s.misc.and_then(|m| m.nccl_version)
}

/// PEP 440-style order of release strings: numeric release parts, then
/// `.dev` < `a` < `b` < `rc` < final < `.post`, each with its number.
pub fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    version_key(a).cmp(&version_key(b))
}

fn version_key(v: &str) -> (Vec<u64>, u8, u64) {
    let v = v.trim_start_matches('v');
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(v.len());
    let (release, rest) = v.split_at(split);
    let nums: Vec<u64> = release.split('.').filter(|s| !s.is_empty()).map(|s| s.parse().unwrap_or(0)).collect();
    let rest = rest.trim_start_matches(['.', '-', '_']);
    let tag_end = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
    let (tag, n) = rest.split_at(tag_end);
    let rank = match tag {
        "dev" => 0,
        "a" | "alpha" => 1,
        "b" | "beta" => 2,
        "rc" | "c" => 3,
        "" => 4,
        "post" => 5,
        _ => 4,
    };
    // A release ending in a dot before the tag ("0.1.dev19262") has its numbers first.
    (nums, rank, n.parse().unwrap_or(0))
}

/// A table file's columns, by name.
#[derive(Debug, Default)]
pub struct Columns {
    ints: HashMap<String, Vec<i64>>,
    floats: HashMap<String, Vec<f64>>,
    strs: HashMap<String, Vec<String>>,
    rows: usize,
}

impl Columns {
    fn int(&self, name: &str) -> Result<&[i64], String> {
        self.ints.get(name).map(Vec::as_slice).ok_or_else(|| format!("no integer column `{name}`"))
    }
    fn float(&self, name: &str) -> Result<&[f64], String> {
        self.floats.get(name).map(Vec::as_slice).ok_or_else(|| format!("no floating-point column `{name}`"))
    }
    fn str(&self, name: &str) -> Result<&[String], String> {
        self.strs.get(name).map(Vec::as_slice).ok_or_else(|| format!("no text column `{name}`"))
    }
    fn opt_str(&self, name: &str) -> Option<&[String]> {
        self.strs.get(name).map(Vec::as_slice)
    }
}

/// A parquet or CSV table's columns.
pub fn read_table(path: &Path) -> Result<Columns, AicError> {
    let meta = std::fs::metadata(path).map_err(|e| file_err(path, e.to_string()))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(file_err(path, format!("{} bytes, more than the {MAX_FILE_BYTES} a kernel table may hold", meta.len())));
    }
    let cols = if path.extension().is_some_and(|e| e == "csv") { read_csv(path) } else { read_parquet(path) };
    cols.map_err(|m| file_err(path, m))
}

fn read_parquet(path: &Path) -> Result<Columns, String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let reader = SerializedFileReader::new(file).map_err(|e| format!("not a parquet file: {e}"))?;
    let rows = reader.metadata().file_metadata().num_rows();
    if rows < 0 || rows as usize > MAX_ROWS {
        return Err(format!("{rows} rows, more than the {MAX_ROWS} a kernel table may hold"));
    }
    enum Col {
        Int(Vec<i64>),
        Float(Vec<f64>),
        Str(Vec<String>),
        Other,
    }
    let names: Vec<String> = reader.metadata().file_metadata().schema_descr().columns().iter().map(|c| c.name().to_string()).collect();
    let mut cols: Vec<Col> = names.iter().map(|_| Col::Other).collect();
    let iter = reader.get_row_iter(None).map_err(|e| e.to_string())?;
    for (i, row) in iter.enumerate() {
        let row = row.map_err(|e| format!("row {i}: {e}"))?;
        for (j, (_, field)) in row.get_column_iter().enumerate().take(cols.len()) {
            let col = &mut cols[j];
            if i == 0 {
                *col = match field {
                    Field::Long(_) | Field::Int(_) => Col::Int(Vec::with_capacity(rows as usize)),
                    Field::Double(_) | Field::Float(_) => Col::Float(Vec::with_capacity(rows as usize)),
                    Field::Str(_) | Field::Null => Col::Str(Vec::with_capacity(rows as usize)),
                    _ => Col::Other,
                };
            }
            match (col, field) {
                (Col::Int(v), Field::Long(x)) => v.push(*x),
                (Col::Int(v), Field::Int(x)) => v.push(*x as i64),
                (Col::Float(v), Field::Double(x)) => v.push(*x),
                (Col::Float(v), Field::Float(x)) => v.push(*x as f64),
                (Col::Str(v), Field::Str(x)) => v.push(x.clone()),
                (Col::Str(v), Field::Null) => v.push(String::new()),
                (Col::Other, _) => {}
                (_, f) => return Err(format!("row {i}: column `{}` holds {f}, unlike its first row", names[j])),
            }
        }
    }
    let mut c = Columns { rows: rows as usize, ..Default::default() };
    for (name, col) in names.into_iter().zip(cols) {
        match col {
            Col::Int(v) if v.len() == c.rows => {
                c.floats.insert(name.clone(), v.iter().map(|x| *x as f64).collect());
                c.ints.insert(name, v);
            }
            Col::Float(v) if v.len() == c.rows => {
                c.floats.insert(name, v);
            }
            Col::Str(v) if v.len() == c.rows => {
                c.strs.insert(name, v);
            }
            Col::Other => {}
            _ => return Err(format!("column `{name}` has missing values")),
        }
    }
    Ok(c)
}

fn read_csv(path: &Path) -> Result<Columns, String> {
    let text = crate::util::read_bounded(path, MAX_FILE_BYTES).map_err(|e| e.to_string())?;
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let headers: Vec<String> = r.headers().map_err(|e| e.to_string())?.iter().map(str::to_string).collect();
    let mut raw: Vec<Vec<String>> = vec![Vec::new(); headers.len()];
    for (i, rec) in r.records().enumerate() {
        if i >= MAX_ROWS {
            return Err(format!("more than the {MAX_ROWS} rows a kernel table may hold"));
        }
        let rec = rec.map_err(|e| e.to_string())?;
        for (j, v) in rec.iter().enumerate().take(headers.len()) {
            raw[j].push(v.to_string());
        }
    }
    let mut c = Columns { rows: raw.first().map_or(0, Vec::len), ..Default::default() };
    for (name, vals) in headers.into_iter().zip(raw) {
        if let Ok(v) = vals.iter().map(|s| s.parse::<i64>()).collect::<Result<Vec<_>, _>>() {
            c.floats.insert(name.clone(), v.iter().map(|x| *x as f64).collect());
            c.ints.insert(name, v);
        } else if let Ok(v) = vals.iter().map(|s| s.parse::<f64>()).collect::<Result<Vec<_>, _>>() {
            c.floats.insert(name, v);
        } else {
            c.strs.insert(name, vals);
        }
    }
    Ok(c)
}

/// Points per table, merged across sources: the first measurement of a shape is kept (the
/// current version before older ones; the densest kernel before others).
#[derive(Default)]
struct Accumulator {
    points: BTreeMap<TableId, (Points, SeenShapes)>,
}

/// Measured points of one table: coordinates and latency.
type Points = Vec<(Vec<f64>, f64)>;
/// The shapes (coordinates as bits) a table already holds.
type SeenShapes = std::collections::HashSet<Vec<u64>>;

impl Accumulator {
    /// Add one source's points for `id`, in priority order: a shape already measured (by an
    /// earlier source, or earlier in this one) is skipped.
    fn add(&mut self, id: TableId, pts: Vec<(Vec<f64>, f64)>) {
        let (all, seen) = self.points.entry(id).or_default();
        for (x, t) in pts {
            if seen.insert(x.iter().map(|v| v.to_bits()).collect()) {
                all.push((x, t));
            }
        }
    }

    fn finish(self) -> Result<BTreeMap<TableId, Grid>, String> {
        let mut out = BTreeMap::new();
        for (id, (pts, _)) in self.points {
            if pts.is_empty() {
                continue;
            }
            let g = Grid::from_points(id.op.dims(), pts).map_err(|e| format!("table {id}: {e}"))?;
            out.insert(id, g);
        }
        Ok(out)
    }
}

/// Rows of `c` grouped by a variant key, each group's kernels ordered by how many shapes they
/// measured (most first), so that the densest kernel wins a shape two kernels measured.
fn by_kernel_density(c: &Columns, keep: impl Fn(usize) -> Option<String>) -> BTreeMap<String, Vec<usize>> {
    let kernels = c.opt_str("kernel_source");
    // (variant, kernel) pairs by first appearance, their shape counts, and each kept row's pair.
    let mut ids: HashMap<(String, String), usize> = HashMap::new();
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut count: Vec<usize> = Vec::new();
    let mut rows: Vec<(usize, usize)> = Vec::new();
    for i in 0..c.rows {
        let Some(variant) = keep(i) else { continue };
        let k = kernels.map_or(String::new(), |k| k[i].clone());
        let id = *ids.entry((variant.clone(), k.clone())).or_insert_with(|| {
            pairs.push((variant, k));
            count.push(0);
            pairs.len() - 1
        });
        count[id] += 1;
        rows.push((id, i));
    }
    // Per variant: most shapes first, then by kernel name (deterministic); file order within.
    rows.sort_by(|a, b| {
        let (pa, pb) = (&pairs[a.0], &pairs[b.0]);
        pa.0.cmp(&pb.0).then(count[b.0].cmp(&count[a.0])).then(pa.1.cmp(&pb.1)).then(a.1.cmp(&b.1))
    });
    let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (id, i) in rows {
        out.entry(pairs[id].0.clone()).or_default().push(i);
    }
    out
}

/// Milliseconds to seconds; a latency that is not a positive number is a bad row.
fn secs(ms: f64, row: usize) -> Result<f64, String> {
    if ms.is_finite() && ms > 0.0 {
        Ok(ms * 1e-3)
    } else {
        Err(format!("row {row}: latency {ms} ms is not a positive number"))
    }
}

fn ingest(file: &str, engine: &str, c: &Columns, acc: &mut Accumulator) -> Result<(), String> {
    match file {
        "gemm_perf" => gemm(c, engine, acc),
        "context_attention_perf" => attention(c, acc, KernelOp::ContextAttention),
        "generation_attention_perf" => attention(c, acc, KernelOp::GenerationAttention),
        "moe_perf" => moe(c, acc),
        "context_mla_perf" => mla(c, acc, KernelOp::ContextMla),
        "generation_mla_perf" => mla(c, acc, KernelOp::GenerationMla),
        "msa_context_module_perf" => module(c, acc, KernelOp::ContextMsa, MSA_MODEL),
        "msa_generation_module_perf" => module(c, acc, KernelOp::GenerationMsa, MSA_MODEL),
        "mla_context_module_perf" => module(c, acc, KernelOp::ContextMlaModule, MLA_MODEL),
        "mla_generation_module_perf" => module(c, acc, KernelOp::GenerationMlaModule, MLA_MODEL),
        _ => Ok(()),
    }
}

/// GEMM tables timed without CUDA graphs, which every serving engine replays its steps in: the
/// database's vLLM collector times block-FP8 GEMMs eagerly (`use_cuda_graph` is off for
/// `fp8_block`), so its latencies carry 50–180 µs of launch and quantization-op overhead
/// (57 µs for a 1 × 4096 × 1024 GEMM on H200, where SGLang's graph-captured DeepGEMM takes
/// 6 µs). They are not read; such GEMMs take the engine's per-tensor FP8 table, carried by the
/// rooflines' ratio.
const EAGER_GEMMS: [(&str, &str); 1] = [("vllm", "fp8_block")];

fn gemm(c: &Columns, engine: &str, acc: &mut Accumulator) -> Result<(), String> {
    let (dt, m, n, k, lat) = (c.str("gemm_dtype")?, c.int("m")?, c.int("n")?, c.int("k")?, c.float("latency")?);
    let keep = |i: usize| {
        let d = super::GemmDtype::from_name(&dt[i])?;
        (!EAGER_GEMMS.contains(&(engine, d.name()))).then(|| d.name().to_string())
    };
    for (variant, rows) in by_kernel_density(c, keep) {
        let pts =
            rows.iter().map(|&i| Ok((vec![n[i] as f64, k[i] as f64, m[i] as f64], secs(lat[i], i)?))).collect::<Result<_, String>>()?;
        acc.add(TableId::new(KernelOp::Gemm, variant), pts);
    }
    Ok(())
}

fn attention(c: &Columns, acc: &mut Accumulator, op: KernelOp) -> Result<(), String> {
    let (b, isl, heads, kv, hd, lat) =
        (c.int("batch_size")?, c.int("isl")?, c.int("num_heads")?, c.int("num_key_value_heads")?, c.int("head_dim")?, c.float("latency")?);
    let kv_dtype = c.str("kv_cache_dtype")?;
    let attn_dtype = c.opt_str("attn_dtype");
    let window = c.ints.get("window_size");
    let step = c.ints.get("step");
    let keep = |i: usize| {
        // FP8 context attention (FP8 FMHA) is a separate mode; bf16 compute is the default.
        if attn_dtype.is_some_and(|a| a[i] != "bfloat16") {
            return None;
        }
        let fp8 = kv_fp8(&kv_dtype[i])?;
        Some(TableId::attention(op, fp8, window.map_or(0, |w| w[i]).max(0) as u64).variant)
    };
    for (variant, rows) in by_kernel_density(c, keep) {
        let pts = rows
            .iter()
            .map(|&i| {
                // A generation query attends to the cached tokens (`step`) and its own.
                let len = if op == KernelOp::GenerationAttention { isl[i] + step.map_or(0, |s| s[i]) } else { isl[i] };
                Ok((vec![hd[i] as f64, kv[i] as f64, heads[i] as f64, b[i] as f64, len as f64], secs(lat[i], i)?))
            })
            .collect::<Result<_, String>>()?;
        acc.add(TableId::new(op, variant), pts);
    }
    Ok(())
}

fn moe(c: &Columns, acc: &mut Accumulator) -> Result<(), String> {
    let (tok, h, inter, topk, e, tp, ep, lat) = (
        c.int("num_tokens")?,
        c.int("hidden_size")?,
        c.int("inter_size")?,
        c.int("topk")?,
        c.int("num_experts")?,
        c.int("moe_tp_size")?,
        c.int("moe_ep_size")?,
        c.float("latency")?,
    );
    let (dt, dist) = (c.str("moe_dtype")?, c.str("distribution")?);
    let kernels = c.opt_str("kernel_source");
    let keep = |i: usize| {
        // Non-gated (ReLU²) experts and TensorRT-LLM's min-latency mode measure other kernels.
        if kernels.is_some_and(|k| k[i].contains("nongated") || k[i].contains("min_latency")) {
            return None;
        }
        super::MoeDtype::from_name(&dt[i]).map(|d| format!("{}/{}", d.name(), dist[i]))
    };
    for (variant, rows) in by_kernel_density(c, keep) {
        let pts = rows
            .iter()
            .filter(|&&i| e[i] > 0)
            .map(|&i| {
                let per_expert = tok[i] as f64 * topk[i] as f64 / e[i] as f64;
                let x = vec![tp[i] as f64, ep[i] as f64, h[i] as f64, inter[i] as f64, topk[i] as f64, e[i] as f64, per_expert];
                Ok((x, secs(lat[i], i)?))
            })
            .collect::<Result<_, String>>()?;
        acc.add(TableId::new(KernelOp::Moe, variant), pts);
    }
    Ok(())
}

/// MLA's core kernel: local heads, batch and the prompt (context) or KV length (generation:
/// the cached tokens in `step` and the new one).
fn mla(c: &Columns, acc: &mut Accumulator, op: KernelOp) -> Result<(), String> {
    let kv = c.str("kv_cache_dtype")?;
    let keep = |i: usize| Some(TableId::mla(op, kv_fp8(&kv[i])?).variant);
    for (variant, rows) in by_kernel_density(c, keep) {
        acc.add(TableId::new(op, variant), heads_batch_length(c, &rows, op == KernelOp::GenerationMla)?);
    }
    Ok(())
}

/// A table's KV-cache dtype: FP8 or not; `None` for one no table here keys (INT8, FP4).
fn kv_fp8(dtype: &str) -> Option<bool> {
    match dtype {
        "bfloat16" | "float16" => Some(false),
        "fp8" => Some(true),
        _ => None,
    }
}

/// The MLA and MSA tables' points (local heads, batch, length) of `rows`: the prompt's tokens in
/// context, the cached tokens (`step`) and the new one in generation.
fn heads_batch_length(c: &Columns, rows: &[usize], generation: bool) -> Result<Vec<(Vec<f64>, f64)>, String> {
    let (heads, b, isl, lat) = (c.int("num_heads")?, c.int("batch_size")?, c.int("isl")?, c.float("latency")?);
    let step = c.ints.get("step");
    rows.iter()
        .map(|&i| {
            let len = if generation { isl[i] + step.map_or(0, |s| s[i]) } else { isl[i] };
            Ok((vec![heads[i] as f64, b[i] as f64, len as f64], secs(lat[i], i)?))
        })
        .collect()
}

/// The model whose attention block the MSA module tables time.
const MSA_MODEL: &str = "MiniMaxAI/MiniMax-M3";
/// The model whose attention block the MLA module tables time.
const MLA_MODEL: &str = "deepseek-ai/DeepSeek-V3";

/// A whole attention block measured as one (MiniMax-M3's sparse attention, DeepSeek-V3's MLA):
/// local heads, batch and the prompt (context: prompts with nothing cached, `step` 0) or KV
/// length (generation: the cached tokens in `step` and the new one), by KV-cache and
/// projection dtype; rows of other models than `model` are not read.
fn module(c: &Columns, acc: &mut Accumulator, op: KernelOp, model: &str) -> Result<(), String> {
    let (kv, gemm) = (c.str("kv_cache_dtype")?, c.str("gemm_type")?);
    let step = c.ints.get("step");
    let models = c.opt_str("model");
    // One GPU's block: `num_heads` is then the local head count (a TP row would not be).
    let tp = c.ints.get("tp_size");
    let generation = matches!(op, KernelOp::GenerationMsa | KernelOp::GenerationMlaModule);
    let keep = |i: usize| {
        let other_tp = tp.is_some_and(|t| t[i] != 1);
        if other_tp || models.is_some_and(|m| m[i] != model) || (!generation && step.is_some_and(|s| s[i] != 0)) {
            return None;
        }
        let dtype = match gemm[i].as_str() {
            "bfloat16" | "float16" => "bfloat16",
            d @ ("fp8_block" | "nvfp4") => d,
            _ => return None,
        };
        Some(TableId::module(op, kv_fp8(&kv[i])?, dtype).variant)
    };
    for (variant, rows) in by_kernel_density(c, keep) {
        acc.add(TableId::new(op, variant), heads_batch_length(c, &rows, generation)?);
    }
    Ok(())
}

/// Elements of a collective's message are 16-bit (`half`) in these tables.
const ELEMENT_BYTES: f64 = 2.0;

fn custom_all_reduce(c: &Columns, acc: &mut Accumulator) -> Result<(), String> {
    let (gpus, size, lat) = (c.int("num_gpus")?, c.int("message_size")?, c.float("latency")?);
    let kind = c.opt_str("backend").or(c.opt_str("kernel_source"));
    let mut pts = Vec::new();
    for i in 0..c.rows {
        // Serving engines replay their all-reduce inside CUDA graphs: eager rows measure launch.
        if kind.is_some_and(|k| k[i].contains("eager")) {
            continue;
        }
        pts.push((vec![gpus[i] as f64, size[i] as f64 * ELEMENT_BYTES], secs(lat[i], i)?));
    }
    acc.add(TableId::new(KernelOp::CustomAllReduce, ""), pts);
    Ok(())
}

fn nccl(c: &Columns, acc: &mut Accumulator) -> Result<(), String> {
    let (gpus, size, lat, op) = (c.int("num_gpus")?, c.int("message_size")?, c.float("latency")?, c.str("op_name")?);
    let dtype = c.str("nccl_dtype")?;
    let mut per_op: BTreeMap<KernelOp, Vec<(Vec<f64>, f64)>> = BTreeMap::new();
    for i in 0..c.rows {
        let kind = match op[i].as_str() {
            "all_reduce" => KernelOp::AllReduce,
            "all_gather" => KernelOp::AllGather,
            "reduce_scatter" => KernelOp::ReduceScatter,
            "alltoall" | "all_to_all" => KernelOp::AllToAll,
            _ => continue,
        };
        if dtype[i] != "half" {
            continue;
        }
        per_op.entry(kind).or_default().push((vec![gpus[i] as f64, size[i] as f64 * ELEMENT_BYTES], secs(lat[i], i)?));
    }
    for (kind, pts) in per_op {
        acc.add(TableId::new(kind, ""), pts);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_as_pep_440() {
        use std::cmp::Ordering::*;
        assert_eq!(version_cmp("1.3.0rc20", "1.3.0rc10"), Greater);
        assert_eq!(version_cmp("1.3.0rc20", "1.3.0"), Less);
        assert_eq!(version_cmp("0.5.6.post2", "0.5.6"), Greater);
        assert_eq!(version_cmp("0.5.10", "0.5.9"), Greater);
        assert_eq!(version_cmp("0.24.0", "0.24.0"), Equal);
        assert_eq!(version_cmp("0.1.dev19262", "0.1"), Less);
    }
}
