//! The trigger loop's part in pausing and dead-lettering: what a tick whose failure policy is
//! spent leads to under `failurePolicy.onExhausted` (`pause`, `deadLetter`), and pauses and
//! resumes by hand. Every change is written through the loop's own result batches, so it
//! lands in the store in the same order as the job's results, and is applied in memory once
//! written: the loop and the store never disagree about whether a job is paused.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

use super::{Command, Persisted, Runner, State};
use crate::engine::convert::timestamp;
pub(super) use crate::engine::dead_letter::DeadLetterJob;
use crate::engine::dead_letter::{Failed, dead_letter_job};
use crate::engine::history::{Attempt, bounded};
use crate::engine::queue::Entry;
use crate::observe::Exhausted;
use crate::schedule::OnExhausted;
use crate::store::{self, DeadLetterAt, OpResult, Paused};

/// The pause reason of a job paused through the API.
const PAUSED_BY_HAND: &str = "manual";

/// The pause reason of a job paused by `failurePolicy.onExhausted: pause`.
const PAUSED_EXHAUSTED: &str = "failure_policy_exhausted";

/// A pause by hand at `now`, saying why in `note`.
pub fn paused_by_hand(now: DateTime<Utc>, note: &str) -> Paused {
    Paused {
        at: Some(timestamp(now)),
        reason: PAUSED_BY_HAND.to_owned(),
        note: note.to_owned(),
    }
}

/// Where a pause or resume by hand is answered: the result of its write, or `None` when the
/// loop does not fire that job version (the caller then writes it itself).
pub type PauseReply = oneshot::Sender<Option<Result<OpResult, store::Error>>>;

/// A pause or resume by hand, waiting in a result batch.
pub struct ByHand {
    /// Why and since when; `None` resumes.
    pub paused: Option<Paused>,
    /// Who waits for it.
    reply: PauseReply,
}

impl Runner {
    /// What `onExhausted` adds to the result of a tick given up (nothing for `drop`): the
    /// pause, or the dead-letter job. `next` is the job's next fire time (`None`: it is
    /// finished, and a pause would be moot).
    pub(super) fn on_exhausted(
        &self,
        key: &str,
        entry: &Entry,
        attempt: &Attempt,
        next: Option<DateTime<Utc>>,
    ) -> (Option<Paused>, Option<Box<DeadLetterJob>>) {
        let metrics = &self.outlet.metrics;
        let error = bounded(attempt.report.error.as_deref().unwrap_or_default());
        match entry.plan.on_exhausted() {
            OnExhausted::Pause if next.is_some() => {
                metrics.exhausted(Exhausted::Pause);
                // The note is the error that spent the policy.
                let paused = Paused {
                    at: Some(timestamp(self.clock.now())),
                    reason: PAUSED_EXHAUSTED.to_owned(),
                    note: error,
                };
                (Some(paused), None)
            }
            OnExhausted::Drop | OnExhausted::Pause => {
                metrics.exhausted(Exhausted::Drop);
                (None, None)
            }
            OnExhausted::DeadLetter(target) => {
                let failed = Failed {
                    name: entry.name_in(key),
                    execution_id: attempt.execution_id,
                    tick: attempt.tick,
                    attempts: attempt.attempt,
                    error: &error,
                    data: entry.data.as_ref(),
                };
                let job = dead_letter_job(target, &entry.metadata, &failed, self.clock.now());
                if job.is_none() {
                    metrics.exhausted(Exhausted::DeadLetterFailed);
                }
                // Counted once written: only the store knows which name it got.
                (None, job.map(Box::new))
            }
        }
    }

