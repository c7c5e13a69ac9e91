//! daprd's errors for the actor routes (`pkg/messages/predefined.go`): legacy
//! `{"errorCode","message"}` bodies, each with its HTTP status and gRPC code.

use http::StatusCode;

use crate::actors::{ActorError, ReminderError};
use crate::api::ApiError;

/// Dapr's error codes for the actor routes.
pub mod code {
    /// The sidecar has no actor state store.
    pub const RUNTIME_NOT_FOUND: &str = "ERR_ACTOR_RUNTIME_NOT_FOUND";
    /// Invoking an actor method failed.
    pub const INVOKE_METHOD: &str = "ERR_ACTOR_INVOKE_METHOD";
    /// Registering a reminder failed.
    pub const REMINDER_CREATE: &str = "ERR_ACTOR_REMINDER_CREATE";
    /// Reading a reminder failed.
    pub const REMINDER_GET: &str = "ERR_ACTOR_REMINDER_GET";
    /// Deleting a reminder failed.
    pub const REMINDER_DELETE: &str = "ERR_ACTOR_REMINDER_DELETE";
    /// There is no such reminder.
    pub const REMINDER_NOT_FOUND: &str = "ERR_ACTOR_REMINDER_NOT_FOUND";
    /// `overwrite: false` and the reminder exists.
    pub const REMINDER_ALREADY_EXISTS: &str = "ERR_ACTOR_REMINDER_ALREADY_EXISTS";
    /// The actor type is not hosted by this app.
    pub const REMINDER_NON_HOSTED: &str = "ERR_ACTOR_REMINDER_NON_HOSTED";
    /// Registering a timer failed.
    pub const TIMER_CREATE: &str = "ERR_ACTOR_TIMER_CREATE";
    /// A request field is invalid.
    pub const BAD_REQUEST: &str = "ERR_BAD_REQUEST";
    /// The actor is not active on this host.
    pub const INSTANCE_MISSING: &str = "ERR_ACTOR_INSTANCE_MISSING";
    /// Reading actor state failed.
    pub const STATE_GET: &str = "ERR_ACTOR_STATE_GET";
    /// Writing actor state failed.
    pub const STATE_TRANSACTION_SAVE: &str = "ERR_ACTOR_STATE_TRANSACTION_SAVE";
    /// The actor type is the workflow runtime's own.
    pub const TYPE_RESERVED: &str = "ERR_ACTOR_TYPE_RESERVED";
}

fn legacy(
    http: StatusCode,
    code: tonic::Code,
    error_code: &'static str,
    message: String,
) -> ApiError {
    ApiError::Legacy {
        code,
        http,
        error_code,
        message,
    }
}

/// 500 `ERR_ACTOR_RUNTIME_NOT_FOUND`: what daprd answers on the actor state routes of a
/// sidecar without an actor state store (jobsd's, when its scheduler keeps no actor state: a
/// Dapr Scheduler behind `--scheduler-host-address`).
pub fn runtime_not_found() -> ApiError {
    legacy(
        StatusCode::INTERNAL_SERVER_ERROR,
        tonic::Code::Internal,
        code::RUNTIME_NOT_FOUND,
        "the state store is not configured to use the actor runtime. Have you set the - name: \
         actorStateStore value: \"true\" in your state store component file?"
            .to_owned(),
    )
}

/// 400 `ERR_ACTOR_INSTANCE_MISSING` (gRPC `Internal`): a state transaction for an actor not
/// active on this host.
pub fn instance_missing() -> ApiError {
    legacy(
        StatusCode::BAD_REQUEST,
        tonic::Code::Internal,
        code::INSTANCE_MISSING,
        "actor instance is missing".to_owned(),
    )
}

/// 500 `ERR_ACTOR_STATE_GET` `error getting actor state: <why>`.
pub fn state_get(why: &str) -> ApiError {
    legacy(
        StatusCode::INTERNAL_SERVER_ERROR,
        tonic::Code::Internal,
        code::STATE_GET,
        format!("error getting actor state: {why}"),
    )
}

