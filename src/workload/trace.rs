//! Reading `--arrival trace FILE`: the formats it accepts, told apart by content, each read as
//! a stream with bounded memory.
//!
//! - the tool's own CSV (`arrival_s,input_tokens,output_tokens[,prefix_group,prefix_len]`, read
//!   with the `csv` crate: a byte-order mark, quoted headers and extra columns are fine);
//! - the tool's own JSON Lines (the same fields, one object per line);
//! - the Azure LLM inference trace CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`, as in
//!   Azure/AzurePublicDataset's 2023 and 2024 traces): `TIMESTAMP` is a date and time, arrival
//!   times count from the earliest row;
//! - Mooncake-style JSON Lines (`timestamp` in ms, `input_length`, `output_length`,
//!   `hash_ids`, as in kvcache-ai/Mooncake's published traces): each hash id stands for a
//!   [`MOONCAKE_BLOCK_TOKENS`]-token block; requests whose leading ids agree share that prefix
//!   in the simulator's prefix cache ([`PrefixTrie`]).
//!
//! Bounds on hostile input: the file size (`util::MAX_TRACE_BYTES`), the requests
//! ([`MAX_TRACE_REQUESTS`]), a line's length ([`MAX_LINE_BYTES`]) and the hash ids of a whole
//! trace ([`MAX_HASH_IDS`]); each is a clear error naming the line.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, Read};
use std::path::Path;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRequest {
    pub arrival_s: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_group: Option<u32>,
    #[serde(default)]
    pub prefix_len: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub source: String,
    pub requests: Vec<TraceRequest>,
    /// CSV columns (or JSON keys of a Mooncake trace) the tool does not read (left out, and
    /// named in a warning).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_columns: Vec<String>,
    /// The format the file was read as.
    #[serde(default)]
    pub format: TraceFormat,
    /// `--trace-time-scale`, when given: arrival times are the file's times this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--arrival trace {path}: {message}")]
pub struct TraceError {
    pub path: String,
    pub message: String,
}

/// Most requests one simulation may run (`--num-requests`). A run keeps only the requests in
/// flight, but it is simulated once per candidate layout: a million requests take seconds.
pub const MAX_REQUESTS: u64 = 1_000_000;
/// Most requests a trace may hold: a trace is read into memory whole.
pub const MAX_TRACE_REQUESTS: usize = 100_000;
/// Latest arrival time of a trace request, in seconds (about 116 days): later times would not
/// fit the simulator's nanosecond clock without clamping.
pub const MAX_ARRIVAL_S: f64 = 1e7;

impl Trace {
    /// Mean prompt and output lengths, rounded down (at least 1).
    pub fn mean_lengths(&self) -> (u64, u64) {
        let n = self.requests.len().max(1) as u64;
        let sum = |f: fn(&TraceRequest) -> u64| (self.requests.iter().map(f).sum::<u64>() / n).max(1);
        (sum(|r| r.input_tokens), sum(|r| r.output_tokens))
    }

    /// Read a trace file: a regular file of at most [`crate::util::MAX_TRACE_BYTES`], streamed
    /// (never more than [`MAX_TRACE_REQUESTS`] requests are kept).
    pub fn load(path: &Path) -> Result<Trace, TraceError> {
        let shown = path.display().to_string();
        let err = |message: String| TraceError { path: shown.clone(), message };
        let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read the file: {e}")))?;
        if !meta.is_file() {
            return Err(err(crate::util::ReadError::NotAFile.to_string()));
        }
        let cap = crate::util::MAX_TRACE_BYTES;
        if meta.len() > cap {
            return Err(err(crate::util::ReadError::TooLarge { size: meta.len(), cap }.to_string()));
        }
        let file = std::fs::File::open(path).map_err(|e| err(format!("cannot read the file: {e}")))?;
        Self::parse_reader(std::io::BufReader::new(std::io::Read::take(file, cap)), &shown)
    }

    /// A trace in any of the formats this module reads.
    pub fn parse(text: &str, source: &str) -> Result<Trace, TraceError> {
        Self::parse_reader(text.as_bytes(), source)
    }

    /// [`Self::parse`] from a stream (see [`read`]).
    pub fn parse_reader<R: std::io::BufRead>(input: R, source: &str) -> Result<Trace, TraceError> {
        read(input, source)
    }

    /// `--trace-time-scale`: every arrival time times `factor` (below 1 replays the trace
    /// faster, above 1 slower). The latest arrival must stay within [`MAX_ARRIVAL_S`].
    pub fn scale_time(&mut self, factor: f64) -> Result<(), TraceError> {
        let last = self.requests.last().map_or(0.0, |r| r.arrival_s) * factor;
        if last.is_nan() || last > MAX_ARRIVAL_S {
            return Err(TraceError {
                path: self.source.clone(),
                message: format!("--trace-time-scale {factor} puts the last arrival at {last:e} s, later than {MAX_ARRIVAL_S:e} s"),
            });
        }
        for r in &mut self.requests {
            r.arrival_s *= factor;
        }
        self.time_scale = Some(factor);
        Ok(())
    }
}

/// Tokens per hash id in Mooncake's published traces (their `hash_ids` hash 512-token blocks).
pub const MOONCAKE_BLOCK_TOKENS: u64 = 512;
/// Longest line (JSON Lines) or CSV record accepted, in bytes.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Most hash ids a Mooncake trace may hold over all its requests (each becomes a node of the
/// prefix trie, about 40 bytes): ten times the published conversation trace.
pub const MAX_HASH_IDS: usize = 4_000_000;
/// Unread JSON keys named in the warning, at most.
const MAX_IGNORED_NAMES: usize = 16;

/// The trace formats, for messages.
pub const ACCEPTED: &str = "accepted: the tool's CSV (arrival_s,input_tokens,output_tokens[,prefix_group,prefix_len]), \
the Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens), JSON Lines of the tool's fields, \
or Mooncake JSON Lines (timestamp in ms, input_length, output_length, hash_ids)";

const TOOL_COLUMNS: [&str; 5] = ["arrival_s", "input_tokens", "output_tokens", "prefix_group", "prefix_len"];
const AZURE_COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// Which format a trace file was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TraceFormat {
    #[default]
    ToolCsv,
    ToolJsonLines,
    AzureCsv,
    MooncakeJsonLines,
}

