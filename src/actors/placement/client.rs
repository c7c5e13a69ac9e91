//! The sidecar's side of Dapr 1.18's placement protocol (daprd's
//! `pkg/actors/internal/placement`): report the hosted actor types on a `ReportDaprStatus`
//! stream, ack each step of a round (`lock`, `update`, `unlock`), and keep the rings of the
//! last update. Between an update and its unlock, lookups wait (daprd locks the changed
//! types): actors that moved away were drained first, so an actor is never active on two
//! hosts. The first unlock makes the sidecar ready; lookups before it wait too.
//!
//! Addresses are tried in turn (a replica that does not lead answers `FailedPrecondition`);
//! a broken stream is reopened after a short pause, reporting again.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;

use super::ring::{Host, Tables};
use crate::proto::dapr_placement::placement_client::PlacementClient;
use crate::proto::dapr_placement::{self as pv1, HostOperation};

/// How this sidecar reports itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The placement service's addresses (`host:port`), tried in turn.
    pub addresses: Vec<String>,
    /// `address:port` of this sidecar's internal gRPC port, as others reach it.
    pub name: String,
    /// The internal port.
    pub port: i64,
    /// The app id.
    pub app_id: String,
    /// The namespace.
    pub namespace: String,
}

/// Drains the actors that the new tables place elsewhere (their turns end first).
pub type Drain = Arc<dyn Fn(Arc<Tables>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Where an actor lives now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// On this sidecar.
    Local,
    /// On another sidecar.
    Remote(Host),
    /// Its type has no host.
    Nowhere,
}

/// The placement client of one sidecar. Cheap to clone.
#[derive(Clone)]
pub struct Placement {
    me: Arc<str>,
    tables: watch::Receiver<Arc<Tables>>,
    /// True between an update and its unlock, and before the first unlock.
    locked: watch::Receiver<bool>,
    /// Whether a stream is open and has completed a round (daprd's `placement.Ready()`).
    ready: watch::Receiver<bool>,
}

/// How long a lookup waits for a round in progress (or the first one) to end.
const LOOKUP_WAIT: Duration = Duration::from_secs(30);
/// The pause before a stream is opened again.
const RECONNECT_PAUSE: Duration = Duration::from_millis(250);

impl Placement {
    /// Starts reporting `types` (and every change of them) as `me`; `drain` runs on each
    /// update before it is acked.
    pub fn start(
        me: Identity,
        types: watch::Receiver<Arc<Vec<String>>>,
        drain: Drain,
        stop: CancellationToken,
    ) -> Placement {
        let (tables_tx, tables) = watch::channel(Arc::new(Tables::default()));
        let (locked_tx, locked) = watch::channel(true);
        let (ready_tx, ready) = watch::channel(false);
        let placement = Placement {
            me: me.name.as_str().into(),
            tables,
            locked,
            ready,
        };
        let run = Client {
            me,
            types,
            drain,
            tables: tables_tx,
            locked: locked_tx,
            ready: ready_tx,
        };
        tokio::spawn(run.run(stop));
        placement
    }

    /// Whether placement is connected and a round completed on this stream.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// This sidecar's host name on the rings.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// Where `actor_type`/`actor_id` lives, once no round is in progress (waits at most
    /// [`LOOKUP_WAIT`]; then answers with the tables it has).
    pub async fn lookup(&self, actor_type: &str, actor_id: &str) -> Lookup {
        let mut locked = self.locked.clone();
        let _ = tokio::time::timeout(LOOKUP_WAIT, locked.wait_for(|l| !*l)).await;
        let tables = self.tables.borrow().clone();
        match tables.owner(actor_type, actor_id) {
            None => Lookup::Nowhere,
            Some(host) if host.name == *self.me => Lookup::Local,
            Some(host) => Lookup::Remote(host.clone()),
        }
    }

    /// Whether `actor_type`/`actor_id` lives here by the current tables (no wait).
    pub fn is_local(&self, actor_type: &str, actor_id: &str) -> bool {
        self.tables
            .borrow()
            .owner(actor_type, actor_id)
            .is_some_and(|h| h.name == *self.me)
    }
}

