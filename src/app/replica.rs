//! The `jobsd scheduler` role: one Dapr Scheduler replica. The engine fires into the WatchJobs
//! stream pool ([`crate::replica::pool`]); the Scheduler service, gRPC health and reflection
//! share one port.
//!
//! Alone (no `--etcd-endpoints`) it runs over the embedded store and the host list is this
//! replica. In a cluster the store is etcd, the engine follows it and fires only the
//! partitions this member owns ([`crate::replica::cluster`]), and the host list is the live
//! members.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::config;
use crate::engine::{self, Engine};
use crate::observe::Metrics;
use crate::replica::cluster::{Cluster, ClusterConfig};
use crate::replica::jobs;
use crate::replica::placement::{self, Placement};
use crate::replica::pool::Pool;
use crate::replica::server::{self, SchedulerService};
use crate::store::{self, Store};

use super::metrics::{bind_metrics, sample_engine, serve_metrics};
use super::{Error, bind};

/// HTTP/2 keepalive of the Scheduler's server (3 s, 5 s timeout): a daprd that vanished
/// without closing its streams is noticed, and its triggers go back to the engine.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(3);
/// See [`KEEPALIVE_INTERVAL`].
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// A running scheduler replica: its address and the handle to stop it.
pub struct Replica {
    /// Where the Scheduler API listens (port resolved, so `:0` becomes the real port).
    pub addr: SocketAddr,
    /// The address announced to sidecars through WatchHosts.
    pub broadcast_address: String,
    /// Where the metrics server listens; `None` with `--enable-metrics=false`.
    pub metrics_addr: Option<SocketAddr>,
    /// Cancelled to stop the replica.
    shutdown: CancellationToken,
    /// The gRPC server task.
    server: JoinHandle<Result<(), Error>>,
    /// The metrics server (and the healthz server), stopped with the gRPC server.
    metrics_server: JoinSet<Result<(), Error>>,
    /// The host list WatchHosts streams (the live members in a cluster).
    hosts: watch::Sender<Vec<String>>,
    /// Leaves the cluster (if any), then closes the streams; awaited before the engine stops.
    closer: JoinHandle<()>,
    /// The WatchJobs streams, closed before the engine stops.
    pool: Arc<Pool>,
    /// Closed last, once no request can write any more.
    store: Arc<dyn Store>,
    /// Stops the trigger loop once the server is down.
    engine_stop: CancellationToken,
    /// The trigger loop.
    engine_task: JoinHandle<()>,
    /// The engine, for tests and tools (stats, sync).
    engine: Engine,
}

impl Replica {
    /// Starts serving with the system clock: as a member of the cluster on
    /// `--etcd-endpoints`, or alone over the durable store in `cfg.data_dir`.
    pub async fn start(cfg: config::Replica) -> Result<Replica, Error> {
        if let Some(cluster) = &cfg.cluster {
            let store = Arc::new(
                store::Etcd::connect_partitioned(
                    &cluster.endpoints,
                    &cluster.namespace,
                    cluster.tls.as_ref(),
                    cluster.partitions,
                )
                .await?,
            );
            let moved = store.move_legacy_keys().await?;
            if moved > 0 {
                tracing::info!(
                    keys = moved,
                    "moved jobsd's keys from <prefix>/jobsd/ to <prefix>/x-jobsd/ (out of Dapr's jobs prefix)"
                );
            }
            return Self::start_clustered(cfg, store, Arc::new(SystemClock)).await;
        }
        let metrics = metrics_of(&cfg);
        let redb = store::Redb::open_with(&cfg.data_dir, cfg.store.clone())?;
        redb.observe(metrics.store());
        Self::launch(cfg, Arc::new(redb), Arc::new(SystemClock), None, metrics).await
    }

