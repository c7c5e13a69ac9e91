//! Async completion in the trigger loop: executions the app answered "later" are held under a
//! lease (`policy.lease`, else [`DEFAULT_LEASE`]) instead of being applied. A held execution
//! keeps its job's place (the entry stays in flight, or its `overlap: allow` execution stays
//! out) but not the sink's capacity: a thousand held executions do not stop other jobs
//! firing. The app's heartbeat moves the lease's deadline; its complete or fail, or the
//! deadline passing (on the loop's clock), ends the attempt as a success or a failure that
//! goes the way every answer goes ([`Runner::apply_result`]), so the failure policy, overlap
//! and history treat it like any other attempt.
//!
//! Durable: the held execution is written into the job's counter (`held`) in the loop's
//! result batches, and the result that ends it removes it in the same op; at load it is held
//! again with its deadline (one already past fails at once), and its tick is not handed out
//! while it is held.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use tokio::time::Instant;

use super::held::Lease;
pub use super::held::{Call, CallReply};
use super::{Persisted, Runner};
use crate::engine::Error;
use crate::engine::convert::instant;
use crate::engine::history::{Attempt, bounded};
use crate::engine::queue::{Execution, Overlapping};
use crate::jobs::{Ending, ExecutionCall, HeldExecution};
use crate::schedule::job_policy::{DEFAULT_LEASE, MAX_CONCURRENT, MIN_LEASE};
use crate::schedule::{Outcome, Overlap};
use crate::store::{self, Op, OpResult, ResultRecord};
use crate::trigger::{ExecutionId, Report, TriggerResult};

/// How long a call on an execution the loop does not hold waits, while triggers are out,
/// for the answer that holds it: an app may call complete before its own `202` has reached
/// the loop.
const EARLY_GRACE: Duration = Duration::from_secs(2);

/// The error of an attempt whose lease ran out.
pub const LEASE_EXPIRED: &str = "lease expired";

/// What a written result does to held executions, and who waits for it.
pub(super) struct LeaseWrite {
    /// The execution (re)held: an app's "later" or a heartbeat; the result carries no run.
    hold: Option<store::HeldExecution>,
    /// The held execution the result's run ends.
    release: Option<ExecutionId>,
    /// Answered once written, with the execution as it is then.
    reply: Option<(CallReply, HeldExecution)>,
}

impl Runner {
    /// The sink's answer to `attempt`, unless it holds the execution: `None` when the
    /// execution is now held under a lease (the answer is then applied when the app ends it).
    /// A plain `202` holds only a job with `policy.lease`; for others it is a success.
    pub(super) fn unless_held(
        &mut self,
        key: &Arc<str>,
        generation: u64,
        mut attempt: Attempt,
    ) -> Option<Attempt> {
        let entry = self.jobs.get(key).filter(|e| e.generation == generation);
        let lease = entry.and_then(|e| e.plan.policy().lease);
        let hold = match attempt.report.result {
            TriggerResult::Held => entry.is_some(),
            TriggerResult::Accepted if lease.is_some() && entry.is_some() => true,
            TriggerResult::Accepted => {
                // Dapr's reading of every 2xx.
                attempt.report.result = TriggerResult::Success;
                false
            }
            _ => false,
        };
        if hold {
            self.hold(
                key.clone(),
                generation,
                attempt,
                lease.unwrap_or(DEFAULT_LEASE),
            );
            return None;
        }
        for call in self.leases.take_early(attempt.execution_id) {
            let _ = call.reply.send(Err(Error::ExecutionEnded(format!(
                "execution {} was not held: the app answered attempt {} at once",
                call.id, attempt.attempt
            ))));
        }
        Some(attempt)
    }

    /// Holds `attempt` of job `key` under a lease of `length` from now, and applies the
    /// calls on it that came before.
    fn hold(&mut self, key: Arc<str>, generation: u64, attempt: Attempt, length: TimeDelta) {
        let Some(entry) = self.jobs.get(&key) else {
            return;
        };
        let lease = Lease {
            key: key.clone(),
            generation,
            name_at: entry.name_at,
            until: self.clock.now() + length,
            length,
            attempt,
        };
        let id = lease.attempt.execution_id;
        tracing::debug!(key = %key, execution = %id, until = %lease.until, "execution held");
        let write = LeaseWrite {
            hold: Some(lease.record()),
            release: None,
            reply: None,
        };
        let counter = entry.counter;
        self.leases.insert(lease);
        self.push_result(Persisted {
            lease: Some(Box::new(write)),
            record_only: true,
            ..Persisted::step(key, generation, counter, None)
        });
        for call in self.leases.take_early(id) {
            self.execution_call(call);
        }
    }

