//! The ops: every change a [`Store`](super::Store) applies, defined once, and what each did.

use std::fmt;

use super::{GuardedWrite, Paused, RestoreRecord, ResultRecord, StoredCounter, StoredJob};

/// One change, applied by [`Store::write`](super::Store::write): what callers build, its
/// records decoded.
pub type Op = OpOf<Decoded>;

/// How an op holds the records it writes: [`Decoded`] as callers build it, or encoded as
/// the backends apply it and the write-ahead log keeps it (`encoded.rs`). One definition of
/// the ops serves both, so the two cannot drift apart.
pub trait Form {
    /// A job to store.
    type Job: Clone + PartialEq;
    /// A counter to store.
    type Counter: Clone + PartialEq;
    /// A job from a backup with its progress.
    type Restore: Clone + PartialEq;
}

/// The form callers build ops in: the stored messages themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {}

impl Form for Decoded {
    type Job = StoredJob;
    type Counter = StoredCounter;
    type Restore = Box<RestoreRecord>;
}

/// One change, in form `F` (see [`Op`]).
// Ops live only from the caller to the encoding step, so the size of `PutJob` costs nothing
// worth a `Box` at every construction site.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq)]
pub enum OpOf<F: Form> {
    /// Create (`create_only`) or overwrite a job; always removes that key's counter
    /// (an overwrite resets progress). Result: `Done`, or `AlreadyExists` (job left unchanged).
    PutJob {
        /// The composed job key.
        key: String,
        /// The job; its `generation` must be new for every put.
        job: F::Job,
        /// Fail with `AlreadyExists` instead of overwriting.
        create_only: bool,
        /// When the job fires first (ms since the Unix epoch), for the due index; `None`:
        /// indexed at the earliest time (read at the next start).
        due: Option<i64>,
    },
    /// Delete a job and its counter; deleting a missing key is fine.
    /// Result: `Deleted(1)` or `Deleted(0)` when there was no job.
    DeleteJob {
        /// The composed job key.
        key: String,
    },
    /// Delete every job (and counter) whose key starts with `prefix` (`""` = all).
    /// Result: `Deleted(jobs removed)`.
    DeletePrefix {
        /// Byte-wise key prefix.
        prefix: String,
    },
    /// Persist a counter, only if the job exists with the counter's generation and the stored
    /// counter of that generation has not counted more ticks (a stale owner's write).
    /// Result: `Done`, or `Skipped` (the job was overwritten or deleted meanwhile, or the
    /// progress is behind).
    PutCounter {
        /// The composed job key.
        key: String,
        /// The progress; `counter.generation` names the job version it belongs to.
        counter: F::Counter,
    },
    /// The job finished: delete job and counter if the job's generation matches (`Done`); if it
    /// does not (overwritten or deleted meanwhile), delete only a counter carrying this
    /// generation and leave the job alone (`Skipped`).
    FinishJob {
        /// The composed job key.
        key: String,
        /// Generation of the job version that finished.
        generation: u64,
    },
    /// A trigger's result: progress, status and one run in the history, in one write, only
    /// while the job has the record's generation (`Done`; else `Skipped`, and a finished
    /// record deletes only a counter of its generation, as `FinishJob`). A finished job is
    /// deleted, or kept in the finished table when `finished_at` is set. A record's `pause`
    /// pauses the job; its `dead_letter` job is created (create-only, as `PutJob`) under its
    /// key or else its fallback key, and the result is `DeadLettered` saying where. Progress
    /// behind the stored counter's tick count is a stale owner's, and `Skipped` whole.
    RecordResult(Box<ResultRecord>),
    /// Pauses (`paused` set) or resumes (`None`) a job, only while the job has `generation`:
    /// the state is kept in its counter (made if the job has none yet), beside its progress.
    /// Result: `Done` (also when it was so already), or `Skipped`.
    SetPaused {
        /// The composed job key.
        key: String,
        /// The job version it is meant for.
        generation: u64,
        /// Why and since when; `None` resumes.
        paused: Option<Paused>,
    },
    /// Deletes the finished record of `key` (and its run history) if it finished at or
    /// before `before` (the retention sweep). Result: `Deleted(0 or 1)`.
    DeleteFinished {
        /// The composed job key.
        key: String,
        /// Cut-off.
        before: prost_types::Timestamp,
    },
    /// A put (`job` given, as [`Op::PutJob`]) or delete (as [`Op::DeleteJob`]) under the
    /// conditions of [`GuardedWrite`], checked in the same commit. An idempotency record of
    /// the key that has not expired answers `Replayed(its generation)` when it is of the same
    /// request (same name and fingerprint) and `KeyReused` when not, and nothing is written;
    /// else an `If-Match` the job does not meet (missing, or of another generation) answers
    /// `PreconditionFailed`; else the write's own result, and a put that is `Done` records
    /// the claim.
    Guarded {
        /// The conditions and the key.
        write: Box<GuardedWrite>,
        /// The job to put (its `generation` new); `None`: delete.
        job: Option<Box<F::Job>>,
    },
    /// Forgets idempotency record `key` if it was written before `before` (the expiry sweep).
    /// Result: `Deleted(0 or 1)`.
    ForgetIdempotency {
        /// Key in the `idempotency` table.
        key: String,
        /// Cut-off.
        before: prost_types::Timestamp,
    },
    /// A job from a backup with its progress (see [`RestoreRecord`]): without `overwrite`, a
    /// job or finished record under the key answers `AlreadyExists` and nothing changes; else
    /// the key's job, counter, finished record and runs are replaced. The job goes to the jobs
    /// table with its counter (whose generation is made the job's), or to the finished table
    /// when `finished_at` is set. Result: `Done` (nothing was there), `Replaced` or
    /// `AlreadyExists`.
    Restore(F::Restore),
    /// Drops the due-index entry of `key` at `due` (ms since the Unix epoch) unless the index
    /// still holds the job at that time: what a reader found stale. Result: `Done` (dropped)
    /// or `Skipped`.
    DropDue {
        /// The composed job key.
        key: String,
        /// The entry's time.
        due: i64,
    },
    /// Indexes job `key` at `due` (ms since the Unix epoch) if it has `generation`, leaving
    /// the job as it is: how the engine indexes a store written before the due index.
    /// Result: `Done` or `Skipped`.
    IndexDue {
        /// The composed job key.
        key: String,
        /// The job version it is meant for.
        generation: u64,
        /// When it fires next.
        due: i64,
    },
    /// Records that every job of the store is in the due index (after indexing a store
    /// written before it existed). Result: `Done`.
    MarkDueIndexed,
    /// Moves a part of the due index's far buckets holding jobs due before `before` (ms since
    /// the Unix epoch) into its ordered part, which
    /// [`Store::due_page`](super::Store::due_page) reads; a store's `due_page` writes it
    /// itself, as often as it takes. Result: `Done` (something moved) or `Skipped` (all such
    /// buckets were moved already).
    AdvanceDue {
        /// Jobs due before it are to be found by `due_page`.
        before: i64,
    },
    /// Stores `value` under `key` in the values table, or removes the key (`None`): records
    /// kept beside the jobs (actor state); a request's values change together, as every
    /// request does. Result: `Done`.
    PutValue {
        /// The record's key.
        key: String,
        /// Its bytes; `None` removes it.
        value: Option<Vec<u8>>,
    },
}

