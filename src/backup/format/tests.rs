//! The format's round trip, its look, and its errors naming members.

use super::*;
use crate::proto::common;

fn at(seconds: i64, nanos: i32) -> Option<Timestamp> {
    Some(Timestamp { seconds, nanos })
}

/// A record with every field a job line carries set.
fn rich() -> BackupRecord {
    let id = ExecutionId::for_tick("app||default||myapp||rich", chrono::Utc::now());
    BackupRecord {
        name: "rich".into(),
        job: st::StoredJob {
            job: Some(sv1::Job {
                schedule: Some("TZ=Europe/Paris 0 30 9 * * *".into()),
                repeats: Some(12),
                due_time: Some("10s".into()),
                ttl: Some("48h".into()),
                data: Some(Any {
                    type_url: "type.googleapis.com/google.protobuf.Value".into(),
                    value: vec![0, 1, 2, 255, b'\n'],
                }),
                failure_policy: Some(common::JobFailurePolicy {
                    policy: Some(common::job_failure_policy::Policy::Drop(
                        common::JobFailurePolicyDrop {},
                    )),
                }),
            }),
            metadata: None,
            generation: u64::MAX - 5,
            begin: Some(Begin::DueTime(at(1_767_225_610, 123_456_789).unwrap())),
            expiration: at(1_767_398_410, 0),
            labels: [("team".to_owned(), "a".to_owned())].into(),
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
            policy: Some(jv1::JobPolicy {
                catch_up: "window".into(),
                catch_up_window: "5m".into(),
                jitter: "1s".into(),
                dst: Some(jv1::DstPolicy {
                    gap: "skip".into(),
                    repeat: "first".into(),
                }),
                ..Default::default()
            }),
            failure_policy: Some(jv1::FailurePolicy {
                kind: Some(jv1::failure_policy::Kind::Exponential(
                    jv1::ExponentialRetry {
                        initial_interval: "1s".into(),
                        multiplier: 2.5,
                        max_interval: "1m".into(),
                        jitter: 0.25,
                        max_retries: Some(4),
                        max_elapsed: "10m".into(),
                    },
                )),
                on_exhausted: "deadLetter".into(),
                dead_letter_job: "rich-dlq".into(),
            }),
        },
        counter: Some(st::StoredCounter {
            due_ms: None,
            generation: u64::MAX - 5,
            count: 7,
            last_trigger: at(1_767_225_700, 5),
            attempts: 2,
            delivered: 20,
            succeeded: 15,
            failed_attempts: 5,
            dropped: 1,
            staged: 3,
            skipped: [("paused".to_owned(), 4)].into(),
            last_nominal: at(1_767_225_710, 0),
            last_actual: at(1_767_225_710, 999_999_999),
            last_outcome: st::RunOutcome::Failed as i32,
            last_error: "HTTP 500: \"boom\"\n".into(),
            runs: 25,
            paused: Some(st::Paused {
                at: at(1_767_225_720, 0),
                reason: "manual".into(),
                note: "maintenance".into(),
            }),
            on_exhausted: [("dead_letter".to_owned(), 1)].into(),
            held: vec![st::HeldExecution {
                execution_id: id.as_bytes().to_vec(),
                nominal: at(1_767_225_700, 0),
                attempt: 3,
                started: at(1_767_225_701, 0),
                lease_until: at(1_767_226_001, 0),
                lease_nanos: 300_000_000_000,
                kind: String::new(),
            }],
        }),
        finished_at: None,
    }
}

fn round_trip(record: &BackupRecord) -> BackupRecord {
    let mut line = Vec::new();
    write_record(&mut line, record).unwrap();
    assert!(!line.contains(&b'\n'), "one line");
    read_record(&line).unwrap()
}

#[test]
fn every_field_survives_a_round_trip() {
    let record = rich();
    assert_eq!(round_trip(&record), record);
    let mut finished = rich();
    finished.counter = None;
    finished.finished_at = at(1_767_300_000, 0);
    finished.job.begin = Some(Begin::Start(at(1_767_225_600, 0).unwrap()));
    finished.job.policy = None;
    finished.job.failure_policy = None;
    finished.job.labels.clear();
    finished.job.traceparent.clear();
    if let Some(job) = finished.job.job.as_mut() {
        job.data = None;
        job.failure_policy = Some(common::JobFailurePolicy {
            policy: Some(common::job_failure_policy::Policy::Constant(
                common::JobFailurePolicyConstant {
                    interval: Some(prost_types::Duration {
                        seconds: 1,
                        nanos: 500_000_000,
                    }),
                    max_retries: None,
                },
            )),
        });
    }
    assert_eq!(round_trip(&finished), finished);
}

#[test]
fn the_line_reads_like_the_docs_say() {
    let mut line = Vec::new();
    write_record(&mut line, &rich()).unwrap();
    let v: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(v["name"], "rich");
    assert_eq!(v["generation"], "fffffffffffffffa");
    assert_eq!(v["dueAt"], "2026-01-01T00:00:10.123456789Z");
    assert_eq!(v["job"]["failurePolicy"], serde_json::json!({"drop": {}}));
    assert_eq!(v["failurePolicy"]["onExhausted"], "deadLetter");
    assert_eq!(v["progress"]["ticks"], 7);
    assert_eq!(v["progress"]["lastOutcome"], "failed");
    assert_eq!(v["progress"]["held"][0]["lease"], "300s");
    assert_eq!(v["job"]["data"]["value"], "AAEC/wo=");
}

#[test]
fn bad_members_are_named() {
    let mut line = Vec::new();
    write_record(&mut line, &rich()).unwrap();
    let text = String::from_utf8(line).unwrap();
    let cases = [
        (text.replace("\"generation\"", "\"gen\""), "gen"),
        (
            text.replace("\"dueAt\":\"2026", "\"dueAt\":\"yesterday 2026"),
            "dueAt",
        ),
        (text.replace("\"failed\"", "\"exploded\""), "lastOutcome"),
        (
            text.replace("\"dueAt\"", "\"start\":\"2026-01-01T00:00:00Z\",\"dueAt\""),
            "exactly one",
        ),
        (text.replace("\"catchUp\"", "\"catchup\""), "catchup"),
    ];
    for (bad, named) in cases {
        let (name, error) = read_record(bad.as_bytes()).unwrap_err();
        assert!(error.contains(named), "{named}: {error}");
        assert_eq!(name.as_deref(), Some("rich"));
    }
}
