//! Flags and environment, with daprd's names and defaults, validated into the settings the
//! roles run with.

mod daprd_compat;
mod quantity;
mod replica;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::seam::remote::{BadAddress, parse_addresses};

pub use crate::tls::flags::{EtcdTlsArgs, SchedulerTlsArgs, ServerTlsArgs};
pub use daprd_compat::{DaprdIgnored, IGNORED, IgnoredFlags, NOT_YET, SchedulerIgnored, parse};
pub use quantity::parse_quantity;
pub use replica::{ClusterSettings, Replica, SchedulerArgs};

/// jobsd: the Dapr Jobs API and scheduler in one binary.
///
/// A repeated flag keeps its last value, as in daprd (Go's pflag).
#[derive(Debug, Parser)]
#[command(
    name = "jobsd",
    version,
    about,
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
pub struct Cli {
    /// The role to run; without one, jobsd runs as a sidecar.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Sidecar flags (daprd's).
    #[command(flatten)]
    pub sidecar: SidecarArgs,
}

/// Roles other than the sidecar.
// Parsed once per process, so the size of the Scheduler's accepted flags costs nothing worth
// a `Box`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the version and exit.
    Version,
    /// Run a Dapr Scheduler replica (`dapr.proto.scheduler.v1` on `--port`) on the embedded
    /// store.
    Scheduler(SchedulerArgs),
    /// Look at and steer the jobs of a running sidecar (or Scheduler replicas):
    /// `jobsd jobs list|get|runs|delete|pause|resume|trigger|backfill|preview`.
    Jobs(crate::cli::JobsArgs),
}

/// What the app speaks on its port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AppProtocol {
    /// HTTP/1.1: jobs arrive as `POST /job/<name>`.
    Http,
    /// gRPC: jobs arrive as `AppCallback.OnJobEvent`.
    Grpc,
    /// HTTP/2 without TLS (prior knowledge): jobs arrive as `POST /job/<name>`.
    H2c,
}

