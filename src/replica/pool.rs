//! The WatchJobs stream pool of a scheduler replica: the engine's sink when daprds connect to
//! `jobsd scheduler` (Dapr `pkg/scheduler/server/internal/pool`).
//!
//! Every stream registers the key prefixes it can take (`app||ns||app||`,
//! `actorreminder||ns||type||`). A trigger goes to one stream of its prefix, round robin, and
//! waits for that stream's ack. A stream that closes resolves its unacked triggers as
//! `Undeliverable`, so the engine stages them and fires them again on another or a new stream:
//! delivery is at least once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use futures_util::{Stream, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::engine::Engine;

use super::cluster::Standing;
use super::gates::{Gates, Place};
use crate::observe::{JobType, SchedulerMetrics, SidecarError};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::dapr_scheduler::JobTargetType;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
use crate::proto::dapr_scheduler::watch_jobs_request::WatchJobRequestType;
use crate::trigger::{Sink, Trigger, TriggerResult, keys};

/// Triggers queued per stream ahead of the network. Beyond it `deliver` waits, as grpc-go's
/// `Send` waits on flow control; a slow daprd slows only its own triggers.
const OUTBOUND_BUFFER: usize = 1024;

/// What a WatchJobs call answers: the triggers of one stream, ended with the reason the
/// stream was closed (if it was closed for an error or a shutdown).
pub type Outbound = Pin<Box<dyn Stream<Item = Result<sv1::WatchJobsResponse, Status>> + Send>>;

/// The WatchJobs streams connected to this replica, by the prefixes they take.
#[derive(Default)]
pub struct Pool {
    /// Which streams take which prefixes.
    routes: Mutex<Routes>,
    /// Told to release staged triggers when a prefix gets its first stream; set once the
    /// engine (which needs the pool as its sink) exists.
    engine: OnceLock<Engine>,
    /// Pool-wide stream numbers (for unregistering and logs; not the per-stream trigger ids).
    next_conn: AtomicU64,
    /// The Dapr Scheduler's metrics (triggers by result; jobs created, through the service).
    metrics: SchedulerMetrics,
    /// In a cluster: whether this replica may fire at all (it holds a live lease).
    standing: OnceLock<Standing>,
    /// The concurrency limits the streams named.
    gates: Gates,
}

/// The routing table, under one lock: every change is a few map operations.
#[derive(Default)]
struct Routes {
    /// Streams by registered prefix; a prefix is present only while it has a stream.
    rings: HashMap<String, Ring>,
    /// How many registered prefixes have each length: `is_deliverable` probes one slice of
    /// the key per distinct length instead of scanning every prefix.
    lens: BTreeMap<usize, usize>,
    /// Every open stream.
    conns: HashMap<u64, Arc<Conn>>,
    /// Set at shutdown: no stream may register any more.
    closed: bool,
}

/// The streams of one prefix and the round-robin cursor over them.
#[derive(Default)]
struct Ring {
    /// In registration order.
    conns: Vec<Arc<Conn>>,
    /// The next pick (modulo the number of streams), as Dapr's `nextConn++ % len`.
    next: usize,
}

/// One WatchJobs stream.
struct Conn {
    /// Pool-wide number of the stream.
    id: u64,
    /// `namespace/appID`, for logs.
    label: String,
    /// The prefixes this stream registered.
    prefixes: Vec<String>,
    /// The caller (a jobsd sidecar) asked for each trigger's execution context.
    context: bool,
    /// Triggers on their way to the network.
    tx: mpsc::Sender<sv1::WatchJobsResponse>,
    /// Trigger ids and the triggers waiting for their ack.
    acks: Mutex<Acks>,
    /// Cancelled when the stream closes: ends the outbound stream and the receive loop.
    closed: CancellationToken,
    /// The error the outbound stream ends with, if it was closed for one.
    error: Mutex<Option<Status>>,
}

/// Per-stream trigger bookkeeping.
#[derive(Default)]
struct Acks {
    /// The last trigger id handed out (ids start at 1).
    last_id: u64,
    /// Triggers sent and not yet acked, by id.
    inflight: HashMap<u64, oneshot::Sender<TriggerResult>>,
    /// Set when the stream closes; nothing may be added to `inflight` after that.
    closed: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The critical sections only move map entries; a panic elsewhere leaves them consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty pool recording the Dapr Scheduler's metrics into `metrics`.
    pub fn with_metrics(metrics: SchedulerMetrics) -> Self {
        Pool {
            gates: Gates::with_metrics(metrics.clone()),
            metrics,
            ..Self::default()
        }
    }

