//! Pauses and resumes in the trigger loop, by hand and after `onExhausted: pause`. Every change
//! is written through the loop's own result batches, so it lands in the store in the same
//! order as the job's results, and is applied in memory once written: the loop and the store
//! never disagree about whether a job is paused.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

use super::{Persisted, Runner, State};
use crate::engine::convert::timestamp;
use crate::store::{self, OpResult, Paused};

/// The pause reason of a job paused through the API.
const PAUSED_BY_HAND: &str = "manual";

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
}
