//! A per-job daylight-saving policy for `TZ=` schedules (issue 12: `"dst": {"gap": ...,
//! "repeat": ...}`).
//!
//! With no choice made, [`Schedule::next_with`](super::Schedule::next_with) is Dapr's walk
//! (`walk.rs`), quirks and all. With a choice made it is this module's engine, which computes
//! the policy's definition directly: it goes through the zone's constant-offset spans, finds
//! each span's first matching wall time with the UTC civil search (`fast.rs`, a fixed offset
//! turns instants into wall times one to one), trims the ends of spans that border a fold
//! and adds the shifted wall times of a gap. Span ends are found by reading the offset once
//! a day and bisecting, and only as far as the candidate tick, so a frequent schedule costs
//! a couple of offset look-ups and a yearly one about one per day until its tick.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, Offset, TimeZone, Utc};
use chrono_tz::Tz;

use super::civil::days_from_civil;
use super::{STAR_BIT, SpecSchedule, fast};

/// How a `TZ=` schedule treats the two kinds of daylight-saving transition.
///
/// `DstPolicy::default()` (both fields `None`) is Dapr's behaviour, byte for byte:
/// [`Schedule::next_with`](super::Schedule::next_with) is then
/// [`Schedule::next`](super::Schedule::next). Setting either field switches to the policy's
/// definition; a field left `None` beside a set one takes the choice closest to Dapr
/// ([`Gap::Skip`], [`Repeat::Twice`]).
///
/// # What Dapr does
///
/// Dapr (kit's fork of robfig/cron v3, transcribed in `walk.rs`) steps real instants forward
/// and fires where an instant's wall-clock reading in the zone matches the fields:
///
/// - **Gap: [`Gap::Skip`].** A wall time inside a spring-forward gap is the reading of no
///   instant, so it does not fire and is not made up later. In New York on 2026-03-08 a
///   `0 30 2 * * *` job does not run at all (03-07 07:30Z, then 03-09 06:30Z), and hourly or
///   every-30-minutes jobs go from 01:00/01:30 EST straight to 03:00 EDT.
/// - **Repeat: [`Repeat::Twice`].** A wall time inside the repeated hour of a fall-back fold
///   is the reading of two instants and fires at both. In New York on 2026-11-01 a
///   `0 30 1 * * *` job runs at 05:30Z (01:30 EDT) and again at 06:30Z (01:30 EST); hourly
///   runs at 01:00 EDT and at 01:00 EST.
///
/// That is exact where transitions move whole hours at a whole hour other than midnight
/// (North America, Europe, mainland Australia, New Zealand): the tests hold the walk to an
/// independent "every instant whose reading matches" reference near such transitions, in
/// four zones, for random schedules. Elsewhere the walk's unit steps and Go's `time.Date`
/// normalisation add quirks that are neither choice, each pinned by a `dapr_quirk_` test:
///
/// - gaps at local midnight (São Paulo until 2019, Santiago, Beirut, Havana, Tehran until
///   2022): a job limited to some days can lose the whole transition day (the
///   robfig/cron#157 nudge moves back to 23:00 the day before, and the next day step jumps
///   over it), or run at 01:00 on the transition day when its day fields do not match it (the
///   hour loop enters the day at 01:00 and re-checks the day only at hour 0); and a gap at
///   midnight on the first of a month shifts the month loop to 23:00, which can drop the
///   first day of a later month;
/// - transitions that are not whole hours (Lord Howe's 30 minutes, Chatham at 03:45): after
///   the fold the hour loop steps on the half hour and misses times on the hour for the rest
///   of the day, and at Chatham a repeated wall time of hour 2 fires once, of hour 3 twice.
///
/// Under any chosen policy those quirks are gone: the ticks are exactly the policy's
/// definition in every zone (the reference test covers all of the zones above).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DstPolicy {
    /// Wall times that do not exist (spring forward); `None` is Dapr's, closest to
    /// [`Gap::Skip`].
    pub gap: Option<Gap>,
    /// Wall times that happen twice (fall back); `None` is Dapr's, closest to
    /// [`Repeat::Twice`].
    pub repeat: Option<Repeat>,
}

impl DstPolicy {
    /// Dapr's behaviour: both fields `None`.
    pub const DAPR: DstPolicy = DstPolicy {
        gap: None,
        repeat: None,
    };

    /// Whether both fields are `None`: Dapr's walk, quirks included, so callers may use
    /// [`Schedule::next`](super::Schedule::next) directly.
    pub fn is_dapr(&self) -> bool {
        self.gap.is_none() && self.repeat.is_none()
    }
}

/// What to do with a matching wall time that a spring-forward gap removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gap {
    /// It does not fire; the next tick is the next matching wall time that exists (what Dapr
    /// does).
    Skip,
    /// It fires shifted forward by the length of the gap, i.e. at the instant the wall time
    /// names when read with the offset in force before the transition: New York 02:30 on
    /// 2026-03-08 fires at 07:30Z = 03:30 EDT, London 01:30 on 2026-03-29 at 01:30Z = 02:30
    /// BST. A shifted tick that lands on an instant that is a tick anyway fires once: an
    /// hourly or every-30-minutes job is the same under `Shift` and `Skip`, since 02:00 and
    /// 02:30 shift onto 03:00 and 03:30 EDT.
    Shift,
}

