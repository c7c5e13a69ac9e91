//! A [`Store`] in etcd, laid out like go-etcd-cron's so the Dapr Scheduler's tools see our
//! data where they expect it: `<namespace>/jobs/<key>` holds the [`StoredJob`] in go-etcd-cron's
//! `stored.Job` layout (`job_value.rs`) and `<namespace>/counters/<key>` its [`StoredCounter`],
//! whose first fields are go-etcd-cron's `stored.Counter` (namespace `dapr` in production).
//!
//! jobsd's own history lives beside them, under a prefix go-etcd-cron never reads:
//! `<namespace>/x-jobsd/runs/<key>\0<seq:016x>` holds each [`StoredRun`](super::StoredRun)
//! (see [`run_key`](super::run_key)) and `<namespace>/x-jobsd/finished/<key>` the
//! [`FinishedJob`] of a job kept after it finished. The ops keep them exactly as the other
//! stores do (`apply/`).
//!
//! The rooms:
//! - this file: [`Etcd`] and its [`Store`] reads, and how calls retry;
//! - `job_value.rs`: a job's value in etcd (go-etcd-cron's layout), read and written only
//!   through it; the ops see [`StoredJob`] bytes, as in the other stores;
//! - `writer.rs`: the group-commit writer task (batches, the commit marker, range deletes);
//! - `overlay.rs`: the keys a batch reads at one revision, the ops applied on top, and the
//!   compare-and-swap txn that commits them;
//! - `runs.rs`: the run keys a batch writes without reading them, and why that is safe;
//! - `creates.rs`: batches of job puts committed without a read;
//! - `partition.rs`: the index of jobs by partition, and reading one partition's jobs;
//! - `pager.rs`: `list_jobs` and `scan` in pages at one revision;
//! - `history.rs`: the history reads (`get_finished`, `list_runs`, `page`);
//! - `watch.rs`: the self-healing jobs watch ([`Etcd::watch_jobs`]);
//! - `client.rs`: jobsd's thin etcd v3 gRPC client.
//!
//! # Failures
//!
//! Transient failures (unavailable, leader changed, timeouts, too many requests) are retried
//! with backoff from 1 s to 30 s (±20 % jitter), for as long as the caller waits (a write is
//! abandoned once every caller of its batch has gone). Other failures are [`Error::Io`].

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::Stream;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use self::client::{Client, RangeRequest, is_transient};
use self::keys::table_prefix;
use self::pager::{Pager, scan_pages};
use self::partition::Index;
pub use self::partition::{PartitionPage, partition_of};
use self::writer::{WriteReq, Writer};
use super::encoded::Prepared;
use super::records;
use super::tables::Table;
use super::{
    Error, FinishedJob, JobScan, LoadedJob, Op, OpResult, PageItem, PageOf, ScanItem, Store,
    StoredCounter, StoredJob, StoredRun,
};
use crate::observe::StoreMetrics;
use crate::resiliency::backoff::ExponentialBackOff;
pub use watch::Change;

pub(crate) mod client;
mod creates;
mod fresh;
mod gather;
mod history;
pub(crate) mod job_value;
pub(crate) mod keys;
mod known;
mod legacy;
mod overlay;
mod pager;
pub(crate) mod partition;
mod runs;
mod watch;
mod writer;

/// The pages of [`Etcd::scan_partitions`].
pub struct PartitionScan {
    rx: mpsc::Receiver<Result<PartitionPage, Error>>,
}

impl PartitionScan {
    /// The next page, or `None` after the last one.
    pub async fn next_page(&mut self) -> Result<Option<PartitionPage>, Error> {
        self.rx.recv().await.transpose()
    }
}

/// Keys one txn may compare, and writes it may make, in an etcd with the default
/// `--max-txn-ops` (128), which bounds each list (the marker takes one of each).
const MAX_TXN_KEYS: usize = 120;
/// Ops of the txn that asks etcd whether it takes larger txns (Dapr's own etcd allows 10,000);
/// if it does, txns may have this many less 8 (as [`MAX_TXN_KEYS`] is 128 less 8).
const PROBE_TXN_OPS: usize = 1024;
/// Bytes one txn may carry: etcd's default `--max-request-bytes` is 1.5 MiB.
const MAX_TXN_BYTES: usize = 1024 * 1024;
/// Keys per page of `list_jobs` (go-etcd-cron reads 1024 per page too).
const LIST_PAGE: i64 = 1024;
/// How long one etcd call may take before it counts as a transient failure.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Queued writes before callers wait.
const QUEUE: usize = 4096;
/// Partitions the jobs are indexed by unless told otherwise (`jobsd scheduler`'s default).
pub const DEFAULT_PARTITIONS: u32 = 256;

