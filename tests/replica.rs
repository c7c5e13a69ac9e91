//! `jobsd scheduler` in-process: a replica on 127.0.0.1:0 over a memory store and a manual
//! clock, spoken to with the generated `dapr.proto.scheduler.v1` client exactly as daprd
//! speaks to a Dapr Scheduler (unary calls, WatchJobs streams with acks, WatchHosts).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::TimeDelta;
use common::replica::Rep as Running;
use common::{PATIENCE, any_port, app_metadata as app, due_now, t0};
use jobsd::clock::ManualClock;
use jobsd::proto::dapr_scheduler as sv1;
use jobsd::proto::dapr_scheduler::job_target_metadata::Type as Target;
use jobsd::proto::dapr_scheduler::scheduler_client::SchedulerClient;
use jobsd::proto::dapr_scheduler::watch_jobs_request::WatchJobRequestType;
use jobsd::proto::dapr_scheduler::{JobTargetType, WatchJobsRequestResultStatus as Status};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Code;
use tonic::transport::Channel;

impl Running {
    /// The names of the jobs listed for `metadata`, sorted.
    async fn list(&self, metadata: sv1::JobMetadata) -> Vec<String> {
        let mut names: Vec<String> = self
            .client()
            .list_jobs(sv1::ListJobsRequest {
                metadata: Some(metadata),
            })
            .await
            .unwrap()
            .into_inner()
            .jobs
            .into_iter()
            .map(|j| j.name)
            .collect();
        names.sort();
        names
    }
}

fn actor(actor_type: &str, id: &str) -> sv1::JobMetadata {
    sv1::JobMetadata {
        target: Some(sv1::JobTargetMetadata {
            r#type: Some(Target::Actor(sv1::TargetActorReminder {
                id: id.into(),
                r#type: actor_type.into(),
            })),
        }),
        ..app("myapp")
    }
}

fn daily() -> sv1::Job {
    sv1::Job {
        schedule: Some("@daily".into()),
        ..Default::default()
    }
}

fn initial(
    app_id: &str,
    accept: &[JobTargetType],
    actor_types: &[&str],
) -> sv1::WatchJobsRequestInitial {
    sv1::WatchJobsRequestInitial {
        app_id: app_id.into(),
        namespace: "default".into(),
        actor_types: actor_types.iter().map(|s| (*s).to_owned()).collect(),
        accept_job_types: accept.iter().map(|t| *t as i32).collect(),
        concurrency_limits: Vec::new(),
    }
}

fn ack_msg(id: u64, status: i32) -> sv1::WatchJobsRequest {
    sv1::WatchJobsRequest {
        watch_job_request_type: Some(WatchJobRequestType::Result(sv1::WatchJobsRequestResult {
            id,
            status,
        })),
    }
}

/// One WatchJobs stream, driven by hand as daprd would.
struct Watch {
    tx: mpsc::UnboundedSender<sv1::WatchJobsRequest>,
    rx: tonic::Streaming<sv1::WatchJobsResponse>,
}

/// Opens a WatchJobs stream whose first message is `first`.
async fn open_with(
    client: &mut SchedulerClient<Channel>,
    first: sv1::WatchJobsRequest,
) -> Result<Watch, tonic::Status> {
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(first).unwrap();
    let rx = client
        .watch_jobs(UnboundedReceiverStream::new(rx))
        .await?
        .into_inner();
    Ok(Watch { tx, rx })
}

async fn open(r: &Running, init: sv1::WatchJobsRequestInitial) -> Watch {
    let first = sv1::WatchJobsRequest {
        watch_job_request_type: Some(WatchJobRequestType::Initial(init)),
    };
    open_with(&mut r.client(), first).await.unwrap()
}

impl Watch {
    /// The next trigger.
    async fn next(&mut self) -> sv1::WatchJobsResponse {
        tokio::time::timeout(PATIENCE, self.rx.message())
            .await
            .expect("a trigger within the patience")
            .expect("stream still open")
            .expect("a trigger, not the end of the stream")
    }

