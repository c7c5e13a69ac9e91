//! Job puts committed without a read. A batch made only of single-`PutJob` requests (every
//! create and overwrite through the API) needs nothing read first: an overwrite puts the job
//! and its index key and drops the key's counter, finished record and runs blind (what
//! `apply::put_job` does, whatever they hold), and a create-only put is an etcd txn nested in
//! the batch's txn, `If CreateRevision(job) == 0` (go-etcd-cron's `AddIfNotExists`), whose
//! answer says `AlreadyExists`. So a batch of creates costs one round trip to etcd instead of
//! two (read, then compare-and-swap), and etcd's answer is the result.
//!
//! The writer's marker still guards against a lost answer: the txn compares the marker at the
//! revision this writer's own last txn left it at (known without reading it again). When an
//! answer is lost and the marker shows that attempt applied, each create-only put is answered
//! by reading its job at that attempt's revision: `Done` if the attempt put it.

use std::collections::HashSet;

use tokio::sync::{mpsc, oneshot};

use super::client::{self, CompareWith, RangeRequest, RequestOp, TxnRequest, is_too_large};
use super::partition::index_value;
use super::writer::{Answer, WriteReq, Writer};
use super::{CALL_TIMEOUT, Inner, MAX_TXN_BYTES};
use crate::store::apply::{Prepared, Table};
use crate::store::{Error, OpResult, runs_prefix};

/// The put of a request that is a single `PutJob`: `(key, value, create_only, due)`.
fn single_put(ops: &[Prepared]) -> Option<(&str, &[u8], bool, Option<i64>)> {
    match ops {
        [
            Prepared::PutJob {
                key,
                value,
                create_only,
                due,
            },
        ] => Some((key, value, *create_only, *due)),
        _ => None,
    }
}

/// Gathers single-put requests into one batch: distinct keys (etcd refuses a txn that puts a
/// key twice), within the txn limits.
struct PutBatch {
    /// Puts one txn may carry: each is one op of the outer txn (a nested txn), and etcd
    /// bounds a nested txn's ops by what the outer one leaves of its limit.
    max: usize,
    /// The requests, each a single put.
    reqs: Vec<WriteReq>,
    /// Their keys.
    keys: HashSet<String>,
    /// Their bytes.
    bytes: usize,
}

impl PutBatch {
    /// An empty batch for txns of `max_keys` (the writer's limit).
    fn new(max_keys: usize) -> Self {
        PutBatch {
            max: max_keys.saturating_sub(8).max(1),
            reqs: Vec::new(),
            keys: HashSet::new(),
            bytes: 0,
        }
    }

    /// Adds `req` if it fits; gives it back otherwise.
    fn push(&mut self, req: WriteReq) -> Result<(), WriteReq> {
        let Some((key, value, ..)) = single_put(&req.ops) else {
            return Err(req);
        };
        let bytes = 2 * key.len() + value.len() + 256;
        if self.reqs.len() >= self.max
            || (!self.reqs.is_empty() && self.bytes + bytes > MAX_TXN_BYTES)
            || self.keys.contains(key)
        {
            return Err(req);
        }
        self.keys.insert(key.to_owned());
        self.bytes += bytes;
        self.reqs.push(req);
        Ok(())
    }
}

/// What became of one attempt of a put batch.
enum Outcome {
    /// Committed: the answers.
    Done(Vec<Answer>),
    /// Not applied: try again after a backoff (the marker is read again first).
    Retry,
    /// The marker moved: an attempt whose answer was lost applied, or someone else wrote it.
    MarkerMoved,
    /// Too large after all: commit the requests the general way.
    TooLarge,
    /// Refused for good.
    Failed(Error),
}

impl Writer {
    /// Commits `first` and the puts queued behind it in one txn, if `first` is a put; the
    /// request that stopped the batch (not a put, or not fitting) comes back, to go next.
    /// `Err(first)` when `first` is not a put.
    pub(super) async fn commit_puts_from(
        &mut self,
        first: WriteReq,
        rx: &mut mpsc::Receiver<WriteReq>,
    ) -> Result<Option<WriteReq>, WriteReq> {
        if single_put(&first.ops).is_none() {
            return Err(first);
        }
        let mut puts = PutBatch::new(self.max_keys);
        let mut left = None;
        let mut more = Some(first);
        while let Some(req) = more.take().or_else(|| rx.try_recv().ok()) {
            if let Err(req) = puts.push(req) {
                left = Some(req);
                break;
            }
        }
        self.commit_puts(puts).await;
        Ok(left)
    }

    /// Commits a batch of single-put requests in one txn without reading first.
    async fn commit_puts(&mut self, batch: PutBatch) {
        let (puts, replies): (Vec<_>, Vec<_>) =
            batch.reqs.into_iter().map(|r| (r.ops, r.reply)).unzip();
        let answers = match self.put_all(&puts, &replies).await {
            Some(answers) => answers,
            None => {
                // Larger than etcd takes (`--max-txn-ops` / `--max-request-bytes` below their
                // defaults): the general path splits it.
                let reqs = puts
                    .into_iter()
                    .zip(replies)
                    .map(|(ops, reply)| WriteReq { ops, reply })
                    .collect();
                self.commit_requests(reqs).await;
                return;
            }
        };
        for (reply, answer) in replies.into_iter().zip(answers) {
            let _ = reply.send(answer);
        }
    }

