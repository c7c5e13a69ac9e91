//! Vectors from kit's `parser_test.go`, `spec_test.go` and `constantdelay_test.go`, the Go
//! oracle table of `rust-stack.md` §2.1, every error text, and properties: the fast path must
//! agree with the Go-faithful walk, `next` moves forward, and nothing panics.

use chrono::{DateTime, Datelike, NaiveDateTime, Timelike, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

use super::field::{atoi, get_bits, get_range};
use super::*;

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("bad test time {s}: {e}"))
        .with_timezone(&Utc)
}

/// Reads the time formats of kit's `getTime`. Go's tests read zone-less times in `time.Local`;
/// Dapr's scheduler runs in UTC, so they are read as UTC here.
fn go_time(value: &str) -> DateTime<Utc> {
    // Go's parser ignores the weekday name, and kit's table has a wrong one ("Thu Jul 11").
    let without_weekday = value.split_once(' ').map_or(value, |(_, rest)| rest);
    let layouts = [
        "%b %d %H:%M %Y",
        "%b %d %H:%M:%S %Y",
        "%b %d %H:%M:%S%.f %Y",
    ];
    for layout in layouts {
        if let Ok(t) = NaiveDateTime::parse_from_str(without_weekday, layout) {
            return t.and_utc();
        }
    }
    DateTime::parse_from_str(value, "%Y-%m-%dT%H:%M:%S%z")
        .unwrap_or_else(|e| panic!("bad Go test time {value}: {e}"))
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

fn err(spec: &str) -> String {
    match parse(spec) {
        Ok(s) => panic!("{spec:?} should fail, parsed as {s:?}"),
        Err(e) => e.to_string(),
    }
}

fn first_n(spec: &str, from: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let s = sched(spec);
    let mut out = Vec::new();
    let mut t = from;
    for _ in 0..n {
        match s.next(t) {
            Some(next) => {
                out.push(next);
                t = next;
            }
            None => break,
        }
    }
    out
}

/// The walk evaluated in UTC: the oracle for the fast path.
fn oracle(s: &SpecSchedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    walk::next(s, s.time_zone().unwrap_or(Tz::UTC), after)
}

fn bits(second: u64, minute: u64, hour: u64, dom: u64, month: u64, dow: u64) -> Bits {
    Bits {
        second,
        minute,
        hour,
        dom,
        month,
        dow,
    }
}

// ---------------------------------------------------------------------------------------
// rust-stack.md §2.1 oracle table (Go 1.19 running kit's source from 2026-01-01T00:00:00Z).

#[test]
fn oracle_table() {
    let from = utc("2026-01-01T00:00:00Z");
    let rows: &[(&str, [&str; 3])] = &[
        (
            "0 30 * * * *",
            [
                "2026-01-01T00:30:00Z",
                "2026-01-01T01:30:00Z",
                "2026-01-01T02:30:00Z",
            ],
        ),
        (
            "0 * * 1,15 * Sun",
            [
                "2026-01-01T00:01:00Z",
                "2026-01-01T00:02:00Z",
                "2026-01-01T00:03:00Z",
            ],
        ),
        (
            "*/5 * * * * ?",
            [
                "2026-01-01T00:00:05Z",
                "2026-01-01T00:00:10Z",
                "2026-01-01T00:00:15Z",
            ],
        ),
        (
            "0 0 0 * * 0",
            [
                "2026-01-04T00:00:00Z",
                "2026-01-11T00:00:00Z",
                "2026-01-18T00:00:00Z",
            ],
        ),
        (
            "0 0 0 * * 1",
            [
                "2026-01-05T00:00:00Z",
                "2026-01-12T00:00:00Z",
                "2026-01-19T00:00:00Z",
            ],
        ),
        (
            "5/15 * * * * *",
            [
                "2026-01-01T00:00:05Z",
                "2026-01-01T00:00:20Z",
                "2026-01-01T00:00:35Z",
            ],
        ),
        (
            "@every 1h30m",
            [
                "2026-01-01T01:30:00Z",
                "2026-01-01T03:00:00Z",
                "2026-01-01T04:30:00Z",
            ],
        ),
        (
            "TZ=America/New_York 0 0 9 * * *",
            [
                "2026-01-01T14:00:00Z",
                "2026-01-02T14:00:00Z",
                "2026-01-03T14:00:00Z",
            ],
        ),
        (
            "0 0 0 * * */2",
            [
                "2026-01-03T00:00:00Z",
                "2026-01-04T00:00:00Z",
                "2026-01-06T00:00:00Z",
            ],
        ),
        (
            "0 0 0 1 * */2",
            [
                "2026-01-03T00:00:00Z",
                "2026-01-04T00:00:00Z",
                "2026-01-06T00:00:00Z",
            ],
        ),
    ];
    for (spec, want) in rows {
        let want: Vec<_> = want.iter().map(|w| utc(w)).collect();
        assert_eq!(first_n(spec, from, 3), want, "{spec}");
    }

    assert!(parse("@midnight").is_ok());
    assert!(parse("@annually").is_ok());
    assert_eq!(err("0 0 0 * * 7"), "end of range (7) above maximum (6): 7");
    assert_eq!(
        err("*/5 * * * *"),
        "expected exactly 6 fields, found 5: [*/5 * * * *]"
    );
    assert_eq!(
        err("0 0 12 * * * 2030"),
        "expected exactly 6 fields, found 7: [0 0 12 * * * 2030]"
    );
    assert_eq!(
        err("0 0 0 L * *"),
        r#"failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax"#
    );
    assert_eq!(
        err("TZ=Not/AZone 0 0 9 * * *"),
        "provided bad location Not/AZone: unknown time zone Not/AZone"
    );
    assert_eq!(sched("0 0 0 30 2 *").next(from), None);
}

#[test]
fn oracle_dst_new_york() {
    // Spring forward: 02:30 does not exist on 03-08, so the day is skipped.
    assert_eq!(
        first_n(
            "TZ=America/New_York 0 30 2 * * *",
            utc("2026-03-07T12:00:00Z"),
            2
        ),
        [
            utc("2026-03-09T02:30:00-04:00"),
            utc("2026-03-10T02:30:00-04:00")
        ]
    );
    // Fall back: 01:30 happens twice on 11-01 and fires both times.
    assert_eq!(
        first_n(
            "TZ=America/New_York 0 30 1 * * *",
            utc("2026-10-31T12:00:00Z"),
            3
        ),
        [
            utc("2026-11-01T01:30:00-04:00"),
            utc("2026-11-01T01:30:00-05:00"),
            utc("2026-11-02T01:30:00-05:00"),
        ]
    );
}

#[test]
fn go_time_date_normalisation_in_a_gap() {
    // rust-stack.md §2.1: Go's time.Date(2026,3,8,2,30,NY) is 01:30 EST.
    let ny: Tz = "America/New_York".parse().unwrap_or(Tz::UTC);
    assert_eq!(
        walk::date_for_tests(ny, 2026, 3, 8, 2, 30, 0),
        Some(utc("2026-03-08T01:30:00-05:00").timestamp())
    );
    // The fold picks the earlier (EDT) reading in New York...
    assert_eq!(
        walk::date_for_tests(ny, 2026, 11, 1, 1, 30, 0),
        Some(utc("2026-11-01T01:30:00-04:00").timestamp())
    );
    // ...but the later one east of Greenwich, where the wall time read as UTC is already past
    // the transition.
    let rome: Tz = "Europe/Rome".parse().unwrap_or(Tz::UTC);
    assert_eq!(
        walk::date_for_tests(rome, 2026, 10, 25, 2, 30, 0),
        Some(utc("2026-10-25T02:30:00+01:00").timestamp())
    );
}

// ---------------------------------------------------------------------------------------
// kit parser_test.go

#[test]
fn kit_test_range() {
    struct Case {
        expr: &'static str,
        min: u64,
        max: u64,
        expected: u64,
        err: &'static str,
    }
    let c = |expr, min, max, expected, err| Case {
        expr,
        min,
        max,
        expected,
        err,
    };
    let cases = [
        c("5", 0, 7, 1 << 5, ""),
        c("0", 0, 7, 1 << 0, ""),
        c("7", 0, 7, 1 << 7, ""),
        c("5-5", 0, 7, 1 << 5, ""),
        c("5-6", 0, 7, 1 << 5 | 1 << 6, ""),
        c("5-7", 0, 7, 1 << 5 | 1 << 6 | 1 << 7, ""),
        c("5-6/2", 0, 7, 1 << 5, ""),
        c("5-7/2", 0, 7, 1 << 5 | 1 << 7, ""),
        c("5-7/1", 0, 7, 1 << 5 | 1 << 6 | 1 << 7, ""),
        c("*", 1, 3, 1 << 1 | 1 << 2 | 1 << 3 | STAR_BIT, ""),
        c("*/2", 1, 3, 1 << 1 | 1 << 3, ""),
        c("5--5", 0, 0, 0, "too many hyphens"),
        c("jan-x", 0, 0, 0, "failed to parse int from"),
        c("2-x", 1, 5, 0, "failed to parse int from"),
        c("*/-12", 0, 0, 0, "negative number"),
        c("*//2", 0, 0, 0, "too many slashes"),
        c("1", 3, 5, 0, "below minimum"),
        c("6", 3, 5, 0, "above maximum"),
        c("5-3", 3, 5, 0, "beyond end of range"),
        c("*/0", 0, 0, 0, "should be a positive number"),
    ];
    for case in cases {
        let bounds = Bounds {
            min: case.min,
            max: case.max,
            names: &[],
        };
        let got = get_range(case.expr, &bounds);
        if case.err.is_empty() {
            assert_eq!(got, Ok(case.expected), "{}", case.expr);
        } else {
            let e = got.expect_err(case.expr).to_string();
            assert!(e.contains(case.err), "{}: {e}", case.expr);
        }
    }
}

#[test]
fn kit_test_field() {
    let b = Bounds {
        min: 1,
        max: 7,
        names: &[],
    };
    assert_eq!(get_field("5", &b), Ok(1 << 5));
    assert_eq!(get_field("5,6", &b), Ok(1 << 5 | 1 << 6));
    assert_eq!(get_field("5,6,7", &b), Ok(1 << 5 | 1 << 6 | 1 << 7));
    assert_eq!(
        get_field("1,5-7/2,3", &b),
        Ok(1 << 1 | 1 << 5 | 1 << 7 | 1 << 3)
    );
    // Go's FieldsFunc drops empty pieces: a lone comma is a field that matches nothing.
    assert_eq!(get_field(",", &b), Ok(0));
    assert_eq!(get_field("5,,6,", &b), Ok(1 << 5 | 1 << 6));
}

#[test]
fn kit_test_all_and_bits() {
    assert_eq!(all(&MINUTES), 0xfff_ffff_ffff_ffff | STAR_BIT);
    assert_eq!(all(&HOURS), 0xff_ffff | STAR_BIT);
    assert_eq!(all(&DOM), 0xffff_fffe | STAR_BIT);
    assert_eq!(all(&MONTHS), 0x1ffe | STAR_BIT);
    assert_eq!(all(&DOW), 0x7f | STAR_BIT);

    assert_eq!(get_bits(0, 0, 1), 0x1);
    assert_eq!(get_bits(1, 1, 1), 0x2);
    assert_eq!(get_bits(1, 5, 2), 0x2a);
    assert_eq!(get_bits(1, 4, 2), 0xa);
}

#[test]
fn kit_test_parse_schedule_errors() {
    let cases = [
        (
            "* 5 j * * *",
            r#"failed to parse int from j: strconv.Atoi: parsing "j": invalid syntax"#,
        ),
        (
            "@every Xm",
            r#"failed to parse duration @every Xm: time: invalid duration "Xm""#,
        ),
        ("@unrecognized", "unrecognized descriptor: @unrecognized"),
        // Kit's own test uses an optional-DOW parser ("expected 5 to 6 fields").
        ("* * * *", "expected exactly 6 fields, found 4: [* * * *]"),
        ("", "empty spec string"),
        (
            "TZ=UTC",
            "timezone prefix TZ=UTC is not followed by a schedule",
        ),
        (
            "CRON_TZ=Asia/Tokyo",
            "timezone prefix CRON_TZ=Asia/Tokyo is not followed by a schedule",
        ),
        ("TZ=", "timezone prefix TZ= is not followed by a schedule"),
    ];
    for (spec, want) in cases {
        assert_eq!(err(spec), want, "{spec:?}");
    }
}

#[test]
fn kit_test_parse_schedule() {
    let tokyo: Tz = "Asia/Tokyo".parse().unwrap_or(Tz::UTC);
    let local = Location::Local;
    let every5min = |loc| {
        Schedule::Spec(SpecSchedule::new(
            bits(1, 1 << 5, all(&HOURS), all(&DOM), all(&MONTHS), all(&DOW)),
            loc,
        ))
    };
    let midnight = |loc| {
        Schedule::Spec(SpecSchedule::new(
            bits(1, 1, 1, all(&DOM), all(&MONTHS), all(&DOW)),
            loc,
        ))
    };
    let annual = |loc| {
        Schedule::Spec(SpecSchedule::new(
            bits(1, 1, 1, 1 << 1, 1 << 1, all(&DOW)),
            loc,
        ))
    };
    let every = |nanos| Schedule::Every(ConstantDelay { nanos });
    let cases = [
        ("0 5 * * * *", every5min(local)),
        (
            "CRON_TZ=UTC  0 5 * * * *",
            every5min(Location::Zone(Tz::UTC)),
        ),
        (
            "CRON_TZ=Asia/Tokyo 0 5 * * * *",
            every5min(Location::Zone(tokyo)),
        ),
        (
            "CRON_TZ=Asia/Tokyo\t0 5 * * * *",
            every5min(Location::Zone(tokyo)),
        ),
        ("@every 5m", every(5 * 60 * 1_000_000_000)),
        ("@every 5ms", every(5_000_000)),
        ("@every 5ns", every(5)),
        ("@midnight", midnight(local)),
        ("TZ=UTC  @midnight", midnight(Location::Zone(Tz::UTC))),
        ("TZ=Asia/Tokyo @midnight", midnight(Location::Zone(tokyo))),
        ("@yearly", annual(local)),
        ("@annually", annual(local)),
        (
            "* 5 * * * *",
            Schedule::Spec(SpecSchedule::new(
                bits(
                    all(&SECONDS),
                    1 << 5,
                    all(&HOURS),
                    all(&DOM),
                    all(&MONTHS),
                    all(&DOW),
                ),
                local,
            )),
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(sched(spec), want, "{spec:?}");
    }
    // Go's optional-seconds and 5-field standard parsers are not what Dapr uses.
    for five in ["5 * * * *", "5 j * * *", "CRON_TZ=UTC  5 * * * *"] {
        assert!(err(five).starts_with("expected exactly 6 fields"), "{five}");
    }
}

#[test]
fn kit_test_descriptors_expand_as_documented() {
    let pairs = [
        ("@yearly", "0 0 0 1 1 *"),
        ("@annually", "0 0 0 1 1 *"),
        ("@monthly", "0 0 0 1 * *"),
        ("@weekly", "0 0 0 * * 0"),
        ("@daily", "0 0 0 * * *"),
        ("@midnight", "0 0 0 * * *"),
        ("@hourly", "0 0 * * * *"),
    ];
    for (descriptor, fields) in pairs {
        assert_eq!(sched(descriptor), sched(fields), "{descriptor}");
    }
}

#[test]
fn kit_test_timezone_dst_rome() {
    let s = sched("CRON_TZ=Europe/Rome 0 0 9 * * *");
    let mut t = utc("2026-10-23T12:00:00+02:00");
    for want in [
        "2026-10-24T07:00:00Z",
        "2026-10-25T08:00:00Z",
        "2026-10-26T08:00:00Z",
    ] {
        t = s.next(t).unwrap_or_else(|| panic!("no next after {t}"));
        assert_eq!(t, utc(want));
    }
}

#[test]
fn timezone_with_every_is_rejected() {
    // Kit accepted and ignored the zone before dapr/kit#161; Dapr 1.18.3 rejects the pair.
    assert_eq!(
        err("CRON_TZ=Europe/Rome @every 1h"),
        "timezone is not supported for @every schedules: CRON_TZ=Europe/Rome @every 1h"
    );
    assert_eq!(
        err("TZ=UTC   @every 1h"),
        "timezone is not supported for @every schedules: TZ=UTC   @every 1h"
    );
    // Other descriptors keep their zone.
    assert!(parse("TZ=Europe/Rome @daily").is_ok());
}

// ---------------------------------------------------------------------------------------
// kit spec_test.go

#[test]
fn kit_test_activation() {
    // Kit runs these through the 5-field standard parser; Dapr's needs a seconds field.
    let cases = [
        ("Mon Jul 9 15:00 2012", "0/15 * * * *", true),
        ("Mon Jul 9 15:45 2012", "0/15 * * * *", true),
        ("Mon Jul 9 15:40 2012", "0/15 * * * *", false),
        ("Mon Jul 9 15:05 2012", "5/15 * * * *", true),
        ("Mon Jul 9 15:20 2012", "5/15 * * * *", true),
        ("Mon Jul 9 15:50 2012", "5/15 * * * *", true),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", true),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", false),
        ("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", true),
        ("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", true),
        ("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", false),
        ("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", false),
        ("Mon Jul 9 15:00 2012", "@hourly", true),
        ("Mon Jul 9 15:04 2012", "@hourly", false),
        ("Mon Jul 9 15:00 2012", "@daily", false),
        ("Mon Jul 9 00:00 2012", "@daily", true),
        ("Mon Jul 9 00:00 2012", "@weekly", false),
        ("Sun Jul 8 00:00 2012", "@weekly", true),
        ("Sun Jul 8 01:00 2012", "@weekly", false),
        ("Sun Jul 8 00:00 2012", "@monthly", false),
        ("Sun Jul 1 00:00 2012", "@monthly", true),
        // If both day fields are restricted, only one needs to match.
        ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", true),
        ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", true),
        ("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", true),
        ("Sun Jul 15 00:00 2012", "* * */10 * Sun", true),
        // If one has a star, both need to match.
        ("Sun Jul 15 00:00 2012", "* * * * Mon", false),
        ("Mon Jul 9 00:00 2012", "* * 1,15 * *", false),
        ("Sun Jul 15 00:00 2012", "* * 1,15 * *", true),
        ("Sun Jul 15 00:00 2012", "* * */2 * Sun", true),
    ];
    for (time, spec, expected) in cases {
        let spec = if spec.starts_with('@') {
            spec.to_owned()
        } else {
            format!("0 {spec}")
        };
        let t = go_time(time);
        let got = sched(&spec).next(t - TimeDelta::seconds(1));
        assert_eq!(got == Some(t), expected, "{spec} at {time}: got {got:?}");
    }
}

#[test]
fn kit_test_next() {
    // Rows whose start time kit reads in a zone ("TZ=... <time>") with an unprefixed spec are
    // evaluated in that zone; here the zone moves onto the spec, which Go treats the same.
    let cases: &[(&str, &str, &str)] = &[
        (
            "Mon Jul 9 14:45 2012",
            "0 0/15 * * * *",
            "Mon Jul 9 15:00 2012",
        ),
        (
            "Mon Jul 9 14:59 2012",
            "0 0/15 * * * *",
            "Mon Jul 9 15:00 2012",
        ),
        (
            "Mon Jul 9 14:59:59 2012",
            "0 0/15 * * * *",
            "Mon Jul 9 15:00 2012",
        ),
        (
            "Mon Jul 9 15:45 2012",
            "0 20-35/15 * * * *",
            "Mon Jul 9 16:20 2012",
        ),
        (
            "Mon Jul 9 23:46 2012",
            "0 */15 * * * *",
            "Tue Jul 10 00:00 2012",
        ),
        (
            "Mon Jul 9 23:45 2012",
            "0 20-35/15 * * * *",
            "Tue Jul 10 00:20 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 * * * *",
            "Tue Jul 10 00:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 1/2 * * *",
            "Tue Jul 10 01:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 10-12 * * *",
            "Tue Jul 10 10:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 1/2 */2 * *",
            "Thu Jul 11 01:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 * 9-20 * *",
            "Wed Jul 10 00:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            "15/35 20-35/15 * 9-20 Jul *",
            "Wed Jul 10 00:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 9 Apr-Oct ?",
            "Thu Aug 9 00:00 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 */5 Apr,Aug,Oct Mon",
            "Tue Aug 1 00:00 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 */5 Oct Mon",
            "Mon Oct 1 00:00 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 * Feb Mon",
            "Mon Feb 4 00:00 2013",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 * Feb Mon/2",
            "Fri Feb 1 00:00 2013",
        ),
        (
            "Mon Dec 31 23:59:45 2012",
            "0 * * * * *",
            "Tue Jan 1 00:00:00 2013",
        ),
        (
            "Mon Jul 9 23:35 2012",
            "0 0 0 29 Feb ?",
            "Mon Feb 29 00:00 2016",
        ),
        // Daylight saving time 2am EST (-5) -> 3am EDT (-4).
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 30 2 11 Mar ?",
            "2013-03-11T02:30:00-0400",
        ),
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T01:00:00-0500",
        ),
        (
            "2012-03-11T01:00:00-0500",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T03:00:00-0400",
        ),
        (
            "2012-03-11T03:00:00-0400",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T04:00:00-0400",
        ),
        (
            "2012-03-11T04:00:00-0400",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T05:00:00-0400",
        ),
        (
            "2012-03-11T00:00:00-0500",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T01:00:00-0500",
        ),
        (
            "2012-03-11T01:00:00-0500",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T03:00:00-0400",
        ),
        (
            "2012-03-11T03:00:00-0400",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T04:00:00-0400",
        ),
        (
            "2012-03-11T04:00:00-0400",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T05:00:00-0400",
        ),
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-03-11T01:00:00-0500",
        ),
        (
            "2012-03-11T01:00:00-0500",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-03-12T01:00:00-0400",
        ),
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 0 2 * * ?",
            "2012-03-12T02:00:00-0400",
        ),
        // Daylight saving time 2am EDT (-4) => 1am EST (-5).
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 30 2 04 Nov ?",
            "2012-11-04T02:30:00-0500",
        ),
        (
            "2012-11-04T01:45:00-0400",
            "TZ=America/New_York 0 30 1 04 Nov ?",
            "2012-11-04T01:30:00-0500",
        ),
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-11-04T01:00:00-0400",
        ),
        (
            "2012-11-04T01:00:00-0400",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-11-04T01:00:00-0500",
        ),
        (
            "2012-11-04T01:00:00-0500",
            "TZ=America/New_York 0 0 * * * ?",
            "2012-11-04T02:00:00-0500",
        ),
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-11-04T01:00:00-0400",
        ),
        (
            "2012-11-04T01:00:00-0400",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-11-04T01:00:00-0500",
        ),
        (
            "2012-11-04T01:00:00-0500",
            "TZ=America/New_York 0 0 1 * * ?",
            "2012-11-05T01:00:00-0500",
        ),
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 2 * * ?",
            "2012-11-04T02:00:00-0500",
        ),
        (
            "2012-11-04T02:00:00-0500",
            "TZ=America/New_York 0 0 2 * * ?",
            "2012-11-05T02:00:00-0500",
        ),
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 3 * * ?",
            "2012-11-04T03:00:00-0500",
        ),
        (
            "2012-11-04T03:00:00-0500",
            "TZ=America/New_York 0 0 3 * * ?",
            "2012-11-05T03:00:00-0500",
        ),
        // Unsatisfiable.
        ("Mon Jul 9 23:35 2012", "0 0 0 30 Feb ?", ""),
        ("Mon Jul 9 23:35 2012", "0 0 0 31 Apr ?", ""),
        // Monthly job.
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 0 3 3 * ?",
            "2012-12-03T03:00:00-0500",
        ),
        // DST making midnight not exist (robfig/cron#157).
        (
            "2018-10-17T05:00:00-0400",
            "TZ=America/Sao_Paulo 0 0 9 10 * ?",
            "2018-11-10T06:00:00-0500",
        ),
        (
            "2018-02-14T05:00:00-0500",
            "TZ=America/Sao_Paulo 0 0 9 22 * ?",
            "2018-02-22T07:00:00-0500",
        ),
        // TestNextWithTz: a +05:30 start with the fields read at +05:30.
        (
            "2016-01-03T13:09:03+0530",
            "TZ=Asia/Kolkata 0 14 14 * * *",
            "2016-01-03T14:14:00+0530",
        ),
        (
            "2016-01-03T04:09:03+0530",
            "TZ=Asia/Kolkata 0 14 14 * * ?",
            "2016-01-03T14:14:00+0530",
        ),
        (
            "2016-01-03T14:09:03+0530",
            "TZ=Asia/Kolkata 0 14 14 * * *",
            "2016-01-03T14:14:00+0530",
        ),
        (
            "2016-01-03T14:00:00+0530",
            "TZ=Asia/Kolkata 0 14 14 * * ?",
            "2016-01-03T14:14:00+0530",
        ),
    ];
    for (time, spec, expected) in cases {
        let want = (!expected.is_empty()).then(|| go_time(expected));
        let got = sched(spec).next(go_time(time));
        assert_eq!(got, want, "{spec:?} from {time}");
    }
}

