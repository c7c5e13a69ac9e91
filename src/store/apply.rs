//! The meaning of every [`Op`], written once over a small table interface that both backends
//! implement, so that `Redb` and `Memory` cannot disagree.

use std::ops::Bound;

use prost::Message;

pub(crate) mod due;
mod guarded;

pub(crate) use guarded::record_time;

use super::{
    DeadLetter, DeadLetterAt, Error, FinishedJob, GuardedWrite, LoadedJob, Op, OpResult, PageItem,
    Paused, RestoreRecord, ResultRecord, RunOutcome, StoredCounter, StoredJob, StoredRun, run_key,
    runs_prefix,
};

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

/// An [`Op`] with its values already encoded, so that encoding happens in the caller's task
/// and not on the single writer thread.
pub(crate) enum Prepared {
    /// [`Op::PutJob`].
    PutJob {
        key: String,
        value: Vec<u8>,
        create_only: bool,
        due: Option<i64>,
    },
    /// [`Op::DeleteJob`].
    DeleteJob { key: String },
    /// [`Op::DeletePrefix`].
    DeletePrefix { prefix: String },
    /// [`Op::PutCounter`].
    PutCounter {
        key: String,
        generation: u64,
        value: Vec<u8>,
    },
    /// [`Op::FinishJob`].
    FinishJob { key: String, generation: u64 },
    /// [`Op::RecordResult`]: applied from the record itself, which the log stores encoded.
    RecordResult(Box<ResultRecord>),
    /// [`Op::SetPaused`]: small, applied as given.
    SetPaused {
        key: String,
        generation: u64,
        paused: Option<Paused>,
    },
    /// [`Op::DeleteFinished`].
    DeleteFinished {
        key: String,
        before: prost_types::Timestamp,
    },
    /// [`Op::Guarded`], the job encoded.
    Guarded {
        write: Box<GuardedWrite>,
        job: Option<Vec<u8>>,
    },
    /// [`Op::ForgetIdempotency`].
    ForgetIdempotency {
        key: String,
        before: prost_types::Timestamp,
    },
    /// [`Op::Restore`], encoded: `value` is the `StoredJob`, or the `FinishedJob` when
    /// `finished`; `counter` the job's `StoredCounter` (active jobs only).
    Restore {
        key: String,
        value: Vec<u8>,
        counter: Option<Vec<u8>>,
        finished: bool,
        overwrite: bool,
        due: Option<i64>,
    },
    /// [`Op::DropDue`].
    DropDue { key: String, due: i64 },
    /// [`Op::IndexDue`].
    IndexDue {
        key: String,
        generation: u64,
        due: i64,
    },
    /// [`Op::MarkDueIndexed`].
    MarkDueIndexed,
    /// [`Op::AdvanceDue`].
    AdvanceDue { before: i64 },
}

impl Prepared {
    /// Encodes `op`.
    pub(crate) fn new(op: Op) -> Prepared {
        match op {
            Op::PutJob {
                key,
                job,
                create_only,
                due,
            } => Prepared::PutJob {
                key,
                value: job.encode_to_vec(),
                create_only,
                due,
            },
            Op::DeleteJob { key } => Prepared::DeleteJob { key },
            Op::DeletePrefix { prefix } => Prepared::DeletePrefix { prefix },
            Op::PutCounter { key, counter } => Prepared::PutCounter {
                key,
                generation: counter.generation,
                value: counter.encode_to_vec(),
            },
            Op::FinishJob { key, generation } => Prepared::FinishJob { key, generation },
            Op::RecordResult(record) => Prepared::RecordResult(record),
            Op::SetPaused {
                key,
                generation,
                paused,
            } => Prepared::SetPaused {
                key,
                generation,
                paused,
            },
            Op::DeleteFinished { key, before } => Prepared::DeleteFinished { key, before },
            Op::Guarded { write, job } => Prepared::Guarded {
                write,
                job: job.map(|job| job.encode_to_vec()),
            },
            Op::ForgetIdempotency { key, before } => Prepared::ForgetIdempotency { key, before },
            Op::Restore(record) => prepare_restore(*record),
            Op::DropDue { key, due } => Prepared::DropDue { key, due },
            Op::IndexDue {
                key,
                generation,
                due,
            } => Prepared::IndexDue {
                key,
                generation,
                due,
            },
            Op::MarkDueIndexed => Prepared::MarkDueIndexed,
            Op::AdvanceDue { before } => Prepared::AdvanceDue { before },
        }
    }

