//! Job puts committed without a read. A batch made only of single-`PutJob` requests (every
//! create and overwrite through the API) needs nothing read first: an overwrite puts the job
//! and its index key and drops the key's counter, finished record and runs blind (what
//! `apply::put_job` does, whatever they hold), and a create-only put is an etcd txn nested in
//! the batch's txn, `If CreateRevision(job) == 0` (go-etcd-cron's `AddIfNotExists`), whose
//! answer says `AlreadyExists`. So a batch of creates costs one round trip to etcd instead of
//! two (read, then compare-and-swap), and etcd's answer is the result.
//!
//! A create-only put first goes lean: it also compares the key's finished record, and puts
//! only the job and its index key. Where no job is stored there is no counter and no run
//! either, except the runs kept with a finished record (the ops never leave one: a counter
//! and runs go with their job, or the runs with its finished record), so with no finished
//! record there is nothing to drop. Three deletes fewer per create is about a third less
//! work for etcd (each is an index lookup, and etcd checks every delete of a txn against
//! its puts). A create whose name has a finished record (a one-shot that ran, created
//! again) fails the lean compare; a read in the nested txn's failure branch tells it from
//! an existing job, and it is sent again at once in a thorough txn that drops the finished
//! record and its runs.
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
use super::{Inner, MAX_TXN_BYTES};
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

/// How a batch's create-only puts are sent (the module's doc).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pass {
    /// Compare the job and its finished record; put the job and its index key only.
    Lean,
    /// Compare the job; also drop the key's counter, finished record and runs.
    Thorough,
}

/// What became of one put of a batch.
enum Put {
    /// Its answer.
    Answered(Answer),
    /// A lean create that met a finished record: to be sent again thorough.
    Again,
}

/// What became of one attempt of a put batch.
enum Outcome {
    /// Committed: the answers.
    Done(Vec<Put>),
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

    /// Commits a batch of single-put requests in one txn without reading first (and the
    /// creates that met a finished record in a second one).
    async fn commit_puts(&mut self, batch: PutBatch) {
        let (puts, replies): (Vec<_>, Vec<_>) =
            batch.reqs.into_iter().map(|r| (r.ops, r.reply)).unzip();
        let Some(answers) = self.put_all(&puts, &replies, Pass::Lean).await else {
            self.commit_general(puts, replies).await;
            return;
        };
        let (mut again, mut again_replies) = (Vec::new(), Vec::new());
        for ((ops, reply), answer) in puts.into_iter().zip(replies).zip(answers) {
            match answer {
                Put::Answered(answer) => {
                    let _ = reply.send(answer);
                }
                Put::Again => {
                    again.push(ops);
                    again_replies.push(reply);
                }
            }
        }
        if again.is_empty() {
            return;
        }
        let Some(answers) = self.put_all(&again, &again_replies, Pass::Thorough).await else {
            self.commit_general(again, again_replies).await;
            return;
        };
        for (reply, answer) in again_replies.into_iter().zip(answers) {
            let answer = match answer {
                Put::Answered(answer) => answer,
                // A thorough put is always answered; never left without one.
                Put::Again => Err(Error::Closed),
            };
            let _ = reply.send(answer);
        }
    }

    /// Commits put requests the general way: larger than etcd takes (`--max-txn-ops` /
    /// `--max-request-bytes` below their defaults), which that way splits.
    async fn commit_general(
        &mut self,
        puts: Vec<Vec<Prepared>>,
        replies: Vec<oneshot::Sender<Answer>>,
    ) {
        let reqs = puts
            .into_iter()
            .zip(replies)
            .map(|(ops, reply)| WriteReq { ops, reply })
            .collect();
        self.commit_requests(reqs).await;
    }

    /// The answers of `puts` committed in one txn sent `pass`; `None` if etcd finds it too
    /// large.
    async fn put_all(
        &mut self,
        puts: &[Vec<Prepared>],
        replies: &[oneshot::Sender<Answer>],
        pass: Pass,
    ) -> Option<Vec<Put>> {
        let failed = |err: &Error| {
            puts.iter()
                .map(|_| Put::Answered(Err(err.clone())))
                .collect()
        };
        // Attempts whose answer was lost.
        let mut attempts: Vec<u64> = Vec::new();
        let mut backoff = super::backoff();
        loop {
            let marker_rev = match self.marker_rev {
                Some(rev) => rev,
                None => match self.read_marker(replies).await {
                    Ok((rev, seq)) if attempts.contains(&seq) => {
                        self.marker_rev = Some(rev);
                        return Some(resolve(&self.inner, puts, rev, pass).await);
                    }
                    Ok((rev, _)) => {
                        self.marker_rev = Some(rev);
                        rev
                    }
                    Err(err) => return Some(failed(&err)),
                },
            };
            self.seq += 1;
            attempts.push(self.seq);
            let txn = put_txn(&self.inner, puts, marker_rev, self.seq, pass);
            match self.attempt(txn, puts, pass).await {
                Outcome::Done(answers) => return Some(answers),
                Outcome::MarkerMoved => {
                    self.marker_rev = None;
                    continue;
                }
                Outcome::TooLarge => return None,
                Outcome::Failed(err) => return Some(failed(&err)),
                Outcome::Retry => self.marker_rev = None,
            }
            if !self.wait(&mut backoff, replies).await {
                return Some(failed(&Error::Closed));
            }
        }
    }

