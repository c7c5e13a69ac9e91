//! Pausing and resuming jobs by hand. A paused job keeps its schedule, progress and counters;
//! no tick fires while it is paused. Every tick that falls due meanwhile is skipped and
//! counted (`skipped.paused`, computed from the plan when the job is viewed, written once at
//! the resume); the resume follows `policy.catchUp` (`latest`: the latest of them runs once;
//! `window`: those within the window; `all` and `none`: none runs — Dapr has no pause, so its
//! default skips). The state lives in the job's stored counter
//! ([`Paused`](crate::store::Paused)), so it survives restarts and moves with the job between
//! replicas, and an overwrite (a new version) starts unpaused.
//!
//! One job at a time by name here; wider selections (a name prefix, labels) are in
//! `bulk.rs`, a loop over the same per-key change.

use super::detached::to_the_end;
use super::history::Recorded;
use super::runner::{Command, paused_by_hand, skipped_run, skipped_ticks};
use super::{Engine, Error, convert};
use crate::observe::Skip;
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_store::StoredJob;
use crate::store::{Op, OpResult, Paused};
use crate::trigger::keys;

impl Engine {
    /// Pauses job `name` of the metadata's owner, saying why in `note`. Pausing a paused job
    /// replaces the reason, note and time. `NotFound` when there is no such job.
    pub async fn pause_job(
        &self,
        metadata: &sv1::JobMetadata,
        name: &str,
        note: &str,
    ) -> Result<(), Error> {
        let key = keys::job_key(keys::check_metadata(Some(metadata))?, name)?;
        let paused = paused_by_hand(self.inner.clock.now(), note);
        self.set_paused(key, Some(paused))
            .await?
            .ok_or_else(|| Error::NotFound(name.to_owned()))
    }

    /// Resumes job `name` of the metadata's owner; one that is not paused is left as it is.
    /// `NotFound` when there is no such job.
    pub async fn resume_job(&self, metadata: &sv1::JobMetadata, name: &str) -> Result<(), Error> {
        let key = keys::job_key(keys::check_metadata(Some(metadata))?, name)?;
        self.set_paused(key, None)
            .await?
            .ok_or_else(|| Error::NotFound(name.to_owned()))
    }

    /// Pauses (`paused` set) or resumes the job stored under `key`; `None` when there is none.
    ///
    /// When the trigger loop fires the job, the change goes through it: it is written in
    /// order with the job's results (a result that pauses the job cannot land after a resume
    /// given later) and applied in memory once durable. Otherwise (no loop, or a replica that
    /// does not own the job) it is written here.
    pub(super) async fn set_paused(
        &self,
        key: String,
        paused: Option<Paused>,
    ) -> Result<Option<()>, Error> {
        let engine = self.clone();
        to_the_end(async move { engine.write_paused(key, paused).await }).await
    }

    /// [`Engine::set_paused`] in the caller's task.
    async fn write_paused(&self, key: String, paused: Option<Paused>) -> Result<Option<()>, Error> {
        let _guard = self.lock(&key).await;
        let Some(loaded) = self.inner.store.get_loaded(&key).await? else {
            return Ok(None);
        };
        let (job, generation) = (loaded.job.clone(), loaded.job.generation);
        let result = match self
            .pause_through_loop(&key, generation, paused.clone(), loaded)
            .await
        {
            Some(written) => written?,
            None => {
                let resume = match paused {
                    None => self.resume_op(&key, &job).await?,
                    Some(_) => None,
                };
                let op = resume.unwrap_or(Op::SetPaused {
                    key,
                    generation,
                    paused,
                });
                let results = self.write(vec![op]).await?;
                results.first().copied().unwrap_or(OpResult::Skipped)
            }
        };
        // Skipped: the job finished (and was deleted) meanwhile.
        Ok((result == OpResult::Done).then_some(()))
    }

    /// Hands the change to the trigger loop; `None` when the loop does not fire that version
    /// of the job (or there is no loop).
    async fn pause_through_loop(
        &self,
        key: &str,
        generation: u64,
        paused: Option<Paused>,
        loaded: crate::store::LoadedJob,
    ) -> Option<Result<OpResult, crate::store::Error>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.inner
            .loop_tx
            .as_ref()?
            .send(Command::SetPaused {
                key: key.into(),
                generation,
                paused,
                reply,
                loaded: Some(Box::new(loaded)),
            })
            .ok()?;
        answer.await.ok().flatten()
    }

    /// The resume of the paused job under `key` as the trigger loop writes it (see
    /// `runner/resume.rs`): the ticks that fell due while it was paused passed over and the
    /// pause ended, in one op. `None` when a plain end of the pause does: the job is not
    /// paused, nothing fell due, or a tick is in progress (whoever fires the job then
    /// decides, as after an outage).
    async fn resume_op(&self, key: &str, job: &StoredJob) -> Result<Option<Op>, Error> {
        let Some(stored) = self
            .inner
            .store
            .get_counter(key)
            .await?
            .filter(|c| c.generation == job.generation && c.paused.is_some())
        else {
            return Ok(None);
        };
        let Ok(plan) = convert::plan_of(key, job) else {
            return Ok(None);
        };
        let now = self.inner.clock.now();
        let Some(resume) = plan
            .resume(&convert::counter_of(&stored), now)
            .filter(|r| r.paused > 0)
        else {
            return Ok(None);
        };
        self.inner.metrics.skipped_many(Skip::Paused, resume.paused);
        let op = Recorded {
            key,
            generation: job.generation,
            progress: Some(&resume.counter),
            due: plan.fire_time(&resume.counter).map(convert::due_ms),
            finish: false,
            dropped: false,
            run: skipped_run(&resume, now),
            skipped_ticks: skipped_ticks(&resume),
            pause: None,
            dead_letter: None,
            resume: true,
        }
        .op(&self.inner.history, now);
        Ok(Some(op))
    }
}