    /// Approximate bytes the op writes, to bound a batch.
    pub(crate) fn size(&self) -> usize {
        match self {
            Prepared::PutJob { key, value, .. } | Prepared::PutCounter { key, value, .. } => {
                key.len() + value.len()
            }
            Prepared::DeleteJob { key }
            | Prepared::FinishJob { key, .. }
            | Prepared::DeleteFinished { key, .. }
            | Prepared::ForgetIdempotency { key, .. }
            | Prepared::DropDue { key, .. }
            | Prepared::IndexDue { key, .. } => key.len(),
            Prepared::MarkDueIndexed => 0,
            // Moves up to a limit of index entries.
            Prepared::AdvanceDue { .. } => due::ADVANCE_LIMIT * 64,
            Prepared::Guarded { write, job } => {
                write.encoded_len() + write.key.len() + job.as_ref().map_or(0, Vec::len)
            }
            Prepared::DeletePrefix { prefix } => prefix.len(),
            Prepared::Restore {
                key,
                value,
                counter,
                ..
            } => key.len() + value.len() + counter.as_ref().map_or(0, Vec::len),
            Prepared::RecordResult(record) => record.key.len() * 2 + record.encoded_len(),
            Prepared::SetPaused { key, paused, .. } => {
                key.len() + paused.as_ref().map_or(0, Message::encoded_len)
            }
        }
    }

    /// Whether applying the op decodes a stored value, and so can fail on a corrupt record.
    fn reads_value(&self) -> bool {
        matches!(
            self,
            Prepared::PutCounter { .. }
                | Prepared::FinishJob { .. }
                | Prepared::RecordResult(_)
                | Prepared::SetPaused { .. }
                | Prepared::DeleteFinished { .. }
                | Prepared::Guarded { .. }
                | Prepared::ForgetIdempotency { .. }
                | Prepared::IndexDue { .. }
        )
    }
}

/// Applies one request's ops in order.
///
/// The outer `Err` is a backend failure: the caller must abandon the whole transaction. The
/// inner `Err` is a corrupt record met by this request: its changes have been rolled back and
/// the transaction may go on with other requests.
pub(crate) fn apply_request<T: Tables>(
    tables: &mut T,
    ops: Vec<Prepared>,
) -> Result<Result<Vec<OpResult>, Error>, Error> {
    // An op only fails before changing anything, so changes need recording only when a
    // fallible op comes after them. That keeps a lone DeletePrefix("") from copying every
    // value it removes.
    let last_fallible = ops.iter().rposition(Prepared::reads_value);
    let mut undo = Undo::new();
    let mut results = Vec::with_capacity(ops.len());
    for (i, op) in ops.into_iter().enumerate() {
        let record = last_fallible.is_some_and(|last| i < last);
        match apply_op(tables, op, record.then_some(&mut undo)) {
            Ok(result) => results.push(result),
            Err(err @ Error::Corrupt { .. }) => {
                rollback(tables, undo)?;
                return Ok(Err(err));
            }
            Err(err) => return Err(err),
        }
    }
    Ok(Ok(results))
}

/// Restores the values recorded in `undo`, newest first.
fn rollback<T: Tables>(tables: &mut T, undo: Undo) -> Result<(), Error> {
    for (table, key, old) in undo.into_iter().rev() {
        match old {
            Some(value) => tables.insert(table, &key, value, None)?,
            None => {
                tables.remove(table, &key, None)?;
            }
        }
    }
    Ok(())
}

