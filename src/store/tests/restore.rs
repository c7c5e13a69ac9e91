//! `Restore` (a job brought back from a backup), against every backend: the job lands with
//! its progress, or as a finished record; an existing job or finished record is left alone
//! unless the op overwrites it, and an overwrite drops the old version's runs.

use super::history::{record, result};
use super::*;

fn restore(key: &str, job: StoredJob, counter: Option<StoredCounter>, overwrite: bool) -> Op {
    Op::Restore(Box::new(RestoreRecord {
        key: key.into(),
        job: Some(job),
        counter,
        finished_at: None,
        overwrite,
        due_ms: None,
    }))
}

fn at(seconds: i64) -> Timestamp {
    Timestamp { seconds, nanos: 0 }
}

async fn a_restored_job_keeps_its_progress_and_generation(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    // The counter's generation is made the job's, whatever the file said.
    let mut progress = counter(7, 4);
    progress.generation = 99;
    progress.paused = Some(paused("manual"));
    assert_eq!(
        write1(s, restore("k", job(7, "a"), Some(progress), false)).await,
        OpResult::Done
    );
    let loaded = scan_all(s, "", 10).await.concat();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].job, job(7, "a"));
    let c = loaded[0]
        .counter
        .clone()
        .expect("the counter of its generation");
    assert_eq!((c.generation, c.count), (7, 4));
    assert_eq!(c.paused, Some(paused("manual")));
    // Results of that version go on from there.
    assert_eq!(
        write1(s, result(record("k", 7, 5, 10))).await,
        OpResult::Done
    );
    assert_eq!(s.get_counter("k").await.unwrap().unwrap().count, 5);
    // A job that never fired comes back without a counter.
    write1(s, restore("fresh", job(3, "b"), None, false)).await;
    assert!(s.get_counter("fresh").await.unwrap().is_none());
}

async fn a_restore_skips_what_exists_unless_it_overwrites(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "live"), true)).await;
    write1(s, result(record("k", 1, 2, 10))).await;
    // Same key, even the same generation: nothing changes.
    assert_eq!(
        write1(s, restore("k", job(1, "file"), Some(counter(1, 9)), false)).await,
        OpResult::AlreadyExists
    );
    assert_eq!(s.get_job("k").await.unwrap(), Some(job(1, "live")));
    assert_eq!(s.get_counter("k").await.unwrap().unwrap().count, 2);
    assert_eq!(s.list_runs("k", None, 10).await.unwrap().len(), 1);
    // Overwritten: the file's version, its progress, and no runs of the old one.
    assert_eq!(
        write1(s, restore("k", job(5, "file"), Some(counter(5, 9)), true)).await,
        OpResult::Replaced
    );
    assert_eq!(s.get_job("k").await.unwrap(), Some(job(5, "file")));
    assert_eq!(s.get_counter("k").await.unwrap().unwrap().count, 9);
    assert!(s.list_runs("k", None, 10).await.unwrap().is_empty());
    // Overwriting with a job that never fired leaves no counter behind.
    write1(s, restore("k", job(6, "file"), None, true)).await;
    assert!(s.get_counter("k").await.unwrap().is_none());
}

async fn a_finished_job_is_restored_as_finished(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    let finished = RestoreRecord {
        key: "done".into(),
        job: Some(job(4, "d")),
        counter: Some(counter(4, 3)),
        finished_at: Some(at(1_800_000_000)),
        overwrite: false,
        due_ms: None,
    };
    assert_eq!(
        write1(s, Op::Restore(Box::new(finished.clone()))).await,
        OpResult::Done
    );
    assert!(s.get_job("done").await.unwrap().is_none(), "it never fires");
    let kept = s
        .get_finished("done")
        .await
        .unwrap()
        .expect("kept as finished");
    assert_eq!(kept.job, Some(job(4, "d")));
    assert_eq!(kept.counter.map(|c| c.count), Some(3));
    assert_eq!(kept.finished_at, Some(at(1_800_000_000)));
    // A finished record counts as existing; an active job replaces it on overwrite.
    assert_eq!(
        write1(s, Op::Restore(Box::new(finished))).await,
        OpResult::AlreadyExists
    );
    assert_eq!(
        write1(s, restore("done", job(8, "e"), None, true)).await,
        OpResult::Replaced
    );
    assert!(s.get_finished("done").await.unwrap().is_none());
    assert_eq!(s.get_job("done").await.unwrap(), Some(job(8, "e")));
}

suite!(
    a_restored_job_keeps_its_progress_and_generation,
    a_restore_skips_what_exists_unless_it_overwrites,
    a_finished_job_is_restored_as_finished,
);

/// Redb only: restores written through the log survive a reopen (the log replays them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Redb::open(dir.path()).unwrap();
        write1(&s, restore("k", job(2, "a"), Some(counter(2, 6)), false)).await;
        s.close().await.unwrap();
    }
    let s = Redb::open(dir.path()).unwrap();
    assert_eq!(s.get_counter("k").await.unwrap().unwrap().count, 6);
    assert_eq!(s.get_job("k").await.unwrap(), Some(job(2, "a")));
}
