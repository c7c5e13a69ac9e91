//! What daprd sends the app for an actor: the paths and JSON bodies of method, reminder,
//! timer and deactivation calls (`pkg/actors/targets/app`).

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, StatusCode};

use super::ActorRef;
use super::reminders::data_to_json;
use crate::go::json::write_str;
use crate::go::url::escaped_path;

/// The header with which an app cancels a reminder from its answer (Go's canonical form
/// of `X-DaprReminderCancel`).
pub const REMINDER_CANCEL_HEADER: &str = "x-daprremindercancel";

/// `/actors/<type>/<id>` escaped as Go's `URL.EscapedPath` would.
pub fn actor_path(actor: &ActorRef) -> String {
    escaped_path(&format!("/actors/{}/{}", actor.actor_type, actor.actor_id))
}

/// `/actors/<type>/<id>/method/<method>`, escaped.
pub fn method_path(actor: &ActorRef, method: &str) -> String {
    escaped_path(&format!(
        "/actors/{}/{}/method/{method}",
        actor.actor_type, actor.actor_id
    ))
}

/// Headers of a JSON call (reminders and timers).
pub fn json_headers() -> HeaderMap {
    let mut h = HeaderMap::with_capacity(1);
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h
}

/// The body of `PUT …/method/remind/<name>`: `{"data":…,"dueTime":"","period":""}`.
/// daprd sends empty `dueTime` and `period` for reminders kept by the Scheduler (the SDKs
/// need the keys, not the values); `data` is left out when there is none.
pub fn remind_body(data: Option<&prost_types::Any>) -> Bytes {
    let mut out = String::with_capacity(64);
    out.push('{');
    if let Some(data) = data {
        out.push_str("\"data\":");
        out.push_str(&String::from_utf8_lossy(&data_to_json(data)));
        out.push(',');
    }
    out.push_str("\"dueTime\":\"\",\"period\":\"\"}");
    Bytes::from(out)
}

/// The body of `PUT …/method/timer/<name>`:
/// `{"data":…,"callback":"…","dueTime":"…","period":"…"}` with the strings as registered.
pub fn timer_body(data: Option<&[u8]>, callback: &str, due_time: &str, period: &str) -> Bytes {
    let mut out = String::with_capacity(96);
    out.push('{');
    if let Some(raw) = data {
        out.push_str("\"data\":");
        out.push_str(&String::from_utf8_lossy(raw));
        out.push(',');
    }
    out.push_str("\"callback\":");
    write_str(&mut out, callback);
    out.push_str(",\"dueTime\":");
    write_str(&mut out, due_time);
    out.push_str(",\"period\":");
    write_str(&mut out, period);
    out.push('}');
    Bytes::from(out)
}

/// Whether a reminder answer cancels the reminder: 200 with `X-DaprReminderCancel` set to a
/// truthy value (dapr/kit `IsTruthy`).
pub fn cancels(status: StatusCode, headers: &HeaderMap) -> bool {
    status == StatusCode::OK
        && headers
            .get(REMINDER_CANCEL_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "y" | "yes" | "true" | "t" | "on" | "1"
                )
            })
}

/// daprd's error when no host has the actor's type.
pub(super) fn not_found(actor: &ActorRef) -> super::ActorError {
    super::ActorError::Call(format!(
        "failed to lookup actor: did not find address for actor {}/{}",
        actor.actor_type, actor.actor_id
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::reminders::data_from_json;

    #[test]
    fn bodies_are_daprds() {
        let data = data_from_json(br#""aGVsbG8=""#);
        assert_eq!(
            remind_body(data.as_ref()),
            Bytes::from_static(br#"{"data":"aGVsbG8=","dueTime":"","period":""}"#)
        );
        assert_eq!(
            remind_body(None),
            Bytes::from_static(br#"{"dueTime":"","period":""}"#)
        );
        assert_eq!(
            timer_body(Some(br#"{"k":1}"#), "on_timer", "0h0m1s0ms0μs", "5s"),
            Bytes::from(
                r#"{"data":{"k":1},"callback":"on_timer","dueTime":"0h0m1s0ms0μs","period":"5s"}"#
            )
        );
    }

    #[test]
    fn paths_are_escaped_like_go() {
        let actor = ActorRef::new("Demo Actor", "a|b");
        assert_eq!(actor_path(&actor), "/actors/Demo%20Actor/a%7Cb");
        assert_eq!(
            method_path(&actor, "remind/r1"),
            "/actors/Demo%20Actor/a%7Cb/method/remind/r1"
        );
    }

    #[test]
    fn cancel_needs_a_truthy_header_on_a_200() {
        let mut h = HeaderMap::new();
        assert!(!cancels(StatusCode::OK, &h));
        h.insert("X-DaprReminderCancel", HeaderValue::from_static("True"));
        assert!(cancels(StatusCode::OK, &h));
        assert!(!cancels(StatusCode::INTERNAL_SERVER_ERROR, &h));
        h.insert("X-DaprReminderCancel", HeaderValue::from_static("false"));
        assert!(!cancels(StatusCode::OK, &h));
    }
}
