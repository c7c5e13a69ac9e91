//! Actor reminders end to end in-process, on a manual clock, on both schedulers: the embedded
//! engine and remote mode in front of a `jobsd scheduler` replica. Reminders are registered
//! through daprd's real HTTP and gRPC routes (and through the `Reminders` trait), and reach
//! a real HTTP actor app through the actor runtime.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use common::actor_app::{ActorApp, Script};
use common::replica::Rep;
use common::{any_port, clockwork, eventually, http, sidecar_config, t0};
use jobsd::actors::{ActorRef, NewReminder, SchedulerReminders};
use jobsd::app::Sidecar;
use jobsd::clock::{Clock, ManualClock};
use jobsd::config::AppProtocol;
use jobsd::proto::common::{JobFailurePolicy, JobFailurePolicyConstant, job_failure_policy};
use jobsd::proto::runtime as rv1;
use jobsd::proto::runtime::dapr_client::DaprClient;
use jobsd::seam::Scheduler;
use jobsd::store::{self, Store};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Embedded,
    Remote,
}

/// A sidecar (embedded, or remote in front of one replica), its manual clock and a real
/// actor app; the stores are redb files in `dir`, so the whole thing can restart.
struct Harness {
    kind: Kind,
    clock: ManualClock,
    /// The clock as the sidecar gets it: `clock`, with its timers watched.
    timers: clockwork::WatchedClock,
    app: ActorApp,
    app_addr: std::net::SocketAddr,
    /// Stops the app's server (it can be served again on the same port).
    app_stop: CancellationToken,
    sidecar: Option<Sidecar>,
    rep: Option<Rep>,
    rep_listen: std::net::SocketAddr,
    dir: tempfile::TempDir,
}

impl Harness {
    async fn start(kind: Kind) -> Harness {
        Self::start_with_config(kind, None).await
    }

    /// With the app's `/dapr/config` answer set to `config`.
    async fn start_with_config(kind: Kind, config: Option<&str>) -> Harness {
        let clock = ManualClock::new(t0());
        let app = ActorApp::new(clock.clone());
        if let Some(config) = config {
            *app.config.lock().unwrap() = config.to_owned();
        }
        let app_stop = CancellationToken::new();
        let app_addr = common::actor_app::serve_until(app.clone(), None, app_stop.clone()).await;
        let mut h = Harness {
            kind,
            timers: clockwork::WatchedClock::new(&clock),
            clock,
            app,
            app_addr,
            app_stop,
            sidecar: None,
            rep: None,
            rep_listen: any_port(),
            dir: tempfile::tempdir().unwrap(),
        };
        h.boot().await;
        h
    }

