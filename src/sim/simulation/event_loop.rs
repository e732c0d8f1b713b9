//! The event loop: each event (an arrival, an instance's step done, a KV-link tick) is
//! applied at its time, routing requests to instances and handing finished prefills off over
//! the KV link; once every event of an instant is applied, the instances it touched plan their
//! next step, priced by their group's cost model (a pipelined lane's step runs through its
//! replica's stages: `sim::pipeline`).

use super::Simulation;
use crate::sim::config::Role;
use crate::sim::error::SimError;
use crate::sim::pipeline::stage_times;
use crate::sim::queue::{Event, Nanos};
use crate::sim::records::{DecodeSegment, StepRecord};
use crate::sim::router::Set;
use crate::sim::step_time::throttled_seconds;
use crate::util::round_to_u64;

/// Longest engine step the simulator accepts, in seconds. Real steps take milliseconds; a
/// longer one comes from non-physical device values and would saturate the clock.
pub const MAX_STEP_SECONDS: f64 = 3600.0;
/// Break down every n-th step's time by bound (the breakdown costs more than the latency).
const BREAKDOWN_EVERY: u64 = 16;

impl<'s, 'a> Simulation<'s, 'a> {
    /// The event loop: apply each event, account completions, and plan the touched idle
    /// instances once every event of an instant has been applied.
    pub(super) fn run(&mut self) -> Result<(), SimError> {
        while let Some((t, ev)) = self.queue.pop() {
            debug_assert!(t >= self.now, "time went backwards: {t} < {}", self.now);
            let dt = (t - self.now) as f64;
            let sum = self.kv_use.utilization_sum();
            // Time moves on only after every touched instance planned (and was refreshed); within
            // an instant the counts may lag, which costs nothing as dt is 0. Mutation: drop the
            // refresh after planning, and this fires in every multi-step simulator test.
            debug_assert!(
                dt == 0.0
                    || (sum - self.instances.iter().map(|i| i.kv.used() as f64 / i.kv.capacity as f64).sum::<f64>()).abs()
                        <= 1e-9 * (1.0 + sum),
                "an instance's KV changed without being marked dirty"
            );
            self.stats.kv_integral += dt * sum;
            self.now = t;
            let (touched, done_now) = self.apply(ev);
            if self.lazy_open && matches!(ev, Event::Arrival { .. }) {
                self.next_arrival = None;
                self.issue_next_open()?;
            }
            let touched = touched.unwrap_or(u32::MAX);
            if done_now > 0 && self.closed && self.win.start.is_some() {
                self.watch_latencies();
            }
            if done_now > 0 && !self.stop {
                self.account_completions(done_now)?;
                if self.folds {
                    self.fold_finished();
                }
            }
            if self.stop {
                break;
            }
            if touched != u32::MAX && !self.dirty.contains(&touched) {
                self.dirty.push(touched);
            }
            // Idle instances plan only once every event of this instant has been applied, so a
            // burst of simultaneous arrivals (or replacements) is seen as one.
            if self.queue.peek_time() == Some(self.now) {
                continue;
            }
            self.dirty.sort_unstable();
            let mut dirty = std::mem::take(&mut self.dirty);
            for touched in dirty.drain(..) {
                self.plan(touched)?;
                self.loads_changed(touched);
                let i = touched as usize;
                self.kv_use.refresh(i, self.group_of[i], self.instances[i].kv.used());
            }
            self.dirty = dirty;
        }
        self.settle_ahead()
    }

    /// Apply one event; returns the instance it touched (others it marks dirty itself) and
    /// the requests it completed.
    fn apply(&mut self, ev: Event) -> (Option<u32>, u64) {
        match ev {
            Event::Arrival { request } => (self.arrive(request), 0),
            Event::EngineArrival { request } => (Some(self.reach_engine(request)), 0),
            Event::StepDone { instance } => (Some(instance), self.step_done(instance)),
            Event::Delivered { instance } => (None, self.delivered(instance)),
            Event::KvTransferTick { generation } => {
                if generation == self.link.generation {
                    self.transfers_tick();
                }
                (None, 0)
            }
        }
    }

    /// Tell the router the load of an instance the simulation just changed.
    fn loads_changed(&mut self, instance: u32) {
        self.router.update(instance, self.instances[instance as usize].load);
    }

    /// Apply the changes of the entry instances in use that are due (see
    /// [`super::simulate_scheduled`]); only routing reads the count, so applying them at the
    /// next arrival is the same as at their own time.
    fn follow_schedule(&mut self) {
        while let Some(&(from, count)) = self.schedule.get(self.schedule_next) {
            if from > self.now {
                break;
            }
            self.router.set_active(Set::Entry, count as usize, &self.instances);
            self.schedule_next += 1;
        }
    }

    fn touch(&mut self, instance: u32) {
        if !self.dirty.contains(&instance) {
            self.dirty.push(instance);
        }
    }

