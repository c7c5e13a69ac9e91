//! `jobsd scheduler`: the Dapr Scheduler's flags (`cmd/scheduler/options`), validated into the
//! settings of one replica.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{
    EmbeddedStoreArgs, Error, EtcdTlsArgs, HistoryArgs, MetricsArgs, SchedulerIgnored,
    ServerTlsArgs,
};

/// The Dapr Scheduler's flags that apply to a jobsd replica (`dapr-jobs-api.md` §7).
#[derive(Debug, Clone, Args)]
pub struct SchedulerArgs {
    /// The port the Scheduler gRPC API (and gRPC health) listens on.
    #[arg(long, default_value_t = 50006)]
    pub port: u16,
    /// The IP address to listen on (default: all interfaces).
    #[arg(long, default_value = "")]
    pub listen_address: String,
    /// The replica's id.
    #[arg(long, default_value = "dapr-scheduler-server-0")]
    pub id: String,
    /// The `host:port` announced to sidecars through WatchHosts (default: the listen address
    /// and port, or 127.0.0.1 and the port when listening on all interfaces).
    #[arg(long)]
    pub override_broadcast_host_port: Option<String>,
    /// Port of an HTTP server answering `GET /healthz` (200 once the replica serves), as the
    /// Dapr Scheduler's. None unless given: the Scheduler's default, 8080, would make
    /// replicas on one machine collide; gRPC health on `--port` answers the same.
    #[arg(long)]
    pub healthz_port: Option<u16>,
    /// The IP address the healthz server listens on (default: all interfaces).
    #[arg(long, default_value = "")]
    pub healthz_listen_address: String,
    /// Where the embedded store keeps its data.
    #[arg(long, visible_alias = "etcd-data-dir", default_value = "./data")]
    pub data_dir: PathBuf,
    /// etcd endpoints (`http://host:port`, comma separated) of a cluster of replicas sharing
    /// their jobs; empty = a single replica on the embedded store in `--data-dir`. The Dapr
    /// Scheduler's `--etcd-client-endpoints` (its external etcd) means the same.
    #[arg(long, visible_alias = "etcd-client-endpoints", value_delimiter = ',')]
    pub etcd_endpoints: Vec<String>,
    /// Namespace of every key in etcd (jobs, counters, members, partitions).
    #[arg(long, default_value = "dapr")]
    pub etcd_key_prefix: String,
    /// TTL of a replica's etcd lease (Go duration, whole seconds): a dead replica's jobs get
    /// a new owner this long after its last renewal.
    #[arg(long, default_value = "3s")]
    pub lease_ttl: String,
    /// Partitions the jobs are divided into among replicas; the same on every replica.
    #[arg(long, default_value_t = 256)]
    pub partitions: u32,
    /// TLS of the Scheduler port (jobsd's flags).
    #[command(flatten)]
    pub tls: ServerTlsArgs,
    /// TLS to etcd (jobsd's flags).
    #[command(flatten)]
    pub etcd_tls: EtcdTlsArgs,
    /// Log level: debug, info, warn, error (or a tracing filter).
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Log JSON lines instead of text.
    #[arg(long, default_value_t = false)]
    pub log_as_json: bool,
    /// Prometheus metrics.
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// Run history and finished jobs (jobsd's own flags), served to sidecars' jobsd views.
    #[command(flatten)]
    pub history: HistoryArgs,
    /// How much of the future a single replica keeps in memory, how its store is checked.
    #[command(flatten)]
    pub embedded: EmbeddedStoreArgs,
    /// Dapr's actor placement service, served beside the Scheduler.
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// Dapr Scheduler flags that do not apply to a jobsd replica.
    #[command(flatten)]
    pub ignored: SchedulerIgnored,
}

