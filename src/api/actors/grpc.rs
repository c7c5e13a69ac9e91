//! daprd's actor rpcs of `dapr.proto.runtime.v1.Dapr` (`pkg/api/universal/actors.go`), over
//! the shared operations: the request messages read into the runtime's terms and the answers
//! written back. `api::grpc` authorizes and calls these.

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::{errors, names};
use crate::actors::reminders::data_from_json;
use crate::actors::{ActorRef, MethodCall, NewReminder, NewTimer, Reminder};
use crate::api::{ApiError, ApiState};
use crate::go::json::write_str;
use crate::proto::runtime as rv1;
use crate::schedule::rfc3339;
use crate::seam::StateChange;

/// daprd stores gRPC `data` bytes as `json.Marshal([]byte)` gives them: a base64 JSON
/// string, so the app gets the same shape as from an SDK over HTTP.
fn data_of(bytes: &[u8]) -> Option<prost_types::Any> {
    if bytes.is_empty() {
        return None;
    }
    data_from_json(base64_json(bytes).as_bytes())
}

/// A timer's `data`: the same base64 JSON string, kept raw (timers stay in memory).
fn timer_data(bytes: &[u8]) -> Option<Vec<u8>> {
    if bytes.is_empty() {
        return None;
    }
    Some(base64_json(bytes).into_bytes())
}

