//! The partition index on a real etcd: a partition read touches that partition's jobs only,
//! every write keeps a job's index key in the job's own txn, jobs written by a Dapr Scheduler
//! (no index key) are still found, and creates batched without a read answer each request
//! exactly.

use std::collections::BTreeSet;
use std::sync::Arc;

use prost::Message;

use super::client::{Client, RangeRequest, prefix_end, read_key};
use super::keys::OWN;
use super::partition::partition_of;
use super::testing::{fresh_namespace, shared};
use super::{Etcd, Store};
use crate::proto::jobsd_store::{StoredCounter, StoredJob};
use crate::store::{LoadedJob, Op, OpResult};

/// Partitions of these tests' stores.
const COUNT: u32 = 8;

fn put(key: &str, generation: u64, create_only: bool) -> Op {
    Op::PutJob {
        key: key.into(),
        job: StoredJob {
            generation,
            ..StoredJob::default()
        },
        create_only,
        due: None,
    }
}

async fn store(ns: &str) -> Etcd {
    Etcd::connect_partitioned(&[shared().endpoint()], ns, None, COUNT)
        .await
        .unwrap()
}

/// Every job of a scan, sorted by key.
async fn read_all(mut scan: crate::store::JobScan) -> Result<Vec<LoadedJob>, crate::store::Error> {
    let mut jobs = Vec::new();
    while let Some(page) = scan.next_page().await? {
        jobs.extend(page);
    }
    jobs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(jobs)
}

/// Every job a partition read without a cut-off gives, sorted by key.
async fn read_partitions(
    mut scan: super::PartitionScan,
) -> Result<Vec<LoadedJob>, crate::store::Error> {
    let mut jobs = Vec::new();
    while let Some(page) = scan.next_page().await? {
        assert!(page.far.is_empty(), "no cut-off, nothing left far");
        jobs.extend(page.near);
    }
    jobs.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(jobs)
}

