//! A job as a create would store it and its next ticks, with nothing stored
//! (`POST /jobsd/v1/preview`): the create's own checks ([`prepare`](super::prepare)), its view
//! as jobsd's GET would show it, and the plan's ticks ([`schedule::preview`]); and a stored
//! job's next fire times from its progress.

use chrono::{DateTime, Utc};

use super::views::view_of;
use super::{Error, JobExtras, convert, prepare};
use crate::jobs::{JobPreview, NextFireTimes};
use crate::proto::dapr_scheduler as sv1;
use crate::schedule::preview::{self, Preview};
use crate::store::PageItem;
use crate::trigger::keys;

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

impl super::Engine {
    /// The next `count` ticks (at most [`preview::MAX_COUNT`]) of job `name` of the
    /// metadata's owner, from its stored progress: what it will fire if nothing changes.
    /// `NotFound` when there is no such job (a finished one answers no ticks).
    pub async fn next_fire_times(
        &self,
        metadata: &sv1::JobMetadata,
        name: &str,
        count: usize,
    ) -> Result<NextFireTimes, Error> {
        let key = keys::job_key(keys::check_metadata(Some(metadata))?, name)?;
        let store = &self.inner.store;
        let Some(loaded) = store.get_loaded(&key).await? else {
            return match store.get_finished(&key).await? {
                Some(_) => Ok(NextFireTimes {
                    preview: Preview {
                        zone: String::new(),
                        ticks: Vec::new(),
                    },
                    paused: false,
                }),
                None => Err(Error::NotFound(name.to_owned())),
            };
        };
        let (job, counter) = (loaded.job, loaded.counter.unwrap_or_default());
        let plan = convert::plan_of(&key, &job).map_err(|e| Error::BadRequest(e.to_string()))?;
        let progress = convert::counter_of(&counter);
        let mut preview = preview::next_ticks(&plan, &progress, self.inner.clock.now(), count);
        let paused = counter.paused.is_some();
        if paused {
            for tick in &mut preview.ticks {
                tick.notes
                    .push("the job is paused: skipped unless it is resumed first".to_owned());
            }
        }
        Ok(NextFireTimes { preview, paused })
    }
}
