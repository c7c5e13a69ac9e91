//! Dapr 1.18's concurrency limits, as its Scheduler enforces them
//! (`pkg/scheduler/server/internal/pool/loops/connections`).
//!
//! A sidecar names limits in its WatchJobs `initial`: at most N actor reminder triggers of an
//! actor type in flight at once, and optionally N per name within the type (the reminder's
//! `JobMetadata.concurrency_key`: a workflow's or an activity's name). Each limit is a gate
//! keyed `type` or `type:name` in the stream's namespace. A trigger passes every gate that
//! applies to it or none: it takes a slot of each at once, or waits, in order, in the queue
//! of its first gate (the type's when there is one). The slot is freed when the trigger is
//! answered (SUCCESS, FAILED, or undeliverable because its stream went away), and the first
//! waiting trigger that can take every gate it needs goes next.
//!
//! Limits are cluster-wide: with `count` replicas this one enforces its share of each limit,
//! `limit / count`, plus one for the replicas placed below `limit % count` (at least one, so
//! a limit below the replica count can exceed the limit rather than starve). A gate lives
//! while a stream names it; when the last such stream closes, its waiting triggers are
//! answered undeliverable (the engine keeps them for the next stream).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use crate::observe::SchedulerMetrics;
use crate::proto::dapr_scheduler as sv1;
use crate::proto::dapr_scheduler::concurrency_limit::Target as LimitTarget;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
use crate::trigger::TriggerResult;

/// Most triggers waiting at one gate (Dapr's `maxPendingPerGate`); beyond it a trigger is
/// answered FAILED.
const MAX_PENDING: usize = 100_000;

/// Where this replica stands among the replicas sharing the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Live replicas (at least 1).
    pub count: u32,
    /// This replica's position among them (0-based).
    pub index: u32,
}

impl Default for Place {
    fn default() -> Self {
        Place { count: 1, index: 0 }
    }
}

/// This replica's share of a cluster-wide limit (Dapr's `localLimitFromGlobal`).
fn local_limit(global: u32, place: Place) -> u32 {
    crate::jobs::concurrency::share(global, place.count, place.index)
}

/// A gate's identity: the stream namespace and `type` or `type:name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GateKey {
    namespace: String,
    key: String,
}

/// What a trigger needs of the gates, kept while it waits (the gates may change meanwhile).
#[derive(Debug, Clone)]
struct Wants {
    namespace: String,
    actor_type: String,
    name: Option<String>,
}

impl Wants {
    fn of(metadata: &sv1::JobMetadata) -> Option<Wants> {
        let Some(Target::Actor(actor)) = metadata.target.as_ref().and_then(|t| t.r#type.as_ref())
        else {
            return None;
        };
        Some(Wants {
            namespace: metadata.namespace.clone(),
            actor_type: actor.r#type.clone(),
            name: metadata.concurrency_key.clone(),
        })
    }
}

/// One limit's state on this replica.
struct Gate {
    /// The cluster-wide limit, as the newest stream naming it said.
    global: u32,
    /// Triggers holding a slot.
    current: u32,
    /// Triggers that need this gate first and wait for slots, oldest first.
    pending: VecDeque<Waiter>,
}

/// A trigger waiting at a gate.
struct Waiter {
    wants: Wants,
    /// Gets the trigger's slots, or why it cannot have any.
    wake: oneshot::Sender<Result<Permit, TriggerResult>>,
}

#[derive(Default)]
struct State {
    gates: HashMap<GateKey, Gate>,
    /// The gates each open stream named.
    streams: HashMap<u64, Vec<GateKey>>,
    place: Place,
}

impl State {
    /// The gates a trigger needs now: its type's, then its name's, those that exist.
    fn keys_for(&self, wants: &Wants) -> Vec<GateKey> {
        let mut keys = Vec::new();
        let type_key = GateKey {
            namespace: wants.namespace.clone(),
            key: wants.actor_type.clone(),
        };
        if self.gates.contains_key(&type_key) {
            keys.push(type_key);
        }
        if let Some(name) = &wants.name {
            let named = GateKey {
                namespace: wants.namespace.clone(),
                key: format!("{}:{name}", wants.actor_type),
            };
            if self.gates.contains_key(&named) {
                keys.push(named);
            }
        }
        keys
    }

