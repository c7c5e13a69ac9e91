//! Only the near future in memory (issue 16): with a store that keeps the due index, the
//! loop tracks the jobs due before its horizon (now + span) and leaves the rest in the store,
//! reading them in, a page at a time, as the horizon moves on.
//!
//! What keeps paging from bringing back a stale job: a page is a snapshot read after paging
//! started, and every write reaches the loop (as a command) only once it is durable. So a
//! job whose page is older than a write the loop has heard of since paging started is
//! "touched" and its page entry skipped; the command that touched it has already put the job
//! where it belongs (tracked when due before the horizon, else left to the index). A page
//! never replaces a job the loop tracks.

use std::collections::HashSet;

use super::*;
use crate::store::{DuePage, due_start};

/// Index entries read per page.
const PAGE: usize = 4096;

/// The shortest span the horizon shrinks to when a round brings too many jobs.
const MIN_SPAN: TimeDelta = TimeDelta::seconds(10);

/// Jobs one round may read in before the span is halved (memory: ≈ 0.5 KiB per job).
const ROUND_BUDGET: usize = 200_000;

/// Pause before reading a page again after a store error.
const RETRY: Duration = Duration::from_secs(1);

/// How far ahead the loop keeps jobs in memory.
pub(in crate::engine) struct Horizon {
    /// The span asked for: the longest the horizon looks ahead.
    max_span: TimeDelta,
    /// The span now (shrunk while rounds bring too many jobs).
    span: TimeDelta,
    /// Jobs due before this are tracked (or on their way in); later ones only in the store.
    end: DateTime<Utc>,
    /// The round reading `[previous end, end)` in, if one is under way.
    paging: Option<Paging>,
}

/// A round of paging under way.
#[derive(Default)]
struct Paging {
    /// Jobs changed (or dropped from memory) since the round started: its pages may be older.
    touched: HashSet<Arc<str>>,
    /// Prefixes deleted since the round started.
    prefixes: Vec<String>,
    /// Jobs it brought in so far.
    adopted: usize,
}

impl Horizon {
    fn new(span: TimeDelta, now: DateTime<Utc>) -> Self {
        Horizon {
            max_span: span,
            span,
            end: now + span,
            paging: None,
        }
    }

    /// When the next round should start: once half the span is left.
    fn next_round(&self) -> DateTime<Utc> {
        self.end - self.span / 2
    }
}

impl Runner {
    /// Keeps only jobs due within `span` in memory when the store keeps the due index (set
    /// before [`Runner::load`]).
    pub fn keep_horizon(&mut self, span: Duration) {
        let span = TimeDelta::from_std(span)
            .unwrap_or(TimeDelta::MAX)
            .max(MIN_SPAN);
        self.horizon = Some(Horizon::new(span, self.clock.now()));
    }

    /// Loads the head of the due index: every job due before the horizon. `None` when the
    /// store cannot (no horizon asked for, or no complete index): load everything then.
    pub(super) async fn load_due(&mut self) -> Result<Option<usize>, crate::store::Error> {
        let Some(horizon) = &mut self.horizon else {
            return Ok(None);
        };
        match self.store.due_index().await? {
            DueIndex::Complete => {}
            DueIndex::Partial => {
                tracing::info!(
                    "the store holds jobs written before the due index: loading every job \
                     once to index them"
                );
                return Ok(None);
            }
            DueIndex::Absent => {
                self.horizon = None;
                return Ok(None);
            }
        }
        horizon.end = self.clock.now() + horizon.span;
        let before = convert::due_ms(horizon.end);
        let mut start = due_start(i64::MIN);
        let mut finished = Vec::new();
        loop {
            let page = self.store.due_page(&start, before, PAGE).await?;
            self.drop_stale(&page.stale);
            let jobs = page.jobs.into_iter().map(|(_, loaded)| loaded).collect();
            finished.extend(self.adopt(jobs));
            match page.next {
                Some(next) => start = next,
                None => break,
            }
        }
        if !finished.is_empty() {
            self.store.write(finished).await?;
        }
        Ok(Some(self.jobs.len()))
    }

