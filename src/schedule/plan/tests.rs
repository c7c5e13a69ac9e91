use chrono::{DateTime, TimeDelta, TimeZone, Utc};

use super::*;
use crate::schedule::job::{JobSpec, validate};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

fn secs(n: i64) -> DateTime<Utc> {
    now() + TimeDelta::seconds(n)
}

fn plan(f: impl FnOnce(&mut JobSpec)) -> Plan {
    let mut spec = JobSpec::default();
    f(&mut spec);
    validate(&spec, now()).unwrap()
}

/// Runs the plan to completion (or `limit` fires), answering each trigger with `outcome(i)`.
fn run(plan: &Plan, mut outcome: impl FnMut(usize) -> Outcome, limit: usize) -> Vec<DateTime<Utc>> {
    let mut counter = Counter::default();
    let mut fires = Vec::new();
    let mut next = plan.fire_time(&counter);
    while let Some(at) = next {
        if fires.len() == limit {
            break;
        }
        fires.push(at);
        let step = plan.apply(&counter, outcome(fires.len() - 1));
        counter = step.counter;
        next = step.next;
    }
    fires
}

fn ok(_: usize) -> Outcome {
    Outcome::Success
}

fn fail(_: usize) -> Outcome {
    Outcome::Failed
}

#[test]
fn every_1s_with_ttl_3s_fires_exactly_3_times() {
    let p = plan(|s| {
        s.schedule = Some("@every 1s".into());
        s.ttl = Some("3s".into());
    });
    assert_eq!(run(&p, ok, 100), vec![secs(1), secs(2), secs(3)]);
}

#[test]
fn every_1s_with_repeats_2_fires_twice() {
    let p = plan(|s| {
        s.schedule = Some("@every 1s".into());
        s.repeats = Some(2);
    });
    assert_eq!(run(&p, ok, 100), vec![secs(1), secs(2)]);
}

#[test]
fn schedule_without_due_time_does_not_fire_at_creation() {
    let p = plan(|s| s.schedule = Some("*/5 * * * * *".into()));
    assert_eq!(run(&p, ok, 3), vec![secs(5), secs(10), secs(15)]);
}

#[test]
fn schedule_with_due_time_fires_at_due_time_first() {
    let p = plan(|s| {
        s.schedule = Some("@every 10s".into());
        s.due_time = Some("5s".into());
        s.repeats = Some(3);
    });
    assert_eq!(run(&p, ok, 100), vec![secs(5), secs(15), secs(25)]);
}

#[test]
fn one_shot_fires_once_and_finishes() {
    let p = plan(|s| s.due_time = Some("0s".into()));
    assert_eq!(run(&p, ok, 100), vec![now()]);
    let step = p.apply(&Counter::default(), Outcome::Success);
    assert_eq!(step.next, None);
    assert_eq!(step.counter.count, 1);
}

#[test]
fn default_policy_delivers_a_failing_tick_4_times_1s_apart() {
    let p = plan(|s| s.due_time = Some("0s".into()));
    assert_eq!(run(&p, fail, 100), vec![secs(0), secs(1), secs(2), secs(3)]);
}

#[test]
fn constant_4_retries_without_interval_delivers_5_times_at_once() {
    let p = plan(|s| {
        s.due_time = Some("0s".into());
        s.failure_policy = Some(FailurePolicy::Constant {
            interval: TimeDelta::zero(),
            max_retries: Some(4),
        });
    });
    assert_eq!(run(&p, fail, 100), vec![now(); 5]);
}

#[test]
fn drop_delivers_a_failing_tick_once() {
    let p = plan(|s| {
        s.due_time = Some("0s".into());
        s.failure_policy = Some(FailurePolicy::Drop);
    });
    assert_eq!(run(&p, fail, 100), vec![now()]);
}

#[test]
fn fail_fail_succeed_delivers_3_times() {
    let p = plan(|s| s.due_time = Some("0s".into()));
    let outcomes = [Outcome::Failed, Outcome::Failed, Outcome::Success];
    assert_eq!(
        run(&p, |i| outcomes[i], 100),
        vec![secs(0), secs(1), secs(2)]
    );
}

#[test]
fn unlimited_retries_keep_going() {
    let p = plan(|s| {
        s.due_time = Some("0s".into());
        s.failure_policy = Some(FailurePolicy::Constant {
            interval: TimeDelta::milliseconds(500),
            max_retries: None,
        });
    });
    let fires = run(&p, fail, 50);
    assert_eq!(fires.len(), 50);
    assert_eq!(fires[49], now() + TimeDelta::milliseconds(500 * 49));
}

