//! Only the near future in memory (issue 16), on a manual clock: jobs due past the horizon
//! stay in the store and are read in as it moves on, firing exactly at their times; a job
//! changed or deleted while past the horizon never fires as it was (also when the page that
//! reads it in is older than the change); a start reads only the head of the due index.

use prost::Message;
use tokio::sync::watch;

use super::*;
use crate::store::DueIndex;

fn with_horizon(span: Duration) -> Options {
    Options {
        horizon: Some(span),
        ..Options::default()
    }
}

/// An engine on `store` keeping one hour in memory.
async fn hour_ahead(store: Arc<dyn Store>) -> Harness {
    let clock = ManualClock::new(t0());
    Harness::on_with(store, clock, None, with_horizon(Duration::from_secs(3600))).await
}

fn at(t: DateTime<Utc>) -> sv1::Job {
    due(&t.to_rfc3339())
}

async fn tracked(h: &Harness) -> usize {
    h.engine.sync().await.expect("loop running").jobs
}

#[tokio::test]
async fn jobs_far_past_the_horizon_are_read_in_and_fire_exactly_on_time() {
    let h = hour_ahead(Arc::new(store::Memory::new())).await;
    let dues = [
        TimeDelta::minutes(10),
        TimeDelta::hours(3),
        TimeDelta::days(1),
        TimeDelta::days(6) + TimeDelta::milliseconds(7_007),
    ];
    for (i, d) in dues.iter().enumerate() {
        h.schedule(&format!("once-{i}"), at(t0() + *d)).await;
    }
    h.schedule("every-6h", every("@every 6h")).await;
    h.schedule("daily", every("0 0 9 * * *")).await;
    assert_eq!(
        tracked(&h).await,
        1,
        "only the job due within the hour in memory"
    );

    h.run_until(t0() + TimeDelta::days(7)).await;
    for (i, d) in dues.iter().enumerate() {
        let got = h.deliveries(&format!("once-{i}"));
        assert_eq!(got.len(), 1, "once-{i}");
        assert_eq!(
            (got[0].at, got[0].scheduled),
            (t0() + *d, t0() + *d),
            "once-{i} fired at its time, not when it was read in"
        );
    }
    let six = h.deliveries("every-6h");
    assert_eq!(six.len(), 28);
    for (k, d) in (1..).zip(&six) {
        assert_eq!((d.at, d.scheduled), (t0() + TimeDelta::hours(6 * k), d.at));
    }
    let daily = h.deliveries("daily");
    assert_eq!(daily.len(), 7);
    for (k, d) in (0..).zip(&daily) {
        let nine = t0() + TimeDelta::days(k) + TimeDelta::hours(9);
        assert_eq!((d.at, d.scheduled), (nine, nine));
    }
    assert!(tracked(&h).await <= 2, "fired jobs went back to the store");
}

#[tokio::test]
async fn a_job_changed_while_past_the_horizon_never_fires_as_it_was() {
    let h = hour_ahead(Arc::new(store::Memory::new())).await;
    let day = t0() + TimeDelta::days(1);
    h.schedule("moved", at(day)).await;
    h.schedule("deleted", at(day)).await;
    h.schedule("replaced", every("@every 24h")).await;
    h.run_until(t0() + TimeDelta::hours(2)).await;
    assert_eq!(tracked(&h).await, 0);

    h.schedule("moved", at(t0() + TimeDelta::days(2))).await;
    h.delete("deleted").await;
    // Created again at 2 h: every 12 h from then on.
    h.schedule("replaced", every("@every 12h")).await;

    h.run_until(t0() + TimeDelta::days(3)).await;
    let moved = h.deliveries("moved");
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].at, t0() + TimeDelta::days(2));
    assert!(h.deliveries("deleted").is_empty(), "a deleted job fired");
    let replaced: Vec<DateTime<Utc>> = h.deliveries("replaced").iter().map(|d| d.at).collect();
    let expected: Vec<DateTime<Utc>> = (1..=5)
        .map(|k| t0() + TimeDelta::hours(2 + 12 * k))
        .collect();
    assert_eq!(replaced, expected, "only the new version's ticks");
}