/// `(mod_revision)` of a raw key, `None` when absent.
async fn mod_revision(raw: &Client, key: String) -> Option<i64> {
    raw.range(read_key(key))
        .await
        .unwrap()
        .kvs
        .first()
        .map(|kv| kv.mod_revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_read_reads_that_partition_and_no_other_job() {
    let ns = fresh_namespace();
    let s = store(&ns).await;
    let keys: Vec<String> = (0..200).map(|i| format!("app||ns||a||job-{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            s.write(vec![put(key, i as u64 + 1, true)]).await.unwrap(),
            [OpResult::Done]
        );
    }
    s.write(vec![Op::PutCounter {
        key: keys[0].clone(),
        counter: StoredCounter {
            generation: 1,
            count: 5,
            ..StoredCounter::default()
        },
    }])
    .await
    .unwrap();
    let p = partition_of(&keys[0], COUNT);
    // A job of another partition that cannot even be decoded, with its index key: a read
    // that touched it would fail, as the full scan does.
    let other = (0..)
        .map(|i| format!("app||ns||a||poison-{i}"))
        .find(|k| partition_of(k, COUNT) != p)
        .unwrap();
    let raw = Client::connect(&[shared().endpoint()]).unwrap();
    raw.put(format!("{ns}/jobs/{other}"), b"\xff\xff not a job".to_vec())
        .await
        .unwrap();
    raw.put(
        format!(
            "{ns}/{OWN}/index/{COUNT}/{}/{other}",
            partition_of(&other, COUNT)
        ),
        Vec::new(),
    )
    .await
    .unwrap();
    assert!(read_all(s.scan("", 64).await.unwrap()).await.is_err());

    let got = read_partitions(
        s.scan_partitions(BTreeSet::from([p]), 16, None)
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let want: Vec<&String> = keys
        .iter()
        .filter(|k| partition_of(k, COUNT) == p)
        .collect();
    assert!(want.len() > 5, "too few jobs in partition {p}");
    assert_eq!(got.iter().map(|j| &j.key).collect::<Vec<_>>(), {
        let mut w = want.clone();
        w.sort();
        w
    });
    // Read with its counter.
    let first = got.iter().find(|j| j.key == keys[0]).unwrap();
    assert_eq!(first.counter.as_ref().map(|c| c.count), Some(5));
    assert_eq!(first.job.generation, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_index_key_changes_in_the_jobs_own_txn() {
    let ns = fresh_namespace();
    let s = store(&ns).await;
    let raw = Client::connect(&[shared().endpoint()]).unwrap();
    let key = "app||ns||a||one";
    let job_key = format!("{ns}/jobs/{key}");
    let index_key = format!(
        "{ns}/{OWN}/index/{COUNT}/{}/{key}",
        partition_of(key, COUNT)
    );
    // One txn = one revision: the index key carries the job's mod_revision, whichever path
    // wrote it (a create alone; an overwrite batched with a counter, which is read first).
    s.write(vec![put(key, 1, true)]).await.unwrap();
    let created = mod_revision(&raw, job_key.clone()).await;
    assert!(created.is_some());
    assert_eq!(mod_revision(&raw, index_key.clone()).await, created);
    s.write(vec![
        put(key, 2, false),
        Op::PutCounter {
            key: key.into(),
            counter: StoredCounter {
                generation: 2,
                ..StoredCounter::default()
            },
        },
    ])
    .await
    .unwrap();
    let overwritten = mod_revision(&raw, job_key.clone()).await;
    assert!(overwritten > created);
    assert_eq!(mod_revision(&raw, index_key.clone()).await, overwritten);
    s.write(vec![Op::DeleteJob { key: key.into() }])
        .await
        .unwrap();
    assert_eq!(mod_revision(&raw, job_key).await, None);
    assert_eq!(mod_revision(&raw, index_key).await, None);
}

/// `key`'s job, version 1, first due at `due` (ms).
fn put_due(key: &str, due: Option<i64>) -> Op {
    Op::PutJob {
        key: key.into(),
        job: StoredJob {
            generation: 1,
            ..StoredJob::default()
        },
        create_only: true,
        due,
    }
}

/// A result of `key` (version 1) after `count` ticks, due next at `due` (ms).
fn moved_to(key: &str, count: u32, due: i64) -> Op {
    Op::RecordResult(Box::new(crate::store::ResultRecord {
        key: key.into(),
        generation: 1,
        progress: Some(StoredCounter {
            generation: 1,
            count,
            due_ms: Some(due),
            ..StoredCounter::default()
        }),
        run: Some(crate::store::StoredRun::default()),
        history_limit: 10,
        ..crate::store::ResultRecord::default()
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_with_a_cut_off_reads_the_jobs_due_before_it_and_names_the_others() {
    let ns = fresh_namespace();
    let s = store(&ns).await;
    let key = |name: &str| format!("app||ns||a||{name}");
    // Created alone (the create path) and in a batch with a counter (read, then written).
    for (name, due) in [
        ("soon", Some(1_000)),
        ("later", Some(9_000)),
        ("unknown", None),
        ("moves-near", Some(8_000)),
        ("moves-far", Some(2_000)),
    ] {
        s.write(vec![put_due(&key(name), due)]).await.unwrap();
    }
    s.write(vec![
        put_due(&key("batched-far"), Some(7_000)),
        put_due(&key("batched-near"), Some(500)),
    ])
    .await
    .unwrap();
    // Results move a job's time, each in its job's txn; a counter alone does too.
    assert_eq!(
        s.write(vec![moved_to(&key("moves-near"), 1, 3_000)])
            .await
            .unwrap(),
        [OpResult::Done]
    );
    assert_eq!(
        s.write(vec![moved_to(&key("moves-far"), 1, 6_000)])
            .await
            .unwrap(),
        [OpResult::Done]
    );
    s.write(vec![Op::PutCounter {
        key: key("later"),
        counter: StoredCounter {
            generation: 1,
            count: 2,
            due_ms: Some(9_500),
            ..StoredCounter::default()
        },
    }])
    .await
    .unwrap();
    // A Dapr Scheduler's job has no time in its index: read at once.
    let raw = Client::connect(&[shared().endpoint()]).unwrap();
    let dapr = key("by-dapr");
    raw.put(
        format!("{ns}/jobs/{dapr}"),
        StoredJob {
            generation: 1,
            ..StoredJob::default()
        }
        .encode_to_vec(),
    )
    .await
    .unwrap();
    raw.put(
        format!(
            "{ns}/{OWN}/index/{COUNT}/{}/{dapr}",
            partition_of(&dapr, COUNT)
        ),
        Vec::new(),
    )
    .await
    .unwrap();

    let every: BTreeSet<u32> = (0..COUNT).collect();
    let mut scan = s
        .scan_partitions(every.clone(), 2, Some(5_000))
        .await
        .unwrap();
    let (mut near, mut far) = (Vec::new(), Vec::new());
    while let Some(page) = scan.next_page().await.unwrap() {
        near.extend(page.near.into_iter().map(|j| j.key));
        far.extend(page.far);
    }
    near.sort();
    far.sort();
    let mut want_near: Vec<String> = ["soon", "unknown", "moves-near", "batched-near", "by-dapr"]
        .into_iter()
        .map(key)
        .collect();
    want_near.sort();
    assert_eq!(near, want_near);
    let mut want_far = vec![
        (key("later"), 9_500),
        (key("moves-far"), 6_000),
        (key("batched-far"), 7_000),
    ];
    want_far.sort();
    assert_eq!(far, want_far);
    // The jobs named far are read by key when their time comes, at one revision.
    let (jobs, revision) = s
        .read_jobs(vec![key("moves-far"), key("gone")])
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].key, key("moves-far"));
    assert_eq!(jobs[0].counter.as_ref().map(|c| c.count), Some(1));
    assert!(revision > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_written_by_dapr_without_an_index_key_are_read_with_their_partition() {
    let ns = fresh_namespace();
    let raw = Client::connect(&[shared().endpoint()]).unwrap();
    // go-etcd-cron's layout only, as a Dapr Scheduler leaves it.
    let keys: Vec<String> = (0..50).map(|i| format!("app||ns||a||dapr-{i}")).collect();
    for key in &keys {
        let job = StoredJob {
            generation: 9,
            ..StoredJob::default()
        };
        raw.put(format!("{ns}/jobs/{key}"), job.encode_to_vec())
            .await
            .unwrap();
    }
    let s = store(&ns).await;
    let every: BTreeSet<u32> = (0..COUNT).collect();
    let got = read_partitions(s.scan_partitions(every, 7, None).await.unwrap())
        .await
        .unwrap();
    let mut want = keys.clone();
    want.sort();
    assert_eq!(got.iter().map(|j| j.key.clone()).collect::<Vec<_>>(), want);
    // Indexed once for the cluster: another member does not scan again.
    let done = raw
        .range(read_key(format!("{ns}/{OWN}/indexed/{COUNT}")))
        .await
        .unwrap();
    assert_eq!(done.kvs.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_keys_left_by_a_prefix_delete_are_skipped_and_dropped() {
    let ns = fresh_namespace();
    let s = store(&ns).await;
    for i in 0..30 {
        s.write(vec![put(&format!("app||ns||gone||{i}"), 1, true)])
            .await
            .unwrap();
    }
    s.write(vec![put("app||ns||kept||0", 1, true)])
        .await
        .unwrap();
    assert_eq!(
        s.write(vec![Op::DeletePrefix {
            prefix: "app||ns||gone||".into()
        }])
        .await
        .unwrap(),
        [OpResult::Deleted(30)]
    );
    let every: BTreeSet<u32> = (0..COUNT).collect();
    let got = read_partitions(s.scan_partitions(every, 4, None).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|j| j.key.as_str()).collect::<Vec<_>>(),
        ["app||ns||kept||0"]
    );
    let raw = Client::connect(&[shared().endpoint()]).unwrap();
    let start = format!("{ns}/{OWN}/index/");
    let left = raw
        .range(RangeRequest {
            range_end: prefix_end(start.as_bytes()),
            key: start.into_bytes(),
            keys_only: true,
            ..RangeRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(left.kvs.len(), 1, "stale index keys stay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_get_each_their_own_answer() {
    let ns = fresh_namespace();
    let s = Arc::new(store(&ns).await);
    // Every other key exists already.
    for i in (0..200).step_by(2) {
        s.write(vec![put(&format!("app||ns||a||c{i}"), 1, true)])
            .await
            .unwrap();
    }
    let answers = futures_util::future::join_all((0..200).map(|i| {
        let s = Arc::clone(&s);
        async move {
            let answer = s
                .write(vec![put(&format!("app||ns||a||c{i}"), 1000 + i, true)])
                .await
                .unwrap();
            (i, answer[0])
        }
    }))
    .await;
    for (i, answer) in answers {
        let key = format!("app||ns||a||c{i}");
        let stored = s.get_job(&key).await.unwrap().unwrap().generation;
        if i % 2 == 0 {
            assert_eq!(answer, OpResult::AlreadyExists, "{key}");
            assert_eq!(stored, 1, "{key} was overwritten");
        } else {
            assert_eq!(answer, OpResult::Done, "{key}");
            assert_eq!(stored, 1000 + i, "{key}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_one_job_made_at_once_are_answered_each_with_its_own_job() {
    let ns = fresh_namespace();
    let s = Arc::new(store(&ns).await);
    let keys: Vec<String> = (0..300).map(|i| format!("app||ns||a||g-{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        s.write(vec![put(key, i as u64 + 1, true)]).await.unwrap();
    }
    // Even keys carry progress of their job's generation, key 1 of an older one.
    for (i, key) in keys.iter().enumerate() {
        let generation = match i {
            1 => 1,
            _ if i % 2 == 0 => i as u64 + 1,
            _ => continue,
        };
        let counter = StoredCounter {
            generation,
            count: 7,
            ..StoredCounter::default()
        };
        let op = Op::PutCounter {
            key: key.clone(),
            counter,
        };
        s.write(vec![op]).await.unwrap();
    }
    // Every key twice, and some that have no job, all at once.
    let asked: Vec<String> = keys
        .iter()
        .chain(keys.iter())
        .cloned()
        .chain((0..20).map(|i| format!("app||ns||a||none-{i}")))
        .collect();
    let reads = asked.iter().map(|key| {
        let s = Arc::clone(&s);
        let key = key.clone();
        tokio::spawn(async move { s.get_loaded(&key).await })
    });
    let answers = futures_util::future::join_all(reads).await;
    for (key, answer) in asked.iter().zip(answers) {
        let answer = answer.unwrap().unwrap();
        let Some(i) = keys.iter().position(|k| k == key) else {
            assert!(answer.is_none(), "{key} has no job: {answer:?}");
            continue;
        };
        let loaded = answer.unwrap_or_else(|| panic!("{key}: no job"));
        assert_eq!(loaded.key, *key);
        assert_eq!(loaded.job.generation, i as u64 + 1, "{key}");
        let count = loaded.counter.map(|c| c.count);
        let want = (i % 2 == 0).then_some(7);
        assert_eq!(count, want, "{key}: the counter of its own generation only");
    }
}