    fn ack(&self, id: u64, status: Status) {
        self.tx.send(ack_msg(id, status as i32)).unwrap();
    }

    /// Whether nothing arrives for a while.
    async fn silent(&mut self) -> bool {
        tokio::time::timeout(Duration::from_millis(200), self.rx.message())
            .await
            .is_err()
    }

    /// Waits for the server to end the stream; its error, if it ended with one.
    async fn end(&mut self) -> Option<tonic::Status> {
        loop {
            match tokio::time::timeout(PATIENCE, self.rx.message())
                .await
                .expect("stream ends within the patience")
            {
                Ok(Some(_)) => continue,
                Ok(None) => return None,
                Err(status) => return Some(status),
            }
        }
    }
}

type Log = Arc<Mutex<Vec<sv1::WatchJobsResponse>>>;

/// Acks every trigger of `w` with `status` and logs what arrived.
fn auto_ack(mut w: Watch, status: Status) -> Log {
    let log = Log::default();
    let seen = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(t)) = w.rx.message().await {
            let id = t.id;
            seen.lock().unwrap().push(t);
            if w.tx.send(ack_msg(id, status as i32)).is_err() {
                return;
            }
        }
    });
    log
}

fn names_and_ids(log: &Log) -> Vec<(String, u64)> {
    log.lock()
        .unwrap()
        .iter()
        .map(|t| (t.name.clone(), t.id))
        .collect()
}

