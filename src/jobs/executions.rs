//! Executions an app answered "later" (async completion): the calls on one and how it shows.

use chrono::{DateTime, TimeDelta, Utc};

use crate::trigger::ExecutionId;

/// What an app asks of a held execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionCall {
    /// Extend the lease from now: by this length, which becomes the lease's length, or (with
    /// `None`) by its current length.
    Heartbeat(Option<TimeDelta>),
    /// The attempt succeeded.
    Complete,
    /// The attempt failed, saying why.
    Fail(String),
}

/// How a held execution's attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Completed by the app: a success.
    Completed,
    /// Failed by the app.
    Failed,
    /// Its lease ran out: a failed attempt.
    LeaseExpired,
    /// It was never held: the app answered the attempt at once.
    NotHeld,
}

impl Ending {
    /// `completed`, `failed`, `lease_expired`, `not_held`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Completed => "completed",
            Ending::Failed => "failed",
            Ending::LeaseExpired => "lease_expired",
            Ending::NotHeld => "not_held",
        }
    }
}

/// A held execution (or one just ended) as the execution calls and the job status show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldExecution {
    /// The execution id the trigger was delivered with.
    pub execution_id: ExecutionId,
    /// The job's name (no key prefix).
    pub name: String,
    /// The attempt held, from 1.
    pub attempt: u32,
    /// Nominal time of the tick.
    pub nominal: DateTime<Utc>,
    /// When the attempt was handed to the app.
    pub started: DateTime<Utc>,
    /// When the lease runs out; `None` once the attempt ended.
    pub lease_until: Option<DateTime<Utc>>,
    /// How the attempt ended; `None` while it is held.
    pub ended: Option<Ending>,
}