#[test]
fn kit_test_errors() {
    // Kit's 5-field inputs fail on the field count; their 6-field forms fail on the field.
    for five in ["xyz", "60 0 * * *", "0 60 * * *", "0 0 * * XYZ"] {
        assert!(parse(five).is_err(), "{five}");
    }
    assert_eq!(
        err("0 60 0 * * *"),
        "end of range (60) above maximum (59): 60"
    );
    assert_eq!(
        err("0 0 60 * * *"),
        "end of range (60) above maximum (23): 60"
    );
    assert_eq!(
        err("0 0 0 * * XYZ"),
        r#"failed to parse int from XYZ: strconv.Atoi: parsing "XYZ": invalid syntax"#
    );
    // robfig/cron#144: a zero step must be an error, not a hang.
    assert_eq!(
        err("TZ=America/New_York 0 15/0 * * * *"),
        "step of range should be a positive number: 15/0"
    );
}

// ---------------------------------------------------------------------------------------
// kit constantdelay_test.go, with the dapr fork's exact addition (no millisecond rounding).

#[test]
fn kit_test_constant_delay_next() {
    const NS: i64 = 1;
    const MS: i64 = 1_000_000;
    const SEC: i64 = 1_000_000_000;
    const MIN: i64 = 60 * SEC;
    const HOUR: i64 = 60 * MIN;
    let cases: &[(&str, i64, &str)] = &[
        (
            "Mon Jul 9 14:45 2012",
            15 * MIN + 50 * NS,
            "Mon Jul 9 15:00:00.000000050 2012",
        ),
        ("Mon Jul 9 14:59 2012", 15 * MIN, "Mon Jul 9 15:14 2012"),
        (
            "Mon Jul 9 14:59:59 2012",
            15 * MIN,
            "Mon Jul 9 15:14:59 2012",
        ),
        (
            "Mon Jul 9 14:45:00 2012",
            15 * MS,
            "Mon Jul 9 14:45:00.015 2012",
        ),
        (
            "Mon Jul 9 14:45:00.015 2012",
            15 * MS,
            "Mon Jul 9 14:45:00.030 2012",
        ),
        ("Mon Jul 9 15:45 2012", 35 * MIN, "Mon Jul 9 16:20 2012"),
        ("Mon Jul 9 23:46 2012", 14 * MIN, "Tue Jul 10 00:00 2012"),
        ("Mon Jul 9 23:45 2012", 35 * MIN, "Tue Jul 10 00:20 2012"),
        (
            "Mon Jul 9 23:35:51 2012",
            44 * MIN + 24 * SEC,
            "Tue Jul 10 00:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35:51 2012",
            25 * HOUR + 44 * MIN + 24 * SEC,
            "Thu Jul 11 01:20:15 2012",
        ),
        (
            "Mon Jul 9 23:35 2012",
            91 * 24 * HOUR + 25 * MIN,
            "Thu Oct 9 00:00 2012",
        ),
        (
            "Mon Dec 31 23:59:45 2012",
            15 * SEC,
            "Tue Jan 1 00:00:00 2013",
        ),
        (
            "Mon Jul 9 14:45:00.005 2012",
            15 * MIN + 50 * NS,
            "Mon Jul 9 15:00:00.005000050 2012",
        ),
    ];
    for (time, nanos, expected) in cases {
        let every = ConstantDelay { nanos: *nanos };
        assert_eq!(
            every.next(go_time(time)),
            Some(go_time(expected)),
            "{time} + {nanos}ns"
        );
    }
}

