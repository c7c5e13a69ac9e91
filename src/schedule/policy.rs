//! What happens when a trigger fails: the failure policies a job carries.

use chrono::TimeDelta;

/// What happens when a trigger of a job fails (Dapr's `JobFailurePolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Give up on the failed tick at once.
    Drop,
    /// Retry the tick `interval` after the previous attempt's scheduled time.
    Constant {
        /// Delay between attempts; Dapr allows zero (immediate retries).
        interval: TimeDelta,
        /// Retries after the first attempt; `None` retries forever.
        max_retries: Option<u32>,
    },
}

impl Default for FailurePolicy {
    /// The Scheduler's default, stored with every job that has none: constant 1 s, 3 retries
    /// (so 4 deliveries of a tick in all).
    fn default() -> Self {
        FailurePolicy::Constant {
            interval: TimeDelta::seconds(1),
            max_retries: Some(3),
        }
    }
}
