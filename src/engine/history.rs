//! What the engine records of each attempt: one run in the job's history and the job's
//! status, written with its progress in one store op ([`Op::RecordResult`]), so status,
//! history and progress never disagree after a crash.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::convert::{stored_counter, timestamp};
use crate::schedule::Counter;
use crate::store::{DeadLetter, Op, Paused, ResultRecord, RunOutcome, StoredCounter, StoredRun};
use crate::trigger::{ExecutionId, Report, TriggerKind, TriggerResult};

/// Longest error text a run or a status keeps, in bytes (cut on a character boundary).
pub const MAX_ERROR_TEXT: usize = 512;

/// What the engine keeps of its jobs' past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Runs kept per job (`--history-limit`); 0 records none (status is kept regardless).
    pub history_limit: u32,
    /// How long a finished job stays visible to jobsd's views (`--finished-retention`);
    /// `None` deletes it at once, as Dapr does.
    pub finished_retention: Option<Duration>,
}

impl Default for Options {
    /// 100 runs per job; finished jobs kept for a day.
    fn default() -> Self {
        Options {
            history_limit: 100,
            finished_retention: Some(Duration::from_secs(24 * 3600)),
        }
    }
}

/// One attempt as it went.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The execution (tick) it belongs to.
    pub execution_id: ExecutionId,
    /// Nominal time of the tick.
    pub tick: DateTime<Utc>,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// Why the execution runs (a tick of the schedule, by hand, a backfill).
    pub kind: TriggerKind,
    /// Handed to the sink.
    pub started: DateTime<Utc>,
    /// Answered.
    pub finished: DateTime<Utc>,
    /// The sink's answer.
    pub report: Report,
}

impl Attempt {
    /// The attempt's record in the run history of job `key`. An execution id derived from
    /// the key and the tick (every scheduled tick's) is left out: readers derive it again
    /// ([`execution_id_of`]), which keeps each run record ~40 bytes smaller.
    pub fn run(&self, key: &str) -> StoredRun {
        let outcome = match self.report.result {
            TriggerResult::Success | TriggerResult::Accepted => RunOutcome::Success,
            TriggerResult::Held => RunOutcome::Running,
            TriggerResult::Failed if self.report.timed_out => RunOutcome::TimedOut,
            TriggerResult::Failed => RunOutcome::Failed,
            TriggerResult::Cancel => RunOutcome::Cancelled,
            TriggerResult::Undeliverable => RunOutcome::Undeliverable,
        };
        StoredRun {
            execution_id: if self.execution_id == ExecutionId::for_tick(key, self.tick) {
                String::new()
            } else {
                self.execution_id.to_string()
            },
            nominal: Some(timestamp(self.tick)),
            attempt: self.attempt,
            started: Some(timestamp(self.started)),
            finished: Some(timestamp(self.finished)),
            outcome: outcome.into(),
            http_status: self.report.http_status.map_or(0, u32::from),
            grpc_code: self.report.grpc_code,
            error: bounded(self.report.error.as_deref().unwrap_or_default()),
            trigger: match self.kind {
                TriggerKind::Schedule => String::new(),
                kind => kind.as_str().to_owned(),
            },
        }
    }
}

/// The execution id of `run` in the history of job `key`: the stored one, or the one derived
/// from the key and the run's nominal time when none is stored.
pub fn execution_id_of(key: &str, run: &StoredRun) -> String {
    if !run.execution_id.is_empty() {
        return run.execution_id.clone();
    }
    run.nominal
        .as_ref()
        .and_then(super::convert::instant)
        .map(|tick| ExecutionId::for_tick(key, tick).to_string())
        .unwrap_or_default()
}

/// `text` cut to at most [`MAX_ERROR_TEXT`] bytes on a character boundary.
pub fn bounded(text: &str) -> String {
    if text.len() <= MAX_ERROR_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_ERROR_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// What one result writes.
pub struct Recorded<'a> {
    /// Job key.
    pub key: &'a str,
    /// Job version.
    pub generation: u64,
    /// New progress, or `None` to keep the stored one.
    pub progress: Option<&'a Counter>,
    /// When the job fires next with that progress (ms, for the due index); `None`: unknown,
    /// the index keeps what it had.
    pub due: Option<i64>,
    /// The job is finished.
    pub finish: bool,
    /// The tick was given up.
    pub dropped: bool,
    /// The run.
    pub run: StoredRun,
    /// Ticks a `skipped` run stands for (0 = 1).
    pub skipped_ticks: u32,
    /// The given-up tick pauses the job (`onExhausted: pause`).
    pub pause: Option<Paused>,
    /// The job the given-up tick is dead-lettered into (`onExhausted: deadLetter`).
    pub dead_letter: Option<DeadLetter>,
    /// The result resumes the job (the ticks a resume passed over): its pause is cleared.
    pub resume: bool,
}

impl Recorded<'_> {
    /// The store op, under `options`, at `now` (when a finished job is stamped finished).
    pub fn op(self, options: &Options, now: DateTime<Utc>) -> Op {
        Op::RecordResult(Box::new(ResultRecord {
            key: self.key.to_owned(),
            generation: self.generation,
            progress: self.progress.map(|c| StoredCounter {
                due_ms: self.due,
                ..stored_counter(c, self.generation)
            }),
            finish: self.finish,
            dropped: self.dropped,
            run: Some(self.run),
            history_limit: options.history_limit,
            finished_at: (self.finish && options.finished_retention.is_some())
                .then(|| timestamp(now)),
            skipped_ticks: self.skipped_ticks,
            pause: self.pause,
            dead_letter: self.dead_letter,
            // A held execution's end releases it: set by the loop (`runner::lease`).
            hold: None,
            release: Vec::new(),
            resume: self.resume,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_is_bounded_on_a_char_boundary() {
        let long = "é".repeat(400); // 800 bytes
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_ERROR_TEXT && cut.len() >= MAX_ERROR_TEXT - 1);
        assert!(long.starts_with(&cut));
        assert_eq!(bounded("short"), "short");
    }
}
