//! The text report: the original's layout (banners, input configuration, memory info, overall
//! best, top-N tables per mode, cross-hardware tables) plus the engine, the TPOT definition,
//! the bottleneck of the best row and the disclaimer; in aggregation the Pareto frontier of
//! the deployment plane and, with `--compare-disagg`, the aggregated-versus-P/D verdict.
//!
//! [`render`] puts the sections in order. How a table is drawn and fitted to a width (the
//! PrettyTable look, number formats, banners and rules, `--width`) is `layout`'s; what each
//! section shows is its own file's: `header` (Input Configuration, Memory Info), `phase` (a
//! phase's Overall Best and top-N table), `study` (simulated latencies, `--engine compare`, the
//! chunk-budget study), `pd` (the P/D-ratio block), `verification` (a P/D plan simulated as
//! one system), `frontier` (the Pareto frontier, `--compare-disagg`), `cross` (cross-hardware
//! tables), `dump` (`--dump-original-results`), `lists` (`--list-devices`, `--list-models`) and
//! `costing` (`--device-hour-cost`'s prices and cost frontier, `--plan-replicas`' plan).

mod capacity;
mod costing;
mod cross;
mod dump;
mod frontier;
mod header;
mod layout;
mod lists;
mod pd;
mod phase;
mod study;
mod verification;

pub use layout::{f2, new_table, py_float};
pub use lists::{device_list, model_list};

use crate::outcome::Report;
use crate::plan::{Mode, Plan};
use cross::{cross_pd_table, cross_phase_table, profile_table};
use dump::dump;
use pd::pd_block;
use phase::phase_block;
use std::fmt::Write;

/// The whole text report.
pub fn render(plan: &Plan, report: &Report) -> String {
    if plan.output.dump_original {
        let mut s = dump(report, plan.output.width);
        s += &format!("\n{}\n", report.disclaimer);
        return plan.output.width.map_or(s.clone(), |w| layout::wrap(&s, w));
    }
    let mut s = String::new();
    for d in &report.devices {
        if let Some(pd) = &d.pd_ratio {
            s += &pd_block(plan, report, d, pd);
        } else {
            for p in &d.phases {
                s += &phase_block(plan, report, d, p);
            }
        }
        for n in &d.notes {
            let _ = writeln!(s, "Note ({}): {n}", d.device);
        }
    }
    if report.devices.len() >= 2 {
        s += &profile_table(report, plan.output.width);
        match &plan.mode {
            Mode::PdRatio { .. } => s += &cross_pd_table(report, plan.output.width),
            _ => {
                for p in &report.devices[0].phases {
                    s += &cross_phase_table(report, p.phase, plan.output.width);
                }
            }
        }
    }
    if let Some(f) = &report.cost_frontier {
        s += &costing::cost_frontier_block(report, f, plan.output.width);
    }
    let _ = writeln!(s, "\n{}", report.disclaimer);
    match plan.output.width {
        Some(w) => layout::wrap(&s, w),
        None => s,
    }
}
