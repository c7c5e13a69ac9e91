//! One suite of op semantics, run against every backend (`memory::*`, `redb::*`, `etcd::*`),
//! plus what only a file can show (reopen, close) and model checks that the backends agree.

use std::sync::Arc;

use prost::Message;
use prost_types::{Any, Timestamp};
use tempfile::TempDir;

use super::tables::Table;
use super::*;
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_store::stored_job::Begin;

/// A record written as raw bytes before the store opens (to plant corrupt or orphan data).
type Raw<'a> = (Table, &'a str, Vec<u8>);

/// A store under test and what keeps its files alive.
struct Fixture {
    /// The store, as the engine holds it.
    store: Arc<dyn Store>,
    /// The data dir of a `Redb`.
    _dir: Option<TempDir>,
}

/// Makes a store holding `raw`.
type Make = fn(&[Raw<'_>]) -> Fixture;

fn memory(raw: &[Raw<'_>]) -> Fixture {
    let store = Memory::new();
    for (table, key, value) in raw {
        store.put_raw(*table, key, value);
    }
    Fixture {
        store: Arc::new(store),
        _dir: None,
    }
}

fn redb(raw: &[Raw<'_>]) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    if !raw.is_empty() {
        plant_raw(dir.path(), raw);
    }
    let store = Redb::open(dir.path()).expect("open");
    Fixture {
        store: Arc::new(store),
        _dir: Some(dir),
    }
}

/// An `Etcd` store on the etcd this test process shares, in a namespace of its own.
fn etcd(raw: &[Raw<'_>]) -> Fixture {
    Fixture {
        store: super::etcd::testing::shared_store(raw),
        _dir: None,
    }
}

/// Writes `raw` into the database file with redb directly.
fn plant_raw(dir: &std::path::Path, raw: &[Raw<'_>]) {
    let db = ::redb::Database::create(dir.join(super::redb::FILE_NAME)).expect("create");
    let txn = db.begin_write().expect("begin");
    for (table, key, value) in raw {
        let def: ::redb::TableDefinition<&str, &[u8]> = ::redb::TableDefinition::new(table.name());
        txn.open_table(def)
            .expect("table")
            .insert(*key, value.as_slice())
            .expect("insert");
    }
    txn.commit().expect("commit");
}

/// A realistic job of generation `generation`; `tag` makes payloads distinguishable.
fn job(generation: u64, tag: &str) -> StoredJob {
    StoredJob {
        job: Some(sv1::Job {
            schedule: Some("@every 1s".into()),
            repeats: Some(3),
            due_time: None,
            ttl: Some("1h".into()),
            data: Some(Any {
                type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
                value: tag.as_bytes().to_vec(),
            }),
            failure_policy: None,
        }),
        metadata: Some(sv1::JobMetadata {
            app_id: "app".into(),
            namespace: "ns".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }),
        generation,
        begin: Some(Begin::Start(Timestamp {
            seconds: 1_700_000_000,
            nanos: 0,
        })),
        expiration: Some(Timestamp {
            seconds: 1_700_003_600,
            nanos: 0,
        }),
        labels: [("team".to_owned(), tag.to_owned())].into(),
        traceparent: String::new(),
        policy: None,
        failure_policy: None,
    }
}

fn counter(generation: u64, count: u32) -> StoredCounter {
    StoredCounter {
        generation,
        count,
        last_trigger: Some(Timestamp {
            seconds: 1_700_000_000 + i64::from(count),
            nanos: 0,
        }),
        attempts: 0,
        ..StoredCounter::default()
    }
}

/// A pause for `reason`.
fn paused(reason: &str) -> Paused {
    Paused {
        at: Some(Timestamp {
            seconds: 1_700_000_005,
            nanos: 0,
        }),
        reason: reason.into(),
        note: format!("why: {reason}"),
    }
}

/// A dead-letter job to create under `key`, else `fallback`.
fn dead_letter(key: &str, fallback: &str) -> DeadLetter {
    DeadLetter {
        key: key.into(),
        fallback_key: fallback.into(),
        job: Some(job(7, "dead letter")),
        due_ms: None,
    }
}

fn put(key: &str, job: StoredJob, create_only: bool) -> Op {
    Op::PutJob {
        key: key.into(),
        job,
        create_only,
        due: None,
    }
}

fn put_counter(key: &str, counter: StoredCounter) -> Op {
    Op::PutCounter {
        key: key.into(),
        counter,
    }
}

fn finish(key: &str, generation: u64) -> Op {
    Op::FinishJob {
        key: key.into(),
        generation,
    }
}

/// Bytes that prost refuses (a length-delimited field 1 longer than the buffer).
fn garbage() -> Vec<u8> {
    vec![0x0a, 0x7f, 0x01]
}

async fn write1(store: &dyn Store, op: Op) -> OpResult {
    let results = store.write(vec![op]).await.expect("write");
    assert_eq!(results.len(), 1);
    results[0]
}

async fn keys(store: &dyn Store, prefix: &str) -> Vec<String> {
    let listed = store.list_jobs(prefix).await.expect("list");
    listed.into_iter().map(|(k, _)| k).collect()
}

async fn scan_all(store: &dyn Store, prefix: &str, page_size: usize) -> Vec<Vec<LoadedJob>> {
    let mut scan = store.scan(prefix, page_size).await.expect("scan");
    let mut pages = Vec::new();
    while let Some(page) = scan.next_page().await.expect("page") {
        pages.push(page);
    }
    pages
}

// ---- the shared suite ----

async fn create_only_on_existing_key_leaves_job_unchanged(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    assert_eq!(
        write1(s, put("k", job(1, "first"), true)).await,
        OpResult::Done
    );
    assert_eq!(
        write1(s, put_counter("k", counter(1, 2))).await,
        OpResult::Done
    );
    assert_eq!(
        write1(s, put("k", job(2, "second"), true)).await,
        OpResult::AlreadyExists
    );
    assert_eq!(s.get_job("k").await.unwrap(), Some(job(1, "first")));
    assert_eq!(s.get_counter("k").await.unwrap(), Some(counter(1, 2)));
}

async fn overwrite_replaces_job_and_resets_progress(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    // Overwrite of a missing key creates it.
    assert_eq!(
        write1(s, put("k", job(1, "a"), false)).await,
        OpResult::Done
    );
    write1(s, put_counter("k", counter(1, 5))).await;
    assert_eq!(
        write1(s, put("k", job(2, "b"), false)).await,
        OpResult::Done
    );
    assert_eq!(s.get_job("k").await.unwrap(), Some(job(2, "b")));
    assert_eq!(s.get_counter("k").await.unwrap(), None);
}

async fn put_counter_needs_the_job_with_its_generation(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    assert_eq!(
        write1(s, put_counter("k", counter(1, 1))).await,
        OpResult::Skipped,
        "no job"
    );
    assert_eq!(s.get_counter("k").await.unwrap(), None);
    write1(s, put("k", job(2, "a"), true)).await;
    assert_eq!(
        write1(s, put_counter("k", counter(1, 1))).await,
        OpResult::Skipped,
        "older generation"
    );
    assert_eq!(s.get_counter("k").await.unwrap(), None);
    assert_eq!(
        write1(s, put_counter("k", counter(2, 1))).await,
        OpResult::Done
    );
    assert_eq!(
        write1(s, put_counter("k", counter(2, 2))).await,
        OpResult::Done
    );
    assert_eq!(s.get_counter("k").await.unwrap(), Some(counter(2, 2)));
}

async fn finish_with_matching_generation_deletes_job_and_counter(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "a"), true)).await;
    write1(s, put_counter("k", counter(1, 1))).await;
    write1(s, put("other", job(1, "o"), true)).await;
    assert_eq!(write1(s, finish("k", 1)).await, OpResult::Done);
    assert_eq!(s.get_job("k").await.unwrap(), None);
    assert_eq!(s.get_counter("k").await.unwrap(), None);
    assert_eq!(keys(s, "").await, ["other"]);
    // Finishing again is harmless.
    assert_eq!(write1(s, finish("k", 1)).await, OpResult::Skipped);
}

async fn finish_after_overwrite_keeps_the_new_job(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "old"), true)).await;
    write1(s, put_counter("k", counter(1, 1))).await;
    write1(s, put("k", job(2, "new"), false)).await;
    write1(s, put_counter("k", counter(2, 4))).await;
    assert_eq!(write1(s, finish("k", 1)).await, OpResult::Skipped);
    assert_eq!(s.get_job("k").await.unwrap(), Some(job(2, "new")));
    assert_eq!(s.get_counter("k").await.unwrap(), Some(counter(2, 4)));
}

