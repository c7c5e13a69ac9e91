//! The group-commit writer: one task drains the queued [`Store::write`] calls and commits as
//! many as fit into one etcd transaction (group commit: etcd fsyncs its log once per raft
//! entry). What a batch means is computed over a snapshot of its keys and committed with
//! compare-and-swap (`overlay.rs`); if another writer (another replica) changed one of them
//! meanwhile, the compare fails and the batch is read and computed again, so results are those
//! of the batch applied at the txn's revision, after everything committed before it.
//!
//! A request made only of `DeletePrefix` ops is one txn of range deletes without compares
//! (etcd counts what it deleted); a request with more keys or bytes than one etcd txn may hold
//! (`--max-txn-ops`, 128 by default; `--max-request-bytes`) is split into several txns: each
//! op's result is still exact, but a crash can leave the request half applied.
//!
//! Each txn also puts a marker key `<namespace>/writers/<id>` with the commit number. When the
//! answer to a txn is lost (connection cut, timeout), the next attempt reads the marker: the
//! txn applied exactly if the marker holds its number. Every txn compares the marker, so at
//! most one attempt of a batch can apply.
//!
//! A batch of requests made only of job puts (creates, overwrites, a batch create's run) goes
//! the shorter way of `creates.rs`: one txn, no read.
//!
//! [`Store::write`]: crate::store::Store::write

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::client::{self, CompareWith, is_too_large, is_transient};
use super::overlay::{self, Overlay, ReadError, Snapshot, marker_of, read_set, txn_keys};
use super::{CALL_TIMEOUT, Inner, MAX_TXN_BYTES, MAX_TXN_KEYS, backoff, too_large};
use crate::resiliency::backoff::ExponentialBackOff;
use crate::store::encoded::Prepared;
use crate::store::tables::Table;
use crate::store::{Error, OpResult};

/// The tables a `DeletePrefix` clears, in the order of its range deletes.
const PREFIX_TABLES: [Table; 4] = [Table::Jobs, Table::Counters, Table::Finished, Table::Runs];

/// Conflicting attempts of a multi-request batch before its requests go one by one.
const CONFLICTS_BEFORE_SPLIT: u32 = 3;

/// One `Store::write` call waiting for the writer.
pub(super) struct WriteReq {
    /// The ops, encoded.
    pub(super) ops: Vec<Prepared>,
    /// Where the caller waits.
    pub(super) reply: oneshot::Sender<Result<Vec<OpResult>, Error>>,
}

/// The writer task: batches requests into txns.
pub(super) struct Writer {
    /// The store.
    pub(super) inner: Arc<Inner>,
    /// Number of the last txn attempted (the marker's value).
    pub(super) seq: u64,
    /// The marker's `mod_revision` as this writer's last txn left it; `None` when unknown
    /// (then read before a txn that compares it without a read of its own).
    pub(super) marker_rev: Option<i64>,
    /// Keys one txn may compare and write (`Inner::txn_keys`).
    pub(super) max_keys: usize,
}

/// The outcome of one request.
pub(super) type Answer = Result<Vec<OpResult>, Error>;

/// Why a batch did not commit.
enum BatchError {
    /// The batch needs more keys or bytes than one txn may carry.
    TooLarge,
    /// etcd refused it, or the store stopped: every request fails with this.
    Failed(Error),
}

impl Writer {
    /// A writer for the store `inner`.
    pub(super) fn new(inner: Arc<Inner>) -> Self {
        Writer {
            inner,
            seq: 0,
            marker_rev: None,
            max_keys: MAX_TXN_KEYS,
        }
    }

