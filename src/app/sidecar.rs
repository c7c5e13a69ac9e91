//! The sidecar role: the Dapr Jobs API over the embedded scheduler, or in front of Scheduler
//! replicas (remote mode), delivering triggers to the app.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::actors::{ActorRuntime, RuntimeConfig, SchedulerReminders, Targets};
use crate::api::{self, ApiState};
use crate::cli;
use crate::clock::{Clock, ManualClock, SystemClock};
use crate::config::{self, AppProtocol};
use crate::delivery::ready::{AppStart, app_started};
use crate::delivery::{self, CallTimeout, Delivery, DeliveryConfig, HealthCheckConfig, Protocol};
use crate::engine::{self, Engine};
use crate::observe::Metrics;
use crate::observe::otlp::Spans;
use crate::resiliency::{self, Resiliency};
use crate::seam::{Connections, Remote, RemoteConfig, Scheduler};
use crate::store::{self, Store};
use crate::trigger::keys;

use super::metrics::{bind_metrics, sample_engine, serve_metrics};
use super::{Error, bind};

/// A running sidecar: its bound addresses and the handle to stop it.
pub struct Sidecar {
    /// Where the HTTP API listens (ports resolved, so `:0` becomes the real port).
    pub http_addrs: Vec<SocketAddr>,
    /// Where the gRPC API listens.
    pub grpc_addrs: Vec<SocketAddr>,
    /// Where the metrics server listens; `None` with `--enable-metrics=false`.
    pub metrics_addr: Option<SocketAddr>,
    /// Cancelled to stop every server.
    shutdown: CancellationToken,
    /// The server tasks.
    servers: JoinSet<Result<(), Error>>,
    /// What answers the Scheduler calls; stopped once the servers are down.
    backend: Backend,
    /// The OTLP span exporter (`--otlp-endpoint`), flushed last.
    spans: Option<Spans>,
}

/// The scheduler behind a sidecar's API.
enum Backend {
    /// The engine in this process, over its store.
    Embedded {
        /// Closed last, once no request can write any more.
        store: Arc<dyn Store>,
        /// Stops the trigger loop (and the app's health probes) once the servers are down.
        engine_stop: CancellationToken,
        /// The trigger loop.
        engine_task: tokio::task::JoinHandle<()>,
        /// The engine, for tests and tools (stats, sync).
        engine: Engine,
    },
    /// Dapr Scheduler replicas (`--scheduler-host-address`).
    Remote {
        /// The client the API calls.
        remote: Remote,
        /// Discovery and the job streams.
        connections: Connections,
        /// Stops the app's health probes once the streams are closed.
        delivery_stop: CancellationToken,
    },
}

impl Sidecar {
    /// Starts serving with the system clock: over the durable store in `cfg.data_dir`, or,
    /// with Scheduler addresses configured, in front of those replicas (no store is opened
    /// and no data folder created).
    pub async fn start(cfg: config::Sidecar) -> Result<Sidecar, Error> {
        if !cfg.scheduler_hosts.is_empty() {
            return Self::start_remote(cfg, Arc::new(SystemClock)).await;
        }
        let metrics = metrics_of(&cfg);
        let redb = store::Redb::open_with(&cfg.data_dir, cfg.store.clone())?;
        redb.observe(metrics.store());
        Self::start_embedded(cfg, Arc::new(redb), Arc::new(SystemClock), metrics).await
    }

