//! What happens when a trigger fails: the failure policies a job carries. Dapr's two kinds
//! (`Drop`, `Constant`) plus jobsd's (`Cron`, `Exponential`, `Delays`, set through
//! `POST /jobsd/v1/jobs/{name}` only). Each says, purely, when retry k of a tick is due and
//! whether there is a retry k at all; the plan ([`super::Plan`]) applies it.

use chrono::{DateTime, TimeDelta, Utc};

use super::cron::Schedule;

/// What happens when a trigger of a job fails (Dapr's `JobFailurePolicy`, extended).
#[derive(Debug, Clone, PartialEq)]
pub enum FailurePolicy {
    /// Give up on the failed tick at once.
    Drop,
    /// Retry the tick `interval` after the previous attempt's scheduled time.
    Constant {
        /// Delay between attempts; Dapr allows zero (immediate retries).
        interval: TimeDelta,
        /// Retries after the first attempt; `None` retries forever.
        max_retries: Option<u32>,
    },
    /// Retry at the next time of `schedule` after the previous attempt's scheduled time.
    Cron {
        /// A cron or `@every` schedule (Dapr's grammar).
        schedule: Box<Schedule>,
        /// Retries after the first attempt; `None` retries forever.
        max_retries: Option<u32>,
    },
    /// Retry k waits `min(initial · multiplier^(k-1), max_interval)`, shortened by up to
    /// `jitter` of itself (a deterministic fraction per job and retry).
    Exponential(Box<Exponential>),
    /// Retry k waits `delays[k-1]`; past the table, the last delay again when `repeat_last`
    /// (bounded by `max_retries` when given), else no more retries.
    Delays {
        /// The delay before each retry, in order (not empty).
        delays: Vec<TimeDelta>,
        /// Keep retrying with the last delay once the table is used up.
        repeat_last: bool,
        /// Retries after the first attempt, at most.
        max_retries: Option<u32>,
    },
}

/// Exponential backoff settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Exponential {
    /// Wait before the first retry (> 0).
    pub initial: TimeDelta,
    /// Growth per retry (≥ 1).
    pub multiplier: f64,
    /// Longest wait; `None`: unbounded.
    pub max_interval: Option<TimeDelta>,
    /// Fraction in `[0, 1]` a wait may be shortened by.
    pub jitter: f64,
    /// Retries after the first attempt; `None`: no count limit.
    pub max_retries: Option<u32>,
    /// No retry is due later than this after the tick; `None`: no time limit.
    pub max_elapsed: Option<TimeDelta>,
}

impl Default for FailurePolicy {
    /// The Scheduler's default, stored with every job that has none: constant 1 s, 3 retries
    /// (so 4 deliveries of a tick in all).
    fn default() -> Self {
        FailurePolicy::Constant {
            interval: TimeDelta::seconds(1),
            max_retries: Some(3),
        }
    }
}

/// Where the iteration of per-retry delays stops and the rest is extrapolated.
const ITERATE: u32 = 1024;

impl FailurePolicy {
    /// Whether the policy is one of Dapr's (`Drop`, `Constant`): the only kinds a Dapr
    /// Scheduler can carry.
    pub fn is_dapr(&self) -> bool {
        matches!(self, FailurePolicy::Drop | FailurePolicy::Constant { .. })
    }

    /// When retry `k` (k ≥ 1) of the tick at `tick` is due, `seed` choosing the jitter;
    /// `None` when the policy makes no retry `k`. `k = 0` is the tick itself.
    pub fn retry_at(&self, tick: DateTime<Utc>, k: u32, seed: u64) -> Option<DateTime<Utc>> {
        if k == 0 {
            return Some(tick);
        }
        let saturate = |t: Option<DateTime<Utc>>| t.unwrap_or(DateTime::<Utc>::MAX_UTC);
        match self {
            FailurePolicy::Drop => None,
            FailurePolicy::Constant {
                interval,
                max_retries,
            } => {
                if max_retries.is_some_and(|max| k > max) {
                    return None;
                }
                let step = (*interval).max(TimeDelta::zero());
                let delay = step
                    .checked_mul(i32::try_from(k).unwrap_or(i32::MAX))
                    .unwrap_or(TimeDelta::MAX);
                Some(saturate(tick.checked_add_signed(delay)))
            }
            FailurePolicy::Cron {
                schedule,
                max_retries,
            } => {
                if max_retries.is_some_and(|max| k > max) {
                    return None;
                }
                let mut at = tick;
                for _ in 0..k {
                    at = schedule.next(at)?;
                }
                Some(at)
            }
            FailurePolicy::Exponential(e) => {
                if e.max_retries.is_some_and(|max| k > max) {
                    return None;
                }
                let elapsed = e.elapsed(k, seed);
                if e.max_elapsed.is_some_and(|max| elapsed > max) {
                    return None;
                }
                Some(saturate(tick.checked_add_signed(elapsed)))
            }
            FailurePolicy::Delays {
                delays,
                repeat_last,
                max_retries,
            } => {
                let len = u32::try_from(delays.len()).unwrap_or(u32::MAX);
                if max_retries.is_some_and(|max| k > max) || (!repeat_last && k > len) {
                    return None;
                }
                let last = *delays.last()?;
                let listed = k.min(len) as usize;
                let mut total = delays[..listed]
                    .iter()
                    .try_fold(TimeDelta::zero(), |sum, d| sum.checked_add(d))
                    .unwrap_or(TimeDelta::MAX);
                if k > len {
                    let more = last
                        .checked_mul(i32::try_from(k - len).unwrap_or(i32::MAX))
                        .unwrap_or(TimeDelta::MAX);
                    total = total.checked_add(&more).unwrap_or(TimeDelta::MAX);
                }
                Some(saturate(tick.checked_add_signed(total)))
            }
        }
    }
}

