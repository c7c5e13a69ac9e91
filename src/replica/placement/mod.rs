//! Dapr 1.18's actor placement service, served by a `jobsd scheduler` replica
//! (`--placement-enabled`): daprd sidecars (and jobsd sidecars) report the actor types they
//! host on a `ReportDaprStatus` stream and receive, per namespace, the table of hosts per
//! actor type; each sidecar then places an actor on a host with Dapr's hash ring.
//!
//! - One replica leads and serves the streams; the others answer daprd's `FailedPrecondition`
//!   ("not a leader"), and daprd tries the next address. Alone, the replica leads; in a
//!   cluster, the live member first by id leads (its place among the members), while its
//!   lease holds. A replica that stops leading closes its streams, and the sidecars find the
//!   new leader. The tables live in the leader's memory, as Dapr's (its raft keeps only who
//!   leads): sidecars report again to a new leader.
//! - [`round`] runs the dissemination rounds (Dapr's disseminator), [`table`] keeps the
//!   hosts; this file carries the round's effects out: streams, timers, metrics.
//! - Reports are checked as Dapr's authorizer does without mTLS (app id and namespace given,
//!   `dapr.internal.<namespace>.<app id>.…` actor types only for that app).

mod round;
mod state;
mod table;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use futures_util::Stream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Response, Status, Streaming};

use self::round::{Effect, Round, Waiting};
use crate::observe::PlacementMetrics;
use crate::proto::dapr_placement::{self as pv1, HostOperation};
pub use state::state_json;

/// How the placement service runs (`--placement-*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Virtual nodes per host on daprd's hash ring (Dapr's `--replicationFactor`).
    pub replication_factor: i64,
    /// How long a round waits for every stream's ack (Dapr's `--disseminate-timeout`).
    pub disseminate_timeout: Duration,
    /// How long after a round the next one waits to gather changes (Dapr's
    /// `--disseminate-coalesce-window`; zero: not at all).
    pub coalesce_window: Duration,
    /// Whether `GET /placement/state` is served on the healthz port (`--metadata-enabled`).
    pub metadata: bool,
    /// An extra port serving only placement (Dapr's placement port, 50005), beside `--port`.
    pub port: Option<std::net::SocketAddr>,
}

/// The placement service of one replica.
#[derive(Clone)]
pub struct Placement {
    events: mpsc::UnboundedSender<Event>,
    leader: watch::Receiver<bool>,
    node_id: Arc<str>,
    stop: CancellationToken,
}

/// What a sidecar's stream answers with.
pub type Orders = Pin<Box<dyn Stream<Item = Result<pv1::PlacementOrder, Status>> + Send>>;

/// A sidecar's connection as the rounds hand it around.
#[derive(Debug)]
struct Conn {
    inbound: Streaming<pv1::Host>,
    out: mpsc::UnboundedSender<Result<pv1::PlacementOrder, Status>>,
}

/// What the service loop hears.
enum Event {
    Add {
        host: pv1::Host,
        conn: Box<Conn>,
    },
    Report {
        idx: u64,
        host: pv1::Host,
    },
    Closed {
        idx: u64,
        status: Status,
    },
    Timeout {
        ns: String,
        version: u64,
        generation: u64,
    },
    Coalesce {
        ns: String,
        generation: u64,
    },
    State(oneshot::Sender<Result<pv1::StatePlacementTables, Status>>),
}

impl Placement {
    /// Starts the service loop; `leader` says whether this replica leads (it may change).
    pub fn start(
        settings: Settings,
        node_id: &str,
        leader: watch::Receiver<bool>,
        metrics: PlacementMetrics,
        stop: CancellationToken,
    ) -> Placement {
        let (events, rx) = mpsc::unbounded_channel();
        let service = Placement {
            events: events.clone(),
            leader: leader.clone(),
            node_id: node_id.into(),
            stop: stop.clone(),
        };
        let run = Loop {
            settings,
            node_id: node_id.into(),
            events,
            ids: Arc::new(AtomicU64::new(0)),
            namespaces: HashMap::new(),
            live: HashMap::new(),
            generation: 0,
            metrics,
        };
        tokio::spawn(run.run(rx, leader, stop));
        service
    }

    /// The tonic server for this service.
    pub fn into_server(self) -> pv1::placement_server::PlacementServer<Self> {
        pv1::placement_server::PlacementServer::new(self)
    }

