//! Wire-compatibility tests for the generated Dapr protos.
//!
//! Every byte vector here is written by hand from Dapr's field numbers (key byte =
//! `(field << 3) | wire_type`; wire types: 0 varint, 1 fixed64, 2 length-delimited), not
//! produced by our own encoder, so these tests prove that our `.proto` numbering and types
//! match Dapr's independently of the `.proto` text. Each message is checked both ways: the
//! hand-built bytes decode into the expected value, and encoding that value gives back exactly
//! the same bytes (prost writes fields in field-number order, as do Go and the other SDKs).

use jobsd::proto::{FILE_DESCRIPTOR_SET, common, dapr_scheduler as scheduler, internals, runtime};
use prost::Message;
use prost_types::{
    Any, Duration, FileDescriptorSet, MethodDescriptorProto, ServiceDescriptorProto, Value,
    value::Kind,
};

/// One length-delimited field: `key`, a one-byte length, then `payload`.
///
/// `key` is written out by hand at every call site; this only appends the length so that the
/// nested vectors stay readable.
fn ld(key: u8, payload: &[u8]) -> Vec<u8> {
    let len = u8::try_from(payload.len()).expect("test payloads are short");
    assert!(len < 0x80, "a one-byte varint length needs len < 128");
    let mut out = vec![key, len];
    out.extend_from_slice(payload);
    out
}

/// Concatenates encoded fields.
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Decodes `bytes` as `M`, asserts it equals `expected`, and asserts that encoding `expected`
/// gives `bytes` back.
#[track_caller]
fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8], expected: &M) {
    let decoded = M::decode(bytes).expect("hand-built bytes decode");
    assert_eq!(&decoded, expected, "decode");
    assert_eq!(expected.encode_to_vec(), bytes, "encode");
}

const STRING_VALUE_URL: &str = "type.googleapis.com/google.protobuf.StringValue";

/// `google.protobuf.Any` {1: type_url, 2: value} holding a StringValue {1: "hi"}.
fn any_bytes() -> Vec<u8> {
    cat(&[
        &ld(0x0a, STRING_VALUE_URL.as_bytes()), // 1:LEN type_url
        &ld(0x12, &[0x0a, 0x02, b'h', b'i']),   // 2:LEN value = StringValue{1:LEN "hi"}
    ])
}

fn any_value() -> Any {
    Any {
        type_url: STRING_VALUE_URL.to_owned(),
        value: vec![0x0a, 0x02, b'h', b'i'],
    }
}

/// `common.v1.JobFailurePolicy` {2: constant {1: interval Duration{1: seconds 3}, 2: max_retries 7}}.
fn constant_policy_bytes() -> Vec<u8> {
    let constant = cat(&[
        &ld(0x0a, &[0x08, 0x03]), // 1:LEN interval = Duration{1:VARINT seconds = 3}
        &[0x10, 0x07],            // 2:VARINT max_retries = 7
    ]);
    ld(0x12, &constant) // 2:LEN constant
}

fn constant_policy() -> common::JobFailurePolicy {
    common::JobFailurePolicy {
        policy: Some(common::job_failure_policy::Policy::Constant(
            common::JobFailurePolicyConstant {
                interval: Some(Duration {
                    seconds: 3,
                    nanos: 0,
                }),
                max_retries: Some(7),
            },
        )),
    }
}

fn drop_policy() -> common::JobFailurePolicy {
    common::JobFailurePolicy {
        policy: Some(common::job_failure_policy::Policy::Drop(
            common::JobFailurePolicyDrop {},
        )),
    }
}

/// `scheduler.v1.JobMetadata` {1: app_id, 2: namespace, 3: target {1: job {}}}.
fn app_metadata_bytes() -> Vec<u8> {
    cat(&[
        &ld(0x0a, b"app1"),        // 1:LEN app_id
        &ld(0x12, b"default"),     // 2:LEN namespace
        &ld(0x1a, &ld(0x0a, &[])), // 3:LEN target = JobTargetMetadata{1:LEN job = TargetJob{}}
    ])
}

fn app_metadata() -> scheduler::JobMetadata {
    scheduler::JobMetadata {
        app_id: "app1".to_owned(),
        namespace: "default".to_owned(),
        target: Some(scheduler::JobTargetMetadata {
            r#type: Some(scheduler::job_target_metadata::Type::Job(
                scheduler::TargetJob {},
            )),
        }),
        concurrency_key: None,
    }
}

// ---------------------------------------------------------------------------------------------
// common.v1
// ---------------------------------------------------------------------------------------------

#[test]
fn common_failure_policies() {
    round_trip(&constant_policy_bytes(), &constant_policy());
    // 1:LEN drop = JobFailurePolicyDrop{} (an empty message is still written: the oneof is set).
    round_trip(&[0x0a, 0x00], &drop_policy());
    // No policy at all.
    round_trip(&[], &common::JobFailurePolicy { policy: None });
}