/// A [`Store`] in an etcd cluster (3.4 or later).
pub struct Etcd {
    /// What the writer task and the reads share.
    inner: Arc<Inner>,
    /// Queue to the writer task; `None` once closed.
    tx: Mutex<Option<mpsc::Sender<WriteReq>>>,
    /// The writer task, awaited by `close`.
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Queue to the task that gathers reads of one job (`gather.rs`).
    gather: mpsc::UnboundedSender<gather::Ask>,
}

/// State shared by the writer, the reads and the watches.
struct Inner {
    /// The client (cheap to clone: one balanced channel).
    client: Client,
    /// The jobs watch's own client (connections of its own). Over HTTP/2 a stream's data that
    /// its reader has not taken yet holds the connection's flow-control window (h2 releases it
    /// only as the application reads), so a watch backed up behind a member busy with a read
    /// would starve that read's answer on a shared connection: the member would wait for it
    /// for ever (seen as a burst of creates that stopped firing).
    watch_client: Client,
    /// The namespace the keys are under ([`keys`]).
    namespace: String,
    /// `<namespace>/jobs/`.
    jobs_prefix: String,
    /// `<namespace>/counters/`.
    counters_prefix: String,
    /// `<namespace>/x-jobsd/runs/`.
    runs_prefix: String,
    /// `<namespace>/x-jobsd/finished/`.
    finished_prefix: String,
    /// `<namespace>/x-jobsd/idempotency/`.
    idempotency_prefix: String,
    /// Where a due index would live (never written: etcd keeps none).
    due_prefix: String,
    /// Where [`Table::Values`] lives.
    values_prefix: String,
    /// This instance's commit marker key.
    marker: String,
    /// The index of jobs by partition, kept by every write of a job.
    index: Index,
    /// Every job is known to have its index key (see `partition.rs`).
    indexed: AtomicBool,
    /// Keys one txn may compare and write, learned from etcd on first use.
    txn_keys: tokio::sync::OnceCell<usize>,
    /// Set by `close`: reads and new writes fail with `Closed`.
    closed: AtomicBool,
    /// Cancelled by `close`: stops watches and retry loops.
    stop: CancellationToken,
    /// Where the writer's txns are recorded, once [`Etcd::observe`] is called.
    metrics: std::sync::OnceLock<StoreMetrics>,
    /// Keys known without a read (`known.rs`).
    known: known::Known,
    /// Job puts the writer committed with no counter (`fresh.rs`).
    fresh: fresh::Fresh,
    /// Counters read for watched puts (what `fresh` saves).
    counter_reads: std::sync::atomic::AtomicU64,
    /// Reads made before a compare-and-swap (what `known` saves).
    snapshot_reads: std::sync::atomic::AtomicU64,
}

impl Etcd {
    /// A store on the etcd cluster at `endpoints` (`host:port` or `http://host:port`), with keys
    /// under `namespace` (Dapr uses `dapr`). Does not wait for etcd to be up: calls retry until
    /// it is.
    pub async fn connect<E: AsRef<str>>(endpoints: &[E], namespace: &str) -> Result<Etcd, Error> {
        Self::connect_with(endpoints, namespace, None).await
    }

    /// [`connect`](Self::connect) over TLS when `tls` is given (`--etcd-ca-file` and, for an
    /// etcd with `--client-cert-auth`, `--etcd-cert-file` and `--etcd-key-file`).
    pub async fn connect_with<E: AsRef<str>>(
        endpoints: &[E],
        namespace: &str,
        tls: Option<&crate::tls::ClientTls>,
    ) -> Result<Etcd, Error> {
        Self::connect_partitioned(endpoints, namespace, tls, DEFAULT_PARTITIONS).await
    }

