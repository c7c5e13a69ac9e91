//! Held executions (async completion) kept in the counter, against every backend: a result
//! that holds an execution counts no run and records none, holding the same id again
//! replaces it (a heartbeat), the result that ends it releases it in the same op, an
//! overwrite drops them, and (redb) a reopen keeps them.

use super::history::{record, result};
use super::*;
use crate::store::HeldExecution;

fn held(id: u8, until: i64) -> HeldExecution {
    HeldExecution {
        execution_id: vec![id; 16],
        nominal: Some(Timestamp {
            seconds: 100,
            nanos: 0,
        }),
        attempt: 1,
        started: Some(Timestamp {
            seconds: 101,
            nanos: 0,
        }),
        lease_until: Some(Timestamp {
            seconds: until,
            nanos: 0,
        }),
        lease_nanos: 30_000_000_000,
        kind: String::new(),
    }
}

/// A record that only holds `h`.
fn hold(key: &str, generation: u64, h: HeldExecution) -> Op {
    result(ResultRecord {
        key: key.into(),
        generation,
        hold: Some(h),
        history_limit: 10,
        ..ResultRecord::default()
    })
}

async fn held_of(s: &dyn Store, key: &str) -> Vec<HeldExecution> {
    s.get_counter(key)
        .await
        .unwrap()
        .map(|c| c.held)
        .unwrap_or_default()
}

async fn held_executions_are_kept_until_their_result_releases_them(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    // No job of that version: nothing is held.
    assert_eq!(
        write1(s, hold("k", 1, held(1, 130))).await,
        OpResult::Skipped
    );
    write1(s, put("k", job(1, "a"), true)).await;
    assert_eq!(write1(s, hold("k", 1, held(1, 130))).await, OpResult::Done);
    write1(s, hold("k", 1, held(2, 140))).await;
    // A heartbeat holds the same id again: replaced, not added.
    write1(s, hold("k", 1, held(1, 160))).await;
    let c = s.get_counter("k").await.unwrap().unwrap();
    assert_eq!(c.held, [held(2, 140), held(1, 160)]);
    // Holding counts no run and records none.
    assert_eq!((c.runs, c.delivered), (0, 0));
    assert!(s.list_runs("k", None, 10).await.unwrap().is_empty());
    let loaded = scan_all(s, "", 10).await.concat();
    assert_eq!(loaded[0].counter.as_ref().unwrap().held.len(), 2);
    // The result that ends execution 1 releases it, and counts as any result.
    let mut r = record("k", 1, 1, 10);
    r.release = vec![1; 16];
    assert_eq!(write1(s, result(r)).await, OpResult::Done);
    let c = s.get_counter("k").await.unwrap().unwrap();
    assert_eq!((c.held, c.runs, c.count), (vec![held(2, 140)], 1, 1));
    // An overwrite starts with nothing held.
    write1(s, put("k", job(2, "b"), false)).await;
    assert!(held_of(s, "k").await.is_empty());
}

suite!(held_executions_are_kept_until_their_result_releases_them);

/// Redb only: a held execution written through the log survives a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_execution_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Redb::open(dir.path()).unwrap();
        write1(&s, put("k", job(1, "a"), true)).await;
        write1(&s, hold("k", 1, held(7, 130))).await;
        s.close().await.unwrap();
    }
    let s = Redb::open(dir.path()).unwrap();
    assert_eq!(held_of(&s, "k").await, [held(7, 130)]);
}
