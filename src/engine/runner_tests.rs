//! The trigger loop on a manual clock: every firing rule of Dapr's engine, no sleeps for
//! timing (the loop is driven to quiescence after each clock step).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::clock::ManualClock;
use crate::proto::common;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
use crate::trigger::{Trigger, TriggerResult};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

/// One delivery as the sink saw it.
#[derive(Debug, Clone, PartialEq)]
struct Delivery {
    name: String,
    /// Clock reading when the sink got it.
    at: DateTime<Utc>,
    /// The nominal time the trigger was for.
    scheduled: DateTime<Utc>,
    /// The execution it is an attempt of, and which attempt.
    execution: crate::trigger::ExecutionId,
    attempt: u32,
    /// The data it carried.
    data: Option<prost_types::Any>,
}

/// A sink that records deliveries and answers from a per-job script (default: success).
struct TestSink {
    clock: ManualClock,
    log: Mutex<Vec<Delivery>>,
    script: Mutex<HashMap<String, VecDeque<TriggerResult>>>,
    always: Mutex<HashMap<String, TriggerResult>>,
    deliverable: AtomicBool,
}

impl TestSink {
    /// A sink that takes everything and answers success.
    fn new(clock: &ManualClock) -> Arc<TestSink> {
        Arc::new(TestSink {
            clock: clock.clone(),
            log: Mutex::default(),
            script: Mutex::default(),
            always: Mutex::default(),
            deliverable: AtomicBool::new(true),
        })
    }
}

#[async_trait::async_trait]
impl Sink for TestSink {
    async fn deliver(&self, t: Trigger) -> TriggerResult {
        let name = t.name.to_string();
        if !self.deliverable.load(Ordering::SeqCst) {
            return TriggerResult::Undeliverable;
        }
        self.log.lock().unwrap().push(Delivery {
            name: name.clone(),
            at: self.clock.now(),
            scheduled: t.scheduled_at,
            execution: t.execution_id,
            attempt: t.attempt,
            data: t.data.clone(),
        });
        if let Some(r) = self
            .script
            .lock()
            .unwrap()
            .get_mut(&name)
            .and_then(VecDeque::pop_front)
        {
            return r;
        }
        self.always
            .lock()
            .unwrap()
            .get(&name)
            .copied()
            .unwrap_or(TriggerResult::Success)
    }

    fn is_deliverable(&self, _key: &str) -> bool {
        self.deliverable.load(Ordering::SeqCst)
    }
}

struct Harness {
    engine: Engine,
    clock: ManualClock,
    sink: Arc<TestSink>,
    store: Arc<dyn Store>,
    stop: CancellationToken,
    task: JoinHandle<()>,
    /// How the engine was started (kept across restarts).
    options: Options,
}

impl Harness {
    async fn new() -> Harness {
        let clock = ManualClock::new(t0());
        Self::on(Arc::new(store::Memory::new()), clock, None).await
    }

    /// An engine on `store`, optionally keeping an earlier harness's sink (its log).
    async fn on(store: Arc<dyn Store>, clock: ManualClock, sink: Option<Arc<TestSink>>) -> Harness {
        Self::on_with(store, clock, sink, Options::default()).await
    }

    /// [`Harness::on`], the engine started with `options`.
    async fn on_with(
        store: Arc<dyn Store>,
        clock: ManualClock,
        sink: Option<Arc<TestSink>>,
        options: Options,
    ) -> Harness {
        let sink = sink.unwrap_or_else(|| TestSink::new(&clock));
        let stop = CancellationToken::new();
        let (engine, task) = Engine::start_with(
            store.clone(),
            Arc::new(clock.clone()),
            sink.clone(),
            stop.clone(),
            options.clone(),
        )
        .await
        .unwrap();
        Harness {
            engine,
            clock,
            sink,
            store,
            stop,
            task,
            options,
        }
    }

