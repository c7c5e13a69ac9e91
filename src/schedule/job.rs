//! The shape rules a job must pass before it is stored (go-etcd-cron `Builder.Parse`), and the
//! point-in-time grammar of `dueTime` / `ttl`.

use chrono::{DateTime, TimeDelta, Utc};

use super::plan::{Begin, Plan};
use super::policy::FailurePolicy;
use super::{cron, duration, iso8601, rfc3339};

/// A job as the user described it: the fields of Dapr's `Job` message that decide when it
/// fires, with presence kept (an empty string is not an absent one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobSpec {
    /// Cron spec or `@` descriptor.
    pub schedule: Option<String>,
    /// How many ticks to run at most.
    pub repeats: Option<u32>,
    /// First tick: RFC 3339 instant, Go duration or ISO-8601 duration from now.
    pub due_time: Option<String>,
    /// End of the schedule, relative to the due time when there is one, else to now.
    pub ttl: Option<String>,
    /// `None` gets the Scheduler default, which is then stored.
    pub failure_policy: Option<FailurePolicy>,
}

/// A rule of go-etcd-cron's job builder that the job broke. `Display` is its exact text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rule {
    /// Neither `dueTime` nor `schedule` is present.
    #[error("job must have either a due time or a schedule")]
    NoDueTimeOrSchedule,
    /// `repeats > 1` without a schedule.
    #[error("job must have a schedule to repeat")]
    RepeatsWithoutSchedule,
    /// `repeats` present and zero.
    #[error("defined repeats must be greater than 0")]
    ZeroRepeats,
    /// `ttl` without a schedule.
    #[error("job must have a schedule to have a ttl")]
    TtlWithoutSchedule,
    /// The schedule does not parse.
    #[error(transparent)]
    Schedule(#[from] cron::Error),
    /// `dueTime` is neither RFC 3339, a Go duration nor an ISO-8601 duration.
    #[error("due time format not recognized")]
    DueTimeFormat,
    /// `dueTime` is an ISO-8601 duration with a repetition (`R3/PT1S`).
    #[error("repeats not supported for due time")]
    DueTimeRepeats,
    /// `ttl` does not parse.
    #[error("ttl format not recognized")]
    TtlFormat,
    /// The due time is after the ttl instant.
    #[error("ttl must be greater than due time")]
    TtlBeforeDueTime,
}

/// A job the Scheduler refuses to store: `job failed validation: <rule>`, as Dapr words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job failed validation: {0}")]
pub struct ValidationError(#[from] pub Rule);

/// Checks a job as go-etcd-cron's `Builder.Parse` does, in the same order, and resolves its
/// times against `now`: the result is the [`Plan`] the engine follows and stores.
pub fn validate(spec: &JobSpec, now: DateTime<Utc>) -> Result<Plan, ValidationError> {
    if spec.due_time.is_none() && spec.schedule.is_none() {
        return Err(Rule::NoDueTimeOrSchedule.into());
    }
    if spec.schedule.is_none() && spec.repeats.is_some_and(|r| r > 1) {
        return Err(Rule::RepeatsWithoutSchedule.into());
    }
    if spec.repeats == Some(0) {
        return Err(Rule::ZeroRepeats.into());
    }
    if spec.schedule.is_none() && spec.ttl.is_some() {
        return Err(Rule::TtlWithoutSchedule.into());
    }
    let schedule = spec
        .schedule
        .as_deref()
        .map(cron::parse)
        .transpose()
        .map_err(Rule::from)?;

    let begin = match &spec.due_time {
        Some(due) => Begin::DueTime(point_in_time(due, now)?),
        None => Begin::Start(now),
    };

    let expiration = match &spec.ttl {
        Some(ttl) => {
            let base = match begin {
                Begin::DueTime(due) => due,
                Begin::Start(_) => now,
            };
            let expiration = point_in_time(ttl, base).map_err(|_| Rule::TtlFormat)?;
            if let Begin::DueTime(due) = begin
                && due > expiration
            {
                return Err(Rule::TtlBeforeDueTime.into());
            }
            Some(expiration)
        }
        None => None,
    };

    Ok(Plan {
        schedule,
        repeats: spec.repeats,
        begin,
        expiration,
        failure_policy: spec.failure_policy.clone().unwrap_or_default(),
        seed: 0,
        dst: super::cron::DstPolicy::DAPR,
        offset: chrono::TimeDelta::zero(),
        timeout: None,
        skip_while_target_down: false,
        catch_up: super::CatchUp::All,
        exhausted: None,
    })
}

/// Resolves a `dueTime`/`ttl` string against `base` as go-etcd-cron's `parsePointInTime`
/// does: RFC 3339 first, then a Go duration from `base`, then an ISO-8601 duration (without
/// repetitions) from `base`, with Go's `AddDate` month arithmetic.
pub fn point_in_time(s: &str, base: DateTime<Utc>) -> Result<DateTime<Utc>, Rule> {
    if let Ok(t) = rfc3339::parse(s) {
        return Ok(t);
    }
    if let Ok(nanos) = duration::parse(s) {
        return base
            .checked_add_signed(TimeDelta::nanoseconds(nanos))
            .ok_or(Rule::DueTimeFormat);
    }
    let iso = iso8601::parse(s).map_err(|_| Rule::DueTimeFormat)?;
    if iso.repetitions > 0 {
        return Err(Rule::DueTimeRepeats);
    }
    iso.add_to(base).ok_or(Rule::DueTimeFormat)
}

#[cfg(test)]
mod tests;