/// Settings of one scheduler replica, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// The replica's id (`--id`); names it in logs, and in the cluster once there is one.
    pub id: String,
    /// Where the Scheduler API listens (port 0 = any free port).
    pub listen: SocketAddr,
    /// `--override-broadcast-host-port`, if given.
    pub broadcast_override: Option<String>,
    /// Durable store folder (single replica).
    pub data_dir: PathBuf,
    /// Cluster settings when `--etcd-endpoints` is given.
    pub cluster: Option<ClusterSettings>,
    /// TLS of the Scheduler port (`--tls-*-file`); `None` = plaintext.
    pub tls: Option<crate::tls::ServerTls>,
    /// Where the Prometheus metrics server listens (`--metrics-listen-address`,
    /// `--metrics-port`); `None` with `--enable-metrics=false`.
    pub metrics: Option<SocketAddr>,
    /// What the replica keeps of its jobs' past (`--history-limit`, `--finished-retention`).
    pub history: crate::engine::history::Options,
    /// How far ahead a replica keeps jobs in memory (`--horizon`; `None`: all): a single
    /// replica pages them from its store's due index, a cluster member reads its partitions'
    /// jobs as their time comes.
    pub horizon: Option<std::time::Duration>,
    /// How a single replica's store is opened (`--store-check`, `--store-cache-size`).
    pub store: crate::store::RedbOptions,
    /// Where `GET /healthz` is served (`--healthz-port`); `None`: not served.
    pub healthz: Option<SocketAddr>,
    /// Dapr's placement service (`--placement-enabled`); `None`: not served.
    pub placement: Option<crate::replica::placement::Settings>,
}

/// How a replica joins a cluster on etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// etcd endpoints.
    pub endpoints: Vec<String>,
    /// Key namespace.
    pub namespace: String,
    /// Lease TTL.
    pub lease_ttl: Duration,
    /// Number of partitions.
    pub partitions: u32,
    /// TLS to etcd (`--etcd-*-file`); `None` = plaintext.
    pub tls: Option<crate::tls::ClientTls>,
}

impl SchedulerArgs {
    /// Validates the flags into replica settings.
    pub fn validate(&self) -> Result<Replica, Error> {
        let ip = listen_ip(&self.listen_address)?;
        let healthz = match self.healthz_port {
            Some(port) => Some(SocketAddr::new(
                listen_ip(&self.healthz_listen_address)?,
                port,
            )),
            None => None,
        };
        let endpoints: Vec<String> = self
            .etcd_endpoints
            .iter()
            .map(|e| e.trim().to_owned())
            .filter(|e| !e.is_empty())
            .collect();
        let etcd_tls = self.etcd_tls.validate(!endpoints.is_empty())?;
        let cluster = if endpoints.is_empty() {
            None
        } else {
            let nanos = crate::schedule::duration::parse(&self.lease_ttl)
                .map_err(|e| Error::LeaseTtl(self.lease_ttl.clone(), e.to_string()))?;
            if nanos < 1_000_000_000 {
                return Err(Error::LeaseTtl(
                    self.lease_ttl.clone(),
                    "must be at least 1s".to_owned(),
                ));
            }
            if self.partitions == 0 {
                return Err(Error::NoPartitions);
            }
            Some(ClusterSettings {
                endpoints,
                namespace: self.etcd_key_prefix.trim_end_matches('/').to_owned(),
                lease_ttl: Duration::from_nanos(nanos.unsigned_abs()),
                partitions: self.partitions,
                tls: etcd_tls,
            })
        };
        Ok(Replica {
            cluster,
            tls: self.tls.validate()?,
            metrics: self.metrics.listen()?,
            history: self.history.options(),
            horizon: self.embedded.span(),
            store: self.embedded.store(),
            id: self.id.clone(),
            listen: SocketAddr::new(ip, self.port),
            broadcast_override: self
                .override_broadcast_host_port
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            data_dir: self.data_dir.clone(),
            healthz,
            placement: self.placement.validate(ip)?,
        })
    }
}