/// What to do with a matching wall time that a fall-back fold makes happen twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repeat {
    /// Fire only at the first occurrence, before the transition (New York: EDT; London: BST).
    First,
    /// Fire only at the second occurrence, after the transition (New York: EST; London: GMT).
    Last,
    /// Fire at both (what Dapr does).
    Twice,
}

/// A `dst.gap` or `dst.repeat` value that is not one of the allowed words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DstPolicyError {
    /// Not `skip` or `shift`.
    #[error("invalid dst.gap {value:?}: allowed values are \"skip\" and \"shift\"")]
    Gap {
        /// The text given.
        value: String,
    },
    /// Not `first`, `last` or `twice`.
    #[error("invalid dst.repeat {value:?}: allowed values are \"first\", \"last\" and \"twice\"")]
    Repeat {
        /// The text given.
        value: String,
    },
}

impl Gap {
    /// The accepted spellings, in documentation order.
    pub const ALLOWED: [&'static str; 2] = ["skip", "shift"];

    /// `"skip"` or `"shift"`, exactly (lower case).
    pub fn parse(value: &str) -> Result<Gap, DstPolicyError> {
        match value {
            "skip" => Ok(Gap::Skip),
            "shift" => Ok(Gap::Shift),
            _ => Err(DstPolicyError::Gap {
                value: value.to_owned(),
            }),
        }
    }

    /// The spelling [`Gap::parse`] reads back.
    pub fn as_str(self) -> &'static str {
        match self {
            Gap::Skip => "skip",
            Gap::Shift => "shift",
        }
    }
}

impl Repeat {
    /// The accepted spellings, in documentation order.
    pub const ALLOWED: [&'static str; 3] = ["first", "last", "twice"];

    /// `"first"`, `"last"` or `"twice"`, exactly (lower case).
    pub fn parse(value: &str) -> Result<Repeat, DstPolicyError> {
        match value {
            "first" => Ok(Repeat::First),
            "last" => Ok(Repeat::Last),
            "twice" => Ok(Repeat::Twice),
            _ => Err(DstPolicyError::Repeat {
                value: value.to_owned(),
            }),
        }
    }

    /// The spelling [`Repeat::parse`] reads back.
    pub fn as_str(self) -> &'static str {
        match self {
            Repeat::First => "first",
            Repeat::Last => "last",
            Repeat::Twice => "twice",
        }
    }
}

impl FromStr for Gap {
    type Err = DstPolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Gap::parse(s)
    }
}

impl FromStr for Repeat {
    type Err = DstPolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Repeat::parse(s)
    }
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Repeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Offset changes are found by reading the offset once a day and bisecting where it changed.
/// The tz database has no two transitions closer than about a week (the closest since 1850
/// are 8 days apart), so a day holds at most one.
const PROBE: i64 = 86_400;

/// How far before `after` the spans start. The longest gap (Samoa skipped 2011-12-30) and
/// the longest fold in the tz database are a day; a transition a day or more before `after`
/// cannot shift a tick past `after` nor put it in a repeated pass.
const LOOKBACK: i64 = 86_400;

/// The next tick of a spec in a zone with transitions, under a policy that is not Dapr's: the
/// first instant after `after` that is either
/// - an instant whose wall reading matches, unless `repeat` rules out its pass of a fold, or
/// - with [`Gap::Shift`], a matching wall time inside a gap, read with the offset before it;
///
/// no later than the end of the local year five years on (kit's `yearLimit`).
///
/// It walks the zone's constant-offset spans. Inside a span the reading is the instant plus a
/// fixed offset, so the UTC civil search finds the span's first match directly; the policy
/// only trims the span's ends (the second pass of a fold at its start for `First`, the first
/// pass of a fold at its end for `Last`) and adds the shifted gap before it.
pub(super) fn next(
    s: &SpecSchedule,
    tz: Tz,
    after: DateTime<Utc>,
    policy: &DstPolicy,
) -> Option<DateTime<Utc>> {
    let b = &s.bits;
    if [b.second, b.minute, b.hour, b.month]
        .iter()
        .any(|bits| bits & !STAR_BIT == 0)
    {
        return None;
    }
    let gap = policy.gap.unwrap_or(Gap::Skip);
    let repeat = policy.repeat.unwrap_or(Repeat::Twice);

    // Kit starts at the next whole second.
    let start = after.timestamp().checked_add(1)?;
    let horizon = horizon(tz, start)?;

    let mut span_start = start.checked_sub(LOOKBACK)?;
    let mut offset = offset_at(tz, span_start)?;
    // The span holding `start - LOOKBACK` began earlier still: its own transition is too far
    // back to matter, so it is treated as having none.
    let mut prev = offset;
    while span_start < horizon {
        // This span's first candidates as if it never ended.
        let shifted = if gap == Gap::Shift && prev < offset {
            // Wall times [span_start + prev, span_start + offset) do not exist; shifted, each
            // fires at `wall - prev`, in [span_start, span_start + gap length).
            let first = span_start.max(start).checked_add(prev)?;
            let stop = span_start.checked_add(offset)?;
            first_match(s, first, stop).and_then(|wall| wall.checked_sub(prev))
        } else {
            None
        };
        // The second pass of a fold at the span's start is [span_start, + fold length).
        let mut lo = span_start;
        if repeat == Repeat::First && prev > offset {
            lo = lo.checked_add(prev - offset)?;
        }
        let existing = first_match(s, lo.max(start).checked_add(offset)?, i64::MAX)
            .and_then(|wall| wall.checked_sub(offset));
        let Some(first) = min_some(shifted, existing) else {
            // No wall time matches for five years.
            return None;
        };
        // Only now find where the span ends, and only up to a day past the candidate (or the
        // horizon): a day is enough to see a fold whose first pass the candidate is in.
        let until = first.min(horizon).saturating_add(LOOKBACK);
        let Some((end, next)) = next_change(tz, span_start, offset, until) else {
            return before_horizon(first, horizon);
        };
        // The first pass of a fold at the span's end is [end - fold length, end).
        let mut hi = end;
        if repeat == Repeat::Last && offset > next {
            hi = hi.checked_sub(offset - next)?;
        }
        // A shifted tick is within a day of the span's start, well before its end.
        if let Some(t) = min_some(shifted, existing.filter(|&t| t < hi)) {
            return before_horizon(t, horizon);
        }
        (span_start, prev, offset) = (end, offset, next);
    }
    None
}

