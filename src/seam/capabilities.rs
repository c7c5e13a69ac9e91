//! What a scheduler may offer beyond Dapr's calls, one trait per capability. A scheduler that
//! has one gives it from its `Scheduler::as_…` accessor; the API asks for it through
//! `dyn Scheduler`'s `…()` methods, which refuse with the capability's error (a Dapr Scheduler
//! replica has none of them). A new feature of a capability is a method here and in each
//! scheduler that has the capability, nowhere else.

use super::JobExtras;
use super::{ActorStateOwner, StateChange};
use super::{
    BackupRecord, Bulk, Conditions, Error, ExecutionCall, ExportCursor, ExportPage, Guarded,
    HeldExecution, IfMatch, Imported, JobView, ListFilter, ListPage, NextFireTimes, Run, Selection,
    untravelled,
};
use crate::jobs::concurrency::{ConcurrencyView, Rule};
use crate::proto::dapr_scheduler as sv1;

/// Conditions a client puts on a write (`Idempotency-Key`, `If-Match`).
#[async_trait::async_trait]
pub trait Guards: Send + Sync {
    /// `schedule_job_with` under the client's `conditions` (the rules are
    /// [`guard`](super::guard)'s): a refusal of a condition is an answer ([`Guarded`]), every
    /// other failure is `schedule_job_with`'s. A scheduler that cannot check them has no
    /// `Guards`: the request is refused with [`untravelled`] naming the header, storing
    /// nothing, rather than dropping the condition.
    async fn schedule_job_guarded(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
        conditions: Conditions,
    ) -> Result<Guarded, Error>;

    /// `delete_job` only if the job meets `if_match`; refused as `schedule_job_guarded` by a
    /// scheduler that cannot check it.
    async fn delete_job_guarded(
        &self,
        req: sv1::DeleteJobRequest,
        if_match: IfMatch,
    ) -> Result<Guarded, Error>;
}

/// jobsd's views of the jobs: status, next fire times, run history, filtered lists.
#[async_trait::async_trait]
pub trait Views: Send + Sync {
    /// jobsd's view of a job (labels, status), active or finished. Only jobsd's own
    /// scheduler keeps what it shows.
    async fn job_view(&self, metadata: sv1::JobMetadata, name: String) -> Result<JobView, Error>;

    /// The next `count` fire times of job `name` of the metadata's owner, from its stored
    /// progress. Only jobsd's embedded scheduler keeps the progress here.
    async fn next_fire_times(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        count: usize,
    ) -> Result<NextFireTimes, Error> {
        let _ = (metadata, name, count);
        Err(Error::new(
            tonic::Code::FailedPrecondition,
            "a stored job's next fire times need jobsd's embedded scheduler; they are not \
             available with --scheduler-host-address (POST /jobsd/v1/preview works there)",
        ))
    }

    /// A job's run history, newest first.
    async fn list_runs(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Run>, Error>;

    /// One page of the owner's jobs that `filter` accepts.
    async fn list_views(
        &self,
        metadata: sv1::JobMetadata,
        filter: ListFilter,
    ) -> Result<ListPage, Error>;
}

/// Pausing and resuming jobs, one by name or all a selection takes.
#[async_trait::async_trait]
pub trait Pausing: Send + Sync {
    /// Pauses job `name` of the metadata's owner (it keeps its schedule and progress; no tick
    /// fires until it is resumed), saying why in `note`; `NotFound` when there is no such
    /// job. Only jobsd's own scheduler pauses jobs.
    async fn pause_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        note: String,
    ) -> Result<(), Error>;

    /// Resumes job `name` of the metadata's owner (one not paused is left as it is);
    /// `NotFound` when there is no such job.
    async fn resume_job(&self, metadata: sv1::JobMetadata, name: String) -> Result<(), Error>;

    /// Pauses the jobs of the metadata's owner that `selection` takes and that are not
    /// paused yet (as [`Scheduler::pause_job`] does each), saying why in `note`.
    async fn pause_jobs(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
        note: String,
    ) -> Result<Bulk, Error>;

