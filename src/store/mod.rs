//! Durable storage of jobs and their counters.
//!
//! Two tables keyed by the composed job key (`app||<namespace>||<app-id>||<name>`, see the
//! engine): `jobs` holds [`StoredJob`]s and `counters` holds the [`StoredCounter`] of the job
//! with the same key. Values are the protobuf encoding of those messages.
//!
//! Every change goes through [`Store::write`]: a list of [`Op`]s applied in order, atomically,
//! and durably before the call returns. The rules that tie counters to job versions (a counter
//! only belongs to the job with its generation, an overwrite resets progress) live in the ops,
//! so the engine never has to read-then-write and cannot race itself.
//!
//! Implementations: [`Redb`] (the embedded durable store, one writer thread that group-commits
//! through a write-ahead log) and [`Memory`] (same semantics in a `BTreeMap`, for tests of other
//! modules). Both apply ops with the same code (`apply.rs`), so their semantics cannot drift
//! apart. [`Etcd`] keeps go-etcd-cron's key layout in an etcd cluster for scheduler replicas
//! (through jobsd's own thin etcd client), with jobsd's history beside it; it runs the same
//! code over a snapshot of the keys a batch touches and commits with compare-and-swap.

mod apply;
mod disk;
pub(crate) mod etcd;
mod memory;
mod redb;
mod wal;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;

pub use crate::proto::store::{
    DeadLetter, FinishedJob, GuardedWrite, HeldExecution, IdempotencyClaim, IdempotencyRecord,
    IfMatch, Paused, RestoreRecord, ResultRecord, RunOutcome, StoredCounter, StoredJob, StoredRun,
};
#[cfg(test)]
pub(crate) use apply::Table;
pub use etcd::{Change, Etcd};
pub use memory::Memory;
pub use redb::{AUTO_CHECK_MAX_BYTES, Redb, RedbOptions, RedbStats, StoreCheck};

/// A store failure.
///
/// `Clone` because one failed group commit is reported to every caller of the batch.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The disk or the database engine failed (I/O error, file locked by another process,
    /// the database's own integrity checks). The write that saw it did not happen.
    #[error("store I/O: {0}")]
    Io(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// A stored value does not decode: the record is corrupt. A write request that needed it
    /// failed as a whole (none of its ops were applied); other requests are unaffected.
    #[error("corrupt {table} record {key:?}: {source}")]
    Corrupt {
        /// `jobs`, `counters`, `runs` or `finished`.
        table: &'static str,
        /// The key of the record.
        key: String,
        /// What prost said.
        #[source]
        source: prost::DecodeError,
    },
    /// The store was closed ([`Store::close`]) or its worker stopped.
    #[error("store is closed")]
    Closed,
}

impl Error {
    /// Wraps a backend error.
    pub(crate) fn io(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Io(Arc::new(err))
    }
}

