//! Actor calls and reminder ticks between sidecars, on daprd's internal gRPC API
//! (`dapr.proto.internals.v1.ServiceInvocation`: `CallActor`, `CallActorReminder`), so that a
//! jobsd sidecar and a daprd can each call actors the other hosts.
//!
//! A call is daprd's: the method, the body as `data.value`, the HTTP verb, the caller's
//! headers as metadata. The answer's status is the app's HTTP status; an answer carrying
//! `X-DaprErrorResponseHeader` is the app's error, handed back as it is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use tonic::transport::Channel;

use super::ring::Host;
use crate::actors::{ActorRef, MethodAnswer, MethodCall};
use crate::proto::common;
use crate::proto::internals::service_invocation_client::ServiceInvocationClient;
use crate::proto::internals::{self as iv1};

/// The status message a jobsd sidecar answers a reminder tick the actor cancelled with (a
/// daprd caller reads it as a failure, as it reads its own remote cancels).
pub const REMINDER_CANCELLED: &str = "reminder cancelled by the actor";

/// Why a call that came from another sidecar is refused: the actor is not here (any more).
/// daprd's words; a caller that reads them looks the actor up again.
pub const MOVED: &str = "error invoke actor method: remote actor moved";

/// Connections to other sidecars, by host name.
#[derive(Clone, Default)]
pub struct Peers {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

/// Why a call to another sidecar failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteError {
    /// The gRPC code.
    pub code: tonic::Code,
    /// Its message.
    pub message: String,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl From<tonic::Status> for RemoteError {
    fn from(s: tonic::Status) -> Self {
        RemoteError {
            code: s.code(),
            message: s.message().to_owned(),
        }
    }
}

impl Peers {
    fn client(&self, host: &Host) -> Result<ServiceInvocationClient<Channel>, RemoteError> {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        let channel = match channels.get(&host.name) {
            Some(c) => c.clone(),
            None => {
                let c = Channel::from_shared(format!("http://{}", host.name))
                    .map_err(|e| RemoteError {
                        code: tonic::Code::InvalidArgument,
                        message: e.to_string(),
                    })?
                    .connect_lazy();
                channels.insert(host.name.clone(), c.clone());
                c
            }
        };
        Ok(ServiceInvocationClient::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX))
    }

    /// Calls `call` on `host`.
    pub async fn call_actor(
        &self,
        host: &Host,
        call: &MethodCall,
    ) -> Result<MethodAnswer, RemoteError> {
        let request = invoke_request(call);
        let answer = self.client(host)?.call_actor(request).await?.into_inner();
        Ok(method_answer(answer))
    }

    /// Sends a reminder tick of `actor` to `host`.
    pub async fn call_reminder(
        &self,
        host: &Host,
        actor: &ActorRef,
        name: &str,
        data: Option<prost_types::Any>,
    ) -> Result<(), RemoteError> {
        let reminder = iv1::Reminder {
            actor_id: actor.actor_id.to_string(),
            actor_type: actor.actor_type.to_string(),
            name: name.to_owned(),
            data,
            ..Default::default()
        };
        self.client(host)?.call_actor_reminder(reminder).await?;
        Ok(())
    }
}

/// daprd's internal request for a method call.
pub fn invoke_request(call: &MethodCall) -> iv1::InternalInvokeRequest {
    let mut metadata: HashMap<String, iv1::ListStringValue> = HashMap::new();
    for (name, value) in &call.headers {
        if let Ok(v) = value.to_str() {
            metadata
                .entry(name.as_str().to_owned())
                .or_default()
                .values
                .push(v.to_owned());
        }
    }
    let content_type = call
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    iv1::InternalInvokeRequest {
        ver: iv1::ApiVersion::V1.into(),
        metadata,
        message: Some(common::InvokeRequest {
            method: call.method.clone(),
            data: Some(prost_types::Any {
                type_url: String::new(),
                value: call.body.to_vec(),
            }),
            content_type,
            http_extension: Some(common::HttpExtension {
                verb: common::http_extension::Verb::Put.into(),
                querystring: call.query.clone().unwrap_or_default(),
            }),
        }),
        actor: Some(iv1::Actor {
            actor_type: call.actor.actor_type.to_string(),
            actor_id: call.actor.actor_id.to_string(),
        }),
    }
}