async fn finish_on_mismatch_removes_only_a_counter_of_its_generation(make: Make) {
    // Orphan counters cannot be made through ops; plant them.
    let f = make(&[
        (Table::Counters, "gone", counter(7, 1).encode_to_vec()),
        (Table::Counters, "kept", counter(8, 1).encode_to_vec()),
    ]);
    let s = &*f.store;
    assert_eq!(write1(s, finish("gone", 7)).await, OpResult::Skipped);
    assert_eq!(s.get_counter("gone").await.unwrap(), None);
    assert_eq!(write1(s, finish("kept", 7)).await, OpResult::Skipped);
    assert_eq!(s.get_counter("kept").await.unwrap(), Some(counter(8, 1)));
}

async fn delete_job_removes_job_and_counter_and_tolerates_missing(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "a"), true)).await;
    write1(s, put_counter("k", counter(1, 1))).await;
    let del = || Op::DeleteJob { key: "k".into() };
    assert_eq!(write1(s, del()).await, OpResult::Deleted(1));
    assert_eq!(s.get_job("k").await.unwrap(), None);
    assert_eq!(s.get_counter("k").await.unwrap(), None);
    assert_eq!(write1(s, del()).await, OpResult::Deleted(0));
    // The key is free again for a create.
    assert_eq!(write1(s, put("k", job(2, "b"), true)).await, OpResult::Done);
}

