//! jobsd's gRPC service `jobsd.v1.Jobs`, on the same port as daprd's API and behind the same
//! API token: the operations of the `/jobsd/v1/` HTTP routes with the same checks and errors.

use tonic::{Request, Response, Status};

use super::conditions;
use super::executions::{execution_to_wire, fail_call, heartbeat_call};
use super::{DEFAULT_RUNS, MAX_RUNS, bad_request, steer};
use crate::api::ApiState;
use crate::api::grpc::{authorize, traceparent};
use crate::api::scheduler_to_runtime_job;
use crate::proto::jobsd_api::{self as jv1, jobs_server::JobsServer};
use crate::seam::ExecutionCall;
use crate::seam::{JobExtras, JobView, Selection, views_wire};

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

/// A jobsd create as Dapr's request and jobsd's settings beside it.
fn dapr_request(
    req: jv1::ScheduleJobRequest,
    traceparent: Option<String>,
) -> (crate::proto::runtime::ScheduleJobRequest, JobExtras) {
    let dapr = crate::proto::runtime::ScheduleJobRequest {
        job: req.job,
        overwrite: req.overwrite,
    };
    let extras = JobExtras {
        labels: req.labels.into_iter().collect(),
        traceparent,
        policy: req.policy,
        failure_policy: req.failure_policy,
    };
    (dapr, extras)
}

fn view(view: JobView) -> jv1::JobView {
    jv1::JobView {
        job: Some(scheduler_to_runtime_job(view.name.clone(), view.job)),
        name: view.name,
        labels: view.labels.into_iter().collect(),
        status: Some(views_wire::status_to_wire(view.status)),
        policy: view.policy,
        failure_policy: view.failure_policy,
        etag: view.etag,
    }
}

#[tonic::async_trait]
impl jv1::jobs_server::Jobs for JobsApi {
    type ExportJobsStream = super::backup::ExportStream;

    async fn export_jobs(
        &self,
        request: Request<jv1::ExportJobsRequest>,
    ) -> Result<Response<Self::ExportJobsStream>, Status> {
        authorize(&self.state, &request)?;
        let handover = request.into_inner().handover;
        Ok(Response::new(
            super::backup::grpc_export(&self.state, handover).await?,
        ))
    }

    async fn import_jobs(
        &self,
        request: Request<tonic::Streaming<jv1::ImportJobsChunk>>,
    ) -> Result<Response<jv1::ImportJobsResponse>, Status> {
        authorize(&self.state, &request)?;
        let summary = super::backup::grpc_import(&self.state, request.into_inner()).await?;
        Ok(Response::new(summary))
    }

    async fn schedule_job(
        &self,
        request: Request<jv1::ScheduleJobRequest>,
    ) -> Result<Response<jv1::ScheduleJobResponse>, Status> {
        authorize(&self.state, &request)?;
        let traceparent = traceparent(&request);
        let conditions = conditions::from_metadata(request.metadata())?;
        let (dapr, extras) = dapr_request(request.into_inner(), traceparent);
        let Some(conditions) = conditions else {
            self.state.schedule_job_with(dapr, extras).await?;
            return Ok(Response::new(jv1::ScheduleJobResponse::default()));
        };
        self.state.check_extras(&dapr, &extras)?;
        let applied = self
            .state
            .schedule_job_guarded(dapr, extras, conditions)
            .await?;
        let etag = applied.etag.clone();
        Ok(conditions::grpc_response(
            jv1::ScheduleJobResponse { etag },
            &applied,
        ))
    }

    async fn schedule_jobs(
        &self,
        request: Request<jv1::ScheduleJobsRequest>,
    ) -> Result<Response<jv1::ScheduleJobsResponse>, Status> {
        authorize(&self.state, &request)?;
        super::batch::refuse_conditions(conditions::from_metadata(request.metadata())?)?;
        let traceparent = traceparent(&request);
        let jobs = request.into_inner().jobs;
        let names: Vec<String> = jobs
            .iter()
            .map(|req| req.job.as_ref().map(|j| j.name.clone()).unwrap_or_default())
            .collect();
        let jobs = jobs
            .into_iter()
            .map(|req| dapr_request(req, traceparent.clone()))
            .collect();
        let outcomes = self.state.schedule_jobs(jobs).await?;
        let results = names
            .into_iter()
            .zip(outcomes)
            .map(|(name, outcome)| match outcome {
                Ok(()) => jv1::ScheduleJobResult {
                    name,
                    ..Default::default()
                },
                Err(e) => {
                    let status = Status::from(e);
                    jv1::ScheduleJobResult {
                        name,
                        code: status.code() as i32,
                        message: status.message().to_owned(),
                    }
                }
            })
            .collect();
        Ok(Response::new(jv1::ScheduleJobsResponse { results }))
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
        let if_match =
            conditions::delete_condition(conditions::from_metadata(request.metadata())?)?;
        let name = request.into_inner().name;
        match if_match {
            None => self.state.delete_job(name).await?,
            Some(if_match) => {
                self.state.delete_job_guarded(name, if_match).await?;
            }
        }
        Ok(Response::new(jv1::DeleteJobResponse {}))
    }