/// 500 `ERR_ACTOR_STATE_TRANSACTION_SAVE` `error saving actor transaction state: <why>`.
pub fn state_save(why: &str) -> ApiError {
    legacy(
        StatusCode::INTERNAL_SERVER_ERROR,
        tonic::Code::Internal,
        code::STATE_TRANSACTION_SAVE,
        format!("error saving actor transaction state: {why}"),
    )
}

/// 403 `ERR_ACTOR_TYPE_RESERVED`: the workflow runtime's own actor types (`dapr.internal.…`)
/// are not for the actor API.
pub fn type_reserved(actor_type: &str) -> ApiError {
    legacy(
        StatusCode::FORBIDDEN,
        tonic::Code::PermissionDenied,
        code::TYPE_RESERVED,
        format!(
            "actor type {} is reserved for the Dapr workflow runtime; direct actor API access \
             is not permitted",
            crate::go::quote::quote(actor_type)
        ),
    )
}

/// 403 `ERR_ACTOR_REMINDER_NON_HOSTED`.
pub fn reminder_non_hosted() -> ApiError {
    legacy(
        StatusCode::FORBIDDEN,
        tonic::Code::PermissionDenied,
        code::REMINDER_NON_HOSTED,
        "operations on actor reminders are only possible on hosted actor types".to_owned(),
    )
}

/// 404 `ERR_ACTOR_REMINDER_NOT_FOUND` `actor reminder not found: <name>`.
pub fn reminder_not_found(name: &str) -> ApiError {
    legacy(
        StatusCode::NOT_FOUND,
        tonic::Code::NotFound,
        code::REMINDER_NOT_FOUND,
        format!("actor reminder not found: {name}"),
    )
}

/// gRPC `Unimplemented` `operation type <op> not supported` (daprd's `apierrors.Basic`
/// with `ERR_NOT_SUPPORTED_STATE_OPERATION`): an actor state operation other than `upsert`
/// and `delete`.
pub fn unsupported_state_operation(op: &str) -> ApiError {
    ApiError::Kit {
        code: tonic::Code::Unimplemented,
        http: StatusCode::INTERNAL_SERVER_ERROR,
        reason: "ERR_NOT_SUPPORTED_STATE_OPERATION".to_owned(),
        message: format!("operation type {op} not supported"),
        metadata: Default::default(),
    }
}

/// 400 `ERR_BAD_REQUEST` `invalid request: <detail>`.
pub fn bad_request(detail: impl std::fmt::Display) -> ApiError {
    legacy(
        StatusCode::BAD_REQUEST,
        tonic::Code::InvalidArgument,
        code::BAD_REQUEST,
        format!("invalid request: {detail}"),
    )
}

/// gRPC `InvalidArgument` with `message` and no error details (daprd's `status.Errorf` on
/// a bad actor type or id of `InvokeActor`); 400 over HTTP.
pub fn invalid_argument(message: String) -> ApiError {
    legacy(
        StatusCode::BAD_REQUEST,
        tonic::Code::InvalidArgument,
        code::BAD_REQUEST,
        message,
    )
}

/// Which reminder operation failed: each has its own code and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReminderOp {
    /// Register.
    Create,
    /// Read (one or a list).
    Get,
    /// Delete (one or many).
    Delete,
}