    /// Sends one attempt.
    async fn attempt(&mut self, txn: TxnRequest, puts: &[Vec<Prepared>], pass: Pass) -> Outcome {
        match self.inner.commit_txn(txn, puts.len()).await {
            Ok(Ok(resp)) if resp.succeeded => {
                self.marker_rev = Some(client::revision(resp.header.as_ref()));
                let answers = puts
                    .iter()
                    .zip(&resp.responses)
                    .map(|(ops, answer)| {
                        let created = client::nested_succeeded(answer).unwrap_or(false);
                        match single_put(ops) {
                            Some((_, _, true, _)) if !created => {
                                // Lean: the failure branch counted the job; none stored means
                                // a finished record stopped it.
                                let job_stored = client::nested_count(answer).is_none_or(|n| n > 0);
                                if pass == Pass::Lean && !job_stored {
                                    Put::Again
                                } else {
                                    Put::Answered(Ok(vec![OpResult::AlreadyExists]))
                                }
                            }
                            _ => Put::Answered(Ok(vec![OpResult::Done])),
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
/// create-only one compares its job's create revision with 0, and its finished record's when
/// lean), and the marker.
fn put_txn(
    inner: &Inner,
    puts: &[Vec<Prepared>],
    marker_rev: i64,
    seq: u64,
    pass: Pass,
) -> TxnRequest {
    let mut success: Vec<RequestOp> = puts
        .iter()
        .filter_map(|ops| single_put(ops))
        .map(|(key, value, create_only, due)| {
            let job = inner.full(Table::Jobs, key);
            let writes = vec![
                client::put(job.clone(), value.to_vec(), 0),
                // The index key holds when the job fires first (`partition.rs`).
                client::put(inner.index.key(key), index_value(due), 0),
            ];
            if create_only && pass == Pass::Lean {
                let compares = vec![
                    client::equal(job.clone(), CompareWith::CreateRevision(0)),
                    client::equal(
                        inner.full(Table::Finished, key),
                        CompareWith::CreateRevision(0),
                    ),
                ];
                // Tells "the job is stored" from "a finished record is".
                return client::nested(client::txn(compares, writes, vec![client::count(job)]));
            }
            let compares = if create_only {
                vec![client::equal(job, CompareWith::CreateRevision(0))]
            } else {
                Vec::new()
            };
            let mut writes = writes;
            // An overwrite resets progress and starts a new history (`apply::put_job`).
            writes.extend([
                client::delete(inner.full(Table::Counters, key)),
                client::delete(inner.full(Table::Finished, key)),
                client::delete_prefix(inner.full(Table::Runs, &runs_prefix(key))),
            ]);
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
/// create-only put is `Done` if its job's version at that revision is the attempt's; a lean
/// one whose job was not stored then met a finished record.
async fn resolve(inner: &Inner, puts: &[Vec<Prepared>], revision: i64, pass: Pass) -> Vec<Put> {
    let mut answers = Vec::with_capacity(puts.len());
    for ops in puts {
        let answer = match single_put(ops) {
            Some((key, _, true, _)) => {
                let full = inner.full(Table::Jobs, key);
                let read = inner
                    .retrying(|etcd| {
                        let request = RangeRequest {
                            revision,
                            ..client::read_key(full.clone())
                        };
                        async move { etcd.range(request).await }
                    })
                    .await;
                match read {
                    Ok(resp) => match resp.kvs.first().map(|kv| kv.mod_revision) {
                        Some(rev) if rev == revision => Put::Answered(Ok(vec![OpResult::Done])),
                        None if pass == Pass::Lean => Put::Again,
                        _ => Put::Answered(Ok(vec![OpResult::AlreadyExists])),
                    },
                    Err(err) => Put::Answered(Err(err)),
                }
            }
            _ => Put::Answered(Ok(vec![OpResult::Done])),
        };
        answers.push(answer);
    }
    answers
}