/// daprd's flags for the jobs sidecar (`dapr-jobs-api.md` §7).
#[derive(Debug, Clone, Args)]
pub struct SidecarArgs {
    /// The id of the app this sidecar serves (required; must not contain '.').
    #[arg(long, env = "APP_ID")]
    pub app_id: Option<String>,
    /// The port the app listens on; without it no jobs are delivered.
    #[arg(long, env = "APP_PORT")]
    pub app_port: Option<u16>,
    /// The protocol the app speaks.
    #[arg(long, value_enum, default_value_t = AppProtocol::Http)]
    pub app_protocol: AppProtocol,
    /// The address the app listens on.
    #[arg(long, default_value = "127.0.0.1")]
    pub app_channel_address: String,
    /// HTTP port of the Dapr API.
    #[arg(long, env = "DAPR_HTTP_PORT", default_value_t = 3500)]
    pub dapr_http_port: u16,
    /// gRPC port of the Dapr API.
    #[arg(long, env = "DAPR_GRPC_PORT", default_value_t = 50001)]
    pub dapr_grpc_port: u16,
    /// Comma-separated IP addresses the Dapr API listens on (default: all interfaces).
    #[arg(long, value_delimiter = ',')]
    pub dapr_listen_addresses: Vec<String>,
    /// Port of a second HTTP server with only `/v1.0/healthz` and `/v1.0/healthz/outbound`
    /// (daprd's public port, for probes kept apart from the API); none unless given.
    #[arg(long)]
    pub dapr_public_port: Option<u16>,
    /// The IP address the public port listens on (default: all interfaces).
    #[arg(long, default_value = "")]
    pub dapr_public_listen_address: String,
    /// Where the embedded scheduler keeps its durable store.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,
    /// Largest request body the API accepts, as a Kubernetes quantity (`4Mi`, `512Ki`,
    /// `1000000`; 0 = no limit) [default: 4Mi].
    #[arg(long)]
    pub max_body_size: Option<String>,
    /// The same limit in MiB (daprd's deprecated spelling; negative = unset, as `dapr run`
    /// passes -1); `--max-body-size` wins.
    #[arg(long, value_name = "MIB")]
    pub dapr_http_max_request_size: Option<i64>,
    /// Log level: debug, info, warn, error (or a tracing filter).
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Log JSON lines instead of text.
    #[arg(long, default_value_t = false)]
    pub log_as_json: bool,
    /// Most calls to the app in flight at once (-1 = no limit of daprd's; jobsd still caps
    /// connections, see `DEFAULT_MAX_IN_FLIGHT`).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub app_max_concurrency: i64,
    /// How long one call to the app may wait for its answer (a Go duration; 0 = forever, as
    /// daprd waits) before it fails as a timed-out attempt and the failure policy runs. A
    /// resiliency `timeout` policy for the app takes precedence.
    #[arg(long, default_value = "15m", value_parser = crate::schedule::duration::parse)]
    pub app_call_timeout: i64,
    /// Probe the app's health and hold deliveries while it is unhealthy.
    #[arg(long, default_value_t = false)]
    pub enable_app_health_check: bool,
    /// HTTP path of the app's health probe.
    #[arg(long, default_value = "/healthz")]
    pub app_health_check_path: String,
    /// Seconds between health probes.
    #[arg(long, default_value_t = 5)]
    pub app_health_probe_interval: u64,
    /// Milliseconds a health probe may take.
    #[arg(long, default_value_t = 500)]
    pub app_health_probe_timeout: u64,
    /// Consecutive failed probes that make the app unhealthy.
    #[arg(long, default_value_t = 3)]
    pub app_health_threshold: u32,
    /// Folders of Dapr resource files (Resiliency policies apply to job deliveries); repeat
    /// the flag or separate folders with commas.
    #[arg(long, value_delimiter = ',')]
    pub resources_path: Vec<PathBuf>,
    /// The folder of resource files when `--resources-path` is absent (daprd's deprecated
    /// spelling).
    #[arg(long)]
    pub components_path: Option<PathBuf>,
    /// Comma-separated `host:port` addresses of Dapr Scheduler replicas to forward jobs to
    /// (env `DAPR_SCHEDULER_HOST_ADDRESS_DNS_A` when the flag is absent); without any, jobsd
    /// runs its embedded scheduler.
    #[arg(long)]
    pub scheduler_host_address: Option<String>,
    /// TLS to the Scheduler replicas (jobsd's flags).
    #[command(flatten)]
    pub scheduler_tls: SchedulerTlsArgs,
    /// WatchJobs streams held to each Scheduler replica.
    #[arg(long, default_value_t = 3)]
    pub scheduler_job_streams: usize,
    /// Comma-separated `host:port` addresses of the actor placement service (Dapr's, or
    /// `jobsd scheduler --placement-enabled`): the app's actors are placed across every
    /// sidecar hosting their types, and calls to actors hosted elsewhere go there. Without
    /// it, this sidecar hosts every actor of its types itself.
    #[arg(long)]
    pub placement_host_address: Option<String>,
    /// Port of the internal gRPC API other sidecars call actors on (daprd's
    /// `--dapr-internal-grpc-port`); with placement only. Default: any free port.
    #[arg(long)]
    pub dapr_internal_grpc_port: Option<u16>,
    /// Listen address of the internal gRPC API (default: all interfaces).
    #[arg(long)]
    pub dapr_internal_grpc_listen_address: Option<String>,
    /// The address other sidecars reach this one at, announced to placement with the
    /// internal port (daprd's `DAPR_HOST_IP`; default 127.0.0.1).
    #[arg(long, env = "DAPR_HOST_IP")]
    pub dapr_host_ip: Option<String>,
    /// Run history and finished jobs.
    #[command(flatten)]
    pub history: HistoryArgs,
    /// How much of the future is kept in memory, how the store is checked.
    #[command(flatten)]
    pub embedded: EmbeddedStoreArgs,
    /// Most ticks one backfill (`POST /jobsd/v1/jobs/{name}/backfill`) may run; a range
    /// holding more is refused.
    #[arg(long, default_value_t = crate::engine::DEFAULT_MAX_BACKFILL_TICKS)]
    pub max_backfill_ticks: usize,
    /// Export a span per delivery attempt to this OTLP/gRPC collector (`http://host:4317`);
    /// off when absent.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Run on a manual test clock (jobsd's own, for apps' tests): it starts at the real time
    /// and only moves when told to (`POST /jobsd/v1/clock/advance {"by": "1h"}`). Needs the
    /// embedded scheduler.
    #[arg(long, env = "JOBSD_TEST_CLOCK")]
    pub test_clock: bool,
    /// Serve the web console at `/jobsd/ui/` on the HTTP port (it calls the `/jobsd/v1`
    /// routes with the API token); `--console=false` turns it off.
    #[arg(long, env = "JOBSD_CONSOLE", default_value_t = true, action = ArgAction::Set)]
    pub console: bool,
    /// With `DAPR_API_TOKEN` set, the metrics server asks scrapes for it too (as
    /// `dapr-api-token` or `Authorization: Bearer`); `--metrics-require-token=false` leaves
    /// `/metrics` open, as daprd does, for scrapers that cannot send a header.
    #[arg(long, env = "JOBSD_METRICS_REQUIRE_TOKEN", default_value_t = true, action = ArgAction::Set)]
    pub metrics_require_token: bool,
    /// Print the version and exit (daprd's `--build-info`).
    #[arg(long, action = ArgAction::Version)]
    pub build_info: (),
    /// daprd's mode that waits for another sidecar's outbound readiness and exits: not
    /// implemented, refused.
    #[arg(long)]
    pub wait: bool,
    /// Dapr Configuration files (daprd's `--config`); repeat the flag or separate files with
    /// commas.
    #[arg(long, value_delimiter = ',', help_heading = NOT_YET)]
    pub config: Vec<PathBuf>,
    /// Seconds a shutdown may take before it is forced (negative = the default, as daprd
    /// reads it).
    #[arg(long, default_value_t = 5, help_heading = NOT_YET)]
    pub dapr_graceful_shutdown_seconds: i64,
    /// Prometheus metrics.
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// daprd flags that do not apply to a jobs sidecar.
    #[command(flatten)]
    pub ignored: DaprdIgnored,
}

