//! The values table ([`Op::PutValue`]: actor state) against every backend: a value is read
//! back, replaced and removed; the values of one request change together, with the request's
//! other ops (a failing op takes them all back); and a value survives a reopen (the log
//! replays it).

use super::*;

fn put_value(key: &str, value: &[u8]) -> Op {
    Op::PutValue {
        key: key.into(),
        value: Some(value.to_vec()),
    }
}

fn remove_value(key: &str) -> Op {
    Op::PutValue {
        key: key.into(),
        value: None,
    }
}

async fn a_value_is_put_replaced_and_removed(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    assert_eq!(s.get_value("a||x").await.unwrap(), None);
    assert_eq!(write1(s, put_value("a||x", b"1")).await, OpResult::Done);
    assert_eq!(
        s.get_value("a||x").await.unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(write1(s, put_value("a||x", b"")).await, OpResult::Done);
    assert_eq!(
        s.get_value("a||x").await.unwrap().as_deref(),
        Some(&b""[..])
    );
    // Removing a missing key is fine.
    assert_eq!(write1(s, remove_value("a||y")).await, OpResult::Done);
    assert_eq!(write1(s, remove_value("a||x")).await, OpResult::Done);
    assert_eq!(s.get_value("a||x").await.unwrap(), None);
    // Values are no jobs.
    write1(s, put_value("app||ns||a||v", b"2")).await;
    assert!(s.list_jobs("").await.unwrap().is_empty());
    assert!(s.get_job("app||ns||a||v").await.unwrap().is_none());
}

async fn the_values_of_a_request_change_together(make: Make) {
    let f = make(&[(Table::Jobs, "bad", garbage())]);
    let s = &*f.store;
    write1(s, put_value("k1", b"old")).await;
    let results = s
        .write(vec![
            put_value("k1", b"new"),
            put_value("k2", b"two"),
            remove_value("k3"),
        ])
        .await
        .unwrap();
    assert_eq!(results, vec![OpResult::Done; 3]);
    assert_eq!(
        s.get_value("k1").await.unwrap().as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(
        s.get_value("k2").await.unwrap().as_deref(),
        Some(&b"two"[..])
    );
    // A later op of the request fails on a corrupt record: none of its values changed.
    let err = s
        .write(vec![
            remove_value("k1"),
            put_value("k2", b"changed"),
            put_counter("bad", counter(1, 1)),
        ])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert_eq!(
        s.get_value("k1").await.unwrap().as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(
        s.get_value("k2").await.unwrap().as_deref(),
        Some(&b"two"[..])
    );
}

async fn values_are_listed_by_prefix(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    for key in ["b||2", "a||1", "b||1", "b|", "c"] {
        write1(s, put_value(key, key.as_bytes())).await;
    }
    let listed = s.list_values("b||").await.unwrap();
    assert_eq!(
        listed,
        vec![
            ("b||1".to_owned(), b"b||1".to_vec()),
            ("b||2".to_owned(), b"b||2".to_vec())
        ]
    );
    assert_eq!(s.list_values("").await.unwrap().len(), 5);
    assert!(s.list_values("d").await.unwrap().is_empty());
}

suite!(
    values_are_listed_by_prefix,
    a_value_is_put_replaced_and_removed,
    the_values_of_a_request_change_together,
);

/// Redb only: values written through the log survive a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Redb::open(dir.path()).unwrap();
        write1(&s, put_value("v1", b"kept")).await;
        write1(&s, put_value("v2", b"gone")).await;
        write1(&s, remove_value("v2")).await;
        s.close().await.unwrap();
    }
    let s = Redb::open(dir.path()).unwrap();
    assert_eq!(
        s.get_value("v1").await.unwrap().as_deref(),
        Some(&b"kept"[..])
    );
    assert_eq!(s.get_value("v2").await.unwrap(), None);
}
