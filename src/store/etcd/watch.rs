//! The jobs watch: [`Etcd::watch_jobs`](super::Etcd::watch_jobs) follows the jobs prefix and
//! re-creates the watch after any error from the last revision it delivered; an etcd watch
//! stream does not do that by itself.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::client::{self, EventType};
use super::{CALL_TIMEOUT, Inner, backoff};
use crate::store::tables::Table;
use crate::store::{Error, StoredJob};

/// One change under the jobs prefix, from [`Etcd::watch_jobs`](super::Etcd::watch_jobs).
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A job was created or replaced.
    Put {
        /// The composed job key.
        key: String,
        /// The job's stored bytes, not decoded yet: every member sees every change but keeps
        /// only its partitions' (a third with 3 members), so it decodes only those
        /// ([`Change::job`]).
        value: Vec<u8>,
        /// The etcd revision of this version of the job.
        mod_revision: i64,
    },
    /// A job was deleted.
    Delete {
        /// The composed job key.
        key: String,
        /// The etcd revision of the delete.
        mod_revision: i64,
    },
    /// etcd compacted the history the watch needed: changes were lost. The consumer must
    /// re-read every job ([`Store::scan`](crate::store::Store::scan)) and watch again; this is the stream's last item.
    Resync {
        /// The oldest revision etcd still has.
        compact_revision: i64,
    },
}

impl Change {
    /// The job a [`Change::Put`] of `key` carries, decoded from its `value`.
    pub fn job(key: &str, value: &[u8]) -> Result<StoredJob, Error> {
        super::job_value::decode(key, value)
    }
}

/// Follows the jobs prefix from `from_revision` into `tx`, re-creating the watch after errors.
pub(super) async fn watch_loop(inner: Arc<Inner>, from_revision: i64, tx: mpsc::Sender<Change>) {
    let mut next = from_revision;
    let mut backoff = backoff();
    loop {
        let create = client::watch_prefix(inner.jobs_prefix.clone(), next);
        let created = tokio::select! {
            () = inner.stop.cancelled() => return,
            () = tx.closed() => return,
            created = tokio::time::timeout(CALL_TIMEOUT, inner.watch_client.watch(create)) => created,
        };
        match created {
            Ok(Ok(mut stream)) => loop {
                let message = tokio::select! {
                    () = inner.stop.cancelled() => return,
                    () = tx.closed() => return,
                    message = stream.message() => message,
                };
                let resp = match message {
                    Ok(Some(resp)) => resp,
                    Ok(None) => {
                        tracing::warn!("etcd watch ended; re-creating it");
                        break;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "etcd watch failed; re-creating it");
                        break;
                    }
                };
                if resp.compact_revision > 0 {
                    let _ = tx
                        .send(Change::Resync {
                            compact_revision: resp.compact_revision,
                        })
                        .await;
                    return;
                }
                if resp.canceled {
                    tracing::warn!(
                        reason = resp.cancel_reason,
                        "etcd watch cancelled; re-creating it"
                    );
                    break;
                }
                if resp.created {
                    backoff = super::backoff();
                    if next == 0 {
                        // "From now": pin it, so a re-created watch misses nothing.
                        next = resp.header.as_ref().map_or(0, |h| h.revision + 1);
                    }
                    continue;
                }
                if resp.events.is_empty() {
                    // Progress notification: everything up to the header's revision was sent.
                    if let Some(h) = &resp.header {
                        next = next.max(h.revision + 1);
                    }
                    continue;
                }
                for event in resp.events {
                    let kind = event.r#type();
                    let Some(kv) = event.kv else { continue };
                    let rev = kv.mod_revision;
                    next = next.max(rev + 1);
                    let Ok(key) = inner.strip(Table::Jobs, &kv.key) else {
                        continue;
                    };
                    let change = match kind {
                        EventType::Put => Change::Put {
                            key,
                            value: kv.value,
                            mod_revision: rev,
                        },
                        EventType::Delete => Change::Delete {
                            key,
                            mod_revision: rev,
                        },
                    };
                    if tx.send(change).await.is_err() {
                        return;
                    }
                }
            },
            Ok(Err(err)) => tracing::warn!(error = %err, "etcd watch could not start; retrying"),
            Err(_) => tracing::warn!("etcd watch start timed out; retrying"),
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = inner.stop.cancelled() => return,
            () = tx.closed() => return,
        }
    }
}
