//! daprd's gRPC Jobs API: the jobs rpcs of `dapr.proto.runtime.v1.Dapr` (stable and
//! `*Alpha1`, one implementation each), the actor rpcs and `GetMetadata`, plus gRPC health
//! and reflection.
//!
//! Every other `Dapr` method answers Unimplemented (the generated server does that for paths
//! it does not know), which is what SDKs probe for before falling back to an Alpha1 rpc.

use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use super::ApiState;
use super::actors::grpc as actors;
use super::error::ApiError;
use super::http::{API_TOKEN_HEADER, constant_time_eq};
use crate::observe::trace::{self, TRACEPARENT};
use crate::proto::runtime::{self as rv1, dapr_server::DaprServer};

/// The `Dapr` service implementation over the shared job operations.
#[derive(Clone, Debug)]
pub struct DaprApi {
    state: ApiState,
}

/// grpc-go's words for what tonic refuses before a handler runs, put on tonic's answer (a
/// trailers-only response, the status in its headers): a request message over the limit
/// (tonic: `OUT_OF_RANGE` "Error, decoded message length too large: found N bytes, the
/// limit is: M bytes"; grpc-go: `RESOURCE_EXHAUSTED` "grpc: received message larger than max
/// (N vs. M)") and a string field that is not UTF-8 (grpc-go: `INTERNAL` "grpc: error
/// unmarshalling request: string field contains invalid UTF-8"). Other answers pass as
/// they are.
pub fn go_request_errors<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers();
    let (Some(code), Some(message)) = (
        headers.get("grpc-status").and_then(|v| v.to_str().ok()),
        headers
            .get("grpc-message")
            .map(|v| percent_decoded(v.as_bytes())),
    ) else {
        return response;
    };
    let message = message.as_str();
    let (code, message) = match code {
        "11" => {
            let Some((found, limit)) = message
                .strip_prefix("Error, decoded message length too large: found ")
                .and_then(|rest| rest.strip_suffix(" bytes"))
                .and_then(|rest| rest.split_once(" bytes, the limit is: "))
            else {
                return response;
            };
            (
                "8",
                format!("grpc: received message larger than max ({found} vs. {limit})"),
            )
        }
        "13" if message.starts_with("failed to decode Protobuf message: ")
            && message.contains("not UTF-8 encoded") =>
        {
            (
                "13",
                "grpc: error unmarshalling request: string field contains invalid UTF-8".to_owned(),
            )
        }
        _ => return response,
    };
    if let Ok(message) = http::HeaderValue::from_str(&message) {
        let headers = response.headers_mut();
        headers.insert("grpc-status", http::HeaderValue::from_static(code));
        headers.insert("grpc-message", message);
    }
    response
}

