//! The compare-and-swap overlay. An etcd txn cannot branch on values, so the meaning of a
//! batch's ops is computed here, by the same code as the other stores (`apply/`), over a
//! snapshot of every key the batch reads at one revision ([`read`]); the txn
//! ([`Overlay::txn`]) then compares each of those keys' `mod_revision` with what was read and
//! puts or deletes the changed keys, plus the writer's marker.
//!
//! What each op reads ([`reads`]): its job and counter (the generation checks and the
//! progress), and its finished record when it may change or read it: `PutJob` and `DeleteJob`
//! (they drop it), a finishing `RecordResult` (it writes or drops it) and `DeleteFinished`
//! (it reads `finished_at`). A result with a dead-letter job also reads what a `PutJob`
//! reads at both of that job's keys. `DeletePrefix` in a mixed request reads those three
//! tables whole under its prefix. Run records are never read: they are written blind (`runs.rs`
//! says why that is safe) and cleared by range deletes.

use std::collections::{BTreeMap, BTreeSet};

use super::client::{self, CompareWith, KeyValue, RequestOp, TxnRequest, is_transient};
use super::job_value;
use super::known::Known;
use super::runs::{RunWrites, Write};
use super::{CALL_TIMEOUT, Inner, MAX_TXN_BYTES, invalid};
use crate::store::apply;
use crate::store::encoded::Prepared;
use crate::store::paging::PrefixRange;
use crate::store::tables::{Table, Tables, Undo};
use crate::store::{Error, OpResult};

/// Reads every key of `reads` and the marker in one txn (one revision).
pub(super) async fn read(inner: &Inner, reads: &ReadSet) -> Result<Snapshot, ReadError> {
    inner
        .snapshot_reads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Some(metrics) = inner.metrics.get() {
        metrics.read_before_commit();
    }
    let mut gets = vec![client::get(inner.marker.clone())];
    for (table, key) in &reads.keys {
        gets.push(client::get(inner.full(*table, key)));
    }
    for (table, prefix) in &reads.prefixes {
        gets.push(client::get_prefix(inner.full(*table, prefix)));
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
        let value = value
            .map(|v| stored_value(*table, key, v))
            .transpose()
            .map_err(ReadError::Permanent)?;
        overlay
            .map(*table)
            .map_err(ReadError::Permanent)?
            .insert(key.clone(), Slot::read(rev, value));
    }
    for (table, prefix) in &reads.prefixes {
        for kv in responses.next().unwrap_or_default() {
            let key = inner.strip(*table, &kv.key).map_err(ReadError::Permanent)?;
            let value = stored_value(*table, &key, kv.value).map_err(ReadError::Permanent)?;
            overlay
                .map(*table)
                .map_err(ReadError::Permanent)?
                .insert(key, Slot::read(kv.mod_revision, Some(value)));
        }
        overlay.prefixes.push((*table, prefix.clone()));
    }
    Ok(Snapshot {
        marker_rev,
        marker_seq,
        overlay,
    })
}

/// A value read from etcd as the ops see it: a job's as jobsd's `StoredJob` (`job_value.rs`),
/// the rest as they are.
fn stored_value(table: Table, key: &str, value: Vec<u8>) -> Result<Vec<u8>, Error> {
    match table {
        Table::Jobs => job_value::into_stored(key, value),
        _ => Ok(value),
    }
}

/// The snapshot of every key of `reads` as `known` holds them, if it holds them all and no
/// prefix is read whole (`known.rs`).
pub(super) fn known_snapshot(known: &Known, reads: &ReadSet) -> Option<Overlay> {
    if !reads.prefixes.is_empty() || reads.keys.is_empty() {
        return None;
    }
    let versions = known.get_all(&reads.keys)?;
    let mut overlay = Overlay::default();
    for ((table, key), version) in reads.keys.iter().zip(versions) {
        overlay
            .map(*table)
            .ok()?
            .insert(key.clone(), Slot::read(version.rev, version.value));
    }
    Some(overlay)
}