#[test]
fn common_http_extension_and_verbs() {
    // 1:VARINT verb = 3 (POST), 2:LEN querystring "a=b"
    let bytes = cat(&[&[0x08, 0x03], &ld(0x12, b"a=b")]);
    let ext = common::HttpExtension {
        verb: common::http_extension::Verb::Post as i32,
        querystring: "a=b".to_owned(),
    };
    round_trip(&bytes, &ext);

    use common::http_extension::Verb;
    let expected = [
        (Verb::None, 0, "NONE"),
        (Verb::Get, 1, "GET"),
        (Verb::Head, 2, "HEAD"),
        (Verb::Post, 3, "POST"),
        (Verb::Put, 4, "PUT"),
        (Verb::Delete, 5, "DELETE"),
        (Verb::Connect, 6, "CONNECT"),
        (Verb::Options, 7, "OPTIONS"),
        (Verb::Trace, 8, "TRACE"),
        (Verb::Patch, 9, "PATCH"),
    ];
    for (verb, number, name) in expected {
        assert_eq!(verb as i32, number, "{name}");
        assert_eq!(verb.as_str_name(), name);
        assert_eq!(Verb::try_from(number), Ok(verb));
    }
}

// ---------------------------------------------------------------------------------------------
// runtime.v1 jobs
// ---------------------------------------------------------------------------------------------

/// `runtime.v1.Job` with every field set.
fn runtime_job_bytes() -> Vec<u8> {
    cat(&[
        &ld(0x0a, b"my-job"),                // 1:LEN name
        &ld(0x12, b"@every 1s"),             // 2:LEN schedule
        &[0x18, 0x05],                       // 3:VARINT repeats = 5
        &ld(0x22, b"10s"),                   // 4:LEN due_time
        &ld(0x2a, b"1h"),                    // 5:LEN ttl
        &ld(0x32, &any_bytes()),             // 6:LEN data (Any)
        &ld(0x3a, &constant_policy_bytes()), // 7:LEN failure_policy
    ])
}

fn runtime_job() -> runtime::Job {
    runtime::Job {
        name: "my-job".to_owned(),
        schedule: Some("@every 1s".to_owned()),
        repeats: Some(5),
        due_time: Some("10s".to_owned()),
        ttl: Some("1h".to_owned()),
        data: Some(any_value()),
        failure_policy: Some(constant_policy()),
    }
}

#[test]
fn runtime_job_every_field() {
    round_trip(&runtime_job_bytes(), &runtime_job());
}

#[test]
fn runtime_schedule_job_request() {
    let bytes = cat(&[
        &ld(0x0a, &runtime_job_bytes()), // 1:LEN job
        &[0x10, 0x01],                   // 2:VARINT overwrite = true
    ]);
    let req = runtime::ScheduleJobRequest {
        job: Some(runtime_job()),
        overwrite: true,
    };
    round_trip(&bytes, &req);

    // overwrite is plain proto3 `bool`: false is not written at all.
    let req = runtime::ScheduleJobRequest {
        job: None,
        overwrite: false,
    };
    round_trip(&[], &req);
}

#[test]
fn runtime_get_delete_list_messages() {
    // GetJobRequest / DeleteJobRequest {1:LEN name}
    round_trip(
        &ld(0x0a, b"j1"),
        &runtime::GetJobRequest {
            name: "j1".to_owned(),
        },
    );
    round_trip(
        &ld(0x0a, b"j1"),
        &runtime::DeleteJobRequest {
            name: "j1".to_owned(),
        },
    );
    // GetJobResponse {1:LEN job}
    round_trip(
        &ld(0x0a, &runtime_job_bytes()),
        &runtime::GetJobResponse {
            job: Some(runtime_job()),
        },
    );
    // ListJobsResponse{,Alpha1} {1:LEN jobs (repeated)}
    let one = ld(0x0a, b"a"); // Job{1:LEN name "a"}
    let two = ld(0x0a, b"b");
    let bytes = cat(&[&ld(0x0a, &one), &ld(0x0a, &two)]);
    let jobs = vec![
        runtime::Job {
            name: "a".to_owned(),
            ..Default::default()
        },
        runtime::Job {
            name: "b".to_owned(),
            ..Default::default()
        },
    ];
    round_trip(&bytes, &runtime::ListJobsResponse { jobs: jobs.clone() });
    round_trip(&bytes, &runtime::ListJobsResponseAlpha1 { jobs });
    // The empty messages stay empty.
    round_trip(&[], &runtime::ScheduleJobResponse {});
    round_trip(&[], &runtime::DeleteJobResponse {});
    round_trip(&[], &runtime::ListJobsRequest {});
    round_trip(&[], &runtime::ListJobsRequestAlpha1 {});
    round_trip(&[], &runtime::DeleteJobsByPrefixResponse {});
    round_trip(&[], &runtime::DeleteJobsByPrefixResponseAlpha1 {});
}

#[test]
fn runtime_delete_jobs_by_prefix_presence() {
    // 1:LEN name_prefix "ab"
    round_trip(
        &ld(0x0a, b"ab"),
        &runtime::DeleteJobsByPrefixRequest {
            name_prefix: Some("ab".to_owned()),
        },
    );
    // `optional string`: set-but-empty is written (1:LEN, length 0) and differs from unset.
    round_trip(
        &[0x0a, 0x00],
        &runtime::DeleteJobsByPrefixRequestAlpha1 {
            name_prefix: Some(String::new()),
        },
    );
    round_trip(
        &[],
        &runtime::DeleteJobsByPrefixRequestAlpha1 { name_prefix: None },
    );
    round_trip(
        &[],
        &runtime::DeleteJobsByPrefixRequest { name_prefix: None },
    );
}

