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
//! the batch to the log ([`wal`]) and `fdatasync` it; the batch is applied to a redb
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

use super::apply;
use super::encoded::Prepared;
use super::paging::{self, Joiner, PrefixRange};
use super::records;
use super::tables::{Table, Tables, Undo};
use super::{
    DueIndex, DuePage, Error, FinishedJob, JobScan, LoadedJob, Op, OpResult, PageItem, PageOf,
    ScanItem, Store, StoredCounter, StoredJob, StoredRun, run_key, runs_prefix,
};
use crate::observe::StoreMetrics;

mod disk;
mod open;
pub(crate) mod wal;
mod writer;

use wal::Wal;

pub use open::{AUTO_CHECK_MAX_BYTES, StoreCheck};
use open::{drop_quietly, open_db, recover};
use writer::{RedbTables, Writer, begin_write};

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
/// `due_far`: the due index's buckets not reached yet (`store::apply::due`).
const DUE_FAR: TableDefinition<&str, &[u8]> = TableDefinition::new("due_far");
/// `due_at`: each indexed job's time (`store::apply::due`).
const DUE_AT: TableDefinition<&str, &[u8]> = TableDefinition::new("due_at");
/// `meta`: bookkeeping of the store itself ([`APPLIED_SEQ`]).
/// Records kept beside the jobs (`Table::Values`).
const VALUES: TableDefinition<&str, &[u8]> = TableDefinition::new("values");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `meta` key: the last write-ahead-log batch this durable state holds.
const APPLIED_SEQ: &str = "applied_seq";

/// Tuning of [`Redb`]; the defaults suit the sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// When opening verifies the file's checksums ([`StoreCheck`]).
    pub check: StoreCheck,
    /// Make batches durable by appending them to a write-ahead log (one sequential write and
    /// one `fdatasync`) instead of a durable redb commit (several pages and the header). A log
    /// left by an earlier run is replayed on open either way.
    pub wal: bool,
    /// With the log: longest time a logged batch waits for a durable redb commit (which lets
    /// the log start over). Bounds the replay work after a crash.
    pub checkpoint_interval: Duration,
    /// With the log: log bytes after which a checkpoint happens regardless of the interval.
    pub checkpoint_bytes: u64,
    /// With the log: time spent applying logged batches after which a checkpoint happens
    /// regardless of the interval. A replay after a crash redoes that work on a cold cache,
    /// so this bounds the restart after `kill -9` where the interval cannot: a saturated
    /// writer over a large store spends most of each interval applying random inserts.
    pub checkpoint_work: Duration,
}

impl Default for RedbOptions {
    fn default() -> Self {
        RedbOptions {
            max_batch_requests: 4096,
            max_batch_bytes: 16 << 20,
            cache_size: 64 << 20,
            quick_repair: true,
            check: StoreCheck::Auto,
            wal: true,
            checkpoint_interval: Duration::from_millis(500),
            checkpoint_bytes: 32 << 20,
            checkpoint_work: Duration::from_millis(150),
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
        let started = Instant::now();
        let db = open_db(&path, &options)?;
        let opened = started.elapsed();
        if !existed {
            // redb syncs the file, not the directory entry that names it: without this, a
            // power cut could lose a brand-new database together with its acknowledged writes.
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| disk::at(dir, "cannot sync the data dir", e))?;
        }
        let stats = Arc::new(StatCells::default());
        let wal_path = dir.join(wal::FILE_NAME);
        let (db, seq, replayed) = recover(db, &options, &wal_path)?;
        stats.replayed.store(replayed, Ordering::Relaxed);
        tracing::info!(
            file = %path.display(),
            open_ms = opened.as_millis() as u64,
            replay_ms = (started.elapsed() - opened).as_millis() as u64,
            replayed,
            "store opened"
        );
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
            applied_for: Duration::ZERO,
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
        drop_quietly(
            self.db
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
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
        let ops: Vec<Prepared> = ops.into_iter().map(Op::encode).collect();
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
        value
            .map(|v| records::decode_job(key, v.value()))
            .transpose()
    }

    async fn get_value(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let txn = self.begin_read().await?;
        let table = open_table(&txn, VALUES)?;
        let value = table.get(key).map_err(Error::io)?;
        Ok(value.map(|v| v.value().to_vec()))
    }

    async fn list_values(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let txn = self.begin_read().await?;
        let table = open_table(&txn, VALUES)?;
        let range = table
            .range::<&str>(PrefixRange::new(prefix).bounds())
            .map_err(Error::io)?;
        range
            .map(|entry| {
                let (k, v) = entry.map_err(Error::io)?;
                Ok((k.value().to_owned(), v.value().to_vec()))
            })
            .collect()
    }

    async fn get_counter(&self, key: &str) -> Result<Option<StoredCounter>, Error> {
        let txn = self.begin_read().await?;
        let table = open_table(&txn, COUNTERS)?;
        let value = table.get(key).map_err(Error::io)?;
        value
            .map(|v| records::decode_counter(key, v.value()))
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
                    let job = records::decode_job(&key, v.value())?;
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
            .map(|v| records::decode_finished(key, v.value()))
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
            runs.push(records::decode_run(k.value(), v.value())?);
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
                    let at = records::record_time(&key, v.value())?;
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
        let txn = loop {
            let txn = self.begin_read().await?;
            let cursor = open_table(&txn, DUE_AT)?
                .get(apply::due::CURSOR)
                .map_err(Error::io)?;
            if apply::due::covers(cursor.as_ref().map(|c| c.value()), before) {
                break txn;
            }
            // Far buckets the page needs are moved first (each op moves a bounded part).
            self.write(vec![Op::AdvanceDue { before }]).await?;
        };
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
        drop_quietly(
            self.db
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
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
    let Some(start) = paging::page_start(prefix, after.as_deref()) else {
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
                records::active_item(key, v.value(), counter.as_ref().map(|c| c.value()))?
            }
            PageOf::Finished => records::finished_item(key, v.value())?,
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
            .and_then(|v| apply::due::decode_ms(v.value()));
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

/// What a read answers while the writer reopens the database after an I/O error.
fn reopening(path: &Path) -> Error {
    Error::io(std::io::Error::other(format!(
        "the store is reopening {} after an I/O error (every acknowledged write is in the \
         write-ahead log); retry shortly",
        path.display()
    )))
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
