//! `--chrome-trace-file` and `--requests-file`: the best configuration simulated once more,
//! this time recording what happened — every engine step of every instance and every request's
//! life — and rendered as a Chrome trace-event timeline (Perfetto, chrome://tracing) and a CSV
//! of one row per request.
//!
//! The re-simulation is the search's own probe of that row (same configuration, seed and
//! stream), so its figures are the report's. It runs only when one of the two files is asked
//! for; nothing is recorded otherwise. The timeline is bounded: at most
//! [`MAX_TIMELINE_STEPS`] steps and [`MAX_TIMELINE_REQUESTS`] requests are drawn (the first
//! ones), which the trace's metadata and a notice on standard error say when the cap is hit.

use super::{Artifact, Destination, ExportError};
use crate::outcome::{Report, Row};
use crate::plan::Plan;
use crate::search::engine::best_row_ctx;
use crate::sim::{simulate_detailed, RequestState, Role, StepRecord};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Most engine steps drawn in a timeline (a step is three events, about 300 bytes).
pub const MAX_TIMELINE_STEPS: usize = 100_000;
/// Most requests drawn in a timeline (a request is eight events, about 900 bytes).
pub const MAX_TIMELINE_REQUESTS: usize = 20_000;

/// One simulated run of a best row, recorded.
pub struct Recording {
    pub device: String,
    pub row: Row,
    pub role: Role,
    pub instances: u32,
    pub kv_blocks: u64,
    /// The first [`MAX_TIMELINE_STEPS`] steps.
    pub steps: Vec<StepRecord>,
    pub steps_total: u64,
    pub requests: Vec<RequestState>,
}

/// The file for `device` (several devices: the device name is appended to the file stem).
pub fn path_for(base: &Path, device: &str, several: bool) -> PathBuf {
    if !several {
        return base.to_path_buf();
    }
    let stem = base.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "trace".into());
    let ext = base.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    base.with_file_name(format!("{stem}_{device}{ext}"))
}

/// Simulate each device's best row (of its first phase with one: aggregated, or prefill under
/// disaggregation) with recording on.
pub fn record(plan: &Plan, report: &Report) -> Result<Vec<Recording>, ExportError> {
    let mut out = Vec::new();
    for d in &report.devices {
        let Some((_, best, ctx)) = best_row_ctx(plan, d) else { continue };
        let setup = ctx.sim_setup();
        let (cfg, factory) = setup.config(best.batch_size, best.max_batched_tokens);
        let mut steps = Vec::new();
        let mut steps_total = 0u64;
        let mut keep = |s: StepRecord| {
            steps_total += 1;
            if steps.len() < MAX_TIMELINE_STEPS {
                steps.push(s);
            }
        };
        let (_, requests) = simulate_detailed(&cfg, &setup.cost, factory, &mut keep)
            .map_err(|e| ExportError::Simulation { device: d.device.clone(), message: e.to_string() })?;
        out.push(Recording {
            device: d.device.clone(),
            row: best.clone(),
            role: cfg.role,
            instances: cfg.instances,
            kv_blocks: cfg.instance.kv_blocks,
            steps,
            steps_total,
            requests,
        });
    }
    Ok(out)
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn ms(t: Option<u64>) -> String {
    t.map(|ns| format!("{:.3}", ns as f64 / 1e6)).unwrap_or_default()
}

/// `--requests-file`: one row per simulated request, in issue order. Times are the engine's
/// (the serving front end's per-request overhead the report adds to TTFT is not in them); a
/// request still running when the simulation stopped has no first token or finish.
pub fn requests_csv(rec: &Recording) -> Result<String, ExportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "request",
        "instance",
        "arrival_ms",
        "queued_ms",
        "first_scheduled_ms",
        "first_token_ms",
        "finish_ms",
        "input_tokens",
        "cached_tokens",
        "output_tokens",
        "preemptions",
    ])?;
    for (i, r) in rec.requests.iter().enumerate() {
        let scheduled = r.scheduled.or(r.decode_admitted);
        w.write_record([
            i.to_string(),
            r.instance.to_string(),
            ms(Some(r.arrival)),
            ms(scheduled.map(|s| s - r.arrival)),
            ms(scheduled),
            ms(r.first_token),
            ms(r.finish),
            r.input.to_string(),
            r.cached.to_string(),
            r.output.to_string(),
            r.preemptions.to_string(),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| ExportError::Csv(e.into_error().into()))?;
    Ok(String::from_utf8(bytes).expect("the CSV writer writes the UTF-8 it is given"))
}

/// A step's name by what it ran.
fn step_name(s: &StepRecord) -> &'static str {
    match (s.prefill_tokens > 0, s.decode_seqs > 0) {
        (true, true) => "prefill + decode",
        (true, false) => "prefill",
        _ => "decode",
    }
}

/// Track-naming metadata: a process per instance, its steps on thread 1.
fn metadata(rec: &Recording, role: &str, events: &mut Vec<Value>) {
    for i in 0..rec.instances {
        let pid = i + 1;
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": format!("instance {i} ({role}, {} KV blocks)", rec.kv_blocks)}}));
        events.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": i}}));
        events.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "args": {"name": "engine steps"}}));
    }
}

