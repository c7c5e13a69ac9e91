//! What apps call: daprd's Jobs API over HTTP ([`http`], axum) and gRPC ([`grpc`], the tonic
//! `dapr.proto.runtime.v1.Dapr` service), with Dapr's error model ([`error`]) and the
//! protojson daprd reads and writes ([`json`]).
//!
//! Both transports share the operations below (daprd's `pkg/api/universal/jobs.go`): they
//! check what daprd checks, in its order, build the Scheduler request for this app and call
//! the [`Scheduler`] seam, which the embedded engine or a remote replica answers.

pub mod actors;
pub mod error;
pub mod grpc;
pub mod http;
pub mod http_parts;
pub mod http_request;
pub mod internal;
pub mod jobsd;
pub mod json;

use std::sync::Arc;
use std::time::Duration;

pub use error::ApiError;

use crate::proto::{dapr_scheduler as sv1, runtime as rv1};
use crate::seam::{self, Scheduler};

/// How long one Scheduler call may take; daprd's `rpcTimeout`.
const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything the API handlers need; cheap to clone (one `Arc` and a few strings).
#[derive(Clone)]
pub struct ApiState {
    /// The Scheduler the jobs calls go to (embedded engine or remote replicas).
    pub scheduler: Arc<dyn Scheduler>,
    /// This sidecar's app ID; every job is stored under it.
    pub app_id: String,
    /// The namespace jobs are stored under (`NAMESPACE`, default `default`).
    pub namespace: String,
    /// `DAPR_API_TOKEN`: when set (and not empty), callers must send it as `dapr-api-token`.
    pub api_token: Option<String>,
    /// `--max-body-size`: the largest HTTP body and gRPC message accepted, in bytes; 0 means
    /// no limit, as in daprd.
    pub max_body_size: usize,
    /// `--max-backfill-ticks`: most ticks one backfill may run.
    pub max_backfill_ticks: usize,
    /// Where the scheduler lives: `"embedded"` or `"remote"` (shown by `/v1.0/metadata`).
    pub mode: &'static str,
    /// Remote mode: the Scheduler replicas in use, empty until WatchHosts has named some
    /// (`/v1.0/healthz` is not ready until then; `/v1.0/metadata` lists them). `None` in
    /// embedded mode.
    pub scheduler_hosts: Option<tokio::sync::watch::Receiver<Vec<String>>>,
    /// `true` once the app side has started (daprd's runtime readiness: the app listens and,
    /// for an HTTP app without health checks, its `/dapr/config` has been read):
    /// `/v1.0/healthz` is not ready until then. See [`crate::delivery::ready`].
    pub app_started: tokio::sync::watch::Receiver<bool>,
    /// The actor runtime: reminders, timers and method calls of the app's actors.
    pub actors: crate::actors::ActorRuntime,
    /// The sidecar's clock: "now" for previews (the engine's own clock in embedded mode).
    pub clock: Arc<dyn crate::clock::Clock>,
    /// `--test-clock`: the manual clock the sidecar runs on, moved by
    /// `POST /jobsd/v1/clock/advance`; `None` (the routes refuse) without the flag.
    pub test_clock: Option<jobsd::TestClock>,
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out of logs.
        f.debug_struct("ApiState")
            .field("app_id", &self.app_id)
            .field("namespace", &self.namespace)
            .field("api_token", &self.api_token.as_ref().map(|_| "<set>"))
            .field("max_body_size", &self.max_body_size)
            .field("mode", &self.mode)
            .field(
                "scheduler_hosts",
                &self.scheduler_hosts.as_ref().map(|h| h.borrow().clone()),
            )
            .finish_non_exhaustive()
    }
}

impl ApiState {
    /// The configured API token, if authentication is on (daprd treats an empty token as
    /// none).
    pub fn required_token(&self) -> Option<&str> {
        self.api_token.as_deref().filter(|t| !t.is_empty())
    }

    /// Whether the sidecar is ready (`/v1.0/healthz`): the app side has started and, in
    /// remote mode, WatchHosts has named the replicas (daprd's `scheduler-watch-hosts`
    /// readiness).
    pub fn ready(&self) -> bool {
        *self.app_started.borrow()
            && self
                .scheduler_hosts
                .as_ref()
                .is_none_or(|hosts| !hosts.borrow().is_empty())
    }

    /// The Scheduler replicas in use (empty in embedded mode).
    pub fn connected_scheduler_hosts(&self) -> Vec<String> {
        self.scheduler_hosts
            .as_ref()
            .map(|hosts| hosts.borrow().clone())
            .unwrap_or_default()
    }

