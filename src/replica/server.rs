//! `dapr.proto.scheduler.v1.Scheduler` over the engine: what `jobsd scheduler` serves, so that
//! a real daprd (or a jobsd sidecar in remote mode) talks to it as to a Dapr Scheduler.
//!
//! The unary calls are the engine's (already Dapr-exact); WatchJobs streams join the
//! [`Pool`]; WatchHosts streams the replica list.

use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use super::pool::{Outbound, Pool, job_type};
use crate::engine::{Engine, JobExtras};
use crate::observe::{JobType, SidecarError};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::dapr_scheduler::scheduler_server::{Scheduler, SchedulerServer};
use crate::proto::dapr_scheduler::watch_jobs_request::WatchJobRequestType;

/// Largest message in either direction: Dapr's Scheduler allows `MaxInt32`.
pub const MAX_MESSAGE_SIZE: usize = i32::MAX as usize;

/// The Scheduler service of one replica.
#[derive(Clone)]
pub struct SchedulerService {
    /// Validates, stores and fires jobs.
    engine: Engine,
    /// The WatchJobs streams triggers go to.
    pool: Arc<Pool>,
    /// The replica addresses sidecars should connect to (`host:port`); every change is sent
    /// to every WatchHosts subscriber.
    hosts: watch::Receiver<Vec<String>>,
    /// Cancelled when the replica stops: ends the WatchHosts streams.
    stop: CancellationToken,
}

impl SchedulerService {
    /// The service over `engine` and `pool`, announcing `hosts`, until `stop`.
    pub fn new(
        engine: Engine,
        pool: Arc<Pool>,
        hosts: watch::Receiver<Vec<String>>,
        stop: CancellationToken,
    ) -> Self {
        SchedulerService {
            engine,
            pool,
            hosts,
            stop,
        }
    }

    /// The tonic server for this service, with Dapr's message size limits.
    pub fn into_server(self) -> SchedulerServer<Self> {
        SchedulerServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE)
    }
}

/// What WatchHosts answers: the host list now, then after every change.
pub type HostsStream = Pin<Box<dyn Stream<Item = Result<sv1::WatchHostsResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Scheduler for SchedulerService {
    async fn schedule_job(
        &self,
        request: Request<sv1::ScheduleJobRequest>,
    ) -> Result<Response<sv1::ScheduleJobResponse>, Status> {
        create(
            &self.engine,
            &self.pool,
            request.into_inner(),
            JobExtras::default(),
        )
        .await?;
        Ok(Response::new(sv1::ScheduleJobResponse {}))
    }

    async fn get_job(
        &self,
        request: Request<sv1::GetJobRequest>,
    ) -> Result<Response<sv1::GetJobResponse>, Status> {
        let request = request.into_inner();
        authz(&self.pool, request.metadata.as_ref());
        let job = self.engine.get_job(request).await?;
        Ok(Response::new(sv1::GetJobResponse { job: Some(job) }))
    }

    async fn delete_job(
        &self,
        request: Request<sv1::DeleteJobRequest>,
    ) -> Result<Response<sv1::DeleteJobResponse>, Status> {
        let request = request.into_inner();
        authz(&self.pool, request.metadata.as_ref());
        let kind = request.metadata.as_ref().map_or(JobType::Unknown, job_type);
        self.engine.delete_job(request).await?;
        self.pool.metrics().deleted(kind);
        Ok(Response::new(sv1::DeleteJobResponse {}))
    }

    type WatchJobsStream = Outbound;

    async fn watch_jobs(
        &self,
        request: Request<Streaming<sv1::WatchJobsRequest>>,
    ) -> Result<Response<Self::WatchJobsStream>, Status> {
        let context = request
            .metadata()
            .get(crate::seam::remote::CONTEXT_METADATA)
            .is_some_and(|v| v.as_bytes() == b"1");
        let mut inbound = request.into_inner();
        // A stream that never sends its initial request must not hold the replica's stop
        // (the server's graceful stop waits for every handler).
        let first = tokio::select! {
            first = inbound.message() => first?,
            () = self.stop.cancelled() => {
                return Err(Status::unavailable("the scheduler is shutting down"));
            }
        };
        let Some(WatchJobRequestType::Initial(initial)) =
            first.and_then(|m| m.watch_job_request_type)
        else {
            return Err(Status::unknown(
                "initial request is required on stream connection",
            ));
        };
        Ok(Response::new(self.pool.connect(initial, context, inbound)?))
    }

    async fn list_jobs(
        &self,
        request: Request<sv1::ListJobsRequest>,
    ) -> Result<Response<sv1::ListJobsResponse>, Status> {
        let request = request.into_inner();
        authz(&self.pool, request.metadata.as_ref());
        let jobs = self.engine.list_jobs(request).await?;
        Ok(Response::new(sv1::ListJobsResponse { jobs }))
    }

    type WatchHostsStream = HostsStream;

    async fn watch_hosts(
        &self,
        _request: Request<sv1::WatchHostsRequest>,
    ) -> Result<Response<Self::WatchHostsStream>, Status> {
        // `WatchStream` yields the current list first, then every later one.
        let stream = WatchStream::new(self.hosts.clone())
            .map(|hosts| {
                Ok(sv1::WatchHostsResponse {
                    hosts: hosts
                        .into_iter()
                        .map(|address| sv1::Host { address })
                        .collect(),
                })
            })
            .take_until(self.stop.clone().cancelled_owned());
        Ok(Response::new(Box::pin(stream)))
    }

    async fn delete_by_metadata(
        &self,
        request: Request<sv1::DeleteByMetadataRequest>,
    ) -> Result<Response<sv1::DeleteByMetadataResponse>, Status> {
        let request = request.into_inner();
        authz(&self.pool, request.metadata.as_ref());
        self.engine.delete_by_metadata(request).await?;
        self.pool.metrics().bulk_deleted();
        Ok(Response::new(sv1::DeleteByMetadataResponse {}))
    }

    async fn delete_by_name_prefix(
        &self,
        request: Request<sv1::DeleteByNamePrefixRequest>,
    ) -> Result<Response<sv1::DeleteByNamePrefixResponse>, Status> {
        let request = request.into_inner();
        authz(&self.pool, request.metadata.as_ref());
        self.engine.delete_by_name_prefix(request).await?;
        self.pool.metrics().bulk_deleted();
        Ok(Response::new(sv1::DeleteByNamePrefixResponse {}))
    }
}

