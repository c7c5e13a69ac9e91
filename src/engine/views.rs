//! What jobsd shows of a job beyond Dapr's `Job`: its labels, status and run history, and
//! lists of jobs filtered by name prefix, labels and state, paged over the store without
//! copying it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::convert::{self, instant};
use super::queue::State;
use super::runner::Live;
use super::{Engine, Error};
use crate::jobs::{JobState, JobStatus, JobView, ListFilter, ListPage, MAX_PAGE_SIZE, Run};
use crate::proto::dapr_scheduler as sv1;
use crate::store::{PageItem, PageOf};
pub use crate::store::{RunOutcome, StoredRun};
use crate::trigger::keys;

/// The `skipped` reason of ticks that fell due while their job was paused.
const PAUSED: &str = "paused";

/// Most records read for one page before it is returned short.
const SCAN_BUDGET: usize = 20_000;

/// Records read per store call while filling a page.
const STORE_PAGE: usize = 512;

impl Engine {
    /// The job `name` of the metadata's owner, active or finished, with its status.
    pub async fn job_view(
        &self,
        metadata: &sv1::JobMetadata,
        name: &str,
    ) -> Result<JobView, Error> {
        let key = keys::job_key(keys::check_metadata(Some(metadata))?, name)?;
        let store = &self.inner.store;
        if let Some(loaded) = store.get_loaded(&key).await? {
            let item = PageItem {
                key: key.clone(),
                job: loaded.job,
                counter: loaded.counter,
                finished_at: None,
            };
            let live = self.inspect(&key).await;
            return Ok(view_of(item, name.to_owned(), live, self.inner.clock.now()));
        }
        match store.get_finished(&key).await? {
            Some(finished) => Ok(view_of(
                PageItem {
                    key,
                    job: finished.job.unwrap_or_default(),
                    counter: finished.counter,
                    finished_at: finished.finished_at,
                },
                name.to_owned(),
                None,
                self.inner.clock.now(),
            )),
            None => Err(Error::NotFound(name.to_owned())),
        }
    }

    /// Up to `limit` runs of job `name`, newest first, numbered below `before` when given.
    pub async fn list_runs(
        &self,
        metadata: &sv1::JobMetadata,
        name: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Run>, Error> {
        let key = keys::job_key(keys::check_metadata(Some(metadata))?, name)?;
        let store = &self.inner.store;
        if store.get_job(&key).await?.is_none() && store.get_finished(&key).await?.is_none() {
            return Err(Error::NotFound(name.to_owned()));
        }
        let mut runs = match before {
            // Held executions first: they are the newest attempts, not recorded yet.
            None => self.running(&key).await?,
            Some(_) => Vec::new(),
        };
        let recorded = store.list_runs(&key, before, limit).await?;
        runs.extend(recorded.into_iter().map(|(seq, mut run)| {
            run.execution_id = super::history::execution_id_of(&key, &run);
            Run { seq, run }
        }));
        runs.truncate(limit);
        Ok(runs)
    }

    /// The executions job `key` holds (async completion), as `running` runs numbered from
    /// the next run's number on (the one the first of them is recorded under once it ends).
    async fn running(&self, key: &str) -> Result<Vec<Run>, Error> {
        let store = &self.inner.store;
        let Some(counter) = store.get_loaded(key).await?.and_then(|l| l.counter) else {
            return Ok(Vec::new());
        };
        let mut runs: Vec<Run> = counter
            .held
            .iter()
            .zip(counter.runs..)
            .map(|(h, seq)| Run {
                seq,
                run: StoredRun {
                    execution_id: crate::trigger::ExecutionId::from_slice(&h.execution_id)
                        .map(|id| id.to_string())
                        .unwrap_or_default(),
                    nominal: h.nominal,
                    attempt: h.attempt,
                    started: h.started,
                    outcome: RunOutcome::Running.into(),
                    ..StoredRun::default()
                },
            })
            .collect();
        runs.reverse();
        Ok(runs)
    }

    /// One page of the owner's jobs that `filter` accepts.
    pub async fn list_views(
        &self,
        metadata: &sv1::JobMetadata,
        filter: &ListFilter,
    ) -> Result<ListPage, Error> {
        let owner = keys::owner_prefix(keys::check_metadata(Some(metadata))?)?;
        let prefix = format!("{owner}{}", filter.name_prefix);
        let page_size = match filter.page_size {
            0 => 100,
            n => n.min(MAX_PAGE_SIZE),
        };
        let (mut table, mut after) = match filter.page_token.as_deref() {
            Some(token) => decode_token(token, &owner)?,
            None => (PageOf::Active, None),
        };
        if filter.state == Some(JobState::Finished) && table == PageOf::Active {
            (table, after) = (PageOf::Finished, None);
        }
        let mut jobs = Vec::new();
        let mut read = 0;
        let now = self.inner.clock.now();
        loop {
            let items = self
                .inner
                .store
                .page(table, &prefix, after.as_deref(), STORE_PAGE)
                .await?;
            let exhausted = items.len() < STORE_PAGE;
            for item in items {
                read += 1;
                after = Some(item.key.clone());
                if !has_labels(&item.job, &filter.labels) {
                    continue;
                }
                let name = item.key[owner.len()..].to_owned();
                let view = view_of(item, name, None, now);
                if filter.state.is_none_or(|s| view.status.state == Some(s)) {
                    jobs.push(view);
                }
                if jobs.len() == page_size {
                    break;
                }
            }
            if jobs.len() == page_size || read >= SCAN_BUDGET {
                // More may follow: the next page starts after the last record read.
                let token = after
                    .as_deref()
                    .map(|k| encode_token(table, &k[owner.len()..]));
                return Ok(ListPage {
                    jobs,
                    next_page_token: token,
                });
            }
            if exhausted {
                let wants_finished = matches!(filter.state, None | Some(JobState::Finished))
                    && table == PageOf::Active;
                if !wants_finished {
                    return Ok(ListPage {
                        jobs,
                        next_page_token: None,
                    });
                }
                (table, after) = (PageOf::Finished, None);
            }
        }
    }

    /// The trigger loop's view of `key`: queued, in flight, persisting or staged (`None`
    /// when it does not track the key or has no loop).
    async fn inspect(&self, key: &str) -> Option<Live> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.inner
            .loop_tx
            .as_ref()?
            .send(super::runner::Command::Inspect(key.into(), reply))
            .ok()?;
        answer.await.ok().flatten()
    }
}