#[test]
fn optional_fields_distinguish_unset_from_zero() {
    // runtime.v1.Job.repeats: `optional uint32` = 3.
    let unset = runtime::Job::default();
    let zero = runtime::Job {
        repeats: Some(0),
        ..Default::default()
    };
    round_trip(&[], &unset);
    round_trip(&[0x18, 0x00], &zero); // 3:VARINT repeats = 0, still written
    assert_ne!(
        runtime::Job::decode(&[][..]).unwrap().repeats,
        runtime::Job::decode(&[0x18, 0x00][..]).unwrap().repeats
    );

    // scheduler.v1.Job.repeats: `optional uint32` = 2.
    round_trip(
        &[0x10, 0x00],
        &scheduler::Job {
            repeats: Some(0),
            ..Default::default()
        },
    );
    round_trip(&[], &scheduler::Job::default());

    // common.v1.JobFailurePolicyConstant.max_retries: `optional uint32` = 2.
    // Unset means "retry forever"; 0 means "never retry".
    let forever = common::JobFailurePolicyConstant {
        interval: None,
        max_retries: None,
    };
    let never = common::JobFailurePolicyConstant {
        interval: None,
        max_retries: Some(0),
    };
    round_trip(&[], &forever);
    round_trip(&[0x10, 0x00], &never); // 2:VARINT max_retries = 0
    assert_ne!(
        common::JobFailurePolicyConstant::decode(&[][..])
            .unwrap()
            .max_retries,
        common::JobFailurePolicyConstant::decode(&[0x10, 0x00][..])
            .unwrap()
            .max_retries
    );

    // internals.v1.JobHTTPRequest.overwrite: `optional bool` = 7; false is written.
    round_trip(
        &[0x38, 0x00],
        &internals::JobHttpRequest {
            overwrite: Some(false),
            ..Default::default()
        },
    );

    // scheduler.v1.DeleteByMetadataRequest.id_prefix_match: `optional bool` = 2.
    round_trip(
        &[0x10, 0x00],
        &scheduler::DeleteByMetadataRequest {
            metadata: None,
            id_prefix_match: Some(false),
        },
    );

    // scheduler.v1.JobMetadata.concurrency_key: `optional string` = 4.
    round_trip(
        &[0x22, 0x00],
        &scheduler::JobMetadata {
            concurrency_key: Some(String::new()),
            ..Default::default()
        },
    );

    // runtime.v1.Job.data (`optional Any` = 6): present-but-empty Any is written as 6:LEN, length 0.
    round_trip(
        &[0x32, 0x00],
        &runtime::Job {
            data: Some(Any::default()),
            ..Default::default()
        },
    );
}

// ---------------------------------------------------------------------------------------------
// runtime.v1 app callback
// ---------------------------------------------------------------------------------------------

#[test]
fn job_event_request() {
    let bytes = cat(&[
        &ld(0x0a, b"my-job"),                   // 1:LEN name
        &ld(0x12, &any_bytes()),                // 2:LEN data (Any)
        &ld(0x1a, b"job/my-job"),               // 3:LEN method
        &ld(0x22, STRING_VALUE_URL.as_bytes()), // 4:LEN content_type
        &ld(0x2a, &[0x08, 0x03]),               // 5:LEN http_extension = {1:VARINT verb = 3 (POST)}
    ]);
    let req = runtime::JobEventRequest {
        name: "my-job".to_owned(),
        data: Some(any_value()),
        method: "job/my-job".to_owned(),
        content_type: STRING_VALUE_URL.to_owned(),
        http_extension: Some(common::HttpExtension {
            verb: common::http_extension::Verb::Post as i32,
            querystring: String::new(),
        }),
    };
    round_trip(&bytes, &req);
    assert_eq!(
        req.http_extension.unwrap().verb(),
        common::http_extension::Verb::Post
    );
    round_trip(&[], &runtime::JobEventResponse {});
    round_trip(&[], &runtime::HealthCheckResponse {});
}

// ---------------------------------------------------------------------------------------------
// internals.v1
// ---------------------------------------------------------------------------------------------

