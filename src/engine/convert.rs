//! Between the Scheduler's wire messages and the pure `schedule` types, and the composed keys
//! jobs are stored under.

use chrono::{DateTime, Utc};
use prost_types::Timestamp;

use crate::proto::{dapr_scheduler as sv1, jobsd_store as store};
use crate::schedule::{self, Begin, JobSpec, policy_messages};

pub use crate::schedule::policy_messages::{
    default_failure_policy, duration_from_proto, from_proto_policy, to_proto_policy,
};

/// Validates `job` with Dapr's rules (see [`schedule::validate`]) and gives its plan. The
/// job's strings are lent to the check rather than copied, and are back in place on return.
pub fn validate(
    job: &mut sv1::Job,
    now: DateTime<Utc>,
) -> Result<schedule::Plan, schedule::ValidationError> {
    let spec = JobSpec {
        schedule: job.schedule.take(),
        repeats: job.repeats,
        due_time: job.due_time.take(),
        ttl: job.ttl.take(),
        failure_policy: job.failure_policy.as_ref().map(from_proto_policy),
    };
    let plan = schedule::validate(&spec, now);
    job.schedule = spec.schedule;
    job.due_time = spec.due_time;
    job.ttl = spec.ttl;
    plan
}

/// A protobuf Timestamp of an instant.
pub fn timestamp(t: DateTime<Utc>) -> Timestamp {
    Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// The instant of a protobuf Timestamp (`None` if out of chrono's range).
pub fn instant(t: &Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?)
}

/// The record to store for a validated job.
pub fn stored_job(
    mut job: sv1::Job,
    metadata: sv1::JobMetadata,
    plan: &schedule::Plan,
    generation: u64,
) -> store::StoredJob {
    // A policy of no kind (`{}`, a gRPC JobFailurePolicy with its oneof unset) is no policy
    // to Dapr's Scheduler either: it stores the default for it.
    if job
        .failure_policy
        .as_ref()
        .is_none_or(|p| p.policy.is_none())
    {
        job.failure_policy = Some(default_failure_policy());
    }
    let begin = match plan.begin {
        Begin::Start(t) => store::stored_job::Begin::Start(timestamp(t)),
        Begin::DueTime(t) => store::stored_job::Begin::DueTime(timestamp(t)),
    };
    store::StoredJob {
        job: Some(job),
        metadata: Some(metadata),
        generation,
        begin: Some(begin),
        expiration: plan.expiration.map(timestamp),
        labels: Default::default(),
        traceparent: String::new(),
        policy: None,
        failure_policy: None,
    }
}

/// Why a stored record cannot be turned back into a plan.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// A field the engine wrote is missing or out of range.
    #[error("stored job is incomplete: {0}")]
    Incomplete(&'static str),
    /// The stored schedule no longer parses (it was valid when stored).
    #[error(transparent)]
    Schedule(#[from] schedule::cron::Error),
    /// A stored jobsd policy no longer parses (it was valid when stored).
    #[error("stored policy: {0}")]
    Policy(String),
}

/// When a stored job version fires first (from fresh progress, as after its put), if it can
/// be planned and fires at all.
pub fn first_fire(key: &str, stored: &store::StoredJob) -> Option<chrono::DateTime<chrono::Utc>> {
    plan_of(key, stored)
        .ok()?
        .fire_time(&schedule::Counter::default())
}

/// Rebuilds the plan of the job stored under `key`.
pub fn plan_of(key: &str, stored: &store::StoredJob) -> Result<schedule::Plan, RestoreError> {
    let job = stored.job.as_ref().ok_or(RestoreError::Incomplete("job"))?;
    let begin = match stored.begin.as_ref() {
        Some(store::stored_job::Begin::Start(t)) => {
            Begin::Start(instant(t).ok_or(RestoreError::Incomplete("start"))?)
        }
        Some(store::stored_job::Begin::DueTime(t)) => {
            Begin::DueTime(instant(t).ok_or(RestoreError::Incomplete("due time"))?)
        }
        None => return Err(RestoreError::Incomplete("begin")),
    };
    let expiration = match &stored.expiration {
        Some(t) => Some(instant(t).ok_or(RestoreError::Incomplete("expiration"))?),
        None => None,
    };
    let handling =
        policy_messages::stored_failure_handling(stored).map_err(RestoreError::Policy)?;
    let mut plan = schedule::Plan::restore(
        job.schedule.as_deref(),
        job.repeats,
        begin,
        expiration,
        handling.policy,
    )?;
    plan.set_on_exhausted(handling.on_exhausted);
    let policy = policy_messages::stored_tick_policy(stored).map_err(RestoreError::Policy)?;
    policy_messages::apply_tick_policy(&mut plan, &policy, policy_messages::seed_of(key));
    Ok(plan)
}

/// The counter of a stored record.
pub fn counter_of(stored: &store::StoredCounter) -> schedule::Counter {
    schedule::Counter {
        count: stored.count,
        last_trigger: stored.last_trigger.as_ref().and_then(instant),
        attempts: stored.attempts,
    }
}

/// A fire time as the due index keeps it: milliseconds since the Unix epoch, rounded down
/// (a job read into memory a little early costs nothing; late would fire it late).
pub fn due_ms(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// When a job following `plan` fires first, as the due index keeps it (`None`: never).
pub fn first_due(plan: &schedule::Plan) -> Option<i64> {
    plan.fire_time(&schedule::Counter::default()).map(due_ms)
}

/// The record of a counter.
pub fn stored_counter(counter: &schedule::Counter, generation: u64) -> store::StoredCounter {
    store::StoredCounter {
        generation,
        count: counter.count,
        last_trigger: counter.last_trigger.map(timestamp),
        attempts: counter.attempts,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn stored_job_fills_default_policy_and_restores_the_plan() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let mut job = sv1::Job {
            schedule: Some("@every 1s".into()),
            repeats: Some(3),
            due_time: Some("10s".into()),
            ttl: Some("1m".into()),
            ..Default::default()
        };
        let lent = job.clone();
        let plan = validate(&mut job, now).unwrap();
        assert_eq!(job, lent, "the job is unchanged");
        let stored = stored_job(job, sv1::JobMetadata::default(), &plan, 7);
        assert_eq!(
            stored.job.as_ref().unwrap().failure_policy,
            Some(default_failure_policy())
        );
        let restored = plan_of("k", &stored).unwrap();
        assert_eq!(restored, plan);
        let mut empty = sv1::Job {
            schedule: Some("@every 1s".into()),
            failure_policy: Some(crate::proto::common::JobFailurePolicy { policy: None }),
            ..Default::default()
        };
        let plan_empty = validate(&mut empty, now).unwrap();
        let stored_empty = stored_job(empty, sv1::JobMetadata::default(), &plan_empty, 1);
        assert_eq!(
            stored_empty.job.unwrap().failure_policy,
            Some(default_failure_policy()),
            "a policy of no kind is stored as the default, as Dapr's Scheduler does"
        );
        assert!(
            restored.policy.is_none(),
            "a job without policies keeps none in memory"
        );
    }

    #[test]
    fn counters_round_trip() {
        let c = schedule::Counter {
            count: 4,
            last_trigger: Some(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 1).unwrap()),
            attempts: 2,
        };
        assert_eq!(counter_of(&stored_counter(&c, 9)), c);
    }
}