    /// An app's call on a held execution ([`Command::Execution`](super::Command)).
    pub(super) fn execution_call(&mut self, call: Call) {
        let Call {
            id,
            owner,
            call: what,
            reply,
        } = call;
        let Some(lease) = self.leases.held.get(&id) else {
            if let Some(ended) = self
                .leases
                .ended
                .get(&id)
                .filter(|e| e.key.starts_with(&owner))
            {
                let _ = reply.send(repeated(&ended.view, &what));
            } else if self.in_sink > 0 {
                // Its answer may still be on its way to the loop.
                let call = Call {
                    id,
                    owner,
                    call: what,
                    reply,
                };
                self.leases.park(call, Instant::now() + EARLY_GRACE);
            } else {
                let _ = reply.send(Err(not_held(id)));
            }
            return;
        };
        if !lease.key.starts_with(&owner) {
            // Another app's: as if it did not exist.
            let _ = reply.send(Err(not_held(id)));
            return;
        }
        match what {
            ExecutionCall::Heartbeat(length) => {
                let length = length.unwrap_or(lease.length);
                let (key, generation) = (lease.key.clone(), lease.generation);
                self.leases.extend(id, self.clock.now() + length, length);
                let Some(lease) = self.leases.held.get(&id) else {
                    return;
                };
                let write = LeaseWrite {
                    hold: Some(lease.record()),
                    release: None,
                    reply: Some((reply, lease.view())),
                };
                self.push_result(Persisted {
                    lease: Some(Box::new(write)),
                    record_only: true,
                    ..Persisted::step(key, generation, Default::default(), None)
                });
            }
            ExecutionCall::Complete => self.end_held(id, Ending::Completed, None, Some(reply)),
            ExecutionCall::Fail(error) => {
                self.end_held(id, Ending::Failed, Some(error), Some(reply));
            }
        }
    }

    /// Ends held execution `id`: its attempt is applied as a success (`Completed`) or a
    /// failure with `error` (else "lease expired"), and its run releases the hold.
    fn end_held(
        &mut self,
        id: ExecutionId,
        ending: Ending,
        error: Option<String>,
        reply: Option<CallReply>,
    ) {
        let Some(lease) = self.leases.remove(id) else {
            return;
        };
        let mut view = lease.view();
        view.lease_until = None;
        view.ended = Some(ending);
        let mut attempt = lease.attempt;
        attempt.finished = self.clock.now();
        attempt.report = match ending {
            Ending::Completed => TriggerResult::Success.into(),
            _ => Report {
                error: Some(bounded(error.as_deref().unwrap_or(LEASE_EXPIRED))),
                ..TriggerResult::Failed.into()
            },
        };
        if ending == Ending::LeaseExpired {
            tracing::warn!(key = %lease.key, execution = %id, attempt = attempt.attempt, "lease expired; the attempt fails");
        }
        self.unhold_pending(id);
        self.ending = Some(Box::new(LeaseWrite {
            hold: None,
            release: Some(id),
            reply: reply.map(|r| (r, view.clone())),
        }));
        let (key, generation) = (lease.key.clone(), lease.generation);
        self.apply_result(key.clone(), generation, attempt);
        if let Some(left) = self.ending.take() {
            // No run was recorded (the job changed meanwhile): still let go of the record.
            if self
                .jobs
                .get(&key)
                .is_some_and(|e| e.generation == generation)
            {
                self.push_result(Persisted {
                    lease: Some(left),
                    record_only: true,
                    ..Persisted::step(key.clone(), generation, Default::default(), None)
                });
            } else if let Some((reply, _)) = left.reply {
                let _ = reply.send(Err(Error::ExecutionNotFound(format!(
                    "execution {id} ended: its job was deleted or replaced"
                ))));
            }
        }
        self.leases.remember(key, view);
    }

    /// Drops a hold of `id` not yet written: the result ending it goes in the same batch or
    /// later, so the hold need never reach the store.
    fn unhold_pending(&mut self, id: ExecutionId) {
        let bytes = id.as_bytes();
        self.pending.retain(|p| {
            !p.lease.as_ref().is_some_and(|w| {
                w.reply.is_none()
                    && w.release.is_none()
                    && w.hold.as_ref().is_some_and(|h| h.execution_id == bytes)
            })
        });
    }

    /// Fails the attempts whose lease ran out by the loop's clock, and gives up early calls
    /// that waited long enough.
    pub(super) fn expire_leases(&mut self) {
        if self.leases.early_deadline().is_some() {
            for call in self.leases.overdue_early(Instant::now()) {
                let _ = call.reply.send(Err(not_held(call.id)));
            }
        }
        let now = self.clock.now();
        while let Some((at, id)) = self.leases.deadlines.first().copied() {
            if at > now {
                break;
            }
            self.end_held(id, Ending::LeaseExpired, None, None);
        }
    }