#[test]
fn every_is_exact_addition() {
    let from = utc("2026-01-01T00:00:00Z");
    assert_eq!(
        first_n("@every 100ms", from, 3),
        [
            utc("2026-01-01T00:00:00.1Z"),
            utc("2026-01-01T00:00:00.2Z"),
            utc("2026-01-01T00:00:00.3Z"),
        ]
    );
    // Go's Next is t.Add(d): zero stays put and a negative delay goes back.
    assert_eq!(sched("@every 0s").next(from), Some(from));
    assert_eq!(
        sched("@every -1h").next(from),
        Some(utc("2025-12-31T23:00:00Z"))
    );
    assert_eq!(
        sched("@every 1µs").next(from),
        Some(utc("2026-01-01T00:00:00.000001Z"))
    );
    assert_eq!(sched("@every 1h").next(DateTime::<Utc>::MAX_UTC), None);
}

// ---------------------------------------------------------------------------------------
// Error texts and parser corners.

#[test]
fn every_error_text() {
    let cases = [
        ("", "empty spec string"),
        (
            "TZ=UTC",
            "timezone prefix TZ=UTC is not followed by a schedule",
        ),
        (
            "CRON_TZ=America/New_York",
            "timezone prefix CRON_TZ=America/New_York is not followed by a schedule",
        ),
        (
            "TZ=Not/AZone 0 * * * * *",
            "provided bad location Not/AZone: unknown time zone Not/AZone",
        ),
        (
            "TZ=america/new_york 0 * * * * *",
            "provided bad location america/new_york: unknown time zone america/new_york",
        ),
        (
            "TZ=../etc/passwd 0 * * * * *",
            "provided bad location ../etc/passwd: time: invalid location name",
        ),
        (
            "TZ=/etc/localtime 0 * * * * *",
            "provided bad location /etc/localtime: time: invalid location name",
        ),
        (
            "TZ=UTC @every 1h",
            "timezone is not supported for @every schedules: TZ=UTC @every 1h",
        ),
        (
            "*/5 * * * *",
            "expected exactly 6 fields, found 5: [*/5 * * * *]",
        ),
        // Kit trims after the prefix and then finds no fields at all.
        ("TZ=UTC ", "expected exactly 6 fields, found 0: []"),
        ("   ", "expected exactly 6 fields, found 0: []"),
        ("0 0 0 1-2-3 * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * * *", "too many slashes: */2/3"),
        (
            "x * * * * *",
            r#"failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax"#,
        ),
        (
            "-5 * * * * *",
            r#"failed to parse int from : strconv.Atoi: parsing "": invalid syntax"#,
        ),
        (
            "99999999999999999999 * * * * *",
            r#"failed to parse int from 99999999999999999999: strconv.Atoi: parsing "99999999999999999999": value out of range"#,
        ),
        ("*/-12 * * * * *", "negative number (-12) not allowed: -12"),
        ("0 0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("0 0 0 * 0 *", "beginning of range (0) below minimum (1): 0"),
        ("60 * * * * *", "end of range (60) above maximum (59): 60"),
        ("0 0 24 * * *", "end of range (24) above maximum (23): 24"),
        ("0 0 0 32 * *", "end of range (32) above maximum (31): 32"),
        ("0 0 0 * 13 *", "end of range (13) above maximum (12): 13"),
        ("0 0 0 * * 7", "end of range (7) above maximum (6): 7"),
        ("0 0 0 * * 5-7", "end of range (7) above maximum (6): 5-7"),
        (
            "5-3 * * * * *",
            "beginning of range (5) beyond end of range (3): 5-3",
        ),
        (
            "0 0 0 * * sat-mon",
            "beginning of range (6) beyond end of range (1): sat-mon",
        ),
        (
            "*/0 * * * * *",
            "step of range should be a positive number: */0",
        ),
        ("@foo", "unrecognized descriptor: @foo"),
        ("@Daily", "unrecognized descriptor: @Daily"),
        ("@every", "unrecognized descriptor: @every"),
        ("@every\t1h", "unrecognized descriptor: @every\t1h"),
        ("@hourly ", "unrecognized descriptor: @hourly "),
        (
            "@every x",
            r#"failed to parse duration @every x: time: invalid duration "x""#,
        ),
        (
            "@every 1h ",
            r#"failed to parse duration @every 1h : time: unknown unit "h " in duration "1h ""#,
        ),
        (
            "@every 5",
            r#"failed to parse duration @every 5: time: missing unit in duration "5""#,
        ),
        (
            "@every 1d",
            r#"failed to parse duration @every 1d: time: unknown unit "d" in duration "1d""#,
        ),
        // No L, W or # in kit.
        (
            "0 0 0 L * *",
            r#"failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax"#,
        ),
        (
            "0 0 0 15W * *",
            r#"failed to parse int from 15W: strconv.Atoi: parsing "15W": invalid syntax"#,
        ),
        (
            "0 0 0 * * 1#2",
            r#"failed to parse int from 1#2: strconv.Atoi: parsing "1#2": invalid syntax"#,
        ),
        (
            "0 0 0 * jan-x *",
            r#"failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax"#,
        ),
        // Names are only for month and day of week; steps are plain integers.
        (
            "0 0 0 * * */mon",
            r#"failed to parse int from mon: strconv.Atoi: parsing "mon": invalid syntax"#,
        ),
        (
            "jan * * * * *",
            r#"failed to parse int from jan: strconv.Atoi: parsing "jan": invalid syntax"#,
        ),
        // The first failing field wins, in field order.
        ("60 60 * * * *", "end of range (60) above maximum (59): 60"),
        // Quoting of odd bytes follows Go's strconv.Quote.
        (
            "\u{1}\u{7f} * * * * *",
            "failed to parse int from \u{1}\u{7f}: strconv.Atoi: parsing \"\\x01\\x7f\": invalid syntax",
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(err(spec), want, "{spec:?}");
    }
}

#[test]
fn go_atoi_corners() {
    let ok = |s: &str| atoi(s).ok();
    assert_eq!(ok("+5"), Some(5));
    assert_eq!(ok("-0"), Some(0));
    assert_eq!(ok("007"), Some(7));
    assert_eq!(ok("9223372036854775807"), Some(i64::MAX));
    assert_eq!(ok("-9223372036854775808"), Some(i64::MIN));
    let text = |s: &str| atoi(s).map_err(|e| e.to_string()).err();
    assert_eq!(
        text("9223372036854775808").as_deref(),
        Some(r#"strconv.Atoi: parsing "9223372036854775808": value out of range"#)
    );
    assert_eq!(
        text("-9223372036854775809").as_deref(),
        Some(r#"strconv.Atoi: parsing "-9223372036854775809": value out of range"#)
    );
    // The slow path reports the overflow before a later bad byte...
    assert!(text("99999999999999999999x").is_some_and(|e| e.ends_with("value out of range")));
    // ...but a bad byte before any overflow is a syntax error.
    assert!(text("1234567890123456789x").is_some_and(|e| e.ends_with("invalid syntax")));
    for bad in ["", "+", "-", "1_000", "0x10", " 1", "1.0", "١"] {
        assert!(
            text(bad).is_some_and(|e| e.ends_with("invalid syntax")),
            "{bad:?}"
        );
    }
    // Huge values that parse are range-checked by the field, with Go's %d.
    assert_eq!(
        err("9223372036854775807 * * * * *"),
        "end of range (9223372036854775807) above maximum (59): 9223372036854775807"
    );
    assert_eq!(
        err("-9223372036854775808/2 * * * * *"),
        r#"failed to parse int from : strconv.Atoi: parsing "": invalid syntax"#
    );
    assert_eq!(
        err("*/-9223372036854775808 * * * * *"),
        "negative number (-9223372036854775808) not allowed: -9223372036854775808"
    );
}

#[test]
fn parser_corners_match_go() {
    // Names are case-insensitive and Go lowers rune by rune (İ is i).
    assert_eq!(sched("0 0 0 * JAN-mar sUn"), sched("0 0 0 * 1-3 0"));
    assert_eq!(sched("0 0 0 * * FRİ"), sched("0 0 0 * * 5"));
    assert!(parse("0 0 0 * * FRIDAY").is_err());
    // `?` is `*`, and a star ignores anything after its hyphen.
    assert_eq!(sched("? ? ? ? ? ?"), sched("* * * * * *"));
    assert_eq!(sched("*-5 * * * * *"), sched("* * * * * *"));
    // `*/1` keeps the star bit; `*/2` and explicit ranges do not.
    assert_eq!(spec_of("0 0 0 */1 * *").dom_bits() & STAR_BIT, STAR_BIT);
    assert_eq!(spec_of("0 0 0 */2 * *").dom_bits() & STAR_BIT, 0);
    assert_eq!(spec_of("0 0 0 1-31 * *").dom_bits() & STAR_BIT, 0);
    // `N/step` runs to the field's maximum.
    assert_eq!(
        spec_of("50/3 * * * * *").second_bits(),
        1 << 50 | 1 << 53 | 1 << 56 | 1 << 59
    );
    // Go splits on Unicode whitespace, like Rust.
    assert_eq!(sched("0\u{3000}30\u{a0}*\t*\n* *"), sched("0 30 * * * *"));
    assert_eq!(
        sched("CRON_TZ=Asia/Tokyo\u{2003}0 5 * * * *"),
        sched("CRON_TZ=Asia/Tokyo 0 5 * * * *")
    );
    // `TZ=` with an empty name is Go's UTC, `TZ=Local` is the input's zone.
    assert_eq!(spec_of("TZ= 0 5 * * * *").time_zone(), Some(Tz::UTC));
    assert_eq!(spec_of("TZ=Local 0 5 * * * *"), spec_of("0 5 * * * *"));
    // A field of bare commas parses and never matches.
    assert_eq!(sched(", * * * * *").next(utc("2026-01-01T00:00:00Z")), None);
    // FromStr is parse.
    assert_eq!("@hourly".parse::<Schedule>(), parse("@hourly"));
}

#[test]
fn five_year_limit() {
    // The next Feb 29 after 2097 is 2104 (2100 is not a leap year): past kit's limit.
    let s = sched("0 0 0 29 2 *");
    assert_eq!(s.next(utc("2097-03-01T00:00:00Z")), None);
    assert_eq!(
        s.next(utc("2099-01-01T00:00:00Z")),
        Some(utc("2104-02-29T00:00:00Z"))
    );
    // The limit is "year + 5", so late December reaches further than early January.
    let s = sched("0 0 0 1 1 *");
    assert_eq!(
        s.next(utc("2026-12-31T23:59:59Z")),
        Some(utc("2027-01-01T00:00:00Z"))
    );
    // chrono's range ends before kit's limit would.
    assert_eq!(s.next(DateTime::<Utc>::MAX_UTC), None);
    assert_eq!(
        sched("TZ=America/New_York 0 0 0 1 1 *").next(DateTime::<Utc>::MAX_UTC),
        None
    );
}

#[test]
fn leap_second_input_moves_to_the_next_second() {
    let leap = NaiveDateTime::parse_from_str("2016-12-31 23:59:60.5", "%Y-%m-%d %H:%M:%S%.f")
        .map(|t| t.and_utc())
        .ok();
    if let Some(leap) = leap {
        let got = sched("* * * * * *").next(leap);
        assert_eq!(got, Some(utc("2017-01-01T00:00:00Z")));
        assert!(got > Some(leap));
    }
}

#[test]
fn utc_aliases_take_the_fast_path_and_agree() {
    let from = utc("2026-03-01T00:00:00Z");
    for zone in [
        "UTC",
        "Etc/UTC",
        "Zulu",
        "GMT",
        "Etc/GMT+0",
        "Greenwich",
        "UCT",
    ] {
        let spec = format!("TZ={zone} 7 */13 5-9 1,15 * Mon");
        let s = spec_of(&spec);
        let tz = s.time_zone().unwrap_or(Tz::Etc__GMTPlus1);
        assert!(is_utc(tz), "{zone}");
        let mut t = from;
        for _ in 0..20 {
            let fast = s.next(t);
            assert_eq!(fast, walk::next(&s, tz, t), "{spec} after {t}");
            match fast {
                Some(next) => t = next,
                None => break,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Properties.

/// One field in kit's grammar, in range for `(min, max)`, optionally using names.
fn field(min: u64, max: u64, names: &'static [&'static str]) -> BoxedStrategy<String> {
    let value = move || {
        (min..=max, any::<bool>()).prop_map(move |(v, named)| {
            let i = (v - min) as usize;
            match names.get(i) {
                Some(name) if named => (*name).to_owned(),
                _ => v.to_string(),
            }
        })
    };
    let range = (min..=max, min..=max).prop_map(|(a, b)| (a.min(b), a.max(b)));
    let piece = prop_oneof![
        3 => value().boxed(),
        1 => range.clone().prop_map(|(a, b)| format!("{a}-{b}")).boxed(),
        1 => (range, 1..=max + 1).prop_map(|((a, b), s)| format!("{a}-{b}/{s}")).boxed(),
        1 => (min..=max, 1..=max + 1).prop_map(|(a, s)| format!("{a}/{s}")).boxed(),
        1 => (1..=max + 1).prop_map(|s| format!("*/{s}")).boxed(),
    ];
    prop_oneof![
        3 => Just("*".to_owned()),
        1 => Just("?".to_owned()),
        6 => prop::collection::vec(piece, 1..=3).prop_map(|p| p.join(",")),
    ]
    .boxed()
}

const MONTH_NAMES: &[&str] = &[
    "Jan", "feb", "MAR", "apr", "May", "jun", "jul", "AUG", "sep", "oct", "nov", "Dec",
];
const DOW_NAMES: &[&str] = &["sun", "Mon", "TUE", "wed", "thu", "fri", "Sat"];

pub(super) fn spec_text() -> impl Strategy<Value = String> {
    let fields = (
        field(0, 59, &[]),
        field(0, 59, &[]),
        field(0, 23, &[]),
        field(1, 31, &[]),
        field(1, 12, MONTH_NAMES),
        field(0, 6, DOW_NAMES),
    )
        .prop_map(|(s, m, h, dom, mon, dow)| format!("{s} {m} {h} {dom} {mon} {dow}"));
    let descriptor = prop::sample::select(vec![
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
    ])
    .prop_map(str::to_owned);
    prop_oneof![9 => fields, 1 => descriptor]
}

/// A start instant between 1965 and 2105, with sub-second noise.
pub(super) fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    (-157_766_400i64..4_260_211_200, 0u32..1_000_000_000).prop_map(|(secs, nanos)| {
        DateTime::from_timestamp(secs, nanos).unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
    })
}

const ZONES: &[&str] = &[
    "America/New_York",
    "Europe/Rome",
    "Asia/Kolkata",
    "America/Sao_Paulo",
    "Australia/Sydney",
    "Etc/GMT-5",
];

/// Whether a UTC instant satisfies every field read in `tz`.
fn matches_fields(s: &SpecSchedule, t: DateTime<Utc>, tz: Tz) -> bool {
    let w = t.with_timezone(&tz);
    let b = s.bits;
    t.timestamp_subsec_nanos() == 0
        && b.second >> w.second() & 1 == 1
        && b.minute >> w.minute() & 1 == 1
        && b.hour >> w.hour() & 1 == 1
        && b.month >> w.month() & 1 == 1
        && s.day_matches(w.day(), w.weekday().num_days_from_sunday())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn fast_path_equals_faithful_walk(spec in spec_text(), start in instant()) {
        let s = spec_of(&spec);
        let mut t = start;
        // A short chain: real callers feed each answer back in.
        for _ in 0..3 {
            let fast = fast::next(&s, t);
            prop_assert_eq!(fast, oracle(&s, t), "{} after {}", spec, t);
            match fast {
                Some(next) => t = next,
                None => break,
            }
        }
    }

    #[test]
    fn utc_next_is_later_and_matches(spec in spec_text(), start in instant()) {
        let s = spec_of(&spec);
        if let Some(next) = s.next(start) {
            prop_assert!(next > start);
            prop_assert!(matches_fields(&s, next, Tz::UTC), "{} -> {}", spec, next);
            prop_assert!(next.year() <= start.year() + 5 + 1);
        }
    }

    #[test]
    fn zoned_next_is_later_and_matches(
        spec in spec_text(),
        zone in prop::sample::select(ZONES),
        start in instant(),
    ) {
        let tz: Tz = zone.parse().unwrap_or(Tz::UTC);
        let s = spec_of(&format!("TZ={zone} {spec}"));
        if let Some(next) = s.next(start) {
            prop_assert!(next > start, "{} {} after {} gave {}", zone, spec, start, next);
            prop_assert!(matches_fields(&s, next, tz), "{} {} -> {}", zone, spec, next);
        }
    }

    #[test]
    fn fixed_offset_walk_is_shifted_utc(spec in spec_text(), start in instant()) {
        // Etc/GMT-5 is UTC+5 with no transitions: reading the fields there is the UTC answer
        // for a clock five hours ahead.
        let s = spec_of(&spec);
        let tz: Tz = "Etc/GMT-5".parse().unwrap_or(Tz::UTC);
        let shift = TimeDelta::hours(5);
        let walked = walk::next(&s, tz, start);
        let shifted = fast::next(&s, start + shift).map(|t| t - shift);
        prop_assert_eq!(walked, shifted, "{} after {}", spec, start);
    }

    #[test]
    fn every_adds_exactly(nanos in -10_i64.pow(15)..10_i64.pow(15), start in instant()) {
        let text = duration::format(nanos);
        let s = sched(&format!("@every {text}"));
        prop_assert_eq!(s.next(start), Some(start + TimeDelta::nanoseconds(nanos)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_any_string(s in any::<String>()) {
        if let Ok(schedule) = parse(&s) {
            let _ = schedule.next(DateTime::<Utc>::UNIX_EPOCH);
        }
    }

    #[test]
    fn parse_never_panics_on_cron_shaped_text(
        s in r"((CRON_)?TZ=[A-Za-z/_+\-.]{0,12}[ \t\u{3000}]?)?[0-9*?/,\-@a-zA-Zİ \t]{0,40}",
        start in instant(),
    ) {
        if let Ok(schedule @ Schedule::Spec(_)) = parse(&s)
            && let Some(next) = schedule.next(start)
        {
            prop_assert!(next > start);
        }
    }
}
