//! The replica plan of a trace (`--arrival trace FILE --plan-replicas WINDOW`): how many
//! instances of the chosen deployment each window of the trace needs to keep the SLO, checked
//! by one simulation of the whole trace in which the count changes at the window edges.
//!
//! The deployment is the device's Overall Best aggregated row (its layout, running cap and
//! token budget); an instance is one of its DP replicas, and a window may use from one to all
//! of them (`--num-devices` bounds the fleet). The plan is made in two steps:
//!
//! 1. per window, the fewest instances whose simulation of the window's own requests (alone,
//!    from an empty system) meets the SLO: a bisection over 1 ..= the most instances, which
//!    takes the SLO statistic to fall as instances are added;
//! 2. one simulation of the whole trace with those counts ([`crate::sim::simulate_scheduled`]):
//!    at each edge instances added take new requests from then on, instances removed take no
//!    new request but finish the ones they hold. A window starts with whatever the one before
//!    left queued, so a window may miss the SLO there that met it alone: each such window gets
//!    one more instance and the trace is simulated again, at most [`MAX_TRACE_ROUNDS`] times.
//!
//! The statistics of a window are over the requests that arrived in it. Instance-hours count
//! each window whole at its count (an instance taken out of use still finishes its requests:
//! that drain is not counted); the peak fleet runs the largest count through every window.
//! Time and memory are bounded: a trace holds at most `MAX_TRACE_REQUESTS` requests and at most
//! `MAX_REPLICA_WINDOWS` windows (the CLI checks), the bisection simulates each request about
//! log₂(instances) + 1 times, and each whole-trace simulation once.

use super::engine::sim::request_factory;
use super::engine::CandidateCtx;
use super::Candidate;
use crate::hardware::DeviceProfile;
use crate::outcome::{Phase, ReplicaPlan, ReplicaWindow, Row};
use crate::plan::{Plan, TpotDefinition};
use crate::sim::{simulate_report, simulate_scheduled, Group, InstanceConfig, Measure, Recorder, RequestState, Role, RunParams, System};
use crate::workload::arrival::{ArrivalProcess, Trace};

/// Whole-trace simulations at most: the first, and rounds that add an instance to the windows
/// that missed the SLO.
pub const MAX_TRACE_ROUNDS: u32 = 4;

const NS: f64 = 1e9;

/// What the simulations of a plan share: the instance, its cost model and the run.
struct Runner<'a> {
    plan: &'a Plan,
    instance: InstanceConfig,
    cost: &'a dyn crate::cost::StepCostModel,
    run: RunParams,
    window_simulations: u32,
}

impl Runner<'_> {
    /// A system of `count` instances over `requests` (arrivals as given).
    fn system(&self, count: u32, requests: u64) -> System<'_> {
        System {
            groups: vec![Group { role: Role::Mixed, count, cfg: self.instance.clone(), cost: self.cost, pipeline: None }],
            transfer: None,
            routing: crate::sim::Routing::LeastLoaded,
            run: RunParams { num_requests: requests, measure: Measure::WholeRun, ..self.run.clone() },
        }
    }

    fn factory(&self, trace: Trace) -> crate::workload::arrival::RequestFactory {
        request_factory(self.plan, ArrivalProcess::Trace(trace), None)
    }

    /// Whether `count` instances serve a window's requests (alone) within the SLO.
    fn meets(&mut self, window: &Trace, count: u32) -> Result<bool, String> {
        self.window_simulations += 1;
        let n = window.requests.len() as u64;
        let report = simulate_report(&self.system(count, n), self.factory(window.clone())).map_err(|e| e.to_string())?;
        let l = &report.latency;
        let pct = self.plan.sim.slo_percentile;
        let tpot = match self.plan.serving.tpot_definition {
            TpotDefinition::InterToken => l.tpot_inter_token.pick(pct),
            TpotDefinition::Amortized => l.tpot_amortized.pick(pct),
        };
        Ok(l.ttft.pick(pct) <= self.plan.slo.ttft_limit() && tpot <= self.plan.slo.tpot_limit())
    }

    /// The fewest instances in 1 ..= `max` that serve the window within the SLO (`max` when
    /// none does); one instance for a window without requests.
    fn search(&mut self, window: &Trace, max: u32) -> Result<u32, String> {
        if window.requests.is_empty() {
            return Ok(1);
        }
        let (mut lo, mut hi) = (1, max);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.meets(window, mid)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }
}

/// A trace like `trace` (its source, format and time scale) without requests.
fn empty_like(trace: &Trace) -> Trace {
    Trace {
        source: trace.source.clone(),
        requests: Vec::new(),
        ignored_columns: Vec::new(),
        format: trace.format,
        time_scale: trace.time_scale,
    }
}

