//! The retention sweep: finished jobs kept for jobsd's views are deleted once their
//! retention has passed.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
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
    every(clock, period, stop, move |now| {
        let store = Arc::clone(&store);
        async move {
            if let Err(e) = sweep(&*store, now - retention).await {
                tracing::warn!(error = %e, "finished-job retention sweep failed; next time");
            }
        }
    });
}

/// Runs `task` with the clock's time every `period` (by `clock`) until `stop`. The next run
/// is a period after the last one began, not after it ended: time that passed while it ran (a
/// jump of a manual clock included) counts. The first is a period after this call.
pub(super) fn every<F, Fut>(
    clock: Arc<dyn Clock>,
    period: TimeDelta,
    stop: CancellationToken,
    mut task: F,
) where
    F: FnMut(DateTime<Utc>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    // Read now, not when the task first runs.
    let mut next = clock.now() + period;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = clock.sleep_until(next) => {}
            }
            let now = clock.now();
            task(now).await;
            next = now + period;
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
