//! The embedded durable [`Store`]: one redb file, one writer thread that group-commits.
//!
//! redb allows one write transaction at a time and each durable commit costs an fsync, so
//! writes are funnelled to a dedicated thread. It blocks for the first request, takes whatever
//! else is queued (up to [`RedbOptions::max_batch_requests`] / [`RedbOptions::max_batch_bytes`]),
//! applies all of it in arrival order in one transaction, commits once, and then answers every
//! caller. While it syncs, new requests queue up and form the next batch, so the fsync cost is
//! shared by everyone who arrived meanwhile.
//!
//! With the write-ahead log on ([`RedbOptions::wal`], the default) "commits once" means: append
//! the batch to the log (`wal.rs`) and `fdatasync` it; the batch is applied to a redb
//! transaction that is not committed yet. Every [`RedbOptions::checkpoint_interval`] (or
//! [`RedbOptions::checkpoint_bytes`] of log) a durable redb commit records the last batch number
//! it holds in the `meta` table and the log starts over. Opening the store applies the batches
//! logged after that number again, with the same op code, so the outcome equals the one the
//! callers were told.
//!
//! That redb transaction stays open across batches: a redb commit, even without an fsync,
//! costs more than applying a batch of creates (root and checksum updates, copied pages,
//! free-page bookkeeping). It is committed without an fsync ("published") before each
//! checkpoint and whenever a reader needs what it holds: a read that finds answered batches
//! unpublished asks the writer to publish them first.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ::redb::{
    Database, Durability, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, WriteTransaction,
};
use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use super::apply::{self, Joiner, PrefixRange, Prepared, Table, Tables, Undo};
use super::disk;
use super::wal::{self, Wal};
use super::{
    DueIndex, DuePage, Error, FinishedJob, JobScan, LoadedJob, Op, OpResult, PageItem, PageOf,
    ScanItem, Store, StoredCounter, StoredJob, StoredRun, run_key, runs_prefix,
};
use crate::observe::StoreMetrics;

/// File name inside the data directory.
pub(crate) const FILE_NAME: &str = "jobsd.redb";

/// `jobs`: job key → encoded `StoredJob`.
const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");
/// `counters`: job key → encoded `StoredCounter`.
const COUNTERS: TableDefinition<&str, &[u8]> = TableDefinition::new("counters");
/// `runs`: [`run_key`] → encoded `StoredRun` (each job's recent runs).
const RUNS: TableDefinition<&str, &[u8]> = TableDefinition::new("runs");
/// `finished`: job key → encoded `FinishedJob` (finished jobs kept for jobsd's views).
const FINISHED: TableDefinition<&str, &[u8]> = TableDefinition::new("finished");
/// `idempotency`: `<owner prefix><Idempotency-Key>` → encoded `IdempotencyRecord`.
const IDEMPOTENCY: TableDefinition<&str, &[u8]> = TableDefinition::new("idempotency");
/// `due`: the due index in time order (`store::apply::due`).
const DUE: TableDefinition<&str, &[u8]> = TableDefinition::new("due");
/// `due_at`: each indexed job's time (`store::apply::due`).
const DUE_AT: TableDefinition<&str, &[u8]> = TableDefinition::new("due_at");
/// `meta`: bookkeeping of the store itself ([`APPLIED_SEQ`]).
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `meta` key: the last write-ahead-log batch this durable state holds.
const APPLIED_SEQ: &str = "applied_seq";

/// Tuning of [`Redb`]; the defaults suit the sidecar.
#[derive(Debug, Clone)]
pub struct RedbOptions {
    /// Most write requests one commit takes. Bounds how long the last of them waits.
    pub max_batch_requests: usize,
    /// Most encoded bytes one commit takes (a single larger request still goes alone).
    pub max_batch_bytes: usize,
    /// redb's page cache in bytes. It dominates the process RSS once a scan or the writes
    /// have touched the file; pages it misses come from the OS page cache.
    pub cache_size: usize,
    /// Make every commit record redb's allocator state, so that reopening after a crash does
    /// not walk the whole file (redb's "quick repair"). Costs a second fsync per durable
    /// redb commit (per checkpoint with the write-ahead log, per batch without).
    pub quick_repair: bool,
    /// Make batches durable by appending them to a write-ahead log (one sequential write and
    /// one `fdatasync`) instead of a durable redb commit (several pages and the header). A log
    /// left by an earlier run is replayed on open either way.
    pub wal: bool,
    /// With the log: longest time a logged batch waits for a durable redb commit (which lets
    /// the log start over). Bounds the replay work after a crash.
    pub checkpoint_interval: Duration,
    /// With the log: log bytes after which a checkpoint happens regardless of the interval.
    pub checkpoint_bytes: u64,
}

impl Default for RedbOptions {
    fn default() -> Self {
        RedbOptions {
            max_batch_requests: 4096,
            max_batch_bytes: 16 << 20,
            cache_size: 64 << 20,
            quick_repair: false,
            wal: true,
            checkpoint_interval: Duration::from_millis(500),
            checkpoint_bytes: 32 << 20,
        }
    }
}

/// Counters of the writer thread, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedbStats {
    /// Batches committed (successfully or not), i.e. fsyncs: of the log with
    /// [`RedbOptions::wal`], of the database without.
    pub commits: u64,
    /// Write requests (`Store::write` calls) answered by those commits.
    pub requests: u64,
    /// Ops in those requests.
    pub ops: u64,
    /// Commits that failed; every request in them got the error.
    pub failed_commits: u64,
    /// Durable redb commits that let the write-ahead log start over.
    pub checkpoints: u64,
    /// Logged batches applied again when this store was opened (after a crash).
    pub replayed: u64,
}

/// [`RedbStats`] as the writer thread updates them.
#[derive(Debug, Default)]
struct StatCells {
    /// See [`RedbStats::commits`].
    commits: AtomicU64,
    /// See [`RedbStats::requests`].
    requests: AtomicU64,
    /// See [`RedbStats::ops`].
    ops: AtomicU64,
    /// See [`RedbStats::failed_commits`].
    failed_commits: AtomicU64,
    /// See [`RedbStats::checkpoints`].
    checkpoints: AtomicU64,
    /// See [`RedbStats::replayed`].
    replayed: AtomicU64,
    /// Where each commit's duration and size go, once [`Redb::observe`] set it.
    metrics: OnceLock<StoreMetrics>,
}