/// The tick at `t`, unless it is past the search's end, as the walk's `None` is.
fn before_horizon(t: i64, horizon: i64) -> Option<DateTime<Utc>> {
    if t < horizon {
        DateTime::from_timestamp(t, 0)
    } else {
        None
    }
}

/// The smaller of two optional instants.
fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The first wall time in `[from, stop)` (seconds since the epoch, read as a civil clock)
/// that matches the fields.
pub(super) fn first_match(s: &SpecSchedule, from: i64, stop: i64) -> Option<i64> {
    if from >= stop {
        return None;
    }
    let wall = fast::next(s, DateTime::from_timestamp(from.checked_sub(1)?, 0)?)?.timestamp();
    (wall < stop).then_some(wall)
}

/// A change of a zone's offset from UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The first instant with the new offset.
    pub at: DateTime<Utc>,
    /// Seconds east of UTC before it.
    pub before: i32,
    /// Seconds east of UTC from it on.
    pub after: i32,
}

impl Transition {
    /// Whether wall times are skipped (spring forward) rather than repeated (fall back).
    pub fn is_gap(&self) -> bool {
        self.after > self.before
    }
}

/// The offset changes of `tz` in `(from, until]`, oldest first.
pub fn transitions(tz: Tz, from: DateTime<Utc>, until: DateTime<Utc>) -> Vec<Transition> {
    let mut found = Vec::new();
    let (mut lo, until) = (from.timestamp(), until.timestamp());
    let Some(mut offset) = offset_at(tz, lo) else {
        return found;
    };
    while let Some((at, next)) = next_change(tz, lo, offset, until) {
        let (Some(instant), Ok(before), Ok(after)) = (
            DateTime::from_timestamp(at, 0),
            i32::try_from(offset),
            i32::try_from(next),
        ) else {
            break;
        };
        found.push(Transition {
            at: instant,
            before,
            after,
        });
        (lo, offset) = (at, next);
    }
    found
}

/// Seconds east of UTC in force at a Unix second.
fn offset_at(tz: Tz, unix: i64) -> Option<i64> {
    let utc = DateTime::<Utc>::from_timestamp(unix, 0)?.naive_utc();
    Some(i64::from(
        tz.offset_from_utc_datetime(&utc).fix().local_minus_utc(),
    ))
}

/// Kit's `yearLimit` as an instant: the start of the local year six years after the one
/// `start` falls in (the walk gives up once it reads a year past `year + 5`).
fn horizon(tz: Tz, start: i64) -> Option<i64> {
    let year = DateTime::from_timestamp(start, 0)?
        .with_timezone(&tz)
        .year();
    let wall = days_from_civil(i64::from(year) + 6, 1, 1).checked_mul(86_400)?;
    wall.checked_sub(offset_at(tz, wall)?)
}

/// The first offset change in `(lo, until]`, given the offset `before` at `lo`: its instant and
/// the new offset. Past the end of chrono's range there is none.
fn next_change(tz: Tz, mut lo: i64, before: i64, until: i64) -> Option<(i64, i64)> {
    while lo < until {
        let mut hi = lo.saturating_add(PROBE).min(until);
        let after = offset_at(tz, hi)?;
        if after != before {
            // The first instant in (lo, hi] with the new offset.
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if offset_at(tz, mid)? == after {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            return Some((hi, after));
        }
        lo = hi;
    }
    None
}

#[cfg(test)]
mod tests;