/// One change, applied by [`Store::write`].
// Ops live only from the caller to the encoding step, so the size of `PutJob` costs nothing
// worth a `Box` at every construction site.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq)]
pub enum Op {
    /// Create (`create_only`) or overwrite a job; always removes that key's counter
    /// (an overwrite resets progress). Result: `Done`, or `AlreadyExists` (job left unchanged).
    PutJob {
        /// The composed job key.
        key: String,
        /// The job; its `generation` must be new for every put.
        job: StoredJob,
        /// Fail with `AlreadyExists` instead of overwriting.
        create_only: bool,
        /// When the job fires first (ms since the Unix epoch), for the due index; `None`:
        /// indexed at the earliest time (read at the next start).
        due: Option<i64>,
    },
    /// Delete a job and its counter; deleting a missing key is fine.
    /// Result: `Deleted(1)` or `Deleted(0)` when there was no job.
    DeleteJob {
        /// The composed job key.
        key: String,
    },
    /// Delete every job (and counter) whose key starts with `prefix` (`""` = all).
    /// Result: `Deleted(jobs removed)`.
    DeletePrefix {
        /// Byte-wise key prefix.
        prefix: String,
    },
    /// Persist a counter, only if the job exists with the counter's generation and the stored
    /// counter of that generation has not counted more ticks (a stale owner's write).
    /// Result: `Done`, or `Skipped` (the job was overwritten or deleted meanwhile, or the
    /// progress is behind).
    PutCounter {
        /// The composed job key.
        key: String,
        /// The progress; `counter.generation` names the job version it belongs to.
        counter: StoredCounter,
    },
    /// The job finished: delete job and counter if the job's generation matches (`Done`); if it
    /// does not (overwritten or deleted meanwhile), delete only a counter carrying this
    /// generation and leave the job alone (`Skipped`).
    FinishJob {
        /// The composed job key.
        key: String,
        /// Generation of the job version that finished.
        generation: u64,
    },
    /// A trigger's result: progress, status and one run in the history, in one write, only
    /// while the job has the record's generation (`Done`; else `Skipped`, and a finished
    /// record deletes only a counter of its generation, as `FinishJob`). A finished job is
    /// deleted, or kept in the finished table when `finished_at` is set. A record's `pause`
    /// pauses the job; its `dead_letter` job is created (create-only, as `PutJob`) under its
    /// key or else its fallback key, and the result is `DeadLettered` saying where. Progress
    /// behind the stored counter's tick count is a stale owner's, and `Skipped` whole.
    RecordResult(Box<ResultRecord>),
    /// Pauses (`paused` set) or resumes (`None`) a job, only while the job has `generation`:
    /// the state is kept in its counter (made if the job has none yet), beside its progress.
    /// Result: `Done` (also when it was so already), or `Skipped`.
    SetPaused {
        /// The composed job key.
        key: String,
        /// The job version it is meant for.
        generation: u64,
        /// Why and since when; `None` resumes.
        paused: Option<Paused>,
    },
    /// Deletes the finished record of `key` (and its run history) if it finished at or
    /// before `before` (the retention sweep). Result: `Deleted(0 or 1)`.
    DeleteFinished {
        /// The composed job key.
        key: String,
        /// Cut-off.
        before: prost_types::Timestamp,
    },
    /// A put (`job` given, as [`Op::PutJob`]) or delete (as [`Op::DeleteJob`]) under the
    /// conditions of [`GuardedWrite`], checked in the same commit. An idempotency record of
    /// the key that has not expired answers `Replayed(its generation)` when it is of the same
    /// request (same name and fingerprint) and `KeyReused` when not, and nothing is written;
    /// else an `If-Match` the job does not meet (missing, or of another generation) answers
    /// `PreconditionFailed`; else the write's own result, and a put that is `Done` records
    /// the claim.
    Guarded {
        /// The conditions and the key.
        write: Box<GuardedWrite>,
        /// The job to put (its `generation` new); `None`: delete.
        job: Option<Box<StoredJob>>,
    },
    /// Forgets idempotency record `key` if it was written before `before` (the expiry sweep).
    /// Result: `Deleted(0 or 1)`.
    ForgetIdempotency {
        /// Key in the `idempotency` table.
        key: String,
        /// Cut-off.
        before: prost_types::Timestamp,
    },
    /// A job from a backup with its progress (see [`RestoreRecord`]): without `overwrite`, a
    /// job or finished record under the key answers `AlreadyExists` and nothing changes; else
    /// the key's job, counter, finished record and runs are replaced. The job goes to the jobs
    /// table with its counter (whose generation is made the job's), or to the finished table
    /// when `finished_at` is set. Result: `Done` (nothing was there), `Replaced` or
    /// `AlreadyExists`.
    Restore(Box<RestoreRecord>),
    /// Drops the due-index entry of `key` at `due` (ms since the Unix epoch) unless the index
    /// still holds the job at that time: what a reader found stale. Result: `Done` (dropped)
    /// or `Skipped`.
    DropDue {
        /// The composed job key.
        key: String,
        /// The entry's time.
        due: i64,
    },
    /// Indexes job `key` at `due` (ms since the Unix epoch) if it has `generation`, leaving
    /// the job as it is: how the engine indexes a store written before the due index.
    /// Result: `Done` or `Skipped`.
    IndexDue {
        /// The composed job key.
        key: String,
        /// The job version it is meant for.
        generation: u64,
        /// When it fires next.
        due: i64,
    },
    /// Records that every job of the store is in the due index (after indexing a store
    /// written before it existed). Result: `Done`.
    MarkDueIndexed,
    /// Moves a part of the due index's far buckets holding jobs due before `before` (ms since
    /// the Unix epoch) into its ordered part, which [`Store::due_page`] reads; a store's
    /// `due_page` writes it itself, as often as it takes. Result: `Done` (something moved)
    /// or `Skipped` (all such buckets were moved already).
    AdvanceDue {
        /// Jobs due before it are to be found by `due_page`.
        before: i64,
    },
}