    /// Takes a slot of every gate in `keys`, or none; the first gate that was full otherwise.
    fn acquire(&mut self, keys: &[GateKey], metrics: &SchedulerMetrics) -> Result<(), usize> {
        let place = self.place;
        if let Some(full) = keys.iter().position(|k| {
            self.gates
                .get(k)
                .is_some_and(|g| g.current >= local_limit(g.global, place))
        }) {
            return Err(full);
        }
        for k in keys {
            if let Some(g) = self.gates.get_mut(k) {
                g.current += 1;
                metrics.gate_inflight(&k.key, g.current as usize);
            }
        }
        Ok(())
    }

    /// Frees a slot of every gate in `keys` (gates gone since are skipped).
    fn release(&mut self, keys: &[GateKey], metrics: &SchedulerMetrics) {
        for k in keys {
            if let Some(g) = self.gates.get_mut(k) {
                g.current = g.current.saturating_sub(1);
                metrics.gate_inflight(&k.key, g.current as usize);
            }
        }
    }
}

/// The gates of one replica, shared by its streams.
#[derive(Clone, Default)]
pub struct Gates(Arc<Inner>);

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    metrics: SchedulerMetrics,
}

/// The slots one trigger holds; freed (and the next waiting trigger let through) on drop.
pub struct Permit {
    gates: Arc<Inner>,
    keys: Vec<GateKey>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let keys = std::mem::take(&mut self.keys);
        let inner = &self.gates;
        let mut state = inner.lock();
        state.release(&keys, &inner.metrics);
        for k in &keys {
            inner.drain(&mut state, k);
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the maps consistent before it can panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lets waiting triggers of gate `key` through while they can take every gate they need.
    fn drain(self: &Arc<Self>, state: &mut State, key: &GateKey) {
        let Some(gate) = state.gates.get_mut(key) else {
            return;
        };
        let mut queue = std::mem::take(&mut gate.pending);
        let mut kept = VecDeque::with_capacity(queue.len());
        while let Some(waiter) = queue.pop_front() {
            if waiter.wake.is_closed() {
                continue; // Its trigger was given up while it waited.
            }
            let keys = state.keys_for(&waiter.wants);
            match state.acquire(&keys, &self.metrics) {
                Ok(()) => {
                    let permit = Permit {
                        gates: self.clone(),
                        keys,
                    };
                    if let Err(Ok(mut permit)) = waiter.wake.send(Ok(permit)) {
                        // Given up just now: its slots go back at once (not through the
                        // permit's drop, which would take the lock held here).
                        let keys = std::mem::take(&mut permit.keys);
                        state.release(&keys, &self.metrics);
                    }
                }
                Err(full) => {
                    let blocked_here = keys.get(full) == Some(key);
                    kept.push_back(waiter);
                    if blocked_here {
                        // This gate is full: nobody behind can pass it either.
                        kept.extend(queue.drain(..));
                    }
                }
            }
        }
        if let Some(gate) = state.gates.get_mut(key) {
            gate.pending = kept;
            self.metrics.gate_pending(&key.key, gate.pending.len());
        } else {
            // The gate went away meanwhile (it cannot while the lock is held; kept for
            // safety): its waiters go back to the engine.
            for waiter in kept {
                let _ = waiter.wake.send(Err(TriggerResult::Undeliverable));
            }
        }
    }

    /// Drops the gates no open stream names; their waiting triggers are undeliverable.
    fn remove_orphans(&self, state: &mut State) {
        let named: std::collections::HashSet<&GateKey> = state.streams.values().flatten().collect();
        let orphans: Vec<GateKey> = state
            .gates
            .keys()
            .filter(|k| !named.contains(k))
            .cloned()
            .collect();
        for k in orphans {
            if let Some(gate) = state.gates.remove(&k) {
                for waiter in gate.pending {
                    let _ = waiter.wake.send(Err(TriggerResult::Undeliverable));
                }
                self.metrics.gate_pending(&k.key, 0);
            }
        }
    }
}

impl Gates {
    /// Gates recording Dapr's concurrency metrics into `metrics`.
    pub fn with_metrics(metrics: SchedulerMetrics) -> Self {
        Gates(Arc::new(Inner {
            state: Mutex::default(),
            metrics,
        }))
    }

