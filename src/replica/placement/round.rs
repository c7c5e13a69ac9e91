//! One namespace's dissemination rounds, as Dapr 1.18's placement runs them
//! (`pkg/placement/internal/loops/disseminator`): when the hosts of a namespace change, every
//! stream of it is sent `lock`, then (once all acked) `update` with the tables, then `unlock`;
//! a stream that does not ack within the timeout is closed and the round starts again without
//! it. Streams that connect during a round wait for its end; a stream with no actor types
//! that changes nothing gets the current tables alone (lock, update, unlock at once).
//!
//! Pure: [`Round`] takes events and answers with [`Effect`]s (orders to send, streams to
//! start or close, timers to arm), which the service carries out. `C` is what a connection
//! is to the service (its inbound stream and outbound sender); the round only hands it back.
//!
//! Where this differs from Dapr: a report from a stream the round no longer has (closed or
//! timed out, its last message still in flight) is ignored; Dapr would record its host.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tonic::{Code, Status};

use super::table::Hosts;
use crate::proto::dapr_placement::{self as pv1, HostOperation};

/// The orders, as daprd reads them.
const LOCK: &str = "lock";
const UPDATE: &str = "update";
const UNLOCK: &str = "unlock";

/// What the service must do after an event.
#[derive(Debug)]
pub enum Effect<C> {
    /// Start reading the connection: it is stream `idx` from now on.
    Start {
        /// The stream's index.
        idx: u64,
        /// The connection.
        conn: C,
    },
    /// Send `order` on stream `idx`.
    Send {
        /// The stream.
        idx: u64,
        /// The order.
        order: pv1::PlacementOrder,
    },
    /// End stream `idx` with `status`.
    Close {
        /// The stream.
        idx: u64,
        /// What the sidecar is told.
        status: Status,
    },
    /// End a connection that never started (the namespace shut down while it waited).
    Refuse {
        /// The connection.
        conn: C,
        /// What the sidecar is told.
        status: Status,
    },
    /// Fire [`Round::timeout`] for `version` after the dissemination timeout.
    ArmTimeout(u64),
    /// Forget the timeout of `version`.
    DisarmTimeout(u64),
    /// Fire [`Round::coalesce_fire`] after the coalesce window.
    ArmCoalesce,
    /// The namespace's connected streams and those with actor types (the metrics).
    Runtimes {
        /// Every stream.
        all: usize,
        /// Streams whose first report named actor types.
        actors: usize,
    },
}

/// One stream, as the round sees it.
#[derive(Debug)]
struct Stream {
    /// The last step it acked.
    state: HostOperation,
    /// Whether its first report named actor types.
    has_actors: bool,
    /// The version of tables pushed to it alone, while it acks them.
    receiving_table: Option<u64>,
    /// The version of the last lock it was sent (Dapr's per-stream filter).
    locked: Option<u64>,
}

/// A connection waiting for the round in progress to end.
#[derive(Debug)]
pub struct Waiting<C> {
    /// The host it reported first.
    pub host: pv1::Host,
    /// The connection.
    pub conn: C,
}

/// The dissemination state of one namespace.
#[derive(Debug)]
pub struct Round<C> {
    /// Virtual nodes per host, sent in every table.
    replication_factor: i64,
    /// The dissemination timeout (for its error text).
    timeout: Duration,
    /// Whether rounds are coalesced (a window above zero).
    coalescing: bool,
    /// Whether the coalesce timer is armed.
    coalesce_armed: bool,
    streams: BTreeMap<u64, Stream>,
    /// Streams in the step the round is at.
    in_target: usize,
    hosts: Hosts,
    operation: HostOperation,
    version: u64,
    waiting_add: Vec<Waiting<C>>,
    waiting_delete: Vec<u64>,
    /// Indexes of streams, shared by every namespace (an index is never given twice).
    ids: Arc<AtomicU64>,
    out: Vec<Effect<C>>,
}