    /// Starts serving over a given store and clock (tests use a memory store or a manual
    /// clock). With Scheduler addresses configured the store is not used.
    pub async fn start_with(
        cfg: config::Sidecar,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Sidecar, Error> {
        if !cfg.scheduler_hosts.is_empty() {
            return Self::start_remote(cfg, clock).await;
        }
        let metrics = metrics_of(&cfg);
        Self::start_embedded(cfg, store, clock, metrics).await
    }

    /// The embedded sidecar over `store`, recording into `metrics`.
    async fn start_embedded(
        cfg: config::Sidecar,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
    ) -> Result<Sidecar, Error> {
        // `--test-clock`: everything runs on a manual clock standing at the given clock's time,
        // moved only through the API.
        let test_clock = cfg.test_clock.then(|| ManualClock::new(clock.now()));
        let clock: Arc<dyn Clock> = match &test_clock {
            Some(manual) => {
                tracing::warn!(
                    now = %manual.now(),
                    "--test-clock: time stands still until POST /jobsd/v1/clock/advance"
                );
                Arc::new(manual.clone())
            }
            None => clock,
        };
        // Bound first: a port in use fails before the store is loaded and triggers fire.
        let metrics_listener = bind_metrics(cfg.metrics).await?;
        let engine_stop = CancellationToken::new();
        let spans = span_exporter(&cfg, &clock)?;
        let delivery = Arc::new(app_delivery(&cfg, &engine_stop, &spans, &metrics, &clock)?);
        let actors = actor_runtime(&cfg, &delivery, clock.clone(), &spans)?;
        let sink = Arc::new(Targets::new(delivery.clone(), actors.clone()));
        let (engine, engine_task) = Engine::start_with(
            store.clone(),
            clock.clone(),
            sink,
            engine_stop.clone(),
            engine::Options {
                metrics: metrics.engine(),
                history: cfg.history,
                horizon: cfg.horizon,
            },
        )
        .await?;
        sample_engine(&metrics, &engine, clock.clone());
        actors.attach_reminders(Arc::new(SchedulerReminders::new(
            Arc::new(engine.clone()),
            &cfg.app_id,
            &cfg.namespace,
        )));
        actors.start(engine_stop.clone());
        spawn_release_on_healthy(
            &delivery,
            engine.clone(),
            keys::app_job_prefix(&cfg.namespace, &cfg.app_id),
            engine_stop.clone(),
        );
        spawn_release_reminders(&actors, engine.clone(), &cfg.namespace, engine_stop.clone());
        let mut state = api_state(
            &cfg,
            Arc::new(engine.clone()),
            "embedded",
            None,
            actors,
            &engine_stop,
        );
        state.clock = clock;
        state.test_clock = test_clock.map(api::jobsd::TestClock::new);
        let backend = Backend::Embedded {
            store,
            engine_stop,
            engine_task,
            engine,
        };
        Self::serve(&cfg, state, backend, spans, (metrics_listener, metrics)).await
    }

    /// Starts serving in front of the Scheduler replicas of `cfg.scheduler_hosts`: calls are
    /// forwarded, triggers arrive on WatchJobs streams and go to the app. `clock` only stamps
    /// received triggers and measures `--app-call-timeout`.
    pub async fn start_remote(
        cfg: config::Sidecar,
        clock: Arc<dyn Clock>,
    ) -> Result<Sidecar, Error> {
        let metrics = metrics_of(&cfg);
        let metrics_listener = bind_metrics(cfg.metrics).await?;
        let delivery_stop = CancellationToken::new();
        let spans = span_exporter(&cfg, &clock)?;
        let delivery = Arc::new(app_delivery(
            &cfg,
            &delivery_stop,
            &spans,
            &metrics,
            &clock,
        )?);
        if cfg.app_address.is_none() {
            // daprd holds streams without an app and fails every trigger; staying away lets
            // the Scheduler keep them staged for a sidecar that has one.
            tracing::info!("no --app-port: not receiving jobs from the scheduler");
        }
        let actors = actor_runtime(&cfg, &delivery, clock.clone(), &spans)?;
        let api_clock = clock.clone();
        let (remote, connections) = Remote::start(
            RemoteConfig {
                addresses: cfg.scheduler_hosts.clone(),
                app_id: cfg.app_id.clone(),
                namespace: cfg.namespace.clone(),
                job_streams: cfg.scheduler_job_streams,
                actor_types: Some(actors.actor_types()),
                tls: cfg.scheduler_tls.clone(),
            },
            Arc::new(Targets::new(delivery.clone(), actors.clone())),
            delivery.health(),
            clock,
        );
        actors.attach_reminders(Arc::new(SchedulerReminders::new(
            Arc::new(remote.clone()),
            &cfg.app_id,
            &cfg.namespace,
        )));
        // daprd's words, which tools and Dapr's own tests look for.
        tracing::info!("Using Scheduler service for reminders.");
        actors.start(delivery_stop.clone());
        let mut state = api_state(
            &cfg,
            Arc::new(remote.clone()),
            "remote",
            Some(remote.hosts()),
            actors,
            &delivery_stop,
        );
        state.clock = api_clock;
        let backend = Backend::Remote {
            remote,
            connections,
            delivery_stop,
        };
        Self::serve(&cfg, state, backend, spans, (metrics_listener, metrics)).await
    }

    /// Binds and serves the HTTP and gRPC APIs over `state`, and the metrics on their bound
    /// listener (if any).
    async fn serve(
        cfg: &config::Sidecar,
        state: ApiState,
        backend: Backend,
        spans: Option<Spans>,
        (metrics_listener, metrics): (Option<TcpListener>, Metrics),
    ) -> Result<Sidecar, Error> {
        let shutdown = CancellationToken::new();
        let mut servers = JoinSet::new();
        // With DAPR_API_TOKEN set, scrapes must send it too, unless
        // `--metrics-require-token=false` leaves them open (daprd's are always open).
        let metrics_token = cfg
            .metrics_require_token
            .then(|| cfg.api_token.clone().filter(|t| !t.is_empty()))
            .flatten();
        let metrics_addr = serve_metrics(
            metrics_listener,
            metrics,
            metrics_token,
            &shutdown,
            &mut servers,
        );
        if let Backend::Embedded { engine, .. } = &backend {
            // A trigger loop that dies (a bug) takes the sidecar down with an error, so a
            // supervisor restarts it, rather than leaving it answering creates that never fire.
            let (engine, stop) = (engine.clone(), shutdown.clone());
            servers.spawn(async move {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => Ok(()),
                    () = engine.loop_ended() => Err(Error::Serve(
                        "the trigger loop stopped unexpectedly".to_owned(),
                    )),
                }
            });
        }

        let mut http_addrs = Vec::new();
        for addr in &cfg.http_addrs {
            let listener = bind(*addr).await?;
            http_addrs.push(listener.local_addr().map_err(|source| Error::Bind {
                addr: *addr,
                source,
            })?);
            let router = http_router(cfg, state.clone());
            let stop = shutdown.clone();
            servers.spawn(async move {
                crate::serve::http(listener, router, stop)
                    .await
                    .map_err(|e| Error::Serve(format!("http: {e}")))
            });
        }

        if let Some(addr) = cfg.public_addr {
            let listener = bind(addr).await?;
            let router = api::http::public_router(state.clone());
            let stop = shutdown.clone();
            servers.spawn(async move {
                crate::serve::http(listener, router, stop)
                    .await
                    .map_err(|e| Error::Serve(format!("public: {e}")))
            });
        }

        if let Some(placement) = &cfg.placement {
            // Actors across sidecars: other sidecars call this one's actors on the internal
            // port, announced to placement as `<host ip>:<port>`.
            let listener = bind(placement.internal).await?;
            let port = listener
                .local_addr()
                .map_err(|source| Error::Bind {
                    addr: placement.internal,
                    source,
                })?
                .port();
            state.actors.attach_placement(
                crate::actors::placement::Identity {
                    addresses: placement.addresses.clone(),
                    name: format!("{}:{port}", placement.host_ip),
                    port: i64::from(port),
                    app_id: cfg.app_id.clone(),
                    namespace: cfg.namespace.clone(),
                },
                shutdown.clone(),
            );
            let internal = api::internal::service(state.actors.clone(), &cfg.namespace);
            let stop = shutdown.clone();
            servers.spawn(async move {
                tonic::transport::Server::builder()
                    .add_service(internal)
                    .serve_with_incoming_shutdown(
                        crate::serve::capped_incoming(listener),
                        stop.cancelled_owned(),
                    )
                    .await
                    .map_err(|e| Error::Serve(format!("internal grpc: {e}")))
            });
            tracing::info!(internal_port = port, placement = ?placement.addresses, "actors placed across sidecars");
        }

        let mut grpc_addrs = Vec::new();
        for addr in &cfg.grpc_addrs {
            let listener = bind(*addr).await?;
            grpc_addrs.push(listener.local_addr().map_err(|source| Error::Bind {
                addr: *addr,
                source,
            })?);
            let extras = api::grpc::health_and_reflection().await?;
            let dapr = api::grpc::service(state.clone());
            let jobsd = api::jobsd::grpc::service(state.clone());
            let stop = shutdown.clone();
            servers.spawn(async move {
                crate::serve::grpc_limits(tonic::transport::Server::builder())
                    .layer(tower::util::MapResponseLayer::new(
                        api::grpc::go_request_errors::<tonic::body::Body>,
                    ))
                    .add_routes(extras.routes)
                    .add_service(dapr)
                    .add_service(jobsd)
                    .serve_with_incoming_shutdown(
                        // Capped at MAX_CONNECTIONS, with nodelay (without it, h2's small
                        // trailer writes wait for the peer's delayed ACK: 40 ms stalls).
                        crate::serve::capped_incoming(listener),
                        stop.cancelled_owned(),
                    )
                    .await
                    .map_err(|e| Error::Serve(format!("grpc: {e}")))
            });
        }

        match &backend {
            Backend::Embedded { .. } => tracing::info!(
                app_id = %cfg.app_id,
                namespace = %cfg.namespace,
                http = ?http_addrs,
                grpc = ?grpc_addrs,
                metrics = ?metrics_addr,
                data_dir = %cfg.data_dir.display(),
                "jobsd sidecar ready (embedded scheduler)"
            ),
            Backend::Remote { .. } => tracing::info!(
                app_id = %cfg.app_id,
                namespace = %cfg.namespace,
                http = ?http_addrs,
                grpc = ?grpc_addrs,
                metrics = ?metrics_addr,
                scheduler = ?cfg.scheduler_hosts,
                "jobsd sidecar ready (remote scheduler)"
            ),
        }
        Ok(Sidecar {
            http_addrs,
            grpc_addrs,
            metrics_addr,
            shutdown,
            servers,
            backend,
            spans,
        })
    }

