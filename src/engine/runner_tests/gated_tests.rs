//! Concurrency limits by key on a manual clock: a key's triggers never exceed its rule's
//! limit, the rest wait in due order without holding up other keys, and a raised or deleted
//! rule lets waiters go.

use std::sync::Mutex;

use chrono::{TimeDelta, TimeZone};
use tokio::sync::Semaphore;

use super::*;
use crate::jobs::concurrency::Rule;
use crate::proto::jobsd_api as jv1;
use crate::store;

/// A sink that holds every answer until permitted, counting deliveries at once per key (the
/// part of the job name before `-`).
struct PerKey {
    answers: Semaphore,
    now: Mutex<HashMap<String, usize>>,
    most: Mutex<HashMap<String, usize>>,
    seen: Mutex<Vec<String>>,
}

impl PerKey {
    fn new() -> Arc<PerKey> {
        Arc::new(PerKey {
            answers: Semaphore::new(0),
            now: Mutex::default(),
            most: Mutex::default(),
            seen: Mutex::default(),
        })
    }
}

fn key_of(name: &str) -> String {
    name.split('-').next().unwrap_or(name).to_owned()
}

#[async_trait::async_trait]
impl Sink for PerKey {
    async fn deliver(&self, t: Trigger) -> TriggerResult {
        let key = key_of(&t.name);
        {
            let mut now = self.now.lock().unwrap();
            let n = now.entry(key.clone()).or_default();
            *n += 1;
            let mut most = self.most.lock().unwrap();
            let m = most.entry(key.clone()).or_default();
            *m = (*m).max(*n);
            self.seen.lock().unwrap().push(t.name.to_string());
        }
        self.answers.acquire().await.unwrap().forget();
        *self.now.lock().unwrap().get_mut(&key).unwrap() -= 1;
        TriggerResult::Success
    }

    fn is_deliverable(&self, _key: &str) -> bool {
        true
    }
}

fn metadata() -> sv1::JobMetadata {
    sv1::JobMetadata {
        app_id: "app".into(),
        namespace: "ns".into(),
        target: Some(sv1::JobTargetMetadata {
            r#type: Some(Target::Job(sv1::TargetJob {})),
        }),
        concurrency_key: None,
    }
}

async fn create(engine: &Engine, name: &str, concurrency_key: &str) {
    let extras = JobExtras {
        policy: (!concurrency_key.is_empty()).then(|| jv1::JobPolicy {
            concurrency_key: concurrency_key.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    engine
        .schedule_job_with(
            sv1::ScheduleJobRequest {
                name: name.into(),
                job: Some(sv1::Job {
                    due_time: Some("1s".into()),
                    ..Default::default()
                }),
                metadata: Some(metadata()),
                overwrite: false,
            },
            extras,
        )
        .await
        .unwrap();
}

async fn until(engine: &Engine, what: &str, done: impl Fn(&Stats) -> bool) {
    for _ in 0..5_000 {
        if done(&engine.sync().await.expect("loop running")) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("trigger loop never got there: {what}");
}

#[tokio::test]
async fn a_key_never_exceeds_its_limit_and_other_keys_go_on() {
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(t0);
    let sink = PerKey::new();
    let stop = CancellationToken::new();
    let (engine, task) = Engine::start(
        Arc::new(store::Memory::new()),
        Arc::new(clock.clone()),
        sink.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    let rule = |key: &str, limit| Rule {
        key: key.into(),
        limit,
    };
    engine
        .set_concurrency_rule(&metadata(), rule("a", 2))
        .await
        .unwrap();
    engine
        .set_concurrency_rule(&metadata(), rule("t*", 1))
        .await
        .unwrap();
    for i in 0..6 {
        create(&engine, &format!("a-{i}"), "a").await;
    }
    for i in 0..3 {
        create(&engine, &format!("tx-{i}"), "tx").await;
        create(&engine, &format!("ty-{i}"), "ty").await;
    }
    create(&engine, "free-1", "").await;
    create(&engine, "free-2", "").await;
    clock.set(t0 + TimeDelta::seconds(1));
    // 2 of `a`, 1 each of `tx` and `ty` (prefix `t*` gives each key 1), both unkeyed jobs.
    until(&engine, "six out", |s| s.outstanding == 6).await;
    let view = engine.concurrency_view(&metadata()).await.unwrap();
    assert_eq!(view.rules, vec![rule("a", 2), rule("t*", 1)]);
    let a = view.keys.iter().find(|k| k.key == "a").unwrap();
    assert_eq!((a.in_flight, a.waiting), (2, 4));
    assert_eq!(a.rule, Some(("a".into(), 2)));
    let tx = view.keys.iter().find(|k| k.key == "tx").unwrap();
    assert_eq!(
        (tx.in_flight, tx.waiting, tx.rule.clone()),
        (1, 2, Some(("t*".into(), 1)))
    );
    // A waiting job's status says why.
    let gated = ["a-0", "a-1", "a-2", "a-3", "a-4", "a-5"]
        .into_iter()
        .find(|n| !sink.seen.lock().unwrap().iter().any(|s| s == n))
        .unwrap();
    let view = engine.job_view(&metadata(), gated).await.unwrap();
    let why = view.status.waiting.expect("a gated job says why it waits");
    assert!(why.contains("\"a\" is at its limit: 2 in flight"), "{why}");
    assert!(!view.status.in_flight);

    // Answers free slots one at a time; every trigger goes, no key ever over its limit.
    sink.answers.add_permits(100);
    until(&engine, "all done", |s| s.jobs == 0 && s.outstanding == 0).await;
    assert_eq!(sink.seen.lock().unwrap().len(), 14);
    let most = sink.most.lock().unwrap().clone();
    assert_eq!(most["a"], 2);
    assert_eq!(most["tx"], 1);
    assert_eq!(most["ty"], 1);
    assert!(
        engine
            .concurrency_view(&metadata())
            .await
            .unwrap()
            .keys
            .is_empty()
    );
    stop.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_raised_or_deleted_rule_lets_waiters_go() {
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(t0);
    let sink = PerKey::new();
    let stop = CancellationToken::new();
    let (engine, task) = Engine::start(
        Arc::new(store::Memory::new()),
        Arc::new(clock.clone()),
        sink.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    let rule = |limit| Rule {
        key: "k".into(),
        limit,
    };
    engine
        .set_concurrency_rule(&metadata(), rule(1))
        .await
        .unwrap();
    for i in 0..5 {
        create(&engine, &format!("k-{i}"), "k").await;
    }
    clock.set(t0 + TimeDelta::seconds(1));
    until(&engine, "one out", |s| s.outstanding == 1).await;
    engine
        .set_concurrency_rule(&metadata(), rule(3))
        .await
        .unwrap();
    until(&engine, "three out", |s| s.outstanding == 3).await;
    assert!(
        engine
            .delete_concurrency_rule(&metadata(), "k")
            .await
            .unwrap()
    );
    assert!(
        !engine
            .delete_concurrency_rule(&metadata(), "k")
            .await
            .unwrap()
    );
    until(&engine, "all out", |s| s.outstanding == 5).await;
    // In a cluster of 3, the first replica's share of a limit of 4 is 2.
    engine.set_concurrency_place(3, 0);
    sink.answers.add_permits(5);
    until(&engine, "all done", |s| s.jobs == 0 && s.outstanding == 0).await;
    // Rules are for app jobs only, and are checked.
    let err = engine
        .set_concurrency_rule(
            &metadata(),
            Rule {
                key: String::new(),
                limit: 1,
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("key: empty"), "{err}");
    stop.cancel();
    task.await.unwrap();
}
