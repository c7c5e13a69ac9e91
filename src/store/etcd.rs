//! A [`Store`] in etcd, laid out like go-etcd-cron's so the Dapr Scheduler's tools see our
//! data where they expect it: `<namespace>/jobs/<key>` holds the encoded [`StoredJob`] and
//! `<namespace>/counters/<key>` its [`StoredCounter`] (namespace `dapr` in production).
//!
//! # Writes
//!
//! One writer task drains the queued [`Store::write`] calls and commits as many as fit into
//! one etcd transaction (group commit: etcd fsyncs its log once per raft entry). An etcd txn
//! cannot branch on values, so the meaning of the ops is computed here, by the same code as the
//! other stores (`apply.rs`), over a snapshot of every key the batch touches read at one
//! revision; the txn then compares each of those keys' `mod_revision` with what was read and
//! puts or deletes the changed keys. If another writer (another replica) changed one of them
//! meanwhile, the compare fails and the batch is read and computed again, so results are those
//! of the batch applied at the txn's revision, after everything committed before it.
//!
//! A request made only of `DeletePrefix` ops is one txn of range deletes without compares
//! (etcd counts what it deleted); a request with more keys than one etcd txn may hold
//! (`--max-txn-ops`, 128 by default) is split into several txns: each op's result is still
//! exact, but a crash can leave the request half applied.
//!
//! Each txn also puts a marker key `<namespace>/writers/<id>` with the commit number. When the
//! answer to a txn is lost (connection cut, timeout), the next attempt reads the marker: the
//! txn applied exactly if the marker holds its number. Every txn compares the marker, so at
//! most one attempt of a batch can apply.
//!
//! # Failures
//!
//! Transient failures (unavailable, leader changed, timeouts, too many requests) are retried
//! with backoff from 1 s to 30 s (±20 % jitter), for as long as the caller waits (a write is
//! abandoned once every caller of its batch has gone). Other failures are [`Error::Io`].
//!
//! # Watching
//!
//! [`Etcd::watch_jobs`] follows the jobs prefix and re-creates the watch after any error from
//! the last revision it delivered; an etcd watch stream does not do that by itself.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::Stream;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use self::client::{
    Client, CompareWith, EventType, KeyValue, RangeRequest, is_too_large, is_transient,
};
use super::apply::{self, Joiner, PrefixRange, Prepared, Table, Tables, Undo};
use super::{Error, JobScan, LoadedJob, Op, OpResult, ScanItem, Store, StoredCounter, StoredJob};
use crate::resiliency::backoff::ExponentialBackOff;

pub(crate) mod client;

/// Keys (reads and compares) one txn may touch: etcd's default `--max-txn-ops` is 128, and
/// the marker takes one of them.
const MAX_TXN_KEYS: usize = 120;
/// Bytes one txn may carry: etcd's default `--max-request-bytes` is 1.5 MiB.
const MAX_TXN_BYTES: usize = 1024 * 1024;
/// Keys per page of `list_jobs` (go-etcd-cron reads 1024 per page too).
const LIST_PAGE: i64 = 1024;
/// How long one etcd call may take before it counts as a transient failure.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Queued writes before callers wait.
const QUEUE: usize = 4096;
/// Conflicting attempts of a multi-request batch before its requests go one by one.
const CONFLICTS_BEFORE_SPLIT: u32 = 3;

/// A [`Store`] in an etcd cluster (3.4 or later).
pub struct Etcd {
    /// What the writer task and the reads share.
    inner: Arc<Inner>,
    /// Queue to the writer task; `None` once closed.
    tx: Mutex<Option<mpsc::Sender<WriteReq>>>,
    /// The writer task, awaited by `close`.
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// State shared by the writer, the reads and the watches.
struct Inner {
    /// The client (cheap to clone: one balanced channel).
    client: Client,
    /// `<namespace>/jobs/`.
    jobs_prefix: String,
    /// `<namespace>/counters/`.
    counters_prefix: String,
    /// This instance's commit marker key.
    marker: String,
    /// Set by `close`: reads and new writes fail with `Closed`.
    closed: AtomicBool,
    /// Cancelled by `close`: stops watches and retry loops.
    stop: CancellationToken,
}

/// One `Store::write` call waiting for the writer.
struct WriteReq {
    /// The ops, encoded.
    ops: Vec<Prepared>,
    /// Where the caller waits.
    reply: oneshot::Sender<Result<Vec<OpResult>, Error>>,
}

/// One change under the jobs prefix, from [`Etcd::watch_jobs`].
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A job was created or replaced.
    Put {
        /// The composed job key.
        key: String,
        /// The job as stored (boxed: a `Change` stream is mostly small items).
        job: Box<StoredJob>,
        /// The etcd revision of this version of the job.
        mod_revision: i64,
    },
    /// A job was deleted.
    Delete {
        /// The composed job key.
        key: String,
        /// The etcd revision of the delete.
        mod_revision: i64,
    },
    /// etcd compacted the history the watch needed: changes were lost. The consumer must
    /// re-read every job ([`Store::scan`]) and watch again; this is the stream's last item.
    Resync {
        /// The oldest revision etcd still has.
        compact_revision: i64,
    },
}

