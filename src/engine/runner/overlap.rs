//! `overlap: allow`: up to `maxConcurrent` executions of one job out at once. Each execution
//! (a tick) goes its own way through its attempts; the job's persisted progress is the
//! counter up to the oldest execution still out, so a crash runs again every execution from
//! there (at least once), and `repeats`/`ttl` count ticks in order. The job keeps one place
//! in the time queue: the earliest of its next tick (while there is room) and its
//! executions' retries.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::skips::skip_reason;
use super::{Persisted, Runner};
use crate::engine::history::Attempt;
use crate::engine::queue::Execution;
use crate::observe::Skip;
use crate::schedule::{Counter, Outcome, Overlap, WhileTargetDown};
use crate::store::{RunOutcome, StoredRun};
use crate::trigger::TriggerResult;

impl Runner {
    /// An `overlap: allow` job fell due at `now`: hands out its executions due again, and its
    /// next tick if it is due and there is room; then queues it for whatever comes next.
    pub(super) fn fire_overlapping(&mut self, key: Arc<str>, now: DateTime<Utc>) {
        let Some(entry) = self.jobs.get(&key) else {
            return;
        };
        let idle = entry.overlapping.as_ref().is_none_or(|o| o.out.is_empty());
        if idle && let Some((counter, skipped)) = entry.plan.catch_up(&entry.counter, now) {
            let generation = entry.generation;
            self.skip_ticks(key, generation, counter, skipped, Skip::Missed, now);
            return;
        }
        let Some(entry) = self.jobs.get_mut(&key) else {
            return;
        };
        let overlapping = entry.overlapping.get_or_insert_default();
        if idle {
            overlapping.cursor = entry.counter;
        }
        let mut hand_out = Vec::new();
        for execution in &mut overlapping.out {
            if let Some((at, attempt)) = execution.again.filter(|(at, _)| *at <= now) {
                execution.again = None;
                hand_out.push((execution.tick, at, attempt));
            }
        }
        if running(&entry.overlapping) < most(entry.plan.policy().overlap)
            && let Some(overlapping) = entry.overlapping.as_mut()
            && let Some(tick) = entry.plan.next_tick(&overlapping.cursor)
            && let Some(at) = entry.plan.fire_time(&overlapping.cursor)
            && at <= now
        {
            overlapping.cursor = entry
                .plan
                .apply(&overlapping.cursor, Outcome::Success)
                .counter;
            overlapping.out.push_back(Execution {
                tick,
                ended: false,
                again: None,
            });
            hand_out.push((tick, at, 1));
        }
        for (tick, at, attempt) in hand_out {
            self.hand_out(key.clone(), tick, at, attempt, now);
        }
        self.requeue_overlapping(&key);
    }

    /// Applies the answer to one attempt of an `overlap: allow` job's execution: a retry or
    /// a held execution is handed out again later; an ended one moves the job's progress on
    /// once every older one has ended.
    pub(super) fn overlapping_result(&mut self, key: Arc<str>, attempt: Attempt) {
        let now = self.clock.now();
        let Some(entry) = self.jobs.get(&key) else {
            return;
        };
        let generation = entry.generation;
        let tick = attempt.tick;
        let out = entry
            .overlapping
            .as_ref()
            .is_some_and(|o| o.out.iter().any(|e| e.tick == tick && !e.ended));
        if !out {
            return;
        }
        let mut run = attempt.run(&key);
        let again = match attempt.report.result {
            TriggerResult::Success | TriggerResult::Accepted | TriggerResult::Held => None,
            TriggerResult::Cancel => {
                // The target wants no more of the job: it is finished and deleted.
                let counter = entry.counter;
                self.jobs.set_persisting(&key);
                self.push_result(Persisted {
                    run: Some(run),
                    ..Persisted::step(key, generation, counter, None)
                });
                return;
            }
            TriggerResult::Failed => entry
                .plan
                .retry_time(tick, attempt.attempt)
                .map(|at| (at, attempt.attempt + 1)),
            TriggerResult::Undeliverable
                if entry.plan.policy().while_target_down == WhileTargetDown::Skip =>
            {
                self.outlet.metrics.skipped(Skip::TargetDown);
                run.outcome = RunOutcome::Skipped.into();
                run.error = skip_reason(Skip::TargetDown).to_owned();
                None
            }
            // Held: tried again as soon as the target is back (the job is staged meanwhile).
            TriggerResult::Undeliverable => Some((now, attempt.attempt)),
        };
        let held = attempt.report.result == TriggerResult::Undeliverable && again.is_some();
        let dropped = again.is_none() && attempt.report.result == TriggerResult::Failed;
        match again {
            Some(again) => {
                if let Some(execution) = self.execution_mut(&key, tick) {
                    execution.again = Some(again);
                }
                self.push_result(Persisted {
                    run: Some(run),
                    record_only: true,
                    ..Persisted::step(key.clone(), generation, Counter::default(), None)
                });
                if held && !self.sink.is_deliverable(&key) {
                    self.jobs.stage(&key);
                } else {
                    self.requeue_overlapping(&key);
                }
            }
            None => self.end_execution(key, tick, run, dropped),
        }
    }

