//! The meaning of every [`Op`], written once over a small table interface that both backends
//! implement, so that `Redb` and `Memory` cannot disagree.

use prost::Message;

pub(crate) mod due;
mod guarded;

use super::encoded::{EncodedCounter, EncodedRestore, Prepared};
use super::records::{CounterHead, corrupt, generation_of, stored_counter};
use super::tables::{Table, Tables, Undo};
use super::{
    DeadLetter, DeadLetterAt, Error, FinishedJob, OpResult, ResultRecord, RunOutcome,
    StoredCounter, StoredRun, run_key, runs_prefix,
};
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
            job,
            create_only,
            due,
        } => put_job(tables, &key, job, (create_only, due), undo),
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
            counter:
                EncodedCounter {
                    generation,
                    bytes: value,
                },
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
        Prepared::Guarded { write, job } => guarded::apply(tables, *write, job.map(|j| *j), undo),
        Prepared::ForgetIdempotency { key, before } => guarded::forget(tables, &key, &before, undo),
        Prepared::Restore(record) => restore(tables, *record, undo),
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
        Prepared::PutValue { key, value } => {
            match value {
                Some(value) => tables.insert(Table::Values, &key, value, undo)?,
                None => {
                    tables.remove(Table::Values, &key, undo)?;
                }
            }
            Ok(OpResult::Done)
        }
    }
}

/// Applies [`Op::Restore`].
fn restore<T: Tables>(
    tables: &mut T,
    record: EncodedRestore,
    mut undo: Option<&mut Undo>,
) -> Result<OpResult, Error> {
    let EncodedRestore {
        key,
        value,
        counter,
        finished,
        overwrite,
        due,
    } = record;
    let key = key.as_str();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredJob;

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
}