/// A `grpc-message` as sent (tonic percent-encodes spaces among others).
fn percent_decoded(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = raw
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (raw[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `dapr.proto.runtime.v1.Dapr` service, with message limits of `max_body_size`
/// (daprd's `--max-body-size` applies to gRPC messages both ways).
pub fn service(state: ApiState) -> DaprServer<DaprApi> {
    let limit = state.body_limit();
    DaprServer::new(DaprApi { state })
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit)
}

/// gRPC health and reflection for the API server.
pub struct HealthAndReflection {
    /// Flips the served statuses (for example to NOT_SERVING while shutting down).
    pub reporter: HealthReporter,
    /// `grpc.health.v1.Health`, `grpc.reflection.v1` and `grpc.reflection.v1alpha`, ready for
    /// `tonic::transport::Server::add_routes`.
    pub routes: tonic::service::Routes,
}

/// The service name health reports for the jobs API.
pub const DAPR_SERVICE_NAME: &str = "dapr.proto.runtime.v1.Dapr";

/// The service name health reports for jobsd's own API.
pub const JOBSD_SERVICE_NAME: &str = "jobsd.v1.Jobs";

/// Health (SERVING for `""`, `dapr.proto.runtime.v1.Dapr` and `jobsd.v1.Jobs`) and reflection (v1 and
/// v1alpha, over the project's descriptors and grpc.health's).
pub async fn health_and_reflection() -> Result<HealthAndReflection, tonic_reflection::server::Error>
{
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    reporter
        .set_service_status(DAPR_SERVICE_NAME, ServingStatus::Serving)
        .await;
    reporter
        .set_service_status(JOBSD_SERVICE_NAME, ServingStatus::Serving)
        .await;
    let v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let routes = tonic::service::Routes::new(health)
        .add_service(v1)
        .add_service(v1alpha);
    Ok(HealthAndReflection { reporter, routes })
}

/// daprd's API-token interceptor: the first `dapr-api-token` value must match.
pub(crate) fn authorize<T>(state: &ApiState, request: &Request<T>) -> Result<(), Status> {
    let Some(token) = state.required_token() else {
        return Ok(());
    };
    match request.metadata().get(API_TOKEN_HEADER) {
        None => Err(ApiError::grpc_unauthenticated("missing api token in request metadata").into()),
        Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => Ok(()),
        Some(_) => {
            Err(ApiError::grpc_unauthenticated("authentication error: api token mismatch").into())
        }
    }
}

impl DaprApi {
    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Status> {
        authorize(&self.state, request)
    }

    /// Without metadata `idempotency-key` and `if-match`, daprd's answer; with them, as
    /// [`conditions`](super::jobsd::conditions) says.
    async fn schedule(
        &self,
        request: Request<rv1::ScheduleJobRequest>,
    ) -> Result<Response<rv1::ScheduleJobResponse>, Status> {
        self.authorize(&request)?;
        let traceparent = traceparent(&request);
        let Some(conditions) = super::jobsd::conditions::from_metadata(request.metadata())? else {
            self.state
                .schedule_job_traced(request.into_inner(), traceparent)
                .await?;
            return Ok(Response::new(rv1::ScheduleJobResponse {}));
        };
        let extras = crate::seam::JobExtras {
            traceparent,
            ..Default::default()
        };
        let applied = self
            .state
            .schedule_job_guarded(request.into_inner(), extras, conditions)
            .await?;
        Ok(super::jobsd::conditions::grpc_response(
            rv1::ScheduleJobResponse {},
            &applied,
        ))
    }

    async fn get(&self, request: Request<rv1::GetJobRequest>) -> Result<rv1::Job, Status> {
        self.authorize(&request)?;
        Ok(self.state.get_job(request.into_inner().name).await?)
    }

    async fn delete(&self, request: Request<rv1::DeleteJobRequest>) -> Result<(), Status> {
        self.authorize(&request)?;
        Ok(self.state.delete_job(request.into_inner().name).await?)
    }

    async fn list<T>(&self, request: Request<T>) -> Result<Vec<rv1::Job>, Status> {
        self.authorize(&request)?;
        Ok(self.state.list_jobs().await?)
    }

    async fn delete_by_prefix<T>(
        &self,
        request: &Request<T>,
        prefix: Option<String>,
    ) -> Result<(), Status> {
        self.authorize(request)?;
        Ok(self.state.delete_jobs_by_prefix(prefix).await?)
    }
}

/// The caller's `traceparent` metadata, when well-formed.
pub(crate) fn traceparent<T>(request: &Request<T>) -> Option<String> {
    trace::valid(request.metadata().get(TRACEPARENT).map(|v| v.as_bytes()))
}

#[tonic::async_trait]
impl rv1::dapr_server::Dapr for DaprApi {
    async fn schedule_job_alpha1(
        &self,
        request: Request<rv1::ScheduleJobRequest>,
    ) -> Result<Response<rv1::ScheduleJobResponse>, Status> {
        self.schedule(request).await
    }

    async fn get_job_alpha1(
        &self,
        request: Request<rv1::GetJobRequest>,
    ) -> Result<Response<rv1::GetJobResponse>, Status> {
        let job = self.get(request).await?;
        Ok(Response::new(rv1::GetJobResponse { job: Some(job) }))
    }

    async fn delete_job_alpha1(
        &self,
        request: Request<rv1::DeleteJobRequest>,
    ) -> Result<Response<rv1::DeleteJobResponse>, Status> {
        self.delete(request).await?;
        Ok(Response::new(rv1::DeleteJobResponse {}))
    }

    async fn delete_jobs_by_prefix_alpha1(
        &self,
        request: Request<rv1::DeleteJobsByPrefixRequestAlpha1>,
    ) -> Result<Response<rv1::DeleteJobsByPrefixResponseAlpha1>, Status> {
        let prefix = request.get_ref().name_prefix.clone();
        self.delete_by_prefix(&request, prefix).await?;
        Ok(Response::new(rv1::DeleteJobsByPrefixResponseAlpha1 {}))
    }

    async fn list_jobs_alpha1(
        &self,
        request: Request<rv1::ListJobsRequestAlpha1>,
    ) -> Result<Response<rv1::ListJobsResponseAlpha1>, Status> {
        let jobs = self.list(request).await?;
        Ok(Response::new(rv1::ListJobsResponseAlpha1 { jobs }))
    }

    async fn get_metadata(
        &self,
        request: Request<rv1::GetMetadataRequest>,
    ) -> Result<Response<rv1::GetMetadataResponse>, Status> {
        self.authorize(&request)?;
        Ok(Response::new(self.state.metadata()))
    }

    async fn schedule_job(
        &self,
        request: Request<rv1::ScheduleJobRequest>,
    ) -> Result<Response<rv1::ScheduleJobResponse>, Status> {
        self.schedule(request).await
    }

    async fn get_job(
        &self,
        request: Request<rv1::GetJobRequest>,
    ) -> Result<Response<rv1::GetJobResponse>, Status> {
        let job = self.get(request).await?;
        Ok(Response::new(rv1::GetJobResponse { job: Some(job) }))
    }

    async fn delete_job(
        &self,
        request: Request<rv1::DeleteJobRequest>,
    ) -> Result<Response<rv1::DeleteJobResponse>, Status> {
        self.delete(request).await?;
        Ok(Response::new(rv1::DeleteJobResponse {}))
    }

    async fn delete_jobs_by_prefix(
        &self,
        request: Request<rv1::DeleteJobsByPrefixRequest>,
    ) -> Result<Response<rv1::DeleteJobsByPrefixResponse>, Status> {
        let prefix = request.get_ref().name_prefix.clone();
        self.delete_by_prefix(&request, prefix).await?;
        Ok(Response::new(rv1::DeleteJobsByPrefixResponse {}))
    }

    async fn list_jobs(
        &self,
        request: Request<rv1::ListJobsRequest>,
    ) -> Result<Response<rv1::ListJobsResponse>, Status> {
        let jobs = self.list(request).await?;
        Ok(Response::new(rv1::ListJobsResponse { jobs }))
    }
    async fn register_actor_timer(
        &self,
        request: Request<rv1::RegisterActorTimerRequest>,
    ) -> Result<Response<()>, Status> {
        self.authorize(&request)?;
        actors::register_timer(&self.state, request.into_inner())?;
        Ok(Response::new(()))
    }

    async fn unregister_actor_timer(
        &self,
        request: Request<rv1::UnregisterActorTimerRequest>,
    ) -> Result<Response<()>, Status> {
        self.authorize(&request)?;
        actors::unregister_timer(&self.state, request.get_ref());
        Ok(Response::new(()))
    }

    async fn register_actor_reminder(
        &self,
        request: Request<rv1::RegisterActorReminderRequest>,
    ) -> Result<Response<()>, Status> {
        self.authorize(&request)?;
        let traceparent = traceparent(&request);
        actors::register_reminder(&self.state, request.into_inner(), traceparent).await?;
        Ok(Response::new(()))
    }

    async fn unregister_actor_reminder(
        &self,
        request: Request<rv1::UnregisterActorReminderRequest>,
    ) -> Result<Response<()>, Status> {
        self.authorize(&request)?;
        actors::unregister_reminder(&self.state, request.into_inner()).await?;
        Ok(Response::new(()))
    }

    async fn get_actor_reminder(
        &self,
        request: Request<rv1::GetActorReminderRequest>,
    ) -> Result<Response<rv1::GetActorReminderResponse>, Status> {
        self.authorize(&request)?;
        Ok(Response::new(
            actors::get_reminder(&self.state, request.into_inner()).await?,
        ))
    }

    async fn list_actor_reminders(
        &self,
        request: Request<rv1::ListActorRemindersRequest>,
    ) -> Result<Response<rv1::ListActorRemindersResponse>, Status> {
        self.authorize(&request)?;
        Ok(Response::new(
            actors::list_reminders(&self.state, request.into_inner()).await?,
        ))
    }

    async fn unregister_actor_reminders_by_type(
        &self,
        request: Request<rv1::UnregisterActorRemindersByTypeRequest>,
    ) -> Result<Response<rv1::UnregisterActorRemindersByTypeResponse>, Status> {
        self.authorize(&request)?;
        actors::unregister_reminders(&self.state, request.into_inner()).await?;
        Ok(Response::new(
            rv1::UnregisterActorRemindersByTypeResponse {},
        ))
    }

    async fn get_actor_state(
        &self,
        request: Request<rv1::GetActorStateRequest>,
    ) -> Result<Response<rv1::GetActorStateResponse>, Status> {
        self.authorize(&request)?;
        let answer = actors::get_state(&self.state, request.into_inner()).await?;
        Ok(Response::new(answer))
    }

    async fn execute_actor_state_transaction(
        &self,
        request: Request<rv1::ExecuteActorStateTransactionRequest>,
    ) -> Result<Response<()>, Status> {
        self.authorize(&request)?;
        actors::state_transaction(&self.state, request.into_inner()).await?;
        Ok(Response::new(()))
    }

    async fn invoke_actor(
        &self,
        request: Request<rv1::InvokeActorRequest>,
    ) -> Result<Response<rv1::InvokeActorResponse>, Status> {
        self.authorize(&request)?;
        Ok(Response::new(
            actors::invoke(&self.state, request.into_inner()).await?,
        ))
    }
}
