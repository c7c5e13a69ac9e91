//! The DST policy: what Dapr does today around the 2026 transitions (pinned through
//! `Schedule::next`), the exact ticks of every gap and repeat choice in New York and London,
//! an independent "every instant whose reading matches" reference that both the Dapr walk and
//! the policies are held to near real transitions, and properties.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

use super::super::civil::{civil_from_days, weekday};
use super::super::tests::{instant, spec_text};
use super::super::{Schedule, SpecSchedule, fast, parse};
use super::*;

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("bad test time {s}: {e}"))
        .with_timezone(&Utc)
}

fn sched(spec: &str) -> Schedule {
    parse(spec).unwrap_or_else(|e| panic!("{spec:?} should parse: {e}"))
}

fn spec_of(spec: &str) -> SpecSchedule {
    match sched(spec) {
        Schedule::Spec(s) => s,
        Schedule::Every(_) => panic!("{spec:?} is not a cron spec"),
    }
}

fn zone(name: &str) -> Tz {
    name.parse()
        .unwrap_or_else(|e| panic!("{name} should be a zone: {e}"))
}

const fn policy(gap: Option<Gap>, repeat: Option<Repeat>) -> DstPolicy {
    DstPolicy { gap, repeat }
}

const DAPR: DstPolicy = DstPolicy::DAPR;
const SKIP: DstPolicy = policy(Some(Gap::Skip), None);
const SHIFT: DstPolicy = policy(Some(Gap::Shift), None);
const FIRST: DstPolicy = policy(None, Some(Repeat::First));
const LAST: DstPolicy = policy(None, Some(Repeat::Last));
const TWICE: DstPolicy = policy(None, Some(Repeat::Twice));

/// Every policy a field combination can spell, Dapr's included.
fn all_policies() -> Vec<DstPolicy> {
    let mut out = Vec::new();
    for gap in [None, Some(Gap::Skip), Some(Gap::Shift)] {
        for repeat in [
            None,
            Some(Repeat::First),
            Some(Repeat::Last),
            Some(Repeat::Twice),
        ] {
            out.push(policy(gap, repeat));
        }
    }
    out
}

/// The ticks after `from` up to and including `until`, chaining `next_with`.
fn ticks_with(spec: &str, p: &DstPolicy, from: &str, until: &str) -> Vec<DateTime<Utc>> {
    let s = sched(spec);
    let until = utc(until);
    let mut out = Vec::new();
    let mut t = utc(from);
    while let Some(next) = s.next_with(t, p) {
        assert!(next > t, "{spec} {p:?}: {next} after {t}");
        if next > until {
            break;
        }
        out.push(next);
        t = next;
    }
    out
}

/// The same through Dapr's own `next`.
fn ticks_dapr(spec: &str, from: &str, until: &str) -> Vec<DateTime<Utc>> {
    let s = sched(spec);
    let until = utc(until);
    let mut out = Vec::new();
    let mut t = utc(from);
    while let Some(next) = s.next(t) {
        if next > until {
            break;
        }
        out.push(next);
        t = next;
    }
    out
}

fn instants(want: &[&str]) -> Vec<DateTime<Utc>> {
    want.iter().map(|w| utc(w)).collect()
}