#[test]
fn given_up_tick_counts_toward_repeats_and_schedule_keeps_nominal_time() {
    // Tick 1 (t+10) fails 4 times at +10..+13 and is given up; tick 2 is still at t+20.
    let p = plan(|s| {
        s.schedule = Some("@every 10s".into());
        s.repeats = Some(2);
    });
    let fires = run(
        &p,
        |i| {
            if i < 4 {
                Outcome::Failed
            } else {
                Outcome::Success
            }
        },
        100,
    );
    assert_eq!(
        fires,
        vec![secs(10), secs(11), secs(12), secs(13), secs(20)]
    );
}

#[test]
fn success_resets_attempts() {
    let p = plan(|s| s.schedule = Some("@every 10s".into()));
    let outcomes = [
        Outcome::Failed,
        Outcome::Success,
        Outcome::Failed,
        Outcome::Success,
    ];
    let fires = run(
        &p,
        |i| outcomes.get(i).copied().unwrap_or(Outcome::Success),
        5,
    );
    assert_eq!(
        fires,
        vec![secs(10), secs(11), secs(20), secs(21), secs(30)]
    );
}

#[test]
fn retries_are_not_cut_by_ttl_but_new_ticks_are() {
    let p = plan(|s| {
        s.schedule = Some("@every 10s".into());
        s.ttl = Some("10s".into());
    });
    // Only the t+10 tick is within the ttl; its retries at +11..+13 still happen.
    assert_eq!(
        run(&p, fail, 100),
        vec![secs(10), secs(11), secs(12), secs(13)]
    );
}

#[test]
fn negative_interval_never_fires_before_the_tick() {
    let p = plan(|s| {
        s.due_time = Some("10s".into());
        s.failure_policy = Some(FailurePolicy::Constant {
            interval: TimeDelta::seconds(-5),
            max_retries: Some(2),
        });
    });
    assert_eq!(run(&p, fail, 100), vec![secs(10); 3]);
}

#[test]
fn impossible_schedule_never_fires() {
    let p = plan(|s| s.schedule = Some("0 0 0 30 2 *".into()));
    assert_eq!(p.fire_time(&Counter::default()), None);
}

#[test]
fn impossible_schedule_waits_forever_but_finished_jobs_do_not() {
    // Dapr's Scheduler keeps such a job (GET returns it until it is deleted).
    let p = plan(|s| s.schedule = Some("0 0 0 31 2 *".into()));
    assert!(p.waits_forever(&Counter::default()));
    let p = plan(|s| {
        s.schedule = Some("0 0 0 31 2 *".into());
        s.ttl = Some("1h".into());
    });
    assert!(p.waits_forever(&Counter::default()));
    // Repeats used up, a one-shot done, a schedule that still matches: not kept.
    let p = plan(|s| {
        s.schedule = Some("0 0 0 31 2 *".into());
        s.repeats = Some(1);
    });
    let done = Counter {
        count: 1,
        ..Counter::default()
    };
    assert!(!p.waits_forever(&done));
    let p = plan(|s| s.due_time = Some("10s".into()));
    assert!(!p.waits_forever(&done));
    let p = plan(|s| s.schedule = Some("@every 1s".into()));
    assert!(!p.waits_forever(&Counter::default()));
}

#[test]
fn missed_ticks_replay_serially_at_nominal_times() {
    // After downtime the counter still says "last tick at t+1": the next ticks are the
    // missed ones, one after the other, not "now".
    let p = plan(|s| s.schedule = Some("@every 1s".into()));
    let counter = Counter {
        count: 1,
        last_trigger: Some(secs(1)),
        attempts: 0,
    };
    let step = p.apply(&counter, Outcome::Success);
    assert_eq!(step.next, Some(secs(3)));
    assert_eq!(step.counter.last_trigger, Some(secs(2)));
}