impl<C> Round<C> {
    /// A namespace with no stream yet; its streams get indexes from `ids`.
    pub fn new(
        replication_factor: i64,
        timeout: Duration,
        coalesce: Duration,
        ids: Arc<AtomicU64>,
    ) -> Self {
        Round {
            replication_factor,
            timeout,
            coalescing: !coalesce.is_zero(),
            coalesce_armed: false,
            streams: BTreeMap::new(),
            in_target: 0,
            hosts: Hosts::default(),
            operation: HostOperation::Report,
            version: 0,
            waiting_add: Vec::new(),
            waiting_delete: Vec::new(),
            ids,
            out: Vec::new(),
        }
    }

    /// The namespace's state for `GET /placement/state`.
    pub fn state(&self) -> pv1::StatePlacementTable {
        self.hosts.state(self.version)
    }

    /// A new connection: started now, or when the round in progress ends.
    pub fn add(&mut self, waiting: Waiting<C>) -> Vec<Effect<C>> {
        if self.operation != HostOperation::Report || self.coalesce_armed {
            self.waiting_add.push(waiting);
            return self.take();
        }
        for gone in std::mem::take(&mut self.waiting_delete) {
            self.hosts.delete(gone);
        }
        let streams = &self.streams;
        for orphan in self.hosts.orphans(|s| streams.contains_key(&s)) {
            self.hosts.delete(orphan);
        }
        let host = waiting.host.clone();
        let idx = self.start(waiting);
        self.report(idx, host);
        self.take()
    }

    /// A message from stream `idx`: a report, or an ack of a step.
    pub fn reported(&mut self, idx: u64, host: pv1::Host) -> Vec<Effect<C>> {
        if self.streams.contains_key(&idx) {
            self.report(idx, host);
        }
        self.take()
    }

    /// Stream `idx` ended (`status`: why).
    pub fn closed(&mut self, idx: u64, status: Status) -> Vec<Effect<C>> {
        let Some(stream) = self.streams.remove(&idx) else {
            return self.take();
        };
        self.runtimes();
        if stream.state == self.operation && self.operation != HostOperation::Report {
            self.in_target = self.in_target.saturating_sub(1);
        }
        self.out.push(Effect::Close { idx, status });
        if self.streams.is_empty() || !self.hosts.has(idx) {
            return self.take();
        }
        self.waiting_delete.push(idx);
        if self.operation != HostOperation::Report {
            if self.in_target >= self.streams.len() {
                self.advance();
            }
        } else if !self.coalesce_armed {
            self.process_waiting_deletes();
        }
        self.take()
    }

