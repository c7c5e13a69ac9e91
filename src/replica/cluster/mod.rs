//! Scheduler replicas sharing one etcd: each job is fired by exactly one live replica, and a
//! dead replica's jobs are taken over within its lease TTL while the others keep firing.
//!
//! # Keys (under the store's namespace, `dapr` by default; named in `store::etcd::keys`)
//!
//! - `members/<id>` = the replica's broadcast address, attached to its lease: the live
//!   members, and the host list WatchHosts streams to sidecars.
//! - `partitions/<p>` = the owning member's id, attached to the owner's lease.
//! - `leadership/<id>` = go-etcd-cron's leadership record (member count, a uid, the address),
//!   attached to the lease, written for tools made for the Dapr Scheduler's etcd; jobsd does
//!   not read it.
//!
//! # Ownership
//!
//! Jobs fall into `--partitions` partitions by a stable hash of their key. Every member
//! computes the same assignment of partitions to live members (rendezvous hashing), takes the
//! free partitions assigned to it (create-if-absent txn with its lease) and gives back the ones
//! assigned elsewhere: it stops firing their jobs, waits until their triggers in flight are
//! answered and written, then deletes the partition key, so that the next owner reads the
//! final counters. A member that dies leaves its keys to expire with its lease; the others
//! then take its partitions over. Nobody else stops: only the moving partitions change hands
//! (no stop-the-world rebalance, unlike Dapr's `partition_id % total`).
//!
//! A member whose lease cannot be renewed for two thirds of the TTL lets go of everything at
//! once, before etcd can hand its partitions to someone else, and joins again with a new lease
//! once etcd answers.
//!
//! # Feeding the engine
//!
//! The engine follows the store ([`Engine::follow`]): a taken partition's jobs are read with
//! their counters and adopted (through the store's partition index: that partition's jobs
//! only); after that, the jobs watch feeds it every put and delete of an
//! owned partition newer than the revision the partition was read at.

mod directory;
mod far;
mod lease;

pub use self::directory::{Directory, Owner};
pub use self::lease::Standing;
mod partition;
mod wake;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::far::Far;
use self::lease::Lease;
pub use self::partition::{owner_of, partition_of, share_of};
use super::gates::Place;
use crate::engine::Engine;
use crate::store::etcd::client::{self as etcd, Client, CompareWith};
use crate::store::etcd::keys;
use crate::store::{Change, Etcd};

/// Jobs read per page when a partition is taken.
const LOAD_PAGE: usize = 4096;
/// How long giving a partition back waits for its triggers in flight.
const RELEASE_WAIT: Duration = Duration::from_secs(5);
/// Partitions taken or given back concurrently.
const PARALLEL_TXNS: usize = 16;
/// Watched job puts read for their counters by one read of etcd, at most.
const MAX_PENDING_PUTS: usize = 512;

/// Settings of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The replica's `--id`; unique among live members (a second process with the same id
    /// waits until the first is gone, as in Dapr).
    pub id: String,
    /// The address sidecars reach this replica at (WatchHosts).
    pub address: String,
    /// TTL of the member's lease: how long a dead replica's jobs wait for a new owner.
    pub lease_ttl: Duration,
    /// Number of partitions; every member must use the same.
    pub partitions: u32,
    /// Key namespace, the same as the store's (`dapr`).
    pub namespace: String,
    /// How far ahead the member reads its partitions' jobs (`--horizon`): the others are
    /// kept by key and fire time and read in as their time comes (see `far.rs`). `None`:
    /// every job is read when a partition is taken.
    pub horizon: Option<Duration>,
}

/// A running member: stop it to leave the cluster cleanly.
pub struct Cluster {
    /// Whether the member holds a live lease (see [`Standing`]).
    standing: Standing,
    /// Who fires which partition.
    directory: Directory,
    /// Where this member stands among the live ones.
    place: watch::Receiver<Place>,
    /// Stops the member loop.
    stop: CancellationToken,
    /// The member loop; it leaves the cluster before it ends.
    task: JoinHandle<()>,
}

