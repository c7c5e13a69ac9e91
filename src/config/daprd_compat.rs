//! daprd's whole command line, and the Dapr Scheduler's: jobsd is started by scripts and
//! manifests written for those binaries, so it accepts every flag they accept, in their syntax
//! (Go `pflag`), and says once at startup which of them it does not act on.
//!
//! Sources, read for this table: dapr/dapr `cmd/daprd/options/options.go` (the newest version
//! in the code index: it has 1.15's `--scheduler-job-streams` and 1.16's
//! `--sentry-request-jwt-audiences`; the 1.17 and 1.18 release notes add or remove no daprd
//! flag), `pkg/metrics/options.go` (`FlagOptions`), dapr/kit `logger/options.go`, and
//! `cmd/scheduler/options/options.go` plus `--workers` (dapr/dapr#9221, default 2048 since
//! dapr/dapr#9238, both in 1.17), checked flag by flag against v1.18.2's `options.go` (built
//! here from Dapr's Go module: `--etcd-max-txn-ops` and `--etcd-client-listen-address` were
//! missing). Check a new Dapr release against these files.
//!
//! daprd (`jobsd [flags]`): "acts" = jobsd does what daprd does; "later" = parsed into
//! [`super::SidecarArgs`] with daprd's type and default for an issue that will use it, not
//! acted on yet; "ignored" = accepted, type-checked as daprd does, not acted on. "later" and
//! "ignored" flags given on the command line are named in one warning at startup.
//!
//! | flag | daprd type (default) | jobsd |
//! |---|---|---|
//! | `--actors-service` | string | ignored |
//! | `--allowed-origins` | string (`*`) | ignored |
//! | `--app-channel-address` | string (`127.0.0.1`) | acts |
//! | `--app-health-check-path` | string (`/healthz`) | acts |
//! | `--app-health-probe-interval` | int seconds (5) | acts |
//! | `--app-health-probe-timeout` | int ms (500) | acts |
//! | `--app-health-threshold` | int (3) | acts |
//! | `--app-id` | string | acts |
//! | `--app-max-concurrency` | int (-1) | acts |
//! | `--app-port` | string | acts |
//! | `--app-protocol` | string (`http`) | acts: `http`, `grpc`, `h2c`; `https`/`grpcs` refused |
//! | `--app-ssl` | bool, deprecated | ignored |
//! | `--build-info` | bool | acts: prints the version and exits |
//! | `--components-path` | string, deprecated alias | acts: `--resources-path` when that is absent |
//! | `--config` | []string | later (a Dapr Configuration file) |
//! | `--control-plane-address` | string | ignored |
//! | `--control-plane-namespace` | string (`default`) | ignored |
//! | `--control-plane-trust-domain` | string (`localhost`) | ignored |
//! | `--dapr-block-shutdown-duration` | Go duration | ignored |
//! | `--dapr-graceful-shutdown-seconds` | int (5) | later |
//! | `--dapr-grpc-port` | string (50001) | acts |
//! | `--dapr-http-max-request-size` | int MiB (4), deprecated | acts: the body limit when `--max-body-size` is absent |
//! | `--dapr-http-port` | string (3500) | acts |
//! | `--dapr-http-read-buffer-size` | int KiB (4), deprecated | ignored |
//! | `--dapr-internal-grpc-listen-address` | string | acts (with `--placement-host-address`) |
//! | `--dapr-internal-grpc-port` | string | acts (with `--placement-host-address`): actor calls from other sidecars |
//! | `--dapr-listen-addresses` | string | acts |
//! | `--dapr-public-listen-address` | string | acts (with `--dapr-public-port`) |
//! | `--dapr-public-port` | string | acts: `/v1.0/healthz` and `/v1.0/healthz/outbound` served there too |
//! | `--disable-builtin-k8s-secret-store` | bool | ignored |
//! | `--enable-api-logging` | bool | ignored |
//! | `--enable-app-health-check` | bool (false) | acts |
//! | `--enable-metrics` | bool (true) | acts |
//! | `--enable-mtls` | bool (false) | ignored |
//! | `--enable-profiling` | bool (false) | ignored |
//! | `--log-as-json` | bool (false) | acts |
//! | `--log-level` | string (`info`) | acts |
//! | `--max-body-size` | quantity (`4Mi`) | acts |
//! | `--metrics-listen-address` | string (`0.0.0.0`) | acts |
//! | `--metrics-port` | string (9090) | acts |
//! | `--mode` | string (`standalone`) | ignored |
//! | `--placement-host-address` | string | acts: actors placed across sidecars (Dapr 1.18's placement protocol) |
//! | `--profile-port` | string (7777) | ignored |
//! | `--read-buffer-size` | quantity (`4Ki`) | ignored |
//! | `--reminders-service` | string | ignored |
//! | `--resources-path` | []string | acts |
//! | `--scheduler-host-address` | []string | acts |
//! | `--scheduler-job-streams` | uint (3) | acts |
//! | `--sentry-address` | string | ignored |
//! | `--sentry-request-jwt-audiences` | []string | ignored |
//! | `--unix-domain-socket` | string | ignored |
//! | `--version` | bool | acts: prints the version and exits |
//! | `--wait` | bool | refused: daprd's wait-for-another-sidecar mode is not implemented |
//!
//! Dapr Scheduler (`jobsd scheduler [flags]`):
//!
//! | flag | Scheduler type (default) | jobsd |
//! |---|---|---|
//! | `--enable-metrics`, `--metrics-port`, `--metrics-listen-address` | as daprd's | acts |
//! | `--etcd-backend-batch-interval` | string (`50ms`) | ignored |
//! | `--etcd-backend-batch-limit` | int (5000) | ignored |
//! | `--etcd-client-endpoints` | []string | acts: alias of jobsd's `--etcd-endpoints` |
//! | `--etcd-client-password`, `--etcd-client-username` | string | ignored (the password is not logged) |
//! | `--etcd-client-port` | uint (2379) | ignored |
//! | `--etcd-compaction-mode` | string (`periodic`) | ignored |
//! | `--etcd-compaction-retention` | string (`10m`) | ignored |
//! | `--etcd-data-dir` | string (`./data`) | acts: alias of jobsd's `--data-dir` |
//! | `--etcd-embed` | bool (true) | ignored |
//! | `--etcd-experimental-bootstrap-defrag-threshold-megabytes` | uint (100) | ignored |
//! | `--etcd-initial-cluster` | []string | ignored |
//! | `--etcd-initial-election-tick-advance` | bool (false) | ignored |
//! | `--etcd-max-snapshots`, `--etcd-max-wals` | uint (10) | ignored |
//! | `--etcd-max-txn-ops` | uint (10000; Dapr 1.18) | ignored |
//! | `--etcd-client-listen-address` | string (`localhost`) | ignored |
//! | `--etcd-metrics` | string (`basic`) | ignored |
//! | `--etcd-snapshot-count` | uint (10000) | ignored |
//! | `--etcd-space-quota` | quantity (`9.2E`) | ignored |
//! | `--healthz-listen-address` | string | acts (with `--healthz-port`) |
//! | `--healthz-port` | int (8080) | acts: `GET /healthz` answers 200 once serving; no server unless given (replicas on one machine would all take 8080; gRPC health on `--port` says the same) |
//! | `--id` | string (`dapr-scheduler-server-0`) | acts |
//! | `--identity-directory-write` | string | ignored |
//! | `--kubeconfig` | string | ignored |
//! | `--listen-address` | string | acts |
//! | `--log-as-json`, `--log-level` | as daprd's | acts |
//! | `--mode` | string (`standalone`) | ignored |
//! | `--override-broadcast-host-port` | string | acts |
//! | `--port` | int (50006) | acts |
//! | `--sentry-address`, `--trust-anchors-file`, `--trust-domain` | string | ignored |
//! | `--tls-enabled` | bool (false) | ignored |
//! | `--workers` | uint (2048) | ignored |
//! | `--history-limit`, `--finished-retention` | jobsd's own | acts: status and history kept for sidecars' jobsd views |
//!
//! Syntax, as pflag parses it: `--flag value` and `--flag=value`; a bool flag is `--flag`
//! (true) or `--flag=true|false` (`--flag false` is not a value); a repeated scalar flag keeps
//! its last value; `[]string` flags take comma-separated values and may be repeated. daprd
//! (not the Scheduler) also turns `-flag` into `--flag` for scripts written for Go's `flag`
//! package, and Dapr's docs still show it (`daprd -app-id <id> -app-port <port>` in "Run
//! Dapr in self-hosted mode with Docker"). Unknown flags are refused, as daprd refuses them.

