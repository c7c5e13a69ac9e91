//! The jobs of owned partitions that fire past the horizon, known by key and time only.
//!
//! A member taking a partition over reads the jobs due before its horizon (now + `--horizon`)
//! and only the index keys of the others (each holds its job's next fire time, see
//! `store::etcd::partition`): a failover with millions of jobs stored reads the few due soon,
//! not all of them. As time moves on, the member reads the jobs whose time comes into the
//! horizon and hands them to the engine (`Engine::adopt_untracked`, which leaves alone a job
//! a watched change brought in first).
//!
//! A read-in job was read at some revision the jobs watch may not have passed yet: a change
//! of that job the watch brings up to that revision is already in what was read, and applying
//! it again would put an older version back. [`Far::seen`] tells the member to skip those.

use std::collections::{BTreeSet, HashMap, VecDeque};

use super::partition_of;

/// Far jobs by time, and the read-in jobs the watch has not caught up with.
#[derive(Debug, Default)]
pub(super) struct Far {
    /// `(fire time in ms, key)`.
    by_time: BTreeSet<(i64, String)>,
    /// Key → its fire time in `by_time`.
    at: HashMap<String, i64>,
    /// Key → the revision it was read in at, while the watch has not passed it.
    read_at: HashMap<String, i64>,
    /// `read_at` in the order of reading (revisions only grow), for pruning.
    reads: VecDeque<(i64, String)>,
}

impl Far {
    /// Keeps `key` as due at `ms` (replacing an earlier time).
    pub(super) fn insert(&mut self, key: String, ms: i64) {
        if let Some(old) = self.at.insert(key.clone(), ms) {
            self.by_time.remove(&(old, key.clone()));
        }
        self.by_time.insert((ms, key));
    }

    /// Forgets `key` (a watched change brings its new version, or it was deleted).
    pub(super) fn remove(&mut self, key: &str) {
        if let Some(ms) = self.at.remove(key) {
            self.by_time.remove(&(ms, key.to_owned()));
        }
    }

    /// Forgets every key `gone` accepts (their partitions were let go of).
    pub(super) fn forget_where(&mut self, gone: impl Fn(&str) -> bool) {
        self.by_time.retain(|(_, key)| !gone(key));
        self.at.retain(|key, _| !gone(key));
        self.read_at.retain(|key, _| !gone(key));
        self.reads.retain(|(_, key)| !gone(key));
    }

    /// Takes out up to `limit` keys due before `before`, earliest first.
    pub(super) fn take_due(&mut self, before: i64, limit: usize) -> Vec<(String, i64)> {
        let mut taken = Vec::new();
        while taken.len() < limit {
            let Some((ms, _)) = self.by_time.first() else {
                break;
            };
            if *ms >= before {
                break;
            }
            let (ms, key) = self.by_time.pop_first().expect("looked at above");
            self.at.remove(&key);
            taken.push((key, ms));
        }
        taken
    }

    /// Records that `keys` were read in at `revision`.
    pub(super) fn read_in(&mut self, keys: impl IntoIterator<Item = String>, revision: i64) {
        for key in keys {
            self.read_at.insert(key.clone(), revision);
            self.reads.push_back((revision, key));
        }
    }

    /// Whether a watched change of `key` at `revision` is in what was read in already; notes
    /// that the watch got to `revision`.
    pub(super) fn seen(&mut self, key: &str, revision: i64) -> bool {
        let seen = self.read_at.get(key).is_some_and(|at| revision <= *at);
        // The watch brings changes in revision order: reads before this one are passed.
        while let Some((at, _)) = self.reads.front() {
            if *at >= revision {
                break;
            }
            let (at, key) = self.reads.pop_front().expect("looked at above");
            if self.read_at.get(&key) == Some(&at) {
                self.read_at.remove(&key);
            }
        }
        seen
    }

    /// Far jobs kept.
    pub(super) fn len(&self) -> usize {
        self.at.len()
    }
}

/// Far jobs read in per etcd read.
const READ_IN_PAGE: usize = 1024;
/// Reads per round at most: the member loop also serves the watch and the lease.
const READ_IN_ROUNDS: usize = 16;

impl super::Member {
    /// The end of the horizon now (ms since the Unix epoch), if the member keeps one.
    pub(super) fn horizon_end(&self) -> Option<i64> {
        let span = chrono::TimeDelta::from_std(self.cfg.horizon?).ok()?;
        Some((self.engine.now() + span).timestamp_millis())
    }

    /// Reads in the far jobs whose time came within the horizon and hands them to the engine.
    /// What cannot be read stays far and is tried again next round.
    pub(super) async fn read_in_due(&mut self) {
        let Some(before) = self.horizon_end() else {
            return;
        };
        let count = self.cfg.partitions;
        for _ in 0..READ_IN_ROUNDS {
            let mut due = self.far.take_due(before, READ_IN_PAGE);
            if due.is_empty() {
                return;
            }
            // Entries of partitions let go of are dropped with them; never read another's.
            due.retain(|(key, _)| self.owned.contains(&partition_of(key, count)));
            let keys: Vec<String> = due.iter().map(|(key, _)| key.clone()).collect();
            match self.store.read_jobs(keys.clone()).await {
                Ok((jobs, revision)) => {
                    tracing::debug!(
                        jobs = jobs.len(),
                        far = self.far.len(),
                        "read in jobs now due"
                    );
                    self.far.read_in(keys, revision);
                    if !jobs.is_empty() {
                        self.engine.adopt_untracked(jobs);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read in jobs now due; retrying");
                    for (key, ms) in due {
                        self.far.insert(key, ms);
                    }
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_come_out_in_time_order_up_to_the_horizon() {
        let mut far = Far::default();
        far.insert("c".into(), 30);
        far.insert("a".into(), 10);
        far.insert("b".into(), 20);
        // A later time replaces the earlier one.
        far.insert("a".into(), 25);
        assert_eq!(far.len(), 3);
        assert_eq!(far.take_due(26, 10), [("b".into(), 20), ("a".into(), 25)]);
        assert_eq!(far.take_due(100, 0), []);
        far.remove("c");
        assert_eq!(far.take_due(100, 10), []);
        assert_eq!(far.len(), 0);
    }

    #[test]
    fn changes_up_to_the_read_revision_are_seen_and_later_ones_are_not() {
        let mut far = Far::default();
        far.read_in(["k".to_owned()], 50);
        assert!(far.seen("k", 40));
        assert!(far.seen("k", 50));
        assert!(!far.seen("other", 50));
        assert!(!far.seen("k", 51));
        // Past 50, the read is forgotten: the watch brought everything up to it.
        assert!(far.read_at.is_empty() && far.reads.is_empty());
    }

    #[test]
    fn letting_partitions_go_forgets_their_keys() {
        let mut far = Far::default();
        far.insert("a1".into(), 10);
        far.insert("b1".into(), 10);
        far.read_in(["a2".to_owned(), "b2".to_owned()], 7);
        far.forget_where(|k| k.starts_with('a'));
        assert_eq!(far.take_due(100, 10), [("b1".into(), 10)]);
        assert!(!far.seen("a2", 7));
        assert!(far.seen("b2", 7));
    }
}
