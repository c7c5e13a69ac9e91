//! Pausing and resuming a job by hand. A paused job keeps its schedule and progress; no tick
//! fires until it is resumed, and then `policy.catchUp` decides about the ticks that came due
//! meanwhile, as after an outage. The state lives in the job's stored counter
//! ([`Paused`](crate::store::Paused)), so it survives restarts and moves with the job between
//! replicas, and an overwrite (a new version) starts unpaused.
//!
//! One job at a time by name; wider selections (a name prefix, labels) are loops over the
//! per-key change below.

use super::runner::{Command, paused_by_hand};
use super::{Engine, Error};
use crate::proto::scheduler as sv1;
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
    async fn set_paused(&self, key: String, paused: Option<Paused>) -> Result<Option<()>, Error> {
        let _guard = self.lock(&key).await;
        let Some(job) = self.inner.store.get_job(&key).await? else {
            return Ok(None);
        };
        let generation = job.generation;
        let result = match self
            .pause_through_loop(&key, generation, paused.clone())
            .await
        {
            Some(written) => written?,
            None => {
                let op = Op::SetPaused {
                    key,
                    generation,
                    paused,
                };
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
            })
            .ok()?;
        answer.await.ok().flatten()
    }
}
