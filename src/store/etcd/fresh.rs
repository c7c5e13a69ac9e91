//! Job puts this store's writer committed with no counter beside them. Every create and
//! overwrite through the API leaves its job without a counter (`creates.rs`: a lean create
//! puts a job where none was, a thorough one drops the counter), so a cluster member that
//! sees such a put through its watch, at the very revision the writer committed it, knows
//! its counter without reading etcd ([`Etcd::read_counters`](super::Etcd::read_counters)).
//! Only the exact revision counts: a put of the same key by anyone else, or later, is read.
//! Bounded by [`MAX_ENTRIES`], oldest forgotten first: a put forgotten is only read.
//!
//! The watch may bring a put before the writer has its txn's answer, so the writer marks the
//! keys of a txn in flight ([`Fresh::sending`]) and a question about one of them waits for
//! that answer (at most [`IN_FLIGHT_WAIT`]: an answer is one round trip, a read another).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

/// Puts remembered at most (those the watch has not yet brought).
const MAX_ENTRIES: usize = 65_536;
/// How long a question waits for the answer of a txn in flight before the key is read.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(2);

/// Keys put with no counter, and the revision of that put.
#[derive(Default)]
pub(super) struct Fresh {
    state: Mutex<State>,
    /// Told when a txn in flight has its answer.
    answered: tokio::sync::Notify,
}

#[derive(Default)]
struct State {
    /// Each key's last counterless put.
    map: HashMap<String, i64>,
    /// Keys in the order they were put, with that revision (stale entries are skipped).
    order: VecDeque<(String, i64)>,
    /// Keys of txns in flight, with how many txns hold each.
    in_flight: HashMap<String, usize>,
}

/// The keys of one txn in flight; let go (answered or not) when dropped.
pub(super) struct Sending<'a> {
    fresh: &'a Fresh,
    keys: Vec<String>,
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.fresh.state();
            for key in &self.keys {
                if let Some(n) = state.in_flight.get_mut(key) {
                    *n -= 1;
                    if *n == 0 {
                        state.in_flight.remove(key);
                    }
                }
            }
        }
        self.fresh.answered.notify_waiters();
    }
}

impl Fresh {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every change is whole: a panic elsewhere cannot leave the map wrong.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The writer committed a put of `key` at `rev` that left it no counter.
    pub(super) fn put(&self, key: &str, rev: i64) {
        let mut state = self.state();
        state.map.insert(key.to_owned(), rev);
        state.order.push_back((key.to_owned(), rev));
        while state.map.len() > MAX_ENTRIES || state.order.len() > 2 * MAX_ENTRIES {
            let Some((old, at)) = state.order.pop_front() else {
                break;
            };
            if state.map.get(&old) == Some(&at) {
                state.map.remove(&old);
            }
        }
    }

    /// The deadline of questions asked now.
    pub(super) fn deadline() -> tokio::time::Instant {
        tokio::time::Instant::now() + IN_FLIGHT_WAIT
    }

    /// Marks `keys` as put by a txn in flight until the guard is dropped (after
    /// [`put`](Self::put) for a txn that committed).
    pub(super) fn sending(&self, keys: impl IntoIterator<Item = String>) -> Sending<'_> {
        let keys: Vec<String> = keys.into_iter().collect();
        let mut state = self.state();
        for key in &keys {
            *state.in_flight.entry(key.clone()).or_default() += 1;
        }
        Sending { fresh: self, keys }
    }

    /// Whether the put of `key` at `rev` is one [`put`](Self::put) was told of (and forgets it:
    /// the watch brings each put once). Waits for the answer of a txn in flight that puts it,
    /// until `deadline` (one for a whole batch of questions: [`Fresh::deadline`]).
    pub(super) async fn take(&self, key: &str, rev: i64, deadline: tokio::time::Instant) -> bool {
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            {
                let mut state = self.state();
                if state.map.get(key) == Some(&rev) {
                    state.map.remove(key);
                    return true;
                }
                if !state.in_flight.contains_key(key) {
                    return false;
                }
            }
            if tokio::time::timeout_at(deadline, answered).await.is_err() {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_put_at_its_revision_is_known() {
        let fresh = Fresh::default();
        fresh.put("a", 10);
        assert!(
            !fresh.take("a", 11, Fresh::deadline()).await,
            "another revision is someone else's put"
        );
        assert!(!fresh.take("b", 10, Fresh::deadline()).await);
        assert!(fresh.take("a", 10, Fresh::deadline()).await);
        assert!(!fresh.take("a", 10, Fresh::deadline()).await, "told once");
        fresh.put("a", 12);
        fresh.put("a", 13);
        assert!(
            !fresh.take("a", 12, Fresh::deadline()).await,
            "the later put replaces it"
        );
        assert!(fresh.take("a", 13, Fresh::deadline()).await);
    }

    #[tokio::test]
    async fn the_oldest_are_forgotten_beyond_the_bound() {
        let fresh = Fresh::default();
        for i in 0..=MAX_ENTRIES {
            fresh.put(&format!("k{i}"), i as i64 + 1);
        }
        assert!(!fresh.take("k0", 1, Fresh::deadline()).await);
        assert!(fresh.take("k1", 2, Fresh::deadline()).await);
        let last = format!("k{MAX_ENTRIES}");
        assert!(
            fresh
                .take(&last, MAX_ENTRIES as i64 + 1, Fresh::deadline())
                .await
        );
    }

    /// The watch brought the put before the writer had its answer: the question waits for it.
    #[tokio::test(start_paused = true)]
    async fn a_question_about_a_txn_in_flight_waits_for_its_answer() {
        let fresh = std::sync::Arc::new(Fresh::default());
        let sending = fresh.sending(["a".to_owned(), "b".to_owned()]);
        let asked = tokio::spawn({
            let fresh = fresh.clone();
            async move {
                (
                    fresh.take("a", 7, Fresh::deadline()).await,
                    fresh.take("b", 7, Fresh::deadline()).await,
                )
            }
        });
        tokio::task::yield_now().await;
        assert!(!asked.is_finished(), "answered before the txn was");
        fresh.put("a", 7);
        drop(sending);
        assert_eq!(asked.await.unwrap(), (true, false), "b was not put at 7");
        // A txn that never answers holds a question at most IN_FLIGHT_WAIT.
        let _stuck = fresh.sending(["c".to_owned()]);
        let started = tokio::time::Instant::now();
        assert!(!fresh.take("c", 9, Fresh::deadline()).await);
        assert_eq!(started.elapsed(), IN_FLIGHT_WAIT);
    }
}