    /// [`connect_with`](Self::connect_with), indexing jobs by `partitions` partitions (the
    /// cluster's `--partitions`), so that [`scan_partitions`](Self::scan_partitions) of that
    /// count reads only the partitions asked for.
    pub async fn connect_partitioned<E: AsRef<str>>(
        endpoints: &[E],
        namespace: &str,
        tls: Option<&crate::tls::ClientTls>,
        partitions: u32,
    ) -> Result<Etcd, Error> {
        let client = Client::connect_with(endpoints, tls).map_err(Error::io)?;
        let watch_client = Client::connect_with(endpoints, tls).map_err(Error::io)?;
        let namespace = namespace.trim_end_matches('/');
        let inner = Arc::new(Inner {
            client,
            watch_client,
            namespace: namespace.to_owned(),
            jobs_prefix: table_prefix(namespace, Table::Jobs),
            counters_prefix: table_prefix(namespace, Table::Counters),
            runs_prefix: table_prefix(namespace, Table::Runs),
            finished_prefix: table_prefix(namespace, Table::Finished),
            idempotency_prefix: table_prefix(namespace, Table::Idempotency),
            due_prefix: table_prefix(namespace, Table::Due),
            values_prefix: table_prefix(namespace, Table::Values),
            marker: keys::writer_marker(namespace, fastrand::u64(..)),
            index: Index::new(namespace, partitions),
            indexed: AtomicBool::new(false),
            txn_keys: tokio::sync::OnceCell::new(),
            closed: AtomicBool::new(false),
            stop: CancellationToken::new(),
            metrics: std::sync::OnceLock::new(),
            known: known::Known::default(),
            fresh: fresh::Fresh::default(),
            counter_reads: std::sync::atomic::AtomicU64::new(0),
            snapshot_reads: std::sync::atomic::AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::channel(QUEUE);
        let writer = tokio::spawn(Writer::new(Arc::clone(&inner)).run(rx));
        let (gather, asks) = mpsc::unbounded_channel();
        tokio::spawn(gather::run(Arc::clone(&inner), asks));
        Ok(Etcd {
            inner,
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            gather,
        })
    }

    /// Records every txn of the writer from now on into `metrics` (the first call wins): its
    /// duration (etcd's apply and fsync of the raft entry), the ops it carried, and the txns
    /// etcd did not answer.
    pub fn observe(&self, metrics: StoreMetrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// The cluster's current revision. Take it before a [`Store::scan`] and watch from the
    /// next one: changes made during the scan are then seen again, which is harmless.
    pub async fn revision(&self) -> Result<i64, Error> {
        let key = self.inner.marker.clone();
        self.inner
            .retrying(|etcd| {
                let request = RangeRequest {
                    count_only: true,
                    ..client::read_key(key.clone())
                };
                async move {
                    let resp = etcd.range(request).await?;
                    Ok(client::revision(resp.header.as_ref()))
                }
            })
            .await
    }

    /// Every change under the jobs prefix from revision `from_revision` on (0 = from now).
    ///
    /// The watch is re-created after any error from the revision after the last one delivered,
    /// so a restart or a failover of etcd loses nothing; if etcd compacted that revision away
    /// the stream ends with [`Change::Resync`]. It also ends when the store is closed or the
    /// stream dropped.
    pub fn watch_jobs(&self, from_revision: i64) -> impl Stream<Item = Change> + Send + 'static {
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(watch::watch_loop(
            Arc::clone(&self.inner),
            from_revision,
            tx,
        ));
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }

    /// Tells the writer a job put the watch saw (a partition this member owns): its next write
    /// of that job (a result, most often) can then skip the read before the compare-and-swap
    /// (`known.rs`). Harmless if the job has moved on since: the compare is refused and the
    /// write reads.
    pub fn saw_job(&self, key: &str, mod_revision: i64, value: &[u8]) {
        // The writer reads jobs as `StoredJob`s (`job_value.rs`); one that does not decode is
        // read from etcd, which reports it.
        match job_value::to_stored(key, value) {
            Ok(stored) => self.inner.known.saw_job(key, mod_revision, &stored),
            Err(_) => self.inner.known.forget_job(key),
        }
    }

    /// Tells the writer a job delete the watch saw: what it knew of the job is forgotten.
    pub fn saw_job_deleted(&self, key: &str) {
        self.inner.known.forget_job(key);
    }

    /// Reads made before a compare-and-swap since the store opened (see [`Etcd::saw_job`]).
    pub fn snapshot_reads(&self) -> u64 {
        self.inner.snapshot_reads.load(Ordering::Relaxed)
    }

    /// The number of partitions jobs are indexed by.
    pub fn index_partitions(&self) -> u32 {
        self.inner.index.count()
    }

    /// The jobs of `partitions` (of [`index_partitions`](Self::index_partitions)) with their
    /// counters, read at one revision: their index keys, then those jobs only, never the
    /// others. Jobs lacking an index key (written by a Dapr Scheduler) are indexed first,
    /// once per cluster. With `before` (ms since the Unix epoch), a job whose index key says
    /// it fires at or after that is not read: its key and time come instead (see
    /// [`PartitionPage`]).
    pub async fn scan_partitions(
        &self,
        partitions: BTreeSet<u32>,
        page_size: usize,
        before: Option<i64>,
    ) -> Result<PartitionScan, Error> {
        self.check_open()?;
        let page_size = i64::try_from(page_size.max(1)).unwrap_or(i64::MAX);
        let (tx, rx) = mpsc::channel(2);
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            if let Err(err) =
                partition::scan_partitions(&inner, &partitions, page_size, before, &tx).await
            {
                // The consumer may be gone; nothing to do then.
                let _ = tx.send(Err(err)).await;
            }
        });
        Ok(PartitionScan { rx })
    }