/// Applies one op. Ops that decode stored values do so before they change anything.
fn apply_op<T: Tables>(
    tables: &mut T,
    op: Prepared,
    mut undo: Option<&mut Undo>,
) -> Result<OpResult, Error> {
    match op {
        Prepared::PutJob {
            key,
            value,
            create_only,
            due,
        } => put_job(tables, &key, value, (create_only, due), undo),
        Prepared::DeleteJob { key } => delete_job(tables, &key, undo),
        Prepared::DeletePrefix { prefix } => {
            let removed = tables.remove_prefix(Table::Jobs, &prefix, undo.as_deref_mut())?;
            tables.remove_prefix(Table::Counters, &prefix, undo.as_deref_mut())?;
            due::forget_prefix(tables, &prefix, undo.as_deref_mut())?;
            if tables.keeps_history() {
                tables.remove_prefix(Table::Finished, &prefix, undo.as_deref_mut())?;
                tables.remove_prefix(Table::Runs, &prefix, undo)?;
            }
            Ok(OpResult::Deleted(removed))
        }
        Prepared::PutCounter {
            key,
            generation,
            value,
        } => {
            if generation_of(tables, Table::Jobs, &key)? != Some(generation) {
                return Ok(OpResult::Skipped);
            }
            let count = CounterHead::decode(value.as_slice())
                .map_err(|source| corrupt(Table::Counters, &key, source))?
                .count;
            if behind(tables, &key, generation, count)? {
                return Ok(OpResult::Skipped);
            }
            let next = due::counter_due(&value);
            tables.insert(Table::Counters, &key, value, undo.as_deref_mut())?;
            if let Some(ms) = next {
                due::set(tables, &key, ms, undo)?;
            }
            Ok(OpResult::Done)
        }
        Prepared::FinishJob { key, generation } => {
            if generation_of(tables, Table::Jobs, &key)? == Some(generation) {
                tables.remove(Table::Jobs, &key, undo.as_deref_mut())?;
                tables.remove(Table::Counters, &key, undo.as_deref_mut())?;
                due::forget(tables, &key, undo)?;
                return Ok(OpResult::Done);
            }
            if generation_of(tables, Table::Counters, &key)? == Some(generation) {
                tables.remove(Table::Counters, &key, undo)?;
            }
            Ok(OpResult::Skipped)
        }
        Prepared::RecordResult(record) => record_result(tables, *record, undo),
        Prepared::SetPaused {
            key,
            generation,
            paused,
        } => {
            if generation_of(tables, Table::Jobs, &key)? != Some(generation) {
                return Ok(OpResult::Skipped);
            }
            let mut counter = live_counter(tables, &key, generation)?;
            if counter.paused != paused {
                counter.paused = paused;
                tables.insert(Table::Counters, &key, counter.encode_to_vec(), undo)?;
            }
            Ok(OpResult::Done)
        }
        Prepared::DeleteFinished { key, before } => {
            if !tables.keeps_history() {
                return Ok(OpResult::Deleted(0));
            }
            let finished_at = tables
                .with_value(Table::Finished, &key, |bytes| {
                    FinishedJob::decode(bytes).map(|f| f.finished_at.unwrap_or_default())
                })?
                .transpose()
                .map_err(|source| corrupt(Table::Finished, &key, source))?;
            match finished_at {
                Some(at) if (at.seconds, at.nanos) <= (before.seconds, before.nanos) => {
                    tables.remove(Table::Finished, &key, undo.as_deref_mut())?;
                    tables.remove_prefix(Table::Runs, &runs_prefix(&key), undo)?;
                    Ok(OpResult::Deleted(1))
                }
                _ => Ok(OpResult::Deleted(0)),
            }
        }
        Prepared::Guarded { write, job } => guarded::apply(tables, *write, job, undo),
        Prepared::ForgetIdempotency { key, before } => guarded::forget(tables, &key, &before, undo),
        Prepared::Restore {
            key,
            value,
            counter,
            finished,
            overwrite,
            due,
        } => restore(
            tables,
            &key,
            (value, counter, finished, due),
            overwrite,
            undo,
        ),
        Prepared::DropDue { key, due } => Ok(if due::drop_stale(tables, &key, due, undo)? {
            OpResult::Done
        } else {
            OpResult::Skipped
        }),
        Prepared::IndexDue {
            key,
            generation,
            due,
        } => {
            if !tables.keeps_due_index()
                || generation_of(tables, Table::Jobs, &key)? != Some(generation)
            {
                return Ok(OpResult::Skipped);
            }
            due::set(tables, &key, due, undo)?;
            Ok(OpResult::Done)
        }
        Prepared::MarkDueIndexed => {
            due::mark_complete(tables, undo)?;
            Ok(OpResult::Done)
        }
        Prepared::AdvanceDue { before } => Ok(if due::advance(tables, before, undo)? {
            OpResult::Done
        } else {
            OpResult::Skipped
        }),
    }
}

/// [`Op::Restore`] with its records encoded (in the caller's task, as every op's values).
fn prepare_restore(record: RestoreRecord) -> Prepared {
    let RestoreRecord {
        key,
        job,
        counter,
        finished_at,
        overwrite,
        due_ms,
    } = record;
    let job = job.unwrap_or_default();
    // A counter belongs to the job it came with, whatever generation it was written with.
    let counter = counter.map(|c| StoredCounter {
        generation: job.generation,
        ..c
    });
    match finished_at {
        Some(at) => Prepared::Restore {
            key,
            value: FinishedJob {
                job: Some(job),
                counter,
                finished_at: Some(at),
            }
            .encode_to_vec(),
            counter: None,
            finished: true,
            overwrite,
            due: None,
        },
        None => Prepared::Restore {
            key,
            value: job.encode_to_vec(),
            counter: counter.map(|c| c.encode_to_vec()),
            finished: false,
            overwrite,
            due: due_ms,
        },
    }
}