    /// Resumes the paused jobs of the metadata's owner that `selection` takes.
    async fn resume_jobs(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
    ) -> Result<Bulk, Error>;
}

/// Runs by hand beside the schedule: now, or the ticks of a past range.
#[async_trait::async_trait]
pub trait ByHand: Send + Sync {
    /// Runs job `name` of the metadata's owner once now, beside its schedule (`overlap`
    /// overrides the job's overlap policy for it); gives the execution's id.
    async fn trigger_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        overlap: Option<crate::schedule::Overlap>,
    ) -> Result<crate::trigger::ExecutionId, Error>;

    /// Runs every nominal tick of job `name`'s schedule in `range` (`[start, end)`) once, in
    /// order, at most `limit` of them; gives each tick with its execution id.
    async fn backfill_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        range: (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
        overlap: Option<crate::schedule::Overlap>,
        limit: usize,
    ) -> Result<Vec<(chrono::DateTime<chrono::Utc>, crate::trigger::ExecutionId)>, Error>;
}

/// Executions an app answered "later" held here (async completion).
#[async_trait::async_trait]
pub trait Executions: Send + Sync {
    /// Applies an app's heartbeat, complete or fail to the held execution `id` of the
    /// metadata's owner, answering with the execution after the call: `NotFound` when none
    /// is held under that id for this owner, `Aborted` when it ended otherwise. Only jobsd's
    /// embedded scheduler holds executions.
    async fn execution_call(
        &self,
        metadata: sv1::JobMetadata,
        id: String,
        call: ExecutionCall,
    ) -> Result<HeldExecution, Error>;
}

/// Export and import of jobs with their progress, and the handover between two jobsd.
#[async_trait::async_trait]
pub trait Backup: Send + Sync {
    /// Up to `limit` of the owner's jobs with their progress, from `cursor` on (`None`: from
    /// the start): active jobs in name order, then finished ones. Only jobsd's embedded
    /// scheduler keeps what a backup needs.
    async fn export_page(
        &self,
        metadata: sv1::JobMetadata,
        cursor: Option<ExportCursor>,
        limit: usize,
    ) -> Result<ExportPage, Error>;

    /// Stops firing the owner's jobs here and resolves once none has a trigger out: an
    /// export taken next is their final state (a handover to another jobsd).
    async fn hand_over(&self, metadata: sv1::JobMetadata) -> Result<(), Error>;

    /// Restores `records` as the owner's jobs, with their progress, in one write; names
    /// that exist are skipped unless `overwrite`. One outcome per record, in order.
    async fn import_batch(
        &self,
        metadata: sv1::JobMetadata,
        records: Vec<BackupRecord>,
        overwrite: bool,
    ) -> Result<Vec<Result<Imported, Error>>, Error>;
}

/// What a scheduler without jobsd's views answers.
fn views_unavailable() -> Error {
    Error::new(
        tonic::Code::FailedPrecondition,
        "job status and run history are kept by jobsd's embedded scheduler; \
         a Dapr Scheduler (--scheduler-host-address) keeps none",
    )
}

/// What a scheduler that cannot pause jobs answers.
fn pause_unavailable() -> Error {
    Error::new(
        tonic::Code::FailedPrecondition,
        "pausing and resuming jobs needs jobsd's embedded scheduler; \
         it is not available with --scheduler-host-address",
    )
}

/// What a scheduler that cannot run jobs by hand answers.
fn by_hand_unavailable() -> Error {
    Error::new(
        tonic::Code::FailedPrecondition,
        "running a job by hand (trigger, backfill) needs jobsd's embedded scheduler; \
         it is not available with --scheduler-host-address",
    )
}

/// What a scheduler that cannot hold executions answers (async completion).
fn executions_unavailable() -> Error {
    Error::new(
        tonic::Code::FailedPrecondition,
        "async completion (held executions, heartbeat, complete, fail) needs jobsd's embedded \
         scheduler; it is not available with --scheduler-host-address",
    )
}

