//! Executions started by hand beside a job's schedule: run now (`…/trigger`) and backfill
//! (`…/backfill`). They neither move the job's progress nor count against `repeats`; each is
//! an execution of its own (its own id, retries under the job's failure policy, a run in the
//! history marked `manual` or `backfill`).
//!
//! The executions of one job run one at a time, in the order asked. Against the job's
//! scheduled executions they follow the overlap rule of the request (else the job's own):
//! `serial` / `bufferOne` take turns with them (a scheduled tick due while one runs waits for
//! the hand-started ones before it, and they wait for a scheduled execution in flight),
//! `allow` runs beside them, `skip` is refused while the job has an execution in flight.
//!
//! They live in memory only: what is still waiting when jobsd stops is not resumed (the API
//! answer names every execution id, and the run history shows which ran).

use std::collections::VecDeque;

use super::*;

/// How hand-started executions meet the job's scheduled ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtraOverlap {
    /// They take turns (`serial`, `bufferOne`).
    Serial,
    /// Refused while an execution of the job is in flight (`skip`).
    Skip,
    /// They run beside the scheduled ones (`allow`).
    Allow,
}

impl From<Overlap> for ExtraOverlap {
    fn from(o: Overlap) -> Self {
        match o {
            Overlap::Serial | Overlap::BufferOne => ExtraOverlap::Serial,
            Overlap::Skip => ExtraOverlap::Skip,
            Overlap::Allow(_) => ExtraOverlap::Allow,
        }
    }
}

/// A request for hand-started executions of one job.
pub struct ExtraRequest {
    /// Job key.
    pub key: Arc<str>,
    /// The job version they are meant for.
    pub generation: u64,
    /// `Manual` or `Backfill`.
    pub kind: TriggerKind,
    /// Nominal times, oldest first (run now: the time of the request).
    pub ticks: Vec<DateTime<Utc>>,
    /// The request's overlap rule; `None` takes the job's.
    pub overlap: Option<Overlap>,
    /// Gets the executions queued, or why not.
    pub reply: oneshot::Sender<Result<Vec<ExecutionId>, ExtraRefused>>,
    /// The stored job and its progress, tracked first if the loop leaves it to the store
    /// (due past its horizon).
    pub loaded: Option<Box<LoadedJob>>,
}

/// Why hand-started executions were not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtraRefused {
    /// The loop does not fire that version of the job (deleted, overwritten, or another
    /// replica's).
    NotTracked,
    /// `overlap: skip` and an execution of the job is in flight.
    Busy,
}

/// The hand-started executions of one job.
pub(super) struct ExtraQueue {
    /// The job version they belong to; a new version drops them.
    generation: u64,
    /// Waiting or in flight, the head first (only the head is ever out).
    runs: VecDeque<Extra>,
    /// The head is at the sink.
    out: bool,
    /// A scheduled tick of the job (its due time) held back until these are done.
    parked: Option<DateTime<Utc>>,
}

/// One hand-started execution.
struct Extra {
    tick: DateTime<Utc>,
    kind: TriggerKind,
    /// Taking turns with the scheduled executions (else beside them).
    serial: bool,
    /// Attempts made so far.
    attempts: u32,
    /// When the next attempt may go.
    due: DateTime<Utc>,
    /// When the first attempt went: retries keep the failure policy's spacing from it.
    first: Option<DateTime<Utc>>,
}

impl ExtraQueue {
    /// Whether a scheduled execution must wait for these.
    fn holds_schedule(&self) -> bool {
        self.runs.iter().any(|r| r.serial)
    }
}