    /// The answers of `puts` committed in one txn; `None` if etcd finds it too large.
    async fn put_all(
        &mut self,
        puts: &[Vec<Prepared>],
        replies: &[oneshot::Sender<Answer>],
    ) -> Option<Vec<Answer>> {
        // Attempts whose answer was lost.
        let mut attempts: Vec<u64> = Vec::new();
        let mut backoff = super::backoff();
        loop {
            let marker_rev = match self.marker_rev {
                Some(rev) => rev,
                None => match self.read_marker(replies).await {
                    Ok((rev, seq)) if attempts.contains(&seq) => {
                        self.marker_rev = Some(rev);
                        return Some(resolve(&self.inner, puts, rev).await);
                    }
                    Ok((rev, _)) => {
                        self.marker_rev = Some(rev);
                        rev
                    }
                    Err(err) => return Some(puts.iter().map(|_| Err(err.clone())).collect()),
                },
            };
            self.seq += 1;
            attempts.push(self.seq);
            let txn = put_txn(&self.inner, puts, marker_rev, self.seq);
            match self.attempt(txn, puts).await {
                Outcome::Done(answers) => return Some(answers),
                Outcome::MarkerMoved => {
                    self.marker_rev = None;
                    continue;
                }
                Outcome::TooLarge => return None,
                Outcome::Failed(err) => {
                    return Some(puts.iter().map(|_| Err(err.clone())).collect());
                }
                Outcome::Retry => self.marker_rev = None,
            }
            if !self.wait(&mut backoff, replies).await {
                return Some(puts.iter().map(|_| Err(Error::Closed)).collect());
            }
        }
    }

    /// Sends one attempt.
    async fn attempt(&mut self, txn: TxnRequest, puts: &[Vec<Prepared>]) -> Outcome {
        match tokio::time::timeout(CALL_TIMEOUT, self.inner.client.txn(txn)).await {
            Ok(Ok(resp)) if resp.succeeded => {
                self.marker_rev = Some(client::revision(resp.header.as_ref()));
                let answers = puts
                    .iter()
                    .zip(&resp.responses)
                    .map(|(ops, answer)| {
                        let created = client::nested_succeeded(answer).unwrap_or(false);
                        match single_put(ops) {
                            Some((_, _, true, _)) if !created => Ok(vec![OpResult::AlreadyExists]),
                            _ => Ok(vec![OpResult::Done]),
                        }
                    })
                    .collect();
                Outcome::Done(answers)
            }
            Ok(Ok(_)) => Outcome::MarkerMoved,
            Ok(Err(err)) if is_too_large(&err) => Outcome::TooLarge,
            Ok(Err(err)) if !client::is_transient(&err) => Outcome::Failed(Error::io(err)),
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "etcd txn failed; retrying");
                Outcome::Retry
            }
            Err(_) => {
                tracing::warn!("etcd txn timed out; retrying");
                Outcome::Retry
            }
        }
    }
}

/// The txn of a put batch: if the marker is where we left it, each put as a nested txn (a
/// create-only one compares its job's create revision with 0), and the marker.
fn put_txn(inner: &Inner, puts: &[Vec<Prepared>], marker_rev: i64, seq: u64) -> TxnRequest {
    let mut success: Vec<RequestOp> = puts
        .iter()
        .filter_map(|ops| single_put(ops))
        .map(|(key, value, create_only, due)| {
            let job = inner.full(Table::Jobs, key);
            let compares = if create_only {
                vec![client::equal(job.clone(), CompareWith::CreateRevision(0))]
            } else {
                Vec::new()
            };
            let writes = vec![
                client::put(job, value.to_vec(), 0),
                // The index key holds when the job fires first (`partition.rs`).
                client::put(inner.index.key(key), index_value(due), 0),
                // An overwrite resets progress and starts a new history (`apply::put_job`).
                client::delete(inner.full(Table::Counters, key)),
                client::delete(inner.full(Table::Finished, key)),
                client::delete_prefix(inner.full(Table::Runs, &runs_prefix(key))),
            ];
            client::nested(client::txn(compares, writes, Vec::new()))
        })
        .collect();
    success.push(client::put(inner.marker.clone(), seq.to_be_bytes(), 0));
    client::txn(
        vec![client::equal(
            inner.marker.clone(),
            CompareWith::ModRevision(marker_rev),
        )],
        success,
        Vec::new(),
    )
}

/// The answers of an attempt that applied at `revision` but whose answer was lost: a
/// create-only put is `Done` if its job's version at that revision is the attempt's.
async fn resolve(inner: &Inner, puts: &[Vec<Prepared>], revision: i64) -> Vec<Answer> {
    let mut answers = Vec::with_capacity(puts.len());
    for ops in puts {
        let answer = match single_put(ops) {
            Some((key, _, true, _)) => {
                let full = inner.full(Table::Jobs, key);
                inner
                    .retrying(|etcd| {
                        let request = RangeRequest {
                            revision,
                            ..client::read_key(full.clone())
                        };
                        async move { etcd.range(request).await }
                    })
                    .await
                    .map(|resp| {
                        let ours = resp.kvs.first().map(|kv| kv.mod_revision) == Some(revision);
                        vec![if ours {
                            OpResult::Done
                        } else {
                            OpResult::AlreadyExists
                        }]
                    })
            }
            _ => Ok(vec![OpResult::Done]),
        };
        answers.push(answer);
    }
    answers
}