/// The client loop's state.
struct Client {
    me: Identity,
    types: watch::Receiver<Arc<Vec<String>>>,
    drain: Drain,
    tables: watch::Sender<Arc<Tables>>,
    locked: watch::Sender<bool>,
    ready: watch::Sender<bool>,
}

impl Client {
    async fn run(mut self, stop: CancellationToken) {
        let mut next = 0usize;
        loop {
            if self.me.addresses.is_empty() {
                return;
            }
            let address = self.me.addresses[next % self.me.addresses.len()].clone();
            next += 1;
            tokio::select! {
                () = stop.cancelled() => return,
                result = self.session(&address) => {
                    if let Err(e) = result {
                        tracing::debug!(placement = %address, error = %e, "placement stream ended");
                    }
                }
            }
            self.ready.send_replace(false);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RECONNECT_PAUSE) => {}
            }
        }
    }

    fn host(&self, op: HostOperation, version: Option<u64>) -> pv1::Host {
        let mut host = pv1::Host {
            name: self.me.name.clone(),
            port: self.me.port,
            entities: self.types.borrow().to_vec(),
            id: self.me.app_id.clone(),
            namespace: self.me.namespace.clone(),
            version,
            ..Default::default()
        };
        host.set_operation(op);
        host
    }

    /// One stream: report, then follow the rounds until the stream breaks.
    async fn session(&mut self, address: &str) -> Result<(), String> {
        let endpoint = format!("http://{address}");
        let mut client = PlacementClient::connect(endpoint)
            .await
            .map_err(|e| e.to_string())?;
        let (send, outbound) = mpsc::unbounded_channel();
        let mut first = self.host(HostOperation::Report, None);
        first.version = None;
        send.send(first).map_err(|e| e.to_string())?;
        let mut orders = client
            .report_dapr_status(UnboundedReceiverStream::new(outbound))
            .await
            .map_err(|s| s.message().to_owned())?
            .into_inner();
        tracing::info!(placement = %address, "connected to placement");
        let mut current = 0u64;
        loop {
            tokio::select! {
                changed = self.types.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let report = self.host(HostOperation::Report, None);
                    send.send(report).map_err(|e| e.to_string())?;
                }
                order = orders.message() => {
                    let Some(order) = order.map_err(|s| s.message().to_owned())? else {
                        return Err("placement closed the stream".into());
                    };
                    let version = order.version;
                    match order.operation.as_str() {
                        "lock" => {
                            current = version;
                            send.send(self.ack(HostOperation::Lock, version)).map_err(|e| e.to_string())?;
                        }
                        "update" => {
                            if version < current {
                                return Err(format!("version mismatch: expected {current}, got {version}"));
                            }
                            current = version;
                            let tables = Arc::new(Tables::from_update(
                                version,
                                &order.tables.unwrap_or_default(),
                            ));
                            self.locked.send_replace(true);
                            (self.drain)(tables.clone()).await;
                            self.tables.send_replace(tables);
                            send.send(self.ack(HostOperation::Update, version)).map_err(|e| e.to_string())?;
                        }
                        "unlock" => {
                            if version >= current {
                                current = version;
                                self.locked.send_replace(false);
                                self.ready.send_replace(true);
                                send.send(self.ack(HostOperation::Unlock, version)).map_err(|e| e.to_string())?;
                                tracing::debug!(version, "placement tables unlocked");
                            }
                        }
                        other => return Err(format!("unknown operation: {other}")),
                    }
                }
            }
        }
    }

    /// daprd's ack: the step, the version, the app id and namespace.
    fn ack(&self, op: HostOperation, version: u64) -> pv1::Host {
        let mut host = pv1::Host {
            id: self.me.app_id.clone(),
            namespace: self.me.namespace.clone(),
            version: Some(version),
            ..Default::default()
        };
        host.set_operation(op);
        host
    }
}