/// Applies [`Op::Restore`]: `record` is the encoded job (or finished record), its counter,
/// and whether it is a finished record.
fn restore<T: Tables>(
    tables: &mut T,
    key: &str,
    (value, counter, finished, due): (Vec<u8>, Option<Vec<u8>>, bool, Option<i64>),
    overwrite: bool,
    mut undo: Option<&mut Undo>,
) -> Result<OpResult, Error> {
    let history = tables.keeps_history();
    let held = tables.with_value(Table::Jobs, key, |_| ())?.is_some()
        || (history && tables.with_value(Table::Finished, key, |_| ())?.is_some());
    if held && !overwrite {
        return Ok(OpResult::AlreadyExists);
    }
    // Whatever the key held goes, runs included: they belong to another version.
    tables.remove(Table::Jobs, key, undo.as_deref_mut())?;
    tables.remove(Table::Counters, key, undo.as_deref_mut())?;
    due::forget(tables, key, undo.as_deref_mut())?;
    forget_history(tables, key, undo.as_deref_mut())?;
    if finished {
        if history {
            tables.insert(Table::Finished, key, value, undo)?;
        }
    } else {
        tables.insert(Table::Jobs, key, value, undo.as_deref_mut())?;
        if let Some(counter) = counter {
            tables.insert(Table::Counters, key, counter, undo.as_deref_mut())?;
        }
        due::set(tables, key, due.unwrap_or(i64::MIN), undo)?;
    }
    Ok(if held {
        OpResult::Replaced
    } else {
        OpResult::Done
    })
}

/// Applies [`Op::DeleteJob`].
pub(super) fn delete_job<T: Tables>(
    tables: &mut T,
    key: &str,
    mut undo: Option<&mut Undo>,
) -> Result<OpResult, Error> {
    let removed = tables.remove(Table::Jobs, key, undo.as_deref_mut())?;
    tables.remove(Table::Counters, key, undo.as_deref_mut())?;
    due::forget(tables, key, undo.as_deref_mut())?;
    forget_history(tables, key, undo)?;
    Ok(OpResult::Deleted(u64::from(removed)))
}

/// Applies [`Op::PutJob`]: `(create_only, due)` as in the op. A job whose first fire time is
/// not given is indexed at the earliest time, so that it is read at the next start.
pub(super) fn put_job<T: Tables>(
    tables: &mut T,
    key: &str,
    value: Vec<u8>,
    (create_only, due): (bool, Option<i64>),
    mut undo: Option<&mut Undo>,
) -> Result<OpResult, Error> {
    if !create_only {
        tables.insert(Table::Jobs, key, value, undo.as_deref_mut())?;
    } else if !tables.insert_new(Table::Jobs, key, value, undo.as_deref_mut())? {
        return Ok(OpResult::AlreadyExists);
    }
    due::set(tables, key, due.unwrap_or(i64::MIN), undo.as_deref_mut())?;
    tables.remove(Table::Counters, key, undo.as_deref_mut())?;
    // A new version starts a new history: its runs are numbered from 0 again.
    forget_history(tables, key, undo)?;
    Ok(OpResult::Done)
}

/// The counter of job `key` at `generation`: the stored one when it is of that generation,
/// else a fresh one.
fn live_counter<T: Tables>(
    tables: &mut T,
    key: &str,
    generation: u64,
) -> Result<StoredCounter, Error> {
    let stored: Option<StoredCounter> = stored_counter(tables, key)?;
    Ok(stored
        .filter(|c| c.generation == generation)
        .unwrap_or_else(|| StoredCounter {
            generation,
            ..StoredCounter::default()
        }))
}

/// Creates the dead-letter job of a result: create-only under its key, else under its
/// fallback key.
fn place_dead_letter<T: Tables>(
    tables: &mut T,
    dead_letter: DeadLetter,
    mut undo: Option<&mut Undo>,
) -> Result<DeadLetterAt, Error> {
    let value = dead_letter.job.unwrap_or_default().encode_to_vec();
    let first = (true, dead_letter.due_ms);
    for (key, at) in [
        (&dead_letter.key, DeadLetterAt::Key),
        (&dead_letter.fallback_key, DeadLetterAt::Fallback),
    ] {
        if put_job(tables, key, value.clone(), first, undo.as_deref_mut())? == OpResult::Done {
            return Ok(at);
        }
    }
    Ok(DeadLetterAt::Nowhere)
}

