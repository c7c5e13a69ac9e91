//! The job value in etcd: what jobsd writes reads as go-etcd-cron's `stored.Job` (checked with
//! this file's own mirror of go-etcd-cron's messages, not with [`EtcdJob`]), and jobsd reads
//! back its own values, an older jobsd's and a Dapr Scheduler's.

use std::collections::HashMap;

use prost::Message;
use prost::encoding::decode_varint;
use prost_types::{Any, Duration, Timestamp};

use super::*;
use crate::proto::common::{
    JobFailurePolicy, JobFailurePolicyConstant, job_failure_policy::Policy,
};
use crate::proto::jobsd::v1 as jv1;

/// go-etcd-cron v0.12.6 `stored.Job` (proto/stored/job.proto).
#[derive(Clone, PartialEq, Message)]
struct GoStoredJob {
    #[prost(uint64, tag = "1")]
    partition_id: u64,
    #[prost(message, optional, tag = "2")]
    start: Option<Timestamp>,
    #[prost(message, optional, tag = "3")]
    due_time: Option<Timestamp>,
    #[prost(message, optional, tag = "4")]
    expiration: Option<Timestamp>,
    #[prost(message, optional, tag = "5")]
    job: Option<GoApiJob>,
}

/// go-etcd-cron v0.12.6 `api.Job` (proto/api/job.proto).
#[derive(Clone, PartialEq, Message)]
struct GoApiJob {
    #[prost(string, optional, tag = "1")]
    schedule: Option<String>,
    #[prost(string, optional, tag = "2")]
    due_time: Option<String>,
    #[prost(string, optional, tag = "3")]
    ttl: Option<String>,
    #[prost(uint32, optional, tag = "4")]
    repeats: Option<u32>,
    #[prost(message, optional, tag = "5")]
    metadata: Option<Any>,
    #[prost(message, optional, tag = "6")]
    payload: Option<Any>,
    #[prost(message, optional, tag = "7")]
    failure_policy: Option<GoFailurePolicy>,
}

/// go-etcd-cron v0.12.6 `api.FailurePolicy` (proto/api/failurepolicy.proto): `oneof policy
/// {FailurePolicyDrop drop = 1; FailurePolicyConstant constant = 2}`.
#[derive(Clone, PartialEq, Message)]
struct GoFailurePolicy {
    #[prost(message, optional, tag = "1")]
    drop: Option<()>,
    #[prost(message, optional, tag = "2")]
    constant: Option<GoFailurePolicyConstant>,
}

#[derive(Clone, PartialEq, Message)]
struct GoFailurePolicyConstant {
    #[prost(message, optional, tag = "1")]
    interval: Option<Duration>,
    #[prost(uint32, optional, tag = "2")]
    max_retries: Option<u32>,
}

/// The etcd value of `job`, as the store writes it.
fn encode(job: &StoredJob) -> Vec<u8> {
    to_etcd(&job.encode_to_vec())
}

fn ts(seconds: i64) -> Timestamp {
    Timestamp { seconds, nanos: 7 }
}

fn app_metadata(app: &str) -> sv1::JobMetadata {
    sv1::JobMetadata {
        app_id: app.into(),
        namespace: "default".into(),
        target: Some(sv1::JobTargetMetadata {
            r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
        }),
        concurrency_key: None,
    }
}

/// A job with every field set, jobsd's own settings too.
fn full_job() -> StoredJob {
    StoredJob {
        job: Some(sv1::Job {
            schedule: Some("@every 2s".into()),
            repeats: Some(5),
            due_time: Some("10s".into()),
            ttl: Some("1h".into()),
            data: Some(Any {
                type_url: "type.googleapis.com/google.protobuf.Value".into(),
                value: vec![0x1a, 0x02, b'h', b'i'],
            }),
            failure_policy: Some(JobFailurePolicy {
                policy: Some(Policy::Constant(JobFailurePolicyConstant {
                    interval: Some(Duration {
                        seconds: 1,
                        nanos: 0,
                    }),
                    max_retries: Some(3),
                })),
            }),
        }),
        metadata: Some(app_metadata("cliapp")),
        generation: 0xfeed_beef_1234_5678,
        begin: Some(stored_job::Begin::DueTime(ts(1_800_000_010))),
        expiration: Some(ts(1_800_003_610)),
        labels: HashMap::from([("team".into(), "a".into()), ("tier".into(), "1".into())]),
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        policy: Some(jv1::JobPolicy {
            catch_up: "latest".into(),
            overlap: "skip".into(),
            ..jv1::JobPolicy::default()
        }),
        failure_policy: Some(jv1::FailurePolicy {
            kind: Some(jv1::failure_policy::Kind::Delays(jv1::DelaysRetry {
                delays: vec!["1s".into(), "5s".into()],
                repeat_last: true,
                max_retries: Some(4),
            })),
            on_exhausted: "pause".into(),
            dead_letter_job: String::new(),
        }),
    }
}

