//! Actor reminder and timer periods, as daprd reads them.
//!
//! A reminder's `period` becomes a Scheduler job's schedule: dapr/kit's `ParseDuration` (an
//! ISO-8601 duration, optionally `Rn/`-prefixed, or a Go duration) turned into
//! `@every <Go Duration.String()>` plus `repeats` from `Rn/`; periods with years, months,
//! weeks or days are refused (`pkg/actors/internal/scheduler`).
//!
//! A timer lives in the sidecar's memory and takes any ISO-8601 period (years and months go
//! by Go's `AddDate`); its next tick is one period after the previous callback returned.

use chrono::{DateTime, TimeDelta, Utc};

use super::{duration, iso8601, point_in_time};

/// A reminder period daprd refuses: `unsupported period format: <period>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported period format: {0}")]
pub struct PeriodError(pub String);

/// A period parsed as dapr/kit's `ParseDuration` does: ISO-8601 first, then a Go duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    /// Years, months and days (weeks folded in), applied with Go's `AddDate`.
    pub years: i32,
    /// See [`Period::years`].
    pub months: i32,
    /// See [`Period::years`].
    pub days: i32,
    /// The H/M/S part (or the whole Go duration), in nanoseconds.
    pub nanos: i64,
    /// `n` of an `Rn/` prefix; -1 without one (unlimited).
    pub repetitions: i32,
}

impl Period {
    /// Parses `s`: ISO-8601 (`PT10S`, `R5/PT1M`, `P1D`) or a Go duration (`10s`,
    /// `0h0m10s0ms0μs`). `None` when it is neither.
    pub fn parse(s: &str) -> Option<Period> {
        if let Ok(iso) = iso8601::parse(s) {
            return Some(Period {
                years: iso.years,
                months: iso.months,
                days: iso.days,
                nanos: iso.nanos,
                repetitions: iso.repetitions,
            });
        }
        let nanos = duration::parse(s).ok()?;
        Some(Period {
            years: 0,
            months: 0,
            days: 0,
            nanos,
            repetitions: -1,
        })
    }

    /// Whether the period needs calendar arithmetic (years, months or days).
    pub fn has_date_part(&self) -> bool {
        self.years != 0 || self.months != 0 || self.days != 0
    }

    /// `t` plus one period (`AddDate` for the date part, then the duration); `None` out of
    /// range.
    pub fn add_to(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        iso8601::add_date(t, self.years, self.months, self.days)?
            .checked_add_signed(TimeDelta::nanoseconds(self.nanos))
    }
}

/// The Scheduler job fields a reminder period becomes: `(schedule, repeats)`. An empty or
/// absent period is a one-shot reminder (no schedule).
pub fn reminder_schedule(
    period: Option<&str>,
) -> Result<(Option<String>, Option<u32>), PeriodError> {
    let Some(text) = period.filter(|p| !p.is_empty()) else {
        return Ok((None, None));
    };
    let refuse = || PeriodError(text.to_owned());
    let p = Period::parse(text).ok_or_else(refuse)?;
    if p.has_date_part() {
        return Err(refuse());
    }
    let schedule = format!("@every {}", duration::format(p.nanos));
    let repeats = u32::try_from(p.repetitions).ok().filter(|&n| n > 0);
    Ok((Some(schedule), repeats))
}

/// Why a timer cannot be registered; `Display` is daprd's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimerError {
    /// The due time is not RFC 3339, a Go duration or an ISO-8601 duration.
    #[error("error parsing timer due time: unsupported time/duration format: {0}")]
    DueTime(String),
    /// The period does not parse.
    #[error("invalid timer period: parse error: unsupported duration format: {0}")]
    Period(String),
    /// `R0/…`.
    #[error("invalid timer period: has zero repetitions")]
    ZeroRepetitions,
    /// The ttl does not parse.
    #[error("error parsing timer TTL: unsupported time/duration format: {0}")]
    Ttl(String),
    /// The ttl is before the first tick.
    #[error("timer {key} has already expired: dueTime: {due} TTL: {ttl}")]
    Expired {
        /// `<type>||<id>||<name>`.
        key: String,
        /// The first tick, RFC 3339.
        due: String,
        /// The ttl as given.
        ttl: String,
    },
}

/// When an actor timer fires: first at its due time (now without one), then one period
/// after each callback returned, `repetitions` times at most, never past the ttl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerPlan {
    /// The first tick.
    pub first: DateTime<Utc>,
    /// `None`: fires once.
    pub period: Option<Period>,
    /// Ticks at most (`Rn/`); `None` = unlimited.
    pub repetitions: Option<u32>,
    /// No tick after this instant.
    pub expires: Option<DateTime<Utc>>,
}