/// Drops the finished record and the run history of `key`.
fn forget_history<T: Tables>(
    tables: &mut T,
    key: &str,
    mut undo: Option<&mut Undo>,
) -> Result<(), Error> {
    if tables.keeps_history() {
        tables.remove(Table::Finished, key, undo.as_deref_mut())?;
        tables.remove_prefix(Table::Runs, &runs_prefix(key), undo)?;
    }
    Ok(())
}

/// Applies [`Op::RecordResult`].
fn record_result<T: Tables>(
    tables: &mut T,
    record: ResultRecord,
    mut undo: Option<&mut Undo>,
) -> Result<OpResult, Error> {
    let key = record.key.as_str();
    if generation_of(tables, Table::Jobs, key)? != Some(record.generation) {
        // Overwritten or deleted while its trigger was out: as `FinishJob`/`PutCounter`.
        if record.finish && generation_of(tables, Table::Counters, key)? == Some(record.generation)
        {
            tables.remove(Table::Counters, key, undo)?;
        }
        return Ok(OpResult::Skipped);
    }
    let mut counter = live_counter(tables, key, record.generation)?;
    if record
        .progress
        .as_ref()
        .is_some_and(|p| p.count < counter.count)
    {
        // Behind the stored progress (see `behind`): a stale owner's result.
        return Ok(OpResult::Skipped);
    }
    if let Some(progress) = &record.progress {
        counter.count = progress.count;
        counter.last_trigger = progress.last_trigger;
        counter.attempts = progress.attempts;
        if progress.due_ms.is_some() {
            counter.due_ms = progress.due_ms;
        }
    }
    if !record.release.is_empty() {
        counter.held.retain(|h| h.execution_id != record.release);
    }
    if let Some(hold) = record.hold {
        counter.held.retain(|h| h.execution_id != hold.execution_id);
        counter.held.push(hold);
    }
    // A record that only holds an execution (an app's 202, a heartbeat) counts no run.
    if let Some(run) = &record.run {
        count_run(&mut counter, run, record.dropped, record.skipped_ticks);
    }
    // After every decode of this op: a corrupt record leaves nothing half done.
    let placed = record
        .dead_letter
        .map(|dead_letter| place_dead_letter(tables, dead_letter, undo.as_deref_mut()))
        .transpose()?;
    let then = match (placed, &record.pause) {
        (Some(DeadLetterAt::Key | DeadLetterAt::Fallback), _) => Some("dead_letter"),
        (Some(DeadLetterAt::Nowhere), _) => Some("dead_letter_failed"),
        (None, Some(_)) => Some("pause"),
        (None, None) => None,
    };
    if let Some(then) = then {
        *counter.on_exhausted.entry(then.to_owned()).or_default() += 1;
    }
    if let Some(pause) = record.pause {
        counter.paused = Some(pause);
    }
    if record.resume {
        counter.paused = None;
    }
    let done = placed.map_or(OpResult::Done, OpResult::DeadLettered);
    let history = tables.keeps_history() && record.history_limit > 0;
    if let Some(run) = record.run {
        let seq = counter.runs;
        counter.runs += 1;
        if history {
            tables.insert(
                Table::Runs,
                &run_key(key, seq),
                run.encode_to_vec(),
                undo.as_deref_mut(),
            )?;
            let limit = u64::from(record.history_limit);
            if seq >= limit {
                tables.remove(Table::Runs, &run_key(key, seq - limit), undo.as_deref_mut())?;
            }
        }
    }
    if !record.finish {
        let next = record.progress.as_ref().and_then(|p| p.due_ms);
        tables.insert(
            Table::Counters,
            key,
            counter.encode_to_vec(),
            undo.as_deref_mut(),
        )?;
        if let Some(ms) = next {
            due::set(tables, key, ms, undo)?;
        }
        return Ok(done);
    }
    let finished = match record.finished_at {
        Some(at) if tables.keeps_history() => {
            tables.with_value(Table::Jobs, key, |job| finished_bytes(job, &counter, &at))?
        }
        _ => None,
    };
    tables.remove(Table::Jobs, key, undo.as_deref_mut())?;
    tables.remove(Table::Counters, key, undo.as_deref_mut())?;
    due::forget(tables, key, undo.as_deref_mut())?;
    match finished {
        Some(finished) => tables.insert(Table::Finished, key, finished, undo)?,
        None => forget_history(tables, key, undo)?,
    }
    Ok(done)
}

