//! The engine's in-memory view of the jobs it fires: one entry per job, a time-ordered queue
//! of the next fire times, and the set of staged (undeliverable) jobs.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::proto::dapr_scheduler as sv1;
use crate::schedule::{Counter, Plan};

/// One job as the trigger loop tracks it.
#[derive(Debug)]
pub struct Entry {
    /// Version of the job this entry fires; results of other versions are ignored.
    pub generation: u64,
    /// Which tracking of the job this is: a job let go of and taken back (a replica losing
    /// its lease, then getting the partition again) gets a new one, so that the late answer
    /// of a write made for the old one cannot move the new one back.
    pub incarnation: u32,
    /// When the job fires.
    pub plan: Plan,
    /// Progress as last persisted (or fresh).
    pub counter: Counter,
    /// Where the job's name starts in its key (names are what follows the owner's prefix).
    pub name_at: u32,
    /// Payload handed to the sink unchanged.
    pub data: Option<prost_types::Any>,
    /// Owner and target; shared by every job of the same owner.
    pub metadata: Arc<sv1::JobMetadata>,
    /// `traceparent` of the create request, if it had one.
    pub created_by: Option<Arc<str>>,
    /// Where the entry is in its cycle.
    pub state: State,
    /// Paused (by hand or by `onExhausted: pause`): once its trigger and result are done it
    /// parks in [`State::Paused`] instead of the queue, until resumed.
    pub paused: bool,
    /// The executions out of an `overlap: allow` job (`None` for every other job, and until
    /// its first tick is handed out).
    pub overlapping: Option<Box<Overlapping>>,
    /// `policy.concurrencyKey`: its triggers take a slot of the key's gate.
    pub concurrency_key: Option<Arc<str>>,
}

/// The executions of an `overlap: allow` job that are out at once. The entry's `counter` is
/// then the progress up to the oldest execution still out (what is persisted: after a
/// crash, every execution from there on runs again); each execution's retries are its own.
#[derive(Debug, Default)]
pub struct Overlapping {
    /// The counter after the last tick handed out: the next tick follows it.
    pub cursor: Counter,
    /// Executions handed out, oldest first; an ended one stays until every older one has
    /// ended too.
    pub out: VecDeque<Execution>,
}

/// One execution (tick) of an `overlap: allow` job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Execution {
    /// Its nominal tick.
    pub tick: DateTime<Utc>,
    /// It succeeded or was given up.
    pub ended: bool,
    /// When it is handed out again and as which attempt (a retry, or its target was down);
    /// `None` while it is at the sink.
    pub again: Option<(DateTime<Utc>, u32)>,
}

impl Entry {
    /// The job's name within its `key` (what follows the owner's prefix).
    pub fn name_in<'k>(&self, key: &'k str) -> &'k str {
        usize::try_from(self.name_at)
            .ok()
            .and_then(|at| key.get(at..))
            .unwrap_or(key)
    }
}

/// The cycle of an entry: queued → in flight → persisting → queued again (or gone); staged
/// when nobody could take its trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Waiting in the queue for this instant.
    Queued(DateTime<Utc>),
    /// Handed to the sink; at most one trigger per job is ever in flight.
    InFlight,
    /// The result is being written; the next fire time follows once it is durable.
    Persisting,
    /// Undeliverable: waits for its target to come back.
    Staged,
    /// Paused: neither queued nor staged until resumed.
    Paused,
    /// Due at this instant, waiting for a slot of its concurrency key's gate.
    Gated(DateTime<Utc>),
}

/// All entries, the fire-time queue and the staged set.
#[derive(Debug, Default)]
pub struct Jobs {
    /// Entries by composed key. Boxed: the map keeps spare buckets, and a spare bucket of a
    /// pointer costs far less than one of a whole entry.
    entries: HashMap<Arc<str>, Box<Entry>>,
    /// `(fire time, key)` of every queued entry; the first element fires next.
    queue: BTreeSet<(DateTime<Utc>, Arc<str>)>,
    /// Keys of staged entries, ordered so that a prefix is one range.
    staged: BTreeSet<Arc<str>>,
}

