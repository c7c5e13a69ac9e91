//! The execution context an app is told on every delivery: jobsd's `Jobsd-*` HTTP headers
//! and `jobsd-*` gRPC metadata (README "Steer your jobs"). An app that ignores them sees
//! Dapr's exact request; they are extra headers, never a change to Dapr's body or path.

use chrono::{DateTime, SecondsFormat, Utc};

use super::Trigger;

/// Header (lower case, as HTTP/2 and gRPC metadata want it) carrying the execution id.
pub const EXECUTION_ID: &str = "jobsd-execution-id";
/// Header carrying the attempt of the execution, from 1.
pub const ATTEMPT: &str = "jobsd-attempt";
/// Header carrying the nominal time of the execution, RFC 3339 in UTC.
pub const SCHEDULED_TIME: &str = "jobsd-scheduled-time";
/// Header saying why the call happens: `schedule`, `manual`, `backfill` or `retry`.
pub const TRIGGER: &str = "jobsd-trigger";

/// Why an execution runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TriggerKind {
    /// A tick of the job's schedule (every Dapr trigger).
    #[default]
    Schedule,
    /// Run now by hand (`POST /jobsd/v1/jobs/{name}/trigger`).
    Manual,
    /// A past tick run again by a backfill (`POST /jobsd/v1/jobs/{name}/backfill`).
    Backfill,
}

impl TriggerKind {
    /// The name used in headers, run records and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Schedule => "schedule",
            TriggerKind::Manual => "manual",
            TriggerKind::Backfill => "backfill",
        }
    }

    /// The kind a name stands for (`as_str`'s inverse; `""` is a scheduled tick).
    pub fn parse(s: &str) -> Option<TriggerKind> {
        match s {
            "" | "schedule" => Some(TriggerKind::Schedule),
            "manual" => Some(TriggerKind::Manual),
            "backfill" => Some(TriggerKind::Backfill),
            _ => None,
        }
    }
}

/// The `Jobsd-Trigger` value of attempt `attempt` of an execution of `kind`: every attempt
/// after the first is a `retry`, whatever started the execution.
pub fn trigger_value(kind: TriggerKind, attempt: u32) -> &'static str {
    if attempt > 1 { "retry" } else { kind.as_str() }
}

/// The context headers of `trigger`, names in lower case. The attempt and the nominal time
/// are left out when the trigger does not know them (one received from a Dapr Scheduler,
/// whose wire carries neither).
pub fn headers(trigger: &Trigger) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(4);
    out.push((EXECUTION_ID, trigger.execution_id.to_string()));
    if let Some(tick) = trigger.tick {
        out.push((ATTEMPT, trigger.attempt.to_string()));
        out.push((SCHEDULED_TIME, rfc3339(tick)));
    }
    out.push((
        TRIGGER,
        trigger_value(trigger.kind, trigger.attempt).to_owned(),
    ));
    out
}

/// `t` as the header shows it: RFC 3339 in UTC, `Z`, with as many fraction digits as needed.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::TimeZone;

    use super::*;
    use crate::trigger::ExecutionId;

    fn trigger(tick: Option<DateTime<Utc>>, attempt: u32, kind: TriggerKind) -> Trigger {
        let at = Utc.with_ymd_and_hms(2026, 3, 8, 7, 0, 0).unwrap();
        Trigger {
            key: Arc::from("app||ns||a||j"),
            name: Arc::from("j"),
            data: None,
            metadata: Arc::default(),
            scheduled_at: at,
            tick,
            kind,
            execution_id: ExecutionId::for_tick("app||ns||a||j", at),
            attempt,
            created_by: None,
        }
    }

    #[test]
    fn headers_name_the_execution_and_say_why() {
        let tick = Utc.with_ymd_and_hms(2026, 3, 8, 7, 0, 0).unwrap();
        let h = headers(&trigger(Some(tick), 1, TriggerKind::Schedule));
        let id = ExecutionId::for_tick("app||ns||a||j", tick).to_string();
        assert_eq!(
            h,
            vec![
                (EXECUTION_ID, id.clone()),
                (ATTEMPT, "1".into()),
                (SCHEDULED_TIME, "2026-03-08T07:00:00Z".into()),
                (TRIGGER, "schedule".into()),
            ]
        );
        let retry = headers(&trigger(Some(tick), 3, TriggerKind::Manual));
        assert_eq!(retry[1], (ATTEMPT, "3".into()));
        assert_eq!(retry[3], (TRIGGER, "retry".into()));
        assert_eq!(
            headers(&trigger(Some(tick), 1, TriggerKind::Backfill))[3].1,
            "backfill"
        );
        // From a Dapr Scheduler: no tick, no attempt.
        let bare = headers(&trigger(None, 1, TriggerKind::Schedule));
        assert_eq!(bare, vec![(EXECUTION_ID, id), (TRIGGER, "schedule".into())]);
    }

    #[test]
    fn fractions_show_only_when_there_are_some() {
        let t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 1).unwrap();
        assert_eq!(rfc3339(t), "2026-01-01T00:00:01Z");
        let t = t + chrono::TimeDelta::milliseconds(250);
        assert_eq!(rfc3339(t), "2026-01-01T00:00:01.250Z");
    }

    #[test]
    fn kinds_round_trip() {
        for k in [
            TriggerKind::Schedule,
            TriggerKind::Manual,
            TriggerKind::Backfill,
        ] {
            assert_eq!(TriggerKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(TriggerKind::parse(""), Some(TriggerKind::Schedule));
        assert_eq!(TriggerKind::parse("retry"), None);
    }
}
