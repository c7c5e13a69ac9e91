//! jobsd's own API beside Dapr's (`/jobsd/v1/…`): jobs with labels, their status and run
//! history, and filtered, paged lists; steering them (pause and resume, by name and in bulk,
//! run now and backfill, preview before create, the opt-in test clock, async completion of
//! held executions). Dapr's routes and bodies are untouched by it, but for the
//! `Idempotency-Key` and `If-Match` headers their creates also take ([`conditions`]).

pub mod backup;
mod batch;
mod bulk;
mod clock;
pub mod concurrency;
pub mod conditions;
pub mod executions;
pub mod grpc;
pub mod http;
pub mod json;
mod preview;
mod steer;

use std::sync::Arc;

use ::http::StatusCode;

pub use clock::{Advance, TestClock};

use super::{ApiError, ApiState};
use crate::proto::runtime as rv1;
use crate::schedule::{labels, policy_messages};
use crate::seam::{self, JobExtras, JobView, ListFilter, ListPage, Run};

/// Runs answered when no `limit` is given.
pub const DEFAULT_RUNS: usize = 20;
/// Most runs one call answers.
pub use crate::seam::MAX_RUNS;

/// Longest note given with a pause, in bytes.
pub const MAX_PAUSE_NOTE: usize = 512;

/// Every route of jobsd's own API, to merge into the API router.
pub fn routes() -> axum::Router<crate::api::http_parts::Shared> {
    http::routes()
        .merge(executions::routes())
        .merge(batch::routes())
        .merge(bulk::routes())
        .merge(preview::routes())
        .merge(clock::routes())
        .merge(backup::routes())
        .merge(concurrency::routes())
}

/// 400 `ERR_MALFORMED_REQUEST` with `message`.
pub fn bad_request(message: String) -> ApiError {
    ApiError::Legacy {
        code: tonic::Code::InvalidArgument,
        http: StatusCode::BAD_REQUEST,
        error_code: super::error::reason::MALFORMED_REQUEST,
        message,
    }
}

/// A scheduler error on jobsd's job routes: `ERR_JOB_NOT_FOUND` 404, `Aborted` (a run by hand
/// refused by `overlap: skip`) 409 `ERR_JOBSD_BUSY`, bad requests 400, a scheduler without
/// views 412, anything else 500 `ERR_INTERNAL`.
fn view_error(err: seam::Error) -> ApiError {
    route_error(err, "ERR_JOB_NOT_FOUND", "ERR_JOBSD_BUSY")
}

/// A scheduler error on one of jobsd's routes: `NotFound` 404 with `not_found`, `Aborted` 409
/// with `conflict` (the execution routes: the execution ended otherwise; the job routes: the
/// job is busy), bad requests 400, a scheduler without the feature 412, unavailable 503,
/// anything else 500 `ERR_INTERNAL`.
fn route_error(err: seam::Error, not_found: &'static str, conflict: &'static str) -> ApiError {
    let (http, error_code) = match err.code {
        tonic::Code::NotFound => (StatusCode::NOT_FOUND, not_found),
        tonic::Code::Aborted => (StatusCode::CONFLICT, conflict),
        tonic::Code::InvalidArgument | tonic::Code::Unknown => (
            StatusCode::BAD_REQUEST,
            super::error::reason::MALFORMED_REQUEST,
        ),
        tonic::Code::FailedPrecondition => {
            (StatusCode::PRECONDITION_FAILED, "ERR_JOBSD_UNSUPPORTED")
        }
        tonic::Code::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "ERR_JOBSD_UNAVAILABLE"),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            super::error::reason::INTERNAL,
        ),
    };
    // The Scheduler reports a name that breaks its rules as a plain error (`Unknown`); on
    // jobsd's own surface that is a bad request, over gRPC as over HTTP.
    let code = match err.code {
        tonic::Code::Unknown => tonic::Code::InvalidArgument,
        code => code,
    };
    ApiError::Legacy {
        code,
        http,
        error_code,
        message: err.message,
    }
}

impl ApiState {
    /// Dapr's `ScheduleJob` with jobsd's settings beside the job.
    pub async fn schedule_job_with(
        &self,
        req: rv1::ScheduleJobRequest,
        extras: JobExtras,
    ) -> Result<(), ApiError> {
        self.check_extras(&req, &extras)?;
        self.schedule_job_extras(req, extras).await
    }

    /// jobsd's settings of a create, checked here, before any hop, so that a bad value is
    /// refused with the same answer whichever scheduler is behind; the scheduler checks them
    /// again where it stores them.
    pub(crate) fn check_extras(
        &self,
        req: &rv1::ScheduleJobRequest,
        extras: &JobExtras,
    ) -> Result<(), ApiError> {
        labels::check(&extras.labels).map_err(bad_request)?;
        let tick = extras
            .policy
            .as_ref()
            .map(policy_messages::tick_policy)
            .transpose()
            .map_err(bad_request)?
            .unwrap_or_default();
        let handling = extras
            .failure_policy
            .as_ref()
            .map(policy_messages::failure_handling)
            .transpose()
            .map_err(bad_request)?;
        policy_messages::check_together(&tick, handling.as_ref()).map_err(bad_request)?;
        self.check_lease_policy(tick.lease.is_some())?;
        if let (Some(handling), Some(job)) = (&handling, &req.job) {
            seam::check_dead_letter(&self.job_metadata(), &job.name, &handling.on_exhausted)
                .map_err(bad_request)?;
        }
        Ok(())
    }

    /// The job `name` of this app, with labels and status.
    pub async fn job_view(&self, name: String) -> Result<JobView, ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler
            .views()
            .map_err(view_error)?
            .job_view(metadata, name)
            .await
            .map_err(view_error)
    }

    /// The run history of job `name`, newest first.
    pub async fn list_runs(
        &self,
        name: String,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Run>, ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler
            .views()
            .map_err(view_error)?
            .list_runs(metadata, name, before, limit)
            .await
            .map_err(view_error)
    }

    /// Pauses job `name` of this app, with `note` saying why.
    pub async fn pause_job(&self, name: String, note: String) -> Result<(), ApiError> {
        bulk::check_note(&note)?;
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler
            .pausing()
            .map_err(view_error)?
            .pause_job(metadata, name, note)
            .await
            .map_err(view_error)
    }

    /// Resumes job `name` of this app.
    pub async fn resume_job(&self, name: String) -> Result<(), ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler
            .pausing()
            .map_err(view_error)?
            .resume_job(metadata, name)
            .await
            .map_err(view_error)
    }

    /// One page of this app's jobs.
    pub async fn list_views(&self, filter: ListFilter) -> Result<ListPage, ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler
            .views()
            .map_err(view_error)?
            .list_views(metadata, filter)
            .await
            .map_err(view_error)
    }
}
