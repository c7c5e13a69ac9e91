//! jobsd's TLS flags (Dapr has Sentry-issued certificates instead, `--enable-mtls`): the
//! sidecar's (and `jobsd jobs --scheduler`'s) to its Scheduler replicas, the replica's for its
//! Scheduler port, and the replica's to etcd (named as etcdctl and kube-apiserver name
//! theirs). They live beside the TLS they load, below both `config` and `cli`, which flatten
//! them into their commands.

use std::path::PathBuf;

use clap::Args;

use super::{ClientTls, Error, PemFile, ServerTls};

/// TLS from a sidecar (or `jobsd jobs --scheduler`) to the Scheduler replicas.
#[derive(Debug, Clone, Default, Args)]
pub struct SchedulerTlsArgs {
    /// Connect to the Scheduler replicas over TLS, trusting the CA certificates in this PEM
    /// file (jobsd's own; Dapr uses Sentry mTLS).
    #[arg(long, value_name = "FILE")]
    pub scheduler_tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) presented to replicas that require one (mTLS); needs
    /// `--scheduler-tls-key` and `--scheduler-tls-ca`.
    #[arg(long, value_name = "FILE")]
    pub scheduler_tls_cert: Option<PathBuf>,
    /// Private key (PEM) of `--scheduler-tls-cert`.
    #[arg(long, value_name = "FILE")]
    pub scheduler_tls_key: Option<PathBuf>,
    /// The name the replicas' certificates must carry, when it is not the host dialled
    /// (replicas announce themselves by IP address).
    #[arg(long, value_name = "NAME")]
    pub scheduler_tls_server_name: Option<String>,
}

/// TLS on a replica's Scheduler port.
#[derive(Debug, Clone, Default, Args)]
pub struct ServerTlsArgs {
    /// Serve the Scheduler port over TLS with this certificate (PEM, chain first); needs
    /// `--tls-key-file`.
    #[arg(long, value_name = "FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of `--tls-cert-file`.
    #[arg(long, value_name = "FILE")]
    pub tls_key_file: Option<PathBuf>,
    /// Require a client certificate signed by a CA in this PEM file (mTLS); needs
    /// `--tls-cert-file`.
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca_file: Option<PathBuf>,
}