    /// The Dapr Scheduler's metrics this pool records into.
    pub fn metrics(&self) -> &SchedulerMetrics {
        &self.metrics
    }

    /// In a cluster: deliver only while `standing` holds; otherwise triggers are staged
    /// (and dropped when the member lets go of their partitions).
    pub fn gate(&self, standing: Standing) {
        let _ = self.standing.set(standing);
    }

    /// Whether this replica may fire now.
    fn may_fire(&self) -> bool {
        self.standing.get().is_none_or(Standing::holds)
    }

    /// Gives the pool the engine it feeds, so that new streams release staged triggers.
    pub fn attach(&self, engine: Engine) {
        if self.engine.set(engine).is_err() {
            tracing::warn!("stream pool attached twice; keeping the first engine");
            return;
        }
        // Streams that registered before the engine existed missed their release.
        let prefixes: Vec<String> = lock(&self.routes).rings.keys().cloned().collect();
        self.release(prefixes);
    }

    /// Number of open streams.
    pub fn streams(&self) -> usize {
        lock(&self.routes).conns.len()
    }

    /// Registers a stream from its `initial` message and starts reading its acks from
    /// `inbound`. The answer is the stream of triggers to send back.
    ///
    /// Errors as Dapr's: `InvalidArgument` without namespace or app id, `Unknown` for a
    /// duplicate accepted job type, and `Unknown` once the replica is shutting down.
    pub fn connect<S>(
        self: &Arc<Self>,
        initial: sv1::WatchJobsRequestInitial,
        context: bool,
        inbound: S,
    ) -> Result<Outbound, Status>
    where
        S: Stream<Item = Result<sv1::WatchJobsRequest, Status>> + Send + 'static,
    {
        let prefixes = prefixes_of(&initial).inspect_err(|e| {
            if e.code() == tonic::Code::InvalidArgument {
                self.metrics.sidecar_error(SidecarError::AuthFailed);
            }
        })?;
        let (tx, rx) = mpsc::channel(OUTBOUND_BUFFER);
        let conn = Arc::new(Conn {
            id: self.next_conn.fetch_add(1, Ordering::Relaxed),
            label: format!("{}/{}", initial.namespace, initial.app_id),
            prefixes,
            context,
            tx,
            acks: Mutex::default(),
            closed: CancellationToken::new(),
            error: Mutex::default(),
        });
        // The limits hold before any trigger can reach the stream.
        self.gates
            .open_stream(conn.id, &initial.namespace, &initial.concurrency_limits);
        let first = {
            let mut guard = lock(&self.routes);
            let routes = &mut *guard;
            if routes.closed {
                self.gates.close_stream(conn.id);
                return Err(Status::unknown("server is closing"));
            }
            routes.conns.insert(conn.id, conn.clone());
            let mut first = Vec::new();
            for prefix in &conn.prefixes {
                let ring = routes.rings.entry(prefix.clone()).or_default();
                ring.conns.push(conn.clone());
                if ring.conns.len() == 1 {
                    *routes.lens.entry(prefix.len()).or_default() += 1;
                    first.push(prefix.clone());
                }
            }
            first
        };
        tracing::info!(stream = %conn.label, id = conn.id, prefixes = ?conn.prefixes, "WatchJobs stream connected");
        // Registered before released: a trigger the engine stages from now on sees the stream.
        self.release(first);
        tokio::spawn(self.clone().recv_loop(conn.clone(), inbound));

        let tail = conn.clone();
        let out = ReceiverStream::new(rx)
            .map(|response| Some(Ok(response)))
            .take_until(conn.closed.clone().cancelled_owned())
            .chain(futures_util::stream::once(async move {
                lock(&tail.error).take().map(Err)
            }))
            .filter_map(futures_util::future::ready);
        Ok(Box::pin(out))
    }

    /// Closes every stream (in-flight triggers resolve `Undeliverable`) and refuses new ones:
    /// the first step of a graceful shutdown, since streams never end on their own.
    pub fn close_all(&self) {
        let all: Vec<Arc<Conn>> = {
            let mut routes = lock(&self.routes);
            routes.closed = true;
            routes.conns.values().cloned().collect()
        };
        for conn in all {
            self.close(&conn, Some(Status::unknown("server is closing")));
        }
        self.gates.close_all();
    }

