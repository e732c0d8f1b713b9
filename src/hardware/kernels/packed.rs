//! The compact form of kernel tables that ships inside the binary (`profiles/kernels/`).
//!
//! One zstd-compressed text file per system × engine. After a header (system, engine,
//! version, origin, attribution as `#` lines), each table is a `table <id> <axes>` line
//! followed by one line per measured curve: the coordinates of every axis but the last, then
//! `|`, the last axis's measured values, `|`, and the latencies. A latency is stored as
//! q = round(1000 · ln(nanoseconds)), written as the difference from the previous value of the
//! curve (the first from 0): curves are smooth, so the differences are small numbers that
//! compress well. The rounding moves a latency by at most 0.05 %, well inside the run-to-run
//! spread of the measurements themselves; it is the only change from the source.

use super::{Grid, KernelOp, KernelTables, Provenance, TableId};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The first line of a packed file.
const MAGIC: &str = "# throughput-optimizer kernel tables v1";
/// Steps of ln(ns) per unit of the stored integers.
const SCALE: f64 = 1000.0;
/// Largest packed file decompressed (the built-in ones are about 2 MB of text).
const MAX_TEXT: usize = 64 << 20;

/// Why a packed file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("packed kernel tables, line {line}: {message}")]
pub struct PackedError {
    pub line: usize,
    pub message: String,
}

/// The text of `tables` in the packed form, with `attribution` as header comments.
pub fn to_text(tables: &KernelTables, attribution: &[&str]) -> String {
    let p = &tables.provenance;
    let mut out = String::new();
    out.push_str(MAGIC);
    out.push('\n');
    for a in attribution {
        let _ = writeln!(out, "# {a}");
    }
    let _ = writeln!(out, "system {}\nengine {}\nversion {}\norigin {}", p.system, p.engine, p.version, p.origin);
    for (id, grid) in tables.tables() {
        let _ = writeln!(out, "table {} {}", id, grid.dims());
        let mut curve: Option<(Vec<f64>, Vec<f64>, Vec<i64>)> = None;
        for (x, t) in grid.points() {
            let (head, last) = x.split_at(x.len() - 1);
            let q = (SCALE * (t * 1e9).ln()).round() as i64;
            match &mut curve {
                Some((h, xs, qs)) if h.as_slice() == head => {
                    xs.push(last[0]);
                    qs.push(q);
                }
                _ => {
                    if let Some(c) = curve.take() {
                        write_curve(&mut out, &c);
                    }
                    curve = Some((head.to_vec(), vec![last[0]], vec![q]));
                }
            }
        }
        if let Some(c) = curve {
            write_curve(&mut out, &c);
        }
    }
    out
}

fn write_curve(out: &mut String, (head, xs, qs): &(Vec<f64>, Vec<f64>, Vec<i64>)) {
    for h in head {
        let _ = write!(out, "{h} ");
    }
    out.push('|');
    for x in xs {
        let _ = write!(out, " {x}");
    }
    out.push_str(" |");
    let mut prev = 0;
    for q in qs {
        let _ = write!(out, " {}", q - prev);
        prev = *q;
    }
    out.push('\n');
}

/// `text` compressed as the built-in files are.
pub fn compress(text: &str) -> std::io::Result<Vec<u8>> {
    zstd::encode_all(text.as_bytes(), 19)
}

/// Tables from a compressed packed file.
pub fn from_compressed(bytes: &[u8]) -> Result<KernelTables, PackedError> {
    use std::io::Read;
    let err = |m: String| PackedError { line: 0, message: m };
    let decoder = zstd::Decoder::new(bytes).map_err(|e| err(e.to_string()))?;
    let mut text = String::new();
    decoder.take(MAX_TEXT as u64 + 1).read_to_string(&mut text).map_err(|e| err(e.to_string()))?;
    if text.len() > MAX_TEXT {
        return Err(err(format!("more than {MAX_TEXT} bytes of text")));
    }
    from_text(&text)
}