/// A [`FinishedJob`] encoded around the stored job's bytes as they are (a message field is
/// its encoding, length-delimited), so finishing a job neither decodes nor re-encodes it.
fn finished_bytes(job: &[u8], counter: &StoredCounter, at: &prost_types::Timestamp) -> Vec<u8> {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, message};
    let len = 1
        + encoded_len_varint(job.len() as u64)
        + job.len()
        + message::encoded_len(2, counter)
        + message::encoded_len(3, at);
    let mut out = Vec::with_capacity(len);
    encode_key(1, WireType::LengthDelimited, &mut out);
    encode_varint(job.len() as u64, &mut out);
    out.extend_from_slice(job);
    message::encode(2, counter, &mut out);
    message::encode(3, at, &mut out);
    out
}

/// Adds one run to a job's status.
fn count_run(counter: &mut StoredCounter, run: &StoredRun, dropped: bool, skipped: u32) {
    match run.outcome() {
        RunOutcome::Success | RunOutcome::Cancelled => {
            counter.delivered += 1;
            counter.succeeded += 1;
        }
        RunOutcome::Failed | RunOutcome::TimedOut => {
            counter.delivered += 1;
            counter.failed_attempts += 1;
        }
        RunOutcome::Undeliverable => counter.staged += 1,
        RunOutcome::Skipped => {
            *counter.skipped.entry(run.error.clone()).or_default() += u64::from(skipped.max(1));
        }
        // Held executions are shown, never recorded as a run.
        RunOutcome::Unspecified | RunOutcome::Running => {}
    }
    if dropped {
        counter.dropped += 1;
    }
    counter.last_nominal = run.nominal;
    counter.last_actual = run.started;
    counter.last_outcome = run.outcome;
    counter.last_error = run.error.clone();
}

/// `StoredJob` with only its `generation` field: decoding it skips the payload.
#[derive(Clone, PartialEq, Message)]
struct JobGeneration {
    /// `StoredJob.generation`.
    #[prost(uint64, tag = "3")]
    generation: u64,
}

/// `StoredCounter` with only its `generation` and `count` fields.
#[derive(Clone, PartialEq, Message)]
struct CounterHead {
    /// `StoredCounter.generation`.
    #[prost(uint64, tag = "1")]
    generation: u64,
    /// `StoredCounter.count`.
    #[prost(uint32, tag = "2")]
    count: u32,
}

/// Whether progress with `count` ticks done is behind the counter `key` holds for
/// `generation`: written by a replica that lost the job to another one, which has fired more
/// ticks since (an etcd writer retrying across an outage). Applying it would move the job back
/// and make the next owner fire those ticks again, so it is skipped. Within one owner progress
/// only moves on.
fn behind<T: Tables>(
    tables: &mut T,
    key: &str,
    generation: u64,
    count: u32,
) -> Result<bool, Error> {
    let stored: Option<CounterHead> = stored_counter(tables, key)?;
    Ok(stored.is_some_and(|c| c.generation == generation && c.count > count))
}

/// The counter stored under `key`, decoded as `M` (the whole counter, or some of its fields).
fn stored_counter<M: Message + Default, T: Tables>(
    tables: &mut T,
    key: &str,
) -> Result<Option<M>, Error> {
    tables
        .with_value(Table::Counters, key, |bytes| M::decode(bytes))?
        .transpose()
        .map_err(|source| corrupt(Table::Counters, key, source))
}

/// The generation of the record under `key`, if there is one.
pub(super) fn generation_of<T: Tables>(
    tables: &mut T,
    table: Table,
    key: &str,
) -> Result<Option<u64>, Error> {
    let decoded = tables.with_value(table, key, |bytes| match table {
        Table::Jobs => JobGeneration::decode(bytes).map(|g| g.generation),
        Table::Counters => CounterHead::decode(bytes).map(|g| g.generation),
        // Only jobs and counters carry generations.
        Table::Runs
        | Table::Finished
        | Table::Idempotency
        | Table::Due
        | Table::DueFar
        | Table::DueAt => Ok(0),
    })?;
    decoded
        .transpose()
        .map_err(|source| corrupt(table, key, source))
}

/// The error for an undecodable record.
pub(super) fn corrupt(table: Table, key: &str, source: prost::DecodeError) -> Error {
    Error::Corrupt {
        table: table.name(),
        key: key.to_owned(),
        source,
    }
}

