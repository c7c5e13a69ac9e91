//! The scheduling engine: validates jobs with Dapr's rules, stores them durably, and (with
//! the trigger loop) fires them into a [`Sink`]. The same engine serves the embedded sidecar
//! and `jobsd scheduler` replicas (`replica`). It speaks the Scheduler's messages but no
//! transport: no gRPC server or client, no etcd; its errors are [`Error`].

mod actor_state;
pub mod backup;
mod batch;
mod bulk;
mod concurrency;
pub mod convert;
mod dead_letter;
mod detached;
mod error;
pub mod executions;
pub mod guard;
pub mod history;
mod key_locks;
mod manual;
mod pause;
mod prepare;
mod preview;
mod queue;
mod runner;
mod sweep;
mod views;

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use error::Error;
pub use manual::DEFAULT_MAX_BACKFILL_TICKS;
pub use preview::preview_job;
use runner::{Command, Runner};

use crate::clock::Clock;
pub use crate::jobs::{
    BackupRecord, Bulk, Conditions, Ending, ExecutionCall, ExportCursor, ExportPage, Guarded,
    HeldExecution, IfMatch, Imported, JobExtras, JobPreview, JobState, JobStatus, JobView,
    ListFilter, ListPage, MAX_BULK_NAMES, MAX_PAGE_SIZE, MAX_RUNS, MAX_SCHEDULE_BATCH,
    NextFireTimes, Run, RunOutcome, Selection, Stats, StoredRun, check_dead_letter,
};
use crate::observe::EngineMetrics;
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_store::StoredJob;
use crate::schedule;
use crate::store::{self, Op, OpResult, Store};
use crate::trigger::{Sink, keys};

/// How an engine runs, beyond its store, clock and sink; the default is what tests and tools
/// need.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// What the engine and its trigger loop record (disabled by default).
    pub metrics: EngineMetrics,
    /// What it keeps of each job's past.
    pub history: history::Options,
    /// Keep only jobs due within this span in memory, paging the rest in from the store's due
    /// index as time moves on (`None`: every job in memory; stores without the index, such
    /// as etcd, always keep every job).
    pub horizon: Option<std::time::Duration>,
}

/// The scheduling engine over one store.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where jobs and counters live.
    store: Arc<dyn Store>,
    /// The only source of "now".
    clock: Arc<dyn Clock>,
    /// Tells the trigger loop what was written; `None` for an engine that only stores.
    loop_tx: Option<mpsc::UnboundedSender<Command>>,
    /// The loop learns of writes from the store's watch instead (a cluster replica: it fires
    /// only the jobs of its partitions, whichever replica wrote them); see [`Engine::follow`].
    following: bool,
    /// Serialise writes per key so that the loop hears of them in commit order.
    locks: key_locks::KeyLocks,
    /// Jobs created and deleted through this engine (and ticks a resume written here passed
    /// over).
    metrics: EngineMetrics,
    /// What is kept of each job's past (for the runs this engine writes itself).
    history: history::Options,
}