impl Exponential {
    /// The wait before retry `k` (k ≥ 1), jitter applied.
    pub fn delay(&self, k: u32, seed: u64) -> TimeDelta {
        let exp = i32::try_from(k.saturating_sub(1)).unwrap_or(i32::MAX);
        let base =
            self.initial.num_nanoseconds().unwrap_or(i64::MAX) as f64 * self.multiplier.powi(exp);
        let cap = self
            .max_interval
            .and_then(|m| m.num_nanoseconds())
            .map_or(f64::MAX, |m| m as f64);
        let wait = base.min(cap).min(i64::MAX as f64);
        let shortened = wait * (1.0 - self.jitter * unit(seed, k));
        TimeDelta::nanoseconds(shortened.max(0.0) as i64)
    }

    /// Time from the tick to retry `k`: the sum of the waits before retries 1..=k.
    pub fn elapsed(&self, k: u32, seed: u64) -> TimeDelta {
        let iterated = k.min(ITERATE);
        let mut total = TimeDelta::zero();
        for i in 1..=iterated {
            total = total
                .checked_add(&self.delay(i, seed))
                .unwrap_or(TimeDelta::MAX);
        }
        if k > iterated {
            // Far past any realistic growth: every later wait is the capped one (without
            // jitter, which only shortens, so this never fires early).
            let cap = self.delay(ITERATE, 0);
            let more = cap
                .checked_mul(i32::try_from(k - iterated).unwrap_or(i32::MAX))
                .unwrap_or(TimeDelta::MAX);
            total = total.checked_add(&more).unwrap_or(TimeDelta::MAX);
        }
        total
    }
}

/// A deterministic number in `[0, 1)` for `seed` and retry `k` (splitmix64).
pub fn unit(seed: u64, k: u32) -> f64 {
    let mut z = seed
        .wrapping_add(u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_767_225_600, 0).unwrap()
    }

    #[test]
    fn constant_and_drop_keep_daprs_cadence() {
        let c = FailurePolicy::default();
        assert_eq!(c.retry_at(t0(), 1, 0), Some(t0() + TimeDelta::seconds(1)));
        assert_eq!(c.retry_at(t0(), 3, 0), Some(t0() + TimeDelta::seconds(3)));
        assert_eq!(c.retry_at(t0(), 4, 0), None);
        assert_eq!(FailurePolicy::Drop.retry_at(t0(), 1, 0), None);
    }

    #[test]
    fn exponential_waits_follow_the_formula_within_the_jitter() {
        let e = Exponential {
            initial: TimeDelta::seconds(1),
            multiplier: 2.0,
            max_interval: Some(TimeDelta::seconds(10)),
            jitter: 0.0,
            max_retries: Some(6),
            max_elapsed: None,
        };
        let p = FailurePolicy::Exponential(Box::new(e.clone()));
        // 1, 2, 4, 8, 10, 10 → due at 1, 3, 7, 15, 25, 35 s.
        let due: Vec<_> = (1..=7).map(|k| p.retry_at(t0(), k, 42)).collect();
        let secs = |s| Some(t0() + TimeDelta::seconds(s));
        assert_eq!(
            due,
            [
                secs(1),
                secs(3),
                secs(7),
                secs(15),
                secs(25),
                secs(35),
                None
            ]
        );
        let bounded = FailurePolicy::Exponential(Box::new(Exponential {
            max_elapsed: Some(TimeDelta::seconds(20)),
            max_retries: None,
            ..e.clone()
        }));
        assert_eq!(bounded.retry_at(t0(), 4, 1), secs(15));
        assert_eq!(
            bounded.retry_at(t0(), 5, 1),
            None,
            "25 s > max elapsed 20 s"
        );

        let jittered = Exponential { jitter: 0.5, ..e };
        for seed in 0..200 {
            for k in 1..=6 {
                let d = jittered.delay(k, seed);
                let full = e_delay(k);
                assert!(
                    d <= full && d >= full / 2,
                    "k={k} seed={seed}: {d} vs {full}"
                );
                assert_eq!(d, jittered.delay(k, seed), "deterministic");
            }
        }
    }

    fn e_delay(k: u32) -> TimeDelta {
        TimeDelta::seconds((1i64 << (k - 1)).min(10))
    }

    #[test]
    fn delays_table_and_repeat_last() {
        let d = |s: &[i64], repeat_last, max_retries| FailurePolicy::Delays {
            delays: s.iter().map(|&s| TimeDelta::seconds(s)).collect(),
            repeat_last,
            max_retries,
        };
        let secs = |s| Some(t0() + TimeDelta::seconds(s));
        let once = d(&[1, 10, 60], false, None);
        let due: Vec<_> = (1..=4).map(|k| once.retry_at(t0(), k, 0)).collect();
        assert_eq!(due, [secs(1), secs(11), secs(71), None]);
        let again = d(&[1, 10, 60], true, Some(5));
        let due: Vec<_> = (1..=6).map(|k| again.retry_at(t0(), k, 0)).collect();
        assert_eq!(
            due,
            [secs(1), secs(11), secs(71), secs(131), secs(191), None]
        );
    }

    #[test]
    fn cron_retries_at_the_schedules_ticks() {
        let p = FailurePolicy::Cron {
            schedule: Box::new(crate::schedule::cron::parse("*/15 * * * * *").unwrap()),
            max_retries: Some(2),
        };
        let start = t0() + TimeDelta::seconds(3);
        assert_eq!(p.retry_at(start, 1, 0), Some(t0() + TimeDelta::seconds(15)));
        assert_eq!(p.retry_at(start, 2, 0), Some(t0() + TimeDelta::seconds(30)));
        assert_eq!(p.retry_at(start, 3, 0), None);
    }
}
