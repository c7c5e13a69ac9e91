//! The whole sidecar in-process: jobs scheduled through the real HTTP/gRPC API fire on a
//! manual clock and reach real HTTP and gRPC apps through the real delivery channels.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::{clockwork, eventually, fast_health_check, sidecar_config, t0};
use jobsd::app::Sidecar;
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::proto::runtime::app_callback_server::{AppCallback, AppCallbackServer};
use jobsd::proto::runtime::{JobEventRequest, JobEventResponse};
use jobsd::store::{self, Store};
use tokio::net::TcpListener;

/// A gRPC app implementing `AppCallback.OnJobEvent`.
#[derive(Clone, Default)]
struct GrpcApp {
    requests: Arc<Mutex<Vec<JobEventRequest>>>,
}

#[tonic::async_trait]
impl AppCallback for GrpcApp {
    async fn on_job_event(
        &self,
        req: tonic::Request<JobEventRequest>,
    ) -> Result<tonic::Response<JobEventResponse>, tonic::Status> {
        self.requests.lock().unwrap().push(req.into_inner());
        Ok(tonic::Response::new(JobEventResponse {}))
    }
}

async fn serve_grpc_app(app: GrpcApp) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(AppCallbackServer::new(app))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
    });
    addr
}

fn cfg(app: Option<SocketAddr>, protocol: AppProtocol) -> config::Sidecar {
    sidecar_config(app, protocol, &[])
}

struct Running {
    sidecar: Sidecar,
    clock: ManualClock,
    http: SocketAddr,
    client: reqwestless::Client,
}

/// A tiny HTTP client over hyper-util for the API calls of these tests.
mod reqwestless {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client as HyperClient;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;

    pub struct Client(HyperClient<HttpConnector, Full<Bytes>>);

    impl Client {
        pub fn new() -> Self {
            Client(HyperClient::builder(TokioExecutor::new()).build_http())
        }

        pub async fn send(&self, method: &str, url: &str, body: &str) -> (u16, String) {
            let req = http::Request::builder()
                .method(method)
                .uri(url)
                .body(Full::new(Bytes::from(body.to_owned())))
                .unwrap();
            let resp = self.0.request(req).await.unwrap();
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    }
}

impl Running {
    async fn start(cfg: config::Sidecar, store: Arc<dyn Store>) -> Running {
        let clock = ManualClock::new(t0());
        Self::start_at(cfg, store, clock).await
    }

    async fn start_at(cfg: config::Sidecar, store: Arc<dyn Store>, clock: ManualClock) -> Running {
        let sidecar = Sidecar::start_with(cfg, store, Arc::new(clock.clone()))
            .await
            .unwrap();
        let http = sidecar.http_addrs[0];
        Running {
            sidecar,
            clock,
            http,
            client: reqwestless::Client::new(),
        }
    }

    async fn post(&self, name: &str, body: &str) {
        let url = format!("http://{}/v1.0/jobs/{name}", self.http);
        let (status, text) = self.client.send("POST", &url, body).await;
        assert_eq!(status, 204, "{text}");
    }

    async fn exists(&self, name: &str) -> bool {
        let url = format!("http://{}/v1.0/jobs/{name}", self.http);
        self.client.send("GET", &url, "").await.0 == 200
    }

    /// Waits until nothing is out or being written and nothing is due.
    async fn settle(&self) {
        clockwork::settle(self.sidecar.engine().unwrap(), &self.clock).await;
    }

    /// Steps the clock to `now + d`, stopping at every fire time on the way.
    async fn run_for(&self, d: TimeDelta) {
        clockwork::run_for(self.sidecar.engine().unwrap(), &self.clock, d).await;
    }

    async fn stop(self) {
        self.sidecar.shutdown_token().cancel();
        self.sidecar.wait().await.unwrap();
    }
}

#[tokio::test]
async fn http_app_gets_jobs_with_daprd_bodies_and_results_apply() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("gone".into(), 404);
    app.status.lock().unwrap().insert("broken".into(), 500);
    let addr = app::serve(app.clone()).await;
    let r = Running::start(
        cfg(Some(addr), AppProtocol::Http),
        Arc::new(store::Memory::new()),
    )
    .await;

