//! daprd's actor API over the single-host [`ActorRuntime`](crate::actors::ActorRuntime):
//! reminders, timers and method calls, over HTTP ([`http`]) and gRPC ([`grpc`]), with
//! daprd's bodies and errors ([`errors`]). The operations below are shared by both
//! transports; actor state is kept by the scheduler ([`state`]).

pub mod body;
pub mod errors;
pub mod grpc;
pub mod http;
pub mod names;
pub mod state;

use crate::actors::reminders::data_to_json;
use crate::actors::{
    ActorError, ActorRef, MethodAnswer, MethodCall, NewReminder, NewTimer, Reminder,
};
use crate::api::{ApiError, ApiState};
use crate::go::json::write_str;
use crate::schedule::rfc3339;
use chrono::SecondsFormat;

use errors::ReminderOp;

impl ApiState {
    /// Registers a reminder.
    pub async fn register_reminder(&self, reminder: NewReminder) -> Result<(), ApiError> {
        if reminder.name.is_empty() {
            return Err(errors::bad_request("reminder name cannot be empty"));
        }
        names::validate(&reminder.name).map_err(errors::bad_request)?;
        let name = reminder.name.clone();
        self.actors
            .create_reminder(reminder)
            .await
            .map_err(|e| errors::reminder(ReminderOp::Create, &name, &e))
    }

    /// daprd's answer to a reminder call whose actor type, id or name is not UTF-8 (a
    /// `%FF` in the path): Go keeps the bytes, makes every check before its Scheduler call
    /// (`period` is `Some` for a create), and then grpc-go refuses to marshal the string.
    pub async fn reminder_not_utf8(
        &self,
        op: ReminderOp,
        actor_type: &str,
        name: &str,
        period: Option<Option<&str>>,
    ) -> ApiError {
        if op == ReminderOp::Create {
            if name.is_empty() {
                return errors::bad_request("reminder name cannot be empty");
            }
            if let Err(e) = names::validate(name) {
                return errors::bad_request(e);
            }
        }
        let err = match self.actors.check_reminder_call(actor_type, period).await {
            Err(e) => e,
            Ok(()) => ActorError::Reminder(crate::actors::ReminderError::Scheduler(
                crate::api::http_request::invalid_utf8_marshal_error(),
            )),
        };
        errors::reminder(op, name, &err)
    }

    /// A reminder; 404 `ERR_ACTOR_REMINDER_NOT_FOUND` when there is none.
    pub async fn get_reminder(&self, actor: &ActorRef, name: &str) -> Result<Reminder, ApiError> {
        match self.actors.get_reminder(actor, name).await {
            Ok(Some(reminder)) => Ok(reminder),
            Ok(None) => Err(errors::reminder_not_found(name)),
            Err(e) => Err(errors::reminder(ReminderOp::Get, name, &e)),
        }
    }

    /// Deletes a reminder (a missing one is fine).
    pub async fn unregister_reminder(&self, actor: &ActorRef, name: &str) -> Result<(), ApiError> {
        self.actors
            .delete_reminder(actor, name)
            .await
            .map_err(|e| errors::reminder(ReminderOp::Delete, name, &e))
    }

    /// The reminders of a type, or of one actor of it.
    pub async fn list_reminders(
        &self,
        actor_type: &str,
        actor_id: Option<&str>,
    ) -> Result<Vec<Reminder>, ApiError> {
        self.actors
            .list_reminders(actor_type, actor_id)
            .await
            .map_err(|e| errors::reminder(ReminderOp::Get, "", &e))
    }

    /// Deletes the reminders of a type, or of one actor of it.
    pub async fn unregister_reminders(
        &self,
        actor_type: &str,
        actor_id: Option<&str>,
    ) -> Result<(), ApiError> {
        self.actors
            .delete_reminders(actor_type, actor_id)
            .await
            .map_err(|e| errors::reminder(ReminderOp::Delete, "", &e))
    }