/// Decodes a stored job.
pub(crate) fn decode_job(key: &str, bytes: &[u8]) -> Result<StoredJob, Error> {
    StoredJob::decode(bytes).map_err(|source| corrupt(Table::Jobs, key, source))
}

/// Decodes a stored counter.
/// Where a [`Store::page`](super::Store::page) starts: after `after` when it is a key of
/// the prefix, else at the prefix; `None` when `after` is past every key of the prefix.
pub(crate) fn page_start<'a>(prefix: &'a str, after: Option<&'a str>) -> Option<Bound<&'a str>> {
    match after {
        Some(after) if after.starts_with(prefix) => Some(Bound::Excluded(after)),
        Some(after) if after > prefix => None,
        _ => Some(Bound::Included(prefix)),
    }
}

/// A page item of an active job, its counter kept only when of the job's generation.
pub(crate) fn active_item(
    key: String,
    job: &[u8],
    counter: Option<&[u8]>,
) -> Result<PageItem, Error> {
    let job = decode_job(&key, job)?;
    let counter = counter
        .map(|c| decode_counter(&key, c))
        .transpose()?
        .filter(|c| c.generation == job.generation);
    Ok(PageItem {
        key,
        job,
        counter,
        finished_at: None,
    })
}

/// A page item of a finished job.
pub(crate) fn finished_item(key: String, bytes: &[u8]) -> Result<PageItem, Error> {
    let finished = decode_finished(&key, bytes)?;
    Ok(PageItem {
        key,
        job: finished.job.unwrap_or_default(),
        counter: finished.counter,
        finished_at: finished.finished_at,
    })
}

pub(crate) fn decode_finished(key: &str, bytes: &[u8]) -> Result<FinishedJob, Error> {
    FinishedJob::decode(bytes).map_err(|source| corrupt(Table::Finished, key, source))
}

/// A run record and its sequence number (the hex digits after the NUL of its key).
pub(crate) fn decode_run(run_key: &str, bytes: &[u8]) -> Result<(u64, StoredRun), Error> {
    let run = StoredRun::decode(bytes).map_err(|source| corrupt(Table::Runs, run_key, source))?;
    let seq = run_key
        .rsplit_once('\0')
        .and_then(|(_, hex)| u64::from_str_radix(hex, 16).ok())
        .unwrap_or(0);
    Ok((seq, run))
}

pub(crate) fn decode_counter(key: &str, bytes: &[u8]) -> Result<StoredCounter, Error> {
    StoredCounter::decode(bytes).map_err(|source| corrupt(Table::Counters, key, source))
}

/// The key range holding exactly the keys that start with a prefix.
pub(crate) struct PrefixRange<'a> {
    /// The prefix: the smallest key in the range.
    start: &'a str,
    /// The first key past the range; `None` when every key from `start` on is in it.
    end: Option<String>,
}

impl<'a> PrefixRange<'a> {
    /// The range of keys starting with `prefix`.
    ///
    /// Keys order byte-wise, and UTF-8 byte order is code point order, so the range ends at
    /// the prefix with its last incrementable character incremented.
    pub(crate) fn new(prefix: &'a str) -> Self {
        let mut end = prefix.to_owned();
        while let Some(last) = end.pop() {
            if let Some(next) = next_char(last) {
                end.push(next);
                return PrefixRange {
                    start: prefix,
                    end: Some(end),
                };
            }
        }
        // Empty, or only char::MAX: every key from `prefix` on starts with it.
        PrefixRange {
            start: prefix,
            end: None,
        }
    }

    /// The range as bounds for `BTreeMap::range` and redb's `range`.
    pub(crate) fn bounds(&self) -> (Bound<&str>, Bound<&str>) {
        let end = match &self.end {
            Some(end) => Bound::Excluded(end.as_str()),
            None => Bound::Unbounded,
        };
        (Bound::Included(self.start), end)
    }
}

/// The next Unicode scalar value after `c`.
fn next_char(c: char) -> Option<char> {
    match c {
        '\u{D7FF}' => Some('\u{E000}'),
        char::MAX => None,
        c => char::from_u32(u32::from(c) + 1),
    }
}

/// Joins jobs and counters that arrive in key order into [`LoadedJob`]s, attaching a counter
/// only to the job with the same key and generation.
pub(crate) struct Joiner<C> {
    /// Counters in key order, as raw `(key, bytes)`.
    counters: C,
    /// A counter read from `counters` but not joined yet (its key is past the last job's).
    pending: Option<(String, Vec<u8>)>,
    /// How a job's bytes decode: [`decode_job`], or the etcd store's own (its values follow
    /// go-etcd-cron's layout).
    decode: fn(&str, &[u8]) -> Result<StoredJob, Error>,
}