    /// The engine behind the API; `None` in remote mode.
    pub fn engine(&self) -> Option<&Engine> {
        match &self.backend {
            Backend::Embedded { engine, .. } => Some(engine),
            Backend::Remote { .. } => None,
        }
    }

    /// The Scheduler client behind the API; `None` in embedded mode.
    pub fn remote(&self) -> Option<&Remote> {
        match &self.backend {
            Backend::Embedded { .. } => None,
            Backend::Remote { remote, .. } => Some(remote),
        }
    }

    /// A token that stops the sidecar when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Waits until the sidecar is told to stop (or a server fails), lets in-flight requests
    /// finish, then stops the scheduler side: the embedded engine closes its store so that
    /// every acknowledged write is on disk; remote mode closes its job streams after the
    /// deliveries in flight are acknowledged.
    pub async fn wait(mut self) -> Result<(), Error> {
        let mut first_error = None;
        while let Some(done) = self.servers.join_next().await {
            let result = done.unwrap_or_else(|e| Err(Error::Serve(e.to_string())));
            if let Err(e) = result {
                tracing::error!(error = %e, "server stopped");
                first_error.get_or_insert(e);
                // One server down means the sidecar is broken: stop the others too.
                self.shutdown.cancel();
            }
        }
        match self.backend {
            Backend::Embedded {
                store,
                engine_stop,
                engine_task,
                engine: _,
            } => {
                // No request can write any more: let the loop apply the answers in flight,
                // then make everything durable.
                engine_stop.cancel();
                if let Err(e) = engine_task.await {
                    tracing::error!(error = %e, "trigger loop failed");
                }
                store.close().await?;
            }
            Backend::Remote {
                remote: _,
                connections,
                delivery_stop,
            } => {
                connections.close().await;
                delivery_stop.cancel();
            }
        }
        // Every delivery is over: the last spans go out.
        if let Some(spans) = self.spans {
            spans.shutdown().await;
        }
        tracing::info!("jobsd stopped");
        first_error.map_or(Ok(()), Err)
    }
}

