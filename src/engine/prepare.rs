//! A create, checked and resolved into the record to store and the plan to follow, before
//! anything is written: what `schedule_job_with` writes and what a preview shows, from one
//! piece of code so that both give the same answers and the same errors.

use chrono::{DateTime, Utc};

use super::{Error, JobExtras, check_dead_letter, convert};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_store::StoredJob;
use crate::schedule::policy_messages as policies;
use crate::schedule::{Plan, labels};
use crate::trigger::keys;

/// A create, ready to be written.
pub(super) struct Prepared {
    /// Composed key.
    pub key: String,
    /// The record (a fresh generation).
    pub stored: StoredJob,
    /// What the engine follows.
    pub plan: Plan,
    /// Unless `overwrite`: an existing job of that key makes it `AlreadyExists`.
    pub create_only: bool,
}

impl Prepared {
    /// When the job fires first, as the due index keeps it (`None`: never).
    pub fn first_due(&self) -> Option<i64> {
        convert::first_due(&self.plan)
    }
}

/// Checks a create (Scheduler `ScheduleJob` with jobsd's settings) as the engine stores it,
/// resolving its times against `now`.
pub(super) fn prepare(
    req: sv1::ScheduleJobRequest,
    extras: JobExtras,
    now: DateTime<Utc>,
) -> Result<Prepared, Error> {
    let key = keys::job_key(keys::check_metadata(req.metadata.as_ref())?, &req.name)?;
    // Present: checked just above.
    let metadata = req.metadata.unwrap_or_default();
    let mut job = req.job.ok_or(Error::NoJob)?;
    labels::check(&extras.labels).map_err(Error::BadRequest)?;
    let (tick_policy, policy) = match extras.policy {
        Some(p) => {
            let parsed = policies::tick_policy(&p).map_err(Error::BadRequest)?;
            policies::check_concurrency_key(&p, &parsed).map_err(Error::BadRequest)?;
            let kept = (p != crate::proto::jobsd_api::JobPolicy::default()).then_some(p);
            (parsed, kept)
        }
        None => Default::default(),
    };
    let handling = extras
        .failure_policy
        .as_ref()
        .map(policies::failure_handling)
        .transpose()
        .map_err(Error::BadRequest)?;
    policies::check_together(&tick_policy, handling.as_ref()).map_err(Error::BadRequest)?;
    if let Some(given) = &extras.failure_policy {
        job.failure_policy = Some(policies::dapr_failure_policy(given));
    }
    let mut plan = convert::validate(&mut job, now)?;
    if let Some(handling) = handling {
        check_dead_letter(&metadata, &req.name, &handling.on_exhausted)
            .map_err(Error::BadRequest)?;
        plan.failure_policy = handling.policy;
        plan.set_on_exhausted(handling.on_exhausted);
    }
    policies::apply_tick_policy(&mut plan, &tick_policy, policies::seed_of(&key));
    let mut stored = convert::stored_job(job, metadata, &plan, fastrand::u64(..));
    stored.labels = extras.labels.into_iter().collect();
    stored.traceparent = extras.traceparent.unwrap_or_default();
    stored.policy = policy;
    stored.failure_policy = extras.failure_policy.filter(policies::needs_storing);
    Ok(Prepared {
        key,
        stored,
        plan,
        create_only: !req.overwrite,
    })
}