impl Etcd {
    /// A store on the etcd cluster at `endpoints` (`host:port` or `http://host:port`), with keys
    /// under `namespace` (Dapr uses `dapr`). Does not wait for etcd to be up: calls retry until
    /// it is.
    pub async fn connect<E: AsRef<str>>(endpoints: &[E], namespace: &str) -> Result<Etcd, Error> {
        let client = Client::connect(endpoints).map_err(Error::io)?;
        let namespace = namespace.trim_end_matches('/');
        let inner = Arc::new(Inner {
            client,
            jobs_prefix: format!("{namespace}/jobs/"),
            counters_prefix: format!("{namespace}/counters/"),
            marker: format!("{namespace}/writers/{:016x}", fastrand::u64(..)),
            closed: AtomicBool::new(false),
            stop: CancellationToken::new(),
        });
        let (tx, rx) = mpsc::channel(QUEUE);
        let writer = tokio::spawn(Writer::new(Arc::clone(&inner)).run(rx));
        Ok(Etcd {
            inner,
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        })
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
        tokio::spawn(watch_loop(Arc::clone(&self.inner), from_revision, tx));
        tokio_stream::wrappers::ReceiverStream::new(rx)
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
        let ops: Vec<Prepared> = ops.into_iter().map(Prepared::new).collect();
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
        value.map(|v| apply::decode_job(key, &v)).transpose()
    }

    async fn get_counter(&self, key: &str) -> Result<Option<StoredCounter>, Error> {
        self.check_open()?;
        let full = format!("{}{key}", self.inner.counters_prefix);
        let value = self.inner.get_value(full).await?;
        value.map(|v| apply::decode_counter(key, &v)).transpose()
    }

    async fn list_jobs(&self, prefix: &str) -> Result<Vec<(String, StoredJob)>, Error> {
        self.check_open()?;
        let mut pages = Pager::new(&self.inner, Table::Jobs, prefix, LIST_PAGE);
        let mut jobs = Vec::new();
        while let Some(page) = pages.next().await? {
            for (key, value) in page {
                let job = apply::decode_job(&key, &value)?;
                jobs.push((key, job));
            }
        }
        Ok(jobs)
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
        }
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

/// Pages of `(key, value)` of one table under a prefix, all read at the revision of the first.
struct Pager<'a> {
    /// The store.
    inner: &'a Inner,
    /// The table.
    table: Table,
    /// The next full key to read from; `None` when done.
    from: Option<Vec<u8>>,
    /// The end of the range (exclusive).
    end: Vec<u8>,
    /// Keys per page.
    limit: i64,
    /// The revision of the first page (0 before it).
    revision: i64,
}

impl<'a> Pager<'a> {
    /// Pages of `table`'s keys starting with `prefix`.
    fn new(inner: &'a Inner, table: Table, prefix: &str, limit: i64) -> Self {
        let start = format!("{}{prefix}", inner.prefix(table)).into_bytes();
        let end = client::prefix_end(&start);
        Pager {
            inner,
            table,
            from: Some(start),
            end,
            limit,
            revision: 0,
        }
    }

