//! Driving an engine on a manual clock: wait until it is idle, and step the clock through
//! every fire time so that each tick fires at its own instant.

use std::time::Duration;

use chrono::TimeDelta;
use jobsd::clock::{Clock, ManualClock};
use jobsd::engine::Engine;

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
