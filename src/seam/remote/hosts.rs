//! Which Scheduler replicas exist: daprd's WatchHosts loop (`dapr-jobs-api.md` §4.1). One
//! configured address (a random one, usually a headless-service DNS name) tells us the
//! replicas' own addresses; each list it sends becomes the working set, with one gRPC channel
//! per replica.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint};

use super::{JITTER, client};
use crate::proto::dapr_scheduler as sv1;
use crate::resiliency::backoff::jittered;
use crate::tls::ClientTls;

/// Wait after WatchHosts could not be opened (`1s ± 0.5s`, see [`JITTER`]).
const CONNECT_RETRY: Duration = Duration::from_secs(1);
/// Wait after an open WatchHosts stream ended or failed.
const STREAM_RETRY: Duration = Duration::from_secs(1);

/// One Scheduler replica and the channel every call and stream to it shares.
#[derive(Debug, Clone)]
pub(super) struct Host {
    /// `host:port` as the replica announced it.
    pub address: Arc<str>,
    /// Connects lazily and reconnects on its own.
    pub channel: Channel,
}

/// The working set of replicas, sorted by address.
#[derive(Debug, Clone, Default)]
pub(super) struct HostSet {
    /// The replicas; empty until WatchHosts (or the fallback) has named some.
    pub hosts: Vec<Host>,
}

impl HostSet {
    /// The replicas' addresses, in order.
    pub fn addresses(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.address.to_string()).collect()
    }
}

/// What changed between two sets of addresses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Diff {
    /// In the new set only.
    pub added: Vec<String>,
    /// In the old set only.
    pub removed: Vec<String>,
}

impl Diff {
    /// Whether the sets are the same.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// The sorted, deduplicated, non-blank form of an address list: two lists naming the same
/// replicas in another order are the same working set (daprd compares sorted sets too).
pub(super) fn normalize<S: AsRef<str>>(addresses: &[S]) -> Vec<String> {
    let mut out: Vec<String> = addresses
        .iter()
        .map(|a| a.as_ref().trim().to_owned())
        .filter(|a| !a.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What to add and remove to go from `old` to `new` (both normalized).
pub(super) fn diff<S: AsRef<str>, T: AsRef<str>>(old: &[S], new: &[T]) -> Diff {
    Diff {
        added: new
            .iter()
            .filter(|n| !old.iter().any(|o| o.as_ref() == n.as_ref()))
            .map(|n| n.as_ref().to_owned())
            .collect(),
        removed: old
            .iter()
            .filter(|o| !new.iter().any(|n| n.as_ref() == o.as_ref()))
            .map(|o| o.as_ref().to_owned())
            .collect(),
    }
}

/// HTTP/2 pings to a replica: no more often than a grpc-go server allows on a connection
/// without data (its default `MinTime`, 5 min; the Dapr Scheduler sets none). daprd dials with
/// 3 s, but grpc-go stays quiet while the server's own 3 s pings arrive; hyper pings on its
/// own clock, so at 3 s an idle WatchJobs stream met `GOAWAY too_many_pings` after three pings
/// (12 s) and reconnected.
const H2_PING_INTERVAL: Duration = Duration::from_secs(5 * 60 + 5);

/// A replica that vanished without closing its connections is found by TCP keepalive probes
/// (the kernel's, which no gRPC server counts): after 3 s idle, every 3 s, 3 unanswered.
const TCP_PROBE: Duration = Duration::from_secs(3);

/// The gRPC endpoint of a replica, with daprd's 5 s connect timeout, HTTP/2 pings at
/// [`H2_PING_INTERVAL`] (5 s to answer, as daprd) and TCP keepalive probes at [`TCP_PROBE`].
/// Plaintext unless `tls` is given (daprd without mTLS; jobsd has no Sentry, its TLS comes
/// from certificate files).
pub(super) fn endpoint(
    address: &str,
    tls: Option<&ClientTls>,
) -> Result<Endpoint, tonic::transport::Error> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))?
        .connect_timeout(Duration::from_secs(5))
        .http2_keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(Duration::from_secs(5))
        .tcp_keepalive(Some(TCP_PROBE))
        .tcp_keepalive_interval(Some(TCP_PROBE))
        .tcp_keepalive_retries(Some(3))
        .tcp_nodelay(true);
    match tls {
        Some(tls) => endpoint.tls_config(tls.tonic()),
        None => Ok(endpoint),
    }
}

/// Publishes working sets: keeps the channels of replicas that stay, dials new ones lazily,
/// and ignores lists that name the same replicas as the current set.
pub(super) struct Publisher {
    /// The working set the calls and the stream holder read.
    pub hosts: watch::Sender<Arc<HostSet>>,
    /// The same set as plain addresses, for readiness and `/v1.0/metadata`.
    pub addresses: watch::Sender<Vec<String>>,
    /// TLS to every replica (`--scheduler-tls-*`).
    pub tls: Option<ClientTls>,
    /// Why WatchHosts could not be opened last time (`address: reason`), until it opens:
    /// what a call that found no replica tells its caller.
    pub unreachable: watch::Sender<Option<String>>,
}

