//! The trigger plan: given a validated job and its counter, when does it fire next, and what
//! does a trigger's result do to the counter. This is go-etcd-cron's `scheduler` (`oneshot`,
//! `repeats`) and `counter` logic, made pure: the engine stores the counter and the clock
//! lives elsewhere.

use chrono::{DateTime, TimeDelta, Utc};

use super::cron::{DstPolicy, Schedule};
use super::policy::FailurePolicy;

mod paused;

pub use paused::Resume;

/// Where a job's clock starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// No due time: the schedule starts at creation and does **not** fire at this instant.
    Start(DateTime<Utc>),
    /// The first tick is exactly at the due time; the schedule continues from there.
    DueTime(DateTime<Utc>),
}

/// A validated job's timing, resolved to instants. Built by [`super::job::validate`] or, for
/// a stored job, by [`Plan::restore`].
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Parsed schedule; `None` for a one-shot job (due time only).
    pub schedule: Option<Schedule>,
    /// Ticks to run at most (a tick counts on success or when given up).
    pub repeats: Option<u32>,
    /// Start of the job's clock.
    pub begin: Begin,
    /// No tick is scheduled strictly after this instant.
    pub expiration: Option<DateTime<Utc>>,
    /// What a failed attempt leads to (the Scheduler default when the user gave none).
    pub failure_policy: FailurePolicy,
    /// jobsd's per-job settings; `None` — Dapr's behaviour in every one — for most jobs, so
    /// that a job without policies pays one pointer, not ~100 bytes, of memory.
    pub policy: Option<Box<PlanPolicy>>,
}

/// jobsd's per-job settings of a plan (`"policy"` and `failurePolicy.onExhausted`); each
/// default is Dapr's behaviour.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanPolicy {
    /// Chooses the job's deterministic jitter (a hash of its key).
    pub seed: u64,
    /// How a `TZ=` schedule treats local times a DST change skips or repeats (Dapr's:
    /// skip and twice, see [`DstPolicy`]).
    pub dst: DstPolicy,
    /// Every attempt fires this much after its time (`policy.jitter`'s per-job offset), but
    /// never at or past the schedule's next tick.
    pub offset: TimeDelta,
    /// An attempt still unanswered this long after it went out fails (`policy.timeout`).
    pub timeout: Option<TimeDelta>,
    /// A plain `202 Accepted` holds the attempt under a lease this long (`policy.lease`).
    pub lease: Option<TimeDelta>,
    /// A tick that finds its target down (`policy.whileTargetDown`).
    pub while_target_down: super::WhileTargetDown,
    /// Missed ticks (`policy.catchUp`).
    pub catch_up: super::CatchUp,
    /// A tick due while an earlier one is in flight (`policy.overlap`).
    pub overlap: super::Overlap,
    /// What a tick whose failure policy is spent leads to (`failurePolicy.onExhausted`).
    pub exhausted: super::OnExhausted,
}

/// Dapr's behaviour in every setting.
static DAPR_POLICY: PlanPolicy = PlanPolicy {
    seed: 0,
    dst: DstPolicy::DAPR,
    offset: TimeDelta::zero(),
    timeout: None,
    lease: None,
    while_target_down: super::WhileTargetDown::Stage,
    catch_up: super::CatchUp::All,
    overlap: super::Overlap::Serial,
    exhausted: super::OnExhausted::Drop,
};

impl Default for PlanPolicy {
    fn default() -> Self {
        DAPR_POLICY.clone()
    }
}

/// Which of the ticks due by some instant a [`Plan::pass_over`] leaves to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Only the latest tick due by this instant (and those after it).
    Latest(DateTime<Utc>),
    /// Ticks at or after this instant.
    From(DateTime<Utc>),
    /// Ticks after this instant.
    After(DateTime<Utc>),
}

/// Progress of a job, persisted after every result (go-etcd-cron's `stored.Counter`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    /// Ticks done: succeeded or given up.
    pub count: u32,
    /// Nominal time of the last finished tick (never the wall-clock time it ran, so the
    /// schedule does not drift).
    pub last_trigger: Option<DateTime<Utc>>,
    /// Failed attempts of the current tick.
    pub attempts: u32,
}

/// What the target answered for one trigger, as the plan needs it. The trigger contract's
/// result (`trigger::TriggerResult`) has a third value, `Undeliverable`, which never reaches
/// the plan (such triggers are staged and leave the counter alone); keeping this two-valued
/// type lets the pure core stay independent of the trigger contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The app acknowledged the trigger (2xx, 404, gRPC OK or NotFound).
    Success,
    /// The app failed it; the failure policy decides.
    Failed,
}

/// The counter after a result, and when to fire next (`None`: the job is finished and is
/// deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Counter to persist.
    pub counter: Counter,
    /// Next fire time, or `None` when the job is done.
    pub next: Option<DateTime<Utc>>,
}