/// Dapr 1.18's placement service (`cmd/placement` flags, prefixed `--placement-`), served by
/// the replica so that daprd and jobsd sidecars run actors across hosts on it.
#[derive(Debug, Clone, Args)]
pub struct PlacementArgs {
    /// Serve Dapr's actor placement service (`dapr.proto.placement.v1.Placement`) on
    /// `--port`, beside the Scheduler (as Dapr 1.19's Scheduler does); daprd's
    /// `--placement-host-address` names this replica then.
    #[arg(long, default_value_t = false)]
    pub placement_enabled: bool,
    /// Also serve placement alone on this port (Dapr's placement port is 50005); implies
    /// `--placement-enabled`.
    #[arg(long)]
    pub placement_port: Option<u16>,
    /// Virtual nodes per host on daprd's hash ring (placement's `--replicationFactor`).
    #[arg(long, default_value_t = 100)]
    pub placement_replication_factor: i64,
    /// How long a dissemination round waits for every sidecar's ack before it closes the
    /// late ones' streams (placement's `--disseminate-timeout`; Go duration).
    #[arg(long, default_value = "8s")]
    pub placement_disseminate_timeout: String,
    /// After a round, how long the next one waits to gather more joins and leaves into
    /// one round (placement's `--disseminate-coalesce-window`; Go duration, 0 = none).
    #[arg(long, default_value = "0s")]
    pub placement_disseminate_coalesce_window: String,
    /// Serve `GET /placement/state` (the tables) on the healthz port (placement's
    /// `--metadata-enabled`).
    #[arg(long, default_value_t = false)]
    pub placement_metadata_enabled: bool,
}

impl PlacementArgs {
    fn validate(&self, ip: IpAddr) -> Result<Option<crate::replica::placement::Settings>, Error> {
        if !self.placement_enabled && self.placement_port.is_none() {
            return Ok(None);
        }
        if self.placement_replication_factor < 1 {
            return Err(Error::PlacementFlag(
                "placement-replication-factor".into(),
                "must be at least 1".into(),
            ));
        }
        let duration =
            |flag: &str, text: &str, min: i64| match crate::schedule::duration::parse(text) {
                Ok(n) if n >= min => Ok(Duration::from_nanos(n.unsigned_abs())),
                Ok(_) if min > 0 => Err(Error::PlacementFlag(
                    flag.into(),
                    format!("{text:?} must be above zero"),
                )),
                Ok(_) => Err(Error::PlacementFlag(
                    flag.into(),
                    format!("{text:?} must not be negative"),
                )),
                Err(e) => Err(Error::PlacementFlag(flag.into(), format!("{text:?}: {e}"))),
            };
        Ok(Some(crate::replica::placement::Settings {
            replication_factor: self.placement_replication_factor,
            disseminate_timeout: duration(
                "placement-disseminate-timeout",
                &self.placement_disseminate_timeout,
                1,
            )?,
            coalesce_window: duration(
                "placement-disseminate-coalesce-window",
                &self.placement_disseminate_coalesce_window,
                0,
            )?,
            metadata: self.placement_metadata_enabled,
            port: self.placement_port.map(|p| SocketAddr::new(ip, p)),
        }))
    }
}

