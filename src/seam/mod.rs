//! The seam the API talks to: Dapr Scheduler semantics behind one trait, served in-process by
//! the embedded engine or forwarded to Dapr Scheduler replicas.
//!
//! The calls and messages are `dapr.proto.scheduler.v1`'s, so remote mode is a pass-through
//! and the embedded scheduler answers exactly what a Scheduler replica would. What Dapr's
//! protocol has no place for (jobsd's settings of a job, its views) goes to jobsd replicas on
//! `jobsd.scheduler.v1.Jobs` instead.

pub mod actor_state_wire;
pub mod capabilities;
pub mod concurrency_wire;
mod embedded;
pub mod guarded_wire;
pub mod remote;
pub mod steer_wire;
pub mod views_wire;

use std::fmt;

pub use capabilities::{
    ActorState, Backup, ByHand, Concurrency, Executions, Guards, Pausing, Views,
};
pub use remote::{Connections, Remote, RemoteConfig};

pub use crate::jobs::guard::{self, Conditions, Guarded, IfMatch};
pub use crate::jobs::{
    ActorStateOwner, BackupRecord, Bulk, Ending, ExecutionCall, ExportCursor, ExportPage,
    HeldExecution, Imported, JobExtras, JobPreview, JobState, JobStatus, JobView, ListFilter,
    ListPage, MAX_BACKUP_BATCH, MAX_BULK_NAMES, MAX_PAGE_SIZE, MAX_RUNS, MAX_SCHEDULE_BATCH,
    NextFireTimes, Run, RunOutcome, Selection, StateChange, Stats, check_dead_letter,
};
use crate::proto::dapr_scheduler as sv1;

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

/// Checks a create exactly as the embedded scheduler does at `now` (its errors, with the codes
/// a Scheduler replica gives) and previews its first `count` ticks; nothing is stored. Any
/// sidecar answers it, whatever its scheduler: it needs no store.
pub fn preview_job(
    req: sv1::ScheduleJobRequest,
    extras: JobExtras,
    now: chrono::DateTime<chrono::Utc>,
    count: usize,
) -> Result<JobPreview, Error> {
    Ok(crate::engine::preview_job(req, extras, now, count)?)
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

/// Dapr Scheduler's unary calls, as the sidecar uses them, and the capabilities this scheduler
/// has beyond them (`capabilities.rs`).
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

    /// The job as stored (original dueTime/ttl strings, default failure policy filled in);
    /// `NotFound` with `job not found: <name>` when there is none.
    async fn get_job(&self, req: sv1::GetJobRequest) -> Result<sv1::Job, Error>;

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

    /// The state of the trigger loop in this process once it has handled everything sent
    /// before the call; `None` when no loop runs here (remote mode) or it has stopped.
    async fn sync(&self) -> Option<Stats> {
        None
    }

    /// Its [`Guards`] capability, if it has it.
    fn as_guards(&self) -> Option<&dyn Guards> {
        None
    }

    /// Its [`Views`] capability, if it has it.
    fn as_views(&self) -> Option<&dyn Views> {
        None
    }

    /// Its [`Pausing`] capability, if it has it.
    fn as_pausing(&self) -> Option<&dyn Pausing> {
        None
    }

    /// Its [`ByHand`] capability, if it has it.
    fn as_by_hand(&self) -> Option<&dyn ByHand> {
        None
    }

    /// Its [`Executions`] capability, if it has it.
    fn as_executions(&self) -> Option<&dyn Executions> {
        None
    }

    /// Its [`Backup`] capability, if it has it.
    fn as_backup(&self) -> Option<&dyn Backup> {
        None
    }

    /// Its [`ActorState`] capability, if it has it.
    fn as_actor_state(&self) -> Option<&dyn ActorState> {
        None
    }

    /// Its [`Concurrency`] capability, if it has it.
    fn as_concurrency(&self) -> Option<&dyn Concurrency> {
        None
    }
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