use std::ffi::OsString;
use std::fmt;

use clap::builder::BoolishValueParser;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Args, Command, CommandFactory, FromArgMatches};

use super::Cli;

/// `--help` heading of the daprd and Scheduler flags jobsd accepts and ignores.
pub const IGNORED: &str = "Accepted for Dapr compatibility, ignored";

/// `--help` heading of the flags a coming jobsd feature will act on (graceful shutdown,
/// Configuration files); until then they are ignored like [`IGNORED`] ones.
pub const NOT_YET: &str = "Accepted for Dapr compatibility, not acted on yet";

/// Parses a command line written for daprd (or, after `scheduler`, for the Dapr Scheduler),
/// returning the flags and the ignored flags that were given.
pub fn parse<I, T>(args: I) -> Result<(Cli, IgnoredFlags), clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut cmd = pflag_syntax(Cli::command());
    let args = double_single_dashes(args.into_iter().map(Into::into).collect(), &cmd);
    let mut matches = cmd.try_get_matches_from_mut(args)?;
    let ignored = match matches.subcommand() {
        Some((name, sub)) => match cmd.find_subcommand(name) {
            Some(sub_cmd) => IgnoredFlags::given(sub_cmd, sub),
            None => IgnoredFlags::default(),
        },
        None => IgnoredFlags::given(&cmd, &matches),
    };
    let cli = Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))?;
    Ok((cli, ignored))
}

