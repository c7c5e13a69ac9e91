//! Wall time, behind a trait: the only place that reads the system clock. Tests drive time
//! with [`ManualClock`] instead of sleeping.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::watch;

/// A source of wall-clock time that can also wait for an instant.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;

    /// Resolves once `now() >= deadline` (it may resolve later, never earlier).
    fn sleep_until(
        &self,
        deadline: DateTime<Utc>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The system clock, sleeping on tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(
        &self,
        deadline: DateTime<Utc>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            // Wall time can jump (NTP), so re-check after every sleep rather than trusting
            // one monotonic interval.
            loop {
                let left = deadline - Utc::now();
                if left <= TimeDelta::zero() {
                    return;
                }
                let left = left.to_std().unwrap_or_default();
                tokio::time::sleep(left.min(std::time::Duration::from_secs(60))).await;
            }
        })
    }
}

/// A clock that only moves when told to. Sleepers wake as soon as [`ManualClock::advance`] or
/// [`ManualClock::set`] passes their deadline.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<DateTime<Utc>>>,
    tick: Arc<watch::Sender<DateTime<Utc>>>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        let (tick, _) = watch::channel(start);
        ManualClock {
            now: Arc::new(Mutex::new(start)),
            tick: Arc::new(tick),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: TimeDelta) {
        let now = {
            let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
            *now += by;
            *now
        };
        self.tick.send_replace(now);
    }

    /// Sets the clock to `to` (which may be earlier than now).
    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = to;
        self.tick.send_replace(to);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sleep_until(
        &self,
        deadline: DateTime<Utc>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let mut rx = self.tick.subscribe();
        Box::pin(async move {
            // `wait_for` checks the current value first, so a deadline already passed
            // resolves at once.
            let _ = rx.wait_for(|now| *now >= deadline).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::TimeZone;

    use super::*;

    #[tokio::test]
    async fn manual_clock_wakes_sleepers_only_when_advanced_past_deadline() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let clock = ManualClock::new(start);
        let deadline = start + TimeDelta::seconds(10);
        let c = clock.clone();
        let sleeper = tokio::spawn(async move { c.sleep_until(deadline).await });

        clock.advance(TimeDelta::seconds(9));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished());

        clock.advance(TimeDelta::seconds(1));
        tokio::time::timeout(Duration::from_secs(5), sleeper)
            .await
            .expect("sleeper woke")
            .unwrap();
        assert_eq!(clock.now(), deadline);
        // A deadline in the past resolves at once.
        clock.sleep_until(start).await;
    }

    #[tokio::test]
    async fn system_clock_sleeps_until_deadline() {
        let clock = SystemClock;
        let deadline = clock.now() + TimeDelta::milliseconds(30);
        clock.sleep_until(deadline).await;
        assert!(clock.now() >= deadline);
    }
}