/// Why a read pass failed.
pub(super) enum ReadError {
    /// Retry after a backoff.
    Transient,
    /// Give up.
    Permanent(Error),
}

/// What a read pass saw.
pub(super) struct Snapshot {
    /// The marker's `mod_revision` (0 if absent).
    pub(super) marker_rev: i64,
    /// The marker's commit number (0 if absent).
    pub(super) marker_seq: u64,
    /// Every key read, ready to apply ops to.
    pub(super) overlay: Overlay,
}

/// Keys a batch reads: exact keys and whole prefixes, per table.
#[derive(Default)]
pub(super) struct ReadSet {
    /// Exact keys, deduplicated.
    keys: Vec<(Table, String)>,
    /// Prefixes of `DeletePrefix` ops in mixed requests.
    prefixes: Vec<(Table, String)>,
}

/// The keys the ops of `requests` may read or change (runs aside: those are never read).
pub(super) fn read_set(requests: &[Vec<Prepared>]) -> ReadSet {
    let mut keys = BTreeSet::new();
    let mut prefixes = BTreeSet::new();
    for op in requests.iter().flatten() {
        let (at, tables) = reads(op);
        for &table in tables {
            match at {
                Ok(key) => keys.insert((table, key)),
                Err(prefix) => prefixes.insert((table, prefix)),
            };
        }
        for key in dead_letter_keys(op) {
            for &table in DEAD_LETTER_TABLES {
                keys.insert((table, key));
            }
        }
        if let Some(key) = claim_key(op) {
            keys.insert((Table::Idempotency, key));
        }
    }
    let owned = |set: BTreeSet<(Table, &str)>| {
        set.into_iter()
            .map(|(table, key)| (table, key.to_owned()))
            .collect()
    };
    ReadSet {
        keys: owned(keys),
        prefixes: owned(prefixes),
    }
}

/// The tables `op` reads at its key (`Ok`), or whole under its prefix (`Err`, `DeletePrefix`).
pub(super) fn reads(op: &Prepared) -> (Result<&str, &str>, &'static [Table]) {
    const LIVE: &[Table] = &[Table::Jobs, Table::Counters];
    const ALL: &[Table] = &[Table::Jobs, Table::Counters, Table::Finished];
    match op {
        Prepared::PutJob { key, .. } | Prepared::DeleteJob { key } => (Ok(key), ALL),
        Prepared::Restore(record) => (Ok(&record.key), ALL),
        Prepared::Guarded { write, .. } => (Ok(&write.key), ALL),
        Prepared::ForgetIdempotency { key, .. } => (Ok(key), &[Table::Idempotency]),
        Prepared::PutCounter { key, .. } | Prepared::FinishJob { key, .. } => (Ok(key), LIVE),
        Prepared::RecordResult(record) if record.finish => (Ok(&record.key), ALL),
        Prepared::RecordResult(record) => (Ok(&record.key), LIVE),
        Prepared::SetPaused { key, .. } => (Ok(key), LIVE),
        Prepared::DeleteFinished { key, .. } => (Ok(key), &[Table::Finished]),
        Prepared::DeletePrefix { prefix } => (Err(prefix), ALL),
        // The due index is the embedded stores' only.
        Prepared::DropDue { key, .. } | Prepared::IndexDue { key, .. } => (Ok(key), &[]),
        Prepared::MarkDueIndexed | Prepared::AdvanceDue { .. } => (Ok(""), &[]),
        Prepared::PutValue { key, .. } => (Ok(key), &[Table::Values]),
    }
}

/// What a dead-letter job's create reads at each of its keys: as `PutJob`.
const DEAD_LETTER_TABLES: &[Table] = &[Table::Jobs, Table::Counters, Table::Finished];

/// The keys a result's dead-letter job may be created under (read beside the op's own).
fn dead_letter_keys(op: &Prepared) -> Vec<&str> {
    match op {
        Prepared::RecordResult(record) => record
            .dead_letter
            .iter()
            .flat_map(|d| [d.key.as_str(), d.fallback_key.as_str()])
            .collect(),
        _ => Vec::new(),
    }
}