    /// The next page (never empty), or `None` at the end.
    async fn next(&mut self) -> Result<Option<Vec<(String, Vec<u8>)>>, Error> {
        let Some(from) = self.from.take() else {
            return Ok(None);
        };
        let (end, limit, revision) = (self.end.clone(), self.limit, self.revision);
        let resp = self
            .inner
            .retrying(|etcd| {
                let request = RangeRequest {
                    key: from.clone(),
                    range_end: end.clone(),
                    limit,
                    revision,
                    ..RangeRequest::default()
                };
                async move { etcd.range(request).await }
            })
            .await?;
        if self.revision == 0 {
            self.revision = client::revision(resp.header.as_ref());
        }
        let kvs = resp.kvs;
        if kvs.is_empty() {
            return Ok(None);
        }
        if resp.more {
            let mut next = kvs[kvs.len() - 1].key.clone();
            next.push(0);
            self.from = Some(next);
        }
        let page = kvs
            .into_iter()
            .map(|kv| Ok((self.inner.strip(self.table, &kv.key)?, kv.value)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Some(page))
    }
}

/// Feeds `tx` with pages of jobs under `prefix` joined with their counters, everything read at
/// the revision of the first page.
async fn scan_pages(
    inner: &Inner,
    prefix: &str,
    page_size: i64,
    tx: &mpsc::Sender<ScanItem>,
) -> Result<(), Error> {
    let mut jobs = Pager::new(inner, Table::Jobs, prefix, page_size);
    while let Some(page) = jobs.next().await? {
        // The counters of exactly this page's key range, at the same revision.
        let first = format!("{}{}", inner.counters_prefix, page[0].0).into_bytes();
        let mut end = format!("{}{}", inner.counters_prefix, page[page.len() - 1].0).into_bytes();
        end.push(0);
        let revision = jobs.revision;
        let counters = inner
            .retrying(|etcd| {
                let request = RangeRequest {
                    key: first.clone(),
                    range_end: end.clone(),
                    revision,
                    ..RangeRequest::default()
                };
                async move { etcd.range(request).await }
            })
            .await?
            .kvs
            .into_iter()
            .map(|kv| Ok((inner.strip(Table::Counters, &kv.key)?, kv.value)));
        let mut joiner = Joiner::new(counters);
        let loaded = page
            .into_iter()
            .map(|(key, value)| joiner.join(key, &value))
            .collect::<Result<Vec<LoadedJob>, Error>>()?;
        if tx.send(ScanItem::Page(loaded)).await.is_err() {
            // Dropped: stop reading.
            return Ok(());
        }
    }
    Ok(())
}

// ---- the writer ----

/// The writer task: batches requests into txns.
struct Writer {
    /// The store.
    inner: Arc<Inner>,
    /// Number of the last txn attempted (the marker's value).
    seq: u64,
}

/// The outcome of one request.
type Answer = Result<Vec<OpResult>, Error>;

/// Why a batch did not commit.
enum BatchError {
    /// The batch needs more keys or bytes than one txn may carry.
    TooLarge,
    /// etcd refused it, or the store stopped: every request fails with this.
    Failed(Error),
}

impl Writer {
    fn new(inner: Arc<Inner>) -> Self {
        Writer { inner, seq: 0 }
    }

    /// Serves requests until the queue closes and is empty.
    async fn run(mut self, mut rx: mpsc::Receiver<WriteReq>) {
        let mut next: Option<WriteReq> = None;
        loop {
            let first = match next.take() {
                Some(req) => req,
                None => match rx.recv().await {
                    Some(req) => req,
                    None => return,
                },
            };
            if prefix_only(&first.ops) || weight(&first.ops).0 > MAX_TXN_KEYS {
                self.alone(first).await;
                continue;
            }
            let mut batch = vec![first];
            let (mut keys, mut bytes) = weight(&batch[0].ops);
            while let Ok(req) = rx.try_recv() {
                let (k, b) = weight(&req.ops);
                if prefix_only(&req.ops) || keys + k > MAX_TXN_KEYS || bytes + b > MAX_TXN_BYTES {
                    next = Some(req);
                    break;
                }
                keys += k;
                bytes += b;
                batch.push(req);
            }
            self.commit_requests(batch).await;
        }
    }

    /// Commits requests that fit one txn together, falling back to one txn per request.
    async fn commit_requests(&mut self, batch: Vec<WriteReq>) {
        let (ops, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|r| (r.ops, r.reply)).unzip();
        let answers = match self.commit(&ops, &replies).await {
            Ok(answers) => answers,
            Err(BatchError::Failed(err)) => ops.iter().map(|_| Err(err.clone())).collect(),
            Err(BatchError::TooLarge) if ops.len() > 1 => {
                // Values were bigger than the estimate: go one by one.
                for (ops, reply) in ops.into_iter().zip(replies) {
                    self.alone(WriteReq { ops, reply }).await;
                }
                return;
            }
            Err(BatchError::TooLarge) => vec![Err(too_large())],
        };
        for (reply, answer) in replies.into_iter().zip(answers) {
            let _ = reply.send(answer);
        }
    }

