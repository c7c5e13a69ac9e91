//! Changes whose caller gives up (drops the request's future) after the store has the write
//! but before the answer: the trigger loop must still learn of them (see `engine::detached`).

use std::sync::atomic::AtomicBool;

use tokio::sync::Notify;

use super::*;
use crate::store::{
    FinishedJob, JobScan, Op, OpResult, PageItem, PageOf, StoredCounter, StoredJob, StoredRun,
};

/// A memory store that, while `hold` is set, answers a write only after `open` — the write
/// itself is done (durable) when `committed` fires, as in redb's writer thread whose reply
/// is still on its way.
struct HeldReplies {
    inner: store::Memory,
    hold: AtomicBool,
    committed: Notify,
    open: Notify,
}

#[async_trait::async_trait]
impl Store for HeldReplies {
    async fn write(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, store::Error> {
        let result = self.inner.write(ops).await;
        if self.hold.load(Ordering::SeqCst) {
            self.committed.notify_one();
            self.open.notified().await;
        }
        result
    }
    async fn get_job(&self, key: &str) -> Result<Option<StoredJob>, store::Error> {
        self.inner.get_job(key).await
    }
    async fn get_counter(&self, key: &str) -> Result<Option<StoredCounter>, store::Error> {
        self.inner.get_counter(key).await
    }
    async fn list_jobs(&self, prefix: &str) -> Result<Vec<(String, StoredJob)>, store::Error> {
        self.inner.list_jobs(prefix).await
    }
    async fn scan(&self, prefix: &str, page_size: usize) -> Result<JobScan, store::Error> {
        self.inner.scan(prefix, page_size).await
    }
    async fn get_finished(&self, key: &str) -> Result<Option<FinishedJob>, store::Error> {
        self.inner.get_finished(key).await
    }
    async fn list_runs(
        &self,
        key: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, StoredRun)>, store::Error> {
        self.inner.list_runs(key, before, limit).await
    }
    async fn page(
        &self,
        of: PageOf,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PageItem>, store::Error> {
        self.inner.page(of, prefix, after, limit).await
    }
    async fn close(&self) -> Result<(), store::Error> {
        self.inner.close().await
    }
}

/// Runs `change` until the store has its write, then drops it (the caller gives up) and lets
/// the store answer.
async fn abandon_after_write<F: std::future::Future>(store: &HeldReplies, change: F) {
    store.hold.store(true, Ordering::SeqCst);
    tokio::select! {
        _ = change => panic!("answered while the store holds its replies"),
        () = store.committed.notified() => {}
    }
    store.hold.store(false, Ordering::SeqCst);
    store.open.notify_one();
}

async fn harness() -> (Harness, Arc<HeldReplies>) {
    let store = Arc::new(HeldReplies {
        inner: store::Memory::new(),
        hold: AtomicBool::new(false),
        committed: Notify::new(),
        open: Notify::new(),
    });
    let h = Harness::on(store.clone(), ManualClock::new(t0()), None).await;
    (h, store)
}

#[tokio::test]
async fn a_create_whose_caller_gave_up_after_the_write_still_fires() {
    let (h, store) = harness().await;
    let create = h.engine.schedule_job(sv1::ScheduleJobRequest {
        name: "j".into(),
        job: Some(due("2s")),
        metadata: meta(),
        overwrite: true,
    });
    abandon_after_write(&store, create).await;
    assert!(h.exists("j").await, "the write is durable");
    h.run_for(TimeDelta::seconds(10)).await;
    let at: Vec<_> = h.deliveries("j").iter().map(|d| d.scheduled).collect();
    assert_eq!(at, [secs(2)], "the stored job fires at its time");
}

#[tokio::test]
async fn a_delete_whose_caller_gave_up_after_the_write_stops_the_job() {
    let (h, store) = harness().await;
    h.schedule("j", every("@every 1s")).await;
    h.run_for(TimeDelta::seconds(2)).await;
    let delete = h.engine.delete_job(sv1::DeleteJobRequest {
        name: "j".into(),
        metadata: meta(),
    });
    abandon_after_write(&store, delete).await;
    assert!(!h.exists("j").await, "the delete is durable");
    h.run_for(TimeDelta::seconds(5)).await;
    assert_eq!(h.deliveries("j").len(), 2, "nothing fires after the delete");
}
