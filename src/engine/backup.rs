//! Backup and restore of one owner's jobs: what an export reads, page by page in key order
//! (active jobs, then finished ones), and an import written in batches through the store's
//! group commit, each job tracked from its restored progress rather than from scratch.
//!
//! A record carries the job as stored (its resolved start, due time and expiry, its
//! generation, jobsd's settings) and its counter, so that a restored job fires exactly the
//! ticks its original had not fired yet. The file format is `crate::backup`'s business, its
//! routes the API's (`api::jobsd::backup`).

use super::detached::to_the_end;
use super::runner::Command;
use super::{Engine, Error, convert};
use crate::jobs::{BackupRecord, ExportCursor, ExportPage, Imported, MAX_BACKUP_BATCH};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_store::StoredCounter;
use crate::schedule::labels;
use crate::store::{LoadedJob, Op, OpResult, PageOf, RestoreRecord};
use crate::trigger::keys;

impl Engine {
    /// Up to `limit` (1 to [`MAX_BACKUP_BATCH`]) of the owner's jobs from `cursor` on (`None`:
    /// from the start): every active job in name order, then every finished one.
    pub async fn export_page(
        &self,
        metadata: &sv1::JobMetadata,
        cursor: Option<ExportCursor>,
        limit: usize,
    ) -> Result<ExportPage, Error> {
        let owner = keys::owner_prefix(keys::check_metadata(Some(metadata))?)?;
        let limit = limit.clamp(1, MAX_BACKUP_BATCH);
        let mut cursor = cursor.unwrap_or(ExportCursor {
            table: PageOf::Active,
            after: None,
        });
        loop {
            let items = self
                .inner
                .store
                .page(cursor.table, &owner, cursor.after.as_deref(), limit)
                .await?;
            let full = items.len() == limit;
            if let Some(last) = items.last() {
                cursor.after = Some(last.key.clone());
            }
            let records: Vec<BackupRecord> = items
                .into_iter()
                .map(|item| BackupRecord {
                    name: item.key[owner.len()..].to_owned(),
                    job: item.job,
                    counter: item.counter,
                    finished_at: item.finished_at,
                })
                .collect();
            let next = match (full, cursor.table) {
                (true, _) => cursor,
                (false, PageOf::Active) => ExportCursor {
                    table: PageOf::Finished,
                    after: None,
                },
                (false, PageOf::Finished) => {
                    return Ok(ExportPage {
                        records,
                        next: None,
                    });
                }
            };
            if !records.is_empty() {
                return Ok(ExportPage {
                    records,
                    next: Some(next),
                });
            }
            // No active job left to read: go on with the finished ones in this call.
            cursor = next;
        }
    }

    /// Stops firing the owner's jobs in this process and resolves once none of them has a
    /// trigger out any more (every answer is written): what the store holds of them is then
    /// final, and an export taken now can move them to another jobsd without a tick firing
    /// twice. They fire here again after a restart; jobs created afterwards fire as usual.
    pub async fn hand_over(&self, metadata: &sv1::JobMetadata) -> Result<(), Error> {
        let owner = keys::owner_prefix(keys::check_metadata(Some(metadata))?)?;
        self.disown(move |key| key.starts_with(&owner)).await;
        Ok(())
    }

    /// Writes `records` as the owner's jobs in one store write (one group commit), each with
    /// its progress: a name that holds a job or finished record is skipped unless
    /// `overwrite`. Gives each record's outcome, or why it was refused (a bad name, a job
    /// that cannot be planned, bad labels), in order; a refused record does not stop the
    /// others. Restored active jobs fire from their restored progress.
    pub async fn import_batch(
        &self,
        metadata: &sv1::JobMetadata,
        records: Vec<BackupRecord>,
        overwrite: bool,
    ) -> Result<Vec<Result<Imported, Error>>, Error> {
        let (engine, metadata) = (self.clone(), metadata.clone());
        to_the_end(async move { engine.restore(&metadata, records, overwrite).await }).await
    }