    /// The KV links changed: each landed transfer frees its blocks on the prefill instance
    /// and lets its request join the decode set; the next tick is planned.
    fn transfers_tick(&mut self) {
        let mut landed = Vec::new();
        let next = self.link.tick(self.now, &mut landed);
        for (req, src, dst) in landed {
            self.instances[src as usize].release_held(self.reqs[req as usize].held_blocks);
            self.instances[dst as usize].land(req, &self.reqs);
            self.loads_changed(src);
            self.loads_changed(dst);
            self.touch(src);
            self.touch(dst);
        }
        if let Some(t) = next {
            self.queue.push(t, Event::KvTransferTick { generation: self.link.generation });
        }
    }

    /// Start the transfers of the pulls a decode instance started while planning.
    fn start_transfers(&mut self, dst: u32) {
        let mut started = std::mem::take(&mut self.instances[dst as usize].started_pulls);
        let Some(x) = &self.sys.transfer else { return };
        let mut next = None;
        for &req in &started {
            let r = &self.reqs[req as usize];
            let tokens = r.input + r.generated;
            next = self.link.start(self.now, req, r.kv_source, dst, x.latency_ns(), x.data_ns(tokens));
        }
        if let Some(t) = next {
            self.queue.push(t, Event::KvTransferTick { generation: self.link.generation });
        }
        started.clear();
        self.instances[dst as usize].started_pulls = started;
    }

    /// Route an arriving request: to a decode instance in a decode-only system (its KV is
    /// taken as transferred), else to an entry instance, through its front end if it has one.
    /// Returns the instance whose queue it joined now.
    fn arrive(&mut self, request: u32) -> Option<u32> {
        if self.decode_only {
            let target = self.router.route(Set::Decode, &self.instances);
            self.reqs[request as usize].instance = target;
            self.instances[target as usize].enqueue_transferred(request);
            self.loads_changed(target);
            Some(target)
        } else {
            self.follow_schedule();
            let target = self.router.route(Set::Entry, &self.instances);
            self.reqs[request as usize].instance = target;
            if self.has_frontend(target) {
                self.enter_frontend(target, request);
                self.loads_changed(target);
                return None;
            }
            self.instances[target as usize].enqueue(request, &self.reqs);
            self.loads_changed(target);
            Some(target)
        }
    }

    /// Complete an instance's step; hand requests finishing their prefill off over the KV
    /// link (or out of a prefill-only system). Returns the requests that left the system (with
    /// a front end, none: they leave when it delivers their last token).
    fn step_done(&mut self, instance: u32) -> u64 {
        let g = self.group_of[instance as usize];
        let fe = self.sys.groups[g].cfg.frontend.is_some();
        let inst = &mut self.instances[instance as usize];
        inst.complete(&self.sys.groups[g].cfg, &mut self.reqs, self.now, &self.acceptance, &mut self.out);
        let study = self.sys.transfer.is_none() || self.decoders.is_empty();
        if study {
            // Prefill-only study: a request leaves with its first token; nothing is transferred.
            for &r in &self.out.handed_off {
                let req = &mut self.reqs[r as usize];
                inst.release_held(req.held_blocks);
                req.generated = 1;
                req.first_token = Some(self.now);
                req.finish = Some(self.now);
                self.out.tokens += 1;
            }
        }
        // Who leaves the system with this step (its last token emitted).
        self.leaving.clear();
        self.leaving.extend_from_slice(&self.out.finished);
        if self.decoders.is_empty() {
            self.leaving.extend_from_slice(&self.out.handed_off);
        }
        // When the client got the step's tokens: now, or with a front end at its delivery.
        let at = if fe { self.deliver_step(instance, study) } else { self.now };
        self.log_tokens(instance, at);
        self.tokens_out += self.out.tokens;
        for &r in &self.out.prompts_done {
            let req = &mut self.reqs[r as usize];
            if !req.prompt_counted {
                // Its prompt once, not its recomputes.
                req.prompt_counted = true;
                self.prefilled_input += req.input;
            }
        }
        if self.keeps_series {
            self.series.push((self.now, self.tokens_out, self.prefilled_input));
            self.kv_series.push(self.stats.kv_integral);
        }
        self.loads_changed(instance);
        let done_now = if fe { 0 } else { self.out.finished.len() as u64 };
        if study {
            return if fe { 0 } else { done_now + self.out.handed_off.len() as u64 };
        }
        for i in 0..self.out.handed_off.len() {
            // Routed at once (the router forwards the request with where its KV is); the decode
            // instance pulls the KV when it can hold it.
            let r = self.out.handed_off[i];
            let target = self.router.route(Set::Decode, &self.instances);
            let req = &mut self.reqs[r as usize];
            req.kv_source = instance;
            req.instance = target;
            self.instances[target as usize].hand_to(r);
            self.loads_changed(target);
            self.touch(target);
        }
        done_now
    }