    /// Every namespace's hosts and table version (`GET /placement/state`); refused when this
    /// replica does not lead.
    pub async fn state(&self) -> Result<pv1::StatePlacementTables, Status> {
        if !*self.leader.borrow() {
            return Err(self.not_leader());
        }
        let (tx, rx) = oneshot::channel();
        self.events
            .send(Event::State(tx))
            .map_err(|_| shutting_down())?;
        rx.await.map_err(|_| shutting_down())?
    }

    fn not_leader(&self) -> Status {
        not_leader(&self.node_id)
    }
}

fn not_leader(node_id: &str) -> Status {
    Status::new(
        Code::FailedPrecondition,
        format!("node id={node_id} is not a leader. Only the leader can serve requests"),
    )
}

fn shutting_down() -> Status {
    Status::new(Code::Unavailable, "placement server is shutting down")
}

/// Dapr's checks of a report (its authorizer without mTLS).
fn authorize(host: &pv1::Host) -> Result<(), Status> {
    if host.operation() == HostOperation::Unknown && host.version.is_some() {
        return Err(Status::new(
            Code::InvalidArgument,
            "both operation and version must be set or both must be unset",
        ));
    }
    if host.id.is_empty() || host.namespace.is_empty() {
        return Err(Status::new(
            Code::InvalidArgument,
            "host ID and namespace must be provided",
        ));
    }
    for entity in &host.entities {
        let parts: Vec<&str> = entity.split('.').collect();
        if parts.len() >= 2
            && parts[0] == "dapr"
            && parts[1] == "internal"
            && (parts.len() < 4 || parts[2] != host.namespace || parts[3] != host.id)
        {
            return Err(Status::new(
                Code::PermissionDenied,
                format!(
                    "entity {entity} is not allowed for app ID {} in namespace {}",
                    host.id, host.namespace
                ),
            ));
        }
    }
    Ok(())
}

#[tonic::async_trait]
impl pv1::placement_server::Placement for Placement {
    type ReportDaprStatusStream = Orders;

    async fn report_dapr_status(
        &self,
        request: Request<Streaming<pv1::Host>>,
    ) -> Result<Response<Orders>, Status> {
        if !*self.leader.borrow() {
            return Err(self.not_leader());
        }
        if self.stop.is_cancelled() {
            return Err(shutting_down());
        }
        let mut inbound = request.into_inner();
        let host = inbound
            .message()
            .await?
            .ok_or_else(|| Status::new(Code::Unknown, "EOF"))?;
        authorize(&host)?;
        // Dapr's line, word for word: tools (and Dapr's tests) wait for it.
        tracing::info!(
            "Received status report connection from new namespace={} id={} host={}",
            host.namespace,
            host.id,
            host.name
        );
        let (out, orders) = mpsc::unbounded_channel();
        self.events
            .send(Event::Add {
                host,
                conn: Box::new(Conn { inbound, out }),
            })
            .map_err(|_| shutting_down())?;
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(
            orders,
        ))))
    }
}

/// One namespace: its rounds, its connections, its timers.
struct Namespace {
    round: Round<Conn>,
    /// Connections added and not yet closed (waiting ones too); at zero the namespace goes.
    connections: u64,
    /// The senders of its started streams, and what stops their readers.
    outs: HashMap<
        u64,
        (
            mpsc::UnboundedSender<Result<pv1::PlacementOrder, Status>>,
            CancellationToken,
        ),
    >,
    /// Armed timeouts: version → generation.
    timeouts: HashMap<u64, u64>,
    /// The coalesce timer's generation (the last armed one counts).
    coalesce: u64,
}

/// The service loop: owns every namespace.
struct Loop {
    settings: Settings,
    node_id: String,
    events: mpsc::UnboundedSender<Event>,
    ids: Arc<AtomicU64>,
    namespaces: HashMap<String, Namespace>,
    /// Started streams whose reader runs → their namespace.
    live: HashMap<u64, String>,
    /// Timer generations.
    generation: u64,
    metrics: PlacementMetrics,
}