/// The idempotency record a guarded write reads (and may write), beside its job's keys.
fn claim_key(op: &Prepared) -> Option<&str> {
    match op {
        Prepared::Guarded { write, .. } => write.idempotency.as_ref().map(|c| c.key.as_str()),
        _ => None,
    }
}

/// The most keys `op` makes a txn compare or write (each list is bounded on its own), before
/// anything is read: exact for keyed ops, a guess for `DeletePrefix`, which compares and
/// deletes every key under its prefix.
pub(super) fn txn_keys(op: &Prepared) -> usize {
    // Every write of a job writes its index key too (`partition.rs`).
    let writes = match op {
        // Job and its index key, counter and finished record; the runs' range.
        Prepared::PutJob { .. } | Prepared::DeleteJob { .. } | Prepared::Restore(_) => 5,
        // As `PutJob`, and the idempotency record (read, and written with the job).
        Prepared::Guarded { write, .. } => return 5 + usize::from(write.idempotency.is_some()),
        Prepared::ForgetIdempotency { .. } => 1,
        // The counter and the index key (its fire time).
        Prepared::PutCounter { .. } => 2,
        Prepared::FinishJob { .. } => 3,
        // The run (2: a run put inside a range cleared earlier in the batch splits it), the
        // pruned run and the counter; finishing: job and index key, counter, finished, runs'
        // range too.
        Prepared::RecordResult(record) if record.finish => 8,
        Prepared::RecordResult(_) => 5,
        Prepared::SetPaused { .. } | Prepared::PutValue { .. } => 1,
        // The record and the runs' range.
        Prepared::DeleteFinished { .. } => 2,
        Prepared::DeletePrefix { .. } => return 8,
        // The due index is the embedded stores' only: nothing to write here.
        Prepared::DropDue { .. }
        | Prepared::IndexDue { .. }
        | Prepared::MarkDueIndexed
        | Prepared::AdvanceDue { .. } => 0,
    };
    // A dead-letter job is created under one of its keys, as a `PutJob` (5 writes); both
    // keys are compared.
    let dead_letter = dead_letter_keys(op);
    let (extra_writes, extra_reads) = match dead_letter.len() {
        0 => (0, 0),
        n => (5, n * DEAD_LETTER_TABLES.len()),
    };
    (writes + extra_writes).max(reads(op).1.len() + extra_reads)
}

/// `(mod_revision, seq)` of a marker record.
pub(super) fn marker_of(kv: &KeyValue) -> (i64, u64) {
    let seq = <[u8; 8]>::try_from(kv.value.as_slice()).map_or(0, u64::from_be_bytes);
    (kv.mod_revision, seq)
}

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
pub(super) struct Overlay {
    /// Jobs read.
    jobs: BTreeMap<String, Slot>,
    /// Counters read.
    counters: BTreeMap<String, Slot>,
    /// Finished records read.
    finished: BTreeMap<String, Slot>,
    /// Idempotency records read.
    idempotency: BTreeMap<String, Slot>,
    /// Values (actor state) read.
    values: BTreeMap<String, Slot>,
    /// Fire times the ops gave jobs (`due_at`, 8 bytes LE ms), written blind into the jobs'
    /// index keys (`partition.rs`), never read.
    due_times: BTreeMap<String, Slot>,
    /// Prefixes read whole.
    prefixes: Vec<(Table, String)>,
    /// Runs written, never read.
    runs: RunWrites,
}

impl Overlay {
    /// The slots of a table that is read (every one but runs).
    fn map(&mut self, table: Table) -> Result<&mut BTreeMap<String, Slot>, Error> {
        match table {
            Table::Jobs => Ok(&mut self.jobs),
            Table::Counters => Ok(&mut self.counters),
            Table::Finished => Ok(&mut self.finished),
            Table::Idempotency => Ok(&mut self.idempotency),
            Table::Values => Ok(&mut self.values),
            Table::Runs => Err(invalid(
                "etcd store: run records are written blind, never read",
            )),
            Table::DueAt => Ok(&mut self.due_times),
            Table::Due | Table::DueFar => Err(invalid("etcd store: keeps no due index")),
        }
    }

