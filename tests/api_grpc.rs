//! daprd's gRPC Jobs API, end to end: the generated `DaprClient` against the real tonic
//! server on 127.0.0.1:0 and the real engine over a memory store; plus health, reflection,
//! and the API token.

mod common;

use std::net::SocketAddr;

use common::{engine, serve_grpc, state};
use jobsd::proto::common::{
    JobFailurePolicy, JobFailurePolicyConstant, job_failure_policy::Policy,
};
use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};
use jobsd::proto::runtime::{self as rv1, dapr_client::DaprClient};
use prost::Message;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

async fn channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn client() -> DaprClient<Channel> {
    let addr = serve_grpc(state(engine(), "myapp", "default")).await;
    DaprClient::new(channel(addr).await)
}

/// `msg` with the test token in its metadata.
fn with_token<T>(msg: T) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("dapr-api-token", "s3cret".parse().unwrap());
    req
}

fn job(name: &str, schedule: &str) -> rv1::Job {
    rv1::Job {
        name: name.to_owned(),
        schedule: Some(schedule.to_owned()),
        ..Default::default()
    }
}

fn schedule_req(job: rv1::Job, overwrite: bool) -> rv1::ScheduleJobRequest {
    rv1::ScheduleJobRequest {
        job: Some(job),
        overwrite,
    }
}

fn get_req(name: &str) -> rv1::GetJobRequest {
    rv1::GetJobRequest {
        name: name.to_owned(),
    }
}

/// GetJob of `name`: the job (empty when the answer has none).
async fn got(c: &mut DaprClient<Channel>, name: &str) -> rv1::Job {
    let resp = c.get_job(get_req(name)).await.unwrap();
    resp.into_inner().job.unwrap_or_default()
}

/// GetJobAlpha1 of `name`: the job (empty when the answer has none).
async fn got_alpha1(c: &mut DaprClient<Channel>, name: &str) -> rv1::Job {
    let resp = c.get_job_alpha1(get_req(name)).await.unwrap();
    resp.into_inner().job.unwrap_or_default()
}

/// ListJobs (stable).
async fn list(c: &mut DaprClient<Channel>) -> rv1::ListJobsResponse {
    c.list_jobs(rv1::ListJobsRequest {})
        .await
        .unwrap()
        .into_inner()
}

fn delete_req(name: &str) -> rv1::DeleteJobRequest {
    rv1::DeleteJobRequest {
        name: name.to_owned(),
    }
}

/// Asserts daprd's error shape: code, message, one ErrorInfo with `reason` in `dapr.io`
/// carrying the app ID and namespace.
fn assert_dapr_error(status: &Status, code: Code, reason: &str) {
    assert_eq!(status.code(), code, "{status:?}");
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.reason, reason);
    assert_eq!(info.domain, "dapr.io");
    assert_eq!(
        info.metadata.get("appID").map(String::as_str),
        Some("myapp")
    );
    assert_eq!(
        info.metadata.get("namespace").map(String::as_str),
        Some("default")
    );
    let details = status.get_error_details_vec();
    assert_eq!(details.len(), 1, "{details:?}");
}

#[tokio::test]
async fn stable_rpcs_schedule_get_delete() {
    let mut c = client().await;
    let data = prost_types::Any {
        type_url: "type.googleapis.com/google.protobuf.StringValue".to_owned(),
        value: "payload".to_owned().encode_to_vec(),
    };
    let mut j = job("stable", "@every 1h");
    j.repeats = Some(10);
    j.due_time = Some("10s".to_owned());
    j.ttl = Some("1h".to_owned());
    j.data = Some(data.clone());
    c.schedule_job(schedule_req(j, false)).await.unwrap();

    let got = got(&mut c, "stable").await;
    assert_eq!(got.name, "stable");
    assert_eq!(got.schedule.as_deref(), Some("@every 1h"));
    assert_eq!(got.repeats, Some(10));
    assert_eq!(got.due_time.as_deref(), Some("10s"));
    assert_eq!(got.ttl.as_deref(), Some("1h"));
    assert_eq!(got.data, Some(data));
    // The Scheduler's default failure policy is stored, so Get returns it.
    assert_eq!(
        got.failure_policy,
        Some(JobFailurePolicy {
            policy: Some(Policy::Constant(JobFailurePolicyConstant {
                interval: Some(prost_types::Duration {
                    seconds: 1,
                    nanos: 0
                }),
                max_retries: Some(3),
            })),
        })
    );

    c.delete_job(delete_req("stable")).await.unwrap();
    let err = c.get_job(get_req("stable")).await.unwrap_err();
    assert_dapr_error(&err, Code::Internal, "DAPR_SCHEDULER_GET_JOB");
    // Deleting again is fine.
    c.delete_job(delete_req("stable")).await.unwrap();
}