impl Loop {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Event>,
        mut leader: watch::Receiver<bool>,
        stop: CancellationToken,
    ) {
        let mut leading = *leader.borrow_and_update();
        self.metrics.set_leader(leading);
        loop {
            tokio::select! {
                _ = stop.cancelled() => {
                    self.shutdown_all(&shutting_down());
                    return;
                }
                changed = leader.changed() => {
                    if changed.is_err() {
                        self.shutdown_all(&shutting_down());
                        return;
                    }
                    let now = *leader.borrow_and_update();
                    if now != leading {
                        leading = now;
                        self.metrics.set_leader(now);
                        tracing::info!(id = %self.node_id, leading = now, "placement: leadership changed");
                        if !now {
                            let status = not_leader(&self.node_id);
                            self.shutdown_all(&status);
                        }
                    }
                }
                event = rx.recv() => {
                    let Some(event) = event else { return };
                    self.handle(event, leading);
                }
            }
        }
    }

    fn handle(&mut self, event: Event, leading: bool) {
        match event {
            Event::Add { host, conn } => {
                if !leading {
                    let _ = conn.out.send(Err(not_leader(&self.node_id)));
                    return;
                }
                let ns = host.namespace.clone();
                let settings = &self.settings;
                let ids = &self.ids;
                let entry = self
                    .namespaces
                    .entry(ns.clone())
                    .or_insert_with(|| Namespace {
                        round: Round::new(
                            settings.replication_factor,
                            settings.disseminate_timeout,
                            settings.coalesce_window,
                            ids.clone(),
                        ),
                        connections: 0,
                        outs: HashMap::new(),
                        timeouts: HashMap::new(),
                        coalesce: 0,
                    });
                entry.connections += 1;
                let effects = entry.round.add(Waiting { host, conn: *conn });
                self.apply(&ns, effects);
            }
            Event::Report { idx, host } => {
                let Some(ns) = self.live.get(&idx).cloned() else {
                    return;
                };
                if let Some(n) = self.namespaces.get_mut(&ns) {
                    let effects = n.round.reported(idx, host);
                    self.apply(&ns, effects);
                }
            }
            Event::Closed { idx, status } => {
                let Some(ns) = self.live.remove(&idx) else {
                    return;
                };
                let Some(n) = self.namespaces.get_mut(&ns) else {
                    return;
                };
                n.connections = n.connections.saturating_sub(1);
                let effects = n.round.closed(idx, status.clone());
                self.apply(&ns, effects);
                if self.namespaces.get(&ns).is_some_and(|n| n.connections == 0) {
                    self.shutdown(&ns, &status);
                }
            }
            Event::Timeout {
                ns,
                version,
                generation,
            } => {
                let Some(n) = self.namespaces.get_mut(&ns) else {
                    return;
                };
                if n.timeouts.get(&version) != Some(&generation) {
                    return;
                }
                n.timeouts.remove(&version);
                let effects = n.round.timeout(version);
                self.apply(&ns, effects);
            }
            Event::Coalesce { ns, generation } => {
                let Some(n) = self.namespaces.get_mut(&ns) else {
                    return;
                };
                if n.coalesce != generation {
                    return;
                }
                let effects = n.round.coalesce_fire();
                self.apply(&ns, effects);
            }
            Event::State(reply) => {
                let answer = if leading {
                    Ok(pv1::StatePlacementTables {
                        tables: self
                            .namespaces
                            .iter()
                            .map(|(ns, n)| (ns.clone(), n.round.state()))
                            .collect(),
                    })
                } else {
                    Err(not_leader(&self.node_id))
                };
                let _ = reply.send(answer);
            }
        }
    }

    /// Carries out what a round answered, for namespace `ns`.
    fn apply(&mut self, ns: &str, effects: Vec<Effect<Conn>>) {
        for effect in effects {
            match effect {
                Effect::Start { idx, conn } => self.start(ns, idx, conn),
                Effect::Send { idx, order } => {
                    if let Some((out, _)) = self.namespaces.get(ns).and_then(|n| n.outs.get(&idx)) {
                        let _ = out.send(Ok(order));
                    }
                }
                Effect::Close { idx, status } => {
                    if let Some((out, reader)) = self
                        .namespaces
                        .get_mut(ns)
                        .and_then(|n| n.outs.remove(&idx))
                    {
                        tracing::info!(namespace = ns, stream = idx, %status, "placement: closing a stream");
                        let _ = out.send(Err(status));
                        reader.cancel();
                    }
                }
                Effect::Refuse { conn, status } => {
                    let _ = conn.out.send(Err(status));
                }
                Effect::ArmTimeout(version) => {
                    self.generation += 1;
                    let generation = self.generation;
                    if let Some(n) = self.namespaces.get_mut(ns) {
                        n.timeouts.insert(version, generation);
                    }
                    let event = Event::Timeout {
                        ns: ns.to_owned(),
                        version,
                        generation,
                    };
                    self.after(self.settings.disseminate_timeout, event);
                }
                Effect::DisarmTimeout(version) => {
                    if let Some(n) = self.namespaces.get_mut(ns) {
                        n.timeouts.remove(&version);
                    }
                }
                Effect::ArmCoalesce => {
                    self.generation += 1;
                    let generation = self.generation;
                    if let Some(n) = self.namespaces.get_mut(ns) {
                        n.coalesce = generation;
                    }
                    let event = Event::Coalesce {
                        ns: ns.to_owned(),
                        generation,
                    };
                    self.after(self.settings.coalesce_window, event);
                }
                Effect::Runtimes { all, actors } => self.metrics.set_runtimes(ns, all, actors),
            }
        }
    }

    /// Sends `event` to the loop after `wait`.
    fn after(&self, wait: Duration, event: Event) {
        let events = self.events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let _ = events.send(event);
        });
    }

    /// Starts reading stream `idx`: its reports go to the loop, and its end.
    fn start(&mut self, ns: &str, idx: u64, conn: Conn) {
        let reader = CancellationToken::new();
        if let Some(n) = self.namespaces.get_mut(ns) {
            n.outs.insert(idx, (conn.out, reader.clone()));
        }
        self.live.insert(idx, ns.to_owned());
        let events = self.events.clone();
        let mut inbound = conn.inbound;
        tokio::spawn(async move {
            let status = loop {
                let next = tokio::select! {
                    () = reader.cancelled() => break Status::new(Code::Cancelled, "stream closed by placement"),
                    next = inbound.message() => next,
                };
                match next {
                    Ok(Some(host)) => {
                        if let Err(status) = authorize(&host) {
                            break status;
                        }
                        if events.send(Event::Report { idx, host }).is_err() {
                            return;
                        }
                    }
                    Ok(None) => break Status::new(Code::Cancelled, "stream closed by the sidecar"),
                    Err(status) => break status,
                }
            };
            let _ = events.send(Event::Closed { idx, status });
        });
    }

    /// Ends namespace `ns`: its streams and waiting connections are told `status`.
    fn shutdown(&mut self, ns: &str, status: &Status) {
        let Some(mut n) = self.namespaces.remove(ns) else {
            return;
        };
        let effects = n.round.shutdown(status);
        for (idx, (out, reader)) in n.outs.drain() {
            self.live.remove(&idx);
            let _ = out.send(Err(status.clone()));
            reader.cancel();
        }
        for effect in effects {
            match effect {
                Effect::Refuse { conn, status } => {
                    let _ = conn.out.send(Err(status));
                }
                Effect::Runtimes { all, actors } => self.metrics.set_runtimes(ns, all, actors),
                _ => {}
            }
        }
    }

    fn shutdown_all(&mut self, status: &Status) {
        let names: Vec<String> = self.namespaces.keys().cloned().collect();
        for ns in names {
            self.shutdown(&ns, status);
        }
    }
}

/// Whether this replica leads placement: alone, always; in a cluster, while it holds its
/// lease and is the first live member by id.
pub fn leadership(
    cluster: Option<(
        watch::Receiver<crate::replica::gates::Place>,
        crate::replica::cluster::Standing,
    )>,
    stop: CancellationToken,
) -> watch::Receiver<bool> {
    let Some((mut place, standing)) = cluster else {
        let (tx, rx) = watch::channel(true);
        // Kept for as long as the replica runs: a dropped sender reads as shutting down.
        tokio::spawn(async move {
            stop.cancelled().await;
            drop(tx);
        });
        return rx;
    };
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        loop {
            let leads = standing.holds() && place.borrow_and_update().index == 0;
            tx.send_if_modified(|was| {
                let changed = *was != leads;
                *was = leads;
                changed
            });
            tokio::select! {
                () = stop.cancelled() => return,
                changed = place.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(LEADERSHIP_CHECK) => {}
            }
        }
    });
    rx
}

/// How often a member checks that it still holds its lease (its place comes as it changes).
const LEADERSHIP_CHECK: Duration = Duration::from_millis(250);

#[cfg(test)]
mod tests;
