//! The due index: when each job fires next, ordered by time, so that the engine keeps only
//! the near future in memory and pages the rest in as its horizon moves (issue 16).
//!
//! Two tables, changed only by the ops that change the job, in the same commit:
//! - `due_at`: job key → its time (milliseconds since the Unix epoch, 8 bytes little-endian):
//!   the truth;
//! - `due`: [`due_key`]`(time, job key)` → nothing: the order the engine reads.
//!
//! The times come from the engine (it plans the job; the store cannot): a create carries the
//! first fire time, a counter the next one it was written for (`StoredCounter.due_ms`). A time
//! may be earlier than the job really fires (the job is then read a little early, which costs
//! nothing but the read), never later. A job deleted or finished leaves the index with it. A
//! delete by prefix removes the `due_at` range and leaves its `due` entries behind: a `due`
//! entry whose time `due_at` does not confirm is stale, skipped by readers, and dropped with
//! [`Op::DropDue`](crate::store::Op::DropDue).

use prost::Message;

use super::{Table, Tables, Undo, active_item};
use crate::store::{DuePage, Error, LoadedJob};

/// `due_at` key of the marker saying every job is indexed (set once the engine indexed a
/// store written before the index existed). No job key starts with a NUL.
pub(crate) const COMPLETE: &str = "\0complete";

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

/// The time `due_at` holds for `key`.
pub(crate) fn indexed_at<T: Tables>(tables: &mut T, key: &str) -> Result<Option<i64>, Error> {
    Ok(tables.with_value(Table::DueAt, key, decode_ms)?.flatten())
}

fn decode_ms(bytes: &[u8]) -> Option<i64> {
    bytes.try_into().ok().map(i64::from_le_bytes)
}

/// Indexes `key` at `ms` (replacing its earlier time).
pub(crate) fn set<T: Tables>(
    tables: &mut T,
    key: &str,
    ms: i64,
    mut undo: Option<&mut Undo>,
) -> Result<(), Error> {
    if !tables.keeps_due_index() {
        return Ok(());
    }
    match indexed_at(tables, key)? {
        Some(old) if old == ms => return Ok(()),
        Some(old) => {
            tables.remove(Table::Due, &due_key(old, key), undo.as_deref_mut())?;
        }
        None => {}
    }
    tables.insert(
        Table::Due,
        &due_key(ms, key),
        Vec::new(),
        undo.as_deref_mut(),
    )?;
    tables.insert(Table::DueAt, key, ms.to_le_bytes().to_vec(), undo)
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
    if let Some(old) = indexed_at(tables, key)? {
        tables.remove(Table::Due, &due_key(old, key), undo.as_deref_mut())?;
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
        // Everything goes; the marker stays (every job left is indexed: none is).
        let complete = tables.with_value(Table::DueAt, COMPLETE, |_| ())?.is_some();
        tables.remove_prefix(Table::Due, "", undo.as_deref_mut())?;
        tables.remove_prefix(Table::DueAt, "", undo.as_deref_mut())?;
        if complete {
            tables.insert(Table::DueAt, COMPLETE, Vec::new(), undo)?;
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
