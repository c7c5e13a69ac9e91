//! jobsd's gRPC service `jobsd.v1.Jobs`, on the same port as daprd's API and behind the same
//! API token: the operations of the `/jobsd/v1/` HTTP routes with the same checks and errors.

use std::time::SystemTime;

use chrono::{DateTime, Utc};
use tonic::{Request, Response, Status};

use super::bad_request;
use crate::api::ApiState;
use crate::api::grpc::{authorize, traceparent};
use crate::api::scheduler_to_runtime_job;
use crate::proto::jobsd_api::{self as jv1, jobs_server::JobsServer};
use crate::scheduler::{JobExtras, JobState, JobView, ListFilter, Run, RunOutcome};

/// Runs answered when `limit` is 0.
pub const DEFAULT_RUNS: usize = 20;
/// Most runs one call answers.
pub const MAX_RUNS: usize = 1000;

/// The `jobsd.v1.Jobs` implementation over the shared job operations.
#[derive(Clone, Debug)]
pub struct JobsApi {
    state: ApiState,
}

/// The `jobsd.v1.Jobs` service, with the message limits of daprd's `--max-body-size`.
pub fn service(state: ApiState) -> JobsServer<JobsApi> {
    let limit = state.body_limit();
    JobsServer::new(JobsApi { state })
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit)
}

fn timestamp(t: Option<DateTime<Utc>>) -> Option<prost_types::Timestamp> {
    t.map(|t| SystemTime::from(t).into())
}

fn outcome(o: RunOutcome) -> jv1::RunOutcome {
    match o {
        RunOutcome::Success => jv1::RunOutcome::Success,
        RunOutcome::Failed => jv1::RunOutcome::Failed,
        RunOutcome::Cancelled => jv1::RunOutcome::Cancelled,
        RunOutcome::TimedOut => jv1::RunOutcome::TimedOut,
        RunOutcome::Skipped => jv1::RunOutcome::Skipped,
        RunOutcome::Undeliverable => jv1::RunOutcome::Undeliverable,
        RunOutcome::Unspecified => jv1::RunOutcome::Unspecified,
    }
}

fn view(view: JobView) -> jv1::JobView {
    let s = view.status;
    let state = s.state.unwrap_or(JobState::Active);
    jv1::JobView {
        job: Some(scheduler_to_runtime_job(view.name.clone(), view.job)),
        name: view.name,
        labels: view.labels.into_iter().collect(),
        status: Some(jv1::JobStatus {
            state: state.as_str().to_owned(),
            paused: state == JobState::Paused,
            next_fire_time: timestamp(s.next_fire_time),
            last_fire_nominal: timestamp(s.last_fire_nominal),
            last_fire_actual: timestamp(s.last_fire_actual),
            last_outcome: s
                .last_outcome
                .map(|o| super::json::outcome_name(o).to_owned())
                .unwrap_or_default(),
            last_error: s.last_error.unwrap_or_default(),
            counters: Some(jv1::Counters {
                delivered: s.delivered,
                succeeded: s.succeeded,
                failed_attempts: s.failed_attempts,
                dropped: s.dropped,
                staged: s.staged_count,
                skipped: s.skipped.into_iter().collect(),
            }),
            ticks: s.ticks,
            current_attempt: s.current_attempt,
            in_flight: s.in_flight,
            staged: s.staged,
            finished_at: timestamp(s.finished_at),
        }),
    }
}