    /// After a full load of a store with a partial index: indexes every loaded job, then
    /// marks the index complete (the next start reads only its head).
    pub(super) async fn index_loaded(&mut self) -> Result<(), crate::store::Error> {
        if self.horizon.is_none() || self.store.due_index().await? != DueIndex::Partial {
            return Ok(());
        }
        let ops: Vec<Op> = self
            .jobs
            .iter()
            .map(|(key, entry)| Op::IndexDue {
                key: key.to_string(),
                generation: entry.generation,
                due: entry
                    .plan
                    .fire_time(&entry.counter)
                    .map_or(i64::MIN, convert::due_ms),
            })
            .collect();
        let count = ops.len();
        for chunk in ops.chunks(PAGE) {
            self.store.write(chunk.to_vec()).await?;
        }
        self.store.write(vec![Op::MarkDueIndexed]).await?;
        tracing::info!(jobs = count, "due index complete");
        // Everything stays in memory this time; the horizon moves on from now.
        if let Some(horizon) = &mut self.horizon {
            horizon.end = DateTime::<Utc>::MAX_UTC;
        }
        Ok(())
    }

    /// Whether a job due `at` is past the horizon (left to the store).
    pub(super) fn beyond(&self, at: DateTime<Utc>) -> bool {
        self.horizon.as_ref().is_some_and(|h| at >= h.end)
    }

    /// Whether jobs may be read in on demand (a job the loop does not track, for a change by
    /// hand): only with a horizon, where not tracking a job does not mean not owning it.
    pub(super) fn loads_on_demand(&self) -> bool {
        self.horizon.is_some()
    }

    /// Notes that the loop learnt something newer of `key` than a round's pages may hold.
    pub(super) fn touch(&mut self, key: &Arc<str>) {
        if let Some(paging) = self.horizon.as_mut().and_then(|h| h.paging.as_mut()) {
            paging.touched.insert(key.clone());
        }
    }

    /// [`Runner::touch`] for every job under `prefix`.
    pub(super) fn touch_prefix(&mut self, prefix: &str) {
        if let Some(paging) = self.horizon.as_mut().and_then(|h| h.paging.as_mut()) {
            paging.prefixes.push(prefix.to_owned());
        }
    }

    /// Whether the entry of `key`, written durably, may leave memory: nothing of it is out or
    /// held apart from its queued tick.
    pub(super) fn evictable(&self, key: &str) -> bool {
        !self.leases.holds_for(key)
            && !self.extras.contains_key(key)
            && !self.resuming.contains_key(key)
            && self
                .jobs
                .get(key)
                .is_some_and(|e| e.overlapping.is_none() && !e.paused)
    }

    /// When the loop must wake up to move the horizon on (`None`: no horizon, or a round is
    /// under way).
    pub(super) fn next_round(&self) -> Option<DateTime<Utc>> {
        self.horizon
            .as_ref()
            .filter(|h| h.paging.is_none() && h.end < DateTime::<Utc>::MAX_UTC)
            .map(Horizon::next_round)
    }

    /// Whether a round is under way.
    pub(super) fn paging(&self) -> bool {
        self.horizon.as_ref().is_some_and(|h| h.paging.is_some())
    }

