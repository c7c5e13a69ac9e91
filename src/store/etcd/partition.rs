//! Jobs by partition. A cluster fires each job on the member owning the job's partition (a
//! stable hash of its key, [`partition_of`]), and a member taking partitions over must read
//! their jobs only, not every job in etcd. go-etcd-cron's layout (`<ns>/jobs/<key>`) cannot be
//! ranged by partition, so beside it every job has an empty index key
//! `<ns>/x-jobsd/index/<count>/<partition>/<key>`, put in the same txn as the job (no crash can
//! leave a job without it) and deleted in the same txn as the job. A `DeletePrefix` is the
//! exception: its range deletes cannot name every partition's index keys, so it leaves stale
//! ones, which point at no job: a partition read skips them and then removes them.
//!
//! An index key's value is when its job fires next (8 bytes, ms since the Unix epoch, little
//! endian), written with every write that moves it (`overlay.rs`, `creates.rs`): a member
//! taking partitions reads the jobs due soon and keeps only the keys and times of the others
//! (`replica::cluster::far`). An empty value (a job indexed by the scan below, or by an
//! older jobsd) or `i64::MIN` means "not known": such a job is read at once.
//!
//! Jobs written without an index key (by a real Dapr Scheduler, or by jobsd before it kept
//! one) are indexed once, by a scan of the job keys, the first time a member reads partitions
//! (`<ns>/x-jobsd/indexed/<count>` records that it ran). A Dapr Scheduler, or a jobsd replica of
//! an older version, writing into the same etcd after that is not supported: its jobs would go
//! unindexed (upgrade every replica together, or delete that record to index again).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::{StreamExt, TryStreamExt};
use tokio::sync::mpsc;

use super::client::{self, CompareWith, RangeRequest, RequestOp};
use super::{Inner, LIST_PAGE, job_value, keys};
use crate::store::paging::Joiner;
use crate::store::records::decode_counter;
use crate::store::tables::Table;
use crate::store::{Error, LoadedJob, StoredCounter};

/// Txns of a partition read in flight at once.
const PARALLEL_READS: usize = 8;
/// Partitions read at once by one partition read.
const PARALLEL_PARTITIONS: usize = 4;
/// Index keys put per txn, and txns in flight, when indexing the jobs that lack one.
const PARALLEL_PUTS: usize = 4;

/// FNV-1a over `bytes`, continuing from `hash`: stable across processes, platforms and
/// versions (unlike `std`'s randomly seeded hashers), which every replica relies on.
pub(crate) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// FNV-1a's offset basis.
pub(crate) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Mixes the bits of `x` (the SplitMix64 finaliser): FNV alone leaves the weights of similar
/// member ids correlated.
pub(crate) fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The partition of a composed job key, in `0..count` (`count` 0 is taken as 1).
pub fn partition_of(key: &str, count: u32) -> u32 {
    let hash = mix(fnv1a(FNV_OFFSET, key.as_bytes()));
    (hash % u64::from(count.max(1))) as u32
}

/// The value of an index key: the job's next fire time, or empty when not known.
pub(super) fn index_value(due: Option<i64>) -> Vec<u8> {
    due.map(|ms| ms.to_le_bytes().to_vec()).unwrap_or_default()
}

/// The fire time an index key's value holds, if it holds one.
fn due_of(value: &[u8]) -> Option<i64> {
    <[u8; 8]>::try_from(value)
        .ok()
        .map(i64::from_le_bytes)
        .filter(|&ms| ms != i64::MIN)
}

/// One page of a partition read: the jobs read (with their counters), and the keys and fire
/// times of the jobs left unread because they fire at or after the read's cut-off.
#[derive(Debug, Default)]
pub struct PartitionPage {
    /// Jobs due before the cut-off, or whose time is not known.
    pub near: Vec<LoadedJob>,
    /// `(key, ms)` of the others.
    pub far: Vec<(String, i64)>,
}

/// Where the index keys of one partition count live.
pub(super) struct Index {
    /// Number of partitions the keys are indexed by.
    count: u32,
    /// `<ns>/x-jobsd/index/<count>/`.
    prefix: String,
    /// `<ns>/x-jobsd/indexed/<count>`: present once every job has its index key.
    done_key: String,
}

