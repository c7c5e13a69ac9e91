//! Ops with their records encoded: what the backends apply and the write-ahead log keeps.
//! Encoding happens in the caller's task ([`Op::encode`]), not on the single writer thread.

use prost::Message;

use super::apply::due;
use super::op::{Form, Op, OpOf};
use super::{FinishedJob, RestoreRecord, StoredCounter};

/// The form the backends apply ops in: each record as its protobuf bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoded {}

impl Form for Encoded {
    type Job = Vec<u8>;
    type Counter = EncodedCounter;
    type Restore = Box<EncodedRestore>;
}

/// An op with its records encoded.
pub(crate) type Prepared = OpOf<Encoded>;

/// A `StoredCounter`, encoded, with the generation the op checks before writing it.
#[derive(Clone, PartialEq)]
pub(crate) struct EncodedCounter {
    /// `StoredCounter.generation`.
    pub(crate) generation: u64,
    /// The whole counter.
    pub(crate) bytes: Vec<u8>,
}

/// A [`RestoreRecord`], encoded as the tables will hold it.
#[derive(Clone, PartialEq)]
pub(crate) struct EncodedRestore {
    /// The composed job key.
    pub(crate) key: String,
    /// The `StoredJob`, or the `FinishedJob` when `finished`.
    pub(crate) value: Vec<u8>,
    /// The job's `StoredCounter` (active jobs only).
    pub(crate) counter: Option<Vec<u8>>,
    /// `value` is a finished record.
    pub(crate) finished: bool,
    /// Replace what the key holds.
    pub(crate) overwrite: bool,
    /// The first fire time (ms since the Unix epoch), for the due index.
    pub(crate) due: Option<i64>,
}

impl Op {
    /// The op with its records encoded.
    pub(crate) fn encode(self) -> Prepared {
        match self {
            Op::PutJob {
                key,
                job,
                create_only,
                due,
            } => Prepared::PutJob {
                key,
                job: job.encode_to_vec(),
                create_only,
                due,
            },
            Op::DeleteJob { key } => Prepared::DeleteJob { key },
            Op::DeletePrefix { prefix } => Prepared::DeletePrefix { prefix },
            Op::PutCounter { key, counter } => Prepared::PutCounter {
                key,
                counter: EncodedCounter {
                    generation: counter.generation,
                    bytes: counter.encode_to_vec(),
                },
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
                job: job.map(|job| Box::new(job.encode_to_vec())),
            },
            Op::ForgetIdempotency { key, before } => Prepared::ForgetIdempotency { key, before },
            Op::Restore(record) => Prepared::Restore(Box::new(EncodedRestore::new(*record))),
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
            Op::PutValue { key, value } => Prepared::PutValue { key, value },
        }
    }
}

impl EncodedRestore {
    /// `record` encoded: a finished job as its `FinishedJob`, an active one as its job and
    /// counter.
    fn new(record: RestoreRecord) -> Self {
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
            Some(at) => EncodedRestore {
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
            None => EncodedRestore {
                key,
                value: job.encode_to_vec(),
                counter: counter.map(|c| c.encode_to_vec()),
                finished: false,
                overwrite,
                due: due_ms,
            },
        }
    }
}

impl Prepared {
    /// Approximate bytes the op writes, to bound a batch.
    pub(crate) fn size(&self) -> usize {
        match self {
            Prepared::PutJob { key, job, .. } => key.len() + job.len(),
            Prepared::PutCounter { key, counter } => key.len() + counter.bytes.len(),
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
                write.encoded_len() + write.key.len() + job.as_ref().map_or(0, |j| j.len())
            }
            Prepared::DeletePrefix { prefix } => prefix.len(),
            Prepared::Restore(r) => {
                r.key.len() + r.value.len() + r.counter.as_ref().map_or(0, Vec::len)
            }
            Prepared::RecordResult(record) => record.key.len() * 2 + record.encoded_len(),
            Prepared::SetPaused { key, paused, .. } => {
                key.len() + paused.as_ref().map_or(0, Message::encoded_len)
            }
            Prepared::PutValue { key, value } => key.len() + value.as_ref().map_or(0, Vec::len),
        }
    }

    /// Whether applying the op decodes a stored value, and so can fail on a corrupt record.
    pub(crate) fn reads_value(&self) -> bool {
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