    /// [`Command::SetPaused`]: queues the change to be written with the job's results, or
    /// answers at once that the loop does not fire that version.
    pub(super) fn set_paused(
        &mut self,
        key: Arc<str>,
        generation: u64,
        paused: Option<Paused>,
        reply: PauseReply,
    ) {
        let Some(entry) = self.jobs.get(&key).filter(|e| e.generation == generation) else {
            let _ = reply.send(None);
            return;
        };
        let counter = entry.counter;
        if paused.is_none()
            && entry.paused
            && let Some(passed) = self.resume_over(&key, self.clock.now())
        {
            // The resume is written with the ticks it passes over, in one op.
            self.push_result(Persisted {
                by_hand: Some(ByHand { paused, reply }),
                ..passed
            });
            return;
        }
        self.push_result(Persisted {
            by_hand: Some(ByHand { paused, reply }),
            record_only: true,
            ..Persisted::step(key, generation, counter, None)
        });
    }

    /// Applies what a written result created or changed beyond the job's progress: places
    /// its dead-letter job, and applies and answers a pause or resume by hand. Whether it was
    /// only that (the job's progress is then left alone).
    pub(super) fn after_write(&mut self, p: &mut Persisted) -> bool {
        if let Some(job) = p.dead_letter.take() {
            self.dead_lettered(*job, p.written.as_ref());
        }
        let Some(by_hand) = p.by_hand.take() else {
            return false;
        };
        let written = p.written.take().unwrap_or(Err(store::Error::Closed));
        if matches!(written, Ok(OpResult::Done)) {
            if !p.record_only
                && let Some(entry) = self.jobs.get_mut(&p.key)
                && entry.generation == p.generation
            {
                // A resume that passed over ticks: the job goes on from the progress after them.
                entry.counter = p.counter;
            }
            self.apply_pause(&p.key, p.generation, by_hand.paused.is_some());
        }
        let _ = by_hand.reply.send(Some(written));
        true
    }

    /// Pauses or resumes the entry of `key` (version `generation`) in memory.
    fn apply_pause(&mut self, key: &Arc<str>, generation: u64, paused: bool) {
        let Some(entry) = self.jobs.get(key).filter(|e| e.generation == generation) else {
            return;
        };
        if paused {
            self.jobs.pause(key);
            return;
        }
        // The ticks that fell due while it was paused are passed over already (see
        // `resume.rs`); the catch-up policy kept those that still run.
        let at = entry.plan.fire_time(&entry.counter);
        let counter = entry.counter;
        self.jobs.resume(key, at);
        if at.is_none() && self.jobs.get(key).is_some_and(|e| e.state == State::Paused) {
            // Its ttl or repeats ran out while it was paused: finished, as at load.
            self.outlet.metrics.skipped(crate::observe::Skip::Expired);
            self.jobs.set_persisting(key);
            self.push_result(Persisted::step(key.clone(), generation, counter, None));
        }
    }

    /// Counts a written dead-letter job and, unless the store's watch brings it, fires it.
    fn dead_lettered(
        &mut self,
        job: DeadLetterJob,
        written: Option<&Result<OpResult, store::Error>>,
    ) {
        let metrics = self.outlet.metrics.clone();
        let key = match written {
            Some(Ok(OpResult::DeadLettered(DeadLetterAt::Key))) => job.record.key,
            Some(Ok(OpResult::DeadLettered(DeadLetterAt::Fallback))) => job.record.fallback_key,
            Some(Ok(OpResult::DeadLettered(DeadLetterAt::Nowhere))) => {
                tracing::warn!(
                    key = %job.record.key,
                    fallback = %job.record.fallback_key,
                    "dead-letter job not created: both of its names are taken"
                );
                metrics.exhausted(Exhausted::DeadLetterFailed);
                return;
            }
            // The failed job changed meanwhile: its result, and so its dead letter, was
            // not written.
            Some(Ok(_)) => return,
            Some(Err(_)) | None => {
                tracing::error!(
                    key = %job.record.key,
                    "dead-letter job not created: its result could not be written"
                );
                metrics.exhausted(Exhausted::DeadLetterFailed);
                return;
            }
        };
        metrics.exhausted(Exhausted::DeadLetter);
        metrics.created();
        tracing::info!(key = %key, "dead-letter job created");
        if self.watched {
            return;
        }
        let Some(stored) = job.record.job else {
            return;
        };
        self.handle(Command::Upsert {
            key: key.into(),
            job: Box::new(stored),
            plan: Box::new(job.plan),
        });
    }
}