/// Gives the flags of `cmd` and its subcommands pflag's syntax, in one place rather than as
/// attributes repeated on every field: a bool flag is `--flag` or `--flag=true|false` (clap's
/// `1`, `yes`, `on`… are accepted too), and a flag that takes a value takes the next argument
/// whatever it looks like (`--app-max-concurrency -1`, `--profile-port -1` as `dapr run`
/// passes them).
fn pflag_syntax(cmd: Command) -> Command {
    let bool_type = clap::value_parser!(bool).type_id();
    cmd.mut_args(|arg| {
        let set_true = matches!(arg.get_action(), ArgAction::SetTrue);
        let is_bool = set_true || arg.get_value_parser().type_id() == bool_type;
        if arg.get_long().is_none() {
            arg
        } else if is_bool {
            let arg = if set_true {
                arg.default_value("false")
            } else {
                arg
            };
            arg.action(ArgAction::Set)
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_parser(BoolishValueParser::new())
        } else if arg.get_action().takes_values() {
            arg.allow_hyphen_values(true)
        } else {
            arg
        }
    })
    .mut_subcommands(pflag_syntax)
}

/// daprd's `-flag` → `--flag`: every argument longer than two characters that starts with a
/// single dash gets a second one (`-app-id=x` too). Unlike daprd, a dash followed by a digit is
/// left alone so that negative numbers stay values (`--app-max-concurrency -10`); arguments
/// after `--`, and whole command lines of a subcommand, are left alone (the Dapr Scheduler
/// does not do this).
fn double_single_dashes(args: Vec<OsString>, cmd: &Command) -> Vec<OsString> {
    let first = args.get(1).and_then(|a| a.to_str());
    if first.is_some_and(|a| cmd.find_subcommand(a).is_some()) {
        return args;
    }
    let mut options_ended = false;
    args.into_iter()
        .enumerate()
        .map(|(i, arg)| {
            let Some(s) = arg.to_str().filter(|_| i > 0 && !options_ended) else {
                return arg;
            };
            options_ended = s == "--";
            let single = s.len() > 2
                && s.starts_with('-')
                && s[1..].starts_with(|c: char| c.is_ascii_alphabetic());
            if single { format!("-{s}").into() } else { arg }
        })
        .collect()
}

/// Flags given on the command line that jobsd accepts for compatibility and does not act on,
/// as `--name=value` in the order they are declared; secret values are masked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoredFlags(pub Vec<(String, String)>);

impl IgnoredFlags {
    /// The [`IGNORED`] and [`NOT_YET`] flags of `cmd` that `matches` got from the command line.
    fn given(cmd: &Command, matches: &ArgMatches) -> Self {
        let flags = cmd
            .get_arguments()
            .filter(|arg| matches!(arg.get_help_heading(), Some(IGNORED | NOT_YET)))
            .filter(|arg| {
                matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine)
            })
            .filter_map(|arg| {
                let name = arg.get_long()?;
                let value = if name.contains("password") {
                    "<hidden>".to_owned()
                } else {
                    matches
                        .get_raw(arg.get_id().as_str())
                        .into_iter()
                        .flatten()
                        .map(|v| v.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                Some((format!("--{name}"), value))
            })
            .collect();
        IgnoredFlags(flags)
    }

    /// True when no such flag was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for IgnoredFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, value)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}={value}")?;
        }
        Ok(())
    }
}

/// daprd flags that do not apply to a jobs sidecar (actors, mTLS, the other APIs, profiling,
/// the Kubernetes control plane): accepted so daprd's command lines run unchanged.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = IGNORED)]
pub struct DaprdIgnored {
    /// Runtime mode: standalone or kubernetes (jobsd runs the same way in both).
    #[arg(long)]
    pub mode: Option<String>,
    /// Port of the profiling server.
    #[arg(long)]
    pub profile_port: Option<String>,
    /// Serve Go's pprof profiles.
    #[arg(long)]
    pub enable_profiling: Option<bool>,
    /// Address of the Dapr control plane.
    #[arg(long)]
    pub control_plane_address: Option<String>,
    /// Address of Dapr's Sentry CA.
    #[arg(long)]
    pub sentry_address: Option<String>,
    /// Trust domain of the Dapr control plane.
    #[arg(long)]
    pub control_plane_trust_domain: Option<String>,
    /// Namespace of the Dapr control plane.
    #[arg(long)]
    pub control_plane_namespace: Option<String>,
    /// JWT audiences asked of Sentry.
    #[arg(long, value_delimiter = ',')]
    pub sentry_request_jwt_audiences: Vec<String>,
    /// Origins allowed by CORS.
    #[arg(long)]
    pub allowed_origins: Option<String>,
    /// Dapr mTLS between sidecars.
    #[arg(long)]
    pub enable_mtls: Option<bool>,
    /// TLS to the app (deprecated in daprd for `--app-protocol https|grpcs`).
    #[arg(long)]
    pub app_ssl: Option<bool>,
    /// HTTP read buffer size, as a quantity.
    #[arg(long, value_parser = super::parse_quantity)]
    pub read_buffer_size: Option<usize>,
    /// HTTP read buffer size in KiB (deprecated in daprd for `--read-buffer-size`).
    #[arg(long)]
    pub dapr_http_read_buffer_size: Option<i64>,
    /// Folder of Unix domain sockets for the Dapr API.
    #[arg(long)]
    pub unix_domain_socket: Option<String>,
    /// How long shutdown waits for the app to report unhealthy (Go duration).
    #[arg(long, value_parser = crate::schedule::duration::parse)]
    pub dapr_block_shutdown_duration: Option<i64>,
    /// Log every API call.
    #[arg(long)]
    pub enable_api_logging: Option<bool>,
    /// Disable the built-in Kubernetes secret store.
    #[arg(long)]
    pub disable_builtin_k8s_secret_store: Option<bool>,
    /// Type and address of the actors service.
    #[arg(long)]
    pub actors_service: Option<String>,
    /// Type and address of the reminders service.
    #[arg(long)]
    pub reminders_service: Option<String>,
}