/// The requests of the trace the run simulates (`--num-requests` may cut it), cut into windows
/// of `window_s`, each with its arrivals shifted to start at its own edge.
fn windows(trace: &Trace, requests: usize, window_s: f64) -> Vec<Trace> {
    let used = &trace.requests[..requests.min(trace.requests.len())];
    let span = used.last().map_or(0.0, |r| r.arrival_s);
    let count = (span / window_s).floor() as usize + 1;
    let mut out: Vec<Trace> = (0..count).map(|_| empty_like(trace)).collect();
    for r in used {
        let k = ((r.arrival_s / window_s).floor() as usize).min(count - 1);
        let mut r = r.clone();
        r.arrival_s -= k as f64 * window_s;
        out[k].requests.push(r);
    }
    out
}

/// Per window, the SLO statistics of the requests that arrived in it: (TTFT, TPOT) by the
/// plan's statistic and TPOT definition, `None` for a window without arrivals. The samples are
/// kept per window (two floats a request) and each window's recorders live only while its
/// statistics are read: a recorder's histogram is tens of KB, thousands of windows would
/// hold hundreds of MB.
fn window_stats(plan: &Plan, records: &[RequestState], window_ns: f64, count: usize) -> Vec<Option<(f64, f64)>> {
    let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); count];
    for r in records {
        let (Some(first), Some(fin)) = (r.first_token, r.finish) else { continue };
        let k = ((r.arrival as f64 / window_ns).floor() as usize).min(count - 1);
        let tpot = match plan.serving.tpot_definition {
            TpotDefinition::InterToken if r.output > 1 => (fin - first) as f64 / 1e6 / (r.output - 1) as f64,
            TpotDefinition::InterToken => 0.0,
            TpotDefinition::Amortized => (fin - r.arrival) as f64 / 1e6 / r.output.max(1) as f64,
        };
        samples[k].push(((first - r.arrival) as f64 / 1e6, tpot));
    }
    let pct = plan.sim.slo_percentile;
    samples
        .iter()
        .map(|v| {
            (!v.is_empty()).then(|| {
                let ttft = Recorder::of(&v.iter().map(|s| s.0).collect::<Vec<_>>()).stat().pick(pct);
                let tpot = Recorder::of(&v.iter().map(|s| s.1).collect::<Vec<_>>()).stat().pick(pct);
                (ttft, tpot)
            })
        })
        .collect()
}