/// The redb-backed [`Store`]. Open with [`Redb::open`]; dropping it waits for the writer
/// thread to finish the commit in progress and releases the file.
pub struct Redb {
    /// The database, shared with the writer thread (which reopens it after an I/O error) and
    /// running scans; taken out by `close`.
    db: Arc<RwLock<Option<Arc<Database>>>>,
    /// Requests to the writer thread.
    // A std channel because the writer must wait with a timeout (the next checkpoint); a send
    // on it never blocks.
    tx: std_mpsc::Sender<Msg>,
    /// The writer thread, joined on drop so the file lock is gone when drop returns.
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Shared with the writer thread.
    stats: Arc<StatCells>,
    /// Set by the writer thread while answered batches sit in its open redb transaction, where
    /// readers cannot see them yet (see [`Redb::begin_read`]).
    unpublished: Arc<AtomicBool>,
    /// The database file.
    path: PathBuf,
}

/// What the writer thread is asked.
enum Msg {
    /// Apply these ops and answer.
    Write(WriteReq),
    /// Commit the open transaction so that readers see every answered write, then answer.
    Publish(oneshot::Sender<Result<(), Error>>),
    /// Finish what is queued, refuse the rest, release the database and say so (if asked).
    Close(Option<oneshot::Sender<()>>),
    /// A reader found no database: try to reopen it now rather than at the next write.
    Heal,
}

/// One `Store::write` call.
struct WriteReq {
    /// The ops, encoded.
    ops: Vec<Prepared>,
    /// Encoded size, to bound batches.
    bytes: usize,
    /// Where the caller waits.
    reply: oneshot::Sender<Result<Vec<OpResult>, Error>>,
}

impl Redb {
    /// Opens (or creates) `<data_dir>/jobsd.redb` with default options, creating `data_dir` if
    /// needed. Blocks: after a crash redb checks the file before this returns.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Redb, Error> {
        Redb::open_with(data_dir, RedbOptions::default())
    }

    /// [`Redb::open`] with explicit options.
    pub fn open_with(data_dir: impl AsRef<Path>, options: RedbOptions) -> Result<Redb, Error> {
        let dir = data_dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| disk::at(dir, "cannot create the data dir", e))?;
        let path = dir.join(FILE_NAME);
        let existed = path.exists();
        let db = open_db(&path, &options)?;
        if !existed {
            // redb syncs the file, not the directory entry that names it: without this, a
            // power cut could lose a brand-new database together with its acknowledged writes.
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| disk::at(dir, "cannot sync the data dir", e))?;
        }
        let stats = Arc::new(StatCells::default());
        let wal_path = dir.join(wal::FILE_NAME);
        let (seq, replayed) = recover(&db, &options, &wal_path)?;
        stats.replayed.store(replayed, Ordering::Relaxed);
        let wal = if options.wal {
            Some(
                Wal::open(&wal_path)
                    .map_err(|e| disk::at(&wal_path, "cannot open the write-ahead log", e))?,
            )
        } else {
            // Recovery made everything in it durable in redb; a later run with the log on must
            // not find these records (their seqs would look old, but keep it simple and clean).
            match std::fs::remove_file(&wal_path) {
                Ok(()) => std::fs::File::open(dir)
                    .and_then(|d| d.sync_all())
                    .map_err(Error::io)?,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(Error::io(err)),
            }
            None
        };

        let db = Arc::new(db);
        let slot = Arc::new(RwLock::new(Some(Arc::clone(&db))));
        let (tx, rx) = std_mpsc::channel();
        let unpublished = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            db: Some(db),
            slot: Arc::clone(&slot),
            dir: dir.to_owned(),
            last_heal: None,
            rx,
            stats: Arc::clone(&stats),
            options,
            wal,
            seq,
            open: None,
            unpublished: Arc::clone(&unpublished),
            dirty_since: None,
            broken: None,
        };
        let handle = std::thread::Builder::new()
            .name("jobsd-store-writer".into())
            .spawn(move || writer.run())
            .map_err(Error::io)?;
        Ok(Redb {
            db: slot,
            tx,
            writer: Mutex::new(Some(handle)),
            stats,
            unpublished,
            path,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records every commit from now on into `metrics` (the first call wins).
    pub fn observe(&self, metrics: StoreMetrics) {
        let _ = self.stats.metrics.set(metrics);
    }

    /// What the writer thread has done so far.
    pub fn stats(&self) -> RedbStats {
        RedbStats {
            commits: self.stats.commits.load(Ordering::Relaxed),
            requests: self.stats.requests.load(Ordering::Relaxed),
            ops: self.stats.ops.load(Ordering::Relaxed),
            failed_commits: self.stats.failed_commits.load(Ordering::Relaxed),
            checkpoints: self.stats.checkpoints.load(Ordering::Relaxed),
            replayed: self.stats.replayed.load(Ordering::Relaxed),
        }
    }

    /// The open database.
    fn db(&self) -> Result<Arc<Database>, Error> {
        self.db
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                if self.tx.send(Msg::Heal).is_ok() {
                    reopening(&self.path)
                } else {
                    Error::Closed
                }
            })
    }

    /// A read transaction on the open database that sees every write answered before this
    /// call: if the writer holds answered batches in its open transaction, it commits them
    /// first.
    async fn begin_read(&self) -> Result<ReadTransaction, Error> {
        // The writer sets the flag before it answers a batch and clears it after the commit,
        // so a write answered before this load is either seen here or already committed.
        if self.unpublished.load(Ordering::Acquire) {
            let (reply, answer) = oneshot::channel();
            self.tx
                .send(Msg::Publish(reply))
                .map_err(|_| Error::Closed)?;
            answer.await.map_err(|_| Error::Closed)??;
        }
        self.db()?.begin_read().map_err(Error::io)
    }
}