    /// Commits one request on its own: a prefix-only request as range deletes, a request too
    /// large for one txn in several.
    async fn alone(&mut self, req: WriteReq) {
        let answer = if prefix_only(&req.ops) {
            self.delete_prefixes(&req.ops, &req.reply).await
        } else if weight(&req.ops).0 <= MAX_TXN_KEYS {
            match self
                .commit(
                    std::slice::from_ref(&req.ops),
                    std::slice::from_ref(&req.reply),
                )
                .await
            {
                Ok(mut answers) => answers.pop().unwrap_or_else(|| Err(too_large())),
                Err(BatchError::Failed(err)) => Err(err),
                Err(BatchError::TooLarge) => Err(too_large()),
            }
        } else {
            self.in_chunks(req.ops, &req.reply).await
        };
        let _ = req.reply.send(answer);
    }

    /// Applies a request too large for one txn in consecutive chunks.
    async fn in_chunks(&mut self, ops: Vec<Prepared>, reply: &oneshot::Sender<Answer>) -> Answer {
        // Routine for the trigger loop's result batches (each op stands alone); a caller that
        // needs one atomic write keeps it under the txn limits.
        tracing::debug!(
            ops = ops.len(),
            "write too large for one etcd transaction: applied in several"
        );
        let mut results = Vec::with_capacity(ops.len());
        let mut chunk = Vec::new();
        let mut ops = ops.into_iter().peekable();
        while let Some(op) = ops.next() {
            chunk.push(op);
            let full = ops.peek().is_none_or(|next| {
                weight(&chunk).0 + weight(std::slice::from_ref(next)).0 > MAX_TXN_KEYS
            });
            if !full {
                continue;
            }
            let part = std::mem::take(&mut chunk);
            let answer = if prefix_only(&part) {
                self.delete_prefixes(&part, reply).await
            } else {
                match self
                    .commit(std::slice::from_ref(&part), std::slice::from_ref(reply))
                    .await
                {
                    Ok(mut answers) => answers.pop().unwrap_or_else(|| Err(too_large())),
                    Err(BatchError::Failed(err)) => Err(err),
                    Err(BatchError::TooLarge) => Err(too_large()),
                }
            };
            results.extend(answer?);
        }
        Ok(results)
    }

    /// Runs one txn of range deletes for a request of `DeletePrefix` ops only; etcd counts
    /// what each removed.
    async fn delete_prefixes(
        &mut self,
        ops: &[Prepared],
        reply: &oneshot::Sender<Answer>,
    ) -> Answer {
        let inner = Arc::clone(&self.inner);
        let mut txn_ops = Vec::new();
        for op in ops {
            if let Prepared::DeletePrefix { prefix } = op {
                for table in [Table::Jobs, Table::Counters] {
                    let key = format!("{}{prefix}", inner.prefix(table));
                    txn_ops.push(client::delete_prefix(key));
                }
            }
        }
        let mut attempts: Vec<u64> = Vec::new();
        let mut backoff = backoff();
        loop {
            // The marker tells whether an attempt whose answer was lost applied.
            let marker = match self.read_marker(reply).await {
                Ok(marker) => marker,
                Err(err) => return Err(err),
            };
            if attempts.contains(&marker.1) {
                // It did, but its counts are gone with its answer.
                tracing::warn!("etcd prefix delete applied but its answer was lost");
                return Ok(ops.iter().map(|_| OpResult::Deleted(0)).collect());
            }
            self.seq += 1;
            attempts.push(self.seq);
            let mut all = txn_ops.clone();
            all.push(client::put(inner.marker.clone(), self.seq.to_be_bytes(), 0));
            let txn = client::txn(
                vec![client::equal(
                    inner.marker.clone(),
                    CompareWith::ModRevision(marker.0),
                )],
                all,
                Vec::new(),
            );
            match tokio::time::timeout(CALL_TIMEOUT, inner.client.txn(txn)).await {
                Ok(Ok(resp)) if resp.succeeded => {
                    let deleted: Vec<u64> =
                        resp.responses.iter().filter_map(client::deleted).collect();
                    // Jobs and counters alternate; the jobs' counts are the results.
                    return Ok(deleted
                        .iter()
                        .step_by(2)
                        .map(|&n| OpResult::Deleted(n))
                        .collect());
                }
                // Only we write the marker: a failed compare means a lost answer; re-read.
                Ok(Ok(_)) => continue,
                Ok(Err(err)) if !is_transient(&err) => return Err(Error::io(err)),
                Ok(Err(err)) => tracing::warn!(error = %err, "etcd txn failed; retrying"),
                Err(_) => tracing::warn!("etcd txn timed out; retrying"),
            }
            if !self.wait(&mut backoff, std::slice::from_ref(reply)).await {
                return Err(Error::Closed);
            }
        }
    }

