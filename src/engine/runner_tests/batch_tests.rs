//! Many creates in one call (`Engine::schedule_jobs`): each is answered as its own create
//! would be, the ones accepted are stored in one store write, and they fire as if created one
//! by one, far ahead ones too.

use std::sync::atomic::AtomicUsize;

use tonic::Code;

use super::*;
use crate::engine::JobExtras;

/// Counts the store's writes.
#[derive(Default)]
struct CountWrites(AtomicUsize);

#[async_trait::async_trait]
impl AfterStore for CountWrites {
    async fn written(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn create(name: &str, job: sv1::Job, overwrite: bool) -> (sv1::ScheduleJobRequest, JobExtras) {
    let req = sv1::ScheduleJobRequest {
        name: name.into(),
        job: Some(job),
        metadata: meta(),
        overwrite,
    };
    (req, JobExtras::default())
}

#[tokio::test]
async fn a_batch_is_answered_job_by_job_stored_in_one_write_and_fires_as_single_creates() {
    let store = Arc::new(Hooked::new(CountWrites::default()));
    let h = Harness::on(store.clone(), ManualClock::new(t0()), None).await;
    h.schedule("existing", due("100s")).await;
    let before = store.hooks.0.load(Ordering::SeqCst);

    let answers = h
        .engine
        .schedule_jobs(vec![
            create("a", due("2s"), false),
            create("bad", every("not a schedule"), false),
            create("existing", due("3s"), false),
            create("b", every("@every 5s"), false),
            create("a", due("4s"), false),
            create("b", due("6s"), true),
            create("far", due("720h"), false),
        ])
        .await
        .unwrap();
    let codes: Vec<_> = answers
        .into_iter()
        .map(|a| a.map_err(|e| crate::seam::Error::from(e).code))
        .collect();
    assert_eq!(
        codes,
        [
            Ok(()),
            Err(Code::Unknown),
            Err(Code::AlreadyExists),
            Ok(()),
            Err(Code::AlreadyExists),
            Ok(()),
            Ok(()),
        ],
        "each job answered as its own create, in order"
    );
    // "b" comes twice, so the batch is written in two runs of distinct names.
    assert_eq!(store.hooks.0.load(Ordering::SeqCst) - before, 2);

    h.run_for(TimeDelta::seconds(200)).await;
    let at = |name| -> Vec<_> { h.deliveries(name).iter().map(|d| d.scheduled).collect() };
    assert_eq!(at("a"), [secs(2)], "the first create of a name holds");
    assert_eq!(
        at("b"),
        [secs(6)],
        "the overwrite in the same batch replaced it"
    );
    assert_eq!(
        at("existing"),
        [secs(100)],
        "a stored job is left as it was"
    );
    assert!(at("bad").is_empty());
    assert!(!h.exists("bad").await);
    h.run_until(t0() + TimeDelta::hours(720)).await;
    assert_eq!(at("far"), [t0() + TimeDelta::hours(720)]);
}

#[tokio::test]
async fn a_batch_of_distinct_names_is_one_write() {
    let store = Arc::new(Hooked::new(CountWrites::default()));
    let h = Harness::on(store.clone(), ManualClock::new(t0()), None).await;
    let before = store.hooks.0.load(Ordering::SeqCst);
    let jobs = (0..500)
        .map(|i| create(&format!("j{i}"), due(&format!("{}s", 1 + i % 50)), false))
        .collect();
    let answers = h.engine.schedule_jobs(jobs).await.unwrap();
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(store.hooks.0.load(Ordering::SeqCst) - before, 1);
    h.run_for(TimeDelta::seconds(60)).await;
    assert_eq!(h.sink.log.lock().unwrap().len(), 500);
}