impl Index {
    /// The index of `count` partitions under `namespace` (no trailing `/`).
    pub(super) fn new(namespace: &str, count: u32) -> Self {
        let count = count.max(1);
        Index {
            count,
            prefix: keys::index_prefix(namespace, count),
            done_key: keys::indexed_key(namespace, count),
        }
    }

    /// The number of partitions.
    pub(super) fn count(&self) -> u32 {
        self.count
    }

    /// The index key of job `key`.
    pub(super) fn key(&self, key: &str) -> String {
        format!("{}{}/{key}", self.prefix, partition_of(key, self.count))
    }

    /// The prefix of partition `p`'s index keys.
    fn partition_prefix(&self, p: u32) -> String {
        format!("{}{p}/", self.prefix)
    }
}

/// Feeds `tx` with the jobs of `partitions` joined with their counters, in pages, everything
/// read at one revision; then removes the stale index keys it met. With `before` (ms), jobs
/// whose index key says they fire at or after it are not read: their keys and times are
/// passed on instead.
pub(super) async fn scan_partitions(
    inner: &Arc<Inner>,
    partitions: &BTreeSet<u32>,
    page_size: i64,
    before: Option<i64>,
    tx: &mpsc::Sender<Result<PartitionPage, Error>>,
) -> Result<(), Error> {
    ensure_indexed(inner).await?;
    let revision = current_revision(inner).await?;
    // Partitions are read a few at a time: a failover takes dozens at once.
    let stale: Vec<Vec<String>> = futures_util::stream::iter(partitions.iter().copied())
        .map(|p| scan_partition(inner, p, page_size, before, revision, tx))
        .buffer_unordered(PARALLEL_PARTITIONS)
        .try_collect()
        .await?;
    drop_stale(inner, stale.into_iter().flatten().collect()).await;
    Ok(())
}

/// [`scan_partitions`] of partition `p` at `revision`: its pages go to `tx` (until it is
/// dropped); gives the index keys it met without a job.
async fn scan_partition(
    inner: &Inner,
    p: u32,
    page_size: i64,
    before: Option<i64>,
    revision: i64,
    tx: &mpsc::Sender<Result<PartitionPage, Error>>,
) -> Result<Vec<String>, Error> {
    let mut stale = Vec::new();
    let mut pages = KeyPages::new(inner.index.partition_prefix(p), page_size, revision);
    pages.with_values = true;
    while let Some(page) = pages.next(inner).await? {
        let mut near = Vec::with_capacity(page.len());
        let mut far = Vec::new();
        // A key of another partition cannot be here; never fire someone else's job.
        for (key, value) in page {
            if partition_of(&key, inner.index.count) != p {
                continue;
            }
            match (due_of(&value), before) {
                (Some(ms), Some(before)) if ms >= before => far.push((key, ms)),
                _ => near.push(key),
            }
        }
        let (near, missing) = read_loaded(inner, near, revision).await?;
        stale.extend(missing);
        if (!near.is_empty() || !far.is_empty())
            && tx.send(Ok(PartitionPage { near, far })).await.is_err()
        {
            // Dropped: stop reading.
            break;
        }
    }
    Ok(stale)
}

/// The jobs of `keys` with their counters, read at `revision` (0: now) by txns in parallel,
/// and the keys that have no job.
pub(super) async fn read_loaded(
    inner: &Inner,
    keys: Vec<String>,
    revision: i64,
) -> Result<(Vec<LoadedJob>, Vec<String>), Error> {
    // Jobs (with their counters) read by one txn: two gets each.
    let jobs_per_txn = (inner.txn_keys().await / 2).max(1);
    let chunks: Vec<Vec<String>> = keys.chunks(jobs_per_txn).map(<[_]>::to_vec).collect();
    let read: Vec<(Vec<LoadedJob>, Vec<String>)> = futures_util::stream::iter(chunks)
        .map(|chunk| read_jobs(inner, chunk, revision))
        .buffered(PARALLEL_READS)
        .try_collect()
        .await?;
    let mut jobs = Vec::with_capacity(keys.len());
    let mut missing = Vec::new();
    for (found, gone) in read {
        jobs.extend(found);
        missing.extend(gone);
    }
    Ok((jobs, missing))
}