impl<C> Joiner<C>
where
    C: Iterator<Item = Result<(String, Vec<u8>), Error>>,
{
    /// A joiner over `counters`, which must cover at least the keys of the jobs joined.
    pub(crate) fn new(counters: C) -> Self {
        Self::decoding(counters, decode_job)
    }

    /// A joiner over `counters` whose jobs' bytes `decode` reads.
    pub(crate) fn decoding(
        counters: C,
        decode: fn(&str, &[u8]) -> Result<StoredJob, Error>,
    ) -> Self {
        Joiner {
            counters,
            pending: None,
            decode,
        }
    }

    /// The loaded form of the job under `key`; jobs must come in increasing key order.
    pub(crate) fn join(&mut self, key: String, job_bytes: &[u8]) -> Result<LoadedJob, Error> {
        let job = (self.decode)(&key, job_bytes)?;
        let mut counter = None;
        loop {
            let (ckey, bytes) = match self.pending.take() {
                Some(pending) => pending,
                None => match self.counters.next() {
                    Some(next) => next?,
                    None => break,
                },
            };
            match ckey.as_str().cmp(key.as_str()) {
                // A counter without a job: the ops never leave one, but the merge must not
                // stall on it.
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    let stored = decode_counter(&ckey, &bytes)?;
                    if stored.generation == job.generation {
                        counter = Some(stored);
                    }
                    break;
                }
                std::cmp::Ordering::Greater => {
                    self.pending = Some((ckey, bytes));
                    break;
                }
            }
        }
        Ok(LoadedJob { key, job, counter })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_bytes_decode_as_the_finished_job() {
        let job = StoredJob {
            generation: 7,
            labels: [("team".to_owned(), "a".to_owned())].into(),
            ..StoredJob::default()
        };
        let counter = StoredCounter {
            generation: 7,
            succeeded: 3,
            last_error: "x".repeat(300),
            ..StoredCounter::default()
        };
        let at = prost_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 5,
        };
        let bytes = finished_bytes(&job.encode_to_vec(), &counter, &at);
        let want = FinishedJob {
            job: Some(job),
            counter: Some(counter),
            finished_at: Some(at),
        };
        assert_eq!(bytes, want.encode_to_vec());
        assert_eq!(FinishedJob::decode(bytes.as_slice()).unwrap(), want);
    }

    fn in_range(prefix: &str, key: &str) -> bool {
        std::ops::RangeBounds::<str>::contains(&PrefixRange::new(prefix).bounds(), key)
    }

    #[test]
    fn prefix_range_holds_exactly_the_prefixed_keys() {
        let keys = [
            "",
            "a",
            "app||ns||a",
            "app||ns||a||",
            "app||ns||a||x",
            "app||ns||a||\u{10FFFF}",
            "app||ns||ab||x",
            "app||ns||a|}",
            "app||ns||a}",
            "\u{D7FF}",
            "\u{D7FF}z",
            "\u{E000}",
            "\u{10FFFF}",
            "\u{10FFFF}a",
            "b",
        ];
        let prefixes = [
            "",
            "a",
            "app||ns||a||",
            "\u{D7FF}",
            "\u{10FFFF}",
            "a\u{10FFFF}",
        ];
        for prefix in prefixes {
            for key in keys {
                assert_eq!(
                    in_range(prefix, key),
                    key.starts_with(prefix),
                    "prefix {prefix:?} key {key:?}"
                );
            }
        }
    }

    /// Characters around the boundaries `PrefixRange` must get right.
    fn boundary_char() -> impl proptest::strategy::Strategy<Value = char> {
        proptest::sample::select(vec![
            'a',
            'b',
            '|',
            '}',
            '\u{7F}',
            '\u{80}',
            '\u{D7FF}',
            '\u{E000}',
            '\u{FFFF}',
            '\u{10000}',
            '\u{10FFFF}',
        ])
    }

    proptest::proptest! {
        #[test]
        fn prefix_range_matches_starts_with(
            prefix in proptest::collection::vec(boundary_char(), 0..4),
            rest in proptest::collection::vec(boundary_char(), 0..5),
            prefixed in proptest::bool::ANY,
        ) {
            let prefix: String = prefix.into_iter().collect();
            let rest: String = rest.into_iter().collect();
            let key = if prefixed { format!("{prefix}{rest}") } else { rest };
            proptest::prop_assert_eq!(in_range(&prefix, &key), key.starts_with(&prefix));
        }
    }
}