/// Dapr Scheduler flags that do not apply to a jobsd replica (embedded etcd, mTLS, the
/// Kubernetes control plane, Go worker pools): accepted so the Scheduler's command lines run
/// unchanged.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = IGNORED)]
pub struct SchedulerIgnored {
    /// TLS (Dapr mTLS) on the Scheduler API.
    #[arg(long)]
    pub tls_enabled: Option<bool>,
    /// Trust domain of the Dapr control plane.
    #[arg(long)]
    pub trust_domain: Option<String>,
    /// Trust anchors of the Dapr control plane.
    #[arg(long)]
    pub trust_anchors_file: Option<String>,
    /// Address of Dapr's Sentry CA.
    #[arg(long)]
    pub sentry_address: Option<String>,
    /// Runtime mode: standalone or kubernetes.
    #[arg(long)]
    pub mode: Option<String>,
    /// Kubernetes config file.
    #[arg(long)]
    pub kubeconfig: Option<String>,
    /// Embedded etcd (jobsd embeds no etcd: its single replica runs on its own store).
    #[arg(long)]
    pub etcd_embed: Option<bool>,
    /// Initial peers of the embedded etcd.
    #[arg(long, value_delimiter = ',')]
    pub etcd_initial_cluster: Vec<String>,
    /// Client port of the embedded etcd.
    #[arg(long)]
    pub etcd_client_port: Option<u64>,
    /// Space quota of the embedded etcd, as a quantity.
    #[arg(long, value_parser = super::parse_quantity)]
    pub etcd_space_quota: Option<usize>,
    /// Compaction mode of the embedded etcd.
    #[arg(long)]
    pub etcd_compaction_mode: Option<String>,
    /// Compaction retention of the embedded etcd.
    #[arg(long)]
    pub etcd_compaction_retention: Option<String>,
    /// Transactions between snapshots of the embedded etcd.
    #[arg(long)]
    pub etcd_snapshot_count: Option<u64>,
    /// Snapshot files the embedded etcd keeps.
    #[arg(long)]
    pub etcd_max_snapshots: Option<u64>,
    /// WAL files the embedded etcd keeps.
    #[arg(long)]
    pub etcd_max_wals: Option<u64>,
    /// Operations one transaction of the embedded etcd may hold (Dapr 1.18, default 10000).
    #[arg(long)]
    pub etcd_max_txn_ops: Option<u64>,
    /// Listen address of the embedded etcd's clients (default `localhost`).
    #[arg(long)]
    pub etcd_client_listen_address: Option<String>,
    /// Operations per backend commit of the embedded etcd.
    #[arg(long)]
    pub etcd_backend_batch_limit: Option<i64>,
    /// Time between backend commits of the embedded etcd.
    #[arg(long)]
    pub etcd_backend_batch_interval: Option<String>,
    /// Megabytes to free before the embedded etcd defragments at boot.
    #[arg(long)]
    pub etcd_experimental_bootstrap_defrag_threshold_megabytes: Option<u64>,
    /// Fast-forward the embedded etcd's first election.
    #[arg(long)]
    pub etcd_initial_election_tick_advance: Option<bool>,
    /// Detail of the embedded etcd's metrics.
    #[arg(long)]
    pub etcd_metrics: Option<String>,
    /// etcd user name (jobsd's etcd client does not authenticate).
    #[arg(long)]
    pub etcd_client_username: Option<String>,
    /// etcd password (never logged).
    #[arg(long)]
    pub etcd_client_password: Option<String>,
    /// Where the Scheduler writes its identity certificate.
    #[arg(long)]
    pub identity_directory_write: Option<String>,
    /// Go workers handling job events.
    #[arg(long)]
    pub workers: Option<u64>,
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use clap::error::ErrorKind;

    use super::*;
    use crate::config::{Command as Role, Env, SchedulerArgs, SidecarArgs};

