//! Changes whose caller gives up (drops the request's future) after the store has the write
//! but before the answer: the trigger loop must still learn of them (see `engine::detached`).

use super::*;

/// Runs `change` until the store has its write, then drops it (the caller gives up) and lets
/// the store answer.
async fn abandon_after_write<F: std::future::Future>(store: &Hooked<HeldReplies>, change: F) {
    let store = &store.hooks;
    store.hold.store(true, Ordering::SeqCst);
    tokio::select! {
        _ = change => panic!("answered while the store holds its replies"),
        () = store.committed.notified() => {}
    }
    store.hold.store(false, Ordering::SeqCst);
    store.open.notify_one();
}

async fn harness() -> (Harness, Arc<Hooked<HeldReplies>>) {
    let store = Arc::new(Hooked::new(HeldReplies::default()));
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