/// Due pages, once read, wait for the gate to open: a page older than what the loop hears of
/// meanwhile.
struct Gate {
    open: watch::Sender<bool>,
    reads: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl AfterStore for Gate {
    async fn paged(&self) {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
    }
}

#[tokio::test]
async fn a_page_older_than_a_change_does_not_bring_the_old_job_back() {
    let store = Arc::new(Hooked::new(Gate {
        open: watch::Sender::new(true),
        reads: Default::default(),
    }));
    let h = hour_ahead(store.clone()).await;
    let gated = &store.hooks;
    // Past the first horizon (1 h), in the first round's range (1 h to 1 h 30).
    let soon = t0() + TimeDelta::minutes(70);
    for name in ["deleted", "moved", "kept"] {
        h.schedule(name, at(soon)).await;
    }
    assert_eq!(tracked(&h).await, 0);

    gated.open.send_replace(false);
    // The start read the index's head; half the span later the round reads its page
    // (holding all three).
    let before = gated.reads.load(Ordering::SeqCst);
    h.clock.set(t0() + TimeDelta::minutes(30));
    for _ in 0..5000 {
        if gated.reads.load(Ordering::SeqCst) > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(
        gated.reads.load(Ordering::SeqCst),
        before + 1,
        "the round read its page"
    );
    // Changed while the page is on its way.
    h.delete("deleted").await;
    h.schedule("moved", at(t0() + TimeDelta::hours(5))).await;
    gated.open.send_replace(true);

    h.run_until(t0() + TimeDelta::hours(6)).await;
    assert!(
        h.deliveries("deleted").is_empty(),
        "the stale page fired a deleted job"
    );
    let moved: Vec<DateTime<Utc>> = h.deliveries("moved").iter().map(|d| d.at).collect();
    assert_eq!(moved, [t0() + TimeDelta::hours(5)], "only the new version");
    let kept: Vec<DateTime<Utc>> = h.deliveries("kept").iter().map(|d| d.at).collect();
    assert_eq!(kept, [soon]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_reads_only_the_jobs_due_before_the_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let h = hour_ahead(open()).await;
    for i in 0..300 {
        let d = TimeDelta::days(1) + TimeDelta::minutes(i * 29);
        h.schedule(&format!("later-{i}"), at(t0() + d)).await;
    }
    for i in 0..3 {
        h.schedule(&format!("soon-{i}"), at(t0() + TimeDelta::minutes(5 + i)))
            .await;
    }
    h.stop.cancel();
    h.task.await.unwrap();
    h.store.close().await.unwrap();

    // Reopened from the file: the index's head only.
    let h = Harness::on_with(
        open(),
        h.clock,
        Some(h.sink),
        with_horizon(Duration::from_secs(3600)),
    )
    .await;
    assert_eq!(tracked(&h).await, 3);
    h.run_until(t0() + TimeDelta::days(8)).await;
    for i in 0..300 {
        let d = TimeDelta::days(1) + TimeDelta::minutes(i * 29);
        let got: Vec<DateTime<Utc>> = h
            .deliveries(&format!("later-{i}"))
            .iter()
            .map(|d| d.at)
            .collect();
        assert_eq!(got, [t0() + d], "later-{i}");
    }
    assert_eq!(h.deliveries("soon-2").len(), 1);
}

#[tokio::test]
async fn jobs_stored_before_the_index_are_indexed_at_the_first_start() {
    let store = Arc::new(store::Memory::new());
    let clock = ManualClock::new(t0());
    let h = Harness::on(store.clone(), clock, None).await;
    h.schedule("old-far", at(t0() + TimeDelta::days(2))).await;
    h.schedule("old-near", at(t0() + TimeDelta::minutes(1)))
        .await;
    h.stop.cancel();
    h.task.await.unwrap();
    // As a store written before the index: its jobs in no index.
    for name in ["old-far", "old-near"] {
        let key = format!("app||default||myapp||{name}");
        let job = store.get_job(&key).await.unwrap().unwrap();
        store.put_raw(crate::store::Table::Jobs, &key, &job.encode_to_vec());
    }
    assert_eq!(store.due_index().await.unwrap(), DueIndex::Partial);

    let options = with_horizon(Duration::from_secs(3600));
    let h = Harness::on_with(store.clone(), h.clock, Some(h.sink), options.clone()).await;
    assert_eq!(tracked(&h).await, 2, "the first start loads every job");
    assert_eq!(store.due_index().await.unwrap(), DueIndex::Complete);
    let h = h.restart().await;
    assert_eq!(tracked(&h).await, 1, "later starts read the index's head");
    h.run_until(t0() + TimeDelta::days(3)).await;
    let far: Vec<DateTime<Utc>> = h.deliveries("old-far").iter().map(|d| d.at).collect();
    assert_eq!(far, [t0() + TimeDelta::days(2)]);
    assert_eq!(h.deliveries("old-near").len(), 1);
}
