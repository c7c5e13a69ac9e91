//! The small table interface every backend implements (redb, memory, the etcd overlay): what
//! the ops of `apply` are written over.

use super::Error;

/// One of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Table {
    /// `StoredJob`s.
    Jobs,
    /// `StoredCounter`s.
    Counters,
    /// `StoredRun`s under [`run_key`].
    Runs,
    /// `FinishedJob`s.
    Finished,
    /// `IdempotencyRecord`s under `<owner prefix><Idempotency-Key>`.
    Idempotency,
    /// The due index in time order (see [`due`]).
    Due,
    /// The due index's far buckets, in arrival order within each (see [`due`]).
    DueFar,
    /// Each indexed job's time (see [`due`]).
    DueAt,
    /// Records kept beside the jobs under keys of their own ([`Op::PutValue`]): actor state.
    ///
    /// [`Op::PutValue`]: super::Op::PutValue
    Values,
}

impl Table {
    /// The table's name on disk and in errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Table::Jobs => "jobs",
            Table::Counters => "counters",
            Table::Runs => "runs",
            Table::Finished => "finished",
            Table::Idempotency => "idempotency",
            Table::Due => "due",
            Table::DueFar => "due_far",
            Table::DueAt => "due_at",
            Table::Values => "values",
        }
    }
}

/// Previous values of the records a request changed, newest last, to roll the request back.
pub(crate) type Undo = Vec<(Table, String, Option<Vec<u8>>)>;

/// The primitive table operations the ops are made of. Implementations push the previous value
/// of every record they change onto `undo` when one is given.
pub(crate) trait Tables {
    /// Calls `f` with the value stored under `key`, if any.
    fn with_value<R>(
        &mut self,
        table: Table,
        key: &str,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error>;

    /// Stores `value` under `key`.
    fn insert(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<(), Error>;

    /// Stores `value` under `key` unless `key` holds a value already; whether it stored.
    /// Backends override it when they can do it in one lookup (the common create).
    fn insert_new(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<bool, Error> {
        if self.with_value(table, key, |_| ())?.is_some() {
            return Ok(false);
        }
        self.insert(table, key, value, undo)?;
        Ok(true)
    }

    /// Removes `key`; whether it was there.
    fn remove(&mut self, table: Table, key: &str, undo: Option<&mut Undo>) -> Result<bool, Error>;

    /// Whether the backend has the runs and finished tables (every backend has them today:
    /// redb, memory and the etcd overlay). One without them would still keep each job's
    /// status in its counter.
    fn keeps_history(&self) -> bool {
        true
    }

    /// Whether the backend keeps the due index (the embedded stores; not etcd, whose replicas
    /// keep their partitions' jobs in memory).
    fn keeps_due_index(&self) -> bool {
        false
    }

    /// Whether the backend keeps each job's fire time without the ordered index: the etcd
    /// overlay, which writes it into the job's partition index key (`due_at` records only).
    fn keeps_due_times(&self) -> bool {
        false
    }

    /// Up to `limit` entries with keys in `[start, end)`, in key order. Only the due index
    /// is read this way (the embedded stores).
    fn first_entries(
        &mut self,
        table: Table,
        start: &str,
        end: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, Error>;

    /// Removes every key starting with `prefix`; how many.
    fn remove_prefix(
        &mut self,
        table: Table,
        prefix: &str,
        undo: Option<&mut Undo>,
    ) -> Result<u64, Error>;
}
