//! Job policies between their messages and the pure types the plan and the runner act on:
//! Dapr's failure policy (`common.v1.JobFailurePolicy`), and jobsd's (`"policy"` and the
//! extended `"failurePolicy"` of `POST /jobsd/v1/jobs`, `jobsd.v1` messages stored beside the
//! job). Errors name the field.

use chrono::TimeDelta;

use crate::proto::jobsd_api as jv1;
use crate::proto::{common, jobsd_store as store};
use crate::schedule::job_policy::{TickPolicyText, positive_duration};
use crate::schedule::policy::Exponential;
use crate::schedule::{self, FailurePolicy, OnExhausted, TickPolicy};

/// The Scheduler's default failure policy as stored with jobs that have none.
pub fn default_failure_policy() -> common::JobFailurePolicy {
    to_proto_policy(FailurePolicy::default())
}

/// The proto form of one of Dapr's failure policies; jobsd's own kinds have none (they are
/// stored beside the job) and are given as Dapr's `Drop`.
pub fn to_proto_policy(policy: FailurePolicy) -> common::JobFailurePolicy {
    use common::job_failure_policy::Policy;
    let policy = match policy {
        FailurePolicy::Cron { .. }
        | FailurePolicy::Exponential(_)
        | FailurePolicy::Delays { .. } => Policy::Drop(common::JobFailurePolicyDrop {}),
        FailurePolicy::Drop => Policy::Drop(common::JobFailurePolicyDrop {}),
        FailurePolicy::Constant {
            interval,
            max_retries,
        } => Policy::Constant(common::JobFailurePolicyConstant {
            interval: Some(prost_types::Duration {
                seconds: interval.num_seconds(),
                nanos: interval.subsec_nanos(),
            }),
            max_retries,
        }),
    };
    common::JobFailurePolicy {
        policy: Some(policy),
    }
}

/// How a stored policy behaves. A policy message with no variant set behaves like `Drop`, as
/// go-etcd-cron's `policyTryAgain` does for an unknown policy.
pub fn from_proto_policy(policy: &common::JobFailurePolicy) -> FailurePolicy {
    use common::job_failure_policy::Policy;
    match &policy.policy {
        Some(Policy::Constant(c)) => FailurePolicy::Constant {
            interval: c.interval.map(duration_from_proto).unwrap_or_default(),
            max_retries: c.max_retries,
        },
        Some(Policy::Drop(_)) | None => FailurePolicy::Drop,
    }
}

/// A protobuf Duration as a `TimeDelta`, saturating at the representable range.
pub fn duration_from_proto(d: prost_types::Duration) -> TimeDelta {
    TimeDelta::try_seconds(d.seconds)
        .and_then(|s| s.checked_add(&TimeDelta::nanoseconds(i64::from(d.nanos))))
        .unwrap_or(if d.seconds < 0 {
            TimeDelta::MIN
        } else {
            TimeDelta::MAX
        })
}

/// A job's failure handling when it is given on jobsd's surface.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureHandling {
    /// When retries are due.
    pub policy: FailurePolicy,
    /// What a tick whose retries are spent leads to.
    pub on_exhausted: OnExhausted,
}

/// The tick policy of a `jobsd.v1.JobPolicy` message; errors name the field.
pub fn tick_policy(p: &jv1::JobPolicy) -> Result<TickPolicy, String> {
    TickPolicy::parse(&TickPolicyText {
        catch_up: &p.catch_up,
        catch_up_window: &p.catch_up_window,
        while_target_down: &p.while_target_down,
        overlap: &p.overlap,
        max_concurrent: p.max_concurrent,
        timeout: &p.timeout,
        jitter: &p.jitter,
        lease: &p.lease,
        dst_gap: p.dst.as_ref().map_or("", |d| d.gap.as_str()),
        dst_repeat: p.dst.as_ref().map_or("", |d| d.repeat.as_str()),
    })
}

/// Longest concurrency key (bytes).
pub const MAX_CONCURRENCY_KEY: usize = 256;