    /// Starts serving alone over a given store and clock (tests use a memory store and a
    /// manual clock).
    pub async fn start_with(
        cfg: config::Replica,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Replica, Error> {
        let metrics = metrics_of(&cfg);
        Self::launch(cfg, store, clock, None, metrics).await
    }

    /// Starts serving as a member of the cluster on `store`'s etcd (`cfg.cluster` must be
    /// set).
    pub async fn start_clustered(
        cfg: config::Replica,
        store: Arc<store::Etcd>,
        clock: Arc<dyn Clock>,
    ) -> Result<Replica, Error> {
        let dyn_store: Arc<dyn Store> = store.clone();
        let metrics = metrics_of(&cfg);
        store.observe(metrics.store());
        Self::launch(cfg, dyn_store, clock, Some(store), metrics).await
    }

    async fn launch(
        cfg: config::Replica,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        etcd: Option<Arc<store::Etcd>>,
        metrics: Metrics,
    ) -> Result<Replica, Error> {
        // Bound first: a port in use fails before the store is loaded and triggers fire.
        let listener = bind(cfg.listen).await?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: cfg.listen,
            source,
        })?;
        let metrics_listener = bind_metrics(cfg.metrics).await?;
        let healthz_listener = match cfg.healthz {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        let placement_listener = match cfg.placement.as_ref().and_then(|p| p.port) {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        let broadcast_address = cfg.broadcast_address(addr);

        let pool = Arc::new(Pool::with_metrics(metrics.scheduler()));
        let options = engine::Options {
            metrics: metrics.engine(),
            history: cfg.history,
            horizon: cfg.horizon,
        };
        let engine_stop = CancellationToken::new();
        // Triggers due before any daprd connects find no stream and are staged until one does.
        let (hosts, hosts_rx) = watch::channel(vec![broadcast_address.clone()]);
        let (engine, engine_task, cluster) = match (etcd, &cfg.cluster) {
            (Some(etcd), Some(settings)) => {
                let (engine, task) = Engine::follow_with(
                    store.clone(),
                    clock.clone(),
                    pool.clone(),
                    engine_stop.clone(),
                    options,
                );
                let cluster = Cluster::start(
                    ClusterConfig {
                        id: cfg.id.clone(),
                        address: broadcast_address.clone(),
                        lease_ttl: settings.lease_ttl,
                        partitions: settings.partitions,
                        namespace: settings.namespace.clone(),
                        horizon: cfg.horizon,
                    },
                    etcd,
                    engine.clone(),
                    hosts.clone(),
                );
                pool.gate(cluster.standing());
                pool.follow_place(cluster.place());
                follow_concurrency_place(&engine, cluster.place());
                (engine, task, Some(cluster))
            }
            _ => {
                let (engine, task) = Engine::start_with(
                    store.clone(),
                    clock.clone(),
                    pool.clone(),
                    engine_stop.clone(),
                    options,
                )
                .await?;
                (engine, task, None)
            }
        };
        pool.attach(engine.clone());
        sample_engine(&metrics, &engine, clock);
        let streams = pool.clone();
        let sidecars = metrics.scheduler();
        metrics.on_scrape(Arc::new(move || {
            sidecars.set_sidecars(streams.streams());
            Box::pin(std::future::ready(()))
        }));

        // Who fires a job: where calls only its owner may apply go (alone: this replica).
        let directory = cluster.as_ref().map(Cluster::directory);
        let shutdown = CancellationToken::new();
        let placement = cfg.placement.clone().map(|settings| {
            let leader = placement::leadership(
                cluster.as_ref().map(|c| (c.place(), c.standing())),
                shutdown.clone(),
            );
            Placement::start(
                settings,
                &cfg.id,
                leader,
                metrics.placement(),
                shutdown.clone(),
            )
        });
        let extras = server::health_and_reflection().await?;
        let service =
            SchedulerService::new(engine.clone(), pool.clone(), hosts_rx, shutdown.clone())
                .into_server();
        // Streams never end on their own, and a graceful shutdown waits for them: end them as
        // soon as the replica is told to stop. A cluster member first hands its partitions
        // over, once the triggers it sent are acked, so that nothing fires twice.
        let closer = tokio::spawn({
            let pool = pool.clone();
            let stop = shutdown.clone();
            let reporter = extras.reporter;
            async move {
                stop.cancelled().await;
                server::set_not_serving(&reporter).await;
                if let Some(cluster) = cluster
                    && tokio::time::timeout(LEAVE_WAIT, cluster.stop())
                        .await
                        .is_err()
                {
                    // The last members of a cluster stopped one by one lose etcd's quorum.
                    tracing::warn!(
                        "could not leave the cluster within {}s (etcd does not answer); the \
                         lease expires on its own and the others take the partitions then",
                        LEAVE_WAIT.as_secs()
                    );
                }
                pool.close_all();
            }
        });
        let mut metrics_server = JoinSet::new();
        let metrics_addr = serve_metrics(
            metrics_listener,
            metrics,
            None,
            &shutdown,
            &mut metrics_server,
        );
        if let Some(listener) = healthz_listener {
            // The Dapr Scheduler's `GET /healthz` (`--healthz-port`): 200 from the moment the
            // replica serves, which is now (its store is loaded, its ports bound).
            let mut router = axum::Router::new().route(
                "/healthz",
                axum::routing::get(|| async { axum::http::StatusCode::OK }),
            );
            if let Some(p) = placement
                .as_ref()
                .filter(|_| cfg.placement.as_ref().is_some_and(|s| s.metadata))
            {
                router = router.merge(placement_state_route(p.clone()));
            }
            let stop = shutdown.clone();
            metrics_server.spawn(async move {
                crate::serve::http(listener, router, stop)
                    .await
                    .map_err(|e| Error::Serve(format!("healthz: {e}")))
            });
        }
        let jobsd = jobs::server(engine.clone(), pool.clone(), directory);
        let placement_server = placement.clone().map(Placement::into_server);
        if let (Some(listener), Some(p)) = (placement_listener, placement.clone()) {
            // Placement alone on its own port (Dapr's placement port), plaintext as Dapr's
            // without mTLS.
            let stop = shutdown.clone();
            metrics_server.spawn(async move {
                tonic::transport::Server::builder()
                    .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
                    .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
                    .add_service(p.into_server())
                    .serve_with_incoming_shutdown(
                        crate::serve::capped_incoming(listener),
                        stop.cancelled_owned(),
                    )
                    .await
                    .map_err(|e| Error::Serve(format!("placement: {e}")))
            });
        }
        let stop = shutdown.clone();
        let tls = cfg.tls.clone();
        let server = tokio::spawn(async move {
            // The API port's HTTP/2 limits (streams per connection, rapid reset), then the
            // replica's own faster keepalive.
            let router = crate::serve::grpc_limits(tonic::transport::Server::builder())
                .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
                .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
                .add_routes(extras.routes)
                .add_service(service)
                .add_service(jobsd)
                .add_optional_service(placement_server);
            match tls {
                Some(tls) => {
                    router
                        .serve_with_incoming_shutdown(
                            crate::tls::incoming(listener, &tls),
                            stop.cancelled_owned(),
                        )
                        .await
                }
                None => {
                    router
                        .serve_with_incoming_shutdown(
                            // The API port's connection cap and first-byte deadline (it sets
                            // nodelay too: without it h2's small trailer writes wait for the
                            // peer's delayed ACK).
                            crate::serve::capped_incoming(listener),
                            stop.cancelled_owned(),
                        )
                        .await
                }
            }
            .map_err(|e| Error::Serve(format!("grpc: {e}")))
        });

        tracing::info!(
            id = %cfg.id,
            listen = %addr,
            broadcast = %broadcast_address,
            metrics = ?metrics_addr,
            data_dir = %cfg.data_dir.display(),
            cluster = ?cfg.cluster.as_ref().map(|c| &c.endpoints),
            tls = tls_mode(cfg.tls.as_ref().map(crate::tls::ServerTls::is_mutual)),
            etcd_tls = tls_mode(
                cfg.cluster
                    .as_ref()
                    .and_then(|c| c.tls.as_ref())
                    .map(crate::tls::ClientTls::is_mutual)
            ),
            "jobsd scheduler ready"
        );
        Ok(Replica {
            addr,
            broadcast_address,
            metrics_addr,
            shutdown,
            server,
            metrics_server,
            hosts,
            closer,
            pool,
            store,
            engine_stop,
            engine_task,
            engine,
        })
    }

    /// The engine behind the Scheduler API.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A token that stops the replica when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Announces a new replica list to every WatchHosts subscriber (and to later ones).
    pub fn set_hosts(&self, hosts: Vec<String>) {
        self.hosts.send_replace(hosts);
    }

    /// Waits until the replica is told to stop (or the server fails): stops accepting,
    /// closes the WatchJobs streams (their unacked triggers are staged), stops the trigger
    /// loop and closes the store so that every acknowledged write is on disk.
    pub async fn wait(mut self) -> Result<(), Error> {
        let joined = |done: Result<Result<(), Error>, tokio::task::JoinError>| {
            done.unwrap_or_else(|e| Err(Error::Serve(e.to_string())))
        };
        // The metrics server ends before the replica is told to stop only when it fails: then
        // the replica stops too.
        let mut metrics_result = Ok(());
        let mut loop_result = Ok(());
        let engine = self.engine.clone();
        let server_done = tokio::select! {
            done = &mut self.server => Some(joined(done)),
            Some(done) = self.metrics_server.join_next() => {
                metrics_result = joined(done);
                None
            }
            // A trigger loop that dies (a bug) stops the replica with an error rather than
            // leave it storing jobs that never fire.
            () = engine.loop_ended() => {
                tracing::error!("the trigger loop stopped unexpectedly");
                loop_result = Err(Error::Serve("the trigger loop stopped unexpectedly".to_owned()));
                None
            }
        };
        // Also reached when a server failed on its own: nothing may stay connected.
        self.shutdown.cancel();
        let result = match server_done {
            Some(done) => done,
            None => match tokio::time::timeout(DRAIN_WAIT, &mut self.server).await {
                Ok(done) => joined(done),
                Err(_) => {
                    // Dapr's Scheduler bounds its graceful stop the same way: a handler that
                    // never ends must not keep a stopped replica serving keepalives.
                    tracing::warn!(
                        "calls still open {}s after the stop; closing them",
                        DRAIN_WAIT.as_secs()
                    );
                    self.server.abort();
                    Ok(())
                }
            },
        };
        if let Err(e) = &result {
            tracing::error!(error = %e, "scheduler server stopped");
        }
        while let Some(done) = self.metrics_server.join_next().await {
            metrics_result = metrics_result.and(joined(done));
        }
        if let Err(e) = &metrics_result {
            tracing::error!(error = %e, "metrics server stopped");
        }
        let result = result.and(metrics_result).and(loop_result);
        if let Err(e) = self.closer.await {
            tracing::error!(error = %e, "shutdown task failed");
        }
        self.pool.close_all();
        self.engine_stop.cancel();
        let store = self.store;
        let engine_task = self.engine_task;
        let finish = async move {
            if let Err(e) = engine_task.await {
                tracing::error!(error = %e, "trigger loop failed");
            }
            store.close().await
        };
        match tokio::time::timeout(LAST_WRITES_WAIT, finish).await {
            Ok(closed) => closed?,
            // Nothing acknowledged is lost: creates are answered once written. What is left
            // are the last triggers' results, and their jobs fire again (at least once).
            Err(_) => tracing::warn!(
                "the store did not take the last writes within {}s of the stop (etcd does not \
                 answer); stopping without them: the triggers they record fire again",
                LAST_WRITES_WAIT.as_secs()
            ),
        }
        tracing::info!("jobsd scheduler stopped");
        result
    }
}

/// How long a stop waits for leaving the cluster (the triggers in flight answered and
/// written, the partitions handed over: up to 5 s, then the lease revoked). The Dapr Scheduler
/// stops at once even when its etcd has lost its quorum (the last members of a cluster stopped
/// one by one), and so must a replica.
const LEAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(8);
/// How long a stop waits for the calls in progress to end before it closes them.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Then how long it waits for the store's last writes.
const LAST_WRITES_WAIT: std::time::Duration = std::time::Duration::from_secs(4);

/// How a connection is secured, for the start-up log line: `None` = plaintext, else whether
/// both sides present certificates.
fn tls_mode(mutual: Option<bool>) -> &'static str {
    match mutual {
        None => "off",
        Some(true) => "mutual",
        Some(false) => "on",
    }
}