/// What jobsd keeps of its jobs' past (jobsd's own flags, for the sidecar and the replicas).
#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// Runs kept in each job's history (`GET /jobsd/v1/jobs/{name}/runs`); 0 keeps none (the
    /// job's status is kept regardless).
    #[arg(long, default_value_t = 100)]
    pub history_limit: u32,
    /// How long a finished job stays visible on jobsd's routes (a Go duration; 0 deletes it
    /// at once, as Dapr does). Dapr's GET and list never show finished jobs.
    #[arg(long, default_value = "24h", value_parser = crate::schedule::duration::parse)]
    pub finished_retention: i64,
}

impl HistoryArgs {
    /// The engine's history options.
    pub fn options(&self) -> crate::engine::history::Options {
        crate::engine::history::Options {
            history_limit: self.history_limit,
            finished_retention: u64::try_from(self.finished_retention)
                .ok()
                .filter(|&n| n > 0)
                .map(std::time::Duration::from_nanos),
        }
    }
}

/// The embedded store: how much of the future jobsd keeps in memory and how the file is
/// checked at open (jobsd's own flags, for the sidecar and the replicas).
#[derive(Debug, Clone, Args)]
pub struct EmbeddedStoreArgs {
    /// Keep only jobs due within this span in memory; the others stay in the embedded store,
    /// indexed by fire time, and are read in as time moves on (a Go duration; 0 keeps every
    /// job in memory). The span shrinks by itself while one round reads in over 200,000 jobs.
    /// A cluster replica on etcd reads the jobs of a partition it takes that are due within
    /// the span, keeps only the keys and times of the others, and reads them in as their
    /// time comes.
    #[arg(long, default_value = "5m", value_parser = crate::schedule::duration::parse)]
    pub horizon: i64,
    /// When a start reads the whole store file to verify its checksums: `auto` for files up
    /// to 256 MiB (about 500,000 jobs), `always`, or `never`. Crashes do not need it (commits
    /// are atomic); it finds bytes changed on disk.
    #[arg(long, value_enum, default_value_t)]
    pub store_check: crate::store::StoreCheck,
    /// redb's page cache, as a quantity (`64Mi`, `1Gi`). Random inserts into a store of
    /// millions of jobs (the due index) read less and copy less with a larger cache; it adds
    /// to the resident memory once filled.
    #[arg(long, default_value = "64Mi", value_parser = parse_quantity)]
    pub store_cache_size: usize,
}

impl EmbeddedStoreArgs {
    /// The engine's horizon (`None`: every job in memory).
    pub fn span(&self) -> Option<std::time::Duration> {
        u64::try_from(self.horizon)
            .ok()
            .filter(|&n| n > 0)
            .map(std::time::Duration::from_nanos)
    }

    /// The embedded store's options these flags set.
    pub fn store(&self) -> crate::store::RedbOptions {
        crate::store::RedbOptions {
            check: self.store_check,
            cache_size: self.store_cache_size,
            ..Default::default()
        }
    }
}

/// The Prometheus metrics server, with daprd's and the Dapr Scheduler's flags and defaults
/// (`pkg/metrics/options.go`).
#[derive(Debug, Clone, Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics (`GET /metrics`); `--enable-metrics=false` turns them off.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub enable_metrics: bool,
    /// Port of the metrics server.
    #[arg(long, default_value_t = 9090)]
    pub metrics_port: u16,
    /// Address the metrics server listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub metrics_listen_address: String,
}

impl MetricsArgs {
    /// Where the metrics server listens; `None` with `--enable-metrics=false`. The address is
    /// an IP address or `localhost`; blank means all interfaces, as Go reads `:9090`.
    pub fn listen(&self) -> Result<Option<SocketAddr>, Error> {
        if !self.enable_metrics {
            return Ok(None);
        }
        let given = self.metrics_listen_address.trim();
        let ip: IpAddr = match given.trim_start_matches('[').trim_end_matches(']') {
            "" => IpAddr::from([0, 0, 0, 0]),
            "localhost" => IpAddr::from([127, 0, 0, 1]),
            other => other
                .parse()
                .map_err(|e| Error::ListenAddress(self.metrics_listen_address.clone(), e))?,
        };
        Ok(Some(SocketAddr::new(ip, self.metrics_port)))
    }
}