#[test]
fn internals_job_http_request() {
    // data = google.protobuf.Value{3:LEN string_value "hello"}
    let value = ld(0x1a, b"hello");
    let bytes = cat(&[
        &ld(0x0a, b"my-job"),               // 1:LEN name
        &ld(0x12, b"0 0 * * * *"),          // 2:LEN schedule
        &[0x18, 0x02],                      // 3:VARINT repeats = 2
        &ld(0x22, b"2030-01-01T00:00:00Z"), // 4:LEN due_time
        &ld(0x2a, b"P1D"),                  // 5:LEN ttl
        &ld(0x32, &value),                  // 6:LEN data (Value)
        &[0x38, 0x01],                      // 7:VARINT overwrite = true
        &ld(0x42, &[0x0a, 0x00]),           // 8:LEN failure_policy = {1:LEN drop {}}
    ]);
    let req = internals::JobHttpRequest {
        name: "my-job".to_owned(),
        schedule: Some("0 0 * * * *".to_owned()),
        repeats: Some(2),
        due_time: Some("2030-01-01T00:00:00Z".to_owned()),
        ttl: Some("P1D".to_owned()),
        data: Some(Value {
            kind: Some(Kind::StringValue("hello".to_owned())),
        }),
        overwrite: Some(true),
        failure_policy: Some(drop_policy()),
    };
    round_trip(&bytes, &req);

    // data as a JSON object: Value{5:LEN struct_value = Struct{1:LEN fields map entry
    // {1:LEN key "n", 2:LEN value = Value{2:I64 number_value = 1.5}}}}
    let number = cat(&[&[0x11], &1.5f64.to_le_bytes()]); // 2:I64 number_value
    let entry = cat(&[&ld(0x0a, b"n"), &ld(0x12, &number)]);
    let value = ld(0x2a, &ld(0x0a, &entry));
    let decoded = internals::JobHttpRequest::decode(ld(0x32, &value).as_slice()).unwrap();
    let Some(Kind::StructValue(s)) = decoded.data.and_then(|v| v.kind) else {
        panic!("data should be a struct");
    };
    assert_eq!(s.fields["n"].kind, Some(Kind::NumberValue(1.5)));
}

#[test]
fn internals_job_event() {
    let bytes = cat(&[
        &ld(0x0a, b"app||default||app1||j"), // 1:LEN key
        &ld(0x12, b"j"),                     // 2:LEN name
        &ld(0x1a, &app_metadata_bytes()),    // 3:LEN metadata (scheduler.v1.JobMetadata)
        &ld(0x22, &any_bytes()),             // 4:LEN data (Any)
    ]);
    let event = internals::JobEvent {
        key: "app||default||app1||j".to_owned(),
        name: "j".to_owned(),
        metadata: Some(app_metadata()),
        data: Some(any_value()),
    };
    round_trip(&bytes, &event);
}

// ---------------------------------------------------------------------------------------------
// scheduler.v1
// ---------------------------------------------------------------------------------------------

#[test]
fn scheduler_schedule_job_request_app_target() {
    let job = cat(&[
        &ld(0x0a, b"@daily"),                // 1:LEN schedule
        &[0x10, 0x04],                       // 2:VARINT repeats = 4
        &ld(0x1a, b"1m"),                    // 3:LEN due_time
        &ld(0x22, b"2h"),                    // 4:LEN ttl
        &ld(0x2a, &any_bytes()),             // 5:LEN data (Any)
        &ld(0x32, &constant_policy_bytes()), // 6:LEN failure_policy
    ]);
    let metadata = cat(&[
        &app_metadata_bytes(),
        &ld(0x22, b"wf"), // 4:LEN concurrency_key
    ]);
    let bytes = cat(&[
        &ld(0x0a, b"my-job"), // 1:LEN name
        &ld(0x12, &job),      // 2:LEN job
        &ld(0x1a, &metadata), // 3:LEN metadata
        &[0x20, 0x01],        // 4:VARINT overwrite = true
    ]);
    let req = scheduler::ScheduleJobRequest {
        name: "my-job".to_owned(),
        job: Some(scheduler::Job {
            schedule: Some("@daily".to_owned()),
            repeats: Some(4),
            due_time: Some("1m".to_owned()),
            ttl: Some("2h".to_owned()),
            data: Some(any_value()),
            failure_policy: Some(constant_policy()),
        }),
        metadata: Some(scheduler::JobMetadata {
            concurrency_key: Some("wf".to_owned()),
            ..app_metadata()
        }),
        overwrite: true,
    };
    round_trip(&bytes, &req);
}

#[test]
fn scheduler_schedule_job_request_actor_target() {
    // target = JobTargetMetadata{2:LEN actor = TargetActorReminder{1:LEN id, 2:LEN type}}
    let actor = cat(&[&ld(0x0a, b"actor-1"), &ld(0x12, b"Counter")]);
    let metadata = cat(&[
        &ld(0x0a, b"app1"),
        &ld(0x12, b"default"),
        &ld(0x1a, &ld(0x12, &actor)),
    ]);
    let bytes = cat(&[
        &ld(0x0a, b"reminder"),      // 1:LEN name
        &ld(0x12, &ld(0x1a, b"5s")), // 2:LEN job = {3:LEN due_time "5s"}
        &ld(0x1a, &metadata),        // 3:LEN metadata
    ]);
    let req = scheduler::ScheduleJobRequest {
        name: "reminder".to_owned(),
        job: Some(scheduler::Job {
            due_time: Some("5s".to_owned()),
            ..Default::default()
        }),
        metadata: Some(scheduler::JobMetadata {
            app_id: "app1".to_owned(),
            namespace: "default".to_owned(),
            target: Some(scheduler::JobTargetMetadata {
                r#type: Some(scheduler::job_target_metadata::Type::Actor(
                    scheduler::TargetActorReminder {
                        id: "actor-1".to_owned(),
                        r#type: "Counter".to_owned(),
                    },
                )),
            }),
            concurrency_key: None,
        }),
        overwrite: false,
    };
    round_trip(&bytes, &req);
}