async fn delete_prefix_counts_jobs_and_stops_at_the_prefix(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    let all = [
        "app||ns||a||x",
        "app||ns||a||y",
        "app||ns||a|",
        "app||ns||ab||x",
        "app||ns||a",
        "app||ns2||a||x",
    ];
    for (i, key) in all.iter().enumerate() {
        write1(s, put(key, job(i as u64, key), true)).await;
        write1(s, put_counter(key, counter(i as u64, 1))).await;
    }
    let del = |p: &str| Op::DeletePrefix { prefix: p.into() };
    assert_eq!(write1(s, del("app||ns||a||")).await, OpResult::Deleted(2));
    assert_eq!(
        keys(s, "").await,
        [
            "app||ns2||a||x",
            "app||ns||a",
            "app||ns||ab||x",
            "app||ns||a|"
        ]
    );
    assert_eq!(s.get_counter("app||ns||a||x").await.unwrap(), None);
    assert_eq!(
        s.get_counter("app||ns||ab||x").await.unwrap(),
        Some(counter(3, 1))
    );
    assert_eq!(write1(s, del("nothing||")).await, OpResult::Deleted(0));
    assert_eq!(write1(s, del("")).await, OpResult::Deleted(4));
    assert!(keys(s, "").await.is_empty());
    assert_eq!(s.get_counter("app||ns||ab||x").await.unwrap(), None);
}

async fn list_is_in_key_order_within_the_prefix(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    for key in [
        "app||ns||a||z",
        "app||ns||ab||x",
        "app||ns||a||b",
        "app||ns||a||a\u{10FFFF}",
        "app||ns||a||",
        "app||ns||a|",
        "app||ns||b||a",
    ] {
        write1(s, put(key, job(1, key), true)).await;
    }
    assert_eq!(
        keys(s, "app||ns||a||").await,
        [
            "app||ns||a||",
            "app||ns||a||a\u{10FFFF}",
            "app||ns||a||b",
            "app||ns||a||z"
        ]
    );
    let listed = s.list_jobs("app||ns||a||b").await.unwrap();
    assert_eq!(
        listed,
        [("app||ns||a||b".to_owned(), job(1, "app||ns||a||b"))]
    );
    assert_eq!(keys(s, "").await.len(), 7);
    assert!(keys(s, "zzz").await.is_empty());
}

async fn ops_in_one_write_apply_in_order(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    let results = s
        .write(vec![
            put("k", job(1, "a"), true),
            put("k", job(2, "b"), true),
            put_counter("k", counter(1, 1)),
            Op::DeleteJob { key: "k".into() },
            put("k", job(3, "c"), true),
            put_counter("k", counter(1, 1)),
        ])
        .await
        .unwrap();
    assert_eq!(
        results,
        [
            OpResult::Done,
            OpResult::AlreadyExists,
            OpResult::Done,
            OpResult::Deleted(1),
            OpResult::Done,
            OpResult::Skipped,
        ]
    );
    assert_eq!(s.get_job("k").await.unwrap(), Some(job(3, "c")));
    assert_eq!(s.get_counter("k").await.unwrap(), None);
    assert_eq!(s.write(vec![]).await.unwrap(), []);
}

async fn concurrent_creates_of_one_key_have_one_winner(make: Make) {
    let f = make(&[]);
    let tasks: Vec<_> = (0..48u64)
        .map(|i| {
            let store = Arc::clone(&f.store);
            tokio::spawn(async move { write1(&*store, put("k", job(i, "x"), true)).await })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        match task.await.unwrap() {
            OpResult::Done => done += 1,
            OpResult::AlreadyExists => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(done, 1);
}

async fn scan_pages_jobs_with_counters_of_their_generation(make: Make) {
    // Orphan counters (no job) inside and outside the prefix must not derail the merge.
    let f = make(&[
        (
            Table::Counters,
            "app||b||03x",
            counter(1, 9).encode_to_vec(),
        ),
        (Table::Counters, "app||a||zz", counter(1, 9).encode_to_vec()),
    ]);
    let s = &*f.store;
    let mut ops = Vec::new();
    for i in 0..25u64 {
        let key = format!("app||b||{i:02}");
        // Generation 0 must not be mistaken for "no generation".
        ops.push(put(&key, job(i, &key), true));
        if i.is_multiple_of(3) && i != 3 {
            ops.push(put_counter(&key, counter(i, i as u32)));
        }
    }
    ops.push(put("app||a||1", job(1, "a"), true));
    ops.push(put("app||c||1", job(1, "c"), true));
    s.write(ops).await.unwrap();

    let pages = scan_all(s, "app||b||", 7).await;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [7, 7, 7, 4]);
    let loaded: Vec<LoadedJob> = pages.into_iter().flatten().collect();
    for (i, l) in loaded.iter().enumerate() {
        let i = i as u64;
        assert_eq!(l.key, format!("app||b||{i:02}"));
        assert_eq!(l.job, job(i, &l.key));
        let expect = (i.is_multiple_of(3) && i != 3).then(|| counter(i, i as u32));
        assert_eq!(l.counter, expect, "{}", l.key);
    }
    let all = scan_all(s, "", 1000).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].len(), 27);
    assert_eq!(all[0][0].key, "app||a||1");
    assert_eq!(all[0][26].key, "app||c||1");
    assert!(scan_all(s, "nothing", 10).await.is_empty());
}