impl Drop for Redb {
    fn drop(&mut self) {
        // Nobody can be waiting on a write (they would hold a reference), so this only lets the
        // writer finish its current commit and release the file before drop returns.
        let _ = self.tx.send(Msg::Close(None));
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            // A panicked writer has nothing left to release.
            let _ = handle.join();
        }
    }
}

/// Opens a read-only table.
fn open_table(
    txn: &ReadTransaction,
    def: TableDefinition<&'static str, &'static [u8]>,
) -> Result<ReadOnlyTable<&'static str, &'static [u8]>, Error> {
    txn.open_table(def).map_err(Error::io)
}

#[async_trait]
impl Store for Redb {
    async fn write(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, Error> {
        let ops: Vec<Prepared> = ops.into_iter().map(Prepared::new).collect();
        let bytes = ops.iter().map(Prepared::size).sum();
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Msg::Write(WriteReq { ops, bytes, reply }))
            .map_err(|_| Error::Closed)?;
        answer.await.map_err(|_| Error::Closed)?
    }

    // Point reads run on the calling task: a lookup in a cached B-tree takes microseconds,
    // less than a hop to the blocking pool (see examples/bench_store.rs).
    async fn get_job(&self, key: &str) -> Result<Option<StoredJob>, Error> {
        let txn = self.begin_read().await?;
        let table = open_table(&txn, JOBS)?;
        let value = table.get(key).map_err(Error::io)?;
        value.map(|v| apply::decode_job(key, v.value())).transpose()
    }

    async fn get_counter(&self, key: &str) -> Result<Option<StoredCounter>, Error> {
        let txn = self.begin_read().await?;
        let table = open_table(&txn, COUNTERS)?;
        let value = table.get(key).map_err(Error::io)?;
        value
            .map(|v| apply::decode_counter(key, v.value()))
            .transpose()
    }

    async fn list_jobs(&self, prefix: &str) -> Result<Vec<(String, StoredJob)>, Error> {
        let txn = self.begin_read().await?;
        let prefix = prefix.to_owned();
        // Unbounded in size, so off the async workers.
        tokio::task::spawn_blocking(move || {
            let table = open_table(&txn, JOBS)?;
            let range = table
                .range::<&str>(PrefixRange::new(&prefix).bounds())
                .map_err(Error::io)?;
            range
                .map(|entry| {
                    let (k, v) = entry.map_err(Error::io)?;
                    let key = k.value().to_owned();
                    let job = apply::decode_job(&key, v.value())?;
                    Ok((key, job))
                })
                .collect()
        })
        .await
        .map_err(Error::io)?
    }

    async fn get_finished(&self, key: &str) -> Result<Option<FinishedJob>, Error> {
        let txn = self.begin_read().await?;
        let table = open_table(&txn, FINISHED)?;
        let value = table.get(key).map_err(Error::io)?;
        value
            .map(|v| apply::decode_finished(key, v.value()))
            .transpose()
    }

    async fn list_runs(
        &self,
        key: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, StoredRun)>, Error> {
        let txn = self.begin_read().await?;
        let table = open_table(&txn, RUNS)?;
        let start = runs_prefix(key);
        let end = match before {
            Some(seq) => run_key(key, seq),
            None => format!("{key}\u{1}"),
        };
        let range = table
            .range::<&str>(start.as_str()..end.as_str())
            .map_err(Error::io)?;
        let mut runs = Vec::with_capacity(limit.min(1024));
        for entry in range.rev().take(limit) {
            let (k, v) = entry.map_err(Error::io)?;
            runs.push(apply::decode_run(k.value(), v.value())?);
        }
        Ok(runs)
    }

