//! The held executions of a trigger loop (async completion): each one's job, attempt and
//! lease deadline, indexed by id, by deadline and by job key; the calls that came before the
//! answer holding their execution; and the executions ended lately, so that a repeated call
//! answers as the first did. What the loop does with them is `async_completion.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::engine::Error;
use crate::engine::convert::timestamp;
use crate::engine::history::Attempt;
use crate::jobs::{ExecutionCall, HeldExecution};
use crate::store;
use crate::trigger::ExecutionId;

/// Ended executions remembered (id, owner, how), so that a complete or fail sent again
/// answers as the first did.
const REMEMBERED: usize = 16_384;

/// Where a call on an execution is answered.
pub type CallReply = oneshot::Sender<Result<HeldExecution, Error>>;

/// An app's call on a held execution, on its way to the loop.
pub struct Call {
    /// The execution.
    pub id: ExecutionId,
    /// The caller's owner prefix: only executions of its jobs are visible to it.
    pub owner: String,
    /// What it asks.
    pub call: ExecutionCall,
    /// Answered once the change is written.
    pub reply: CallReply,
}

/// One held execution.
pub(super) struct Lease {
    /// Its job.
    pub(super) key: Arc<str>,
    /// The job version it was handed out for.
    pub(super) generation: u64,
    /// Where the job's name starts in `key`.
    pub(super) name_at: u32,
    /// The attempt as the app took it (its answer: held).
    pub(super) attempt: Attempt,
    /// When the lease runs out.
    pub(super) until: DateTime<Utc>,
    /// What a heartbeat without a length extends it by.
    pub(super) length: TimeDelta,
}

impl Lease {
    pub(super) fn view(&self) -> HeldExecution {
        let at = usize::try_from(self.name_at).unwrap_or(0);
        HeldExecution {
            execution_id: self.attempt.execution_id,
            name: self.key.get(at..).unwrap_or(&self.key).to_owned(),
            attempt: self.attempt.attempt,
            nominal: self.attempt.tick,
            started: self.attempt.started,
            lease_until: Some(self.until),
            ended: None,
        }
    }

    /// The record kept in the job's counter.
    pub(super) fn record(&self) -> store::HeldExecution {
        store::HeldExecution {
            execution_id: self.attempt.execution_id.as_bytes().to_vec(),
            nominal: Some(timestamp(self.attempt.tick)),
            attempt: self.attempt.attempt,
            started: Some(timestamp(self.attempt.started)),
            lease_until: Some(timestamp(self.until)),
            lease_nanos: self.length.num_nanoseconds().unwrap_or(i64::MAX),
            kind: String::new(),
        }
    }
}

/// An execution that ended, remembered for calls repeated on it.
pub(super) struct Ended {
    /// Its job.
    pub(super) key: Arc<str>,
    /// How it was when it ended.
    pub(super) view: HeldExecution,
}

/// The held executions of a loop.
#[derive(Default)]
pub(super) struct Leases {
    /// By id.
    pub(super) held: HashMap<ExecutionId, Lease>,
    /// `(deadline, id)`, earliest first.
    pub(super) deadlines: BTreeSet<(DateTime<Utc>, ExecutionId)>,
    /// Ids by job key, so that a deleted or replaced job lets its executions go.
    pub(super) by_key: BTreeMap<Arc<str>, Vec<ExecutionId>>,
    /// Calls that came before the answer that holds their execution, by id.
    early: HashMap<ExecutionId, Vec<Call>>,
    /// When each early call gives up (real time), oldest first: the grace is fixed, so the
    /// order of arrival is the order of deadlines. An id taken meanwhile is skipped.
    early_order: VecDeque<(Instant, ExecutionId)>,
    /// Recently ended executions, and their order (oldest first) to forget them.
    pub(super) ended: HashMap<ExecutionId, Ended>,
    pub(super) ended_order: VecDeque<ExecutionId>,
}

impl Leases {
    /// Executions held.
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    /// The earliest lease deadline.
    pub(super) fn next_deadline(&self) -> Option<DateTime<Utc>> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    /// When the first early call gives up.
    pub(super) fn early_deadline(&self) -> Option<Instant> {
        self.early_order.front().map(|(at, _)| *at)
    }

    /// Parks `call` until the answer that holds its execution comes, or until `deadline`.
    pub(super) fn park(&mut self, call: Call, deadline: Instant) {
        self.early_order.push_back((deadline, call.id));
        self.early.entry(call.id).or_default().push(call);
    }

    /// The early calls whose deadline has passed by `now`.
    pub(super) fn overdue_early(&mut self, now: Instant) -> Vec<Call> {
        let mut late = Vec::new();
        while let Some(&(at, id)) = self.early_order.front() {
            if at > now {
                break;
            }
            self.early_order.pop_front();
            late.extend(self.early.remove(&id).unwrap_or_default());
        }
        late
    }

    pub(super) fn insert(&mut self, lease: Lease) {
        let id = lease.attempt.execution_id;
        self.remove(id);
        // Held again (a retry): how an earlier attempt ended no longer answers for it.
        self.ended.remove(&id);
        self.deadlines.insert((lease.until, id));
        self.by_key.entry(lease.key.clone()).or_default().push(id);
        self.held.insert(id, lease);
    }

    pub(super) fn remove(&mut self, id: ExecutionId) -> Option<Lease> {
        let lease = self.held.remove(&id)?;
        self.deadlines.remove(&(lease.until, id));
        if let Some(ids) = self.by_key.get_mut(&lease.key) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                self.by_key.remove(&lease.key);
            }
        }
        Some(lease)
    }

    pub(super) fn extend(&mut self, id: ExecutionId, until: DateTime<Utc>, length: TimeDelta) {
        if let Some(lease) = self.held.get_mut(&id) {
            self.deadlines.remove(&(lease.until, id));
            lease.until = until;
            lease.length = length;
            self.deadlines.insert((until, id));
        }
    }

    /// Whether an execution of job `key` is held.
    pub(super) fn holds_for(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// Lets go of the executions of job `key` (`prefix`: of every job under it): deleted or
    /// replaced, their results would be ignored anyway.
    pub(super) fn forget(&mut self, key: &str, prefix: bool) {
        if self.by_key.is_empty() {
            return;
        }
        let ids: Vec<ExecutionId> = self
            .by_key
            .range::<str, _>((Bound::Included(key), Bound::Unbounded))
            .take_while(|(k, _)| {
                if prefix {
                    k.starts_with(key)
                } else {
                    &***k == key
                }
            })
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        for id in ids {
            self.remove(id);
        }
    }

    /// The early calls on `id`, taken.
    pub(super) fn take_early(&mut self, id: ExecutionId) -> Vec<Call> {
        if self.early.is_empty() {
            return Vec::new();
        }
        self.early.remove(&id).unwrap_or_default()
    }

    pub(super) fn remember(&mut self, key: Arc<str>, view: HeldExecution) {
        let id = view.execution_id;
        if self.ended.insert(id, Ended { key, view }).is_none() {
            self.ended_order.push_back(id);
        }
        while self.ended_order.len() > REMEMBERED {
            if let Some(old) = self.ended_order.pop_front() {
                self.ended.remove(&old);
            }
        }
    }
}