async fn scan_skips_counters_of_another_generation(make: Make) {
    let f = make(&[
        (Table::Jobs, "a", job(5, "a").encode_to_vec()),
        (Table::Counters, "a", counter(4, 1).encode_to_vec()),
        (Table::Jobs, "b", job(5, "b").encode_to_vec()),
        (Table::Counters, "b", counter(5, 2).encode_to_vec()),
    ]);
    let all: Vec<LoadedJob> = scan_all(&*f.store, "", 0)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(
        all,
        [
            LoadedJob {
                key: "a".into(),
                job: job(5, "a"),
                counter: None
            },
            LoadedJob {
                key: "b".into(),
                job: job(5, "b"),
                counter: Some(counter(5, 2))
            },
        ]
    );
}

async fn corrupt_record_fails_only_the_request_that_reads_it(make: Make) {
    let f = make(&[
        (Table::Jobs, "bad", garbage()),
        (Table::Counters, "badc", garbage()),
        (Table::Jobs, "good", job(1, "good").encode_to_vec()),
        (Table::Counters, "good", counter(1, 3).encode_to_vec()),
    ]);
    let s = &*f.store;
    let err = s
        .write(vec![
            put("x", job(1, "x"), true),
            Op::DeletePrefix {
                prefix: "goo".into(),
            },
            put_counter("bad", counter(1, 1)),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { table: "jobs", key, .. } if key == "bad"),
        "{err:?}"
    );
    // Rolled back: "x" was never created, nothing was deleted.
    assert_eq!(s.get_job("x").await.unwrap(), None);
    assert_eq!(s.get_job("good").await.unwrap(), Some(job(1, "good")));
    assert_eq!(s.get_counter("good").await.unwrap(), Some(counter(1, 3)));
    assert!(matches!(s.get_job("bad").await, Err(Error::Corrupt { .. })));
    assert!(matches!(s.list_jobs("").await, Err(Error::Corrupt { .. })));
    let mut scan = s.scan("", 10).await.unwrap();
    assert!(matches!(scan.next_page().await, Err(Error::Corrupt { .. })));
    // FinishJob on a job-less corrupt counter must decode it.
    let err = s.write(vec![finish("badc", 1)]).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Corrupt {
                table: "counters",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        s.get_counter("badc").await,
        Err(Error::Corrupt { .. })
    ));

    // Ops that do not read the value still work on corrupt records.
    assert_eq!(
        write1(s, Op::DeleteJob { key: "bad".into() }).await,
        OpResult::Deleted(1)
    );
    assert_eq!(write1(s, put("x", job(1, "x"), true)).await, OpResult::Done);
    assert_eq!(
        write1(s, Op::DeletePrefix { prefix: "".into() }).await,
        OpResult::Deleted(2)
    );
    assert_eq!(s.get_counter("badc").await.unwrap(), None);
}

async fn a_failing_request_does_not_disturb_concurrent_ones(make: Make) {
    let f = make(&[(Table::Jobs, "bad", garbage())]);
    let tasks: Vec<_> = (0..32u64)
        .map(|i| {
            let store = Arc::clone(&f.store);
            tokio::spawn(async move {
                let key = format!("k{i}");
                let mut ops = vec![put(&key, job(i, "x"), true)];
                if !i.is_multiple_of(2) {
                    ops.push(put_counter("bad", counter(1, 1)));
                }
                store.write(ops).await
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let outcome = task.await.unwrap();
        let stored = f.store.get_job(&format!("k{i}")).await.unwrap();
        if !i.is_multiple_of(2) {
            assert!(matches!(outcome, Err(Error::Corrupt { .. })));
            assert_eq!(stored, None);
        } else {
            assert_eq!(outcome.unwrap(), [OpResult::Done]);
            assert_eq!(stored, Some(job(i as u64, "x")));
        }
    }
}

async fn closed_store_refuses_everything(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "a"), true)).await;
    s.close().await.unwrap();
    s.close().await.unwrap();
    assert!(matches!(s.write(vec![]).await, Err(Error::Closed)));
    assert!(matches!(s.get_job("k").await, Err(Error::Closed)));
    assert!(matches!(s.get_counter("k").await, Err(Error::Closed)));
    assert!(matches!(s.list_jobs("").await, Err(Error::Closed)));
    assert!(matches!(s.scan("", 1).await, Err(Error::Closed)));
}

/// Runs every suite function against both backends.
macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::memory).await;
                }
            )*
        }
        mod redb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::redb).await;
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::etcd).await;
                }
            )*
        }
    };
}