    /// Starts the scheduler side and the sidecar over the stores in `dir`, then waits until
    /// the sidecar hosts the app's actor types and a reminder reaches the app.
    async fn boot(&mut self) {
        let clock: Arc<dyn Clock> = Arc::new(self.timers.clone());
        let sidecar = match self.kind {
            Kind::Embedded => {
                let store: Arc<dyn Store> =
                    Arc::new(store::Redb::open(self.dir.path().join("sidecar")).unwrap());
                let cfg = sidecar_config(Some(self.app_addr), AppProtocol::Http, &[]);
                Sidecar::start_with(cfg, store, clock).await.unwrap()
            }
            Kind::Remote => {
                let rep = Rep::on_redb(
                    self.rep_listen,
                    &self.dir.path().join("replica"),
                    self.clock.clone(),
                )
                .await;
                let cfg = sidecar_config(Some(self.app_addr), AppProtocol::Http, &[rep.address()]);
                self.rep = Some(rep);
                Sidecar::start_remote(cfg, clock).await.unwrap()
            }
        };
        self.sidecar = Some(sidecar);
        // Hosted once the app's config is read; delivered once (in remote mode) the job
        // streams carry the actor types.
        let probe = ActorRef::new("Other", "probe");
        eventually("the sidecar hosts the app's actor types", async || {
            self.put_reminder(&probe, "probe", r#"{"dueTime":"0s"}"#)
                .await
                .status
                == 204
        })
        .await;
        for _ in 0..200 {
            if !self.app.reminds("probe", "probe").is_empty() {
                break;
            }
            self.run_for(TimeDelta::zero()).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            !self.app.reminds("probe", "probe").is_empty(),
            "{:?}: a probe reminder never reached the app",
            self.kind
        );
        self.app.calls.lock().unwrap().clear();
    }

    /// Stops the sidecar (and the replica) gracefully.
    async fn stop(&mut self) {
        if let Some(sidecar) = self.sidecar.take() {
            sidecar.shutdown_token().cancel();
            sidecar.wait().await.unwrap();
        }
        if let Some(rep) = self.rep.take() {
            rep.stop().await;
        }
    }

    fn sidecar(&self) -> &Sidecar {
        self.sidecar.as_ref().unwrap()
    }

    fn http(&self) -> std::net::SocketAddr {
        self.sidecar().http_addrs[0]
    }

    /// Steps the clock by `d`, stopping at every fire time on the way.
    async fn run_for(&self, d: TimeDelta) {
        match self.kind {
            Kind::Embedded => {
                clockwork::run_for(self.sidecar().engine().unwrap(), &self.clock, d).await;
            }
            Kind::Remote => self.rep.as_ref().unwrap().run_for(d).await,
        }
    }

    /// The `Reminders` trait over this sidecar's scheduler.
    fn reminders(&self) -> SchedulerReminders {
        let scheduler: Arc<dyn Scheduler> = match self.kind {
            Kind::Embedded => Arc::new(self.sidecar().engine().unwrap().clone()),
            Kind::Remote => Arc::new(self.sidecar().remote().unwrap().clone()),
        };
        SchedulerReminders::new(scheduler, "myapp", "default")
    }

    async fn put_reminder(&self, actor: &ActorRef, name: &str, body: &str) -> common::HttpResponse {
        let path = format!(
            "/v1.0/actors/{}/{}/reminders/{name}",
            actor.actor_type, actor.actor_id
        );
        http(self.http(), "PUT", &path, &[], body.as_bytes()).await
    }

    async fn get_reminder(&self, actor: &ActorRef, name: &str) -> common::HttpResponse {
        let path = format!(
            "/v1.0/actors/{}/{}/reminders/{name}",
            actor.actor_type, actor.actor_id
        );
        http(self.http(), "GET", &path, &[], b"").await
    }

    async fn grpc(&self) -> DaprClient<tonic::transport::Channel> {
        DaprClient::connect(format!("http://{}", self.sidecar().grpc_addrs[0]))
            .await
            .unwrap()
    }
}

fn demo(id: &str) -> ActorRef {
    ActorRef::new("DemoActor", id)
}

/// Seconds after `t0()` of each call.
fn offsets(calls: &[common::actor_app::Call]) -> Vec<i64> {
    calls.iter().map(|c| (c.at - t0()).num_seconds()).collect()
}

async fn r5_fires_exactly_five_times_ten_seconds_apart(kind: Kind) {
    let h = Harness::start(kind).await;
    let start = (h.clock.now() - t0()).num_seconds();
    let r = h
        .put_reminder(
            &demo("1"),
            "r5",
            r#"{"dueTime":"1s","period":"R5/PT10S","data":{"n":1}}"#,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let got = h.get_reminder(&demo("1"), "r5").await;
    assert_eq!(got.status, 200);
    assert_eq!(
        got.text(),
        "{\"actorID\":\"1\",\"actorType\":\"DemoActor\",\"data\":{\"n\":1},\"dueTime\":\"1s\",\"period\":\"@every 10s\"}\n"
    );
    h.run_for(TimeDelta::seconds(120)).await;
    let ticks = h.app.reminds("1", "r5");
    assert_eq!(
        offsets(&ticks),
        [1, 11, 21, 31, 41].map(|s| s + start),
        "{kind:?}"
    );
    assert!(
        ticks
            .iter()
            .all(|c| c.body == r#"{"data":{"n":1},"dueTime":"","period":""}"#),
        "{:?}",
        ticks[0].body
    );
    // Finished: gone.
    assert_eq!(h.get_reminder(&demo("1"), "r5").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_r5_fires_exactly_five_times() {
    r5_fires_exactly_five_times_ten_seconds_apart(Kind::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_r5_fires_exactly_five_times() {
    r5_fires_exactly_five_times_ten_seconds_apart(Kind::Remote).await;
}

async fn ttl_stops_a_reminder(kind: Kind) {
    let h = Harness::start(kind).await;
    let r = h
        .put_reminder(
            &demo("1"),
            "ttl",
            r#"{"dueTime":"1s","period":"10s","ttl":"25s"}"#,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    h.run_for(TimeDelta::seconds(120)).await;
    assert_eq!(h.app.reminds("1", "ttl").len(), 3, "{kind:?}");
    assert_eq!(h.get_reminder(&demo("1"), "ttl").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_ttl_stops_a_reminder() {
    ttl_stops_a_reminder(Kind::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_ttl_stops_a_reminder() {
    ttl_stops_a_reminder(Kind::Remote).await;
}

async fn cancel_header_stops_a_recurring_reminder(kind: Kind) {
    let h = Harness::start(kind).await;
    h.app.script(
        "c",
        Script {
            fail: 0,
            cancel_at: Some(3),
        },
    );
    let r = h
        .put_reminder(&demo("1"), "c", r#"{"dueTime":"1s","period":"5s"}"#)
        .await;
    assert_eq!(r.status, 204);
    // Ticks at 1, 6 and 11 s; the third answers "cancel". The clock stops there: remote mode
    // deletes the reminder with a call of its own, and a tick due before that call lands
    // would still be delivered (as with Dapr).
    h.run_for(TimeDelta::seconds(11)).await;
    // Remote mode deletes the cancelled reminder with a call of its own.
    eventually("the cancelled reminder is deleted", async || {
        h.get_reminder(&demo("1"), "c").await.status == 404
    })
    .await;
    h.run_for(TimeDelta::seconds(60)).await;
    assert_eq!(h.app.reminds("1", "c").len(), 3, "{kind:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_cancel_header_stops_a_reminder() {
    cancel_header_stops_a_recurring_reminder(Kind::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_cancel_header_stops_a_reminder() {
    cancel_header_stops_a_recurring_reminder(Kind::Remote).await;
}

async fn delete_by_actor_id_removes_only_that_actors(kind: Kind) {
    let h = Harness::start(kind).await;
    let trait_ = h.reminders();
    for (id, name) in [("1", "a"), ("1", "b"), ("10", "a"), ("2", "a")] {
        trait_
            .create(NewReminder {
                actor: demo(id),
                name: name.into(),
                due_time: Some("1h".into()),
                period: Some("1h".into()),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    trait_
        .create(NewReminder {
            actor: ActorRef::new("Other", "1"),
            name: "a".into(),
            due_time: Some("1h".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    // gRPC UnregisterActorRemindersByType with an id: that actor only (not "10").
    let mut grpc = h.grpc().await;
    grpc.unregister_actor_reminders_by_type(rv1::UnregisterActorRemindersByTypeRequest {
        actor_type: "DemoActor".into(),
        actor_id: Some("1".into()),
    })
    .await
    .unwrap();
    let mut left: Vec<(String, String)> = trait_
        .list("DemoActor", None)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.actor.actor_id.to_string(), r.name))
        .collect();
    left.sort();
    assert_eq!(
        left,
        [("10".into(), "a".into()), ("2".into(), "a".into())],
        "{kind:?}"
    );
    // The list rpc agrees.
    let listed = grpc
        .list_actor_reminders(rv1::ListActorRemindersRequest {
            actor_type: "DemoActor".into(),
            actor_id: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.reminders.len(), 2);
    // By type: every DemoActor reminder, not Other's.
    trait_.delete_all("DemoActor", None, true).await.unwrap();
    assert!(trait_.list("DemoActor", None).await.unwrap().is_empty());
    assert_eq!(trait_.list("Other", None).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_delete_by_actor_id() {
    delete_by_actor_id_removes_only_that_actors(Kind::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_delete_by_actor_id() {
    delete_by_actor_id_removes_only_that_actors(Kind::Remote).await;
}

async fn workflow_one_shot_retries_until_delivered(kind: Kind) {
    let h = Harness::start(kind).await;
    // The seed design of a workflow timer: one trigger, constant retry until delivered.
    h.app.script(
        "wf",
        Script {
            fail: 7,
            cancel_at: None,
        },
    );
    h.reminders()
        .create(NewReminder {
            actor: ActorRef::new("DemoActor", "wf-1"),
            name: "wf".into(),
            due_time: Some("2s".into()),
            failure_policy: Some(JobFailurePolicy {
                policy: Some(job_failure_policy::Policy::Constant(
                    JobFailurePolicyConstant {
                        interval: Some(prost_types::Duration {
                            seconds: 5,
                            nanos: 0,
                        }),
                        max_retries: None,
                    },
                )),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    h.run_for(TimeDelta::seconds(600)).await;
    let calls = h.app.reminds("wf-1", "wf");
    assert_eq!(calls.len(), 8, "{kind:?}: 7 failures, then delivered");
    let gaps: Vec<i64> = calls
        .windows(2)
        .map(|w| (w[1].at - w[0].at).num_seconds())
        .collect();
    assert!(gaps.iter().all(|g| *g == 5), "{gaps:?}");
    // Every attempt is told it is the same execution (one tick, due at 2 s), which attempt it
    // is, and that all but the first are retries — through a replica as embedded.
    let first = &calls[0].context;
    assert_eq!(first["jobsd-trigger"], "schedule", "{kind:?}: {first:?}");
    assert_eq!(first["jobsd-scheduled-time"], "2026-01-01T00:00:02Z");
    for (i, call) in calls.iter().enumerate() {
        let c = &call.context;
        assert_eq!(
            c["jobsd-execution-id"], first["jobsd-execution-id"],
            "{kind:?}"
        );
        assert_eq!(c["jobsd-attempt"], (i + 1).to_string(), "{kind:?}");
        assert_eq!(c["jobsd-scheduled-time"], first["jobsd-scheduled-time"]);
        if i > 0 {
            assert_eq!(c["jobsd-trigger"], "retry");
        }
    }
    assert!(
        h.reminders()
            .get(&ActorRef::new("DemoActor", "wf-1"), "wf")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_workflow_one_shot_retries_until_delivered() {
    workflow_one_shot_retries_until_delivered(Kind::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_workflow_one_shot_retries_until_delivered() {
    workflow_one_shot_retries_until_delivered(Kind::Remote).await;
}

async fn reminders_survive_a_restart(kind: Kind) {
    let mut h = Harness::start(kind).await;
    let r = h
        .put_reminder(
            &demo("1"),
            "keep",
            r#"{"dueTime":"1s","period":"R4/PT10S"}"#,
        )
        .await;
    assert_eq!(r.status, 204);
    h.run_for(TimeDelta::seconds(15)).await;
    assert_eq!(h.app.reminds("1", "keep").len(), 2);
    h.stop().await;
    h.boot().await;
    assert_eq!(h.get_reminder(&demo("1"), "keep").await.status, 200);
    h.run_for(TimeDelta::seconds(120)).await;
    assert_eq!(h.app.reminds("1", "keep").len(), 2, "{kind:?}: 4 in all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_reminders_survive_a_restart() {
    reminders_survive_a_restart(Kind::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_reminders_survive_a_restart() {
    reminders_survive_a_restart(Kind::Remote).await;
}

/// `POST …/state` with `body`.
async fn state_txn(h: &Harness, actor: &str, body: &str) -> (u16, String) {
    let path = format!("/v1.0/actors/DemoActor/{actor}/state");
    answer(&http(h.http(), "POST", &path, &[], body.as_bytes()).await)
}

/// `GET …/state/{key}`: status, content type and body.
async fn state_get(h: &Harness, actor: &str, key: &str) -> (u16, Option<String>, String) {
    let path = format!("/v1.0/actors/DemoActor/{actor}/state/{key}");
    let r = http(h.http(), "GET", &path, &[], b"").await;
    (
        r.status,
        r.header("content-type").map(str::to_owned),
        r.text(),
    )
}

/// Actor state as daprd keeps it, here beside the jobs: only for an actor active on this
/// host, a transaction lands whole or not at all, values come back as Go encoded them, over
/// HTTP and gRPC alike, and they survive a restart.
async fn actor_state_round_trip(kind: Kind) {
    let mut h = Harness::start(kind).await;
    let missing = state_txn(
        &h,
        "s1",
        r#"[{"operation":"upsert","request":{"key":"n","value":1}}]"#,
    )
    .await;
    assert_eq!(
        missing,
        (
            400,
            r#"{"errorCode":"ERR_ACTOR_INSTANCE_MISSING","message":"actor instance is missing"}"#
                .into()
        )
    );
    let call = http(
        h.http(),
        "PUT",
        "/v1.0/actors/DemoActor/s1/method/Ping",
        &[],
        b"",
    )
    .await;
    assert_eq!(call.status, 200);
    let txn = r#"[{"operation":"upsert","request":{"key":"count","value":{"n": 1.0, "<": "&"}}},
                  {"operation":"upsert","request":{"key":"name","value":"x"}}]"#;
    assert_eq!(state_txn(&h, "s1", txn).await, (204, String::new()));
    assert_eq!(
        state_get(&h, "s1", "count").await,
        (
            200,
            Some("application/json".into()),
            r#"{"\u003c":"\u0026","n":1}"#.into()
        )
    );
    assert_eq!(
        state_get(&h, "s1", "nothing").await,
        (204, None, String::new())
    );
    // Another actor's state is its own.
    assert_eq!(state_get(&h, "s2", "count").await.0, 204);
    // A bad operation refuses the whole transaction.
    let bad = state_txn(
        &h,
        "s1",
        r#"[{"operation":"delete","request":{"key":"name"}},{"operation":"merge","request":{"key":"k"}}]"#,
    )
    .await;
    assert_eq!(
        bad,
        (500, r#"{"errorCode":"ERR_ACTOR_STATE_TRANSACTION_SAVE","message":"error saving actor transaction state: operation type merge not supported"}"#.into())
    );
    assert_eq!(state_get(&h, "s1", "name").await.2, r#""x""#);
    let txn = r#"[{"operation":"delete","request":{"key":"name"}}]"#;
    assert_eq!(state_txn(&h, "s1", txn).await.0, 204);
    assert_eq!(state_get(&h, "s1", "name").await.0, 204);

    // gRPC: an upsert keeps the value's bytes as they came.
    let mut grpc = h.grpc().await;
    grpc.execute_actor_state_transaction(rv1::ExecuteActorStateTransactionRequest {
        actor_type: "DemoActor".into(),
        actor_id: "s1".into(),
        operations: vec![rv1::TransactionalActorStateOperation {
            operation_type: "upsert".into(),
            key: "raw".into(),
            value: Some(prost_types::Any {
                type_url: String::new(),
                value: b"\x01bytes".to_vec(),
            }),
            metadata: Default::default(),
        }],
    })
    .await
    .unwrap();
    let got = grpc
        .get_actor_state(rv1::GetActorStateRequest {
            actor_type: "DemoActor".into(),
            actor_id: "s1".into(),
            key: "count".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.data, br#"{"\u003c":"\u0026","n":1}"#);
    let unsupported = grpc
        .execute_actor_state_transaction(rv1::ExecuteActorStateTransactionRequest {
            actor_type: "DemoActor".into(),
            actor_id: "s1".into(),
            operations: vec![rv1::TransactionalActorStateOperation {
                operation_type: "merge".into(),
                ..Default::default()
            }],
        })
        .await
        .unwrap_err();
    assert_eq!(unsupported.code(), tonic::Code::Unimplemented);
    assert_eq!(unsupported.message(), "operation type merge not supported");
    let path = "/v1.0/actors/dapr.internal.default.app.workflow/x/state/k";
    assert_eq!(
        answer(&http(h.http(), "GET", path, &[], b"").await),
        (403, r#"{"errorCode":"ERR_ACTOR_TYPE_RESERVED","message":"actor type \"dapr.internal.default.app.workflow\" is reserved for the Dapr workflow runtime; direct actor API access is not permitted"}"#.into())
    );

    // State survives a restart of the sidecar (and the replica).
    h.stop().await;
    h.boot().await;
    assert_eq!(state_get(&h, "s1", "raw").await.2, "\x01bytes");
    assert_eq!(state_get(&h, "s1", "count").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_actor_state_round_trip() {
    actor_state_round_trip(Kind::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_actor_state_round_trip() {
    actor_state_round_trip(Kind::Remote).await;
}

// ---------------------------------------------------------------- the API and the runtime

/// `(status, body)` of a response.
fn answer(r: &common::HttpResponse) -> (u16, String) {
    (r.status, r.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_routes_answer_daprds_errors() {
    let h = Harness::start(Kind::Embedded).await;
    let not_hosted = h
        .put_reminder(&ActorRef::new("Nope", "1"), "r", r#"{"dueTime":"1s"}"#)
        .await;
    assert_eq!(
        answer(&not_hosted),
        (
            403,
            r#"{"errorCode":"ERR_ACTOR_REMINDER_NON_HOSTED","message":"operations on actor reminders are only possible on hosted actor types"}"#.into()
        )
    );
    assert_eq!(
        answer(&h.get_reminder(&demo("1"), "nope").await),
        (
            404,
            r#"{"errorCode":"ERR_ACTOR_REMINDER_NOT_FOUND","message":"actor reminder not found: nope"}"#.into()
        )
    );
    assert_eq!(
        h.put_reminder(&demo("1"), "once", r#"{"dueTime":"1h"}"#)
            .await
            .status,
        204
    );
    assert_eq!(
        answer(
            &h.put_reminder(&demo("1"), "once", r#"{"dueTime":"1h","overwrite":false}"#)
                .await
        ),
        (
            409,
            r#"{"errorCode":"ERR_ACTOR_REMINDER_ALREADY_EXISTS","message":"actor reminder already exists: once"}"#.into()
        )
    );
    let (status, body) = answer(
        &h.put_reminder(&demo("1"), "y", r#"{"dueTime":"1s","period":"P1Y"}"#)
            .await,
    );
    assert_eq!(status, 500);
    assert!(
        body.starts_with(
            r#"{"errorCode":"ERR_ACTOR_REMINDER_CREATE","message":"error creating actor reminder: "#
        ) && body.contains("P1Y"),
        "{body}"
    );
    assert_eq!(
        answer(&h.put_reminder(&demo("1"), "e", "").await),
        (
            400,
            r#"{"errorCode":"ERR_MALFORMED_REQUEST","message":"failed deserializing HTTP body: EOF"}"#.into()
        )
    );
    let state = http(
        h.http(),
        "GET",
        "/v1.0/actors/DemoActor/1/state/k",
        &[],
        b"",
    )
    .await;
    assert_eq!(answer(&state), (204, String::new()));
    let timer = http(
        h.http(),
        "PUT",
        "/v1.0/actors/DemoActor/1/timers/t",
        &[],
        br#"{"dueTime":"1s","period":"nope"}"#,
    )
    .await;
    assert_eq!(timer.status, 500);
    assert!(
        timer.text().contains(
            r#""errorCode":"ERR_ACTOR_TIMER_CREATE","message":"error creating actor timer: "#
        ),
        "{}",
        timer.text()
    );
    let missing = http(
        h.http(),
        "DELETE",
        "/v1.0/actors/DemoActor/1/reminders/none",
        &[],
        b"",
    )
    .await;
    assert_eq!(missing.status, 204);
    let m = http(
        h.http(),
        "POST",
        "/v1.0/actors/DemoActor/1/method/missing",
        &[],
        b"",
    )
    .await;
    assert_eq!(
        answer(&m),
        (
            500,
            r#"{"errorCode":"ERR_ACTOR_INVOKE_METHOD","message":"error invoke actor method: actor method not found: actors/DemoActor/1/method/missing"}"#.into()
        )
    );
    let b = http(
        h.http(),
        "POST",
        "/v1.0/actors/DemoActor/1/method/boom",
        &[],
        b"",
    )
    .await;
    assert_eq!(
        answer(&b),
        (
            500,
            r#"{"errorCode":"ERR_ACTOR_INVOKE_METHOD","message":"error invoke actor method: error from actor service: (500) boom"}"#.into()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_paths_read_as_daprds_router_reads_them() {
    // daprd 1.18.2, e2e/dapr/differential.sh B17, B14, B9, B28.
    let h = Harness::start(Kind::Embedded).await;
    let call = |method: &'static str, path: &'static str, body: &'static [u8]| {
        let addr = h.http();
        async move { http(addr, method, path, &[], body).await }
    };
    // The actor id is query-unescaped: `+` is a space.
    let put = call(
        "PUT",
        "/v1.0/actors/DemoActor/a+b/reminders/r",
        br#"{"dueTime":"1h"}"#,
    );
    assert_eq!(put.await.status, 204);
    let got = call("GET", "/v1.0/actors/DemoActor/a%20b/reminders/r", b"").await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.json()["actorID"], "a b");
    // An empty type or id matches none of daprd's routes.
    for path in [
        "/v1.0/actors/DemoActor//reminders/r",
        "/v1.0/actors//1/reminders/r",
    ] {
        let r = call("GET", path, b"").await;
        assert_eq!(
            answer(&r),
            (
                404,
                r#"{"errorCode":"ERR_DIRECT_INVOKE","message":"failed getting app id either from the URL path or the header dapr-app-id"}"#.into()
            ),
            "{path}"
        );
    }
    // Bytes that are not UTF-8 get as far as the Scheduler call, which cannot marshal them.
    let marshal = "rpc error: code = Internal desc = grpc: error while marshaling: string field contains invalid UTF-8";
    let put = call(
        "PUT",
        "/v1.0/actors/DemoActor/1/reminders/bad%FFname",
        br#"{"dueTime":"1h"}"#,
    );
    assert_eq!(
        answer(&put.await),
        (
            500,
            format!(
                r#"{{"errorCode":"ERR_ACTOR_REMINDER_CREATE","message":"error creating actor reminder: {marshal}"}}"#
            )
        )
    );
    let get = call("GET", "/v1.0/actors/DemoActor/%C0%AE/reminders/r", b"").await;
    assert_eq!(
        answer(&get),
        (
            500,
            format!(
                r#"{{"errorCode":"ERR_ACTOR_REMINDER_GET","message":"error getting actor reminder: api error: code = Internal desc = failed to get job due to: {marshal}"}}"#
            )
        )
    );
    let delete = call("DELETE", "/v1.0/actors/DemoActor/1/reminders/%FF", b"").await;
    assert_eq!(delete.status, 500);
    // The body's first JSON value counts; what follows is never read.
    let put = call(
        "PUT",
        "/v1.0/actors/DemoActor/1/reminders/t",
        b"{\"dueTime\":\"1h\"}x",
    );
    assert_eq!(put.await.status, 204);
    assert_eq!(h.get_reminder(&demo("1"), "t").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn method_calls_pass_through_one_at_a_time_per_actor() {
    let h = Harness::start(Kind::Embedded).await;
    let r = http(
        h.http(),
        "POST",
        "/v1.0/actors/DemoActor/1/method/Ping?x=1",
        &[("x-echo", "hello"), ("content-type", "application/json")],
        br#"{"a":1}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-app"), Some("yes"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.text(), r#"{"method":"Ping","echo":"hello","body":7}"#);
    // gRPC InvokeActor: the same call, metadata as headers.
    let mut grpc = h.grpc().await;
    let answer = grpc
        .invoke_actor(rv1::InvokeActorRequest {
            actor_type: "DemoActor".into(),
            actor_id: "1".into(),
            method: "Ping".into(),
            data: b"{}".to_vec(),
            metadata: [("x-echo".to_owned(), "grpc".to_owned())].into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.data, br#"{"method":"Ping","echo":"grpc","body":2}"#);

    // Turn-based: concurrent calls to one actor run one at a time; to different actors,
    // side by side.
    *h.app.method_delay.lock().unwrap() = Duration::from_millis(30);
    let mut calls = Vec::new();
    for i in 0..16 {
        let addr = h.http();
        let id = if i % 2 == 0 { "a" } else { "b" };
        calls.push(tokio::spawn(async move {
            http(
                addr,
                "PUT",
                &format!("/v1.0/actors/DemoActor/{id}/method/Work"),
                &[],
                b"",
            )
            .await
            .status
        }));
    }
    for call in calls {
        assert_eq!(call.await.unwrap(), 200);
    }
    assert_eq!(h.app.max_concurrent("a"), 1);
    assert_eq!(h.app.max_concurrent("b"), 1);
    assert_eq!(h.app.calls_of("method", "Work").len(), 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_actors_are_deactivated_after_the_apps_idle_timeout() {
    let h = Harness::start_with_config(
        Kind::Embedded,
        Some(r#"{"entities":["DemoActor","Other"],"actorIdleTimeout":"10s","entitiesConfig":[{"entities":["Other"],"actorIdleTimeout":"1h"}]}"#),
    )
    .await;
    let deactivated = |id: &str| {
        h.app
            .calls_of("deactivate", "")
            .iter()
            .filter(|c| c.actor_id == id)
            .count()
    };
    for path in [
        "/v1.0/actors/DemoActor/7/method/Ping",
        "/v1.0/actors/Other/7/method/Ping",
    ] {
        assert_eq!(http(h.http(), "POST", path, &[], b"").await.status, 200);
    }
    // The calls ended at `called` (the clock stands still), so DemoActor/7 is due for
    // deactivation 10 s later: once the deactivation loop's timer for that has seen 5 s pass
    // and slept on, it has not deactivated the actor.
    let called = h.clock.now();
    h.clock.advance(TimeDelta::seconds(5));
    h.timers
        .slept_on(
            called + TimeDelta::seconds(10),
            called + TimeDelta::seconds(5),
        )
        .await;
    assert_eq!(deactivated("7"), 0, "not idle for 10 s yet");
    h.clock.advance(TimeDelta::seconds(6));
    eventually("DemoActor/7 is deactivated", async || deactivated("7") == 1).await;
    let calls = h.app.calls_of("deactivate", "");
    assert_eq!(calls.len(), 1, "Other has its own 1 h timeout: {calls:?}");
    assert_eq!(calls[0].actor_type, "DemoActor");
    // The next call activates it again, and the timeout starts over.
    assert_eq!(
        http(
            h.http(),
            "POST",
            "/v1.0/actors/DemoActor/7/method/Ping",
            &[],
            b""
        )
        .await
        .status,
        200
    );
    h.clock.advance(TimeDelta::seconds(11));
    eventually("deactivated a second time", async || deactivated("7") == 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_fire_in_memory_until_deleted() {
    let h = Harness::start(Kind::Embedded).await;
    let r = http(
        h.http(),
        "PUT",
        "/v1.0/actors/DemoActor/1/timers/t1",
        &[],
        br#"{"dueTime":"1s","period":"5s","callback":"on_timer","data":{"k":1}}"#,
    )
    .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let ticks = || h.app.calls_of("timer", "t1").len();
    // Step the clock a second at a time until each tick arrives (the next one is armed a
    // period after the callback returned, which the test cannot observe).
    for want in 1..=3 {
        for _ in 0..200 {
            if ticks() >= want {
                break;
            }
            h.clock.advance(TimeDelta::seconds(1));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(ticks(), want);
    }
    let at: Vec<i64> = offsets(&h.app.calls_of("timer", "t1"));
    assert!(
        at[0] >= 1 && at[1] - at[0] >= 5 && at[2] - at[1] >= 5,
        "{at:?}"
    );
    assert_eq!(
        h.app.calls_of("timer", "t1")[0].body,
        r#"{"data":{"k":1},"callback":"on_timer","dueTime":"1s","period":"5s"}"#
    );
    // The next tick is armed a period after the third callback returned (by `now`, less
    // than a period ago): due in `(now, now + 5 s]`.
    let now = h.clock.now();
    let next = now + TimeDelta::seconds(5);
    h.timers
        .armed_in(now, next, "the timer's next tick to be armed", |n| n == 1)
        .await;
    let r = http(
        h.http(),
        "DELETE",
        "/v1.0/actors/DemoActor/1/timers/t1",
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 204);
    // The timer's task drops its timer for the next tick only when it stops; gone before the
    // clock reached it, it never fired. A timer that goes on keeps it armed and this fails.
    h.timers
        .armed_in(now, next, "the deleted timer to stop", |n| n == 0)
        .await;
    h.clock.advance(TimeDelta::seconds(20));
    assert_eq!(ticks(), 3, "a deleted timer stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_reminders_round_trip_like_daprd() {
    let h = Harness::start(Kind::Embedded).await;
    let mut grpc = h.grpc().await;
    grpc.register_actor_reminder(rv1::RegisterActorReminderRequest {
        actor_type: "DemoActor".into(),
        actor_id: "g".into(),
        name: "r".into(),
        due_time: "1s".into(),
        period: "R2/PT5S".into(),
        data: b"hi".to_vec(),
        ..Default::default()
    })
    .await
    .unwrap();
    let got = grpc
        .get_actor_reminder(rv1::GetActorReminderRequest {
            actor_type: "DemoActor".into(),
            actor_id: "g".into(),
            name: "r".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.period.as_deref(), Some("@every 5s"));
    assert_eq!(got.due_time.as_deref(), Some("1s"));
    // daprd stores gRPC bytes as json.Marshal([]byte): a base64 JSON string.
    let raw = h.get_reminder(&ActorRef::new("DemoActor", "g"), "r").await;
    assert!(raw.text().contains(r#""data":"aGk=""#), "{}", raw.text());
    h.run_for(TimeDelta::seconds(30)).await;
    let ticks = h.app.reminds("g", "r");
    assert_eq!(ticks.len(), 2);
    assert_eq!(ticks[0].body, r#"{"data":"aGk=","dueTime":"","period":""}"#);
    let missing = grpc
        .get_actor_reminder(rv1::GetActorReminderRequest {
            actor_type: "DemoActor".into(),
            actor_id: "g".into(),
            name: "r".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    let denied = grpc
        .register_actor_reminder(rv1::RegisterActorReminderRequest {
            actor_type: "Nope".into(),
            actor_id: "g".into(),
            name: "r".into(),
            due_time: "1s".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reminders_wait_while_the_app_is_down() {
    let mut h = Harness::start(Kind::Embedded).await;
    let r = h
        .put_reminder(&demo("1"), "down", r#"{"dueTime":"5s"}"#)
        .await;
    assert_eq!(r.status, 204);
    // The app goes away before the reminder is due.
    h.app_stop.cancel();
    let app = h.app_addr;
    eventually("the app to be down", async || {
        tokio::net::TcpStream::connect(app).await.is_err()
    })
    .await;
    h.run_for(TimeDelta::seconds(10)).await;
    assert!(h.app.reminds("1", "down").is_empty());
    let engine = h.sidecar().engine().unwrap();
    assert_eq!(engine.sync().await.unwrap().staged, 1, "staged, not failed");
    // Back on the same port: the config is read again and the reminder goes out, once.
    h.app_stop = CancellationToken::new();
    common::actor_app::serve_until(h.app.clone(), Some(h.app_addr), h.app_stop.clone()).await;
    eventually("the staged reminder is delivered", async || {
        h.app.reminds("1", "down").len() == 1
    })
    .await;
    h.run_for(TimeDelta::seconds(60)).await;
    assert_eq!(h.app.reminds("1", "down").len(), 1);
    assert_eq!(h.get_reminder(&demo("1"), "down").await.status, 404);
}
