//! Placement served by `jobsd scheduler` replicas over gRPC: a sidecar's round end to end,
//! and, in a cluster on a real etcd, one leader at a time that another member replaces.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Code;

use super::replica::Replica;
use crate::config::{self, ClusterSettings};
use crate::proto::dapr_placement::placement_client::PlacementClient;
use crate::proto::dapr_placement::{self as pv1, HostOperation};
use crate::replica::placement::Settings;
use crate::store::etcd::testing;

fn settings() -> Settings {
    Settings {
        replication_factor: 100,
        disseminate_timeout: Duration::from_secs(5),
        coalesce_window: Duration::ZERO,
        metadata: false,
        port: None,
    }
}

fn cfg(id: &str, cluster: Option<ClusterSettings>) -> config::Replica {
    config::Replica {
        id: id.into(),
        listen: "127.0.0.1:0".parse().expect("an address"),
        broadcast_override: None,
        data_dir: "unused".into(),
        cluster,
        tls: None,
        metrics: None,
        history: crate::engine::history::Options::default(),
        horizon: None,
        store: crate::store::RedbOptions::default(),
        healthz: None,
        placement: Some(settings()),
    }
}

fn host(name: &str) -> pv1::Host {
    pv1::Host {
        name: name.into(),
        port: 1,
        entities: vec!["Counter".into()],
        id: "app".into(),
        namespace: "default".into(),
        ..Default::default()
    }
}

/// A sidecar's stream: what it sends, and the orders it gets (or why it was refused).
struct Sidecar {
    send: tokio::sync::mpsc::UnboundedSender<pv1::Host>,
    orders: tonic::Streaming<pv1::PlacementOrder>,
}

async fn connect(addr: SocketAddr, first: pv1::Host) -> Result<Sidecar, tonic::Status> {
    let mut client = PlacementClient::connect(format!("http://{addr}"))
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let (send, rx) = tokio::sync::mpsc::unbounded_channel();
    send.send(first).expect("queued");
    let orders = client
        .report_dapr_status(UnboundedReceiverStream::new(rx))
        .await?
        .into_inner();
    Ok(Sidecar { send, orders })
}

impl Sidecar {
    async fn next(&mut self) -> pv1::PlacementOrder {
        tokio::time::timeout(Duration::from_secs(10), self.orders.next())
            .await
            .expect("an order within 10s")
            .expect("the stream is open")
            .expect("an order, not an error")
    }

    fn ack(&self, name: &str, op: HostOperation, version: u64) {
        let mut h = host(name);
        h.set_operation(op);
        h.version = Some(version);
        self.send.send(h).expect("sent");
    }

    /// Acks a whole round; the tables it was sent.
    async fn round(&mut self, name: &str) -> pv1::PlacementTables {
        let lock = self.next().await;
        assert_eq!(lock.operation, "lock");
        self.ack(name, HostOperation::Lock, lock.version);
        let update = self.next().await;
        assert_eq!(update.operation, "update");
        self.ack(name, HostOperation::Update, update.version);
        let unlock = self.next().await;
        assert_eq!(unlock.operation, "unlock");
        self.ack(name, HostOperation::Unlock, unlock.version);
        update.tables.expect("tables")
    }
}

#[tokio::test]
async fn a_replica_alone_disseminates_its_sidecars_tables() {
    let dir = tempfile::tempdir().expect("a dir");
    let mut c = cfg("p0", None);
    c.data_dir = dir.path().into();
    let replica = Replica::start(c).await.expect("started");
    let mut a = connect(replica.addr, host("a:1")).await.expect("connected");
    let tables = a.round("a:1").await;
    assert_eq!(tables.entries["Counter"].load_map.len(), 1);
    let mut b = connect(replica.addr, host("b:2")).await.expect("connected");
    // Both are in the next round, and its tables name both.
    let (ta, tb) = tokio::join!(a.round("a:1"), b.round("b:2"));
    assert_eq!(ta.entries["Counter"].load_map.len(), 2);
    assert_eq!(ta, tb);
    // b leaves: a gets a round without it.
    drop(b);
    let ta = a.round("a:1").await;
    assert_eq!(
        ta.entries["Counter"].load_map.keys().collect::<Vec<_>>(),
        ["a:1"]
    );
    // A report Dapr refuses ends the stream with Dapr's error.
    let mut bad = host("c:3");
    bad.namespace.clear();
    let refused = match connect(replica.addr, bad).await {
        Err(status) => status,
        Ok(mut s) => s
            .orders
            .next()
            .await
            .expect("an answer")
            .expect_err("refused"),
    };
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(refused.message(), "host ID and namespace must be provided");
    replica.shutdown_token().cancel();
    replica.wait().await.expect("stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_one_member_leads_and_another_takes_over_when_it_goes() {
    let namespace = testing::fresh_namespace();
    let endpoint = testing::shared().endpoint();
    let start = |id: &'static str| {
        let namespace = namespace.clone();
        let endpoint = endpoint.clone();
        async move {
            let settings = ClusterSettings {
                endpoints: vec![endpoint.clone()],
                namespace: namespace.clone(),
                lease_ttl: Duration::from_secs(2),
                partitions: 8,
                tls: None,
            };
            let store = crate::store::Etcd::connect_partitioned(&[endpoint], &namespace, None, 8)
                .await
                .expect("etcd");
            Replica::start_clustered(
                cfg(id, Some(settings)),
                Arc::new(store),
                Arc::new(crate::clock::SystemClock),
            )
            .await
            .expect("started")
        }
    };
    let first = start("p-a").await;
    let second = start("p-b").await;
    // The first member by id leads once both are in: the other refuses with Dapr's error.
    let refused = wait_for(|| async {
        match connect(second.addr, host("x:1")).await {
            Err(s) if s.code() == Code::FailedPrecondition => Some(s),
            _ => None,
        }
    })
    .await;
    assert_eq!(
        refused.message(),
        "node id=p-b is not a leader. Only the leader can serve requests"
    );
    let mut sidecar = wait_for(|| async { connect(first.addr, host("a:1")).await.ok() }).await;
    sidecar.round("a:1").await;
    // The leader goes: its stream ends, and the other member leads within the lease.
    first.shutdown_token().cancel();
    first.wait().await.expect("stopped");
    let ended = tokio::time::timeout(Duration::from_secs(10), sidecar.orders.next())
        .await
        .expect("the stream ends");
    assert!(
        !matches!(ended, Some(Ok(_))),
        "no order from a stopped leader: {ended:?}"
    );
    let mut moved = wait_for(|| async { connect(second.addr, host("a:1")).await.ok() }).await;
    let tables = moved.round("a:1").await;
    assert_eq!(tables.entries["Counter"].load_map.len(), 1);
    second.shutdown_token().cancel();
    second.wait().await.expect("stopped");
}

/// Polls `probe` until it answers (bounded: 30 s).
async fn wait_for<T, F, Fut>(probe: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "not within 30s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
