//! Delivery to a gRPC app: `AppCallback.OnJobEvent`, falling back to
//! `AppCallbackAlpha.OnJobEventAlpha1` (`dapr-jobs-api.md` §4.5).

use std::net::SocketAddr;
use std::time::Duration;

use tonic::metadata::{Ascii, AsciiMetadataValue, MetadataKey};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

use super::{Ack, Error};
use crate::observe::trace::{TRACEPARENT, TraceParent};
use crate::proto::common::{HttpExtension, http_extension::Verb};
use crate::proto::runtime::JobEventRequest;
use crate::proto::runtime::app_callback_alpha_client::AppCallbackAlphaClient;
use crate::proto::runtime::app_callback_client::AppCallbackClient;
use crate::proto::runtime::app_callback_health_check_client::AppCallbackHealthCheckClient;

/// Metadata key carrying `APP_API_TOKEN` to the app.
const API_TOKEN_KEY: &str = "dapr-api-token";

/// Bounds a connect attempt: the app is local, so a connect that hangs means it is not there.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Calls a gRPC app. Cheap to clone: clones share the channel and what was learnt about the
/// app's services.
#[derive(Clone)]
pub struct Grpc {
    /// Lazily connected HTTP/2 channel; it reconnects by itself after the app restarts.
    channel: Channel,
    /// `dapr-api-token` metadata, when `APP_API_TOKEN` is set.
    token: Option<AsciiMetadataValue>,
    /// Largest message sent or accepted (daprd's `--max-body-size`).
    max_message: usize,
}

impl std::fmt::Debug for Grpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grpc")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("max_message", &self.max_message)
            .finish_non_exhaustive()
    }
}

impl Grpc {
    /// A lazily connected client for the app at `addr`. Must be called within a Tokio
    /// runtime (the channel spawns its connection task).
    pub fn new(
        addr: SocketAddr,
        api_token: Option<&str>,
        max_message: usize,
    ) -> Result<Self, Error> {
        let token = api_token
            .map(|t| {
                t.parse::<AsciiMetadataValue>()
                    .map_err(|_| Error::Config("APP_API_TOKEN is not valid gRPC metadata".into()))
            })
            .transpose()?;
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Error::Config(format!("app address {addr}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .connect_lazy();
        Ok(Self {
            channel,
            token,
            max_message,
        })
    }

    /// Sends one job to the app: OK → accepted (with response metadata `jobsd-async: true` →
    /// [`Ack::Later`]), `NotFound` → [`Ack::NotFound`], any other status (including
    /// `Unimplemented` from both rpcs) → an error. `trace` goes out as the `traceparent`
    /// metadata.
    pub async fn call(
        &self,
        name: &str,
        data: Option<&prost_types::Any>,
        trace: Option<&TraceParent>,
        context: &[(&'static str, String)],
    ) -> Result<Ack, Error> {
        let req = JobEventRequest {
            name: name.to_owned(),
            data: data.cloned(),
            method: format!("job/{name}"),
            content_type: data.map(|d| d.type_url.clone()).unwrap_or_default(),
            http_extension: Some(HttpExtension {
                verb: Verb::Post as i32,
                querystring: String::new(),
            }),
        };
        // Always the stable rpc first, as daprd does: SDKs answer `Unimplemented` per job
        // name (no handler), not only per service, so remembering it would route other jobs
        // to the deprecated rpc.
        // Hex digits and dashes: always valid ASCII metadata.
        let trace = trace.and_then(|t| AsciiMetadataValue::try_from(&t.encode()[..]).ok());
        let trace = trace.as_ref();
        let context: Vec<(MetadataKey<Ascii>, AsciiMetadataValue)> = context
            .iter()
            .filter_map(|(k, v)| Some((MetadataKey::from_static(k), v.parse().ok()?)))
            .collect();
        let extra = Extra {
            trace,
            context: &context,
        };
        let result = match self.stable(req.clone(), &extra).await {
            Err(s) if s.code() == Code::Unimplemented => self.alpha(req, &extra).await,
            other => other,
        };
        match result {
            Ok(true) => Ok(Ack::Later { asked: true }),
            Ok(false) => Ok(Ack::Accepted),
            Err(s) if s.code() == Code::NotFound => Ok(Ack::NotFound),
            Err(s) => Err(status_error(&s)),
        }
    }

    /// One health probe: `AppCallbackHealthCheck.HealthCheck` answering OK. Like daprd's
    /// probe it carries no `dapr-api-token`.
    pub async fn probe(&self) -> Result<(), Error> {
        AppCallbackHealthCheckClient::new(self.channel.clone())
            .max_decoding_message_size(self.max_message)
            .max_encoding_message_size(self.max_message)
            .health_check(Request::new(()))
            .await
            .map(|_| ())
            .map_err(|s| status_error(&s))
    }

    /// `OnJobEvent`; whether the answer asks for async completion.
    async fn stable(&self, req: JobEventRequest, extra: &Extra<'_>) -> Result<bool, Status> {
        AppCallbackClient::new(self.channel.clone())
            .max_decoding_message_size(self.max_message)
            .max_encoding_message_size(self.max_message)
            .on_job_event(self.request(req, extra))
            .await
            .map(|r| asks_async(r.metadata()))
    }

    /// `OnJobEventAlpha1`; whether the answer asks for async completion.
    async fn alpha(&self, req: JobEventRequest, extra: &Extra<'_>) -> Result<bool, Status> {
        AppCallbackAlphaClient::new(self.channel.clone())
            .max_decoding_message_size(self.max_message)
            .max_encoding_message_size(self.max_message)
            .on_job_event_alpha1(self.request(req, extra))
            .await
            .map(|r| asks_async(r.metadata()))
    }

    fn request<T>(&self, message: T, extra: &Extra<'_>) -> Request<T> {
        let mut req = Request::new(message);
        if let Some(token) = &self.token {
            req.metadata_mut()
                .insert(MetadataKey::from_static(API_TOKEN_KEY), token.clone());
        }
        if let Some(trace) = extra.trace {
            req.metadata_mut()
                .insert(MetadataKey::from_static(TRACEPARENT), trace.clone());
        }
        for (key, value) in extra.context {
            req.metadata_mut().insert(key.clone(), value.clone());
        }
        req
    }
}

/// The metadata a call carries besides the token: the attempt's `traceparent` and jobsd's
/// execution context.
struct Extra<'a> {
    trace: Option<&'a AsciiMetadataValue>,
    context: &'a [(MetadataKey<Ascii>, AsciiMetadataValue)],
}

/// Whether response metadata carries `jobsd-async: true`.
fn asks_async(metadata: &tonic::metadata::MetadataMap) -> bool {
    super::says_async(metadata.get(super::ASYNC_HEADER).map(|v| v.as_bytes()))
}

/// A status as a delivery error; transport failures arrive as `Unavailable` with the cause
/// in the source chain, which goes into the message.
fn status_error(s: &Status) -> Error {
    let mut message = s.message().to_owned();
    let mut source = std::error::Error::source(s);
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    Error::GrpcStatus {
        code: s.code(),
        message,
    }
}
