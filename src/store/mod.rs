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
//! modules). Both apply ops with the same code (`apply/`), so their semantics cannot drift
//! apart. [`Etcd`] keeps go-etcd-cron's key layout in an etcd cluster for scheduler replicas
//! (through jobsd's own thin etcd client), with jobsd's history beside it; it runs the same
//! code over a snapshot of the keys a batch touches and commits with compare-and-swap.

mod apply;
mod encoded;
pub(crate) mod etcd;
mod memory;
mod op;
mod paging;
mod records;
mod redb;
mod tables;

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;

pub use crate::proto::jobsd_store::{
    DeadLetter, FinishedJob, GuardedWrite, HeldExecution, IdempotencyClaim, IdempotencyRecord,
    IfMatch, Paused, RestoreRecord, ResultRecord, RunOutcome, StoredCounter, StoredJob, StoredRun,
};
pub use etcd::{Change, Etcd};
pub use memory::Memory;
pub use op::{DeadLetterAt, Decoded, Form, Op, OpOf, OpResult};
pub use redb::{AUTO_CHECK_MAX_BYTES, Redb, RedbOptions, RedbStats, StoreCheck};
#[cfg(test)]
pub(crate) use tables::Table;

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

    /// The record stored under `key` in the values table ([`Op::PutValue`]).
    async fn get_value(&self, key: &str) -> Result<Option<Vec<u8>>, Error>;

    /// The records of the values table whose key starts with `prefix`, in key order; meant
    /// for small sets (an owner's concurrency rules).
    async fn list_values(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, Error>;

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
