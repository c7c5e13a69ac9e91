//! What jobsd shows of a job beyond Dapr's `Job`: its status, runs, and lists of jobs.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::proto::dapr_scheduler as sv1;
pub use crate::store::{RunOutcome, StoredRun};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// It fires (or waits to).
    Active,
    /// Paused, by hand or by `onExhausted: pause` (kept, not fired until resumed).
    Paused,
    /// Done: kept for jobsd's views until its retention passes; Dapr's API no longer sees it.
    Finished,
}

impl JobState {
    /// `active`, `paused`, `finished`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Active => "active",
            JobState::Paused => "paused",
            JobState::Finished => "finished",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(JobState::Active),
            "paused" => Some(JobState::Paused),
            "finished" => Some(JobState::Finished),
            _ => None,
        }
    }
}

/// A job's status.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobStatus {
    /// Active, paused or finished (`None` only in `Default`).
    pub state: Option<JobState>,
    /// When it fires next (nominal, retry delays included); `None` when it will not.
    pub next_fire_time: Option<DateTime<Utc>>,
    /// Nominal time of the last attempt.
    pub last_fire_nominal: Option<DateTime<Utc>>,
    /// When the last attempt was handed to the target.
    pub last_fire_actual: Option<DateTime<Utc>>,
    /// Outcome of the last attempt.
    pub last_outcome: Option<RunOutcome>,
    /// Error text of the last attempt, when it failed.
    pub last_error: Option<String>,
    /// Attempts the target answered.
    pub delivered: u64,
    /// Attempts it acknowledged.
    pub succeeded: u64,
    /// Attempts it failed.
    pub failed_attempts: u64,
    /// Ticks given up (failure policy spent).
    pub dropped: u64,
    /// Times a trigger found nobody to take it.
    pub staged_count: u64,
    /// Ticks skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Ticks given up under `onExhausted` `pause` or `deadLetter`, by what followed
    /// (`pause`, `dead_letter`, `dead_letter_failed`).
    pub on_exhausted: BTreeMap<String, u64>,
    /// Ticks done (succeeded or given up).
    pub ticks: u32,
    /// The attempt in flight now, or the one the next firing makes.
    pub current_attempt: u32,
    /// A trigger is out at the target now.
    pub in_flight: bool,
    /// Waiting for its target to come back.
    pub staged: bool,
    /// Why its due trigger waits, when it waits for a slot of its concurrency key.
    pub waiting: Option<String>,
    /// When it finished (finished jobs).
    pub finished_at: Option<DateTime<Utc>>,
    /// Paused jobs: since when.
    pub paused_at: Option<DateTime<Utc>>,
    /// Paused jobs: `manual` or `failure_policy_exhausted`.
    pub paused_reason: Option<String>,
    /// Paused jobs: the note given with the pause, or the exhausted tick's last error.
    pub paused_note: Option<String>,
    /// Executions held under a lease (async completion), waiting for the app.
    pub held: Vec<super::HeldExecution>,
}

/// One job as jobsd's own API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    /// The job's name (no key prefix).
    pub name: String,
    /// The job as Dapr's GET shows it.
    pub job: sv1::Job,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its status.
    pub status: JobStatus,
    /// jobsd's tick policy, when it has one.
    pub policy: Option<crate::proto::jobsd_api::JobPolicy>,
    /// jobsd's failure policy, when it has one (else Dapr's, in `job`, decides).
    pub failure_policy: Option<crate::proto::jobsd_api::FailurePolicy>,
    /// The etag of the job's definition (see [`super::guard`]): the same until it is
    /// overwritten, whatever its progress.
    pub etag: String,
}

/// One attempt in a job's history.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Sequence number in the job's history (the `before` of the next page).
    pub seq: u64,
    /// The stored record.
    pub run: StoredRun,
}

/// Which jobs a list shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Names starting with this.
    pub name_prefix: String,
    /// Every one of these labels, with these values.
    pub labels: Vec<(String, String)>,
    /// Only jobs in this state (`None`: active and paused, then finished).
    pub state: Option<JobState>,
    /// Most jobs per page (1–1000; 0 = 100).
    pub page_size: usize,
    /// Where the previous page stopped.
    pub page_token: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    /// The jobs, in name order (active ones before finished ones).
    pub jobs: Vec<JobView>,
    /// Pass back for the next page; `None` at the end. A page may hold fewer jobs than asked
    /// (filters are applied while reading a bounded stretch of the store).
    pub next_page_token: Option<String>,
}

/// Largest page.
pub const MAX_PAGE_SIZE: usize = 1000;

/// Most runs one history read answers.
pub const MAX_RUNS: usize = 1000;