    async fn page(
        &self,
        of: PageOf,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PageItem>, Error> {
        let txn = self.begin_read().await?;
        let prefix = prefix.to_owned();
        let after = after.map(str::to_owned);
        // Up to a page of B-tree reads: off the async workers.
        tokio::task::spawn_blocking(move || produce_page(&txn, of, &prefix, after, limit))
            .await
            .map_err(Error::io)?
    }

    async fn page_idempotency(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, prost_types::Timestamp)>, Error> {
        let txn = self.begin_read().await?;
        let after = after.map(str::to_owned);
        tokio::task::spawn_blocking(move || {
            let table = open_table(&txn, IDEMPOTENCY)?;
            let start = after
                .as_deref()
                .map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            table
                .range::<&str>((start, std::ops::Bound::Unbounded))
                .map_err(Error::io)?
                .take(limit)
                .map(|entry| {
                    let (k, v) = entry.map_err(Error::io)?;
                    let key = k.value().to_owned();
                    let at = apply::record_time(&key, v.value())?;
                    Ok((key, at))
                })
                .collect()
        })
        .await
        .map_err(Error::io)?
    }

    async fn scan(&self, prefix: &str, page_size: usize) -> Result<JobScan, Error> {
        // The snapshot is taken now, not when the blocking thread gets to run.
        let txn = self.begin_read().await?;
        let prefix = prefix.to_owned();
        let page_size = page_size.max(1);
        let (tx, scan) = JobScan::channel();
        tokio::task::spawn_blocking(move || {
            let end = match produce_scan(&txn, &prefix, page_size, &tx) {
                Ok(()) => ScanItem::End,
                Err(err) => ScanItem::Failed(err),
            };
            // The consumer may have dropped the scan; nothing to tell then.
            let _ = tx.blocking_send(end);
        });
        Ok(scan)
    }

    async fn due_index(&self) -> Result<DueIndex, Error> {
        let txn = self.begin_read().await?;
        let table = open_table(&txn, DUE_AT)?;
        let complete = table.get(apply::due::COMPLETE).map_err(Error::io)?;
        Ok(if complete.is_some() {
            DueIndex::Complete
        } else {
            DueIndex::Partial
        })
    }

    async fn due_page(&self, start: &str, before: i64, limit: usize) -> Result<DuePage, Error> {
        let txn = self.begin_read().await?;
        let start = start.to_owned();
        // Up to a page of B-tree reads: off the async workers.
        tokio::task::spawn_blocking(move || produce_due_page(&txn, &start, before, limit))
            .await
            .map_err(Error::io)?
    }

    async fn close(&self) -> Result<(), Error> {
        let (done, closed) = oneshot::channel();
        // If the writer is already gone (closed before), there is nothing left to flush.
        if self.tx.send(Msg::Close(Some(done))).is_ok() {
            // An error means the writer stopped without answering: it flushed what it could.
            let _ = closed.await;
        }
        self.db
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(())
    }
}

/// One page of [`Store::page`] from `txn`.
fn produce_page(
    txn: &ReadTransaction,
    of: PageOf,
    prefix: &str,
    after: Option<String>,
    limit: usize,
) -> Result<Vec<PageItem>, Error> {
    let Some(start) = apply::page_start(prefix, after.as_deref()) else {
        return Ok(Vec::new());
    };
    let range = PrefixRange::new(prefix);
    let end = range.bounds().1;
    let table = open_table(txn, if of == PageOf::Active { JOBS } else { FINISHED })?;
    let counters = open_table(txn, COUNTERS)?;
    let mut items = Vec::with_capacity(limit.min(4096));
    for entry in table
        .range::<&str>((start, end))
        .map_err(Error::io)?
        .take(limit)
    {
        let (k, v) = entry.map_err(Error::io)?;
        let key = k.value().to_owned();
        items.push(match of {
            PageOf::Active => {
                let counter = counters.get(key.as_str()).map_err(Error::io)?;
                apply::active_item(key, v.value(), counter.as_ref().map(|c| c.value()))?
            }
            PageOf::Finished => apply::finished_item(key, v.value())?,
        });
    }
    Ok(items)
}

/// One page of [`Store::due_page`] from `txn`.
fn produce_due_page(
    txn: &ReadTransaction,
    start: &str,
    before: i64,
    limit: usize,
) -> Result<DuePage, Error> {
    let due = open_table(txn, DUE)?;
    let due_at = open_table(txn, DUE_AT)?;
    let jobs = open_table(txn, JOBS)?;
    let counters = open_table(txn, COUNTERS)?;
    let entries = due
        .range::<&str>(start..)
        .map_err(Error::io)?
        .map(|entry| entry.map(|(k, _)| k.value().to_owned()).map_err(Error::io));
    apply::due::read_page(entries, before, limit, |key| {
        let at = due_at
            .get(key)
            .map_err(Error::io)?
            .and_then(|v| <[u8; 8]>::try_from(v.value()).ok().map(i64::from_le_bytes));
        let Some(job) = jobs.get(key).map_err(Error::io)? else {
            return Ok((at, None));
        };
        let counter = counters.get(key).map_err(Error::io)?;
        Ok((
            at,
            Some((job.value().to_vec(), counter.map(|c| c.value().to_vec()))),
        ))
    })
}

/// Feeds the jobs under `prefix` in `txn` to `tx`, page by page. Stops quietly when the
/// consumer goes away.
fn produce_scan(
    txn: &ReadTransaction,
    prefix: &str,
    page_size: usize,
    tx: &mpsc::Sender<ScanItem>,
) -> Result<(), Error> {
    let jobs = open_table(txn, JOBS)?;
    let counters = open_table(txn, COUNTERS)?;
    let range = PrefixRange::new(prefix);
    let bounds = range.bounds();
    let counter_entries = counters
        .range::<&str>(bounds)
        .map_err(Error::io)?
        .map(|entry| {
            let (k, v) = entry.map_err(Error::io)?;
            Ok((k.value().to_owned(), v.value().to_vec()))
        });
    let mut joiner = Joiner::new(counter_entries);
    let mut page: Vec<LoadedJob> = Vec::with_capacity(page_size);
    for entry in jobs.range::<&str>(bounds).map_err(Error::io)? {
        let (k, v) = entry.map_err(Error::io)?;
        page.push(joiner.join(k.value().to_owned(), v.value())?);
        if page.len() == page_size {
            let full = std::mem::replace(&mut page, Vec::with_capacity(page_size));
            if tx.blocking_send(ScanItem::Page(full)).is_err() {
                return Ok(());
            }
        }
    }
    if !page.is_empty() && tx.blocking_send(ScanItem::Page(page)).is_err() {
        return Ok(());
    }
    Ok(())
}

/// Opens (or creates) the database file at `path`; the errors name the file and, for a file
/// another process holds, say so.
fn open_db(path: &Path, options: &RedbOptions) -> Result<Database, Error> {
    let builder = {
        let mut b = Database::builder();
        b.set_cache_size(options.cache_size);
        b
    };
    // redb asserts on some inconsistencies of a damaged file: a refusal, not a crash.
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        builder.create(path).map(|mut db| {
            // redb checks page checksums only here, not on reads: a changed byte would
            // otherwise be served as data. One pass over the file, like the engine's load.
            let check = db.check_integrity();
            (db, check)
        })
    }));
    let damaged = |how: &str| {
        Error::io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "cannot open {}: the database file is damaged ({how}); restore the data dir \
                 from a copy, or start from a backup with `jobsd jobs import`",
                path.display()
            ),
        ))
    };
    match opened {
        Ok(Ok((db, check))) => match check {
            Ok(true) => Ok(db),
            Ok(false) => Err(damaged(
                "its checksums failed; redb went back to an earlier commit, which can lack \
                 acknowledged writes",
            )),
            Err(::redb::DatabaseError::Storage(::redb::StorageError::Corrupted(why))) => {
                Err(damaged(&why))
            }
            Err(err) => Err(disk::at(path, "cannot check", err)),
        },
        Ok(Err(::redb::DatabaseError::DatabaseAlreadyOpen)) => Err(Error::io(std::io::Error::new(
            std::io::ErrorKind::ResourceBusy,
            format!(
                "the data dir {} is in use: another jobsd holds {} (one jobsd per data \
                     dir; stop the other one or give this one its own --data-dir)",
                path.parent().unwrap_or(path).display(),
                path.display()
            ),
        ))),
        Ok(Err(err)) => Err(disk::at(path, "cannot open", err)),
        Err(_) => Err(damaged("redb stopped on an inconsistency")),
    }
}

