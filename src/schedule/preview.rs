//! A job's next fire times before it exists (`POST /jobsd/v1/preview`): the ticks its
//! [`Plan`] gives from `now`, in UTC and in the schedule's zone, with a note on each tick a
//! daylight-saving transition changes — a local time that does not exist (gap) or happens
//! twice (repeat). The ticks are the plan's own (the same code fires them); the notes only
//! compare them with the zone's transitions and the schedule's fields.

use chrono::offset::LocalResult;
use chrono::{DateTime, NaiveDateTime, SecondsFormat, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::{OffsetName, Tz};

use super::cron::{Gap, SpecSchedule, Transition, transitions};
use super::{Counter, Outcome, Plan, Schedule};

/// Ticks previewed when no count is given.
pub const DEFAULT_COUNT: usize = 10;

/// Most ticks one preview gives.
pub const MAX_COUNT: usize = 1000;

/// Most matching wall times looked at in one daylight-saving gap (a gap lasts an hour or
/// so, a day at most; a schedule firing every second has 3600 in an hour).
const GAP_WALLS: usize = 100_000;

/// The next ticks of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// The zone the schedule's fields are read in: a `TZ=`/`CRON_TZ=` prefix's, else `UTC`.
    pub zone: String,
    /// The ticks, in order; fewer than asked when the job finishes first.
    pub ticks: Vec<PreviewTick>,
}

/// One tick of a preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewTick {
    /// Its nominal time (what counters, history and execution ids use).
    pub time: DateTime<Utc>,
    /// When its first attempt goes out: the nominal time plus the job's jitter offset, or
    /// `now` for a tick already due.
    pub fire_time: DateTime<Utc>,
    /// The nominal time in the schedule's zone, RFC 3339 with the offset.
    pub local: String,
    /// The zone's abbreviation at that instant (`EDT`), empty when the tz database has none.
    pub abbreviation: String,
    /// What a daylight-saving transition did to it, or that it is already due.
    pub notes: Vec<String>,
}

/// The first `count` ticks (at most [`MAX_COUNT`]) of `plan` for a job created at `now`.
pub fn preview(plan: &Plan, now: DateTime<Utc>, count: usize) -> Preview {
    upcoming(
        plan,
        &Counter::default(),
        now,
        count,
        "already due: fires as soon as the job is created",
    )
}

/// The next `count` ticks (at most [`MAX_COUNT`]) of a stored job that has got as far as
/// `progress`, at `now` (`GET /jobsd/v1/jobs/{name}/next`). The first is the tick it is on:
/// one that is due (in flight, or waiting for a retry or for the app) fires as soon as it can.
pub fn next_ticks(plan: &Plan, progress: &Counter, now: DateTime<Utc>, count: usize) -> Preview {
    upcoming(
        plan,
        progress,
        now,
        count,
        "already due: fires (or is firing) as soon as it can",
    )
}

/// `count` ticks of `plan` from `progress` on, noting a tick before `now` with `due_note`.
fn upcoming(
    plan: &Plan,
    progress: &Counter,
    now: DateTime<Utc>,
    count: usize,
    due_note: &str,
) -> Preview {
    let zone = match &plan.schedule {
        Some(Schedule::Spec(spec)) => spec.time_zone(),
        _ => None,
    }
    .unwrap_or(Tz::UTC);
    let mut ticks = Vec::new();
    let mut counter = *progress;
    while ticks.len() < count.min(MAX_COUNT) {
        let (Some(time), Some(fire)) = (plan.next_tick(&counter), plan.fire_time(&counter)) else {
            break;
        };
        let local = time.with_timezone(&zone);
        let mut notes = Vec::new();
        if time < now {
            notes.push(due_note.to_owned());
        }
        ticks.push(PreviewTick {
            time,
            fire_time: fire.max(now),
            local: local.to_rfc3339_opts(SecondsFormat::AutoSi, true),
            abbreviation: local.offset().abbreviation().unwrap_or_default().to_owned(),
            notes,
        });
        counter = plan.apply(&counter, Outcome::Success).counter;
    }
    if let Some(Schedule::Spec(spec)) = &plan.schedule
        && zone != Tz::UTC
    {
        Notes {
            plan,
            spec,
            tz: zone,
        }
        .add(now, &mut ticks);
    }
    Preview {
        zone: zone.name().to_owned(),
        ticks,
    }
}

/// Finds the daylight-saving notes of a cron schedule read in a zone.
struct Notes<'a> {
    plan: &'a Plan,
    spec: &'a SpecSchedule,
    tz: Tz,
}

