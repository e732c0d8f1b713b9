//! `--output json`: the [`Report`] as one JSON document, and its JSON Schema
//! (docs/report.schema.json), generated from the same types with `schemars`.
//!
//! Floating-point numbers are written to [`FLOAT_DIGITS`] significant digits: the models
//! behind them are not more precise than that, and a reader diffing two reports should not
//! see `247.72999999999996` against `247.73`. The rounding happens in the JSON formatter, so
//! every float of every type is treated alike and the in-memory report keeps full precision.

use crate::outcome::Report;
use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};
use std::io;

/// Significant digits of every floating-point number in the JSON report.
pub const FLOAT_DIGITS: usize = 6;

pub fn render(report: &Report) -> Result<String, super::ExportError> {
    let mut out = Vec::new();
    if report.shard.is_some() {
        // A shard is read back by `merge`, which must rank and render the same numbers as the
        // unsharded run: shortest round-trip form (serde_json with `float_roundtrip` reads it
        // back bit for bit), not rounded.
        report.serialize(&mut serde_json::Serializer::with_formatter(&mut out, PrettyFormatter::new()))?;
    } else {
        report.serialize(&mut serde_json::Serializer::with_formatter(&mut out, Rounding(PrettyFormatter::new())))?;
    }
    out.push(b'\n');
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The JSON Schema (draft 2020-12) of what [`render`] writes, as pretty JSON.
pub fn schema() -> String {
    let generator = schemars::generate::SchemaSettings::draft2020_12().for_serialize().into_generator();
    let mut schema = generator.into_root_schema_for::<Report>();
    schema.insert(
        "description".into(),
        format!(
            "The report `throughput-optimizer --output json` writes. Floating-point numbers are rounded to {FLOAT_DIGITS} \
             significant digits; latencies are in ms, rates in tokens/s or requests/s, memory in GiB."
        )
        .into(),
    );
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// serde_json's pretty formatter with every float rounded to [`FLOAT_DIGITS`] digits.
struct Rounding<'a>(PrettyFormatter<'a>);

impl Formatter for Rounding<'_> {
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
        self.0.write_f64(w, crate::util::round_significant(v, FLOAT_DIGITS))
    }
    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f32) -> io::Result<()> {
        self.write_f64(w, v as f64)
    }
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}
