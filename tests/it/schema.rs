//! The machine-readable output contract: the JSON Schema published in docs/report.schema.json
//! is the one generated from the report types, real `--output json` documents validate
//! against it, floats carry no binary noise, and CSV and JSON use the same codes.
//!
//! The validator is a small one written here for the keywords `schemars` emits (it fails on
//! any keyword it does not know, so it cannot pass by ignoring one): the `jsonschema` crate
//! would add dozens of crates (regex engines, HTTP for remote references, …) to the build of a
//! 2-core machine for a schema that uses a dozen keywords.

use crate::util::{args, run_json, run_ok, HEADLINE};
use serde_json::Value;

fn published_schema() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/report.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("docs/report.schema.json exists")).expect("the schema is JSON")
}

fn resolve<'a>(root: &'a Value, reference: &str) -> &'a Value {
    let name = reference.strip_prefix("#/$defs/").unwrap_or_else(|| panic!("unsupported $ref {reference}"));
    &root["$defs"][name]
}

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_u64() || v.is_i64(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        other => panic!("unknown type {other}"),
    }
}

/// Errors of `v` against `schema` (empty: valid). Strict beyond the schema: an object may not
/// carry a property its schema does not declare.
fn validate(root: &Value, schema: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else { panic!("schema at {path} is not an object") };
    for (k, s) in obj {
        match k.as_str() {
            "$ref" => validate(root, resolve(root, s.as_str().unwrap()), v, path, errs),
            "type" => {
                let ok = match s {
                    Value::String(t) => type_matches(t, v),
                    Value::Array(ts) => ts.iter().any(|t| type_matches(t.as_str().unwrap(), v)),
                    _ => panic!("bad type keyword at {path}"),
                };
                if !ok {
                    errs.push(format!("{path}: {v} is not of type {s}"));
                }
            }
            "format" => {
                let ok = match s.as_str().unwrap() {
                    "uint32" => v.as_u64().is_some_and(|n| n <= u32::MAX as u64) || !v.is_number(),
                    "uint64" | "uint" => v.is_u64() || !v.is_number(),
                    "double" => true,
                    other => panic!("unknown format {other} at {path}"),
                };
                if !ok {
                    errs.push(format!("{path}: {v} is not a {s}"));
                }
            }
            "minimum" => {
                if v.as_f64().is_some_and(|x| x < s.as_f64().unwrap()) {
                    errs.push(format!("{path}: {v} is below {s}"));
                }
            }
            "enum" => {
                if !s.as_array().unwrap().contains(v) {
                    errs.push(format!("{path}: {v} is not one of {s}"));
                }
            }
            "const" => {
                if s != v {
                    errs.push(format!("{path}: {v} is not {s}"));
                }
            }
            "oneOf" | "anyOf" => {
                let matching = s
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|alt| {
                        let mut e = Vec::new();
                        validate(root, alt, v, path, &mut e);
                        e.is_empty()
                    })
                    .count();
                if matching == 0 || (k == "oneOf" && matching > 1) {
                    errs.push(format!("{path}: {v} matches {matching} alternatives of {k}"));
                }
            }
            "properties" => {
                let Some(o) = v.as_object() else { continue };
                let props = s.as_object().unwrap();
                for (name, val) in o {
                    match props.get(name) {
                        Some(ps) => validate(root, ps, val, &format!("{path}.{name}"), errs),
                        None => errs.push(format!("{path}: property `{name}` is not in the schema")),
                    }
                }
            }
            // A map (e.g. prices by device profile): every value against the value schema.
            "additionalProperties" if !obj.contains_key("properties") => {
                let Some(o) = v.as_object() else { continue };
                for (name, val) in o {
                    validate(root, s, val, &format!("{path}.{name}"), errs);
                }
            }
            "required" => {
                let Some(o) = v.as_object() else { continue };
                for name in s.as_array().unwrap() {
                    if !o.contains_key(name.as_str().unwrap()) {
                        errs.push(format!("{path}: required property {name} is missing"));
                    }
                }
            }
            "items" => {
                for (i, item) in v.as_array().into_iter().flatten().enumerate() {
                    validate(root, s, item, &format!("{path}[{i}]"), errs);
                }
            }
            // Annotations: no constraint on the value.
            "description" | "title" | "default" | "readOnly" | "$schema" | "$defs" => {}
            other => panic!("the test validator does not know the keyword `{other}` (at {path}): teach it"),
        }
    }
}

