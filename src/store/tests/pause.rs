//! A job's pause and its dead letters, against every backend like the rest of the suite:
//! `SetPaused` kept in the counter beside the progress (read back by `get_counter`, `scan`
//! and `page`, kept by later results, dropped by an overwrite), a result that pauses its
//! job, and a result that creates its dead-letter job under its name or its fallback.

use super::history::{record, result};
use super::*;

fn set_paused(key: &str, generation: u64, paused: Option<Paused>) -> Op {
    Op::SetPaused {
        key: key.into(),
        generation,
        paused,
    }
}

async fn paused_of(s: &dyn Store, key: &str) -> Option<Paused> {
    s.get_counter(key).await.unwrap().and_then(|c| c.paused)
}

async fn the_pause_is_kept_with_the_progress_of_its_version(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    // No job, or another version: nothing is written.
    assert_eq!(
        write1(s, set_paused("k", 1, Some(paused("manual")))).await,
        OpResult::Skipped
    );
    write1(s, put("k", job(1, "a"), true)).await;
    assert_eq!(
        write1(s, set_paused("k", 2, Some(paused("manual")))).await,
        OpResult::Skipped
    );
    assert!(s.get_counter("k").await.unwrap().is_none());
    // A job that never ran gets a counter holding only the pause.
    assert_eq!(
        write1(s, set_paused("k", 1, Some(paused("manual")))).await,
        OpResult::Done
    );
    assert_eq!(paused_of(s, "k").await, Some(paused("manual")));
    let loaded = scan_all(s, "", 10).await.concat();
    assert_eq!(
        loaded[0].counter.as_ref().unwrap().paused,
        Some(paused("manual"))
    );
    let page = s.page(PageOf::Active, "", None, 10).await.unwrap();
    assert_eq!(
        page[0].counter.as_ref().unwrap().paused,
        Some(paused("manual"))
    );
    // Results move the progress on and leave the pause alone.
    assert_eq!(
        write1(s, result(record("k", 1, 2, 10))).await,
        OpResult::Done
    );
    let c = s.get_counter("k").await.unwrap().unwrap();
    assert_eq!((c.count, c.paused), (2, Some(paused("manual"))));
    // Resuming twice is fine; the progress stays.
    for _ in 0..2 {
        assert_eq!(write1(s, set_paused("k", 1, None)).await, OpResult::Done);
    }
    let c = s.get_counter("k").await.unwrap().unwrap();
    assert_eq!((c.count, c.paused), (2, None));
    // An overwrite starts unpaused.
    write1(s, set_paused("k", 1, Some(paused("manual")))).await;
    write1(s, put("k", job(3, "b"), false)).await;
    assert_eq!(paused_of(s, "k").await, None);
}

async fn a_result_that_gives_up_its_tick_can_pause_its_job(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "a"), true)).await;
    let mut r = record("k", 1, 1, 10);
    r.dropped = true;
    r.pause = Some(paused("failure_policy_exhausted"));
    assert_eq!(write1(s, result(r.clone())).await, OpResult::Done);
    let c = s.get_counter("k").await.unwrap().unwrap();
    assert_eq!(c.paused, Some(paused("failure_policy_exhausted")));
    assert_eq!((c.dropped, c.on_exhausted.get("pause")), (1, Some(&1)));
    // Of a job overwritten meanwhile: nothing.
    write1(s, put("k", job(2, "b"), false)).await;
    assert_eq!(write1(s, result(r)).await, OpResult::Skipped);
    assert_eq!(paused_of(s, "k").await, None);
}

async fn a_result_that_resumes_ends_the_pause_with_its_skipped_ticks(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "a"), true)).await;
    write1(s, set_paused("k", 1, Some(paused("manual")))).await;
    let mut r = record("k", 1, 1, 10);
    r.run = Some(StoredRun {
        outcome: RunOutcome::Skipped.into(),
        error: "paused".into(),
        ..StoredRun::default()
    });
    r.skipped_ticks = 3;
    r.resume = true;
    assert_eq!(write1(s, result(r)).await, OpResult::Done);
    let c = s.get_counter("k").await.unwrap().unwrap();
    assert_eq!(c.paused, None);
    assert_eq!(c.skipped.get("paused"), Some(&3));
}