impl TraceFormat {
    /// The name this format gives a request field (for messages).
    pub fn column(self, field: &'static str) -> &'static str {
        let i = TOOL_COLUMNS.iter().position(|c| *c == field);
        match (self, i) {
            (TraceFormat::AzureCsv, Some(k @ 0..=2)) => AZURE_COLUMNS[k],
            (TraceFormat::MooncakeJsonLines, Some(k @ 0..=2)) => ["timestamp", "input_length", "output_length"][k],
            _ => field,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            TraceFormat::ToolCsv => "CSV",
            TraceFormat::ToolJsonLines => "JSON Lines",
            TraceFormat::AzureCsv => "Azure LLM inference CSV",
            TraceFormat::MooncakeJsonLines => "Mooncake JSON Lines",
        }
    }
}

type Err<'a> = &'a dyn Fn(String) -> TraceError;
/// Requests with the line each was read from.
type Numbered = Vec<(u64, TraceRequest)>;

/// What a parser hands back: the format, the requests, unread columns or keys.
struct Parsed {
    format: TraceFormat,
    requests: Numbered,
    ignored: Vec<String>,
}

/// Read a trace from a stream: blank lines and a UTF-8 byte-order mark before the content are
/// skipped; a first `{` means JSON Lines, anything else CSV; the header row or the first
/// object's keys decide which format.
pub fn read<R: BufRead>(mut input: R, source: &str) -> Result<Trace, TraceError> {
    let err = |message: String| TraceError { path: source.to_string(), message };
    let mut skipped = 0;
    let first = loop {
        let buf = input.fill_buf().map_err(|e| err(format!("cannot read the file: {e}")))?;
        let Some(&b) = buf.first() else { break None };
        if b.is_ascii_whitespace() {
            skipped += u64::from(b == b'\n');
            input.consume(1);
        } else if buf.starts_with("\u{feff}".as_bytes()) {
            input.consume(3);
        } else {
            break Some(b);
        }
    };
    let parsed = match first {
        None => return Err(err(format!("the file is empty; {ACCEPTED}"))),
        Some(b'{') => parse_json_lines(input, &err)?,
        Some(_) => parse_csv(input, &err)?,
    };
    let requests: Numbered = parsed.requests.into_iter().map(|(line, r)| (line + skipped, r)).collect();
    if requests.is_empty() {
        return Err(err("the trace has no requests".into()));
    }
    for (line, r) in &requests {
        check_request(r).map_err(|(field, msg)| err(format!("line {line}: field `{}`: {msg}", parsed.format.column(field))))?;
    }
    let mut requests: Vec<TraceRequest> = requests.into_iter().map(|(_, r)| r).collect();
    // Replay in time order; ties keep file order.
    requests.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    Ok(Trace { source: source.to_string(), requests, ignored_columns: parsed.ignored, format: parsed.format, time_scale: None })
}

fn too_many(line: u64) -> String {
    format!("line {line}: more than {MAX_TRACE_REQUESTS} requests; split the trace or sample it")
}

/// The next line into `buf` (without its end), at most [`MAX_LINE_BYTES`]; `false` at the end.
fn next_line<R: BufRead>(input: &mut R, buf: &mut Vec<u8>, line: u64, err: Err) -> Result<bool, TraceError> {
    buf.clear();
    let n =
        input.by_ref().take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', buf).map_err(|e| err(format!("line {line}: cannot read: {e}")))?;
    if buf.len() > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
        return Err(err(format!("line {line} is longer than {MAX_LINE_BYTES} bytes")));
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    Ok(n > 0)
}

/// One line of a Mooncake trace. Other keys (`chat_id`, `turn`…) are not read; their names
/// are collected for the warning.
#[derive(Deserialize)]
struct MooncakeLine {
    timestamp: f64,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
    #[serde(flatten)]
    other: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
}

/// Which JSON format the first object's keys belong to.
fn json_format(line: &str, err: Err) -> Result<TraceFormat, TraceError> {
    let v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(line).map_err(|e| err(format!("line 1: not a JSON object: {e}; {ACCEPTED}")))?;
    if v.contains_key("arrival_s") {
        Ok(TraceFormat::ToolJsonLines)
    } else if v.contains_key("timestamp") && v.contains_key("input_length") {
        Ok(TraceFormat::MooncakeJsonLines)
    } else {
        let keys: Vec<String> = v.keys().take(MAX_IGNORED_NAMES).map(|k| format!("`{k}`")).collect();
        Err(err(format!("not a trace format this tool reads: the first object has keys {}; {ACCEPTED}", keys.join(", "))))
    }
}

fn parse_json_lines<R: BufRead>(mut input: R, err: Err) -> Result<Parsed, TraceError> {
    let (mut requests, mut format, mut ignored) = (Vec::new(), None, BTreeSet::new());
    let mut trie = PrefixTrie::default();
    let mut buf = Vec::new();
    // Line numbers count from the first non-blank line; the caller adds the blank lines before it.
    let mut line = 0u64;
    while next_line(&mut input, &mut buf, line + 1, err)? {
        line += 1;
        let text = std::str::from_utf8(&buf).map_err(|e| err(format!("line {line}: not UTF-8: {e}")))?;
        if text.trim().is_empty() {
            continue;
        }
        if requests.len() == MAX_TRACE_REQUESTS {
            return Err(err(too_many(line)));
        }
        let f = match format {
            Some(f) => f,
            None => *format.insert(json_format(text, err)?),
        };
        let r = if f == TraceFormat::MooncakeJsonLines {
            let m: MooncakeLine = serde_json::from_str(text).map_err(|e| err(format!("line {line}: {e}")))?;
            ignored.extend(m.other.into_keys().take(MAX_IGNORED_NAMES));
            trie.insert(&m.hash_ids, m.input_length).map_err(|m| err(format!("line {line}: field `hash_ids`: {m}")))?;
            // Said in the file's own field and unit (ms), not as the seconds it becomes.
            if !m.timestamp.is_finite() || m.timestamp < 0.0 {
                return Err(err(format!(
                    "line {line}: field `timestamp`: {} is negative or not finite; Mooncake timestamps are milliseconds ≥ 0",
                    m.timestamp
                )));
            }
            TraceRequest {
                arrival_s: m.timestamp / 1e3,
                input_tokens: m.input_length,
                output_tokens: m.output_length,
                prefix_group: None,
                prefix_len: 0,
            }
        } else {
            serde_json::from_str(text).map_err(|e| err(format!("line {line}: {e}")))?
        };
        requests.push((line, r));
    }
    trie.assign(&mut requests);
    let ignored = ignored.into_iter().take(MAX_IGNORED_NAMES).collect();
    Ok(Parsed { format: format.unwrap_or(TraceFormat::ToolJsonLines), requests, ignored })
}

/// Shared prefixes of a Mooncake trace. Each request's hash ids are a path from the root (a
/// node per leading-id sequence, so equal ids after different prefixes are different blocks,
/// as a prefix cache keys them). A request's shared prefix ends at the deepest node on its
/// path that another request of the trace passes through too (earlier or later: the first to
/// run computes it, the others hit it while the cache holds it).
///
/// The simulator caches one prefix per group and lets a longer prefix of the same group extend
/// it (`sim::kv::KvBlockPool::extend_prefix`), so a group must be a chain: prefixes each of
/// which begins with the shorter ones, as the turns of a conversation do. Shared ends are taken
/// by depth; each joins the group of its nearest shared ancestor when that group's longest
/// prefix ends there, and starts a group of its own otherwise (where prefixes branch). The
/// simplification: a branch's first request recomputes the part it has in common with the
/// other branch, and holds its own copy of those blocks.
#[derive(Debug, Default)]
pub struct PrefixTrie {
    nodes: HashMap<(u32, u64), u32>,
    /// Per node: requests passing through it, its parent and its depth (blocks).
    count: Vec<u32>,
    parent: Vec<u32>,
    depth: Vec<u32>,
    /// Each request's path, in file order.
    paths: Vec<Vec<u32>>,
    total: usize,
}

impl PrefixTrie {
    const ROOT: u32 = u32::MAX;

