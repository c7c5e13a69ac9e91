//! Locks by job key. A write to a key and what the loop is told of it happen under that key's
//! lock, so the store and the loop see one key's changes in the same order. Writes to
//! different keys never wait on each other: two batches of creates are written side by side
//! (and the store's writer may put them in one commit) unless they share a key.
//!
//! Each key locked now has an entry in a map (sharded, to keep each map's mutex short),
//! removed when its last holder or waiter lets go. Every key lock also holds a shared guard
//! of one read–write lock, which [`KeyLocks::lock_all`] takes exclusively: a restore or a
//! delete by prefix waits for every key lock held, and keeps new ones out until it is done.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedMutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Shards of the map of locked keys.
const SHARDS: usize = 64;

/// The lock of one key, shared by its holder and its waiters.
type KeyLock = Arc<tokio::sync::Mutex<()>>;

/// The keys of one shard that are locked or waited for now.
type Shard = HashMap<Box<str>, KeyLock>;

/// Locks by key, and one lock over all keys.
pub(super) struct KeyLocks {
    /// Held shared by every key lock, exclusively by `lock_all`.
    all: RwLock<()>,
    /// The keys locked or waited for now.
    shards: Box<[Mutex<Shard>]>,
    /// Hashes keys to shards.
    hasher: RandomState,
}

/// Some keys locked, in ascending order; released on drop.
pub(super) struct KeysGuard<'a> {
    /// The keys' own locks (declared first: dropped before the shared guard).
    _held: Vec<Held<'a>>,
    /// The shared guard of `all`.
    _all: RwLockReadGuard<'a, ()>,
}

/// Every key locked: no key lock is held or taken until this is dropped.
pub(super) struct AllGuard<'a> {
    /// The exclusive guard of `all`.
    _all: RwLockWriteGuard<'a, ()>,
}

/// One key's lock, held.
struct Held<'a> {
    /// Where it came from.
    locks: &'a KeyLocks,
    /// The key.
    key: Box<str>,
    /// The guard of its lock; `None` once released.
    guard: Option<OwnedMutexGuard<()>>,
}

impl KeyLocks {
    /// No key locked.
    pub(super) fn new() -> Self {
        KeyLocks {
            all: RwLock::new(()),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }

    /// Locks `key`.
    pub(super) async fn lock(&self, key: &str) -> KeysGuard<'_> {
        self.lock_many([key]).await
    }

    /// Locks each of `keys` (duplicates are locked once), in ascending order, so that two
    /// callers never wait on each other's keys in a cycle.
    pub(super) async fn lock_many<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k str>,
    ) -> KeysGuard<'_> {
        let mut keys: Vec<&str> = keys.into_iter().collect();
        keys.sort_unstable();
        keys.dedup();
        // One shared guard for all the keys: a second one, asked for while `lock_all` waits,
        // would wait behind it while this caller holds keys it may be waiting for.
        let all = self.all.read().await;
        let mut held = Vec::with_capacity(keys.len());
        for key in keys {
            let lock = {
                let mut map = self.shard(key);
                Arc::clone(map.entry(key.into()).or_default())
            };
            let guard = lock.lock_owned().await;
            held.push(Held {
                locks: self,
                key: key.into(),
                guard: Some(guard),
            });
        }
        KeysGuard {
            _held: held,
            _all: all,
        }
    }

    /// Locks every key: waits until no key lock is held.
    pub(super) async fn lock_all(&self) -> AllGuard<'_> {
        AllGuard {
            _all: self.all.write().await,
        }
    }

    /// The map of `key`'s shard, locked.
    fn shard(&self, key: &str) -> std::sync::MutexGuard<'_, Shard> {
        let at = self.hasher.hash_one(key) as usize % SHARDS;
        self.shards[at]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Keys with an entry now (locked or waited for).
    #[cfg(test)]
    fn entries(&self) -> usize {
        (0..SHARDS)
            .map(|at| {
                self.shards[at]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .len()
            })
            .sum()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Released first, so that the count below sees only the map and other takers.
        drop(self.guard.take());
        let mut map = self.locks.shard(&self.key);
        // Clones are made under the map's mutex: a count of one (the map's) means nobody
        // holds or waits for this key, and nobody can start to before the entry is gone.
        if map
            .get(&*self.key)
            .is_some_and(|lock| Arc::strong_count(lock) == 1)
        {
            map.remove(&*self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Long enough for a task that could run to have run.
    const BLOCKED: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn one_key_waits_for_its_holder_and_other_keys_do_not() {
        let locks = Arc::new(KeyLocks::new());
        let held = locks.lock("a").await;
        let other = tokio::time::timeout(BLOCKED, locks.lock_many(["b", "c"])).await;
        assert!(other.is_ok(), "other keys are free");
        drop(other);
        let same = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                let _g = locks.lock_many(["c", "a"]).await;
            })
        };
        tokio::time::sleep(BLOCKED).await;
        assert!(!same.is_finished(), "`a` is held");
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), same)
            .await
            .expect("`a` released")
            .unwrap();
        assert_eq!(locks.entries(), 0, "no entry outlives its last taker");
    }

    #[tokio::test]
    async fn lock_all_waits_for_every_key_and_keeps_new_ones_out() {
        let locks = Arc::new(KeyLocks::new());
        let held = locks.lock("a").await;
        let all = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                let _g = locks.lock_all().await;
                tokio::time::sleep(BLOCKED).await;
            })
        };
        tokio::time::sleep(BLOCKED).await;
        assert!(!all.is_finished(), "`a` is held");
        // Queued behind `lock_all`: a new key lock waits for it.
        let later = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                let _g = locks.lock("b").await;
            })
        };
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), all)
            .await
            .expect("lock_all got every key")
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), later)
            .await
            .expect("a key after lock_all")
            .unwrap();
        assert_eq!(locks.entries(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn overlapping_batches_never_deadlock_and_each_key_has_one_holder() {
        let locks = Arc::new(KeyLocks::new());
        let inside = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
        let tasks: Vec<_> = (0..16)
            .map(|t| {
                let (locks, inside) = (Arc::clone(&locks), Arc::clone(&inside));
                tokio::spawn(async move {
                    for round in 0..50u32 {
                        // Keys in a different order each time; shared between tasks.
                        let keys: Vec<String> = (0..8)
                            .map(|i| format!("k{}", (t * 7 + round * 3 + i * 5) % 24))
                            .rev()
                            .collect();
                        let _g = locks.lock_many(keys.iter().map(String::as_str)).await;
                        let mut keys = keys;
                        keys.sort();
                        keys.dedup();
                        for k in &keys {
                            let mut map = inside.lock().unwrap();
                            let n = map.entry(k.clone()).or_default();
                            assert_eq!(*n, 0, "{k} has two holders");
                            *n = 1;
                        }
                        tokio::task::yield_now().await;
                        for k in &keys {
                            inside.lock().unwrap().insert(k.clone(), 0);
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .expect("no deadlock")
                .unwrap();
        }
        assert_eq!(locks.entries(), 0);
    }
}