/// Stores a job, with jobsd's settings when a sidecar sends them on jobsd's service, and
/// counts it as created either way.
pub(super) async fn create(
    engine: &Engine,
    pool: &Pool,
    request: sv1::ScheduleJobRequest,
    extras: JobExtras,
) -> Result<(), Status> {
    let kind = request.metadata.as_ref().map_or(JobType::Unknown, job_type);
    if !authz(pool, request.metadata.as_ref()) {
        engine.schedule_job_with(request, extras).await?;
        return Ok(());
    }
    match engine.schedule_job_with(request, extras).await {
        Ok(()) => {
            pool.metrics().created(kind);
            Ok(())
        }
        Err(e) => {
            // Dapr counts what its cron refused (a bad schedule, a name taken without
            // overwrite), not a request without an owner.
            pool.metrics().create_failed(kind);
            Err(e.into())
        }
    }
}

/// Dapr's first check of every call that names a job's owner: without a namespace or an app
/// id the call is refused (the engine answers Dapr's error) and counted as a sidecar's
/// `auth_failed` error. Whether the owner is named.
pub(super) fn authz(pool: &Pool, metadata: Option<&sv1::JobMetadata>) -> bool {
    let named = metadata.is_some_and(|m| !m.namespace.is_empty() && !m.app_id.is_empty());
    if !named {
        pool.metrics().sidecar_error(SidecarError::AuthFailed);
    }
    named
}

/// [`create`] under its client's conditions; counted only when written.
pub(super) async fn create_guarded(
    engine: &Engine,
    pool: &Pool,
    request: sv1::ScheduleJobRequest,
    extras: JobExtras,
    conditions: &crate::jobs::guard::Conditions,
) -> Result<crate::jobs::guard::Guarded, Status> {
    let kind = request.metadata.as_ref().map_or(JobType::Unknown, job_type);
    authz(pool, request.metadata.as_ref());
    let outcome = engine
        .schedule_job_guarded(request, extras, conditions)
        .await?;
    if matches!(outcome, crate::jobs::guard::Guarded::Written { .. }) {
        pool.metrics().created(kind);
    }
    Ok(outcome)
}

/// gRPC health (`grpc.health.v1`, overall and for the Scheduler service) and reflection, to
/// serve beside the Scheduler on the same port.
pub struct HealthAndReflection {
    /// Turns the health status to not serving at shutdown.
    pub reporter: tonic_health::server::HealthReporter,
    /// The health and reflection services.
    pub routes: tonic::service::Routes,
}

/// Builds the health and reflection services, reporting the Scheduler as serving.
pub async fn health_and_reflection() -> Result<HealthAndReflection, tonic_reflection::server::Error>
{
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    reporter
        .set_serving::<SchedulerServer<SchedulerService>>()
        .await;
    let v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let routes = tonic::service::Routes::new(health).add_service(v1);
    Ok(HealthAndReflection { reporter, routes })
}

/// Marks the replica as not serving, overall and for the Scheduler service.
pub async fn set_not_serving(reporter: &tonic_health::server::HealthReporter) {
    reporter
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    reporter
        .set_not_serving::<SchedulerServer<SchedulerService>>()
        .await;
}