/// What a read answers while the writer reopens the database after an I/O error.
fn reopening(path: &Path) -> Error {
    Error::io(std::io::Error::other(format!(
        "the store is reopening {} after an I/O error (every acknowledged write is in the \
         write-ahead log); retry shortly",
        path.display()
    )))
}

/// Brings the database up to date with the write-ahead log at `wal_path` and makes that
/// durable: creates the tables, applies every valid logged batch newer than `meta.applied_seq`
/// in order, and records the newest batch number seen. Gives that number (the next batch gets
/// the one after it) and how many batches were applied. Refuses, naming the log, when the log
/// shows that acknowledged batches were damaged: opening would silently drop them.
fn recover(db: &Database, options: &RedbOptions, wal_path: &Path) -> Result<(u64, u64), Error> {
    // One transaction: a crash during recovery leaves the files as they were, so the next
    // open recovers the same way.
    let txn = begin_write(db, options)?;
    let mut replayed = 0;
    let seq;
    {
        let mut meta = txn.open_table(META).map_err(Error::io)?;
        let applied = meta
            .get(APPLIED_SEQ)
            .map_err(Error::io)?
            .map_or(0, |v| v.value());
        let (records, end) = wal::read_records(wal_path, applied)
            .map_err(|e| disk::at(wal_path, "cannot read the write-ahead log", e))?;
        let refuse = |why: String| {
            Error::io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "write-ahead log {} is damaged: {why}; it holds acknowledged writes that \
                     are not in {} yet, so jobsd refuses to start without them (keep a copy \
                     of the data dir; moving the log aside starts without those writes)",
                    wal_path.display(),
                    wal_path.with_file_name(FILE_NAME).display(),
                ),
            ))
        };
        if let wal::End::Damaged(why) = &end {
            return Err(refuse(why.clone()));
        }
        // A new file holds no job: every job it will hold is indexed as it is written.
        let fresh = !txn
            .list_tables()
            .map_err(Error::io)?
            .any(|t| ::redb::TableHandle::name(&t) == Table::Jobs.name());
        let mut tables = RedbTables {
            jobs: txn.open_table(JOBS).map_err(Error::io)?,
            counters: txn.open_table(COUNTERS).map_err(Error::io)?,
            runs: txn.open_table(RUNS).map_err(Error::io)?,
            finished: txn.open_table(FINISHED).map_err(Error::io)?,
            idempotency: txn.open_table(IDEMPOTENCY).map_err(Error::io)?,
            due: txn.open_table(DUE).map_err(Error::io)?,
            due_at: txn.open_table(DUE_AT).map_err(Error::io)?,
        };
        if fresh {
            apply::due::mark_complete(&mut tables, None)?;
        }
        // Past every seq in the file, so no leftover record can ever pass for a new one.
        let newest = records.iter().map(|r| r.seq).max().unwrap_or(0);
        let mut last = applied;
        for record in records.into_iter().filter(|r| r.seq > applied) {
            if record.seq != last + 1 {
                return Err(refuse(format!(
                    "record at offset {} holds batch {} where {} was expected",
                    record.offset,
                    record.seq,
                    last + 1
                )));
            }
            let Some(requests) = record.requests else {
                return Err(refuse(format!(
                    "record at offset {} passes its CRC but does not decode",
                    record.offset
                )));
            };
            for ops in requests {
                // The per-request outcome was already reported to its caller; replay only
                // needs the same state changes, which the same code on the same state gives.
                apply::apply_request(&mut tables, ops)?.ok();
            }
            last = record.seq;
            replayed += 1;
        }
        if let wal::End::Torn(why) = end {
            // A crash in the middle of an append: that batch was never acknowledged.
            tracing::warn!(
                wal = %wal_path.display(),
                replayed,
                "write-ahead log ends in a write cut short: {why}"
            );
        }
        seq = newest.max(last);
        meta.insert(APPLIED_SEQ, seq).map_err(Error::io)?;
    }
    txn.commit()
        .map_err(|e| disk::at(&wal_path.with_file_name(FILE_NAME), "cannot commit to", e))?;
    Ok((seq, replayed))
}

/// A durable write transaction with the configured repair mode.
fn begin_write(db: &Database, options: &RedbOptions) -> Result<WriteTransaction, Error> {
    let mut txn = db.begin_write().map_err(Error::io)?;
    txn.set_durability(Durability::Immediate)
        .map_err(Error::io)?;
    txn.set_quick_repair(options.quick_repair);
    Ok(txn)
}

/// How often a broken writer tries to reopen the database.
const HEAL_EVERY: Duration = Duration::from_secs(1);

/// The writer thread's state.
struct Writer {
    /// The database; dropped when the thread ends, and while it is reopened after an I/O
    /// error ([`Writer::heal`]).
    db: Option<Arc<Database>>,
    /// Shared with `Redb`: where readers find the database.
    slot: Arc<RwLock<Option<Arc<Database>>>>,
    /// The data directory.
    dir: PathBuf,
    /// When the last attempt to reopen after an I/O error was made.
    last_heal: Option<Instant>,
    /// Requests from `Redb` handles.
    rx: std_mpsc::Receiver<Msg>,
    /// Shared with `Redb::stats`.
    stats: Arc<StatCells>,
    /// Batch bounds and repair mode.
    options: RedbOptions,
    /// The write-ahead log, when batches are made durable there.
    wal: Option<Wal>,
    /// The number of the last batch logged (batch numbers grow by one and never repeat).
    seq: u64,
    /// With the log: the non-durable transaction the logged batches are applied to, kept open
    /// across batches until they are published ([`Writer::publish`]).
    open: Option<WriteTransaction>,
    /// Shared with `Redb`: `open` holds answered batches readers cannot see yet.
    unpublished: Arc<AtomicBool>,
    /// When the oldest logged batch not yet in a durable redb commit was applied.
    dirty_since: Option<Instant>,
    /// Set when the log and redb may disagree (a failed log write, or a redb transaction that
    /// failed after batches in it were logged): every later write, every read that would need
    /// those batches and every checkpoint fails with it, since going on could log batches that
    /// a replay would apply on top of a different state. Reopening replays the log and clears
    /// it: [`Writer::heal`] does that once the disk has room again.
    broken: Option<Error>,
}

