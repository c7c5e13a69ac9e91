//! What we call on the app: each fired trigger goes to the app the way daprd sends it —
//! `POST /job/<name>` to an HTTP app ([`Http`]) or `AppCallback.OnJobEvent` to a gRPC app
//! ([`Grpc`]) — and the answer becomes the trigger's result (`dapr-jobs-api.md` §4.4, §4.5).
//!
//! [`Delivery`] is the engine's [`Sink`] in the embedded sidecar. It holds triggers back
//! (UNDELIVERABLE) while there is no app or the app fails its health checks, bounds the
//! calls in flight (`--app-max-concurrency`) and counts what became of each trigger.

mod body;
mod conns;
pub mod grpc;
pub mod health;
pub mod http;
pub mod ready;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::clock::{Clock, SystemClock};
use crate::observe::DeliveryMetrics;
use crate::observe::otlp::{Attempt, Kind, Spans};
use crate::observe::trace::TraceParent;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
use crate::resiliency::{Failure, Policy, PolicyError};
use crate::trigger::{Report, Sink, Trigger, TriggerResult, keys};

pub use conns::{Answer, Keep};
pub use grpc::Grpc;
pub use health::HealthCheckConfig;
pub use http::Http;

/// What the app speaks on its port (daprd's `--app-protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// HTTP/1.1 (`http`).
    #[default]
    Http,
    /// HTTP/2 without TLS (`h2c`), otherwise the same as [`Protocol::Http`].
    H2c,
    /// gRPC (`grpc`).
    Grpc,
}

/// How to reach the app.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// Where the app listens (`--app-channel-address`:`--app-port`); `None` when there is no
    /// `--app-port`, and then every trigger is UNDELIVERABLE.
    pub app_address: Option<SocketAddr>,
    /// What the app speaks.
    pub protocol: Protocol,
    /// Sent to the app as `dapr-api-token` (env `APP_API_TOKEN`).
    pub app_api_token: Option<String>,
    /// Most calls to the app at once (`--app-max-concurrency`); `None` or `Some(0)` is
    /// unlimited (daprd's `-1`).
    pub max_concurrency: Option<usize>,
    /// Largest gRPC message sent to or accepted from the app, and the most response bytes
    /// drained from an HTTP app to keep its connection (`--max-body-size`).
    pub max_body_size: usize,
    /// App health checks (`--enable-app-health-check` and friends); `None` = the app counts
    /// as healthy whenever it has an address.
    pub health: Option<HealthCheckConfig>,
    /// Timeout, retries and circuit breaker around each delivery (a jobsd extension: daprd
    /// applies no resiliency policy to jobs); `None` = one plain attempt, as in daprd.
    pub resiliency: Option<Arc<Policy>>,
    /// Where each attempt's span goes (`--otlp-endpoint`); `None` = no spans are built.
    pub spans: Option<Spans>,
    /// daprd's job metrics, recorded per call the app answers; disabled by default.
    pub metrics: DeliveryMetrics,
    /// How long one call may wait for the app's answer when no resiliency `timeout` policy
    /// bounds it (`--app-call-timeout`); `None` = forever, as in daprd.
    pub call_timeout: Option<CallTimeout>,
}

/// How long a call to the app may take when no resiliency `timeout` policy says otherwise,
/// on which clock (the engine's: a manual one in tests and under `--test-clock`).
#[derive(Clone)]
pub struct CallTimeout {
    /// The longest wait for an answer.
    pub limit: Duration,
    /// The clock the limit is measured on.
    pub clock: Arc<dyn Clock>,
}