    /// The slot of `key`, which the read set must have covered.
    fn slot(&mut self, table: Table, key: &str) -> Result<&mut Slot, Error> {
        let covered = self
            .prefixes
            .iter()
            .any(|(t, p)| *t == table && key.starts_with(p.as_str()));
        let map = self.map(table)?;
        if !map.contains_key(key) {
            // Fire times are written blind: an unread one is absent.
            if !covered && table != Table::DueAt {
                return Err(invalid("etcd store: op touched a key it did not read"));
            }
            // Under a prefix read whole: absent at the snapshot.
            map.insert(key.to_owned(), Slot::read(0, None));
        }
        Ok(map.get_mut(key).expect("inserted above"))
    }

    /// Applies one request's ops (`apply::apply_request`). The run changes of a request that
    /// fails as a whole are dropped here: they were never read, so the generic undo, which
    /// restores read values, cannot restore them.
    pub(super) fn apply_request(
        &mut self,
        ops: Vec<Prepared>,
    ) -> Result<Result<Vec<OpResult>, Error>, Error> {
        let mark = self.runs.mark();
        let applied = apply::apply_request(self, ops)?;
        if applied.is_err() {
            self.runs.rollback(mark);
        }
        Ok(applied)
    }

    /// The txn that compares every key read and writes every change plus the marker:
    /// `None` when larger than `max_keys` or the byte limit, `Some(None)` when nothing
    /// changes (unless `force`).
    pub(super) fn txn(
        &self,
        inner: &Inner,
        max_keys: usize,
        marker_rev: i64,
        seq: u64,
        force: bool,
    ) -> Option<Option<TxnRequest>> {
        let mut compares = vec![client::equal(
            inner.marker.clone(),
            CompareWith::ModRevision(marker_rev),
        )];
        let mut writes = Vec::new();
        let mut bytes = 0;
        let read = [
            (Table::Jobs, &self.jobs),
            (Table::Counters, &self.counters),
            (Table::Finished, &self.finished),
            (Table::Idempotency, &self.idempotency),
            (Table::Values, &self.values),
        ];
        for (table, map) in read {
            for (key, slot) in map {
                let full = inner.full(table, key);
                bytes += full.len();
                compares.push(client::equal(
                    full.clone(),
                    CompareWith::ModRevision(slot.read_rev),
                ));
                if slot.current == slot.original {
                    continue;
                }
                // A job's index key changes in the same txn as the job (`partition.rs`).
                let index = (table == Table::Jobs).then(|| inner.index.key(key));
                match &slot.current {
                    Some(value) => {
                        // A job goes to etcd in go-etcd-cron's layout (`job_value.rs`).
                        let value = match table {
                            Table::Jobs => job_value::to_etcd(value),
                            _ => value.clone(),
                        };
                        bytes += full.len() + value.len();
                        writes.push(client::put(full, value, 0));
                        if let Some(index) = index {
                            let due = self.due_time(key);
                            bytes += index.len() + due.len();
                            writes.push(client::put(index, due, 0));
                        }
                    }
                    None => {
                        writes.push(client::delete(full));
                        if let Some(index) = index {
                            writes.push(client::delete(index));
                        }
                    }
                }
            }
        }
        // A job kept as it was with a new fire time (a result): its index key gets the time.
        for (key, slot) in &self.due_times {
            let job = self.jobs.get(key);
            if slot.current == slot.original
                || job.is_none_or(|j| j.current.is_none() || j.current != j.original)
            {
                continue;
            }
            let index = inner.index.key(key);
            let due = self.due_time(key);
            bytes += index.len() + due.len();
            writes.push(client::put(index, due, 0));
        }
        for write in self.runs.writes(inner.prefix(Table::Runs)) {
            let (op, size) = run_op(write);
            bytes += size;
            writes.push(op);
        }
        if compares.len() > max_keys + 1 || writes.len() > max_keys || bytes > MAX_TXN_BYTES {
            return None;
        }
        if writes.is_empty() && !force {
            return Some(None);
        }
        writes.push(client::put(inner.marker.clone(), seq.to_be_bytes(), 0));
        Some(Some(client::txn(compares, writes, Vec::new())))
    }
}

