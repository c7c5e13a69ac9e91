//! Kit's `SpecSchedule.Next`, transcribed onto chrono-tz: unit increments, `goto WRAP` as
//! `continue 'wrap`, and Go's `time.Date` rule for wall times in a DST gap or fold. This is
//! what gives Dapr's DST behaviour (a 02:30 job skips the spring-forward day and runs twice
//! in the fall-back fold), so it deliberately does not use chrono's own disambiguation.
//!
//! Instants are `i64` Unix seconds; after the first step every instant is a whole second, as
//! in Go.

use chrono::{DateTime, Datelike, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

use super::civil::days_from_civil;
use super::{STAR_BIT, SpecSchedule};

/// Loop iterations before giving up. Kit's loop is bounded by its five-year limit and needs a
/// few hundred steps for real specs; this only guards against a zone-data oddity cycling.
const STEP_BUDGET: u32 = 1_000_000;

/// The wall-clock reading of an instant in a zone.
struct Wall {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// Sunday = 0, as Go's `time.Weekday`.
    weekday: u32,
}

fn wall(tz: Tz, unix: i64) -> Option<Wall> {
    let t = DateTime::<Utc>::from_timestamp(unix, 0)?.with_timezone(&tz);
    Some(Wall {
        year: t.year(),
        month: t.month(),
        day: t.day(),
        hour: t.hour(),
        minute: t.minute(),
        second: t.second(),
        weekday: t.weekday().num_days_from_sunday(),
    })
}

/// Seconds east of UTC in effect at an instant.
fn offset_at(tz: Tz, unix: i64) -> Option<i64> {
    let utc = DateTime::<Utc>::from_timestamp(unix, 0)?.naive_utc();
    Some(i64::from(
        tz.offset_from_utc_datetime(&utc).fix().local_minus_utc(),
    ))
}

/// Go's `time.Date(year, month, day, hour, min, sec, 0, tz)`, with out-of-range months and
/// days normalised as Go does. Go looks up the offset in effect at the wall time read as UTC;
/// if subtracting it leaves that offset's span, it takes the offset at the result instead.
/// Taking the offset at `wall - first` covers both branches, since inside the span it is the
/// same offset. In a gap this moves back (NY 02:30 on spring-forward day is 01:30 EST); in
/// a fold the pick depends on the zone's side of UTC.
fn date(tz: Tz, year: i64, month: i64, day: i64, hour: i64, min: i64, sec: i64) -> Option<i64> {
    let m0 = month - 1;
    let year = year + m0.div_euclid(12);
    let month = u32::try_from(m0.rem_euclid(12) + 1).ok()?;
    let days = days_from_civil(year, month, 1).checked_add(day - 1)?;
    let wall = days
        .checked_mul(86_400)?
        .checked_add(hour * 3600 + min * 60 + sec)?;
    let first = offset_at(tz, wall)?;
    Some(wall - offset_at(tz, wall - first)?)
}

/// Go's `t.AddDate(0, months, days)`: the wall fields shifted, then `time.Date`.
fn add_date(tz: Tz, w: &Wall, months: i64, days: i64) -> Option<i64> {
    date(
        tz,
        i64::from(w.year),
        i64::from(w.month) + months,
        i64::from(w.day) + days,
        i64::from(w.hour),
        i64::from(w.minute),
        i64::from(w.second),
    )
}

/// Kit's `Next` with the schedule's location set to `tz`.
pub(super) fn next(s: &SpecSchedule, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let b = &s.bits;
    if [b.second, b.minute, b.hour, b.month]
        .iter()
        .any(|bits| bits & !STAR_BIT == 0)
    {
        // Nothing can match; kit would step through five years of seconds to say so.
        return None;
    }

    let mut budget = STEP_BUDGET;
    let mut spend = || {
        budget = budget.checked_sub(1)?;
        Some(())
    };

    // Start at the earliest possible time (the upcoming second).
    let mut t = after.timestamp().checked_add(1)?;
    let mut w = wall(tz, t)?;
    let year_limit = w.year + 5;
    let mut added = false;

    'wrap: loop {
        spend()?;
        if w.year > year_limit {
            return None;
        }

        while b.month >> w.month & 1 == 0 {
            spend()?;
            if !added {
                added = true;
                t = date(tz, i64::from(w.year), i64::from(w.month), 1, 0, 0, 0)?;
                w = wall(tz, t)?;
            }
            t = add_date(tz, &w, 1, 0)?;
            w = wall(tz, t)?;
            if w.month == 1 {
                continue 'wrap;
            }
        }

        while !s.day_matches(w.day, w.weekday) {
            spend()?;
            if !added {
                added = true;
                let (y, m, d) = (w.year, w.month, w.day);
                t = date(tz, i64::from(y), i64::from(m), i64::from(d), 0, 0, 0)?;
                w = wall(tz, t)?;
            }
            t = add_date(tz, &w, 0, 1)?;
            w = wall(tz, t)?;
            // Midnight may not exist on a DST day (Sao Paulo): kit nudges back to it.
            if w.hour != 0 {
                let hour = i64::from(w.hour);
                t += if hour > 12 {
                    (24 - hour) * 3600
                } else {
                    -hour * 3600
                };
                w = wall(tz, t)?;
            }
            if w.day == 1 {
                continue 'wrap;
            }
        }

        while b.hour >> w.hour & 1 == 0 {
            spend()?;
            if !added {
                added = true;
                let (y, m, d, h) = (w.year, w.month, w.day, w.hour);
                t = date(
                    tz,
                    i64::from(y),
                    i64::from(m),
                    i64::from(d),
                    i64::from(h),
                    0,
                    0,
                )?;
            }
            t += 3600;
            w = wall(tz, t)?;
            if w.hour == 0 {
                continue 'wrap;
            }
        }

        while b.minute >> w.minute & 1 == 0 {
            spend()?;
            if !added {
                added = true;
                // Go's Truncate works on the absolute instant, not the wall clock.
                t -= t.rem_euclid(60);
            }
            t += 60;
            w = wall(tz, t)?;
            if w.minute == 0 {
                continue 'wrap;
            }
        }

        while b.second >> w.second & 1 == 0 {
            spend()?;
            // Go truncates to the second here; `t` is already whole.
            added = true;
            t += 1;
            w = wall(tz, t)?;
            if w.second == 0 {
                continue 'wrap;
            }
        }

        return DateTime::from_timestamp(t, 0);
    }
}

/// Go's `time.Date` for the tests' direct checks.
#[cfg(test)]
pub(super) fn date_for_tests(
    tz: Tz,
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    min: i64,
    sec: i64,
) -> Option<i64> {
    date(tz, year, month, day, hour, min, sec)
}
