//! The rounds against Dapr's protocol, step by step (no network: a round's effects).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tonic::{Code, Status};

use super::round::{Effect, Round, Waiting};
use crate::proto::dapr_placement::{self as pv1, HostOperation};

fn round(coalesce: Duration) -> Round<&'static str> {
    Round::new(
        100,
        Duration::from_secs(5),
        coalesce,
        Arc::new(AtomicU64::new(0)),
    )
}

fn host(name: &str, entities: &[&str]) -> pv1::Host {
    pv1::Host {
        name: name.into(),
        id: name.into(),
        namespace: "default".into(),
        entities: entities.iter().map(|e| (*e).into()).collect(),
        ..Default::default()
    }
}

fn ack(name: &str, entities: &[&str], op: HostOperation, version: u64) -> pv1::Host {
    let mut h = host(name, entities);
    h.set_operation(op);
    h.version = Some(version);
    h
}

/// The orders sent, as (stream, operation, version).
fn sent<C: std::fmt::Debug>(effects: &[Effect<C>]) -> Vec<(u64, String, u64)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send { idx, order } => Some((*idx, order.operation.clone(), order.version)),
            _ => None,
        })
        .collect()
}

fn started<C>(effects: &[Effect<C>]) -> Vec<u64> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Start { idx, .. } => Some(*idx),
            _ => None,
        })
        .collect()
}

/// Acks a whole round (lock, update, unlock) of `version` from stream `idx`.
fn complete(r: &mut Round<&'static str>, idx: u64, name: &str, version: u64) {
    for op in [
        HostOperation::Lock,
        HostOperation::Update,
        HostOperation::Unlock,
    ] {
        r.reported(idx, ack(name, &["t"], op, version));
    }
}

/// A round with host `name` (type `t`) connected as `conn`.
fn join(r: &mut Round<&'static str>, name: &'static str) -> Vec<Effect<&'static str>> {
    r.add(Waiting {
        host: host(name, &["t"]),
        conn: name,
    })
}

fn s(idx: u64, op: &str, v: u64) -> (u64, String, u64) {
    (idx, op.to_owned(), v)
}

#[test]
#[allow(deprecated)]
fn a_host_with_actors_starts_a_round_of_lock_update_unlock() {
    let mut r = round(Duration::ZERO);
    let e = r.add(Waiting {
        host: host("a", &["t"]),
        conn: "a",
    });
    assert_eq!(started(&e), [0]);
    assert_eq!(sent(&e), [s(0, "lock", 1)]);
    assert!(e.iter().any(|e| matches!(e, Effect::ArmTimeout(1))));
    let e = r.reported(0, ack("a", &["t"], HostOperation::Lock, 1));
    assert_eq!(sent(&e), [s(0, "update", 1)]);
    let Some(Effect::Send { order, .. }) = e.first() else {
        panic!("an update")
    };
    let tables = order.tables.as_ref().expect("tables");
    assert_eq!(tables.version, "1");
    assert!(tables.entries["t"].load_map.contains_key("a"));
    let e = r.reported(0, ack("a", &["t"], HostOperation::Update, 1));
    assert_eq!(sent(&e), [s(0, "unlock", 1)]);
    let e = r.reported(0, ack("a", &["t"], HostOperation::Unlock, 1));
    assert!(sent(&e).is_empty());
    assert!(e.iter().any(|e| matches!(e, Effect::DisarmTimeout(1))));
    assert_eq!(r.state().version, 1);
    assert_eq!(r.state().hosts.len(), 1);
}

#[test]
fn a_host_joining_mid_round_waits_and_a_no_actor_one_gets_the_table_alone() {
    // Dapr's placement/dissemination/noactorjoin, as effects.
    let mut r = round(Duration::ZERO);
    join(&mut r, "a");
    let e = r.add(Waiting {
        host: host("b", &[]),
        conn: "b",
    });
    assert!(e.is_empty(), "b waits for the round: {e:?}");
    // Acks without operation count as the round's step.
    r.reported(0, host("a", &["t"]));
    r.reported(0, host("a", &["t"]));
    let e = r.reported(0, host("a", &["t"]));
    assert_eq!(started(&e), [1]);
    assert_eq!(
        sent(&e),
        [s(1, "lock", 1), s(1, "update", 1), s(1, "unlock", 1)],
        "the table to b alone, no new round"
    );
    // b's acks of the table it was pushed change nothing.
    for op in [
        HostOperation::Lock,
        HostOperation::Update,
        HostOperation::Unlock,
    ] {
        assert!(sent(&r.reported(1, ack("b", &[], op, 1))).is_empty());
    }
    assert_eq!(r.state().hosts.len(), 1);
}

#[test]
fn a_host_joining_with_actors_after_a_round_starts_the_next_one_for_all() {
    let mut r = round(Duration::ZERO);
    join(&mut r, "a");
    join(&mut r, "b");
    for op in [HostOperation::Lock, HostOperation::Update] {
        r.reported(0, ack("a", &["t"], op, 1));
    }
    let e = r.reported(0, ack("a", &["t"], HostOperation::Unlock, 1));
    assert_eq!(started(&e), [1]);
    assert_eq!(sent(&e), [s(0, "lock", 2), s(1, "lock", 2)]);
    r.reported(0, ack("a", &["t"], HostOperation::Lock, 2));
    let e = r.reported(1, ack("b", &["t"], HostOperation::Lock, 2));
    assert_eq!(sent(&e), [s(0, "update", 2), s(1, "update", 2)]);
    let Some(Effect::Send { order, .. }) = e.first() else {
        panic!()
    };
    assert_eq!(
        order.tables.as_ref().unwrap().entries["t"].load_map.len(),
        2
    );
}