/// `GET /placement/state`: the placement tables, as Dapr's placement serves them on its
/// healthz port with `--metadata-enabled`.
fn placement_state_route(placement: Placement) -> axum::Router {
    axum::Router::new().route(
        "/placement/state",
        axum::routing::get(move || {
            let placement = placement.clone();
            async move {
                match placement.state().await {
                    Ok(state) => (
                        axum::http::StatusCode::OK,
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        placement::state_json(&state),
                    ),
                    Err(status) => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        [(axum::http::header::CONTENT_TYPE, "text/plain")],
                        status.message().to_owned(),
                    ),
                }
            }
        }),
    )
}

/// The replica's metrics: the Dapr Scheduler's, the engine's and the store's; disabled with
/// `--enable-metrics=false`.
fn metrics_of(cfg: &config::Replica) -> Metrics {
    match cfg.metrics {
        Some(_) => Metrics::replica(cfg.placement.is_some()),
        None => Metrics::disabled(),
    }
}

/// Hands the engine this replica's place among the live ones as it changes: its share of
/// every concurrency rule by key (`policy.concurrencyKey`), as the pool's gates take theirs
/// of Dapr's limits.
fn follow_concurrency_place(
    engine: &Engine,
    mut place: tokio::sync::watch::Receiver<crate::replica::gates::Place>,
) {
    let engine = engine.clone();
    tokio::spawn(async move {
        loop {
            let now = *place.borrow_and_update();
            engine.set_concurrency_place(now.count, now.index);
            if place.changed().await.is_err() {
                return;
            }
        }
    });
}
