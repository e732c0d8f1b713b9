//! `--dump-original-results`: every probe as a raw row, in the original tool's columns.

use super::layout::{f3, fit, new_table};
use crate::outcome::{Phase, Report};

/// The raw rows (`--dump-original-results`), every probe, the original's columns.
pub(super) fn dump(report: &Report, w: Option<usize>) -> String {
    let mut s = String::new();
    for d in &report.devices {
        for p in &d.phases {
            let agg = p.phase == Phase::Aggregated;
            let mut h = vec![
                "device_name",
                "num_devices",
                "model_id",
                "quantize_linear_action",
                "quantize_attention_action",
                "input_length",
                "output_length",
                "effective_input_length",
                "max_batched_tokens",
                "prefill_num_chunks",
                "concurrency",
                "ttft",
                "tpot",
                "token/s",
                "token/s/device",
                "parallel",
                "batch_size",
            ];
            if agg {
                h.extend(["percentage_breakdowns(p)", "percentage_breakdowns(d)"]);
            } else {
                h.push("percentage_breakdowns");
            }
            h.extend(["weight_GB", "kv_cache_GB", "activation_GB", "avail_GB", "stop_reason"]);
            let mut t = new_table(&h);
            for r in &p.rows {
                let br = |b: Option<crate::cost::Breakdown>| b.map_or("-".into(), |b| b.label());
                let mut cells = vec![
                    r.device.clone(),
                    r.num_devices.to_string(),
                    report.inputs.model.clone(),
                    report.inputs.quantize_linear_action.clone(),
                    report.inputs.quantize_attention_action.clone(),
                    report.inputs.input_length.description.clone(),
                    report.inputs.output_length.description.clone(),
                    r.effective_input_length.to_string(),
                    r.max_batched_tokens.to_string(),
                    r.prefill_num_chunks.to_string(),
                    r.concurrency.to_string(),
                    r.ttft_ms.map_or("-".into(), f3),
                    r.tpot_ms.map_or("-".into(), f3),
                    f3(r.throughput),
                    f3(r.throughput_per_device),
                    r.parallel.clone(),
                    r.batch_size.to_string(),
                ];
                if agg {
                    cells.extend([br(r.breakdown_prefill), br(r.breakdown_decode)]);
                } else {
                    cells.push(br(r.breakdown()));
                }
                cells.extend([
                    f3(r.memory.weight_gib),
                    f3(r.memory.kv_cache_gib),
                    f3(r.memory.activation_gib),
                    f3(r.memory.avail_gib),
                    r.stop_reason.map_or("-".into(), |x| x.describe().to_string()),
                ]);
                t.add_row(cells);
            }
            s += &fit(t, w, false);
            s.push('\n');
        }
    }
    s
}