impl CallTimeout {
    /// [`DEFAULT_CALL_TIMEOUT`] on the system clock.
    pub fn default_on_system_clock() -> Self {
        Self {
            limit: DEFAULT_CALL_TIMEOUT,
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for CallTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallTimeout")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

/// The default of `--app-call-timeout`. daprd and the Dapr Scheduler wait for an app's answer
/// forever: an app that never answers holds its job (no next tick, no retry, no failure
/// policy) and a delivery slot until the connection breaks. 15 minutes is longer than any
/// handler a job platform lets run in one call (AWS Lambda's ceiling; Cloud Tasks' dispatch
/// deadline is 10 minutes by default), so a handler that ever finished under daprd is not cut
/// short, while a hung app's job goes on to its failure policy within the hour.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(15 * 60);

impl Default for DeliveryConfig {
    /// No app, HTTP, no token, unlimited concurrency, 4 MiB, no health checks, no
    /// resiliency, no spans, no metrics, calls bounded by [`DEFAULT_CALL_TIMEOUT`].
    fn default() -> Self {
        Self {
            app_address: None,
            protocol: Protocol::Http,
            app_api_token: None,
            max_concurrency: None,
            max_body_size: 4 << 20,
            health: None,
            resiliency: None,
            spans: None,
            metrics: DeliveryMetrics::default(),
            call_timeout: Some(CallTimeout::default_on_system_clock()),
        }
    }
}

/// Why a call to the app did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The configuration cannot be used (a token that is not a valid header value, …).
    #[error("invalid delivery configuration: {0}")]
    Config(String),
    /// There is no app to call (no `--app-port`).
    #[error("received job, but app channel not initialized")]
    NoApp,
    /// The job's data cannot be sent the way daprd sends it (a corrupt or non-JSON
    /// `google.protobuf.Value`).
    #[error("cannot encode job data: {0}")]
    Data(String),
    /// The HTTP app answered with a status other than 2xx or 404.
    #[error("app responded with HTTP status {0}")]
    HttpStatus(u16),
    /// The gRPC app (or the gRPC transport) answered with a status other than OK or
    /// `NotFound`.
    #[error("app responded with gRPC status {code:?}: {message}")]
    GrpcStatus {
        /// The status code.
        code: tonic::Code,
        /// The status message, with the transport cause when there is one.
        message: String,
    },
    /// The HTTP app could not be reached (refused, reset, closed early).
    #[error("cannot reach the app: {0}")]
    Transport(String),
    /// The resiliency policy's timeout cut the last attempt short.
    #[error("the call timed out (resiliency timeout policy)")]
    Timeout,
    /// The app did not answer within `--app-call-timeout` (no resiliency timeout applied).
    #[error("the app did not answer within {} (--app-call-timeout)", crate::schedule::duration::format(i64::try_from(.0.as_nanos()).unwrap_or(i64::MAX)))]
    CallTimeout(Duration),
    /// The resiliency policy's circuit breaker refused the call; the app was not called.
    #[error("{0}")]
    Breaker(String),
}

impl Error {
    /// The HTTP status the app answered with, for resiliency policies that match on it.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::HttpStatus(s) => Some(*s),
            _ => None,
        }
    }

    /// The gRPC status code, for resiliency policies that match on it.
    pub fn grpc_code(&self) -> Option<i32> {
        match self {
            Error::GrpcStatus { code, .. } => Some(i32::from(*code)),
            _ => None,
        }
    }
}

impl From<&Error> for Failure {
    /// What a resiliency policy matches on: the HTTP status or gRPC code, if the app gave one.
    fn from(e: &Error) -> Self {
        match e {
            Error::HttpStatus(status) => Failure::http(*status, e.to_string()),
            Error::GrpcStatus { code, .. } => Failure::grpc(i32::from(*code), e.to_string()),
            _ => Failure::other(e.to_string()),
        }
    }
}

