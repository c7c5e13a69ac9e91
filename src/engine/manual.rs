//! Running a job by hand beside its schedule: run now and backfill (the loop's side is
//! `runner/manual.rs`). Neither moves the job's progress nor counts against `repeats`.

use chrono::{DateTime, Utc};

use super::runner::{Command, ExtraRefused, ExtraRequest};
use super::{Engine, Error, convert};
use crate::proto::dapr_scheduler as sv1;
use crate::schedule::Overlap;
use crate::schedule::backfill::backfill_ticks;
use crate::trigger::{ExecutionId, TriggerKind, keys};

/// Most ticks one backfill may run unless `--max-backfill-ticks` says otherwise.
pub const DEFAULT_MAX_BACKFILL_TICKS: usize = 10_000;

impl Engine {
    /// Runs job `name` of the metadata's owner once now, as an execution of its own; gives
    /// its id. `overlap` overrides the job's overlap policy for it.
    pub async fn trigger_job(
        &self,
        metadata: &sv1::JobMetadata,
        name: &str,
        overlap: Option<Overlap>,
    ) -> Result<ExecutionId, Error> {
        let now = self.inner.clock.now();
        let ids = self
            .run_extra(metadata, name, TriggerKind::Manual, overlap, |_| {
                Ok(vec![now])
            })
            .await?;
        ids.into_iter()
            .next()
            .map(|(_, id)| id)
            .ok_or_else(|| Error::NotFound(name.to_owned()))
    }

    /// Runs every nominal tick of job `name`'s schedule in `[start, end)` once, in order;
    /// gives each tick with its execution id. More than `limit` ticks is refused.
    pub async fn backfill_job(
        &self,
        metadata: &sv1::JobMetadata,
        name: &str,
        range: (DateTime<Utc>, DateTime<Utc>),
        overlap: Option<Overlap>,
        limit: usize,
    ) -> Result<Vec<(DateTime<Utc>, ExecutionId)>, Error> {
        self.run_extra(metadata, name, TriggerKind::Backfill, overlap, |plan| {
            backfill_ticks(plan, range.0, range.1, limit)
                .map_err(|e| Error::BadRequest(e.to_string()))
        })
        .await
    }

    async fn run_extra(
        &self,
        metadata: &sv1::JobMetadata,
        name: &str,
        kind: TriggerKind,
        overlap: Option<Overlap>,
        ticks: impl FnOnce(&crate::schedule::Plan) -> Result<Vec<DateTime<Utc>>, Error>,
    ) -> Result<Vec<(DateTime<Utc>, ExecutionId)>, Error> {
        let key = keys::job_key(keys::check_metadata(Some(metadata))?, name)?;
        let not_found = || Error::NotFound(name.to_owned());
        let loaded = self
            .inner
            .store
            .get_loaded(&key)
            .await?
            .ok_or_else(not_found)?;
        let job = loaded.job.clone();
        let plan = convert::plan_of(&key, &job).map_err(|e| Error::BadRequest(e.to_string()))?;
        let ticks = ticks(&plan)?;
        if ticks.is_empty() {
            return Ok(Vec::new());
        }
        let tx = self.inner.loop_tx.as_ref().ok_or_else(|| {
            Error::Unavailable("this scheduler does not fire jobs here".to_owned())
        })?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let request = ExtraRequest {
            loaded: Some(Box::new(loaded)),
            key: key.into(),
            generation: job.generation,
            kind,
            ticks: ticks.clone(),
            overlap,
            reply,
        };
        tx.send(Command::Extra(Box::new(request)))
            .map_err(|_| Error::Unavailable("the trigger loop has stopped".to_owned()))?;
        match answer.await {
            Ok(Ok(ids)) => Ok(ticks.into_iter().zip(ids).collect()),
            Ok(Err(ExtraRefused::Busy)) => Err(Error::Busy(format!(
                "job {name} has an execution in flight and its overlap is skip"
            ))),
            Ok(Err(ExtraRefused::NotTracked)) | Err(_) => Err(not_found()),
        }
    }
}