/// daprd's error for a failed reminder operation on `name`: not hosted → 403, the Scheduler's
/// AlreadyExists on create → 409, anything else → 500 with the operation's code and the
/// cause (`rpc error: code = … desc = …` for a Scheduler error).
pub fn reminder(op: ReminderOp, name: &str, err: &ActorError) -> ApiError {
    if let ActorError::NotHosted(_) = err {
        return reminder_non_hosted();
    }
    if let ActorError::Reminder(ReminderError::Scheduler(e)) = err
        && op == ReminderOp::Create
        && e.code == tonic::Code::AlreadyExists
    {
        return legacy(
            StatusCode::CONFLICT,
            tonic::Code::AlreadyExists,
            code::REMINDER_ALREADY_EXISTS,
            format!("actor reminder already exists: {name}"),
        );
    }
    let (error_code, verb) = match op {
        ReminderOp::Create => (code::REMINDER_CREATE, "creating"),
        ReminderOp::Get => (code::REMINDER_GET, "getting"),
        ReminderOp::Delete => (code::REMINDER_DELETE, "deleting"),
    };
    // daprd's reminder Get hands the Scheduler's error through its jobs API error first
    // ("failed to get job due to: …", an Internal api error), then wraps that.
    let cause = match (op, err) {
        (ReminderOp::Get, ActorError::Reminder(_)) => {
            format!("api error: code = Internal desc = failed to get job due to: {err}")
        }
        _ => err.to_string(),
    };
    legacy(
        StatusCode::INTERNAL_SERVER_ERROR,
        tonic::Code::Internal,
        error_code,
        format!("error {verb} actor reminder: {cause}"),
    )
}

/// 500 `ERR_ACTOR_TIMER_CREATE` `error creating actor timer: <cause>`.
pub fn timer_create(err: &ActorError) -> ApiError {
    legacy(
        StatusCode::INTERNAL_SERVER_ERROR,
        tonic::Code::Internal,
        code::TIMER_CREATE,
        format!("error creating actor timer: {err}"),
    )
}

/// A status from the sidecar hosting the actor, passed on to a gRPC caller as it is.
pub fn remote_status(code: tonic::Code, message: String) -> ApiError {
    legacy(
        StatusCode::INTERNAL_SERVER_ERROR,
        code,
        code::INVOKE_METHOD,
        message,
    )
}

/// 500 `ERR_ACTOR_INVOKE_METHOD` `error invoke actor method: <cause>`.
pub fn invoke(err: &ActorError) -> ApiError {
    legacy(
        StatusCode::INTERNAL_SERVER_ERROR,
        tonic::Code::Internal,
        code::INVOKE_METHOD,
        format!("error invoke actor method: {err}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seam;

    #[test]
    fn reminder_errors_follow_daprd() {
        let exists = ActorError::Reminder(ReminderError::Scheduler(seam::Error::new(
            tonic::Code::AlreadyExists,
            "job already exists: 'x'",
        )));
        let e = reminder(ReminderOp::Create, "r1", &exists);
        assert_eq!(e.http_status(), StatusCode::CONFLICT);
        assert_eq!(e.to_string(), "actor reminder already exists: r1");
        let e = reminder(ReminderOp::Delete, "r1", &exists);
        assert_eq!(e.http_status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            e.to_string(),
            "error deleting actor reminder: rpc error: code = AlreadyExists desc = job already exists: 'x'"
        );
        // daprd 1.18.2, seen by e2e/dapr/differential.sh: Get wraps the Scheduler's error twice.
        let bad = ActorError::Reminder(ReminderError::Scheduler(seam::Error::new(
            tonic::Code::Unknown,
            "job name is invalid \"x\": must not contain control characters",
        )));
        assert_eq!(
            reminder(ReminderOp::Get, "r1", &bad).to_string(),
            "error getting actor reminder: api error: code = Internal desc = failed to get job \
             due to: rpc error: code = Unknown desc = job name is invalid \"x\": must not \
             contain control characters"
        );
        let e = reminder(ReminderOp::Get, "r1", &ActorError::NotHosted("T".into()));
        assert_eq!(e.http_status(), StatusCode::FORBIDDEN);
        let (_, body) = e.http_body();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"errorCode":"ERR_ACTOR_REMINDER_NON_HOSTED","message":"operations on actor reminders are only possible on hosted actor types"}"#
        );
    }
}
