//! Delays between retries: a port of `github.com/cenkalti/backoff/v4` as Dapr uses it
//! (`dapr/kit/retry.Config.NewBackOff`): [`ConstantBackOff`], [`ExponentialBackOff`] and the
//! [`WithMaxRetries`] wrapper.
//!
//! [`ExponentialBackOff`] is jobsd's one growing backoff: besides the resiliency policies it
//! paces the reconnects to Scheduler replicas (gRPC's connect backoff) and the retries of etcd
//! calls (go-etcd-cron's), both [`ExponentialBackOff::endless`]. [`jittered`] is its jitter,
//! alone, for single pauses.
//!
//! Time and randomness are injected: every call takes the current [`Instant`], and the
//! exponential backoff draws its jitter from a [`fastrand::Rng`] the caller seeds. The policy
//! passes tokio's clock (`tokio::time::Instant::now()`), so the elapsed-time limit agrees with
//! the `tokio::time::sleep`s between attempts, paused test clocks included.

use std::time::{Duration, Instant};

/// A source of delays between attempts (cenkalti's `BackOff`). `None` plays the part of
/// `backoff.Stop`: give up and return the last failure.
pub trait BackOff {
    /// Back to the initial state; the elapsed-time limit counts from `now`.
    fn reset(&mut self, now: Instant);

    /// How long to wait before the next attempt, or `None` to stop retrying.
    fn next_backoff(&mut self, now: Instant) -> Option<Duration>;
}

/// The same delay every time (cenkalti's `ConstantBackOff`); it never stops by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantBackOff {
    /// The delay between attempts.
    pub interval: Duration,
}

impl ConstantBackOff {
    /// A backoff that always waits `interval`.
    pub fn new(interval: Duration) -> Self {
        ConstantBackOff { interval }
    }
}

impl BackOff for ConstantBackOff {
    fn reset(&mut self, _now: Instant) {}

    fn next_backoff(&mut self, _now: Instant) -> Option<Duration> {
        Some(self.interval)
    }
}

/// cenkalti's default initial interval (500 ms).
pub const DEFAULT_INITIAL_INTERVAL: Duration = Duration::from_millis(500);
/// cenkalti's default randomization factor: each delay is drawn from ±50 % of the interval.
pub const DEFAULT_RANDOMIZATION_FACTOR: f64 = 0.5;
/// cenkalti's default multiplier between consecutive intervals.
pub const DEFAULT_MULTIPLIER: f64 = 1.5;
/// cenkalti's default cap on the interval (60 s).
pub const DEFAULT_MAX_INTERVAL: Duration = Duration::from_secs(60);
/// cenkalti's default limit on the time since [`BackOff::reset`] (15 min).
pub const DEFAULT_MAX_ELAPSED_TIME: Duration = Duration::from_secs(15 * 60);

/// Growing, jittered delays (cenkalti's `ExponentialBackOff`, v4 semantics).
///
/// Delay *n* is drawn uniformly from `[i·(1−f), i·(1+f)]` where `i` is the current interval
/// and `f` the randomization factor; the interval then grows by `multiplier` up to
/// `max_interval` (the cap applies to the interval, not to the jittered delay). Once the time
/// since [`BackOff::reset`] plus the next delay would exceed `max_elapsed_time` it stops;
/// a zero `max_elapsed_time` never stops.
#[derive(Debug, Clone)]
pub struct ExponentialBackOff {
    /// The first interval.
    pub initial_interval: Duration,
    /// Jitter as a fraction of the interval, in `[0, 1]`; 0 means no randomness.
    pub randomization_factor: f64,
    /// Growth factor between intervals, at least 1.
    pub multiplier: f64,
    /// Upper bound of the interval.
    pub max_interval: Duration,
    /// Wall time after which no more retries are made; zero means never.
    pub max_elapsed_time: Duration,
    /// The interval the next delay is drawn around.
    current_interval: Duration,
    /// When the current run started (set by `reset`).
    start: Option<Instant>,
    /// Jitter source; seeded by the caller so tests are deterministic.
    rng: fastrand::Rng,
}