/// `json.Marshal([]byte)`: a base64 JSON string.
fn base64_json(bytes: &[u8]) -> String {
    let mut json = String::with_capacity(bytes.len() * 4 / 3 + 4);
    write_str(
        &mut json,
        &base64::engine::general_purpose::STANDARD.encode(bytes),
    );
    json
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// A ttl as daprd shows it: only an RFC 3339 time.
fn shown_ttl(ttl: Option<&str>) -> Option<String> {
    ttl.and_then(|t| rfc3339::parse(t).ok())
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

/// `RegisterActorReminder`.
pub async fn register_reminder(
    state: &ApiState,
    req: rv1::RegisterActorReminderRequest,
    traceparent: Option<String>,
) -> Result<(), ApiError> {
    state
        .register_reminder(NewReminder {
            actor: ActorRef::new(&req.actor_type, &req.actor_id),
            name: req.name,
            due_time: non_empty(req.due_time),
            period: non_empty(req.period),
            ttl: non_empty(req.ttl),
            data: data_of(&req.data),
            failure_policy: req.failure_policy,
            overwrite: req.overwrite,
            traceparent,
        })
        .await
}

/// `UnregisterActorReminder`.
pub async fn unregister_reminder(
    state: &ApiState,
    req: rv1::UnregisterActorReminderRequest,
) -> Result<(), ApiError> {
    state
        .unregister_reminder(&ActorRef::new(&req.actor_type, &req.actor_id), &req.name)
        .await
}

/// `GetActorReminder`: NotFound when there is none.
pub async fn get_reminder(
    state: &ApiState,
    req: rv1::GetActorReminderRequest,
) -> Result<rv1::GetActorReminderResponse, ApiError> {
    let r = state
        .get_reminder(&ActorRef::new(&req.actor_type, &req.actor_id), &req.name)
        .await?;
    Ok(rv1::GetActorReminderResponse {
        actor_type: r.actor.actor_type.to_string(),
        actor_id: r.actor.actor_id.to_string(),
        ttl: shown_ttl(r.ttl.as_deref()),
        due_time: r.due_time,
        period: r.schedule,
        data: r.data,
    })
}

fn actor_reminder(r: Reminder) -> rv1::NamedActorReminder {
    rv1::NamedActorReminder {
        name: r.name,
        reminder: Some(rv1::ActorReminder {
            actor_type: r.actor.actor_type.to_string(),
            actor_id: r.actor.actor_id.to_string(),
            ttl: shown_ttl(r.ttl.as_deref()),
            due_time: r.due_time,
            period: r.schedule,
            data: r.data,
        }),
    }
}

/// `ListActorReminders`.
pub async fn list_reminders(
    state: &ApiState,
    req: rv1::ListActorRemindersRequest,
) -> Result<rv1::ListActorRemindersResponse, ApiError> {
    let id = req.actor_id.filter(|id| !id.is_empty());
    let reminders = state.list_reminders(&req.actor_type, id.as_deref()).await?;
    Ok(rv1::ListActorRemindersResponse {
        reminders: reminders.into_iter().map(actor_reminder).collect(),
    })
}

/// `UnregisterActorRemindersByType`: every reminder of the type, or of one actor of it.
pub async fn unregister_reminders(
    state: &ApiState,
    req: rv1::UnregisterActorRemindersByTypeRequest,
) -> Result<(), ApiError> {
    let id = req.actor_id.filter(|id| !id.is_empty());
    state
        .unregister_reminders(&req.actor_type, id.as_deref())
        .await
}

/// `RegisterActorTimer`.
pub fn register_timer(
    state: &ApiState,
    req: rv1::RegisterActorTimerRequest,
) -> Result<(), ApiError> {
    state.register_timer(NewTimer {
        actor: ActorRef::new(&req.actor_type, &req.actor_id),
        data: timer_data(&req.data),
        name: req.name,
        due_time: req.due_time,
        period: req.period,
        ttl: req.ttl,
        callback: req.callback,
    })
}

/// `UnregisterActorTimer`.
pub fn unregister_timer(state: &ApiState, req: &rv1::UnregisterActorTimerRequest) {
    state.unregister_timer(&ActorRef::new(&req.actor_type, &req.actor_id), &req.name);
}

/// `InvokeActor`: the app's body; metadata entries become request headers.
pub async fn invoke(
    state: &ApiState,
    req: rv1::InvokeActorRequest,
) -> Result<rv1::InvokeActorResponse, ApiError> {
    for (param, value) in [("actorType", &req.actor_type), ("actorId", &req.actor_id)] {
        names::validate(value)
            .map_err(|e| errors::invalid_argument(format!("invalid {param}: {e}")))?;
    }
    let mut headers = HeaderMap::new();
    for (k, v) in &req.metadata {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.append(name, value);
        }
    }
    let answer = state
        .invoke_actor_grpc(MethodCall {
            actor: ActorRef::new(&req.actor_type, &req.actor_id),
            method: req.method,
            query: None,
            headers,
            body: Bytes::from(req.data),
        })
        .await?;
    Ok(rv1::InvokeActorResponse {
        data: answer.body.to_vec(),
    })
}

/// `GetActorState`: the bytes under the key (empty when there are none).
pub async fn get_state(
    state: &ApiState,
    req: rv1::GetActorStateRequest,
) -> Result<rv1::GetActorStateResponse, ApiError> {
    let actor = ActorRef::new(&req.actor_type, &req.actor_id);
    Ok(rv1::GetActorStateResponse {
        data: state.get_actor_state(&actor, &req.key).await?,
        metadata: Default::default(),
    })
}

/// `ExecuteActorStateTransaction`: an upsert stores the value's bytes as they came (daprd
/// hands a state store the `Any`'s value); an operation type other than `upsert` and
/// `delete` is refused before anything is checked, as daprd does.
pub async fn state_transaction(
    state: &ApiState,
    req: rv1::ExecuteActorStateTransactionRequest,
) -> Result<(), ApiError> {
    ApiState::reject_internal_type(&req.actor_type)?;
    let mut changes = Vec::with_capacity(req.operations.len());
    for op in req.operations {
        let upsert = match op.operation_type.as_str() {
            "upsert" => true,
            "delete" => false,
            other => return Err(errors::unsupported_state_operation(other)),
        };
        changes.push(if op.key.is_empty() {
            Err("missing key".to_owned())
        } else if upsert && op.metadata.contains_key("ttlInSeconds") {
            Err(
                "ttlInSeconds is not supported without the \"ActorStateTTL\" feature enabled"
                    .into(),
            )
        } else if upsert {
            Ok(StateChange::Upsert {
                key: op.key,
                value: op.value.map(|v| v.value).unwrap_or_default(),
            })
        } else {
            Ok(StateChange::Delete { key: op.key })
        });
    }
    let actor = ActorRef::new(&req.actor_type, &req.actor_id);
    state.actor_state_transaction(&actor, changes).await
}