fn run(r: Run) -> jv1::Run {
    let latency = match (&r.run.started, &r.run.finished) {
        (Some(a), Some(b)) => {
            let nanos = (i128::from(b.seconds) - i128::from(a.seconds)) * 1_000_000_000
                + i128::from(b.nanos)
                - i128::from(a.nanos);
            let nanos = nanos.max(0);
            Some(prost_types::Duration {
                seconds: i64::try_from(nanos / 1_000_000_000).unwrap_or(i64::MAX),
                nanos: i32::try_from(nanos % 1_000_000_000).unwrap_or(0),
            })
        }
        _ => None,
    };
    let outcome = outcome(r.run.outcome());
    jv1::Run {
        seq: r.seq,
        execution_id: r.run.execution_id,
        nominal_time: r.run.nominal,
        attempt: r.run.attempt,
        started: r.run.started,
        finished: r.run.finished,
        latency,
        outcome: outcome.into(),
        http_status: r.run.http_status,
        grpc_code: r.run.grpc_code,
        error: r.run.error,
    }
}

/// The filter a `ListJobsRequest` asks for.
fn list_filter(req: jv1::ListJobsRequest) -> Result<ListFilter, Status> {
    let state = if req.state.is_empty() {
        None
    } else {
        Some(JobState::parse(&req.state).ok_or_else(|| {
            bad_request(format!(
                "state: {:?} is not one of active, paused, finished",
                req.state
            ))
        })?)
    };
    Ok(ListFilter {
        name_prefix: req.prefix,
        labels: req.labels.into_iter().collect(),
        state,
        page_size: req.page_size as usize,
        page_token: (!req.page_token.is_empty()).then_some(req.page_token),
    })
}

#[tonic::async_trait]
impl jv1::jobs_server::Jobs for JobsApi {
    async fn schedule_job(
        &self,
        request: Request<jv1::ScheduleJobRequest>,
    ) -> Result<Response<jv1::ScheduleJobResponse>, Status> {
        authorize(&self.state, &request)?;
        let traceparent = traceparent(&request);
        let req = request.into_inner();
        let dapr = crate::proto::runtime::ScheduleJobRequest {
            job: req.job,
            overwrite: req.overwrite,
        };
        let extras = JobExtras {
            labels: req.labels.into_iter().collect(),
            traceparent,
        };
        self.state.schedule_job_with(dapr, extras).await?;
        Ok(Response::new(jv1::ScheduleJobResponse {}))
    }

    async fn get_job(
        &self,
        request: Request<jv1::GetJobRequest>,
    ) -> Result<Response<jv1::GetJobResponse>, Status> {
        authorize(&self.state, &request)?;
        let found = self.state.job_view(request.into_inner().name).await?;
        Ok(Response::new(jv1::GetJobResponse {
            job: Some(view(found)),
        }))
    }

    async fn delete_job(
        &self,
        request: Request<jv1::DeleteJobRequest>,
    ) -> Result<Response<jv1::DeleteJobResponse>, Status> {
        authorize(&self.state, &request)?;
        self.state.delete_job(request.into_inner().name).await?;
        Ok(Response::new(jv1::DeleteJobResponse {}))
    }

    async fn list_jobs(
        &self,
        request: Request<jv1::ListJobsRequest>,
    ) -> Result<Response<jv1::ListJobsResponse>, Status> {
        authorize(&self.state, &request)?;
        let filter = list_filter(request.into_inner())?;
        let page = self.state.list_views(filter).await?;
        Ok(Response::new(jv1::ListJobsResponse {
            jobs: page.jobs.into_iter().map(view).collect(),
            next_page_token: page.next_page_token.unwrap_or_default(),
        }))
    }

    async fn list_runs(
        &self,
        request: Request<jv1::ListRunsRequest>,
    ) -> Result<Response<jv1::ListRunsResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let limit = match req.limit as usize {
            0 => DEFAULT_RUNS,
            n => n.min(MAX_RUNS),
        };
        let before = (req.before != 0).then_some(req.before);
        let runs = self.state.list_runs(req.name, before, limit).await?;
        let next_before = if runs.len() == limit {
            runs.last().map_or(0, |r| r.seq)
        } else {
            0
        };
        Ok(Response::new(jv1::ListRunsResponse {
            runs: runs.into_iter().map(run).collect(),
            next_before,
        }))
    }
}