    /// An engine that follows `store`, as a cluster replica's does: it fires only what it is
    /// handed ([`Harness::adopt_all`]).
    fn following(store: Arc<dyn Store>, clock: ManualClock) -> Harness {
        let sink = TestSink::new(&clock);
        let stop = CancellationToken::new();
        let (engine, task) = Engine::follow(
            store.clone(),
            Arc::new(clock.clone()),
            sink.clone(),
            stop.clone(),
        );
        Harness {
            engine,
            clock,
            sink,
            store,
            stop,
            task,
            options: Options::default(),
        }
    }

    /// Hands the engine every job of the store with its progress, as a replica taking its
    /// partitions over does.
    async fn adopt_all(&self) {
        let mut scan = self.store.scan("", 100).await.unwrap();
        self.engine
            .adopt(scan.next_page().await.unwrap().unwrap_or_default());
    }

    /// Stops the engine (as a crash would, between ticks) and starts a new one on the same
    /// store and clock.
    async fn restart(self) -> Harness {
        self.stop.cancel();
        self.task.await.unwrap();
        Self::on_with(self.store, self.clock, Some(self.sink), self.options).await
    }

    /// Waits until nothing is out at the sink or being written and nothing is due.
    async fn settle(&self) {
        for _ in 0..10_000 {
            let s = self.engine.sync().await.expect("loop running");
            if s.outstanding == 0 && s.next_event().is_none_or(|t| t > self.clock.now()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("engine did not settle");
    }

    /// Moves the clock to `to`, stopping at every fire time on the way.
    async fn run_until(&self, to: DateTime<Utc>) {
        self.settle().await;
        loop {
            let s = self.engine.sync().await.unwrap();
            match s.next_event() {
                Some(next) if next <= to => {
                    if next > self.clock.now() {
                        self.clock.set(next);
                    }
                    self.settle().await;
                }
                _ => break,
            }
        }
        if to > self.clock.now() {
            self.clock.set(to);
        }
        self.settle().await;
    }

    async fn run_for(&self, d: TimeDelta) {
        self.run_until(self.clock.now() + d).await;
    }

    async fn schedule(&self, name: &str, job: sv1::Job) {
        self.engine
            .schedule_job(sv1::ScheduleJobRequest {
                name: name.into(),
                job: Some(job),
                metadata: meta(),
                overwrite: true,
            })
            .await
            .unwrap();
    }

    async fn delete(&self, name: &str) {
        self.engine
            .delete_job(sv1::DeleteJobRequest {
                name: name.into(),
                metadata: meta(),
            })
            .await
            .unwrap();
    }

    fn deliveries(&self, name: &str) -> Vec<Delivery> {
        self.sink
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|d| d.name == name)
            .cloned()
            .collect()
    }

    fn answer_always(&self, name: &str, r: TriggerResult) {
        self.sink.always.lock().unwrap().insert(name.into(), r);
    }

    fn script(&self, name: &str, rs: &[TriggerResult]) {
        self.sink
            .script
            .lock()
            .unwrap()
            .insert(name.into(), rs.iter().copied().collect());
    }

    async fn exists(&self, name: &str) -> bool {
        self.engine
            .get_job(sv1::GetJobRequest {
                name: name.into(),
                metadata: meta(),
            })
            .await
            .is_ok()
    }
}

/// What a test store does once the real one has answered, before the answer goes back (to
/// hold answers back at the moment a test needs).
#[async_trait::async_trait]
trait AfterStore: Send + Sync + 'static {
    /// A write was applied (durable).
    async fn written(&self) {}
    /// A page of the due index was read.
    async fn paged(&self) {}
}

/// While `hold` is set, a write is answered only after `open` — the write itself is done
/// (durable) when `committed` fires, as in redb's writer thread whose reply is still on its
/// way.
#[derive(Default)]
struct HeldReplies {
    hold: AtomicBool,
    committed: Notify,
    open: Notify,
}

#[async_trait::async_trait]
impl AfterStore for HeldReplies {
    async fn written(&self) {
        if self.hold.load(Ordering::SeqCst) {
            self.committed.notify_one();
            self.open.notified().await;
        }
    }
}

/// A memory store whose answers pass through `hooks`.
struct Hooked<H> {
    inner: store::Memory,
    hooks: H,
}

impl<H> Hooked<H> {
    fn new(hooks: H) -> Self {
        Hooked {
            inner: store::Memory::new(),
            hooks,
        }
    }
}