impl Publisher {
    /// Makes `announced` the working set; returns whether it changed. Unusable addresses are
    /// skipped, and a list without any usable one is ignored: an empty working set could
    /// serve nothing, while the previous one may still work.
    pub fn publish<S: AsRef<str>>(&self, announced: &[S]) -> bool {
        let wanted = normalize(announced);
        let current = self.hosts.borrow().clone();
        let old = current.addresses();
        if diff(&old, &wanted).is_empty() {
            return false;
        }
        let mut kept: BTreeMap<&str, &Host> = current
            .hosts
            .iter()
            .map(|h| (h.address.as_ref(), h))
            .collect();
        let mut hosts = Vec::with_capacity(wanted.len());
        for address in &wanted {
            if let Some(host) = kept.remove(address.as_str()) {
                hosts.push(host.clone());
                continue;
            }
            match endpoint(address, self.tls.as_ref()) {
                Ok(e) => hosts.push(Host {
                    address: Arc::from(address.as_str()),
                    channel: e.connect_lazy(),
                }),
                Err(e) => tracing::warn!(%address, error = %e, "ignoring unusable scheduler host"),
            }
        }
        if hosts.is_empty() {
            tracing::warn!(announced = ?wanted, "no usable scheduler host announced; keeping the current ones");
            return false;
        }
        let set = HostSet { hosts };
        let addresses = set.addresses();
        if addresses == old {
            return false;
        }
        tracing::info!(hosts = ?addresses, "scheduler hosts");
        self.hosts.send_replace(Arc::new(set));
        self.addresses.send_replace(addresses);
        true
    }
}

/// daprd's WatchHosts loop, until `stop`: ask a random configured address for the replicas,
/// publish every list it sends, and reconnect when the stream ends. A Scheduler without
/// WatchHosts (`Unimplemented`, before Dapr 1.15) means the configured addresses are the
/// replicas.
pub(super) async fn discover(
    configured: Vec<String>,
    publisher: Publisher,
    stop: CancellationToken,
) {
    if configured.is_empty() {
        return;
    }
    loop {
        let address = &configured[fastrand::usize(..configured.len())];
        let retry = match watch_once(address, &publisher, &stop).await {
            Watched::Stopped => return,
            Watched::Unimplemented => {
                tracing::info!(
                    %address,
                    "scheduler does not implement WatchHosts; using the configured addresses"
                );
                publisher.publish(&configured);
                // The working set stays published (and its senders alive) until `stop`.
                stop.cancelled().await;
                return;
            }
            Watched::ConnectFailed(reason) => {
                let reason = format!("{address}: {reason}");
                let previous = publisher.unreachable.borrow().clone();
                let kept = telling(previous.as_deref(), reason.clone());
                publisher.unreachable.send_replace(Some(kept));
                // Told once when it starts failing, not every second.
                if previous.is_none() {
                    tracing::warn!(error = %reason, "cannot reach the scheduler; retrying");
                } else {
                    tracing::debug!(error = %reason, "cannot reach the scheduler; retrying");
                }
                jittered(CONNECT_RETRY, JITTER, &mut fastrand::Rng::new())
            }
            Watched::StreamEnded => STREAM_RETRY,
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(retry) => {}
        }
    }
}

/// The reason to keep of a failing connection's `previous` and `new` one. A refused TLS
/// handshake shows either as its alert (`received fatal alert: UnknownCA`) or, when the
/// connection's end wins the race, as a bare "connection closed": a vague reason does not
/// replace a telling one.
pub(super) fn telling(previous: Option<&str>, new: String) -> String {
    const VAGUE: [&str; 3] = ["connection closed", "broken pipe", "operation was canceled"];
    match previous {
        Some(previous) if VAGUE.iter().any(|v| new.ends_with(v)) => previous.to_owned(),
        _ => new,
    }
}

/// How one WatchHosts attempt ended.
enum Watched {
    /// `stop` was cancelled.
    Stopped,
    /// The Scheduler has no WatchHosts.
    Unimplemented,
    /// The call could not be made, for this reason.
    ConnectFailed(String),
    /// The stream ended or failed after it was open.
    StreamEnded,
}

