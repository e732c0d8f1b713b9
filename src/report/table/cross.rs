//! The cross-hardware tables of a run over two devices or more: the device profiles side by
//! side, then the best row of each device per phase (or per P/D ratio).

use super::layout::{banner, f2, fit, new_table, rule};
use crate::outcome::{Phase, Report};
use std::fmt::Write;

pub(super) fn profile_table(report: &Report, w: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", banner(108));
    let _ = writeln!(s, "Cross-hardware - device profile summary (modeling abstraction vs performance merge tables)");
    let _ = writeln!(s, "Device profile parameter comparison (effective compute / memory BW / comm BW)");
    let _ = writeln!(s, "{}", rule(108));
    let mut t = new_table(&[
        "Device",
        "Cube Compute (TFLOPS)",
        "Vector Compute (TFLOPS)",
        "HBM BW (TiB/s)",
        "Memory (GiB)",
        "Comm Grid",
        "Comm BW (GB/s)",
    ]);
    for d in &report.devices {
        let p = &d.profile;
        t.add_row(vec![
            d.device.clone(),
            format!("{:.2}", p.cube_tflops),
            format!("{:.2}", p.vector_tflops),
            format!("{:.3}", p.hbm_tib_s),
            format!("{:.1}", p.memory_gib),
            p.comm_grid.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" x "),
            p.comm_gb_s.iter().map(|&b| crate::hardware::trim_float(b)).collect::<Vec<_>>().join(" | "),
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    s
}

pub(super) fn cross_phase_table(report: &Report, phase: Phase, w: Option<usize>) -> String {
    let rows = report.cross_hardware(phase);
    let mut s = String::new();
    let title = match phase {
        Phase::Aggregated => "Cross-hardware - PD Aggregated (best throughput config per device under TTFT/TPOT limits)",
        Phase::Prefill => "Cross-hardware - PD Disaggregated Prefill (best throughput config per device under the TTFT limit)",
        Phase::Decode => "Cross-hardware - PD Disaggregated Decode (best throughput config per device under the TPOT limit)",
    };
    let _ = writeln!(s, "{}", banner(100));
    let _ = writeln!(s, "{title}");
    let _ = writeln!(s, "{}", rule(100));
    let mut t = match phase {
        Phase::Aggregated => new_table(&[
            "Top",
            "Device",
            "Throughput (token/s)",
            "TTFT (ms)",
            "TPOT (ms)",
            "Concurrency",
            "Parallel",
            "Batch",
            "num_devices",
        ]),
        Phase::Prefill | Phase::Decode => new_table(&[
            "Top",
            "Device",
            if phase == Phase::Prefill { "Prefill throughput (token/s)" } else { "Decode throughput (token/s)" },
            "QPS (req/s)",
            "TTFT (ms)",
            "TPOT (ms)",
            "Concurrency",
            "Parallel",
            "Batch",
            "num_devices",
        ]),
    };
    for (i, r) in rows.iter().enumerate() {
        let mut cells = vec![(i + 1).to_string(), r.device.clone(), format!("{:.2}", r.throughput)];
        if phase != Phase::Aggregated {
            cells.push(f2(r.qps));
        }
        cells.extend([
            f2(r.ttft_ms),
            f2(r.tpot_ms),
            r.concurrency.to_string(),
            r.parallel.clone(),
            r.batch_size.to_string(),
            r.num_devices.to_string(),
        ]);
        t.add_row(cells);
    }
    let missing: Vec<&str> = report
        .devices
        .iter()
        .filter(|d| d.phases.iter().any(|p| p.phase == phase && p.best.is_empty()))
        .map(|d| d.device.as_str())
        .collect();
    s += &fit(t, w, true);
    s.push('\n');
    if !missing.is_empty() {
        let _ = writeln!(s, "No configuration meets the limits on: {}", missing.join(", "));
    }
    s
}

pub(super) fn cross_pd_table(report: &Report, w: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", banner(100));
    let _ = writeln!(s, "Cross-hardware - PD Ratio (best balanced QPS per device under TTFT/TPOT limits)");
    let _ = writeln!(s, "{}", rule(100));
    let mut t =
        new_table(&["Top", "Device", "Balanced QPS (req/s)", "PD Ratio (P:D inst)", "P QPS", "D QPS", "TTFT", "TPOT", "P inst", "D inst"]);
    // The split each device's Overall Best reports (the formula's, or the simulated best).
    type Best<'r> = (&'r str, &'r crate::outcome::PdRow, Option<(u32, u32)>);
    let mut best: Vec<Best> = report
        .devices
        .iter()
        .filter_map(|d| {
            let pd = d.pd_ratio.as_ref()?;
            let split = pd.chosen.as_ref().map(|c| (c.prefill_instances, c.decode_instances));
            pd.rows.first().map(|r| (d.device.as_str(), r, split))
        })
        .collect();
    best.sort_by(|a, b| b.1.balanced_qps.total_cmp(&a.1.balanced_qps));
    for (i, (dev, r, split)) in best.iter().enumerate() {
        t.add_row(vec![
            (i + 1).to_string(),
            dev.to_string(),
            format!("{:.2}", r.balanced_qps),
            format!("{:.2}", r.pd_ratio),
            format!("{:.2}", r.p_qps),
            format!("{:.2}", r.d_qps),
            format!("{:.2}", r.ttft_ms),
            format!("{:.2}", r.tpot_ms),
            split.map_or("-".into(), |s| s.0.to_string()),
            split.map_or("-".into(), |s| s.1.to_string()),
        ]);
    }
    s += &fit(t, w, true);
    s.push('\n');
    s += "Note: the P/D instance split is the formula's (P instances ≈ D instances × PD ratio) within --num-devices, or the simulated best split when it serves more requests within the SLO (see each device's Overall Best).\n";
    s
}