async fn a_result_creates_its_dead_letter_job_under_a_free_name(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("src", job(1, "a"), true)).await;
    let given_up = |n| {
        let mut r = record("src", 1, n, 10);
        r.dropped = true;
        r.dead_letter = Some(dead_letter("dlq", "dlq-x"));
        r
    };
    assert_eq!(
        write1(s, result(given_up(1))).await,
        OpResult::DeadLettered(DeadLetterAt::Key)
    );
    assert_eq!(s.get_job("dlq").await.unwrap(), Some(job(7, "dead letter")));
    // Its name is taken: the fallback; then both: none, counted so.
    assert_eq!(
        write1(s, result(given_up(2))).await,
        OpResult::DeadLettered(DeadLetterAt::Fallback)
    );
    assert!(s.get_job("dlq-x").await.unwrap().is_some());
    assert_eq!(
        write1(s, result(given_up(3))).await,
        OpResult::DeadLettered(DeadLetterAt::Nowhere)
    );
    let c = s.get_counter("src").await.unwrap().unwrap();
    assert_eq!(c.dropped, 3);
    assert_eq!(c.on_exhausted.get("dead_letter"), Some(&2));
    assert_eq!(c.on_exhausted.get("dead_letter_failed"), Some(&1));
    // The dead-letter job starts fresh, as any create: no counter, no history.
    assert!(s.get_counter("dlq").await.unwrap().is_none());
    // A result of another version creates nothing.
    write1(s, Op::DeleteJob { key: "dlq".into() }).await;
    write1(s, put("src", job(2, "b"), false)).await;
    assert_eq!(write1(s, result(given_up(4))).await, OpResult::Skipped);
    assert!(s.get_job("dlq").await.unwrap().is_none());
}

async fn a_dead_letter_is_undone_with_the_request_that_carries_it(make: Make) {
    let f = make(&[(Table::Jobs, "bad", garbage())]);
    let s = &*f.store;
    write1(s, put("src", job(1, "a"), true)).await;
    let mut r = record("src", 1, 1, 10);
    r.dropped = true;
    r.dead_letter = Some(dead_letter("dlq", "dlq-x"));
    // A later op of the request meets a corrupt record: the request fails whole.
    let err = s
        .write(vec![result(r.clone()), set_paused("bad", 1, None)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(s.get_job("dlq").await.unwrap().is_none());
    assert!(s.get_counter("src").await.unwrap().is_none());
    // Alone, it lands with its result.
    assert_eq!(
        write1(s, result(r)).await,
        OpResult::DeadLettered(DeadLetterAt::Key)
    );
    assert!(s.get_job("dlq").await.unwrap().is_some());
    assert_eq!(s.get_counter("src").await.unwrap().unwrap().count, 1);
}

suite!(
    the_pause_is_kept_with_the_progress_of_its_version,
    a_result_that_gives_up_its_tick_can_pause_its_job,
    a_result_that_resumes_ends_the_pause_with_its_skipped_ticks,
    a_result_creates_its_dead_letter_job_under_a_free_name,
    a_dead_letter_is_undone_with_the_request_that_carries_it,
);

/// Redb only: a pause written through the log survives a reopen (the log replays it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Redb::open(dir.path()).unwrap();
        write1(&s, put("k", job(1, "a"), true)).await;
        write1(&s, set_paused("k", 1, Some(paused("manual")))).await;
        s.close().await.unwrap();
    }
    let s = Redb::open(dir.path()).unwrap();
    assert_eq!(paused_of(&s, "k").await, Some(paused("manual")));
}
