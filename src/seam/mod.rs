//! The seam the API talks to: Dapr Scheduler semantics behind one trait, served in-process by
//! the embedded engine or forwarded to Dapr Scheduler replicas.
//!
//! The calls and messages are `dapr.proto.scheduler.v1`'s, so remote mode is a pass-through
//! and the embedded scheduler answers exactly what a Scheduler replica would. What Dapr's
//! protocol has no place for (jobsd's settings of a job, its views) goes to jobsd replicas on
//! `jobsd.scheduler.v1.Jobs` instead.

mod embedded;
pub mod guarded_wire;
pub mod remote;
pub mod steer_wire;
pub mod views_wire;

use std::fmt;

pub use remote::{Connections, Remote, RemoteConfig};

pub use crate::engine::backup::{
    BackupRecord, ExportCursor, ExportPage, Imported, MAX_BACKUP_BATCH,
};
pub use crate::engine::check_dead_letter;
pub use crate::engine::guard::{self, Conditions, Guarded, IfMatch};
pub use crate::engine::{
    Bulk, JobPreview, MAX_BULK_NAMES, MAX_SCHEDULE_BATCH, NextFireTimes, Selection, Stats,
    preview_job,
};
pub use crate::engine::{
    Ending, ExecutionCall, HeldExecution, JobExtras, JobState, JobStatus, JobView, ListFilter,
    ListPage, MAX_PAGE_SIZE, MAX_RUNS, Run, RunOutcome,
};
use crate::proto::scheduler as sv1;

/// An error as a Scheduler replica reports it: a gRPC code and its description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    /// gRPC status code (what daprd maps to HTTP statuses).
    pub code: tonic::Code,
    /// The status message.
    pub message: String,
}

impl Error {
    /// An error with `code` and `message`.
    pub fn new(code: tonic::Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    /// Go's `status.Error` text, which daprd embeds in its own messages:
    /// `rpc error: code = AlreadyExists desc = job already exists: '…'`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rpc error: code = {} desc = {}",
            go_code_name(self.code),
            self.message
        )
    }
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        Error::new(status.code(), status.message())
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        tonic::Status::new(err.code, err.message)
    }
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

/// grpc-go's name of a status code (`codes.Code.String()`).
pub fn go_code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "Canceled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

/// The first of jobsd's settings in `extras` that a Dapr Scheduler has no field for, by its
/// name in the API (`labels`, `policy`, `failurePolicy`). An empty policy is Dapr's behaviour,
/// which Dapr's job carries.
pub fn untravelled_field(extras: &JobExtras) -> Option<&'static str> {
    if !extras.labels.is_empty() {
        Some("labels")
    } else if extras
        .policy
        .as_ref()
        .is_some_and(|p| *p != crate::proto::jobsd_api::JobPolicy::default())
    {
        Some("policy")
    } else if extras.failure_policy.is_some() {
        Some("failurePolicy")
    } else {
        None
    }
}

/// Why `field` is refused by a scheduler that cannot keep it (a Dapr Scheduler replica).
pub fn cannot_travel(field: &str) -> String {
    format!(
        "{field}: cannot travel to a Dapr Scheduler (--scheduler-host-address); it needs \
         jobsd's scheduler (embedded, or `jobsd scheduler` replicas)"
    )
}

/// The refusal of `field` by a scheduler that cannot keep it: `InvalidArgument`, as a bad
/// value of the field would be.
pub fn untravelled(field: &str) -> Error {
    Error::new(tonic::Code::InvalidArgument, cannot_travel(field))
}

/// Creates of one batch a scheduler that writes one job at a time has in flight at once.
const FORWARDED_IN_FLIGHT: usize = 16;

/// `jobs` created through `scheduler`'s `schedule_job_with`, [`FORWARDED_IN_FLIGHT`] at a
/// time, answered in order: a batch for a scheduler without a call for many.
pub(crate) async fn one_by_one<S: Scheduler + ?Sized>(
    scheduler: &S,
    jobs: Vec<(sv1::ScheduleJobRequest, JobExtras)>,
) -> Vec<Result<(), Error>> {
    use futures_util::StreamExt;
    futures_util::stream::iter(jobs)
        .map(|(req, extras)| scheduler.schedule_job_with(req, extras))
        .buffered(FORWARDED_IN_FLIGHT)
        .collect()
        .await
}

