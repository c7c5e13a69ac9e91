//! A Dapr Scheduler stand-in for remote-mode tests: Dapr's Scheduler service (jobsd's, over an
//! engine that never fires) and nothing of jobsd's beside it, so `jobsd.scheduler.v1` calls
//! answer Unimplemented as a real Dapr Scheduler's would.

use std::sync::Arc;

use jobsd::clock::ManualClock;
use jobsd::engine::Engine;
use jobsd::proto::dapr_scheduler as sv1;
use jobsd::replica::pool::Pool;
use jobsd::replica::server::SchedulerService;
use jobsd::store;
use tokio_util::sync::CancellationToken;

use super::{app_metadata, t0};

/// A Dapr Scheduler: Dapr's Scheduler service (jobsd's, over an engine that never fires) and
/// nothing of jobsd's beside it.
pub struct DaprScheduler {
    /// The engine behind it: what it stored.
    pub engine: Engine,
    /// `host:port` it listens on.
    pub address: String,
    /// Kept so that WatchHosts keeps its stream open.
    _hosts: tokio::sync::watch::Sender<Vec<String>>,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl DaprScheduler {
    pub async fn start() -> DaprScheduler {
        let engine = Engine::new(
            Arc::new(store::Memory::new()),
            Arc::new(ManualClock::new(t0())),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (hosts_tx, hosts) = tokio::sync::watch::channel(vec![address.clone()]);
        let stop = CancellationToken::new();
        let service =
            SchedulerService::new(engine.clone(), Arc::new(Pool::new()), hosts, stop.clone());
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service.into_server())
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    stop.clone().cancelled_owned(),
                ),
        );
        DaprScheduler {
            engine,
            address,
            _hosts: hosts_tx,
            stop,
            server,
        }
    }

    pub async fn exists(&self, name: &str) -> bool {
        self.engine
            .get_job(sv1::GetJobRequest {
                name: name.into(),
                metadata: Some(app_metadata("myapp")),
            })
            .await
            .is_ok()
    }

    pub async fn stop(self) {
        self.stop.cancel();
        self.server.await.unwrap().unwrap();
    }
}