/// Whether `job` carries every one of `labels`, with these values.
pub(super) fn has_labels(
    job: &crate::proto::jobsd_store::StoredJob,
    labels: &[(String, String)],
) -> bool {
    labels.iter().all(|(k, v)| job.labels.get(k) == Some(v))
}

/// The page token for "after `name`" in `table`: `a:<name>` or `f:<name>`, base64url.
fn encode_token(table: PageOf, name: &str) -> String {
    use base64::Engine as _;
    let tag = if table == PageOf::Active { "a:" } else { "f:" };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{tag}{name}"))
}

/// The table and key a page token stands for.
fn decode_token(token: &str, owner: &str) -> Result<(PageOf, Option<String>), Error> {
    use base64::Engine as _;
    let bad = || Error::BadRequest(format!("invalid pageToken {token:?}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (table, name) = match text.split_at_checked(2) {
        Some(("a:", name)) => (PageOf::Active, name),
        Some(("f:", name)) => (PageOf::Finished, name),
        _ => return Err(bad()),
    };
    Ok((table, Some(format!("{owner}{name}"))))
}

/// The executions a job's counter holds, as the views show them.
fn held_of(counter: &crate::store::StoredCounter, name: &str) -> Vec<super::HeldExecution> {
    counter
        .held
        .iter()
        .filter_map(|h| {
            Some(super::HeldExecution {
                execution_id: crate::trigger::ExecutionId::from_slice(&h.execution_id)?,
                name: name.to_owned(),
                attempt: h.attempt,
                nominal: h.nominal.as_ref().and_then(instant)?,
                started: h.started.as_ref().and_then(instant)?,
                lease_until: h.lease_until.as_ref().and_then(instant),
                ended: None,
            })
        })
        .collect()
}

/// The view of a stored job at `now` (`live`: the loop's state of it, for an active job).
pub(super) fn view_of(
    item: PageItem,
    name: String,
    live: Option<Live>,
    now: DateTime<Utc>,
) -> JobView {
    let waiting = live.as_ref().and_then(|l| l.waiting.clone());
    let live = live.map(|l| l.state);
    let counter = item.counter.unwrap_or_default();
    let finished = item.finished_at.is_some();
    let paused = counter.paused.as_ref().filter(|_| !finished);
    let progress = convert::counter_of(&counter);
    let in_flight = matches!(live, Some(State::InFlight | State::Persisting));
    let plan = || convert::plan_of(&item.key, &item.job).ok();
    let next_fire_time = match (finished || paused.is_some(), live) {
        (true, _) => None,
        (false, Some(State::Queued(at) | State::Gated(at))) => Some(at),
        _ => plan().and_then(|plan| plan.fire_time(&progress)),
    };
    let held = if finished {
        Vec::new()
    } else {
        held_of(&counter, &name)
    };
    let in_flight = in_flight || !held.is_empty();
    let mut skipped: BTreeMap<String, u64> = counter.skipped.clone().into_iter().collect();
    if paused.is_some() {
        // The ticks that fell due while paused are written once, at the resume; until then
        // they are counted from the plan.
        let passed = plan().map_or(0, |plan| plan.paused_ticks(&progress, in_flight, now));
        if passed > 0 {
            *skipped.entry(PAUSED.to_owned()).or_default() += passed;
        }
    }
    let status = JobStatus {
        state: Some(if finished {
            JobState::Finished
        } else if paused.is_some() {
            JobState::Paused
        } else {
            JobState::Active
        }),
        next_fire_time,
        last_fire_nominal: counter.last_nominal.as_ref().and_then(instant),
        last_fire_actual: counter.last_actual.as_ref().and_then(instant),
        last_outcome: (counter.last_outcome != 0).then(|| counter.last_outcome()),
        last_error: (!counter.last_error.is_empty()).then(|| counter.last_error.clone()),
        delivered: counter.delivered,
        succeeded: counter.succeeded,
        failed_attempts: counter.failed_attempts,
        dropped: counter.dropped,
        staged_count: counter.staged,
        skipped,
        on_exhausted: counter.on_exhausted.clone().into_iter().collect(),
        ticks: counter.count,
        current_attempt: progress.attempts + 1,
        in_flight,
        staged: matches!(live, Some(State::Staged)),
        waiting,
        finished_at: item.finished_at.as_ref().and_then(instant),
        paused_at: paused.and_then(|p| p.at.as_ref()).and_then(instant),
        paused_reason: paused.map(|p| p.reason.clone()),
        paused_note: paused.map(|p| p.note.clone()).filter(|n| !n.is_empty()),
        held,
    };
    JobView {
        name,
        etag: crate::jobs::guard::etag(item.job.generation),
        job: item.job.job.unwrap_or_default(),
        labels: item.job.labels.into_iter().collect(),
        status,
        policy: item.job.policy,
        failure_policy: item.job.failure_policy,
    }
}
