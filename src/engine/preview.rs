//! A job as a create would store it and its next ticks, with nothing stored
//! (`POST /jobsd/v1/preview`): the create's own checks ([`prepare`](super::prepare)), its view
//! as jobsd's GET would show it, and the plan's ticks ([`schedule::preview`]).

use chrono::{DateTime, Utc};

use super::views::view_of;
use super::{Error, JobExtras, JobView, prepare};
use crate::proto::scheduler as sv1;
use crate::schedule::preview::{self, Preview};
use crate::store::PageItem;

/// What a preview answers.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPreview {
    /// The job as jobsd's GET would show it once created (normalised: the default failure
    /// policy filled in, times resolved).
    pub view: JobView,
    /// Its next ticks.
    pub preview: Preview,
}

/// Checks a create exactly as [`Engine::schedule_job_with`](super::Engine::schedule_job_with)
/// does at `now` (same errors) and previews its first `count` ticks (at most
/// [`preview::MAX_COUNT`]). Nothing is stored, and an existing job of the name is no error.
pub fn preview_job(
    req: sv1::ScheduleJobRequest,
    extras: JobExtras,
    now: DateTime<Utc>,
    count: usize,
) -> Result<JobPreview, Error> {
    let name = req.name.clone();
    let prepared = prepare::prepare(req, extras, now)?;
    let ticks = preview::preview(&prepared.plan, now, count);
    let item = PageItem {
        key: prepared.key,
        job: prepared.stored,
        counter: None,
        finished_at: None,
    };
    Ok(JobPreview {
        view: view_of(item, name, None, now),
        preview: ticks,
    })
}