impl ExponentialBackOff {
    /// cenkalti's `NewExponentialBackOff` defaults, drawing jitter from `rng`. Call
    /// [`BackOff::reset`] before the first [`BackOff::next_backoff`]; until then elapsed time
    /// counts from the first call.
    pub fn new(rng: fastrand::Rng) -> Self {
        ExponentialBackOff {
            initial_interval: DEFAULT_INITIAL_INTERVAL,
            randomization_factor: DEFAULT_RANDOMIZATION_FACTOR,
            multiplier: DEFAULT_MULTIPLIER,
            max_interval: DEFAULT_MAX_INTERVAL,
            max_elapsed_time: DEFAULT_MAX_ELAPSED_TIME,
            current_interval: DEFAULT_INITIAL_INTERVAL,
            start: None,
            rng,
        }
    }

    /// Delays from `initial_interval` growing by `multiplier` up to `max_interval`, each drawn
    /// from ±`randomization_factor` of its interval, that never stop (no elapsed-time limit):
    /// for waiting on a peer that will come back. Jitter comes from a fresh random seed; take
    /// the delays with [`next_delay`](Self::next_delay).
    pub fn endless(
        initial_interval: Duration,
        multiplier: f64,
        max_interval: Duration,
        randomization_factor: f64,
    ) -> Self {
        ExponentialBackOff {
            initial_interval,
            randomization_factor,
            multiplier,
            max_interval,
            max_elapsed_time: Duration::ZERO,
            current_interval: initial_interval,
            start: None,
            rng: fastrand::Rng::new(),
        }
    }

    /// The interval the next delay will be drawn around.
    pub fn current_interval(&self) -> Duration {
        self.current_interval
    }

    /// The next delay, regardless of the elapsed-time limit (an [`endless`](Self::endless)
    /// backoff has none); the interval grows for the one after.
    pub fn next_delay(&mut self) -> Duration {
        let next = jittered(
            self.current_interval,
            self.randomization_factor,
            &mut self.rng,
        );
        self.increment_current_interval();
        next
    }

    fn increment_current_interval(&mut self) {
        let current = self.current_interval.as_nanos() as f64;
        let max = self.max_interval.as_nanos() as f64;
        // Same overflow guard as Go: compare before multiplying.
        if current >= max / self.multiplier {
            self.current_interval = self.max_interval;
        } else {
            self.current_interval = nanos_to_duration(current * self.multiplier);
        }
    }
}

/// gRPC's connection backoff, as daprd dials the Scheduler and as jobsd retries reaching
/// an app or a replica: 500 ms, ×1.6 per attempt, up to 3 s, ±20 % jitter.
pub fn connect_backoff() -> ExponentialBackOff {
    ExponentialBackOff::endless(Duration::from_millis(500), 1.6, Duration::from_secs(3), 0.2)
}

/// A delay drawn uniformly from `interval` ± `factor`·`interval` (cenkalti's
/// `getRandomValueFromInterval`), never below zero; `factor` 0 gives `interval` itself.
pub fn jittered(interval: Duration, factor: f64, rng: &mut fastrand::Rng) -> Duration {
    if factor == 0.0 {
        return interval;
    }
    let current = interval.as_nanos() as f64;
    let delta = factor * current;
    let min = current - delta;
    let max = current + delta;
    // Go adds 1 (ns) to the width so that both ends of the range can be drawn.
    nanos_to_duration(min + rng.f64() * (max - min + 1.0))
}

impl BackOff for ExponentialBackOff {
    fn reset(&mut self, now: Instant) {
        self.current_interval = self.initial_interval;
        self.start = Some(now);
    }

    fn next_backoff(&mut self, now: Instant) -> Option<Duration> {
        let start = *self.start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        let next = self.next_delay();
        if !self.max_elapsed_time.is_zero() && elapsed.saturating_add(next) > self.max_elapsed_time
        {
            return None;
        }
        Some(next)
    }
}

/// Go's `time.Duration(float64)`, saturating instead of wrapping (`as` saturates and maps
/// NaN to 0, so no input panics).
fn nanos_to_duration(nanos: f64) -> Duration {
    Duration::from_nanos(nanos as u64)
}

/// Stops after `max_retries` delays (cenkalti v4's `WithMaxRetries`; 0 means no retry at all).
#[derive(Debug, Clone)]
pub struct WithMaxRetries<B> {
    inner: B,
    max_retries: u64,
    /// Delays handed out since the last reset.
    tries: u64,
}

