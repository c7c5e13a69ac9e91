//! What the writer knows of keys without reading them. A write in the general way reads every
//! key its ops read, then compares their `mod_revision`s in the txn (`overlay.rs`). When the
//! writer already knows each of those keys' value and `mod_revision`, the read is skipped:
//! the txn compares what is known, exactly as it would compare what was read. So knowledge is
//! only ever an optimisation, never a risk: if a key moved since (another replica wrote it, a
//! guess was wrong), etcd refuses the compare, the writer forgets those keys and goes the
//! general way (read, then compare-and-swap). A `mod_revision` names one version of a key, so
//! a compare that holds means the known value is the stored one.
//!
//! Where knowledge comes from:
//! - the writer's own txns: every key a committed txn compared or wrote is known as it left
//!   it, at the txn's revision;
//! - the jobs watch of a cluster member ([`Etcd::saw_job`](super::Etcd::saw_job)): a job put
//!   in a partition it owns, with its revision; its counter and finished record are guessed
//!   absent (a put of a job through the API drops both), which the compare checks.
//!
//! So a one-shot's finishing result (it reads its job, counter and finished record) or a
//! recurring job's progress is one etcd txn instead of a read and a txn. Only live jobs are
//! kept (a key whose job is gone is forgotten), within [`MAX_ENTRIES`] and [`MAX_BYTES`],
//! oldest forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::store::tables::Table;

/// Keys known at most.
const MAX_ENTRIES: usize = 196_608;
/// Bytes of known values at most.
const MAX_BYTES: usize = 48 << 20;
/// The tables a job's knowledge covers (those a write of it reads).
const JOB_TABLES: [Table; 3] = [Table::Jobs, Table::Counters, Table::Finished];

/// One key as known.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Version {
    /// The revision at which this was true (a later one replaces it, an earlier one not).
    pub(super) seen: i64,
    /// The key's `mod_revision` then; 0 when it did not exist.
    pub(super) rev: i64,
    /// Its value then.
    pub(super) value: Option<Vec<u8>>,
}

/// One key: a table and a key in it.
type Slot = (Table, String);

/// What is known, shared by the writer and the watch.
#[derive(Default)]
pub(super) struct Known {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Each key's version, with the number of its entry in `order`.
    map: HashMap<Slot, (Version, u64)>,
    /// Keys in the order they were last set, by entry number (stale entries are skipped).
    order: VecDeque<(Slot, u64)>,
    /// The next entry number.
    next: u64,
    /// Bytes of the values in `map`.
    bytes: usize,
}

impl State {
    /// Sets `slot` to `version` unless what is known is newer.
    fn set(&mut self, slot: Slot, version: Version) {
        if let Some((old, _)) = self.map.get(&slot)
            && old.seen > version.seen
        {
            return;
        }
        let n = self.next;
        self.next += 1;
        self.bytes += version.value.as_ref().map_or(0, Vec::len);
        if let Some((old, _)) = self.map.insert(slot.clone(), (version, n)) {
            self.bytes -= old.value.as_ref().map_or(0, Vec::len);
        }
        self.order.push_back((slot, n));
        self.trim();
    }

    /// Forgets `slot`.
    fn forget(&mut self, slot: &Slot) {
        if let Some((old, _)) = self.map.remove(slot) {
            self.bytes -= old.value.as_ref().map_or(0, Vec::len);
        }
    }

    /// Forgets the oldest keys beyond the bounds; drops stale order entries.
    fn trim(&mut self) {
        while self.map.len() > MAX_ENTRIES
            || self.bytes > MAX_BYTES
            || self.order.len() > 2 * MAX_ENTRIES
        {
            let Some((slot, n)) = self.order.pop_front() else {
                break;
            };
            if self.map.get(&slot).is_some_and(|(_, at)| *at == n) {
                self.forget(&slot);
            }
        }
    }
}

impl Known {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the map wrong for this use: every change is whole.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The versions of all of `keys`, or `None` if one is not known.
    pub(super) fn get_all(&self, keys: &[(Table, String)]) -> Option<Vec<Version>> {
        let state = self.state();
        keys.iter()
            .map(|slot| state.map.get(slot).map(|(v, _)| v.clone()))
            .collect()
    }

    /// A job put seen at `rev` with `value`: its counter and finished record guessed absent.
    pub(super) fn saw_job(&self, key: &str, rev: i64, value: &[u8]) {
        let mut state = self.state();
        for table in JOB_TABLES {
            let known = Version {
                seen: rev,
                rev: if table == Table::Jobs { rev } else { 0 },
                value: (table == Table::Jobs).then(|| value.to_vec()),
            };
            state.set((table, key.to_owned()), known);
        }
    }

