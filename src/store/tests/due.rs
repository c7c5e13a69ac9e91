//! The due index (issue 16): every write that changes when a job fires changes its index
//! entry in the same op, so a job is never left unindexed (it would never be read in) and a
//! deleted job never comes back through the index.

use super::history::{record, result};
use super::*;

/// Every indexed job as `(time, key)`, read a page of `limit` at a time.
async fn index(s: &dyn Store, limit: usize) -> Vec<(i64, String)> {
    let mut start = due_start(i64::MIN);
    let mut all = Vec::new();
    loop {
        let page = s.due_page(&start, i64::MAX, limit).await.expect("due page");
        assert!(page.stale.is_empty(), "stale entries: {:?}", page.stale);
        all.extend(page.jobs.into_iter().map(|(ms, l)| (ms, l.key)));
        match page.next {
            Some(next) => start = next,
            None => return all,
        }
    }
}

fn at(pairs: &[(i64, &str)]) -> Vec<(i64, String)> {
    pairs.iter().map(|(t, k)| (*t, (*k).to_owned())).collect()
}

fn put_due(key: &str, generation: u64, create_only: bool, due: Option<i64>) -> Op {
    Op::PutJob {
        key: key.into(),
        job: job(generation, key),
        create_only,
        due,
    }
}

/// A result moving job `key` on to fire at `due`.
fn moved(key: &str, generation: u64, n: u32, due: i64) -> Op {
    let mut r = record(key, generation, n, 10);
    if let Some(progress) = &mut r.progress {
        progress.due_ms = Some(due);
    }
    result(r)
}

async fn the_due_index_follows_every_write(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    if s.due_index().await.unwrap() == DueIndex::Absent {
        // etcd: replicas keep their partitions' jobs in memory; nothing to page.
        assert!(s.due_page(&due_start(0), i64::MAX, 10).await.is_err());
        return;
    }
    assert_eq!(
        s.due_index().await.unwrap(),
        DueIndex::Complete,
        "a new store"
    );
    write1(s, put_due("a", 1, true, Some(100))).await;
    write1(s, put_due("b", 1, true, Some(-200))).await;
    // A put that does not say when is read at the next start (earliest time).
    write1(s, put_due("c", 1, true, None)).await;
    assert_eq!(
        index(s, 100).await,
        at(&[(i64::MIN, "c"), (-200, "b"), (100, "a")])
    );

    // Progress moves a job; a create-only put on a taken key leaves it alone.
    let mut progress = counter(1, 1);
    progress.due_ms = Some(300);
    assert_eq!(write1(s, put_counter("a", progress)).await, OpResult::Done);
    assert_eq!(write1(s, moved("b", 1, 1, 50)).await, OpResult::Done);
    assert_eq!(
        write1(s, put_due("a", 2, true, Some(1))).await,
        OpResult::AlreadyExists
    );
    assert_eq!(
        index(s, 100).await,
        at(&[(i64::MIN, "c"), (50, "b"), (300, "a")])
    );
    // A result of an old version moves nothing.
    assert_eq!(write1(s, moved("b", 9, 2, 7)).await, OpResult::Skipped);

    // Overwrite, finish, delete: the old entry goes in the same op.
    write1(s, put_due("a", 2, false, Some(10))).await;
    write1(s, finish("b", 1)).await;
    write1(s, Op::DeleteJob { key: "c".into() }).await;
    assert_eq!(index(s, 100).await, at(&[(10, "a")]));

    // Restore, guarded put, a dead letter: indexed when they are written.
    let restored = Op::Restore(Box::new(RestoreRecord {
        key: "r".into(),
        job: Some(job(3, "r")),
        counter: Some(counter(3, 2)),
        due_ms: Some(70),
        ..RestoreRecord::default()
    }));
    assert_eq!(write1(s, restored).await, OpResult::Done);
    let guarded = Op::Guarded {
        write: Box::new(GuardedWrite {
            key: "g".into(),
            create_only: true,
            due_ms: Some(80),
            ..GuardedWrite::default()
        }),
        job: Some(Box::new(job(4, "g"))),
    };
    assert_eq!(write1(s, guarded).await, OpResult::Done);
    let mut failing = record("a", 2, 3, 10);
    failing.dead_letter = Some(DeadLetter {
        key: "dlq".into(),
        fallback_key: "dlq-1".into(),
        job: Some(job(7, "dead letter")),
        due_ms: Some(90),
    });
    assert!(matches!(
        write1(s, result(failing)).await,
        OpResult::DeadLettered(_)
    ));
    assert_eq!(
        index(s, 1).await,
        at(&[(10, "a"), (70, "r"), (80, "g"), (90, "dlq")]),
        "read one entry per page"
    );

    // A page stops before `before`, and says where to go on.
    let page = s.due_page(&due_start(0), 75, 10).await.unwrap();
    let keys: Vec<&str> = page.jobs.iter().map(|(_, l)| l.key.as_str()).collect();
    assert_eq!(keys, ["a", "r"]);
    assert_eq!(page.next, None);
    let page = s.due_page(&due_start(0), i64::MAX, 2).await.unwrap();
    assert_eq!(page.jobs.len(), 2);
    let rest = s
        .due_page(page.next.as_deref().unwrap(), i64::MAX, 10)
        .await
        .unwrap();
    let keys: Vec<&str> = rest.jobs.iter().map(|(_, l)| l.key.as_str()).collect();
    assert_eq!(keys, ["g", "dlq"]);
    // The page carries the job and the counter of its generation, as a scan does.
    let restored = &page.jobs[1].1;
    assert_eq!(
        (
            restored.job.generation,
            restored.counter.as_ref().map(|c| c.count)
        ),
        (3, Some(2))
    );
}