#[test]
fn restored_plan_continues_where_the_counter_left_off() {
    let p = plan(|s| {
        s.schedule = Some("@every 1s".into());
        s.repeats = Some(5);
    });
    let restored = Plan::restore(
        Some("@every 1s"),
        p.repeats,
        p.begin,
        p.expiration,
        p.failure_policy.clone(),
    )
    .unwrap();
    assert_eq!(restored, p);
    let counter = Counter {
        count: 3,
        last_trigger: Some(secs(3)),
        attempts: 2,
    };
    assert_eq!(restored.fire_time(&counter), Some(secs(6)));
    assert_eq!(
        restored.apply(&counter, Outcome::Success).next,
        Some(secs(5))
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    const SPECS: &[&str] = &[
        "@every 1s",
        "@every 1h30m",
        "*/7 * * * * *",
        "0 30 * * * *",
        "0 0 0 1,15 * *",
        "0 * * 1,15 * Sun",
        "@daily",
        "TZ=America/New_York 0 30 1 * * *",
    ];

    fn arb_plan() -> impl Strategy<Value = Plan> {
        (
            0..SPECS.len(),
            proptest::option::of(1u32..6),
            proptest::option::of(0i64..100_000),
            proptest::option::of(0i64..200_000),
            proptest::option::of((0i64..3_000, proptest::option::of(0u32..4))),
            any::<bool>(),
        )
            .prop_map(|(i, repeats, due_ms, ttl_ms, policy, drop)| {
                let spec = JobSpec {
                    schedule: Some(SPECS[i].to_owned()),
                    repeats,
                    due_time: due_ms.map(|ms| format!("{ms}ms")),
                    ttl: ttl_ms.map(|ms| format!("{}ms", ms + due_ms.unwrap_or(0))),
                    failure_policy: if drop {
                        Some(FailurePolicy::Drop)
                    } else {
                        policy.map(|(ms, max_retries)| FailurePolicy::Constant {
                            interval: TimeDelta::milliseconds(ms),
                            max_retries,
                        })
                    },
                };
                validate(&spec, now()).unwrap()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn never_fires_before_due_and_ticks_move_forward(
            p in arb_plan(),
            outcomes in proptest::collection::vec(any::<bool>(), 40),
        ) {
            let mut counter = Counter::default();
            let mut next = p.fire_time(&counter);
            let mut last_tick: Option<DateTime<Utc>> = None;
            for ok in outcomes {
                let Some(at) = next else { break };
                match p.begin {
                    Begin::DueTime(due) => prop_assert!(at >= due),
                    Begin::Start(start) => prop_assert!(at > start),
                }
                let tick = p.next_tick(&counter).unwrap();
                prop_assert!(at >= tick);
                if let Some(exp) = p.expiration {
                    prop_assert!(tick <= exp);
                }
                if counter.attempts == 0 {
                    if let Some(prev) = last_tick {
                        prop_assert!(tick > prev, "tick {tick} after {prev}");
                    }
                    last_tick = Some(tick);
                }
                let step = p.apply(&counter, if ok { Outcome::Success } else { Outcome::Failed });
                counter = step.counter;
                next = step.next;
            }
        }

        #[test]
        fn repeats_and_retries_bound_the_deliveries(
            p in arb_plan(),
            outcomes in proptest::collection::vec(any::<bool>(), 60),
        ) {
            let max_retries = match p.failure_policy {
                FailurePolicy::Drop => Some(0),
                FailurePolicy::Constant { max_retries, .. } => max_retries,
                _ => unreachable!("arb_plan makes Dapr's kinds only"),
            };
            let mut counter = Counter::default();
            let mut next = p.fire_time(&counter);
            let mut deliveries = 0u32;
            for ok in outcomes {
                if next.is_none() { break; }
                deliveries += 1;
                let step = p.apply(&counter, if ok { Outcome::Success } else { Outcome::Failed });
                prop_assert!(step.counter.count >= counter.count);
                counter = step.counter;
                next = step.next;
            }
            if let (Some(repeats), Some(max)) = (p.repeats, max_retries) {
                prop_assert!(deliveries <= repeats * (max + 1));
                prop_assert!(counter.count <= repeats);
            }
        }
    }
}

#[test]
fn jitter_offset_moves_every_attempt_but_never_past_the_next_tick() {
    let mut p = plan(|s| s.schedule = Some("@every 10s".into()));
    p.policy_mut().offset = TimeDelta::seconds(3);
    let c = Counter::default();
    assert_eq!(
        p.next_tick(&c),
        Some(secs(10)),
        "the nominal tick does not move"
    );
    assert_eq!(p.fire_time(&c), Some(secs(13)));
    let retry = Counter { attempts: 1, ..c };
    assert_eq!(
        p.fire_time(&retry),
        Some(secs(14)),
        "retry 1 s after the tick, plus 3 s"
    );
    p.policy_mut().offset = TimeDelta::seconds(25);
    assert_eq!(
        p.fire_time(&c),
        Some(secs(20) - TimeDelta::milliseconds(1)),
        "cut to just before the next tick"
    );
}

#[test]
fn catch_up_passes_over_missed_ticks_by_policy() {
    let mut p = plan(|s| s.schedule = Some("@every 10s".into()));
    let c = Counter::default(); // next tick at 10 s
    assert_eq!(p.catch_up(&c, secs(95)), None, "all: every tick runs");
    p.policy_mut().catch_up = crate::schedule::CatchUp::Latest;
    let (after, n) = p.catch_up(&c, secs(95)).unwrap();
    assert_eq!(n, 8, "10..80 passed over");
    assert_eq!(p.next_tick(&after), Some(secs(90)));
    assert_eq!(after.count, 0, "skips do not count toward repeats");
    assert_eq!(
        p.catch_up(&c, secs(15)),
        None,
        "on time: nothing to pass over"
    );
    p.policy_mut().catch_up = crate::schedule::CatchUp::Window(TimeDelta::seconds(30));
    let (after, n) = p.catch_up(&c, secs(95)).unwrap();
    assert_eq!((n, p.next_tick(&after)), (6, Some(secs(70))));
    let retry = Counter { attempts: 1, ..c };
    assert_eq!(
        p.catch_up(&retry, secs(95)),
        None,
        "a retry is never skipped"
    );
}

#[test]
fn pass_over_keeps_what_each_rule_says() {
    let p = plan(|s| s.schedule = Some("@every 10s".into()));
    let c = Counter::default();
    // Ticks at 10, 20, 30, 40 are due at 45.
    assert_eq!(
        p.pass_over(&c, Keep::After(secs(45))),
        Some((
            Counter {
                last_trigger: Some(secs(40)),
                ..c
            },
            4
        )),
        "after: every tick due by then"
    );
    assert_eq!(
        p.pass_over(&c, Keep::Latest(secs(45)))
            .map(|(c, n)| (c.last_trigger, n)),
        Some((Some(secs(30)), 3)),
        "latest: all but the tick at 40"
    );
    assert_eq!(
        p.pass_over(&c, Keep::From(secs(30)))
            .map(|(c, n)| (c.last_trigger, n)),
        Some((Some(secs(20)), 2)),
        "from: those before 30"
    );
    assert_eq!(p.pass_over(&c, Keep::After(secs(5))), None);
    // `repeats` does not count skipped ticks.
    assert_eq!(p.pass_over(&c, Keep::After(secs(45))).unwrap().0.count, 0);
}

#[test]
fn pass_over_past_the_last_tick_finishes_the_job() {
    let p = plan(|s| {
        s.schedule = Some("@every 10s".into());
        s.ttl = Some("25s".into());
    });
    let (after, n) = p
        .pass_over(&Counter::default(), Keep::After(secs(60)))
        .unwrap();
    assert_eq!(n, 2, "the ticks at 10 and 20; none after the ttl");
    assert_eq!(p.fire_time(&after), None);
}

#[test]
fn catch_up_none_runs_a_tick_less_than_ten_seconds_late() {
    let mut p = plan(|s| s.schedule = Some("@every 1m".into()));
    p.policy_mut().catch_up = crate::schedule::CatchUp::None;
    let c = Counter::default();
    assert_eq!(p.catch_up(&c, secs(69)), None, "9 s late: runs");
    let (after, n) = p.catch_up(&c, secs(71)).unwrap();
    assert_eq!(
        (after.last_trigger, n),
        (Some(secs(60)), 1),
        "11 s late: missed"
    );
}

#[test]
fn paused_ticks_are_counted_and_resume_keeps_what_catch_up_says() {
    use crate::schedule::CatchUp;
    for schedule in ["@every 10s", "*/10 * * * * *"] {
        let mut p = plan(|s| s.schedule = Some(schedule.into()));
        // Last tick done at 20 s; paused; ticks at 30, 40, 50 fall due by 55 s.
        let c = Counter {
            count: 2,
            last_trigger: Some(secs(20)),
            attempts: 0,
        };
        assert_eq!(p.paused_ticks(&c, false, secs(29)), 0, "{schedule}");
        assert_eq!(p.paused_ticks(&c, false, secs(55)), 3, "{schedule}");
        assert_eq!(
            p.paused_ticks(&c, false, secs(50)),
            3,
            "{schedule}: inclusive"
        );
        // A tick in progress (a retry waiting or an attempt out) is not one of them.
        let retrying = Counter { attempts: 1, ..c };
        assert_eq!(p.paused_ticks(&retrying, false, secs(55)), 2, "{schedule}");
        assert_eq!(p.paused_ticks(&c, true, secs(55)), 2, "{schedule}");
        assert_eq!(p.resume(&retrying, secs(55)), None, "the retry goes first");

        // Dapr's default and `none`: none of them runs; the job goes on at 60.
        let r = p.resume(&c, secs(55)).unwrap();
        assert_eq!(
            resumed(&p, r),
            (Some(secs(60)), 3, Some(secs(50))),
            "{schedule}"
        );
        assert_eq!(r.counter.count, 2, "skips do not count toward repeats");
        p.policy_mut().catch_up = CatchUp::None;
        assert_eq!(
            p.resume(&c, secs(55)).map(|x| resumed(&p, x)),
            Some(resumed(&p, r))
        );
        // `latest`: the tick at 50 runs; all three are counted.
        p.policy_mut().catch_up = CatchUp::Latest;
        let r = p.resume(&c, secs(55)).unwrap();
        assert_eq!(
            resumed(&p, r),
            (Some(secs(50)), 3, Some(secs(50))),
            "{schedule}"
        );
        // A window of 12 s before 55: 50 and 45.. → the tick at 50 (and none at 40).
        p.policy_mut().catch_up = CatchUp::Window(TimeDelta::seconds(15));
        let r = p.resume(&c, secs(55)).unwrap();
        assert_eq!(
            resumed(&p, r),
            (Some(secs(40)), 3, Some(secs(50))),
            "{schedule}"
        );
        // Nothing fell due: the job goes on as it was.
        let r = p.resume(&c, secs(25)).unwrap();
        assert_eq!((r.counter, r.paused, r.last), (c, 0, None));
    }
}

#[test]
fn paused_ticks_stop_at_the_ttl_and_a_one_shot_is_never_passed_over() {
    let p = plan(|s| {
        s.schedule = Some("@every 10s".into());
        s.ttl = Some("35s".into());
    });
    let c = Counter::default();
    assert_eq!(p.paused_ticks(&c, false, secs(1000)), 3);
    let r = p.resume(&c, secs(1000)).unwrap();
    assert_eq!((r.paused, p.fire_time(&r.counter)), (3, None), "then done");
    // A year of `@every 1s` is counted by division, not tick by tick.
    let every = plan(|s| s.schedule = Some("@every 1s".into()));
    assert_eq!(
        every.paused_ticks(&c, false, secs(365 * 86_400)),
        365 * 86_400
    );
    let one_shot = plan(|s| s.due_time = Some("10s".into()));
    assert_eq!(one_shot.paused_ticks(&c, false, secs(60)), 0);
    assert_eq!(one_shot.resume(&c, secs(60)), None, "it runs at the resume");
}

#[test]
fn a_paused_every_that_does_not_move_forward_is_counted_without_looping() {
    // Dapr takes `@every 0s` and negative delays; a list of a paused one hung a server
    // thread for ever (found by tests/hostile_requests.rs).
    for schedule in ["@every 0s", "@every -1s"] {
        let p = plan(|s| s.schedule = Some(schedule.into()));
        let c = Counter {
            count: 1,
            last_trigger: Some(secs(20)),
            attempts: 0,
        };
        assert_eq!(
            p.paused_ticks(&c, false, secs(55)),
            Plan::PAUSED_COUNT_LIMIT,
            "{schedule}"
        );
        assert!(p.resume(&c, secs(55)).is_some(), "{schedule}");
    }
}

fn resumed(p: &Plan, r: Resume) -> (Option<DateTime<Utc>>, u64, Option<DateTime<Utc>>) {
    (p.next_tick(&r.counter), r.paused, r.last)
}

#[test]
fn a_dense_cron_paused_past_the_count_limit_still_resumes_right() {
    use crate::schedule::CatchUp;
    let mut p = plan(|s| s.schedule = Some("* * * * * *".into()));
    let c = Counter::default();
    let day = secs(2 * 86_400) + TimeDelta::milliseconds(500);
    assert_eq!(p.paused_ticks(&c, false, day), Plan::PAUSED_COUNT_LIMIT);
    let r = p.resume(&c, day).unwrap();
    assert_eq!(
        p.next_tick(&r.counter),
        Some(secs(2 * 86_400 + 1)),
        "all passed"
    );
    p.policy_mut().catch_up = CatchUp::Latest;
    let r = p.resume(&c, day).unwrap();
    assert_eq!(
        p.next_tick(&r.counter),
        Some(secs(2 * 86_400)),
        "the latest runs"
    );
    p.policy_mut().catch_up = CatchUp::Window(TimeDelta::seconds(3));
    let r = p.resume(&c, day).unwrap();
    assert_eq!(p.next_tick(&r.counter), Some(secs(2 * 86_400 - 2)));
}
