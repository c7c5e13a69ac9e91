//! The due index: when each job fires next, ordered by time, so that the engine keeps only
//! the near future in memory and pages the rest in as its horizon moves (issue 16).
//!
//! Two tables, changed only by the ops that change the job, in the same commit:
//! - `due_at`: job key → its time (milliseconds since the Unix epoch, 8 bytes little-endian):
//!   the truth;
//! - `due`: [`due_key`]`(time, job key)` → nothing: the order the engine reads;
//! - `due_far`: [`far_key`]`(bucket, seq)` → time and job key: jobs due in a bucket the
//!   engine's horizon has not reached yet, in arrival order within their bucket.
//!
//! Why two orders: creates with fire times spread over days insert at random places of a
//! time-ordered B-tree, and redb, copy-on-write, writes a fresh copy of nearly every leaf a
//! batch touched (≈ 6.5 KB written per create at 10 M jobs, the fill's limit). A far entry is
//! appended at the end of its bucket (one hot leaf per bucket), and a bucket is moved into
//! `due` in one sequential pass ([`advance`]) just before a reader needs it, when `due` holds
//! only the near future and is small enough to stay in the cache.
//!
//! Where an entry lives follows from `due_at` and the cursor (the first `due_far` key not yet
//! moved, kept under [`CURSOR`]): a time with a sequence number whose [`far_key`] is at or
//! after the cursor is in `due_far`, any other in `due`. Moving a bucket leaves `due_at` as
//! it is, so it costs no write per job beyond the two index tables.
//!
//! The times come from the engine (it plans the job; the store cannot): a create carries the
//! first fire time, a counter the next one it was written for (`StoredCounter.due_ms`). A time
//! may be earlier than the job really fires (the job is then read a little early, which costs
//! nothing but the read), never later. A job deleted or finished leaves the index with it. A
//! delete by prefix removes the `due_at` range and leaves its `due` entries behind: a `due`
//! entry whose time `due_at` does not confirm is stale, skipped by readers, and dropped with
//! [`Op::DropDue`](crate::store::Op::DropDue).

use prost::Message;

use crate::store::records::active_item;
use crate::store::tables::{Table, Tables, Undo};
use crate::store::{DuePage, Error, LoadedJob};

/// `due_at` key of the marker saying every job is indexed (set once the engine indexed a
/// store written before the index existed). No job key starts with a NUL.
pub(crate) const COMPLETE: &str = "\0complete";
/// `due_at` key of the cursor: the first `due_far` key not moved into `due` yet (absent: none
/// moved).
pub(crate) const CURSOR: &str = "\0far_cursor";
/// `due_at` key of the next sequence number a `due_far` entry gets (8 bytes little-endian).
const SEQ: &str = "\0far_seq";

/// Bits of a millisecond time below the bucket: a bucket spans 2²² ms ≈ 70 minutes, so a
/// week of fire times has ≈ 144 hot leaves, and one bucket of a store with 10 M jobs due over
/// a week (≈ 70 k entries) moves in a few hundred milliseconds of the writer's time.
const BUCKET_BITS: u32 = 22;
/// Most entries one [`advance`] moves: a bucket holding more moves in several ops, so that
/// no single write keeps the writer (and the creates behind it) for long.
pub(crate) const ADVANCE_LIMIT: usize = 8192;

/// The `due` key of `key` due at `ms`: the time as 16 hex digits, order-preserving for
/// negative times too, then the job key.
pub(crate) fn due_key(ms: i64, key: &str) -> String {
    format!("{:016x}{key}", time_bits(ms))
}

/// The first `due` key at or after `ms`.
pub(crate) fn due_bound(ms: i64) -> String {
    format!("{:016x}", time_bits(ms))
}

/// `(time, job key)` of a `due` key; `None` for a key this module did not write.
pub(crate) fn parse_due_key(due: &str) -> Option<(i64, &str)> {
    let (hex, key) = (due.get(..16)?, due.get(16..)?);
    let bits = u64::from_str_radix(hex, 16).ok()?;
    Some((i64::from_ne_bytes((bits ^ SIGN).to_ne_bytes()), key))
}