    /// Add the next request's hash ids (`input` tokens long: at most one id per block).
    pub fn insert(&mut self, ids: &[u64], input: u64) -> Result<(), String> {
        let blocks = input.div_ceil(MOONCAKE_BLOCK_TOKENS);
        if ids.len() as u64 > blocks {
            return Err(format!(
                "{} ids for {input} input tokens; at most {blocks} (one per {MOONCAKE_BLOCK_TOKENS}-token block)",
                ids.len()
            ));
        }
        self.total += ids.len();
        if self.total > MAX_HASH_IDS {
            return Err(format!("more than {MAX_HASH_IDS} hash ids in the trace; split the trace or sample it"));
        }
        let mut parent = Self::ROOT;
        let mut path = Vec::with_capacity(ids.len());
        for (d, &id) in ids.iter().enumerate() {
            let next = self.count.len() as u32;
            let node = *self.nodes.entry((parent, id)).or_insert(next);
            if node == next {
                self.count.push(0);
                self.parent.push(parent);
                self.depth.push(d as u32 + 1);
            }
            self.count[node as usize] += 1;
            path.push(node);
            parent = node;
        }
        self.paths.push(path);
        Ok(())
    }

    /// Set each request's prefix group and length (the blocks of its shared end).
    pub fn assign(self, requests: &mut Numbered) {
        // Counts do not grow along a path: the shared nodes are a leading run.
        let ends: Vec<Option<u32>> = self
            .paths
            .iter()
            .map(|p| Some(p.partition_point(|&n| self.count[n as usize] >= 2)).filter(|&d| d > 0).map(|d| p[d - 1]))
            .collect();
        let mut order: Vec<(u32, usize, u32)> = Vec::new();
        let mut seen = HashMap::new();
        for (i, end) in ends.iter().enumerate() {
            if let Some(n) = *end {
                seen.entry(n).or_insert_with(|| order.push((self.depth[n as usize], i, n)));
            }
        }
        order.sort_unstable();
        let mut group_of: HashMap<u32, u32> = HashMap::new();
        let mut longest: Vec<u32> = Vec::new();
        for &(_, _, n) in &order {
            let mut a = self.parent[n as usize];
            while a != Self::ROOT && !group_of.contains_key(&a) {
                a = self.parent[a as usize];
            }
            let g = match group_of.get(&a) {
                Some(&g) if longest[g as usize] == a => g,
                _ => {
                    longest.push(n);
                    longest.len() as u32 - 1
                }
            };
            longest[g as usize] = n;
            group_of.insert(n, g);
        }
        for ((_, r), end) in requests.iter_mut().zip(ends) {
            if let Some(n) = end {
                r.prefix_group = Some(group_of[&n]);
                r.prefix_len = (self.depth[n as usize] as u64 * MOONCAKE_BLOCK_TOKENS).min(r.input_tokens);
            }
        }
    }
}

fn parse_csv<R: Read>(input: R, err: Err) -> Result<Parsed, TraceError> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).trim(csv::Trim::All).from_reader(input);
    let header = reader.headers().map_err(|e| err(format!("line 1: {e}")))?.clone();
    let names: Vec<&str> = header.iter().map(str::trim).collect();
    let mut ignored = Vec::new();
    if AZURE_COLUMNS.iter().all(|c| names.contains(c)) {
        let idx = columns(&names, &AZURE_COLUMNS, err, &mut ignored)?;
        let requests = csv_records(&mut reader, header.len(), err, |rec, line| azure_request(rec, &idx, line, err))?;
        return Ok(Parsed { format: TraceFormat::AzureCsv, requests: relative_to_earliest(requests), ignored });
    }
    if !names.iter().any(|h| TOOL_COLUMNS.contains(h)) {
        let shown: Vec<String> = names.iter().take(MAX_IGNORED_NAMES).map(|h| format!("`{h}`")).collect();
        return Err(err(format!("not a trace format this tool reads: the header row has columns {}; {ACCEPTED}", shown.join(", "))));
    }
    let idx = columns(&names, &TOOL_COLUMNS, err, &mut ignored)?;
    for (k, need) in TOOL_COLUMNS[..3].iter().enumerate() {
        if idx[k].is_none() {
            return Err(err(format!("line 1: missing column `{need}`")));
        }
    }
    let requests = csv_records(&mut reader, header.len(), err, |rec, line| tool_request(rec, &names, &idx, line, err))?;
    Ok(Parsed { format: TraceFormat::ToolCsv, requests, ignored })
}

