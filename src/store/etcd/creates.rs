//! Job puts committed without a read. A batch of requests made only of `PutJob`s of distinct
//! keys (every create and overwrite through the API, and each run of a batch create) needs
//! nothing read first: an overwrite puts the job
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
//! A request of more puts than one txn takes (`--max-txn-ops`, `--max-request-bytes`) is sent
//! in several txns, as the general way splits one: each put's answer is exact, but a crash
//! can leave the request half applied.
//!
//! The writer's marker still guards against a lost answer: the txn compares the marker at the
//! revision this writer's own last txn left it at (known without reading it again). When an
//! answer is lost and the marker shows that attempt applied, each create-only put is answered
//! by reading its job at that attempt's revision: `Done` if the attempt put it.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::client::{self, CompareWith, RangeRequest, RequestOp, TxnRequest, is_too_large};
use super::job_value;
use super::partition::index_value;
use super::writer::{Answer, WriteReq, Writer};
use super::{Inner, MAX_TXN_BYTES};
use crate::store::encoded::Prepared;
use crate::store::tables::Table;
use crate::store::{Error, OpResult, runs_prefix};

/// One job put: `(key, value, create_only, due)`.
type PutRef<'a> = (&'a str, &'a [u8], bool, Option<i64>);

/// The put `op` is, if it is a `PutJob`.
fn put_of(op: &Prepared) -> Option<PutRef<'_>> {
    match op {
        Prepared::PutJob {
            key,
            job,
            create_only,
            due,
        } => Some((key, job, *create_only, *due)),
        _ => None,
    }
}

/// Whether a request is made only of `PutJob`s of distinct keys (a create or overwrite, or a
/// batch create's run): those take the way without a read.
fn puts_only(ops: &[Prepared]) -> bool {
    let mut keys = HashSet::with_capacity(ops.len());
    !ops.is_empty()
        && ops
            .iter()
            .all(|op| put_of(op).is_some_and(|(key, ..)| keys.insert(key)))
}

/// The bytes a put adds to a txn (its job and index keys, value, and framing).
fn put_bytes(op: &Prepared) -> usize {
    put_of(op).map_or(0, |(key, value, ..)| 2 * key.len() + value.len() + 256)
}

/// Gathers puts-only requests into one batch: distinct keys (etcd refuses a txn that puts a
/// key twice), within the txn limits. A request larger than one txn is taken alone, and
/// committed in several txns.
struct PutBatch {
    /// Puts one txn may carry: each is one op of the outer txn (a nested txn), and etcd
    /// bounds a nested txn's ops by what the outer one leaves of its limit.
    max: usize,
    /// The requests, each puts only.
    reqs: Vec<WriteReq>,
    /// Their keys.
    keys: HashSet<String>,
    /// Their puts.
    puts: usize,
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
            puts: 0,
            bytes: 0,
        }
    }

    /// Adds `req` if it fits; gives it back otherwise.
    fn push(&mut self, req: WriteReq) -> Result<(), WriteReq> {
        if !puts_only(&req.ops) {
            return Err(req);
        }
        let bytes: usize = req.ops.iter().map(put_bytes).sum();
        let fits = self.reqs.is_empty()
            || (self.puts + req.ops.len() <= self.max
                && self.bytes + bytes <= MAX_TXN_BYTES
                && !req
                    .ops
                    .iter()
                    .filter_map(put_of)
                    .any(|(key, ..)| self.keys.contains(key)));
        if !fits {
            return Err(req);
        }
        self.keys.extend(
            req.ops
                .iter()
                .filter_map(put_of)
                .map(|(key, ..)| key.to_owned()),
        );
        self.puts += req.ops.len();
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

/// What became of one put of a txn.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Put {
    /// Its result.
    Answered(OpResult),
    /// A lean create that met a finished record: to be sent again thorough.
    Again,
}

/// What became of one txn of puts.
enum Sent {
    /// Committed (or known to have applied): one answer per put.
    Done(Vec<Put>),
    /// etcd finds it too large (limits below their defaults): to go the general way.
    TooLarge,
    /// Failed for good: every put gets the error.
    Failed(Error),
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

/// Each op's answer of the requests of a put batch, filled in as the txns come back.
struct Answers(Vec<Vec<Option<Result<OpResult, Error>>>>);

impl Answers {
    /// No answer yet for requests of these sizes.
    fn new(reqs: &[Vec<Prepared>]) -> Self {
        Answers(reqs.iter().map(|ops| vec![None; ops.len()]).collect())
    }

    /// Answers op `at` (`(request, op)`).
    fn set(&mut self, (req, op): (usize, usize), answer: Result<OpResult, Error>) {
        self.0[req][op] = Some(answer);
    }