fn assert_valid(schema: &Value, doc: &Value, what: &str) {
    let mut errs = Vec::new();
    validate(schema, schema, doc, "$", &mut errs);
    assert!(errs.is_empty(), "{what}: the JSON output does not validate against docs/report.schema.json:\n{}", errs.join("\n"));
}

/// Every float in `v` has at most 6 significant digits (no `247.72999999999996`).
fn assert_rounded(v: &Value, path: &str) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let text = n.to_string();
            let digits: String = text.split(['e', 'E']).next().unwrap().chars().filter(|c| c.is_ascii_digit()).collect();
            let significant = digits.trim_start_matches('0').trim_end_matches('0');
            assert!(significant.len() <= 6, "{path}: {text} has more than 6 significant digits");
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| assert_rounded(x, &format!("{path}[{i}]"))),
        Value::Object(o) => o.iter().for_each(|(k, x)| assert_rounded(x, &format!("{path}.{k}"))),
        _ => {}
    }
}

#[test]
fn json_schema_is_published() {
    // Fails when a report type changes without regenerating the published schema.
    let generated: Value = serde_json::from_str(&throughput_optimizer::report::json::schema()).unwrap();
    assert_eq!(
        generated,
        published_schema(),
        "docs/report.schema.json is stale: run `cargo run --example report_schema > docs/report.schema.json`"
    );
}

fn scenario(name: &str) -> String {
    format!("{}/scenarios/{name}.yaml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn json_output_validates_against_the_published_schema() {
    let schema = published_schema();
    let (disagg, pd, trace) = (scenario("disagg-compare"), scenario("pd-ratio-qwen-no-budget"), scenario("trace-replay"));
    let agg_vs_disagg = scenario("agg-vs-disagg");
    let (goodput, sizing, sizing_pd) = (scenario("goodput-open-loop"), scenario("sizing-target-rate"), scenario("sizing-pd"));
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("headline, analytic engine", HEADLINE.to_vec()),
        ("headline, compare engine, TP=8", args(&HEADLINE[..HEADLINE.len() - 2], &["--engine", "compare", "--tp-sizes", "8"])),
        ("disaggregation, compare engine", vec!["--scenario", &disagg]),
        ("P/D ratio with simulated verification", vec!["--scenario", &pd, "--num-requests", "200"]),
        ("trace replay", vec!["--scenario", &trace]),
        ("aggregated against P/D on the same devices", vec!["--scenario", &agg_vs_disagg, "--num-requests", "200"]),
        ("aggregated against P/D, analytic engine", args(HEADLINE, &["--compare-disagg"])),
        ("goodput per layout", vec!["--scenario", &goodput]),
        ("sizing for a target rate", vec!["--scenario", &sizing, "--num-devices", "4"]),
        ("sizing with P/D deployments", vec!["--scenario", &sizing_pd, "--num-devices", "8", "--num-requests", "600"]),
        (
            "built-in length distribution, analytic",
            args(&HEADLINE[..5], &["--length-distribution", "--output-length", "500", "--engine", "analytic"]),
        ),
    ];
    for (what, a) in runs {
        let doc = run_json(&a);
        assert_valid(&schema, &doc, what);
        assert_rounded(&doc, what);
        assert_eq!(doc["schema_version"], throughput_optimizer::outcome::SCHEMA_VERSION, "{what}");
    }
    // The validator is not vacuous: a number where the schema says string, a missing required
    // field and an undeclared property are each caught.
    let mut doc = run_json(HEADLINE);
    doc["devices"][0]["phases"][0]["rows"][0]["stop_reason"] = Value::from(3);
    doc["inputs"].as_object_mut().unwrap().remove("seed");
    doc["inputs"]["comm_gb_s"] = Value::from("35 | 137.2");
    let mut errs = Vec::new();
    validate(&schema, &schema, &doc, "$", &mut errs);
    assert_eq!(errs.len(), 3, "{errs:#?}");
}

#[test]
fn structured_fields_are_numbers_and_objects() {
    let doc = run_json(HEADLINE);
    let i = &doc["inputs"];
    assert_eq!(i["input_length"]["mean_tokens"], 3500);
    assert_eq!(i["input_length"]["source"], "fixed");
    assert_eq!(i["mode"]["kind"], "aggregation");
    assert_eq!(i["batch_range"]["min"], 1);
    let p = &doc["devices"][0]["profile"];
    assert_eq!(p["comm_gb_s"], serde_json::json!([35.0, 137.2]));
    assert_eq!(p["comm_grid"], serde_json::json!([256, 8]));
    // The device's cube figure is 247.73 after rounding, not 247.72999999999996.
    assert_eq!(p["cube_tflops"].to_string(), "247.73");
}