/// The header's index of each known column; unknown columns are collected in `ignored` (a
/// trace exported by another tool often carries more), repeated ones are errors.
fn columns(names: &[&str], known: &[&str], err: Err, ignored: &mut Vec<String>) -> Result<Vec<Option<usize>>, TraceError> {
    let mut idx = vec![None; known.len()];
    for (i, h) in names.iter().enumerate() {
        let repeated = match known.iter().position(|c| c == h) {
            Some(k) => idx[k].replace(i).is_some(),
            None if ignored.iter().any(|c| c == h) => true,
            None => {
                ignored.push(h.to_string());
                false
            }
        };
        if repeated {
            return Err(err(format!("line 1: column `{h}` appears twice")));
        }
    }
    Ok(idx)
}

/// Every data record through `make`, bounded in count and length; blank lines are skipped.
fn csv_records<R: Read, T>(
    reader: &mut csv::Reader<R>,
    width: usize,
    err: Err,
    mut make: impl FnMut(&csv::StringRecord, u64) -> Result<T, TraceError>,
) -> Result<Vec<(u64, T)>, TraceError> {
    let mut out = Vec::new();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(|e| err(format!("{e}")))? {
        let line = record.position().map_or(0, |p| p.line());
        if record.len() == 1 && record[0].is_empty() {
            continue;
        }
        if record.as_slice().len() > MAX_LINE_BYTES {
            return Err(err(format!("line {line} is longer than {MAX_LINE_BYTES} bytes")));
        }
        if record.len() != width {
            return Err(err(format!("line {line}: {} fields, the header has {width}", record.len())));
        }
        if out.len() == MAX_TRACE_REQUESTS {
            return Err(err(too_many(line)));
        }
        out.push((line, make(&record, line)?));
    }
    Ok(out)
}