impl Notes<'_> {
    fn add(&self, now: DateTime<Utc>, ticks: &mut [PreviewTick]) {
        let Some(last) = ticks.last().map(|t| t.time) else {
            return;
        };
        for tick in ticks.iter_mut() {
            if let Some(note) = self.tick_note(tick.time) {
                tick.notes.push(note);
            }
        }
        for gap in transitions(self.tz, now, last)
            .into_iter()
            .filter(Transition::is_gap)
        {
            self.gap_notes(&gap, ticks);
        }
    }

    /// The note of a tick whose wall time is not an ordinary one: shifted out of a gap, one
    /// of the two passes of a repeated hour, or off the fields (Dapr's quirks).
    fn tick_note(&self, t: DateTime<Utc>) -> Option<String> {
        let wall = self.wall(t);
        if !self.matches(wall) {
            if let Some(gap) = self.gap_holding(t)
                && let Some(skipped) = wall_of(t, gap.before).filter(|w| self.matches(*w))
            {
                return Some(format!(
                    "{} (DST gap): fires at {} instead, shifted by the gap (policy.dst.gap \
                     \"shift\")",
                    self.missing(skipped, &gap),
                    self.local(t)
                ));
            }
            return Some(format!(
                "fires at {} although the schedule's fields do not match that time: Dapr's \
                 behaviour next to a DST transition at local midnight",
                self.local(t)
            ));
        }
        let LocalResult::Ambiguous(first, second) = self.tz.from_local_datetime(&wall) else {
            return None;
        };
        let (first, second) = (first.with_timezone(&Utc), second.with_timezone(&Utc));
        let (which, other) = if t == first {
            ("first", second)
        } else {
            ("second", first)
        };
        let both = if self.is_tick(other) {
            "it fires at both".to_owned()
        } else {
            format!("it fires only at this one, not at {}", self.local(other))
        };
        Some(format!(
            "{} on {} happens twice in {} (DST repeat): this is the {which}, {}; {both}",
            clock_time(wall),
            wall.date(),
            self.tz.name(),
            self.local(t),
        ))
    }

    /// Notes the matching wall times a gap removes: on the first tick after it when they are
    /// skipped, on the tick they are shifted onto when that is an ordinary tick anyway.
    fn gap_notes(&self, gap: &Transition, ticks: &mut [PreviewTick]) {
        let (Some(from), Some(stop)) = (wall_of(gap.at, gap.before), wall_of(gap.at, gap.after))
        else {
            return;
        };
        let shift = self.plan.policy().dst.gap == Some(Gap::Shift);
        let mut skipped = Vec::new();
        let mut cursor = from;
        for _ in 0..GAP_WALLS {
            let Some(wall) = self.spec.first_wall_match(cursor, stop) else {
                break;
            };
            cursor = wall + TimeDelta::seconds(1);
            let shifted = wall.and_utc() - TimeDelta::seconds(i64::from(gap.before));
            if !(shift && self.is_tick(shifted)) {
                skipped.push(wall);
            } else if self.matches(self.wall(shifted))
                && let Some(tick) = ticks.iter_mut().find(|t| t.time == shifted)
            {
                tick.notes.push(format!(
                    "{} (DST gap): shifted onto {}, which fires once (policy.dst.gap \"shift\")",
                    self.missing(wall, gap),
                    self.local(shifted)
                ));
            }
            // Otherwise the shifted tick is off the fields and notes itself.
        }
        let (Some(first), Some(last)) = (skipped.first(), skipped.last()) else {
            return;
        };
        let Some(next) = ticks.iter_mut().find(|t| t.time >= gap.at) else {
            return;
        };
        let what = if skipped.len() == 1 {
            self.missing(*first, gap)
        } else {
            format!(
                "{} matching times from {} to {} on {} do not exist in {} (clocks jump from {} \
                 to {})",
                skipped.len(),
                clock_time(*first),
                clock_time(*last),
                first.date(),
                self.tz.name(),
                clock_time(from),
                clock_time(stop),
            )
        };
        next.notes.push(format!(
            "{what} (DST gap): skipped, no run for {}",
            if skipped.len() == 1 { "it" } else { "them" }
        ));
    }

    /// "02:30 on 2027-03-14 does not exist in America/New_York (clocks jump from 02:00 to
    /// 03:00)".
    fn missing(&self, wall: NaiveDateTime, gap: &Transition) -> String {
        let jump = match (wall_of(gap.at, gap.before), wall_of(gap.at, gap.after)) {
            (Some(from), Some(to)) => {
                format!(
                    " (clocks jump from {} to {})",
                    clock_time(from),
                    clock_time(to)
                )
            }
            _ => String::new(),
        };
        format!(
            "{} on {} does not exist in {}{jump}",
            clock_time(wall),
            wall.date(),
            self.tz.name()
        )
    }

    /// The gap `t` falls in the shifted span of (the instants just after a spring forward
    /// that shifted wall times land on).
    fn gap_holding(&self, t: DateTime<Utc>) -> Option<Transition> {
        transitions(self.tz, t - TimeDelta::days(1), t)
            .into_iter()
            .rev()
            .find(|g| g.is_gap() && t < g.at + TimeDelta::seconds(i64::from(g.after - g.before)))
    }

    /// Whether the plan fires a tick at `t` (asked of the plan itself).
    fn is_tick(&self, t: DateTime<Utc>) -> bool {
        self.plan.schedule.as_ref().is_some_and(|s| {
            s.next_with(t - TimeDelta::seconds(1), &self.plan.policy().dst) == Some(t)
        })
    }

    /// Whether the fields match a wall time.
    fn matches(&self, wall: NaiveDateTime) -> bool {
        self.spec
            .first_wall_match(wall, wall + TimeDelta::seconds(1))
            .is_some_and(|w| w == wall)
    }

    /// The wall time of `t` in the zone.
    fn wall(&self, t: DateTime<Utc>) -> NaiveDateTime {
        t.with_timezone(&self.tz).naive_local()
    }

    /// "03:30 EDT".
    fn local(&self, t: DateTime<Utc>) -> String {
        let local = t.with_timezone(&self.tz);
        let name = local.offset().abbreviation().unwrap_or_default();
        format!("{} {name}", clock_time(local.naive_local()))
            .trim_end()
            .to_owned()
    }
}

/// The wall time of instant `t` read with a fixed offset (seconds east of UTC).
fn wall_of(t: DateTime<Utc>, offset: i32) -> Option<NaiveDateTime> {
    t.naive_utc()
        .checked_add_signed(TimeDelta::seconds(i64::from(offset)))
}

/// `02:30`, or `02:30:15` when the seconds are not zero.
fn clock_time(wall: NaiveDateTime) -> String {
    if wall.second() == 0 {
        wall.format("%H:%M").to_string()
    } else {
        wall.format("%H:%M:%S").to_string()
    }
}

#[cfg(test)]
mod tests;