impl Writer {
    /// Serves batches until told to close or every sender is gone.
    fn run(mut self) {
        let mut batch: Vec<WriteReq> = Vec::new();
        let mut publish: Vec<oneshot::Sender<Result<(), Error>>> = Vec::new();
        loop {
            self.heal();
            // Broken: wake up to try reopening; else when the next checkpoint is due.
            let wait = if self.broken.is_some() {
                Some(HEAL_EVERY)
            } else {
                self.dirty_since.map(|since| {
                    (since + self.options.checkpoint_interval)
                        .saturating_duration_since(Instant::now())
                })
            };
            let first = match wait {
                None => match self.rx.recv() {
                    Ok(msg) => msg,
                    Err(std_mpsc::RecvError) => break,
                },
                Some(wait) => match self.rx.recv_timeout(wait) {
                    Ok(msg) => msg,
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {
                        self.checkpoint();
                        continue;
                    }
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
                },
            };
            let mut bytes = 0;
            let mut close = None;
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Write(req) => {
                        bytes += req.bytes;
                        batch.push(req);
                    }
                    Msg::Publish(reply) => publish.push(reply),
                    Msg::Close(done) => {
                        close = Some(done);
                        break;
                    }
                    // Tried at the top of the loop.
                    Msg::Heal => {}
                }
                if batch.len() >= self.options.max_batch_requests
                    || bytes >= self.options.max_batch_bytes
                {
                    break;
                }
                next = self.rx.try_recv().ok();
            }
            if !batch.is_empty() {
                self.commit(&mut batch);
            }
            if !publish.is_empty() {
                let outcome = self.publish();
                for reply in publish.drain(..) {
                    let _ = reply.send(outcome.clone());
                }
            }
            if self.checkpoint_due() {
                self.checkpoint();
            }
            if let Some(done) = close {
                self.shut_down(done);
                return;
            }
        }
        // Every handle is gone without a close (cannot happen while `Redb` lives, as its drop
        // sends one); still leave an empty log behind.
        self.checkpoint();
    }

    /// Whether the logged batches should be made durable in redb now.
    fn checkpoint_due(&self) -> bool {
        match (&self.wal, self.dirty_since) {
            (Some(wal), Some(since)) => {
                since.elapsed() >= self.options.checkpoint_interval
                    || wal.used() >= self.options.checkpoint_bytes
            }
            _ => false,
        }
    }

    /// Commits the open transaction, if any, without an fsync: readers see its batches from
    /// now on. Its batches were answered, so a failure leaves redb behind the log for good:
    /// the writer is broken until reopened (which replays them).
    fn publish(&mut self) -> Result<(), Error> {
        if let Some(err) = &self.broken {
            return Err(err.clone());
        }
        let Some(txn) = self.open.take() else {
            return Ok(());
        };
        if let Err(err) = txn.commit() {
            let err = disk::at(&self.db_path(), "cannot write to", err);
            self.broken = Some(err.clone());
            return Err(err);
        }
        self.unpublished.store(false, Ordering::Release);
        Ok(())
    }

    /// Commits redb durably with the number of the last logged batch, then lets the log start
    /// over. On failure the log keeps everything and the writer is broken until
    /// [`Writer::heal`] reopens redb. A broken writer never checkpoints: redb may lack logged
    /// batches, which only a replay restores.
    fn checkpoint(&mut self) {
        if self.dirty_since.is_none() || self.publish().is_err() {
            return;
        }
        let outcome = (|| {
            let txn = begin_write(self.db()?, &self.options)?;
            txn.open_table(META)
                .map_err(Error::io)?
                .insert(APPLIED_SEQ, self.seq)
                .map_err(Error::io)?;
            txn.commit().map_err(Error::io)
        })();
        match outcome {
            Ok(()) => {
                if let Some(wal) = &mut self.wal {
                    wal.reset();
                }
                self.dirty_since = None;
                self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => {
                // redb refuses everything after a failed write of its file until reopened:
                // the writer is broken, and heals by reopening and replaying the log, which
                // stays the durable copy of everything answered.
                let err = disk::at(&self.db_path(), "cannot checkpoint", err);
                tracing::warn!(error = %err, "store checkpoint failed");
                self.broken = Some(err);
                self.dirty_since = Some(Instant::now());
            }
        }
    }

    /// Applies `batch` in one transaction, commits, and answers (and empties) it.
    fn commit(&mut self, batch: &mut Vec<WriteReq>) {
        let ops: usize = batch.iter().map(|req| req.ops.len()).sum();
        if ops == 0 {
            // Nothing to make durable: an fsync would only delay the next batch.
            for req in batch.drain(..) {
                let _ = req.reply.send(Ok(Vec::new()));
            }
            return;
        }
        let metrics = self.stats.metrics.get().filter(|m| m.is_enabled()).cloned();
        let started = metrics.as_ref().map(|_| Instant::now());
        let outcome = match self.broken.clone().or_else(|| self.no_room(batch)) {
            Some(err) => Err(err),
            None if self.wal.is_some() => self.apply_logged(batch),
            None => self.apply(batch),
        };
        if let (Some(metrics), Some(started)) = (metrics, started) {
            metrics.committed(ops, started.elapsed(), outcome.is_ok());
        }
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        self.stats
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.stats.ops.fetch_add(ops as u64, Ordering::Relaxed);
        match outcome {
            Ok(results) => {
                for (req, result) in batch.drain(..).zip(results) {
                    // The caller may have given up waiting; its write stands anyway.
                    let _ = req.reply.send(result);
                }
            }
            Err(err) => {
                self.stats.failed_commits.fetch_add(1, Ordering::Relaxed);
                for req in batch.drain(..) {
                    let _ = req.reply.send(Err(err.clone()));
                }
            }
        }
    }

    /// The per-request results of `batch`, once committed. Takes the requests' ops.
    fn apply(&self, batch: &mut [WriteReq]) -> Result<Vec<Result<Vec<OpResult>, Error>>, Error> {
        let txn = begin_write(self.db()?, &self.options)?;
        let results = apply_batch(&txn, batch)?;
        txn.commit()
            .map_err(|e| disk::at(&self.db_path(), "cannot write to", e))?;
        Ok(results)
    }

    /// [`Writer::apply`] through the log: the batch is on disk in the log before redb commits
    /// it (without an fsync) and before anyone is answered.
    fn apply_logged(
        &mut self,
        batch: &mut [WriteReq],
    ) -> Result<Vec<Result<Vec<OpResult>, Error>>, Error> {
        let Some(wal) = &mut self.wal else {
            return self.apply(batch);
        };
        let seq = self.seq + 1;
        // Encoded first because applying consumes the ops.
        wal.encode(seq, batch.iter().map(|req| req.ops.as_slice()));
        // Applied before logging, so that a failing apply (the batch fails, nothing changed)
        // never leaves a logged batch that a replay would apply.
        let holds_answered = self.open.is_some();
        let txn = match &mut self.open {
            Some(txn) => txn,
            None => {
                let db_path = self.dir.join(FILE_NAME);
                let db = self.db.as_ref().ok_or_else(|| reopening(&db_path))?;
                let mut txn = match db.begin_write() {
                    Ok(txn) => txn,
                    // Only after a failed write of the file (redb wants a reopen).
                    Err(err) => {
                        let err = disk::at(&db_path, "cannot write to", err);
                        self.broken = Some(err.clone());
                        return Err(err);
                    }
                };
                txn.set_durability(Durability::None).map_err(Error::io)?;
                self.open.insert(txn)
            }
        };
        let results = match apply_batch(txn, batch) {
            Ok(results) => results,
            // Nothing of this batch is logged; earlier ones in the transaction were answered.
            Err(err) => return Err(self.abandon(err, holds_answered)),
        };
        if let Err(err) = wal.write() {
            // The batch is in the transaction, but maybe only partly in the log.
            let err = disk::at(
                &self.dir.join(wal::FILE_NAME),
                "cannot append to the write-ahead log",
                err,
            );
            return Err(self.abandon(err, true));
        }
        self.seq = seq;
        self.dirty_since.get_or_insert_with(Instant::now);
        // Before anyone is answered: see `Redb::begin_read`.
        self.unpublished.store(true, Ordering::Release);
        Ok(results)
    }

    /// The open database, or why there is none (it is being reopened).
    fn db(&self) -> Result<&Database, Error> {
        self.db.as_deref().ok_or_else(|| reopening(&self.db_path()))
    }

    /// The database file.
    fn db_path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The refusal of `batch` when it would add data while the data dir's filesystem is down
    /// to its floor ([`disk::floor`]). Deletes still go through: they make room.
    fn no_room(&self, batch: &[WriteReq]) -> Option<Error> {
        let adds = batch.iter().flat_map(|req| &req.ops).any(|op| {
            !matches!(
                op,
                Prepared::DeleteJob { .. }
                    | Prepared::DeletePrefix { .. }
                    | Prepared::DeleteFinished { .. }
                    | Prepared::FinishJob { .. }
                    | Prepared::ForgetIdempotency { .. }
            )
        });
        // A filesystem that cannot say is not refused on a guess.
        let (free, total) = disk::space(&self.dir).ok()?;
        (adds && free < disk::floor(total)).then(|| disk::full(&self.dir, free, total))
    }

    /// After an I/O error broke the writer (redb refuses everything once a write of its file
    /// failed, until reopened): once the disk has room, reopens the database and replays the
    /// log, which holds every acknowledged batch, so writes resume with nothing lost and no
    /// restart. Tried at most every [`HEAL_EVERY`]; until it works, writes keep getting the
    /// error that broke the writer and reads that need the lost batches fail.
    fn heal(&mut self) {
        if self.broken.is_none() || self.last_heal.is_some_and(|t| t.elapsed() < HEAL_EVERY) {
            return;
        }
        self.last_heal = Some(Instant::now());
        // A replay into a still full disk would only fail again; meanwhile the old handle
        // keeps serving what readers can still get from it.
        if let Ok((free, total)) = disk::space(&self.dir)
            && free < disk::floor(total)
        {
            return;
        }
        let path = self.db_path();
        self.open = None;
        *self.slot.write().unwrap_or_else(PoisonError::into_inner) = None;
        self.db = None;
        let reopened = open_db(&path, &self.options).and_then(|db| {
            let (seq, replayed) = recover(&db, &self.options, &self.dir.join(wal::FILE_NAME))?;
            Ok((db, seq, replayed))
        });
        match reopened {
            Ok((db, seq, replayed)) => {
                let db = Arc::new(db);
                *self.slot.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&db));
                self.db = Some(db);
                self.seq = seq;
                if let Some(wal) = &mut self.wal {
                    wal.reset();
                }
                self.dirty_since = None;
                self.broken = None;
                self.unpublished.store(false, Ordering::Release);
                tracing::warn!(
                    db = %path.display(),
                    replayed,
                    "store reopened after an I/O error; writes resume"
                );
            }
            // Readers hold the old file open for a moment, or the disk filled again.
            Err(err) => tracing::warn!(error = %err, "store not reopened yet; retrying"),
        }
    }

    /// Drops (aborts) the open transaction after `err`, and breaks the writer when the
    /// transaction may have held batches that the log has and redb now lacks. Gives `err`.
    fn abandon(&mut self, err: Error, broken: bool) -> Error {
        self.open = None;
        if broken {
            self.broken = Some(err.clone());
        }
        err
    }

    /// Refuses what came after the close, makes everything durable in redb, releases the
    /// database, then reports.
    fn shut_down(mut self, done: Option<oneshot::Sender<()>>) {
        let mut waiters = Vec::from_iter(done);
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                Msg::Write(req) => {
                    let _ = req.reply.send(Err(Error::Closed));
                }
                Msg::Publish(reply) => {
                    let _ = reply.send(Err(Error::Closed));
                }
                Msg::Close(done) => waiters.extend(done),
                Msg::Heal => {}
            }
        }
        // A clean stop leaves nothing to replay (and a short next open).
        self.checkpoint();
        // Only a broken writer can still hold a transaction; it goes before the database.
        drop(self.open);
        // Requests sent from now on find the channel closed, or are dropped unanswered with
        // it: their callers see `Closed` either way.
        drop(self.rx);
        drop(self.db);
        for done in waiters {
            let _ = done.send(());
        }
    }
}