fn tool_request(rec: &csv::StringRecord, names: &[&str], idx: &[Option<usize>], line: u64, err: Err) -> Result<TraceRequest, TraceError> {
    // Columns 0-2 are required (checked with the header); 3 and 4 may be absent or empty.
    let cell = |k: usize| idx[k].map(|i| (names[i], &rec[i]));
    let value = |k: usize| cell(k).map(|(_, c)| c).filter(|c| k < 3 || !c.is_empty());
    let bad = |k: usize, what: &str| {
        let (h, c) = cell(k).unwrap_or_default();
        err(format!("line {line}: field `{h}` is `{c}`; expected {what}"))
    };
    let tokens = |k: usize| value(k).map(|c| c.parse::<u64>().map_err(|_| bad(k, "a whole number of tokens"))).transpose();
    Ok(TraceRequest {
        arrival_s: value(0).unwrap_or_default().parse().map_err(|_| bad(0, "a number of seconds"))?,
        input_tokens: tokens(1)?.unwrap_or(0),
        output_tokens: tokens(2)?.unwrap_or(0),
        prefix_group: value(3).map(|c| c.parse::<u32>().map_err(|_| bad(3, "a group number"))).transpose()?,
        prefix_len: tokens(4)?.unwrap_or(0),
    })
}

