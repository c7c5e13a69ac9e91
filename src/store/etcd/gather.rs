//! Reads of one job gathered: `get_loaded` calls made at the same time (a bulk pause brings
//! hundreds) share one read txn, where each would be an rpc of its own. A read waits for no
//! one: the task takes what is queued when it is free, so a lone read goes out at once and
//! the ones that queue while a txn is out go together in the next.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{Inner, partition};
use crate::store::{Error, LoadedJob};

/// Most jobs one gathered read takes (`read_loaded` cuts them into txns etcd allows).
const MAX_GATHERED: usize = 1024;

/// One job's read, waiting for its answer.
pub(super) struct Ask {
    pub key: String,
    pub reply: oneshot::Sender<Result<Option<LoadedJob>, Error>>,
}

/// Answers what `asks` brings until every sender is gone.
pub(super) async fn run(inner: Arc<Inner>, mut asks: mpsc::UnboundedReceiver<Ask>) {
    while let Some(first) = asks.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_GATHERED {
            match asks.try_recv() {
                Ok(ask) => batch.push(ask),
                Err(_) => break,
            }
        }
        let mut keys: Vec<String> = batch.iter().map(|a| a.key.clone()).collect();
        keys.sort_unstable();
        keys.dedup();
        // Revision 0: the latest.
        match partition::read_loaded(&inner, keys, 0).await {
            Ok((jobs, _missing)) => {
                let found: HashMap<String, LoadedJob> =
                    jobs.into_iter().map(|j| (j.key.clone(), j)).collect();
                for ask in batch {
                    let _ = ask.reply.send(Ok(found.get(&ask.key).cloned()));
                }
            }
            Err(e) => {
                for ask in batch {
                    let _ = ask.reply.send(Err(e.clone()));
                }
            }
        }
    }
}
