//! What the API and a scheduler say to each other about jobs, beyond Dapr's messages: jobsd's
//! settings of a job, its views and runs, selections of jobs, write conditions, backup
//! records, held executions, previews, the trigger loop's state. Plain data and the rules
//! on it: no engine, no store, no transport. The engine works with these types; the seam
//! (`crate::seam`) and the API pass them; none of them knows how the others are built.

pub mod actor_state;
pub mod backup;
pub mod bulk;
pub mod concurrency;
pub mod dead_letter;
pub mod executions;
pub mod guard;
pub mod preview;
pub mod views;

use chrono::{DateTime, Utc};

pub use actor_state::{ActorStateOwner, StateChange};
pub use backup::{BackupRecord, ExportCursor, ExportPage, Imported, MAX_BACKUP_BATCH};
pub use bulk::{Bulk, MAX_BULK_NAMES, Selection};
pub use dead_letter::check_dead_letter;
pub use executions::{Ending, ExecutionCall, HeldExecution};
pub use guard::{Conditions, Guarded, IfMatch};
pub use preview::{JobPreview, NextFireTimes};
pub use views::{
    JobState, JobStatus, JobView, ListFilter, ListPage, MAX_PAGE_SIZE, MAX_RUNS, Run, RunOutcome,
    StoredRun,
};

/// Most jobs one batch create takes.
pub const MAX_SCHEDULE_BATCH: usize = 4096;

/// jobsd's settings of a job that Dapr's `Job` message has no field for; stored beside it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobExtras {
    /// Labels (`POST /jobsd/v1/jobs/{name}`), for filtering lists.
    pub labels: std::collections::BTreeMap<String, String>,
    /// W3C `traceparent` of the create request, linked from every execution's trace.
    pub traceparent: Option<String>,
    /// jobsd's tick policy (`"policy"`).
    pub policy: Option<crate::proto::jobsd_api::JobPolicy>,
    /// jobsd's failure policy (`"failurePolicy"` with jobsd's kinds or `onExhausted`); it
    /// replaces the job's own.
    pub failure_policy: Option<crate::proto::jobsd_api::FailurePolicy>,
}

impl JobExtras {
    /// Whether nothing is set (a plain Dapr create).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
            && self.traceparent.is_none()
            && self.policy.is_none()
            && self.failure_policy.is_none()
    }
}

/// A snapshot of the trigger loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Jobs tracked.
    pub jobs: usize,
    /// Jobs waiting for their target to become deliverable.
    pub staged: usize,
    /// Jobs waiting in the time queue (due or not).
    pub queued: usize,
    /// Triggers out at the sink plus result batches being written.
    pub outstanding: usize,
    /// The earliest queued fire time.
    pub next_due: Option<DateTime<Utc>>,
    /// Executions held under a lease (async completion).
    pub held: usize,
    /// When the first of their leases runs out.
    pub next_lease: Option<DateTime<Utc>>,
    /// When the loop next reads jobs in from the store's due index (its horizon moves on);
    /// `None` without a horizon or while a round is under way (counted as outstanding).
    pub next_round: Option<DateTime<Utc>>,
}

impl Stats {
    /// When the loop next has something to do by the clock: a fire time, a lease running
    /// out or a round of reading due jobs in, whichever comes first.
    pub fn next_event(&self) -> Option<DateTime<Utc>> {
        earlier(earlier(self.next_due, self.next_lease), self.next_round)
    }
}

/// The earlier of two times, either of which may be absent.
pub(crate) fn earlier<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