    fn run(args: &[&str]) -> Result<(Cli, IgnoredFlags), clap::Error> {
        parse(std::iter::once("jobsd").chain(args.iter().copied()))
    }

    fn sidecar(args: &[&str]) -> SidecarArgs {
        run(args).unwrap().0.sidecar
    }

    fn scheduler(args: &[&str]) -> (SchedulerArgs, IgnoredFlags) {
        let mut argv = vec!["scheduler"];
        argv.extend_from_slice(args);
        match run(&argv).unwrap() {
            (
                Cli {
                    command: Some(Role::Scheduler(args)),
                    ..
                },
                ignored,
            ) => (args, ignored),
            other => panic!("not the scheduler: {other:?}"),
        }
    }

    fn ignored(args: &[&str]) -> Vec<(String, String)> {
        run(args).unwrap().1.0
    }

    fn flag(name: &str, value: &str) -> (String, String) {
        (name.to_owned(), value.to_owned())
    }

    #[test]
    fn bool_flags_take_pflag_syntax() {
        let on = |args: &[&str]| sidecar(args).enable_app_health_check;
        assert!(!on(&["--app-id", "a"]));
        assert!(on(&["--app-id", "a", "--enable-app-health-check"]));
        assert!(on(&["--app-id", "a", "--enable-app-health-check=true"]));
        assert!(!on(&["--app-id", "a", "--enable-app-health-check=false"]));
        assert!(on(&["--app-id", "a", "--enable-app-health-check=1"]));
        assert!(!on(&["--app-id", "a", "--enable-app-health-check=0"]));
        // Last one wins, as in pflag.
        assert!(!on(&[
            "--enable-app-health-check",
            "--app-id",
            "a",
            "--enable-app-health-check=false"
        ]));

        // A default-true flag can be turned off only with `=false` (the docs' spelling).
        assert!(sidecar(&["--app-id", "a"]).metrics.enable_metrics);
        assert!(
            sidecar(&["--app-id", "a", "--enable-metrics"])
                .metrics
                .enable_metrics
        );
        assert!(
            !sidecar(&["--app-id", "a", "--enable-metrics=false"])
                .metrics
                .enable_metrics
        );
        // pflag does not read `--flag false` as a value, and neither does jobsd.
        assert!(run(&["--app-id", "a", "--enable-metrics", "false"]).is_err());
        assert!(run(&["--app-id", "a", "--enable-metrics=maybe"]).is_err());

        assert!(sidecar(&["--app-id", "a", "--log-as-json"]).log_as_json);
        let (args, _) = scheduler(&["--log-as-json=true", "--enable-metrics=false"]);
        assert!(args.log_as_json && !args.metrics.enable_metrics);
    }

    #[test]
    fn value_flags_take_both_spellings_and_the_last_occurrence() {
        let s = sidecar(&["--app-id=a", "--app-port", "6000", "--app-port=6001"]);
        assert_eq!((s.app_id.as_deref(), s.app_port), (Some("a"), Some(6001)));
        // The next argument is the value whatever it looks like, as `dapr run` relies on.
        let s = sidecar(&["--app-id", "a", "--app-max-concurrency", "-1"]);
        assert_eq!(s.app_max_concurrency, -1);
        let s = sidecar(&["--app-id", "a", "--profile-port", "-1"]);
        assert_eq!(s.ignored.profile_port.as_deref(), Some("-1"));
        // List flags: repeated and comma-separated.
        let s = sidecar(&[
            "--app-id",
            "a",
            "--resources-path",
            "./one",
            "--resources-path=./two,./three",
            "--config",
            "a.yaml,b.yaml",
        ]);
        assert_eq!(
            s.resources_path,
            [PathBuf::from("./one"), "./two".into(), "./three".into()]
        );
        assert_eq!(s.config, [PathBuf::from("a.yaml"), "b.yaml".into()]);
    }

    #[test]
    fn single_dash_flags_are_daprd_s_go_syntax() {
        let s = sidecar(&[
            "-app-id",
            "myapp",
            "-app-port=6000",
            "-enable-metrics=false",
            "-log-as-json",
            "--app-max-concurrency",
            "-10",
        ]);
        assert_eq!(s.app_id.as_deref(), Some("myapp"));
        assert_eq!(s.app_port, Some(6000));
        assert!(!s.metrics.enable_metrics && s.log_as_json);
        assert_eq!(s.app_max_concurrency, -10, "negative numbers stay values");
        // Short flags and the version flag keep working.
        assert_eq!(run(&["-V"]).unwrap_err().kind(), ErrorKind::DisplayVersion);
        assert_eq!(
            run(&["-version"]).unwrap_err().kind(),
            ErrorKind::DisplayVersion
        );
        assert_eq!(
            run(&["--build-info"]).unwrap_err().kind(),
            ErrorKind::DisplayVersion
        );
        // The Dapr Scheduler reads `-port` as shorthands, which it does not have: refused.
        assert!(run(&["scheduler", "-port", "1"]).is_err());
    }