#[test]
fn scheduler_watch_jobs_request_initial() {
    let limit = cat(&[
        &[0x08, 0x02],                  // 1:VARINT max_concurrent = 2
        &ld(0x12, b"k"),                // 2:LEN name
        &ld(0x1a, &ld(0x0a, b"Actor")), // 3:LEN actor = ConcurrencyLimitActor{1:LEN type}
    ]);
    let initial = cat(&[
        &ld(0x0a, b"app1"),       // 1:LEN app_id
        &ld(0x12, b"default"),    // 2:LEN namespace
        &ld(0x1a, b"TypeA"),      // 3:LEN actor_types[0]
        &ld(0x1a, b"TypeB"),      // 3:LEN actor_types[1]
        &ld(0x22, &[0x00, 0x01]), // 4:LEN accept_job_types, packed [JOB, ACTOR_REMINDER]
        &ld(0x2a, &limit),        // 5:LEN concurrency_limits[0]
    ]);
    let bytes = ld(0x0a, &initial); // 1:LEN initial
    let req = scheduler::WatchJobsRequest {
        watch_job_request_type: Some(scheduler::watch_jobs_request::WatchJobRequestType::Initial(
            scheduler::WatchJobsRequestInitial {
                app_id: "app1".to_owned(),
                namespace: "default".to_owned(),
                actor_types: vec!["TypeA".to_owned(), "TypeB".to_owned()],
                accept_job_types: vec![
                    scheduler::JobTargetType::Job as i32,
                    scheduler::JobTargetType::ActorReminder as i32,
                ],
                concurrency_limits: vec![scheduler::ConcurrencyLimit {
                    max_concurrent: 2,
                    name: Some("k".to_owned()),
                    target: Some(scheduler::concurrency_limit::Target::Actor(
                        scheduler::ConcurrencyLimitActor {
                            r#type: "Actor".to_owned(),
                        },
                    )),
                }],
            },
        )),
    };
    round_trip(&bytes, &req);

    // A peer that writes the repeated enum unpacked (4:VARINT per element) must be accepted too.
    let unpacked = ld(0x0a, &[0x20, 0x01, 0x20, 0x00]);
    let decoded = scheduler::WatchJobsRequest::decode(unpacked.as_slice()).unwrap();
    let Some(scheduler::watch_jobs_request::WatchJobRequestType::Initial(initial)) =
        decoded.watch_job_request_type
    else {
        panic!("expected initial");
    };
    assert_eq!(initial.accept_job_types, vec![1, 0]);
}

#[test]
fn scheduler_watch_jobs_request_result() {
    // 2:LEN result = {1:VARINT id = 300 (0xac 0x02), 2:VARINT status = 1 (FAILED)}
    let bytes = ld(0x12, &[0x08, 0xac, 0x02, 0x10, 0x01]);
    let req = scheduler::WatchJobsRequest {
        watch_job_request_type: Some(scheduler::watch_jobs_request::WatchJobRequestType::Result(
            scheduler::WatchJobsRequestResult {
                id: 300,
                status: scheduler::WatchJobsRequestResultStatus::Failed as i32,
            },
        )),
    };
    round_trip(&bytes, &req);

    // SUCCESS is 0, so a successful result only carries the id.
    let bytes = ld(0x12, &[0x08, 0x01]);
    let req = scheduler::WatchJobsRequest {
        watch_job_request_type: Some(scheduler::watch_jobs_request::WatchJobRequestType::Result(
            scheduler::WatchJobsRequestResult {
                id: 1,
                status: scheduler::WatchJobsRequestResultStatus::Success as i32,
            },
        )),
    };
    round_trip(&bytes, &req);
}

#[test]
fn scheduler_watch_jobs_response() {
    let bytes = cat(&[
        &ld(0x0a, b"my-job"), // 1:LEN name
        // 2:VARINT id = 2^32 + 1: needs the full uint64 range.
        &[0x10, 0x81, 0x80, 0x80, 0x80, 0x10],
        &ld(0x1a, &any_bytes()),          // 3:LEN data (Any)
        &ld(0x22, &app_metadata_bytes()), // 4:LEN metadata
    ]);
    let resp = scheduler::WatchJobsResponse {
        name: "my-job".to_owned(),
        id: (1 << 32) + 1,
        data: Some(any_value()),
        metadata: Some(app_metadata()),
        // jobsd's execution-context fields left unset: Dapr's exact bytes.
        ..Default::default()
    };
    round_trip(&bytes, &resp);
}