/// A request's life as nested async spans on its instance: queued, prefill (first scheduled to
/// first token), decode (to finish).
fn request_events(id: usize, r: &RequestState, events: &mut Vec<Value>) {
    let (Some(first), Some(fin)) = (r.first_token, r.finish) else { return };
    let scheduled = r.scheduled.or(r.decode_admitted).unwrap_or(first);
    let pid = r.instance + 1;
    let name = format!("request {id}");
    let args = json!({"input_tokens": r.input, "cached_tokens": r.cached, "output_tokens": r.output, "preemptions": r.preemptions});
    events.push(json!({"ph": "b", "cat": "request", "name": name, "id": id, "pid": pid, "tid": 1, "ts": us(r.arrival), "args": args}));
    for (part, a, b) in [("queued", r.arrival, scheduled), ("prefill", scheduled, first), ("decode", first, fin)] {
        if b > a {
            events.push(json!({"ph": "b", "cat": "request", "name": part, "id": id, "pid": pid, "tid": 1, "ts": us(a)}));
            events.push(json!({"ph": "e", "cat": "request", "name": part, "id": id, "pid": pid, "tid": 1, "ts": us(b)}));
        }
    }
    events.push(json!({"ph": "e", "cat": "request", "name": name, "id": id, "pid": pid, "tid": 1, "ts": us(fin)}));
}

/// The timeline document of one recording, and a notice when a cap cut it.
pub fn chrome_trace(plan: &Plan, rec: &Recording) -> (Value, Option<String>) {
    let role = match rec.role {
        Role::Mixed => "prefill + decode",
        Role::Prefill => "prefill",
        Role::Decode => "decode",
    };
    let mut events = Vec::new();
    metadata(rec, role, &mut events);
    for s in &rec.steps {
        let pid = s.instance + 1;
        events.push(
            json!({"ph": "X", "cat": "step", "name": step_name(s), "pid": pid, "tid": 1, "ts": us(s.start), "dur": us(s.end - s.start),
            "args": {"prefill_tokens": s.prefill_tokens, "prefill_chunks": s.prefill_seqs, "decode_seqs": s.decode_seqs,
                     "decode_tokens": s.decode_tokens, "kv_blocks_used": s.kv_used}}),
        );
        events.push(json!({"ph": "C", "name": "KV blocks used", "pid": pid, "tid": 1, "ts": us(s.start), "args": {"used": s.kv_used}}));
    }
    // Requests drawn: those arriving before the last drawn step ended, the first ones.
    let horizon = rec.steps.last().map_or(0, |s| s.end);
    let eligible = rec.requests.iter().filter(|r| r.arrival <= horizon).count();
    for (id, r) in rec.requests.iter().enumerate().filter(|(_, r)| r.arrival <= horizon).take(MAX_TIMELINE_REQUESTS) {
        request_events(id, r, &mut events);
    }
    let steps_cut = rec.steps_total > rec.steps.len() as u64;
    let requests_cut = eligible > MAX_TIMELINE_REQUESTS;
    let cap = format!("at most {MAX_TIMELINE_STEPS} steps and {MAX_TIMELINE_REQUESTS} requests are drawn (the first ones)");
    let notice = (steps_cut || requests_cut).then(|| {
        format!(
            "--chrome-trace-file: the timeline of {} shows the first {} of {} steps and {} of {} requests ({cap})",
            rec.device,
            rec.steps.len(),
            rec.steps_total,
            eligible.min(MAX_TIMELINE_REQUESTS),
            rec.requests.len()
        )
    });
    let r = &rec.row;
    let doc = json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "what": "simulated timeline of the best configuration: a process per instance, a span per engine step (args: batch composition), requests as async spans (queued, prefill, decode), KV blocks in use as a counter",
            "model": plan.model.id, "device": rec.device, "parallel": r.parallel, "phase": format!("{:?}", r.phase),
            "batch_size": r.batch_size, "max_batched_tokens": r.max_batched_tokens, "instances": rec.instances,
            "arrival": plan.sim.arrival.describe(),
            "steps_simulated": rec.steps_total, "steps_drawn": rec.steps.len(),
            "requests_simulated": rec.requests.len(), "requests_drawn": eligible.min(MAX_TIMELINE_REQUESTS),
            "truncated": steps_cut || requests_cut, "limits": cap,
        },
    });
    (doc, notice)
}

/// The artifacts of `--chrome-trace-file` and `--requests-file`, from one recording per device.
pub fn render(plan: &Plan, report: &Report, chrome: Option<&Path>, requests: Option<&Path>) -> Result<Vec<Artifact>, ExportError> {
    let recordings = record(plan, report)?;
    let several = recordings.len() > 1;
    let mut out = Vec::new();
    for rec in &recordings {
        if let Some(base) = chrome {
            let (doc, notice) = chrome_trace(plan, rec);
            let path = path_for(base, &rec.device, several);
            out.push(Artifact {
                destination: Destination::File { flag: "--chrome-trace-file", path },
                contents: serde_json::to_string(&doc)?,
            });
            if let Some(n) = notice.filter(|_| !plan.output.quiet) {
                out.push(Artifact { destination: Destination::Stderr, contents: format!("warning: {n}\n") });
            }
        }
        if let Some(base) = requests {
            let path = path_for(base, &rec.device, several);
            out.push(Artifact { destination: Destination::File { flag: "--requests-file", path }, contents: requests_csv(rec)? });
        }
    }
    if recordings.is_empty() && !plan.output.quiet {
        let flags = [chrome.map(|_| "--chrome-trace-file"), requests.map(|_| "--requests-file")];
        let flags: Vec<&str> = flags.into_iter().flatten().collect();
        out.push(Artifact {
            destination: Destination::Stderr,
            contents: format!(
                "warning: {}: no configuration met the limits, so there is no best configuration to simulate; nothing written\n",
                flags.join(", ")
            ),
        });
    }
    Ok(out)
}
