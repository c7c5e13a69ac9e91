//! What only etcd can show: several clients (replicas) on one cluster, a `kill -9` of etcd,
//! watches across a restart and a compaction, and the key layout Dapr's tools expect. The
//! op semantics themselves run in the shared suite (`store::tests`, module `etcd`).

use std::time::Duration;

use futures_util::StreamExt;
use prost::Message;

use super::client::{Client, RangeRequest, prefix_end, read_key};
use super::keys::OWN;
use super::testing::{EtcdServer, fresh_namespace, shared};
use super::{Change, Etcd, job_value};
use crate::proto::jobsd_store::{
    CronJob, EtcdJob, FinishedJob, ResultRecord, RunOutcome, StoredCounter, StoredJob, StoredRun,
};
use crate::store::{Op, OpResult, Store};

/// Bound on waiting for one watch event (a re-created watch backs off 0.8–1.2 s first).
const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) fn job(generation: u64) -> StoredJob {
    StoredJob {
        generation,
        ..StoredJob::default()
    }
}

pub(super) fn put(key: &str, generation: u64, create_only: bool) -> Op {
    Op::PutJob {
        key: key.into(),
        job: job(generation),
        create_only,
        due: None,
    }
}

fn put_counter(key: &str, generation: u64, count: u32) -> Op {
    Op::PutCounter {
        key: key.into(),
        counter: StoredCounter {
            generation,
            count,
            ..StoredCounter::default()
        },
    }
}

/// Result `n` of job `key`, a success told apart by its error text `tag`, keeping `limit` runs.
pub(super) fn result(key: &str, generation: u64, tag: &str, limit: u32) -> Op {
    Op::RecordResult(Box::new(ResultRecord {
        key: key.into(),
        generation,
        progress: None,
        finish: false,
        dropped: false,
        run: Some(StoredRun {
            outcome: RunOutcome::Success.into(),
            error: tag.into(),
            ..StoredRun::default()
        }),
        history_limit: limit,
        finished_at: None,
        skipped_ticks: 0,
        pause: None,
        dead_letter: None,
        hold: None,
        release: Vec::new(),
        resume: false,
    }))
}

/// Every run of `key` (oldest first) as `(seq, tag)`; checks the status counted each once.
async fn history(store: &dyn Store, key: &str) -> Vec<(u64, String)> {
    let mut runs: Vec<(u64, String)> = store
        .list_runs(key, None, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|(seq, run)| (seq, run.error))
        .collect();
    runs.reverse();
    let status = store.get_counter(key).await.unwrap().expect("status");
    assert_eq!(status.runs, runs.len() as u64, "{key}: runs in the status");
    assert_eq!(status.succeeded, runs.len() as u64, "{key}: successes");
    runs
}

/// Asserts `runs` are numbered 0.. without a gap and hold each of `tags` exactly once.
fn assert_each_once(runs: &[(u64, String)], mut tags: Vec<String>) {
    let seqs: Vec<u64> = runs.iter().map(|r| r.0).collect();
    assert_eq!(seqs, (0..runs.len() as u64).collect::<Vec<_>>());
    let mut got: Vec<String> = runs.iter().map(|r| r.1.clone()).collect();
    got.sort();
    tags.sort();
    assert_eq!(got, tags);
}

/// Creates job `key` of `generation`, records a run `first`, then a finishing run `last`:
/// the job is gone, its finished record and two runs are stored.
async fn run_twice_and_finish(store: &dyn Store, key: &str, generation: u64) {
    write1(store, put(key, generation, true)).await;
    write1(store, result(key, generation, "first", 10)).await;
    write1(store, finishing(key, generation)).await;
}

/// A finishing result of `key`'s `generation`.
pub(super) fn finishing(key: &str, generation: u64) -> Op {
    let Op::RecordResult(mut last) = result(key, generation, "last", 10) else {
        unreachable!()
    };
    last.finish = true;
    last.finished_at = Some(prost_types::Timestamp {
        seconds: 1_800_000_000,
        nanos: 0,
    });
    Op::RecordResult(last)
}

