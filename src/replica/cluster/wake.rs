//! A member's wake-up when partitions are freed: etcd deletes a partition key when its
//! holder's lease runs out (a member died) or the holder gives it back (a rebalance). Waiting
//! for the next round (`lease_ttl / 6`) would add up to half a second to every failover and
//! handback; a watch of the partition keys wakes the member at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::store::etcd::client::{self as etcd, Client, EventType};

/// Wakes `wake` whenever a key under `prefix` is deleted, until `stop`; reopens the watch a
/// second after it fails or ends (the rounds go on meanwhile).
pub(super) async fn on_deletes(
    client: Client,
    prefix: String,
    wake: Arc<Notify>,
    stop: CancellationToken,
) {
    loop {
        let opened = tokio::select! {
            () = stop.cancelled() => return,
            watch = client.watch(etcd::watch_prefix(prefix.clone(), 0)) => watch,
        };
        if let Ok(mut watch) = opened {
            loop {
                let message = tokio::select! {
                    () = stop.cancelled() => return,
                    message = watch.message() => message,
                };
                match message {
                    Ok(Some(resp)) => {
                        if resp.events.iter().any(|e| e.r#type() == EventType::Delete) {
                            wake.notify_one();
                        }
                    }
                    Ok(None) | Err(_) => break,
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
