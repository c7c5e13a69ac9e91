//! Who fires which partition, as the member's last round read it from etcd: where a replica
//! sends a call that only a job's owner may apply (pause, resume, run by hand), since a change
//! written beside the owner's trigger loop would reach it only when it next reads the job.
//!
//! The owner then has the job read in first ([`Directory::bring_in`]): its trigger loop may
//! not hold it yet, because the job fires past the horizon (the member keeps it by key and
//! time only) or because the watch has not brought its create yet (a pause right after it).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::partition_of;

/// How long [`Directory::bring_in`] waits for the member loop.
const BRING_IN_WAIT: Duration = Duration::from_secs(10);
/// Most jobs the member loop reads in by one read of etcd.
const MAX_BRING_IN: usize = 512;

/// A request to the member loop: read job `key` in now if this member fires it, answering
/// whether it does and the job is in the trigger loop's hands.
pub(super) struct BringIn {
    pub key: String,
    pub reply: oneshot::Sender<bool>,
}

/// The owner of a job, as [`Directory::owner_of`] tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// This member fires the job's partition.
    Me,
    /// The member at this address does.
    At(String),
    /// Nobody does right now (a member died or gave it back, and the next has not taken it).
    Nobody,
}

/// A shared, cheap-to-clone view of the partition owners; the member loop keeps it current.
#[derive(Debug, Clone)]
pub struct Directory {
    partitions: u32,
    /// This member's address: a partition etcd still shows under it but that it no longer
    /// fires is changing hands.
    me: String,
    state: Arc<RwLock<State>>,
    /// To the member loop.
    bring_in: mpsc::Sender<BringIn>,
}

#[derive(Debug, Default)]
struct State {
    /// Partitions this member fires.
    own: BTreeSet<u32>,
    /// Partition → the address of the member holding it (this one's included).
    holders: HashMap<u32, String>,
}

impl Directory {
    /// An empty directory of the member at `me` in a cluster of `partitions` partitions
    /// (nobody owns anything yet), and where its member loop takes [`BringIn`] requests.
    pub(super) fn new(partitions: u32, me: &str) -> (Directory, mpsc::Receiver<BringIn>) {
        let (bring_in, requests) = mpsc::channel(MAX_BRING_IN);
        let directory = Directory {
            partitions,
            me: me.to_owned(),
            state: Arc::default(),
            bring_in,
        };
        (directory, requests)
    }

    /// Has the member read job `key` in now, with its progress as stored, unless its trigger
    /// loop holds it already; later watched changes up to that read are skipped. `false`
    /// when this member does not fire the job (any more), cannot read it, or has stopped.
    pub async fn bring_in(&self, key: &str) -> bool {
        let (reply, answer) = oneshot::channel();
        let request = BringIn {
            key: key.to_owned(),
            reply,
        };
        if self.bring_in.send(request).await.is_err() {
            return false;
        }
        matches!(
            tokio::time::timeout(BRING_IN_WAIT, answer).await,
            Ok(Ok(true))
        )
    }

    /// Who fires the job under the composed key `key`.
    pub fn owner_of(&self, key: &str) -> Owner {
        let p = partition_of(key, self.partitions);
        let state = self
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.own.contains(&p) {
            return Owner::Me;
        }
        match state.holders.get(&p) {
            Some(address) if *address != self.me => Owner::At(address.clone()),
            _ => Owner::Nobody,
        }
    }

    /// What the member fires now (`own`), and who holds each partition (`holders`: partition
    /// → address), from one read of etcd.
    pub(super) fn set(&self, own: &BTreeSet<u32>, holders: HashMap<u32, String>) {
        let mut state = self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.own.clone_from(own);
        state.holders = holders;
    }

    /// What the member fires now, the holders unchanged (it took or let go of partitions).
    pub(super) fn set_own(&self, own: &BTreeSet<u32>) {
        let mut state = self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.own.clone_from(own);
    }
}

impl super::Member {
    /// Reads the jobs of `first` and of the requests queued behind it (up to
    /// [`MAX_BRING_IN`] in all) in for calls only their owner applies (see the module doc),
    /// by one read of etcd: a bulk pause sends its calls many at a time, and the member loop
    /// takes them one batch after another.
    pub(super) async fn bring_in(&mut self, first: BringIn, queued: &mut mpsc::Receiver<BringIn>) {
        let mut requests = vec![first];
        while requests.len() < MAX_BRING_IN {
            match queued.try_recv() {
                Ok(request) => requests.push(request),
                Err(_) => break,
            }
        }
        let partitions = self.cfg.partitions;
        let (mine, others): (Vec<BringIn>, Vec<BringIn>) = requests
            .into_iter()
            .partition(|r| self.owned.contains(&partition_of(&r.key, partitions)));
        for request in others {
            let _ = request.reply.send(false);
        }
        if mine.is_empty() {
            return;
        }
        let keys: Vec<String> = mine.iter().map(|r| r.key.clone()).collect();
        let (jobs, revision) = match self.store.read_jobs(keys.clone()).await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(jobs = keys.len(), first = %keys[0], error = %e,
                    "cannot read jobs in for calls by hand");
                for request in mine {
                    let _ = request.reply.send(false);
                }
                return;
            }
        };
        for key in &keys {
            self.far.remove(key);
        }
        self.far.read_in(keys, revision);
        if !jobs.is_empty() {
            // Queued before the callers' own commands reach the trigger loop.
            self.engine.adopt_untracked(jobs);
        }
        for request in mine {
            let _ = request.reply.send(true);
        }
    }

    /// Tells the directory what this member fires and who holds the rest.
    pub(super) fn publish(&self) {
        self.directory.set(&self.owned, self.holders.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_mine_held_elsewhere_or_nobodys() {
        let (d, _requests) = Directory::new(4, "me:1");
        let keys: Vec<String> = (0..64)
            .map(|i| format!("app||default||myapp||j{i}"))
            .collect();
        let part = |k: &str| partition_of(k, 4);
        assert!(keys.iter().all(|k| d.owner_of(k) == Owner::Nobody));
        let own: BTreeSet<u32> = [0, 1].into();
        let holders = HashMap::from([
            (0, "me:1".to_owned()),
            (1, "me:1".to_owned()),
            (2, "other:2".to_owned()),
        ]);
        d.set(&own, holders);
        for k in &keys {
            let expected = match part(k) {
                0 | 1 => Owner::Me,
                2 => Owner::At("other:2".into()),
                _ => Owner::Nobody,
            };
            assert_eq!(d.owner_of(k), expected, "{k}");
        }
        // Letting go of partition 1: etcd still shows this member's key on it, but nothing
        // fires it here any more, so it is changing hands (not sent back to this member).
        d.set_own(&[0].into());
        let in_one = keys.iter().find(|k| part(k) == 1).unwrap();
        assert_eq!(d.owner_of(in_one), Owner::Nobody);
    }
}
