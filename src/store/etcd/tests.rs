//! What only etcd can show: several clients (replicas) on one cluster, a `kill -9` of etcd,
//! watches across a restart and a compaction, and the key layout Dapr's tools expect. The
//! op semantics themselves run in the shared suite (`store::tests`, module `etcd`).

use std::time::Duration;

use futures_util::StreamExt;
use prost::Message;

use super::client::{Client, read_key};
use super::testing::{EtcdServer, fresh_namespace, shared};
use super::{Change, Etcd};
use crate::proto::store::{StoredCounter, StoredJob};
use crate::store::{Op, OpResult, Store};

/// Bound on waiting for one watch event (a re-created watch backs off 0.8–1.2 s first).
const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

fn job(generation: u64) -> StoredJob {
    StoredJob {
        generation,
        ..StoredJob::default()
    }
}

fn put(key: &str, generation: u64, create_only: bool) -> Op {
    Op::PutJob {
        key: key.into(),
        job: job(generation),
        create_only,
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

async fn write1(store: &dyn Store, op: Op) -> OpResult {
    let results = store.write(vec![op]).await.expect("write");
    assert_eq!(results.len(), 1);
    results[0]
}

async fn next_change(changes: &mut (impl futures_util::Stream<Item = Change> + Unpin)) -> Change {
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
    assert_eq!(StoredJob::decode(&*got.kvs[0].value).unwrap(), job(7));
    let got = raw
        .range(read_key(format!("{ns}/counters/{key}")))
        .await
        .unwrap();
    assert_eq!(StoredCounter::decode(&*got.kvs[0].value).unwrap().count, 3);
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
        Change::Put { key, job: j, .. } => assert_eq!((key.as_str(), *j), ("a", job(1))),
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
