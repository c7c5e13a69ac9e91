//! Writes computed from what the writer knows, on a real etcd (`known.rs`): a result of a job
//! the watch told commits without a read, a recurring job's next result too (its own txn left
//! the counter known), and a job changed by another replica meanwhile is read again and
//! answered as stored.

use futures_util::Stream;

use super::testing::{fresh_namespace, shared};
use super::tests::{finishing, job, next_change, put, result, write1};
use super::{Change, Etcd};
use crate::proto::jobsd_store::StoredCounter;
use crate::store::{Op, OpResult, Store};

async fn store(ns: &str) -> Etcd {
    Etcd::connect(&[shared().endpoint()], ns).await.unwrap()
}

/// Tells `store` the next job put `changes` carries (what a cluster member does for its
/// partitions).
async fn tell_next_put(store: &Etcd, changes: &mut (impl Stream<Item = Change> + Unpin)) {
    match next_change(changes).await {
        Change::Put {
            key,
            value,
            mod_revision,
        } => store.saw_job(&key, mod_revision, &value),
        other => panic!("{other:?}"),
    }
}

/// A progress result of `key`'s `generation`: its `n`th run.
fn progress(key: &str, generation: u64, n: u32) -> Op {
    let Op::RecordResult(mut r) = result(key, generation, &format!("run {n}"), 10) else {
        unreachable!()
    };
    r.progress = Some(StoredCounter {
        generation,
        count: n,
        ..StoredCounter::default()
    });
    Op::RecordResult(r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_one_shot_finishes_without_a_read() {
    let s = store(&fresh_namespace()).await;
    let from = s.revision().await.unwrap() + 1;
    let mut changes = Box::pin(s.watch_jobs(from));
    write1(&s, put("a", 1, true)).await;
    tell_next_put(&s, &mut changes).await;
    let reads = s.snapshot_reads();
    assert_eq!(write1(&s, finishing("a", 1)).await, OpResult::Done);
    assert_eq!(s.snapshot_reads(), reads, "the result read before its txn");
    // Applied as after a read: the job is gone, its finished record and run are stored.
    assert_eq!(s.get_job("a").await.unwrap(), None);
    let finished = s.get_finished("a").await.unwrap().expect("finished record");
    assert_eq!(finished.job, Some(job(1)));
    assert_eq!(s.list_runs("a", None, 10).await.unwrap().len(), 1);
    // Nothing is known of a finished job: creating it again and finishing it reads.
    write1(&s, put("a", 2, true)).await;
    assert_eq!(write1(&s, finishing("a", 2)).await, OpResult::Done);
    assert_eq!(s.snapshot_reads(), reads + 1);
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_job_s_results_read_once_at_most() {
    let s = store(&fresh_namespace()).await;
    // Not told by a watch: the first result reads, its txn leaves the keys known.
    write1(&s, put("r", 1, true)).await;
    let reads = s.snapshot_reads();
    for n in 1..=5 {
        assert_eq!(write1(&s, progress("r", 1, n)).await, OpResult::Done);
    }
    assert_eq!(s.snapshot_reads(), reads + 1, "only the first result read");
    let counter = s.get_counter("r").await.unwrap().expect("counter");
    assert_eq!((counter.count, counter.runs), (5, 5));
    let runs = s.list_runs("r", None, 10).await.unwrap();
    assert_eq!(runs.len(), 5);
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_another_replica_changed_is_read_again_and_answered_as_stored() {
    let ns = fresh_namespace();
    let (a, b) = (store(&ns).await, store(&ns).await);
    let from = a.revision().await.unwrap() + 1;
    let mut changes = Box::pin(a.watch_jobs(from));
    write1(&a, put("j", 1, true)).await;
    tell_next_put(&a, &mut changes).await;
    write1(&a, progress("j", 1, 1)).await;
    // Another replica replaces the job (a new generation): `a` is not told.
    assert_eq!(write1(&b, put("j", 2, false)).await, OpResult::Done);
    let reads = a.snapshot_reads();
    // The old generation's results no longer apply, known or not.
    assert_eq!(write1(&a, finishing("j", 1)).await, OpResult::Skipped);
    assert_eq!(write1(&a, progress("j", 1, 2)).await, OpResult::Skipped);
    assert!(a.snapshot_reads() > reads, "a refused compare must read");
    assert_eq!(a.get_job("j").await.unwrap(), Some(job(2)));
    assert_eq!(a.get_finished("j").await.unwrap(), None);
    // The new generation's result applies, from what the read left known.
    assert_eq!(write1(&a, progress("j", 2, 1)).await, OpResult::Done);
    let counter = a.get_counter("j").await.unwrap().expect("counter");
    assert_eq!((counter.generation, counter.count, counter.runs), (2, 1, 1));
    // `b` deletes it: `a`'s known version is refused again, and the result is skipped.
    write1(&b, Op::DeleteJob { key: "j".into() }).await;
    assert_eq!(write1(&a, progress("j", 2, 2)).await, OpResult::Skipped);
    assert_eq!(a.get_counter("j").await.unwrap(), None);
    a.close().await.unwrap();
    b.close().await.unwrap();
}
