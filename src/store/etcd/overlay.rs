//! The compare-and-swap overlay. An etcd txn cannot branch on values, so the meaning of a
//! batch's ops is computed here, by the same code as the other stores (`apply.rs`), over a
//! snapshot of every key the batch touches read at one revision ([`read`]); the txn
//! ([`Overlay::txn`]) then compares each of those keys' `mod_revision` with what was read and
//! puts or deletes the changed keys, plus the writer's marker.

use std::collections::{BTreeMap, BTreeSet};

use super::client::{self, CompareWith, KeyValue, TxnRequest, is_transient};
use super::{CALL_TIMEOUT, Inner, MAX_TXN_BYTES, MAX_TXN_KEYS, invalid};
use crate::store::Error;
use crate::store::apply::{PrefixRange, Prepared, Table, Tables, Undo};

/// Reads every key of `reads` and the marker in one txn (one revision).
pub(super) async fn read(inner: &Inner, reads: &ReadSet) -> Result<Snapshot, ReadError> {
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

/// The keys the ops of `requests` may read or change.
pub(super) fn read_set(requests: &[Vec<Prepared>]) -> ReadSet {
    let mut keys = BTreeSet::new();
    let mut prefixes = BTreeSet::new();
    for op in requests.iter().flatten() {
        match op_key(op) {
            Ok(key) => keys.insert(key),
            Err(prefix) => prefixes.insert(prefix),
        };
    }
    let both = |set: &BTreeSet<&str>| {
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
pub(super) fn op_key(op: &Prepared) -> Result<&str, &str> {
    match op {
        Prepared::PutJob { key, .. }
        | Prepared::DeleteJob { key }
        | Prepared::PutCounter { key, .. }
        | Prepared::FinishJob { key, .. }
        | Prepared::DeleteFinished { key, .. } => Ok(key),
        Prepared::RecordResult(record) => Ok(&record.key),
        Prepared::DeletePrefix { prefix } => Err(prefix),
    }
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
    /// Prefixes read whole.
    prefixes: Vec<(Table, String)>,
    /// Stands in for the runs and finished tables, which this store does not keep
    /// (`keeps_history` is false): never read, so any op touching it fails as unread.
    unkept: BTreeMap<String, Slot>,
}

impl Overlay {
    fn map(&mut self, table: Table) -> &mut BTreeMap<String, Slot> {
        match table {
            Table::Jobs => &mut self.jobs,
            Table::Counters => &mut self.counters,
            Table::Runs | Table::Finished => &mut self.unkept,
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
    pub(super) fn txn(
        &self,
        inner: &Inner,
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
    fn keeps_history(&self) -> bool {
        false
    }

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