/// How the app took a trigger it did not fail. Not a second result type: `Accepted` and
/// `NotFound` are [`TriggerResult::Success`]; they are kept apart only to count them (daprd's
/// metrics count a 404 as a failure though the trigger is not retried). `Later` is jobsd's
/// async completion ([`TriggerResult::Held`] / [`TriggerResult::Accepted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// 2xx / OK.
    Accepted,
    /// HTTP 404 / gRPC `NotFound`: daprd counts it as SUCCESS (not retried), though its
    /// metrics count it as a failure.
    NotFound,
    /// HTTP `202 Accepted`, or a gRPC OK with `jobsd-async: true`: the app says it reports
    /// the outcome later. `asked`: it said so explicitly (the `Jobsd-Async: true` header, or
    /// the gRPC metadata); a plain `202` holds the execution only for a job with
    /// `policy.lease`, and is Dapr's success otherwise.
    Later {
        /// `Jobsd-Async: true` / `jobsd-async: true` came with the answer.
        asked: bool,
    },
}

/// The response header (HTTP) or metadata key (gRPC) by which an app says it completes the
/// execution later (async completion), with the value `true`.
pub const ASYNC_HEADER: &str = "jobsd-async";

/// Whether an [`ASYNC_HEADER`] value says yes.
fn says_async(value: Option<&[u8]>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case(b"true"))
}

/// Counts of what became of triggers since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Accepted by the app (2xx / OK).
    pub accepted: u64,
    /// Answered 404 / `NotFound` (reported as SUCCESS).
    pub not_found: u64,
    /// Failed (FAILED: error status, transport error, timeout, open breaker, bad data).
    pub failed: u64,
    /// Held back (UNDELIVERABLE: no app, app unhealthy, or an actor reminder).
    pub undeliverable: u64,
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
struct Counters {
    /// See [`Stats::accepted`].
    accepted: AtomicU64,
    /// See [`Stats::not_found`].
    not_found: AtomicU64,
    /// See [`Stats::failed`].
    failed: AtomicU64,
    /// See [`Stats::undeliverable`].
    undeliverable: AtomicU64,
}

/// Counts one call in [`Delivery::waiting_for_permit`] until dropped (also when the waiting
/// call is cancelled).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The app's channel.
#[derive(Debug, Clone)]
enum Channel {
    /// `POST /job/<name>`.
    Http(Http),
    /// `OnJobEvent` / `OnJobEventAlpha1`.
    Grpc(Grpc),
}

