//! daprd's actor state calls (`pkg/api/http/actors.go`, `pkg/api/grpc/grpc.go`,
//! `pkg/actors/state`): a transaction of upserts and deletes on an actor active on this host,
//! and a read of one key, over the scheduler's actor state (jobsd keeps it beside the jobs:
//! the embedded store, or the replicas' store). A scheduler without it (a Dapr Scheduler
//! behind `--scheduler-host-address`) gets daprd's answer for a sidecar without an actor
//! state store.
//!
//! The HTTP body is read as Go reads it into `[]api.TransactionalOperation` (`request` an
//! `any`), each request as `mapstructure` reads it into `TransactionalUpsert` /
//! `TransactionalDelete`; an upsert stores Go's `json.Marshal` of the decoded value (what
//! daprd hands a state store), a gRPC upsert the value's bytes as they came.

use serde_json::Value;
use serde_json::value::RawValue;

use super::body::{BodyError, Entries, go_field, json_kind};
use super::errors;
use crate::actors::ActorRef;
use crate::api::{ApiError, ApiState};
use crate::go::json::marshal_any;
use crate::go::json_stream;
use crate::seam::{ActorState, ActorStateOwner, StateChange};

/// The prefix of the actor types Dapr's workflow runtime keeps for itself.
const INTERNAL_TYPE_PREFIX: &str = "dapr.internal.";

/// One element of the HTTP body: `operation` and the raw `request` (`None`: absent or null).
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// `upsert`, `delete`, or anything else (refused when the transaction is applied).
    pub operation: String,
    /// The request as decoded into `any`.
    pub request: Option<Value>,
}

/// Reads the body as `json.NewDecoder(r.Body).Decode(&[]TransactionalOperation)`: the first
/// JSON value, `null` for no operations, Go's type errors for anything else.
pub fn parse_transaction(body: &[u8]) -> Result<Vec<Operation>, BodyError> {
    let value = json_stream::first_value(body).map_err(BodyError)?;
    let text = json_stream::lossy(value);
    let items: Option<Vec<&RawValue>> = serde_json::from_str(&text)
        .map_err(|_| kind_error(&text, "[]api.TransactionalOperation"))?;
    let mut ops = Vec::new();
    let mut first_error = None;
    for raw in items.unwrap_or_default() {
        let members: Option<Vec<(String, &RawValue)>> = match json_kind(raw.get()) {
            "null" => None,
            "object" => Some(object_members(raw.get())?),
            _ => return Err(kind_error(raw.get(), "api.TransactionalOperation")),
        };
        let mut op = Operation {
            operation: String::new(),
            request: None,
        };
        for (field, raw) in members.unwrap_or_default() {
            match go_field(&["operation", "request"], &field) {
                Some("operation") => match json_kind(raw.get()) {
                    "null" => {}
                    "string" => {
                        op.operation = serde_json::from_str(raw.get())
                            .map_err(|e| BodyError(e.to_string()))?;
                    }
                    k => {
                        first_error.get_or_insert_with(|| {
                            BodyError(format!(
                                "json: cannot unmarshal {k} into Go struct field \
                                 TransactionalOperation.operation of type api.OperationType"
                            ))
                        });
                    }
                },
                Some(_) => {
                    let value: Value =
                        serde_json::from_str(raw.get()).map_err(|e| BodyError(e.to_string()))?;
                    op.request = (!value.is_null()).then_some(value);
                }
                None => {}
            }
        }
        ops.push(op);
    }
    match first_error {
        Some(err) => Err(err),
        None => Ok(ops),
    }
}

fn kind_error(raw: &str, go_type: &str) -> BodyError {
    BodyError(format!(
        "json: cannot unmarshal {} into Go value of type {go_type}",
        json_kind(raw)
    ))
}

/// An object's members in order, repeated keys included (Go keeps the last).
fn object_members(raw: &str) -> Result<Vec<(String, &RawValue)>, BodyError> {
    serde_json::from_str::<Entries<'_>>(raw)
        .map(|e| e.0)
        .map_err(|e| BodyError(e.to_string()))
}

/// How `mapstructure` names the Go type of a value decoded into `any`.
fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