impl Plan {
    /// A plan with every tick policy Dapr's (no jitter, timeout or per-job seed yet).
    pub fn new(
        schedule: Option<Schedule>,
        repeats: Option<u32>,
        begin: Begin,
        expiration: Option<DateTime<Utc>>,
        failure_policy: FailurePolicy,
    ) -> Plan {
        Plan {
            schedule,
            repeats,
            begin,
            expiration,
            failure_policy,
            policy: None,
        }
    }

    /// Rebuilds the plan of a stored job from its stored parts (re-parsing only the schedule).
    pub fn restore(
        schedule: Option<&str>,
        repeats: Option<u32>,
        begin: Begin,
        expiration: Option<DateTime<Utc>>,
        failure_policy: FailurePolicy,
    ) -> Result<Plan, super::cron::Error> {
        Ok(Plan::new(
            schedule.map(super::cron::parse).transpose()?,
            repeats,
            begin,
            expiration,
            failure_policy,
        ))
    }

    /// jobsd's per-job settings (Dapr's behaviour when the job has none).
    pub fn policy(&self) -> &PlanPolicy {
        self.policy.as_deref().unwrap_or(&DAPR_POLICY)
    }

    /// jobsd's per-job settings, to change them (allocated on first use).
    pub fn policy_mut(&mut self) -> &mut PlanPolicy {
        self.policy.get_or_insert_with(Box::default)
    }

    /// What a tick whose failure policy is spent leads to.
    pub fn on_exhausted(&self) -> &super::OnExhausted {
        &self.policy().exhausted
    }

    /// Sets what a tick whose failure policy is spent leads to.
    pub fn set_on_exhausted(&mut self, on_exhausted: super::OnExhausted) {
        if on_exhausted != super::OnExhausted::Drop || self.policy.is_some() {
            self.policy_mut().exhausted = on_exhausted;
        }
    }

    /// Nominal time of the next tick for this counter, or `None` when the job is finished:
    /// repeats used up, a one-shot already done, the schedule never matches again, or the
    /// tick would be after the expiration.
    pub fn next_tick(&self, counter: &Counter) -> Option<DateTime<Utc>> {
        if self.repeats.is_some_and(|r| counter.count >= r) {
            return None;
        }
        let tick = match &self.schedule {
            None => match self.begin {
                Begin::DueTime(due) if counter.count == 0 => Some(due),
                _ => None,
            },
            Some(schedule) => match (counter.last_trigger, self.begin) {
                (None, Begin::DueTime(due)) => Some(due),
                (None, Begin::Start(start)) => schedule.next_with(start, &self.policy().dst),
                (Some(last), _) => schedule.next_with(last, &self.policy().dst),
            },
        }?;
        if self.expiration.is_some_and(|exp| tick > exp) {
            return None;
        }
        Some(tick)
    }

    /// Whether a job with no tick for this counter is nonetheless kept, waiting for ever:
    /// its schedule never matches from where its clock stands (`0 0 0 31 2 *`, or a `TZ=`
    /// schedule whose only matches fall in skipped local times). Dapr's Scheduler keeps such
    /// a job (kit's cron answers Go's zero time, not "none"; the job stays until deleted);
    /// a job finished by its repeats, its due time or its expiration is not kept.
    pub fn waits_forever(&self, counter: &Counter) -> bool {
        if self.repeats.is_some_and(|r| counter.count >= r) {
            return false;
        }
        let Some(schedule) = &self.schedule else {
            return false;
        };
        let from = match (counter.last_trigger, self.begin) {
            (Some(last), _) => last,
            (None, Begin::Start(start)) => start,
            (None, Begin::DueTime(_)) => return false,
        };
        schedule.next_with(from, &self.policy().dst).is_none()
    }

    /// When to fire for this counter: the nominal tick, or for retry k of it the time the
    /// failure policy gives (Dapr's constant policy: tick + k·interval, a negative interval
    /// read as zero so that a retry never fires before its tick).
    pub fn fire_time(&self, counter: &Counter) -> Option<DateTime<Utc>> {
        let tick = self.next_tick(counter)?;
        Some(self.retry_time(tick, counter.attempts).unwrap_or_else(|| {
            tick.checked_add_signed(self.offset_at(tick))
                .unwrap_or(DateTime::<Utc>::MAX_UTC)
        }))
    }

    /// When attempt `attempts + 1` of the tick at `tick` fires (the first at the tick), or
    /// `None` when the failure policy has no such retry.
    pub fn retry_time(&self, tick: DateTime<Utc>, attempts: u32) -> Option<DateTime<Utc>> {
        let at = if attempts == 0 {
            tick
        } else {
            self.failure_policy
                .retry_at(tick, attempts, self.policy().seed)?
        };
        Some(
            at.checked_add_signed(self.offset_at(tick))
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        )
    }