    /// Reads the marker: `(mod_revision, seq)`, both 0 when absent.
    async fn read_marker(&self, reply: &oneshot::Sender<Answer>) -> Result<(i64, u64), Error> {
        let mut backoff = backoff();
        loop {
            let request = client::read_key(self.inner.marker.clone());
            let got = tokio::time::timeout(CALL_TIMEOUT, self.inner.client.range(request)).await;
            match got {
                Ok(Ok(resp)) => return Ok(resp.kvs.first().map_or((0, 0), marker_of)),
                Ok(Err(err)) if !is_transient(&err) => return Err(Error::io(err)),
                Ok(Err(err)) => tracing::warn!(error = %err, "etcd read failed; retrying"),
                Err(_) => tracing::warn!("etcd read timed out; retrying"),
            }
            if !self.wait(&mut backoff, std::slice::from_ref(reply)).await {
                return Err(Error::Closed);
            }
        }
    }

    /// Backs off; false when nobody waits for the answer any more or the store stopped.
    async fn wait(
        &self,
        backoff: &mut ExponentialBackOff,
        replies: &[oneshot::Sender<Answer>],
    ) -> bool {
        if replies.iter().all(oneshot::Sender::is_closed) {
            return false;
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => true,
            () = self.inner.stop.cancelled() => false,
        }
    }

    /// Commits `requests` in one txn: read, compute, compare-and-write, again on conflict.
    async fn commit(
        &mut self,
        requests: &[Vec<Prepared>],
        replies: &[oneshot::Sender<Answer>],
    ) -> Result<Vec<Answer>, BatchError> {
        let reads = read_set(requests);
        // (seq, answers) of attempts whose fate is unknown.
        let mut attempts: Vec<(u64, Vec<Answer>)> = Vec::new();
        let mut backoff = backoff();
        let mut conflicts = 0;
        loop {
            let snapshot = match self.read(&reads).await {
                Ok(snapshot) => snapshot,
                Err(ReadError::Permanent(err)) => return Err(BatchError::Failed(err)),
                Err(ReadError::Transient) => {
                    if !self.wait(&mut backoff, replies).await {
                        return Err(BatchError::Failed(Error::Closed));
                    }
                    continue;
                }
            };
            if let Some(i) = attempts
                .iter()
                .position(|(seq, _)| *seq == snapshot.marker_seq)
            {
                // An attempt whose answer was lost did apply.
                return Ok(attempts.swap_remove(i).1);
            }
            let marker_rev = snapshot.marker_rev;
            let mut overlay = snapshot.overlay;
            let mut answers = Vec::with_capacity(requests.len());
            for ops in requests {
                match apply::apply_request(&mut overlay, ops.iter().map(clone_prepared).collect()) {
                    Ok(answer) => answers.push(answer),
                    Err(err) => return Err(BatchError::Failed(err)),
                }
            }
            self.seq += 1;
            // After a lost answer, even a batch that changes nothing commits (the marker), so the
            // lost attempt can no longer apply after these answers.
            let force = !attempts.is_empty();
            let Some(txn) = overlay.txn(&self.inner, marker_rev, self.seq, force) else {
                return Err(BatchError::TooLarge);
            };
            let Some(txn) = txn else {
                // Nothing changes: the answers hold at the snapshot's revision.
                return Ok(answers);
            };
            attempts.push((self.seq, answers));
            match tokio::time::timeout(CALL_TIMEOUT, self.inner.client.txn(txn)).await {
                Ok(Ok(resp)) if resp.succeeded => {
                    return Ok(attempts.pop().map(|a| a.1).unwrap_or_default());
                }
                Ok(Ok(_)) => {
                    // Another writer changed a key we read: this attempt is known not to have
                    // applied.
                    attempts.pop();
                    conflicts += 1;
                    if conflicts >= CONFLICTS_BEFORE_SPLIT && requests.len() > 1 {
                        return Err(BatchError::TooLarge);
                    }
                    continue;
                }
                Ok(Err(err)) if is_too_large(&err) => {
                    attempts.pop();
                    return Err(BatchError::TooLarge);
                }
                Ok(Err(err)) if !is_transient(&err) => {
                    return Err(BatchError::Failed(Error::io(err)));
                }
                Ok(Err(err)) => tracing::warn!(error = %err, "etcd txn failed; retrying"),
                Err(_) => tracing::warn!("etcd txn timed out; retrying"),
            }
            if !self.wait(&mut backoff, replies).await {
                return Err(BatchError::Failed(Error::Closed));
            }
        }
    }