impl TimerPlan {
    /// Parses a timer's `dueTime`, `period` and `ttl` (empty strings are absent) at `now`.
    /// `key` names the timer in the expiry error.
    pub fn new(
        key: &str,
        due_time: &str,
        period: &str,
        ttl: &str,
        now: DateTime<Utc>,
    ) -> Result<TimerPlan, TimerError> {
        let first = if due_time.is_empty() {
            now
        } else {
            point_in_time(due_time, now).map_err(|_| TimerError::DueTime(due_time.to_owned()))?
        };
        let (period, repetitions) = if period.is_empty() {
            (None, None)
        } else {
            let p = Period::parse(period).ok_or_else(|| TimerError::Period(period.to_owned()))?;
            if p.repetitions == 0 {
                return Err(TimerError::ZeroRepetitions);
            }
            (Some(p), u32::try_from(p.repetitions).ok())
        };
        let expires = if ttl.is_empty() {
            None
        } else {
            let at = point_in_time(ttl, first).map_err(|_| TimerError::Ttl(ttl.to_owned()))?;
            if at < first {
                return Err(TimerError::Expired {
                    key: key.to_owned(),
                    due: first.to_rfc3339(),
                    ttl: ttl.to_owned(),
                });
            }
            Some(at)
        };
        Ok(TimerPlan {
            first,
            period,
            repetitions,
            expires,
        })
    }

    /// The tick after `fired` ticks, the last callback having returned at `returned`; `None`
    /// when the timer is done.
    pub fn next(&self, fired: u32, returned: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.repetitions.is_some_and(|r| fired >= r) {
            return None;
        }
        let at = if fired == 0 {
            self.first
        } else {
            self.period?.add_to(returned)?
        };
        if self.expires.is_some_and(|exp| at > exp) {
            return None;
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + TimeDelta::seconds(s)
    }

    #[test]
    fn reminder_periods_become_every_schedules_as_dapr_writes_them() {
        let cases = [
            ("10s", "@every 10s", None),
            ("0h0m10s0ms0μs", "@every 10s", None),
            ("0h0m10s0ms0µs", "@every 10s", None),
            ("PT10S", "@every 10s", None),
            ("R5/PT10S", "@every 10s", Some(5)),
            ("90s", "@every 1m30s", None),
            ("PT1M30S", "@every 1m30s", None),
            ("1h", "@every 1h0m0s", None),
            ("0h0m1s500ms0μs", "@every 1.5s", None),
            ("500ms", "@every 500ms", None),
            ("0s", "@every 0s", None),
            ("R0/PT10S", "@every 10s", None),
        ];
        for (period, schedule, repeats) in cases {
            assert_eq!(
                reminder_schedule(Some(period)),
                Ok((Some(schedule.to_owned()), repeats)),
                "{period}"
            );
        }
        assert_eq!(reminder_schedule(None), Ok((None, None)));
        assert_eq!(reminder_schedule(Some("")), Ok((None, None)));
    }

    #[test]
    fn reminder_periods_with_days_or_nonsense_are_refused_with_daprs_text() {
        for period in ["P1D", "P1W", "P1M", "P1Y", "R5/P1DT1H", "every 10s", "10"] {
            assert_eq!(
                reminder_schedule(Some(period)).unwrap_err().to_string(),
                format!("unsupported period format: {period}")
            );
        }
    }

    #[test]
    fn timers_fire_at_due_then_a_period_after_each_callback() {
        let plan = TimerPlan::new("T||1||t", "2s", "R3/PT5S", "", at(0)).unwrap();
        assert_eq!(plan.next(0, at(0)), Some(at(2)));
        // The callback took 1 s: the next tick is 5 s after it returned.
        assert_eq!(plan.next(1, at(3)), Some(at(8)));
        assert_eq!(plan.next(2, at(8)), Some(at(13)));
        assert_eq!(plan.next(3, at(13)), None, "R3: three ticks");
        let once = TimerPlan::new("k", "", "", "", at(7)).unwrap();
        assert_eq!(once.next(0, at(7)), Some(at(7)), "no due time: now");
        assert_eq!(once.next(1, at(7)), None);
        let monthly = TimerPlan::new("k", "", "P1M", "", at(0)).unwrap();
        assert_eq!(
            monthly.next(1, at(0)),
            Some(Utc.with_ymd_and_hms(2026, 2, 1, 0, 0, 0).unwrap())
        );
    }

    #[test]
    fn timer_ttl_stops_it_and_bad_input_reads_like_daprd() {
        let plan = TimerPlan::new("k", "1s", "1s", "3s", at(0)).unwrap();
        assert_eq!(plan.expires, Some(at(4)), "ttl counts from the due time");
        assert_eq!(plan.next(3, at(4)), None);
        assert_eq!(
            TimerPlan::new("k", "soon", "", "", at(0))
                .unwrap_err()
                .to_string(),
            "error parsing timer due time: unsupported time/duration format: soon"
        );
        assert_eq!(
            TimerPlan::new("k", "", "weekly", "", at(0))
                .unwrap_err()
                .to_string(),
            "invalid timer period: parse error: unsupported duration format: weekly"
        );
        assert_eq!(
            TimerPlan::new("k", "", "R0/PT1S", "", at(0)).unwrap_err(),
            TimerError::ZeroRepetitions
        );
        assert!(matches!(
            TimerPlan::new(
                "T||1||t",
                "2026-01-01T00:00:10Z",
                "",
                "2026-01-01T00:00:05Z",
                at(0)
            ),
            Err(TimerError::Expired { .. })
        ));
    }
}