impl Engine {
    /// An engine that stores jobs but never fires them (nothing is loaded or triggered).
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Self::with_loop(store, clock, None, false, Options::default())
    }

    /// Loads every stored job, then fires jobs into `sink` until `stop` is cancelled. The
    /// returned task ends once the loop has stopped (after a bounded wait for answers in
    /// flight).
    pub async fn start(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        sink: Arc<dyn Sink>,
        stop: CancellationToken,
    ) -> Result<(Engine, JoinHandle<()>), store::Error> {
        Self::start_with(store, clock, sink, stop, Options::default()).await
    }

    /// [`Engine::start`] with `options`: what it records, and what it keeps of each job's
    /// past (finished jobs past their retention are swept until `stop`).
    pub async fn start_with(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        sink: Arc<dyn Sink>,
        stop: CancellationToken,
        options: Options,
    ) -> Result<(Engine, JoinHandle<()>), store::Error> {
        let (tx, rx) = mpsc::unbounded_channel();
        let history = options.history;
        let mut runner = Runner::new(store.clone(), clock.clone(), sink, tx.clone(), rx, history);
        runner.observe(options.metrics.clone());
        if let Some(span) = options.horizon {
            runner.keep_horizon(span);
        }
        if let Some(retention) = history.finished_retention {
            sweep::spawn(store.clone(), clock.clone(), retention, stop.clone());
        }
        guard::spawn_sweep(store.clone(), clock.clone(), stop.clone());
        let started = std::time::Instant::now();
        let loaded = runner.load().await?;
        tracing::info!(
            jobs = loaded,
            ms = started.elapsed().as_millis() as u64,
            "jobs restored"
        );
        let task = tokio::spawn(runner.run(stop));
        let engine = Self::with_loop(store, clock, Some(tx), false, options);
        if let Err(e) = engine.reload_concurrency_rules().await {
            tracing::warn!(error = %e, "reading the concurrency rules failed");
        }
        Ok((engine, task))
    }

    /// Fires jobs into `sink` until `stop` is cancelled, but tracks only what it is handed:
    /// nothing is loaded at start, and writes through this engine's API are not fed to the
    /// loop. A cluster replica hands it the jobs of the partitions it owns
    /// ([`Engine::adopt`]), the changes its store watch sees for them
    /// ([`Engine::observe_put`], [`Engine::observe_delete`]) and lets them go again
    /// ([`Engine::disown`]).
    pub fn follow(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        sink: Arc<dyn Sink>,
        stop: CancellationToken,
    ) -> (Engine, JoinHandle<()>) {
        Self::follow_with(store, clock, sink, stop, Options::default())
    }

    /// [`Engine::follow`] with `options`.
    pub fn follow_with(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        sink: Arc<dyn Sink>,
        stop: CancellationToken,
        options: Options,
    ) -> (Engine, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        // Every replica sweeps finished jobs past their retention: the deletes are
        // compare-and-swap writes, so replicas doing the same one at once are harmless.
        if let Some(retention) = options.history.finished_retention {
            sweep::spawn(store.clone(), clock.clone(), retention, stop.clone());
        }
        guard::spawn_sweep(store.clone(), clock.clone(), stop.clone());
        let mut runner = Runner::new(
            store.clone(),
            clock.clone(),
            sink,
            tx.clone(),
            rx,
            options.history,
        );
        runner.observe(options.metrics.clone());
        runner.watch_writes();
        let task = tokio::spawn(runner.run(stop.clone()));
        let engine = Self::with_loop(store, clock, Some(tx), true, options);
        engine.reload_rules_until(stop);
        (engine, task)
    }

    fn with_loop(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        loop_tx: Option<mpsc::UnboundedSender<Command>>,
        following: bool,
        options: Options,
    ) -> Self {
        Engine {
            inner: Arc::new(Inner {
                store,
                clock,
                loop_tx,
                following,
                locks: key_locks::KeyLocks::new(),
                metrics: options.metrics,
                history: options.history,
            }),
        }
    }

    /// Staged triggers under `prefix` fire again: their target can take them now.
    pub fn release(&self, prefix: impl Into<String>) {
        self.send(Command::Release(prefix.into()));
    }

    /// Resolves when the trigger loop has ended (never for an engine without one). Before a
    /// stop that means it failed: creates would be stored and never fire.
    pub async fn loop_ended(&self) {
        match &self.inner.loop_tx {
            Some(tx) => tx.closed().await,
            None => std::future::pending().await,
        }
    }

    /// The trigger loop's state, once it has handled everything sent before this call
    /// (`None` when the engine has no loop or it has stopped).
    pub async fn sync(&self) -> Option<Stats> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.inner
            .loop_tx
            .as_ref()?
            .send(Command::Sync(reply))
            .ok()?;
        answer.await.ok()
    }

    /// Now, by the engine's clock.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.inner.clock.now()
    }

    /// Fires the loaded jobs from their stored progress (a replica took over their
    /// partitions). Jobs that can never fire again are deleted.
    pub fn adopt(&self, jobs: Vec<store::LoadedJob>) {
        self.send(Command::Adopt(jobs));
    }

    /// As [`Engine::adopt`], except for jobs the loop fires already: those keep their progress
    /// (a replica reading in a job as its time comes, which a watched change may have brought
    /// in first).
    pub fn adopt_untracked(&self, jobs: Vec<store::LoadedJob>) {
        self.send(Command::AdoptUntracked(jobs));
    }

    /// A job version seen in the store, with the counter stored beside it (`None`: none of
    /// this version, as after a create): fired from that counter unless the loop already
    /// tracks this very version. A job that cannot be planned is logged and ignored.
    ///
    /// A counter comes with a job written together with its progress (`dapr scheduler
    /// import`, a restore): the job goes on from it instead of firing its done ticks again.
    pub fn observe_put(&self, key: &str, job: StoredJob, counter: Option<store::StoredCounter>) {
        if let Some(counter) = counter.filter(|c| c.generation == job.generation) {
            self.send(Command::Observed(Box::new(store::LoadedJob {
                key: key.into(),
                job,
                counter: Some(counter),
            })));
            return;
        }
        match convert::plan_of(key, &job) {
            Ok(plan) => self.send(Command::Upsert {
                key: key.into(),
                job: Box::new(job),
                plan: Box::new(plan),
            }),
            Err(e) => tracing::error!(key, error = %e, "stored job cannot be planned; skipped"),
        }
    }

    /// A job deleted in the store: no longer fired.
    pub fn observe_delete(&self, key: &str) {
        self.send(Command::Remove(key.into()));
    }

    /// Stops firing every job whose key `owns` accepts. Resolves once none of them has a
    /// trigger out any more (their results are written), so that another replica can take
    /// them over without firing a tick twice; resolves at once when the loop has stopped.
    pub fn disown(
        &self,
        owns: impl Fn(&str) -> bool + Send + 'static,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (reply, done) = tokio::sync::oneshot::channel();
        self.send(Command::Disown {
            owns: Box::new(owns),
            reply,
        });
        async move {
            let _ = done.await;
        }
    }

    /// Tells the loop about a write made through this engine's API (not when following).
    fn notify(&self, cmd: Command) {
        if !self.inner.following {
            self.send(cmd);
        }
    }

    fn send(&self, cmd: Command) {
        if let Some(tx) = &self.inner.loop_tx {
            // A closed loop means the engine is stopping: the write is durable and the job
            // is loaded again at the next start.
            let _ = tx.send(cmd);
        }
    }

    /// Locks `key` (see `key_locks.rs`).
    async fn lock(&self, key: &str) -> key_locks::KeysGuard<'_> {
        self.inner.locks.lock(key).await
    }

    /// Locks every key.
    async fn lock_all(&self) -> key_locks::AllGuard<'_> {
        self.inner.locks.lock_all().await
    }

    /// Stores a job (Scheduler `ScheduleJob`): create-only unless `overwrite`; an overwrite
    /// resets the job's progress.
    pub async fn schedule_job(&self, req: sv1::ScheduleJobRequest) -> Result<(), Error> {
        self.schedule_job_with(req, JobExtras::default()).await
    }

    /// [`Engine::schedule_job`] with jobsd's settings that Dapr's `Job` lacks, stored beside it.
    pub async fn schedule_job_with(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
    ) -> Result<(), Error> {
        let engine = self.clone();
        detached::to_the_end(async move { engine.store_job(req, extras).await }).await
    }

    /// [`Engine::schedule_job_with`] in the caller's task.
    async fn store_job(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
    ) -> Result<(), Error> {
        let new = self.prepare_job(req, extras)?;
        let _guard = self.lock(&new.key).await;
        let results = self
            .write(vec![Op::PutJob {
                key: new.key.clone(),
                job: new.stored.clone(),
                create_only: new.create_only,
                due: new.first_due(),
            }])
            .await?;
        match results.first() {
            Some(OpResult::AlreadyExists) => Err(Error::AlreadyExists(new.key)),
            _ => {
                self.created(new);
                Ok(())
            }
        }
    }

    /// Tells the loop and the metrics of a job just stored (under its key's lock).
    fn created(&self, new: prepare::Prepared) {
        self.inner.metrics.created();
        self.notify(Command::Upsert {
            key: new.key.into(),
            job: Box::new(new.stored),
            plan: Box::new(new.plan),
        });
    }

    /// Checks a create (Dapr's rules, jobsd's settings) and builds the record to store.
    fn prepare_job(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
    ) -> Result<prepare::Prepared, Error> {
        prepare::prepare(req, extras, self.inner.clock.now())
    }

    /// The stored job (Scheduler `GetJob`); `NotFound` when there is none.
    pub async fn get_job(&self, req: sv1::GetJobRequest) -> Result<sv1::Job, Error> {
        let metadata = keys::check_metadata(req.metadata.as_ref())?;
        let key = keys::job_key(metadata, &req.name)?;
        self.inner
            .store
            .get_job(&key)
            .await?
            .and_then(|stored| stored.job)
            .ok_or(Error::NotFound(req.name))
    }

    /// Deletes a job and its counter (Scheduler `DeleteJob`); a missing job is fine.
    pub async fn delete_job(&self, req: sv1::DeleteJobRequest) -> Result<(), Error> {
        let engine = self.clone();
        detached::to_the_end(async move { engine.remove_job(req).await }).await
    }

    /// [`Engine::delete_job`] in the caller's task.
    async fn remove_job(&self, req: sv1::DeleteJobRequest) -> Result<(), Error> {
        let metadata = keys::check_metadata(req.metadata.as_ref())?;
        let key = keys::job_key(metadata, &req.name)?;
        let _guard = self.lock(&key).await;
        let results = self.write(vec![Op::DeleteJob { key: key.clone() }]).await?;
        self.count_deleted(&results);
        self.notify(Command::Remove(key.into()));
        Ok(())
    }

    /// Every job of the metadata's owner (Scheduler `ListJobs`), names without the prefix.
    pub async fn list_jobs(&self, req: sv1::ListJobsRequest) -> Result<Vec<sv1::NamedJob>, Error> {
        let metadata = keys::check_metadata(req.metadata.as_ref())?;
        let prefix = keys::owner_prefix(metadata)?;
        let jobs = self.inner.store.list_jobs(&prefix).await?;
        Ok(jobs
            .into_iter()
            .map(|(key, stored)| {
                // Each job's own owner prefix, not the request's: listing a whole actor type
                // must name reminders `r`, not `<actor id>||r`.
                let own = stored
                    .metadata
                    .as_ref()
                    .and_then(|m| keys::name_prefix(m).ok());
                let name = own
                    .and_then(|own| key.strip_prefix(own.as_str()))
                    .or_else(|| key.strip_prefix(prefix.as_str()))
                    .unwrap_or(&key)
                    .to_owned();
                sv1::NamedJob {
                    name,
                    metadata: stored.metadata,
                    job: stored.job,
                }
            })
            .collect())
    }

    /// Deletes the owner's jobs whose name starts with `name_prefix` (Scheduler
    /// `DeleteByNamePrefix`; empty = all of them).
    pub async fn delete_by_name_prefix(
        &self,
        req: sv1::DeleteByNamePrefixRequest,
    ) -> Result<(), Error> {
        let metadata = keys::check_metadata(req.metadata.as_ref())?;
        let prefix = keys::owner_prefix(metadata)? + &req.name_prefix;
        self.delete_prefix(prefix).await
    }

    /// Deletes every job of the metadata's target (Scheduler `DeleteByMetadata`): all jobs of
    /// an app, all reminders of an actor type, or of one actor id (or, with
    /// `id_prefix_match`, of every actor id starting with it).
    pub async fn delete_by_metadata(&self, req: sv1::DeleteByMetadataRequest) -> Result<(), Error> {
        let metadata = keys::check_metadata(req.metadata.as_ref())?;
        let prefix = keys::metadata_prefix(metadata, req.id_prefix_match.unwrap_or(false))?;
        self.delete_prefix(prefix).await
    }

    /// Deletes every job whose composed key starts with `prefix` (go-etcd-cron
    /// `DeletePrefixes`, which validates the prefix like a name).
    async fn delete_prefix(&self, prefix: String) -> Result<(), Error> {
        let engine = self.clone();
        detached::to_the_end(async move { engine.remove_prefix(prefix).await }).await
    }

    /// [`Engine::delete_prefix`] in the caller's task.
    async fn remove_prefix(&self, prefix: String) -> Result<(), Error> {
        schedule::name::validate_prefix(&prefix)?;
        // Rare and wide: it waits for every in-progress write so the loop's view stays in
        // commit order for all the keys it covers.
        let _guards = self.lock_all().await;
        let results = self
            .write(vec![Op::DeletePrefix {
                prefix: prefix.clone(),
            }])
            .await?;
        self.count_deleted(&results);
        self.notify(Command::RemovePrefix(prefix));
        Ok(())
    }

    /// Counts the jobs a delete removed.
    fn count_deleted(&self, results: &[OpResult]) {
        for r in results {
            if let OpResult::Deleted(n) = r {
                self.inner.metrics.deleted(*n);
            }
        }
    }

    async fn write(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, Error> {
        Ok(self.inner.store.write(ops).await?)
    }
}

#[cfg(test)]
mod runner_tests;
#[cfg(test)]
mod tests;
