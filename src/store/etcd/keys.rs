//! The etcd key layout, in one place: every key jobsd reads or writes in etcd is named here,
//! under a namespace (Dapr's `--etcd-key-prefix`, `dapr` by default; no trailing `/`).
//!
//! - go-etcd-cron's, which the Dapr Scheduler and its tools read: `<ns>/jobs/<key>` (the job),
//!   `<ns>/counters/<key>` (its progress), `<ns>/leadership/<id>` (a member's record);
//! - the replicas' cluster: `<ns>/members/<id>` (a live replica's address) and
//!   `<ns>/partitions/<p>` (the owner of a partition);
//! - the store's writers: `<ns>/writers/<id>`, each writer's commit marker;
//! - jobsd's own, under `<ns>/`[`OWN`]`/`: the history (`runs/`, `finished/`), idempotency
//!   records, the partition index (`index/<count>/<p>/<key>`, `indexed/<count>`).

use crate::store::tables::Table;

/// The segment under the namespace that holds jobsd's own keys (history, idempotency, the
/// partition index). Not `jobsd/`, as before: `dapr/jobsd/…` falls under the prefix
/// `dapr/jobs`, which Dapr's tools and tests list as "the Scheduler's jobs" (see `legacy.rs`).
pub(crate) const OWN: &str = "x-jobsd";

/// Where jobsd's own keys lived before [`OWN`]: `<ns>/jobsd/`.
pub(crate) fn legacy_own_prefix(namespace: &str) -> String {
    format!("{namespace}/jobsd/")
}

/// `<ns>/x-jobsd/`: every key of jobsd's own.
pub(crate) fn own_prefix(namespace: &str) -> String {
    format!("{namespace}/{OWN}/")
}

/// Where `table` lives under `namespace`: go-etcd-cron's `jobs/` and `counters/`, and
/// jobsd's history under [`OWN`], which go-etcd-cron never reads.
pub(crate) fn table_prefix(namespace: &str, table: Table) -> String {
    match table {
        Table::Jobs | Table::Counters => format!("{namespace}/{}/", table.name()),
        Table::Runs
        | Table::Finished
        | Table::Idempotency
        | Table::Due
        | Table::DueFar
        | Table::DueAt
        | Table::Values => format!("{}{}/", own_prefix(namespace), table.name()),
    }
}

/// The commit marker of the store writer `id`: `<ns>/writers/<id as 16 hex digits>`.
pub(crate) fn writer_marker(namespace: &str, id: u64) -> String {
    format!("{namespace}/writers/{id:016x}")
}

/// `<ns>/x-jobsd/index/<count>/`: the partition index of jobs by `count` partitions.
pub(crate) fn index_prefix(namespace: &str, count: u32) -> String {
    format!("{}index/{count}/", own_prefix(namespace))
}

/// `<ns>/x-jobsd/indexed/<count>`: present once every job has its key in that index.
pub(crate) fn indexed_key(namespace: &str, count: u32) -> String {
    format!("{}indexed/{count}", own_prefix(namespace))
}

/// `<ns>/members/`: the live replicas, one key each.
pub(crate) fn members_prefix(namespace: &str) -> String {
    format!("{namespace}/members/")
}

/// `<ns>/partitions/`: the owner of each partition, one key each.
pub(crate) fn partitions_prefix(namespace: &str) -> String {
    format!("{namespace}/partitions/")
}

/// `<ns>/leadership/<id>`: go-etcd-cron's leadership record of replica `id`.
pub(crate) fn leadership_key(namespace: &str, id: &str) -> String {
    format!("{namespace}/leadership/{id}")
}

/// `<ns>/members/<id>`: replica `id`'s address while it lives.
pub(crate) fn member_key(namespace: &str, id: &str) -> String {
    format!("{}{id}", members_prefix(namespace))
}

/// `<ns>/partitions/<p>`: the owner of partition `p`.
pub(crate) fn partition_key(namespace: &str, p: u32) -> String {
    format!("{}{p}", partitions_prefix(namespace))
}
