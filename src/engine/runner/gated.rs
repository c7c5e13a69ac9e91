//! Concurrency limits by key (`policy.concurrencyKey`, rules in
//! [`crate::jobs::concurrency`]): a due trigger of a job naming a key takes one of the key's
//! slots when it is handed to the sink and gives it back when the sink answers. With every
//! slot taken it waits, gated, out of the time queue (so it holds none of the sink's room and
//! other keys' triggers go on), in line behind the key's earlier waiters; a slot freed, or a
//! rule raised, queues the first waiter again at its due time. The limit is the owner's rule
//! for the key, this replica's share of it in a cluster.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::*;
use crate::jobs::concurrency::{KeyState, Rules, share};

/// A key's gate: the job owner's prefix and the concurrency key.
pub(super) type GateId = (Arc<str>, Arc<str>);

/// The loop's gates.
#[derive(Debug, Default)]
pub(super) struct Gates {
    /// Rules by owner prefix.
    rules: HashMap<String, Rules>,
    /// This replica's place among `count` (`(count, index)`; `(1, 0)` alone).
    place: (u32, u32),
    /// Slots taken, by gate.
    taken: HashMap<GateId, u32>,
    /// The gate each job with a trigger out holds a slot of.
    holders: HashMap<Arc<str>, GateId>,
    /// Gated jobs, by gate, in the order they fell due.
    waiting: HashMap<GateId, VecDeque<Arc<str>>>,
}

impl Gates {
    /// The slots gate `id` has here: the share of its rule's limit (`None`: no rule).
    fn limit(&self, id: &GateId) -> Option<u32> {
        let (count, index) = self.place;
        let (_, global) = self.rules.get(&*id.0)?.resolve(&id.1)?;
        Some(share(global, count.max(1), index))
    }
}

impl Runner {
    /// The gate of `entry` (job `key`), if its job names a concurrency key.
    fn gate_of(key: &Arc<str>, entry: &Entry) -> Option<GateId> {
        let concurrency_key = entry.concurrency_key.clone()?;
        let owner = key.get(..usize::try_from(entry.name_at).ok()?)?;
        Some((Arc::from(owner), concurrency_key))
    }

    /// Whether the trigger of job `key` due at `at` may go now: it takes a slot of its gate
    /// (or has no gate). Otherwise the job is gated, in line behind the gate's waiters.
    pub(super) fn admit(&mut self, key: &Arc<str>, at: DateTime<Utc>) -> bool {
        let Some(entry) = self.jobs.get(key) else {
            return true;
        };
        let Some(id) = Self::gate_of(key, entry) else {
            return true;
        };
        let taken = self.gates.taken.get(&id).copied().unwrap_or(0);
        if self.gates.limit(&id).is_some_and(|limit| taken >= limit) {
            self.jobs.gate(key, at);
            self.gates
                .waiting
                .entry(id)
                .or_default()
                .push_back(key.clone());
            return false;
        }
        *self.gates.taken.entry(id.clone()).or_default() += 1;
        self.gates.holders.insert(key.clone(), id);
        true
    }

    /// The sink answered job `key`'s trigger: its slot is free, and the gate's first waiter
    /// goes next.
    pub(super) fn release_slot(&mut self, key: &str) {
        let Some(id) = self.gates.holders.remove(key) else {
            return;
        };
        if let Some(taken) = self.gates.taken.get_mut(&id) {
            *taken = taken.saturating_sub(1);
            if *taken == 0 {
                self.gates.taken.remove(&id);
            }
        }
        self.wake(&id);
    }

    /// Queues again as many of gate `id`'s waiters as it has free slots (each takes its slot
    /// when it fires, through [`Runner::admit`]).
    fn wake(&mut self, id: &GateId) {
        let taken = self.gates.taken.get(id).copied().unwrap_or(0);
        let mut free = match self.gates.limit(id) {
            Some(limit) => limit.saturating_sub(taken),
            None => u32::MAX,
        };
        let Some(line) = self.gates.waiting.get_mut(id) else {
            return;
        };
        while free > 0 {
            let Some(key) = line.pop_front() else {
                break;
            };
            // A waiter deleted, paused or replaced meanwhile is no longer gated.
            if let Some(State::Gated(at)) = self.jobs.get(&key).map(|e| e.state) {
                self.jobs.schedule(&key, at);
                free -= 1;
            }
        }
        if line.is_empty() {
            self.gates.waiting.remove(id);
        }
    }

    /// New rules (every owner's), or a new place among the replicas: waiters of gates that
    /// now have room go.
    pub(super) fn set_gates(
        &mut self,
        rules: Option<HashMap<String, Rules>>,
        place: Option<(u32, u32)>,
    ) {
        if let Some(rules) = rules {
            self.gates.rules = rules;
        }
        if let Some(place) = place {
            self.gates.place = place;
        }
        let ids: Vec<GateId> = self.gates.waiting.keys().cloned().collect();
        for id in ids {
            self.wake(&id);
        }
    }

    /// The keys of `owner` with triggers out or waiting here, with their rules.
    pub(super) fn key_states(&self, owner: &str) -> Vec<KeyState> {
        let rules = self.gates.rules.get(owner);
        let mut keys: BTreeMap<Arc<str>, KeyState> = BTreeMap::new();
        let ids = self.gates.taken.keys().chain(self.gates.waiting.keys());
        for id in ids.filter(|id| &*id.0 == owner) {
            keys.entry(id.1.clone()).or_insert_with(|| KeyState {
                key: id.1.to_string(),
                rule: rules.and_then(|r| r.resolve(&id.1)),
                in_flight: self.gates.taken.get(id).copied().unwrap_or(0),
                waiting: self.gates.waiting.get(id).map_or(0, |line| {
                    let gated = line
                        .iter()
                        .filter(|k| {
                            matches!(self.jobs.get(k).map(|e| e.state), Some(State::Gated(_)))
                        })
                        .count();
                    u32::try_from(gated).unwrap_or(u32::MAX)
                }),
            });
        }
        keys.into_values()
            .filter(|k| k.in_flight > 0 || k.waiting > 0)
            .collect()
    }

    /// Why job `key` waits, when it is gated: its key, the rule and how many are out.
    pub(super) fn gated_why(&self, key: &Arc<str>) -> Option<String> {
        let entry = self.jobs.get(key)?;
        if !matches!(entry.state, State::Gated(_)) {
            return None;
        }
        let id = Self::gate_of(key, entry)?;
        let taken = self.gates.taken.get(&id).copied().unwrap_or(0);
        let (rule, global) = self.gates.rules.get(&*id.0)?.resolve(&id.1)?;
        let here = self.gates.limit(&id).unwrap_or(global);
        let share = if here == global {
            String::new()
        } else {
            format!(", {here} of them on this replica")
        };
        Some(format!(
            "concurrency key {:?} is at its limit: {taken} in flight, rule {rule:?} allows \
             {global}{share}",
            &*id.1
        ))
    }
}