    /// The jobs of `keys` with their counters (those that exist), read at one revision, and
    /// that revision.
    pub async fn read_jobs(&self, keys: Vec<String>) -> Result<(Vec<LoadedJob>, i64), Error> {
        self.check_open()?;
        let revision = self.revision().await?;
        let (jobs, _) = partition::read_loaded(&self.inner, keys, revision).await?;
        Ok((jobs, revision))
    }

    /// The counters of watched job puts `(key, mod_revision)` that exist, by key. A put this
    /// store's writer committed with no counter, at that revision, is not read (`fresh.rs`).
    pub async fn read_counters(
        &self,
        puts: Vec<(String, i64)>,
    ) -> Result<std::collections::HashMap<String, StoredCounter>, Error> {
        self.check_open()?;
        let mut keys = Vec::with_capacity(puts.len());
        let deadline = fresh::Fresh::deadline();
        for (key, rev) in puts {
            if !self.inner.fresh.take(&key, rev, deadline).await {
                keys.push(key);
            }
        }
        if keys.is_empty() {
            return Ok(std::collections::HashMap::new());
        }
        self.inner
            .counter_reads
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        partition::read_counters(&self.inner, keys).await
    }

    /// Counters read for watched puts since the store opened (see [`Etcd::read_counters`]).
    pub fn counter_reads(&self) -> u64 {
        self.inner.counter_reads.load(Ordering::Relaxed)
    }

    /// The etcd client (for the cluster's membership keys, next to the store's).
    pub(crate) fn client(&self) -> Client {
        self.inner.client.clone()
    }

    /// Fails with `Closed` once closed.
    fn check_open(&self) -> Result<(), Error> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }
}