suite!(
    create_only_on_existing_key_leaves_job_unchanged,
    overwrite_replaces_job_and_resets_progress,
    put_counter_needs_the_job_with_its_generation,
    finish_with_matching_generation_deletes_job_and_counter,
    finish_after_overwrite_keeps_the_new_job,
    finish_on_mismatch_removes_only_a_counter_of_its_generation,
    delete_job_removes_job_and_counter_and_tolerates_missing,
    delete_prefix_counts_jobs_and_stops_at_the_prefix,
    list_is_in_key_order_within_the_prefix,
    ops_in_one_write_apply_in_order,
    concurrent_creates_of_one_key_have_one_winner,
    scan_pages_jobs_with_counters_of_their_generation,
    scan_skips_counters_of_another_generation,
    corrupt_record_fails_only_the_request_that_reads_it,
    a_failing_request_does_not_disturb_concurrent_ones,
    closed_store_refuses_everything,
);

mod due;
mod guarded;
mod held;
mod history;
mod pause;
mod restore;
mod values;

// ---- what only a file can show ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_restores_jobs_and_counters() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested/data");
    {
        let s = Redb::open(&data).unwrap();
        for i in 0..100u64 {
            let key = format!("app||ns||a||{i:03}");
            s.write(vec![put(&key, job(i, &key), true)]).await.unwrap();
            if i.is_multiple_of(2) {
                s.write(vec![put_counter(&key, counter(i, 7))])
                    .await
                    .unwrap();
            }
        }
        s.write(vec![finish("app||ns||a||050", 50)]).await.unwrap();
        // Dropped without close: drop alone must release the file.
    }
    let s = Redb::open(&data).unwrap();
    assert!(data.join("jobsd.redb").is_file());
    let loaded: Vec<LoadedJob> = scan_all(&s, "", 16).await.into_iter().flatten().collect();
    assert_eq!(loaded.len(), 99);
    for l in &loaded {
        let i: u64 = l.key["app||ns||a||".len()..].parse().unwrap();
        assert_ne!(i, 50);
        assert_eq!(l.job, job(i, &l.key));
        assert_eq!(l.counter, (i.is_multiple_of(2)).then(|| counter(i, 7)));
    }
    assert_eq!(
        s.get_counter("app||ns||a||002").await.unwrap(),
        Some(counter(2, 7))
    );
    // And writes keep their meaning after a reopen.
    assert_eq!(
        write1(&s, put("app||ns||a||001", job(9, "x"), true)).await,
        OpResult::AlreadyExists
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_flushes_queued_writes_and_releases_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(Redb::open(dir.path()).unwrap());
    let tasks: Vec<_> = (0..200u64)
        .map(|i| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                s.write(vec![put(&format!("k{i:03}"), job(i, "x"), true)])
                    .await
            })
        })
        .collect();
    tokio::task::yield_now().await;
    s.close().await.unwrap();
    let mut acked = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await.unwrap() {
            Ok(results) => {
                assert_eq!(results, [OpResult::Done]);
                acked.push(format!("k{i:03}"));
            }
            Err(Error::Closed) => {}
            Err(err) => panic!("{err}"),
        }
    }
    // The file is released by close itself, while `s` is still alive.
    let reopened = Redb::open(dir.path()).unwrap();
    let stored = keys(&reopened, "").await;
    for key in &acked {
        assert!(stored.contains(key), "{key} acknowledged but lost");
    }
    drop(s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_open_of_the_same_file_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let _s = Redb::open(dir.path()).unwrap();
    assert!(matches!(Redb::open(dir.path()), Err(Error::Io(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_commits_requests_and_ops() {
    let dir = tempfile::tempdir().unwrap();
    let s = Redb::open(dir.path()).unwrap();
    let before = s.stats();
    s.write(vec![
        put("a", job(1, "a"), true),
        put("b", job(1, "b"), true),
    ])
    .await
    .unwrap();
    let after = s.stats();
    assert_eq!(after.commits - before.commits, 1);
    assert_eq!(after.requests - before.requests, 1);
    assert_eq!(after.ops - before.ops, 2);
    assert_eq!(after.failed_commits, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_scan_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = Redb::open(dir.path()).unwrap();
    let ops = (0..100)
        .map(|i| put(&format!("k{i:03}"), job(1, "x"), true))
        .collect();
    s.write(ops).await.unwrap();
    let mut scan = s.scan("", 1).await.unwrap();
    assert_eq!(scan.next_page().await.unwrap().unwrap()[0].key, "k000");
    drop(scan);
    // The producer gives up its snapshot; close must not wait for it.
    s.close().await.unwrap();
    drop(s);
    Redb::open(dir.path()).unwrap();
}

// ---- both backends agree on random op sequences ----

mod model {
    use proptest::prelude::*;

    use super::*;

    const KEYS: [&str; 6] = ["a", "a|", "a||b", "ab", "b", "\u{10FFFF}"];

    pub(super) fn op() -> impl Strategy<Value = Op> {
        let key = proptest::sample::select(KEYS.to_vec()).prop_map(String::from);
        let generation = 0..3u64;
        prop_oneof![
            (key.clone(), generation.clone(), any::<bool>()).prop_map(|(k, g, c)| put(
                &k,
                job(g, &k),
                c
            )),
            key.clone().prop_map(|key| Op::DeleteJob { key }),
            proptest::sample::select(vec!["", "a", "a|", "a||", "b", "c"])
                .prop_map(|p| Op::DeletePrefix { prefix: p.into() }),
            (key.clone(), generation.clone(), 0..4u32)
                .prop_map(|(k, g, n)| put_counter(&k, counter(g, n))),
            (key, generation).prop_map(|(k, g)| finish(&k, g)),
        ]
    }

    async fn state(s: &dyn Store) -> Vec<LoadedJob> {
        let mut all = Vec::new();
        let mut scan = s.scan("", 4).await.unwrap();
        while let Some(page) = scan.next_page().await.unwrap() {
            all.extend(page);
        }
        for key in KEYS {
            // Counters are only ever kept for the job's own generation.
            if let Some(c) = s.get_counter(key).await.unwrap() {
                let job = s.get_job(key).await.unwrap().expect("counter without job");
                assert_eq!(c.generation, job.generation);
            }
        }
        all
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn memory_and_redb_agree(requests in proptest::collection::vec(
            proptest::collection::vec(op(), 0..6), 1..10)) {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let m = memory(&[]);
                let r = redb(&[]);
                for ops in requests {
                    let a = m.store.write(ops.clone()).await.unwrap();
                    let b = r.store.write(ops).await.unwrap();
                    assert_eq!(a, b);
                }
                assert_eq!(state(&*m.store).await, state(&*r.store).await);
            });
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// Requests submitted together (one task polls them in order, so they queue in order
        /// and share etcd txns) give what memory gives applying them one by one.
        #[test]
        fn memory_and_etcd_agree(requests in proptest::collection::vec(
            proptest::collection::vec(op(), 0..6), 1..10)) {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let m = memory(&[]);
                let e = etcd(&[]);
                let mut expected = Vec::new();
                for ops in &requests {
                    expected.push(m.store.write(ops.clone()).await.unwrap());
                }
                let got = futures_util::future::join_all(
                    requests.into_iter().map(|ops| e.store.write(ops)),
                )
                .await;
                let got: Vec<Vec<OpResult>> = got.into_iter().map(Result::unwrap).collect();
                assert_eq!(got, expected);
                assert_eq!(state(&*m.store).await, state(&*e.store).await);
            });
        }
    }
}

// ---- the write-ahead log: what a crash between checkpoints leaves ----

mod wal {
    use std::path::Path;

    mod damage;
    use std::time::Duration;

    use super::*;
    use crate::store::redb::FILE_NAME as DB_FILE;
    use crate::store::redb::wal::{FILE_NAME as WAL_FILE, read_records};

    /// Options under which nothing is checkpointed while a test runs: every batch stays in the
    /// log only.
    fn no_checkpoints() -> RedbOptions {
        RedbOptions {
            checkpoint_interval: Duration::from_secs(3600),
            checkpoint_bytes: u64::MAX,
            checkpoint_work: Duration::MAX,
            ..RedbOptions::default()
        }
    }

    /// A copy of the files of an open, idle store: what `kill -9` at this moment would leave
    /// (the page cache survives a process kill).
    fn crash_copy(from: &Path) -> TempDir {
        let to = tempfile::tempdir().unwrap();
        for name in [DB_FILE, WAL_FILE] {
            let src = from.join(name);
            if src.exists() {
                std::fs::copy(&src, to.path().join(name)).unwrap();
            }
        }
        to
    }

    /// Jobs in the redb file alone, as its last durable commit left them.
    fn jobs_in_redb_file(dir: &Path) -> usize {
        use ::redb::{ReadableDatabase, ReadableTableMetadata};
        let db = ::redb::Database::create(dir.join(DB_FILE)).unwrap();
        let txn = db.begin_read().unwrap();
        let def: ::redb::TableDefinition<&str, &[u8]> = ::redb::TableDefinition::new("jobs");
        txn.open_table(def).unwrap().len().unwrap() as usize
    }

    async fn state(s: &dyn Store) -> Vec<LoadedJob> {
        scan_all(s, "", 64).await.into_iter().flatten().collect()
    }

    fn key(i: usize) -> String {
        format!("app||ns||a||{i:04}")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_see_logged_batches_before_any_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let s = Redb::open_with(dir.path(), no_checkpoints()).unwrap();
        write1(&s, put("k", job(1, "k"), true)).await;
        write1(&s, put_counter("k", counter(1, 3))).await;
        assert_eq!(s.stats().checkpoints, 0);
        assert_eq!(s.get_job("k").await.unwrap(), Some(job(1, "k")));
        assert_eq!(s.get_counter("k").await.unwrap(), Some(counter(1, 3)));
        assert_eq!(keys(&s, "").await, ["k"]);
        assert_eq!(state(&s).await.len(), 1);
        // And the batches really are only in the log so far.
        let crashed = crash_copy(dir.path());
        assert_eq!(jobs_in_redb_file(crashed.path()), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crash_between_checkpoints_loses_no_acknowledged_batch() {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(Redb::open_with(dir.path(), no_checkpoints()).unwrap());
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let s = Arc::clone(&s);
                tokio::spawn(async move {
                    for i in 0..25 {
                        let k = key(t * 100 + i);
                        assert_eq!(write1(&*s, put(&k, job(1, &k), true)).await, OpResult::Done);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let live = state(&*s).await;
        assert_eq!(live.len(), 200);
        let crashed = crash_copy(dir.path());
        assert_eq!(
            jobs_in_redb_file(crashed.path()),
            0,
            "nothing was checkpointed"
        );

        let r = Redb::open(crashed.path()).unwrap();
        assert_eq!(r.stats().replayed, s.stats().commits);
        assert_eq!(state(&r).await, live);
        // Recovery checkpointed: the redb file alone holds everything now.
        r.close().await.unwrap();
        drop(r);
        assert_eq!(jobs_in_redb_file(crashed.path()), 200);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crash_after_checkpoints_and_log_restarts_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let options = RedbOptions {
            checkpoint_interval: Duration::from_secs(3600),
            // A checkpoint every few batches, so the log restarts over older records.
            checkpoint_bytes: 2_000,
            checkpoint_work: Duration::MAX,
            ..RedbOptions::default()
        };
        let s = Redb::open_with(dir.path(), options).unwrap();
        for i in 0..103 {
            write1(&s, put(&key(i), job(1, "x"), true)).await;
        }
        // The checkpoint after the last batch runs after its answer: wait for it (bounded).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while s.stats().checkpoints <= 5 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let checkpoints = s.stats().checkpoints;
        assert!(checkpoints > 5, "{checkpoints} checkpoints");
        let live = state(&s).await;
        let crashed = crash_copy(dir.path());
        let r = Redb::open(crashed.path()).unwrap();
        assert!(r.stats().replayed < 103);
        assert_eq!(state(&r).await, live);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_work_a_replay_would_redo_is_bounded_by_checkpoints() {
        // Neither the interval nor the log's size calls for a checkpoint: only the time spent
        // applying batches does (none at all is allowed here, so every batch gets one).
        let dir = tempfile::tempdir().unwrap();
        let options = RedbOptions {
            checkpoint_interval: Duration::from_secs(3600),
            checkpoint_bytes: u64::MAX,
            checkpoint_work: Duration::ZERO,
            ..RedbOptions::default()
        };
        let s = Redb::open_with(dir.path(), options).unwrap();
        for i in 0..40 {
            write1(&s, put(&key(i), job(1, "x"), true)).await;
        }
        // The checkpoint after the last batch runs after its answer: wait for it (bounded).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while s.stats().checkpoints < 40 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(s.stats().checkpoints, 40);
        let live = state(&s).await;
        let crashed = crash_copy(dir.path());
        let r = Redb::open(crashed.path()).unwrap();
        assert_eq!(r.stats().replayed, 0);
        assert_eq!(state(&r).await, live);
    }

    /// Writes 20 single-op batches with no checkpoint and gives the crashed copy.
    async fn twenty_logged_batches() -> (TempDir, Vec<LoadedJob>) {
        let dir = tempfile::tempdir().unwrap();
        let s = Redb::open_with(dir.path(), no_checkpoints()).unwrap();
        for i in 0..20 {
            write1(&s, put(&key(i), job(1, "x"), true)).await;
        }
        let live = state(&s).await;
        (crash_copy(dir.path()), live)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_changed_byte_in_the_last_acknowledged_record_refuses_naming_the_log() {
        let (crashed, _) = twenty_logged_batches().await;
        let wal = crashed.path().join(WAL_FILE);
        let (records, end) = read_records(&wal, 0).unwrap();
        assert_eq!(end, crate::store::redb::wal::End::Clean);
        assert_eq!(records.len(), 20);
        let last = records.last().unwrap();
        // One payload byte of the last record changes on disk after it was acknowledged.
        let mut bytes = std::fs::read(&wal).unwrap();
        bytes[(last.offset + last.size) as usize - 16 - 3] ^= 0x40;
        std::fs::write(&wal, bytes).unwrap();

        let err = Redb::open(crashed.path())
            .err()
            .expect("a damaged log is refused");
        let text = err.to_string();
        assert!(text.contains(&wal.display().to_string()), "{text}");
        assert!(text.contains("batch 20"), "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_go_on_after_a_torn_last_record_and_survive_another_crash() {
        let (crashed, live) = twenty_logged_batches().await;
        let wal = crashed.path().join(WAL_FILE);
        let (records, _) = read_records(&wal, 0).unwrap();
        let last = records.last().unwrap();
        // A crash in the middle of the last append: its end (footer included) never landed.
        let mut bytes = std::fs::read(&wal).unwrap();
        let torn = (last.offset + last.size / 2) as usize;
        bytes[torn..(last.offset + last.size) as usize].fill(0);
        std::fs::write(&wal, bytes).unwrap();

        let r = Redb::open(crashed.path()).unwrap();
        assert_eq!(r.stats().replayed, 19);
        assert_eq!(state(&r).await, live[..19]);
        write1(&r, put(&key(500), job(1, "y"), true)).await;
        let again = crash_copy(crashed.path());
        drop(r);
        let r = Redb::open(again.path()).unwrap();
        assert_eq!(keys(&r, "").await.len(), 20);
        assert!(r.get_job(&key(500)).await.unwrap().is_some());
        assert!(r.get_job(&key(19)).await.unwrap().is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_log_cut_inside_its_last_record_keeps_everything_before_it() {
        let (crashed, live) = twenty_logged_batches().await;
        let wal = crashed.path().join(WAL_FILE);
        let (records, _) = read_records(&wal, 0).unwrap();
        let last = records.last().unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
        file.set_len(last.offset + last.size - 5).unwrap();
        drop(file);

        let r = Redb::open(crashed.path()).unwrap();
        assert_eq!(r.stats().replayed, 19);
        assert_eq!(state(&r).await, live[..19]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recovery_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let s = Redb::open_with(dir.path(), no_checkpoints()).unwrap();
        // Ops whose outcome depends on the state they meet.
        s.write(vec![
            put("a", job(1, "a1"), true),
            put("b", job(1, "b"), true),
        ])
        .await
        .unwrap();
        s.write(vec![put_counter("a", counter(1, 2))])
            .await
            .unwrap();
        s.write(vec![put("a", job(2, "a2"), false)]).await.unwrap();
        s.write(vec![put_counter("a", counter(1, 5))])
            .await
            .unwrap();
        s.write(vec![finish("b", 1), put("b", job(3, "b3"), true)])
            .await
            .unwrap();
        s.write(vec![
            Op::DeletePrefix { prefix: "c".into() },
            put("c", job(1, "c"), true),
        ])
        .await
        .unwrap();
        let live = state(&s).await;
        let crashed = crash_copy(dir.path());

        // A crash during recovery leaves the files unchanged: recover the same copy twice.
        let twice = crash_copy(crashed.path());
        let r1 = Redb::open(crashed.path()).unwrap();
        assert_eq!(r1.stats().replayed, 6);
        assert_eq!(state(&r1).await, live);
        let r2 = Redb::open(twice.path()).unwrap();
        assert_eq!(r2.stats().replayed, 6);
        assert_eq!(state(&r2).await, live);
        drop(r2);

        // A crash right after recovery (the old records are still in the log file): nothing is
        // applied a second time.
        let after = crash_copy(crashed.path());
        let r3 = Redb::open(after.path()).unwrap();
        assert_eq!(r3.stats().replayed, 0);
        assert_eq!(state(&r3).await, live);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn create_only_keeps_its_meaning_across_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let s = Redb::open_with(dir.path(), no_checkpoints()).unwrap();
        assert_eq!(
            write1(&s, put("k", job(1, "first"), true)).await,
            OpResult::Done
        );
        assert_eq!(
            write1(&s, put_counter("k", counter(1, 4))).await,
            OpResult::Done
        );
        assert_eq!(
            write1(&s, put("k", job(2, "second"), true)).await,
            OpResult::AlreadyExists
        );
        let crashed = crash_copy(dir.path());
        let r = Redb::open(crashed.path()).unwrap();
        assert_eq!(r.stats().replayed, 3);
        assert_eq!(r.get_job("k").await.unwrap(), Some(job(1, "first")));
        assert_eq!(r.get_counter("k").await.unwrap(), Some(counter(1, 4)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_leaves_nothing_to_replay_and_the_log_can_be_turned_off() {
        let dir = tempfile::tempdir().unwrap();
        let s = Redb::open_with(dir.path(), no_checkpoints()).unwrap();
        write1(&s, put("k", job(1, "k"), true)).await;
        s.close().await.unwrap();
        drop(s);
        assert_eq!(jobs_in_redb_file(dir.path()), 1);

        // A crashed log is replayed by a store opened without it, which then removes it.
        let s = Redb::open_with(dir.path(), no_checkpoints()).unwrap();
        write1(&s, put("l", job(1, "l"), true)).await;
        let crashed = crash_copy(dir.path());
        drop(s);
        let off = RedbOptions {
            wal: false,
            ..RedbOptions::default()
        };
        let r = Redb::open_with(crashed.path(), off).unwrap();
        assert_eq!(r.stats().replayed, 1);
        assert_eq!(keys(&r, "").await, ["k", "l"]);
        assert!(!crashed.path().join(WAL_FILE).exists());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 16,
            ..proptest::prelude::ProptestConfig::default()
        })]
        /// Replaying the log after a crash gives the state the writes produced.
        #[test]
        fn replay_after_a_crash_equals_the_model(requests in proptest::collection::vec(
            proptest::collection::vec(super::model::op(), 0..6), 1..10)) {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let m = memory(&[]);
                let dir = tempfile::tempdir().unwrap();
                let r = Redb::open_with(dir.path(), no_checkpoints()).unwrap();
                for ops in requests {
                    let a = m.store.write(ops.clone()).await.unwrap();
                    let b = r.write(ops).await.unwrap();
                    assert_eq!(a, b);
                }
                let crashed = crash_copy(dir.path());
                let reopened = Redb::open(crashed.path()).unwrap();
                assert_eq!(state(&*m.store).await, state(&reopened).await);
            });
        }
    }
}