#[tokio::test]
async fn unary_calls_answer_like_a_dapr_scheduler() {
    let r = Running::start().await;
    let mut c = r.client();
    r.schedule("a", daily()).await;
    r.schedule("b", daily()).await;

    let err = c
        .schedule_job(sv1::ScheduleJobRequest {
            name: "a".into(),
            job: Some(daily()),
            metadata: Some(app("myapp")),
            overwrite: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert_eq!(
        err.message(),
        "job already exists: 'app||default||myapp||a'"
    );
    c.schedule_job(sv1::ScheduleJobRequest {
        name: "a".into(),
        job: Some(sv1::Job {
            schedule: Some("@hourly".into()),
            ..Default::default()
        }),
        metadata: Some(app("myapp")),
        overwrite: true,
    })
    .await
    .unwrap();

    let job = c
        .get_job(sv1::GetJobRequest {
            name: "a".into(),
            metadata: Some(app("myapp")),
        })
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    assert_eq!(job.schedule.as_deref(), Some("@hourly"));
    assert!(job.failure_policy.is_some(), "default policy is stored");

    let err = c
        .get_job(sv1::GetJobRequest {
            name: "nope".into(),
            metadata: Some(app("myapp")),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(err.message(), "job not found: nope");

    let err = c
        .schedule_job(sv1::ScheduleJobRequest {
            name: "m".into(),
            job: Some(daily()),
            metadata: None,
            overwrite: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "missing namespace or appID in request");

    let err = c
        .schedule_job(sv1::ScheduleJobRequest {
            name: "bad".into(),
            job: Some(sv1::Job {
                schedule: Some("not a schedule".into()),
                ..Default::default()
            }),
            metadata: Some(app("myapp")),
            overwrite: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unknown, "{err:?}");

    // Names come back without the key prefix, and only the caller's.
    r.schedule_for(app("other"), "x", daily()).await;
    assert_eq!(r.list(app("myapp")).await, ["a", "b"]);

    c.delete_job(sv1::DeleteJobRequest {
        name: "a".into(),
        metadata: Some(app("myapp")),
    })
    .await
    .unwrap();
    assert!(!r.exists("a").await);
    // Deleting what is not there is fine.
    c.delete_job(sv1::DeleteJobRequest {
        name: "a".into(),
        metadata: Some(app("myapp")),
    })
    .await
    .unwrap();

    for name in ["pre-1", "pre-2", "prefix"] {
        r.schedule(name, daily()).await;
    }
    c.delete_by_name_prefix(sv1::DeleteByNamePrefixRequest {
        name_prefix: "pre-".into(),
        metadata: Some(app("myapp")),
    })
    .await
    .unwrap();
    assert_eq!(r.list(app("myapp")).await, ["b", "prefix"]);
    c.delete_by_name_prefix(sv1::DeleteByNamePrefixRequest {
        name_prefix: String::new(),
        metadata: Some(app("myapp")),
    })
    .await
    .unwrap();
    assert!(r.list(app("myapp")).await.is_empty());
    assert_eq!(r.list(app("other")).await, ["x"]);
    r.stop().await;
}

#[tokio::test]
async fn delete_by_metadata_matches_apps_types_and_actor_ids() {
    let r = Running::start().await;
    let mut c = r.client();
    for (t, id) in [
        ("Cart", "1"),
        ("Cart", "12"),
        ("Cart", "2"),
        ("Cart", "3"),
        ("CartItem", "1"),
    ] {
        r.schedule_for(actor(t, id), "r", daily()).await;
    }
    r.schedule("j", daily()).await;
    r.schedule_for(app("myapp2"), "j", daily()).await;
    // Listing by type names each reminder as its owner named it.
    assert_eq!(r.list(actor("Cart", "")).await, ["r", "r", "r", "r"]);

    let delete = |metadata: sv1::JobMetadata, id_prefix_match: Option<bool>| {
        let mut c = c.clone();
        async move {
            c.delete_by_metadata(sv1::DeleteByMetadataRequest {
                metadata: Some(metadata),
                id_prefix_match,
            })
            .await
            .unwrap();
        }
    };
    // An id prefix reaches every id starting with it.
    delete(actor("Cart", "1"), Some(true)).await;
    assert!(r.list(actor("Cart", "1")).await.is_empty());
    assert!(r.list(actor("Cart", "12")).await.is_empty());
    assert_eq!(r.list(actor("Cart", "2")).await, ["r"]);
    // Without it, only that id.
    delete(actor("Cart", "2"), Some(false)).await;
    assert!(r.list(actor("Cart", "2")).await.is_empty());
    assert_eq!(r.list(actor("Cart", "3")).await, ["r"]);
    // A whole type, and not the type that merely starts with its name.
    delete(actor("Cart", ""), None).await;
    assert!(r.list(actor("Cart", "")).await.is_empty());
    assert_eq!(r.list(actor("CartItem", "")).await, ["r"]);
    // A whole app, and not the app that merely starts with its id.
    delete(app("myapp"), Some(false)).await;
    assert!(r.list(app("myapp")).await.is_empty());
    assert_eq!(r.list(app("myapp2")).await, ["j"]);
    // With a prefix match the app id is a prefix too, as in Dapr's Scheduler (v1.18.2's
    // scheduler/api/deletebymetadata test deletes `appid2`'s jobs through `appid`).
    r.schedule("j", daily()).await;
    delete(app("myapp"), Some(true)).await;
    assert!(r.list(app("myapp")).await.is_empty());
    assert!(r.list(app("myapp2")).await.is_empty());

    let err = c
        .delete_by_metadata(sv1::DeleteByMetadataRequest {
            metadata: None,
            id_prefix_match: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    r.stop().await;
}

#[tokio::test]
async fn watch_jobs_checks_the_initial_message() {
    let r = Running::start().await;
    let mut c = r.client();
    let err = open_with(&mut c, ack_msg(1, 0)).await.err().unwrap();
    assert_eq!(err.code(), Code::Unknown);
    assert_eq!(
        err.message(),
        "initial request is required on stream connection"
    );

    let first = |init| sv1::WatchJobsRequest {
        watch_job_request_type: Some(WatchJobRequestType::Initial(init)),
    };
    let err = open_with(&mut c, first(initial("", &[], &[])))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "missing namespace or appID in request");

    let dup = initial(
        "myapp",
        &[JobTargetType::ActorReminder, JobTargetType::ActorReminder],
        &["Cart"],
    );
    let err = open_with(&mut c, first(dup)).await.err().unwrap();
    assert_eq!(err.code(), Code::Unknown);
    assert_eq!(
        err.message(),
        "duplicate target type specified: JOB_TARGET_TYPE_ACTOR_REMINDER"
    );
    r.stop().await;
}

#[tokio::test]
async fn staged_job_fires_as_soon_as_a_stream_for_its_app_opens() {
    let r = Running::start().await;
    let data = prost_types::Any {
        type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
        value: b"\n\x05hello".to_vec(),
    };
    r.schedule(
        "now",
        sv1::Job {
            data: Some(data.clone()),
            ..due_now()
        },
    )
    .await;
    r.settle().await;
    assert_eq!(r.staged().await, 1, "no stream yet: staged");

    // A stream of another app does not release it.
    let _other = open(&r, initial("other", &[], &[])).await;
    r.settle().await;
    assert_eq!(r.staged().await, 1);

    // No clock step: opening the stream alone fires it.
    let mut w = open(&r, initial("myapp", &[JobTargetType::Job], &[])).await;
    let t = w.next().await;
    assert_eq!((t.name.as_str(), t.id), ("now", 1));
    assert_eq!(t.data, Some(data));
    assert_eq!(t.metadata, Some(app("myapp")));
    w.ack(1, Status::Success);
    r.settle().await;
    assert!(!r.exists("now").await, "delivered once and finished");

    // Ids keep counting on the stream.
    r.schedule("later", due_now()).await;
    let t = w.next().await;
    assert_eq!((t.name.as_str(), t.id), ("later", 2));
    w.ack(2, Status::Success);
    r.settle().await;
    assert_eq!(r.staged().await, 0);
    r.stop().await;
}

#[tokio::test]
async fn triggers_go_round_robin_across_the_streams_of_an_app() {
    let r = Running::start().await;
    let a = auto_ack(open(&r, initial("myapp", &[], &[])).await, Status::Success);
    let b = auto_ack(
        open(&r, initial("myapp", &[JobTargetType::Job], &[])).await,
        Status::Success,
    );
    for name in ["j1", "j2", "j3", "j4"] {
        r.schedule(name, due_now()).await;
    }
    r.settle().await;
    let (a, b) = (names_and_ids(&a), names_and_ids(&b));
    assert_eq!(a.len(), 2, "{a:?} / {b:?}");
    assert_eq!(b.len(), 2, "{a:?} / {b:?}");
    // Each stream numbers its own triggers from 1.
    for log in [&a, &b] {
        let mut ids: Vec<u64> = log.iter().map(|(_, id)| *id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2]);
    }
    r.stop().await;
}

#[tokio::test]
async fn unknown_and_duplicate_acks_are_ignored_and_the_stream_stays_usable() {
    let r = Running::start().await;
    let mut w = open(&r, initial("myapp", &[], &[])).await;
    r.schedule("j", due_now()).await;
    let t = w.next().await;
    assert_eq!(t.id, 1);
    w.ack(99, Status::Success);
    w.ack(1, Status::Success);
    w.ack(1, Status::Failed);
    r.settle().await;
    assert!(!r.exists("j").await);

    r.schedule("k", due_now()).await;
    let t = w.next().await;
    assert_eq!((t.name.as_str(), t.id), ("k", 2));
    w.ack(2, Status::Success);
    r.settle().await;
    assert!(!r.exists("k").await);
    r.stop().await;
}

#[tokio::test]
async fn failed_acks_apply_the_failure_policy() {
    let r = Running::start().await;
    let log = auto_ack(open(&r, initial("myapp", &[], &[])).await, Status::Failed);
    r.schedule("f", due_now()).await;
    r.run_for(TimeDelta::seconds(30)).await;
    // Default policy: constant 1s, 3 retries.
    let ids: Vec<u64> = names_and_ids(&log).iter().map(|(_, id)| *id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert!(!r.exists("f").await);
    r.stop().await;
}

#[tokio::test]
async fn an_unacked_trigger_moves_to_another_stream_when_its_stream_closes() {
    let r = Running::start().await;
    let mut a = open(&r, initial("myapp", &[], &[])).await;
    let mut b = open(&r, initial("myapp", &[], &[])).await;
    r.schedule("j", due_now()).await;
    // The first registered stream takes the first trigger.
    let t = a.next().await;
    assert_eq!((t.name.as_str(), t.id), ("j", 1));
    drop(a);

    let t = b.next().await;
    assert_eq!((t.name.as_str(), t.id), ("j", 1));
    b.ack(t.id, Status::Success);
    r.settle().await;
    assert!(!r.exists("j").await);
    r.stop().await;
}

#[tokio::test]
async fn accepted_job_types_route_jobs_and_reminders() {
    let r = Running::start().await;
    // Jobs only: its actor types do not count.
    let mut jobs = open(&r, initial("myapp", &[JobTargetType::Job], &["Cart"])).await;
    // Reminders of Cart, from another app hosting that actor type.
    let mut reminders = open(
        &r,
        initial("host", &[JobTargetType::ActorReminder], &["Cart"]),
    )
    .await;

    r.schedule_for(actor("Cart", "7"), "remind", due_now())
        .await;
    let t = reminders.next().await;
    assert_eq!((t.name.as_str(), t.id), ("remind", 1));
    assert_eq!(t.metadata, Some(actor("Cart", "7")));
    reminders.ack(t.id, Status::Success);

    r.schedule("job", due_now()).await;
    let t = jobs.next().await;
    assert_eq!((t.name.as_str(), t.id), ("job", 1));
    jobs.ack(t.id, Status::Success);
    r.settle().await;
    assert!(jobs.silent().await, "no reminder on the jobs-only stream");
    assert!(
        reminders.silent().await,
        "no app job on the reminders stream"
    );

    // A type nobody registered stays staged.
    r.schedule_for(actor("Order", "1"), "remind", due_now())
        .await;
    r.settle().await;
    assert_eq!(r.staged().await, 1);
    r.stop().await;
}

#[tokio::test]
async fn malformed_acks_close_the_stream_and_its_trigger_is_staged() {
    let r = Running::start().await;
    let mut w = open(&r, initial("myapp", &[], &[])).await;
    r.schedule("j", due_now()).await;
    assert_eq!(w.next().await.id, 1);
    // A second `initial` carries no result.
    w.tx.send(sv1::WatchJobsRequest {
        watch_job_request_type: Some(WatchJobRequestType::Initial(initial("myapp", &[], &[]))),
    })
    .unwrap();
    let err = w.end().await.expect("closed with an error");
    assert_eq!(err.code(), Code::Unknown);
    assert_eq!(err.message(), "received nil result from stream");
    r.settle().await;
    assert_eq!(r.staged().await, 1);

    // The next stream gets it again (at least once), and an unknown status closes it too.
    let mut w = open(&r, initial("myapp", &[], &[])).await;
    let t = w.next().await;
    assert_eq!((t.name.as_str(), t.id), ("j", 1));
    w.tx.send(ack_msg(1, 5)).unwrap();
    let err = w.end().await.expect("closed with an error");
    assert_eq!(err.message(), "unknown trigger response status: 5");
    r.settle().await;
    assert_eq!(r.staged().await, 1);
    assert!(r.exists("j").await);
    r.stop().await;
}

async fn next_hosts(hosts: &mut tonic::Streaming<sv1::WatchHostsResponse>) -> Vec<String> {
    tokio::time::timeout(PATIENCE, hosts.message())
        .await
        .expect("a host list within the patience")
        .unwrap()
        .unwrap()
        .hosts
        .into_iter()
        .map(|h| h.address)
        .collect()
}

#[tokio::test]
async fn watch_hosts_sends_the_list_on_subscribe_and_on_change() {
    let r = Running::start().await;
    assert_eq!(
        r.replica.broadcast_address,
        format!("127.0.0.1:{}", r.replica.addr.port())
    );
    let mut hosts = r
        .client()
        .watch_hosts(sv1::WatchHostsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        next_hosts(&mut hosts).await,
        vec![r.replica.broadcast_address.clone()]
    );
    r.replica
        .set_hosts(vec!["10.0.0.1:50006".into(), "10.0.0.2:50006".into()]);
    assert_eq!(
        next_hosts(&mut hosts).await,
        ["10.0.0.1:50006", "10.0.0.2:50006"]
    );
    r.stop().await;
    // Stopping ends the subscription.
    assert!(
        tokio::time::timeout(PATIENCE, hosts.message())
            .await
            .unwrap()
            .ok()
            .flatten()
            .is_none()
    );
}

#[tokio::test]
async fn grpc_health_reports_the_scheduler_serving() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let r = Running::start().await;
    let channel = Channel::from_shared(format!("http://{}", r.replica.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    for service in ["", "dapr.proto.scheduler.v1.Scheduler"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, 1, "SERVING for {service:?}");
    }
    r.stop().await;
}

#[tokio::test]
async fn shutdown_closes_streams_and_the_unacked_trigger_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let r = Running::on_redb(any_port(), dir.path(), ManualClock::new(t0())).await;
    let mut w = open(&r, initial("myapp", &[], &[])).await;
    r.schedule("j", due_now()).await;
    assert_eq!(w.next().await.id, 1);
    let clock = r.clock.clone();
    let stopping = tokio::spawn(r.stop());
    let err = w.end().await.expect("closed with an error");
    assert_eq!(err.message(), "server is closing");
    tokio::time::timeout(PATIENCE, stopping)
        .await
        .expect("graceful shutdown finishes")
        .unwrap();

    let r = Running::on_redb(any_port(), dir.path(), clock).await;
    let mut w = open(&r, initial("myapp", &[], &[])).await;
    let t = w.next().await;
    assert_eq!((t.name.as_str(), t.id), ("j", 1));
    w.ack(1, Status::Success);
    r.settle().await;
    assert!(!r.exists("j").await);
    r.stop().await;
}

#[tokio::test]
async fn jobsd_creates_are_checked_and_kept_as_the_embedded_scheduler_does() {
    use jobsd::proto::jobsd_api as jv1;
    use jobsd::proto::jobsd_replica::{self as jsv1, jobs_client::JobsClient};
    use jobsd::seam::{JobExtras, Scheduler};

    let r = Running::start().await;
    let mut c = JobsClient::connect(format!("http://{}", r.replica.addr))
        .await
        .unwrap();
    // The embedded scheduler, for its answers.
    let embedded = jobsd::engine::Engine::new(
        Arc::new(jobsd::store::Memory::new()),
        Arc::new(ManualClock::new(t0())),
    );
    let wire = |req: &sv1::ScheduleJobRequest, extras: &JobExtras| jsv1::ScheduleJobRequest {
        job: Some(req.clone()),
        labels: extras.labels.clone().into_iter().collect(),
        policy: extras.policy.clone(),
        failure_policy: extras.failure_policy.clone(),
        traceparent: extras.traceparent.clone().unwrap_or_default(),
    };
    let create = |name: &str| sv1::ScheduleJobRequest {
        name: name.into(),
        job: Some(daily()),
        metadata: Some(app("myapp")),
        overwrite: false,
    };
    let bad = [
        JobExtras {
            labels: [("bad key".to_owned(), "v".to_owned())].into(),
            ..Default::default()
        },
        JobExtras {
            policy: Some(jv1::JobPolicy {
                overlap: "sometimes".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        JobExtras {
            failure_policy: Some(jv1::FailurePolicy {
                kind: Some(jv1::failure_policy::Kind::Exponential(
                    jv1::ExponentialRetry {
                        initial_interval: "1s".into(),
                        jitter: 2.0,
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    for extras in bad {
        let req = create("bad");
        let want = Scheduler::schedule_job_with(&embedded, req.clone(), extras.clone())
            .await
            .unwrap_err();
        assert_eq!(want.code, Code::InvalidArgument, "{want}");
        let got = c.schedule_job(wire(&req, &extras)).await.unwrap_err();
        assert_eq!((got.code(), got.message()), (want.code, &*want.message));
        assert!(!r.exists("bad").await, "{want}: nothing stored");
    }
    // No job at all: refused as the Scheduler service refuses it.
    let got = c
        .schedule_job(jsv1::ScheduleJobRequest::default())
        .await
        .unwrap_err();
    assert_eq!(got.code(), Code::InvalidArgument, "{got:?}");

    // Good settings are kept beside the job; create-only unless `overwrite`, as Dapr's call.
    let extras = JobExtras {
        labels: [("team".to_owned(), "billing".to_owned())].into(),
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        policy: Some(jv1::JobPolicy {
            timeout: "5s".into(),
            ..Default::default()
        }),
        failure_policy: Some(jv1::FailurePolicy {
            kind: Some(jv1::failure_policy::Kind::Delays(jv1::DelaysRetry {
                delays: vec!["1s".into()],
                ..Default::default()
            })),
            ..Default::default()
        }),
    };
    c.schedule_job(wire(&create("good"), &extras))
        .await
        .unwrap();
    let view = r
        .replica
        .engine()
        .job_view(&app("myapp"), "good")
        .await
        .unwrap();
    assert_eq!(view.labels.get("team").map(String::as_str), Some("billing"));
    assert_eq!(view.policy, extras.policy);
    assert_eq!(view.failure_policy, extras.failure_policy);
    let again = c
        .schedule_job(wire(&create("good"), &extras))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);
    let mut replace = create("good");
    replace.overwrite = true;
    c.schedule_job(wire(&replace, &JobExtras::default()))
        .await
        .unwrap();
    let view = r
        .replica
        .engine()
        .job_view(&app("myapp"), "good")
        .await
        .unwrap();
    assert!(view.labels.is_empty() && view.policy.is_none(), "{view:?}");
    r.stop().await;
}

/// A WatchJobs stream that never sends its initial request does not hold the replica's stop
/// (Dapr 1.18.3's `scheduler/shutdown/stalledwatch`: its Scheduler exits within 15 s).
#[tokio::test]
async fn a_stream_parked_before_its_initial_request_does_not_hold_the_stop() {
    let rep = Running::start().await;
    let (_requests, rx) = mpsc::unbounded_channel::<sv1::WatchJobsRequest>();
    let mut client = rep.client();
    let parked = tokio::spawn(async move {
        client
            .watch_jobs(UnboundedReceiverStream::new(rx))
            .await
            .map(|_| ())
    });
    // Time for the call to reach the replica and wait there for its first message (had it
    // not, the stop would have nothing to wait for and the test nothing to show).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!parked.is_finished(), "answered before its initial request");
    let started = tokio::time::Instant::now();
    tokio::time::timeout(PATIENCE, rep.stop())
        .await
        .expect("the replica stops although a stream never sent its initial request");
    assert!(started.elapsed() < PATIENCE);
    let answer = tokio::time::timeout(PATIENCE, parked)
        .await
        .expect("answered")
        .unwrap();
    assert!(
        answer.is_err(),
        "the parked stream ends with an error: {answer:?}"
    );
}
