//! `--chrome-trace-file` and `--requests-file`: the simulated timeline of each device's best
//! configuration, as `search::record` recorded it — every engine step of every instance (the
//! first ones, bounded) and every request's life — rendered as a Chrome trace-event timeline
//! (Perfetto, chrome://tracing) and a CSV of one row per request.
//!
//! The timeline draws at most [`MAX_TIMELINE_STEPS`] steps and [`MAX_TIMELINE_REQUESTS`]
//! requests (the first ones), which the trace's metadata and a notice on standard error say when
//! the cap is hit.

use super::{Artifact, Destination, ExportError};
use crate::outcome::recording::{
    InstanceRole, RecordingFailure, RequestLife, StepSpan, Timeline, MAX_TIMELINE_REQUESTS, MAX_TIMELINE_STEPS,
};
use crate::plan::Plan;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The file for `device` (several devices: the device name is appended to the file stem).
pub fn path_for(base: &Path, device: &str, several: bool) -> PathBuf {
    if !several {
        return base.to_path_buf();
    }
    let stem = base.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "trace".into());
    let ext = base.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    base.with_file_name(format!("{stem}_{device}{ext}"))
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn ms(t: Option<u64>) -> String {
    t.map(|ns| format!("{:.3}", ns as f64 / 1e6)).unwrap_or_default()
}

/// `--requests-file`: one row per simulated request, in issue order. Times are as the client
/// sees them (the serving front end's time included); a request still running when the
/// simulation stopped has no first token or finish.
pub fn requests_csv(rec: &Timeline) -> Result<String, ExportError> {
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
        let scheduled = r.scheduled_ns;
        w.write_record([
            i.to_string(),
            r.instance.to_string(),
            ms(Some(r.arrival_ns)),
            ms(scheduled.map(|s| s - r.arrival_ns)),
            ms(scheduled),
            ms(r.first_token_ns),
            ms(r.finish_ns),
            r.input_tokens.to_string(),
            r.cached_tokens.to_string(),
            r.output_tokens.to_string(),
            r.preemptions.to_string(),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| ExportError::Csv(e.into_error().into()))?;
    Ok(String::from_utf8(bytes).expect("the CSV writer writes the UTF-8 it is given"))
}

/// A step's name by what it ran.
fn step_name(s: &StepSpan) -> &'static str {
    match (s.prefill_tokens > 0, s.decode_seqs > 0) {
        (true, true) => "prefill + decode",
        (true, false) => "prefill",
        _ => "decode",
    }
}

/// Track-naming metadata: a process per instance, its steps on thread 1.
fn metadata(rec: &Timeline, role: &str, events: &mut Vec<Value>) {
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
fn request_events(id: usize, r: &RequestLife, events: &mut Vec<Value>) {
    let (Some(first), Some(fin)) = (r.first_token_ns, r.finish_ns) else { return };
    let scheduled = r.scheduled_ns.unwrap_or(first);
    let pid = r.instance + 1;
    let name = format!("request {id}");
    let args = json!({"input_tokens": r.input_tokens, "cached_tokens": r.cached_tokens, "output_tokens": r.output_tokens, "preemptions": r.preemptions});
    events.push(json!({"ph": "b", "cat": "request", "name": name, "id": id, "pid": pid, "tid": 1, "ts": us(r.arrival_ns), "args": args}));
    for (part, a, b) in [("queued", r.arrival_ns, scheduled), ("prefill", scheduled, first), ("decode", first, fin)] {
        if b > a {
            events.push(json!({"ph": "b", "cat": "request", "name": part, "id": id, "pid": pid, "tid": 1, "ts": us(a)}));
            events.push(json!({"ph": "e", "cat": "request", "name": part, "id": id, "pid": pid, "tid": 1, "ts": us(b)}));
        }
    }
    events.push(json!({"ph": "e", "cat": "request", "name": name, "id": id, "pid": pid, "tid": 1, "ts": us(fin)}));
}

/// The timeline document of one recording, and a notice when a cap cut it.
pub fn chrome_trace(plan: &Plan, rec: &Timeline) -> (Value, Option<String>) {
    let role = match rec.role {
        InstanceRole::Mixed => "prefill + decode",
        InstanceRole::Prefill => "prefill",
        InstanceRole::Decode => "decode",
    };
    let mut events = Vec::new();
    metadata(rec, role, &mut events);
    for s in &rec.steps {
        let pid = s.instance + 1;
        events.push(
            json!({"ph": "X", "cat": "step", "name": step_name(s), "pid": pid, "tid": 1, "ts": us(s.start_ns), "dur": us(s.end_ns - s.start_ns),
            "args": {"prefill_tokens": s.prefill_tokens, "prefill_chunks": s.prefill_seqs, "decode_seqs": s.decode_seqs,
                     "decode_tokens": s.decode_tokens, "kv_blocks_used": s.kv_used}}),
        );
        events.push(json!({"ph": "C", "name": "KV blocks used", "pid": pid, "tid": 1, "ts": us(s.start_ns), "args": {"used": s.kv_used}}));
    }
    // Requests drawn: those arriving before the last drawn step ended, the first ones.
    let horizon = rec.steps.last().map_or(0, |s| s.end_ns);
    let eligible = rec.requests.iter().filter(|r| r.arrival_ns <= horizon).count();
    for (id, r) in rec.requests.iter().enumerate().filter(|(_, r)| r.arrival_ns <= horizon).take(MAX_TIMELINE_REQUESTS) {
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

/// The artifacts of `--chrome-trace-file` and `--requests-file`, from one recorded timeline per
/// device (a simulation that failed while recording is the error).
pub fn render(
    plan: &Plan,
    timelines: &Result<Vec<Timeline>, RecordingFailure>,
    chrome: Option<&Path>,
    requests: Option<&Path>,
) -> Result<Vec<Artifact>, ExportError> {
    let recordings = timelines.as_ref().map_err(|f| ExportError::Simulation { device: f.device.clone(), message: f.message.clone() })?;
    let several = recordings.len() > 1;
    let mut out = Vec::new();
    for rec in recordings {
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