/// A listen address flag: empty = all interfaces, `localhost` = loopback, else an IP.
fn listen_ip(given: &str) -> Result<IpAddr, Error> {
    let bare = given.trim().trim_start_matches('[').trim_end_matches(']');
    match bare {
        "" => Ok(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        "localhost" => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        other => other
            .parse()
            .map_err(|e| Error::ListenAddress(given.to_owned(), e)),
    }
}

impl Replica {
    /// The address this replica announces through WatchHosts, once it listens on `bound`:
    /// the override if given, else the bound address. A wildcard listen address is announced
    /// as loopback: a self-hosted replica is reached on this machine, and any other setup
    /// knows its reachable address better than we can guess it (Dapr guesses the pod IP).
    pub fn broadcast_address(&self, bound: SocketAddr) -> String {
        if let Some(address) = &self.broadcast_override {
            return address.clone();
        }
        let ip = match bound.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        SocketAddr::new(ip, bound.port()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Command;

    fn parse(args: &[&str]) -> SchedulerArgs {
        let mut argv = vec!["jobsd", "scheduler"];
        argv.extend_from_slice(args);
        match crate::config::parse(argv).unwrap().0.command {
            Some(Command::Scheduler(args)) => args,
            other => panic!("not the scheduler command: {other:?}"),
        }
    }

    #[test]
    fn dapr_scheduler_defaults() {
        let r = parse(&[]).validate().unwrap();
        assert_eq!(r.id, "dapr-scheduler-server-0");
        assert_eq!(r.listen, "0.0.0.0:50006".parse().unwrap());
        assert_eq!(r.broadcast_override, None);
        assert_eq!(r.data_dir, PathBuf::from("./data"));
        assert_eq!(r.cluster, None);
        assert_eq!(
            r.broadcast_address("0.0.0.0:50006".parse().unwrap()),
            "127.0.0.1:50006"
        );
        // The Dapr Scheduler's metrics flags are daprd's (`pkg/metrics`), defaults included.
        assert_eq!(r.metrics, Some("0.0.0.0:9090".parse().unwrap()));
        let off = parse(&["--enable-metrics=false"]).validate().unwrap();
        assert_eq!(off.metrics, None);
        let r = parse(&[
            "--metrics-port",
            "9091",
            "--metrics-listen-address",
            "127.0.0.1",
        ])
        .validate()
        .unwrap();
        assert_eq!(r.metrics, Some("127.0.0.1:9091".parse().unwrap()));
    }

    #[test]
    fn flags_are_read() {
        let r = parse(&[
            "--port",
            "0",
            "--listen-address",
            "::1",
            "--id",
            "s1",
            "--etcd-data-dir",
            "/var/lib/s1",
        ])
        .validate()
        .unwrap();
        assert_eq!(r.listen, "[::1]:0".parse().unwrap());
        assert_eq!(r.id, "s1");
        assert_eq!(r.data_dir, PathBuf::from("/var/lib/s1"));
        // The bound port is announced, not the configured 0.
        assert_eq!(
            r.broadcast_address("[::1]:41000".parse().unwrap()),
            "[::1]:41000"
        );

        let r = parse(&["--override-broadcast-host-port", "scheduler-0.local:50006"])
            .validate()
            .unwrap();
        assert_eq!(
            r.broadcast_address("0.0.0.0:50006".parse().unwrap()),
            "scheduler-0.local:50006"
        );
        assert!(matches!(
            parse(&["--listen-address", "nope"]).validate(),
            Err(Error::ListenAddress(..))
        ));
    }

    #[test]
    fn cluster_flags() {
        let r = parse(&[
            "--etcd-endpoints",
            "http://127.0.0.1:2379, http://127.0.0.1:2381",
        ])
        .validate()
        .unwrap();
        assert_eq!(
            r.cluster,
            Some(ClusterSettings {
                endpoints: vec![
                    "http://127.0.0.1:2379".to_owned(),
                    "http://127.0.0.1:2381".to_owned()
                ],
                namespace: "dapr".to_owned(),
                lease_ttl: Duration::from_secs(3),
                partitions: 256,
                tls: None,
            })
        );
        let r = parse(&[
            "--etcd-endpoints",
            "127.0.0.1:2379",
            "--lease-ttl",
            "2s",
            "--partitions",
            "8",
            "--etcd-key-prefix",
            "jobs/",
        ])
        .validate()
        .unwrap();
        let c = r.cluster.unwrap();
        assert_eq!(
            (c.lease_ttl, c.partitions, c.namespace.as_str()),
            (Duration::from_secs(2), 8, "jobs")
        );
        // Blank endpoints = single replica.
        assert_eq!(
            parse(&["--etcd-endpoints", " "])
                .validate()
                .unwrap()
                .cluster,
            None
        );
        for bad in [
            &["--lease-ttl", "soon"][..],
            &["--lease-ttl", "500ms"],
            &["--partitions", "0"],
        ] {
            let mut args = vec!["--etcd-endpoints", "127.0.0.1:2379"];
            args.extend_from_slice(bad);
            assert!(parse(&args).validate().is_err(), "{bad:?}");
        }
    }
}
