use chrono::{DateTime, TimeDelta, TimeZone, Utc};

use super::*;
use crate::schedule::plan::Begin;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 31, 12, 0, 0).unwrap() + TimeDelta::milliseconds(250)
}

fn spec() -> JobSpec {
    JobSpec::default()
}

fn err(spec: &JobSpec) -> String {
    validate(spec, now()).unwrap_err().to_string()
}

#[test]
fn every_shape_rule_has_dapr_text() {
    let s = |v: &str| Some(v.to_owned());
    let cases: Vec<(JobSpec, &str)> = vec![
        (
            spec(),
            "job failed validation: job must have either a due time or a schedule",
        ),
        (
            JobSpec {
                due_time: s("1s"),
                repeats: Some(2),
                ..spec()
            },
            "job failed validation: job must have a schedule to repeat",
        ),
        (
            JobSpec {
                schedule: s("@daily"),
                repeats: Some(0),
                ..spec()
            },
            "job failed validation: defined repeats must be greater than 0",
        ),
        (
            JobSpec {
                due_time: s("1s"),
                repeats: Some(0),
                ..spec()
            },
            "job failed validation: defined repeats must be greater than 0",
        ),
        (
            JobSpec {
                due_time: s("1s"),
                ttl: s("10s"),
                ..spec()
            },
            "job failed validation: job must have a schedule to have a ttl",
        ),
        (
            JobSpec {
                schedule: s(""),
                ..spec()
            },
            "job failed validation: empty spec string",
        ),
        (
            JobSpec {
                schedule: s("*/5 * * * *"),
                ..spec()
            },
            "job failed validation: expected exactly 6 fields, found 5: [*/5 * * * *]",
        ),
        (
            JobSpec {
                schedule: s("60 * * * * *"),
                ..spec()
            },
            "job failed validation: end of range (60) above maximum (59): 60",
        ),
        (
            JobSpec {
                schedule: s("@foo"),
                ..spec()
            },
            "job failed validation: unrecognized descriptor: @foo",
        ),
        (
            JobSpec {
                due_time: s("tomorrow"),
                ..spec()
            },
            "job failed validation: due time format not recognized",
        ),
        (
            JobSpec {
                due_time: s("R3/PT1S"),
                ..spec()
            },
            "job failed validation: repeats not supported for due time",
        ),
        (
            JobSpec {
                schedule: s("@daily"),
                ttl: s("forever"),
                ..spec()
            },
            "job failed validation: ttl format not recognized",
        ),
        (
            // The repetition error of a ttl is reported as a format error, as Dapr does.
            JobSpec {
                schedule: s("@daily"),
                ttl: s("R3/PT1S"),
                ..spec()
            },
            "job failed validation: ttl format not recognized",
        ),
        (
            JobSpec {
                schedule: s("@daily"),
                due_time: s("2026-03-01T00:00:00Z"),
                ttl: s("2026-02-01T00:00:00Z"),
                ..spec()
            },
            "job failed validation: ttl must be greater than due time",
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(err(&spec), want, "{spec:?}");
    }
}

#[test]
fn rules_are_checked_in_dapr_order() {
    // Both "repeats without schedule" and "ttl without schedule" apply: Dapr reports the first.
    let spec = JobSpec {
        due_time: Some("1s".into()),
        repeats: Some(3),
        ttl: Some("5s".into()),
        ..spec()
    };
    assert_eq!(
        err(&spec),
        "job failed validation: job must have a schedule to repeat"
    );
    // A bad schedule is reported before a bad due time.
    let spec = JobSpec {
        schedule: Some("nope".into()),
        due_time: Some("nope".into()),
        ..JobSpec::default()
    };
    assert!(err(&spec).contains("expected exactly 6 fields"));
}

#[test]
fn repeats_one_without_schedule_is_allowed() {
    let spec = JobSpec {
        due_time: Some("0s".into()),
        repeats: Some(1),
        ..spec()
    };
    let plan = validate(&spec, now()).unwrap();
    assert_eq!(plan.begin, Begin::DueTime(now()));
}

#[test]
fn default_failure_policy_is_constant_1s_3_retries() {
    let plan = validate(
        &JobSpec {
            schedule: Some("@daily".into()),
            ..spec()
        },
        now(),
    )
    .unwrap();
    assert_eq!(
        plan.failure_policy,
        FailurePolicy::Constant {
            interval: TimeDelta::seconds(1),
            max_retries: Some(3)
        }
    );
    let given = FailurePolicy::Drop;
    let plan = validate(
        &JobSpec {
            schedule: Some("@daily".into()),
            failure_policy: Some(given.clone()),
            ..spec()
        },
        now(),
    )
    .unwrap();
    assert_eq!(plan.failure_policy, given);
}

#[test]
fn due_time_forms_resolve_like_go_etcd_cron() {
    let n = now();
    let at = |s: &str| point_in_time(s, n).unwrap();
    assert_eq!(
        at("2024-01-02T15:04:05Z"),
        Utc.with_ymd_and_hms(2024, 1, 2, 15, 4, 5).unwrap()
    );
    assert_eq!(
        at("2024-01-02T15:04:05.123+02:00"),
        Utc.with_ymd_and_hms(2024, 1, 2, 13, 4, 5).unwrap() + TimeDelta::milliseconds(123)
    );
    assert_eq!(at("0s"), n);
    assert_eq!(at("0"), n);
    assert_eq!(at("10s"), n + TimeDelta::seconds(10));
    assert_eq!(at("1h30m"), n + TimeDelta::minutes(90));
    assert_eq!(at("-5s"), n - TimeDelta::seconds(5));
    assert_eq!(at("0h0m9s0ms"), n + TimeDelta::seconds(9));
    assert_eq!(at("PT2H30M"), n + TimeDelta::minutes(150));
    // Go's AddDate: Jan 31 + 1 month normalises to Mar 3 (2026 is not a leap year).
    assert_eq!(
        at("P1M"),
        Utc.with_ymd_and_hms(2026, 3, 3, 12, 0, 0).unwrap() + TimeDelta::milliseconds(250)
    );
    assert_eq!(at("P1W"), n + TimeDelta::days(7));
    assert_eq!(at("R0/PT1S"), n + TimeDelta::seconds(1));
    assert_eq!(point_in_time("R2/PT1S", n), Err(Rule::DueTimeRepeats));
    assert_eq!(point_in_time("PT1.5S", n), Err(Rule::DueTimeFormat));
    assert_eq!(
        point_in_time("2026-01-01 00:00:00Z", n),
        Err(Rule::DueTimeFormat)
    );
    assert_eq!(point_in_time("", n), Err(Rule::DueTimeFormat));
}

#[test]
fn ttl_is_relative_to_due_time_when_set() {
    let plan = validate(
        &JobSpec {
            schedule: Some("@every 1s".into()),
            due_time: Some("10s".into()),
            ttl: Some("5s".into()),
            ..spec()
        },
        now(),
    )
    .unwrap();
    assert_eq!(plan.begin, Begin::DueTime(now() + TimeDelta::seconds(10)));
    assert_eq!(plan.expiration, Some(now() + TimeDelta::seconds(15)));

    let plan = validate(
        &JobSpec {
            schedule: Some("@every 1s".into()),
            ttl: Some("5s".into()),
            ..spec()
        },
        now(),
    )
    .unwrap();
    assert_eq!(plan.begin, Begin::Start(now()));
    assert_eq!(plan.expiration, Some(now() + TimeDelta::seconds(5)));
}

#[test]
fn ttl_equal_to_due_time_is_allowed() {
    let plan = validate(
        &JobSpec {
            schedule: Some("@daily".into()),
            due_time: Some("2026-03-01T00:00:00Z".into()),
            ttl: Some("2026-03-01T00:00:00Z".into()),
            ..spec()
        },
        now(),
    );
    assert!(plan.is_ok());
}

#[test]
fn dapr_http_examples_validate() {
    // tests/integration/suite/daprd/jobs/http/basic.go
    let s = |v: &str| Some(v.to_owned());
    for spec in [
        JobSpec {
            schedule: s("@daily"),
            ..spec()
        },
        JobSpec {
            schedule: s("@daily"),
            repeats: Some(3),
            due_time: s("10s"),
            ttl: s("11s"),
            ..spec()
        },
        JobSpec {
            due_time: s("0s"),
            ..spec()
        },
        JobSpec {
            schedule: s("@every 100ms"),
            ..spec()
        },
        JobSpec {
            schedule: s("@every 0s"),
            repeats: Some(2),
            ..spec()
        },
        JobSpec {
            schedule: s("TZ=America/New_York 0 0 9 * * *"),
            ..spec()
        },
    ] {
        assert!(validate(&spec, now()).is_ok(), "{spec:?}");
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn point_in_time_never_panics(s in "\\PC{0,40}") {
            let _ = point_in_time(&s, now());
        }

        #[test]
        fn validate_never_panics(
            schedule in proptest::option::of("\\PC{0,30}"),
            due in proptest::option::of("[-+0-9.PTRYMWDHSmsnuµh:Z/ ]{0,20}"),
            ttl in proptest::option::of("[-+0-9.PTRYMWDHSmsnuµh:Z/ ]{0,20}"),
            repeats in proptest::option::of(0u32..5),
        ) {
            let spec = JobSpec { schedule, due_time: due, ttl, repeats, failure_policy: None };
            let _ = validate(&spec, now());
        }
    }
}
