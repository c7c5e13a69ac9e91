//! Circuit breakers: a port of `github.com/sony/gobreaker` as Dapr configures it
//! (`pkg/resiliency/breaker/circuitbreaker.go`), with the `trip` condition as a CEL expression.
//!
//! The model is gobreaker's: [`Counts`] of the current *generation*, three [`State`]s, and a
//! new generation (counts cleared) on every state change and at every `interval` while closed.
//! The `trip` condition is compiled and evaluated in `trip.rs`.
//! A request that was admitted in one generation and finishes in another is not counted.
//! Time is passed in by the caller, so tests move it by hand.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

pub use super::counts::Counts;
pub use super::trip::Trip;

/// gobreaker's open-state period when `timeout` is 0.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Requests pass; failures are counted and checked against `trip`.
    Closed,
    /// A limited number of trial requests pass; one failure reopens.
    HalfOpen,
    /// Requests are rejected until `timeout` has passed.
    Open,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Closed => "closed",
            State::HalfOpen => "half-open",
            State::Open => "open",
        })
    }
}

/// Why a breaker refused a request. Both are permanent for the retry loop, as in Dapr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The breaker is open (gobreaker's `ErrOpenState`).
    #[error("circuit breaker is open")]
    Open,
    /// The breaker is half-open and its trial requests are taken (`ErrTooManyRequests`).
    #[error("too many requests")]
    TooManyRequests,
}

/// How a breaker is configured (one `circuitBreakers` entry).
#[derive(Debug, Clone, Default)]
pub struct BreakerSettings {
    /// Trial requests allowed while half-open; 0 means 1 (gobreaker).
    pub max_requests: u32,
    /// Period after which the closed-state counts are cleared; zero means never.
    pub interval: Duration,
    /// How long the breaker stays open before going half-open; zero means 60 s (gobreaker).
    pub timeout: Duration,
    /// When to open; `None` means gobreaker's default, `consecutiveFailures > 5`.
    pub trip: Option<Arc<Trip>>,
}

/// A circuit breaker (gobreaker's `CircuitBreaker`); shared by all calls it guards.
#[derive(Debug)]
pub struct CircuitBreaker {
    /// Name used in logs.
    name: String,
    /// Half-open trial budget, at least 1.
    max_requests: u32,
    /// Closed-state count reset period; zero means never.
    interval: Duration,
    /// Open-state period, never zero.
    timeout: Duration,
    /// `None`: `consecutiveFailures > 5`.
    trip: Option<Arc<Trip>>,
    /// State, generation and counts, changed under one lock.
    inner: Mutex<Inner>,
}

/// The mutable part of a breaker.
#[derive(Debug)]
struct Inner {
    /// Current state (as of the last time it was looked at).
    state: State,
    /// Bumped whenever the counts are cleared; results of older generations are dropped.
    generation: u64,
    /// Counts of the current generation.
    counts: Counts,
    /// Closed: when the counts are cleared next (`None`: never). Open: when it goes
    /// half-open (`None` only if `now + timeout` overflows `Instant`: then never).
    /// Half-open: unused.
    expiry: Option<Instant>,
}

impl CircuitBreaker {
    /// A closed breaker with `settings`, its first generation starting at `now`.
    pub fn new(name: impl Into<String>, settings: &BreakerSettings, now: Instant) -> Self {
        let cb = CircuitBreaker {
            name: name.into(),
            max_requests: settings.max_requests.max(1),
            interval: settings.interval,
            timeout: if settings.timeout.is_zero() {
                DEFAULT_TIMEOUT
            } else {
                settings.timeout
            },
            trip: settings.trip.clone(),
            inner: Mutex::new(Inner {
                state: State::Closed,
                generation: 0,
                counts: Counts::default(),
                expiry: None,
            }),
        };
        cb.to_new_generation(&mut cb.lock(), now);
        cb
    }

    /// The breaker's name (for logs).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The state at `now` (an open breaker whose timeout has passed is half-open).
    pub fn state(&self, now: Instant) -> State {
        let mut inner = self.lock();
        self.current_state(&mut inner, now);
        inner.state
    }

    /// The counts of the current generation.
    pub fn counts(&self) -> Counts {
        self.lock().counts
    }

    /// Asks to send a request at `now`. On admission returns the generation to hand back to
    /// [`CircuitBreaker::after_request`].
    pub fn before_request(&self, now: Instant) -> Result<u64, Rejection> {
        let mut inner = self.lock();
        self.current_state(&mut inner, now);
        match inner.state {
            State::Open => Err(Rejection::Open),
            State::HalfOpen if inner.counts.requests >= self.max_requests => {
                Err(Rejection::TooManyRequests)
            }
            _ => {
                inner.counts.on_request();
                Ok(inner.generation)
            }
        }
    }