/// The replica plan of `best` (the device's Overall Best aggregated row) over the plan's trace
/// in windows of `window_s` seconds (see the module comment).
pub fn plan(plan: &Plan, device: &DeviceProfile, best: &Row, window_s: f64) -> ReplicaPlan {
    let ctx = CandidateCtx::new(plan, device, Candidate { parallel: best.layout, mtp: best.mtp }, Phase::Aggregated);
    let setup = ctx.sim_setup();
    let (cfg, _) = setup.config(best.batch_size, best.max_batched_tokens);
    let max = best.layout.dp.max(1);
    let devices_per_instance = (best.num_devices / max).max(1);
    let mut out = ReplicaPlan {
        parallel: best.parallel.clone(),
        max_num_seqs: best.batch_size,
        devices_per_instance,
        max_instances: max,
        window_s,
        windows: Vec::new(),
        instance_hours: 0.0,
        peak_instances: 0,
        peak_instance_hours: 0.0,
        device_hours: 0.0,
        peak_device_hours: 0.0,
        saving: 0.0,
        usd: None,
        peak_usd: None,
        slo_met: false,
        trace_simulations: 0,
        window_simulations: 0,
        error: None,
    };
    if best.layout.pp > 1 {
        // A replica of a pipelined row is several micro-batch lanes over shared stages; the
        // scheduled simulation turns single instances on and off, not whole replicas.
        out.error = Some(format!(
            "the replica plan does not schedule pipeline-parallel replicas (the best row has PP={}); plan without --pp-sizes",
            best.layout.pp
        ));
        return out;
    }
    let ArrivalProcess::Trace(trace) = &plan.sim.arrival else {
        out.error = Some("the replica plan needs --arrival trace".into());
        return out;
    };
    let requests = cfg.run.num_requests.min(trace.requests.len() as u64) as usize;
    let mut runner = Runner { plan, instance: cfg.instance.clone(), cost: &setup.cost, run: cfg.run.clone(), window_simulations: 0 };
    let parts = windows(trace, requests, window_s);
    let searched: Result<Vec<u32>, String> = parts.iter().map(|w| runner.search(w, max)).collect();
    out.window_simulations = runner.window_simulations;
    let searched = match searched {
        Ok(s) => s,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    let whole = Trace { requests: trace.requests[..requests].to_vec(), ..empty_like(trace) };
    let mut counts = searched.clone();
    let window_ns = window_s * NS;
    let stats = loop {
        out.trace_simulations += 1;
        let schedule: Vec<(u64, u32)> = counts.iter().enumerate().map(|(k, &c)| ((k as f64 * window_ns) as u64, c)).collect();
        let sys = runner.system(max, requests as u64);
        let records = match simulate_scheduled(&sys, runner.factory(whole.clone()), &schedule) {
            Ok((_, records)) => records,
            Err(e) => {
                out.error = Some(e.to_string());
                return out;
            }
        };
        let stats = window_stats(plan, &records, window_ns, counts.len());
        let missed: Vec<usize> = (0..counts.len()).filter(|&k| !meets(plan, stats[k]) && counts[k] < max).collect();
        if missed.is_empty() || out.trace_simulations >= MAX_TRACE_ROUNDS {
            break stats;
        }
        missed.iter().for_each(|&k| counts[k] += 1);
    };
    fill(&mut out, plan, device, parts.iter().map(|w| w.requests.len() as u64).collect(), &searched, &counts, &stats);
    out
}

/// Whether a window's statistics meet the SLO (a window without arrivals does).
fn meets(plan: &Plan, stats: Option<(f64, f64)>) -> bool {
    stats.is_none_or(|(ttft, tpot)| ttft <= plan.slo.ttft_limit() && tpot <= plan.slo.tpot_limit())
}

/// The plan's windows and totals from the counts and the last whole-trace simulation.
fn fill(
    out: &mut ReplicaPlan,
    plan: &Plan,
    device: &DeviceProfile,
    arrivals: Vec<u64>,
    searched: &[u32],
    counts: &[u32],
    stats: &[Option<(f64, f64)>],
) {
    let w = out.window_s;
    out.windows = (0..counts.len())
        .map(|k| ReplicaWindow {
            start_s: k as f64 * w,
            end_s: (k + 1) as f64 * w,
            instances: counts[k],
            searched_instances: searched[k],
            arrivals: arrivals[k],
            request_rate: arrivals[k] as f64 / w,
            ttft_ms: stats[k].map(|s| s.0),
            tpot_ms: stats[k].map(|s| s.1),
            slo_met: meets(plan, stats[k]),
        })
        .collect();
    let hours = w / 3600.0;
    out.instance_hours = counts.iter().map(|&c| c as f64 * hours).sum();
    out.peak_instances = counts.iter().copied().max().unwrap_or(0);
    out.peak_instance_hours = out.peak_instances as f64 * hours * counts.len() as f64;
    out.device_hours = out.instance_hours * out.devices_per_instance as f64;
    out.peak_device_hours = out.peak_instance_hours * out.devices_per_instance as f64;
    out.saving = if out.peak_instance_hours > 0.0 { 1.0 - out.instance_hours / out.peak_instance_hours } else { 0.0 };
    if let Some(cost) = &plan.device_hour_cost {
        let per_device_hour = super::cost::hourly_usd(1, &device.name, cost);
        out.usd = per_device_hour.map(|p| p * out.device_hours);
        out.peak_usd = per_device_hour.map(|p| p * out.peak_device_hours);
    }
    out.slo_met = out.windows.iter().all(|w| w.slo_met);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::arrival::TraceRequest;

    #[test]
    fn windows_cut_the_trace_at_their_edges() {
        let req = |t: f64| TraceRequest { arrival_s: t, input_tokens: 10, output_tokens: 2, prefix_group: None, prefix_len: 0 };
        let trace = Trace::parse("arrival_s,input_tokens,output_tokens\n0,1,1\n", "t.csv").unwrap();
        let trace = Trace { requests: vec![req(0.0), req(59.9), req(60.0), req(185.0)], ..trace };
        // 60 s windows: [0, 60) holds two, [60, 120) one, [120, 180) none, [180, 240) one;
        // arrivals count from each window's edge. Mutation: `ceil` for `floor` and 59.9 falls
        // into the second window.
        let w = windows(&trace, 4, 60.0);
        let times: Vec<Vec<f64>> = w.iter().map(|t| t.requests.iter().map(|r| r.arrival_s).collect()).collect();
        assert_eq!(times, vec![vec![0.0, 59.9], vec![0.0], vec![], vec![5.0]]);
        // --num-requests 2 cuts the trace before windowing.
        assert_eq!(windows(&trace, 2, 60.0).len(), 1);
    }
}