/// The value of each unlabelled series `metrics` shows now, by name.
async fn series_of(metrics: &crate::observe::Metrics) -> impl Fn(&str) -> f64 {
    let text = metrics
        .render(crate::observe::metrics::Format::Prometheus)
        .await
        .unwrap();
    move |series: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{series} missing in\n{text}"))
    }
}

pub(super) async fn write1(store: &dyn Store, op: Op) -> OpResult {
    let results = store.write(vec![op]).await.expect("write");
    assert_eq!(results.len(), 1);
    results[0]
}

pub(super) async fn next_change(
    changes: &mut (impl futures_util::Stream<Item = Change> + Unpin),
) -> Change {
    tokio::time::timeout(EVENT_TIMEOUT, changes.next())
        .await
        .expect("no watch event in time")
        .expect("watch ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_creating_one_key_have_exactly_one_winner() {
    let endpoint = shared().endpoint();
    let ns = fresh_namespace();
    let a = Etcd::connect(&[&endpoint], &ns).await.unwrap();
    let b = Etcd::connect(&[&endpoint], &ns).await.unwrap();
    for i in 0..20u64 {
        let key = format!("app||ns||a||k{i}");
        let (ra, rb) = tokio::join!(
            a.write(vec![put(&key, 2 * i, true)]),
            b.write(vec![put(&key, 2 * i + 1, true)])
        );
        let winner = match (ra.unwrap()[0], rb.unwrap()[0]) {
            (OpResult::Done, OpResult::AlreadyExists) => 2 * i,
            (OpResult::AlreadyExists, OpResult::Done) => 2 * i + 1,
            other => panic!("{key}: {other:?}"),
        };
        // The stored job is the winner's.
        assert_eq!(a.get_job(&key).await.unwrap().unwrap().generation, winner);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_for_a_job_another_client_overwrote_is_skipped() {
    let endpoint = shared().endpoint();
    let ns = fresh_namespace();
    let a = Etcd::connect(&[&endpoint], &ns).await.unwrap();
    let b = Etcd::connect(&[&endpoint], &ns).await.unwrap();
    assert_eq!(write1(&a, put("k", 1, true)).await, OpResult::Done);
    assert_eq!(write1(&a, put_counter("k", 1, 1)).await, OpResult::Done);
    assert_eq!(write1(&b, put("k", 2, false)).await, OpResult::Done);
    assert_eq!(write1(&a, put_counter("k", 1, 2)).await, OpResult::Skipped);
    assert_eq!(
        write1(
            &a,
            Op::FinishJob {
                key: "k".into(),
                generation: 1
            }
        )
        .await,
        OpResult::Skipped
    );
    assert_eq!(a.get_job("k").await.unwrap(), Some(job(2)));
    assert_eq!(a.get_counter("k").await.unwrap(), None);
}

/// A create goes lean where no finished record of its name is stored: it writes its job and
/// index key and nothing else, so a counter planted by hand (of another generation: the ops
/// never leave one) stays, and the job loads without it. Where a finished record is stored,
/// the create drops it and its runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_writes_only_its_job_unless_a_finished_record_is_stored() {
    let endpoint = shared().endpoint();
    let ns = fresh_namespace();
    let s = Etcd::connect(&[&endpoint], &ns).await.unwrap();
    let raw = Client::connect(&[&endpoint]).unwrap();
    let key = "app||default||myapp||lean";
    let stray = StoredCounter {
        generation: 1,
        count: 5,
        ..StoredCounter::default()
    };
    let counter_key = format!("{ns}/counters/{key}");
    raw.put(counter_key.clone(), stray.encode_to_vec())
        .await
        .unwrap();
    assert_eq!(write1(&s, put(key, 2, true)).await, OpResult::Done);
    assert_eq!(write1(&s, put(key, 3, true)).await, OpResult::AlreadyExists);
    let got = raw.range(read_key(counter_key)).await.unwrap();
    assert_eq!(got.kvs.len(), 1, "the lean create left the counter alone");
    let mut scan = s.scan("", 10).await.unwrap();
    let loaded = scan.next_page().await.unwrap().unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(
        (loaded[0].job.generation, loaded[0].counter.clone()),
        (2, None)
    );
    // A one-shot that ran and finished, created again: its finished record and runs go.
    let again = "app||default||myapp||again";
    run_twice_and_finish(&s, again, 7).await;
    assert!(s.get_finished(again).await.unwrap().is_some());
    // Sent together, so that one txn may hold a lean create, one to send again and one refused.
    let results = futures_util::future::join_all([
        s.write(vec![put("app||default||myapp||new", 9, true)]),
        s.write(vec![put(again, 8, true)]),
        s.write(vec![put(key, 4, true)]),
    ])
    .await;
    let results: Vec<_> = results.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(
        results,
        [
            [OpResult::Done],
            [OpResult::Done],
            [OpResult::AlreadyExists]
        ]
    );
    assert_eq!(s.get_finished(again).await.unwrap(), None);
    assert!(s.list_runs(again, None, 10).await.unwrap().is_empty());
    assert_eq!(s.get_job(again).await.unwrap(), Some(job(8)));
}

/// A write of many puts (a batch create's run) goes without a read, in as few txns as etcd
/// takes (112 puts each under etcd's default 128 ops), each put answered as a create alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_many_puts_is_sent_in_txns_of_as_many_puts_as_etcd_takes() {
    let endpoint = shared().endpoint();
    let s = Etcd::connect(&[&endpoint], &fresh_namespace())
        .await
        .unwrap();
    let name = |n: &str| format!("app||default||myapp||{n}");
    assert_eq!(
        write1(&s, put(&name("exists"), 1, true)).await,
        OpResult::Done
    );
    run_twice_and_finish(&s, &name("again"), 1).await;
    let metrics = crate::observe::Metrics::replica(false);
    s.observe(metrics.store());

    let mut ops: Vec<Op> = (0..297)
        .map(|i| put(&name(&format!("n{i}")), 2, true))
        .collect();
    ops.insert(5, put(&name("exists"), 2, true));
    ops.insert(150, put(&name("again"), 2, true));
    ops.push(put(&name("over"), 2, false));
    assert_eq!(ops.len(), 300);
    let results = s.write(ops).await.unwrap();
    let refused: Vec<usize> = (0..results.len())
        .filter(|&i| results[i] != OpResult::Done)
        .collect();
    assert_eq!(refused, [5]);
    assert_eq!(results[5], OpResult::AlreadyExists);

    let value = series_of(&metrics).await;
    // 112 + 112 + 76 puts lean, then the re-create of a finished name thorough.
    assert_eq!(value("jobsd_store_commit_duration_seconds_count"), 4.0);
    assert_eq!(value("jobsd_store_commit_ops_sum"), 301.0);
    assert_eq!(s.get_job(&name("exists")).await.unwrap(), Some(job(1)));
    assert_eq!(s.get_job(&name("again")).await.unwrap(), Some(job(2)));
    assert_eq!(s.get_finished(&name("again")).await.unwrap(), None);
    assert!(
        s.list_runs(&name("again"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.list_jobs("app||default||myapp||").await.unwrap().len(),
        300
    );
}

/// A replica's store metrics count etcd txns: each batch of creates one txn, with its ops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observed_store_records_each_txn_and_its_ops() {
    let endpoint = shared().endpoint();
    let s = Etcd::connect(&[&endpoint], &fresh_namespace())
        .await
        .unwrap();
    let metrics = crate::observe::Metrics::replica(false);
    s.observe(metrics.store());
    let creates =
        (0..5).map(|i| s.write(vec![put(&format!("app||default||myapp||m{i}"), 1, true)]));
    for result in futures_util::future::join_all(creates).await {
        assert_eq!(result.unwrap(), [OpResult::Done]);
    }
    // The general way: a read, then a compare-and-swap of a counter.
    assert_eq!(
        write1(&s, put_counter("app||default||myapp||m0", 1, 1)).await,
        OpResult::Done
    );
    let value = series_of(&metrics).await;
    let txns = value("jobsd_store_commit_duration_seconds_count");
    assert!(
        (2.0..=6.0).contains(&txns),
        "5 creates (1–5 txns) and a counter: {txns}"
    );
    assert_eq!(value("jobsd_store_commit_ops_sum"), 6.0);
    assert_eq!(value("jobsd_store_commit_failures_total"), 0.0);
    // The counter's job was never watched: its keys were read first.
    assert_eq!(value("jobsd_store_reads_before_commit_total"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_follow_go_etcd_crons_layout() {
    let endpoint = shared().endpoint();
    let ns = fresh_namespace();
    let s = Etcd::connect(&[&endpoint], &ns).await.unwrap();
    let key = "app||default||myapp||job1";
    write1(&s, put(key, 7, true)).await;
    write1(&s, put_counter(key, 7, 3)).await;
    let raw = Client::connect(&[&endpoint]).unwrap();
    let got = raw
        .range(read_key(format!("{ns}/jobs/{key}")))
        .await
        .unwrap();
    // The value is go-etcd-cron's `stored.Job` (what the Dapr CLI decodes): `partition_id` is
    // the generation (`values_of_…` below and `job_value_tests.rs` check the rest).
    let value = &got.kvs[0].value;
    assert_eq!(job_value::layout(value), job_value::Layout::Cron);
    assert_eq!(EtcdJob::decode(&**value).unwrap().partition_id, 7);
    assert_eq!(job_value::decode(key, value).unwrap(), job(7));
    // The counter is go-etcd-cron's `stored.Counter` in its first four fields (the CLI's COUNT
    // and LAST TRIGGER), jobsd's status after them.
    let got = raw
        .range(read_key(format!("{ns}/counters/{key}")))
        .await
        .unwrap();
    let counter = StoredCounter::decode(&*got.kvs[0].value).unwrap();
    assert_eq!((counter.generation, counter.count), (7, 3));
}

/// A job in the layout of etcd values before they followed go-etcd-cron's (an older jobsd's),
/// and one a Dapr Scheduler wrote, are read by every read and by the writer; a write puts
/// go-etcd-cron's layout in their place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_of_an_older_jobsd_and_of_a_dapr_scheduler_are_read_and_rewritten() {
    let endpoint = shared().endpoint();
    let ns = fresh_namespace();
    let s = Etcd::connect(&[&endpoint], &ns).await.unwrap();
    let raw = Client::connect(&[&endpoint]).unwrap();
    let meta = crate::proto::dapr_scheduler::JobMetadata {
        app_id: "a".into(),
        namespace: "default".into(),
        ..Default::default()
    };
    let dapr_job = crate::proto::dapr_scheduler::Job {
        schedule: Some("@every 1h".into()),
        ..Default::default()
    };
    let old = StoredJob {
        job: Some(dapr_job.clone()),
        metadata: Some(meta.clone()),
        generation: 5,
        labels: [("team".to_owned(), "x".to_owned())].into(),
        ..StoredJob::default()
    };
    let (old_key, dapr_key) = ("app||default||a||old", "app||default||a||dapr");
    raw.put(format!("{ns}/jobs/{old_key}"), old.encode_to_vec())
        .await
        .unwrap();
    let dapr_value = EtcdJob {
        partition_id: 6,
        job: Some(CronJob {
            schedule: Some("@every 1h".into()),
            metadata: Some(prost_types::Any {
                type_url: job_value::METADATA_TYPE_URL.into(),
                value: meta.encode_to_vec(),
            }),
            ..CronJob::default()
        }),
        ..EtcdJob::default()
    };
    raw.put(format!("{ns}/jobs/{dapr_key}"), dapr_value.encode_to_vec())
        .await
        .unwrap();
    let from_dapr = StoredJob {
        job: Some(dapr_job),
        metadata: Some(meta),
        generation: 6,
        ..StoredJob::default()
    };

    assert_eq!(s.get_job(old_key).await.unwrap(), Some(old.clone()));
    assert_eq!(s.get_job(dapr_key).await.unwrap(), Some(from_dapr.clone()));
    let listed = s.list_jobs("app||default||a||").await.unwrap();
    assert_eq!(
        listed,
        [
            (dapr_key.to_owned(), from_dapr.clone()),
            (old_key.to_owned(), old.clone())
        ]
    );
    // The writer reads them (a counter needs its job's generation), and so does a scan.
    assert_eq!(
        write1(&s, put_counter(dapr_key, 6, 2)).await,
        OpResult::Done
    );
    assert_eq!(write1(&s, put_counter(old_key, 5, 1)).await, OpResult::Done);
    let mut scan = s.scan("app||default||a||", 10).await.unwrap();
    let page = scan.next_page().await.unwrap().unwrap();
    let counts: Vec<(u64, Option<u32>)> = page
        .iter()
        .map(|l| (l.job.generation, l.counter.as_ref().map(|c| c.count)))
        .collect();
    assert_eq!(counts, [(6, Some(2)), (5, Some(1))]);
    // The active page reads them too.
    let items = s
        .page(crate::store::PageOf::Active, "app||default||a||", None, 10)
        .await
        .unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[1].job, old);

    // An overwrite of the older jobsd's job writes go-etcd-cron's layout, labels kept beside.
    let again = StoredJob {
        generation: 8,
        ..old
    };
    let overwrite = Op::PutJob {
        key: old_key.into(),
        job: again.clone(),
        create_only: false,
        due: None,
    };
    assert_eq!(write1(&s, overwrite).await, OpResult::Done);
    let got = raw
        .range(read_key(format!("{ns}/jobs/{old_key}")))
        .await
        .unwrap();
    let value = &got.kvs[0].value;
    assert_eq!(job_value::layout(value), job_value::Layout::Cron);
    assert_eq!(EtcdJob::decode(&**value).unwrap().partition_id, 8);
    assert_eq!(s.get_job(old_key).await.unwrap(), Some(again));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_larger_than_one_txn_is_applied_whole() {
    let endpoint = shared().endpoint();
    let s = Etcd::connect(&[&endpoint], &fresh_namespace())
        .await
        .unwrap();
    let ops: Vec<Op> = (0..300)
        .map(|i| put(&format!("k{i:03}"), i, true))
        .collect();
    let results = s.write(ops).await.unwrap();
    assert_eq!(results, vec![OpResult::Done; 300]);
    let finish: Vec<Op> = (0..300)
        .map(|i| Op::FinishJob {
            key: format!("k{i:03}"),
            generation: i,
        })
        .collect();
    assert_eq!(s.write(finish).await.unwrap(), vec![OpResult::Done; 300]);
    assert!(s.list_jobs("").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_scan_page_past_1024_keys() {
    let endpoint = shared().endpoint();
    let s = Etcd::connect(&[&endpoint], &fresh_namespace())
        .await
        .unwrap();
    let ops: Vec<Op> = (0..2100)
        .map(|i| put(&format!("k{i:04}"), i, true))
        .collect();
    s.write(ops).await.unwrap();
    s.write(vec![put_counter("k1500", 1500, 9)]).await.unwrap();
    let listed = s.list_jobs("").await.unwrap();
    assert_eq!(listed.len(), 2100);
    assert!(listed.windows(2).all(|w| w[0].0 < w[1].0));
    let mut scan = s.scan("k1", 333).await.unwrap();
    let mut n = 0;
    while let Some(page) = scan.next_page().await.unwrap() {
        assert!(page.len() <= 333);
        for l in page {
            assert_eq!(l.counter.is_some(), l.key == "k1500", "{}", l.key);
            n += 1;
        }
    }
    assert_eq!(n, 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_of_etcd() {
    let mut server = EtcdServer::start();
    let s = std::sync::Arc::new(Etcd::connect(&[server.endpoint()], "dapr").await.unwrap());
    let tasks: Vec<_> = (0..100u64)
        .map(|i| {
            let s = std::sync::Arc::clone(&s);
            tokio::spawn(async move {
                let key = format!("k{i:03}");
                s.write(vec![put(&key, i, true), put_counter(&key, i, 1)])
                    .await
                    .unwrap()
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), [OpResult::Done, OpResult::Done]);
    }
    server.kill();
    assert!(!server.is_up(), "etcd still answers after kill -9");
    // A write while etcd is down waits and lands once it is back.
    let pending = {
        let s = std::sync::Arc::clone(&s);
        tokio::spawn(async move { s.write(vec![put("late", 1000, true)]).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(60), pending)
            .await
            .expect("write after restart")
            .unwrap()
            .unwrap(),
        [OpResult::Done]
    );
    let listed = s.list_jobs("k").await.unwrap();
    assert_eq!(listed.len(), 100);
    for i in 0..100u64 {
        let key = format!("k{i:03}");
        assert_eq!(s.get_counter(&key).await.unwrap().unwrap().generation, i);
    }
    // A fresh client sees the same.
    let t = Etcd::connect(&[server.endpoint()], "dapr").await.unwrap();
    assert_eq!(t.list_jobs("").await.unwrap().len(), 101);
    s.close().await.unwrap();
    t.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_goes_on_across_an_etcd_restart() {
    let mut server = EtcdServer::start();
    let s = Etcd::connect(&[server.endpoint()], "dapr").await.unwrap();
    // From the revision after the current one: the first write is seen however long the
    // watch takes to be set up.
    let from = s.revision().await.unwrap() + 1;
    let mut changes = Box::pin(s.watch_jobs(from));
    write1(&s, put("a", 1, true)).await;
    match next_change(&mut changes).await {
        Change::Put { key, value, .. } => {
            let decoded = Change::job(&key, &value).unwrap();
            assert_eq!((key.as_str(), decoded), ("a", job(1)));
        }
        other => panic!("{other:?}"),
    }
    server.kill();
    assert!(!server.is_up(), "etcd still answers after kill -9");
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart();
    write1(&s, put("b", 2, true)).await;
    write1(&s, Op::DeleteJob { key: "a".into() }).await;
    match next_change(&mut changes).await {
        Change::Put { key, .. } => assert_eq!(key, "b"),
        other => panic!("{other:?}"),
    }
    match next_change(&mut changes).await {
        Change::Delete { key, .. } => assert_eq!(key, "a"),
        other => panic!("{other:?}"),
    }
    // Counters are not job changes.
    write1(&s, put_counter("b", 2, 1)).await;
    write1(&s, put("c", 3, true)).await;
    match next_change(&mut changes).await {
        Change::Put { key, .. } => assert_eq!(key, "c"),
        other => panic!("{other:?}"),
    }
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_compacted_revision_asks_for_a_resync() {
    let endpoint = shared().endpoint();
    let s = Etcd::connect(&[&endpoint], &fresh_namespace())
        .await
        .unwrap();
    let start = s.revision().await.unwrap();
    write1(&s, put("a", 1, true)).await;
    write1(&s, put("b", 2, true)).await;
    // From a revision still in history, every change arrives in order.
    let mut changes = Box::pin(s.watch_jobs(start + 1));
    for want in ["a", "b"] {
        match next_change(&mut changes).await {
            Change::Put { key, .. } => assert_eq!(key, want),
            other => panic!("{other:?}"),
        }
    }
    let now = s.revision().await.unwrap();
    let raw = Client::connect(&[&endpoint]).unwrap();
    raw.compact(now).await.unwrap();
    let mut old = Box::pin(s.watch_jobs(start + 1));
    match next_change(&mut old).await {
        Change::Resync { compact_revision } => assert!(compact_revision >= now),
        other => panic!("{other:?}"),
    }
    assert!(old.next().await.is_none(), "a resync ends the stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lives_beside_go_etcd_crons_keys() {
    let endpoint = shared().endpoint();
    let ns = fresh_namespace();
    let s = Etcd::connect(&[&endpoint], &ns).await.unwrap();
    let key = "app||default||myapp||job1";
    run_twice_and_finish(&s, key, 7).await;
    let raw = Client::connect(&[&endpoint]).unwrap();
    let everything = raw
        .range(RangeRequest {
            key: format!("{ns}/").into_bytes(),
            range_end: prefix_end(format!("{ns}/").as_bytes()),
            ..RangeRequest::default()
        })
        .await
        .unwrap();
    let kvs: Vec<_> = everything
        .kvs
        .iter()
        .filter(|kv| !kv.key.starts_with(format!("{ns}/writers/").as_bytes()))
        .collect();
    let keys: Vec<String> = kvs
        .iter()
        .map(|kv| String::from_utf8(kv.key.clone()).unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            format!("{ns}/{OWN}/finished/{key}"),
            format!("{ns}/{OWN}/runs/{key}\x000000000000000000"),
            format!("{ns}/{OWN}/runs/{key}\x000000000000000001"),
        ]
    );
    let finished = FinishedJob::decode(&*kvs[0].value).unwrap();
    assert_eq!(finished.job, Some(job(7)));
    assert_eq!(finished.counter.map(|c| c.runs), Some(2));
    let run = StoredRun::decode(&*kvs[2].value).unwrap();
    assert_eq!(run.error, "last");
    // Neither go-etcd-cron's watch of `<ns>/jobs/` nor a tool listing the prefix `<ns>/jobs`
    // (Dapr's tests count the Scheduler's jobs so) sees jobsd's own keys.
    assert!(!format!("{ns}/{OWN}/").starts_with(&format!("{ns}/jobs")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_clients_recording_results_of_one_job_keep_every_run_once() {
    let endpoint = shared().endpoint();
    let ns = fresh_namespace();
    let a = std::sync::Arc::new(Etcd::connect(&[&endpoint], &ns).await.unwrap());
    let b = std::sync::Arc::new(Etcd::connect(&[&endpoint], &ns).await.unwrap());
    assert_eq!(write1(&*a, put("k", 1, true)).await, OpResult::Done);
    // Four tasks per client, each recording results one after another: the clients' commits
    // race on the job's counter, and each client also batches its own tasks' results.
    let mut tasks = Vec::new();
    let mut tags = Vec::new();
    for (name, store) in [("a", &a), ("b", &b)] {
        for t in 0..4 {
            let store = std::sync::Arc::clone(store);
            let mine: Vec<String> = (0..10).map(|i| format!("{name}{t}-{i}")).collect();
            tags.extend(mine.clone());
            tasks.push(tokio::spawn(async move {
                for tag in mine {
                    let done = store.write(vec![result("k", 1, &tag, 1000)]).await.unwrap();
                    assert_eq!(done, [OpResult::Done], "{tag}");
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_each_once(&history(&*a, "k").await, tags);
    // Both clients read the same history.
    assert_eq!(history(&*a, "k").await, history(&*b, "k").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_larger_than_one_txn_are_applied_whole() {
    let endpoint = shared().endpoint();
    let s = Etcd::connect(&[&endpoint], &fresh_namespace())
        .await
        .unwrap();
    let keys: Vec<String> = (0..150).map(|i| format!("k{i:03}")).collect();
    let puts: Vec<Op> = keys.iter().map(|k| put(k, 1, true)).collect();
    s.write(puts).await.unwrap();
    // Three rounds of one result per job, the last two past a limit of 1 (each prunes).
    for round in 0..3 {
        let ops: Vec<Op> = keys
            .iter()
            .map(|k| result(k, 1, &format!("{k}-{round}"), 1))
            .collect();
        assert_eq!(s.write(ops).await.unwrap(), vec![OpResult::Done; 150]);
    }
    for k in &keys {
        let runs = s.list_runs(k, None, 10).await.unwrap();
        assert_eq!(runs.len(), 1, "{k}");
        assert_eq!(
            (runs[0].0, runs[0].1.error.as_str()),
            (2, &*format!("{k}-2"))
        );
    }
    // A request of many prefix deletes goes in several txns too.
    let deletes: Vec<Op> = keys
        .iter()
        .map(|k| Op::DeletePrefix { prefix: k.clone() })
        .collect();
    assert_eq!(
        s.write(deletes).await.unwrap(),
        vec![OpResult::Deleted(1); 150]
    );
    for k in &keys {
        assert!(s.list_runs(k, None, 10).await.unwrap().is_empty(), "{k}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_records_of_large_jobs_are_split_across_txns() {
    let endpoint = shared().endpoint();
    let s = Etcd::connect(&[&endpoint], &fresh_namespace())
        .await
        .unwrap();
    // Four jobs of 400 kB: their finished records cannot share one txn (1 MiB).
    let big = |generation| StoredJob {
        generation,
        labels: [("big".to_owned(), "x".repeat(400_000))].into(),
        ..StoredJob::default()
    };
    let keys: Vec<String> = (0..4).map(|i| format!("big{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        let op = Op::PutJob {
            key: k.clone(),
            job: big(i as u64),
            create_only: true,
            due: None,
        };
        assert_eq!(write1(&s, op).await, OpResult::Done);
    }
    let finishing: Vec<Op> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let Op::RecordResult(mut r) = result(k, i as u64, "last", 10) else {
                unreachable!()
            };
            r.finish = true;
            r.finished_at = Some(prost_types::Timestamp::default());
            Op::RecordResult(r)
        })
        .collect();
    assert_eq!(s.write(finishing).await.unwrap(), vec![OpResult::Done; 4]);
    for (i, k) in keys.iter().enumerate() {
        let finished = s.get_finished(k).await.unwrap().expect("finished");
        assert_eq!(finished.job, Some(big(i as u64)));
        assert_eq!(s.list_runs(k, None, 10).await.unwrap().len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_recorded_across_a_kill_9_of_etcd_are_neither_lost_nor_doubled() {
    let mut server = EtcdServer::start();
    let s = std::sync::Arc::new(Etcd::connect(&[server.endpoint()], "dapr").await.unwrap());
    let keys: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
    for k in &keys {
        write1(&*s, put(k, 1, true)).await;
    }
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = keys
        .iter()
        .map(|k| {
            let s = std::sync::Arc::clone(&s);
            let written = std::sync::Arc::clone(&written);
            let k = k.clone();
            tokio::spawn(async move {
                for i in 0..30 {
                    let tag = format!("{k}-{i}");
                    let done = s.write(vec![result(&k, 1, &tag, 1000)]).await.unwrap();
                    assert_eq!(done, [OpResult::Done], "{tag}");
                    written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Kill etcd while every task has results to write (some in flight), and bring it back.
    while written.load(std::sync::atomic::Ordering::Relaxed) < 25 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    server.kill();
    assert!(written.load(std::sync::atomic::Ordering::Relaxed) < 150);
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("results after restart")
            .unwrap();
    }
    for k in &keys {
        let tags = (0..30).map(|i| format!("{k}-{i}")).collect();
        assert_each_once(&history(&*s, k).await, tags);
    }
    s.close().await.unwrap();
}