    /// daprd's `GetMetadata` answer, as far as it applies to jobsd: the app id, version, actor
    /// runtime and Scheduler connection (`scheduler` only with Scheduler addresses, as daprd).
    pub fn metadata(&self) -> rv1::GetMetadataResponse {
        use rv1::actor_runtime::ActorRuntimeStatus;
        let active: Vec<rv1::ActiveActorsCount> = self
            .actors
            .active_by_type()
            .into_iter()
            .map(|(r#type, count)| rv1::ActiveActorsCount {
                r#type,
                count: i32::try_from(count).unwrap_or(i32::MAX),
            })
            .collect();
        let placement = self.actors.placement_ready();
        let hosts_actors = !active.is_empty() && placement != Some(false);
        #[allow(deprecated)]
        rv1::GetMetadataResponse {
            id: self.app_id.clone(),
            active_actors_count: active.clone(),
            extended_metadata: [("schedulerMode".to_owned(), self.mode.to_owned())].into(),
            app_connection_properties: None,
            runtime_version: env!("CARGO_PKG_VERSION").to_owned(),
            enabled_features: Vec::new(),
            actor_runtime: Some(rv1::ActorRuntime {
                runtime_status: ActorRuntimeStatus::Running as i32,
                active_actors: active,
                host_ready: hosts_actors,
                placement: match placement {
                    Some(true) => "placement: connected".to_owned(),
                    Some(false) => "placement: disconnected".to_owned(),
                    None => String::new(),
                },
            }),
            scheduler: self
                .scheduler_hosts
                .as_ref()
                .map(|_| rv1::MetadataScheduler {
                    connected_addresses: self.connected_scheduler_hosts(),
                }),
        }
    }

    /// The body and message size limit in bytes (`usize::MAX` when unlimited).
    pub fn body_limit(&self) -> usize {
        match self.max_body_size {
            0 => usize::MAX,
            limit => limit,
        }
    }

