use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::schedule::cron::{DstPolicy, Repeat};
use crate::schedule::job::{JobSpec, validate};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn plan(schedule: &str, now: DateTime<Utc>, dst: DstPolicy) -> Plan {
    let mut plan = validate(
        &JobSpec {
            schedule: Some(schedule.into()),
            ..JobSpec::default()
        },
        now,
    )
    .unwrap();
    if !dst.is_dapr() {
        plan.policy_mut().dst = dst;
    }
    plan
}

fn times(p: &Preview) -> Vec<String> {
    p.ticks.iter().map(|t| t.time.to_rfc3339()).collect()
}

#[test]
fn the_march_gap_skips_the_missing_tick_and_says_so() {
    let now = at("2027-03-12T12:00:00Z");
    let p = preview(
        &plan("TZ=America/New_York 0 30 2 * * *", now, DstPolicy::DAPR),
        now,
        4,
    );
    assert_eq!(p.zone, "America/New_York");
    // 2027-03-14 02:30 does not exist: no tick that day.
    assert_eq!(
        times(&p),
        [
            "2027-03-13T07:30:00+00:00",
            "2027-03-15T06:30:00+00:00",
            "2027-03-16T06:30:00+00:00",
            "2027-03-17T06:30:00+00:00",
        ]
    );
    assert_eq!(p.ticks[0].local, "2027-03-13T02:30:00-05:00");
    assert_eq!(p.ticks[0].abbreviation, "EST");
    assert_eq!(p.ticks[1].local, "2027-03-15T02:30:00-04:00");
    assert_eq!(p.ticks[1].abbreviation, "EDT");
    assert!(p.ticks[0].notes.is_empty());
    assert_eq!(
        p.ticks[1].notes,
        [
            "02:30 on 2027-03-14 does not exist in America/New_York (clocks jump from 02:00 to \
          03:00) (DST gap): skipped, no run for it"
        ]
    );
    assert!(p.ticks[2..].iter().all(|t| t.notes.is_empty()));
}

#[test]
fn the_march_gap_under_shift_fires_the_tick_an_hour_later() {
    let now = at("2027-03-12T12:00:00Z");
    let shift = DstPolicy {
        gap: Some(Gap::Shift),
        repeat: None,
    };
    let p = preview(
        &plan("TZ=America/New_York 0 30 2 * * *", now, shift),
        now,
        3,
    );
    assert_eq!(
        times(&p),
        [
            "2027-03-13T07:30:00+00:00",
            "2027-03-14T07:30:00+00:00",
            "2027-03-15T06:30:00+00:00",
        ]
    );
    assert_eq!(p.ticks[1].local, "2027-03-14T03:30:00-04:00");
    assert_eq!(
        p.ticks[1].notes,
        [
            "02:30 on 2027-03-14 does not exist in America/New_York (clocks jump from 02:00 to \
          03:00) (DST gap): fires at 03:30 EDT instead, shifted by the gap (policy.dst.gap \
          \"shift\")"
        ]
    );
    assert!(p.ticks[2].notes.is_empty());
}

#[test]
fn an_hourly_job_loses_the_missing_hour_or_shifts_it_onto_the_next() {
    let now = at("2027-03-14T05:30:00Z"); // 00:30 EST
    let hourly = "TZ=America/New_York 0 0 * * * *";
    let p = preview(&plan(hourly, now, DstPolicy::DAPR), now, 3);
    assert_eq!(
        p.ticks.iter().map(|t| t.local.as_str()).collect::<Vec<_>>(),
        [
            "2027-03-14T01:00:00-05:00",
            "2027-03-14T03:00:00-04:00",
            "2027-03-14T04:00:00-04:00"
        ]
    );
    assert_eq!(
        p.ticks[1].notes,
        [
            "02:00 on 2027-03-14 does not exist in America/New_York (clocks jump from 02:00 to \
          03:00) (DST gap): skipped, no run for it"
        ]
    );
    let shift = DstPolicy {
        gap: Some(Gap::Shift),
        repeat: None,
    };
    let p = preview(&plan(hourly, now, shift), now, 3);
    assert_eq!(p.ticks[1].local, "2027-03-14T03:00:00-04:00");
    assert_eq!(
        p.ticks[1].notes,
        [
            "02:00 on 2027-03-14 does not exist in America/New_York (clocks jump from 02:00 to \
          03:00) (DST gap): shifted onto 03:00 EDT, which fires once (policy.dst.gap \
          \"shift\")"
        ]
    );
}

#[test]
fn the_november_repeat_fires_twice_or_once_and_says_so() {
    let now = at("2027-11-06T12:00:00Z");
    let spec = "TZ=America/New_York 0 30 1 * * *";
    let p = preview(&plan(spec, now, DstPolicy::DAPR), now, 3);
    assert_eq!(
        times(&p),
        [
            "2027-11-07T05:30:00+00:00",
            "2027-11-07T06:30:00+00:00",
            "2027-11-08T06:30:00+00:00",
        ]
    );
    assert_eq!(
        p.ticks[0].notes,
        [
            "01:30 on 2027-11-07 happens twice in America/New_York (DST repeat): this is the \
          first, 01:30 EDT; it fires at both"
        ]
    );
    assert_eq!(
        p.ticks[1].notes,
        [
            "01:30 on 2027-11-07 happens twice in America/New_York (DST repeat): this is the \
          second, 01:30 EST; it fires at both"
        ]
    );
    assert!(p.ticks[2].notes.is_empty());

    let first = DstPolicy {
        gap: None,
        repeat: Some(Repeat::First),
    };
    let p = preview(&plan(spec, now, first), now, 2);
    assert_eq!(
        times(&p),
        ["2027-11-07T05:30:00+00:00", "2027-11-08T06:30:00+00:00"]
    );
    assert_eq!(
        p.ticks[0].notes,
        [
            "01:30 on 2027-11-07 happens twice in America/New_York (DST repeat): this is the \
          first, 01:30 EDT; it fires only at this one, not at 01:30 EST"
        ]
    );
}

#[test]
fn utc_schedules_count_repeats_and_stop_when_the_job_does() {
    let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let mut p = plan("@every 90s", now, DstPolicy::DAPR);
    p.repeats = Some(2);
    let v = preview(&p, now, 10);
    assert_eq!(v.zone, "UTC");
    assert_eq!(
        times(&v),
        ["2026-01-01T00:01:30+00:00", "2026-01-01T00:03:00+00:00"]
    );
    assert_eq!(v.ticks[0].local, "2026-01-01T00:01:30Z");
    assert!(
        v.ticks
            .iter()
            .all(|t| t.notes.is_empty() && t.fire_time == t.time)
    );
    // Bounded, whatever is asked.
    let many = preview(&plan("@every 1s", now, DstPolicy::DAPR), now, 5000);
    assert_eq!(many.ticks.len(), MAX_COUNT);
}