    /// Stream `stream` of `namespace` opened naming `limits`: their gates exist (with the
    /// newest limit) while it is open.
    pub fn open_stream(&self, stream: u64, namespace: &str, limits: &[sv1::ConcurrencyLimit]) {
        let mut keys = Vec::new();
        let mut state = self.0.lock();
        for limit in limits {
            let Ok(global) = u32::try_from(limit.max_concurrent) else {
                continue;
            };
            let Some(LimitTarget::Actor(actor)) = &limit.target else {
                continue;
            };
            if global == 0 {
                continue;
            }
            let key = GateKey {
                namespace: namespace.to_owned(),
                key: match &limit.name {
                    Some(name) => format!("{}:{name}", actor.r#type),
                    None => actor.r#type.clone(),
                },
            };
            state
                .gates
                .entry(key.clone())
                .and_modify(|g| g.global = global)
                .or_insert_with(|| Gate {
                    global,
                    current: 0,
                    pending: VecDeque::new(),
                });
            keys.push(key);
        }
        let changed = keys.clone();
        if keys.is_empty() {
            state.streams.remove(&stream);
        } else {
            state.streams.insert(stream, keys);
        }
        self.0.remove_orphans(&mut state);
        // A raised limit lets waiting triggers through.
        for k in &changed {
            self.0.drain(&mut state, k);
        }
    }

    /// Stream `stream` closed: gates no other stream names go, with their waiting triggers.
    pub fn close_stream(&self, stream: u64) {
        let mut state = self.0.lock();
        if state.streams.remove(&stream).is_some() {
            self.0.remove_orphans(&mut state);
        }
    }

    /// The replicas changed: this one's shares follow, and waiting triggers use new room.
    pub fn set_place(&self, place: Place) {
        let mut state = self.0.lock();
        if state.place == place {
            return;
        }
        state.place = Place {
            count: place.count.max(1),
            index: place.index,
        };
        let keys: Vec<GateKey> = state.gates.keys().cloned().collect();
        for k in &keys {
            self.0.drain(&mut state, k);
        }
    }

    /// Every gate goes (the replica stops): waiting triggers are undeliverable.
    pub fn close_all(&self) {
        let mut state = self.0.lock();
        state.streams.clear();
        self.0.remove_orphans(&mut state);
    }

    /// Waits until the trigger of `metadata` may go out under the limits; the permit holds
    /// its slots until dropped. `Err` is the trigger's answer when it may not go: FAILED
    /// when its gate's queue is full, undeliverable when the gate went away. The trigger
    /// takes its place in the queue when this is called, not when the answer is awaited.
    pub fn admit(
        &self,
        metadata: &sv1::JobMetadata,
    ) -> impl std::future::Future<Output = Result<Permit, TriggerResult>> + Send + 'static {
        let now = self.try_admit(metadata);
        async move {
            match now {
                Admission::Now(answer) => answer,
                Admission::Later(waiting) => {
                    waiting.await.unwrap_or(Err(TriggerResult::Undeliverable))
                }
            }
        }
    }