/// `policy.concurrencyKey`: at most [`MAX_CONCURRENCY_KEY`] bytes, not with `overlap: allow`
/// (whose executions would each need a slot of their own; refused rather than half done).
pub fn check_concurrency_key(p: &jv1::JobPolicy, tick: &TickPolicy) -> Result<(), String> {
    let key = p.concurrency_key.as_str();
    if key.len() > MAX_CONCURRENCY_KEY {
        return Err(format!(
            "policy.concurrencyKey: {} bytes, more than {MAX_CONCURRENCY_KEY}",
            key.len()
        ));
    }
    if !key.is_empty() && matches!(tick.overlap, schedule::Overlap::Allow(_)) {
        return Err(
            "policy.concurrencyKey: cannot be combined with overlap \"allow\" (use serial, \
             skip or bufferOne)"
                .to_owned(),
        );
    }
    Ok(())
}

/// Values that are each fine alone but not together; the error names the field.
pub fn check_together(tick: &TickPolicy, handling: Option<&FailureHandling>) -> Result<(), String> {
    let exhausted = handling.map_or(&OnExhausted::Drop, |h| &h.on_exhausted);
    if matches!(tick.overlap, schedule::Overlap::Allow(_)) && *exhausted != OnExhausted::Drop {
        // Several executions out at once would each pause or dead-letter on their own; what
        // that should mean is not settled, so it is refused rather than half done.
        return Err(
            "failurePolicy.onExhausted: only \"drop\" with policy.overlap \"allow\"".to_owned(),
        );
    }
    Ok(())
}

/// The failure handling of a `jobsd.v1.FailurePolicy` message.
pub fn failure_handling(p: &jv1::FailurePolicy) -> Result<FailureHandling, String> {
    use jv1::failure_policy::Kind;
    let policy = match &p.kind {
        None => FailurePolicy::default(),
        Some(Kind::Drop(_)) => FailurePolicy::Drop,
        Some(Kind::Constant(c)) => FailurePolicy::Constant {
            interval: c.interval.map(duration_from_proto).unwrap_or_default(),
            max_retries: c.max_retries,
        },
        Some(Kind::Cron(c)) => {
            if c.schedule.is_empty() {
                return Err("failurePolicy.cron.schedule: required".to_owned());
            }
            let parsed = schedule::cron::parse(&c.schedule)
                .map_err(|e| format!("failurePolicy.cron.schedule: {:?}: {e}", c.schedule))?;
            FailurePolicy::Cron {
                schedule: Box::new(parsed),
                max_retries: c.max_retries,
            }
        }
        Some(Kind::Exponential(e)) => {
            let initial = positive_duration(
                "failurePolicy.exponential.initialInterval",
                &e.initial_interval,
            )?
            .ok_or("failurePolicy.exponential.initialInterval: required")?;
            let multiplier = if e.multiplier == 0.0 {
                2.0
            } else {
                e.multiplier
            };
            if !multiplier.is_finite() || multiplier < 1.0 {
                return Err(format!(
                    "failurePolicy.exponential.multiplier: {} must be 1 or more",
                    e.multiplier
                ));
            }
            if !(0.0..=1.0).contains(&e.jitter) {
                return Err(format!(
                    "failurePolicy.exponential.jitter: {} must be between 0 and 1",
                    e.jitter
                ));
            }
            let max_interval =
                positive_duration("failurePolicy.exponential.maxInterval", &e.max_interval)?;
            if max_interval.is_some_and(|m| m < initial) {
                return Err(
                    "failurePolicy.exponential.maxInterval: must not be less than initialInterval"
                        .to_owned(),
                );
            }
            FailurePolicy::Exponential(Box::new(Exponential {
                initial,
                multiplier,
                max_interval,
                jitter: e.jitter,
                max_retries: e.max_retries,
                max_elapsed: positive_duration(
                    "failurePolicy.exponential.maxElapsed",
                    &e.max_elapsed,
                )?,
            }))
        }
        Some(Kind::Delays(d)) => {
            if d.delays.is_empty() {
                return Err(
                    "failurePolicy.delays.delays: at least one delay is required".to_owned(),
                );
            }
            let delays = d
                .delays
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    let field = format!("failurePolicy.delays.delays[{i}]");
                    let nanos = schedule::duration::parse(text)
                        .map_err(|e| format!("{field}: {text:?} is not a duration: {e}"))?;
                    if nanos < 0 {
                        return Err(format!("{field}: {text:?} must not be negative"));
                    }
                    Ok(TimeDelta::nanoseconds(nanos))
                })
                .collect::<Result<Vec<_>, String>>()?;
            FailurePolicy::Delays {
                delays,
                repeat_last: d.repeat_last,
                max_retries: d.max_retries,
            }
        }
    };
    let on_exhausted = OnExhausted::parse(&p.on_exhausted, &p.dead_letter_job)?;
    Ok(FailureHandling {
        policy,
        on_exhausted,
    })
}

