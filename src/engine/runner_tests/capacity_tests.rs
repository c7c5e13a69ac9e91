//! The trigger loop against a sink with bounded room.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{TimeDelta, TimeZone};
use tokio::sync::Semaphore;

use super::*;
use crate::store;

/// A sink with room for `CAPACITY` triggers whose answers wait for permits.
struct Gate {
    answers: Semaphore,
    at_once: AtomicUsize,
    most_at_once: AtomicUsize,
    seen: Mutex<Vec<(String, DateTime<Utc>)>>,
}

const CAPACITY: usize = 2;

#[async_trait::async_trait]
impl Sink for Gate {
    async fn deliver(&self, t: Trigger) -> TriggerResult {
        let now = self.at_once.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_at_once.fetch_max(now, Ordering::SeqCst);
        self.seen
            .lock()
            .unwrap()
            .push((t.name.to_string(), t.scheduled_at));
        self.answers.acquire().await.unwrap().forget();
        self.at_once.fetch_sub(1, Ordering::SeqCst);
        TriggerResult::Success
    }

    fn is_deliverable(&self, _key: &str) -> bool {
        true
    }

    fn capacity(&self) -> usize {
        CAPACITY
    }
}

async fn stats_until(engine: &Engine, done: impl Fn(&Stats) -> bool) -> Stats {
    for _ in 0..5_000 {
        let s = engine.sync().await.expect("loop running");
        if done(&s) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("trigger loop never got there");
}

#[tokio::test]
async fn hands_the_sink_no_more_than_its_capacity_and_keeps_nominal_times() {
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(t0);
    let sink = Arc::new(Gate {
        answers: Semaphore::new(0),
        at_once: AtomicUsize::new(0),
        most_at_once: AtomicUsize::new(0),
        seen: Mutex::default(),
    });
    let stop = CancellationToken::new();
    let (engine, task) = Engine::start(
        Arc::new(store::Memory::new()),
        Arc::new(clock.clone()),
        sink.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    let metadata = sv1::JobMetadata {
        app_id: "app".into(),
        namespace: "ns".into(),
        target: Some(sv1::JobTargetMetadata {
            r#type: Some(Target::Job(sv1::TargetJob {})),
        }),
        concurrency_key: None,
    };
    for i in 0..5 {
        engine
            .schedule_job(sv1::ScheduleJobRequest {
                name: format!("j{i}"),
                job: Some(sv1::Job {
                    due_time: Some("1s".into()),
                    ..Default::default()
                }),
                metadata: Some(metadata.clone()),
                overwrite: false,
            })
            .await
            .unwrap();
    }
    // All five fall due at once; the sink takes two, the rest wait in the queue (even
    // though they are due and the clock moves on).
    clock.set(t0 + TimeDelta::seconds(3));
    let s = stats_until(&engine, |s| s.outstanding == CAPACITY).await;
    assert_eq!(s.next_due, Some(t0 + TimeDelta::seconds(1)));
    assert_eq!(sink.seen.lock().unwrap().len(), CAPACITY);
    // Each answer lets one more go.
    sink.answers.add_permits(5);
    let s = stats_until(&engine, |s| s.jobs == 0 && s.outstanding == 0).await;
    assert_eq!(s.next_due, None);
    let seen = sink.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    // Lateness stays measurable: every trigger carries the time it was due, not the
    // time it was handed out.
    assert!(seen.iter().all(|(_, at)| *at == t0 + TimeDelta::seconds(1)));
    assert_eq!(sink.most_at_once.load(Ordering::SeqCst), CAPACITY);
    stop.cancel();
    task.await.unwrap();
}