    /// Reads every key of `reads` and the marker in one txn (one revision).
    async fn read(&self, reads: &ReadSet) -> Result<Snapshot, ReadError> {
        let inner = &self.inner;
        let mut gets = vec![client::get(inner.marker.clone())];
        for (table, key) in &reads.keys {
            gets.push(client::get(format!("{}{key}", inner.prefix(*table))));
        }
        for (table, prefix) in &reads.prefixes {
            let full = format!("{}{prefix}", inner.prefix(*table));
            gets.push(client::get_prefix(full));
        }
        let txn = client::txn(Vec::new(), gets, Vec::new());
        let resp = match tokio::time::timeout(CALL_TIMEOUT, inner.client.txn(txn)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(err)) if !is_transient(&err) => {
                return Err(ReadError::Permanent(Error::io(err)));
            }
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "etcd read failed; retrying");
                return Err(ReadError::Transient);
            }
            Err(_) => {
                tracing::warn!("etcd read timed out; retrying");
                return Err(ReadError::Transient);
            }
        };
        let mut responses = resp.responses.into_iter().map(client::range_kvs);
        let (marker_rev, marker_seq) = responses
            .next()
            .and_then(|kvs| kvs.first().map(marker_of))
            .unwrap_or((0, 0));
        let mut overlay = Overlay::default();
        for (table, key) in &reads.keys {
            let found = responses.next().unwrap_or_default();
            let (rev, value) = found
                .into_iter()
                .next()
                .map_or((0, None), |kv| (kv.mod_revision, Some(kv.value)));
            overlay
                .map(*table)
                .insert(key.clone(), Slot::read(rev, value));
        }
        for (table, prefix) in &reads.prefixes {
            for kv in responses.next().unwrap_or_default() {
                let key = inner.strip(*table, &kv.key).map_err(ReadError::Permanent)?;
                overlay
                    .map(*table)
                    .insert(key, Slot::read(kv.mod_revision, Some(kv.value)));
            }
            overlay.prefixes.push((*table, prefix.clone()));
        }
        Ok(Snapshot {
            marker_rev,
            marker_seq,
            overlay,
        })
    }
}

/// Why a read pass failed.
enum ReadError {
    /// Retry after a backoff.
    Transient,
    /// Give up.
    Permanent(Error),
}

/// What a read pass saw.
struct Snapshot {
    /// The marker's `mod_revision` (0 if absent).
    marker_rev: i64,
    /// The marker's commit number (0 if absent).
    marker_seq: u64,
    /// Every key read, ready to apply ops to.
    overlay: Overlay,
}

/// Keys a batch reads: exact keys and whole prefixes, per table.
#[derive(Default)]
struct ReadSet {
    /// Exact keys, deduplicated.
    keys: Vec<(Table, String)>,
    /// Prefixes of `DeletePrefix` ops in mixed requests.
    prefixes: Vec<(Table, String)>,
}

/// The keys the ops of `requests` may read or change.
fn read_set(requests: &[Vec<Prepared>]) -> ReadSet {
    let mut keys = std::collections::BTreeSet::new();
    let mut prefixes = std::collections::BTreeSet::new();
    for op in requests.iter().flatten() {
        match op_key(op) {
            Ok(key) => keys.insert(key),
            Err(prefix) => prefixes.insert(prefix),
        };
    }
    let both = |set: &std::collections::BTreeSet<&str>| {
        [Table::Jobs, Table::Counters]
            .into_iter()
            .flat_map(|table| set.iter().map(move |k| (table, (*k).to_owned())))
            .collect()
    };
    ReadSet {
        keys: both(&keys),
        prefixes: both(&prefixes),
    }
}

/// The key of a keyed op, or the prefix of a `DeletePrefix`.
fn op_key(op: &Prepared) -> Result<&str, &str> {
    match op {
        Prepared::PutJob { key, .. }
        | Prepared::DeleteJob { key }
        | Prepared::PutCounter { key, .. }
        | Prepared::FinishJob { key, .. } => Ok(key),
        Prepared::DeletePrefix { prefix } => Err(prefix),
    }
}

/// `(keys to read, bytes)` a request needs in a txn, estimated before reading.
fn weight(ops: &[Prepared]) -> (usize, usize) {
    let keys = ops
        .iter()
        .map(|op| if op_key(op).is_ok() { 2 } else { 8 })
        .sum();
    (keys, ops.iter().map(Prepared::size).sum())
}

/// Whether a request has only `DeletePrefix` ops (and at least one).
fn prefix_only(ops: &[Prepared]) -> bool {
    !ops.is_empty()
        && ops
            .iter()
            .all(|op| matches!(op, Prepared::DeletePrefix { .. }))
}