/// Applies `batch` in `txn` and gives the per-request results. Takes the requests' ops.
fn apply_batch(
    txn: &WriteTransaction,
    batch: &mut [WriteReq],
) -> Result<Vec<Result<Vec<OpResult>, Error>>, Error> {
    let mut results = Vec::with_capacity(batch.len());
    let mut tables = RedbTables {
        jobs: txn.open_table(JOBS).map_err(Error::io)?,
        counters: txn.open_table(COUNTERS).map_err(Error::io)?,
        runs: txn.open_table(RUNS).map_err(Error::io)?,
        finished: txn.open_table(FINISHED).map_err(Error::io)?,
        idempotency: txn.open_table(IDEMPOTENCY).map_err(Error::io)?,
        due: txn.open_table(DUE).map_err(Error::io)?,
        due_at: txn.open_table(DUE_AT).map_err(Error::io)?,
    };
    for req in batch.iter_mut() {
        let ops = std::mem::take(&mut req.ops);
        // A backend error leaves the transaction unusable: the caller drops it (abort) and
        // fails the whole batch, so no request is half applied.
        results.push(apply::apply_request(&mut tables, ops)?);
    }
    Ok(results)
}

/// The two tables of one write transaction.
struct RedbTables<'txn> {
    /// `jobs`.
    jobs: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `counters`.
    counters: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `runs`.
    runs: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `finished`.
    finished: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `idempotency`.
    idempotency: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `due`.
    due: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `due_at`.
    due_at: ::redb::Table<'txn, &'static str, &'static [u8]>,
}