/// Calls in flight to the app when daprd's `--app-max-concurrency` says "no limit": a burst
/// of 100k due jobs must not open 100k sockets. Kept high because daprd sets no limit by
/// default and an app with slow handlers must not be throttled; for a fast app it costs: in the
/// trigger benchmark (e2e/bench/triggers.sh) 1,024 took ≈25 % more CPU per trigger in jobsd
/// and ≈45 % more in the app than 128, and delivered ≈15 % slower (64k–72k vs 82k bursts/s);
/// `--app-max-concurrency 128` gets that back.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// App health probing, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// HTTP path probed (HTTP apps).
    pub path: String,
    /// Time between probes.
    pub interval: std::time::Duration,
    /// Time a probe may take.
    pub timeout: std::time::Duration,
    /// Consecutive failures that make the app unhealthy.
    pub threshold: u32,
}

/// How a sidecar takes part in actor placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarPlacement {
    /// The placement service's addresses, tried in turn.
    pub addresses: Vec<String>,
    /// Where the internal gRPC API listens (port 0: any free port).
    pub internal: SocketAddr,
    /// The address announced with the internal port.
    pub host_ip: String,
}

/// Settings of one sidecar, validated.
#[derive(Debug, Clone)]
pub struct Sidecar {
    /// The app id.
    pub app_id: String,
    /// The namespace (env `NAMESPACE`, default `default`).
    pub namespace: String,
    /// The `namespace` label of the metrics: env `NAMESPACE` as given, empty when unset, as
    /// daprd labels them (its jobs still live under `default`).
    pub metrics_namespace: String,
    /// Where the public port serves the health routes (`--dapr-public-port`), if given.
    pub public_addr: Option<SocketAddr>,
    /// Address of the app's port, if any.
    pub app_address: Option<SocketAddr>,
    /// Protocol of the app's port.
    pub app_protocol: AppProtocol,
    /// Where the HTTP API listens (one per listen address).
    pub http_addrs: Vec<SocketAddr>,
    /// Where the gRPC API listens.
    pub grpc_addrs: Vec<SocketAddr>,
    /// Durable store folder.
    pub data_dir: PathBuf,
    /// Request size limit in bytes.
    pub max_body_size: usize,
    /// Token API callers must send (env `DAPR_API_TOKEN`).
    pub api_token: Option<String>,
    /// Token sent to the app (env `APP_API_TOKEN`).
    pub app_api_token: Option<String>,
    /// Most calls to the app in flight.
    pub app_max_concurrency: usize,
    /// How long a call to the app may wait for its answer; `None` = forever.
    pub app_call_timeout: Option<std::time::Duration>,
    /// App health probing, when enabled.
    pub health_check: Option<HealthCheck>,
    /// Folders of resource files.
    pub resources_paths: Vec<PathBuf>,
    /// Dapr Scheduler replicas to forward to (`--scheduler-host-address`), deduplicated in
    /// the given order; empty = the embedded scheduler.
    pub scheduler_hosts: Vec<String>,
    /// TLS to the replicas (`--scheduler-tls-*`); `None` = plaintext, as daprd without mTLS.
    pub scheduler_tls: Option<crate::tls::ClientTls>,
    /// WatchJobs streams per Scheduler replica (`--scheduler-job-streams`, at least 1).
    pub scheduler_job_streams: usize,
    /// Actor placement (`--placement-host-address`); `None`: actors stay on this host.
    pub placement: Option<SidecarPlacement>,
    /// What the embedded scheduler keeps of each job's past.
    pub history: crate::engine::history::Options,
    /// How far ahead the embedded scheduler keeps jobs in memory (`--horizon`; `None`: all).
    pub horizon: Option<std::time::Duration>,
    /// How the embedded store is opened (`--store-check`, `--store-cache-size`).
    pub store: crate::store::RedbOptions,
    /// Most ticks one backfill may run (`--max-backfill-ticks`).
    pub max_backfill_ticks: usize,
    /// OTLP/gRPC collector spans are exported to (`--otlp-endpoint`); `None` = no spans.
    pub otlp_endpoint: Option<String>,
    /// Where the Prometheus metrics server listens (`--metrics-listen-address`,
    /// `--metrics-port`); `None` with `--enable-metrics=false`.
    pub metrics: Option<SocketAddr>,
    /// `--test-clock`: time is a manual clock moved through `/jobsd/v1/clock` (embedded
    /// scheduler only).
    pub test_clock: bool,
    /// `--console`: serve the web console at `/jobsd/ui/` on the HTTP port.
    pub console: bool,
    /// `--metrics-require-token`: with an API token set, `/metrics` requires it too.
    pub metrics_require_token: bool,
}