    r.post("str", r#"{"dueTime":"1s","data":"someData"}"#).await;
    r.post("obj", r#"{"dueTime":"1s","data":{"expression":"val"}}"#)
        .await;
    r.post("num", r#"{"dueTime":"1s","data":123}"#).await;
    r.post("none", r#"{"dueTime":"1s"}"#).await;
    r.post("gone", r#"{"dueTime":"1s"}"#).await;
    r.post("broken", r#"{"dueTime":"1s"}"#).await;
    r.post("every", r#"{"schedule":"@every 1s","ttl":"3s"}"#)
        .await;
    r.run_for(TimeDelta::seconds(30)).await;

    assert_eq!(app.bodies("str"), [r#""someData""#]);
    assert_eq!(app.bodies("obj"), [r#"{"expression":"val"}"#]);
    assert_eq!(app.bodies("num"), ["123"]);
    assert_eq!(app.bodies("none"), [""]);
    // 404 counts as success: delivered once, job gone.
    assert_eq!(app.bodies("gone").len(), 1);
    // 500 fails every attempt: the default policy delivers 4 times, then gives up.
    assert_eq!(app.bodies("broken").len(), 4);
    assert_eq!(app.bodies("every").len(), 3);
    for name in ["str", "gone", "broken", "every"] {
        assert!(
            !r.exists(name).await,
            "{name} should be finished and deleted"
        );
    }
    r.stop().await;
}

#[tokio::test]
async fn grpc_app_gets_on_job_event_with_data_unchanged() {
    let app = GrpcApp::default();
    let addr = serve_grpc_app(app.clone()).await;
    let r = Running::start(
        cfg(Some(addr), AppProtocol::Grpc),
        Arc::new(store::Memory::new()),
    )
    .await;
    r.post("g", r#"{"dueTime":"0s","data":{"k":"v"}}"#).await;
    r.post("n", r#"{"dueTime":"0s"}"#).await;
    r.run_for(TimeDelta::seconds(1)).await;
    let reqs = app.requests.lock().unwrap().clone();
    let g = reqs.iter().find(|q| q.name == "g").expect("g delivered");
    assert_eq!(g.method, "job/g");
    let data = g.data.as_ref().unwrap();
    assert_eq!(data.type_url, "type.googleapis.com/google.protobuf.Value");
    assert_eq!(g.content_type, "type.googleapis.com/google.protobuf.Value");
    let value: prost_types::Value = prost::Message::decode(data.value.as_slice()).unwrap();
    assert!(matches!(
        value.kind,
        Some(prost_types::value::Kind::StructValue(_))
    ));
    let n = reqs.iter().find(|q| q.name == "n").expect("n delivered");
    assert_eq!(n.data, None);
    assert_eq!(n.content_type, "");
    r.stop().await;
}

#[tokio::test]
async fn without_app_port_triggers_are_staged_until_restart_with_an_app() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(store::Redb::open(dir.path()).unwrap());
    let r = Running::start(cfg(None, AppProtocol::Http), store.clone()).await;
    r.post("waiting", r#"{"dueTime":"1s"}"#).await;
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(r.sidecar.engine().unwrap().sync().await.unwrap().staged, 1);
    let clock = r.clock.clone();
    r.stop().await;

    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let store: Arc<dyn Store> = Arc::new(store::Redb::open(dir.path()).unwrap());
    let r = Running::start_at(cfg(Some(addr), AppProtocol::Http), store, clock).await;
    r.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(app.bodies("waiting").len(), 1);
    r.stop().await;
}

#[tokio::test]
async fn unhealthy_app_holds_triggers_until_it_recovers() {
    let app = HttpApp::new();
    *app.healthy.lock().unwrap() = false;
    let addr = app::serve(app.clone()).await;
    let mut c = cfg(Some(addr), AppProtocol::Http);
    c.health_check = Some(fast_health_check());
    let r = Running::start(c, Arc::new(store::Memory::new())).await;
    r.post("held", r#"{"dueTime":"0s"}"#).await;
    r.run_for(TimeDelta::seconds(5)).await;
    assert!(app.bodies("held").is_empty());
    assert_eq!(r.sidecar.engine().unwrap().sync().await.unwrap().staged, 1);

    *app.healthy.lock().unwrap() = true;
    // The probe loop runs on real time; wait (bounded) for the release.
    eventually("the held trigger", async || !app.bodies("held").is_empty()).await;
    r.settle().await;
    assert_eq!(app.bodies("held").len(), 1);
    r.stop().await;
}

#[tokio::test]
async fn acked_one_shot_is_not_redelivered_after_restart_on_redb() {
    let dir = tempfile::tempdir().unwrap();
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let store: Arc<dyn Store> = Arc::new(store::Redb::open(dir.path()).unwrap());
    let r = Running::start(cfg(Some(addr), AppProtocol::Http), store).await;
    r.post("once", r#"{"dueTime":"1s"}"#).await;
    r.post("tick", r#"{"schedule":"@every 1s","repeats":5}"#)
        .await;
    r.run_for(TimeDelta::seconds(2)).await;
    let clock = r.clock.clone();
    r.stop().await;
    assert_eq!(app.bodies("once").len(), 1);
    assert_eq!(app.bodies("tick").len(), 2);

    let store: Arc<dyn Store> = Arc::new(store::Redb::open(dir.path()).unwrap());
    let r = Running::start_at(cfg(Some(addr), AppProtocol::Http), store, clock).await;
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(app.bodies("once").len(), 1);
    assert_eq!(app.bodies("tick").len(), 5);
    r.stop().await;
}

#[tokio::test]
async fn resiliency_retries_each_delivery_before_the_failure_policy_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("resiliency.yaml"),
        r#"apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata:
  name: r
spec:
  policies:
    retries:
      twice:
        policy: constant
        duration: 10ms
        maxRetries: 2
  targets:
    apps:
      myapp:
        retry: twice
"#,
    )
    .unwrap();
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("flaky".into(), 503);
    let addr = app::serve(app.clone()).await;
    let mut c = cfg(Some(addr), AppProtocol::Http);
    c.resources_paths = vec![dir.path().to_owned()];
    let r = Running::start(c, Arc::new(store::Memory::new())).await;
    r.post("flaky", r#"{"dueTime":"0s","failurePolicy":{"drop":{}}}"#)
        .await;
    r.run_for(TimeDelta::seconds(1)).await;
    // One trigger, dropped after failing: 1 call + 2 resiliency retries.
    assert_eq!(app.bodies("flaky").len(), 3);
    r.stop().await;
}
