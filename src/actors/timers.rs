//! Actor timers: kept in this sidecar's memory (as daprd keeps them), one task each. A timer
//! fires at its due time, then one period after each callback returned, in the actor's turn;
//! a failed callback is logged and the timer goes on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::ActorRef;
use super::calls::timer_body;
use crate::clock::Clock;
use crate::schedule::period::{TimerError, TimerPlan};

/// What a timer calls on each tick: the runtime, which runs the callback in the actor's turn.
/// A trait with that one implementation on purpose: the runtime owns the timers, so
/// `timers.rs` naming `runtime.rs` would make the two files import each other.
#[async_trait::async_trait]
pub(super) trait Fire: Send + Sync + 'static {
    /// Calls the timer's callback; failures are the target's to log.
    async fn fire(&self, actor: &ActorRef, name: &str, body: Bytes);
}

/// A timer to register.
#[derive(Debug, Clone, Default)]
pub struct NewTimer {
    /// Whose timer.
    pub actor: ActorRef,
    /// Its name, unique per actor.
    pub name: String,
    /// First tick (empty: now).
    pub due_time: String,
    /// Between ticks (empty: fires once).
    pub period: String,
    /// When it stops (empty: never).
    pub ttl: String,
    /// The app method the SDK calls (echoed back).
    pub callback: String,
    /// Raw JSON handed back on every tick.
    pub data: Option<Vec<u8>>,
}

impl NewTimer {
    /// The timer's schedule at `now`.
    pub fn plan(&self, now: chrono::DateTime<chrono::Utc>) -> Result<TimerPlan, TimerError> {
        let key = format!("{}||{}", self.actor, self.name);
        TimerPlan::new(&key, &self.due_time, &self.period, &self.ttl, now)
    }
}

/// The running timers; cheap to clone (one `Arc`).
#[derive(Default, Clone)]
pub(super) struct Timers {
    inner: Arc<Registry>,
}

#[derive(Default)]
struct Registry {
    /// `(actor, name)` → the running task's stop token and generation.
    running: Mutex<HashMap<(ActorRef, String), (u64, CancellationToken)>>,
    /// Generations, so a finished task never removes its replacement.
    next: Mutex<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Timers {
    /// Starts `timer` (replacing one of the same name).
    pub(super) fn start(
        &self,
        target: Arc<dyn Fire>,
        clock: Arc<dyn Clock>,
        timer: NewTimer,
        plan: TimerPlan,
    ) {
        let generation = {
            let mut next = lock(&self.inner.next);
            *next += 1;
            *next
        };
        let stop = CancellationToken::new();
        let key = (timer.actor.clone(), timer.name.clone());
        if let Some((_, old)) = lock(&self.inner.running).insert(key, (generation, stop.clone())) {
            old.cancel();
        }
        tokio::spawn(run(
            self.clone(),
            target,
            clock,
            timer,
            plan,
            generation,
            stop,
        ));
    }

    /// Stops a timer; a missing one is fine.
    pub(super) fn stop(&self, actor: &ActorRef, name: &str) {
        if let Some((_, token)) =
            lock(&self.inner.running).remove(&(actor.clone(), name.to_owned()))
        {
            token.cancel();
        }
    }

    /// Timers running.
    pub(super) fn len(&self) -> usize {
        lock(&self.inner.running).len()
    }

    /// Forgets a timer that finished, unless it was replaced meanwhile.
    fn finished(&self, actor: &ActorRef, name: &str, generation: u64) {
        let mut running = lock(&self.inner.running);
        let key = (actor.clone(), name.to_owned());
        if running.get(&key).is_some_and(|(g, _)| *g == generation) {
            running.remove(&key);
        }
    }
}

async fn run(
    timers: Timers,
    target: Arc<dyn Fire>,
    clock: Arc<dyn Clock>,
    timer: NewTimer,
    plan: TimerPlan,
    generation: u64,
    stop: CancellationToken,
) {
    let body = timer_body(
        timer.data.as_deref(),
        &timer.callback,
        &timer.due_time,
        &timer.period,
    );
    let mut fired = 0u32;
    let mut next = plan.next(0, clock.now());
    while let Some(at) = next {
        tokio::select! {
            () = stop.cancelled() => return,
            () = clock.sleep_until(at) => {}
        }
        target.fire(&timer.actor, &timer.name, body.clone()).await;
        fired = fired.saturating_add(1);
        next = plan.next(fired, clock.now());
    }
    timers.finished(&timer.actor, &timer.name, generation);
}
