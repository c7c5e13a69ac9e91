//! `jobsd.scheduler.v1.Jobs` on a replica: what Dapr's Scheduler protocol has no place for.
//! Creates with jobsd's settings (labels, policies), checked and stored by the same engine
//! call as in the embedded scheduler; and jobsd's views of a sidecar's jobs (labels, status,
//! run history, filtered pages), read from the store the replicas share, with the live state
//! of the jobs this replica owns. A Dapr Scheduler has no such service; sidecars say so.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::pool::{Pool, job_type};
use super::server;
use crate::engine::guard::IfMatch;
use crate::engine::{Engine, JobExtras, MAX_PAGE_SIZE, MAX_RUNS, MAX_SCHEDULE_BATCH};
use crate::observe::JobType;
use crate::proto::jobsd_api as jv1;
use crate::proto::jobsd_replica::{self as jsv1, jobs_server::JobsServer};
use crate::scheduler::{guarded_wire, views_wire};

/// jobsd's service over the replica's engine.
#[derive(Clone)]
pub struct JobsService {
    /// Checks, stores and shows the jobs.
    engine: Engine,
    /// Where creates are counted (the Dapr Scheduler's metrics), as on the Scheduler service.
    pool: Arc<Pool>,
}

/// The `Jobs` server for `engine`, counting creates in `pool`'s metrics.
pub fn server(engine: Engine, pool: Arc<Pool>) -> JobsServer<JobsService> {
    JobsServer::new(JobsService { engine, pool })
        .max_decoding_message_size(server::MAX_MESSAGE_SIZE)
        .max_encoding_message_size(server::MAX_MESSAGE_SIZE)
}

fn invalid(message: String) -> Status {
    Status::invalid_argument(message)
}

/// jobsd's settings of a create as the request carries them.
fn extras_of(req: &jsv1::ScheduleJobRequest) -> JobExtras {
    JobExtras {
        labels: req.labels.clone().into_iter().collect(),
        traceparent: (!req.traceparent.is_empty()).then(|| req.traceparent.clone()),
        policy: req.policy.clone(),
        failure_policy: req.failure_policy.clone(),
    }
}

#[tonic::async_trait]
impl jsv1::jobs_server::Jobs for JobsService {
    async fn schedule_job(
        &self,
        request: Request<jsv1::ScheduleJobRequest>,
    ) -> Result<Response<jsv1::ScheduleJobResponse>, Status> {
        let req = request.into_inner();
        let extras = extras_of(&req);
        // A missing job is an empty request: the engine refuses it as the Scheduler service
        // refuses one without metadata.
        let job = req.job.unwrap_or_default();
        server::create(&self.engine, &self.pool, job, extras).await?;
        Ok(Response::new(jsv1::ScheduleJobResponse {}))
    }

    async fn schedule_jobs(
        &self,
        request: Request<jsv1::ScheduleJobsRequest>,
    ) -> Result<Response<jsv1::ScheduleJobsResponse>, Status> {
        let jobs = request.into_inner().jobs;
        if jobs.len() > MAX_SCHEDULE_BATCH {
            return Err(invalid(format!(
                "jobs: at most {MAX_SCHEDULE_BATCH} per call, got {}",
                jobs.len()
            )));
        }
        // One store write per run of distinct names: the writer sends it as one txn without a
        // read (several when it is larger than etcd takes), and gathers other calls' runs and
        // single creates into the same txn.
        let names_kinds: Vec<_> = jobs
            .iter()
            .map(|req| {
                let job = req.job.as_ref();
                let kind = job
                    .and_then(|j| j.metadata.as_ref())
                    .map_or(JobType::Unknown, job_type);
                (job.map(|j| j.name.clone()).unwrap_or_default(), kind)
            })
            .collect();
        let requests = jobs
            .into_iter()
            .map(|req| {
                let extras = extras_of(&req);
                (req.job.unwrap_or_default(), extras)
            })
            .collect();
        let outcomes = self.engine.schedule_jobs(requests).await?;
        let results = names_kinds
            .into_iter()
            .zip(outcomes)
            .map(|((name, kind), outcome)| {
                let (code, message) = match outcome {
                    Ok(()) => {
                        self.pool.metrics().created(kind);
                        (0, String::new())
                    }
                    Err(e) => {
                        let s = Status::from(e);
                        (s.code() as i32, s.message().to_owned())
                    }
                };
                jv1::ScheduleJobResult {
                    name,
                    code,
                    message,
                }
            })
            .collect();
        Ok(Response::new(jsv1::ScheduleJobsResponse { results }))
    }

    async fn schedule_job_guarded(
        &self,
        request: Request<jsv1::GuardedScheduleJobRequest>,
    ) -> Result<Response<jsv1::GuardedResponse>, Status> {
        let req = request.into_inner();
        let conditions = guarded_wire::conditions_from_wire(&req.idempotency_key, &req.if_match)
            .map_err(invalid)?;
        let create = req.create.unwrap_or_default();
        let extras = extras_of(&create);
        let job = create.job.unwrap_or_default();
        let outcome =
            server::create_guarded(&self.engine, &self.pool, job, extras, &conditions).await?;
        Ok(Response::new(guarded_wire::to_wire(outcome)))
    }

    async fn delete_job_guarded(
        &self,
        request: Request<jsv1::GuardedDeleteJobRequest>,
    ) -> Result<Response<jsv1::GuardedResponse>, Status> {
        let req = request.into_inner();
        let if_match = IfMatch::parse(&req.if_match).map_err(invalid)?;
        let outcome = self
            .engine
            .delete_job_guarded(req.delete.unwrap_or_default(), &if_match)
            .await?;
        Ok(Response::new(guarded_wire::to_wire(outcome)))
    }

    async fn get_job(
        &self,
        request: Request<jsv1::GetJobRequest>,
    ) -> Result<Response<jsv1::JobView>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let view = self.engine.job_view(&metadata, &req.name).await?;
        Ok(Response::new(views_wire::view_to_wire(view)))
    }

    async fn list_runs(
        &self,
        request: Request<jsv1::ListRunsRequest>,
    ) -> Result<Response<jv1::ListRunsResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let limit = (req.limit as usize).clamp(1, MAX_RUNS);
        let runs = self
            .engine
            .list_runs(&metadata, &req.name, req.before, limit)
            .await?;
        Ok(Response::new(jv1::ListRunsResponse {
            next_before: views_wire::next_before(&runs, limit).unwrap_or(0),
            runs: runs.into_iter().map(views_wire::run_to_wire).collect(),
        }))
    }

    async fn list_jobs(
        &self,
        request: Request<jsv1::ListJobsRequest>,
    ) -> Result<Response<jsv1::ListJobsResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let mut filter =
            views_wire::filter_from_wire(req.filter.unwrap_or_default()).map_err(invalid)?;
        filter.page_size = filter.page_size.min(MAX_PAGE_SIZE);
        let page = self.engine.list_views(&metadata, &filter).await?;
        Ok(Response::new(views_wire::page_to_wire(page)))
    }
}