#[async_trait]
impl Store for Etcd {
    async fn write(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, Error> {
        let ops: Vec<Prepared> = ops.into_iter().map(Op::encode).collect();
        let (reply, answer) = oneshot::channel();
        let tx = self.tx.lock().await.clone().ok_or(Error::Closed)?;
        tx.send(WriteReq { ops, reply })
            .await
            .map_err(|_| Error::Closed)?;
        answer.await.map_err(|_| Error::Closed)?
    }

    async fn get_job(&self, key: &str) -> Result<Option<StoredJob>, Error> {
        self.check_open()?;
        let full = format!("{}{key}", self.inner.jobs_prefix);
        let value = self.inner.get_value(full).await?;
        value.map(|v| job_value::decode(key, &v)).transpose()
    }

    async fn get_value(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        self.check_open()?;
        let full = format!("{}{key}", self.inner.values_prefix);
        self.inner.get_value(full).await
    }

    async fn list_values(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, Error> {
        self.check_open()?;
        let mut pages = Pager::new(&self.inner, Table::Values, prefix, LIST_PAGE);
        let mut values = Vec::new();
        while let Some(page) = pages.next().await? {
            values.extend(page);
        }
        Ok(values)
    }

    async fn get_counter(&self, key: &str) -> Result<Option<StoredCounter>, Error> {
        self.check_open()?;
        let full = format!("{}{key}", self.inner.counters_prefix);
        let value = self.inner.get_value(full).await?;
        value.map(|v| records::decode_counter(key, &v)).transpose()
    }

    async fn get_loaded(&self, key: &str) -> Result<Option<LoadedJob>, Error> {
        self.check_open()?;
        let (reply, answer) = oneshot::channel();
        let ask = gather::Ask {
            key: key.to_owned(),
            reply,
        };
        self.gather.send(ask).map_err(|_| Error::Closed)?;
        answer.await.map_err(|_| Error::Closed)?
    }

    async fn list_jobs(&self, prefix: &str) -> Result<Vec<(String, StoredJob)>, Error> {
        self.check_open()?;
        let mut pages = Pager::new(&self.inner, Table::Jobs, prefix, LIST_PAGE);
        let mut jobs = Vec::new();
        while let Some(page) = pages.next().await? {
            for (key, value) in page {
                let job = job_value::decode(&key, &value)?;
                jobs.push((key, job));
            }
        }
        Ok(jobs)
    }

    async fn get_finished(&self, key: &str) -> Result<Option<FinishedJob>, Error> {
        self.check_open()?;
        history::get_finished(&self.inner, key).await
    }

    async fn list_runs(
        &self,
        key: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, StoredRun)>, Error> {
        self.check_open()?;
        history::list_runs(&self.inner, key, before, limit).await
    }

    async fn page(
        &self,
        of: PageOf,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PageItem>, Error> {
        self.check_open()?;
        history::page(&self.inner, of, prefix, after, limit).await
    }

    async fn page_idempotency(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, prost_types::Timestamp)>, Error> {
        self.check_open()?;
        history::page_idempotency(&self.inner, after, limit).await
    }

    async fn scan(&self, prefix: &str, page_size: usize) -> Result<JobScan, Error> {
        self.check_open()?;
        let page_size = i64::try_from(page_size.max(1)).unwrap_or(i64::MAX);
        let (tx, scan) = JobScan::channel();
        let inner = Arc::clone(&self.inner);
        let prefix = prefix.to_owned();
        tokio::spawn(async move {
            let last = match scan_pages(&inner, &prefix, page_size, &tx).await {
                Ok(()) => ScanItem::End,
                Err(err) => ScanItem::Failed(err),
            };
            // The consumer may be gone; nothing to do then.
            let _ = tx.send(last).await;
        });
        Ok(scan)
    }

    async fn close(&self) -> Result<(), Error> {
        self.inner.closed.store(true, Ordering::Release);
        // Dropping the sender lets the writer finish what is queued, then stop.
        self.tx.lock().await.take();
        if let Some(writer) = self.writer.lock().await.take() {
            let _ = writer.await;
            // The marker only matters while this instance writes; leave no litter behind
            // (best effort: a crashed replica leaves one small key).
            let marker = self.inner.marker.clone();
            let _ = tokio::time::timeout(CALL_TIMEOUT, self.inner.client.delete(marker)).await;
        }
        self.inner.stop.cancel();
        Ok(())
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.inner.stop.cancel();
    }
}

impl Inner {
    /// Sends the writer's `txn` carrying `ops` ops, within [`CALL_TIMEOUT`], and records it
    /// (`Etcd::observe`). `Err` when it timed out.
    async fn commit_txn(
        &self,
        txn: client::TxnRequest,
        ops: usize,
    ) -> Result<Result<client::TxnResponse, tonic::Status>, tokio::time::error::Elapsed> {
        let metrics = self.metrics.get().filter(|m| m.is_enabled());
        let started = metrics.map(|_| std::time::Instant::now());
        let answer = tokio::time::timeout(CALL_TIMEOUT, self.client.txn(txn)).await;
        if let (Some(metrics), Some(started)) = (metrics, started) {
            metrics.committed(ops, started.elapsed(), matches!(answer, Ok(Ok(_))));
        }
        answer
    }

    /// Runs `call` until it succeeds, fails permanently, or the store stops. Transient
    /// failures back off from 1 s to 30 s.
    async fn retrying<T, F, Fut>(&self, mut call: F) -> Result<T, Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        let mut backoff = backoff();
        loop {
            match tokio::time::timeout(CALL_TIMEOUT, call(self.client.clone())).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(err)) if !is_transient(&err) => return Err(Error::io(err)),
                Ok(Err(err)) => tracing::warn!(error = %err, "etcd call failed; retrying"),
                Err(_) => tracing::warn!("etcd call timed out; retrying"),
            }
            tokio::select! {
                () = tokio::time::sleep(backoff.next_delay()) => {}
                () = self.stop.cancelled() => return Err(Error::Closed),
            }
        }
    }

