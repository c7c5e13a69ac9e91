//! What a tick whose failure policy is spent leads to under `failurePolicy.onExhausted`
//! (`pause`, `deadLetter`): the pause or the dead-letter job, written with the tick's result
//! (a pause then goes the way a pause by hand goes, `paused.rs`), and the dead-letter job
//! counted and fired once written.

use chrono::{DateTime, Utc};

use super::{Command, Runner};
use crate::engine::convert::timestamp;
pub(super) use crate::engine::dead_letter::DeadLetterJob;
use crate::engine::dead_letter::{Failed, dead_letter_job};
use crate::engine::history::{Attempt, bounded};
use crate::engine::queue::Entry;
use crate::observe::Exhausted;
use crate::schedule::OnExhausted;
use crate::store::{self, DeadLetterAt, OpResult, Paused};

/// The pause reason of a job paused by `failurePolicy.onExhausted: pause`.
const PAUSED_EXHAUSTED: &str = "failure_policy_exhausted";

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

    /// Counts a written dead-letter job and, unless the store's watch brings it, fires it.
    pub(super) fn dead_lettered(
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