    /// Registers (or replaces) a timer.
    pub fn register_timer(&self, timer: NewTimer) -> Result<(), ApiError> {
        if timer.name.is_empty() {
            return Err(errors::bad_request("timer name cannot be empty"));
        }
        names::validate(&timer.name).map_err(errors::bad_request)?;
        self.actors
            .create_timer(timer)
            .map_err(|e| errors::timer_create(&e))
    }

    /// Deletes a timer; always succeeds, as in daprd.
    pub fn unregister_timer(&self, actor: &ActorRef, name: &str) {
        self.actors.delete_timer(actor, name);
    }

    /// Calls an actor method: the app's answer, or `ERR_ACTOR_INVOKE_METHOD`.
    pub async fn invoke_actor(&self, call: MethodCall) -> Result<MethodAnswer, ApiError> {
        self.actors
            .invoke(call)
            .await
            .map_err(|e: ActorError| errors::invoke(&e))
    }

    /// The same for gRPC callers: the status of the sidecar hosting the actor is passed on
    /// as it is, as daprd's gRPC API does.
    pub async fn invoke_actor_grpc(&self, call: MethodCall) -> Result<MethodAnswer, ApiError> {
        self.actors.invoke(call).await.map_err(|e| match e {
            ActorError::Remote { code, message } => errors::remote_status(code, message),
            e => errors::invoke(&e),
        })
    }
}

/// daprd's GET reminder body (`json.NewEncoder(w).Encode`, so it ends with a newline): keys
/// in this order, each left out when empty; `period` is the stored schedule; `ttl` only when
/// it is an RFC 3339 time (daprd drops a duration ttl it cannot parse as one).
pub fn reminder_json(reminder: &Reminder) -> String {
    let mut out = String::with_capacity(128);
    out.push('{');
    let mut sep = "";
    if !reminder.actor.actor_id.is_empty() {
        push_key(&mut out, &mut sep, "actorID");
        write_str(&mut out, &reminder.actor.actor_id);
    }
    if !reminder.actor.actor_type.is_empty() {
        push_key(&mut out, &mut sep, "actorType");
        write_str(&mut out, &reminder.actor.actor_type);
    }
    if let Some(data) = &reminder.data {
        push_key(&mut out, &mut sep, "data");
        out.push_str(&String::from_utf8_lossy(&data_to_json(data)));
    }
    if let Some(due) = reminder.due_time.as_deref().filter(|s| !s.is_empty()) {
        push_key(&mut out, &mut sep, "dueTime");
        write_str(&mut out, due);
    }
    if let Some(period) = reminder.schedule.as_deref().filter(|s| !s.is_empty()) {
        push_key(&mut out, &mut sep, "period");
        write_str(&mut out, period);
    }
    if let Some(ttl) = reminder.ttl.as_deref().and_then(|t| rfc3339::parse(t).ok()) {
        push_key(&mut out, &mut sep, "ttl");
        write_str(&mut out, &ttl.to_rfc3339_opts(SecondsFormat::AutoSi, true));
    }
    out.push_str("}\n");
    out
}

/// `,"key":` (no comma before the first key).
fn push_key(out: &mut String, sep: &mut &str, key: &str) {
    out.push_str(sep);
    out.push('"');
    out.push_str(key);
    out.push_str("\":");
    *sep = ",";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::reminders::data_from_json;

    #[test]
    fn reminder_json_is_daprds() {
        let r = Reminder {
            actor: ActorRef::new("DemoActor", "1"),
            name: "r1".into(),
            due_time: Some("0h0m2s0ms0μs".into()),
            schedule: Some("@every 10s".into()),
            repeats: None,
            ttl: Some("30s".into()),
            data: data_from_json(br#""aGVsbG8=""#),
            failure_policy: None,
        };
        assert_eq!(
            reminder_json(&r),
            "{\"actorID\":\"1\",\"actorType\":\"DemoActor\",\"data\":\"aGVsbG8=\",\
             \"dueTime\":\"0h0m2s0ms0μs\",\"period\":\"@every 10s\"}\n"
        );
        let r = Reminder {
            ttl: Some("2030-01-02T03:04:05Z".into()),
            data: None,
            ..r
        };
        assert!(reminder_json(&r).ends_with(",\"ttl\":\"2030-01-02T03:04:05Z\"}\n"));
    }
}