/// `TransactionalOperation.StateOperation` of one HTTP operation: the change, or daprd's
/// reason (which follows `error saving actor transaction state: `).
pub fn change_of(op: Operation) -> Result<StateChange, String> {
    let Some(request) = op.request else {
        return Err("request data is empty".into());
    };
    if op.operation.is_empty() {
        return Err("operation is empty".into());
    }
    let upsert = match op.operation.as_str() {
        "upsert" => true,
        "delete" => false,
        other => return Err(format!("operation type {other} not supported")),
    };
    let Value::Object(members) = request else {
        return Err(format!("'' expected a map, got '{}'", go_kind(&request)));
    };
    let mut key = String::new();
    let mut value = Value::Null;
    let mut etag = None;
    let mut metadata = serde_json::Map::new();
    let fields: &[&'static str] = if upsert {
        &["Key", "Value", "ETag", "Metadata"]
    } else {
        &["Key", "ETag"]
    };
    for (name, member) in members {
        match go_field(fields, &name) {
            Some("Key") => match member {
                Value::String(s) => key = s,
                Value::Null => {}
                other => return Err(unconvertible("Key", "string", &other)),
            },
            Some("Value") => value = member,
            Some("ETag") => match member {
                Value::String(s) => etag = Some(s),
                Value::Null => {}
                other => return Err(unconvertible("ETag", "string", &other)),
            },
            Some(_) => match member {
                Value::Object(m) => metadata = m,
                Value::Null => {}
                other => {
                    return Err(format!(
                        "1 error(s) decoding:\n\n* 'Metadata' expected a map, got '{}'",
                        go_kind(&other)
                    ));
                }
            },
            None => {}
        }
    }
    if key.is_empty() {
        return Err("missing key".into());
    }
    if upsert && metadata.contains_key("ttlInSeconds") {
        return Err(
            "ttlInSeconds is not supported without the \"ActorStateTTL\" feature enabled".into(),
        );
    }
    if etag.is_some() {
        return Err(format!(
            "etag of key {key}: jobsd keeps no ETags for actor state (daprd's GET hands none \
             out); send the operation without one"
        ));
    }
    Ok(if upsert {
        let mut bytes = String::new();
        marshal_any(&mut bytes, &value);
        StateChange::Upsert {
            key,
            value: bytes.into_bytes(),
        }
    } else {
        StateChange::Delete { key }
    })
}

/// `mapstructure`'s error for a field of another type.
fn unconvertible(field: &str, want: &str, got: &Value) -> String {
    let shown = match got {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    };
    format!(
        "1 error(s) decoding:\n\n* '{field}' expected type '{want}', got unconvertible type \
         '{}', value: '{shown}'",
        go_kind(got)
    )
}

impl ApiState {
    /// daprd's `RejectInternalActorType`: the workflow runtime's own types are refused.
    pub fn reject_internal_type(actor_type: &str) -> Result<(), ApiError> {
        if actor_type.starts_with(INTERNAL_TYPE_PREFIX) {
            return Err(errors::type_reserved(actor_type));
        }
        Ok(())
    }

    fn actor_state(&self) -> Result<&dyn ActorState, ApiError> {
        self.scheduler
            .as_actor_state()
            .ok_or_else(errors::runtime_not_found)
    }

    fn owner(&self, actor: &ActorRef) -> ActorStateOwner {
        ActorStateOwner {
            namespace: self.namespace.clone(),
            app_id: self.app_id.clone(),
            actor_type: actor.actor_type.to_string(),
            actor_id: actor.actor_id.to_string(),
        }
    }

    /// `GetActorState`: the bytes under `key` (empty when there are none).
    pub async fn get_actor_state(&self, actor: &ActorRef, key: &str) -> Result<Vec<u8>, ApiError> {
        Self::reject_internal_type(&actor.actor_type)?;
        let store = self.actor_state()?;
        match store
            .get_actor_state(self.owner(actor), key.to_owned())
            .await
        {
            Ok(value) => Ok(value.unwrap_or_default()),
            Err(e) if e.code == tonic::Code::Unimplemented => Err(errors::runtime_not_found()),
            Err(e) => Err(errors::state_get(&e.message)),
        }
    }