impl fmt::Debug for Op {
    // Jobs carry user payloads; a debug line names the op and key only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::PutJob {
                key,
                job,
                create_only,
                due,
            } => f
                .debug_struct("PutJob")
                .field("key", key)
                .field("generation", &job.generation)
                .field("create_only", create_only)
                .field("due", due)
                .finish(),
            Op::DeleteJob { key } => f.debug_struct("DeleteJob").field("key", key).finish(),
            Op::DeletePrefix { prefix } => f
                .debug_struct("DeletePrefix")
                .field("prefix", prefix)
                .finish(),
            Op::PutCounter { key, counter } => f
                .debug_struct("PutCounter")
                .field("key", key)
                .field("counter", counter)
                .finish(),
            Op::FinishJob { key, generation } => f
                .debug_struct("FinishJob")
                .field("key", key)
                .field("generation", generation)
                .finish(),
            Op::RecordResult(r) => f
                .debug_struct("RecordResult")
                .field("key", &r.key)
                .field("generation", &r.generation)
                .field("finish", &r.finish)
                .field("outcome", &r.run.as_ref().map(|run| run.outcome()))
                .finish(),
            Op::SetPaused {
                key,
                generation,
                paused,
            } => f
                .debug_struct("SetPaused")
                .field("key", key)
                .field("generation", generation)
                .field("paused", &paused.is_some())
                .finish(),
            Op::DeleteFinished { key, before } => f
                .debug_struct("DeleteFinished")
                .field("key", key)
                .field("before", before)
                .finish(),
            Op::Guarded { write, job } => f
                .debug_struct("Guarded")
                .field("key", &write.key)
                .field("generation", &job.as_ref().map(|j| j.generation))
                .field("if_match", &write.if_match)
                .field("idempotent", &write.idempotency.is_some())
                .finish(),
            Op::ForgetIdempotency { key, before } => f
                .debug_struct("ForgetIdempotency")
                .field("key", key)
                .field("before", before)
                .finish(),
            Op::Restore(r) => f
                .debug_struct("Restore")
                .field("key", &r.key)
                .field("generation", &r.job.as_ref().map(|j| j.generation))
                .field("finished", &r.finished_at.is_some())
                .field("overwrite", &r.overwrite)
                .finish(),
            Op::DropDue { key, due } => f
                .debug_struct("DropDue")
                .field("key", key)
                .field("due", due)
                .finish(),
            Op::IndexDue {
                key,
                generation,
                due,
            } => f
                .debug_struct("IndexDue")
                .field("key", key)
                .field("generation", generation)
                .field("due", due)
                .finish(),
            Op::MarkDueIndexed => f.write_str("MarkDueIndexed"),
            Op::AdvanceDue { before } => f
                .debug_struct("AdvanceDue")
                .field("before", before)
                .finish(),
        }
    }
}

/// What one [`Op`] did (see each op for which results it gives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpResult {
    /// Applied.
    Done,
    /// `PutJob` with `create_only`: a job with that key exists; nothing changed.
    AlreadyExists,
    /// `PutCounter` / `FinishJob`: the job's generation did not match; the job was not touched.
    Skipped,
    /// `DeleteJob` / `DeletePrefix`: how many jobs were removed.
    Deleted(u64),
    /// `RecordResult` with a dead-letter job: applied, and where the job went.
    DeadLettered(DeadLetterAt),
    /// `Guarded`: the job did not meet the `If-Match`; nothing changed.
    PreconditionFailed,
    /// `Guarded`: the same request came before under its idempotency key, and stored the
    /// job version with this generation; nothing changed.
    Replayed(u64),
    /// `Guarded`: another request came before under its idempotency key; nothing changed.
    KeyReused,
    /// `Restore` with `overwrite`: what the key held was replaced.
    Replaced,
}