/// Delivers triggers to the app; the engine's [`Sink`] in the embedded sidecar.
pub struct Delivery {
    /// The app's channel; `None` without an app address.
    channel: Option<Channel>,
    /// Bounds the calls in flight (`--app-max-concurrency`); `None` = unlimited.
    limit: Option<Semaphore>,
    /// Calls waiting for a permit of `limit` right now ([`Delivery::waiting_for_permit`]).
    waiting: AtomicUsize,
    /// Triggers worth taking at once ([`Sink::capacity`]): the concurrency bound.
    capacity: usize,
    /// Whether triggers can be delivered now (an app, and healthy).
    health: watch::Receiver<bool>,
    /// Keeps a constant health value alive (`changed()` would fail once it is dropped);
    /// `None` when the probe loop owns the sender.
    _health_tx: Option<watch::Sender<bool>>,
    /// What became of triggers.
    counters: Counters,
    /// Timeout, retries and breaker around each delivery; `None` = one attempt.
    resiliency: Option<Arc<Policy>>,
    /// Where each attempt's span goes; `None` = no spans.
    spans: Option<Spans>,
    /// daprd's job metrics.
    metrics: DeliveryMetrics,
    /// Bounds each call unless the resiliency policy has a timeout of its own.
    call_timeout: Option<CallTimeout>,
    /// Stops the probe loop when the delivery is dropped.
    _stop_probes: DropGuard,
    /// With health checks: a view of the health never marked seen (it has changed once the
    /// first probe answered), and how long that first answer may take.
    first_probe: Option<(watch::Receiver<bool>, Duration)>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("channel", &self.channel)
            .field("healthy", &*self.health.borrow())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// Connects (lazily) to the app and, with health checks, starts probing it until `stop`
    /// is cancelled or the delivery is dropped. Must be called within a Tokio runtime.
    pub fn new(config: DeliveryConfig, stop: &CancellationToken) -> Result<Self, Error> {
        let token = config.app_api_token.as_deref();
        let limit = config.max_concurrency.filter(|&n| n > 0);
        let channel = match config.app_address {
            None => None,
            Some(addr) => Some(match config.protocol {
                Protocol::Http | Protocol::H2c => Channel::Http(Http::new(
                    addr,
                    token,
                    config.protocol == Protocol::H2c,
                    limit.unwrap_or(0),
                    config.max_body_size,
                )?),
                Protocol::Grpc => Channel::Grpc(Grpc::new(addr, token, config.max_body_size)?),
            }),
        };
        let probes = stop.child_token();
        let (health, health_tx) = match (&channel, &config.health) {
            (Some(channel), Some(check)) => {
                let prober = match channel {
                    Channel::Http(http) => {
                        // A path that can never be probed would keep the app unhealthy
                        // forever; refuse it up front.
                        http.probe_uri(&check.path)?;
                        health::Prober::Http(http.for_probes(), check.path.clone())
                    }
                    Channel::Grpc(grpc) => health::Prober::Grpc(grpc.clone()),
                };
                (health::spawn(prober, check, probes.clone()), None)
            }
            // Without health checks daprd treats the app as healthy from the start; without
            // an app nothing is ever deliverable.
            (channel, _) => {
                let (tx, rx) = watch::channel(channel.is_some());
                (rx, Some(tx))
            }
        };
        let first_probe = config
            .health
            .as_ref()
            .filter(|_| health_tx.is_none())
            .map(|check| (health.clone(), check.timeout.saturating_add(check.interval)));
        // A resiliency `timeout` policy takes precedence over `--app-call-timeout`.
        let call_timeout = config
            .call_timeout
            .filter(|t| !t.limit.is_zero())
            .filter(|_| {
                config
                    .resiliency
                    .as_ref()
                    .and_then(|p| p.timeout())
                    .is_none()
            });
        Ok(Self {
            call_timeout,
            first_probe,
            channel,
            limit: limit.map(Semaphore::new),
            waiting: AtomicUsize::new(0),
            // A trigger waiting out a resiliency retry interval holds no permit, and other
            // jobs' triggers go meanwhile; bounding the triggers taken would hold them back.
            capacity: match (&config.resiliency, limit) {
                (None, Some(limit)) => limit,
                _ => usize::MAX,
            },
            health,
            _health_tx: health_tx,
            counters: Counters::default(),
            resiliency: config.resiliency,
            spans: config.spans,
            metrics: config.metrics,
            _stop_probes: probes.drop_guard(),
        })
    }

    /// Whether triggers can be delivered now: `true` while there is an app and it passes its
    /// health checks. Watch it to release staged triggers when it turns `true`.
    pub fn health(&self) -> watch::Receiver<bool> {
        self.health.clone()
    }

    /// What became of triggers since start.
    pub fn stats(&self) -> Stats {
        Stats {
            accepted: self.counters.accepted.load(Ordering::Relaxed),
            not_found: self.counters.not_found.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
            undeliverable: self.counters.undeliverable.load(Ordering::Relaxed),
        }
    }