impl Cluster {
    /// Joins the cluster of `store` and keeps this replica's share of the jobs in `engine`
    /// (an engine that follows the store). Live members' addresses are published on `hosts`.
    pub fn start(
        cfg: ClusterConfig,
        store: Arc<Etcd>,
        engine: Engine,
        hosts: watch::Sender<Vec<String>>,
    ) -> Cluster {
        let stop = CancellationToken::new();
        let standing = Standing::default();
        let (place, place_rx) = watch::channel(Place::default());
        let (directory, bring_in) = Directory::new(cfg.partitions, &cfg.address);
        let ns = cfg.namespace.trim_end_matches('/');
        let member = Member {
            place,
            standing: standing.clone(),
            directory: directory.clone(),
            holders: HashMap::new(),
            bring_in: Some(bring_in),
            client: store.client(),
            members_prefix: keys::members_prefix(ns),
            partitions_prefix: keys::partitions_prefix(ns),
            member_key: keys::member_key(ns, &cfg.id),
            leadership_key: keys::leadership_key(ns, &cfg.id),
            uid: fastrand::u64(..),
            leadership_total: 0,
            cfg,
            store,
            engine,
            hosts,
            lease: None,
            registered: false,
            stale_lease: None,
            owned: BTreeSet::new(),
            loaded_at: HashMap::new(),
            far: Far::default(),
            pending: HashMap::new(),
        };
        let task = tokio::spawn(member.run(stop.clone()));
        Cluster {
            standing,
            directory,
            place: place_rx,
            stop,
            task,
        }
    }

    /// Who fires which partition, kept current by the member (each round, and whenever it
    /// takes or lets go of partitions).
    pub fn directory(&self) -> Directory {
        self.directory.clone()
    }

    /// Where this member stands among the live ones (their number and its position by id),
    /// kept current by each round: its share of the concurrency limits.
    pub fn place(&self) -> watch::Receiver<Place> {
        self.place.clone()
    }

    /// Whether this member holds a live lease right now: a trigger sink checks it before
    /// every delivery.
    pub fn standing(&self) -> Standing {
        self.standing.clone()
    }

    /// Leaves the cluster: stops firing, waits (bounded) for triggers in flight, and revokes
    /// the lease so that the other members take the partitions over at once.
    pub async fn stop(self) {
        self.stop.cancel();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "cluster member failed");
        }
    }
}

/// The jobs watch as the member loop holds it.
type Changes = Pin<Box<dyn Stream<Item = Change> + Send>>;

/// One member's state; owned by its loop.
struct Member {
    /// This member's place among the live ones, from the last round.
    place: watch::Sender<Place>,
    /// Follows `lease` for the trigger sink.
    standing: Standing,
    /// Published from `owned` and `holders`.
    directory: Directory,
    /// Partition → the address of its holder, as the last round read them.
    holders: HashMap<u32, String>,
    /// Requests to read a job in now (taken by the loop when it starts).
    bring_in: Option<tokio::sync::mpsc::Receiver<directory::BringIn>>,
    cfg: ClusterConfig,
    client: Client,
    store: Arc<Etcd>,
    engine: Engine,
    hosts: watch::Sender<Vec<String>>,
    /// `<ns>/members/`.
    members_prefix: String,
    /// `<ns>/partitions/`.
    partitions_prefix: String,
    /// `<ns>/members/<id>`.
    member_key: String,
    /// `<ns>/leadership/<id>`.
    leadership_key: String,
    /// This member's uid in its leadership record, drawn at start.
    uid: u64,
    /// The member count the leadership record holds (0: not written under this lease).
    leadership_total: u64,
    /// The lease everything of this member hangs on; `None` until granted (again).
    lease: Option<Lease>,
    /// The member key is ours under the current lease.
    registered: bool,
    /// A lease we stopped trusting that etcd may still hold (with our keys): revoked before
    /// joining again, so that the member key and partitions are free at once.
    stale_lease: Option<i64>,
    /// Partitions whose jobs the engine fires.
    owned: BTreeSet<u32>,
    /// Revision each owned partition was read at; older watch events are already in it.
    loaded_at: HashMap<u32, i64>,
    /// Owned jobs due past the horizon, not read yet.
    far: Far,
    /// Job puts the watch brought, waiting for their counters ([`Member::observe_pending`]).
    pending: HashMap<String, (crate::store::StoredJob, i64)>,
}

