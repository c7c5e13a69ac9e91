//! Decoding stored records: whole ([`decode_job`], [`decode_counter`], …) or only the fields
//! the ops check (a job's generation, a counter's head), with the error naming the record.

use prost::Message;
use prost_types::Timestamp;

use super::tables::{Table, Tables};
use super::{Error, FinishedJob, IdempotencyRecord, PageItem, StoredCounter, StoredJob, StoredRun};

/// `StoredJob` with only its `generation` field: decoding it skips the payload.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct JobGeneration {
    /// `StoredJob.generation`.
    #[prost(uint64, tag = "3")]
    pub(crate) generation: u64,
}

/// `StoredCounter` with only its `generation` and `count` fields.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct CounterHead {
    /// `StoredCounter.generation`.
    #[prost(uint64, tag = "1")]
    pub(crate) generation: u64,
    /// `StoredCounter.count`.
    #[prost(uint32, tag = "2")]
    pub(crate) count: u32,
}

/// The counter stored under `key`, decoded as `M` (the whole counter, or some of its fields).
pub(crate) fn stored_counter<M: Message + Default, T: Tables>(
    tables: &mut T,
    key: &str,
) -> Result<Option<M>, Error> {
    tables
        .with_value(Table::Counters, key, |bytes| M::decode(bytes))?
        .transpose()
        .map_err(|source| corrupt(Table::Counters, key, source))
}

/// The generation of the record under `key`, if there is one.
pub(crate) fn generation_of<T: Tables>(
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
        | Table::DueAt
        | Table::Values => Ok(0),
    })?;
    decoded
        .transpose()
        .map_err(|source| corrupt(table, key, source))
}

/// The error for an undecodable record.
pub(crate) fn corrupt(table: Table, key: &str, source: prost::DecodeError) -> Error {
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
pub(crate) fn decode_counter(key: &str, bytes: &[u8]) -> Result<StoredCounter, Error> {
    StoredCounter::decode(bytes).map_err(|source| corrupt(Table::Counters, key, source))
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

/// Decodes an idempotency record's time (what the sweep reads).
pub(crate) fn record_time(key: &str, bytes: &[u8]) -> Result<Timestamp, Error> {
    IdempotencyRecord::decode(bytes)
        .map(|r| r.at.unwrap_or_default())
        .map_err(|source| corrupt(Table::Idempotency, key, source))
}