    /// The Scheduler metadata of this app's jobs: `{app_id, namespace, target: job}`.
    pub fn job_metadata(&self) -> sv1::JobMetadata {
        sv1::JobMetadata {
            app_id: self.app_id.clone(),
            namespace: self.namespace.clone(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }
    }

    /// `ScheduleJob`: `Job is empty`, `Name is empty`, `Schedule is empty` (by presence, so
    /// an empty string passes), then the Scheduler with the job copied as-is.
    pub async fn schedule_job(&self, req: rv1::ScheduleJobRequest) -> Result<(), ApiError> {
        self.schedule_job_traced(req, None).await
    }

    /// [`ApiState::schedule_job`] keeping the caller's W3C `traceparent` (already checked
    /// well-formed) beside the job, for its executions' spans to link to. The answer is
    /// Dapr's either way.
    pub async fn schedule_job_traced(
        &self,
        req: rv1::ScheduleJobRequest,
        traceparent: Option<String>,
    ) -> Result<(), ApiError> {
        let extras = seam::JobExtras {
            traceparent,
            ..Default::default()
        };
        self.schedule_job_extras(req, extras).await
    }

    /// [`ApiState::schedule_job`] with jobsd's settings, checked by the caller.
    pub(crate) async fn schedule_job_extras(
        &self,
        req: rv1::ScheduleJobRequest,
        extras: seam::JobExtras,
    ) -> Result<(), ApiError> {
        self.submit_job(req, extras, |scheduler, request, extras| async move {
            scheduler.schedule_job_with(request, extras).await
        })
        .await
    }

    /// Checks a create as daprd does ([`ApiState::scheduler_request`]), builds the Scheduler
    /// request for this app and hands it to `op` (which stores it, or previews it), answering
    /// `op`'s errors as a create's ([`ApiState::schedule_error`]).
    pub(crate) async fn submit_job<T, F, Fut>(
        &self,
        req: rv1::ScheduleJobRequest,
        extras: seam::JobExtras,
        op: F,
    ) -> Result<T, ApiError>
    where
        F: FnOnce(Arc<dyn Scheduler>, sv1::ScheduleJobRequest, seam::JobExtras) -> Fut,
        Fut: Future<Output = Result<T, seam::Error>>,
    {
        let request = self.scheduler_request(req)?;
        let job_name = request.name.clone();
        let jobsd_settings = seam::untravelled_field(&extras).is_some();
        let scheduler = Arc::clone(&self.scheduler);
        with_timeout(op(scheduler, request, extras))
            .await
            .map_err(|e| self.schedule_error(&job_name, jobsd_settings, e))
    }

    /// The Scheduler request of a `ScheduleJob`, after daprd's checks: `Job is empty`,
    /// `Name is empty`, `Schedule is empty` (by presence, so an empty string passes); the job
    /// is copied as-is.
    fn scheduler_request(
        &self,
        req: rv1::ScheduleJobRequest,
    ) -> Result<sv1::ScheduleJobRequest, ApiError> {
        let Some(job) = req.job else {
            return Err(ApiError::job_empty(&self.app_id, &self.namespace));
        };
        if job.name.is_empty() {
            return Err(ApiError::name_empty(&self.app_id, &self.namespace));
        }
        if job.schedule.is_none() && job.due_time.is_none() {
            return Err(ApiError::schedule_empty(&self.app_id, &self.namespace));
        }
        let (name, job) = runtime_to_scheduler_job(job);
        Ok(sv1::ScheduleJobRequest {
            name,
            job: Some(job),
            metadata: Some(self.job_metadata()),
            overwrite: req.overwrite,
        })
    }

    /// What a failed `ScheduleJob` of job `name` answers: daprd's error, except that
    /// jobsd's own refusals (`InvalidArgument` when the create carried jobsd's settings or
    /// conditions: a replica checking them, or a Dapr Scheduler that cannot keep them)
    /// answer as this API's own checks of them.
    fn schedule_error(&self, name: &str, jobsd_request: bool, e: seam::Error) -> ApiError {
        tracing::debug!(job = %name, error = %e, "scheduling job failed");
        if jobsd_request && e.code == tonic::Code::InvalidArgument {
            return jobsd::bad_request(e.message);
        }
        ApiError::schedule_job(&e, &self.app_id, &self.namespace)
    }

    /// `GetJob`: `Name is empty`, else the stored job under the asked name. Any Scheduler
    /// error (not found included) is Internal.
    pub async fn get_job(&self, name: String) -> Result<rv1::Job, ApiError> {
        if name.is_empty() {
            return Err(ApiError::name_empty(&self.app_id, &self.namespace));
        }
        let request = sv1::GetJobRequest {
            name: name.clone(),
            metadata: Some(self.job_metadata()),
        };
        let scheduler = Arc::clone(&self.scheduler);
        let job = with_timeout(async move { scheduler.get_job(request).await })
            .await
            .map_err(|e| {
                tracing::debug!(job = %name, error = %e, "getting job failed");
                ApiError::get_job(&e, &self.app_id, &self.namespace)
            })?;
        Ok(scheduler_to_runtime_job(name, job))
    }

    /// `DeleteJob`: `Name is empty`, else delete (a missing job is fine).
    pub async fn delete_job(&self, name: String) -> Result<(), ApiError> {
        if name.is_empty() {
            return Err(ApiError::name_empty(&self.app_id, &self.namespace));
        }
        let request = sv1::DeleteJobRequest {
            name,
            metadata: Some(self.job_metadata()),
        };
        let scheduler = Arc::clone(&self.scheduler);
        with_timeout(async move { scheduler.delete_job(request).await })
            .await
            .map_err(|e| ApiError::delete_job(&e, &self.app_id, &self.namespace))
    }

    /// `ListJobs`: every job of this app, names without the key prefix.
    pub async fn list_jobs(&self) -> Result<Vec<rv1::Job>, ApiError> {
        let request = sv1::ListJobsRequest {
            metadata: Some(self.job_metadata()),
        };
        let scheduler = Arc::clone(&self.scheduler);
        let jobs = with_timeout(async move { scheduler.list_jobs(request).await })
            .await
            .map_err(|e| ApiError::list_jobs(&e, &self.app_id, &self.namespace))?;
        Ok(jobs
            .into_iter()
            .map(|named| scheduler_to_runtime_job(named.name, named.job.unwrap_or_default()))
            .collect())
    }

    /// `DeleteJobsByPrefix`: unset or empty prefix deletes all of this app's jobs. Errors
    /// are daprd's `DAPR_SCHEDULER_DELETE_JOB`.
    pub async fn delete_jobs_by_prefix(&self, prefix: Option<String>) -> Result<(), ApiError> {
        let request = sv1::DeleteByNamePrefixRequest {
            name_prefix: prefix.unwrap_or_default(),
            metadata: Some(self.job_metadata()),
        };
        let scheduler = Arc::clone(&self.scheduler);
        with_timeout(async move { scheduler.delete_by_name_prefix(request).await })
            .await
            .map_err(|e| ApiError::delete_job(&e, &self.app_id, &self.namespace))
    }
}

/// Runs one Scheduler call under daprd's 30 s deadline; running out reads as grpc-go's
/// `DeadlineExceeded` `context deadline exceeded`.
pub(crate) async fn with_timeout<T>(
    call: impl Future<Output = Result<T, seam::Error>>,
) -> Result<T, seam::Error> {
    match tokio::time::timeout(RPC_TIMEOUT, call).await {
        Ok(result) => result,
        Err(_) => Err(seam::Error::new(
            tonic::Code::DeadlineExceeded,
            "context deadline exceeded",
        )),
    }
}

/// The Scheduler form of an app's job: the name apart, every field copied unchanged.
pub fn runtime_to_scheduler_job(job: rv1::Job) -> (String, sv1::Job) {
    (
        job.name,
        sv1::Job {
            schedule: job.schedule,
            repeats: job.repeats,
            due_time: job.due_time,
            ttl: job.ttl,
            data: job.data,
            failure_policy: job.failure_policy,
        },
    )
}

/// The app's form of a stored job, under `name`.
pub fn scheduler_to_runtime_job(name: String, job: sv1::Job) -> rv1::Job {
    rv1::Job {
        name,
        schedule: job.schedule,
        repeats: job.repeats,
        due_time: job.due_time,
        ttl: job.ttl,
        data: job.data,
        failure_policy: job.failure_policy,
    }
}