    /// `ExecuteActorStateTransaction` of changes read from a request: the actor must be
    /// active here (`ERR_ACTOR_INSTANCE_MISSING`), then each change is checked (`changes`
    /// gives daprd's reason for the first bad one) and all are written in one commit.
    pub async fn actor_state_transaction(
        &self,
        actor: &ActorRef,
        changes: Vec<Result<StateChange, String>>,
    ) -> Result<(), ApiError> {
        let store = self.actor_state()?;
        if !self.actors.is_active(actor) {
            return Err(errors::instance_missing());
        }
        let changes = changes
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| errors::state_save(&why))?;
        match store
            .actor_state_transaction(self.owner(actor), changes)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.code == tonic::Code::Unimplemented => Err(errors::runtime_not_found()),
            Err(e) => Err(errors::state_save(&e.message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(body: &str) -> Result<Vec<Operation>, String> {
        parse_transaction(body.as_bytes()).map_err(|e| e.0)
    }

    fn changes(body: &str) -> Vec<Result<StateChange, String>> {
        ops(body).unwrap().into_iter().map(change_of).collect()
    }

    fn upsert(key: &str, value: &str) -> Result<StateChange, String> {
        Ok(StateChange::Upsert {
            key: key.into(),
            value: value.as_bytes().to_vec(),
        })
    }

    #[test]
    fn python_sdk_transaction() {
        // What the Python SDK's state provider sends (its serializer's JSON inline).
        let body = r#"[{"operation":"upsert","request":{"key":"count","value":{"n": 3, "a": 1.0}}},{"operation":"delete","request":{"key":"old"}}]"#;
        assert_eq!(
            changes(body),
            vec![
                upsert("count", r#"{"a":1,"n":3}"#),
                Ok(StateChange::Delete { key: "old".into() })
            ]
        );
    }

    #[test]
    fn bodies_are_read_as_go_reads_them() {
        assert_eq!(ops("null"), Ok(vec![]));
        assert_eq!(ops(""), Err("EOF".into()));
        assert_eq!(
            ops("{}"),
            Err(
                "json: cannot unmarshal object into Go value of type []api.TransactionalOperation"
                    .into()
            )
        );
        assert_eq!(
            ops(r#"["x"]"#),
            Err(
                "json: cannot unmarshal string into Go value of type api.TransactionalOperation"
                    .into()
            )
        );
        assert_eq!(
            ops(r#"[{"operation":1}]"#),
            Err("json: cannot unmarshal number into Go struct field TransactionalOperation.operation of type api.OperationType".into())
        );
        // Keys match case-insensitively; an exact match wins; values keep Go's encoding.
        assert_eq!(
            changes(r#"[{"OPERATION":"upsert","Request":{"KEY":"k","value":"<b>"}}]"#),
            vec![upsert("k", r#""\u003cb\u003e""#)]
        );
        // An upsert without a value stores null, as json.Marshal(nil).
        assert_eq!(
            changes(r#"[{"operation":"upsert","request":{"key":"k"}}]"#),
            vec![upsert("k", "null")]
        );
    }

    #[test]
    fn bad_operations_give_daprds_reasons() {
        let reasons: Vec<_> = changes(
            r#"[null, {"operation":"upsert"}, {"request":{"key":"k"}}, {"operation":"merge","request":{}},
               {"operation":"upsert","request":"k"}, {"operation":"delete","request":{}},
               {"operation":"upsert","request":{"key":1}},
               {"operation":"upsert","request":{"key":"k","metadata":{"ttlInSeconds":"5"}}}]"#,
        )
        .into_iter()
        .map(|r| r.unwrap_err())
        .collect();
        assert_eq!(
            reasons,
            [
                "request data is empty",
                "request data is empty",
                "operation is empty",
                "operation type merge not supported",
                "'' expected a map, got 'string'",
                "missing key",
                "1 error(s) decoding:\n\n* 'Key' expected type 'string', got unconvertible type 'float64', value: '1'",
                "ttlInSeconds is not supported without the \"ActorStateTTL\" feature enabled",
            ]
        );
    }
}