async fn watch_once(address: &str, publisher: &Publisher, stop: &CancellationToken) -> Watched {
    let channel = match endpoint(address, publisher.tls.as_ref()) {
        Ok(e) => e.connect_lazy(),
        Err(e) => {
            // Configured addresses are checked up front; this is for the record only.
            tracing::warn!(%address, error = %e, "unusable scheduler address");
            return Watched::ConnectFailed(e.to_string());
        }
    };
    let mut client = client(channel);
    let opened = tokio::select! {
        () = stop.cancelled() => return Watched::Stopped,
        opened = client.watch_hosts(sv1::WatchHostsRequest {}) => opened,
    };
    let mut stream = match opened {
        Ok(response) => {
            if let Some(reason) = publisher.unreachable.send_replace(None) {
                tracing::info!(%address, was = %reason, "scheduler reachable again");
            }
            response.into_inner()
        }
        Err(status) if status.code() == tonic::Code::Unimplemented => {
            return Watched::Unimplemented;
        }
        Err(status) => {
            // The reason (a refused connection, a certificate the CA did not sign) is what
            // an operator needs; the debug log has the whole status.
            tracing::debug!(%address, error = %status, "cannot watch scheduler hosts");
            return Watched::ConnectFailed(crate::tls::innermost(&status));
        }
    };
    let mut first = true;
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => return Watched::Stopped,
            message = stream.message() => message,
        };
        match message {
            Ok(Some(update)) => {
                let announced: Vec<&str> =
                    update.hosts.iter().map(|h| h.address.as_str()).collect();
                publisher.publish(&announced);
            }
            Ok(None) => {
                tracing::debug!(%address, "scheduler host stream ended");
                return Watched::StreamEnded;
            }
            Err(status) if first && status.code() == tonic::Code::Unimplemented => {
                return Watched::Unimplemented;
            }
            Err(status) => {
                tracing::debug!(%address, error = %status, "scheduler host stream failed");
                return Watched::StreamEnded;
            }
        }
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_sorts_trims_and_deduplicates() {
        assert_eq!(normalize(&["b:1", " a:1", "", "b:1", "  "]), ["a:1", "b:1"]);
        assert!(normalize::<&str>(&[]).is_empty());
    }

    #[test]
    fn a_vague_failure_does_not_replace_a_telling_one() {
        let alert = "h:1: received fatal alert: UnknownCA";
        assert_eq!(telling(Some(alert), "h:1: connection closed".into()), alert);
        assert_eq!(
            telling(None, "h:1: connection closed".into()),
            "h:1: connection closed"
        );
        assert_eq!(telling(Some("h:1: connection closed"), alert.into()), alert);
    }

    #[test]
    fn diff_names_what_to_open_and_close() {
        let d = diff(&["a:1", "b:1", "c:1"], &["b:1", "c:1", "d:1"]);
        assert_eq!(d.added, ["d:1"]);
        assert_eq!(d.removed, ["a:1"]);
        assert!(!d.is_empty());
        assert!(diff(&["a:1"], &["a:1"]).is_empty());
        let d = diff::<&str, &str>(&[], &["a:1"]);
        assert_eq!(d.added, ["a:1"]);
        assert!(d.removed.is_empty());
        let d = diff::<&str, &str>(&["a:1"], &[]);
        assert_eq!(d.removed, ["a:1"]);
    }

    fn publisher() -> (
        Publisher,
        watch::Receiver<Arc<HostSet>>,
        watch::Receiver<Vec<String>>,
    ) {
        let (hosts, hosts_rx) = watch::channel(Arc::new(HostSet::default()));
        let (addresses, addresses_rx) = watch::channel(Vec::new());
        (
            Publisher {
                hosts,
                addresses,
                tls: None,
                unreachable: watch::channel(None).0,
            },
            hosts_rx,
            addresses_rx,
        )
    }

    #[tokio::test]
    async fn publishing_keeps_channels_of_replicas_that_stay_and_ignores_repeats() {
        let (p, hosts, addresses) = publisher();
        assert!(p.publish(&["b:2", "a:1"]));
        assert_eq!(*addresses.borrow(), ["a:1", "b:2"]);
        let first = hosts.borrow().clone();

        // The same replicas in another order are not a change.
        assert!(!p.publish(&["a:1", "b:2", "a:1"]));
        assert!(Arc::ptr_eq(&first, &hosts.borrow()));

        assert!(p.publish(&["b:2", "c:3"]));
        assert_eq!(*addresses.borrow(), ["b:2", "c:3"]);
        let b = hosts.borrow().hosts[0].address.clone();
        assert!(
            Arc::ptr_eq(&b, &first.hosts[1].address),
            "b:2 keeps its channel"
        );
    }

    #[tokio::test]
    async fn a_scheduler_without_watch_hosts_means_the_configured_addresses() {
        // A Scheduler older than Dapr 1.15: every rpc (WatchHosts included) is Unimplemented.
        let old = super::super::fake::serve(Arc::default()).await;
        let address = old.address.clone();
        let stop = CancellationToken::new();
        let (p, _hosts, mut addresses) = publisher();
        let configured = vec![address.clone()];
        let discovery = tokio::spawn(discover(configured, p, stop.clone()));
        // Discovery gives up watching and publishes what it was given.
        tokio::time::timeout(
            Duration::from_secs(10),
            addresses.wait_for(|a| !a.is_empty()),
        )
        .await
        .expect("the configured addresses are published")
        .unwrap();
        assert_eq!(*addresses.borrow(), [address]);
        stop.cancel();
        discovery.await.unwrap();
        old.stop().await;
    }

    #[tokio::test]
    async fn an_empty_or_unusable_announcement_keeps_the_working_set() {
        let (p, _hosts, addresses) = publisher();
        assert!(!p.publish::<&str>(&[]));
        assert!(addresses.borrow().is_empty());
        assert!(p.publish(&["a:1"]));
        assert!(!p.publish::<&str>(&[]));
        assert!(!p.publish(&["bad host:1"]));
        assert_eq!(*addresses.borrow(), ["a:1"]);
    }
}