#[test]
fn a_stream_that_does_not_ack_is_closed_at_the_timeout_and_the_round_restarts() {
    let mut r = round(Duration::ZERO);
    join(&mut r, "a");
    join(&mut r, "b");
    complete(&mut r, 0, "a", 1);
    // Round 2 (a and b): only a acks the lock.
    r.reported(0, ack("a", &["t"], HostOperation::Lock, 2));
    assert!(
        r.timeout(1).is_empty(),
        "an old version's timeout does nothing"
    );
    let e = r.timeout(2);
    let closed: Vec<(u64, Code, String)> = e
        .iter()
        .filter_map(|e| match e {
            Effect::Close { idx, status } => {
                Some((*idx, status.code(), status.message().to_owned()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        closed,
        [(
            1,
            Code::DeadlineExceeded,
            "dissemination timeout after 5s for version 2".to_owned()
        )]
    );
    assert_eq!(sent(&e), [s(0, "lock", 3)]);
    assert_eq!(r.state().hosts.len(), 1);
}

#[test]
fn a_host_leaving_starts_a_round_without_it() {
    let mut r = round(Duration::ZERO);
    join(&mut r, "a");
    complete(&mut r, 0, "a", 1);
    join(&mut r, "b");
    // Both ack each step before the next is sent.
    for op in [
        HostOperation::Lock,
        HostOperation::Update,
        HostOperation::Unlock,
    ] {
        r.reported(0, ack("a", &["t"], op, 2));
        r.reported(1, ack("b", &["t"], op, 2));
    }
    let e = r.closed(1, Status::cancelled("gone"));
    assert_eq!(sent(&e), [s(0, "lock", 3)]);
    r.reported(0, ack("a", &["t"], HostOperation::Lock, 3));
    let e = r.reported(0, ack("a", &["t"], HostOperation::Update, 3));
    assert_eq!(sent(&e), [s(0, "unlock", 3)]);
    assert_eq!(r.state().hosts.len(), 1);
    assert_eq!(r.state().hosts[0].name, "a");
}

#[test]
fn a_stream_closing_mid_round_lets_the_round_finish_without_it() {
    let mut r = round(Duration::ZERO);
    join(&mut r, "a");
    complete(&mut r, 0, "a", 1);
    join(&mut r, "b");
    r.reported(0, ack("a", &["t"], HostOperation::Lock, 2));
    // b goes before acking: a is the only stream left, and it acked: the round moves on.
    let e = r.closed(1, Status::cancelled("gone"));
    assert_eq!(sent(&e), [s(0, "update", 2)]);
}

#[test]
fn coalescing_gathers_joins_into_one_round() {
    let mut r = round(Duration::from_millis(200));
    join(&mut r, "a");
    for op in [HostOperation::Lock, HostOperation::Update] {
        r.reported(0, ack("a", &["t"], op, 1));
    }
    let e = r.reported(0, ack("a", &["t"], HostOperation::Unlock, 1));
    assert!(e.iter().any(|e| matches!(e, Effect::ArmCoalesce)));
    for (name, conn) in [("b", "b"), ("c", "c")] {
        assert!(
            r.add(Waiting {
                host: host(name, &["t"]),
                conn
            })
            .is_empty()
        );
    }
    let e = r.coalesce_fire();
    assert_eq!(started(&e), [1, 2]);
    assert_eq!(
        sent(&e),
        [s(0, "lock", 2), s(1, "lock", 2), s(2, "lock", 2)]
    );
}

#[test]
fn reports_of_older_versions_are_ignored() {
    let mut r = round(Duration::ZERO);
    join(&mut r, "a");
    complete(&mut r, 0, "a", 1);
    let e = r.reported(0, ack("a", &["t", "u"], HostOperation::Report, 0));
    assert!(sent(&e).is_empty(), "version 0 < 1: ignored");
    let mut report = host("a", &["t", "u"]);
    report.set_operation(HostOperation::Report);
    let e = r.reported(0, report);
    assert_eq!(sent(&e), [s(0, "lock", 2)], "new types: a new round");
}

#[test]
fn reports_are_checked_as_dapr_checks_them() {
    let mut h = host("a", &["t"]);
    assert!(super::authorize(&h).is_ok());
    h.version = Some(1);
    assert_eq!(
        super::authorize(&h).unwrap_err().message(),
        "both operation and version must be set or both must be unset"
    );
    let mut h = host("a", &["t"]);
    h.namespace.clear();
    assert_eq!(
        super::authorize(&h).unwrap_err().message(),
        "host ID and namespace must be provided"
    );
    let h = host("a", &["dapr.internal.default.other.workflow"]);
    let err = super::authorize(&h).unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(
        err.message(),
        "entity dapr.internal.default.other.workflow is not allowed for app ID a in namespace default"
    );
    assert!(super::authorize(&host("a", &["dapr.internal.default.a.workflow"])).is_ok());
}