/// An Azure row: its absolute time (ns since 1970) and the request without its arrival.
fn azure_request(rec: &csv::StringRecord, idx: &[Option<usize>], line: u64, err: Err) -> Result<(i64, TraceRequest), TraceError> {
    let cell = |k: usize| &rec[idx[k].expect("the header has every Azure column")];
    let bad = |k: usize, what: &str| err(format!("line {line}: field `{}` is `{}`; expected {what}", AZURE_COLUMNS[k], cell(k)));
    let at = parse_datetime_ns(cell(0)).ok_or_else(|| bad(0, "a date and time like 2023-11-16 18:15:46.6805900"))?;
    let tokens = |k: usize| cell(k).parse::<u64>().map_err(|_| bad(k, "a whole number of tokens"));
    let r = TraceRequest { arrival_s: 0.0, input_tokens: tokens(1)?, output_tokens: tokens(2)?, prefix_group: None, prefix_len: 0 };
    Ok((at, r))
}

/// Arrival times from absolute times: seconds after the earliest row (the first, in a trace
/// sorted by time as Azure's are).
fn relative_to_earliest(rows: Vec<(u64, (i64, TraceRequest))>) -> Numbered {
    let t0 = rows.iter().map(|(_, (t, _))| *t).min().unwrap_or(0);
    rows.into_iter().map(|(line, (t, r))| (line, TraceRequest { arrival_s: (t - t0) as f64 / 1e9, ..r })).collect()
}

