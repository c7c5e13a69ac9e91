//! A cluster replica's engine lets go of a job while its result is being written (its lease
//! ran out: etcd was away) and takes it back from the store (the partition came back). The
//! late answer of the old write must not move the entry it took back to an older tick: that
//! fired a tick twice on one member after etcd restarted (the flake of
//! `replica::cluster::tests::members_carry_on_after_etcd_restarts`).

use super::*;

/// Waits (in real time, bounded) until `name` was delivered `n` times.
async fn delivered(h: &Harness, name: &str, n: usize) {
    for _ in 0..5_000 {
        if h.deliveries(name).len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!(
        "{name} was not delivered {n} times: {:?}",
        h.deliveries(name)
    );
}

#[tokio::test]
async fn a_late_answer_for_a_job_let_go_of_does_not_rewind_the_one_taken_back() {
    let store = Arc::new(Hooked::new(HeldReplies::default()));
    let h = Harness::following(store.clone(), ManualClock::new(t0()));
    h.schedule("j", every("@every 1s")).await;
    h.adopt_all().await;
    h.run_until(secs(1)).await;
    assert_eq!(h.deliveries("j").len(), 1);

    // Tick 2's result is written, its answer held back (etcd went away after the commit).
    store.hooks.hold.store(true, Ordering::SeqCst);
    h.clock.set(secs(2));
    store.hooks.committed.notified().await;
    store.hooks.hold.store(false, Ordering::SeqCst);
    // The lease runs out: the job is let go of; then the partition comes back, read from the
    // store, which has tick 2.
    let _let_go = h.engine.disown(|_| true);
    h.adopt_all().await;
    // Tick 3 fires from what was read; its result waits behind the held write.
    h.clock.set(secs(3));
    delivered(&h, "j", 3).await;
    // The held answer comes now, for the entry that was let go of.
    store.hooks.open.notify_one();
    h.run_until(secs(6)).await;

    let ticks: Vec<DateTime<Utc>> = h.deliveries("j").iter().map(|d| d.scheduled).collect();
    assert_eq!(
        ticks,
        (1..=6).map(secs).collect::<Vec<_>>(),
        "each tick once, in order"
    );
}