async fn a_prefix_delete_leaves_stale_entries_that_readers_skip_and_drop(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    if s.due_index().await.unwrap() == DueIndex::Absent {
        return;
    }
    write1(s, put_due("app||x||1", 1, true, Some(5))).await;
    write1(s, put_due("app||x||2", 1, true, Some(6))).await;
    write1(s, put_due("app||y||1", 1, true, Some(7))).await;
    write1(
        s,
        Op::DeletePrefix {
            prefix: "app||x||".into(),
        },
    )
    .await;
    let page = s.due_page(&due_start(0), i64::MAX, 10).await.unwrap();
    let keys: Vec<&str> = page.jobs.iter().map(|(_, l)| l.key.as_str()).collect();
    assert_eq!(keys, ["app||y||1"], "a deleted job is never read in");
    assert_eq!(
        page.stale,
        vec![(5, "app||x||1".to_owned()), (6, "app||x||2".to_owned())]
    );
    // The same key created again is indexed afresh; its old stale entry is dropped, the new
    // one kept.
    write1(s, put_due("app||x||1", 2, true, Some(9))).await;
    for (due, key) in page.stale {
        write1(s, Op::DropDue { key, due }).await;
    }
    assert_eq!(
        write1(
            s,
            Op::DropDue {
                key: "app||x||1".into(),
                due: 9
            }
        )
        .await,
        OpResult::Skipped,
        "an entry the index confirms is kept"
    );
    assert_eq!(
        index(s, 10).await,
        at(&[(7, "app||y||1"), (9, "app||x||1")])
    );
}

async fn a_store_without_the_index_is_indexed_once(make: Make) {
    // A job written before the index existed (planted as raw bytes).
    let f = make(&[(Table::Jobs, "old", job(1, "old").encode_to_vec())]);
    let s = &*f.store;
    match s.due_index().await.unwrap() {
        DueIndex::Absent => return,
        state => assert_eq!(state, DueIndex::Partial),
    }
    assert_eq!(index(s, 10).await, Vec::new(), "not indexed yet");
    let index_due = |generation| Op::IndexDue {
        key: "old".into(),
        generation,
        due: 42,
    };
    assert_eq!(write1(s, index_due(2)).await, OpResult::Skipped);
    assert_eq!(write1(s, index_due(1)).await, OpResult::Done);
    assert_eq!(write1(s, Op::MarkDueIndexed).await, OpResult::Done);
    assert_eq!(s.due_index().await.unwrap(), DueIndex::Complete);
    assert_eq!(index(s, 10).await, at(&[(42, "old")]));
    // Deleting everything keeps the store complete: nothing left is unindexed.
    write1(
        s,
        Op::DeletePrefix {
            prefix: String::new(),
        },
    )
    .await;
    assert_eq!(s.due_index().await.unwrap(), DueIndex::Complete);
}

/// A bucket of the far index (2²² ms), as `store::apply::due` cuts them.
const BUCKET: i64 = 1 << 22;
/// "Now" of the far-index tests: a bucket boundary, so the buckets below are easy to name.
const NOW: i64 = 405_000 * BUCKET;

/// Every job due in `[from, before)`, as the engine's horizon reads it: page after page.
async fn window(s: &dyn Store, from: i64, before: i64) -> Vec<(i64, String)> {
    let mut start = due_start(from);
    let mut all = Vec::new();
    loop {
        let page = s.due_page(&start, before, 97).await.expect("due page");
        assert!(page.stale.is_empty(), "stale entries: {:?}", page.stale);
        all.extend(page.jobs.into_iter().map(|(ms, l)| (ms, l.key)));
        match page.next {
            Some(next) => start = next,
            None => return all,
        }
    }
}