    #[test]
    fn unknown_flags_are_refused_by_name() {
        for (args, name) in [
            (&["--app-id", "a", "--bogus", "1"][..], "--bogus"),
            (&["-bogus"], "--bogus"),
            // daprd has no `--kubeconfig` (the Scheduler has).
            (&["--app-id", "a", "--kubeconfig", "k"], "--kubeconfig"),
            (&["scheduler", "--app-id", "a"], "--app-id"),
        ] {
            let err = run(args).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::UnknownArgument, "{args:?}");
            assert!(err.to_string().contains(name), "{args:?}: {err}");
        }
    }

    #[test]
    fn ignored_flags_are_type_checked_as_daprd_does() {
        let ok = |args: &[&str]| run(args).is_ok();
        assert!(ok(&[
            "--app-id",
            "a",
            "--dapr-block-shutdown-duration",
            "1m30s"
        ]));
        assert!(!ok(&[
            "--app-id",
            "a",
            "--dapr-block-shutdown-duration",
            "soon"
        ]));
        assert!(ok(&["--app-id", "a", "--read-buffer-size", "16Ki"]));
        assert!(!ok(&["--app-id", "a", "--read-buffer-size", "16Xi"]));
        assert!(ok(&["--app-id", "a", "--dapr-http-read-buffer-size", "-1"]));
        assert!(!ok(&[
            "--app-id",
            "a",
            "--dapr-http-read-buffer-size",
            "big"
        ]));
        assert!(!ok(&["--app-id", "a", "--enable-mtls=sure"]));
        assert!(ok(&[
            "scheduler",
            "--etcd-space-quota",
            "9.2E",
            "--workers",
            "2048"
        ]));
        assert!(!ok(&["scheduler", "--workers", "-1"]));
        assert!(!ok(&["--app-id", "a", "--metrics-port", "http"]));
        assert!(!ok(&[
            "--app-id",
            "a",
            "--dapr-graceful-shutdown-seconds",
            "5s"
        ]));
    }

    #[test]
    fn metrics_and_later_flags_have_daprd_s_types_and_defaults() {
        let s = sidecar(&["--app-id", "a"]);
        assert!(s.metrics.enable_metrics);
        assert_eq!(s.metrics.metrics_port, 9090);
        assert_eq!(s.metrics.metrics_listen_address, "0.0.0.0");
        assert_eq!(s.graceful_shutdown(), Duration::from_secs(5));
        assert!(s.config.is_empty());

        let s = sidecar(&[
            "--app-id",
            "a",
            "--metrics-port",
            "9091",
            "--metrics-listen-address",
            "127.0.0.1",
            "--dapr-graceful-shutdown-seconds",
            "30",
            "--config",
            "./config.yaml",
        ]);
        assert_eq!(s.metrics.metrics_port, 9091);
        assert_eq!(s.metrics.metrics_listen_address, "127.0.0.1");
        assert_eq!(s.graceful_shutdown(), Duration::from_secs(30));
        assert_eq!(s.config, [PathBuf::from("./config.yaml")]);
        let s = sidecar(&["--app-id", "a", "--dapr-graceful-shutdown-seconds", "-1"]);
        assert_eq!(s.graceful_shutdown(), Duration::from_secs(5));

        let (args, _) = scheduler(&["--metrics-port", "9092"]);
        assert_eq!(args.metrics.metrics_port, 9092);
    }

    #[test]
    fn max_body_size_falls_back_to_daprd_s_older_flag() {
        let limit = |args: &[&str]| {
            let mut argv = vec!["--app-id", "a"];
            argv.extend_from_slice(args);
            sidecar(&argv)
                .validate(Env::default())
                .unwrap()
                .max_body_size
        };
        assert_eq!(limit(&[]), 4 << 20);
        assert_eq!(limit(&["--dapr-http-max-request-size", "16"]), 16 << 20);
        assert_eq!(limit(&["--dapr-http-max-request-size", "0"]), 0);
        // `dapr run` passes -1 for "not set".
        assert_eq!(limit(&["--dapr-http-max-request-size", "-1"]), 4 << 20);
        assert_eq!(
            limit(&[
                "--dapr-http-max-request-size",
                "16",
                "--max-body-size",
                "1Mi"
            ]),
            1 << 20
        );
    }

    #[test]
    fn components_path_is_the_resources_path_when_that_is_absent() {
        let paths = |args: &[&str]| {
            let mut argv = vec!["--app-id", "a"];
            argv.extend_from_slice(args);
            sidecar(&argv)
                .validate(Env::default())
                .unwrap()
                .resources_paths
        };
        assert_eq!(paths(&["--components-path", "./c"]), [PathBuf::from("./c")]);
        assert_eq!(
            paths(&["--components-path", "./c", "--resources-path", "./r"]),
            [PathBuf::from("./r")]
        );
        assert!(paths(&[]).is_empty());
    }

    fn jobs(args: &[&str]) -> crate::cli::JobsArgs {
        let mut argv = vec!["jobs"];
        argv.extend_from_slice(args);
        match run(&argv).unwrap() {
            (
                Cli {
                    command: Some(Role::Jobs(args)),
                    ..
                },
                ignored,
            ) => {
                assert!(ignored.is_empty());
                args
            }
            other => panic!("not the jobs command line: {other:?}"),
        }
    }

    #[test]
    fn the_jobs_command_line_parses_beside_daprd_s() {
        use crate::cli::{JobsCommand, Output};
        let args = jobs(&["list", "--prefix", "rep", "-l", "team=a", "-o", "json"]);
        assert_eq!(args.output, Output::Json);
        assert_eq!(args.address, "http://127.0.0.1:3500");
        assert!(matches!(args.command, JobsCommand::List(_)));
        // Options before or after the subcommand; `--app-id` belongs to `jobs` here.
        let args = jobs(&[
            "--address",
            "h:1",
            "--scheduler=s:50006",
            "--app-id",
            "x",
            "delete",
            "--prefix",
            "-tmp",
            "--yes",
        ]);
        assert_eq!(
            (args.address.as_str(), args.app_id.as_deref()),
            ("h:1", Some("x"))
        );
        let JobsCommand::Delete(delete) = args.command else {
            panic!("not a delete")
        };
        assert!(delete.yes);
        assert_eq!(delete.selector.prefix.as_deref(), Some("-tmp"));
        // Single-dash words stay what they are after `jobs` (daprd's Go syntax is the
        // sidecar's only), so unknown ones are refused rather than read as long flags.
        assert!(run(&["jobs", "list", "-prefix", "a"]).is_err());
        assert!(run(&["jobs", "frobnicate"]).is_err());
        // The sidecar's command lines are untouched: daprd's flags, single dash too.
        assert_eq!(sidecar(&["--app-id", "x"]).app_id.as_deref(), Some("x"));
        assert_eq!(
            sidecar(&["-app-id", "jobs"]).app_id.as_deref(),
            Some("jobs")
        );
    }

    #[test]
    fn wait_mode_is_refused() {
        let err = sidecar(&["--app-id", "a", "--wait"])
            .validate(Env::default())
            .unwrap_err();
        assert!(matches!(err, crate::config::Error::WaitMode));
    }

    #[test]
    fn given_ignored_flags_are_listed_once_in_order_with_their_values() {
        assert!(ignored(&["--app-id", "a", "--app-port", "1"]).is_empty());
        let flags = ignored(&[
            "--actors-service",
            "placement:localhost:50005",
            "--app-id",
            "a",
            "--enable-metrics=false",
            "--metrics-port",
            "9090",
            "--mode",
            "kubernetes",
            "--enable-mtls",
            "--sentry-request-jwt-audiences",
            "a,b",
            "--config",
            "c.yaml",
        ]);
        assert_eq!(
            flags,
            [
                flag("--config", "c.yaml"),
                flag("--mode", "kubernetes"),
                flag("--sentry-request-jwt-audiences", "a,b"),
                flag("--enable-mtls", "true"),
                flag("--actors-service", "placement:localhost:50005"),
            ]
        );
        assert_eq!(
            IgnoredFlags(flags[1..3].to_vec()).to_string(),
            "--mode=kubernetes --sentry-request-jwt-audiences=a,b"
        );

        let (_, flags) = scheduler(&[
            "--etcd-client-username",
            "u",
            "--etcd-client-password",
            "secret",
            "--etcd-embed=false",
            "--port",
            "0",
        ]);
        assert_eq!(
            flags.0,
            [
                flag("--etcd-embed", "false"),
                flag("--etcd-client-username", "u"),
                flag("--etcd-client-password", "<hidden>"),
            ]
        );
        assert!(!flags.to_string().contains("secret"));
    }

    #[test]
    fn the_dapr_scheduler_s_external_etcd_is_jobsd_s_cluster() {
        let (args, _) = scheduler(&[
            "--etcd-embed=false",
            "--etcd-client-endpoints",
            "http://127.0.0.1:2379",
        ]);
        let cluster = args.validate().unwrap().cluster.unwrap();
        assert_eq!(cluster.endpoints, ["http://127.0.0.1:2379"]);
    }

    #[test]
    fn the_store_cache_size_is_a_quantity_of_the_sidecar_and_the_replica() {
        let default = sidecar(&["--app-id", "a"])
            .validate(Env::default())
            .unwrap();
        assert_eq!(default.store.cache_size, 64 << 20);
        let set = sidecar(&["--app-id", "a", "--store-cache-size", "512Mi"])
            .validate(Env::default())
            .unwrap();
        assert_eq!(set.store.cache_size, 512 << 20);
        let (args, _) = scheduler(&["--store-cache-size", "1Gi"]);
        assert_eq!(args.validate().unwrap().store.cache_size, 1 << 30);
        assert!(run(&["--app-id", "a", "--store-cache-size", "lots"]).is_err());
    }

    /// Every flag of daprd 1.18 (the table in this module) with a value of its type: the
    /// whole command line parses, and the flags jobsd does not act on are all named.
    #[test]
    fn every_daprd_flag_is_accepted() {
        let acted_on: &[&str] = &[
            "--app-channel-address=127.0.0.1",
            "--app-health-check-path=/healthz",
            "--app-health-probe-interval=5",
            "--app-health-probe-timeout=500",
            "--app-health-threshold=3",
            "--app-id=myapp",
            "--app-max-concurrency=-1",
            "--app-port=6000",
            "--app-protocol=http",
            "--components-path=./components",
            "--dapr-grpc-port=50001",
            "--dapr-http-max-request-size=4",
            "--dapr-http-port=3500",
            "--dapr-listen-addresses=127.0.0.1",
            "--dapr-public-port=0",
            "--dapr-public-listen-address=127.0.0.1",
            "--enable-app-health-check=false",
            "--enable-metrics=true",
            "--log-as-json=false",
            "--log-level=info",
            "--max-body-size=4Mi",
            "--metrics-listen-address=0.0.0.0",
            "--metrics-port=9090",
            "--resources-path=./resources",
            "--scheduler-host-address=localhost:50006",
            "--scheduler-job-streams=3",
            "--placement-host-address=localhost:50005",
            "--dapr-internal-grpc-port=50002",
            "--dapr-internal-grpc-listen-address=0.0.0.0",
        ];
        let not_acted_on: &[&str] = &[
            "--config=./config.yaml",
            "--dapr-graceful-shutdown-seconds=5",
            "--mode=standalone",
            "--profile-port=7777",
            "--enable-profiling=false",
            "--control-plane-address=dapr-api.dapr-system.svc:443",
            "--sentry-address=dapr-sentry.dapr-system.svc:443",
            "--control-plane-trust-domain=cluster.local",
            "--control-plane-namespace=dapr-system",
            "--sentry-request-jwt-audiences=aud",
            "--allowed-origins=*",
            "--enable-mtls=false",
            "--app-ssl=false",
            "--read-buffer-size=4Ki",
            "--dapr-http-read-buffer-size=4",
            "--unix-domain-socket=/tmp",
            "--dapr-block-shutdown-duration=5s",
            "--enable-api-logging=false",
            "--disable-builtin-k8s-secret-store=false",
            "--actors-service=placement:localhost:50005",
            "--reminders-service=scheduler:localhost:50006",
        ];
        let argv: Vec<&str> = acted_on.iter().chain(not_acted_on).copied().collect();
        let (cli, flags) = run(&argv).unwrap();
        cli.sidecar.validate(Env::default()).unwrap();
        let mut named: Vec<String> = flags.0.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let mut expected: Vec<String> = not_acted_on.iter().map(|s| s.to_string()).collect();
        named.sort();
        expected.sort();
        assert_eq!(named, expected);
    }

    /// The same for the Dapr Scheduler's flags.
    #[test]
    fn every_dapr_scheduler_flag_is_accepted() {
        let acted_on: &[&str] = &[
            "--port=0",
            "--listen-address=127.0.0.1",
            "--override-broadcast-host-port=localhost:50006",
            "--id=dapr-scheduler-server-0",
            "--etcd-data-dir=./data",
            "--log-level=info",
            "--log-as-json=false",
            "--enable-metrics=true",
            "--metrics-port=9090",
            "--metrics-listen-address=0.0.0.0",
            "--healthz-port=0",
            "--healthz-listen-address=127.0.0.1",
        ];
        let not_acted_on: &[&str] = &[
            "--tls-enabled=false",
            "--trust-domain=localhost",
            "--trust-anchors-file=/var/run/secrets/dapr.io/tls/ca.crt",
            "--sentry-address=dapr-sentry.default.svc:443",
            "--mode=standalone",
            "--kubeconfig=/root/.kube/config",
            "--etcd-embed=true",
            "--etcd-initial-cluster=dapr-scheduler-server-0=http://localhost:2380",
            "--etcd-client-port=2379",
            "--etcd-space-quota=9.2E",
            "--etcd-compaction-mode=periodic",
            "--etcd-compaction-retention=10m",
            "--etcd-snapshot-count=10000",
            "--etcd-max-snapshots=10",
            "--etcd-max-wals=10",
            "--etcd-max-txn-ops=10000",
            "--etcd-client-listen-address=localhost",
            "--etcd-backend-batch-limit=5000",
            "--etcd-backend-batch-interval=50ms",
            "--etcd-experimental-bootstrap-defrag-threshold-megabytes=100",
            "--etcd-initial-election-tick-advance=false",
            "--etcd-metrics=basic",
            "--etcd-client-username=",
            "--identity-directory-write=/tmp/secrets/dapr.io/tls",
            "--workers=2048",
        ];
        let argv: Vec<&str> = acted_on.iter().chain(not_acted_on).copied().collect();
        let (args, flags) = scheduler(&argv);
        args.validate().unwrap();
        let mut named: Vec<String> = flags.0.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let mut expected: Vec<String> = not_acted_on.iter().map(|s| s.to_string()).collect();
        named.sort();
        expected.sort();
        assert_eq!(named, expected);
    }
}
