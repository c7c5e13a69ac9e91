//! `jobsd.scheduler.v1.Views` on a replica: jobsd's views of a sidecar's jobs (labels, status,
//! run history, filtered pages), read from the store the replicas share, with the live state
//! of the jobs this replica owns. A Dapr Scheduler has no such service; sidecars say so.

use tonic::{Request, Response, Status};

use crate::engine::{Engine, MAX_PAGE_SIZE, MAX_RUNS};
use crate::proto::jobsd_api as jv1;
use crate::proto::jobsd_views::{self as jsv1, views_server::ViewsServer};
use crate::scheduler::views_wire;

/// The Views service over the replica's engine.
#[derive(Clone)]
pub struct ViewsService {
    engine: Engine,
}

/// The `Views` server for `engine`.
pub fn server(engine: Engine) -> ViewsServer<ViewsService> {
    ViewsServer::new(ViewsService { engine })
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX)
}

fn invalid(message: String) -> Status {
    Status::invalid_argument(message)
}

#[tonic::async_trait]
impl jsv1::views_server::Views for ViewsService {
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