    fn try_admit(&self, metadata: &sv1::JobMetadata) -> Admission {
        let none = || {
            Admission::Now(Ok(Permit {
                gates: self.0.clone(),
                keys: Vec::new(),
            }))
        };
        let Some(wants) = Wants::of(metadata) else {
            return none();
        };
        let mut state = self.0.lock();
        if state.gates.is_empty() {
            return none();
        }
        let keys = state.keys_for(&wants);
        let full = match state.acquire(&keys, &self.0.metrics) {
            Ok(()) => {
                return Admission::Now(Ok(Permit {
                    gates: self.0.clone(),
                    keys,
                }));
            }
            Err(full) => full,
        };
        self.0.metrics.gate_throttled(&keys[full].key);
        let first = keys[0].clone();
        let Some(gate) = state.gates.get_mut(&first) else {
            return Admission::Now(Err(TriggerResult::Undeliverable));
        };
        if gate.pending.len() >= MAX_PENDING {
            return Admission::Now(Err(TriggerResult::Failed));
        }
        let (wake, waiting) = oneshot::channel();
        gate.pending.push_back(Waiter { wants, wake });
        self.0.metrics.gate_pending(&first.key, gate.pending.len());
        Admission::Later(waiting)
    }
}

/// What [`Gates::admit`] knows at once.
enum Admission {
    Now(Result<Permit, TriggerResult>),
    Later(oneshot::Receiver<Result<Permit, TriggerResult>>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::dapr_scheduler::{ConcurrencyLimitActor, TargetActorReminder};

    fn limit(actor_type: &str, name: Option<&str>, max: i32) -> sv1::ConcurrencyLimit {
        sv1::ConcurrencyLimit {
            max_concurrent: max,
            name: name.map(str::to_owned),
            target: Some(LimitTarget::Actor(ConcurrencyLimitActor {
                r#type: actor_type.to_owned(),
            })),
        }
    }

    fn reminder(actor_type: &str, key: Option<&str>) -> sv1::JobMetadata {
        sv1::JobMetadata {
            app_id: "app".into(),
            namespace: "ns".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Actor(TargetActorReminder {
                    id: "1".into(),
                    r#type: actor_type.into(),
                })),
            }),
            concurrency_key: key.map(str::to_owned),
        }
    }

    /// Whether `admit` is still waiting after the runtime had a chance to run it.
    async fn waits<F: std::future::Future + Unpin>(f: &mut F) -> bool {
        tokio::select! {
            biased;
            _ = f => false,
            () = tokio::task::yield_now() => true,
        }
    }

    #[test]
    fn shares_of_a_limit_add_up_to_it_and_never_reach_zero() {
        let at = |count, index| Place { count, index };
        assert_eq!(local_limit(6, at(1, 0)), 6);
        let shares: Vec<u32> = (0..3).map(|i| local_limit(6, at(3, i))).collect();
        assert_eq!(shares, [2, 2, 2]);
        let shares: Vec<u32> = (0..3).map(|i| local_limit(7, at(3, i))).collect();
        assert_eq!(shares, [3, 2, 2]);
        assert_eq!(local_limit(2, at(3, 2)), 1);
    }

    #[tokio::test]
    async fn a_limit_of_one_lets_triggers_through_one_at_a_time_in_order() {
        let gates = Gates::default();
        gates.open_stream(1, "ns", &[limit("T", None, 1)]);
        let first = gates.admit(&reminder("T", None)).await.unwrap();
        let mut second = Box::pin(gates.admit(&reminder("T", None)));
        assert!(waits(&mut second).await);
        let mut third = Box::pin(gates.admit(&reminder("T", None)));
        assert!(waits(&mut third).await);
        // Other types and app jobs are not limited.
        drop(gates.admit(&reminder("U", None)).await.unwrap());
        drop(first);
        let second = second.await.unwrap();
        assert!(waits(&mut third).await);
        drop(second);
        drop(third.await.unwrap());
        drop(gates.admit(&reminder("T", None)).await.unwrap());
    }

    #[tokio::test]
    async fn a_named_gate_holds_only_its_name_and_both_must_have_room() {
        let gates = Gates::default();
        gates.open_stream(1, "ns", &[limit("T", None, 3), limit("T", Some("Send"), 1)]);
        let send = gates.admit(&reminder("T", Some("Send"))).await.unwrap();
        let mut send2 = Box::pin(gates.admit(&reminder("T", Some("Send"))));
        assert!(waits(&mut send2).await);
        // Another name passes: the type gate has room, the name has no gate.
        let other = gates.admit(&reminder("T", Some("Other"))).await.unwrap();
        let plain = gates.admit(&reminder("T", None)).await.unwrap();
        // The type gate is full now (3): even a free name waits.
        let mut other2 = Box::pin(gates.admit(&reminder("T", Some("Other"))));
        assert!(waits(&mut other2).await);
        // Freeing a type slot lets `other2` through past `send2`, which still waits on its name.
        drop(plain);
        let other2 = other2.await.unwrap();
        assert!(waits(&mut send2).await);
        drop(other);
        assert!(waits(&mut send2).await);
        drop(send);
        drop(send2.await.unwrap());
        drop(other2);
    }

    #[tokio::test]
    async fn the_last_stream_naming_a_gate_takes_its_waiters_back_to_the_engine() {
        let gates = Gates::default();
        gates.open_stream(1, "ns", &[limit("T", None, 1)]);
        gates.open_stream(2, "ns", &[limit("T", None, 1)]);
        let held = gates.admit(&reminder("T", None)).await.unwrap();
        let mut waiting = Box::pin(gates.admit(&reminder("T", None)));
        assert!(waits(&mut waiting).await);
        gates.close_stream(1);
        assert!(waits(&mut waiting).await, "stream 2 still names the gate");
        gates.close_stream(2);
        assert!(matches!(waiting.await, Err(TriggerResult::Undeliverable)));
        drop(held);
        // No gate now: nothing waits.
        drop(gates.admit(&reminder("T", None)).await.unwrap());
        drop(gates.admit(&reminder("T", None)).await.unwrap());
    }

    #[tokio::test]
    async fn a_trigger_given_up_while_waiting_frees_nothing_it_never_held() {
        let gates = Gates::default();
        gates.open_stream(1, "ns", &[limit("T", None, 1)]);
        let held = gates.admit(&reminder("T", None)).await.unwrap();
        let mut given_up = Box::pin(gates.admit(&reminder("T", None)));
        assert!(waits(&mut given_up).await);
        drop(given_up);
        let mut next = Box::pin(gates.admit(&reminder("T", None)));
        assert!(waits(&mut next).await);
        drop(held);
        let next = next.await.unwrap();
        let mut after = Box::pin(gates.admit(&reminder("T", None)));
        assert!(waits(&mut after).await, "the limit still holds");
        drop(next);
        drop(after.await.unwrap());
    }

    #[tokio::test]
    async fn a_replica_enforces_its_share_and_more_replicas_mean_less_each() {
        let gates = Gates::default();
        gates.open_stream(1, "ns", &[limit("T", None, 6)]);
        gates.set_place(Place { count: 3, index: 0 });
        let a = gates.admit(&reminder("T", None)).await.unwrap();
        let b = gates.admit(&reminder("T", None)).await.unwrap();
        let mut c = Box::pin(gates.admit(&reminder("T", None)));
        assert!(waits(&mut c).await);
        // One replica left: the whole limit is ours, and the waiting trigger goes.
        gates.set_place(Place::default());
        let c = c.await.unwrap();
        drop((a, b, c));
    }

    #[tokio::test]
    async fn a_namespace_s_limits_do_not_hold_another_s_triggers() {
        let gates = Gates::default();
        gates.open_stream(1, "other", &[limit("T", None, 1)]);
        let a = gates.admit(&reminder("T", None)).await.unwrap();
        let b = gates.admit(&reminder("T", None)).await.unwrap();
        drop((a, b));
    }
}