/// TLS from a replica to etcd (`--etcd-endpoints`).
#[derive(Debug, Clone, Default, Args)]
pub struct EtcdTlsArgs {
    /// Connect to etcd over TLS, trusting the CA certificates in this PEM file (etcdctl's
    /// `--cacert`); endpoints without a scheme become `https://`.
    #[arg(long, value_name = "FILE")]
    pub etcd_ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for an etcd with `--client-cert-auth` (etcdctl's `--cert`);
    /// needs `--etcd-key-file` and `--etcd-ca-file`.
    #[arg(long, value_name = "FILE")]
    pub etcd_cert_file: Option<PathBuf>,
    /// Private key (PEM) of `--etcd-cert-file` (etcdctl's `--key`).
    #[arg(long, value_name = "FILE")]
    pub etcd_key_file: Option<PathBuf>,
}

/// A client's CA, certificate and key flags, read into a [`ClientTls`]; `None` when none is
/// given. A certificate needs its key and a CA; `applies_to` (the flag of the addresses the
/// TLS is for) must be given, `has_target` says whether it was.
fn client(
    (ca_flag, ca): (&'static str, Option<&PathBuf>),
    (cert_flag, cert): (&'static str, Option<&PathBuf>),
    (key_flag, key): (&'static str, Option<&PathBuf>),
    server_name: Option<String>,
    (applies_to, has_target): (&'static str, bool),
) -> Result<Option<ClientTls>, Error> {
    let any = ca.is_some() || cert.is_some() || key.is_some() || server_name.is_some();
    if !any {
        return Ok(None);
    }
    let first = [(ca_flag, ca), (cert_flag, cert), (key_flag, key)]
        .iter()
        .find(|(_, p)| p.is_some())
        .map_or("--scheduler-tls-server-name", |(f, _)| *f);
    if !has_target {
        return Err(Error::Without(first, applies_to));
    }
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => {
            Some((PemFile::new(cert_flag, cert), PemFile::new(key_flag, key)))
        }
        (Some(_), None) => return Err(Error::Needs(cert_flag, key_flag)),
        (None, Some(_)) => return Err(Error::Needs(key_flag, cert_flag)),
        (None, None) => None,
    };
    let Some(ca) = ca else {
        return Err(Error::Needs(first, ca_flag));
    };
    Ok(Some(ClientTls::load(
        PemFile::new(ca_flag, ca),
        identity,
        server_name,
    )?))
}

impl SchedulerTlsArgs {
    /// The TLS to the replicas, if any; `has_hosts` says whether there are replicas to use it
    /// for (`--scheduler-host-address` or `--scheduler`, named by `applies_to`).
    pub fn validate(
        &self,
        applies_to: &'static str,
        has_hosts: bool,
    ) -> Result<Option<ClientTls>, Error> {
        let server_name = self
            .scheduler_tls_server_name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        client(
            ("--scheduler-tls-ca", Option::as_ref(&self.scheduler_tls_ca)),
            (
                "--scheduler-tls-cert",
                Option::as_ref(&self.scheduler_tls_cert),
            ),
            (
                "--scheduler-tls-key",
                Option::as_ref(&self.scheduler_tls_key),
            ),
            server_name,
            (applies_to, has_hosts),
        )
    }
}

impl EtcdTlsArgs {
    /// The TLS to etcd, if any; `has_endpoints` says whether `--etcd-endpoints` is given.
    pub fn validate(&self, has_endpoints: bool) -> Result<Option<ClientTls>, Error> {
        client(
            ("--etcd-ca-file", Option::as_ref(&self.etcd_ca_file)),
            ("--etcd-cert-file", Option::as_ref(&self.etcd_cert_file)),
            ("--etcd-key-file", Option::as_ref(&self.etcd_key_file)),
            None,
            ("--etcd-endpoints", has_endpoints),
        )
    }
}

impl ServerTlsArgs {
    /// The TLS of the Scheduler port, if any.
    pub fn validate(&self) -> Result<Option<ServerTls>, Error> {
        let (cert, key, client_ca) = (
            Option::as_ref(&self.tls_cert_file),
            Option::as_ref(&self.tls_key_file),
            Option::as_ref(&self.tls_client_ca_file),
        );
        let (cert, key) = match (cert, key) {
            (None, None) if client_ca.is_some() => {
                return Err(Error::Needs("--tls-client-ca-file", "--tls-cert-file"));
            }
            (None, None) => return Ok(None),
            (Some(_), None) => return Err(Error::Needs("--tls-cert-file", "--tls-key-file")),
            (None, Some(_)) => return Err(Error::Needs("--tls-key-file", "--tls-cert-file")),
            (Some(cert), Some(key)) => (cert, key),
        };
        Ok(Some(ServerTls::load(
            PemFile::new("--tls-cert-file", cert),
            PemFile::new("--tls-key-file", key),
            client_ca.map(|ca| PemFile::new("--tls-client-ca-file", ca)),
        )?))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Command, Env, parse};

    /// The error of a sidecar started with `args` (after `--app-id a`).
    fn sidecar_error(args: &[&str]) -> String {
        let mut argv = vec!["jobsd", "--app-id", "a"];
        argv.extend_from_slice(args);
        let cli = parse(argv).unwrap().0;
        cli.sidecar
            .validate(Env::default())
            .unwrap_err()
            .to_string()
    }

    /// The error of a replica started with `args`.
    fn replica_error(args: &[&str]) -> String {
        let mut argv = vec!["jobsd", "scheduler"];
        argv.extend_from_slice(args);
        match parse(argv).unwrap().0.command {
            Some(Command::Scheduler(s)) => s.validate().unwrap_err().to_string(),
            other => panic!("not the scheduler: {other:?}"),
        }
    }

    #[test]
    fn flags_without_the_connection_they_secure_are_refused() {
        assert_eq!(
            sidecar_error(&["--scheduler-tls-ca", "ca.pem"]),
            "--scheduler-tls-ca needs --scheduler-host-address: there is no connection for it to secure"
        );
        assert_eq!(
            replica_error(&["--etcd-cert-file", "c.pem", "--etcd-key-file", "k.pem"]),
            "--etcd-cert-file needs --etcd-endpoints: there is no connection for it to secure"
        );
        assert_eq!(
            replica_error(&["--tls-client-ca-file", "ca.pem"]),
            "--tls-client-ca-file needs --tls-cert-file"
        );
    }

    #[test]
    fn a_certificate_needs_its_key_and_a_ca() {
        let hosts = ["--scheduler-host-address", "h:50006"];
        let with = |extra: &[&'static str]| {
            let mut args = hosts.to_vec();
            args.extend_from_slice(extra);
            sidecar_error(&args)
        };
        assert_eq!(
            with(&[
                "--scheduler-tls-ca",
                "ca.pem",
                "--scheduler-tls-cert",
                "c.pem"
            ]),
            "--scheduler-tls-cert needs --scheduler-tls-key"
        );
        assert_eq!(
            with(&[
                "--scheduler-tls-cert",
                "c.pem",
                "--scheduler-tls-key",
                "k.pem"
            ]),
            "--scheduler-tls-cert needs --scheduler-tls-ca"
        );
        assert_eq!(
            replica_error(&["--tls-key-file", "k.pem"]),
            "--tls-key-file needs --tls-cert-file"
        );
        let etcd = ["--etcd-endpoints", "127.0.0.1:2379", "--etcd-key-file", "k"];
        assert_eq!(
            replica_error(&etcd),
            "--etcd-key-file needs --etcd-cert-file"
        );
    }

    #[test]
    fn missing_and_unusable_files_are_named_with_their_flag() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let missing = missing.to_str().unwrap();
        let err = sidecar_error(&[
            "--scheduler-host-address",
            "h:50006",
            "--scheduler-tls-ca",
            missing,
        ]);
        assert!(
            err.starts_with(&format!(
                "--scheduler-tls-ca {missing}: cannot read the file"
            )),
            "{err}"
        );
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let junk = junk.to_str().unwrap();
        let err = replica_error(&["--tls-cert-file", junk, "--tls-key-file", junk]);
        assert!(
            err.starts_with(&format!("--tls-cert-file {junk}: no PEM certificate")),
            "{err}"
        );
        let err = replica_error(&["--etcd-endpoints", "127.0.0.1:2379", "--etcd-ca-file", junk]);
        assert!(
            err.starts_with(&format!("--etcd-ca-file {junk}: ")),
            "{err}"
        );
    }
}