impl Runner {
    /// Queues the executions of `req`, or says why not.
    pub(super) fn queue_extras(&mut self, mut req: ExtraRequest) {
        self.track_on_demand(&req.key, req.generation, req.loaded.take());
        let Some(entry) = self.jobs.get(&req.key) else {
            let _ = req.reply.send(Err(ExtraRefused::NotTracked));
            return;
        };
        if entry.generation != req.generation {
            let _ = req.reply.send(Err(ExtraRefused::NotTracked));
            return;
        }
        let job_overlap = entry.plan.policy().overlap;
        let overlap = ExtraOverlap::from(req.overlap.unwrap_or(job_overlap));
        let busy = self.job_busy(&req.key)
            || self
                .extras
                .get(&req.key)
                .is_some_and(|q| q.generation == req.generation && !q.runs.is_empty());
        if overlap == ExtraOverlap::Skip && busy {
            let _ = req.reply.send(Err(ExtraRefused::Busy));
            return;
        }
        // An `allow` job's scheduled executions never wait; neither do they wait for it.
        let serial = overlap != ExtraOverlap::Allow && !matches!(job_overlap, Overlap::Allow(_));
        let now = self.clock.now();
        let queue = self.extras.entry(req.key.clone()).or_insert_with(|| {
            Box::new(ExtraQueue {
                generation: req.generation,
                runs: VecDeque::new(),
                out: false,
                parked: None,
            })
        });
        if queue.generation != req.generation {
            // Left over from a version that is gone.
            queue.generation = req.generation;
            queue.runs.clear();
            queue.parked = None;
        }
        let mut ids = Vec::with_capacity(req.ticks.len());
        for tick in req.ticks {
            // Two runs by hand at one instant are two executions: the later one moves on by
            // a nanosecond so each has an id of its own.
            let tick = match queue.runs.back() {
                Some(last) if last.kind == req.kind && last.tick >= tick => {
                    last.tick + TimeDelta::nanoseconds(1)
                }
                _ => tick,
            };
            ids.push(ExecutionId::for_execution(&req.key, tick, req.kind));
            queue.runs.push_back(Extra {
                tick,
                kind: req.kind,
                serial,
                attempts: 0,
                due: now,
                first: None,
            });
        }
        let _ = req.reply.send(Ok(ids));
    }

    /// Whether the job's scheduled execution is out (or, for `allow`, any of them).
    fn job_busy(&self, key: &str) -> bool {
        let parked = self.extras.get(key).is_some_and(|q| q.parked.is_some());
        self.jobs.get(key).is_some_and(|e| {
            (e.state == State::InFlight && !parked)
                || e.overlapping.as_ref().is_some_and(|o| !o.out.is_empty())
        })
    }

    /// Holds back the scheduled tick of `key` due at `at` when hand-started executions that
    /// take turns with it come first; it is queued again once they are done. `true` when held.
    pub(super) fn hold_for_extras(&mut self, key: &Arc<str>, at: DateTime<Utc>) -> bool {
        let Some(queue) = self.extras.get_mut(key) else {
            return false;
        };
        let current = self
            .jobs
            .get(key)
            .is_some_and(|e| e.generation == queue.generation);
        if !current || !queue.holds_schedule() {
            return false;
        }
        queue.parked = Some(at);
        true
    }

    /// The earliest time a waiting hand-started execution may go.
    pub(super) fn extras_next_due(&self) -> Option<DateTime<Utc>> {
        self.extras
            .values()
            .filter(|q| !q.out)
            .filter_map(|q| q.runs.front().map(|r| r.due))
            .min()
    }

    /// Hands out every hand-started execution that may go now.
    pub(super) fn start_extras(&mut self) {
        if self.extras.is_empty() {
            return;
        }
        let now = self.clock.now();
        let keys: Vec<Arc<str>> = self.extras.keys().cloned().collect();
        for key in keys {
            if self.in_sink >= self.capacity {
                break;
            }
            let current = self.jobs.get(&key).map(|e| e.generation);
            let Some(queue) = self.extras.get(&key) else {
                continue;
            };
            if current != Some(queue.generation) {
                // Deleted or overwritten: its hand-started executions go with it.
                if !queue.out {
                    self.extras.remove(&key);
                }
                continue;
            }
            let Some(head) = queue.runs.front() else {
                continue;
            };
            if queue.out {
                continue;
            }
            if head.due > now {
                continue;
            }
            if head.serial && self.job_busy(&key) {
                // Its turn comes when the scheduled execution's result is in.
                continue;
            }
            self.hand_out_extra(key);
        }
    }