    /// Keys one txn may compare, and writes it may make: [`MAX_TXN_KEYS`] unless etcd takes
    /// a txn of [`PROBE_TXN_OPS`] reads (asked once). Fewer, larger txns are what make
    /// bursts of results and partition reads cheap: etcd's cost is mostly per txn.
    async fn txn_keys(&self) -> usize {
        *self
            .txn_keys
            .get_or_init(|| async {
                let gets: Vec<_> = (0..PROBE_TXN_OPS)
                    .map(|_| client::get(self.marker.clone()))
                    .collect();
                let probe = self
                    .retrying(|etcd| {
                        let txn = client::txn(Vec::new(), gets.clone(), Vec::new());
                        async move { etcd.txn(txn).await }
                    })
                    .await;
                // Refused ("too many operations in txn request"): etcd's default limit.
                let keys = probe.map_or(MAX_TXN_KEYS, |_| PROBE_TXN_OPS - 8);
                tracing::debug!(keys, "etcd txn size");
                keys
            })
            .await
    }

    /// The value under the full key `key`.
    async fn get_value(&self, key: String) -> Result<Option<Vec<u8>>, Error> {
        self.retrying(|etcd| {
            let request = client::read_key(key.clone());
            async move {
                let resp = etcd.range(request).await?;
                Ok(resp.kvs.into_iter().next().map(|kv| kv.value))
            }
        })
        .await
    }

    /// The key prefix of `table`.
    fn prefix(&self, table: Table) -> &str {
        match table {
            Table::Jobs => &self.jobs_prefix,
            Table::Counters => &self.counters_prefix,
            Table::Runs => &self.runs_prefix,
            Table::Finished => &self.finished_prefix,
            Table::Idempotency => &self.idempotency_prefix,
            // Never written here: etcd keeps no due index (`Tables::keeps_due_index`).
            Table::Due | Table::DueFar | Table::DueAt => &self.due_prefix,
            Table::Values => &self.values_prefix,
        }
    }

    /// The full etcd key of `key` in `table`.
    fn full(&self, table: Table, key: &str) -> String {
        format!("{}{key}", self.prefix(table))
    }

    /// Our key of a full etcd key of `table`.
    fn strip(&self, table: Table, full: &[u8]) -> Result<String, Error> {
        let rest = full
            .strip_prefix(self.prefix(table).as_bytes())
            .ok_or_else(|| invalid("etcd returned a key outside the asked range"))?;
        String::from_utf8(rest.to_vec())
            .map_err(|_| invalid("etcd key under the jobs namespace is not UTF-8"))
    }
}

/// The backoff of etcd calls (go-etcd-cron's): 1 s, doubling up to 30 s, ±20 % jitter.
fn backoff() -> ExponentialBackOff {
    ExponentialBackOff::endless(Duration::from_secs(1), 2.0, Duration::from_secs(30), 0.2)
}

/// The error for a request that cannot fit one etcd txn.
fn too_large() -> Error {
    invalid("write too large for one etcd transaction (--max-txn-ops / --max-request-bytes)")
}

/// An [`Error::Io`] with a message.
fn invalid(msg: &'static str) -> Error {
    Error::io(std::io::Error::new(std::io::ErrorKind::InvalidData, msg))
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod partition_tests;

#[cfg(test)]
mod known_tests;