    /// The timeout of `version` fired: streams that did not ack are closed and a new round
    /// starts without them (and with the connections that waited).
    pub fn timeout(&mut self, version: u64) -> Vec<Effect<C>> {
        if version != self.version {
            return self.take();
        }
        tracing::warn!(version, "placement: dissemination timeout");
        let late: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, s)| s.state != self.operation)
            .map(|(idx, _)| *idx)
            .collect();
        for idx in late {
            self.hosts.delete(idx);
            self.streams.remove(&idx);
            self.out.push(Effect::Close {
                idx,
                status: Status::new(
                    Code::DeadlineExceeded,
                    format!(
                        "dissemination timeout after {} for version {version}",
                        crate::schedule::duration::format(
                            i64::try_from(self.timeout.as_nanos()).unwrap_or(i64::MAX)
                        )
                    ),
                ),
            });
        }
        self.runtimes();
        for gone in std::mem::take(&mut self.waiting_delete) {
            self.hosts.delete(gone);
        }
        self.version += 1;
        self.operation = HostOperation::Report;
        self.in_target = 0;
        for waiting in std::mem::take(&mut self.waiting_add) {
            let host = waiting.host.clone();
            let idx = self.start(waiting);
            self.hosts.set(idx, host);
        }
        if !self.streams.is_empty() {
            self.out.push(Effect::ArmTimeout(self.version));
            self.lock_all();
        }
        self.take()
    }

    /// The coalesce window ended.
    pub fn coalesce_fire(&mut self) -> Vec<Effect<C>> {
        self.coalesce_armed = false;
        if !self.waiting_delete.is_empty() && self.waiting_add.is_empty() {
            self.process_waiting_deletes();
            return self.take();
        }
        let deleted = !self.waiting_delete.is_empty();
        for gone in std::mem::take(&mut self.waiting_delete) {
            self.hosts.delete(gone);
        }
        self.process_waiting_add(deleted);
        self.take()
    }

    /// Ends every stream and waiting connection with `status` (the namespace is gone, or
    /// this replica stopped leading).
    pub fn shutdown(&mut self, status: &Status) -> Vec<Effect<C>> {
        for idx in std::mem::take(&mut self.streams).into_keys() {
            self.out.push(Effect::Close {
                idx,
                status: status.clone(),
            });
        }
        for waiting in std::mem::take(&mut self.waiting_add) {
            self.out.push(Effect::Refuse {
                conn: waiting.conn,
                status: status.clone(),
            });
        }
        self.out.push(Effect::Runtimes { all: 0, actors: 0 });
        self.take()
    }

    fn take(&mut self) -> Vec<Effect<C>> {
        std::mem::take(&mut self.out)
    }

    fn runtimes(&mut self) {
        self.out.push(Effect::Runtimes {
            all: self.streams.len(),
            actors: self.streams.values().filter(|s| s.has_actors).count(),
        });
    }

    fn start(&mut self, waiting: Waiting<C>) -> u64 {
        let idx = self.ids.fetch_add(1, Ordering::Relaxed);
        self.streams.insert(
            idx,
            Stream {
                state: HostOperation::Report,
                has_actors: !waiting.host.entities.is_empty(),
                receiving_table: None,
                locked: None,
            },
        );
        self.out.push(Effect::Start {
            idx,
            conn: waiting.conn,
        });
        self.runtimes();
        idx
    }

    fn report(&mut self, idx: u64, host: pv1::Host) {
        let mut op = host.operation();
        if op == HostOperation::Unknown {
            op = self.operation;
        }
        if host.version.is_some_and(|v| v < self.version) {
            return;
        }
        if op != HostOperation::Report
            && let Some(stream) = self.streams.get_mut(&idx)
            && let Some(pushed) = stream.receiving_table
            && host.version == Some(pushed)
        {
            if op == HostOperation::Unlock {
                stream.receiving_table = None;
            }
            return;
        }
        match op {
            HostOperation::Lock => self.acked(idx, HostOperation::Lock),
            HostOperation::Update => self.acked(idx, HostOperation::Update),
            HostOperation::Unlock => self.acked(idx, HostOperation::Unlock),
            HostOperation::Report | HostOperation::Unknown => self.host_reported(idx, host),
        }
    }

    /// A report: a new round when the tables change, else the tables pushed to a stream
    /// that has none.
    fn host_reported(&mut self, idx: u64, host: pv1::Host) {
        if !self.hosts.set(idx, host) {
            if !self.hosts.has(idx) && self.streams.contains_key(&idx) {
                self.push_table(idx);
            }
            return;
        }
        self.out.push(Effect::DisarmTimeout(self.version));
        self.version += 1;
        self.out.push(Effect::ArmTimeout(self.version));
        self.lock_all();
    }

    /// Stream `idx` acked step `step`: the round moves on once every stream has.
    fn acked(&mut self, idx: u64, step: HostOperation) {
        let Some(stream) = self.streams.get_mut(&idx) else {
            return;
        };
        if stream.state != step {
            stream.state = step;
            self.in_target += 1;
        }
        if self.in_target == self.streams.len() {
            match step {
                HostOperation::Lock => self.update_all(),
                HostOperation::Update => self.unlock_all(),
                _ => self.round_done(),
            }
        }
    }

    /// Moves on when the streams left are all at the round's step (one just closed).
    fn advance(&mut self) {
        if self.in_target < self.streams.len() {
            return;
        }
        match self.operation {
            HostOperation::Lock => self.update_all(),
            HostOperation::Update => self.unlock_all(),
            HostOperation::Unlock => self.round_done(),
            _ => {}
        }
    }

    fn lock_all(&mut self) {
        self.operation = HostOperation::Lock;
        self.in_target = 0;
        let version = self.version;
        for (idx, stream) in &mut self.streams {
            stream.state = HostOperation::Report;
            stream.receiving_table = None;
            if stream.locked.is_some_and(|v| v > version) {
                continue;
            }
            stream.locked = Some(version);
            self.out.push(Effect::Send {
                idx: *idx,
                order: order(LOCK, version, None),
            });
        }
    }

    fn update_all(&mut self) {
        self.operation = HostOperation::Update;
        self.in_target = 0;
        let version = self.version;
        let tables = self.hosts.tables(version, self.replication_factor);
        for (idx, stream) in &self.streams {
            if stream.locked == Some(version) {
                self.out.push(Effect::Send {
                    idx: *idx,
                    order: order(UPDATE, version, Some(tables.clone())),
                });
            }
        }
    }

    fn unlock_all(&mut self) {
        self.operation = HostOperation::Unlock;
        self.in_target = 0;
        let version = self.version;
        for (idx, stream) in &self.streams {
            if stream.locked == Some(version) {
                self.out.push(Effect::Send {
                    idx: *idx,
                    order: order(UNLOCK, version, None),
                });
            }
        }
    }

    /// Every stream acked the unlock: what waited goes next.
    fn round_done(&mut self) {
        self.operation = HostOperation::Report;
        self.in_target = 0;
        self.out.push(Effect::DisarmTimeout(self.version));
        let streams = &self.streams;
        let orphans = self.hosts.orphans(|s| streams.contains_key(&s));
        self.waiting_delete.extend(orphans);
        if self.coalescing {
            self.coalesce_armed = true;
            self.out.push(Effect::ArmCoalesce);
            return;
        }
        if !self.waiting_delete.is_empty() {
            self.process_waiting_deletes();
            return;
        }
        self.process_waiting_add(false);
    }

    fn push_table(&mut self, idx: u64) {
        let version = self.version;
        if let Some(stream) = self.streams.get_mut(&idx) {
            stream.receiving_table = Some(version);
        }
        let tables = self.hosts.tables(version, self.replication_factor);
        self.out.push(Effect::Send {
            idx,
            order: order(LOCK, version, None),
        });
        self.out.push(Effect::Send {
            idx,
            order: order(UPDATE, version, Some(tables)),
        });
        self.out.push(Effect::Send {
            idx,
            order: order(UNLOCK, version, None),
        });
    }

    fn process_waiting_deletes(&mut self) {
        if self.waiting_delete.is_empty() || self.streams.is_empty() {
            return;
        }
        for gone in std::mem::take(&mut self.waiting_delete) {
            self.hosts.delete(gone);
        }
        self.version += 1;
        self.out.push(Effect::ArmTimeout(self.version));
        self.lock_all();
    }

    fn process_waiting_add(&mut self, force: bool) {
        if self.waiting_add.is_empty() {
            return;
        }
        let mut changed = force;
        let mut started = Vec::new();
        for waiting in std::mem::take(&mut self.waiting_add) {
            let host = waiting.host.clone();
            let idx = self.start(waiting);
            started.push(idx);
            changed |= self.hosts.set(idx, host);
        }
        if !changed {
            for idx in started {
                if !self.hosts.has(idx) {
                    self.push_table(idx);
                }
            }
            return;
        }
        self.version += 1;
        self.out.push(Effect::ArmTimeout(self.version));
        self.lock_all();
    }
}

fn order(
    operation: &str,
    version: u64,
    tables: Option<pv1::PlacementTables>,
) -> pv1::PlacementOrder {
    pv1::PlacementOrder {
        tables,
        operation: operation.to_owned(),
        version,
    }
}
