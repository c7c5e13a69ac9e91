//! Conditional writes (`Op::Guarded`) and the idempotency records they keep, against every
//! backend like the rest of the suite: `If-Match` compared with the job's generation in the
//! commit that writes, an idempotency claim answered from its record (same request: replayed;
//! another: refused) until it expires, and the expiry sweep's op.

use super::*;

fn at(seconds: i64) -> Timestamp {
    Timestamp { seconds, nanos: 0 }
}

fn claim(key: &str, name: &str, fingerprint: u8, generation: u64, now: i64) -> IdempotencyClaim {
    IdempotencyClaim {
        key: format!("app||ns||a||{key}"),
        record: Some(IdempotencyRecord {
            name: name.into(),
            fingerprint: vec![fingerprint; 16],
            at: Some(at(now)),
            generation,
        }),
        expired_before: Some(at(now - 86_400)),
    }
}

fn guarded_put(
    key: &str,
    job: StoredJob,
    create_only: bool,
    if_match: Option<IfMatch>,
    idempotency: Option<IdempotencyClaim>,
) -> Op {
    Op::Guarded {
        write: Box::new(GuardedWrite {
            key: key.into(),
            create_only,
            if_match,
            idempotency,
            due_ms: None,
        }),
        job: Some(Box::new(job)),
    }
}

fn guarded_delete(key: &str, if_match: IfMatch) -> Op {
    Op::Guarded {
        write: Box::new(GuardedWrite {
            key: key.into(),
            if_match: Some(if_match),
            ..GuardedWrite::default()
        }),
        job: None,
    }
}

fn generations(g: &[u64]) -> IfMatch {
    IfMatch {
        any: false,
        generations: g.to_vec(),
    }
}

fn any() -> IfMatch {
    IfMatch {
        any: true,
        generations: Vec::new(),
    }
}

async fn generation(s: &dyn Store, key: &str) -> Option<u64> {
    s.get_job(key).await.unwrap().map(|j| j.generation)
}

async fn if_match_compares_the_generation_in_the_commit(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    // No job: neither `*` nor an etag matches, and nothing is created.
    for m in [any(), generations(&[1])] {
        assert_eq!(
            write1(s, guarded_put("k", job(1, "a"), false, Some(m), None)).await,
            OpResult::PreconditionFailed
        );
    }
    assert_eq!(generation(s, "k").await, None);
    write1(s, put("k", job(1, "a"), true)).await;
    write1(s, put_counter("k", counter(1, 2))).await;
    // Another generation: refused, job and progress untouched.
    assert_eq!(
        write1(
            s,
            guarded_put("k", job(2, "b"), false, Some(generations(&[7])), None)
        )
        .await,
        OpResult::PreconditionFailed
    );
    assert_eq!(generation(s, "k").await, Some(1));
    assert_eq!(s.get_counter("k").await.unwrap().unwrap().count, 2);
    // One of the listed generations: the overwrite happens (and resets progress).
    assert_eq!(
        write1(
            s,
            guarded_put("k", job(2, "b"), false, Some(generations(&[7, 1])), None)
        )
        .await,
        OpResult::Done
    );
    assert_eq!(generation(s, "k").await, Some(2));
    assert!(s.get_counter("k").await.unwrap().is_none());
    // The same etag again is stale now.
    assert_eq!(
        write1(
            s,
            guarded_put("k", job(3, "c"), false, Some(generations(&[1])), None)
        )
        .await,
        OpResult::PreconditionFailed
    );
    // A delete under If-Match: a stale one deletes nothing; `*` deletes.
    assert_eq!(
        write1(s, guarded_delete("k", generations(&[1]))).await,
        OpResult::PreconditionFailed
    );
    assert_eq!(generation(s, "k").await, Some(2));
    assert_eq!(
        write1(s, guarded_delete("k", any())).await,
        OpResult::Deleted(1)
    );
    assert_eq!(generation(s, "k").await, None);
}