/// What a scheduler that cannot export or import jobs with their progress answers.
fn backup_unavailable() -> Error {
    Error::new(
        tonic::Code::FailedPrecondition,
        "export and import of jobs with their progress need jobsd's embedded scheduler; \
         they are not available with --scheduler-host-address",
    )
}

impl dyn super::Scheduler {
    /// Its [`Guards`], or the refusal of `header`, the condition the client set (storing
    /// nothing rather than dropping the condition).
    pub fn guards(&self, header: &str) -> Result<&dyn Guards, Error> {
        self.as_guards().ok_or_else(|| untravelled(header))
    }

    /// Its [`Views`], or the refusal of a scheduler without them.
    pub fn views(&self) -> Result<&dyn Views, Error> {
        self.as_views().ok_or_else(views_unavailable)
    }

    /// Its [`Pausing`], or the refusal of a scheduler without them.
    pub fn pausing(&self) -> Result<&dyn Pausing, Error> {
        self.as_pausing().ok_or_else(pause_unavailable)
    }

    /// Its [`ByHand`], or the refusal of a scheduler without them.
    pub fn by_hand(&self) -> Result<&dyn ByHand, Error> {
        self.as_by_hand().ok_or_else(by_hand_unavailable)
    }

    /// Its [`Executions`], or the refusal of a scheduler without them.
    pub fn executions(&self) -> Result<&dyn Executions, Error> {
        self.as_executions().ok_or_else(executions_unavailable)
    }

    /// Its [`Backup`], or the refusal of a scheduler without them.
    pub fn backup(&self) -> Result<&dyn Backup, Error> {
        self.as_backup().ok_or_else(backup_unavailable)
    }

    /// Its [`Concurrency`], or the refusal of a scheduler without it.
    pub fn concurrency(&self) -> Result<&dyn Concurrency, Error> {
        self.as_concurrency().ok_or_else(|| {
            Error::new(
                tonic::Code::FailedPrecondition,
                "concurrency limits by key (policy.concurrencyKey) need jobsd's scheduler \
                 (embedded, or `jobsd scheduler` replicas); a Dapr Scheduler has none",
            )
        })
    }
}

/// Actor state, kept beside the jobs (daprd keeps it in an actor state store): what the
/// sidecar's actor state routes read and write.
#[async_trait::async_trait]
pub trait ActorState: Send + Sync {
    /// The value under `key` in `owner`'s state; `None` when there is none.
    async fn get_actor_state(
        &self,
        owner: ActorStateOwner,
        key: String,
    ) -> Result<Option<Vec<u8>>, Error>;

    /// Applies `changes` to `owner`'s state in one commit: all of them or none.
    /// `InvalidArgument` for a change without a key or a transaction too large to be
    /// written at once.
    async fn actor_state_transaction(
        &self,
        owner: ActorStateOwner,
        changes: Vec<StateChange>,
    ) -> Result<(), Error>;
}

/// Concurrency limits by key for app jobs (`policy.concurrencyKey`): the rules and what the
/// scheduler's loops have out and waiting now.
#[async_trait::async_trait]
pub trait Concurrency: Send + Sync {
    /// Sets (creates or replaces) a rule of the metadata's owner; `InvalidArgument` naming
    /// the field for a bad one.
    async fn set_concurrency_rule(
        &self,
        metadata: sv1::JobMetadata,
        rule: Rule,
    ) -> Result<(), Error>;

    /// Deletes a rule; whether there was one.
    async fn delete_concurrency_rule(
        &self,
        metadata: sv1::JobMetadata,
        key: String,
    ) -> Result<bool, Error>;

    /// The owner's rules and the keys with triggers out or waiting (summed over every
    /// replica).
    async fn concurrency_view(&self, metadata: sv1::JobMetadata) -> Result<ConcurrencyView, Error>;
}