impl Jobs {
    /// Number of jobs tracked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Number of jobs waiting in the time queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Every entry, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &Entry)> {
        self.entries.iter().map(|(k, e)| (k, &**e))
    }

    /// The entry of `key`.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key).map(|e| &**e)
    }

    /// The entry of `key`, for updating its counter (not its state: use the methods below).
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Entry> {
        self.entries.get_mut(key).map(|e| &mut **e)
    }

    /// Makes room for `additional` more entries at once (before a bulk load).
    pub fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }

    /// Adds or replaces the entry of `key`, queued at `at` (or left out of the queue when
    /// `None`; parked when paused). A replaced entry's pending trigger is forgotten with it.
    pub fn insert(&mut self, key: Arc<str>, mut entry: Entry, at: Option<DateTime<Utc>>) {
        self.remove(&key);
        entry.state = match at {
            Some(_) if entry.paused => State::Paused,
            Some(at) => {
                self.queue.insert((at, key.clone()));
                State::Queued(at)
            }
            None => State::Persisting,
        };
        self.entries.insert(key, Box::new(entry));
    }

    /// Forgets `key` entirely.
    pub fn remove(&mut self, key: &str) -> Option<Box<Entry>> {
        let entry = self.entries.remove(key)?;
        self.unlink(key, entry.state);
        Some(entry)
    }

    /// Forgets every entry whose key starts with `prefix`.
    pub fn remove_prefix(&mut self, prefix: &str) -> usize {
        let keys = self.keys_where(|k| k.starts_with(prefix));
        for key in &keys {
            self.remove(key);
        }
        keys.len()
    }

    /// Keys of every entry `pred` accepts.
    pub fn keys_where(&self, pred: impl Fn(&str) -> bool) -> Vec<Arc<str>> {
        self.entries.keys().filter(|k| pred(k)).cloned().collect()
    }

    /// The earliest queued fire time.
    pub fn next_due(&self) -> Option<DateTime<Utc>> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Takes the earliest queued entry if it is due at `now`, marking it in flight.
    pub fn pop_due(&mut self, now: DateTime<Utc>) -> Option<(Arc<str>, DateTime<Utc>)> {
        let (at, _) = self.queue.first()?;
        if *at > now {
            return None;
        }
        let (at, key) = self.queue.pop_first()?;
        if let Some(entry) = self.entries.get_mut(&key) {
            entry.state = State::InFlight;
        }
        Some((key, at))
    }

    /// Queues `key` at `at` (parks it instead when it is paused).
    pub fn schedule(&mut self, key: &Arc<str>, at: DateTime<Utc>) {
        if let Some(entry) = self.entries.get_mut(key) {
            let paused = entry.paused;
            let next = if paused {
                State::Paused
            } else {
                State::Queued(at)
            };
            let old = std::mem::replace(&mut entry.state, next);
            self.unlink(key, old);
            if !paused {
                self.queue.insert((at, key.clone()));
            }
        }
    }

    /// Pauses `key`: out of the queue or the staged set at once; one in flight or persisting
    /// parks when it would be queued next.
    pub fn pause(&mut self, key: &Arc<str>) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.paused = true;
            if let State::Queued(at) | State::Gated(at) = entry.state {
                self.schedule(key, at);
            } else if entry.state == State::Staged {
                entry.state = State::Paused;
                self.staged.remove(key);
            }
        }
    }

    /// Resumes `key`: a parked entry is queued at `at` (`None`: it can fire no more, and is
    /// left for the caller to finish); one in flight or persisting goes on as usual.
    pub fn resume(&mut self, key: &Arc<str>, at: Option<DateTime<Utc>>) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.paused = false;
            if let (State::Paused, Some(at)) = (entry.state, at) {
                self.schedule(key, at);
            }
        }
    }

    /// Takes `key` out of the queue, in flight (its triggers are out, nothing is due).
    pub fn set_in_flight(&mut self, key: &str) {
        if let Some(entry) = self.entries.get_mut(key) {
            let old = std::mem::replace(&mut entry.state, State::InFlight);
            self.unlink(key, old);
        }
    }

    /// Gates `key`, due at `at`, until its concurrency key has a free slot (the caller keeps
    /// the line of waiters).
    pub fn gate(&mut self, key: &str, at: DateTime<Utc>) {
        if let Some(entry) = self.entries.get_mut(key) {
            let old = std::mem::replace(&mut entry.state, State::Gated(at));
            self.unlink(key, old);
        }
    }

    /// Marks `key` as waiting for its result to be written.
    pub fn set_persisting(&mut self, key: &str) {
        if let Some(entry) = self.entries.get_mut(key) {
            let old = std::mem::replace(&mut entry.state, State::Persisting);
            self.unlink(key, old);
        }
    }

    /// Stages `key` until its target is deliverable again (parks it when it is paused: it
    /// waits for its resume, then for its target).
    pub fn stage(&mut self, key: &Arc<str>) {
        if let Some(entry) = self.entries.get_mut(key) {
            let paused = entry.paused;
            let next = if paused { State::Paused } else { State::Staged };
            let old = std::mem::replace(&mut entry.state, next);
            self.unlink(key, old);
            if !paused {
                self.staged.insert(key.clone());
            }
        }
    }

    /// Staged keys starting with `prefix`, taken out of the staged set.
    pub fn unstage_prefix(&mut self, prefix: &str) -> Vec<Arc<str>> {
        let keys: Vec<Arc<str>> = self
            .staged
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        for key in &keys {
            self.staged.remove(key);
        }
        keys
    }

    /// Number of staged jobs.
    pub fn staged(&self) -> usize {
        self.staged.len()
    }

    fn unlink(&mut self, key: &str, state: State) {
        match state {
            State::Queued(at) => {
                self.queue.remove(&(at, Arc::from(key)));
            }
            State::Staged => {
                self.staged.remove(key);
            }
            // The runner's line of gated waiters skips keys no longer gated.
            State::InFlight | State::Persisting | State::Paused | State::Gated(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, TimeZone};

    use super::*;
    use crate::schedule::{Begin, FailurePolicy};

    fn entry() -> Entry {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        Entry {
            generation: 1,
            incarnation: 1,
            plan: Plan::new(
                None,
                None,
                Begin::DueTime(t),
                None,
                FailurePolicy::default(),
            ),
            counter: Counter::default(),
            name_at: 0,
            data: None,
            metadata: Arc::default(),
            created_by: None,
            concurrency_key: None,
            state: State::Persisting,
            overlapping: None,
            paused: false,
        }
    }

    #[test]
    fn pops_in_time_order_and_only_when_due() {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let mut jobs = Jobs::default();
        jobs.insert("b".into(), entry(), Some(t + TimeDelta::seconds(2)));
        jobs.insert("a".into(), entry(), Some(t + TimeDelta::seconds(1)));
        assert_eq!(jobs.pop_due(t), None);
        assert_eq!(jobs.next_due(), Some(t + TimeDelta::seconds(1)));
        let (k, _) = jobs.pop_due(t + TimeDelta::seconds(5)).unwrap();
        assert_eq!(&*k, "a");
        assert_eq!(jobs.get("a").unwrap().state, State::InFlight);
        let (k, _) = jobs.pop_due(t + TimeDelta::seconds(5)).unwrap();
        assert_eq!(&*k, "b");
        assert_eq!(jobs.pop_due(t + TimeDelta::seconds(5)), None);
    }

    #[test]
    fn replacing_and_removing_unlink_the_queue() {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let mut jobs = Jobs::default();
        jobs.insert("a".into(), entry(), Some(t));
        jobs.insert("a".into(), entry(), Some(t + TimeDelta::hours(1)));
        assert_eq!(jobs.next_due(), Some(t + TimeDelta::hours(1)));
        jobs.remove("a");
        assert_eq!(jobs.next_due(), None);
        assert_eq!(jobs.len(), 0);
    }

    #[test]
    fn a_paused_entry_parks_instead_of_queueing_until_resumed() {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let mut jobs = Jobs::default();
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        jobs.insert(a.clone(), entry(), Some(t));
        jobs.insert(b.clone(), entry(), Some(t));
        jobs.pause(&a);
        assert_eq!(jobs.get("a").unwrap().state, State::Paused);
        assert_eq!(jobs.queued(), 1);
        // One in flight when paused parks once its result is written.
        jobs.pop_due(t);
        jobs.pause(&b);
        assert_eq!(jobs.get("b").unwrap().state, State::InFlight);
        jobs.set_persisting(&b);
        jobs.schedule(&b, t + TimeDelta::seconds(1));
        assert_eq!(jobs.get("b").unwrap().state, State::Paused);
        assert_eq!(jobs.next_due(), None);
        jobs.stage(&b);
        assert_eq!(
            (jobs.staged(), jobs.get("b").unwrap().state),
            (0, State::Paused)
        );
        jobs.resume(&a, Some(t + TimeDelta::seconds(5)));
        assert_eq!(jobs.next_due(), Some(t + TimeDelta::seconds(5)));
        jobs.resume(&b, None);
        assert_eq!(
            jobs.get("b").unwrap().state,
            State::Paused,
            "left to the caller"
        );
        assert!(!jobs.get("b").unwrap().paused);
    }

    #[test]
    fn staging_by_prefix() {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let mut jobs = Jobs::default();
        for k in ["app||ns||a||1", "app||ns||a||2", "app||ns||ab||1"] {
            let key: Arc<str> = k.into();
            jobs.insert(key.clone(), entry(), Some(t));
            jobs.pop_due(t);
            jobs.stage(&key);
        }
        assert_eq!(jobs.staged(), 3);
        let released = jobs.unstage_prefix("app||ns||a||");
        assert_eq!(released.len(), 2);
        assert_eq!(jobs.staged(), 1);
        assert_eq!(jobs.remove_prefix("app||ns||ab||"), 1);
        assert_eq!(jobs.staged(), 0);
    }
}