    /// Hands the head of `key`'s queue to the sink.
    fn hand_out_extra(&mut self, key: Arc<str>) {
        let now = self.clock.now();
        let Some(entry) = self.jobs.get(&key) else {
            return;
        };
        let generation = entry.generation;
        let timeout = entry.plan.policy().timeout;
        let Some(queue) = self.extras.get_mut(&key) else {
            return;
        };
        let Some(head) = queue.runs.front_mut() else {
            return;
        };
        queue.out = true;
        head.attempts += 1;
        head.first.get_or_insert(now);
        let (tick, kind, attempt) = (head.tick, head.kind, head.attempts);
        let trigger = fire::trigger_of(&key, entry, tick, now, attempt, kind);
        let execution_id = trigger.execution_id;
        self.in_sink += 1;
        let outlet = self.outlet.clone();
        tokio::spawn(async move {
            let started = outlet.clock.now();
            let delivery = outlet.sink.deliver_reported(trigger);
            let report = match timeout {
                None => delivery.await,
                Some(limit) => tokio::select! {
                    report = delivery => report,
                    () = outlet.clock.sleep_until(started + limit) => fire::timed_out(limit),
                },
            };
            let attempt = Box::new(Attempt {
                execution_id,
                tick,
                attempt,
                kind,
                started,
                finished: outlet.clock.now(),
                report,
            });
            let _ = outlet.tx.send(Command::ExtraDone {
                key,
                generation,
                attempt,
            });
        });
    }

    /// Applies the answer to a hand-started execution: records the run, retries it as the
    /// job's failure policy says, or moves on to the next one.
    pub(super) fn extra_done(&mut self, key: Arc<str>, generation: u64, attempt: Attempt) {
        self.in_sink = self.in_sink.saturating_sub(1);
        let now = self.clock.now();
        let Some(queue) = self.extras.get_mut(&key) else {
            return;
        };
        queue.out = false;
        let plan = self
            .jobs
            .get(&key)
            .filter(|e| e.generation == generation)
            .map(|e| e.plan.clone());
        let (Some(plan), true) = (plan, queue.generation == generation) else {
            // The job changed while this was out: nothing more of it runs.
            self.extras.remove(&key);
            return;
        };
        let run = attempt.run(&key);
        let Some(head) = queue.runs.front_mut() else {
            return;
        };
        let done = match attempt.report.result {
            // A run by hand is not held under a lease (async completion is for scheduled
            // executions): an app that takes it for later has taken it.
            TriggerResult::Success
            | TriggerResult::Cancel
            | TriggerResult::Held
            | TriggerResult::Accepted => true,
            TriggerResult::Undeliverable => {
                // Not an attempt: it goes again once the target can take it.
                head.attempts -= 1;
                head.due = now + TimeDelta::seconds(1);
                false
            }
            TriggerResult::Failed => {
                // The failure policy's spacing, from the first attempt of this execution.
                let retry = plan.retry_time(head.tick, head.attempts).map(|at| {
                    let first = head.first.unwrap_or(now);
                    first + (at - head.tick).max(TimeDelta::zero())
                });
                match retry {
                    Some(at) => {
                        head.due = at.max(now);
                        false
                    }
                    None => true,
                }
            }
        };
        if done {
            queue.runs.pop_front();
        }
        let counter = self.jobs.get(&key).map(|e| e.counter).unwrap_or_default();
        self.push_result(Persisted {
            run: Some(run),
            record_only: true,
            ..Persisted::step(key.clone(), generation, counter, None)
        });
        self.release_parked(&key);
    }

    /// Queues the job's held-back scheduled tick once no hand-started execution that takes
    /// turns with it is left, and forgets an empty queue.
    fn release_parked(&mut self, key: &Arc<str>) {
        let Some(queue) = self.extras.get_mut(key) else {
            return;
        };
        if queue.holds_schedule() {
            return;
        }
        let parked = queue.parked.take();
        if queue.runs.is_empty() && !queue.out {
            self.extras.remove(key);
        }
        if let Some(at) = parked
            && self
                .jobs
                .get(key)
                .is_some_and(|e| e.state == State::InFlight)
        {
            self.jobs.schedule(key, at);
        }
    }
}