    /// Starts a round when half the span is left: `[end, now + span)` is read in the
    /// background, and the horizon counts as moved at once.
    pub(super) fn advance_horizon(&mut self) {
        let now = self.clock.now();
        let Some(horizon) = self.horizon.as_mut() else {
            return;
        };
        if horizon.paging.is_some()
            || horizon.end == DateTime::<Utc>::MAX_UTC
            || now < horizon.next_round()
        {
            return;
        }
        let from = convert::due_ms(horizon.end);
        horizon.end = now + horizon.span;
        let before = convert::due_ms(horizon.end);
        horizon.paging = Some(Paging::default());
        let store = self.store.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut start = due_start(from);
            loop {
                match store.due_page(&start, before, PAGE).await {
                    Ok(page) => {
                        let next = page.next.clone();
                        if tx.send(Command::Paged(Box::new(page))).is_err() {
                            return;
                        }
                        match next {
                            Some(next) => start = next,
                            None => return,
                        }
                    }
                    Err(crate::store::Error::Closed) => return,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot read due jobs from the store; retrying");
                        tokio::time::sleep(RETRY).await;
                    }
                }
            }
        });
    }

    /// A page of the round under way: tracks its jobs unless the loop knows better; the
    /// last page (no `next`) ends the round.
    pub(super) fn paged(&mut self, page: DuePage) {
        self.drop_stale(&page.stale);
        let Some(paging) = self.horizon.as_mut().and_then(|h| h.paging.as_mut()) else {
            return;
        };
        let fresh: Vec<LoadedJob> = page
            .jobs
            .into_iter()
            .map(|(_, loaded)| loaded)
            .filter(|loaded| {
                !paging.touched.contains(loaded.key.as_str())
                    && !paging
                        .prefixes
                        .iter()
                        .any(|p| loaded.key.starts_with(p.as_str()))
                    && self.jobs.get(&loaded.key).is_none()
            })
            .collect();
        paging.adopted += fresh.len();
        let finished = self.adopt(fresh);
        if !finished.is_empty() {
            self.write_detached(finished);
        }
        if page.next.is_some() {
            return;
        }
        let Some(horizon) = self.horizon.as_mut() else {
            return;
        };
        let adopted = horizon.paging.take().map_or(0, |p| p.adopted);
        // Too many for one round: look less far ahead; few: back towards the span asked.
        if adopted > ROUND_BUDGET {
            horizon.span = (horizon.span / 2).max(MIN_SPAN);
        } else if adopted < ROUND_BUDGET / 8 {
            horizon.span = (horizon.span * 2).min(horizon.max_span);
        }
    }

    /// Of jobs handed to the loop (an import, a partition taken over), those it tracks: with
    /// a horizon, the ones due before it and the ones it tracks already (replaced); the rest
    /// stay in the store's index, which their write filled.
    pub(super) fn within_horizon(&mut self, jobs: Vec<LoadedJob>) -> Vec<LoadedJob> {
        if self.horizon.is_none() {
            return jobs;
        }
        let mut kept = Vec::with_capacity(jobs.len());
        for loaded in jobs {
            let key: Arc<str> = loaded.key.as_str().into();
            self.touch(&key);
            let tracked = self.jobs.get(&key).is_some();
            let due = convert::plan_of(&key, &loaded.job).ok().and_then(|plan| {
                let counter = loaded
                    .counter
                    .as_ref()
                    .map(convert::counter_of)
                    .unwrap_or_default();
                plan.fire_time(&counter)
            });
            if tracked || due.is_none_or(|at| !self.beyond(at)) {
                kept.push(loaded);
            }
        }
        kept
    }

    /// Tracks `loaded` (the stored job of `key` at `generation`) for a change by hand when the
    /// loop does not track it yet because it is due past the horizon.
    pub(super) fn track_on_demand(
        &mut self,
        key: &Arc<str>,
        generation: u64,
        loaded: Option<Box<LoadedJob>>,
    ) {
        if !self.loads_on_demand() || self.jobs.get(key).is_some() {
            return;
        }
        let Some(loaded) = loaded.filter(|l| l.job.generation == generation) else {
            return;
        };
        self.touch(key);
        let finished = self.adopt(vec![*loaded]);
        if !finished.is_empty() {
            self.write_detached(finished);
        }
    }

    /// Drops index entries a page found stale.
    fn drop_stale(&self, stale: &[(i64, String)]) {
        if stale.is_empty() {
            return;
        }
        let ops = stale
            .iter()
            .map(|(due, key)| Op::DropDue {
                key: key.clone(),
                due: *due,
            })
            .collect();
        self.write_detached(ops);
    }
}