    /// Records the outcome of a request admitted in `generation`.
    pub fn after_request(&self, generation: u64, success: bool, now: Instant) {
        let mut inner = self.lock();
        self.current_state(&mut inner, now);
        if inner.generation != generation {
            return;
        }
        match (inner.state, success) {
            (State::Closed, true) => inner.counts.on_success(),
            (State::HalfOpen, true) => {
                inner.counts.on_success();
                if inner.counts.consecutive_successes >= self.max_requests {
                    self.set_state(&mut inner, State::Closed, now);
                }
            }
            (State::Closed, false) => {
                inner.counts.on_failure();
                if self.ready_to_trip(&inner.counts) {
                    self.set_state(&mut inner, State::Open, now);
                }
            }
            (State::HalfOpen, false) => self.set_state(&mut inner, State::Open, now),
            (State::Open, _) => {}
        }
    }

    fn ready_to_trip(&self, counts: &Counts) -> bool {
        match &self.trip {
            Some(trip) => trip.ready_to_trip(counts),
            None => counts.consecutive_failures > 5,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while the lock is held (CEL runs under catch_unwind), and the state
        // is consistent between statements anyway, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn current_state(&self, inner: &mut Inner, now: Instant) {
        match inner.state {
            State::Closed => {
                if inner.expiry.is_some_and(|e| e < now) {
                    self.to_new_generation(inner, now);
                }
            }
            State::Open => {
                if inner.expiry.is_some_and(|e| e < now) {
                    self.set_state(inner, State::HalfOpen, now);
                }
            }
            State::HalfOpen => {}
        }
    }

    fn set_state(&self, inner: &mut Inner, state: State, now: Instant) {
        if inner.state == state {
            return;
        }
        let from = inner.state;
        inner.state = state;
        self.to_new_generation(inner, now);
        tracing::info!(breaker = %self.name, %from, to = %state, "circuit breaker changed state");
    }

    fn to_new_generation(&self, inner: &mut Inner, now: Instant) {
        inner.generation = inner.generation.wrapping_add(1);
        inner.counts = Counts::default();
        inner.expiry = match inner.state {
            State::Closed if self.interval.is_zero() => None,
            State::Closed => now.checked_add(self.interval),
            State::Open => now.checked_add(self.timeout),
            State::HalfOpen => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn trip(source: &str) -> Option<Arc<Trip>> {
        match Trip::compile(source) {
            Ok(t) => Some(Arc::new(t)),
            Err(e) => panic!("{source:?}: {e}"),
        }
    }

    /// Sends one request at `now` with the given outcome; returns whether it was admitted.
    fn call(cb: &CircuitBreaker, now: Instant, success: bool) -> Result<(), Rejection> {
        let generation = cb.before_request(now)?;
        cb.after_request(generation, success, now);
        Ok(())
    }

    #[test]
    fn default_trip_opens_after_six_consecutive_failures() {
        let t0 = Instant::now();
        let cb = CircuitBreaker::new("b", &BreakerSettings::default(), t0);
        for _ in 0..5 {
            assert_eq!(call(&cb, t0, false), Ok(()));
        }
        assert_eq!(cb.state(t0), State::Closed, "5 failures are not > 5");
        assert_eq!(call(&cb, t0, false), Ok(()));
        assert_eq!(cb.state(t0), State::Open);
        assert_eq!(call(&cb, t0, true), Err(Rejection::Open));
    }

    #[test]
    fn a_success_resets_consecutive_failures() {
        let t0 = Instant::now();
        let cb = CircuitBreaker::new("b", &BreakerSettings::default(), t0);
        for _ in 0..5 {
            let _ = call(&cb, t0, false);
        }
        let _ = call(&cb, t0, true);
        for _ in 0..5 {
            let _ = call(&cb, t0, false);
        }
        assert_eq!(cb.state(t0), State::Closed);
        assert_eq!(
            cb.counts(),
            Counts {
                requests: 11,
                total_successes: 1,
                total_failures: 10,
                consecutive_successes: 0,
                consecutive_failures: 5
            }
        );
    }

    #[test]
    fn cel_trip_sees_all_counters() {
        let t0 = Instant::now();
        let settings = BreakerSettings {
            trip: trip("consecutiveFailures >= 3 && requests > 10"),
            ..Default::default()
        };
        let cb = CircuitBreaker::new("b", &settings, t0);
        for _ in 0..8 {
            let _ = call(&cb, t0, true);
        }
        for _ in 0..2 {
            let _ = call(&cb, t0, false);
        }
        assert_eq!(cb.state(t0), State::Closed, "10 requests are not > 10");
        let _ = call(&cb, t0, false);
        assert_eq!(
            cb.state(t0),
            State::Open,
            "11 requests, 3 consecutive failures"
        );
    }

    #[test]
    fn open_goes_half_open_after_timeout_and_a_success_closes() {
        let t0 = Instant::now();
        let settings = BreakerSettings {
            timeout: secs(45),
            trip: trip("consecutiveFailures > 0"),
            ..Default::default()
        };
        let cb = CircuitBreaker::new("b", &settings, t0);
        let _ = call(&cb, t0, false);
        assert_eq!(
            cb.state(t0 + secs(45)),
            State::Open,
            "expiry must be passed, not reached"
        );
        let t1 = t0 + secs(45) + Duration::from_nanos(1);
        assert_eq!(cb.state(t1), State::HalfOpen);
        assert_eq!(call(&cb, t1, true), Ok(()));
        assert_eq!(cb.state(t1), State::Closed);
        assert_eq!(
            cb.counts(),
            Counts::default(),
            "a state change starts a new generation"
        );
    }

    #[test]
    fn half_open_failure_reopens_for_another_timeout() {
        let t0 = Instant::now();
        let settings = BreakerSettings {
            timeout: secs(10),
            trip: trip("consecutiveFailures > 0"),
            ..Default::default()
        };
        let cb = CircuitBreaker::new("b", &settings, t0);
        let _ = call(&cb, t0, false);
        let t1 = t0 + secs(11);
        assert_eq!(call(&cb, t1, false), Ok(()));
        assert_eq!(cb.state(t1), State::Open);
        assert_eq!(cb.state(t1 + secs(10)), State::Open);
        assert_eq!(cb.state(t1 + secs(11)), State::HalfOpen);
    }

    #[test]
    fn half_open_admits_max_requests_then_rejects() {
        let t0 = Instant::now();
        let settings = BreakerSettings {
            max_requests: 2,
            timeout: secs(1),
            trip: trip("consecutiveFailures > 0"),
            ..Default::default()
        };
        let cb = CircuitBreaker::new("b", &settings, t0);
        let _ = call(&cb, t0, false);
        let t1 = t0 + secs(2);
        let g1 = cb.before_request(t1);
        let g2 = cb.before_request(t1);
        assert!(g1.is_ok() && g2.is_ok());
        assert_eq!(cb.before_request(t1), Err(Rejection::TooManyRequests));
        // Two successes (= maxRequests) close it.
        cb.after_request(g1.unwrap_or_default(), true, t1);
        assert_eq!(cb.state(t1), State::HalfOpen);
        cb.after_request(g2.unwrap_or_default(), true, t1);
        assert_eq!(cb.state(t1), State::Closed);
    }

    #[test]
    fn zero_max_requests_means_one() {
        let t0 = Instant::now();
        let settings = BreakerSettings {
            timeout: secs(1),
            trip: trip("consecutiveFailures > 0"),
            ..Default::default()
        };
        let cb = CircuitBreaker::new("b", &settings, t0);
        let _ = call(&cb, t0, false);
        let t1 = t0 + secs(2);
        assert!(cb.before_request(t1).is_ok());
        assert_eq!(cb.before_request(t1), Err(Rejection::TooManyRequests));
    }

    #[test]
    fn zero_timeout_means_sixty_seconds() {
        let t0 = Instant::now();
        let settings = BreakerSettings {
            trip: trip("consecutiveFailures > 0"),
            ..Default::default()
        };
        let cb = CircuitBreaker::new("b", &settings, t0);
        let _ = call(&cb, t0, false);
        assert_eq!(cb.state(t0 + secs(60)), State::Open);
        assert_eq!(cb.state(t0 + secs(61)), State::HalfOpen);
    }

    #[test]
    fn interval_clears_closed_counts() {
        let t0 = Instant::now();
        let settings = BreakerSettings {
            interval: secs(8),
            ..Default::default()
        };
        let cb = CircuitBreaker::new("b", &settings, t0);
        for _ in 0..5 {
            let _ = call(&cb, t0, false);
        }
        let t1 = t0 + secs(9);
        let _ = call(&cb, t1, false);
        assert_eq!(
            cb.state(t1),
            State::Closed,
            "the counts were cleared at 8 s"
        );
        assert_eq!(cb.counts().consecutive_failures, 1);
        // Without an interval the same sequence trips.
        let cb = CircuitBreaker::new("b", &BreakerSettings::default(), t0);
        for _ in 0..5 {
            let _ = call(&cb, t0, false);
        }
        let _ = call(&cb, t1, false);
        assert_eq!(cb.state(t1), State::Open);
    }

    #[test]
    fn results_from_an_old_generation_are_ignored() {
        let t0 = Instant::now();
        let settings = BreakerSettings {
            interval: secs(1),
            ..Default::default()
        };
        let cb = CircuitBreaker::new("b", &settings, t0);
        let Ok(g) = cb.before_request(t0) else {
            panic!("closed breaker rejected")
        };
        cb.after_request(g, false, t0 + secs(2));
        assert_eq!(cb.counts(), Counts::default());
    }
}