/// The sign bit: flipping it makes two's-complement times sort as unsigned numbers.
const SIGN: u64 = 1 << 63;

fn time_bits(ms: i64) -> u64 {
    u64::from_ne_bytes(ms.to_ne_bytes()) ^ SIGN
}

/// The `due_far` key of an entry of bucket `bucket` with sequence number `seq`.
fn far_key(bucket: u64, seq: u64) -> String {
    format!("{bucket:016x}{seq:016x}")
}

/// The bucket of a time.
fn bucket(ms: i64) -> u64 {
    time_bits(ms) >> BUCKET_BITS
}

/// The time `due_at` holds for `key`.
pub(crate) fn indexed_at<T: Tables>(tables: &mut T, key: &str) -> Result<Option<i64>, Error> {
    Ok(tables.with_value(Table::DueAt, key, decode_ms)?.flatten())
}

/// The time of a `due_at` value (8 bytes; 16 with the sequence number of a far entry).
pub(crate) fn decode_ms(bytes: &[u8]) -> Option<i64> {
    bytes.get(..8)?.try_into().ok().map(i64::from_le_bytes)
}

/// The sequence number of a `due_at` value, if it was written as a far entry.
fn decode_seq(bytes: &[u8]) -> Option<u64> {
    decode_u64(bytes, 8)
}

/// The little-endian u64 at `at` in `bytes`.
fn decode_u64(bytes: &[u8], at: usize) -> Option<u64> {
    bytes
        .get(at..at + 8)?
        .try_into()
        .ok()
        .map(u64::from_le_bytes)
}

/// The cursor as stored (`far_key(0, 0)`, below every entry, when nothing moved yet).
fn cursor<T: Tables>(tables: &mut T) -> Result<String, Error> {
    Ok(tables
        .with_value(Table::DueAt, CURSOR, |v| {
            String::from_utf8_lossy(v).into_owned()
        })?
        .unwrap_or_else(|| far_key(0, 0)))
}

/// Whether a reader of the jobs due before `before` finds them all in `due`, given the
/// cursor's stored bytes.
pub(crate) fn covers(cursor: Option<&[u8]>, before: i64) -> bool {
    cursor.is_some_and(|c| c >= far_end(before).as_bytes())
}

/// The first `due_far` key past the buckets holding times before `before`.
fn far_end(before: i64) -> String {
    far_key(bucket(before.saturating_sub(1)) + 1, 0)
}

/// `key`'s current entry (its index key and table) from its `due_at` value.
fn location(key: &str, at: &[u8], cursor: &str) -> Option<(Table, String)> {
    let ms = decode_ms(at)?;
    Some(match decode_seq(at) {
        Some(seq) if far_key(bucket(ms), seq).as_str() >= cursor => {
            (Table::DueFar, far_key(bucket(ms), seq))
        }
        _ => (Table::Due, due_key(ms, key)),
    })
}

/// Removes `key`'s current entry, if it has one.
fn remove_entry<T: Tables>(
    tables: &mut T,
    key: &str,
    cursor: &str,
    undo: Option<&mut Undo>,
) -> Result<Option<i64>, Error> {
    let Some(at) = tables.with_value(Table::DueAt, key, <[u8]>::to_vec)? else {
        return Ok(None);
    };
    if let Some((table, entry)) = location(key, &at, cursor) {
        tables.remove(table, &entry, undo)?;
    }
    Ok(decode_ms(&at))
}

