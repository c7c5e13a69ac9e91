//! jobsd's own API beside Dapr's (`/jobsd/v1/…`): jobs with labels, their status and run
//! history, and filtered, paged lists. Dapr's routes and bodies are untouched by it.

pub mod grpc;
pub mod http;
mod json;
mod policy_json;

use std::collections::BTreeMap;
use std::sync::Arc;

use ::http::StatusCode;

use super::{ApiError, ApiState};
use crate::proto::runtime as rv1;
use crate::scheduler::{self, JobExtras, JobView, ListFilter, ListPage, Run};

/// Runs answered when no `limit` is given.
pub const DEFAULT_RUNS: usize = 20;
/// Most runs one call answers.
pub use crate::scheduler::MAX_RUNS;

/// Most labels on one job.
pub const MAX_LABELS: usize = 64;
/// Longest label key, in bytes.
pub const MAX_LABEL_KEY: usize = 63;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE: usize = 256;
/// Longest note given with a pause, in bytes.
pub const MAX_PAUSE_NOTE: usize = 512;

/// Checks labels against jobsd's bounds: at most [`MAX_LABELS`]; keys 1–63 bytes of
/// `A-Z a-z 0-9 . _ - /`; values up to 256 bytes.
pub fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if labels.len() > MAX_LABELS {
        return Err(bad_request(format!(
            "labels: {} labels, at most {MAX_LABELS} are allowed",
            labels.len()
        )));
    }
    for (key, value) in labels {
        let key_ok = !key.is_empty()
            && key.len() <= MAX_LABEL_KEY
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'));
        if !key_ok {
            return Err(bad_request(format!(
                "labels: key {key:?} must be 1-{MAX_LABEL_KEY} characters of A-Z a-z 0-9 . _ - /"
            )));
        }
        if value.len() > MAX_LABEL_VALUE {
            return Err(bad_request(format!(
                "labels: value of {key:?} is {} bytes, at most {MAX_LABEL_VALUE} are allowed",
                value.len()
            )));
        }
    }
    Ok(())
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

/// A scheduler error on jobsd's routes: `ERR_JOB_NOT_FOUND` 404, bad requests 400, a
/// scheduler without views 412, anything else 500 `ERR_INTERNAL`.
fn view_error(err: scheduler::Error) -> ApiError {
    let (http, error_code) = match err.code {
        tonic::Code::NotFound => (StatusCode::NOT_FOUND, "ERR_JOB_NOT_FOUND"),
        tonic::Code::InvalidArgument | tonic::Code::Unknown => (
            StatusCode::BAD_REQUEST,
            super::error::reason::MALFORMED_REQUEST,
        ),
        tonic::Code::FailedPrecondition => {
            (StatusCode::PRECONDITION_FAILED, "ERR_JOBSD_UNSUPPORTED")
        }
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            super::error::reason::INTERNAL,
        ),
    };
    ApiError::Legacy {
        code: err.code,
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
        check_labels(&extras.labels)?;
        if let Some(policy) = &extras.policy {
            scheduler::tick_policy(policy).map_err(bad_request)?;
        }
        if let Some(failure) = &extras.failure_policy {
            let handling = scheduler::failure_handling(failure).map_err(bad_request)?;
            if let Some(job) = &req.job {
                scheduler::check_dead_letter(
                    &self.job_metadata(),
                    &job.name,
                    &handling.on_exhausted,
                )
                .map_err(bad_request)?;
            }
        }
        if !self.scheduler.keeps_extensions()
            && let Some(field) = scheduler::untravelled_field(&extras)
        {
            return Err(bad_request(scheduler::cannot_travel(field)));
        }
        self.schedule_job_extras(req, extras).await
    }

    /// The job `name` of this app, with labels and status.
    pub async fn job_view(&self, name: String) -> Result<JobView, ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler.job_view(metadata, name).await.map_err(view_error)
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
            .list_runs(metadata, name, before, limit)
            .await
            .map_err(view_error)
    }

    /// Pauses job `name` of this app, with `note` saying why.
    pub async fn pause_job(&self, name: String, note: String) -> Result<(), ApiError> {
        if note.len() > MAX_PAUSE_NOTE {
            return Err(bad_request(format!(
                "note: {} bytes, at most {MAX_PAUSE_NOTE} are allowed",
                note.len()
            )));
        }
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler
            .pause_job(metadata, name, note)
            .await
            .map_err(view_error)
    }

    /// Resumes job `name` of this app.
    pub async fn resume_job(&self, name: String) -> Result<(), ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler
            .resume_job(metadata, name)
            .await
            .map_err(view_error)
    }

    /// One page of this app's jobs.
    pub async fn list_views(&self, filter: ListFilter) -> Result<ListPage, ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        scheduler
            .list_views(metadata, filter)
            .await
            .map_err(view_error)
    }
}