    /// Ends the execution of `tick`: its run is written with the job's progress up to the
    /// oldest execution still out.
    fn end_execution(&mut self, key: Arc<str>, tick: DateTime<Utc>, run: StoredRun, dropped: bool) {
        if let Some(execution) = self.execution_mut(&key, tick) {
            execution.ended = true;
        }
        let Some(entry) = self.jobs.get_mut(&key) else {
            return;
        };
        let generation = entry.generation;
        let Some(overlapping) = entry.overlapping.as_mut() else {
            return;
        };
        let mut moved = false;
        while overlapping.out.front().is_some_and(|e| e.ended) {
            overlapping.out.pop_front();
            entry.counter = entry.plan.apply(&entry.counter, Outcome::Success).counter;
            moved = true;
        }
        let counter = entry.counter;
        if overlapping.out.is_empty() && entry.plan.next_tick(&overlapping.cursor).is_none() {
            // The last tick has ended: the job is finished.
            self.jobs.set_persisting(&key);
            self.push_result(Persisted {
                run: Some(run),
                dropped,
                ..Persisted::step(key, generation, counter, None)
            });
            return;
        }
        self.push_result(Persisted {
            run: Some(run),
            dropped,
            record_only: !moved,
            detached: moved,
            ..Persisted::step(
                key.clone(),
                generation,
                counter,
                Some(DateTime::<Utc>::MIN_UTC),
            )
        });
        self.requeue_overlapping(&key);
    }

    /// Queues an `overlap: allow` job at the earliest of its executions' next attempts and,
    /// while there is room, its next tick; leaves it out of the queue when neither is due
    /// (it waits for an answer).
    pub(super) fn requeue_overlapping(&mut self, key: &Arc<str>) {
        let Some(entry) = self.jobs.get(key) else {
            return;
        };
        let Some(overlapping) = &entry.overlapping else {
            return;
        };
        let again = overlapping
            .out
            .iter()
            .filter_map(|e| e.again.map(|(at, _)| at))
            .min();
        let next = (running(&entry.overlapping) < most(entry.plan.policy().overlap))
            .then(|| entry.plan.fire_time(&overlapping.cursor))
            .flatten();
        match again.into_iter().chain(next).min() {
            Some(at) => self.jobs.schedule(key, at),
            None => self.jobs.set_in_flight(key),
        }
    }

    fn execution_mut(&mut self, key: &str, tick: DateTime<Utc>) -> Option<&mut Execution> {
        self.jobs
            .get_mut(key)?
            .overlapping
            .as_mut()?
            .out
            .iter_mut()
            .find(|e| e.tick == tick && !e.ended)
    }
}

/// Executions not yet ended (at the sink or waiting to be tried again).
fn running(overlapping: &Option<Box<crate::engine::queue::Overlapping>>) -> usize {
    overlapping
        .as_ref()
        .map_or(0, |o| o.out.iter().filter(|e| !e.ended).count())
}

/// `maxConcurrent`.
fn most(overlap: Overlap) -> usize {
    match overlap {
        Overlap::Allow(n) => usize::try_from(n).unwrap_or(usize::MAX),
        _ => 1,
    }
}