/// The txn op of a run write, and its bytes.
fn run_op(write: Write) -> (RequestOp, usize) {
    match write {
        Write::Put(key, value) => {
            let size = key.len() + value.len();
            (client::put(key, value, 0), size)
        }
        Write::Delete(key) => {
            let size = key.len();
            (client::delete(key), size)
        }
        Write::DeleteRange(from, to) => {
            let size = from.len() + to.len();
            (client::delete_range(from, to), size)
        }
    }
}

impl Overlay {
    /// Every key the txn of this overlay compared, as it left them once committed at `rev`:
    /// `(table, key, mod_revision, value)`, 0 and `None` for a key left absent.
    pub(super) fn settled(
        &self,
        rev: i64,
    ) -> impl Iterator<Item = (Table, &str, i64, Option<&[u8]>)> {
        [
            (Table::Jobs, &self.jobs),
            (Table::Counters, &self.counters),
            (Table::Finished, &self.finished),
            (Table::Idempotency, &self.idempotency),
            (Table::Values, &self.values),
        ]
        .into_iter()
        .flat_map(move |(table, map)| {
            map.iter().map(move |(key, slot)| {
                let mod_rev = match &slot.current {
                    _ if slot.current == slot.original => slot.read_rev,
                    Some(_) => rev,
                    None => 0,
                };
                (table, key.as_str(), mod_rev, slot.current.as_deref())
            })
        })
    }

    /// The keys of `reads` (exact keys only), to forget them.
    pub(super) fn read_keys(reads: &ReadSet) -> impl Iterator<Item = (Table, &str)> {
        reads.keys.iter().map(|(table, key)| (*table, key.as_str()))
    }

    /// The value of `key`'s index key: its fire time as the ops left it, else unknown.
    fn due_time(&self, key: &str) -> Vec<u8> {
        self.due_times
            .get(key)
            .and_then(|slot| slot.current.clone())
            .unwrap_or_default()
    }
}

impl Tables for Overlay {
    /// Fire times go into the index keys, not into an index of their own.
    fn keeps_due_times(&self) -> bool {
        true
    }

    fn with_value<R>(
        &mut self,
        table: Table,
        key: &str,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error> {
        Ok(self.slot(table, key)?.current.as_deref().map(f))
    }

    /// Runs are journaled blind and not recorded in `undo` (see [`Overlay::apply_request`]).
    fn insert(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<(), Error> {
        if table == Table::Runs {
            self.runs.put(key, value);
            return Ok(());
        }
        let old = self.slot(table, key)?.current.replace(value);
        if let Some(undo) = undo {
            undo.push((table, key.to_owned(), old));
        }
        Ok(())
    }

    /// A run removed blind counts as not there (nothing reads that answer).
    fn remove(&mut self, table: Table, key: &str, undo: Option<&mut Undo>) -> Result<bool, Error> {
        if table == Table::Runs {
            self.runs.delete(key);
            return Ok(false);
        }
        let old = self.slot(table, key)?.current.take();
        let removed = old.is_some();
        if let (Some(undo), Some(old)) = (undo, old) {
            undo.push((table, key.to_owned(), Some(old)));
        }
        Ok(removed)
    }

    fn first_entries(
        &mut self,
        table: Table,
        _start: &str,
        _end: &str,
        _limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, Error> {
        self.map(table)?;
        Err(invalid(
            "etcd store: ranges are read before the op, not in it",
        ))
    }

    /// Runs are cleared by one range delete, uncounted (0: nothing reads that count).
    fn remove_prefix(
        &mut self,
        table: Table,
        prefix: &str,
        mut undo: Option<&mut Undo>,
    ) -> Result<u64, Error> {
        if table == Table::Runs {
            self.runs.clear(prefix);
            return Ok(0);
        }
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
            .map(table)?
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