/// A CSV field by column name.
fn field<'a>(header: &[&str], line: &'a [String], name: &str) -> &'a str {
    let i = header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no CSV column {name}"));
    &line[i]
}

fn parse_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header = r.headers().unwrap().iter().map(String::from).collect();
    let lines = r.records().map(|rec| rec.unwrap().iter().map(String::from).collect()).collect();
    (header, lines)
}

#[test]
fn csv_and_json_agree_on_codes() {
    // A run with rows out of memory and rows over the TPOT limit; both formats walk the rows in
    // the same order (devices, phases, probes). Mutation: write `describe()` (English) instead of
    // `code()` in the CSV's stop_reason column — the codes no longer match.
    let base = args(HEADLINE, &["--batch-range", "1", "4096"]);
    let doc = run_json(&base);
    let (header, lines) = parse_csv(&run_ok(&args(&base, &["--output", "csv"])));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let rows: Vec<&Value> = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["phases"].as_array().unwrap())
        .flat_map(|p| p["rows"].as_array().unwrap())
        .collect();
    assert_eq!(rows.len(), lines.len());
    let mut codes = std::collections::BTreeSet::new();
    for (r, l) in rows.iter().zip(&lines) {
        assert_eq!(field(&header, l, "phase"), r["phase"].as_str().unwrap());
        let stop = r["stop_reason"].as_str().unwrap_or("");
        assert_eq!(field(&header, l, "stop_reason"), stop);
        assert_eq!(field(&header, l, "feasible"), r["stop_reason"].is_null().to_string());
        codes.insert(stop.to_string());
    }
    assert!(codes.contains("tpot_limit") && codes.iter().any(|c| c.ends_with("_oom")), "the run must exercise codes: {codes:?}");
}

#[test]
fn csv_and_json_agree_on_the_frontier() {
    // Each aggregated CSV row carries its frontier point's figures; P/D deployments follow as
    // `disaggregated` lines; exactly one line is chosen, the JSON's choice. Mutation: look the
    // point up by the row's position among plotted rows instead of `FrontierPoint::row`.
    let base = args(HEADLINE, &["--compare-disagg"]);
    let doc = run_json(&base);
    let (header, lines) = parse_csv(&run_ok(&args(&base, &["--output", "csv"])));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let f = &doc["devices"][0]["frontier"];
    let points = f["points"].as_array().unwrap();
    let rows = doc["devices"][0]["phases"][0]["rows"].as_array().unwrap();
    let pd: Vec<&Vec<String>> = lines.iter().filter(|l| field(&header, l, "phase") == "disaggregated").collect();
    assert!(!pd.is_empty());
    assert_eq!(pd.len(), points.iter().filter(|p| p["kind"] == "disaggregated").count());
    assert_eq!(lines.len(), rows.len() + pd.len());
    for p in points.iter().filter(|p| p["kind"] == "aggregated") {
        let l = &lines[p["row"].as_u64().unwrap() as usize];
        assert_eq!(field(&header, l, "on_frontier"), p["on_frontier"].as_bool().unwrap().to_string());
        let user: f64 = field(&header, l, "tokens_per_s_per_user").parse().unwrap();
        assert!(crate::util::close(user, p["tokens_per_s_per_user"].as_f64().unwrap(), crate::util::JSON_REL));
    }
    let chosen: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| field(&header, l, "chosen") == "true").map(|(i, _)| i).collect();
    assert_eq!(chosen.len(), 1, "one chosen deployment");
    let c = &points[f["chosen"].as_u64().unwrap() as usize];
    let per_device: f64 = field(&header, &lines[chosen[0]], "throughput_per_device_tok_s").parse().unwrap();
    assert!(crate::util::close(per_device, c["tokens_per_s_per_device"].as_f64().unwrap(), crate::util::JSON_REL));
}

#[test]
fn stop_reason_codes_are_the_json_codes() {
    // Mutation: change one arm of `StopReason::code` — it no longer equals the serde name.
    for s in throughput_optimizer::outcome::StopReason::ALL {
        assert_eq!(serde_json::to_value(s).unwrap(), s.code());
    }
}