/// The OTLP span exporter, when `--otlp-endpoint` is set.
fn span_exporter(cfg: &config::Sidecar, clock: &Arc<dyn Clock>) -> Result<Option<Spans>, Error> {
    let Some(endpoint) = &cfg.otlp_endpoint else {
        return Ok(None);
    };
    let spans = Spans::start(endpoint, &cfg.app_id, &cfg.namespace, clock.clone())?;
    tracing::info!(endpoint = %endpoint, "exporting a span per delivery attempt over OTLP");
    Ok(Some(spans))
}

/// The sidecar's metrics: daprd's job metrics, and the engine's and store's with the
/// embedded scheduler; disabled with `--enable-metrics=false`.
fn metrics_of(cfg: &config::Sidecar) -> Metrics {
    match cfg.metrics {
        Some(_) => Metrics::sidecar(
            &cfg.app_id,
            &cfg.metrics_namespace,
            cfg.scheduler_hosts.is_empty(),
        ),
        None => Metrics::disabled(),
    }
}

/// The app's delivery channel as `cfg` describes it; its health probes stop with `stop`.
fn app_delivery(
    cfg: &config::Sidecar,
    stop: &CancellationToken,
    spans: &Option<Spans>,
    metrics: &Metrics,
    clock: &Arc<dyn Clock>,
) -> Result<Delivery, Error> {
    Ok(Delivery::new(
        DeliveryConfig {
            app_address: cfg.app_address,
            protocol: match cfg.app_protocol {
                AppProtocol::Http => Protocol::Http,
                AppProtocol::H2c => Protocol::H2c,
                AppProtocol::Grpc => Protocol::Grpc,
            },
            app_api_token: cfg.app_api_token.clone(),
            max_concurrency: Some(cfg.app_max_concurrency),
            max_body_size: cfg.max_body_size,
            health: cfg.health_check.as_ref().map(|h| HealthCheckConfig {
                path: h.path.clone(),
                interval: h.interval,
                timeout: h.timeout,
                threshold: h.threshold,
            }),
            resiliency: load_policy(cfg)?,
            spans: spans.clone(),
            metrics: metrics.delivery(),
            call_timeout: cfg.app_call_timeout.map(|limit| CallTimeout {
                limit,
                clock: clock.clone(),
            }),
        },
        stop,
    )?)
}