/// `YYYY-MM-DD HH:MM:SS[.fraction]` (or a `T` between date and time), optionally followed by
/// `Z` or a `±HH:MM` offset, as nanoseconds since 1970-01-01 UTC. Digits past nanoseconds are
/// dropped. `None` for anything else (or a time outside 1970 ± 290 years).
pub fn parse_datetime_ns(s: &str) -> Option<i64> {
    let s = s.trim();
    let num = |t: &str, lo: i64, hi: i64| -> Option<i64> {
        let v: i64 = t.parse().ok().filter(|_| t.bytes().all(|b| b.is_ascii_digit()))?;
        (lo..=hi).contains(&v).then_some(v)
    };
    let (date, rest) = (s.get(..10)?, s.get(10..)?);
    let rest = rest.strip_prefix([' ', 'T'])?;
    let (y, m, d) = (num(date.get(..4)?, 1, 9999)?, num(date.get(5..7)?, 1, 12)?, num(date.get(8..10)?, 1, 31)?);
    if &date[4..5] != "-" || &date[7..8] != "-" || d > days_in_month(y, m) {
        return None;
    }
    let (clock, offset_s) = match rest.find(['Z', '+', '-']) {
        None => (rest, 0),
        Some(i) if &rest[i..] == "Z" => (&rest[..i], 0),
        Some(i) => {
            let off = &rest[i + 1..];
            let sign = if rest.as_bytes()[i] == b'-' { -1 } else { 1 };
            (off.len() == 5 && &off[2..3] == ":").then_some(())?;
            (&rest[..i], sign * (num(&off[..2], 0, 23)? * 3600 + num(&off[3..], 0, 59)? * 60))
        }
    };
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    if hms.len() != 8 || &hms[2..3] != ":" || &hms[5..6] != ":" || frac.len() > 30 {
        return None;
    }
    let secs = num(&hms[..2], 0, 23)? * 3600 + num(&hms[3..5], 0, 59)? * 60 + num(&hms[6..], 0, 60)?;
    let nanos = if frac.is_empty() { 0 } else { num(&format!("{:0<9}", &frac[..frac.len().min(9)]), 0, 999_999_999)? };
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let total = days_from_civil(y, m, d).checked_mul(86_400)?.checked_add(secs - offset_s)?;
    total.checked_mul(1_000_000_000)?.checked_add(nanos)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The bounds of one request: the field and what is wrong.
pub fn check_request(r: &TraceRequest) -> Result<(), (&'static str, String)> {
    if !r.arrival_s.is_finite() || r.arrival_s < 0.0 {
        return Err(("arrival_s", format!("{} is negative or not finite; arrival times are seconds ≥ 0", r.arrival_s)));
    }
    if r.arrival_s > MAX_ARRIVAL_S {
        return Err(("arrival_s", format!("{:e} is later than {MAX_ARRIVAL_S:e} s (about 116 days) after the start", r.arrival_s)));
    }
    if r.input_tokens == 0 || r.input_tokens > super::MAX_LENGTH {
        return Err(("input_tokens", format!("{} is not between 1 and {}", r.input_tokens, super::MAX_LENGTH)));
    }
    if r.output_tokens == 0 || r.output_tokens > super::MAX_LENGTH {
        return Err(("output_tokens", format!("{} is not between 1 and {}", r.output_tokens, super::MAX_LENGTH)));
    }
    if r.prefix_len > r.input_tokens {
        return Err(("prefix_len", format!("{} exceeds input_tokens {}", r.prefix_len, r.input_tokens)));
    }
    if r.prefix_len > 0 && r.prefix_group.is_none() {
        return Err(("prefix_group", "missing while prefix_len is set".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