/// Indexes `key` at `ms` (replacing its earlier time).
pub(crate) fn set<T: Tables>(
    tables: &mut T,
    key: &str,
    ms: i64,
    mut undo: Option<&mut Undo>,
) -> Result<(), Error> {
    if !tables.keeps_due_index() {
        if tables.keeps_due_times() {
            tables.insert(Table::DueAt, key, ms.to_le_bytes().to_vec(), undo)?;
        }
        return Ok(());
    }
    if indexed_at(tables, key)? == Some(ms) {
        return Ok(());
    }
    let cursor = cursor(tables)?;
    remove_entry(tables, key, &cursor, undo.as_deref_mut())?;
    let mut at = ms.to_le_bytes().to_vec();
    if far_key(bucket(ms), u64::MAX) < cursor {
        // Its bucket was moved already: straight into the ordered index.
        tables.insert(
            Table::Due,
            &due_key(ms, key),
            Vec::new(),
            undo.as_deref_mut(),
        )?;
    } else {
        let seq = tables
            .with_value(Table::DueAt, SEQ, |v| decode_u64(v, 0))?
            .flatten()
            .unwrap_or(0);
        tables.insert(
            Table::DueAt,
            SEQ,
            (seq + 1).to_le_bytes().to_vec(),
            undo.as_deref_mut(),
        )?;
        let mut entry = ms.to_le_bytes().to_vec();
        entry.extend_from_slice(key.as_bytes());
        tables.insert(
            Table::DueFar,
            &far_key(bucket(ms), seq),
            entry,
            undo.as_deref_mut(),
        )?;
        at.extend_from_slice(&seq.to_le_bytes());
    }
    tables.insert(Table::DueAt, key, at, undo)
}

/// Applies [`Op::AdvanceDue`](crate::store::Op::AdvanceDue): moves up to [`ADVANCE_LIMIT`]
/// `due_far` entries of the buckets holding times before `before` into `due`, in key order,
/// and moves the cursor past them. Whether it moved the cursor.
pub(crate) fn advance<T: Tables>(
    tables: &mut T,
    before: i64,
    mut undo: Option<&mut Undo>,
) -> Result<bool, Error> {
    if !tables.keeps_due_index() {
        return Ok(false);
    }
    let from = cursor(tables)?;
    let end = far_end(before);
    if from >= end {
        return Ok(false);
    }
    let entries = tables.first_entries(Table::DueFar, &from, &end, ADVANCE_LIMIT + 1)?;
    let next = entries.get(ADVANCE_LIMIT).map(|(k, _)| k.clone());
    for (far, entry) in entries.into_iter().take(ADVANCE_LIMIT) {
        let ms = decode_ms(&entry);
        let key = entry.get(8..).map(String::from_utf8_lossy);
        if let (Some(ms), Some(key)) = (ms, key) {
            tables.insert(
                Table::Due,
                &due_key(ms, &key),
                Vec::new(),
                undo.as_deref_mut(),
            )?;
        }
        tables.remove(Table::DueFar, &far, undo.as_deref_mut())?;
    }
    let cursor = next.unwrap_or(end);
    tables.insert(Table::DueAt, CURSOR, cursor.into_bytes(), undo)?;
    Ok(true)
}

/// Takes `key` out of the index (its job was deleted or finished).
pub(crate) fn forget<T: Tables>(
    tables: &mut T,
    key: &str,
    mut undo: Option<&mut Undo>,
) -> Result<(), Error> {
    if !tables.keeps_due_index() {
        return Ok(());
    }
    let cursor = cursor(tables)?;
    if remove_entry(tables, key, &cursor, undo.as_deref_mut())?.is_some() {
        tables.remove(Table::DueAt, key, undo)?;
    }
    Ok(())
}

/// Takes every key under `prefix` out of `due_at` (their `due` entries become stale).
pub(crate) fn forget_prefix<T: Tables>(
    tables: &mut T,
    prefix: &str,
    mut undo: Option<&mut Undo>,
) -> Result<(), Error> {
    if !tables.keeps_due_index() {
        return Ok(());
    }
    if prefix.is_empty() {
        // Everything goes; the marker (every job left is indexed: none is), the cursor and the
        // sequence stay.
        let mut kept = Vec::new();
        for mark in [COMPLETE, CURSOR, SEQ] {
            if let Some(value) = tables.with_value(Table::DueAt, mark, <[u8]>::to_vec)? {
                kept.push((mark, value));
            }
        }
        for table in [Table::Due, Table::DueFar, Table::DueAt] {
            tables.remove_prefix(table, "", undo.as_deref_mut())?;
        }
        for (mark, value) in kept {
            tables.insert(Table::DueAt, mark, value, undo.as_deref_mut())?;
        }
        return Ok(());
    }
    tables.remove_prefix(Table::DueAt, prefix, undo)?;
    Ok(())
}