    /// Serves requests until the queue closes and is empty.
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<WriteReq>) {
        let mut next: Option<WriteReq> = None;
        self.max_keys = self.inner.txn_keys().await;
        loop {
            let first = match next.take() {
                Some(req) => req,
                None => match rx.recv().await {
                    Some(req) => req,
                    None => return,
                },
            };
            // Puts alone take the way without a read (`creates.rs`), whatever their number.
            let first = match self.commit_puts_from(first, &mut rx).await {
                Ok(left) => {
                    next = left;
                    continue;
                }
                Err(first) => first,
            };
            if prefix_only(&first.ops) || weight(&first.ops).0 > self.max_keys {
                self.alone(first).await;
                continue;
            }
            let mut batch = vec![first];
            let (mut keys, mut bytes) = weight(&batch[0].ops);
            while let Ok(req) = rx.try_recv() {
                let (k, b) = weight(&req.ops);
                if prefix_only(&req.ops) || keys + k > self.max_keys || bytes + b > MAX_TXN_BYTES {
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
    pub(super) async fn commit_requests(&mut self, batch: Vec<WriteReq>) {
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
            Err(BatchError::TooLarge) if ops.iter().all(|ops| ops.len() > 1) => {
                // One request whose values were bigger than the estimate: in parts.
                for (ops, reply) in ops.into_iter().zip(replies) {
                    let answer = self.in_chunks(ops, &reply).await;
                    let _ = reply.send(answer);
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
        let answer = if weight(&req.ops).0 > self.max_keys {
            self.in_chunks(req.ops, &req.reply).await
        } else if prefix_only(&req.ops) {
            self.delete_prefixes(&req.ops, &req.reply).await
        } else {
            match self
                .commit(
                    std::slice::from_ref(&req.ops),
                    std::slice::from_ref(&req.reply),
                )
                .await
            {
                Ok(mut answers) => answers.pop().unwrap_or_else(|| Err(too_large())),
                Err(BatchError::Failed(err)) => Err(err),
                // Values larger than estimated (a finished record carries its job's bytes).
                Err(BatchError::TooLarge) if req.ops.len() > 1 => {
                    self.in_chunks(req.ops, &req.reply).await
                }
                Err(BatchError::TooLarge) => Err(too_large()),
            }
        };
        let _ = req.reply.send(answer);
    }

    /// Applies a request too large for one txn in consecutive chunks; a chunk that turns out
    /// too large after all (values larger than estimated) is halved until its parts fit.
    async fn in_chunks(&mut self, ops: Vec<Prepared>, reply: &oneshot::Sender<Answer>) -> Answer {
        // Routine for the trigger loop's result batches (each op stands alone); a caller that
        // needs one atomic write keeps it under the txn limits.
        tracing::debug!(
            ops = ops.len(),
            "write too large for one etcd transaction: applied in several"
        );
        let mut parts = std::collections::VecDeque::new();
        let mut chunk = Vec::new();
        // The chunk's weight, kept as it grows (weighing it whole for every op is quadratic).
        let (mut keys, mut bytes) = (0, 0);
        for op in ops {
            let (more_keys, more_bytes) = weight(std::slice::from_ref(&op));
            if !chunk.is_empty()
                && (keys + more_keys > self.max_keys || bytes + more_bytes > MAX_TXN_BYTES)
            {
                parts.push_back(std::mem::take(&mut chunk));
                (keys, bytes) = (0, 0);
            }
            keys += more_keys;
            bytes += more_bytes;
            chunk.push(op);
        }
        if !chunk.is_empty() {
            parts.push_back(chunk);
        }
        let mut results = Vec::new();
        while let Some(mut part) = parts.pop_front() {
            let answer = if prefix_only(&part) {
                self.delete_prefixes(&part, reply).await
            } else {
                match self
                    .commit(std::slice::from_ref(&part), std::slice::from_ref(reply))
                    .await
                {
                    Ok(mut answers) => answers.pop().unwrap_or_else(|| Err(too_large())),
                    Err(BatchError::Failed(err)) => Err(err),
                    Err(BatchError::TooLarge) if part.len() > 1 => {
                        let second = part.split_off(part.len() / 2);
                        parts.push_front(second);
                        parts.push_front(part);
                        continue;
                    }
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
                // Jobs first: their counts are the results.
                for table in PREFIX_TABLES {
                    txn_ops.push(client::delete_prefix(inner.full(table, prefix)));
                }
            }
        }
        let mut attempts: Vec<u64> = Vec::new();
        let mut backoff = backoff();
        // This txn moves the marker without telling the put path (`creates.rs`) where to, and
        // deletes keys it does not name.
        self.marker_rev = None;
        self.inner.known.clear();
        loop {
            // The marker tells whether an attempt whose answer was lost applied.
            let marker = match self.read_marker(std::slice::from_ref(reply)).await {
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
            match inner.commit_txn(txn, ops.len()).await {
                Ok(Ok(resp)) if resp.succeeded => {
                    let deleted: Vec<u64> =
                        resp.responses.iter().filter_map(client::deleted).collect();
                    return Ok(deleted
                        .iter()
                        .step_by(PREFIX_TABLES.len())
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
    pub(super) async fn read_marker(
        &self,
        replies: &[oneshot::Sender<Answer>],
    ) -> Result<(i64, u64), Error> {
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
            if !self.wait(&mut backoff, replies).await {
                return Err(Error::Closed);
            }
        }
    }

    /// Backs off; false when nobody waits for the answer any more or the store stopped.
    pub(super) async fn wait(
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
        // Every key known, and the marker where our last txn left it: no read (`known.rs`).
        let mut known = self
            .marker_rev
            .and_then(|rev| Some((rev, overlay::known_snapshot(&self.inner.known, &reads)?)));
        // This txn moves the marker; it is known again once the txn's answer is.
        self.marker_rev = None;
        // (seq, answers) of attempts whose fate is unknown.
        let mut attempts: Vec<(u64, Vec<Answer>)> = Vec::new();
        let mut backoff = backoff();
        let mut conflicts = 0;
        loop {
            let from_known = known.is_some();
            let snapshot = if let Some((marker_rev, overlay)) = known.take() {
                // The first attempt: no attempt's answer can have been lost yet.
                Snapshot {
                    marker_rev,
                    marker_seq: self.seq,
                    overlay,
                }
            } else {
                match overlay::read(&self.inner, &reads).await {
                    Ok(snapshot) => snapshot,
                    Err(ReadError::Permanent(err)) => return Err(BatchError::Failed(err)),
                    Err(ReadError::Transient) => {
                        if !self.wait(&mut backoff, replies).await {
                            return Err(BatchError::Failed(Error::Closed));
                        }
                        continue;
                    }
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
                match overlay.apply_request(ops.to_vec()) {
                    Ok(answer) => answers.push(answer),
                    Err(err) => return Err(BatchError::Failed(err)),
                }
            }
            self.seq += 1;
            // After a lost answer, even a batch that changes nothing commits (the marker), so the
            // lost attempt can no longer apply after these answers.
            let force = !attempts.is_empty();
            let Some(txn) = overlay.txn(&self.inner, self.max_keys, marker_rev, self.seq, force)
            else {
                return Err(BatchError::TooLarge);
            };
            let Some(txn) = txn else {
                if from_known {
                    // Nothing changes, which only a read can tell for sure: no txn compared
                    // what is known.
                    continue;
                }
                // Nothing changes: the answers hold at the snapshot's revision.
                return Ok(answers);
            };
            attempts.push((self.seq, answers));
            let ops = requests.iter().map(Vec::len).sum();
            match self.inner.commit_txn(txn, ops).await {
                Ok(Ok(resp)) if resp.succeeded => {
                    let rev = client::revision(resp.header.as_ref());
                    self.marker_rev = Some(rev);
                    self.inner.known.committed(rev, overlay.settled(rev));
                    return Ok(attempts.pop().map(|a| a.1).unwrap_or_default());
                }
                Ok(Ok(_)) if from_known => {
                    // A key moved since it was known (or the marker did): read them all.
                    attempts.pop();
                    self.inner.known.forget(Overlay::read_keys(&reads));
                    continue;
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
}

/// `(keys, bytes)` a request needs in a txn, estimated before reading: keys bound both the
/// compares and the writes (see `txn_keys`).
fn weight(ops: &[Prepared]) -> (usize, usize) {
    let keys = ops.iter().map(txn_keys).sum();
    (keys, ops.iter().map(Prepared::size).sum())
}

/// Whether a request has only `DeletePrefix` ops (and at least one).
fn prefix_only(ops: &[Prepared]) -> bool {
    !ops.is_empty()
        && ops
            .iter()
            .all(|op| matches!(op, Prepared::DeletePrefix { .. }))
}