/// A copy of a prepared op, for another attempt of a batch.
fn clone_prepared(op: &Prepared) -> Prepared {
    match op {
        Prepared::PutJob {
            key,
            value,
            create_only,
        } => Prepared::PutJob {
            key: key.clone(),
            value: value.clone(),
            create_only: *create_only,
        },
        Prepared::DeleteJob { key } => Prepared::DeleteJob { key: key.clone() },
        Prepared::DeletePrefix { prefix } => Prepared::DeletePrefix {
            prefix: prefix.clone(),
        },
        Prepared::PutCounter {
            key,
            generation,
            value,
        } => Prepared::PutCounter {
            key: key.clone(),
            generation: *generation,
            value: value.clone(),
        },
        Prepared::FinishJob { key, generation } => Prepared::FinishJob {
            key: key.clone(),
            generation: *generation,
        },
    }
}

/// `(mod_revision, seq)` of a marker record.
fn marker_of(kv: &KeyValue) -> (i64, u64) {
    let seq = <[u8; 8]>::try_from(kv.value.as_slice()).map_or(0, u64::from_be_bytes);
    (kv.mod_revision, seq)
}

// ---- the overlay the ops are applied to ----

/// One key as read, and as the batch left it so far.
struct Slot {
    /// `mod_revision` when read; 0 when the key did not exist.
    read_rev: i64,
    /// The value when read.
    original: Option<Vec<u8>>,
    /// The value after the ops applied so far.
    current: Option<Vec<u8>>,
}

impl Slot {
    fn read(read_rev: i64, value: Option<Vec<u8>>) -> Self {
        Slot {
            read_rev,
            current: value.clone(),
            original: value,
        }
    }
}

/// The keys a batch reads, at one revision, with the batch's changes on top.
#[derive(Default)]
struct Overlay {
    /// Jobs read.
    jobs: BTreeMap<String, Slot>,
    /// Counters read.
    counters: BTreeMap<String, Slot>,
    /// Prefixes read whole.
    prefixes: Vec<(Table, String)>,
}

impl Overlay {
    fn map(&mut self, table: Table) -> &mut BTreeMap<String, Slot> {
        match table {
            Table::Jobs => &mut self.jobs,
            Table::Counters => &mut self.counters,
        }
    }

    /// The slot of `key`, which the read set must have covered.
    fn slot(&mut self, table: Table, key: &str) -> Result<&mut Slot, Error> {
        let covered = self
            .prefixes
            .iter()
            .any(|(t, p)| *t == table && key.starts_with(p.as_str()));
        let map = self.map(table);
        if !map.contains_key(key) {
            if !covered {
                return Err(invalid("etcd store: op touched a key it did not read"));
            }
            // Under a prefix read whole: absent at the snapshot.
            map.insert(key.to_owned(), Slot::read(0, None));
        }
        Ok(map.get_mut(key).expect("inserted above"))
    }

    /// The txn that compares every key read and writes every change plus the marker:
    /// `None` when too large, `Some(None)` when nothing changes (unless `force`).
    fn txn(
        &self,
        inner: &Inner,
        marker_rev: i64,
        seq: u64,
        force: bool,
    ) -> Option<Option<client::TxnRequest>> {
        let mut compares = vec![client::equal(
            inner.marker.clone(),
            CompareWith::ModRevision(marker_rev),
        )];
        let mut writes = Vec::new();
        let mut bytes = 0;
        for (table, map) in [(Table::Jobs, &self.jobs), (Table::Counters, &self.counters)] {
            for (key, slot) in map {
                let full = format!("{}{key}", inner.prefix(table));
                bytes += full.len();
                compares.push(client::equal(
                    full.clone(),
                    CompareWith::ModRevision(slot.read_rev),
                ));
                if slot.current == slot.original {
                    continue;
                }
                match &slot.current {
                    Some(value) => {
                        bytes += full.len() + value.len();
                        writes.push(client::put(full, value.clone(), 0));
                    }
                    None => writes.push(client::delete(full)),
                }
            }
        }
        if compares.len() > MAX_TXN_KEYS + 1 || writes.len() > MAX_TXN_KEYS || bytes > MAX_TXN_BYTES
        {
            return None;
        }
        if writes.is_empty() && !force {
            return Some(None);
        }
        writes.push(client::put(inner.marker.clone(), seq.to_be_bytes(), 0));
        Some(Some(client::txn(compares, writes, Vec::new())))
    }
}