/// The top-level field numbers of a protobuf message, in order.
fn field_numbers(mut buf: &[u8]) -> Vec<u64> {
    let mut fields = Vec::new();
    while !buf.is_empty() {
        let key = decode_varint(&mut buf).unwrap();
        fields.push(key >> 3);
        skip(key & 7, &mut buf).unwrap();
    }
    fields
}

#[test]
fn a_job_round_trips_through_its_etcd_value() {
    let job = full_job();
    let value = encode(&job);
    assert_eq!(layout(&value), Layout::Cron);
    assert_eq!(decode("k", &value).unwrap(), job);
    // The ops' bytes and back: what the overlay reads is what it wrote.
    // (Compared decoded: two maps of the same labels may encode in different orders.)
    let stored = to_stored("k", &value).unwrap();
    assert_eq!(StoredJob::decode(stored.as_ref()).unwrap(), job);
    let stored = into_stored("k", value).unwrap();
    assert_eq!(StoredJob::decode(stored.as_slice()).unwrap(), job);
}

#[test]
fn a_job_starting_at_creation_round_trips_too() {
    let job = StoredJob {
        begin: Some(stored_job::Begin::Start(ts(1_700_000_000))),
        expiration: None,
        labels: HashMap::new(),
        policy: None,
        failure_policy: None,
        traceparent: String::new(),
        ..full_job()
    };
    assert_eq!(decode("k", &encode(&job)).unwrap(), job);
}

#[test]
fn the_etcd_value_is_go_etcd_crons_stored_job() {
    let job = full_job();
    let value = encode(&job);
    let go = GoStoredJob::decode(value.as_slice()).unwrap();
    assert_eq!(go.partition_id, job.generation);
    assert_eq!(go.start, None);
    assert_eq!(go.due_time, Some(ts(1_800_000_010)));
    assert_eq!(go.expiration, Some(ts(1_800_003_610)));
    let api = go.job.expect("api.Job");
    assert_eq!(api.schedule.as_deref(), Some("@every 2s"));
    assert_eq!(api.due_time.as_deref(), Some("10s"));
    assert_eq!(api.ttl.as_deref(), Some("1h"));
    assert_eq!(api.repeats, Some(5));
    assert_eq!(api.payload, job.job.as_ref().unwrap().data);
    // What the Dapr CLI unpacks (`anypb.UnmarshalTo` a JobMetadata): the type URL must name it.
    let meta = api.metadata.expect("metadata");
    assert_eq!(
        meta.type_url,
        "type.googleapis.com/dapr.proto.scheduler.v1.JobMetadata"
    );
    assert_eq!(
        sv1::JobMetadata::decode(meta.value.as_slice()).unwrap(),
        app_metadata("cliapp")
    );
    assert_eq!(
        api.failure_policy,
        Some(GoFailurePolicy {
            drop: None,
            constant: Some(GoFailurePolicyConstant {
                interval: Some(Duration {
                    seconds: 1,
                    nanos: 0
                }),
                max_retries: Some(3),
            }),
        })
    );
    // jobsd's own settings are on numbers go-etcd-cron does not use (Go keeps them as unknown
    // fields through the CLI's export and import).
    let fields = field_numbers(&value);
    assert!(
        fields.iter().all(|f| (1..=5).contains(f) || *f >= 1000),
        "{fields:?}"
    );
    assert!(
        fields.contains(&1007) && fields.contains(&1010),
        "{fields:?}"
    );
}

#[test]
fn a_value_an_older_jobsd_wrote_is_read() {
    let job = full_job();
    let old = job.encode_to_vec();
    assert_eq!(layout(&old), Layout::Stored);
    assert_eq!(decode("k", &old).unwrap(), job);
    assert!(matches!(to_stored("k", &old).unwrap(), Cow::Borrowed(_)));
    // The smallest job an older jobsd's tests wrote: only a generation.
    let bare = StoredJob {
        generation: 9,
        ..StoredJob::default()
    };
    assert_eq!(decode("k", &bare.encode_to_vec()).unwrap(), bare);
}