async fn two_overwriters_of_one_version_have_one_winner(make: Make) {
    let f = make(&[]);
    let s = Arc::clone(&f.store);
    write1(&*s, put("k", job(1, "a"), true)).await;
    let tasks: Vec<_> = (2..10u64)
        .map(|g| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let op = guarded_put("k", job(g, "x"), false, Some(generations(&[1])), None);
                (g, write1(&*s, op).await)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (g, result) = task.await.unwrap();
        match result {
            OpResult::Done => winners.push(g),
            other => assert_eq!(other, OpResult::PreconditionFailed),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(generation(&*s, "k").await, Some(winners[0]));
}

async fn an_idempotency_claim_is_answered_from_its_record(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    let now = 1_800_000_000;
    let first = claim("key1", "k", 1, 1, now);
    assert_eq!(
        write1(s, guarded_put("k", job(1, "a"), true, None, Some(first))).await,
        OpResult::Done
    );
    write1(s, put_counter("k", counter(1, 5))).await;
    // The same request again (a new generation drawn, an overwrite): replayed, nothing written.
    let again = claim("key1", "k", 1, 2, now + 60);
    assert_eq!(
        write1(
            s,
            guarded_put("k", job(2, "b"), false, None, Some(again.clone()))
        )
        .await,
        OpResult::Replayed(1)
    );
    assert_eq!(generation(s, "k").await, Some(1));
    assert_eq!(s.get_counter("k").await.unwrap().unwrap().count, 5);
    // Another request under the key (another fingerprint, or another job name): refused.
    for other in [
        claim("key1", "k", 2, 3, now + 60),
        claim("key1", "other", 1, 3, now + 60),
    ] {
        let name_key = other.record.as_ref().unwrap().name.clone();
        assert_eq!(
            write1(
                s,
                guarded_put(&name_key, job(3, "c"), false, None, Some(other))
            )
            .await,
            OpResult::KeyReused
        );
    }
    assert_eq!(generation(s, "other").await, None);
    // Still answered after the job is deleted: a retry does not bring it back.
    write1(s, Op::DeleteJob { key: "k".into() }).await;
    assert_eq!(
        write1(s, guarded_put("k", job(4, "d"), false, None, Some(again))).await,
        OpResult::Replayed(1)
    );
    assert_eq!(generation(s, "k").await, None);
    // Keys are the owner's: another app's key of the same text is another record.
    let mut elsewhere = claim("key1", "k", 1, 5, now + 60);
    elsewhere.key = "app||ns||b||key1".into();
    assert_eq!(
        write1(
            s,
            guarded_put("k", job(5, "e"), true, None, Some(elsewhere))
        )
        .await,
        OpResult::Done
    );
    // A day later the record has expired: the request is judged afresh and recorded anew.
    let later = claim("key1", "k", 9, 6, now + 86_401);
    assert_eq!(
        write1(
            s,
            guarded_put("k", job(6, "f"), false, None, Some(later.clone()))
        )
        .await,
        OpResult::Done
    );
    assert_eq!(generation(s, "k").await, Some(6));
    let mut repeat = later;
    repeat.record.as_mut().unwrap().generation = 7;
    assert_eq!(
        write1(s, guarded_put("k", job(7, "g"), false, None, Some(repeat))).await,
        OpResult::Replayed(6)
    );
}

async fn a_refused_create_records_nothing(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "a"), true)).await;
    let now = 1_800_000_000;
    // Create-only on a taken name: AlreadyExists, and the key stays free.
    assert_eq!(
        write1(
            s,
            guarded_put(
                "k",
                job(2, "b"),
                true,
                None,
                Some(claim("c", "k", 1, 2, now))
            )
        )
        .await,
        OpResult::AlreadyExists
    );
    // An If-Match that fails: refused, and the key stays free.
    assert_eq!(
        write1(
            s,
            guarded_put(
                "k",
                job(3, "b"),
                false,
                Some(generations(&[9])),
                Some(claim("c", "k", 2, 3, now))
            )
        )
        .await,
        OpResult::PreconditionFailed
    );
    assert!(s.page_idempotency(None, 10).await.unwrap().is_empty());
    // So a corrected request under the same key goes through.
    assert_eq!(
        write1(
            s,
            guarded_put(
                "k",
                job(4, "b"),
                false,
                None,
                Some(claim("c", "k", 3, 4, now))
            )
        )
        .await,
        OpResult::Done
    );
    assert_eq!(generation(s, "k").await, Some(4));
}