impl Tables for Overlay {
    fn with_value<R>(
        &mut self,
        table: Table,
        key: &str,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error> {
        Ok(self.slot(table, key)?.current.as_deref().map(f))
    }

    fn insert(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<(), Error> {
        let old = self.slot(table, key)?.current.replace(value);
        if let Some(undo) = undo {
            undo.push((table, key.to_owned(), old));
        }
        Ok(())
    }

    fn remove(&mut self, table: Table, key: &str, undo: Option<&mut Undo>) -> Result<bool, Error> {
        let old = self.slot(table, key)?.current.take();
        let removed = old.is_some();
        if let (Some(undo), Some(old)) = (undo, old) {
            undo.push((table, key.to_owned(), Some(old)));
        }
        Ok(removed)
    }

    fn remove_prefix(
        &mut self,
        table: Table,
        prefix: &str,
        mut undo: Option<&mut Undo>,
    ) -> Result<u64, Error> {
        if !self
            .prefixes
            .iter()
            .any(|(t, p)| *t == table && p == prefix)
        {
            return Err(invalid(
                "etcd store: prefix delete of a prefix it did not read",
            ));
        }
        let mut removed = 0;
        for (key, slot) in self
            .map(table)
            .range_mut::<str, _>(PrefixRange::new(prefix).bounds())
        {
            if let Some(old) = slot.current.take() {
                removed += 1;
                if let Some(undo) = undo.as_deref_mut() {
                    undo.push((table, key.clone(), Some(old)));
                }
            }
        }
        Ok(removed)
    }
}

// ---- watching ----

/// Follows the jobs prefix from `from_revision` into `tx`, re-creating the watch after errors.
async fn watch_loop(inner: Arc<Inner>, from_revision: i64, tx: mpsc::Sender<Change>) {
    let mut next = from_revision;
    let mut backoff = backoff();
    loop {
        let create = client::watch_prefix(inner.jobs_prefix.clone(), next);
        let created = tokio::select! {
            () = inner.stop.cancelled() => return,
            () = tx.closed() => return,
            created = tokio::time::timeout(CALL_TIMEOUT, inner.client.watch(create)) => created,
        };
        match created {
            Ok(Ok(mut stream)) => loop {
                let message = tokio::select! {
                    () = inner.stop.cancelled() => return,
                    () = tx.closed() => return,
                    message = stream.message() => message,
                };
                let resp = match message {
                    Ok(Some(resp)) => resp,
                    Ok(None) => {
                        tracing::warn!("etcd watch ended; re-creating it");
                        break;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "etcd watch failed; re-creating it");
                        break;
                    }
                };
                if resp.compact_revision > 0 {
                    let _ = tx
                        .send(Change::Resync {
                            compact_revision: resp.compact_revision,
                        })
                        .await;
                    return;
                }
                if resp.canceled {
                    tracing::warn!(
                        reason = resp.cancel_reason,
                        "etcd watch cancelled; re-creating it"
                    );
                    break;
                }
                if resp.created {
                    backoff = self::backoff();
                    if next == 0 {
                        // "From now": pin it, so a re-created watch misses nothing.
                        next = resp.header.as_ref().map_or(0, |h| h.revision + 1);
                    }
                    continue;
                }
                if resp.events.is_empty() {
                    // Progress notification: everything up to the header's revision was sent.
                    if let Some(h) = &resp.header {
                        next = next.max(h.revision + 1);
                    }
                    continue;
                }
                for event in &resp.events {
                    let Some(kv) = &event.kv else { continue };
                    let rev = kv.mod_revision;
                    next = next.max(rev + 1);
                    let Ok(key) = inner.strip(Table::Jobs, &kv.key) else {
                        continue;
                    };
                    let change = match event.r#type() {
                        EventType::Put => match apply::decode_job(&key, &kv.value) {
                            Ok(job) => Change::Put {
                                key,
                                job: Box::new(job),
                                mod_revision: rev,
                            },
                            Err(err) => {
                                tracing::warn!(error = %err, "undecodable job in etcd; ignored");
                                continue;
                            }
                        },
                        EventType::Delete => Change::Delete {
                            key,
                            mod_revision: rev,
                        },
                    };
                    if tx.send(change).await.is_err() {
                        return;
                    }
                }
            },
            Ok(Err(err)) => tracing::warn!(error = %err, "etcd watch could not start; retrying"),
            Err(_) => tracing::warn!("etcd watch start timed out; retrying"),
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = inner.stop.cancelled() => return,
            () = tx.closed() => return,
        }
    }
}

// ---- failures ----

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