async fn far_jobs_are_read_in_time_order_as_the_horizon_reaches_them(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    if s.due_index().await.unwrap() == DueIndex::Absent {
        return;
    }
    // The engine's first read: the next five minutes (none due yet).
    assert_eq!(window(s, i64::MIN, NOW + 300_000).await, Vec::new());
    // Jobs over the next ten buckets, created out of time order; one bucket holds more jobs
    // than one move takes (8,192), so it moves in several ops.
    let mut expected = Vec::new();
    for i in 0..40i64 {
        let ms = NOW + BUCKET * ((i * 7) % 10) + 1_000 * (39 - i);
        let key = format!("app||far||{i:02}");
        write1(s, put_due(&key, 1, true, Some(ms))).await;
        expected.push((ms, key));
    }
    let crowded = NOW + 3 * BUCKET + 5;
    for chunk in (0..9_000).collect::<Vec<i64>>().chunks(1_000) {
        let ops = chunk
            .iter()
            .map(|i| {
                put_due(
                    &format!("app||crowd||{i:05}"),
                    1,
                    true,
                    Some(crowded + i % 7),
                )
            })
            .collect();
        s.write(ops).await.unwrap();
    }
    for i in 0..9_000 {
        expected.push((crowded + i % 7, format!("app||crowd||{i:05}")));
    }
    // Changed while in the far index: an overwrite, a delete, progress moving a job nearer
    // and one moving it further. None may be read at its old time.
    write1(
        s,
        put_due("app||far||01", 2, false, Some(NOW + 9 * BUCKET + 3)),
    )
    .await;
    write1(
        s,
        Op::DeleteJob {
            key: "app||far||02".into(),
        },
    )
    .await;
    let mut nearer = counter(1, 1);
    nearer.due_ms = Some(NOW + 200_000);
    write1(s, put_counter("app||far||03", nearer)).await;
    write1(s, moved("app||far||04", 1, 1, NOW + 8 * BUCKET)).await;
    for (ms, key) in &mut expected {
        match key.as_str() {
            "app||far||01" => *ms = NOW + 9 * BUCKET + 3,
            "app||far||03" => *ms = NOW + 200_000,
            "app||far||04" => *ms = NOW + 8 * BUCKET,
            _ => {}
        }
    }
    expected.retain(|(_, k)| k != "app||far||02");
    expected.sort();

    // The horizon moves on, half a bucket at a time: every job is read once, in order, in
    // the window holding its time.
    let mut read = Vec::new();
    let mut from = i64::MIN;
    for step in 1..=24 {
        let before = NOW + step * BUCKET / 2;
        if step == 6 {
            // Its bucket was moved already: it goes straight to the ordered index.
            write1(s, put_due("app||late", 1, true, Some(NOW + BUCKET + 1))).await;
            assert_eq!(
                window(s, NOW + BUCKET, NOW + BUCKET + 2).await,
                at(&[(NOW + BUCKET + 1, "app||late")])
            );
            write1(
                s,
                Op::DeleteJob {
                    key: "app||late".into(),
                },
            )
            .await;
        }
        let got = window(s, from, before).await;
        assert!(
            got.iter().all(|(ms, _)| *ms >= from && *ms < before),
            "step {step}: read outside [{from}, {before})"
        );
        read.extend(got);
        from = before;
    }
    let mut sorted = read.clone();
    sorted.sort();
    assert_eq!(read, sorted, "read in time order");
    assert_eq!(read.len(), expected.len());
    assert_eq!(read, expected);
    // Everything that is left lives in the ordered index now: a delete of all of it leaves
    // nothing to read.
    write1(
        s,
        Op::DeletePrefix {
            prefix: String::new(),
        },
    )
    .await;
    write1(s, put_due("app||after", 1, true, Some(NOW + 40 * BUCKET))).await;
    assert_eq!(index(s, 10).await, at(&[(NOW + 40 * BUCKET, "app||after")]));
}

suite!(
    the_due_index_follows_every_write,
    a_prefix_delete_leaves_stale_entries_that_readers_skip_and_drop,
    a_store_without_the_index_is_indexed_once,
    far_jobs_are_read_in_time_order_as_the_horizon_reaches_them,
);

/// Redb only: the index is written through the log with the job, so a crash after the
/// answer keeps both (replayed together), never one without the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_is_replayed_with_its_job_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Redb::open(dir.path()).unwrap();
        write1(&s, put_due("k", 1, true, Some(123))).await;
        write1(&s, moved("k", 1, 1, 456)).await;
        // Dropped without close, before any checkpoint: only the log has the writes.
    }
    let s = Redb::open(dir.path()).unwrap();
    assert_eq!(index(&s, 10).await, at(&[(456, "k")]));
    assert_eq!(s.due_index().await.unwrap(), DueIndex::Complete);
}

/// Redb only: moves of far buckets are logged like any write, so a crash in the middle of
/// paging replays them and the index reads the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn far_buckets_moved_before_a_crash_read_the_same_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let expected: Vec<(i64, String)> = (0..500i64)
        .map(|i| (NOW + (i % 5) * BUCKET + i, format!("app||k||{i:03}")))
        .collect();
    let first;
    {
        let s = Redb::open(dir.path()).unwrap();
        let _ = window(&s, i64::MIN, NOW).await;
        let ops = expected
            .iter()
            .map(|(ms, key)| put_due(key, 1, true, Some(*ms)))
            .collect();
        s.write(ops).await.unwrap();
        first = window(&s, i64::MIN, NOW + 2 * BUCKET).await;
        // Dropped without close: the moves are in the log only.
    }
    let s = Redb::open(dir.path()).unwrap();
    assert_eq!(window(&s, i64::MIN, NOW + 2 * BUCKET).await, first);
    let mut sorted = expected.clone();
    sorted.sort();
    assert_eq!(first.len(), 200);
    assert_eq!(index(&s, 1000).await, sorted);
}