/// A flag or variable that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--app-id` missing or empty.
    #[error("parameter app-id cannot be empty")]
    NoAppId,
    /// `--app-id` contains a dot.
    #[error("parameter app-id cannot contain dots")]
    DottedAppId,
    /// `--app-id` or `NAMESPACE` contains `||`, the separator of the keys jobs are stored
    /// under: its jobs would fall inside another app's key range.
    #[error("{0} {1:?} must not contain '||' (the separator of job keys)")]
    SeparatorInOwner(&'static str, String),
    /// A listen address is not an IP address.
    #[error("invalid listen address {0:?}: {1}")]
    ListenAddress(String, std::net::AddrParseError),
    /// The app channel address does not resolve to an IP address.
    #[error("invalid app channel address {0:?}")]
    AppAddress(String),
    /// `--max-body-size` is not a quantity.
    #[error("invalid max body size {0:?}: {1}")]
    BodySize(String, String),
    /// A `--scheduler-host-address` entry is not `host:port`.
    #[error(transparent)]
    SchedulerAddress(#[from] BadAddress),
    /// `--scheduler-job-streams` is 0: the sidecar would never receive a trigger.
    #[error("parameter scheduler-job-streams must be at least 1")]
    NoJobStreams,
    /// `--lease-ttl` is not a Go duration of at least one second.
    #[error("invalid lease ttl {0:?}: {1}")]
    LeaseTtl(String, String),
    /// A `--placement-*` flag's value is refused.
    #[error("invalid --{0}: {1}")]
    PlacementFlag(String, String),
    /// `--partitions` is 0.
    #[error("parameter partitions must be at least 1")]
    NoPartitions,
    /// `--otlp-endpoint` is not an `http://host:port` URL.
    #[error("invalid OTLP endpoint {0:?}: expected http://host:port (OTLP over gRPC, no TLS)")]
    OtlpEndpoint(String),
    /// `--test-clock` with `--scheduler-host-address`: the replicas keep their own time.
    #[error(
        "--test-clock needs the embedded scheduler: Scheduler replicas \
         (--scheduler-host-address) fire jobs on their own clocks"
    )]
    TestClockRemote,
    /// TLS flags that cannot be used together, or a certificate or key file that cannot be
    /// used.
    #[error(transparent)]
    Tls(#[from] crate::tls::Error),
    /// `--wait`: daprd's wait-for-outbound-readiness mode, which jobsd does not have.
    #[error("--wait (wait for a sidecar's outbound readiness, then exit) is not implemented")]
    WaitMode,
}

/// The environment variables the sidecar reads besides its flags.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `NAMESPACE`.
    pub namespace: Option<String>,
    /// `DAPR_API_TOKEN`.
    pub api_token: Option<String>,
    /// `APP_API_TOKEN`.
    pub app_api_token: Option<String>,
    /// `DAPR_SCHEDULER_HOST_ADDRESS_DNS_A`: the Scheduler addresses when
    /// `--scheduler-host-address` is not given.
    pub scheduler_host_address: Option<String>,
}

impl Env {
    /// Reads the process environment (empty values count as unset).
    pub fn from_process() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Env {
            namespace: var("NAMESPACE"),
            api_token: var("DAPR_API_TOKEN"),
            app_api_token: var("APP_API_TOKEN"),
            scheduler_host_address: var("DAPR_SCHEDULER_HOST_ADDRESS_DNS_A"),
        }
    }
}