async fn the_sweep_forgets_only_expired_records(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    for (i, written) in [100, 200, 300].into_iter().enumerate() {
        let name = format!("j{i}");
        let op = guarded_put(
            &name,
            job(i as u64 + 1, "a"),
            true,
            None,
            Some(claim(&format!("key{i}"), &name, 1, i as u64 + 1, written)),
        );
        assert_eq!(write1(s, op).await, OpResult::Done);
    }
    let page = s.page_idempotency(None, 2).await.unwrap();
    assert_eq!(
        page,
        [
            ("app||ns||a||key0".to_owned(), at(100)),
            ("app||ns||a||key1".to_owned(), at(200)),
        ]
    );
    let rest = s.page_idempotency(Some(&page[1].0), 10).await.unwrap();
    assert_eq!(rest, [("app||ns||a||key2".to_owned(), at(300))]);
    let forget = |key: &str| Op::ForgetIdempotency {
        key: format!("app||ns||a||{key}"),
        before: at(200),
    };
    assert_eq!(
        s.write(vec![forget("key0"), forget("key1"), forget("nokey")])
            .await
            .unwrap(),
        [
            OpResult::Deleted(1),
            OpResult::Deleted(0),
            OpResult::Deleted(0)
        ]
    );
    let left: Vec<_> = s
        .page_idempotency(None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(left, ["app||ns||a||key1", "app||ns||a||key2"]);
}

suite!(
    if_match_compares_the_generation_in_the_commit,
    two_overwriters_of_one_version_have_one_winner,
    an_idempotency_claim_is_answered_from_its_record,
    a_refused_create_records_nothing,
    the_sweep_forgets_only_expired_records,
);

/// Redb only: a guarded write and its idempotency record are replayed from the write-ahead
/// log after a crash (no checkpoint ever made them part of the database file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_records_come_back_from_the_log_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1_800_000_000;
    let options = RedbOptions {
        checkpoint_interval: std::time::Duration::from_secs(3600),
        checkpoint_bytes: u64::MAX,
        checkpoint_work: std::time::Duration::MAX,
        ..RedbOptions::default()
    };
    let s = Redb::open_with(dir.path(), options).unwrap();
    let op = guarded_put(
        "k",
        job(1, "a"),
        true,
        None,
        Some(claim("c", "k", 1, 1, now)),
    );
    assert_eq!(write1(&s, op).await, OpResult::Done);
    let stale = guarded_put("k", job(2, "b"), false, Some(generations(&[9])), None);
    assert_eq!(write1(&s, stale).await, OpResult::PreconditionFailed);
    assert_eq!(s.stats().checkpoints, 0);
    // What `kill -9` now would leave: the files as they are (the page cache survives).
    let crashed = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), crashed.path().join(entry.file_name())).unwrap();
    }
    let s = Redb::open(crashed.path()).unwrap();
    assert!(s.stats().replayed > 0);
    assert_eq!(generation(&s, "k").await, Some(1));
    let op = guarded_put(
        "k",
        job(3, "b"),
        false,
        None,
        Some(claim("c", "k", 1, 3, now + 5)),
    );
    assert_eq!(write1(&s, op).await, OpResult::Replayed(1));
    assert_eq!(generation(&s, "k").await, Some(1));
}
