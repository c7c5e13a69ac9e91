//! Driving an engine on a manual clock: wait until it is idle, and step the clock through
//! every fire time so that each tick fires at its own instant.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use jobsd::clock::{Clock, ManualClock};
use jobsd::engine::Engine;
use tokio::sync::watch;

/// The trigger loop's state once it has looked at the clock as it is now: the first answer
/// may come before the loop saw a step of the clock, the second comes after a round that did
/// (each round fires what is due before it takes the next command). For tests asserting that
/// something did *not* fire: what the loop hands out is in `outstanding` at once, while the
/// app may see it only later.
#[allow(dead_code)]
pub async fn looked_at_the_clock(engine: &Engine) -> jobsd::engine::Stats {
    engine.sync().await.expect("the trigger loop runs");
    engine.sync().await.expect("the trigger loop runs")
}

/// Waits until nothing is out (at the app or a stream) or being written and nothing is due
/// (no tick, no lease deadline).
/// Only for tests whose receivers answer every trigger.
pub async fn settle(engine: &Engine, clock: &ManualClock) {
    for _ in 0..5000 {
        let s = engine.sync().await.expect("the trigger loop runs");
        if s.outstanding == 0 && s.next_event().is_none_or(|t| t > clock.now()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("the engine did not settle");
}

/// Steps the clock to `now + d`, stopping at every fire time (lease deadline, round of
/// reading due jobs in) on the way.
pub async fn run_for(engine: &Engine, clock: &ManualClock, d: TimeDelta) {
    let to = clock.now() + d;
    settle(engine, clock).await;
    loop {
        let s = engine.sync().await.expect("the trigger loop runs");
        let Some(next) = s.next_event() else {
            break;
        };
        if next > to {
            break;
        }
        if next > clock.now() {
            clock.set(next);
        }
        settle(engine, clock).await;
    }
    clock.set(to);
    settle(engine, clock).await;
}

/// A [`ManualClock`] whose timers a test can watch: handed to the code under test instead of
/// the bare clock (the test steps the [`ManualClock`] itself), it tells when a timer has
/// compared the clock, as it is now, with its deadline and gone on sleeping. That is the event
/// after which "it has not fired (yet)" is an assertion rather than a guess at how long a
/// pause it takes. A sleeper wakes at every forward step of the clock (as on a bare
/// [`ManualClock`]) and resolves once the clock reaches its deadline.
#[derive(Debug, Clone)]
pub struct WatchedClock {
    clock: ManualClock,
    /// For each deadline timers slept towards: the latest instant one of them saw and slept on.
    looks: Arc<watch::Sender<BTreeMap<DateTime<Utc>, DateTime<Utc>>>>,
    /// How many timers were set (`sleep_until` calls).
    armed: Arc<AtomicUsize>,
    /// The timers set and neither fired nor dropped yet: how many for each deadline.
    live: Arc<watch::Sender<BTreeMap<DateTime<Utc>, usize>>>,
}

/// Counts one timer in [`WatchedClock::live`] until its future is dropped.
struct Live {
    live: Arc<watch::Sender<BTreeMap<DateTime<Utc>, usize>>>,
    deadline: DateTime<Utc>,
}

impl Live {
    fn new(
        live: &Arc<watch::Sender<BTreeMap<DateTime<Utc>, usize>>>,
        deadline: DateTime<Utc>,
    ) -> Self {
        live.send_modify(|l| *l.entry(deadline).or_default() += 1);
        Live {
            live: live.clone(),
            deadline,
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.live.send_modify(|l| {
            if let Some(n) = l.get_mut(&self.deadline) {
                *n -= 1;
                if *n == 0 {
                    l.remove(&self.deadline);
                }
            }
        });
    }
}

impl WatchedClock {
    /// Watches the timers set on `clock`.
    pub fn new(clock: &ManualClock) -> Self {
        WatchedClock {
            clock: clock.clone(),
            looks: Arc::new(watch::channel(BTreeMap::new()).0),
            armed: Arc::new(AtomicUsize::new(0)),
            live: Arc::new(watch::channel(BTreeMap::new()).0),
        }
    }

    /// Waits (bounded by [`super::PATIENCE`]) until the timers armed now (set, neither fired
    /// nor dropped) with a deadline in `(from, to]` are `check`ed true by their number.
    pub async fn armed_in(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        what: &str,
        check: impl Fn(usize) -> bool,
    ) {
        let count = |l: &BTreeMap<DateTime<Utc>, usize>| -> usize {
            l.range((
                std::ops::Bound::Excluded(from),
                std::ops::Bound::Included(to),
            ))
            .map(|(_, n)| n)
            .sum()
        };
        let mut live = self.live.subscribe();
        tokio::time::timeout(super::PATIENCE, live.wait_for(|l| check(count(l))))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "timed out waiting for {what}; timers armed: {:?}",
                    *self.live.borrow()
                )
            })
            .expect("the sender lives in self");
    }

    /// Waits (bounded by [`super::PATIENCE`]) until a timer for `deadline` has looked at the
    /// clock at `at` or later and slept on: from then on it has not fired at `at`. Panics if
    /// that never happens (no such timer, or it fired instead).
    pub async fn slept_on(&self, deadline: DateTime<Utc>, at: DateTime<Utc>) {
        let mut looks = self.looks.subscribe();
        tokio::time::timeout(
            super::PATIENCE,
            looks.wait_for(|l| l.get(&deadline).is_some_and(|seen| *seen >= at)),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "no timer for {deadline} slept on at {at}; timers seen: {:?}",
                *self.looks.borrow()
            )
        })
        .expect("the sender lives in self");
    }

    /// How many timers were set on this clock so far.
    pub fn timers_armed(&self) -> usize {
        self.armed.load(Ordering::SeqCst)
    }
}

impl Clock for WatchedClock {
    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    fn sleep_until(
        &self,
        deadline: DateTime<Utc>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        // Counted when set, not when first polled: a timer in a future built and not yet
        // polled is already armed.
        self.armed.fetch_add(1, Ordering::SeqCst);
        let live = Live::new(&self.live, deadline);
        Box::pin(async move {
            let _live = live;
            loop {
                let now = self.clock.now();
                if now >= deadline {
                    return;
                }
                self.looks.send_modify(|l| {
                    let seen = l.entry(deadline).or_insert(now);
                    *seen = (*seen).max(now);
                });
                // Wakes at the clock's next forward step (a step made since `now` was read
                // resolves it at once), to compare again.
                self.clock
                    .sleep_until(now + TimeDelta::nanoseconds(1))
                    .await;
            }
        })
    }
}
