//! Running a job by hand on jobsd's routes: run now (`POST /jobsd/v1/jobs/{name}/trigger`)
//! and backfill (`POST …/{name}/backfill`), HTTP and gRPC sharing the checks below.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{bad_request, view_error};
use crate::api::{ApiError, ApiState};
use crate::schedule::Overlap;
use crate::trigger::ExecutionId;

/// The `overlap` of a run-now or backfill request: empty is the job's own policy.
pub fn overlap_of(text: &str) -> Result<Option<Overlap>, ApiError> {
    crate::seam::steer_wire::overlap_from_wire(text).map_err(bad_request)
}

/// An RFC 3339 time of a backfill request, named `field` in errors.
pub fn instant(field: &str, text: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.to_utc())
        .map_err(|e| bad_request(format!("{field}: {text:?} is not an RFC 3339 time: {e}")))
}

impl ApiState {
    /// Runs job `name` once now; gives the execution id.
    pub async fn trigger_job(
        &self,
        name: String,
        overlap: Option<Overlap>,
    ) -> Result<ExecutionId, ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        scheduler
            .by_hand()
            .map_err(view_error)?
            .trigger_job(self.job_metadata(), name, overlap)
            .await
            .map_err(view_error)
    }

    /// Backfills job `name` over `[start, end)`; gives each tick with its execution id.
    pub async fn backfill_job(
        &self,
        name: String,
        range: (DateTime<Utc>, DateTime<Utc>),
        overlap: Option<Overlap>,
    ) -> Result<Vec<(DateTime<Utc>, ExecutionId)>, ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        scheduler
            .by_hand()
            .map_err(view_error)?
            .backfill_job(
                self.job_metadata(),
                name,
                range,
                overlap,
                self.max_backfill_ticks,
            )
            .await
            .map_err(view_error)
    }
}