    /// Holds again the executions a loaded job's counter kept: its tick stays in flight
    /// (for `overlap: allow`, the executions between its progress and the last held one run
    /// again, at least once, as after any restart).
    pub(super) fn restore_held(&mut self, key: &Arc<str>, held: Vec<store::HeldExecution>) {
        let Some(entry) = self.jobs.get(key) else {
            return;
        };
        let (generation, name_at) = (entry.generation, entry.name_at);
        let allow = matches!(entry.plan.policy().overlap, Overlap::Allow(_));
        let mut leases = Vec::new();
        for h in held {
            let id = ExecutionId::from_slice(&h.execution_id);
            let at = |t: &Option<prost_types::Timestamp>| t.as_ref().and_then(instant);
            let (Some(id), Some(tick), Some(started), Some(until)) =
                (id, at(&h.nominal), at(&h.started), at(&h.lease_until))
            else {
                tracing::warn!(key = %key, "unreadable held execution dropped");
                continue;
            };
            leases.push(Lease {
                key: key.clone(),
                generation,
                name_at,
                attempt: Attempt {
                    execution_id: id,
                    tick,
                    attempt: h.attempt,
                    // Only scheduled executions are held (runs by hand are not durable).
                    kind: crate::trigger::TriggerKind::Schedule,
                    started,
                    finished: started,
                    report: TriggerResult::Held.into(),
                },
                until,
                length: TimeDelta::nanoseconds(h.lease_nanos).max(MIN_LEASE),
            });
        }
        if leases.is_empty() {
            return;
        }
        if allow {
            self.restore_overlapping(key, &leases);
        } else {
            self.jobs.set_in_flight(key);
        }
        for lease in leases {
            self.leases.insert(lease);
        }
    }

    /// The executions out of a loaded `overlap: allow` job with held ones: every tick from
    /// its progress to the last held one, held or to run again now.
    fn restore_overlapping(&mut self, key: &Arc<str>, leases: &[Lease]) {
        let now = self.clock.now();
        let Some(entry) = self.jobs.get_mut(key) else {
            return;
        };
        let Some(last) = leases.iter().map(|l| l.attempt.tick).max() else {
            return;
        };
        let mut cursor = entry.counter;
        let mut out = VecDeque::new();
        while let Some(tick) = entry.plan.next_tick(&cursor) {
            if tick > last || out.len() >= MAX_CONCURRENT as usize {
                break;
            }
            let held = leases.iter().any(|l| l.attempt.tick == tick);
            out.push_back(Execution {
                tick,
                ended: false,
                again: (!held).then_some((now, 1)),
            });
            cursor = entry.plan.apply(&cursor, Outcome::Success).counter;
        }
        entry.overlapping = Some(Box::new(Overlapping { cursor, out }));
        self.requeue_overlapping(key);
    }
}

/// The store op of a result that only changes held executions (it carries no run); `None`
/// for every other result.
pub(super) fn lease_only_op(p: &Persisted) -> Option<Op> {
    let write = p.lease.as_ref().filter(|_| p.run.is_none())?;
    Some(Op::RecordResult(Box::new(ResultRecord {
        key: p.key.to_string(),
        generation: p.generation,
        hold: write.hold.clone(),
        release: write
            .release
            .map(|id| id.as_bytes().to_vec())
            .unwrap_or_default(),
        ..ResultRecord::default()
    })))
}

/// Makes the op of a result's run end the held execution it is the answer of.
pub(super) fn release_with(p: &Persisted, op: &mut Op) {
    if let (Some(id), Op::RecordResult(record)) = (p.lease.as_ref().and_then(|w| w.release), op) {
        record.release = id.as_bytes().to_vec();
    }
}

/// Answers whoever waits for a written result's change to held executions.
pub(super) fn lease_written(p: &mut Persisted) {
    let Some((reply, view)) = p.lease.as_mut().and_then(|w| w.reply.take()) else {
        return;
    };
    let answer = match &p.written {
        Some(Ok(OpResult::Skipped)) => Err(Error::ExecutionNotFound(format!(
            "execution {} ended: its job was deleted or replaced",
            view.execution_id
        ))),
        Some(Ok(_)) => Ok(view),
        Some(Err(e)) => Err(Error::Store(e.clone())),
        None => Err(Error::Store(store::Error::Closed)),
    };
    let _ = reply.send(answer);
}

/// The answer to `call` on an execution that already ended as `view` says: the same call
/// again answers the same, anything else is refused.
fn repeated(view: &HeldExecution, call: &ExecutionCall) -> Result<HeldExecution, Error> {
    let ending = view.ended.unwrap_or(Ending::Completed);
    let same = matches!(
        (call, ending),
        (ExecutionCall::Complete, Ending::Completed) | (ExecutionCall::Fail(_), Ending::Failed)
    );
    if same {
        return Ok(view.clone());
    }
    let id = view.execution_id;
    match call {
        ExecutionCall::Heartbeat(_) => Err(Error::ExecutionNotFound(format!(
            "execution {id} is not held: attempt {} ended ({})",
            view.attempt,
            ending.as_str()
        ))),
        _ => Err(Error::ExecutionEnded(format!(
            "execution {id} already ended: attempt {} {}",
            view.attempt,
            ending.as_str()
        ))),
    }
}

/// The error of a call on an execution this loop does not hold for the caller.
fn not_held(id: ExecutionId) -> Error {
    Error::ExecutionNotFound(format!(
        "execution {id} is not held (unknown, ended, or not of this app)"
    ))
}