    async fn list_jobs(
        &self,
        request: Request<jv1::ListJobsRequest>,
    ) -> Result<Response<jv1::ListJobsResponse>, Status> {
        authorize(&self.state, &request)?;
        let filter = views_wire::filter_from_wire(request.into_inner()).map_err(bad_request)?;
        let page = self.state.list_views(filter).await?;
        Ok(Response::new(jv1::ListJobsResponse {
            jobs: page.jobs.into_iter().map(view).collect(),
            next_page_token: page.next_page_token.unwrap_or_default(),
        }))
    }

    async fn pause_job(
        &self,
        request: Request<jv1::PauseJobRequest>,
    ) -> Result<Response<jv1::PauseJobResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        self.state.pause_job(req.name, req.note).await?;
        Ok(Response::new(jv1::PauseJobResponse {}))
    }

    async fn resume_job(
        &self,
        request: Request<jv1::ResumeJobRequest>,
    ) -> Result<Response<jv1::ResumeJobResponse>, Status> {
        authorize(&self.state, &request)?;
        self.state.resume_job(request.into_inner().name).await?;
        Ok(Response::new(jv1::ResumeJobResponse {}))
    }

    async fn trigger_job(
        &self,
        request: Request<jv1::TriggerJobRequest>,
    ) -> Result<Response<jv1::TriggerJobResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let overlap = steer::overlap_of(&req.overlap)?;
        let id = self.state.trigger_job(req.name, overlap).await?;
        Ok(Response::new(jv1::TriggerJobResponse {
            execution_id: id.to_string(),
            scheduled_time: None,
        }))
    }

    async fn backfill_job(
        &self,
        request: Request<jv1::BackfillJobRequest>,
    ) -> Result<Response<jv1::BackfillJobResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let time = |field: &str, t| {
            crate::seam::steer_wire::instant_from_wire(field, t).map_err(bad_request)
        };
        let range = (time("start", req.start)?, time("end", req.end)?);
        let overlap = steer::overlap_of(&req.overlap)?;
        let runs = self.state.backfill_job(req.name, range, overlap).await?;
        Ok(Response::new(crate::seam::steer_wire::backfill_to_wire(
            runs,
        )))
    }

    async fn heartbeat(
        &self,
        request: Request<jv1::HeartbeatRequest>,
    ) -> Result<Response<jv1::HeartbeatResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let call = heartbeat_call(&req.lease)?;
        let held = self.state.execution_call(req.execution_id, call).await?;
        let (execution, name) = execution_to_wire(held);
        Ok(Response::new(jv1::HeartbeatResponse { execution, name }))
    }

    async fn complete_execution(
        &self,
        request: Request<jv1::CompleteExecutionRequest>,
    ) -> Result<Response<jv1::CompleteExecutionResponse>, Status> {
        authorize(&self.state, &request)?;
        let id = request.into_inner().execution_id;
        let held = self
            .state
            .execution_call(id, ExecutionCall::Complete)
            .await?;
        let (execution, name) = execution_to_wire(held);
        Ok(Response::new(jv1::CompleteExecutionResponse {
            execution,
            name,
        }))
    }

    async fn fail_execution(
        &self,
        request: Request<jv1::FailExecutionRequest>,
    ) -> Result<Response<jv1::FailExecutionResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let held = self
            .state
            .execution_call(req.execution_id, fail_call(req.error))
            .await?;
        let (execution, name) = execution_to_wire(held);
        Ok(Response::new(jv1::FailExecutionResponse {
            execution,
            name,
        }))
    }

    async fn preview(
        &self,
        request: Request<jv1::PreviewRequest>,
    ) -> Result<Response<jv1::PreviewResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let job = req.job.map(|mut job| {
            if job.name.is_empty() {
                job.name = super::preview::DEFAULT_NAME.to_owned();
            }
            job
        });
        let extras = JobExtras {
            labels: req.labels.into_iter().collect(),
            traceparent: None,
            policy: req.policy,
            failure_policy: req.failure_policy,
        };
        let count = count_or_default(req.count);
        let dapr = crate::proto::runtime::ScheduleJobRequest {
            job,
            overwrite: false,
        };
        let found = self.state.preview_job(dapr, extras, count).await?;
        Ok(Response::new(jv1::PreviewResponse {
            job: Some(view(found.view)),
            zone: found.preview.zone,
            ticks: super::preview::ticks_to_wire(found.preview.ticks),
        }))
    }

    async fn next_fire_times(
        &self,
        request: Request<jv1::NextFireTimesRequest>,
    ) -> Result<Response<jv1::NextFireTimesResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let count = count_or_default(req.count);
        let next = self.state.next_fire_times(req.name, count).await?;
        Ok(Response::new(jv1::NextFireTimesResponse {
            zone: next.preview.zone,
            ticks: super::preview::ticks_to_wire(next.preview.ticks),
            paused: next.paused,
        }))
    }

    async fn pause_jobs(
        &self,
        request: Request<jv1::PauseJobsRequest>,
    ) -> Result<Response<jv1::PauseJobsResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let selection = Selection {
            name_prefix: req.prefix,
            labels: req.labels.into_iter().collect(),
        };
        let bulk = self.state.pause_jobs(selection, req.all, req.note).await?;
        Ok(Response::new(jv1::PauseJobsResponse {
            count: bulk.count,
            truncated: super::bulk::truncated(&bulk),
            names: bulk.names,
        }))
    }

    async fn resume_jobs(
        &self,
        request: Request<jv1::ResumeJobsRequest>,
    ) -> Result<Response<jv1::ResumeJobsResponse>, Status> {
        authorize(&self.state, &request)?;
        let req = request.into_inner();
        let selection = Selection {
            name_prefix: req.prefix,
            labels: req.labels.into_iter().collect(),
        };
        let bulk = self.state.resume_jobs(selection, req.all).await?;
        Ok(Response::new(jv1::ResumeJobsResponse {
            count: bulk.count,
            truncated: super::bulk::truncated(&bulk),
            names: bulk.names,
        }))
    }

    async fn get_clock(
        &self,
        request: Request<jv1::GetClockRequest>,
    ) -> Result<Response<jv1::GetClockResponse>, Status> {
        authorize(&self.state, &request)?;
        let now = self.state.clock_now()?;
        Ok(Response::new(jv1::GetClockResponse {
            now: views_wire::stamp(Some(now)),
        }))
    }

    async fn advance_clock(
        &self,
        request: Request<jv1::AdvanceClockRequest>,
    ) -> Result<Response<jv1::AdvanceClockResponse>, Status> {
        authorize(&self.state, &request)?;
        self.state.clock_now()?;
        let req = request.into_inner();
        let advance = match req.to {
            Some(to) if req.by.is_empty() => super::Advance::To(
                chrono::DateTime::from_timestamp(to.seconds, u32::try_from(to.nanos).unwrap_or(0))
                    .ok_or_else(|| bad_request("to: out of range".to_owned()))?,
            ),
            // Both given: refused as the HTTP body is.
            Some(_) => super::clock::parse_advance(Some(&req.by), Some("to"))?,
            None => super::clock::parse_advance(Some(&req.by), None)?,
        };
        let (previous, now) = self.state.advance_clock(advance).await?;
        Ok(Response::new(jv1::AdvanceClockResponse {
            previous: views_wire::stamp(Some(previous)),
            now: views_wire::stamp(Some(now)),
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
        let next_before = views_wire::next_before(&runs, limit).unwrap_or(0);
        Ok(Response::new(jv1::ListRunsResponse {
            runs: runs.into_iter().map(views_wire::run_to_wire).collect(),
            next_before,
        }))
    }
}

/// A request's tick count: 0 means the default (10).
fn count_or_default(count: u32) -> usize {
    match count {
        0 => crate::schedule::preview::DEFAULT_COUNT,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    }
}