impl SidecarArgs {
    /// The placement settings, when `--placement-host-address` is given.
    fn placement(&self) -> Result<Option<SidecarPlacement>, Error> {
        let addresses =
            parse_addresses(self.placement_host_address.as_deref().unwrap_or_default())?;
        if addresses.is_empty() {
            return Ok(None);
        }
        let ip = match self
            .dapr_internal_grpc_listen_address
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            Some(a) => listen_ip(a)?,
            None => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        };
        Ok(Some(SidecarPlacement {
            addresses,
            internal: SocketAddr::new(ip, self.dapr_internal_grpc_port.unwrap_or(0)),
            host_ip: self
                .dapr_host_ip
                .clone()
                .filter(|h| !h.trim().is_empty())
                .unwrap_or_else(|| "127.0.0.1".to_owned()),
        }))
    }

    /// Validates the flags with `env` into sidecar settings.
    pub fn validate(&self, env: Env) -> Result<Sidecar, Error> {
        if self.wait {
            return Err(Error::WaitMode);
        }
        let app_id = self
            .app_id
            .as_deref()
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .ok_or(Error::NoAppId)?;
        if app_id.contains('.') {
            return Err(Error::DottedAppId);
        }
        if app_id.contains(crate::trigger::keys::SEPARATOR) {
            return Err(Error::SeparatorInOwner("--app-id", app_id.to_owned()));
        }
        if let Some(ns) = env
            .namespace
            .as_deref()
            .filter(|ns| ns.contains(crate::trigger::keys::SEPARATOR))
        {
            return Err(Error::SeparatorInOwner("NAMESPACE", ns.to_owned()));
        }
        let ips: Vec<IpAddr> = if self.dapr_listen_addresses.is_empty() {
            vec![IpAddr::from([0, 0, 0, 0])]
        } else {
            self.dapr_listen_addresses
                .iter()
                .map(|a| listen_ip(a))
                .collect::<Result<_, _>>()?
        };
        let public_addr = match self.dapr_public_port {
            Some(port) => Some(SocketAddr::new(
                match self.dapr_public_listen_address.trim() {
                    "" => IpAddr::from([0, 0, 0, 0]),
                    a => listen_ip(a)?,
                },
                port,
            )),
            None => None,
        };
        let app_address = match self.app_port {
            Some(port) => {
                let host = match self.app_channel_address.as_str() {
                    "localhost" => "127.0.0.1",
                    other => other,
                };
                let ip: IpAddr = host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| Error::AppAddress(self.app_channel_address.clone()))?;
                Some(SocketAddr::new(ip, port))
            }
            None => None,
        };
        let max_body_size = self.max_body_size()?;
        // The flag wins even when it is blank: daprd reads the variable only without the flag.
        let scheduler_hosts = parse_addresses(
            self.scheduler_host_address
                .as_deref()
                .or(env.scheduler_host_address.as_deref())
                .unwrap_or_default(),
        )?;
        if self.scheduler_job_streams == 0 {
            return Err(Error::NoJobStreams);
        }
        let scheduler_tls = self
            .scheduler_tls
            .validate("--scheduler-host-address", !scheduler_hosts.is_empty())?;
        if self.test_clock && !scheduler_hosts.is_empty() {
            return Err(Error::TestClockRemote);
        }
        let metrics = self.metrics.listen()?;
        let placement = self.placement()?;
        Ok(Sidecar {
            placement,
            app_id: app_id.to_owned(),
            metrics_namespace: env.namespace.clone().unwrap_or_default(),
            namespace: env.namespace.unwrap_or_else(|| "default".to_owned()),
            app_address,
            app_protocol: self.app_protocol,
            http_addrs: ips
                .iter()
                .map(|ip| SocketAddr::new(*ip, self.dapr_http_port))
                .collect(),
            grpc_addrs: ips
                .iter()
                .map(|ip| SocketAddr::new(*ip, self.dapr_grpc_port))
                .collect(),
            public_addr,
            data_dir: self.data_dir.clone(),
            max_body_size,
            api_token: env.api_token,
            app_api_token: env.app_api_token,
            app_max_concurrency: usize::try_from(self.app_max_concurrency)
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_MAX_IN_FLIGHT),
            app_call_timeout: u64::try_from(self.app_call_timeout)
                .ok()
                .filter(|&n| n > 0)
                .map(std::time::Duration::from_nanos),
            health_check: self.enable_app_health_check.then(|| HealthCheck {
                path: self.app_health_check_path.clone(),
                interval: std::time::Duration::from_secs(self.app_health_probe_interval.max(1)),
                timeout: std::time::Duration::from_millis(self.app_health_probe_timeout.max(1)),
                threshold: self.app_health_threshold.max(1),
            }),
            resources_paths: if self.resources_path.is_empty() {
                self.components_path.iter().cloned().collect()
            } else {
                self.resources_path.clone()
            },
            scheduler_hosts,
            scheduler_tls,
            scheduler_job_streams: self.scheduler_job_streams,
            history: self.history.options(),
            horizon: self.embedded.span(),
            store: self.embedded.store(),
            max_backfill_ticks: self.max_backfill_ticks,
            otlp_endpoint: self
                .otlp_endpoint
                .as_deref()
                .map(otlp_endpoint)
                .transpose()?,
            metrics,
            test_clock: self.test_clock,
            console: self.console,
            metrics_require_token: self.metrics_require_token,
        })
    }

    /// How long a shutdown may take before it is forced (`--dapr-graceful-shutdown-seconds`).
    pub fn graceful_shutdown(&self) -> std::time::Duration {
        let seconds = u64::try_from(self.dapr_graceful_shutdown_seconds).unwrap_or(5);
        std::time::Duration::from_secs(seconds)
    }

    /// The request size limit in bytes: `--max-body-size`, else daprd's older
    /// `--dapr-http-max-request-size` in MiB, else 4 MiB (daprd's order). A negative MiB count
    /// is the dapr CLI's "not set" (older daprd read -1 so), not a limit.
    fn max_body_size(&self) -> Result<usize, Error> {
        let mib = self.dapr_http_max_request_size.filter(|&mib| mib >= 0);
        match (&self.max_body_size, mib) {
            (Some(quantity), _) => {
                parse_quantity(quantity).map_err(|e| Error::BodySize(quantity.clone(), e))
            }
            (None, Some(mib)) => usize::try_from(mib)
                .ok()
                .and_then(|mib| mib.checked_mul(1 << 20))
                .ok_or_else(|| Error::BodySize(format!("{mib}Mi"), "number too large".into())),
            (None, None) => Ok(4 << 20),
        }
    }
}