/// Dapr Scheduler's unary calls, as the sidecar uses them.
#[async_trait::async_trait]
pub trait Scheduler: Send + Sync + 'static {
    /// Stores a job: create-only unless `overwrite` (then `AlreadyExists`), validated with
    /// Dapr's rules (`Unknown` with `job failed validation: …`, `InvalidArgument` for missing
    /// metadata or a bad name).
    async fn schedule_job(&self, req: sv1::ScheduleJobRequest) -> Result<(), Error>;

    /// `schedule_job` with jobsd's settings beside Dapr's job, checked as the embedded
    /// scheduler checks them (`InvalidArgument` naming the field). A scheduler that cannot
    /// keep them (a Dapr Scheduler replica) refuses the settings a user gave with
    /// [`untravelled`], storing nothing, rather than dropping them; the create's trace
    /// context is only a link and may be lost.
    async fn schedule_job_with(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
    ) -> Result<(), Error>;

    /// `schedule_job_with` of each of `jobs`, in order, one outcome per job; `Err` only when
    /// none could be stored (the store write failed). jobsd's own scheduler writes them
    /// together (one commit); any other makes them one by one, a few at a time.
    async fn schedule_jobs(
        &self,
        jobs: Vec<(sv1::ScheduleJobRequest, JobExtras)>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        Ok(one_by_one(self, jobs).await)
    }

    /// `schedule_job_with` under the client's `conditions` (`Idempotency-Key`, `If-Match`;
    /// the rules are [`guard`]'s): a refusal of a condition is an answer ([`Guarded`]), every
    /// other failure is `schedule_job_with`'s. A scheduler that cannot check them refuses the
    /// request with [`untravelled`] naming the header, storing nothing, rather than dropping
    /// the condition.
    async fn schedule_job_guarded(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
        conditions: Conditions,
    ) -> Result<Guarded, Error> {
        let _ = (req, extras);
        Err(untravelled(
            conditions.first_header().unwrap_or(guard::IF_MATCH),
        ))
    }

    /// `delete_job` only if the job meets `if_match`; refused as `schedule_job_guarded` by a
    /// scheduler that cannot check it.
    async fn delete_job_guarded(
        &self,
        req: sv1::DeleteJobRequest,
        if_match: IfMatch,
    ) -> Result<Guarded, Error> {
        let _ = (req, if_match);
        Err(untravelled(guard::IF_MATCH))
    }

    /// The job as stored (original dueTime/ttl strings, default failure policy filled in);
    /// `NotFound` with `job not found: <name>` when there is none.
    async fn get_job(&self, req: sv1::GetJobRequest) -> Result<sv1::Job, Error>;

    /// jobsd's view of a job (labels, status), active or finished. Only jobsd's own
    /// scheduler keeps what it shows.
    async fn job_view(&self, metadata: sv1::JobMetadata, name: String) -> Result<JobView, Error> {
        let _ = (metadata, name);
        Err(views_unavailable())
    }

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
    ) -> Result<Vec<Run>, Error> {
        let _ = (metadata, name, before, limit);
        Err(views_unavailable())
    }

    /// One page of the owner's jobs that `filter` accepts.
    async fn list_views(
        &self,
        metadata: sv1::JobMetadata,
        filter: ListFilter,
    ) -> Result<ListPage, Error> {
        let _ = (metadata, filter);
        Err(views_unavailable())
    }

    /// Pauses job `name` of the metadata's owner (it keeps its schedule and progress; no tick
    /// fires until it is resumed), saying why in `note`; `NotFound` when there is no such
    /// job. Only jobsd's own scheduler pauses jobs.
    async fn pause_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        note: String,
    ) -> Result<(), Error> {
        let _ = (metadata, name, note);
        Err(pause_unavailable())
    }

    /// Resumes job `name` of the metadata's owner (one not paused is left as it is);
    /// `NotFound` when there is no such job.
    async fn resume_job(&self, metadata: sv1::JobMetadata, name: String) -> Result<(), Error> {
        let _ = (metadata, name);
        Err(pause_unavailable())
    }

    /// Runs job `name` of the metadata's owner once now, beside its schedule (`overlap`
    /// overrides the job's overlap policy for it); gives the execution's id.
    async fn trigger_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        overlap: Option<crate::schedule::Overlap>,
    ) -> Result<crate::trigger::ExecutionId, Error> {
        let _ = (metadata, name, overlap);
        Err(by_hand_unavailable())
    }

    /// Runs every nominal tick of job `name`'s schedule in `range` (`[start, end)`) once, in
    /// order, at most `limit` of them; gives each tick with its execution id.
    async fn backfill_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        range: (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
        overlap: Option<crate::schedule::Overlap>,
        limit: usize,
    ) -> Result<Vec<(chrono::DateTime<chrono::Utc>, crate::trigger::ExecutionId)>, Error> {
        let _ = (metadata, name, range, overlap, limit);
        Err(by_hand_unavailable())
    }

    /// Whether executions an app answers "later" are held here (async completion): only
    /// jobsd's embedded scheduler holds them.
    fn holds_executions(&self) -> bool {
        false
    }

    /// Applies an app's heartbeat, complete or fail to the held execution `id` of the
    /// metadata's owner, answering with the execution after the call: `NotFound` when none
    /// is held under that id for this owner, `Aborted` when it ended otherwise. Only jobsd's
    /// embedded scheduler holds executions.
    async fn execution_call(
        &self,
        metadata: sv1::JobMetadata,
        id: String,
        call: ExecutionCall,
    ) -> Result<HeldExecution, Error> {
        let _ = (metadata, id, call);
        Err(executions_unavailable())
    }

    /// Pauses the jobs of the metadata's owner that `selection` takes and that are not
    /// paused yet (as [`Scheduler::pause_job`] does each), saying why in `note`.
    async fn pause_jobs(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
        note: String,
    ) -> Result<Bulk, Error> {
        let _ = (metadata, selection, note);
        Err(pause_unavailable())
    }

    /// Resumes the paused jobs of the metadata's owner that `selection` takes.
    async fn resume_jobs(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
    ) -> Result<Bulk, Error> {
        let _ = (metadata, selection);
        Err(pause_unavailable())
    }

    /// Up to `limit` of the owner's jobs with their progress, from `cursor` on (`None`: from
    /// the start): active jobs in name order, then finished ones. Only jobsd's embedded
    /// scheduler keeps what a backup needs.
    async fn export_page(
        &self,
        metadata: sv1::JobMetadata,
        cursor: Option<ExportCursor>,
        limit: usize,
    ) -> Result<ExportPage, Error> {
        let _ = (metadata, cursor, limit);
        Err(backup_unavailable())
    }

    /// Stops firing the owner's jobs here and resolves once none has a trigger out: an
    /// export taken next is their final state (a handover to another jobsd).
    async fn hand_over(&self, metadata: sv1::JobMetadata) -> Result<(), Error> {
        let _ = metadata;
        Err(backup_unavailable())
    }

    /// Restores `records` as the owner's jobs, with their progress, in one write; names
    /// that exist are skipped unless `overwrite`. One outcome per record, in order.
    async fn import_batch(
        &self,
        metadata: sv1::JobMetadata,
        records: Vec<BackupRecord>,
        overwrite: bool,
    ) -> Result<Vec<Result<Imported, Error>>, Error> {
        let _ = (metadata, records, overwrite);
        Err(backup_unavailable())
    }

    /// The state of the trigger loop in this process once it has handled everything sent
    /// before the call; `None` when no loop runs here (remote mode) or it has stopped.
    async fn sync(&self) -> Option<Stats> {
        None
    }

    /// Deletes a job; deleting a missing job succeeds.
    async fn delete_job(&self, req: sv1::DeleteJobRequest) -> Result<(), Error>;

    /// Every job of the metadata's owner and target kind, names without the key prefix.
    async fn list_jobs(&self, req: sv1::ListJobsRequest) -> Result<Vec<sv1::NamedJob>, Error>;

    /// Deletes the owner's jobs whose name starts with `name_prefix` (empty = all of them).
    async fn delete_by_name_prefix(&self, req: sv1::DeleteByNamePrefixRequest)
    -> Result<(), Error>;

    /// Deletes every job of the metadata's target: an app's jobs, an actor type's reminders,
    /// or one actor's (with `id_prefix_match`, every actor id starting with it).
    async fn delete_by_metadata(&self, req: sv1::DeleteByMetadataRequest) -> Result<(), Error>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_grpc_go_status_text() {
        let err = Error::new(
            tonic::Code::AlreadyExists,
            "job already exists: 'app||default||myapp||overwrite2'",
        );
        assert_eq!(
            err.to_string(),
            "rpc error: code = AlreadyExists desc = job already exists: 'app||default||myapp||overwrite2'"
        );
        assert_eq!(go_code_name(tonic::Code::Cancelled), "Canceled");
    }
}