#[test]
fn scheduler_get_delete_list_messages() {
    // Get/DeleteJobRequest {1:LEN name, 2:LEN metadata}
    let bytes = cat(&[&ld(0x0a, b"j"), &ld(0x12, &app_metadata_bytes())]);
    round_trip(
        &bytes,
        &scheduler::GetJobRequest {
            name: "j".to_owned(),
            metadata: Some(app_metadata()),
        },
    );
    round_trip(
        &bytes,
        &scheduler::DeleteJobRequest {
            name: "j".to_owned(),
            metadata: Some(app_metadata()),
        },
    );
    // GetJobResponse {1:LEN job = {1:LEN schedule}}
    round_trip(
        &ld(0x0a, &ld(0x0a, b"@hourly")),
        &scheduler::GetJobResponse {
            job: Some(scheduler::Job {
                schedule: Some("@hourly".to_owned()),
                ..Default::default()
            }),
        },
    );
    // ListJobsRequest {1:LEN metadata}
    round_trip(
        &ld(0x0a, &app_metadata_bytes()),
        &scheduler::ListJobsRequest {
            metadata: Some(app_metadata()),
        },
    );
    // ListJobsResponse {1:LEN jobs = NamedJob{1:LEN name, 2:LEN metadata, 3:LEN job}}
    let named = cat(&[
        &ld(0x0a, b"j"),
        &ld(0x12, &app_metadata_bytes()),
        &ld(0x1a, &ld(0x1a, b"1s")), // job = {3:LEN due_time}
    ]);
    round_trip(
        &ld(0x0a, &named),
        &scheduler::ListJobsResponse {
            jobs: vec![scheduler::NamedJob {
                name: "j".to_owned(),
                metadata: Some(app_metadata()),
                job: Some(scheduler::Job {
                    due_time: Some("1s".to_owned()),
                    ..Default::default()
                }),
            }],
        },
    );
    round_trip(&[], &scheduler::ScheduleJobResponse {});
    round_trip(&[], &scheduler::DeleteJobResponse {});
}

#[test]
fn scheduler_hosts_and_bulk_deletes() {
    // WatchHostsResponse {1:LEN hosts = Host{1:LEN address}} x2
    let bytes = cat(&[
        &ld(0x0a, &ld(0x0a, b"10.0.0.1:50006")),
        &ld(0x0a, &ld(0x0a, b"10.0.0.2:50006")),
    ]);
    round_trip(
        &bytes,
        &scheduler::WatchHostsResponse {
            hosts: vec![
                scheduler::Host {
                    address: "10.0.0.1:50006".to_owned(),
                },
                scheduler::Host {
                    address: "10.0.0.2:50006".to_owned(),
                },
            ],
        },
    );
    round_trip(&[], &scheduler::WatchHostsRequest {});

    // DeleteByMetadataRequest {1:LEN metadata, 2:VARINT id_prefix_match = true}
    let bytes = cat(&[&ld(0x0a, &app_metadata_bytes()), &[0x10, 0x01]]);
    round_trip(
        &bytes,
        &scheduler::DeleteByMetadataRequest {
            metadata: Some(app_metadata()),
            id_prefix_match: Some(true),
        },
    );
    round_trip(&[], &scheduler::DeleteByMetadataResponse {});

    // DeleteByNamePrefixRequest {1:LEN name_prefix, 2:LEN metadata}
    let bytes = cat(&[&ld(0x0a, b"job-"), &ld(0x12, &app_metadata_bytes())]);
    round_trip(
        &bytes,
        &scheduler::DeleteByNamePrefixRequest {
            name_prefix: "job-".to_owned(),
            metadata: Some(app_metadata()),
        },
    );
    // name_prefix is a plain `string`: empty is not written.
    round_trip(
        &[],
        &scheduler::DeleteByNamePrefixRequest {
            name_prefix: String::new(),
            metadata: None,
        },
    );
    round_trip(&[], &scheduler::DeleteByNamePrefixResponse {});
}

#[test]
fn scheduler_enum_names_and_numbers() {
    use scheduler::{JobTargetType, WatchJobsRequestResultStatus};
    assert_eq!(JobTargetType::Job as i32, 0);
    assert_eq!(JobTargetType::ActorReminder as i32, 1);
    assert_eq!(JobTargetType::Job.as_str_name(), "JOB_TARGET_TYPE_JOB");
    assert_eq!(
        JobTargetType::ActorReminder.as_str_name(),
        "JOB_TARGET_TYPE_ACTOR_REMINDER"
    );
    assert_eq!(WatchJobsRequestResultStatus::Success as i32, 0);
    assert_eq!(WatchJobsRequestResultStatus::Failed as i32, 1);
    assert_eq!(
        WatchJobsRequestResultStatus::Success.as_str_name(),
        "SUCCESS"
    );
    assert_eq!(WatchJobsRequestResultStatus::Failed.as_str_name(), "FAILED");
    // An unknown status number still decodes (the Scheduler, not the codec, rejects it).
    let r = scheduler::WatchJobsRequestResult::decode(&[0x10, 0x05][..]).unwrap();
    assert_eq!(r.status, 5);
    assert!(WatchJobsRequestResultStatus::try_from(r.status).is_err());
}

// ---------------------------------------------------------------------------------------------
// File descriptor set
// ---------------------------------------------------------------------------------------------

fn descriptor_set() -> FileDescriptorSet {
    FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("FILE_DESCRIPTOR_SET decodes")
}

fn find_service<'a>(fds: &'a FileDescriptorSet, full_name: &str) -> &'a ServiceDescriptorProto {
    fds.file
        .iter()
        .flat_map(|f| {
            f.service
                .iter()
                .map(move |s| (format!("{}.{}", f.package(), s.name()), s))
        })
        .find(|(name, _)| name == full_name)
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("service {full_name} not in FILE_DESCRIPTOR_SET"))
}

