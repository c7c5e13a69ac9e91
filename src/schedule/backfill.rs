//! The ticks a backfill runs: every nominal tick of a job's schedule in `[start, end)`, as the
//! schedule defines them (its zone and DST policy included), whatever the job's progress,
//! repeats or expiration — a backfill re-runs the past on purpose.

use chrono::{DateTime, TimeDelta, Utc};

use super::{Begin, Plan, Schedule};

/// Why a range cannot be backfilled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackfillError {
    /// `end` is not after `start`.
    #[error("backfill end must be after its start")]
    EmptyRange,
    /// More ticks than allowed fall in the range.
    #[error("the range holds more than {limit} ticks of the schedule; backfill a shorter range")]
    TooMany {
        /// The bound (`--max-backfill-ticks`).
        limit: usize,
    },
}

/// The nominal ticks of `plan`'s schedule in `[start, end)`, oldest first, at most `limit`.
///
/// A cron schedule's ticks are its matches; an `@every` schedule's are its first tick plus
/// whole multiples of the delay, in both directions (so a backfill before the job existed
/// keeps its phase); a one-shot job has its due time only.
pub fn backfill_ticks(
    plan: &Plan,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    limit: usize,
) -> Result<Vec<DateTime<Utc>>, BackfillError> {
    if end <= start {
        return Err(BackfillError::EmptyRange);
    }
    let mut ticks = Vec::new();
    let mut push = |t: DateTime<Utc>| {
        if ticks.len() == limit {
            return Err(BackfillError::TooMany { limit });
        }
        ticks.push(t);
        Ok(())
    };
    match &plan.schedule {
        None => {
            let (Begin::DueTime(due) | Begin::Start(due)) = plan.begin;
            if start <= due && due < end {
                push(due)?;
            }
        }
        Some(Schedule::Every(delay)) => {
            let step = delay.nanos();
            let first = plan.next_tick(&super::Counter::default());
            if let (Some(anchor), true) = (first, step > 0) {
                // The first multiple of the delay at or after `start`.
                let behind = (start - anchor).num_nanoseconds().unwrap_or(i64::MIN);
                let k = behind.div_euclid(step) + i64::from(behind.rem_euclid(step) != 0);
                let mut at =
                    anchor.checked_add_signed(TimeDelta::nanoseconds(k.saturating_mul(step)));
                while let Some(t) = at.filter(|t| *t < end) {
                    push(t)?;
                    at = t.checked_add_signed(TimeDelta::nanoseconds(step));
                }
            }
        }
        Some(schedule) => {
            let dst = &plan.policy().dst;
            let mut at = schedule.next_with(start - TimeDelta::nanoseconds(1), dst);
            while let Some(t) = at.filter(|t| *t < end) {
                push(t)?;
                at = schedule.next_with(t, dst);
            }
        }
    }
    Ok(ticks)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::schedule::{JobSpec, validate};

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap()
    }

    fn plan(schedule: &str, due: &str) -> Plan {
        let spec = JobSpec {
            schedule: (!schedule.is_empty()).then(|| schedule.to_owned()),
            due_time: (!due.is_empty()).then(|| due.to_owned()),
            ..JobSpec::default()
        };
        validate(&spec, now()).unwrap()
    }

    fn day() -> (DateTime<Utc>, DateTime<Utc>) {
        let start = Utc.with_ymd_and_hms(2026, 5, 1, 0, 0, 0).unwrap();
        (start, start + TimeDelta::days(1))
    }

    #[test]
    fn a_day_of_an_hourly_cron_is_24_ticks_in_order() {
        let (start, end) = day();
        let ticks = backfill_ticks(&plan("0 0 * * * *", ""), start, end, 1000).unwrap();
        assert_eq!(ticks.len(), 24);
        assert_eq!(ticks[0], start, "start is included");
        assert_eq!(ticks[23], end - TimeDelta::hours(1), "end is not");
        assert!(ticks.windows(2).all(|w| w[1] - w[0] == TimeDelta::hours(1)));
    }

    #[test]
    fn every_keeps_its_phase_before_the_job_existed() {
        // Created at 12:00, first tick 12:00 + 90 min; the past ticks are 90 min apart too.
        let p = plan("@every 90m", "");
        let (start, end) = day();
        let ticks = backfill_ticks(&p, start, end, 1000).unwrap();
        assert_eq!(ticks.len(), 16);
        let first = p.next_tick(&crate::schedule::Counter::default()).unwrap();
        for t in &ticks {
            assert_eq!((first - *t).num_minutes() % 90, 0, "{t}");
            assert!(*t >= start && *t < end);
        }
        assert!(ticks[0] - start < TimeDelta::minutes(90));
    }

    #[test]
    fn a_one_shot_has_its_due_time_only() {
        let p = plan("", "2026-05-01T10:00:00Z");
        let (start, end) = day();
        assert_eq!(
            backfill_ticks(&p, start, end, 10).unwrap(),
            [Utc.with_ymd_and_hms(2026, 5, 1, 10, 0, 0).unwrap()]
        );
        let later = end + TimeDelta::days(1);
        assert!(backfill_ticks(&p, end, later, 10).unwrap().is_empty());
    }

    #[test]
    fn ranges_are_bounded_and_not_empty() {
        let (start, end) = day();
        let p = plan("0 * * * * *", "");
        assert_eq!(
            backfill_ticks(&p, start, end, 100),
            Err(BackfillError::TooMany { limit: 100 })
        );
        assert_eq!(
            backfill_ticks(&p, start, start, 100),
            Err(BackfillError::EmptyRange)
        );
        assert_eq!(
            backfill_ticks(&p, end, start, 100),
            Err(BackfillError::EmptyRange)
        );
    }

    #[test]
    fn zones_and_dst_are_the_schedules() {
        // 02:30 New York does not exist on 2026-03-08: Dapr's cron skips that day.
        let p = plan("TZ=America/New_York 0 30 2 * * *", "");
        let start = Utc.with_ymd_and_hms(2026, 3, 6, 0, 0, 0).unwrap();
        let ticks = backfill_ticks(&p, start, start + TimeDelta::days(4), 100).unwrap();
        let days: Vec<u32> = ticks
            .iter()
            .map(|t| chrono::Datelike::day(&t.with_timezone(&chrono_tz::America::New_York)))
            .collect();
        assert_eq!(days, [6, 7, 9]);
    }
}