    /// Each request's answer: its ops' results, or the first error one of them met.
    fn into_answers(self) -> impl Iterator<Item = Answer> {
        self.0.into_iter().map(|ops| {
            ops.into_iter()
                .map(|answer| answer.unwrap_or(Err(Error::Closed)))
                .collect()
        })
    }
}

impl Writer {
    /// Commits `first` and the puts-only requests queued behind it, in one txn where they
    /// fit (in several when `first` alone is larger); the request that stopped the batch (not
    /// puts only, or not fitting) comes back, to go next. `Err(first)` when `first` is not
    /// puts only.
    pub(super) async fn commit_puts_from(
        &mut self,
        first: WriteReq,
        rx: &mut mpsc::Receiver<WriteReq>,
    ) -> Result<Option<WriteReq>, WriteReq> {
        let mut puts = PutBatch::new(self.max_keys);
        puts.push(first)?;
        let mut left = None;
        while let Ok(req) = rx.try_recv() {
            if let Err(req) = puts.push(req) {
                left = Some(req);
                break;
            }
        }
        self.commit_puts(puts).await;
        Ok(left)
    }

    /// Commits a batch of puts-only requests without reading first: one txn per chunk of at
    /// most `max` puts (one unless a single request is larger), then the creates that met a
    /// finished record in a thorough txn of their own.
    async fn commit_puts(&mut self, batch: PutBatch) {
        let max = batch.max;
        let (reqs, replies): (Vec<_>, Vec<_>) =
            batch.reqs.into_iter().map(|r| (r.ops, r.reply)).unzip();
        let mut answers = Answers::new(&reqs);
        let all: Vec<(usize, usize)> = reqs
            .iter()
            .enumerate()
            .flat_map(|(r, ops)| (0..ops.len()).map(move |o| (r, o)))
            .collect();
        let mut again = Vec::new();
        for chunk in chunks(&reqs, &all, max) {
            self.send_puts(&reqs, chunk, &replies, Pass::Lean, &mut answers, &mut again)
                .await;
        }
        if !again.is_empty() {
            let mut never = Vec::new();
            for chunk in chunks(&reqs, &again, max) {
                self.send_puts(
                    &reqs,
                    chunk,
                    &replies,
                    Pass::Thorough,
                    &mut answers,
                    &mut never,
                )
                .await;
            }
        }
        for (reply, answer) in replies.into_iter().zip(answers.into_answers()) {
            let _ = reply.send(answer);
        }
    }

    /// Sends the puts `at` of `reqs` in one txn sent `pass` and records their answers (those
    /// to send again thorough go to `again`); etcd finding it too large sends each the general
    /// way.
    async fn send_puts(
        &mut self,
        reqs: &[Vec<Prepared>],
        at: &[(usize, usize)],
        replies: &[oneshot::Sender<Answer>],
        pass: Pass,
        answers: &mut Answers,
        again: &mut Vec<(usize, usize)>,
    ) {
        let puts: Vec<&Prepared> = at.iter().map(|&(r, o)| &reqs[r][o]).collect();
        match self.put_all(&puts, replies, pass).await {
            Sent::Done(done) => {
                for (&at, put) in at.iter().zip(done) {
                    match put {
                        Put::Answered(result) => answers.set(at, Ok(result)),
                        Put::Again => again.push(at),
                    }
                }
            }
            Sent::Failed(err) => {
                for &at in at {
                    answers.set(at, Err(err.clone()));
                }
            }
            Sent::TooLarge => {
                for (&at, op) in at.iter().zip(puts) {
                    let answer = self.commit_general(op.clone()).await;
                    answers.set(at, answer);
                }
            }
        }
    }

    /// Commits one put the general way (read, then compare-and-swap), which splits what etcd
    /// finds too large: for limits below etcd's defaults.
    async fn commit_general(&mut self, op: Prepared) -> Result<OpResult, Error> {
        let (reply, answer) = oneshot::channel();
        self.commit_requests(vec![WriteReq {
            ops: vec![op],
            reply,
        }])
        .await;
        match answer.await {
            Ok(Ok(mut results)) => results.pop().ok_or(Error::Closed),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(Error::Closed),
        }
    }