/// One expected rpc: (name, input type, output type, client streaming, server streaming).
type Rpc = (&'static str, String, String, bool, bool);

/// A unary rpc of `package` whose types are `<package>.<req>` and `<package>.<resp>`.
fn unary(package: &str, name: &'static str, req: &str, resp: &str) -> Rpc {
    (
        name,
        format!(".{package}.{req}"),
        format!(".{package}.{resp}"),
        false,
        false,
    )
}

#[track_caller]
fn assert_methods(service: &ServiceDescriptorProto, expected: &[Rpc]) {
    let actual: Vec<(&str, String, String, bool, bool)> = service
        .method
        .iter()
        .map(|m: &MethodDescriptorProto| {
            (
                m.name(),
                m.input_type().to_owned(),
                m.output_type().to_owned(),
                m.client_streaming(),
                m.server_streaming(),
            )
        })
        .collect();
    assert_eq!(actual, expected, "methods of {}", service.name());
}

#[test]
fn descriptor_set_has_dapr_service() {
    let fds = descriptor_set();
    let rt = |name, req, resp| unary("dapr.proto.runtime.v1", name, req, resp);
    assert_methods(
        find_service(&fds, "dapr.proto.runtime.v1.Dapr"),
        &[
            rt("GetMetadata", "GetMetadataRequest", "GetMetadataResponse"),
            rt(
                "ScheduleJobAlpha1",
                "ScheduleJobRequest",
                "ScheduleJobResponse",
            ),
            rt("GetJobAlpha1", "GetJobRequest", "GetJobResponse"),
            rt("DeleteJobAlpha1", "DeleteJobRequest", "DeleteJobResponse"),
            rt(
                "DeleteJobsByPrefixAlpha1",
                "DeleteJobsByPrefixRequestAlpha1",
                "DeleteJobsByPrefixResponseAlpha1",
            ),
            rt(
                "ListJobsAlpha1",
                "ListJobsRequestAlpha1",
                "ListJobsResponseAlpha1",
            ),
            rt("ScheduleJob", "ScheduleJobRequest", "ScheduleJobResponse"),
            rt("GetJob", "GetJobRequest", "GetJobResponse"),
            rt("DeleteJob", "DeleteJobRequest", "DeleteJobResponse"),
            rt(
                "DeleteJobsByPrefix",
                "DeleteJobsByPrefixRequest",
                "DeleteJobsByPrefixResponse",
            ),
            rt("ListJobs", "ListJobsRequest", "ListJobsResponse"),
            rt("RegisterActorTimer", "RegisterActorTimerRequest", "EMPTY"),
            rt(
                "UnregisterActorTimer",
                "UnregisterActorTimerRequest",
                "EMPTY",
            ),
            rt(
                "RegisterActorReminder",
                "RegisterActorReminderRequest",
                "EMPTY",
            ),
            rt(
                "UnregisterActorReminder",
                "UnregisterActorReminderRequest",
                "EMPTY",
            ),
            rt(
                "GetActorReminder",
                "GetActorReminderRequest",
                "GetActorReminderResponse",
            ),
            rt(
                "ListActorReminders",
                "ListActorRemindersRequest",
                "ListActorRemindersResponse",
            ),
            rt(
                "UnregisterActorRemindersByType",
                "UnregisterActorRemindersByTypeRequest",
                "UnregisterActorRemindersByTypeResponse",
            ),
            rt(
                "GetActorState",
                "GetActorStateRequest",
                "GetActorStateResponse",
            ),
            rt(
                "ExecuteActorStateTransaction",
                "ExecuteActorStateTransactionRequest",
                "EMPTY",
            ),
            rt("InvokeActor", "InvokeActorRequest", "InvokeActorResponse"),
        ]
        .map(|(name, req, resp, cs, ss)| {
            let resp = if resp.ends_with(".EMPTY") {
                ".google.protobuf.Empty".to_owned()
            } else {
                resp
            };
            (name, req, resp, cs, ss)
        }),
    );
}

/// The actor messages keep Dapr's field numbers: what the Dapr SDKs put on the wire.
#[test]
fn actor_reminder_request_wire_is_daprs() {
    use jobsd::proto::runtime::RegisterActorReminderRequest;
    let req = RegisterActorReminderRequest {
        actor_type: "T".into(),
        actor_id: "1".into(),
        name: "r".into(),
        due_time: "1s".into(),
        period: "2s".into(),
        data: b"d".to_vec(),
        ttl: "3s".into(),
        overwrite: Some(false),
        failure_policy: Some(jobsd::proto::common::JobFailurePolicy::default()),
    };
    assert_eq!(
        req.encode_to_vec(),
        b"\x0a\x01T\x12\x011\x1a\x01r\x22\x021s\x2a\x022s\x32\x01d\x3a\x023s\x40\x00\x4a\x00"
    );
}

#[test]
fn descriptor_set_has_app_callbacks() {
    let fds = descriptor_set();
    let rt = |name, req, resp| unary("dapr.proto.runtime.v1", name, req, resp);
    assert_methods(
        find_service(&fds, "dapr.proto.runtime.v1.AppCallback"),
        &[rt("OnJobEvent", "JobEventRequest", "JobEventResponse")],
    );
    assert_methods(
        find_service(&fds, "dapr.proto.runtime.v1.AppCallbackAlpha"),
        &[rt(
            "OnJobEventAlpha1",
            "JobEventRequest",
            "JobEventResponse",
        )],
    );
    assert_methods(
        find_service(&fds, "dapr.proto.runtime.v1.AppCallbackHealthCheck"),
        &[(
            "HealthCheck",
            ".google.protobuf.Empty".to_owned(),
            ".dapr.proto.runtime.v1.HealthCheckResponse".to_owned(),
            false,
            false,
        )],
    );
}

#[test]
fn descriptor_set_has_scheduler_service() {
    let fds = descriptor_set();
    let s = |name, req, resp| unary("dapr.proto.scheduler.v1", name, req, resp);
    let streaming = |rpc: Rpc, client, server| (rpc.0, rpc.1, rpc.2, client, server);
    assert_methods(
        find_service(&fds, "dapr.proto.scheduler.v1.Scheduler"),
        &[
            s("ScheduleJob", "ScheduleJobRequest", "ScheduleJobResponse"),
            s("GetJob", "GetJobRequest", "GetJobResponse"),
            s("DeleteJob", "DeleteJobRequest", "DeleteJobResponse"),
            streaming(
                s("WatchJobs", "WatchJobsRequest", "WatchJobsResponse"),
                true,
                true,
            ),
            s("ListJobs", "ListJobsRequest", "ListJobsResponse"),
            streaming(
                s("WatchHosts", "WatchHostsRequest", "WatchHostsResponse"),
                false,
                true,
            ),
            s(
                "DeleteByMetadata",
                "DeleteByMetadataRequest",
                "DeleteByMetadataResponse",
            ),
            s(
                "DeleteByNamePrefix",
                "DeleteByNamePrefixRequest",
                "DeleteByNamePrefixResponse",
            ),
        ],
    );
}

#[test]
fn descriptor_set_is_self_contained_with_json_names() {
    let fds = descriptor_set();
    let names: Vec<&str> = fds.file.iter().map(|f| f.name()).collect();
    // Imports are included, so reflection clients can resolve every type.
    for needed in [
        "google/protobuf/any.proto",
        "google/protobuf/duration.proto",
        "google/protobuf/empty.proto",
        "google/protobuf/struct.proto",
        "dapr/proto/common/v1/common.proto",
        "dapr/proto/runtime/v1/jobs.proto",
        "dapr/proto/runtime/v1/dapr.proto",
        "dapr/proto/runtime/v1/appcallback.proto",
        "dapr/proto/internals/v1/jobs.proto",
        "dapr/proto/scheduler/v1/scheduler.proto",
    ] {
        assert!(names.contains(&needed), "{needed} missing from {names:?}");
    }

    // protojson names Dapr sets explicitly on runtime.v1.Job and internals.v1.JobHTTPRequest.
    for (file, message) in [
        ("dapr/proto/runtime/v1/jobs.proto", "Job"),
        ("dapr/proto/internals/v1/jobs.proto", "JobHTTPRequest"),
    ] {
        let msg = fds
            .file
            .iter()
            .find(|f| f.name() == file)
            .and_then(|f| f.message_type.iter().find(|m| m.name() == message))
            .unwrap_or_else(|| panic!("{message} not in {file}"));
        let json = |field: &str| {
            msg.field
                .iter()
                .find(|f| f.name() == field)
                .unwrap_or_else(|| panic!("{message}.{field} missing"))
                .json_name()
                .to_owned()
        };
        assert_eq!(json("due_time"), "dueTime");
        assert_eq!(json("failure_policy"), "failurePolicy");
    }
}

/// `GetMetadataResponse` with Dapr's field numbers (dapr/proto/runtime/v1/metadata.proto):
/// id 1, the deprecated actor counts 2, extended 4, runtime version 8, actor runtime 10
/// (status 1, active actors 2, host ready 3), scheduler 11 (connected addresses 1).
#[test]
fn get_metadata_response_has_daprs_field_numbers() {
    let count = [0x0a, 0x01, b'T', 0x10, 0x02]; // ActiveActorsCount{1:"T", 2:2}
    let bytes = cat(&[
        &ld(0x0a, b"app"), // 1:LEN id
        &ld(0x12, &count), // 2:LEN active_actors_count
        &ld(0x42, b"1.0"), // 8:LEN runtime_version
        &ld(
            0x52,
            &cat(&[&[0x08, 0x02], &ld(0x12, &count), &[0x18, 0x01]]),
        ), // 10:LEN actor_runtime
        &ld(0x5a, &ld(0x0a, b"h:1")), // 11:LEN scheduler{1:"h:1"}
    ]);
    let active = runtime::ActiveActorsCount {
        r#type: "T".into(),
        count: 2,
    };
    #[allow(deprecated)]
    let expected = runtime::GetMetadataResponse {
        id: "app".into(),
        active_actors_count: vec![active.clone()],
        runtime_version: "1.0".into(),
        actor_runtime: Some(runtime::ActorRuntime {
            runtime_status: runtime::actor_runtime::ActorRuntimeStatus::Running as i32,
            active_actors: vec![active],
            host_ready: true,
            placement: String::new(),
        }),
        scheduler: Some(runtime::MetadataScheduler {
            connected_addresses: vec!["h:1".into()],
        }),
        ..Default::default()
    };
    round_trip(&bytes, &expected);
}