impl fmt::Debug for OpOf<Decoded> {
    // Jobs carry user payloads; a debug line names the op and key only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::PutJob {
                key,
                job,
                create_only,
                due,
            } => f
                .debug_struct("PutJob")
                .field("key", key)
                .field("generation", &job.generation)
                .field("create_only", create_only)
                .field("due", due)
                .finish(),
            Op::DeleteJob { key } => f.debug_struct("DeleteJob").field("key", key).finish(),
            Op::DeletePrefix { prefix } => f
                .debug_struct("DeletePrefix")
                .field("prefix", prefix)
                .finish(),
            Op::PutCounter { key, counter } => f
                .debug_struct("PutCounter")
                .field("key", key)
                .field("counter", counter)
                .finish(),
            Op::FinishJob { key, generation } => f
                .debug_struct("FinishJob")
                .field("key", key)
                .field("generation", generation)
                .finish(),
            Op::RecordResult(r) => f
                .debug_struct("RecordResult")
                .field("key", &r.key)
                .field("generation", &r.generation)
                .field("finish", &r.finish)
                .field("outcome", &r.run.as_ref().map(|run| run.outcome()))
                .finish(),
            Op::SetPaused {
                key,
                generation,
                paused,
            } => f
                .debug_struct("SetPaused")
                .field("key", key)
                .field("generation", generation)
                .field("paused", &paused.is_some())
                .finish(),
            Op::DeleteFinished { key, before } => f
                .debug_struct("DeleteFinished")
                .field("key", key)
                .field("before", before)
                .finish(),
            Op::Guarded { write, job } => f
                .debug_struct("Guarded")
                .field("key", &write.key)
                .field("generation", &job.as_ref().map(|j| j.generation))
                .field("if_match", &write.if_match)
                .field("idempotent", &write.idempotency.is_some())
                .finish(),
            Op::ForgetIdempotency { key, before } => f
                .debug_struct("ForgetIdempotency")
                .field("key", key)
                .field("before", before)
                .finish(),
            Op::Restore(r) => f
                .debug_struct("Restore")
                .field("key", &r.key)
                .field("generation", &r.job.as_ref().map(|j| j.generation))
                .field("finished", &r.finished_at.is_some())
                .field("overwrite", &r.overwrite)
                .finish(),
            Op::DropDue { key, due } => f
                .debug_struct("DropDue")
                .field("key", key)
                .field("due", due)
                .finish(),
            Op::IndexDue {
                key,
                generation,
                due,
            } => f
                .debug_struct("IndexDue")
                .field("key", key)
                .field("generation", generation)
                .field("due", due)
                .finish(),
            Op::MarkDueIndexed => f.write_str("MarkDueIndexed"),
            Op::AdvanceDue { before } => f
                .debug_struct("AdvanceDue")
                .field("before", before)
                .finish(),
            Op::PutValue { key, value } => f
                .debug_struct("PutValue")
                .field("key", key)
                .field("bytes", &value.as_ref().map(Vec::len))
                .finish(),
        }
    }
}

/// What one [`Op`] did (see each op for which results it gives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpResult {
    /// Applied.
    Done,
    /// `PutJob` with `create_only`: a job with that key exists; nothing changed.
    AlreadyExists,
    /// `PutCounter` / `FinishJob`: the job's generation did not match; the job was not touched.
    Skipped,
    /// `DeleteJob` / `DeletePrefix`: how many jobs were removed.
    Deleted(u64),
    /// `RecordResult` with a dead-letter job: applied, and where the job went.
    DeadLettered(DeadLetterAt),
    /// `Guarded`: the job did not meet the `If-Match`; nothing changed.
    PreconditionFailed,
    /// `Guarded`: the same request came before under its idempotency key, and stored the
    /// job version with this generation; nothing changed.
    Replayed(u64),
    /// `Guarded`: another request came before under its idempotency key; nothing changed.
    KeyReused,
    /// `Restore` with `overwrite`: what the key held was replaced.
    Replaced,
}

/// Where the dead-letter job of a [`ResultRecord`] was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterAt {
    /// Under its key (the `deadLetterJob` name).
    Key,
    /// Under its fallback key: a job held the name already.
    Fallback,
    /// Nowhere: jobs held both keys.
    Nowhere,
}