/// The jobs of `keys` (in key order) with their counters, read at `revision`, and the keys
/// that have no job.
async fn read_jobs(
    inner: &Inner,
    keys: Vec<String>,
    revision: i64,
) -> Result<(Vec<LoadedJob>, Vec<String>), Error> {
    let at = |key: String| read_at(key, revision);
    let gets: Vec<RequestOp> = keys
        .iter()
        .flat_map(|k| {
            [
                at(inner.full(Table::Jobs, k)),
                at(inner.full(Table::Counters, k)),
            ]
        })
        .collect();
    let resp = read_txn(inner, gets).await?;
    let mut found = resp.responses.into_iter().map(client::range_kvs);
    let mut jobs = Vec::new();
    let mut counters = Vec::new();
    let mut missing = Vec::new();
    for key in keys {
        let job = found.next().unwrap_or_default().into_iter().next();
        let counter = found.next().unwrap_or_default().into_iter().next();
        match job {
            Some(job) => {
                if let Some(counter) = counter {
                    counters.push(Ok((key.clone(), counter.value)));
                }
                jobs.push((key, job.value));
            }
            None => missing.push(key),
        }
    }
    let mut joiner = Joiner::decoding(counters.into_iter(), job_value::decode);
    let loaded = jobs
        .into_iter()
        .map(|(key, value)| joiner.join(key, &value))
        .collect::<Result<Vec<LoadedJob>, Error>>()?;
    Ok((loaded, missing))
}

/// The counters of `keys` that exist, by key: txns of reads in flight at once, each at the
/// current revision (a counter belongs to its own job: nothing needs them read together).
pub(super) async fn read_counters(
    inner: &Inner,
    keys: Vec<String>,
) -> Result<HashMap<String, StoredCounter>, Error> {
    let per_txn = inner.txn_keys().await.max(1);
    let chunks: Vec<Vec<String>> = keys.chunks(per_txn).map(<[_]>::to_vec).collect();
    let read: Vec<Vec<(String, StoredCounter)>> = futures_util::stream::iter(chunks)
        .map(|chunk| async move {
            let gets: Vec<RequestOp> = chunk
                .iter()
                .map(|k| read_at(inner.full(Table::Counters, k), 0))
                .collect();
            let resp = read_txn(inner, gets).await?;
            let mut found = Vec::new();
            for (key, kvs) in chunk
                .into_iter()
                .zip(resp.responses.into_iter().map(client::range_kvs))
            {
                if let Some(kv) = kvs.into_iter().next() {
                    let counter = decode_counter(&key, &kv.value)?;
                    found.push((key, counter));
                }
            }
            Ok::<_, Error>(found)
        })
        .buffer_unordered(PARALLEL_READS)
        .try_collect()
        .await?;
    Ok(read.into_iter().flatten().collect())
}

/// A read of `key` at `revision` (0: the current one), as one op of a txn.
fn read_at(key: String, revision: i64) -> RequestOp {
    client::range_op(RangeRequest {
        key: key.into_bytes(),
        revision,
        ..RangeRequest::default()
    })
}

/// One txn of reads, retried as every etcd call of the store is.
async fn read_txn(inner: &Inner, gets: Vec<RequestOp>) -> Result<client::TxnResponse, Error> {
    inner
        .retrying(|etcd| {
            let txn = client::txn(Vec::new(), gets.clone(), Vec::new());
            async move { etcd.txn(txn).await }
        })
        .await
}

/// Removes the index keys of `keys` whose job is still absent (best effort: a stale key only
/// costs a read).
async fn drop_stale(inner: &Inner, keys: Vec<String>) {
    futures_util::stream::iter(keys)
        .map(|key| async move {
            let txn = client::txn(
                vec![client::equal(
                    inner.full(Table::Jobs, &key),
                    CompareWith::CreateRevision(0),
                )],
                vec![client::delete(inner.index.key(&key))],
                Vec::new(),
            );
            if let Err(e) = inner.client.txn(txn).await {
                tracing::debug!(error = %e, "cannot drop a stale index key");
            }
        })
        .buffer_unordered(PARALLEL_READS)
        .collect::<Vec<()>>()
        .await;
}

/// The keys under a prefix (the prefix stripped), in pages read at one revision.
struct KeyPages {
    /// The prefix.
    prefix: Vec<u8>,
    /// The next full key to read from; `None` when done.
    next: Option<Vec<u8>>,
    /// Keys per page.
    limit: i64,
    /// The revision read at (0: that of the first page).
    revision: i64,
    /// Read the values too (else they come back empty).
    with_values: bool,
}