/// Where the dead-letter job of a [`ResultRecord`] was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterAt {
    /// Under its key (the `deadLetterJob` name).
    Key,
    /// Under its fallback key: a job held the name already.
    Fallback,
    /// Nowhere: jobs held both keys.
    Nowhere,
}

/// One job as loaded at start: the job and its counter, if it has one for this generation.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedJob {
    /// The composed job key.
    pub key: String,
    /// The stored job.
    pub job: StoredJob,
    /// Its progress; `None` when the job never persisted a result.
    pub counter: Option<StoredCounter>,
}

/// Whether a store keeps the due index ([`Store::due_page`]) and holds every job in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DueIndex {
    /// The store keeps none (etcd): the engine keeps every job in memory.
    Absent,
    /// Kept from now on, but jobs written before it existed are missing: the engine indexes
    /// them once (a full load), then writes [`Op::MarkDueIndexed`].
    Partial,
    /// Every job is in it.
    Complete,
}

/// One page of the due index ([`Store::due_page`]).
#[derive(Debug, Default, PartialEq)]
pub struct DuePage {
    /// Jobs with their indexed time (ms since the Unix epoch), in (time, key) order.
    pub jobs: Vec<(i64, LoadedJob)>,
    /// Entries the index no longer confirms, `(time, key)`: drop them with [`Op::DropDue`].
    pub stale: Vec<(i64, String)>,
    /// Where the next page of the same range starts (a [`due_start`]-like key); `None` once
    /// the range is read.
    pub next: Option<String>,
}

/// The first due-index position at or after `ms` (ms since the Unix epoch), where a
/// [`Store::due_page`] of the jobs due from then on starts.
pub fn due_start(ms: i64) -> String {
    apply::due::due_bound(ms)
}

/// Which records [`Store::page`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageOf {
    /// Jobs that still fire (with their counters).
    Active,
    /// Finished jobs kept for jobsd's views.
    Finished,
}

/// One record of a [`Store::page`].
#[derive(Debug, Clone, PartialEq)]
pub struct PageItem {
    /// The composed job key.
    pub key: String,
    /// The job.
    pub job: StoredJob,
    /// Its progress and status (for a finished job, as it finished).
    pub counter: Option<StoredCounter>,
    /// When it finished (finished jobs only).
    pub finished_at: Option<prost_types::Timestamp>,
}

/// The key of run `seq` of job `key` in the runs table: the job key, a NUL (never part of a
/// job key, so one job's runs never mix with a longer key's), the number in 16 hex digits
/// (so key order is run order).
pub fn run_key(key: &str, seq: u64) -> String {
    format!("{key}\0{seq:016x}")
}

/// The prefix of every run key of job `key`.
pub fn runs_prefix(key: &str) -> String {
    format!("{key}\0")
}

/// Jobs of a [`Store::scan`], delivered page by page.
///
/// The producer (a blocking thread for [`Redb`]) stays at most two pages ahead, so a scan of a
/// million jobs holds a few pages in memory, not the table. Dropping the scan stops it.
pub struct JobScan {
    /// Pages from the producer; `End` distinguishes a finished scan from a dead producer.
    rx: mpsc::Receiver<ScanItem>,
}

/// What a scan producer sends.
enum ScanItem {
    /// The next jobs in key order (never empty).
    Page(Vec<LoadedJob>),
    /// The scan stopped on this error.
    Failed(Error),
    /// No more jobs.
    End,
}

/// Pages a producer keeps ready ahead of the consumer.
const SCAN_AHEAD: usize = 2;

impl JobScan {
    /// A scan and the sender its producer feeds.
    fn channel() -> (mpsc::Sender<ScanItem>, JobScan) {
        let (tx, rx) = mpsc::channel(SCAN_AHEAD);
        (tx, JobScan { rx })
    }

    /// The next page (in key order, never empty), or `None` when every job was delivered.
    pub async fn next_page(&mut self) -> Result<Option<Vec<LoadedJob>>, Error> {
        match self.rx.recv().await {
            Some(ScanItem::Page(page)) => Ok(Some(page)),
            Some(ScanItem::Failed(err)) => Err(err),
            Some(ScanItem::End) => Ok(None),
            // The producer went away without saying `End`: don't pass a cut-short scan off as
            // complete.
            None => Err(Error::Closed),
        }
    }
}