    /// The jitter offset of the tick at `tick`: [`Plan::offset`], cut to a millisecond before
    /// the schedule's next tick when the ticks are closer than that.
    fn offset_at(&self, tick: DateTime<Utc>) -> TimeDelta {
        let offset = self.policy().offset;
        if offset <= TimeDelta::zero() {
            return TimeDelta::zero();
        }
        let room = self
            .schedule
            .as_ref()
            .and_then(|s| s.next_with(tick, &self.policy().dst))
            .map(|next| next - tick);
        match room {
            Some(room) if room <= offset => {
                (room - TimeDelta::milliseconds(1)).max(TimeDelta::zero())
            }
            _ => offset,
        }
    }

    /// Applies a trigger's result to the counter and tells when to fire next.
    pub fn apply(&self, counter: &Counter, outcome: Outcome) -> Step {
        let counter = match outcome {
            Outcome::Success => self.finish_tick(counter),
            Outcome::Failed => {
                let attempts = counter.attempts.saturating_add(1);
                let retry = self.next_tick(counter).is_some_and(|tick| {
                    self.failure_policy
                        .retry_at(tick, attempts, self.policy().seed)
                        .is_some()
                });
                if retry {
                    Counter {
                        attempts,
                        ..*counter
                    }
                } else {
                    // A given-up tick counts toward repeats, and the schedule goes on from its
                    // nominal time whatever the retry cadence was.
                    self.finish_tick(counter)
                }
            }
        };
        Step {
            next: self.fire_time(&counter),
            counter,
        }
    }

    /// Passes over the current tick without running it: the schedule moves on from its
    /// nominal time, `repeats` does not count it (only ticks run or given up count).
    pub fn skip_tick(&self, counter: &Counter) -> Step {
        let counter = Counter {
            count: counter.count,
            last_trigger: self.next_tick(counter).or(counter.last_trigger),
            attempts: 0,
        };
        let next = match self.schedule {
            Some(_) => self.fire_time(&counter),
            // A one-shot's only tick is gone: the job is done.
            None => None,
        };
        Step { counter, next }
    }

    /// Most ticks one [`Plan::pass_over`] passes over; the rest on the next call.
    pub const CATCH_UP_STEP: u32 = 100_000;

    /// How late a tick may start under `catchUp: none` before it counts as missed: a tick
    /// merely delayed by a busy scheduler still runs, one that passed while jobsd was down
    /// (or stopped by more than this) is skipped. Temporal's smallest catch-up window.
    pub const MISSED_AFTER: TimeDelta = TimeDelta::seconds(10);

    /// The ticks `policy.catchUp` passes over at `now` before the current one fires: the
    /// counter after them and how many (`None`: fire the current tick). Only for a fresh tick
    /// of a schedule (a retry or a one-shot is never skipped). `latest` keeps only the latest
    /// tick due by `now`; `none` skips ticks more than [`Plan::MISSED_AFTER`] before `now`;
    /// `window(w)` those more than `w` before it.
    pub fn catch_up(&self, counter: &Counter, now: DateTime<Utc>) -> Option<(Counter, u32)> {
        let keep = match self.policy().catch_up {
            super::CatchUp::All => return None,
            super::CatchUp::Latest => Keep::Latest(now),
            super::CatchUp::None => Keep::From(now - Self::MISSED_AFTER),
            super::CatchUp::Window(w) => Keep::From(now - w),
        };
        self.pass_over(counter, keep)
    }

    /// Passes over the ticks `keep` leaves out, from the current one: the counter after them
    /// and how many (`None`: none is). Skipped ticks do not count toward `repeats`. Only for a
    /// fresh tick of a schedule: a retry or a one-shot is never passed over.
    pub fn pass_over(&self, counter: &Counter, keep: Keep) -> Option<(Counter, u32)> {
        if counter.attempts > 0 || self.schedule.is_none() {
            return None;
        }
        let mut current = *counter;
        let mut skipped = 0u32;
        while skipped < Self::CATCH_UP_STEP {
            // Past the last tick every one is passed over: the job is then done.
            let Some(tick) = self.next_tick(&current) else {
                break;
            };
            let skip = match keep {
                Keep::Latest(now) => {
                    let after = Counter {
                        last_trigger: Some(tick),
                        ..current
                    };
                    self.next_tick(&after).is_some_and(|next| next <= now)
                }
                Keep::From(from) => tick < from,
                Keep::After(after) => tick <= after,
            };
            if !skip {
                break;
            }
            current.last_trigger = Some(tick);
            skipped += 1;
        }
        (skipped > 0).then_some((current, skipped))
    }

    fn finish_tick(&self, counter: &Counter) -> Counter {
        Counter {
            count: counter.count.saturating_add(1),
            last_trigger: self.next_tick(counter).or(counter.last_trigger),
            attempts: 0,
        }
    }
}

#[cfg(test)]
mod tests;