    /// What a txn committed at `rev` left: `(table, key, mod_revision, value)` of every key it
    /// compared or wrote (0 and `None` for a key it left absent). A key whose job is gone is
    /// forgotten; so are finished records and idempotency records, which no hot write reads.
    pub(super) fn committed<'a>(
        &self,
        rev: i64,
        keys: impl IntoIterator<Item = (Table, &'a str, i64, Option<&'a [u8]>)>,
    ) {
        let mut state = self.state();
        let mut gone = Vec::new();
        for (table, key, mod_rev, value) in keys {
            match table {
                Table::Jobs if value.is_none() => gone.push(key),
                Table::Jobs | Table::Counters => {}
                Table::Finished if value.is_none() => {}
                _ => {
                    state.forget(&(table, key.to_owned()));
                    continue;
                }
            }
            let known = Version {
                seen: rev,
                rev: mod_rev,
                value: value.map(<[u8]>::to_vec),
            };
            state.set((table, key.to_owned()), known);
        }
        for key in gone {
            for table in JOB_TABLES {
                state.forget(&(table, key.to_owned()));
            }
        }
    }

    /// Forgets what is known of each of `keys` (a compare refused them, or a write went
    /// around this module).
    pub(super) fn forget<'a>(&self, keys: impl IntoIterator<Item = (Table, &'a str)>) {
        let mut state = self.state();
        for (table, key) in keys {
            state.forget(&(table, key.to_owned()));
        }
    }

    /// Forgets what is known of job `key` (its job, counter and finished record).
    pub(super) fn forget_job(&self, key: &str) {
        self.forget(JOB_TABLES.map(|t| (t, key)));
    }

    /// Forgets what is known of job `key` as of before `rev` (a txn at `rev` wrote it; the
    /// watch may already have told its put).
    pub(super) fn forget_job_before(&self, key: &str, rev: i64) {
        let mut state = self.state();
        for table in JOB_TABLES {
            let slot = (table, key.to_owned());
            if state.map.get(&slot).is_some_and(|(v, _)| v.seen < rev) {
                state.forget(&slot);
            }
        }
    }

    /// Forgets everything (range deletes, which name no key).
    pub(super) fn clear(&self) {
        let mut state = self.state();
        state.map.clear();
        state.order.clear();
        state.bytes = 0;
    }

    /// Keys known now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.state().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(key: &str) -> Vec<(Table, String)> {
        JOB_TABLES.iter().map(|&t| (t, key.to_owned())).collect()
    }

    #[test]
    fn a_watched_job_is_known_with_its_counter_and_finished_record_absent() {
        let known = Known::default();
        assert_eq!(known.get_all(&keys("a")), None);
        known.saw_job("a", 7, b"job");
        let got = known.get_all(&keys("a")).expect("known");
        assert_eq!(got[0].rev, 7);
        assert_eq!(got[0].value.as_deref(), Some(&b"job"[..]));
        assert_eq!((got[1].rev, got[1].value.clone()), (0, None));
        assert_eq!((got[2].rev, got[2].value.clone()), (0, None));
    }

    #[test]
    fn an_older_sighting_does_not_replace_a_newer_commit() {
        let known = Known::default();
        known.committed(
            9,
            [
                (Table::Jobs, "a", 5, Some(&b"v5"[..])),
                (Table::Counters, "a", 9, Some(&b"c9"[..])),
            ],
        );
        // The watch delivers the job's put at 5 after the writer's txn at 9.
        known.saw_job("a", 5, b"v5");
        let got = known.get_all(&[(Table::Counters, "a".into())]).unwrap();
        assert_eq!(got[0].rev, 9, "the counter the txn wrote stays known");
        known.saw_job("a", 12, b"v12");
        let got = known.get_all(&keys("a")).unwrap();
        assert_eq!(
            (got[0].rev, got[1].rev),
            (12, 0),
            "a newer put replaces both"
        );
    }

    #[test]
    fn a_job_gone_is_forgotten_with_its_records() {
        let known = Known::default();
        known.saw_job("a", 3, b"job");
        known.committed(
            4,
            [
                (Table::Jobs, "a", 0, None),
                (Table::Counters, "a", 0, None),
                (Table::Finished, "a", 4, Some(&b"done"[..])),
            ],
        );
        assert_eq!(known.len(), 0);
        assert_eq!(
            known.get_all(&[(Table::Finished, "a".into())]),
            None,
            "finished records are not kept"
        );
    }

    #[test]
    fn the_oldest_keys_go_first_beyond_the_bound() {
        let known = Known::default();
        let big = vec![0u8; MAX_BYTES / 4 + 1];
        for (i, key) in ["a", "b", "c", "d"].iter().enumerate() {
            known.committed(i as i64 + 1, [(Table::Jobs, *key, 1, Some(big.as_slice()))]);
        }
        assert_eq!(known.get_all(&[(Table::Jobs, "a".into())]), None);
        assert!(known.get_all(&[(Table::Jobs, "d".into())]).is_some());
        assert_eq!(known.len(), 3);
        // Setting a key again makes it the newest.
        known.committed(9, [(Table::Jobs, "b", 9, Some(big.as_slice()))]);
        known.committed(10, [(Table::Jobs, "e", 10, Some(big.as_slice()))]);
        assert!(known.get_all(&[(Table::Jobs, "b".into())]).is_some());
        assert_eq!(known.get_all(&[(Table::Jobs, "c".into())]), None);
    }
}