#[tokio::test]
async fn alpha1_rpcs_behave_the_same() {
    let mut c = client().await;
    c.schedule_job_alpha1(schedule_req(job("alpha", "@daily"), false))
        .await
        .unwrap();
    let got = got_alpha1(&mut c, "alpha").await;
    assert_eq!(got.name, "alpha");
    // Both names see the same jobs.
    assert!(c.get_job(get_req("alpha")).await.is_ok());

    let err = c
        .schedule_job_alpha1(schedule_req(job("alpha", "@hourly"), false))
        .await
        .unwrap_err();
    assert_dapr_error(&err, Code::AlreadyExists, "DAPR_SCHEDULER_SCHEDULE_JOB");
    c.schedule_job_alpha1(schedule_req(job("alpha", "@hourly"), true))
        .await
        .unwrap();
    let got = got_alpha1(&mut c, "alpha").await;
    assert_eq!(got.schedule.as_deref(), Some("@hourly"));

    c.delete_job_alpha1(delete_req("alpha")).await.unwrap();
    let err = c.get_job_alpha1(get_req("alpha")).await.unwrap_err();
    assert_dapr_error(&err, Code::Internal, "DAPR_SCHEDULER_GET_JOB");
    assert!(
        err.message().starts_with(
            "failed to get job due to: rpc error: code = NotFound desc = job not found: "
        ),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn checks_run_in_daprd_order() {
    let mut c = client().await;
    let err = c
        .schedule_job(rv1::ScheduleJobRequest {
            job: None,
            overwrite: false,
        })
        .await
        .unwrap_err();
    assert_dapr_error(&err, Code::InvalidArgument, "DAPR_SCHEDULER_EMPTY");
    assert_eq!(err.message(), "Job is empty");

    let err = c
        .schedule_job(schedule_req(rv1::Job::default(), false))
        .await
        .unwrap_err();
    assert_dapr_error(&err, Code::InvalidArgument, "DAPR_SCHEDULER_JOB_NAME_EMPTY");
    assert_eq!(err.message(), "Name is empty");

    let err = c
        .schedule_job_alpha1(schedule_req(
            rv1::Job {
                name: "nosched".to_owned(),
                repeats: Some(3),
                ..Default::default()
            },
            false,
        ))
        .await
        .unwrap_err();
    assert_dapr_error(&err, Code::InvalidArgument, "DAPR_SCHEDULER_SCHEDULE_EMPTY");
    assert_eq!(err.message(), "Schedule is empty");

    for err in [
        c.get_job(get_req("")).await.unwrap_err(),
        c.delete_job(delete_req("")).await.unwrap_err(),
        c.get_job_alpha1(get_req("")).await.unwrap_err(),
    ] {
        assert_dapr_error(&err, Code::InvalidArgument, "DAPR_SCHEDULER_JOB_NAME_EMPTY");
    }
}

#[tokio::test]
async fn scheduler_errors_keep_their_code_or_become_internal() {
    let mut c = client().await;
    c.schedule_job(schedule_req(job("dup", "@daily"), false))
        .await
        .unwrap();
    let err = c
        .schedule_job(schedule_req(job("dup", "@hourly"), false))
        .await
        .unwrap_err();
    assert_dapr_error(&err, Code::AlreadyExists, "DAPR_SCHEDULER_SCHEDULE_JOB");
    assert_eq!(
        err.message(),
        "failed to schedule job due to: rpc error: code = AlreadyExists desc = job already exists: 'app||default||myapp||dup'"
    );
    let got = c.get_job(get_req("dup")).await.unwrap().into_inner().job;
    assert_eq!(got.and_then(|j| j.schedule).as_deref(), Some("@daily"));

    let err = c
        .schedule_job(schedule_req(job("bad", "* * *"), false))
        .await
        .unwrap_err();
    assert_dapr_error(&err, Code::Internal, "DAPR_SCHEDULER_SCHEDULE_JOB");
    assert!(
        err.message().contains(
            "rpc error: code = Unknown desc = job failed validation: expected exactly 6 fields"
        ),
        "{}",
        err.message()
    );

    let err = c
        .schedule_job(schedule_req(job("bad/name", "@daily"), false))
        .await
        .unwrap_err();
    assert_dapr_error(&err, Code::Internal, "DAPR_SCHEDULER_SCHEDULE_JOB");
    assert!(
        err.message().contains("job name is invalid"),
        "{}",
        err.message()
    );

    // `|` and `@` are fine in names.
    c.schedule_job(schedule_req(job("my||job@name", "@daily"), false))
        .await
        .unwrap();
    let got = c
        .get_job(get_req("my||job@name"))
        .await
        .unwrap()
        .into_inner()
        .job;
    assert_eq!(got.map(|j| j.name).as_deref(), Some("my||job@name"));
}

#[tokio::test]
async fn list_and_delete_by_prefix_stable_and_alpha1() {
    let scheduler = engine();
    let addr = serve_grpc(state(scheduler.clone(), "myapp", "default")).await;
    let other = serve_grpc(state(scheduler, "otherapp", "default")).await;
    let mut c = DaprClient::new(channel(addr).await);
    let mut o = DaprClient::new(channel(other).await);

    for name in ["a-1", "a-2", "b-1", "c-1"] {
        c.schedule_job(schedule_req(job(name, "@daily"), false))
            .await
            .unwrap();
    }
    o.schedule_job(schedule_req(job("a-theirs", "@daily"), false))
        .await
        .unwrap();

    let names = |jobs: Vec<rv1::Job>| {
        let mut names: Vec<String> = jobs.into_iter().map(|j| j.name).collect();
        names.sort();
        names
    };
    let listed = list(&mut c).await;
    assert_eq!(names(listed.jobs.clone()), ["a-1", "a-2", "b-1", "c-1"]);
    assert!(listed.jobs.iter().all(|j| j.failure_policy.is_some()));
    let listed = c
        .list_jobs_alpha1(rv1::ListJobsRequestAlpha1 {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(listed.jobs), ["a-1", "a-2", "b-1", "c-1"]);

    c.delete_jobs_by_prefix(rv1::DeleteJobsByPrefixRequest {
        name_prefix: Some("a-".to_owned()),
    })
    .await
    .unwrap();
    let listed = list(&mut c).await;
    assert_eq!(names(listed.jobs), ["b-1", "c-1"]);

    c.delete_jobs_by_prefix_alpha1(rv1::DeleteJobsByPrefixRequestAlpha1 {
        name_prefix: Some("b".to_owned()),
    })
    .await
    .unwrap();
    let listed = list(&mut c).await;
    assert_eq!(names(listed.jobs), ["c-1"]);

    // No prefix: everything of this app, nothing of the other app.
    c.delete_jobs_by_prefix(rv1::DeleteJobsByPrefixRequest { name_prefix: None })
        .await
        .unwrap();
    let listed = list(&mut c).await;
    assert!(listed.jobs.is_empty());
    let theirs = list(&mut o).await;
    assert_eq!(names(theirs.jobs), ["a-theirs"]);
}

#[tokio::test]
async fn other_dapr_methods_are_unimplemented() {
    let addr = serve_grpc(state(engine(), "myapp", "default")).await;
    let mut grpc = tonic::client::Grpc::new(channel(addr).await);
    grpc.ready().await.unwrap();
    let err = grpc
        .unary(
            Request::new(()),
            http::uri::PathAndQuery::from_static("/dapr.proto.runtime.v1.Dapr/GetState"),
            tonic_prost::ProstCodec::<(), ()>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}

#[tokio::test]
async fn health_reports_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let addr = serve_grpc(state(engine(), "myapp", "default")).await;
    let mut health = HealthClient::new(channel(addr).await);
    for service in ["", "dapr.proto.runtime.v1.Dapr"] {
        let resp = health
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(resp.status, ServingStatus::Serving as i32, "{service:?}");
    }
    let err = health
        .check(HealthCheckRequest {
            service: "nope".to_owned(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

/// The first answer to one request on reflection `$version`'s ServerReflectionInfo stream
/// (v1 and v1alpha have the same shape in different packages).
macro_rules! reflect {
    ($version:ident, $channel:expr, $request:ident($arg:expr)) => {{
        use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
        let req = tonic_reflection::pb::$version::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::$request($arg)),
        };
        ServerReflectionClient::new($channel)
            .server_reflection_info(tokio_stream::iter([req]))
            .await
            .unwrap()
            .into_inner()
            .message()
            .await
            .unwrap()
            .unwrap()
    }};
}

#[tokio::test]
async fn reflection_lists_services_on_v1_and_v1alpha() {
    use tonic_reflection::pb::{v1, v1alpha};

    let addr = serve_grpc(state(engine(), "myapp", "default")).await;
    let ch = channel(addr).await;

    let resp = reflect!(v1, ch.clone(), ListServices(String::new()));
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        resp.message_response
    else {
        panic!("unexpected reflection answer {resp:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in [
        "dapr.proto.runtime.v1.Dapr",
        "jobsd.v1.Jobs",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }

    let resp = reflect!(
        v1alpha,
        ch,
        FileContainingSymbol("dapr.proto.runtime.v1.Dapr".to_owned())
    );
    let Some(v1alpha::server_reflection_response::MessageResponse::FileDescriptorResponse(files)) =
        resp.message_response
    else {
        panic!("unexpected reflection answer {resp:?}");
    };
    assert!(!files.file_descriptor_proto.is_empty());
}

#[tokio::test]
async fn api_token_goes_in_metadata() {
    let mut st = state(engine(), "myapp", "default");
    st.api_token = Some("s3cret".to_owned());
    let addr = serve_grpc(st).await;
    let ch = channel(addr).await;
    let mut c = DaprClient::new(ch.clone());

    let err = c
        .schedule_job(schedule_req(job("tok", "@daily"), false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(err.message(), "Unauthorized");
    let info = err.get_details_error_info().expect("ErrorInfo");
    assert_eq!(
        info.metadata.get("http.error_message").map(String::as_str),
        Some("missing api token in request metadata")
    );

    let mut wrong = Request::new(get_req("tok"));
    wrong
        .metadata_mut()
        .insert("dapr-api-token", "nope".parse().unwrap());
    let err = c.get_job(wrong).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let info = err.get_details_error_info().expect("ErrorInfo");
    assert_eq!(
        info.metadata.get("http.error_message").map(String::as_str),
        Some("authentication error: api token mismatch")
    );

    c.schedule_job(with_token(schedule_req(job("tok", "@daily"), false)))
        .await
        .unwrap();
    let listed = c
        .list_jobs_alpha1(with_token(rv1::ListJobsRequestAlpha1 {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.jobs.len(), 1);
    assert!(c.list_jobs(rv1::ListJobsRequest {}).await.is_err());

    // jobsd's own service sits behind the same token.
    let mut own = JobsClient::new(ch.clone());
    let get = || jv1::GetJobRequest {
        name: "tok".to_owned(),
    };
    let err = own.get_job(get()).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let mut wrong = Request::new(get());
    wrong
        .metadata_mut()
        .insert("dapr-api-token", "nope".parse().unwrap());
    assert_eq!(
        own.get_job(wrong).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    let view = own.get_job(with_token(get())).await.unwrap().into_inner();
    assert_eq!(view.job.unwrap().name, "tok");

    // Health stays open for probes.
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let mut health = HealthClient::new(ch);
    assert!(
        health
            .check(HealthCheckRequest {
                service: String::new()
            })
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn messages_over_the_limit_are_refused() {
    let mut st = state(engine(), "myapp", "default");
    st.max_body_size = 1024;
    let addr = serve_grpc(st).await;
    let mut c = DaprClient::new(channel(addr).await);
    let mut j = job("big", "@daily");
    j.data = Some(prost_types::Any {
        type_url: "type.googleapis.com/google.protobuf.BytesValue".to_owned(),
        value: vec![7; 4096],
    });
    let req = schedule_req(j, false);
    let size = prost::Message::encoded_len(&req);
    let err = c.schedule_job(req).await.unwrap_err();
    // grpc-go's code and words (daprd 1.18.2, e2e/dapr/differential.sh B33), not tonic's.
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(
        err.message(),
        format!("grpc: received message larger than max ({size} vs. 1024)")
    );
    assert!(c.get_job(get_req("big")).await.is_err());
}

/// `GetJobRequest` with its name as bytes, to send what no generated client can: a name that
/// is not UTF-8.
#[derive(Clone, PartialEq, prost::Message)]
struct RawGetJob {
    #[prost(bytes = "vec", tag = "1")]
    name: Vec<u8>,
}

#[tokio::test]
async fn strings_that_are_not_utf8_get_grpc_gos_error() {
    // daprd 1.18.2, e2e/dapr/differential.sh B23.
    let addr = serve_grpc(state(engine(), "myapp", "default")).await;
    let mut grpc = tonic::client::Grpc::new(channel(addr).await);
    for rpc in ["GetJob", "GetJobAlpha1"] {
        grpc.ready().await.unwrap();
        let path = format!("/dapr.proto.runtime.v1.Dapr/{rpc}");
        let err = grpc
            .unary(
                Request::new(RawGetJob {
                    name: b"bad-\xff".to_vec(),
                }),
                http::uri::PathAndQuery::try_from(path).unwrap(),
                tonic_prost::ProstCodec::<RawGetJob, rv1::GetJobResponse>::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Internal, "{rpc}");
        assert_eq!(
            err.message(),
            "grpc: error unmarshalling request: string field contains invalid UTF-8",
            "{rpc}"
        );
    }
}