/// Dapr's form of a failure policy given on jobsd's surface, for the Dapr job: its own kind
/// when it is one of Dapr's, else `drop` (Dapr's GET can show no other).
pub fn dapr_failure_policy(p: &jv1::FailurePolicy) -> common::JobFailurePolicy {
    use common::job_failure_policy::Policy;
    use jv1::failure_policy::Kind;
    let policy = match &p.kind {
        Some(Kind::Constant(c)) => Policy::Constant(*c),
        None => return default_failure_policy(),
        _ => Policy::Drop(common::JobFailurePolicyDrop {}),
    };
    common::JobFailurePolicy {
        policy: Some(policy),
    }
}

/// Whether the message says anything Dapr's own failure policy cannot (a jobsd kind or
/// `onExhausted`): then it is stored beside the job.
pub fn needs_storing(p: &jv1::FailurePolicy) -> bool {
    use jv1::failure_policy::Kind;
    matches!(
        p.kind,
        Some(Kind::Cron(_) | Kind::Exponential(_) | Kind::Delays(_))
    ) || !p.on_exhausted.is_empty()
        || !p.dead_letter_job.is_empty()
}

/// The failure handling of a stored job: jobsd's when stored, else from Dapr's policy.
pub fn stored_failure_handling(stored: &store::StoredJob) -> Result<FailureHandling, String> {
    match &stored.failure_policy {
        Some(p) => failure_handling(p),
        None => Ok(FailureHandling {
            policy: stored
                .job
                .as_ref()
                .and_then(|j| j.failure_policy.as_ref())
                .map(from_proto_policy)
                .unwrap_or_default(),
            on_exhausted: OnExhausted::Drop,
        }),
    }
}

/// The tick policy of a stored job (Dapr's behaviour when none is stored).
pub fn stored_tick_policy(stored: &store::StoredJob) -> Result<TickPolicy, String> {
    stored
        .policy
        .as_ref()
        .map_or(Ok(TickPolicy::default()), tick_policy)
}

/// Puts a job's tick policy into its plan, with `seed` (the job's, [`seed_of`]) for its
/// jitter offset and retry jitter. A job with Dapr's behaviour in every setting keeps none.
pub fn apply_tick_policy(plan: &mut schedule::Plan, policy: &TickPolicy, seed: u64) {
    let seeded = matches!(plan.failure_policy, FailurePolicy::Exponential(_));
    if policy.is_default() && !seeded && plan.policy.is_none() {
        return;
    }
    let p = plan.policy_mut();
    p.seed = seed;
    p.dst = policy.dst;
    p.offset = policy.offset(seed);
    p.timeout = policy.timeout;
    p.lease = policy.lease;
    p.while_target_down = policy.while_target_down;
    p.catch_up = policy.catch_up;
    p.overlap = policy.overlap;
}

/// A fixed per-job seed (FNV-1a of the key): the job's jitter and retry jitter.
pub fn seed_of(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_through_proto() {
        for p in [
            FailurePolicy::Drop,
            FailurePolicy::default(),
            FailurePolicy::Constant {
                interval: TimeDelta::milliseconds(1500),
                max_retries: None,
            },
        ] {
            assert_eq!(from_proto_policy(&to_proto_policy(p.clone())), p);
        }
        assert_eq!(
            from_proto_policy(&common::JobFailurePolicy { policy: None }),
            FailurePolicy::Drop
        );
    }
}