/// The call a request stands for (the receiving side).
pub fn method_call(request: iv1::InternalInvokeRequest) -> Option<MethodCall> {
    let actor = request.actor?;
    let message = request.message.unwrap_or_default();
    let mut headers = HeaderMap::new();
    for (name, values) in request.metadata {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        for v in values.values {
            if let Ok(v) = HeaderValue::from_str(&v) {
                headers.append(name.clone(), v);
            }
        }
    }
    if !message.content_type.is_empty()
        && let Ok(v) = HeaderValue::from_str(&message.content_type)
    {
        headers.insert(http::header::CONTENT_TYPE, v);
    }
    let query = message
        .http_extension
        .map(|h| h.querystring)
        .filter(|q| !q.is_empty());
    Some(MethodCall {
        actor: ActorRef::new(&actor.actor_type, &actor.actor_id),
        method: message.method,
        query,
        headers,
        body: Bytes::from(message.data.map(|d| d.value).unwrap_or_default()),
    })
}

/// daprd's internal answer for an app's answer.
pub fn invoke_response(answer: MethodAnswer) -> iv1::InternalInvokeResponse {
    let mut headers: HashMap<String, iv1::ListStringValue> = HashMap::new();
    for (name, value) in &answer.headers {
        if let Ok(v) = value.to_str() {
            headers
                .entry(canonical(name.as_str()))
                .or_default()
                .values
                .push(v.to_owned());
        }
    }
    let content_type = answer
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    iv1::InternalInvokeResponse {
        status: Some(iv1::Status {
            code: i32::from(answer.status.as_u16()),
            message: String::new(),
            details: Vec::new(),
        }),
        headers,
        trailers: HashMap::new(),
        message: Some(common::InvokeResponse {
            data: Some(prost_types::Any {
                type_url: String::new(),
                value: answer.body.to_vec(),
            }),
            content_type,
        }),
    }
}

/// The app's answer an internal response carries (the calling side).
fn method_answer(response: iv1::InternalInvokeResponse) -> MethodAnswer {
    let status = response
        .status
        .and_then(|s| u16::try_from(s.code).ok())
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::OK);
    let mut headers = HeaderMap::new();
    for (name, values) in response.headers {
        let Ok(name) = HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()) else {
            continue;
        };
        for v in values.values {
            if let Ok(v) = HeaderValue::from_str(&v) {
                headers.append(name.clone(), v);
            }
        }
    }
    let message = response.message.unwrap_or_default();
    if !message.content_type.is_empty()
        && !headers.contains_key(http::header::CONTENT_TYPE)
        && let Ok(v) = HeaderValue::from_str(&message.content_type)
    {
        headers.insert(http::header::CONTENT_TYPE, v);
    }
    MethodAnswer {
        status,
        headers,
        body: Bytes::from(message.data.map(|d| d.value).unwrap_or_default()),
    }
}

/// Go's canonical header name (`x-daprerrorresponseheader` → `X-Daprerrorresponseheader`),
/// which daprd's callers look up.
fn canonical(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut c = part.chars();
            match c.next() {
                Some(first) => {
                    first.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase()
                }
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_survives_the_trip_between_sidecars() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("x-trace", HeaderValue::from_static("abc"));
        let call = MethodCall {
            actor: ActorRef::new("Counter", "7"),
            method: "add".into(),
            query: Some("n=1".into()),
            headers,
            body: Bytes::from_static(b"{\"n\":1}"),
        };
        let back = method_call(invoke_request(&call)).expect("an actor");
        assert_eq!(back.actor, call.actor);
        assert_eq!(back.method, "add");
        assert_eq!(back.query.as_deref(), Some("n=1"));
        assert_eq!(back.body, call.body);
        assert_eq!(back.headers["x-trace"], "abc");
        let mut h = HeaderMap::new();
        h.insert("x-daprerrorresponseheader", HeaderValue::from_static("1"));
        let answer = MethodAnswer {
            status: StatusCode::BAD_REQUEST,
            headers: h,
            body: Bytes::from_static(b"no"),
        };
        let response = invoke_response(answer);
        assert!(response.headers.contains_key("X-Daprerrorresponseheader"));
        let back = method_answer(response);
        assert_eq!(back.status, StatusCode::BAD_REQUEST);
        assert!(back.headers.contains_key("x-daprerrorresponseheader"));
        assert_eq!(back.body, "no");
    }
}
