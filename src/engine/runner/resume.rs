//! Resuming a paused job: the ticks that fell due while it was paused are passed over as one
//! `skipped` run (reason `paused`), and `policy.catchUp` picks those that still run (see
//! [`Plan::resume`](crate::schedule::Plan::resume)). The skipped run, the progress the job
//! goes on from and the end of the pause are written in one op, so a crash cannot leave the
//! pause ended with its ticks not passed over.
//!
//! A tick in progress when the job is resumed (a retry waiting, an attempt out) goes on
//! first; the ticks are passed over once it has ended. That wait is kept in memory only: a
//! restart in between leaves them to `policy.catchUp` as missed ticks.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::skips::skip_reason;
use super::{Persisted, Runner, State, convert};
use crate::observe::Skip;
use crate::schedule::Resume;
use crate::store::{RunOutcome, StoredRun};

impl Runner {
    /// The result a resume at `now` of the paused job `key` writes: the ticks passed over and
    /// the progress after them. `None` when there is nothing to pass over now: none fell due,
    /// the job is a one-shot (it runs), or a tick is in progress (they are passed over once
    /// it has ended, by [`Runner::resumed_tick`]).
    pub(super) fn resume_over(&mut self, key: &Arc<str>, now: DateTime<Utc>) -> Option<Persisted> {
        let entry = self.jobs.get(key)?;
        let idle = entry.state == State::Paused
            && entry.counter.attempts == 0
            && entry.overlapping.as_ref().is_none_or(|o| o.out.is_empty());
        if !idle {
            if entry.plan.schedule.is_some() {
                self.resuming.insert(key.clone(), (entry.generation, now));
            }
            return None;
        }
        let resume = entry.plan.resume(&entry.counter, now)?;
        self.paused_run(key, entry.generation, resume, now)
    }

    /// For a job resumed while a tick was in progress, once that tick has ended: the ticks
    /// that fell due while it was paused, passed over as at its resume. `None` when the job
    /// was not resumed so, or its tick has not ended yet.
    pub(super) fn resumed_tick(&mut self, key: &Arc<str>) -> Option<Persisted> {
        let &(generation, resumed_at) = self.resuming.get(key)?;
        let Some(entry) = self.jobs.get(key).filter(|e| e.generation == generation) else {
            self.resuming.remove(key);
            return None;
        };
        let idle = entry.counter.attempts == 0
            && entry.overlapping.as_ref().is_none_or(|o| o.out.is_empty());
        if !idle {
            return None;
        }
        self.resuming.remove(key);
        let resume = entry.plan.resume(&entry.counter, resumed_at)?;
        self.paused_run(key, generation, resume, resumed_at)
    }

    /// The skipped run standing for the ticks a resume passed over, with the progress after
    /// them; `None` when there were none.
    fn paused_run(
        &self,
        key: &Arc<str>,
        generation: u64,
        resume: Resume,
        now: DateTime<Utc>,
    ) -> Option<Persisted> {
        if resume.paused == 0 {
            return None;
        }
        let entry = self.jobs.get(key)?;
        let next = entry.plan.fire_time(&resume.counter);
        self.outlet
            .metrics
            .skipped_many(Skip::Paused, resume.paused);
        Some(Persisted {
            run: Some(skipped_run(&resume, now)),
            skipped_ticks: skipped_ticks(&resume),
            ..Persisted::step(key.clone(), generation, resume.counter, next)
        })
    }
}

/// The `skipped` run (reason `paused`) standing for the ticks a resume at `now` passed over.
pub fn skipped_run(resume: &Resume, now: DateTime<Utc>) -> StoredRun {
    StoredRun {
        nominal: Some(convert::timestamp(resume.last.unwrap_or(now))),
        started: Some(convert::timestamp(now)),
        finished: Some(convert::timestamp(now)),
        outcome: RunOutcome::Skipped.into(),
        error: skip_reason(Skip::Paused).to_owned(),
        ..StoredRun::default()
    }
}

/// How many ticks that run stands for, as a result record counts them.
pub fn skipped_ticks(resume: &Resume) -> u32 {
    u32::try_from(resume.paused).unwrap_or(u32::MAX)
}