/// Applies [`Op::DropDue`](crate::store::Op::DropDue): removes the `due` entry of `key` at
/// `ms` unless `due_at` confirms it.
pub(crate) fn drop_stale<T: Tables>(
    tables: &mut T,
    key: &str,
    ms: i64,
    undo: Option<&mut Undo>,
) -> Result<bool, Error> {
    if !tables.keeps_due_index() || indexed_at(tables, key)? == Some(ms) {
        return Ok(false);
    }
    tables.remove(Table::Due, &due_key(ms, key), undo)
}

/// Marks the index complete.
pub(crate) fn mark_complete<T: Tables>(
    tables: &mut T,
    undo: Option<&mut Undo>,
) -> Result<(), Error> {
    if tables.keeps_due_index() {
        tables.insert(Table::DueAt, COMPLETE, Vec::new(), undo)?;
    }
    Ok(())
}

/// What a page reader finds for a job key: its `due_at` time, and its job and counter bytes.
pub(crate) type Found = (Option<i64>, Option<(Vec<u8>, Option<Vec<u8>>)>);

/// One page of the index read from `entries` (`due` keys from the page's start, in order):
/// jobs due before `before` (ms), at most `limit` entries looked at; `lookup` reads what the
/// other tables hold for a job key. An entry `due_at` does not confirm, or whose job is
/// gone, is reported stale.
pub(crate) fn read_page<E, L>(
    entries: E,
    before: i64,
    limit: usize,
    mut lookup: L,
) -> Result<DuePage, Error>
where
    E: Iterator<Item = Result<String, Error>>,
    L: FnMut(&str) -> Result<Found, Error>,
{
    let mut page = DuePage::default();
    let mut seen = 0;
    for entry in entries {
        let due = entry?;
        let Some((ms, key)) = parse_due_key(&due) else {
            continue;
        };
        if ms >= before {
            return Ok(page);
        }
        if seen == limit.max(1) {
            page.next = Some(due);
            return Ok(page);
        }
        seen += 1;
        match lookup(key)? {
            (Some(at), Some((job, counter))) if at == ms => {
                let item = active_item(key.to_owned(), &job, counter.as_deref())?;
                page.jobs.push((
                    ms,
                    LoadedJob {
                        key: item.key,
                        job: item.job,
                        counter: item.counter,
                    },
                ));
            }
            _ => page.stale.push((ms, key.to_owned())),
        }
    }
    Ok(page)
}

/// `StoredCounter` with only its `due_ms` field: reading it skips the rest.
#[derive(Clone, PartialEq, Message)]
struct CounterDue {
    /// `StoredCounter.due_ms`.
    #[prost(int64, optional, tag = "19")]
    due_ms: Option<i64>,
}

/// The time an encoded `StoredCounter` was written for, if it says.
pub(crate) fn counter_due(counter: &[u8]) -> Option<i64> {
    CounterDue::decode(counter).ok().and_then(|c| c.due_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_keys_sort_by_time_then_key_and_read_back() {
        let times = [i64::MIN, -1_000, -1, 0, 1, 1_700_000_000_000, i64::MAX];
        let keys: Vec<String> = times
            .iter()
            .flat_map(|&t| [due_key(t, "app||a"), due_key(t, "app||b")])
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        for &t in &times {
            assert_eq!(parse_due_key(&due_key(t, "k||1")), Some((t, "k||1")));
            assert!(due_bound(t) <= due_key(t, ""));
            assert!(due_key(t, "zzz") < due_bound(t.saturating_add(1)) || t == i64::MAX);
        }
        assert_eq!(parse_due_key("short"), None);
    }
}