impl KeyPages {
    fn new(prefix: String, limit: i64, revision: i64) -> Self {
        let prefix = prefix.into_bytes();
        KeyPages {
            next: Some(prefix.clone()),
            prefix,
            limit,
            revision,
            with_values: false,
        }
    }

    /// The next page of keys (UTF-8 ones; nothing else is ours) with their values, or `None`
    /// at the end.
    async fn next(&mut self, inner: &Inner) -> Result<Option<Vec<(String, Vec<u8>)>>, Error> {
        let Some(start) = self.next.take() else {
            return Ok(None);
        };
        let end = client::prefix_end(&self.prefix);
        let (limit, revision, keys_only) = (self.limit, self.revision, !self.with_values);
        let resp = inner
            .retrying(|etcd| {
                let request = RangeRequest {
                    key: start.clone(),
                    range_end: end.clone(),
                    limit,
                    revision,
                    keys_only,
                    ..RangeRequest::default()
                };
                async move { etcd.range(request).await }
            })
            .await?;
        if self.revision == 0 {
            self.revision = client::revision(resp.header.as_ref());
        }
        if resp.more
            && let Some(last) = resp.kvs.last()
        {
            let mut after = last.key.clone();
            after.push(0);
            self.next = Some(after);
        }
        let prefix = self.prefix.as_slice();
        Ok(Some(
            resp.kvs
                .into_iter()
                .filter_map(|kv| {
                    let key = std::str::from_utf8(kv.key.strip_prefix(prefix)?).ok()?;
                    Some((key.to_owned(), kv.value))
                })
                .collect(),
        ))
    }
}

/// The cluster's current revision.
async fn current_revision(inner: &Inner) -> Result<i64, Error> {
    let key = inner.index.done_key.clone();
    inner
        .retrying(|etcd| {
            let request = RangeRequest {
                count_only: true,
                ..client::read_key(key.clone())
            };
            async move { Ok(client::revision(etcd.range(request).await?.header.as_ref())) }
        })
        .await
}

/// Gives every job an index key, unless that was done before (by any member).
async fn ensure_indexed(inner: &Inner) -> Result<(), Error> {
    if inner.indexed.load(Ordering::Acquire) {
        return Ok(());
    }
    let done_key = inner.index.done_key.clone();
    if inner.get_value(done_key.clone()).await?.is_some() {
        inner.indexed.store(true, Ordering::Release);
        return Ok(());
    }
    let mut indexed = 0usize;
    let per_txn = inner.txn_keys().await;
    let mut pages = KeyPages::new(inner.prefix(Table::Jobs).to_owned(), LIST_PAGE, 0);
    while let Some(page) = pages.next(inner).await? {
        // Only where a job has none: an index key written meanwhile holds the job's time.
        let puts: Vec<RequestOp> = page
            .iter()
            .map(|(k, _)| {
                let index = inner.index.key(k);
                client::nested(client::txn(
                    vec![client::equal(index.clone(), CompareWith::CreateRevision(0))],
                    vec![client::put(index, Vec::new(), 0)],
                    Vec::new(),
                ))
            })
            .collect();
        indexed += puts.len();
        // A job deleted since this read gets a stale index key: harmless (see the module).
        let chunks: Vec<Vec<RequestOp>> = puts.chunks(per_txn).map(<[_]>::to_vec).collect();
        futures_util::stream::iter(chunks)
            .map(|puts| {
                inner.retrying(move |etcd| {
                    let txn = client::txn(Vec::new(), puts.clone(), Vec::new());
                    async move { etcd.txn(txn).await }
                })
            })
            .buffer_unordered(PARALLEL_PUTS)
            .try_collect::<Vec<_>>()
            .await?;
    }
    inner
        .retrying(|etcd| {
            let put = client::put(done_key.clone(), b"1".to_vec(), 0);
            let txn = client::txn(Vec::new(), vec![put], Vec::new());
            async move { etcd.txn(txn).await }
        })
        .await?;
    tracing::info!(
        jobs = indexed,
        partitions = inner.index.count,
        "indexed the jobs by partition"
    );
    inner.indexed.store(true, Ordering::Release);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_name_the_partition() {
        let index = Index::new("dapr", 16);
        let key = "app||default||myapp||job";
        let p = partition_of(key, 16);
        assert_eq!(
            index.key(key),
            format!("dapr/{}/index/16/{p}/{key}", keys::OWN)
        );
        assert!(index.key(key).starts_with(&index.partition_prefix(p)));
    }
}