/// Checks each policy's ticks over a window.
fn check(spec: &str, from: &str, until: &str, cases: &[(&[DstPolicy], &[&str])]) {
    for (policies, want) in cases {
        for p in *policies {
            assert_eq!(
                ticks_with(spec, p, from, until),
                instants(want),
                "{spec} under {p:?} from {from}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Step 1: what Dapr does today, through `Schedule::next` (the walk), in UTC instants.

/// New York, 2026-03-08: 02:00 EST (07:00Z) jumps to 03:00 EDT.
#[test]
fn dapr_gap_is_skip_new_york_spring_2026() {
    // A daily 02:30 has no run on 03-08 at all: not at 03:00, not at 03:30 EDT.
    assert_eq!(
        ticks_dapr(
            "TZ=America/New_York 0 30 2 * * *",
            "2026-03-06T12:00:00Z",
            "2026-03-10T12:00:00Z"
        ),
        instants(&[
            "2026-03-07T07:30:00Z", // 02:30 EST
            "2026-03-09T06:30:00Z", // 02:30 EDT
            "2026-03-10T06:30:00Z",
        ])
    );
    // A daily 01:30 is before the gap and unaffected.
    assert_eq!(
        ticks_dapr(
            "TZ=America/New_York 0 30 1 * * *",
            "2026-03-06T12:00:00Z",
            "2026-03-09T12:00:00Z"
        ),
        instants(&[
            "2026-03-07T06:30:00Z",
            "2026-03-08T06:30:00Z", // 01:30 EST
            "2026-03-09T05:30:00Z", // 01:30 EDT
        ])
    );
    // Every 30 minutes: 01:30 EST is followed by 03:00 EDT, half an hour of real time later;
    // 02:00 and 02:30 simply do not occur.
    assert_eq!(
        ticks_dapr(
            "TZ=America/New_York 0 */30 * * * *",
            "2026-03-08T04:59:59Z",
            "2026-03-08T08:30:00Z"
        ),
        instants(&[
            "2026-03-08T05:00:00Z", // 00:00 EST
            "2026-03-08T05:30:00Z",
            "2026-03-08T06:00:00Z", // 01:00 EST
            "2026-03-08T06:30:00Z", // 01:30 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT
            "2026-03-08T07:30:00Z", // 03:30 EDT
            "2026-03-08T08:00:00Z",
            "2026-03-08T08:30:00Z",
        ])
    );
    // Hourly: 01:00 EST, then 03:00 EDT.
    assert_eq!(
        ticks_dapr(
            "TZ=America/New_York 0 0 * * * *",
            "2026-03-08T04:59:59Z",
            "2026-03-08T08:00:00Z"
        ),
        instants(&[
            "2026-03-08T05:00:00Z",
            "2026-03-08T06:00:00Z", // 01:00 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT
            "2026-03-08T08:00:00Z",
        ])
    );
    // Starting just before the gap, or inside the hour before it, changes nothing.
    let s = sched("TZ=America/New_York 0 30 2 * * *");
    for from in [
        "2026-03-08T06:59:59Z",
        "2026-03-08T06:30:00Z",
        "2026-03-08T05:00:00Z",
    ] {
        assert_eq!(
            s.next(utc(from)),
            Some(utc("2026-03-09T06:30:00Z")),
            "{from}"
        );
    }
}

/// New York, 2026-11-01: 02:00 EDT (06:00Z) falls back to 01:00 EST; 01:00-01:59 happen
/// twice, first at 05:00-05:59Z, again at 06:00-06:59Z.
#[test]
fn dapr_repeat_is_twice_new_york_fall_2026() {
    assert_eq!(
        ticks_dapr(
            "TZ=America/New_York 0 30 1 * * *",
            "2026-10-30T12:00:00Z",
            "2026-11-02T12:00:00Z"
        ),
        instants(&[
            "2026-10-31T05:30:00Z", // 01:30 EDT
            "2026-11-01T05:30:00Z", // 01:30 EDT, first pass
            "2026-11-01T06:30:00Z", // 01:30 EST, second pass
            "2026-11-02T06:30:00Z", // 01:30 EST
        ])
    );
    // A daily 02:30 is after the repeated hour and runs once.
    assert_eq!(
        ticks_dapr(
            "TZ=America/New_York 0 30 2 * * *",
            "2026-10-30T12:00:00Z",
            "2026-11-02T12:00:00Z"
        ),
        instants(&[
            "2026-10-31T06:30:00Z",
            "2026-11-01T07:30:00Z", // 02:30 EST
            "2026-11-02T07:30:00Z",
        ])
    );
    assert_eq!(
        ticks_dapr(
            "TZ=America/New_York 0 */30 * * * *",
            "2026-11-01T03:59:59Z",
            "2026-11-01T08:00:00Z"
        ),
        instants(&[
            "2026-11-01T04:00:00Z", // 00:00 EDT
            "2026-11-01T04:30:00Z",
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T05:30:00Z", // 01:30 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T06:30:00Z", // 01:30 EST
            "2026-11-01T07:00:00Z", // 02:00 EST
            "2026-11-01T07:30:00Z",
            "2026-11-01T08:00:00Z",
        ])
    );
    assert_eq!(
        ticks_dapr(
            "TZ=America/New_York 0 0 * * * *",
            "2026-11-01T03:59:59Z",
            "2026-11-01T08:00:00Z"
        ),
        instants(&[
            "2026-11-01T04:00:00Z",
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T07:00:00Z", // 02:00 EST
            "2026-11-01T08:00:00Z",
        ])
    );
    // Starting inside the second pass still finds the second 01:30.
    let s = sched("TZ=America/New_York 0 30 1 * * *");
    assert_eq!(
        s.next(utc("2026-11-01T06:10:00Z")),
        Some(utc("2026-11-01T06:30:00Z"))
    );
    // And from between the two, the second.
    assert_eq!(
        s.next(utc("2026-11-01T05:45:00Z")),
        Some(utc("2026-11-01T06:30:00Z"))
    );
}

/// Europe/London: 2026-03-29 01:00 GMT jumps to 02:00 BST (at 01:00Z); 2026-10-25 02:00 BST
/// falls back to 01:00 GMT (at 01:00Z), so 01:00-01:59 are skipped in spring and repeated in
/// autumn. East of Greenwich Go's `time.Date` resolves folds the other way than in New York,
/// but the walk never asks it to: the answers are the same skip and twice.
#[test]
fn dapr_london_2026_is_skip_and_twice() {
    assert_eq!(
        ticks_dapr(
            "TZ=Europe/London 0 30 1 * * *",
            "2026-03-27T12:00:00Z",
            "2026-03-31T12:00:00Z"
        ),
        instants(&[
            "2026-03-28T01:30:00Z",
            "2026-03-30T00:30:00Z",
            "2026-03-31T00:30:00Z"
        ])
    );
    assert_eq!(
        ticks_dapr(
            "TZ=Europe/London 0 30 1 * * *",
            "2026-10-23T12:00:00Z",
            "2026-10-26T12:00:00Z"
        ),
        instants(&[
            "2026-10-24T00:30:00Z",
            "2026-10-25T00:30:00Z", // 01:30 BST
            "2026-10-25T01:30:00Z", // 01:30 GMT
            "2026-10-26T01:30:00Z",
        ])
    );
}

/// Where a transition is not a whole hour the walk's hour step can miss a time that exists
/// once, right after a fold. Lord Howe Island goes from +11 to +10:30 at 02:00 local on
/// 2026-04-05 (15:00Z on 04-04), so 01:30-01:59 repeat and 02:00 +10:30 (15:30Z) exists
/// once. Dapr's hour loop steps 01:00 +11 → 01:30 +10:30 → 02:30 +10:30 and never sees 02:00
/// unless the search starts in hour 2 itself. A chosen policy runs it.
#[test]
fn dapr_quirk_lord_howe_half_hour_fold() {
    let spec = "TZ=Australia/Lord_Howe 0 0 2 * * *";
    let dapr = ["2026-04-03T15:00:00Z", "2026-04-05T15:30:00Z"];
    assert_eq!(
        ticks_dapr(spec, "2026-04-03T12:00:00Z", "2026-04-06T12:00:00Z"),
        instants(&dapr)
    );
    let s = sched(spec);
    // Even from inside the second pass: the hour loop restarts at `time.Date(.., 1, 0, 0)`,
    // which Go resolves to 01:00 +11 (14:00Z), and steps on the half hour from there.
    assert_eq!(
        s.next(utc("2026-04-04T15:10:00Z")),
        Some(utc("2026-04-05T15:30:00Z"))
    );
    assert_eq!(
        s.next(utc("2026-04-04T15:29:59Z")),
        Some(utc("2026-04-04T15:30:00Z"))
    );
    assert_eq!(
        ticks_with(spec, &DAPR, "2026-04-03T12:00:00Z", "2026-04-06T12:00:00Z"),
        instants(&dapr)
    );
    let defined = [
        "2026-04-03T15:00:00Z",
        "2026-04-04T15:30:00Z",
        "2026-04-05T15:30:00Z",
    ];
    for p in all_policies().iter().filter(|p| !p.is_dapr()) {
        assert_eq!(
            ticks_with(spec, p, "2026-04-03T12:00:00Z", "2026-04-06T12:00:00Z"),
            instants(&defined),
            "{p:?}"
        );
    }
}

/// A gap at midnight on the first of a month throws Dapr off far from the transition: São
/// Paulo went from -3 to -2 at 00:00 on 1966-11-01. Kit's month loop starts from
/// `time.Date(year, month, 1, 0, 0, 0)`, which for November 1966 is 23:00 on October 31st,
/// and keeps that wall time month by month: December is entered at 23:00 on the 1st, so a
/// midnight job skips 1966-12-01, a month after the transition.
#[test]
fn dapr_quirk_midnight_gap_on_the_first_of_a_month() {
    let s = sched("TZ=America/Sao_Paulo 0 0 0 * 12 *");
    let from = utc("1966-11-15T12:00:00Z");
    assert_eq!(s.next(from), Some(utc("1966-12-02T02:00:00Z")));
    for p in [SKIP, SHIFT, FIRST, LAST, TWICE] {
        assert_eq!(
            s.next_with(from, &p),
            Some(utc("1966-12-01T02:00:00Z")),
            "{p:?}"
        );
    }
}

/// Chatham falls back 45 minutes, from +13:45 to +12:45 at 03:45 local (2026-04-05, 14:00Z
/// on 04-04), so 02:45-03:44 repeat. Dapr runs a repeated time of hour 3 twice, but one of
/// hour 2 only once: after the first 02:45 its search reaches 03:00, leaves hour 3 through
/// the hour loop and never reads hour 2 again that day.
#[test]
fn dapr_quirk_chatham_repeats_hour_2_once() {
    assert_eq!(
        ticks_dapr(
            "TZ=Pacific/Chatham 0 45 2 * * *",
            "2026-04-03T00:00:00Z",
            "2026-04-05T23:00:00Z"
        ),
        instants(&[
            "2026-04-03T13:00:00Z",
            "2026-04-04T13:00:00Z", // 02:45 +13:45; the 02:45 +12:45 at 14:00Z is missed
            "2026-04-05T14:00:00Z",
        ])
    );
    assert_eq!(
        ticks_dapr(
            "TZ=Pacific/Chatham 0 0 3 * * *",
            "2026-04-03T00:00:00Z",
            "2026-04-05T23:00:00Z"
        ),
        instants(&[
            "2026-04-03T13:15:00Z",
            "2026-04-04T13:15:00Z", // 03:00 +13:45
            "2026-04-04T14:15:00Z", // 03:00 +12:45
            "2026-04-05T14:15:00Z",
        ])
    );
    assert_eq!(
        ticks_with(
            "TZ=Pacific/Chatham 0 45 2 * * *",
            &TWICE,
            "2026-04-03T00:00:00Z",
            "2026-04-05T23:00:00Z"
        ),
        instants(&[
            "2026-04-03T13:00:00Z",
            "2026-04-04T13:00:00Z",
            "2026-04-04T14:00:00Z",
            "2026-04-05T14:00:00Z",
        ])
    );
}

/// A gap at local midnight: Beirut went from +2 to +3 at 00:00 on 2019-03-31 (22:00Z on
/// 03-30). When kit's day loop steps onto that day, `time.Date` gives 01:00 and the
/// robfig/cron#157 nudge moves back an hour, to 23:00 on the 30th; the next day step then
/// lands on the 31st at 23:00 and is nudged on to April 1st. So a job limited to certain
/// days loses the whole transition day, not just the missing hour.
#[test]
fn dapr_quirk_midnight_gap_loses_the_day() {
    let spec = "TZ=Asia/Beirut 0 0 * 1,31 * *";
    let s = sched(spec);
    let from = utc("2019-03-30T21:59:58Z");
    assert_eq!(s.next(from), Some(utc("2019-03-31T21:00:00Z"))); // 04-01 00:00 +3
    // Under a chosen policy 03-31 01:00 +3 runs (and under shift the missing 00:00 as well,
    // read at +2: the same instant).
    for p in [SKIP, SHIFT, FIRST, LAST, TWICE] {
        assert_eq!(
            s.next_with(from, &p),
            Some(utc("2019-03-30T22:00:00Z")),
            "{p:?}"
        );
    }
}

/// A gap at local midnight, reached by kit's hour loop: São Paulo went from -3 to -2 at
/// 00:00 on 2005-10-16. The hour loop steps 23:00 on the 15th → 01:00 on the 16th and only
/// goes back to re-check the day when it reads hour 0, which never comes; so Dapr runs a
/// `1-15` job at 01:00 on the 16th, a day its fields do not match.
#[test]
fn dapr_quirk_midnight_gap_runs_on_a_wrong_day() {
    let spec = "TZ=America/Sao_Paulo 0 0 1 1-15 * *";
    let s = sched(spec);
    let from = utc("2005-10-15T12:00:00Z");
    assert_eq!(s.next(from), Some(utc("2005-10-16T03:00:00Z"))); // 10-16 01:00 -02
    for p in [SKIP, SHIFT, FIRST, LAST, TWICE] {
        assert_eq!(
            s.next_with(from, &p),
            Some(utc("2005-11-01T03:00:00Z")),
            "{p:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Step 3: every choice, exact ticks over the 2026 transitions.

#[test]
fn new_york_spring_daily_0230() {
    check(
        "TZ=America/New_York 0 30 2 * * *",
        "2026-03-06T12:00:00Z",
        "2026-03-10T12:00:00Z",
        &[
            (
                &[DAPR, SKIP, FIRST, LAST, TWICE],
                &[
                    "2026-03-07T07:30:00Z",
                    "2026-03-09T06:30:00Z",
                    "2026-03-10T06:30:00Z",
                ],
            ),
            (
                &[
                    SHIFT,
                    policy(Some(Gap::Shift), Some(Repeat::First)),
                    policy(Some(Gap::Shift), Some(Repeat::Last)),
                ],
                &[
                    "2026-03-07T07:30:00Z",
                    "2026-03-08T07:30:00Z", // 02:30 EST-intended = 03:30 EDT
                    "2026-03-09T06:30:00Z",
                    "2026-03-10T06:30:00Z",
                ],
            ),
        ],
    );
}

#[test]
fn new_york_fall_daily_0230_is_untouched() {
    for p in all_policies() {
        assert_eq!(
            ticks_with(
                "TZ=America/New_York 0 30 2 * * *",
                &p,
                "2026-10-30T12:00:00Z",
                "2026-11-02T12:00:00Z"
            ),
            instants(&[
                "2026-10-31T06:30:00Z",
                "2026-11-01T07:30:00Z",
                "2026-11-02T07:30:00Z",
            ]),
            "{p:?}"
        );
    }
}

#[test]
fn new_york_fall_daily_0130() {
    let shift = Some(Gap::Shift);
    check(
        "TZ=America/New_York 0 30 1 * * *",
        "2026-10-30T12:00:00Z",
        "2026-11-02T12:00:00Z",
        &[
            (
                &[DAPR, SKIP, SHIFT, TWICE],
                &[
                    "2026-10-31T05:30:00Z",
                    "2026-11-01T05:30:00Z",
                    "2026-11-01T06:30:00Z",
                    "2026-11-02T06:30:00Z",
                ],
            ),
            (
                &[FIRST, policy(shift, Some(Repeat::First))],
                &[
                    "2026-10-31T05:30:00Z",
                    "2026-11-01T05:30:00Z", // 01:30 EDT only
                    "2026-11-02T06:30:00Z",
                ],
            ),
            (
                &[LAST, policy(shift, Some(Repeat::Last))],
                &[
                    "2026-10-31T05:30:00Z",
                    "2026-11-01T06:30:00Z", // 01:30 EST only
                    "2026-11-02T06:30:00Z",
                ],
            ),
        ],
    );
    // From inside the fold: First has nothing left that day, Last still has the second.
    let s = sched("TZ=America/New_York 0 30 1 * * *");
    let between = utc("2026-11-01T05:45:00Z");
    assert_eq!(
        s.next_with(between, &FIRST),
        Some(utc("2026-11-02T06:30:00Z"))
    );
    assert_eq!(
        s.next_with(between, &LAST),
        Some(utc("2026-11-01T06:30:00Z"))
    );
    assert_eq!(
        s.next_with(utc("2026-11-01T05:00:00Z"), &LAST),
        Some(utc("2026-11-01T06:30:00Z"))
    );
}

#[test]
fn new_york_spring_daily_0130_is_untouched() {
    for p in all_policies() {
        assert_eq!(
            ticks_with(
                "TZ=America/New_York 0 30 1 * * *",
                &p,
                "2026-03-06T12:00:00Z",
                "2026-03-09T12:00:00Z"
            ),
            instants(&[
                "2026-03-07T06:30:00Z",
                "2026-03-08T06:30:00Z",
                "2026-03-09T05:30:00Z",
            ]),
            "{p:?}"
        );
    }
}

#[test]
fn new_york_every_30_minutes() {
    // Spring: 02:00 and 02:30 shift onto 03:00 and 03:30 EDT, which run anyway, so shift and
    // skip give the same eight runs.
    let spring = [
        "2026-03-08T05:00:00Z",
        "2026-03-08T05:30:00Z",
        "2026-03-08T06:00:00Z",
        "2026-03-08T06:30:00Z",
        "2026-03-08T07:00:00Z",
        "2026-03-08T07:30:00Z",
        "2026-03-08T08:00:00Z",
        "2026-03-08T08:30:00Z",
    ];
    for p in all_policies() {
        assert_eq!(
            ticks_with(
                "TZ=America/New_York 0 */30 * * * *",
                &p,
                "2026-03-08T04:59:59Z",
                "2026-03-08T08:30:00Z"
            ),
            instants(&spring),
            "{p:?}"
        );
    }
    check(
        "TZ=America/New_York 0 */30 * * * *",
        "2026-11-01T03:59:59Z",
        "2026-11-01T08:00:00Z",
        &[
            (
                &[DAPR, SKIP, SHIFT, TWICE],
                &[
                    "2026-11-01T04:00:00Z",
                    "2026-11-01T04:30:00Z",
                    "2026-11-01T05:00:00Z",
                    "2026-11-01T05:30:00Z",
                    "2026-11-01T06:00:00Z",
                    "2026-11-01T06:30:00Z",
                    "2026-11-01T07:00:00Z",
                    "2026-11-01T07:30:00Z",
                    "2026-11-01T08:00:00Z",
                ],
            ),
            (
                &[FIRST],
                &[
                    "2026-11-01T04:00:00Z",
                    "2026-11-01T04:30:00Z",
                    "2026-11-01T05:00:00Z", // 01:00 EDT
                    "2026-11-01T05:30:00Z", // 01:30 EDT
                    "2026-11-01T07:00:00Z", // 02:00 EST: an hour of real time later
                    "2026-11-01T07:30:00Z",
                    "2026-11-01T08:00:00Z",
                ],
            ),
            (
                &[LAST],
                &[
                    "2026-11-01T04:00:00Z",
                    "2026-11-01T04:30:00Z", // 00:30 EDT: then an hour's pause
                    "2026-11-01T06:00:00Z", // 01:00 EST
                    "2026-11-01T06:30:00Z", // 01:30 EST
                    "2026-11-01T07:00:00Z",
                    "2026-11-01T07:30:00Z",
                    "2026-11-01T08:00:00Z",
                ],
            ),
        ],
    );
}

#[test]
fn new_york_hourly() {
    for p in all_policies() {
        assert_eq!(
            ticks_with(
                "TZ=America/New_York 0 0 * * * *",
                &p,
                "2026-03-08T04:59:59Z",
                "2026-03-08T08:00:00Z"
            ),
            instants(&[
                "2026-03-08T05:00:00Z",
                "2026-03-08T06:00:00Z",
                "2026-03-08T07:00:00Z",
                "2026-03-08T08:00:00Z",
            ]),
            "{p:?}"
        );
    }
    check(
        "TZ=America/New_York 0 0 * * * *",
        "2026-11-01T03:59:59Z",
        "2026-11-01T08:00:00Z",
        &[
            (
                &[DAPR, SKIP, SHIFT, TWICE],
                &[
                    "2026-11-01T04:00:00Z",
                    "2026-11-01T05:00:00Z",
                    "2026-11-01T06:00:00Z",
                    "2026-11-01T07:00:00Z",
                    "2026-11-01T08:00:00Z",
                ],
            ),
            (
                &[FIRST],
                &[
                    "2026-11-01T04:00:00Z",
                    "2026-11-01T05:00:00Z",
                    "2026-11-01T07:00:00Z",
                    "2026-11-01T08:00:00Z",
                ],
            ),
            (
                &[LAST],
                &[
                    "2026-11-01T04:00:00Z",
                    "2026-11-01T06:00:00Z",
                    "2026-11-01T07:00:00Z",
                    "2026-11-01T08:00:00Z",
                ],
            ),
        ],
    );
}

#[test]
fn london_daily_0130_both_transitions() {
    check(
        "TZ=Europe/London 0 30 1 * * *",
        "2026-03-27T12:00:00Z",
        "2026-03-31T12:00:00Z",
        &[
            (
                &[DAPR, SKIP, FIRST, LAST, TWICE],
                &[
                    "2026-03-28T01:30:00Z",
                    "2026-03-30T00:30:00Z",
                    "2026-03-31T00:30:00Z",
                ],
            ),
            (
                &[SHIFT],
                &[
                    "2026-03-28T01:30:00Z",
                    "2026-03-29T01:30:00Z", // 01:30 GMT-intended = 02:30 BST
                    "2026-03-30T00:30:00Z",
                    "2026-03-31T00:30:00Z",
                ],
            ),
        ],
    );
    check(
        "TZ=Europe/London 0 30 1 * * *",
        "2026-10-23T12:00:00Z",
        "2026-10-26T12:00:00Z",
        &[
            (
                &[DAPR, SKIP, SHIFT, TWICE],
                &[
                    "2026-10-24T00:30:00Z",
                    "2026-10-25T00:30:00Z",
                    "2026-10-25T01:30:00Z",
                    "2026-10-26T01:30:00Z",
                ],
            ),
            (
                &[FIRST],
                &[
                    "2026-10-24T00:30:00Z",
                    "2026-10-25T00:30:00Z", // 01:30 BST
                    "2026-10-26T01:30:00Z",
                ],
            ),
            (
                &[LAST],
                &[
                    "2026-10-24T00:30:00Z",
                    "2026-10-25T01:30:00Z", // 01:30 GMT
                    "2026-10-26T01:30:00Z",
                ],
            ),
        ],
    );
}

#[test]
fn london_daily_0230_is_untouched() {
    for p in all_policies() {
        assert_eq!(
            ticks_with(
                "TZ=Europe/London 0 30 2 * * *",
                &p,
                "2026-03-27T12:00:00Z",
                "2026-03-30T12:00:00Z"
            ),
            instants(&[
                "2026-03-28T02:30:00Z",
                "2026-03-29T01:30:00Z", // 02:30 BST
                "2026-03-30T01:30:00Z",
            ]),
            "{p:?}"
        );
        assert_eq!(
            ticks_with(
                "TZ=Europe/London 0 30 2 * * *",
                &p,
                "2026-10-23T12:00:00Z",
                "2026-10-26T12:00:00Z"
            ),
            instants(&[
                "2026-10-24T01:30:00Z",
                "2026-10-25T02:30:00Z", // 02:30 GMT
                "2026-10-26T02:30:00Z",
            ]),
            "{p:?}"
        );
    }
}

#[test]
fn london_hourly() {
    for p in all_policies() {
        assert_eq!(
            ticks_with(
                "TZ=Europe/London 0 0 * * * *",
                &p,
                "2026-03-28T22:59:59Z",
                "2026-03-29T03:00:00Z"
            ),
            instants(&[
                "2026-03-28T23:00:00Z",
                "2026-03-29T00:00:00Z", // 00:00 GMT
                "2026-03-29T01:00:00Z", // 02:00 BST
                "2026-03-29T02:00:00Z",
                "2026-03-29T03:00:00Z",
            ]),
            "{p:?}"
        );
    }
    check(
        "TZ=Europe/London 0 0 * * * *",
        "2026-10-24T22:59:59Z",
        "2026-10-25T03:00:00Z",
        &[
            (
                &[DAPR, SKIP, SHIFT, TWICE],
                &[
                    "2026-10-24T23:00:00Z",
                    "2026-10-25T00:00:00Z",
                    "2026-10-25T01:00:00Z",
                    "2026-10-25T02:00:00Z",
                    "2026-10-25T03:00:00Z",
                ],
            ),
            (
                &[FIRST],
                &[
                    "2026-10-24T23:00:00Z",
                    "2026-10-25T00:00:00Z", // 01:00 BST
                    "2026-10-25T02:00:00Z",
                    "2026-10-25T03:00:00Z",
                ],
            ),
            (
                &[LAST],
                &[
                    "2026-10-24T23:00:00Z",
                    "2026-10-25T01:00:00Z", // 01:00 GMT
                    "2026-10-25T02:00:00Z",
                    "2026-10-25T03:00:00Z",
                ],
            ),
        ],
    );
}

#[test]
fn default_is_todays_next() {
    let specs = [
        "TZ=America/New_York 0 30 2 * * *",
        "TZ=America/New_York 0 30 1 * * *",
        "TZ=America/New_York 0 */30 * * * *",
        "TZ=America/New_York 0 0 * * * *",
        "TZ=Europe/London 0 30 1 * * *",
        "TZ=Europe/London 0 0 * * * *",
        "TZ=Australia/Lord_Howe 0 0 2 * * *",
        "TZ=America/Sao_Paulo 0 0 0 * * *",
    ];
    for spec in specs {
        for (from, until) in [
            ("2026-01-01T00:00:00Z", "2026-12-31T00:00:00Z"),
            ("2018-10-01T00:00:00Z", "2018-11-30T00:00:00Z"),
        ] {
            assert_eq!(
                ticks_with(spec, &DstPolicy::default(), from, until),
                ticks_dapr(spec, from, until),
                "{spec}"
            );
        }
    }
    assert_eq!(DstPolicy::default(), DstPolicy::DAPR);
    assert!(DstPolicy::default().is_dapr());
    for p in [SKIP, SHIFT, FIRST, LAST, TWICE] {
        assert!(!p.is_dapr(), "{p:?}");
    }
}

#[test]
fn no_zone_ignores_the_policy() {
    let from = utc("2026-03-08T00:00:00Z");
    for spec in [
        "0 30 2 * * *",
        "TZ=UTC 0 30 2 * * *",
        "TZ=Etc/GMT+5 0 30 2 * * *",
        "@every 1h",
        "@every 0s",
        "@daily",
    ] {
        let s = sched(spec);
        for p in all_policies() {
            assert_eq!(s.next_with(from, &p), s.next(from), "{spec} {p:?}");
        }
    }
}

#[test]
fn shift_finds_a_gap_before_the_next_existing_tick() {
    // Only March 8 at 02:30: Dapr's next is a year away (2027-03-08 is before that year's
    // transition), shift fires on the 2026 transition day.
    let spec = "TZ=America/New_York 0 30 2 8 3 *";
    let s = sched(spec);
    let from = utc("2026-01-01T00:00:00Z");
    assert_eq!(s.next(from), Some(utc("2027-03-08T07:30:00Z")));
    assert_eq!(s.next_with(from, &SHIFT), Some(utc("2026-03-08T07:30:00Z")));
    assert_eq!(
        s.next_with(utc("2026-03-08T07:30:00Z"), &SHIFT),
        Some(utc("2027-03-08T07:30:00Z"))
    );
    // Every minute of the gap hour shifts by an hour, in order; the shifted 02:59 (07:59Z)
    // is followed by the real 03:00 EDT... which is not in the spec, so by the next day.
    let every_minute = sched("TZ=America/New_York 0 * 2 * * *");
    let mut t = utc("2026-03-08T06:59:59Z");
    for minute in 0..60 {
        let next = every_minute.next_with(t, &SHIFT);
        assert_eq!(
            next,
            Some(utc("2026-03-08T07:00:00Z") + chrono::TimeDelta::minutes(minute))
        );
        t = next.unwrap_or(t);
    }
    assert_eq!(
        every_minute.next_with(t, &SHIFT),
        Some(utc("2026-03-09T06:00:00Z"))
    );
    // Starting inside the shifted window still finds what is left of it.
    assert_eq!(
        every_minute.next_with(utc("2026-03-08T07:30:30Z"), &SHIFT),
        Some(utc("2026-03-08T07:31:00Z"))
    );
}

#[test]
fn shift_across_a_whole_day_gap() {
    // Samoa skipped 2011-12-30: at 10:00Z on the 30th, -10:00 became +14:00. 10:00 on the
    // 30th read at -10:00 is 20:00Z, the same instant as 10:00 on the 31st.
    let s = sched("TZ=Pacific/Apia 0 0 10 30 12 *");
    let from = utc("2011-12-30T15:00:00Z"); // five hours into the gap
    assert_eq!(s.next(from), Some(utc("2012-12-29T20:00:00Z")));
    assert_eq!(s.next_with(from, &SHIFT), Some(utc("2011-12-30T20:00:00Z")));
    let daily = sched("TZ=Pacific/Apia 0 0 10 * * *");
    assert_eq!(
        ticks_with(
            "TZ=Pacific/Apia 0 0 10 * * *",
            &SHIFT,
            "2011-12-28T00:00:00Z",
            "2012-01-01T00:00:00Z"
        ),
        instants(&[
            "2011-12-28T20:00:00Z",
            "2011-12-29T20:00:00Z",
            "2011-12-30T20:00:00Z", // 12-30 10:00 shifted, and 12-31 10:00 +14
            "2011-12-31T20:00:00Z",
        ])
    );
    assert_eq!(daily.next(from), Some(utc("2011-12-30T20:00:00Z")));
}

#[test]
fn rare_schedules_stay_fast_and_bounded() {
    let every = all_policies();
    for spec in [
        "TZ=America/New_York 0 0 0 1 1 *",
        "TZ=America/New_York 0 0 0 30 2 *",
        "TZ=America/New_York 0 30 2 29 2 *",
        "TZ=Europe/London 0 30 1 25 10 *",
    ] {
        let s = sched(spec);
        for p in &every {
            let mut t = utc("2026-01-01T00:00:00Z");
            for _ in 0..10 {
                match s.next_with(t, p) {
                    Some(next) => {
                        assert!(next > t, "{spec} {p:?}");
                        t = next;
                    }
                    None => break,
                }
            }
            assert_eq!(s.next_with(DateTime::<Utc>::MAX_UTC, p), None, "{spec}");
            let late = DateTime::<Utc>::MAX_UTC - chrono::TimeDelta::days(400);
            assert!(s.next_with(late, p).is_none_or(|next| next > late));
        }
    }
    // Never matches: every policy says so.
    let never = sched("TZ=America/New_York 0 0 0 30 2 *");
    for p in &every {
        assert_eq!(never.next_with(utc("2026-01-01T00:00:00Z"), p), None);
    }
    // The single London date in the fold, only its second reading.
    let s = sched("TZ=Europe/London 0 30 1 25 10 *");
    assert_eq!(
        s.next_with(utc("2026-01-01T00:00:00Z"), &LAST),
        Some(utc("2026-10-25T01:30:00Z"))
    );
    assert_eq!(
        s.next_with(utc("2026-01-01T00:00:00Z"), &FIRST),
        Some(utc("2026-10-25T00:30:00Z"))
    );
}

#[test]
fn parse_helpers() {
    assert_eq!(Gap::parse("skip"), Ok(Gap::Skip));
    assert_eq!(Gap::parse("shift"), Ok(Gap::Shift));
    assert_eq!("shift".parse::<Gap>(), Ok(Gap::Shift));
    assert_eq!(Repeat::parse("first"), Ok(Repeat::First));
    assert_eq!(Repeat::parse("last"), Ok(Repeat::Last));
    assert_eq!(Repeat::parse("twice"), Ok(Repeat::Twice));
    assert_eq!("twice".parse::<Repeat>(), Ok(Repeat::Twice));
    for g in [Gap::Skip, Gap::Shift] {
        assert_eq!(Gap::parse(g.as_str()), Ok(g));
        assert_eq!(g.to_string(), g.as_str());
    }
    for r in [Repeat::First, Repeat::Last, Repeat::Twice] {
        assert_eq!(Repeat::parse(&r.to_string()), Ok(r));
    }
    assert_eq!(
        Gap::parse("Skip").map_err(|e| e.to_string()),
        Err(r#"invalid dst.gap "Skip": allowed values are "skip" and "shift""#.to_owned())
    );
    assert_eq!(
        Repeat::parse("both").map_err(|e| e.to_string()),
        Err(
            r#"invalid dst.repeat "both": allowed values are "first", "last" and "twice""#
                .to_owned()
        )
    );
    assert!(Repeat::parse("").is_err());
    assert!(Gap::parse("").is_err());
}

// ---------------------------------------------------------------------------------------
// The reference: offset spans found by probing every 15 minutes, and within each span the
// instants whose reading matches, trimmed and extended by the policy. It shares only the UTC
// civil search (itself held to the walk in UTC by `fast_path_equals_faithful_walk`).

#[derive(Debug, Clone, Copy)]
struct Span {
    start: i64,
    end: i64,
    offset: i64,
}

fn offset(tz: Tz, unix: i64) -> i64 {
    use chrono::{Offset, TimeZone};
    let t = DateTime::<Utc>::from_timestamp(unix, 0).unwrap_or_default();
    i64::from(
        tz.offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc(),
    )
}

/// The constant-offset spans covering `[lo, hi)`, the first starting at `lo`, the last ending
/// at `hi`.
fn spans(tz: Tz, lo: i64, hi: i64) -> Vec<Span> {
    let mut out = Vec::new();
    let (mut start, mut current, mut t) = (lo, offset(tz, lo), lo);
    while t < hi {
        let n = (t + 900).min(hi);
        let o = offset(tz, n);
        if o != current {
            let (mut a, mut b) = (t, n);
            while b - a > 1 {
                let m = a + (b - a) / 2;
                if offset(tz, m) == o {
                    b = m;
                } else {
                    a = m;
                }
            }
            out.push(Span {
                start,
                end: b,
                offset: current,
            });
            (start, current) = (b, o);
        }
        t = n;
    }
    out.push(Span {
        start,
        end: hi,
        offset: current,
    });
    out
}

/// Whether a civil time (seconds since the epoch, read as a wall clock) matches.
fn matches_civil(s: &SpecSchedule, civil: i64) -> bool {
    let days = civil.div_euclid(86_400);
    let sod = civil.rem_euclid(86_400);
    let (_, month, day) = civil_from_days(days);
    let b = s.bits;
    b.second >> (sod % 60) & 1 == 1
        && b.minute >> (sod / 60 % 60) & 1 == 1
        && b.hour >> (sod / 3600) & 1 == 1
        && b.month >> month & 1 == 1
        && s.day_matches(day, weekday(days))
}

/// The first tick after `after` by the policy's definition, among instants the spans cover.
fn reference_next(
    s: &SpecSchedule,
    spans: &[Span],
    after: i64,
    gap: Gap,
    repeat: Repeat,
) -> Option<i64> {
    for (k, span) in spans.iter().enumerate() {
        if span.end <= after + 1 {
            continue;
        }
        let prev = if k == 0 {
            span.offset
        } else {
            spans[k - 1].offset
        };
        let next = spans.get(k + 1).map_or(span.offset, |n| n.offset);
        let mut best: Option<i64> = None;
        if gap == Gap::Shift && prev < span.offset {
            // Local times [start + prev, start + offset) do not exist; shifted, each fires at
            // local - prev.
            best = (span.start + prev..span.start + span.offset)
                .find(|&l| l - prev > after && matches_civil(s, l))
                .map(|l| l - prev);
        }
        let lo = span.start
            + if repeat == Repeat::First && prev > span.offset {
                prev - span.offset
            } else {
                0
            };
        let hi = span.end
            - if repeat == Repeat::Last && span.offset > next {
                span.offset - next
            } else {
                0
            };
        let from = lo.max(after + 1);
        if from < hi {
            let civil = DateTime::from_timestamp(from + span.offset - 1, 0)
                .and_then(|t| fast::next(s, t))
                .map(|c| c.timestamp() - span.offset);
            if let Some(t) = civil.filter(|&t| t < hi) {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        }
        if best.is_some() {
            return best;
        }
    }
    None
}

/// Zones whose transitions move whole hours at whole hours other than midnight.
const WHOLE_HOUR_ZONES: &[&str] = &[
    "America/New_York",
    "America/Chicago",
    "Europe/London",
    "Europe/Rome",
    "Australia/Sydney",
];

/// Every kind of transition: the above, gaps and folds at midnight, half-hour shifts, a whole
/// day skipped.
const ALL_KINDS_ZONES: &[&str] = &[
    "America/New_York",
    "Europe/London",
    "Europe/Rome",
    "Australia/Sydney",
    "America/Sao_Paulo",
    "America/Santiago",
    "Asia/Beirut",
    "Asia/Tehran",
    "America/Havana",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "Pacific/Chatham",
];

/// Specs that hit the hours around transitions often.
fn dst_spec() -> impl Strategy<Value = String> {
    let second = prop::sample::select(vec!["0", "0", "0", "30", "0,30", "*/20", "59"]);
    let minute = prop::sample::select(vec!["0", "30", "*/30", "*/15", "0-59/7", "*", "59", "0,45"]);
    let hour = prop::sample::select(vec![
        "*", "*", "0", "1", "2", "3", "23", "0-3", "1,2", "*/2", "22-23", "0,12",
    ]);
    let dom = prop::sample::select(vec!["*", "?", "*", "1-15", "8", "25", "1,31"]);
    let month = prop::sample::select(vec!["*", "*", "3", "10,11", "3-11"]);
    let dow = prop::sample::select(vec!["*", "*", "?", "0", "6", "1-5", "0,6"]);
    (second, minute, hour, dom, month, dow)
        .prop_map(|(s, m, h, d, mo, w)| format!("{s} {m} {h} {d} {mo} {w}"))
}

fn any_policy() -> impl Strategy<Value = DstPolicy> {
    let gap = prop::sample::select(vec![None, Some(Gap::Skip), Some(Gap::Shift)]);
    let repeat = prop::sample::select(vec![
        None,
        Some(Repeat::First),
        Some(Repeat::Last),
        Some(Repeat::Twice),
    ]);
    (gap, repeat).prop_map(|(gap, repeat)| DstPolicy { gap, repeat })
}

/// A zone and one of its transitions: the first after a random instant of 2000-2030 within
/// 400 days, if there is one.
fn transition(zones: &'static [&'static str]) -> impl Strategy<Value = Option<(Tz, i64)>> {
    (prop::sample::select(zones), 946_684_800i64..1_924_992_000).prop_map(|(name, from)| {
        let tz = zone(name);
        let mut t = from;
        let o = offset(tz, t);
        while t < from + 400 * 86_400 {
            let n = t + 86_400;
            if offset(tz, n) != o {
                let found = spans(tz, t, n);
                return found.get(1).map(|s| (tz, s.start));
            }
            t = n;
        }
        None
    })
}

/// Chains `step` and the reference from `start`, comparing every tick before `limit`.
fn compare_chain(
    s: &SpecSchedule,
    spans: &[Span],
    start: i64,
    limit: i64,
    gap: Gap,
    repeat: Repeat,
    step: impl Fn(DateTime<Utc>) -> Option<DateTime<Utc>>,
) -> Result<(), TestCaseError> {
    let mut t = DateTime::from_timestamp(start, 0).unwrap_or_default();
    for _ in 0..80 {
        let got = step(t).filter(|g| g.timestamp() < limit);
        let want = reference_next(s, spans, t.timestamp(), gap, repeat)
            .filter(|&w| w < limit)
            .and_then(|w| DateTime::from_timestamp(w, 0));
        prop_assert_eq!(got, want, "after {}", t);
        match got {
            Some(g) => t = g,
            None => break,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Dapr's walk, near real transitions of whole-hour zones, is exactly "every instant
    /// whose wall reading matches": gap skip, repeat twice.
    #[test]
    fn dapr_walk_is_skip_and_twice(
        found in transition(WHOLE_HOUR_ZONES),
        spec in prop_oneof![3 => dst_spec(), 1 => spec_text()],
        lead in -26 * 3600i64..3 * 3600,
    ) {
        let Some((tz, at)) = found else { return Ok(()) };
        let s = spec_of(&format!("TZ={} {spec}", tz.name()));
        let spans = spans(tz, at - 4 * 86_400, at + 4 * 86_400);
        compare_chain(&s, &spans, at + lead, at + 2 * 86_400, Gap::Skip, Repeat::Twice, |t| {
            super::super::walk::next(&s, tz, t)
        })?;
    }

    /// Every policy, near real transitions of whole-hour zones, is its definition.
    #[test]
    fn policy_is_its_definition_near_transitions(
        found in transition(ALL_KINDS_ZONES),
        spec in prop_oneof![3 => dst_spec(), 1 => spec_text()],
        lead in -26 * 3600i64..3 * 3600,
        p in any_policy(),
    ) {
        let Some((tz, at)) = found else { return Ok(()) };
        // Dapr's own policy is the walk, quirks included (held to the definition in
        // whole-hour zones by `dapr_walk_is_skip_and_twice`).
        if p.is_dapr() { return Ok(()) }
        let s = spec_of(&format!("TZ={} {spec}", tz.name()));
        let spans = spans(tz, at - 4 * 86_400, at + 4 * 86_400);
        let gap = p.gap.unwrap_or(Gap::Skip);
        let repeat = p.repeat.unwrap_or(Repeat::Twice);
        let schedule = Schedule::Spec(s.clone());
        compare_chain(&s, &spans, at + lead, at + 2 * 86_400, gap, repeat, |t| {
            schedule.next_with(t, &p)
        })?;
    }

    /// Ticks are strictly increasing under every policy, in every kind of zone.
    #[test]
    fn next_with_is_strictly_increasing(
        spec in prop_oneof![1 => dst_spec(), 1 => spec_text()],
        name in prop::sample::select(vec![
            "America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Apia",
            "America/Sao_Paulo", "Asia/Kolkata", "Antarctica/Troll", "Pacific/Chatham",
        ]),
        start in instant(),
        p in any_policy(),
    ) {
        let s = sched(&format!("TZ={name} {spec}"));
        let mut t = start;
        for _ in 0..6 {
            match s.next_with(t, &p) {
                Some(next) => {
                    prop_assert!(next > t, "{} {} {:?}: {} after {}", name, spec, p, next, t);
                    t = next;
                }
                None => break,
            }
        }
    }

    /// Away from transitions, every policy is Dapr's `next`; Dapr's policy is `next`
    /// everywhere. (Not in zones with gaps at midnight, where the walk can be thrown off a
    /// month later: see `dapr_quirk_midnight_gap_on_the_first_of_a_month`.)
    #[test]
    fn next_with_is_next_outside_transition_days(
        spec in prop_oneof![1 => dst_spec(), 1 => spec_text()],
        name in prop::sample::select(vec![
            "America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Chatham",
            "Australia/Sydney", "Asia/Kolkata",
        ]),
        start in instant(),
        p in any_policy(),
    ) {
        let tz = zone(name);
        let s = sched(&format!("TZ={name} {spec}"));
        let dapr = s.next(start);
        prop_assert_eq!(s.next_with(start, &DstPolicy::default()), dapr);
        if p.is_dapr() {
            prop_assert_eq!(s.next_with(start, &p), dapr);
        }
        if let Some(next) = dapr {
            let (lo, hi) = (start.timestamp() - 86_400, next.timestamp() + 86_400);
            if hi - lo < 60 * 86_400 && spans(tz, lo, hi).len() == 1 {
                prop_assert_eq!(s.next_with(start, &p), dapr, "{} {} {:?}", name, spec, p);
            }
        }
    }
}