impl<B: BackOff> WithMaxRetries<B> {
    /// Wraps `inner` so that it yields at most `max_retries` delays.
    pub fn new(inner: B, max_retries: u64) -> Self {
        WithMaxRetries {
            inner,
            max_retries,
            tries: 0,
        }
    }
}

impl<B: BackOff> BackOff for WithMaxRetries<B> {
    fn reset(&mut self, now: Instant) {
        self.tries = 0;
        self.inner.reset(now);
    }

    fn next_backoff(&mut self, now: Instant) -> Option<Duration> {
        if self.tries >= self.max_retries {
            return None;
        }
        self.tries += 1;
        self.inner.next_backoff(now)
    }
}

impl<B: BackOff + ?Sized> BackOff for Box<B> {
    fn reset(&mut self, now: Instant) {
        (**self).reset(now);
    }

    fn next_backoff(&mut self, now: Instant) -> Option<Duration> {
        (**self).next_backoff(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_backoff_grows_to_its_cap() {
        let mut b = connect_backoff();
        let first = b.next_delay();
        assert!((Duration::from_millis(400)..=Duration::from_millis(600)).contains(&first));
        let mut last = first;
        for _ in 0..20 {
            last = b.next_delay();
            assert!(last <= Duration::from_millis(3600), "{last:?}");
        }
        assert!(last >= Duration::from_millis(2400), "{last:?}");
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn constant_repeats_forever() {
        let now = Instant::now();
        let mut b = ConstantBackOff::new(ms(200));
        b.reset(now);
        for i in 0..1000 {
            assert_eq!(b.next_backoff(now + ms(i * 200)), Some(ms(200)));
        }
    }

    #[test]
    fn with_max_retries_counts_delays_and_resets() {
        let now = Instant::now();
        let mut b = WithMaxRetries::new(ConstantBackOff::new(ms(5)), 3);
        b.reset(now);
        assert_eq!(
            (0..5).map(|_| b.next_backoff(now)).collect::<Vec<_>>(),
            vec![Some(ms(5)), Some(ms(5)), Some(ms(5)), None, None]
        );
        b.reset(now);
        assert_eq!(b.next_backoff(now), Some(ms(5)));
    }

    #[test]
    fn zero_max_retries_never_retries() {
        let now = Instant::now();
        let mut b = WithMaxRetries::new(ConstantBackOff::new(ms(5)), 0);
        b.reset(now);
        assert_eq!(b.next_backoff(now), None);
    }

    #[test]
    fn exponential_without_jitter_grows_by_multiplier_up_to_the_cap() {
        let now = Instant::now();
        let mut b = ExponentialBackOff::new(fastrand::Rng::with_seed(1));
        b.randomization_factor = 0.0;
        b.initial_interval = ms(100);
        b.multiplier = 2.0;
        b.max_interval = ms(1000);
        b.max_elapsed_time = Duration::ZERO;
        b.reset(now);
        let got: Vec<_> = (0..7)
            .map(|_| b.next_backoff(now).map(|d| d.as_millis()))
            .collect();
        assert_eq!(
            got,
            [100, 200, 400, 800, 1000, 1000, 1000].map(Some).to_vec(),
            "the interval doubles, then sticks at maxInterval"
        );
    }

    #[test]
    fn exponential_default_jitter_stays_within_half_of_the_interval() {
        // cenkalti's documented table: 0.5 s, 0.75 s, 1.125 s, … each drawn from ±50 %.
        let now = Instant::now();
        for seed in 0..200 {
            let mut b = ExponentialBackOff::new(fastrand::Rng::with_seed(seed));
            b.reset(now);
            let mut interval = 500_000_000f64;
            for _ in 0..12 {
                let d = b.next_backoff(now).map(|d| d.as_nanos() as f64);
                let Some(d) = d else { panic!("stopped early") };
                assert!(
                    d >= interval * 0.5 - 1.0 && d <= interval * 1.5 + 1.0,
                    "seed {seed}: {d} outside ±50 % of {interval}"
                );
                interval = (interval * 1.5).min(60e9);
            }
        }
    }

    #[test]
    fn exponential_is_deterministic_for_a_seed() {
        let now = Instant::now();
        let draw = |seed| {
            let mut b = ExponentialBackOff::new(fastrand::Rng::with_seed(seed));
            b.reset(now);
            (0..8).map(|_| b.next_backoff(now)).collect::<Vec<_>>()
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
    }

    #[test]
    fn exponential_caps_the_interval_not_the_jittered_delay() {
        let now = Instant::now();
        let mut b = ExponentialBackOff::new(fastrand::Rng::with_seed(7));
        b.initial_interval = ms(10_000);
        b.max_interval = ms(10_000);
        b.reset(now);
        let mut above = false;
        for _ in 0..50 {
            let d = b.next_backoff(now).unwrap_or_default();
            assert!(d >= ms(5_000) && d <= ms(15_000) + Duration::from_nanos(1));
            above |= d > ms(10_000);
            assert_eq!(b.current_interval(), ms(10_000));
        }
        assert!(above, "jitter may exceed maxInterval, as in cenkalti");
    }

    #[test]
    fn exponential_stops_when_elapsed_plus_next_exceeds_max_elapsed() {
        let start = Instant::now();
        let mut b = ExponentialBackOff::new(fastrand::Rng::with_seed(3));
        b.randomization_factor = 0.0;
        b.initial_interval = ms(1_000);
        b.multiplier = 1.0;
        b.max_elapsed_time = ms(10_000);
        b.reset(start);
        assert_eq!(b.next_backoff(start + ms(8_999)), Some(ms(1_000)));
        assert_eq!(
            b.next_backoff(start + ms(9_000)),
            Some(ms(1_000)),
            "exactly at the limit"
        );
        assert_eq!(b.next_backoff(start + ms(9_001)), None);
        // Wall time counts, not the sum of delays handed out.
        b.reset(start);
        assert_eq!(b.next_backoff(start + ms(60_000)), None);
    }

    #[test]
    fn reset_restarts_interval_and_clock() {
        let start = Instant::now();
        let mut b = ExponentialBackOff::new(fastrand::Rng::with_seed(3));
        b.randomization_factor = 0.0;
        b.reset(start);
        for _ in 0..5 {
            let _ = b.next_backoff(start);
        }
        let later = start + Duration::from_secs(3600);
        b.reset(later);
        assert_eq!(b.next_backoff(later), Some(DEFAULT_INITIAL_INTERVAL));
    }

    #[test]
    fn max_retries_wraps_exponential() {
        let now = Instant::now();
        let mut b = WithMaxRetries::new(ExponentialBackOff::new(fastrand::Rng::with_seed(9)), 2);
        b.reset(now);
        assert!(b.next_backoff(now).is_some());
        assert!(b.next_backoff(now).is_some());
        assert_eq!(b.next_backoff(now), None);
    }

    #[test]
    fn jitter_stays_within_its_bounds() {
        let mut rng = fastrand::Rng::new();
        for _ in 0..10_000 {
            let d = jittered(ms(500), 0.5, &mut rng);
            assert!((ms(250)..=ms(750)).contains(&d), "{d:?}");
            let d = jittered(ms(1000), 0.5, &mut rng);
            assert!((ms(500)..=ms(1500)).contains(&d), "{d:?}");
        }
        // A spread wider than the interval never goes below zero.
        let d = jittered(ms(100), 2.5, &mut rng);
        assert!(d <= ms(350));
        assert_eq!(jittered(ms(1000), 0.0, &mut rng), ms(1000));
    }

    #[test]
    fn jitter_spreads() {
        let mut rng = fastrand::Rng::new();
        let samples: Vec<Duration> = (0..200).map(|_| jittered(ms(500), 0.5, &mut rng)).collect();
        assert!(samples.iter().any(|d| *d < ms(400)));
        assert!(samples.iter().any(|d| *d > ms(600)));
    }

    #[test]
    fn endless_grows_to_its_cap_and_never_stops() {
        let start = Instant::now();
        let mut b = ExponentialBackOff::endless(ms(1000), 2.0, ms(30_000), 0.0);
        let got: Vec<_> = (0..8).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(
            got,
            [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]
        );
        let far = start + Duration::from_secs(365 * 24 * 3600);
        assert_eq!(b.next_backoff(far), Some(ms(30_000)));
    }

    #[test]
    fn absurd_parameters_do_not_panic() {
        let now = Instant::now();
        let mut b = ExponentialBackOff::new(fastrand::Rng::with_seed(0));
        b.initial_interval = Duration::MAX;
        b.max_interval = Duration::MAX;
        b.multiplier = 1e300;
        b.reset(now);
        for _ in 0..10 {
            let _ = b.next_backoff(now);
        }
    }
}