impl<'txn> RedbTables<'txn> {
    /// The table `table`.
    fn table(&mut self, table: Table) -> &mut ::redb::Table<'txn, &'static str, &'static [u8]> {
        match table {
            Table::Jobs => &mut self.jobs,
            Table::Counters => &mut self.counters,
            Table::Runs => &mut self.runs,
            Table::Finished => &mut self.finished,
            Table::Idempotency => &mut self.idempotency,
            Table::Due => &mut self.due,
            Table::DueAt => &mut self.due_at,
        }
    }
}

impl Tables for RedbTables<'_> {
    fn keeps_due_index(&self) -> bool {
        true
    }

    fn with_value<R>(
        &mut self,
        table: Table,
        key: &str,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error> {
        let value = self.table(table).get(key).map_err(Error::io)?;
        Ok(value.map(|v| f(v.value())))
    }

    fn insert(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<(), Error> {
        let old = self
            .table(table)
            .insert(key, value.as_slice())
            .map_err(Error::io)?;
        if let Some(undo) = undo {
            undo.push((table, key.to_owned(), old.map(|v| v.value().to_vec())));
        }
        Ok(())
    }

    fn insert_new(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<bool, Error> {
        // One descent for a new key, the usual case; a key already there gets its value back.
        let t = self.table(table);
        let old = t
            .insert(key, value.as_slice())
            .map_err(Error::io)?
            .map(|v| v.value().to_vec());
        if let Some(old) = old {
            t.insert(key, old.as_slice()).map_err(Error::io)?;
            return Ok(false);
        }
        if let Some(undo) = undo {
            undo.push((table, key.to_owned(), None));
        }
        Ok(true)
    }

    fn remove(&mut self, table: Table, key: &str, undo: Option<&mut Undo>) -> Result<bool, Error> {
        let old = self.table(table).remove(key).map_err(Error::io)?;
        let removed = old.is_some();
        if let (Some(undo), Some(old)) = (undo, old) {
            undo.push((table, key.to_owned(), Some(old.value().to_vec())));
        }
        Ok(removed)
    }

    fn remove_prefix(
        &mut self,
        table: Table,
        prefix: &str,
        mut undo: Option<&mut Undo>,
    ) -> Result<u64, Error> {
        let range = PrefixRange::new(prefix);
        let bounds = range.bounds();
        let mut removed = 0;
        let mut extracted = self
            .table(table)
            .extract_from_if::<&str, _>(bounds, |_, _| true)
            .map_err(Error::io)?;
        for entry in &mut extracted {
            let (k, v) = entry.map_err(Error::io)?;
            removed += 1;
            if let Some(undo) = undo.as_deref_mut() {
                undo.push((table, k.value().to_owned(), Some(v.value().to_vec())));
            }
        }
        // Removals are flushed on close; its error would otherwise only poison the commit.
        extracted.close().map_err(Error::io)?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredJob;

    /// Writes leave the writer's transaction open; a read must still see every write answered
    /// before it, from any task.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_answered_write_is_seen_by_the_next_read() {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(Redb::open(dir.path()).unwrap());
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let s = Arc::clone(&s);
                tokio::spawn(async move {
                    for i in 0..50 {
                        let key = format!("app||ns||a||{t}-{i}");
                        let job = StoredJob {
                            generation: 1,
                            ..StoredJob::default()
                        };
                        let op = Op::PutJob {
                            key: key.clone(),
                            job: job.clone(),
                            create_only: true,
                            due: None,
                        };
                        assert_eq!(s.write(vec![op]).await.unwrap(), [OpResult::Done]);
                        assert_eq!(s.get_job(&key).await.unwrap(), Some(job));
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(s.list_jobs("app||").await.unwrap().len(), 400);
        assert_eq!(s.stats().failed_commits, 0);
    }
}
