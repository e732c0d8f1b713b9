//! A latencies-only run's shortcut: an instance runs ahead through repeated decode steps.
//!
//! An SLO check ([`RunParams::stop_once_measured`]) reads only the measured requests'
//! latencies, and most of its steps are lockstep decode steps that repeat the one before with
//! every context a token longer. Between arrivals nothing outside an instance can change what
//! it plans: in a system of mixed instances without front ends, pipelines or KV links, the
//! only event that reaches an instance from outside is an arrival routed to it (routing reads
//! the instances' loads, which decode steps leave alone). So when an instance plans, it
//! completes its step in place and plans the same decode step again
//! ([`Instance::repeat_decodes`]) for as long as that step is repeatable and ends before the
//! next arrival (at the arrival's instant the arrival is applied first and may join this
//! instance), without the event queue and the scheduler; the step left in flight is queued
//! as usual. Each step gets the same shape, the same time and the same token log entry as the
//! step-by-step run gives it, so every request's first token, finish and inter-token gaps are
//! the same bits.
//!
//! What differs is when things are done, not what: steps are counted before the run's clock
//! reaches them. The step limit is the step-by-step run's: a step run ahead counts once the
//! planning the step-by-step run would have done for it is reached
//! ([`Simulation::steps_planned_by`]), and when the run stops, those the step-by-step run would
//! never have planned are taken back ([`Simulation::settle_ahead`]). The step statistics, KV use
//! and tokens emitted may include steps past the stop; a latencies-only report does not read
//! them.
//!
//! [`RunParams::stop_once_measured`]: crate::sim::config::RunParams::stop_once_measured
//! [`Instance::repeat_decodes`]: crate::sim::instance::Instance::repeat_decodes

use super::event_loop::step_ns;
use super::Simulation;
use crate::sim::error::SimError;
use crate::sim::queue::Nanos;
use crate::sim::step_time::throttled_seconds;

#[cfg(test)]
thread_local! {
    /// Steps run ahead on this thread, for the tests to check that the shortcut is taken.
    pub(crate) static STEPS_RUN_AHEAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl<'s, 'a> Simulation<'s, 'a> {
    /// Instance `i` just planned a step ending at `end`. In a run that fast-forwards, complete
    /// its repeatable steps in place and plan each again, while they end before the next
    /// arrival. Returns the end of the step left in flight.
    pub(super) fn run_ahead(&mut self, i: u32, mut end: Nanos) -> Nanos {
        if !(self.fast_forward && self.lazy_open) {
            return end;
        }
        let grp = &self.sys.groups[self.group_of[i as usize]];
        let inst = &mut self.instances[i as usize];
        let ahead = &mut self.ahead[i as usize];
        let (limit, window) = (grp.cost.power_limit(), &mut self.power[i as usize]);
        // The steps it ran ahead to before all started by now: they count as planned.
        ahead.clear();
        while self.next_arrival.is_none_or(|t| t > end) && inst.repeatable() {
            // A step too slow to price ends the run only if the step-by-step run gets there.
            let shape = inst.repeated_shape(&grp.cfg);
            // The power window moves only with a step that is taken (a step too slow to price
            // ends the run here, as the step-by-step run would end it).
            let mut moved = *window;
            let throttle = |p: &crate::cost::StepParts| limit.map_or(1.0, |l| moved.step(&l, end, p.device_s, p.matrix_s));
            let Ok(ns) = step_ns(throttled_seconds(&grp.cfg, grp.cost, &shape, throttle)) else { break };
            *window = moved;
            self.tokens_out += inst.repeat_decodes(&grp.cfg, end, shape);
            // No front end: the client gets the tokens when the step ends.
            inst.token_log.push(end);
            inst.step_ms = ns as f64 / 1e6;
            self.stats.count(&inst.shape, inst.step_ms, inst.kv.used() as f64 / inst.kv.capacity as f64);
            ahead.push(end);
            end += ns;
            #[cfg(test)]
            STEPS_RUN_AHEAD.with(|s| s.set(s.get() + 1));
        }
        end
    }

    /// The steps the step-by-step run would have planned once it has planned at `t`: every
    /// step counted so far but those run ahead to that start later.
    pub(super) fn steps_planned_by(&self, t: Nanos) -> u64 {
        let later: usize = self.ahead.iter().map(|a| a.len() - a.partition_point(|&s| s <= t)).sum();
        self.stats.steps - later as u64
    }

    /// The run is over: when it stopped (at `now`, before planning that instant), the steps
    /// run ahead to start at or after `now` would not have been planned; and the step limit
    /// holds as for the step-by-step run.
    pub(super) fn settle_ahead(&mut self) -> Result<(), SimError> {
        if !self.fast_forward {
            return Ok(());
        }
        if self.stop {
            let now = self.now;
            let late: usize = self.ahead.iter().map(|a| a.len() - a.partition_point(|&s| s < now)).sum();
            self.stats.steps -= late as u64;
        }
        if self.stats.steps > self.sys.run.max_steps {
            return Err(SimError::StepLimit { steps: self.sys.run.max_steps });
        }
        Ok(())
    }
}