/// A `--otlp-endpoint` value: an `http://` URL with a host (jobsd exports OTLP over gRPC
/// without TLS; an empty value is refused rather than read as "off").
/// One of daprd's listen addresses: an IP (brackets allowed), or `localhost` for loopback.
fn listen_ip(given: &str) -> Result<IpAddr, Error> {
    let bare = given.trim().trim_start_matches('[').trim_end_matches(']');
    let bare = if bare == "localhost" {
        "127.0.0.1"
    } else {
        bare
    };
    bare.parse()
        .map_err(|e| Error::ListenAddress(given.to_owned(), e))
}

fn otlp_endpoint(value: &str) -> Result<String, Error> {
    let value = value.trim();
    let uri: http::Uri = value
        .parse()
        .map_err(|_| Error::OtlpEndpoint(value.to_owned()))?;
    if uri.scheme() != Some(&http::uri::Scheme::HTTP) || uri.host().is_none_or(str::is_empty) {
        return Err(Error::OtlpEndpoint(value.to_owned()));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> SidecarArgs {
        let mut argv = vec!["jobsd"];
        argv.extend_from_slice(args);
        super::parse(argv).unwrap().0.sidecar
    }

    #[test]
    fn app_call_timeout_defaults_to_the_delivery_default_and_zero_is_forever() {
        let timeout = |args: &[&str]| {
            let mut all = vec!["--app-id", "a"];
            all.extend_from_slice(args);
            parse(&all)
                .validate(Env::default())
                .unwrap()
                .app_call_timeout
        };
        assert_eq!(timeout(&[]), Some(crate::delivery::DEFAULT_CALL_TIMEOUT));
        assert_eq!(
            timeout(&["--app-call-timeout", "90s"]),
            Some(std::time::Duration::from_secs(90))
        );
        assert_eq!(timeout(&["--app-call-timeout", "0"]), None);
    }

    #[test]
    fn daprd_defaults() {
        let s = parse(&["--app-id", "myapp"])
            .validate(Env::default())
            .unwrap();
        assert_eq!(s.app_id, "myapp");
        assert_eq!(s.namespace, "default");
        assert_eq!(
            s.metrics_namespace, "",
            "daprd's metrics label without NAMESPACE"
        );
        assert_eq!(s.http_addrs, ["0.0.0.0:3500".parse().unwrap()]);
        assert_eq!(s.grpc_addrs, ["0.0.0.0:50001".parse().unwrap()]);
        assert_eq!(s.max_body_size, 4 << 20);
        assert_eq!(s.app_address, None);
        assert_eq!(s.data_dir, PathBuf::from("./data"));
        assert_eq!(s.app_max_concurrency, DEFAULT_MAX_IN_FLIGHT);
        assert_eq!(s.health_check, None);
        assert_eq!(s.metrics, Some("0.0.0.0:9090".parse().unwrap()));
    }

    #[test]
    fn metrics_flags_are_daprd_s() {
        let metrics = |args: &[&str]| {
            let mut argv = vec!["--app-id", "a"];
            argv.extend_from_slice(args);
            parse(&argv).validate(Env::default()).map(|s| s.metrics)
        };
        assert_eq!(
            metrics(&["--metrics-port", "9091"]).unwrap(),
            Some("0.0.0.0:9091".parse().unwrap())
        );
        assert_eq!(
            metrics(&["--metrics-listen-address", "localhost", "--metrics-port=0"]).unwrap(),
            Some("127.0.0.1:0".parse().unwrap())
        );
        assert_eq!(
            metrics(&["--metrics-listen-address", "[::1]"]).unwrap(),
            Some("[::1]:9090".parse().unwrap())
        );
        assert_eq!(
            metrics(&["--metrics-listen-address", ""]).unwrap(),
            Some("0.0.0.0:9090".parse().unwrap())
        );
        // Go-bool syntax: only `=false` turns a default-true flag off.
        assert_eq!(metrics(&["--enable-metrics=false"]).unwrap(), None);
        assert_eq!(
            metrics(&["--enable-metrics=false", "--enable-metrics"]).unwrap(),
            Some("0.0.0.0:9090".parse().unwrap())
        );
        // Off, the address is never read (nor does daprd read it then).
        assert_eq!(
            metrics(&["--enable-metrics=false", "--metrics-listen-address", "nope"]).unwrap(),
            None
        );
        assert!(matches!(
            metrics(&["--metrics-listen-address", "nope"]),
            Err(Error::ListenAddress(..))
        ));
    }

    #[test]
    fn otlp_endpoint_is_off_by_default_and_checked() {
        let off = parse(&["--app-id", "a"]).validate(Env::default()).unwrap();
        assert_eq!(off.otlp_endpoint, None);
        let on = parse(&["--app-id", "a", "--otlp-endpoint", "http://127.0.0.1:4317"])
            .validate(Env::default())
            .unwrap();
        assert_eq!(on.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4317"));
        for bad in [
            "",
            "127.0.0.1:4317",
            "https://collector:4317",
            "http://",
            "not a url",
        ] {
            let err = parse(&["--app-id", "a", "--otlp-endpoint", bad])
                .validate(Env::default())
                .unwrap_err();
            assert!(matches!(err, Error::OtlpEndpoint(_)), "{bad:?}: {err}");
        }
    }

    #[test]
    fn delivery_flags() {
        let s = parse(&[
            "--app-id",
            "a",
            "--app-max-concurrency",
            "8",
            "--enable-app-health-check",
            "--app-health-check-path",
            "/ready",
            "--app-health-probe-interval",
            "2",
            "--app-health-probe-timeout",
            "100",
            "--app-health-threshold",
            "5",
            "--resources-path",
            "./config",
        ])
        .validate(Env::default())
        .unwrap();
        assert_eq!(s.app_max_concurrency, 8);
        assert_eq!(
            s.health_check,
            Some(HealthCheck {
                path: "/ready".into(),
                interval: std::time::Duration::from_secs(2),
                timeout: std::time::Duration::from_millis(100),
                threshold: 5,
            })
        );
        assert_eq!(s.resources_paths, [PathBuf::from("./config")]);
    }

    #[test]
    fn flags_and_env_are_read() {
        let s = parse(&[
            "--app-id",
            "a",
            "--app-port",
            "8080",
            "--app-protocol",
            "grpc",
            "--dapr-listen-addresses",
            "127.0.0.1,[::1]",
            "--dapr-http-port",
            "3600",
            "--max-body-size",
            "512Ki",
        ])
        .validate(Env {
            namespace: Some("prod".into()),
            api_token: Some("t".into()),
            app_api_token: None,
            scheduler_host_address: None,
        })
        .unwrap();
        assert_eq!(s.app_address, Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(s.app_protocol, AppProtocol::Grpc);
        assert_eq!(
            s.http_addrs,
            [
                "127.0.0.1:3600".parse().unwrap(),
                "[::1]:3600".parse().unwrap()
            ]
        );
        assert_eq!(s.namespace, "prod");
        assert_eq!(s.metrics_namespace, "prod");
        assert_eq!(s.api_token.as_deref(), Some("t"));
        assert_eq!(s.max_body_size, 512 << 10);
    }

    #[test]
    fn bad_flags_are_clear_errors() {
        assert_eq!(
            parse(&[]).validate(Env::default()).unwrap_err().to_string(),
            "parameter app-id cannot be empty"
        );
        assert!(matches!(
            parse(&["--app-id", "a.b"]).validate(Env::default()),
            Err(Error::DottedAppId)
        ));
        assert!(matches!(
            parse(&["--app-id", "a||b"]).validate(Env::default()),
            Err(Error::SeparatorInOwner("--app-id", _))
        ));
        assert!(matches!(
            parse(&["--app-id", "a"]).validate(Env {
                namespace: Some("prod||a".into()),
                ..Env::default()
            }),
            Err(Error::SeparatorInOwner("NAMESPACE", _))
        ));
        assert!(matches!(
            parse(&["--app-id", "a", "--dapr-listen-addresses", "nope"]).validate(Env::default()),
            Err(Error::ListenAddress(..))
        ));
        assert!(matches!(
            parse(&["--app-id", "a", "--max-body-size", "4Xi"]).validate(Env::default()),
            Err(Error::BodySize(..))
        ));
        let argv = ["jobsd", "--app-id", "a", "--app-protocol", "smtp"];
        assert!(super::parse(argv).is_err());
    }

    fn env_hosts(value: &str) -> Env {
        Env {
            scheduler_host_address: Some(value.into()),
            ..Env::default()
        }
    }

    #[test]
    fn scheduler_addresses_come_from_the_flag_then_the_env() {
        let s = parse(&["--app-id", "a"]).validate(Env::default()).unwrap();
        assert!(s.scheduler_hosts.is_empty(), "embedded by default");
        assert_eq!(s.scheduler_job_streams, 3);

        let s = parse(&[
            "--app-id",
            "a",
            "--scheduler-host-address",
            "h1:50006, h2:50006",
        ])
        .validate(env_hosts("env:1"))
        .unwrap();
        assert_eq!(s.scheduler_hosts, ["h1:50006", "h2:50006"]);

        let s = parse(&["--app-id", "a"])
            .validate(env_hosts("scheduler.dapr-system.svc:50006"))
            .unwrap();
        assert_eq!(s.scheduler_hosts, ["scheduler.dapr-system.svc:50006"]);

        // A blank flag still wins over the variable: daprd reads it only without the flag.
        let s = parse(&["--app-id", "a", "--scheduler-host-address", ""])
            .validate(env_hosts("env:1"))
            .unwrap();
        assert!(s.scheduler_hosts.is_empty());

        let s = parse(&["--app-id", "a", "--scheduler-job-streams", "7"])
            .validate(Env::default())
            .unwrap();
        assert_eq!(s.scheduler_job_streams, 7);
        assert!(matches!(
            parse(&["--app-id", "a", "--scheduler-job-streams", "0"]).validate(Env::default()),
            Err(Error::NoJobStreams)
        ));
    }
}
