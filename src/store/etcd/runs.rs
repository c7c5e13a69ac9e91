//! The run records a batch writes without reading them.
//!
//! A batch reads and compares the jobs, counters and finished records its ops need
//! (`overlay.rs`), but never a run record: the ops put, prune and clear runs blind, and this
//! journal turns what they did into the txn's puts and deletes.
//!
//! # Why blind writes are safe
//!
//! The txn commits only if every key the batch read is unchanged, so the batch's meaning is
//! that of applying it at the txn's own revision, for everything computed from what it read.
//! What it writes to the runs table is such a thing: no op's result or other write depends on
//! a run record (`apply/` never reads one; the removed counts and flags of run removals are
//! ignored), and which run keys an op writes follows from records it read and compared:
//!
//! - `RecordResult` puts run `seq` = the job's counter's `runs` and prunes `seq - limit`, only
//!   when the job has the record's generation: job and counter are compared, and the op always
//!   changes one of them (it puts the counter, or deletes both when the job finishes). Two
//!   writers recording a result of one job both read the counter; the second one's compare
//!   fails, it reads again and numbers its run after the first: no run is lost or written twice.
//! - `PutJob`, `DeleteJob`, a finishing `RecordResult` and `DeleteFinished` clear the job's
//!   runs by range, decided from the compared job, counter and finished records; `DeletePrefix`
//!   clears a range whatever it read. A range delete means the same at any revision.
//!
//! So the txn equals the batch applied at its revision, runs included, as if they had been
//! read and compared too, without reading up to `history_limit` runs per result.
//!
//! etcd refuses a txn that puts a key inside a range it deletes. A run put inside a range
//! cleared earlier in the same batch (a job put again, then a result of its new version)
//! splits that range around the put.

use super::client::prefix_end;

/// One change to the runs table, in the order the ops made them.
#[derive(Debug, Clone)]
enum Change {
    /// Put a run under this key (without the table prefix).
    Put(String, Vec<u8>),
    /// Delete this key.
    Delete(String),
    /// Delete every key starting with this prefix.
    Clear(String),
}

/// One write of the txn, with full etcd keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Write {
    /// Put the value under the key.
    Put(Vec<u8>, Vec<u8>),
    /// Delete the key.
    Delete(Vec<u8>),
    /// Delete the keys from the first (included) to the second (excluded).
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// The changes a batch made to the runs table so far.
#[derive(Debug, Default)]
pub(super) struct RunWrites {
    /// In the order made.
    changes: Vec<Change>,
}

impl RunWrites {
    /// Puts `value` under run key `key`.
    pub(super) fn put(&mut self, key: &str, value: Vec<u8>) {
        self.changes.push(Change::Put(key.to_owned(), value));
    }

    /// Deletes run key `key`.
    pub(super) fn delete(&mut self, key: &str) {
        self.changes.push(Change::Delete(key.to_owned()));
    }

    /// Deletes every run key starting with `prefix`.
    pub(super) fn clear(&mut self, prefix: &str) {
        self.changes.push(Change::Clear(prefix.to_owned()));
    }

    /// A point to [`rollback`](Self::rollback) to.
    pub(super) fn mark(&self) -> usize {
        self.changes.len()
    }

    /// Forgets the changes made since `mark` (a request that failed as a whole).
    pub(super) fn rollback(&mut self, mark: usize) {
        self.changes.truncate(mark);
    }