#[async_trait::async_trait]
impl<H: AfterStore> Store for Hooked<H> {
    async fn write(&self, ops: Vec<store::Op>) -> Result<Vec<store::OpResult>, store::Error> {
        let result = self.inner.write(ops).await;
        self.hooks.written().await;
        result
    }
    async fn get_job(&self, key: &str) -> Result<Option<StoredJob>, store::Error> {
        self.inner.get_job(key).await
    }
    async fn get_counter(&self, key: &str) -> Result<Option<store::StoredCounter>, store::Error> {
        self.inner.get_counter(key).await
    }
    async fn get_value(&self, key: &str) -> Result<Option<Vec<u8>>, store::Error> {
        self.inner.get_value(key).await
    }
    async fn list_values(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, store::Error> {
        self.inner.list_values(prefix).await
    }
    async fn list_jobs(&self, prefix: &str) -> Result<Vec<(String, StoredJob)>, store::Error> {
        self.inner.list_jobs(prefix).await
    }
    async fn scan(&self, prefix: &str, page_size: usize) -> Result<store::JobScan, store::Error> {
        self.inner.scan(prefix, page_size).await
    }
    async fn get_finished(&self, key: &str) -> Result<Option<store::FinishedJob>, store::Error> {
        self.inner.get_finished(key).await
    }
    async fn list_runs(
        &self,
        key: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, store::StoredRun)>, store::Error> {
        self.inner.list_runs(key, before, limit).await
    }
    async fn page(
        &self,
        of: store::PageOf,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<store::PageItem>, store::Error> {
        self.inner.page(of, prefix, after, limit).await
    }
    async fn due_index(&self) -> Result<store::DueIndex, store::Error> {
        self.inner.due_index().await
    }
    async fn due_page(
        &self,
        start: &str,
        before: i64,
        limit: usize,
    ) -> Result<store::DuePage, store::Error> {
        let page = self.inner.due_page(start, before, limit).await;
        self.hooks.paged().await;
        page
    }
    async fn close(&self) -> Result<(), store::Error> {
        self.inner.close().await
    }
}

fn meta() -> Option<sv1::JobMetadata> {
    Some(sv1::JobMetadata {
        app_id: "myapp".into(),
        namespace: "default".into(),
        target: Some(sv1::JobTargetMetadata {
            r#type: Some(Target::Job(sv1::TargetJob {})),
        }),
        concurrency_key: None,
    })
}

fn every(spec: &str) -> sv1::Job {
    sv1::Job {
        schedule: Some(spec.into()),
        ..Default::default()
    }
}

fn due(d: &str) -> sv1::Job {
    sv1::Job {
        due_time: Some(d.into()),
        ..Default::default()
    }
}

fn constant(
    interval_secs: Option<i64>,
    max_retries: Option<u32>,
) -> Option<common::JobFailurePolicy> {
    Some(common::JobFailurePolicy {
        policy: Some(common::job_failure_policy::Policy::Constant(
            common::JobFailurePolicyConstant {
                interval: interval_secs.map(|s| prost_types::Duration {
                    seconds: s,
                    nanos: 0,
                }),
                max_retries,
            },
        )),
    })
}

fn secs(n: i64) -> DateTime<Utc> {
    t0() + TimeDelta::seconds(n)
}

use TriggerResult::{Failed, Success};

#[tokio::test]
async fn every_1s_with_ttl_3s_delivers_exactly_3() {
    let h = Harness::new().await;
    h.schedule(
        "j",
        sv1::Job {
            ttl: Some("3s".into()),
            ..every("@every 1s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(10)).await;
    let at: Vec<_> = h.deliveries("j").iter().map(|d| d.scheduled).collect();
    assert_eq!(at, [secs(1), secs(2), secs(3)]);
    assert!(!h.exists("j").await, "finished job is deleted");
}

#[tokio::test]
async fn every_1s_with_repeats_2_delivers_2() {
    let h = Harness::new().await;
    h.schedule(
        "j",
        sv1::Job {
            repeats: Some(2),
            ..every("@every 1s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(h.deliveries("j").len(), 2);
    assert!(!h.exists("j").await);
}

#[tokio::test]
async fn always_failing_one_shot_with_default_policy_is_delivered_4_times() {
    let h = Harness::new().await;
    h.answer_always("j", Failed);
    h.schedule("j", due("0s")).await;
    h.run_for(TimeDelta::seconds(30)).await;
    let at: Vec<_> = h.deliveries("j").iter().map(|d| d.scheduled).collect();
    assert_eq!(at, [secs(0), secs(1), secs(2), secs(3)]);
    assert!(!h.exists("j").await);
}

#[tokio::test]
async fn constant_4_retries_without_interval_delivers_5() {
    let h = Harness::new().await;
    h.answer_always("j", Failed);
    h.schedule(
        "j",
        sv1::Job {
            failure_policy: constant(None, Some(4)),
            ..due("0s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(h.deliveries("j").len(), 5);
}

#[tokio::test]
async fn drop_policy_delivers_once() {
    let h = Harness::new().await;
    h.answer_always("j", Failed);
    let drop = Some(common::JobFailurePolicy {
        policy: Some(common::job_failure_policy::Policy::Drop(
            common::JobFailurePolicyDrop {},
        )),
    });
    h.schedule(
        "j",
        sv1::Job {
            failure_policy: drop,
            ..due("0s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(h.deliveries("j").len(), 1);
}

#[tokio::test]
async fn fail_fail_succeed_delivers_3() {
    let h = Harness::new().await;
    h.script("j", &[Failed, Failed, Success]);
    h.answer_always("j", Failed);
    h.schedule("j", due("0s")).await;
    h.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(h.deliveries("j").len(), 3);
    assert!(!h.exists("j").await);
}

#[tokio::test]
async fn acked_one_shot_is_never_delivered_again_even_across_restart() {
    let h = Harness::new().await;
    h.schedule("once", due("1s")).await;
    h.schedule("later", due("1h")).await;
    h.run_for(TimeDelta::seconds(5)).await;
    assert_eq!(h.deliveries("once").len(), 1);
    let h = h.restart().await;
    h.run_for(TimeDelta::hours(2)).await;
    assert_eq!(
        h.deliveries("once").len(),
        1,
        "delivered again after restart"
    );
    assert_eq!(h.deliveries("later").len(), 1);
}

#[tokio::test]
async fn never_delivered_before_due_time() {
    let h = Harness::new().await;
    h.schedule("a", due("10s")).await;
    h.schedule("b", due("2026-01-01T00:00:05.5Z")).await;
    h.schedule(
        "c",
        sv1::Job {
            due_time: Some("3s".into()),
            repeats: Some(3),
            ..every("@every 2s")
        },
    )
    .await;
    // Step the clock in coarse jumps: deliveries may be late, never early.
    for _ in 0..20 {
        h.clock.advance(TimeDelta::milliseconds(900));
        h.settle().await;
    }
    let log = h.sink.log.lock().unwrap().clone();
    assert_eq!(log.len(), 5);
    for d in &log {
        assert!(d.at >= d.scheduled, "{d:?} early");
    }
    assert!(h.deliveries("a")[0].at >= secs(10));
    assert!(h.deliveries("b")[0].at >= secs(5) + TimeDelta::milliseconds(500));
    let c: Vec<_> = h.deliveries("c").iter().map(|d| d.scheduled).collect();
    assert_eq!(c, [secs(3), secs(5), secs(7)]);
}

#[tokio::test]
async fn schedule_without_due_time_first_fires_one_period_after_creation() {
    let h = Harness::new().await;
    h.schedule(
        "j",
        sv1::Job {
            repeats: Some(1),
            ..every("@every 1m")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(59)).await;
    assert!(h.deliveries("j").is_empty());
    h.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(h.deliveries("j")[0].scheduled, secs(60));
}

#[tokio::test]
async fn restart_resumes_from_stored_counters() {
    let h = Harness::new().await;
    h.schedule(
        "j",
        sv1::Job {
            repeats: Some(5),
            ..every("@every 1s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(2)).await;
    assert_eq!(h.deliveries("j").len(), 2);
    let h = h.restart().await;
    h.run_for(TimeDelta::seconds(10)).await;
    let at: Vec<_> = h.deliveries("j").iter().map(|d| d.scheduled).collect();
    assert_eq!(at, [secs(1), secs(2), secs(3), secs(4), secs(5)]);
}

#[tokio::test]
async fn attempts_survive_a_restart() {
    let h = Harness::new().await;
    h.answer_always("j", Failed);
    h.schedule("j", due("0s")).await;
    h.run_for(TimeDelta::milliseconds(1500)).await; // attempts at 0s and 1s
    assert_eq!(h.deliveries("j").len(), 2);
    let h = h.restart().await;
    h.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(
        h.deliveries("j").len(),
        4,
        "4 deliveries in all, not 4 more"
    );
}

#[tokio::test]
async fn retries_of_a_tick_share_its_execution_id_across_a_restart() {
    let h = Harness::new().await;
    h.answer_always("j", Failed);
    h.schedule("j", every("@every 10s")).await;
    h.run_for(TimeDelta::milliseconds(11_500)).await; // tick 10s: attempts at 10s and 11s
    let h = h.restart().await;
    h.run_for(TimeDelta::seconds(12)).await; // attempts at 12s and 13s, then tick 20s
    let got = h.deliveries("j");
    assert!(got.len() >= 5, "{got:?}");
    let first = &got[..4];
    assert_eq!(
        first.iter().map(|d| d.attempt).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert!(first.iter().all(|d| d.execution == first[0].execution));
    let key = "app||default||myapp||j";
    assert_eq!(
        first[0].execution,
        crate::trigger::ExecutionId::for_tick(key, secs(10))
    );
    assert_eq!(got[4].attempt, 1, "a new tick starts again at attempt 1");
    assert_ne!(got[4].execution, first[0].execution);
    assert_eq!(
        got[4].execution,
        crate::trigger::ExecutionId::for_tick(key, secs(20))
    );
}

#[tokio::test]
async fn missed_ticks_are_replayed_serially_at_nominal_times() {
    let h = Harness::new().await;
    h.schedule(
        "j",
        sv1::Job {
            repeats: Some(6),
            ..every("@every 1s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(1)).await;
    h.stop.cancel();
    h.task.await.unwrap();
    // Down for 10 s, then back.
    h.clock.advance(TimeDelta::seconds(10));
    let h = Harness::on(h.store, h.clock, Some(h.sink)).await;
    h.settle().await;
    let log = h.deliveries("j");
    let scheduled: Vec<_> = log.iter().map(|d| d.scheduled).collect();
    assert_eq!(
        scheduled,
        [secs(1), secs(2), secs(3), secs(4), secs(5), secs(6)]
    );
    assert!(
        log[1..].iter().all(|d| d.at == secs(11)),
        "replayed at once after restart"
    );
}

#[tokio::test]
async fn undeliverable_triggers_are_staged_not_counted_and_released() {
    let h = Harness::new().await;
    h.sink.deliverable.store(false, Ordering::SeqCst);
    h.schedule(
        "j",
        sv1::Job {
            repeats: Some(2),
            ..every("@every 1s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(10)).await;
    assert!(h.deliveries("j").is_empty());
    assert_eq!(h.engine.sync().await.unwrap().staged, 1);

    h.sink.deliverable.store(true, Ordering::SeqCst);
    h.engine.release("app||default||myapp||");
    h.run_for(TimeDelta::seconds(5)).await;
    let log = h.deliveries("j");
    // Both ticks still happen (staging counted nothing), the first at release time.
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].scheduled, secs(1));
    assert_eq!(log[0].at, secs(10));
    assert_eq!(h.engine.sync().await.unwrap().staged, 0);
}

#[tokio::test]
async fn release_of_another_prefix_leaves_staged_jobs() {
    let h = Harness::new().await;
    h.sink.deliverable.store(false, Ordering::SeqCst);
    h.schedule("j", due("0s")).await;
    h.run_for(TimeDelta::seconds(1)).await;
    h.sink.deliverable.store(true, Ordering::SeqCst);
    h.engine.release("app||default||otherapp||");
    h.run_for(TimeDelta::seconds(1)).await;
    assert!(h.deliveries("j").is_empty());
    assert_eq!(h.engine.sync().await.unwrap().staged, 1);
}

#[tokio::test]
async fn overwrite_resets_progress_and_delete_stops_firing() {
    let h = Harness::new().await;
    h.schedule("j", every("@every 1s")).await;
    h.run_for(TimeDelta::seconds(3)).await;
    assert_eq!(h.deliveries("j").len(), 3);
    h.schedule(
        "j",
        sv1::Job {
            repeats: Some(1),
            ..every("@every 10s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(30)).await;
    let at: Vec<_> = h.deliveries("j").iter().map(|d| d.scheduled).collect();
    assert_eq!(at[3..], [secs(13)]);

    h.schedule("k", every("@every 1s")).await;
    h.run_for(TimeDelta::seconds(2)).await;
    h.delete("k").await;
    h.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(h.deliveries("k").len(), 2);
}

#[tokio::test]
async fn delete_by_prefix_stops_those_jobs_only() {
    let h = Harness::new().await;
    for n in ["a1", "a2", "b1"] {
        h.schedule(n, every("@every 1s")).await;
    }
    h.engine
        .delete_by_name_prefix(sv1::DeleteByNamePrefixRequest {
            name_prefix: "a".into(),
            metadata: meta(),
        })
        .await
        .unwrap();
    h.run_for(TimeDelta::seconds(3)).await;
    assert!(h.deliveries("a1").is_empty() && h.deliveries("a2").is_empty());
    assert_eq!(h.deliveries("b1").len(), 3);
}

#[tokio::test]
async fn trigger_carries_name_data_and_metadata() {
    let h = Harness::new().await;
    let data = prost_types::Any {
        type_url: "t".into(),
        value: b"v".to_vec(),
    };
    h.schedule(
        "my||job@name",
        sv1::Job {
            data: Some(data.clone()),
            ..due("0s")
        },
    )
    .await;
    h.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(h.deliveries("my||job@name").len(), 1);
}

#[tokio::test]
async fn impossible_schedule_is_kept_until_deleted_without_firing() {
    // Dapr's Scheduler keeps such a job: GET returns it until it is deleted
    // (e2e/dapr/differential.sh, B20).
    let h = Harness::new().await;
    h.schedule("never", every("0 0 0 30 2 *")).await;
    h.run_for(TimeDelta::days(3)).await;
    assert!(h.deliveries("never").is_empty());
    assert!(h.exists("never").await);
    let h = h.restart().await;
    h.run_for(TimeDelta::days(3)).await;
    assert!(h.deliveries("never").is_empty());
    assert!(h.exists("never").await, "kept across a restart too");
    h.delete("never").await;
    assert!(!h.exists("never").await);
}

#[tokio::test]
async fn impossible_schedule_after_a_due_time_fires_once_and_is_kept() {
    let h = Harness::new().await;
    h.schedule(
        "once",
        sv1::Job {
            due_time: Some("0s".into()),
            ..every("0 0 0 30 2 *")
        },
    )
    .await;
    h.run_for(TimeDelta::days(3)).await;
    assert_eq!(h.deliveries("once").len(), 1);
    assert!(h.exists("once").await, "kept after its only tick");
    let h = h.restart().await;
    h.run_for(TimeDelta::days(3)).await;
    assert_eq!(
        h.deliveries("once").len(),
        1,
        "not fired again after a restart"
    );
    assert!(h.exists("once").await);
}

#[tokio::test]
async fn loop_ended_tells_when_the_trigger_loop_is_gone() {
    let h = Harness::new().await;
    let ended = tokio::time::timeout(Duration::from_millis(50), h.engine.loop_ended()).await;
    assert!(ended.is_err(), "the loop runs");
    h.stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), h.engine.loop_ended())
        .await
        .expect("the loop has ended");
}

mod abandoned_tests;
mod adopt_tests;
mod batch_tests;
mod capacity_tests;
mod exhausted_tests;
mod gated_tests;
mod horizon_tests;