/// Durable storage of jobs and counters. Held as `Arc<dyn Store>` by the engine.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies `ops` in order, atomically and durably (fsync'd) before returning, and gives one
    /// result per op. Concurrent callers share one commit (group commit); the outcome equals
    /// running the calls one after another in arrival order.
    ///
    /// On `Err` none of the ops took effect, with the caveat of every fsync-based store: when
    /// the commit itself fails with an I/O error, what the disk holds is only known on reopen.
    async fn write(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, Error>;

    /// The job stored under `key`.
    async fn get_job(&self, key: &str) -> Result<Option<StoredJob>, Error>;

    /// The counter stored under `key` (whatever its generation).
    async fn get_counter(&self, key: &str) -> Result<Option<StoredCounter>, Error>;

    /// The job stored under `key` with its counter when that is of the job's generation:
    /// [`Store::get_job`] and [`Store::get_counter`] together, read as one (one round trip
    /// where the store is remote).
    async fn get_loaded(&self, key: &str) -> Result<Option<LoadedJob>, Error> {
        let Some(job) = self.get_job(key).await? else {
            return Ok(None);
        };
        let counter = self
            .get_counter(key)
            .await?
            .filter(|c| c.generation == job.generation);
        Ok(Some(LoadedJob {
            key: key.to_owned(),
            job,
            counter,
        }))
    }

    /// Jobs whose key starts with `prefix` (byte-wise), in key order. Loads them all: meant for
    /// one owner's jobs (ListJobs); use [`Store::scan`] for everything.
    async fn list_jobs(&self, prefix: &str) -> Result<Vec<(String, StoredJob)>, Error>;

    /// Every job whose key starts with `prefix` (`""` = all), with its counter when the
    /// counter's generation matches the job's, in key order, in pages of at most `page_size`
    /// jobs (0 is taken as 1). For restoring the engine at start: memory stays at a few pages
    /// whatever the number of jobs.
    ///
    /// [`Redb`] reads one snapshot taken when `scan` is called: writes made while the scan runs
    /// are not seen.
    async fn scan(&self, prefix: &str, page_size: usize) -> Result<JobScan, Error>;

    /// The finished record of `key`, if one is kept. Stores that keep no history have none.
    async fn get_finished(&self, key: &str) -> Result<Option<FinishedJob>, Error> {
        let _ = key;
        Ok(None)
    }

    /// Up to `limit` runs of `key`'s history, newest first, each with its sequence number;
    /// only runs numbered below `before` when given. Stores that keep no history have none.
    async fn list_runs(
        &self,
        key: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, StoredRun)>, Error> {
        let _ = (key, before, limit);
        Ok(Vec::new())
    }

    /// Up to `limit` records of `of` whose key starts with `prefix`, in key order, starting
    /// after `after` when given: one page of a list, read without copying the table.
    async fn page(
        &self,
        of: PageOf,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PageItem>, Error> {
        let _ = (of, prefix, after, limit);
        Err(Error::io(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this store does not page jobs",
        )))
    }

    /// Up to `limit` idempotency records (keys of the `idempotency` table and when each was
    /// written), in key order, after `after` when given: what the expiry sweep reads. Stores
    /// that keep none have none.
    async fn page_idempotency(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, prost_types::Timestamp)>, Error> {
        let _ = (after, limit);
        Ok(Vec::new())
    }

    /// Whether this store keeps the due index, and whether every job is in it.
    async fn due_index(&self) -> Result<DueIndex, Error> {
        Ok(DueIndex::Absent)
    }

    /// Up to `limit` entries of the due index from `start` (a [`due_start`] or a page's
    /// `next`) on, of jobs due before `before` (ms since the Unix epoch), with each job and its
    /// counter (when of the job's generation): what the engine pages into memory as its
    /// horizon moves. One snapshot per page.
    async fn due_page(&self, start: &str, before: i64, limit: usize) -> Result<DuePage, Error> {
        let _ = (start, before, limit);
        Err(Error::io(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this store keeps no due index",
        )))
    }

    /// Stops accepting writes, waits until every write already submitted is durable and
    /// answered, and releases the storage. Later calls fail with [`Error::Closed`]. Closing
    /// twice is fine.
    async fn close(&self) -> Result<(), Error>;
}

#[cfg(test)]
mod tests;