    /// The writes that leave the table under the full-key `prefix` as the changes did,
    /// whatever it held: no put inside a deleted range, no delete twice.
    pub(super) fn writes(&self, prefix: &str) -> Vec<Write> {
        // The last word on each key, and the prefixes cleared (each clear supersedes what
        // came before it under its prefix).
        let mut last: std::collections::BTreeMap<&str, Option<&[u8]>> = Default::default();
        let mut cleared: Vec<&str> = Vec::new();
        for change in &self.changes {
            match change {
                Change::Put(key, value) => {
                    last.insert(key.as_str(), Some(value.as_slice()));
                }
                Change::Delete(key) => {
                    last.insert(key.as_str(), None);
                }
                Change::Clear(p) => {
                    last.retain(|key, _| !key.starts_with(p.as_str()));
                    cleared.push(p.as_str());
                }
            }
        }
        // Prefixes either nest or are disjoint: keep the outermost ones. Sorted, a prefix
        // comes before every key it starts, and the kept ones are disjoint ranges, so only
        // the last kept one can contain the next.
        cleared.sort_unstable();
        let mut outer: Vec<&str> = Vec::new();
        for p in cleared {
            if !outer.last().is_some_and(|q| p.starts_with(q)) {
                outer.push(p);
            }
        }
        let full = |key: &str| format!("{prefix}{key}").into_bytes();
        let mut writes = Vec::new();
        for p in &outer {
            // The range minus the keys put inside it.
            let mut from = full(p);
            let end = prefix_end(&from);
            let puts = last
                .range(*p..)
                .take_while(|(key, _)| key.starts_with(p))
                .filter(|(_, value)| value.is_some());
            for (key, _) in puts {
                let at = full(key);
                if from < at {
                    writes.push(Write::DeleteRange(from, at.clone()));
                }
                from = at;
                from.push(0);
            }
            if from < end {
                writes.push(Write::DeleteRange(from, end));
            }
        }
        for (key, value) in last {
            match value {
                Some(value) => writes.push(Write::Put(full(key), value.to_vec())),
                // Already gone with its range.
                None if outer.iter().any(|p| key.starts_with(p)) => {}
                None => writes.push(Write::Delete(full(key))),
            }
        }
        writes
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::store::{run_key, runs_prefix};

    const PREFIX: &str = "ns/x-jobsd/runs/";

    fn b(s: &str) -> Vec<u8> {
        format!("{PREFIX}{s}").into_bytes()
    }

    #[test]
    fn a_put_after_a_clear_splits_the_range() {
        let (a0, a5, b1) = (run_key("a", 0), run_key("a", 5), run_key("b", 1));
        let mut w = RunWrites::default();
        w.clear(&runs_prefix("a"));
        w.put(&a0, b"r0".to_vec());
        w.delete(&a5);
        w.delete(&b1);
        assert_eq!(
            w.writes(PREFIX),
            vec![
                Write::DeleteRange(b("a\0"), b(&a0)),
                Write::DeleteRange(b(&format!("{a0}\0")), b("a\u{1}")),
                Write::Put(b(&a0), b"r0".to_vec()),
                Write::Delete(b(&b1)),
            ]
        );
    }

    #[test]
    fn a_clear_after_a_put_drops_the_put_and_outer_clears_win() {
        let mut w = RunWrites::default();
        w.put("ab\0x", b"r".to_vec());
        w.clear("ab\0");
        w.clear("a");
        w.clear("ab");
        assert_eq!(w.writes(PREFIX), vec![Write::DeleteRange(b("a"), b("b"))]);
    }

    #[test]
    fn a_rollback_forgets_later_changes() {
        let mut w = RunWrites::default();
        w.put("a\0x", b"1".to_vec());
        let mark = w.mark();
        w.clear("a\0");
        w.put("b\0x", b"2".to_vec());
        w.rollback(mark);
        assert_eq!(w.writes(PREFIX), vec![Write::Put(b("a\0x"), b"1".to_vec())]);
    }

    fn change() -> impl Strategy<Value = Change> {
        let key = proptest::sample::select(vec!["a\0", "a\0x", "a\0y", "ab\0", "ab\0x", "b\0x"]);
        let prefix = proptest::sample::select(vec!["", "a", "a\0", "ab\0", "b", "a\0x"]);
        prop_oneof![
            (key.clone(), 0..3u8).prop_map(|(k, v)| Change::Put(k.to_owned(), vec![v])),
            key.prop_map(|k| Change::Delete(k.to_owned())),
            prefix.prop_map(|p| Change::Clear(p.to_owned())),
        ]
    }

    proptest! {
        /// The writes leave any table as the changes applied one by one, and etcd would
        /// accept them (no put in a deleted range, no key put twice).
        #[test]
        fn writes_equal_the_changes_applied_in_order(
            changes in proptest::collection::vec(change(), 0..12),
            before in proptest::collection::btree_set(
                proptest::sample::select(vec!["a\0", "a\0x", "a\0y", "ab\0", "ab\0x", "b\0x", "c"]),
                0..7,
            ),
        ) {
            let start: BTreeMap<Vec<u8>, Vec<u8>> =
                before.iter().map(|k| (b(k), b"old".to_vec())).collect();
            let mut want = start.clone();
            for change in &changes {
                match change {
                    Change::Put(k, v) => {
                        want.insert(b(k), v.clone());
                    }
                    Change::Delete(k) => {
                        want.remove(&b(k));
                    }
                    Change::Clear(p) => want.retain(|k, _| !k.starts_with(&b(p))),
                }
            }
            let writes = RunWrites { changes }.writes(PREFIX);
            let mut got = start;
            let mut put = std::collections::BTreeSet::new();
            for w in &writes {
                match w {
                    Write::Delete(k) => {
                        got.remove(k);
                    }
                    Write::DeleteRange(from, to) => {
                        prop_assert!(from < to);
                        got.retain(|k, _| k < from || k >= to);
                    }
                    Write::Put(..) => {}
                }
            }
            for w in &writes {
                if let Write::Put(k, v) = w {
                    prop_assert!(put.insert(k.clone()), "put twice");
                    for d in &writes {
                        if let Write::DeleteRange(from, to) = d {
                            prop_assert!(k < from || k >= to, "put inside a deleted range");
                        }
                        prop_assert!(d != &Write::Delete(k.clone()), "put and deleted");
                    }
                    got.insert(k.clone(), v.clone());
                }
            }
            prop_assert_eq!(got, want);
        }
    }
}