impl Member {
    async fn run(mut self, stop: CancellationToken) {
        let Some(mut changes) = self.watch_from_now(&stop).await else {
            return;
        };
        let period =
            (self.cfg.lease_ttl / 6).clamp(Duration::from_millis(100), Duration::from_secs(1));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let freed = Arc::new(tokio::sync::Notify::new());
        let watching = stop.child_token();
        tokio::spawn(wake::on_deletes(
            self.client.clone(),
            self.partitions_prefix.clone(),
            freed.clone(),
            watching.clone(),
        ));
        let _stop_watching = watching.drop_guard();
        let mut bring_in = self.bring_in.take().expect("the loop starts once");
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                Some(request) = bring_in.recv() => self.bring_in(request, &mut bring_in).await,
                change = changes.next() => match change {
                    Some(Change::Resync { compact_revision }) => {
                        tracing::warn!(compact_revision, "jobs watch fell behind etcd's history; reloading owned partitions");
                        match self.resync(&stop).await {
                            Some(fresh) => changes = fresh,
                            None => break,
                        }
                    }
                    Some(change) => {
                        if matches!(change, Change::Delete { .. }) {
                            // A put waiting for its counter must not come after this.
                            self.observe_pending().await;
                        }
                        self.apply(change);
                        if self.pending.len() >= MAX_PENDING_PUTS {
                            self.observe_pending().await;
                        }
                    }
                    None => {
                        if stop.is_cancelled() {
                            break;
                        }
                        tracing::warn!("jobs watch ended; reloading owned partitions");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        match self.resync(&stop).await {
                            Some(fresh) => changes = fresh,
                            None => break,
                        }
                    }
                },
                // The watch has nothing more ready: the puts it brought go to the engine.
                () = std::future::ready(()), if !self.pending.is_empty() => {
                    self.observe_pending().await;
                }
                _ = tick.tick() => {
                    self.reconcile().await;
                    self.publish();
                    self.read_in_due().await;
                }
                // A partition was freed: take our share now, not at the next round.
                () = freed.notified() => {
                    self.reconcile().await;
                    self.publish();
                    tick.reset();
                }
            }
        }
        self.leave().await;
    }

    /// A jobs watch from the current revision (retrying until etcd answers or we stop).
    async fn watch_from_now(&self, stop: &CancellationToken) -> Option<Changes> {
        let revision = tokio::select! {
            () = stop.cancelled() => return None,
            r = self.store.revision() => match r {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the etcd revision; cluster member stops");
                    return None;
                }
            },
        };
        Some(Box::pin(self.store.watch_jobs(revision + 1)))
    }

    /// Reads every owned partition again and watches from now on.
    async fn resync(&mut self, stop: &CancellationToken) -> Option<Changes> {
        // Read again below, at a newer revision.
        self.pending.clear();
        let owned = std::mem::take(&mut self.owned);
        self.directory.set_own(&self.owned);
        self.disown(&owned, true).await;
        let changes = self.watch_from_now(stop).await?;
        let revision = self.store.revision().await.ok()?;
        if !self.load(&owned, revision).await {
            // What could not be read is given back; the next round takes it again.
            self.give_back(&owned).await;
        }
        Some(changes)
    }

    /// A job change seen by the watch: passed on if its partition is ours and newer than
    /// what we read.
    fn apply(&mut self, change: Change) {
        let (key, revision) = match &change {
            Change::Put {
                key, mod_revision, ..
            }
            | Change::Delete {
                key, mod_revision, ..
            } => (key, *mod_revision),
            Change::Resync { .. } => return,
        };
        let p = partition_of(key, self.cfg.partitions);
        if !self.owned.contains(&p) || self.loaded_at.get(&p).is_some_and(|at| revision <= *at) {
            return;
        }
        // The writer's next write of it (its result) needs no read first.
        match &change {
            Change::Put { value, .. } => self.store.saw_job(key, revision, value),
            _ => self.store.saw_job_deleted(key),
        }
        if self.far.seen(key, revision) {
            return;
        }
        // Decoded only now that it is known to be ours; an undecodable one changes nothing.
        let job = match &change {
            Change::Put { value, .. } => match Change::job(key, value) {
                Ok(job) => Some(job),
                Err(err) => {
                    tracing::warn!(job = %key, error = %err, "undecodable job in etcd; ignored");
                    return;
                }
            },
            _ => None,
        };
        self.far.remove(key);
        match (change, job) {
            (Change::Put { key, .. }, Some(job)) => {
                let first = crate::engine::convert::first_fire(&key, &job);
                match (first, self.horizon_end()) {
                    (Some(at), Some(end)) if at.timestamp_millis() >= end => {
                        // Due past the horizon: kept by key and time (a version the engine
                        // fires goes).
                        self.engine.observe_delete(&key);
                        self.far.insert(key, at.timestamp_millis());
                    }
                    _ => {
                        self.pending.insert(key, (job, revision));
                    }
                }
            }
            (Change::Delete { key, .. }, _) => {
                self.pending.remove(&key);
                self.engine.observe_delete(&key);
            }
            (Change::Put { .. } | Change::Resync { .. }, _) => {}
        }
    }

    /// Hands the watched puts to the engine with the counters stored beside them, read by
    /// one read of etcd for the lot. A job is most often put without one (a create starts
    /// over), but `dapr scheduler import` writes each job with its counter: started without
    /// it, the job would fire its done ticks again. go-etcd-cron reads the counter of every
    /// job its informer sees put in the same way.
    async fn observe_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let puts: Vec<(String, i64)> = pending
            .iter()
            .map(|(k, (_, rev))| (k.clone(), *rev))
            .collect();
        let mut counters = match self.store.read_counters(puts).await {
            Ok(counters) => counters,
            Err(e) => {
                // The jobs fire from a fresh counter, as before jobsd read them: a job written
                // with its progress may fire a done tick again.
                tracing::warn!(jobs = pending.len(), error = %e,
                    "cannot read the counters of watched jobs; they start from none");
                HashMap::new()
            }
        };
        for (key, (job, _)) in pending {
            let counter = counters.remove(&key);
            self.engine.observe_put(&key, job, counter);
        }
    }

    /// One round: keep the lease, be a member, publish the members, give back what is no
    /// longer ours and take what is.
    async fn reconcile(&mut self) {
        if self.lease.as_ref().is_some_and(|l| !l.alive()) {
            tracing::warn!(
                partitions = self.owned.len(),
                "cluster lease not renewed in time; letting go of every partition"
            );
            let owned = std::mem::take(&mut self.owned);
            self.standing.set(None);
            // No waiting: etcd may hand them to another member any moment now.
            drop(self.disown(&owned, false));
            self.registered = false;
            // Free our keys now rather than at expiry: if etcd cannot be told yet (it is
            // down), tell it as soon as it answers again.
            if let Some(lease) = self.lease.take() {
                let id = lease.id();
                if !lease.revoke(&self.client).await {
                    self.stale_lease = Some(id);
                }
            }
        }
        if let Some(id) = self.stale_lease {
            if !lease::revoke_id(&self.client, id).await {
                return;
            }
            self.stale_lease = None;
        }
        let lease_id = match &self.lease {
            Some(lease) => lease.id(),
            None => match Lease::grant(&self.client, self.cfg.lease_ttl).await {
                Ok(lease) => {
                    let id = lease.id();
                    self.standing.set(Some(&lease));
                    self.lease = Some(lease);
                    id
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot get a cluster lease from etcd; retrying");
                    return;
                }
            },
        };
        if !self.registered && !self.register(lease_id).await {
            return;
        }
        let Some((members, holders)) = self.read_cluster().await else {
            return;
        };
        if !members.contains_key(&self.cfg.id) {
            tracing::warn!("our member key is gone; joining again");
            self.registered = false;
            return;
        }
        let addresses: Vec<String> = members.values().cloned().collect();
        self.update_leadership(addresses.len() as u64, lease_id)
            .await;
        self.hosts.send_if_modified(|hosts| {
            if *hosts == addresses {
                return false;
            }
            tracing::info!(members = ?addresses, "cluster members changed");
            *hosts = addresses;
            true
        });
        let ids: Vec<String> = members.into_keys().collect();
        if let Some(index) = ids.iter().position(|id| *id == self.cfg.id) {
            let place = Place {
                count: u32::try_from(ids.len()).unwrap_or(u32::MAX),
                index: u32::try_from(index).unwrap_or(u32::MAX),
            };
            self.place
                .send_if_modified(|now| std::mem::replace(now, place) != place);
        }
        let share = share_of(&self.cfg.id, &ids, self.cfg.partitions);

        // Partitions we fire but no longer hold (our key expired or was deleted).
        let lost: BTreeSet<u32> = self
            .owned
            .iter()
            .copied()
            .filter(|p| holders.get(p) != Some(&lease_id))
            .collect();
        if !lost.is_empty() {
            tracing::warn!(count = lost.len(), "partitions lost to another member");
            self.owned.retain(|p| !lost.contains(p));
            self.disown(&lost, false).await;
        }

        let surplus: BTreeSet<u32> = self.owned.difference(&share).copied().collect();
        if !surplus.is_empty() {
            self.owned.retain(|p| !surplus.contains(p));
            self.give_back(&surplus).await;
            tracing::info!(
                count = surplus.len(),
                owned = self.owned.len(),
                "gave partitions back"
            );
        }

        let free: Vec<u32> = share
            .iter()
            .copied()
            .filter(|p| !self.owned.contains(p) && !holders.contains_key(p))
            .collect();
        if !free.is_empty() {
            self.take(free, lease_id).await;
        }
    }

    /// Writes the member key under our lease; `false` while another process holds it.
    async fn register(&mut self, lease_id: i64) -> bool {
        let txn = etcd::txn(
            vec![etcd::equal(
                self.member_key.clone(),
                CompareWith::CreateRevision(0),
            )],
            vec![
                etcd::put(self.member_key.clone(), self.cfg.address.clone(), lease_id),
                etcd::put(self.leadership_key.clone(), self.leadership(1), lease_id),
            ],
            vec![etcd::get(self.member_key.clone())],
        );
        let resp = match self.client.txn(txn).await {
            Ok(resp) => resp,
            Err(e) => {
                tracing::warn!(error = %e, "cannot register with etcd; retrying");
                return false;
            }
        };
        if !resp.succeeded {
            let holder = resp
                .responses
                .into_iter()
                .find_map(|op| etcd::range_kvs(op).first().map(|kv| kv.lease));
            if holder != Some(lease_id) {
                tracing::info!(
                    id = %self.cfg.id,
                    "another live replica holds this id; waiting for it to go"
                );
                return false;
            }
        }
        tracing::info!(id = %self.cfg.id, address = %self.cfg.address, "joined the cluster");
        self.registered = true;
        self.leadership_total = 1;
        true
    }

    /// The encoded leadership record counting `total` members.
    fn leadership(&self, total: u64) -> Vec<u8> {
        let host = crate::proto::dapr_scheduler::Host {
            address: self.cfg.address.clone(),
        };
        prost::Message::encode_to_vec(&crate::proto::jobsd_store::Leadership {
            total,
            uid: self.uid,
            replica_data: Some(prost_types::Any {
                type_url: "type.googleapis.com/dapr.proto.scheduler.v1.Host".to_owned(),
                value: prost::Message::encode_to_vec(&host),
            }),
        })
    }

    /// Keeps the leadership record's member count current (best effort: nothing of jobsd
    /// depends on it).
    async fn update_leadership(&mut self, total: u64, lease_id: i64) {
        if total == self.leadership_total {
            return;
        }
        let put = etcd::txn(
            vec![],
            vec![etcd::put(
                self.leadership_key.clone(),
                self.leadership(total),
                lease_id,
            )],
            vec![],
        );
        match self.client.txn(put).await {
            Ok(_) => self.leadership_total = total,
            Err(e) => tracing::debug!(error = %e, "leadership record not updated"),
        }
    }

    /// Live members (id → address, sorted by id) and partition holders (partition → lease),
    /// read at one revision.
    async fn read_cluster(&mut self) -> Option<(BTreeMap<String, String>, HashMap<u32, i64>)> {
        let txn = etcd::txn(
            Vec::new(),
            vec![
                etcd::get_prefix(self.members_prefix.clone()),
                etcd::get_prefix(self.partitions_prefix.clone()),
            ],
            Vec::new(),
        );
        let resp = match self.client.txn(txn).await {
            Ok(resp) => resp,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the cluster state from etcd");
                return None;
            }
        };
        let mut members = BTreeMap::new();
        let mut holders = HashMap::new();
        let mut holder_ids = HashMap::new();
        for kv in resp.responses.into_iter().flat_map(etcd::range_kvs) {
            let Ok(key) = std::str::from_utf8(&kv.key) else {
                continue;
            };
            if let Some(id) = key.strip_prefix(&self.members_prefix) {
                let address = std::str::from_utf8(&kv.value).unwrap_or_default();
                members.insert(id.to_owned(), address.to_owned());
            } else if let Some(p) = key
                .strip_prefix(&self.partitions_prefix)
                .and_then(|p| p.parse::<u32>().ok())
            {
                holders.insert(p, kv.lease);
                holder_ids.insert(p, String::from_utf8_lossy(&kv.value).into_owned());
            }
        }
        self.holders = holder_ids
            .into_iter()
            .filter_map(|(p, id)| Some((p, members.get(&id)?.clone())))
            .collect();
        Some((members, holders))
    }

    /// Takes the free partitions `free` under our lease and loads their jobs.
    async fn take(&mut self, free: Vec<u32>, lease_id: i64) {
        let client = self.client.clone();
        let ns = self.cfg.namespace.trim_end_matches('/').to_owned();
        let id = self.cfg.id.clone();
        let results: Vec<Option<(u32, i64)>> = futures_util::stream::iter(free)
            .map(|p| {
                let client = client.clone();
                let key = keys::partition_key(&ns, p);
                let id = id.clone();
                async move {
                    let txn = etcd::txn(
                        vec![etcd::equal(key.clone(), CompareWith::CreateRevision(0))],
                        vec![etcd::put(key, id, lease_id)],
                        Vec::new(),
                    );
                    match client.txn(txn).await {
                        Ok(resp) if resp.succeeded => {
                            Some((p, etcd::revision(resp.header.as_ref())))
                        }
                        Ok(_) => None,
                        Err(e) => {
                            tracing::warn!(partition = p, error = %e, "cannot take partition");
                            None
                        }
                    }
                }
            })
            .buffer_unordered(PARALLEL_TXNS)
            .collect()
            .await;
        let taken: BTreeSet<u32> = results.iter().flatten().map(|(p, _)| *p).collect();
        if taken.is_empty() {
            return;
        }
        // Everything up to the last take is in the read below; newer changes come from the
        // watch.
        let revision = results.iter().flatten().map(|(_, r)| *r).max().unwrap_or(0);
        if self.load(&taken, revision).await {
            tracing::info!(
                count = taken.len(),
                owned = self.owned.len(),
                "took partitions"
            );
        } else {
            self.give_back(&taken).await;
        }
    }

    /// Reads the jobs of `partitions` with their counters and hands them to the engine;
    /// they count as owned from `revision` on. `false` (nothing owned) if the read failed.
    async fn load(&mut self, partitions: &BTreeSet<u32>, revision: i64) -> bool {
        use crate::store::Store;
        let count = self.cfg.partitions;
        let before = self.horizon_end();
        let read = async {
            let mut jobs = 0usize;
            let mut far = Vec::new();
            if self.store.index_partitions() == count {
                // The store's index reads these partitions only, and the jobs due before the
                // horizon only.
                let mut scan = self
                    .store
                    .scan_partitions(partitions.clone(), LOAD_PAGE, before)
                    .await?;
                while let Some(page) = scan.next_page().await? {
                    jobs += page.near.len();
                    if !page.near.is_empty() {
                        self.engine.adopt(page.near);
                    }
                    far.extend(page.far);
                }
            } else {
                // A store indexed by another count (a test's own store): read whole, filtered.
                let mut scan = self.store.scan("", LOAD_PAGE).await?;
                while let Some(page) = scan.next_page().await? {
                    let mine: Vec<_> = page
                        .into_iter()
                        .filter(|j| partitions.contains(&partition_of(&j.key, count)))
                        .collect();
                    jobs += mine.len();
                    if !mine.is_empty() {
                        self.engine.adopt(mine);
                    }
                }
            }
            Ok::<_, crate::store::Error>((jobs, far))
        };
        match read.await {
            Ok((jobs, far)) => {
                tracing::debug!(
                    partitions = partitions.len(),
                    jobs,
                    far = far.len(),
                    "partitions loaded"
                );
                for (key, ms) in far {
                    self.far.insert(key, ms);
                }
                for p in partitions {
                    self.owned.insert(*p);
                    self.loaded_at.insert(*p, revision);
                }
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the jobs of taken partitions");
                self.disown(partitions, true).await;
                false
            }
        }
    }

    /// Stops firing `partitions`' jobs and deletes their keys if they are still ours, so the
    /// members they belong to can take them.
    async fn give_back(&mut self, partitions: &BTreeSet<u32>) {
        self.disown(partitions, true).await;
        let Some(lease_id) = self.lease.as_ref().map(Lease::id) else {
            return;
        };
        let client = self.client.clone();
        let ns = self.cfg.namespace.trim_end_matches('/').to_owned();
        futures_util::stream::iter(partitions.iter().copied())
            .map(|p| {
                let client = client.clone();
                let key = keys::partition_key(&ns, p);
                async move {
                    let txn = etcd::txn(
                        vec![etcd::equal(key.clone(), CompareWith::Lease(lease_id))],
                        vec![etcd::delete(key)],
                        Vec::new(),
                    );
                    if let Err(e) = client.txn(txn).await {
                        tracing::warn!(partition = p, error = %e, "cannot give partition back");
                    }
                }
            })
            .buffer_unordered(PARALLEL_TXNS)
            .collect::<Vec<()>>()
            .await;
        for p in partitions {
            self.loaded_at.remove(p);
        }
    }

    /// Tells the engine to stop firing `partitions`' jobs; with `wait`, until their triggers
    /// in flight are answered and written (bounded).
    fn disown(
        &mut self,
        partitions: &BTreeSet<u32>,
        wait: bool,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let set = partitions.clone();
        let count = self.cfg.partitions;
        let empty = set.is_empty();
        self.far
            .forget_where(|key| set.contains(&partition_of(key, count)));
        let done = (!empty).then(|| {
            self.engine
                .disown(move |key| set.contains(&partition_of(key, count)))
        });
        async move {
            if let (Some(done), true) = (done, wait)
                && tokio::time::timeout(RELEASE_WAIT, done).await.is_err()
            {
                tracing::warn!("triggers still out after giving partitions back");
            }
        }
    }

    /// Leaves the cluster: lets go of every partition once its triggers are answered, then
    /// revokes the lease, which deletes our keys at once.
    async fn leave(mut self) {
        let owned = std::mem::take(&mut self.owned);
        self.directory.set_own(&self.owned);
        self.disown(&owned, true).await;
        if let Some(lease) = self.lease.take()
            && !lease.revoke(&self.client).await
        {
            tracing::warn!("could not revoke the cluster lease; it expires on its own");
        }
        tracing::info!(id = %self.cfg.id, "left the cluster");
    }
}

#[cfg(test)]
mod tests;