/// The HTTP port's routes: the API, and the web console when `--console` is on. The console
/// is merged outside the API's token check: its page holds no data (see [`cli::console`]).
fn http_router(cfg: &config::Sidecar, state: ApiState) -> axum::Router {
    let api = api::http::router(state);
    if cfg.console {
        api.merge(cli::console::router())
    } else {
        api
    }
}

/// The API's view of this sidecar.
fn api_state(
    cfg: &config::Sidecar,
    scheduler: Arc<dyn Scheduler>,
    mode: &'static str,
    scheduler_hosts: Option<watch::Receiver<Vec<String>>>,
    actors: ActorRuntime,
    stop: &CancellationToken,
) -> ApiState {
    let start = match (cfg.app_address, cfg.app_protocol) {
        (None, _) => AppStart::Nothing,
        (Some(_), AppProtocol::Http | AppProtocol::H2c) if cfg.health_check.is_none() => {
            AppStart::Config(actors.ready())
        }
        (Some(addr), _) => AppStart::Port(addr),
    };
    ApiState {
        app_started: app_started(start, stop.clone()),
        scheduler,
        app_id: cfg.app_id.clone(),
        namespace: cfg.namespace.clone(),
        api_token: cfg.api_token.clone(),
        max_body_size: cfg.max_body_size,
        max_backfill_ticks: cfg.max_backfill_ticks,
        mode,
        scheduler_hosts,
        actors,
        clock: Arc::new(SystemClock),
        test_clock: None,
    }
}

/// The actor runtime of this sidecar: it calls an HTTP app on its own connections (a gRPC
/// app or no app hosts no actors), learns the hosted types once the app is healthy.
fn actor_runtime(
    cfg: &config::Sidecar,
    delivery: &Delivery,
    clock: Arc<dyn Clock>,
    spans: &Option<Spans>,
) -> Result<ActorRuntime, Error> {
    let app = match (cfg.app_address, cfg.app_protocol) {
        (Some(addr), AppProtocol::Http | AppProtocol::H2c) => Some(delivery::Http::new(
            addr,
            cfg.app_api_token.as_deref(),
            cfg.app_protocol == AppProtocol::H2c,
            // The same bound as the app's job deliveries: connections beyond it wait for
            // one to come back instead of piling connects onto the app's accept queue.
            cfg.app_max_concurrency,
            cfg.max_body_size,
        )?),
        _ => None,
    };
    Ok(ActorRuntime::new(RuntimeConfig {
        app,
        app_healthy: delivery.health(),
        clock,
        spans: spans.clone(),
    }))
}

/// Releases the staged reminders of every hosted actor type whenever the runtime can
/// deliver again (config read, app reachable) or the hosted types change.
fn spawn_release_reminders(
    actors: &ActorRuntime,
    engine: Engine,
    namespace: &str,
    stop: CancellationToken,
) {
    let mut ready = actors.ready();
    let mut types = actors.actor_types();
    let namespace = namespace.to_owned();
    tokio::spawn(async move {
        loop {
            if *ready.borrow_and_update() {
                for actor_type in types.borrow_and_update().iter() {
                    engine.release(keys::actor_type_prefix(&namespace, actor_type));
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                changed = ready.changed() => if changed.is_err() { return },
                changed = types.changed() => if changed.is_err() { return },
            }
        }
    });
}

/// The resiliency policy that targets this app, from the first resources folder that has one.
fn load_policy(cfg: &config::Sidecar) -> Result<Option<Arc<resiliency::Policy>>, Error> {
    for dir in &cfg.resources_paths {
        if let Some(policy) = Resiliency::load_dir(dir, &cfg.app_id)?.app_policy(&cfg.app_id) {
            tracing::info!(path = %dir.display(), "resiliency policy applies to job deliveries");
            return Ok(Some(policy));
        }
    }
    Ok(None)
}

/// Releases staged triggers whenever the app becomes deliverable again.
fn spawn_release_on_healthy(
    delivery: &Delivery,
    engine: Engine,
    prefix: String,
    stop: CancellationToken,
) {
    let mut health = delivery.health();
    tokio::spawn(async move {
        loop {
            if *health.borrow_and_update() {
                engine.release(prefix.clone());
            }
            tokio::select! {
                () = stop.cancelled() => return,
                changed = health.changed() => if changed.is_err() { return },
            }
        }
    });
}