    /// The answers of `puts` committed in one txn sent `pass`.
    async fn put_all(
        &mut self,
        puts: &[&Prepared],
        replies: &[oneshot::Sender<Answer>],
        pass: Pass,
    ) -> Sent {
        // The watch may bring these puts before their answer (`fresh.rs`).
        let inner = Arc::clone(&self.inner);
        let _sending = inner.fresh.sending(
            puts.iter()
                .filter_map(|op| put_of(op))
                .map(|(key, ..)| key.to_owned()),
        );
        // Attempts whose answer was lost.
        let mut attempts: Vec<u64> = Vec::new();
        let mut backoff = super::backoff();
        loop {
            let marker_rev = match self.marker_rev {
                Some(rev) => rev,
                None => match self.read_marker(replies).await {
                    Ok((rev, seq)) if attempts.contains(&seq) => {
                        self.marker_rev = Some(rev);
                        return resolve(&self.inner, puts, rev, pass).await;
                    }
                    Ok((rev, _)) => {
                        self.marker_rev = Some(rev);
                        rev
                    }
                    Err(err) => return Sent::Failed(err),
                },
            };
            self.seq += 1;
            attempts.push(self.seq);
            let txn = put_txn(&self.inner, puts, marker_rev, self.seq, pass);
            match self.attempt(txn, puts, pass).await {
                Outcome::Done(answers) => return Sent::Done(answers),
                Outcome::MarkerMoved => {
                    self.marker_rev = None;
                    continue;
                }
                Outcome::TooLarge => return Sent::TooLarge,
                Outcome::Failed(err) => return Sent::Failed(err),
                Outcome::Retry => self.marker_rev = None,
            }
            if !self.wait(&mut backoff, replies).await {
                return Sent::Failed(Error::Closed);
            }
        }
    }

    /// Sends one attempt.
    async fn attempt(&mut self, txn: TxnRequest, puts: &[&Prepared], pass: Pass) -> Outcome {
        match self.inner.commit_txn(txn, puts.len()).await {
            Ok(Ok(resp)) if resp.succeeded => {
                let rev = client::revision(resp.header.as_ref());
                self.marker_rev = Some(rev);
                for put in puts {
                    if let Some((key, ..)) = put_of(put) {
                        // Written around the general way (`known.rs`), with no counter
                        // left (`fresh.rs`).
                        self.inner.known.forget_job_before(key, rev);
                        self.inner.fresh.put(key, rev);
                    }
                }
                let answers = puts
                    .iter()
                    .zip(&resp.responses)
                    .map(|(op, answer)| {
                        let created = client::nested_succeeded(answer).unwrap_or(false);
                        match put_of(op) {
                            Some((_, _, true, _)) if !created => {
                                // Lean: the failure branch counted the job; none stored means
                                // a finished record stopped it.
                                let job_stored = client::nested_count(answer).is_none_or(|n| n > 0);
                                if pass == Pass::Lean && !job_stored {
                                    Put::Again
                                } else {
                                    Put::Answered(OpResult::AlreadyExists)
                                }
                            }
                            _ => Put::Answered(OpResult::Done),
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

/// `at` (puts of `reqs`) cut, in order, into chunks of at most `max` puts and
/// [`MAX_TXN_BYTES`] (at least one put each).
fn chunks<'a>(
    reqs: &[Vec<Prepared>],
    at: &'a [(usize, usize)],
    max: usize,
) -> Vec<&'a [(usize, usize)]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, &(r, o)) in at.iter().enumerate() {
        let b = put_bytes(&reqs[r][o]);
        if i > start && (i - start >= max || bytes + b > MAX_TXN_BYTES) {
            out.push(&at[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += b;
    }
    if start < at.len() {
        out.push(&at[start..]);
    }
    out
}

/// The txn of a put batch: if the marker is where we left it, each put as a nested txn (a
/// create-only one compares its job's create revision with 0, and its finished record's when
/// lean), and the marker.
fn put_txn(inner: &Inner, puts: &[&Prepared], marker_rev: i64, seq: u64, pass: Pass) -> TxnRequest {
    let mut success: Vec<RequestOp> = puts
        .iter()
        .filter_map(|op| put_of(op))
        .map(|(key, value, create_only, due)| {
            let job = inner.full(Table::Jobs, key);
            let writes = vec![
                // go-etcd-cron's layout in etcd (`job_value.rs`).
                client::put(job.clone(), job_value::to_etcd(value), 0),
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
async fn resolve(inner: &Inner, puts: &[&Prepared], revision: i64, pass: Pass) -> Sent {
    let mut answers = Vec::with_capacity(puts.len());
    for op in puts {
        if let Some((key, ..)) = put_of(op) {
            inner.known.forget_job_before(key, revision);
            inner.fresh.put(key, revision);
        }
        let answer = match put_of(op) {
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
                        Some(rev) if rev == revision => Put::Answered(OpResult::Done),
                        None if pass == Pass::Lean => Put::Again,
                        _ => Put::Answered(OpResult::AlreadyExists),
                    },
                    Err(err) => return Sent::Failed(err),
                }
            }
            _ => Put::Answered(OpResult::Done),
        };
        answers.push(answer);
    }
    Sent::Done(answers)
}