/// `dapr/jobs/app||default||cliapp||nightly` as a real Dapr Scheduler v1.18.2
/// (go-etcd-cron v0.12.6) wrote it, taken from the fixture made by the real Dapr CLI
/// (tests/data/dapr_export/dapr-cli-v1.16.5-scheduler-v1.18.2.bin).
const DAPR_NIGHTLY: &str = "08b8a2b1dfcdf5d99be101220c089283dfe70610c68f9ac5012aab010a0b3020302032202a202a202a1a\
0538373630682a500a37747970652e676f6f676c65617069732e636f6d2f646170722e70726f746f2e73\
63686564756c65722e76312e4a6f624d6574616461746112150a06636c69617070120764656661756c74\
1a020a0032390a29747970652e676f6f676c65617069732e636f6d2f676f6f676c652e70726f746f6275\
662e56616c7565120c2a0a0a080a016b12031a01763a0812060a0208011003120c08929cdad80610c68f\
9ac501";

/// `dapr/jobs/app||default||daprdapp||report`, made by a real daprd without data (its payload is
/// an `Any` of an empty `google.protobuf.Value`), same fixture.
const DAPR_REPORT: &str = "08ff85d09c95ca99ebde012a95010a06406461696c79200a2a520a37747970652e676f6f676c65617069\
732e636f6d2f646170722e70726f746f2e7363686564756c65722e76312e4a6f624d6574616461746112\
170a086461707264617070120764656661756c741a020a00322b0a29747970652e676f6f676c65617069\
732e636f6d2f676f6f676c652e70726f746f6275662e56616c75653a0812060a0208011003120c08929c\
dad80610f6c9a7cb01";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn a_value_a_dapr_scheduler_wrote_is_read() {
    let value = unhex(DAPR_NIGHTLY);
    assert_eq!(layout(&value), Layout::Cron);
    let job = decode("app||default||cliapp||nightly", &value).unwrap();
    let go = GoStoredJob::decode(value.as_slice()).unwrap();
    assert_eq!(job.generation, go.partition_id);
    assert_ne!(job.generation, 0);
    assert_eq!(job.metadata, Some(app_metadata("cliapp")));
    let dapr_job = job.job.clone().unwrap();
    assert_eq!(dapr_job.schedule.as_deref(), Some("0 0 2 * * *"));
    assert_eq!(dapr_job.ttl.as_deref(), Some("8760h"));
    assert_eq!((dapr_job.due_time, dapr_job.repeats), (None, None));
    let data = dapr_job.data.unwrap();
    assert_eq!(data.type_url, "type.googleapis.com/google.protobuf.Value");
    assert_eq!(
        dapr_job.failure_policy,
        Some(JobFailurePolicy {
            policy: Some(Policy::Constant(JobFailurePolicyConstant {
                interval: Some(Duration {
                    seconds: 1,
                    nanos: 0
                }),
                max_retries: Some(3),
            })),
        })
    );
    assert_eq!(job.begin, go.start.map(stored_job::Begin::Start));
    assert!(job.begin.is_some());
    assert_eq!(job.expiration, go.expiration);
    assert!(job.labels.is_empty() && job.policy.is_none() && job.failure_policy.is_none());
    // Written back by jobsd, it is the same stored.Job (field order aside).
    let again = GoStoredJob::decode(encode(&job).as_slice()).unwrap();
    assert_eq!(again, go);

    let report = decode("app||default||daprdapp||report", &unhex(DAPR_REPORT)).unwrap();
    let report_job = report.job.unwrap();
    assert_eq!(report_job.schedule.as_deref(), Some("@daily"));
    assert_eq!(report_job.repeats, Some(10));
    assert_eq!(
        report_job.data,
        Some(Any {
            type_url: "type.googleapis.com/google.protobuf.Value".into(),
            value: Vec::new(),
        })
    );
    assert_eq!(report.metadata, Some(app_metadata("daprdapp")));
}

#[test]
fn a_value_neither_layout_decodes_is_corrupt() {
    // Field 1 as a length-delimited field cut short.
    let err = decode("k", &[0x0a, 0x05, 0x01]).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt { table: "jobs", .. }),
        "{err:?}"
    );
    // go-etcd-cron's layout with a metadata that is no JobMetadata.
    let bad = EtcdJob {
        partition_id: 1,
        job: Some(CronJob {
            metadata: Some(Any {
                type_url: METADATA_TYPE_URL.into(),
                value: vec![0x0a, 0x09],
            }),
            ..CronJob::default()
        }),
        ..EtcdJob::default()
    }
    .encode_to_vec();
    assert!(decode("k", &bad).is_err());
}
