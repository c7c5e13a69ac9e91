//! An in-process `jobsd scheduler` replica on 127.0.0.1 over any store, driven by a manual
//! clock, with a `dapr.proto.scheduler.v1` client connected to it.

use std::net::SocketAddr;
use std::sync::Arc;

use chrono::TimeDelta;
use jobsd::app::Replica;
use jobsd::clock::ManualClock;
use jobsd::config;
use jobsd::proto::dapr_scheduler as sv1;
use jobsd::proto::dapr_scheduler::scheduler_client::SchedulerClient;
use jobsd::store::{self, Store};
use tonic::transport::Channel;

use super::{any_port, app_metadata, clockwork, t0};

/// A replica's settings: listening on `listen`, metrics on `metrics` (or none).
fn cfg(listen: SocketAddr, metrics: Option<SocketAddr>) -> config::Replica {
    config::Replica {
        id: "dapr-scheduler-server-0".into(),
        listen,
        broadcast_override: None,
        data_dir: "unused".into(),
        cluster: None,
        tls: None,
        metrics,
        history: jobsd::engine::history::Options::default(),
        horizon: Some(std::time::Duration::from_secs(300)),
        store: jobsd::store::RedbOptions::default(),
        healthz: None,
        placement: None,
    }
}

/// A running replica, its clock and a client.
pub struct Rep {
    pub replica: Replica,
    pub clock: ManualClock,
    client: SchedulerClient<Channel>,
}

impl Rep {
    /// A replica on a free port over a fresh memory store, its clock at `t0()`.
    pub async fn start() -> Rep {
        Self::start_on(
            any_port(),
            Arc::new(store::Memory::new()),
            ManualClock::new(t0()),
        )
        .await
    }

    /// A replica on `listen` over `store`, driven by `clock`.
    pub async fn start_on(listen: SocketAddr, store: Arc<dyn Store>, clock: ManualClock) -> Rep {
        Self::start_cfg(cfg(listen, None), store, clock).await
    }

    /// A replica on a free port over a fresh memory store, its clock at `t0()`, serving its
    /// metrics on another free port (`replica.metrics_addr`).
    pub async fn start_metered() -> Rep {
        let cfg = cfg(any_port(), Some(any_port()));
        Self::start_cfg(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await
    }

    /// A replica on a free port over a fresh memory store serving TLS with `server` (mTLS
    /// when it has a client CA); its own client connects with `client`.
    pub async fn start_tls(server: jobsd::tls::ServerTls, client: jobsd::tls::ClientTls) -> Rep {
        let mut cfg = cfg(any_port(), None);
        cfg.tls = Some(server);
        let store = Arc::new(store::Memory::new());
        Self::start_with_client(cfg, store, ManualClock::new(t0()), Some(client)).await
    }

    async fn start_cfg(cfg: config::Replica, store: Arc<dyn Store>, clock: ManualClock) -> Rep {
        Self::start_with_client(cfg, store, clock, None).await
    }

    async fn start_with_client(
        cfg: config::Replica,
        store: Arc<dyn Store>,
        clock: ManualClock,
        tls: Option<jobsd::tls::ClientTls>,
    ) -> Rep {
        let replica = Replica::start_with(cfg, store, Arc::new(clock.clone()))
            .await
            .unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoint =
            tonic::transport::Endpoint::from_shared(format!("{scheme}://{}", replica.addr))
                .unwrap();
        if let Some(tls) = &tls {
            endpoint = endpoint.tls_config(tls.tonic()).unwrap();
        }
        let client = SchedulerClient::new(endpoint.connect_lazy());
        Rep {
            replica,
            clock,
            client,
        }
    }

    /// A replica on `listen` over the redb store in `dir` (a restart: the same dir and port).
    pub async fn on_redb(listen: SocketAddr, dir: &std::path::Path, clock: ManualClock) -> Rep {
        let store: Arc<dyn Store> = Arc::new(store::Redb::open(dir).unwrap());
        Self::start_on(listen, store, clock).await
    }

    /// The address the replica announces.
    pub fn address(&self) -> String {
        self.replica.broadcast_address.clone()
    }

    /// A client of the replica (a clone of one channel).
    pub fn client(&self) -> SchedulerClient<Channel> {
        self.client.clone()
    }

    /// Waits until nothing is out or being written and nothing is due.
    pub async fn settle(&self) {
        clockwork::settle(self.replica.engine(), &self.clock).await;
    }

    /// Steps the clock to `now + d`, stopping at every fire time on the way.
    pub async fn run_for(&self, d: TimeDelta) {
        clockwork::run_for(self.replica.engine(), &self.clock, d).await;
    }

    /// Triggers due while no stream could take them.
    pub async fn staged(&self) -> usize {
        self.replica.engine().sync().await.unwrap().staged
    }

    /// Whether the replica holds job `name` of `myapp`.
    pub async fn exists(&self, name: &str) -> bool {
        self.client()
            .get_job(sv1::GetJobRequest {
                name: name.into(),
                metadata: Some(app_metadata("myapp")),
            })
            .await
            .is_ok()
    }

    /// Schedules `job` as `name` of `myapp` (create-only).
    pub async fn schedule(&self, name: &str, job: sv1::Job) {
        self.schedule_for(app_metadata("myapp"), name, job).await;
    }

    /// Schedules `job` as `name` of the app or actor in `metadata` (create-only).
    pub async fn schedule_for(&self, metadata: sv1::JobMetadata, name: &str, job: sv1::Job) {
        self.client()
            .schedule_job(sv1::ScheduleJobRequest {
                name: name.into(),
                job: Some(job),
                metadata: Some(metadata),
                overwrite: false,
            })
            .await
            .unwrap();
    }

    /// Stops the replica gracefully; its clock, for a restart.
    pub async fn stop(self) -> ManualClock {
        self.replica.shutdown_token().cancel();
        self.replica.wait().await.unwrap();
        self.clock
    }
}