    /// Follows where this replica stands among the live ones (its share of each concurrency
    /// limit) until the sender goes.
    pub fn follow_place(&self, mut place: tokio::sync::watch::Receiver<Place>) {
        let gates = self.gates.clone();
        tokio::spawn(async move {
            loop {
                let now = *place.borrow_and_update();
                gates.set_place(now);
                if place.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    fn release(&self, prefixes: Vec<String>) {
        if let Some(engine) = self.engine.get() {
            for prefix in prefixes {
                engine.release(prefix);
            }
        }
    }

    /// Reads acks until the stream ends, errs or is closed.
    async fn recv_loop<S>(self: Arc<Self>, conn: Arc<Conn>, inbound: S)
    where
        S: Stream<Item = Result<sv1::WatchJobsRequest, Status>> + Send + 'static,
    {
        let mut inbound = Box::pin(inbound);
        loop {
            let msg = tokio::select! {
                () = conn.closed.cancelled() => return,
                msg = inbound.next() => msg,
            };
            match msg {
                Some(Ok(req)) => {
                    if let Err(status) = on_message(&conn, req) {
                        tracing::warn!(stream = %conn.label, id = conn.id, error = %status.message(), "closing WatchJobs stream");
                        self.close(&conn, Some(status));
                        return;
                    }
                }
                Some(Err(status)) => {
                    if status.code() != tonic::Code::Cancelled {
                        self.metrics.sidecar_error(SidecarError::RecvFailed);
                    }
                    tracing::debug!(stream = %conn.label, id = conn.id, error = %status, "WatchJobs stream failed");
                    self.close(&conn, None);
                    return;
                }
                None => {
                    self.close(&conn, None);
                    return;
                }
            }
        }
    }

    /// Unregisters `conn`, ends its outbound stream (with `error`, if any) and resolves its
    /// unacked triggers as `Undeliverable`. Closing twice is a no-op.
    fn close(&self, conn: &Arc<Conn>, error: Option<Status>) {
        {
            let mut guard = lock(&self.routes);
            let routes = &mut *guard;
            if routes.conns.remove(&conn.id).is_none() {
                return;
            }
            for prefix in &conn.prefixes {
                let Some(ring) = routes.rings.get_mut(prefix) else {
                    continue;
                };
                ring.conns.retain(|c| c.id != conn.id);
                if ring.conns.is_empty() {
                    routes.rings.remove(prefix);
                    if let Some(n) = routes.lens.get_mut(&prefix.len()) {
                        *n -= 1;
                        if *n == 0 {
                            routes.lens.remove(&prefix.len());
                        }
                    }
                }
            }
        }
        // Unregistered before the results go out: when the engine hears `Undeliverable` it
        // asks `is_deliverable`, which must already know whether another stream is left.
        // Gates no other stream names go now, their waiting triggers with them.
        self.gates.close_stream(conn.id);
        *lock(&conn.error) = error;
        let waiting = {
            let mut acks = lock(&conn.acks);
            acks.closed = true;
            std::mem::take(&mut acks.inflight)
        };
        conn.closed.cancel();
        tracing::info!(stream = %conn.label, id = conn.id, unacked = waiting.len(), "WatchJobs stream closed");
        for (_, waiter) in waiting {
            let _ = waiter.send(TriggerResult::Undeliverable);
        }
    }

    /// The next stream of `prefix`, round robin.
    fn pick(&self, prefix: &str) -> Option<Arc<Conn>> {
        let mut routes = lock(&self.routes);
        let ring = routes.rings.get_mut(prefix)?;
        let conn = ring.conns.get(ring.next % ring.conns.len().max(1))?.clone();
        ring.next = ring.next.wrapping_add(1);
        Some(conn)
    }
}

/// Handles one message after `initial`: an ack. `Err` closes the stream with that error.
fn on_message(conn: &Conn, req: sv1::WatchJobsRequest) -> Result<(), Status> {
    let Some(WatchJobRequestType::Result(result)) = req.watch_job_request_type else {
        return Err(Status::unknown("received nil result from stream"));
    };
    let outcome = match TriggerResult::from_wire(result.status) {
        Some(outcome) => outcome,
        // Checked before the id is taken, so the trigger is resolved by the close instead.
        None => {
            return Err(Status::unknown(format!(
                "unknown trigger response status: {}",
                result.status
            )));
        }
    };
    let waiter = lock(&conn.acks).inflight.remove(&result.id);
    match waiter {
        Some(waiter) => {
            let _ = waiter.send(outcome);
        }
        // A duplicate or made-up id: newer Dapr drops it and keeps the stream.
        None => {
            tracing::warn!(stream = %conn.label, id = result.id, "received unknown trigger response from stream; ignored")
        }
    }
    Ok(())
}

/// The prefixes a stream takes, from its `initial` message, with Dapr's checks.
fn prefixes_of(initial: &sv1::WatchJobsRequestInitial) -> Result<Vec<String>, Status> {
    if initial.namespace.is_empty() || initial.app_id.is_empty() {
        return Err(Status::invalid_argument(
            "missing namespace or appID in request",
        ));
    }
    let mut seen = BTreeSet::new();
    for &t in &initial.accept_job_types {
        if !seen.insert(t) {
            let name = JobTargetType::try_from(t)
                .map(|t| t.as_str_name().to_owned())
                .unwrap_or_else(|_| t.to_string());
            return Err(Status::unknown(format!(
                "duplicate target type specified: {name}"
            )));
        }
    }
    // No types at all is the pre-1.15 daprd: it takes both kinds.
    let accepts = |t: JobTargetType| seen.is_empty() || seen.contains(&(t as i32));
    let mut prefixes = Vec::new();
    if accepts(JobTargetType::Job) {
        prefixes.push(keys::app_job_prefix(&initial.namespace, &initial.app_id));
    }
    if accepts(JobTargetType::ActorReminder) {
        // Deduplicated: one stream listed twice in a ring would get twice its share.
        let types: BTreeSet<&str> = initial.actor_types.iter().map(String::as_str).collect();
        for actor_type in types {
            prefixes.push(keys::actor_type_prefix(&initial.namespace, actor_type));
        }
    }
    Ok(prefixes)
}

/// The `type` label of a job's metadata.
pub fn job_type(metadata: &sv1::JobMetadata) -> JobType {
    match metadata.target.as_ref().and_then(|t| t.r#type.as_ref()) {
        Some(Target::Job(_)) => JobType::Job,
        Some(Target::Actor(_)) => JobType::Actor,
        None => JobType::Unknown,
    }
}

#[async_trait::async_trait]
impl Sink for Pool {
    async fn deliver(&self, trigger: Trigger) -> TriggerResult {
        if !self.may_fire() {
            return TriggerResult::Undeliverable;
        }
        let kind = job_type(&trigger.metadata);
        // The concurrency limits first: a trigger may wait here for a slot.
        let permit = match self.gates.admit(&trigger.metadata).await {
            Ok(permit) => permit,
            Err(result) => {
                self.metrics.answered(kind, self.metrics.sending(), result);
                return result;
            }
        };
        if !self.may_fire() {
            return TriggerResult::Undeliverable;
        }
        let sent = self.metrics.sending();
        let result = self.send(trigger).await;
        // Answered: the slot is free for the next waiting trigger.
        drop(permit);
        self.metrics.answered(kind, sent, result);
        result
    }

    fn is_deliverable(&self, key: &str) -> bool {
        if !self.may_fire() {
            return false;
        }
        let routes = lock(&self.routes);
        routes.lens.keys().any(|&len| {
            key.get(..len)
                .is_some_and(|prefix| routes.rings.contains_key(prefix))
        })
    }
}

impl Pool {
    /// Sends `trigger` on one stream of its target and waits for the ack.
    async fn send(&self, trigger: Trigger) -> TriggerResult {
        let Some(conn) = keys::target_prefix(&trigger.metadata).and_then(|p| self.pick(&p)) else {
            return TriggerResult::Undeliverable;
        };
        let (id, answer) = {
            let mut acks = lock(&conn.acks);
            if acks.closed {
                return TriggerResult::Undeliverable;
            }
            acks.last_id += 1;
            let id = acks.last_id;
            let (tx, rx) = oneshot::channel();
            acks.inflight.insert(id, tx);
            (id, rx)
        };
        let mut response = sv1::WatchJobsResponse {
            name: trigger.name.to_string(),
            id,
            data: trigger.data,
            metadata: Some((*trigger.metadata).clone()),
            ..Default::default()
        };
        if conn.context {
            response.jobsd_tick = trigger.tick.map(|t| prost_types::Timestamp {
                seconds: t.timestamp(),
                nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
            });
            response.jobsd_attempt = trigger.attempt;
            response.jobsd_trigger = trigger.kind.as_str().to_owned();
        }
        tracing::debug!(job = %trigger.name, stream = conn.id, id, "trigger sent");
        let sent = tokio::select! {
            sent = conn.tx.send(response) => {
                if sent.is_err() {
                    self.metrics.sidecar_error(SidecarError::SendFailed);
                }
                sent.is_ok()
            }
            () = conn.closed.cancelled() => false,
        };
        if !sent {
            // The peer is gone: this trigger and every other one out on the stream go back to
            // the engine as undeliverable.
            self.close(&conn, None);
            return TriggerResult::Undeliverable;
        }
        answer.await.unwrap_or(TriggerResult::Undeliverable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;

    fn initial(
        app: &str,
        types: &[JobTargetType],
        actors: &[&str],
    ) -> sv1::WatchJobsRequestInitial {
        sv1::WatchJobsRequestInitial {
            app_id: app.into(),
            namespace: "ns".into(),
            actor_types: actors.iter().map(|s| (*s).to_owned()).collect(),
            accept_job_types: types.iter().map(|t| *t as i32).collect(),
            concurrency_limits: Vec::new(),
        }
    }

    fn trigger(metadata: sv1::JobMetadata, name: &str) -> Trigger {
        Trigger {
            key: Arc::from(format!("{}{name}", keys::target_prefix(&metadata).unwrap())),
            name: Arc::from(name),
            data: None,
            metadata: Arc::new(metadata),
            scheduled_at: chrono::DateTime::UNIX_EPOCH,
            tick: Some(chrono::DateTime::UNIX_EPOCH),
            kind: crate::trigger::TriggerKind::Schedule,
            execution_id: crate::trigger::ExecutionId::for_tick(name, chrono::DateTime::UNIX_EPOCH),
            attempt: 1,
            created_by: None,
        }
    }

    fn app_meta(app: &str) -> sv1::JobMetadata {
        sv1::JobMetadata {
            app_id: app.into(),
            namespace: "ns".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }
    }

    type Inbound = mpsc::UnboundedSender<Result<sv1::WatchJobsRequest, Status>>;

    fn open(pool: &Arc<Pool>, init: sv1::WatchJobsRequestInitial) -> (Inbound, Outbound) {
        let (tx, rx) = mpsc::unbounded_channel();
        let out = pool
            .connect(
                init,
                true,
                tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
            )
            .unwrap();
        (tx, out)
    }

    fn ack(id: u64, status: i32) -> Result<sv1::WatchJobsRequest, Status> {
        Ok(sv1::WatchJobsRequest {
            watch_job_request_type: Some(WatchJobRequestType::Result(
                sv1::WatchJobsRequestResult { id, status },
            )),
        })
    }

    #[test]
    fn initial_decides_the_prefixes() {
        let all = prefixes_of(&initial("a", &[], &["T", "U", "T"])).unwrap();
        assert_eq!(
            all,
            [
                "app||ns||a||",
                "actorreminder||ns||T||",
                "actorreminder||ns||U||"
            ]
        );
        let jobs = prefixes_of(&initial("a", &[JobTargetType::Job], &["T"])).unwrap();
        assert_eq!(jobs, ["app||ns||a||"]);
        let actors = prefixes_of(&initial("a", &[JobTargetType::ActorReminder], &["T"])).unwrap();
        assert_eq!(actors, ["actorreminder||ns||T||"]);

        let dup = initial("a", &[JobTargetType::Job, JobTargetType::Job], &[]);
        let err = prefixes_of(&dup).unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unknown);
        assert_eq!(
            err.message(),
            "duplicate target type specified: JOB_TARGET_TYPE_JOB"
        );
        let err = prefixes_of(&initial("", &[], &[])).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert_eq!(err.message(), "missing namespace or appID in request");
    }

    #[tokio::test]
    async fn deliverable_follows_registered_prefixes() {
        let pool = Arc::new(Pool::new());
        assert!(!pool.is_deliverable("app||ns||a||job"));
        let (in_a, _out_a) = open(&pool, initial("a", &[], &["Cart"]));
        let (_in_b, _out_b) = open(&pool, initial("a", &[JobTargetType::Job], &[]));
        assert!(pool.is_deliverable("app||ns||a||job"));
        assert!(!pool.is_deliverable("app||ns||ab||job"));
        assert!(pool.is_deliverable("actorreminder||ns||Cart||1||r"));
        assert!(!pool.is_deliverable("actorreminder||ns||CartItem||1||r"));
        assert!(!pool.is_deliverable("é"));

        drop(in_a);
        for _ in 0..1000 {
            if pool.streams() == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(pool.streams(), 1);
        assert!(pool.is_deliverable("app||ns||a||job"));
        assert!(!pool.is_deliverable("actorreminder||ns||Cart||1||r"));
        assert_eq!(lock(&pool.routes).lens.len(), 1);
    }

    fn reminder_meta(actor_type: &str, id: &str) -> sv1::JobMetadata {
        sv1::JobMetadata {
            app_id: "a".into(),
            namespace: "ns".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Actor(sv1::TargetActorReminder {
                    id: id.into(),
                    r#type: actor_type.into(),
                })),
            }),
            concurrency_key: None,
        }
    }

    #[tokio::test]
    async fn a_stream_s_concurrency_limit_holds_triggers_until_answers_free_a_slot() {
        let pool = Arc::new(Pool::new());
        let mut init = initial("a", &[JobTargetType::ActorReminder], &["T"]);
        init.concurrency_limits = vec![sv1::ConcurrencyLimit {
            max_concurrent: 1,
            name: None,
            target: Some(sv1::concurrency_limit::Target::Actor(
                sv1::ConcurrencyLimitActor { r#type: "T".into() },
            )),
        }];
        let (inbound, mut out) = open(&pool, init);
        let deliver = |id: &str| {
            let p = pool.clone();
            let t = trigger(reminder_meta("T", id), id);
            tokio::spawn(async move { p.deliver(t).await })
        };
        let one = deliver("1");
        let first = out.next().await.unwrap().unwrap();
        let two = deliver("2");
        let three = deliver("3");
        let held = tokio::time::timeout(std::time::Duration::from_millis(200), out.next()).await;
        assert!(
            held.is_err(),
            "a second trigger went out under a limit of 1"
        );
        // A FAILED answer frees the slot as well as a SUCCESS.
        inbound.send(ack(first.id, 1)).unwrap();
        assert_eq!(one.await.unwrap(), TriggerResult::Failed);
        let second = out.next().await.unwrap().unwrap();
        assert_eq!(second.name, "2", "waiting triggers go in order");
        inbound.send(ack(second.id, 0)).unwrap();
        assert_eq!(two.await.unwrap(), TriggerResult::Success);
        let third = out.next().await.unwrap().unwrap();
        assert_eq!(third.name, "3");
        // The stream goes: its in-flight trigger is undeliverable, and the gate with it.
        drop(inbound);
        assert_eq!(three.await.unwrap(), TriggerResult::Undeliverable);
    }

    #[tokio::test]
    async fn acks_resolve_triggers_and_close_resolves_the_rest() {
        let pool = Arc::new(Pool::new());
        let (inbound, mut out) = open(&pool, initial("a", &[], &[]));

        let p = pool.clone();
        let first = tokio::spawn(async move { p.deliver(trigger(app_meta("a"), "one")).await });
        let sent = out.next().await.unwrap().unwrap();
        assert_eq!((sent.name.as_str(), sent.id), ("one", 1));
        inbound.send(ack(1, 1)).unwrap();
        assert_eq!(first.await.unwrap(), TriggerResult::Failed);

        let p = pool.clone();
        let second = tokio::spawn(async move { p.deliver(trigger(app_meta("a"), "two")).await });
        assert_eq!(out.next().await.unwrap().unwrap().id, 2);
        // An unknown status closes the stream with Dapr's error; the trigger goes back.
        inbound.send(ack(2, 7)).unwrap();
        assert_eq!(second.await.unwrap(), TriggerResult::Undeliverable);
        let err = out.next().await.unwrap().unwrap_err();
        assert_eq!(err.message(), "unknown trigger response status: 7");
        assert!(out.next().await.is_none());
        assert_eq!(pool.streams(), 0);
        assert_eq!(
            pool.deliver(trigger(app_meta("a"), "three")).await,
            TriggerResult::Undeliverable
        );
    }
}