/// Tables from the packed text.
pub fn from_text(text: &str) -> Result<KernelTables, PackedError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    match lines.next() {
        Some((_, MAGIC)) => {}
        _ => return Err(PackedError { line: 1, message: format!("does not start with `{MAGIC}`") }),
    }
    let mut header: BTreeMap<&str, &str> = BTreeMap::new();
    let mut tables: BTreeMap<TableId, Vec<(Vec<f64>, f64)>> = BTreeMap::new();
    let mut current: Option<(TableId, usize)> = None;
    for (n, line) in lines {
        let bad = |m: &str| PackedError { line: n, message: m.to_string() };
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("table ") {
            let (id, dims) = rest.rsplit_once(' ').ok_or_else(|| bad("a table line is `table <id> <axes>`"))?;
            let id = parse_id(id).ok_or_else(|| bad("unknown table"))?;
            let dims: usize = dims.parse().map_err(|_| bad("the axis count is not a number"))?;
            if dims != id.op.dims() {
                return Err(bad("the axis count does not match the table's op"));
            }
            current = Some((id, dims));
            continue;
        }
        match &current {
            None => {
                let (k, v) = line.split_once(' ').ok_or_else(|| bad("a header line is `<key> <value>`"))?;
                header.insert(k, v);
            }
            Some((id, dims)) => {
                let pts = parse_curve(line, *dims).map_err(|m| bad(&m))?;
                tables.entry(id.clone()).or_default().extend(pts);
            }
        }
    }
    let field = |k: &str| header.get(k).map(|s| s.to_string()).ok_or(PackedError { line: 0, message: format!("no `{k}` header") });
    let provenance =
        Provenance { system: field("system")?, engine: field("engine")?, version: field("version")?, origin: field("origin")? };
    let mut grids = BTreeMap::new();
    for (id, pts) in tables {
        let dims = id.op.dims();
        let g = Grid::from_points(dims, pts).map_err(|e| PackedError { line: 0, message: format!("table {id}: {e}") })?;
        grids.insert(id, g);
    }
    Ok(KernelTables::new(provenance, grids))
}

fn parse_id(s: &str) -> Option<TableId> {
    let (op, variant) = s.split_once('/').unwrap_or((s, ""));
    Some(TableId::new(KernelOp::from_name(op)?, variant))
}

fn parse_curve(line: &str, dims: usize) -> Result<Vec<(Vec<f64>, f64)>, String> {
    let mut parts = line.split('|');
    let (Some(head), Some(xs), Some(qs), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err("a curve line is `<coordinates> | <values> | <latencies>`".into());
    };
    let num = |s: &str| s.parse::<f64>().map_err(|_| format!("`{s}` is not a number"));
    let head: Vec<f64> = head.split_whitespace().map(num).collect::<Result<_, _>>()?;
    let xs: Vec<f64> = xs.split_whitespace().map(num).collect::<Result<_, _>>()?;
    let dq: Vec<i64> =
        qs.split_whitespace().map(|s| s.parse::<i64>().map_err(|_| format!("`{s}` is not an integer"))).collect::<Result<_, _>>()?;
    if head.len() + 1 != dims || xs.len() != dq.len() || xs.is_empty() {
        return Err("the curve's coordinates do not match the table's axes".into());
    }
    let mut q = 0i64;
    let mut out = Vec::with_capacity(xs.len());
    for (x, d) in xs.into_iter().zip(dq) {
        q = q.checked_add(d).ok_or("a latency overflows")?;
        let mut c = head.clone();
        c.push(x);
        out.push((c, (q as f64 / SCALE).exp() * 1e-9));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> KernelTables {
        let g = Grid::from_points(3, [(vec![64.0, 32.0, 1.0], 2.5e-6), (vec![64.0, 32.0, 8.0], 3.125e-6), (vec![128.0, 32.0, 1.0], 4e-6)])
            .unwrap();
        let c = Grid::from_points(2, [(vec![2.0, 1024.0], 8e-6), (vec![2.0, 2048.0], 9e-6)]).unwrap();
        let mut m = BTreeMap::new();
        m.insert(TableId::gemm(super::super::GemmDtype::Bf16), g);
        m.insert(TableId::new(KernelOp::AllReduce, ""), c);
        let p = Provenance { system: "x".into(), engine: "vllm".into(), version: "0.1".into(), origin: "test".into() };
        KernelTables::new(p, m)
    }

    #[test]
    fn packing_round_trips_within_the_rounding() {
        let t = sample();
        let back = from_compressed(&compress(&to_text(&t, &["attribution"])).unwrap()).unwrap();
        assert_eq!(back.provenance, t.provenance);
        for ((ia, ga), (ib, gb)) in t.tables().zip(back.tables()) {
            assert_eq!(ia, ib);
            for ((xa, ta), (xb, tb)) in ga.points().into_iter().zip(gb.points()) {
                assert_eq!(xa, xb);
                // Mutation: store ln(µs) instead of ln(ns) at the same scale → 1e-3 errors fail.
                assert!((ta / tb - 1.0).abs() <= 5.01e-4, "{ta} vs {tb}");
            }
        }
    }

    #[test]
    fn damaged_text_is_refused_with_its_line() {
        let text = to_text(&sample(), &[]);
        let broken = text.replacen(" | ", " | x ", 1);
        let e = from_text(&broken).unwrap_err();
        assert!(e.line > 1, "{e}");
        assert!(from_text("hello").is_err());
    }
}