    /// Log when the client got the step's tokens (`at`), and open or close the decode segments
    /// of the requests whose runs of tokens start or end with it (see [`DecodeSegment`]): ITL
    /// is read from them for the measured requests only, once they are known. O(1) per step
    /// plus O(1) per request starting or ending a run: the lockstep decode set stays O(1).
    fn log_tokens(&mut self, instance: u32, at: Nanos) {
        let inst = &mut self.instances[instance as usize];
        if self.out.decode_seqs > 0 {
            inst.token_log.push(at);
        }
        let logged = inst.token_log.len() as u64;
        if inst.role != Role::Prefill {
            // A completed prompt emits a token now; the request decodes from the next step.
            for &r in &self.out.prompts_done {
                let s = DecodeSegment { instance, start: Some(at), from: logged, to: DecodeSegment::OPEN };
                self.reqs[r as usize].decoded.push(s);
            }
        }
        for &r in &self.out.finished {
            if let Some(s) = self.reqs[r as usize].decoded.last_mut().filter(|s| s.to == DecodeSegment::OPEN) {
                s.to = logged;
            }
        }
    }

    /// Plan an idle instance's next step and schedule its end (in a latencies-only run, the
    /// end of the last step it ran ahead to: [`Self::run_ahead`]).
    fn plan(&mut self, touched: u32) -> Result<(), SimError> {
        let grp = &self.sys.groups[self.group_of[touched as usize]];
        let inst = &mut self.instances[touched as usize];
        if inst.busy || !inst.has_work() {
            return Ok(());
        }
        let planned = inst.plan(&grp.cfg, &mut self.reqs, self.now);
        if !inst.started_pulls.is_empty() {
            self.start_transfers(touched);
        }
        let (grp, inst) = (&self.sys.groups[self.group_of[touched as usize]], &mut self.instances[touched as usize]);
        if !planned {
            if inst.idle_for_good() {
                // Nothing runs, nothing is in transfer, and the head of the queue cannot be
                // admitted even alone.
                return Err(SimError::Stalled { instance: touched, waiting: inst.waiting_count() });
            }
            return Ok(());
        }
        let now = self.now;
        let ns = match &grp.pipeline {
            None => {
                let (limit, window) = (grp.cost.power_limit(), &mut self.power[touched as usize]);
                step_ns(throttled_seconds(&grp.cfg, grp.cost, &inst.shape, |p| {
                    limit.map_or(1.0, |l| window.step(&l, now, p.device_s, p.matrix_s))
                }))?
            }
            Some(p) => {
                // The batch runs through the replica's stages, after the batches planned before it.
                let send = stage_times(&grp.cfg, p, &inst.shape, &mut self.stage_ns)?;
                self.stages[self.replica_of[touched as usize] as usize].run(now, &self.stage_ns, send) - now
            }
        };
        self.count_step(touched, now, ns);
        let end = self.run_ahead(touched, now + ns);
        self.queue.push(end, Event::StepDone { instance: touched });
        if self.stats.steps > self.sys.run.max_steps && self.steps_planned_by(now) > self.sys.run.max_steps {
            return Err(SimError::StepLimit { steps: self.sys.run.max_steps });
        }
        Ok(())
    }

    /// Account a step of `ns` the instance planned at `now` in the run's statistics, and tell
    /// the caller's observer.
    fn count_step(&mut self, touched: u32, now: Nanos, ns: Nanos) {
        let grp = &self.sys.groups[self.group_of[touched as usize]];
        let inst = &mut self.instances[touched as usize];
        inst.step_ms = ns as f64 / 1e6;
        let st = &mut self.stats;
        st.count(&inst.shape, inst.step_ms, inst.kv.used() as f64 / inst.kv.capacity as f64);
        // A latencies-only run reports no breakdown: its sampling would only cost time.
        if st.steps % BREAKDOWN_EVERY == 1 && !self.sys.run.stop_once_measured {
            let c = grp.cost.step(&inst.shape);
            st.breakdown.add_scaled(&c.breakdown, 1.0);
            st.breakdown_weight += c.seconds;
        }
        (self.on_step)(StepRecord {
            instance: touched,
            start: now,
            end: now + ns,
            prefill_seqs: inst.shape.prefill.seqs,
            prefill_tokens: inst.shape.prefill.tokens,
            decode_seqs: inst.shape.decode.seqs,
            decode_tokens: inst.shape.decode.tokens,
            kv_used: inst.kv.used(),
        });
    }
}

/// A step of `secs` on the clock, in whole nanoseconds (at least one).
pub(super) fn step_ns(secs: f64) -> Result<Nanos, SimError> {
    if !(secs.is_finite() && secs <= MAX_STEP_SECONDS) {
        // A step this slow means the device values are not physical; never a result.
        return Err(SimError::StepTooSlow { seconds: secs });
    }
    Ok(round_to_u64(secs * 1e9).max(1))
}
