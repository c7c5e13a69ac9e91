//! The retention sweep: finished jobs kept for jobsd's views are deleted once their
//! retention has passed.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use tokio_util::sync::CancellationToken;

use super::convert::timestamp;
use crate::clock::Clock;
use crate::store::{Op, PageOf, Store};

/// Finished records read per store page.
const PAGE: usize = 1024;

/// Longest pause between sweeps.
const MAX_PERIOD: Duration = Duration::from_secs(60);

/// Sweeps every `min(retention / 10, 1 min)` (by `clock`) until `stop`.
pub fn spawn(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    retention: Duration,
    stop: CancellationToken,
) {
    let period = (retention / 10).clamp(Duration::from_millis(100), MAX_PERIOD);
    let period = TimeDelta::from_std(period).unwrap_or(TimeDelta::MAX);
    let retention = TimeDelta::from_std(retention).unwrap_or(TimeDelta::MAX);
    tokio::spawn(async move {
        loop {
            let next = clock.now() + period;
            tokio::select! {
                () = stop.cancelled() => return,
                () = clock.sleep_until(next) => {}
            }
            let cutoff = clock.now() - retention;
            if let Err(e) = sweep(&*store, cutoff).await {
                tracing::warn!(error = %e, "finished-job retention sweep failed; next time");
            }
        }
    });
}

/// Deletes the finished records that finished at or before `cutoff`; how many.
pub async fn sweep(
    store: &dyn Store,
    cutoff: chrono::DateTime<chrono::Utc>,
) -> Result<u64, crate::store::Error> {
    let before = timestamp(cutoff);
    let mut after: Option<String> = None;
    let mut deleted = 0;
    loop {
        let page = store
            .page(PageOf::Finished, "", after.as_deref(), PAGE)
            .await?;
        let Some(last) = page.last() else {
            return Ok(deleted);
        };
        after = Some(last.key.clone());
        let ops: Vec<Op> = page
            .into_iter()
            .filter(|item| {
                item.finished_at
                    .is_some_and(|at| (at.seconds, at.nanos) <= (before.seconds, before.nanos))
            })
            .map(|item| Op::DeleteFinished {
                key: item.key,
                before,
            })
            .collect();
        if !ops.is_empty() {
            for result in store.write(ops).await? {
                if let crate::store::OpResult::Deleted(n) = result {
                    deleted += n;
                }
            }
        }
    }
}