    /// How many calls wait right now for a permit under the concurrency bound
    /// (`--app-max-concurrency`; always 0 without one): the triggers the bound holds back.
    /// Lets a test see that calls queue at the bound rather than guess it from a pause.
    pub fn waiting_for_permit(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// One call to the app for `trigger`, within the concurrency bound and without the
    /// health gate: the unit a resiliency policy retries. It carries a `traceparent` of its
    /// own.
    pub async fn call_once(&self, trigger: &Trigger) -> Result<Ack, Error> {
        self.send(trigger, &TraceParent::for_attempt(&trigger.execution_id))
            .await
    }

    /// [`Delivery::call_once`] carrying `trace`.
    async fn send(&self, trigger: &Trigger, trace: &TraceParent) -> Result<Ack, Error> {
        let channel = self.channel.as_ref().ok_or(Error::NoApp)?;
        let _permit = match &self.limit {
            // The semaphore is never closed; should that change, calling unbounded is the
            // lesser evil than failing every trigger.
            Some(limit) => {
                let _waiting = Waiting::new(&self.waiting);
                limit.acquire().await.ok()
            }
            None => None,
        };
        let call = self.metrics.call();
        let data = trigger.data.as_ref();
        let context = crate::trigger::context::headers(trigger);
        let answer = async {
            match channel {
                Channel::Http(http) => http.call(&trigger.name, data, Some(trace), &context).await,
                Channel::Grpc(grpc) => grpc.call(&trigger.name, data, Some(trace), &context).await,
            }
        };
        // Measured from the permit: waiting for one is jobsd's bound, not the app's slowness.
        let deadline = self.call_timeout.as_ref().and_then(|t| {
            let limit = chrono::TimeDelta::from_std(t.limit).ok()?;
            Some((t, t.clock.now().checked_add_signed(limit)?))
        });
        let result = match deadline {
            None => answer.await,
            Some((t, deadline)) => tokio::select! {
                result = answer => result,
                // Dropping the call closes its connection: a late answer is not read.
                () = t.clock.sleep_until(deadline) => Err(Error::CallTimeout(t.limit)),
            },
        };
        // Counted as daprd counts: the calls the app answered. An HTTP call that never got
        // an answer is daprd's channel error, counted nowhere; a gRPC app's channel turns
        // every status into an answer.
        match &result {
            Ok(Ack::Accepted | Ack::Later { .. }) => call.answered(true),
            Ok(Ack::NotFound) | Err(Error::HttpStatus(_) | Error::GrpcStatus { .. }) => {
                call.answered(false)
            }
            Err(_) => {}
        }
        result
    }

    /// Whether the app can take triggers now.
    /// Before the first health probe has answered, the app's health is unknown rather than
    /// bad: a trigger waits for that answer (bounded by the probe's timeout and interval)
    /// instead of finding the app down, so that right after a start a policy that skips ticks
    /// while the app is down (`whileTargetDown: skip`) does not skip the first ones.
    async fn await_first_probe(&self) {
        if let Some((health, bound)) = &self.first_probe
            && !health.has_changed().unwrap_or(true)
        {
            let mut health = health.clone();
            let _ = tokio::time::timeout(*bound, health.changed()).await;
        }
    }

    fn app_deliverable(&self) -> bool {
        self.channel.is_some() && *self.health.borrow()
    }

    /// Calls the app for `trigger` under the resiliency policy, if there is one: every
    /// attempt is a [`Delivery::call_once`].
    pub async fn call(&self, trigger: &Trigger) -> Result<Ack, Error> {
        self.call_traced(trigger, &TraceParent::for_attempt(&trigger.execution_id))
            .await
    }

    /// [`Delivery::call`] with every call carrying `trace`: the policy's retries are calls
    /// within one attempt of the execution, so they share its span.
    async fn call_traced(&self, trigger: &Trigger, trace: &TraceParent) -> Result<Ack, Error> {
        let Some(policy) = &self.resiliency else {
            return self.send(trigger, trace).await;
        };
        // The policy sees only what it matches on; keep the last error itself for the caller.
        let last = Mutex::new(None);
        let result = policy
            .execute(|| async {
                self.send(trigger, trace).await.map_err(|e| {
                    let failure = Failure::from(&e);
                    *last.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                    failure
                })
            })
            .await;
        match result {
            Ok(ack) => Ok(ack),
            Err(PolicyError::Timeout) => Err(Error::Timeout),
            Err(e @ (PolicyError::CircuitOpen | PolicyError::TooManyRequests)) => {
                Err(Error::Breaker(e.to_string()))
            }
            Err(PolicyError::Failed(failure)) => Err(last
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .unwrap_or(Error::Transport(failure.message))),
        }
    }

    /// The result for `trigger`, with what the run history keeps of a failure.
    async fn outcome(&self, trigger: &Trigger) -> Report {
        match trigger
            .metadata
            .target
            .as_ref()
            .and_then(|t| t.r#type.as_ref())
        {
            Some(Target::Job(_)) => {}
            // No actor runtime here yet: keep reminders staged rather than spend their
            // failure policy on a call that cannot succeed.
            Some(Target::Actor(_)) => return TriggerResult::Undeliverable.into(),
            None => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(job = %trigger.name, "trigger without a target type");
                return Report {
                    error: Some("trigger without a target type".into()),
                    ..TriggerResult::Failed.into()
                };
            }
        }
        if !self.app_deliverable() {
            self.await_first_probe().await;
            if !self.app_deliverable() {
                return TriggerResult::Undeliverable.into();
            }
        }
        let trace = TraceParent::for_attempt(&trigger.execution_id);
        let started = self.spans.as_ref().map(Spans::begin);
        let result = self.call_traced(trigger, &trace).await;
        if let Some((spans, started)) = self.spans.as_ref().zip(started) {
            let (outcome, error) = match &result {
                Ok(Ack::Accepted) => ("success", None),
                Ok(Ack::Later { asked: true }) => ("held", None),
                Ok(Ack::Later { asked: false }) => ("accepted", None),
                Ok(Ack::NotFound) => ("not_found", None),
                Err(e) => ("failed", Some(e.to_string())),
            };
            spans.record(Attempt {
                kind: Kind::Job,
                trigger,
                trace: &trace,
                started,
                outcome,
                error,
            });
        }
        match result {
            Ok(Ack::Accepted) => {
                self.counters.accepted.fetch_add(1, Ordering::Relaxed);
                TriggerResult::Success.into()
            }
            Ok(Ack::Later { asked }) => {
                self.counters.accepted.fetch_add(1, Ordering::Relaxed);
                let result = if asked {
                    TriggerResult::Held
                } else {
                    TriggerResult::Accepted
                };
                Report {
                    http_status: Some(202)
                        .filter(|_| matches!(self.channel, Some(Channel::Http(_)))),
                    ..result.into()
                }
            }
            Ok(Ack::NotFound) => {
                self.counters.not_found.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(job = %trigger.name, "app does not know the job; not retried");
                let grpc = matches!(self.channel, Some(Channel::Grpc(_)));
                Report {
                    http_status: (!grpc).then_some(404),
                    grpc_code: grpc.then_some(tonic::Code::NotFound as i32),
                    ..TriggerResult::Success.into()
                }
            }
            Err(e) => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    job = %trigger.name,
                    scheduled_at = %trigger.scheduled_at,
                    error = %e,
                    "job delivery failed"
                );
                Report {
                    result: TriggerResult::Failed,
                    timed_out: matches!(e, Error::Timeout | Error::CallTimeout(_)),
                    http_status: e.http_status(),
                    grpc_code: match &e {
                        Error::GrpcStatus { code, .. } => Some(*code as i32),
                        _ => None,
                    },
                    error: Some(e.to_string()),
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl Sink for Delivery {
    async fn deliver(&self, trigger: Trigger) -> TriggerResult {
        self.deliver_reported(trigger).await.result
    }

    async fn deliver_reported(&self, trigger: Trigger) -> Report {
        let report = self.outcome(&trigger).await;
        if report.result == TriggerResult::Undeliverable {
            self.counters.undeliverable.fetch_add(1, Ordering::Relaxed);
        }
        report
    }

    fn is_deliverable(&self, key: &str) -> bool {
        keys::is_app_job(key) && self.app_deliverable()
    }

    /// The concurrency bound (more triggers would only wait for a permit), unless a
    /// resiliency policy may keep triggers between attempts.
    fn capacity(&self) -> usize {
        self.capacity
    }
}