    /// [`Engine::import_batch`] in the caller's task.
    async fn restore(
        &self,
        metadata: &sv1::JobMetadata,
        records: Vec<BackupRecord>,
        overwrite: bool,
    ) -> Result<Vec<Result<Imported, Error>>, Error> {
        let metadata = keys::check_metadata(Some(metadata))?;
        let mut outcomes: Vec<Result<Imported, Error>> = Vec::with_capacity(records.len());
        let mut ops = Vec::with_capacity(records.len());
        // Per op: its outcome slot, and the job to track when it is active.
        let mut written = Vec::with_capacity(records.len());
        for record in records {
            match restore_op(metadata, record, overwrite) {
                Ok((op, track)) => {
                    written.push((outcomes.len(), track));
                    outcomes.push(Ok(Imported::Skipped));
                    ops.push(op);
                }
                Err(e) => outcomes.push(Err(e)),
            }
        }
        if ops.is_empty() {
            return Ok(outcomes);
        }
        // Wide, like a prefix delete: every key's writes wait, so the loop hears of these in
        // commit order with the API's.
        let _guards = self.lock_all().await;
        let results = self.write(ops).await?;
        let mut adopt = Vec::new();
        for ((slot, track), result) in written.into_iter().zip(results) {
            let outcome = match result {
                OpResult::AlreadyExists => Imported::Skipped,
                OpResult::Replaced => Imported::Replaced,
                _ => Imported::Created,
            };
            outcomes[slot] = Ok(outcome);
            if outcome == Imported::Skipped {
                continue;
            }
            self.inner.metrics.created();
            match track {
                Track::Fire(loaded) => adopt.push(*loaded),
                // A finished record replaced a job the loop may fire.
                Track::Finished(key) => self.notify(Command::Remove(key.into())),
            }
        }
        if !adopt.is_empty() {
            self.notify(Command::Adopt(adopt));
        }
        Ok(outcomes)
    }
}

/// What the loop is told of a restored record once it is written.
enum Track {
    /// An active job: fired from its restored progress.
    Fire(Box<LoadedJob>),
    /// A finished record under this key: not fired.
    Finished(String),
}

/// The op restoring `record` for `metadata`'s owner, after the checks a create makes of what
/// it stores: the name, the schedule and policies (the plan), the labels.
fn restore_op(
    metadata: &sv1::JobMetadata,
    record: BackupRecord,
    overwrite: bool,
) -> Result<(Op, Track), Error> {
    let key = keys::job_key(metadata, &record.name)?;
    let mut job = record.job;
    // The restoring owner's, whichever app the backup was taken from.
    job.metadata = Some(metadata.clone());
    if job.job.is_none() {
        return Err(Error::NoJob);
    }
    let plan = convert::plan_of(&key, &job).map_err(|e| {
        Error::BadRequest(match e {
            convert::RestoreError::Schedule(e) => format!("job.schedule: {e}"),
            other => other.to_string(),
        })
    })?;
    labels::check(&job.labels.clone().into_iter().collect()).map_err(Error::BadRequest)?;
    let counter = record.counter.map(|c| StoredCounter {
        generation: job.generation,
        ..c
    });
    let track = match record.finished_at {
        Some(_) => Track::Finished(key.clone()),
        None => Track::Fire(Box::new(LoadedJob {
            key: key.clone(),
            job: job.clone(),
            counter: counter.clone(),
        })),
    };
    let progress = counter
        .as_ref()
        .map(convert::counter_of)
        .unwrap_or_default();
    let op = Op::Restore(Box::new(RestoreRecord {
        key,
        job: Some(job),
        counter,
        finished_at: record.finished_at,
        overwrite,
        due_ms: plan.fire_time(&progress).map(convert::due_ms),
    }));
    Ok((op, track))
}
