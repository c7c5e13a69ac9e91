//! What a preview of a create, or of a stored job's next ticks, answers.

use super::JobView;
use crate::schedule::preview::Preview;

/// What a preview answers.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPreview {
    /// The job as jobsd's GET would show it once created (normalised: the default failure
    /// policy filled in, times resolved).
    pub view: JobView,
    /// Its next ticks.
    pub preview: Preview,
}

/// A stored job's next fire times (`GET /jobsd/v1/jobs/{name}/next`).
#[derive(Debug, Clone, PartialEq)]
pub struct NextFireTimes {
    /// The ticks from the job's progress on; none for a finished job.
    pub preview: Preview,
    /// The job is paused: these ticks are skipped unless it is resumed before them.
    pub paused: bool,
}
