//! The trigger loop: one task owns the in-memory jobs, fires them at their times, applies
//! results through the trigger plan and persists counters before queueing the next tick.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::convert;
use super::history::{self, Attempt, Recorded};
use super::queue::{Entry, Jobs, State};
use crate::clock::Clock;
use crate::jobs::{Stats, earlier};
use crate::observe::{EngineMetrics, Skip};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_store::StoredJob;
use crate::schedule::{Counter, Keep, Outcome, Overlap, Plan, WhileTargetDown};
use crate::store::{DueIndex, LoadedJob, Op, OpResult, RunOutcome, Store, StoredRun};
use crate::trigger::{ExecutionId, Report, Sink, Trigger, TriggerKind, TriggerResult, keys};

mod async_completion;
mod exhausted;
mod fire;
mod gated;
mod held;
mod horizon;
mod manual;
mod overlap;
mod paused;
mod resume;
mod skips;
mod writes;

use skips::skip_reason;

pub use async_completion::Call;
use async_completion::LeaseWrite;
use exhausted::DeadLetterJob;
pub use manual::{ExtraRefused, ExtraRequest};
use paused::ByHand;
pub use paused::{PauseReply, paused_by_hand};
pub use resume::{skipped_run, skipped_ticks};

/// Most commands handled before the loop looks at the clock again.
const DRAIN_BATCH: usize = 4096;

/// Jobs loaded per page at start.
const LOAD_PAGE: usize = 4096;

/// How long a graceful stop waits for triggers in flight to be answered and written.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Results that are written at once, without waiting for more to join them.
const FLUSH_BATCH: usize = 256;

/// Longest a result waits for others to share its store write (one commit, one `fdatasync`)
/// while more answers are on their way. The next tick of its job is queued that much later at
/// most, and after a crash that much more may be delivered again.
const FLUSH_DELAY: Duration = Duration::from_millis(2);

/// Where a tracked job is in its cycle, and why it waits when it is gated.
#[derive(Debug, Clone)]
pub struct Live {
    /// Its state.
    pub state: State,
    /// [`State::Gated`]: its concurrency key, rule and slots taken.
    pub waiting: Option<String>,
}

/// What the loop is told.
pub enum Command {
    /// A job version was stored (create or overwrite): track it with a fresh counter.
    Upsert {
        /// Composed key.
        key: Arc<str>,
        /// The new version.
        job: Box<StoredJob>,
        /// Its plan (already validated).
        plan: Box<Plan>,
    },
    /// A job was deleted.
    Remove(Arc<str>),
    /// Every job under a prefix was deleted.
    RemovePrefix(String),
    /// Triggers under this prefix can be delivered again: release the staged ones.
    Release(String),
    /// The sink answered a trigger.
    Done {
        /// Job key.
        key: Arc<str>,
        /// The version the trigger was for.
        generation: u64,
        /// The attempt, with what the sink said.
        attempt: Box<Attempt>,
    },
    /// Results were written; queue the next ticks.
    Persisted(Vec<Persisted>),
    /// Answer with the loop's state once every earlier command is handled.
    Sync(oneshot::Sender<Stats>),
    /// Answer with where the job of this key is in its cycle (`None`: not tracked).
    Inspect(Arc<str>, oneshot::Sender<Option<Live>>),
    /// New concurrency rules (every owner's, by owner prefix), or a new place among the
    /// replicas (`(count, index)`), or both.
    Gates {
        /// The rules, when they changed.
        rules: Option<HashMap<String, crate::jobs::concurrency::Rules>>,
        /// The place, when it changed.
        place: Option<(u32, u32)>,
    },
    /// Answer with the concurrency keys of this owner prefix that have triggers out or
    /// waiting.
    KeyStates(
        String,
        oneshot::Sender<Vec<crate::jobs::concurrency::KeyState>>,
    ),
    /// Pause (`paused` set) or resume (`None`) the job of `key` at `generation` by hand: the
    /// change is written in order with the job's results, then applied.
    SetPaused {
        /// Job key.
        key: Arc<str>,
        /// The version it is meant for.
        generation: u64,
        /// Why and since when; `None` resumes.
        paused: Option<crate::store::Paused>,
        /// Gets the write's result, or `None` when the loop does not fire that version.
        reply: PauseReply,
        /// The stored job and its progress, tracked first if the loop leaves it to the store
        /// (due past its horizon).
        loaded: Option<Box<LoadedJob>>,
    },
    /// Run executions by hand beside the job's schedule (run now, backfill).
    Extra(Box<ExtraRequest>),
    /// The sink answered a hand-started execution.
    ExtraDone {
        /// Job key.
        key: Arc<str>,
        /// The version it was for.
        generation: u64,
        /// The attempt, with what the sink said.
        attempt: Box<Attempt>,
    },
    /// Jobs this loop now fires with their stored progress (a cluster replica took over their
    /// partitions, or an import restored them; a version it fired already is replaced).
    Adopt(Vec<LoadedJob>),
    /// As `Adopt`, but a job this loop tracks already keeps its own (newer) progress: jobs a
    /// replica reads in as their time comes (`replica::cluster::far`).
    AdoptUntracked(Vec<LoadedJob>),
    /// A job version seen in the store together with its progress: adopted from it unless
    /// the loop tracks this very version already.
    Observed(Box<LoadedJob>),
    /// A page of the due index, read as the horizon moves on (see `runner/horizon.rs`).
    Paged(Box<crate::store::DuePage>),
    /// Stop firing the jobs whose key `owns` accepts: queued and staged ones are dropped at
    /// once, ones with a trigger out are dropped once its result is written. `reply` is
    /// answered when none is left.
    Disown {
        /// Which keys to let go.
        owns: Box<dyn Fn(&str) -> bool + Send>,
        /// Answered once nothing of them is in flight any more.
        reply: oneshot::Sender<()>,
    },
    /// An app's heartbeat, complete or fail of a held execution (async completion).
    Execution(Box<Call>),
}

/// A written result.
pub struct Persisted {
    key: Arc<str>,
    generation: u64,
    /// The [`Entry::incarnation`] it was made for (stamped when it is pushed).
    incarnation: u32,
    counter: Counter,
    next: Option<DateTime<Utc>>,
    /// The run recorded with it (`None`: a job finished without an attempt).
    run: Option<StoredRun>,
    /// The tick was given up.
    dropped: bool,
    /// Only a record (a staged trigger): the entry's progress and state are not touched.
    record_only: bool,
    /// Progress of an `overlap: allow` job, written while its entry goes on (the entry
    /// already holds it): the write does not touch the entry.
    detached: bool,
    /// Ticks a `skipped` run stands for.
    skipped_ticks: u32,
    /// A given-up tick pauses the job (`onExhausted: pause`).
    pause: Option<crate::store::Paused>,
    /// A given-up tick's dead-letter job (`onExhausted: deadLetter`).
    dead_letter: Option<Box<DeadLetterJob>>,
    /// A pause or resume by hand: only it is written, the entry's progress is left alone.
    by_hand: Option<ByHand>,
    /// What the result does to held executions (async completion), and who waits for it.
    lease: Option<Box<LeaseWrite>>,
    /// What the store answered for this result's op (`None` until written).
    written: Option<Result<OpResult, crate::store::Error>>,
    /// Its op wrote the job's next fire time into the store's due index: once durable, the
    /// entry may leave memory if that time is past the horizon.
    indexed: bool,
    /// No next tick, yet the job stays stored (its schedule never matches again, see
    /// `Plan::waits_forever`): its progress is written, the job not finished.
    waits: bool,
}

impl Persisted {
    /// A result that moves the job on.
    fn step(key: Arc<str>, generation: u64, counter: Counter, next: Option<DateTime<Utc>>) -> Self {
        Persisted {
            key,
            generation,
            incarnation: 0,
            counter,
            next,
            run: None,
            dropped: false,
            record_only: false,
            detached: false,
            skipped_ticks: 0,
            pause: None,
            dead_letter: None,
            by_hand: None,
            lease: None,
            written: None,
            indexed: false,
            waits: false,
        }
    }
}

/// The loop's state and handles.
pub struct Runner {
    /// Tracked jobs.
    jobs: Jobs,
    /// Commands from the API side, the sink tasks and the persist tasks.
    rx: mpsc::UnboundedReceiver<Command>,
    /// For the tasks the loop spawns to report back.
    tx: mpsc::UnboundedSender<Command>,
    /// Durable state.
    store: Arc<dyn Store>,
    /// Time.
    clock: Arc<dyn Clock>,
    /// Where triggers go.
    sink: Arc<dyn Sink>,
    /// The sink and `tx` in one handle for delivery tasks: a trigger handed out clones one
    /// `Arc` instead of both (each clone and drop is a contended atomic).
    outlet: Arc<Outlet>,
    /// Results waiting to be written in the next batch.
    pending: Vec<Persisted>,
    /// When the oldest of `pending` was added (real time: only batching depends on it).
    pending_since: Option<Instant>,
    /// Whether a batch of results is being written; at most one is, and results arriving
    /// meanwhile wait to go with the next one.
    writing: bool,
    /// Triggers handed to the sink and not yet answered.
    in_sink: usize,
    /// Most triggers handed to the sink at once ([`Sink::capacity`]).
    capacity: usize,
    /// Shared metadata per owner.
    owners: Owners,
    /// Keys being disowned that still had a trigger out, and who waits for them.
    disowning: Vec<(Vec<Arc<str>>, oneshot::Sender<()>)>,
    /// What is kept of each job's past.
    history: history::Options,
    /// Jobs this loop creates itself (dead letters) reach it through the store's watch, as
    /// every write does on a cluster replica, instead of being tracked at once.
    watched: bool,
    /// Executions started by hand (run now, backfill), per job that has some.
    extras: HashMap<Arc<str>, Box<manual::ExtraQueue>>,
    /// Executions held under a lease (async completion).
    leases: held::Leases,
    /// While a held execution's end is applied: what the result recording its run also does
    /// (release the hold, answer the app), taken by the first run pushed.
    ending: Option<Box<LeaseWrite>>,
    /// Jobs resumed while a tick was in progress, by key: the version and the resume time.
    /// The ticks that fell due while they were paused are passed over once that tick ends.
    resuming: HashMap<Arc<str>, (u64, DateTime<Utc>)>,
    /// Only the near future in memory (`None`: every job, as on an etcd replica).
    horizon: Option<horizon::Horizon>,
    /// The last [`Entry::incarnation`] handed out.
    incarnations: u32,
    /// Concurrency limits by key: rules, slots taken, gated jobs.
    gates: gated::Gates,
}

impl Runner {
    /// A loop over `store`, fed by `rx` (and reporting to itself through `tx`).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        sink: Arc<dyn Sink>,
        tx: mpsc::UnboundedSender<Command>,
        rx: mpsc::UnboundedReceiver<Command>,
        history: history::Options,
    ) -> Self {
        let outlet = Arc::new(Outlet {
            sink: sink.clone(),
            tx: tx.clone(),
            clock: clock.clone(),
            metrics: EngineMetrics::default(),
        });
        Runner {
            jobs: Jobs::default(),
            rx,
            tx,
            store,
            clock,
            capacity: sink.capacity().max(1),
            outlet,
            sink,
            pending: Vec::new(),
            pending_since: None,
            writing: false,
            in_sink: 0,
            owners: Owners::default(),
            disowning: Vec::new(),
            history,
            watched: false,
            extras: HashMap::new(),
            leases: held::Leases::default(),
            ending: None,
            resuming: HashMap::new(),
            horizon: None,
            incarnations: 0,
            gates: gated::Gates::default(),
        }
    }

    /// Leaves the jobs this loop creates (dead letters) to the store's watch (before it runs).
    pub fn watch_writes(&mut self) {
        self.watched = true;
    }

    /// Records what the loop does into `metrics` (before it runs).
    pub fn observe(&mut self, metrics: EngineMetrics) {
        self.outlet = Arc::new(Outlet {
            sink: self.sink.clone(),
            tx: self.tx.clone(),
            clock: self.clock.clone(),
            metrics,
        });
    }

    /// Loads every stored job with its counter. Jobs that can never fire again are deleted,
    /// as go-etcd-cron does when it loads them.
    pub async fn load(&mut self) -> Result<usize, crate::store::Error> {
        if let Some(loaded) = self.load_due().await? {
            return Ok(loaded);
        }
        let mut scan = self.store.scan("", LOAD_PAGE).await?;
        let mut finished = Vec::new();
        while let Some(page) = scan.next_page().await? {
            finished.extend(self.adopt(page));
        }
        if !finished.is_empty() {
            tracing::info!(
                count = finished.len(),
                "deleting stored jobs that cannot fire again"
            );
            self.store.write(finished).await?;
        }
        self.index_loaded().await?;
        Ok(self.jobs.len())
    }

    /// Tracks loaded jobs from their stored progress; gives the ops deleting those that can
    /// never fire again.
    fn adopt(&mut self, jobs: Vec<LoadedJob>) -> Vec<Op> {
        let mut finished = Vec::new();
        self.jobs.reserve(jobs.len());
        for loaded in jobs {
            let key: Arc<str> = loaded.key.into();
            let plan = match convert::plan_of(&key, &loaded.job) {
                Ok(plan) => plan,
                Err(e) => {
                    tracing::error!(key = %key, error = %e, "stored job cannot be planned; skipped");
                    continue;
                }
            };
            let counter = loaded
                .counter
                .as_ref()
                .map(convert::counter_of)
                .unwrap_or_default();
            let generation = loaded.job.generation;
            let paused = loaded.counter.as_ref().is_some_and(|c| c.paused.is_some());
            let held = loaded.counter.map(|c| c.held).unwrap_or_default();
            let at = plan.fire_time(&counter);
            if self.jobs.get(&key).is_some() {
                // A restore replaced a version this loop fires: its leases and resume go.
                self.leases.forget(&key, false);
                self.resuming.remove(&key);
            }
            if at.is_none() && plan.waits_forever(&counter) {
                // Stored, never fired (see `Plan::waits_forever`).
                self.jobs.remove(&key);
                continue;
            }
            if at.is_none() {
                self.jobs.remove(&key);
                self.outlet.metrics.skipped(Skip::Expired);
                finished.push(Op::FinishJob {
                    key: key.to_string(),
                    generation,
                });
                continue;
            }
            let mut entry = self.entry_of(&key, loaded.job, plan, counter);
            entry.paused = paused;
            self.jobs.insert(key.clone(), entry, at);
            if !held.is_empty() {
                self.restore_held(&key, held);
            }
        }
        finished
    }

    /// Runs until `stop` is cancelled, then waits (bounded) for answers in flight.
    pub async fn run(mut self, stop: CancellationToken) {
        tracing::info!(jobs = self.jobs.len(), "trigger loop started");
        loop {
            self.advance_horizon();
            self.start_extras();
            self.expire_leases();
            self.fire_due();
            let flush_at = earlier(self.flush(), self.leases.early_deadline());
            // While the sink is full, due jobs wait for answers, not for the clock.
            let next = if self.in_sink < self.capacity {
                self.next_due()
            } else {
                None
            };
            let next = earlier(
                earlier(next, self.leases.next_deadline()),
                self.next_round(),
            );
            let clock = self.clock.clone();
            let sleep = async move {
                match next {
                    Some(at) => clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let flush_timer = async move {
                match flush_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                cmd = self.rx.recv() => match cmd {
                    Some(cmd) => {
                        self.handle(cmd);
                        for _ in 1..DRAIN_BATCH {
                            match self.rx.try_recv() {
                                Ok(cmd) => self.handle(cmd),
                                Err(_) => break,
                            }
                        }
                        self.settle_disowning();
                    }
                    None => break,
                },
                () = sleep => {}
                () = flush_timer => {}
            }
        }
        self.drain_after_stop().await;
    }

    /// Lets answers already on their way be applied and written, without firing anything new.
    async fn drain_after_stop(&mut self) {
        let deadline = Instant::now() + STOP_GRACE;
        while self.in_sink > 0 || self.writing || !self.pending.is_empty() {
            if !self.writing {
                self.write_pending();
            }
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(cmd)) => self.handle(cmd),
                Ok(None) | Err(_) => break,
            }
        }
        if self.in_sink > 0 || self.writing {
            tracing::warn!(
                unanswered = self.in_sink,
                "stopped with triggers unanswered or unwritten; they fire again after restart"
            );
        }
        // Freeing a million entries one by one takes seconds and serves nothing: the loop
        // only stops when the engine does, and everything is in the store.
        std::mem::forget(std::mem::take(&mut self.jobs));
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Upsert { key, job, plan } => {
                self.touch(&key);
                if self
                    .jobs
                    .get(&key)
                    .is_some_and(|e| e.generation == job.generation)
                {
                    // Seen already (a cluster replica hears of its own writes through its
                    // watch too): keep the progress.
                    return;
                }
                let counter = Counter::default();
                let at = plan.fire_time(&counter);
                let generation = job.generation;
                if at.is_none() && plan.waits_forever(&counter) {
                    // A schedule that never matches: stored, never fired (Dapr keeps it).
                    self.jobs.remove(&key);
                    self.leases.forget(&key, false);
                    self.resuming.remove(&key);
                    return;
                }
                if at.is_none() {
                    // Nothing to fire, ever (e.g. a ttl already past): Dapr deletes such jobs.
                    self.jobs.remove(&key);
                    self.outlet.metrics.skipped(Skip::Expired);
                    self.push_result(Persisted::step(key, generation, counter, None));
                    return;
                }
                if at.is_some_and(|at| self.beyond(at)) {
                    // Left to the store's due index, written with the job.
                    self.jobs.remove(&key);
                    self.leases.forget(&key, false);
                    self.resuming.remove(&key);
                    return;
                }
                let entry = self.entry_of(&key, *job, *plan, counter);
                self.leases.forget(&key, false);
                self.jobs.insert(key, entry, at);
            }
            Command::Remove(key) => {
                self.touch(&key);
                self.jobs.remove(&key);
                self.leases.forget(&key, false);
                self.resuming.remove(&key);
            }
            Command::RemovePrefix(prefix) => {
                self.touch_prefix(&prefix);
                self.jobs.remove_prefix(&prefix);
                self.leases.forget(&prefix, true);
                self.resuming.retain(|key, _| !key.starts_with(&prefix));
            }
            Command::Release(prefix) => {
                for key in self.jobs.unstage_prefix(&prefix) {
                    self.target_back(&key);
                }
            }
            Command::Done {
                key,
                generation,
                attempt,
            } => {
                self.in_sink = self.in_sink.saturating_sub(1);
                self.release_slot(&key);
                if let Some(attempt) = self.unless_held(&key, generation, *attempt) {
                    self.apply_result(key, generation, attempt);
                }
            }
            Command::Execution(call) => self.execution_call(*call),
            Command::Sync(reply) => {
                let _ = reply.send(Stats {
                    jobs: self.jobs.len(),
                    staged: self.jobs.staged(),
                    queued: self.jobs.queued(),
                    outstanding: self.in_sink
                        + usize::from(self.writing)
                        + usize::from(!self.pending.is_empty())
                        + usize::from(self.paging()),
                    next_due: self.next_due(),
                    held: self.leases.len(),
                    next_lease: self.leases.next_deadline(),
                    next_round: self.next_round(),
                });
            }
            Command::Inspect(key, reply) => {
                let live = self.jobs.get(&key).map(|e| Live {
                    state: e.state,
                    waiting: self.gated_why(&key),
                });
                let _ = reply.send(live);
            }
            Command::Gates { rules, place } => self.set_gates(rules, place),
            Command::KeyStates(owner, reply) => {
                let _ = reply.send(self.key_states(&owner));
            }
            Command::SetPaused {
                key,
                generation,
                paused,
                reply,
                loaded,
            } => {
                self.track_on_demand(&key, generation, loaded);
                self.set_paused(key, generation, paused, reply);
            }
            Command::Extra(req) => self.queue_extras(*req),
            Command::ExtraDone {
                key,
                generation,
                attempt,
            } => self.extra_done(key, generation, *attempt),
            Command::AdoptUntracked(mut jobs) => {
                jobs.retain(|j| self.jobs.get(j.key.as_str()).is_none());
                let finished = self.adopt(jobs);
                if !finished.is_empty() {
                    self.write_detached(finished);
                }
            }
            Command::Observed(loaded) => {
                let key = loaded.key.as_str();
                if self
                    .jobs
                    .get(key)
                    .is_some_and(|e| e.generation == loaded.job.generation)
                {
                    return;
                }
                self.leases.forget(key, false);
                self.resuming.remove(key);
                let jobs = self.within_horizon(vec![*loaded]);
                let finished = self.adopt(jobs);
                if !finished.is_empty() {
                    self.write_detached(finished);
                }
            }
            Command::Adopt(jobs) => {
                let jobs = self.within_horizon(jobs);
                let finished = self.adopt(jobs);
                if !finished.is_empty() {
                    self.write_detached(finished);
                }
            }
            Command::Paged(page) => self.paged(*page),
            Command::Disown { owns, reply } => {
                let keys = self.jobs.keys_where(|k| owns(k));
                let mut busy = Vec::new();
                for key in keys {
                    match self.jobs.get(&key).map(|e| e.state) {
                        Some(State::InFlight | State::Persisting) => busy.push(key),
                        _ => {
                            self.jobs.remove(&key);
                        }
                    }
                }
                if busy.is_empty() {
                    let _ = reply.send(());
                } else {
                    self.disowning.push((busy, reply));
                }
            }
            Command::Persisted(done) => {
                self.writing = false;
                for mut p in done {
                    async_completion::lease_written(&mut p);
                    if self.after_write(&mut p) || p.record_only || p.detached {
                        continue;
                    }
                    let Some(entry) = self.jobs.get_mut(&p.key) else {
                        continue;
                    };
                    if entry.generation != p.generation
                        || entry.incarnation != p.incarnation
                        || entry.state != State::Persisting
                    {
                        // Made for another version, or for this one before it was let go of
                        // and taken back from the store (which has this write or a later
                        // one): the entry goes on from what it holds.
                        continue;
                    }
                    entry.counter = p.counter;
                    entry.paused |= p.pause.is_some();
                    let written = p.indexed && matches!(p.written, Some(Ok(_)));
                    match p.next {
                        Some(at) if written && self.beyond(at) && self.evictable(&p.key) => {
                            // Its next fire time is in the store's due index (this write).
                            self.jobs.remove(&p.key);
                            self.touch(&p.key);
                        }
                        Some(at) => self.jobs.schedule(&p.key, at),
                        None => {
                            self.jobs.remove(&p.key);
                        }
                    }
                }
            }
        }
    }

    /// The earliest time something is due: a queued tick or a hand-started execution.
    fn next_due(&self) -> Option<DateTime<Utc>> {
        earlier(self.jobs.next_due(), self.extras_next_due())
    }

    fn apply_result(&mut self, key: Arc<str>, generation: u64, attempt: Attempt) {
        let Some(entry) = self.jobs.get(&key) else {
            return;
        };
        if entry.generation != generation {
            // The job was overwritten or deleted while its trigger was out.
            return;
        }
        if matches!(entry.plan.policy().overlap, Overlap::Allow(_)) {
            self.overlapping_result(key, attempt);
            return;
        }
        if entry.state != State::InFlight {
            return;
        }
        let run = attempt.run(&key);
        let outcome = match attempt.report.result {
            // A 202 is a 2xx; held executions come here only once the app ended them.
            TriggerResult::Success | TriggerResult::Accepted | TriggerResult::Held => {
                Outcome::Success
            }
            TriggerResult::Failed => Outcome::Failed,
            TriggerResult::Cancel => {
                // The target wants no more of it: the job is finished and deleted.
                let counter = entry.counter;
                self.jobs.set_persisting(&key);
                self.push_result(Persisted {
                    run: Some(run),
                    ..Persisted::step(key, generation, counter, None)
                });
                return;
            }
            TriggerResult::Undeliverable
                if entry.plan.policy().while_target_down == WhileTargetDown::Skip =>
            {
                // `whileTargetDown: skip`: the tick is not held; the schedule moves on.
                let step = entry.plan.skip_tick(&entry.counter);
                self.outlet.metrics.skipped(Skip::TargetDown);
                self.jobs.set_persisting(&key);
                self.push_result(Persisted {
                    run: Some(StoredRun {
                        outcome: RunOutcome::Skipped.into(),
                        error: skip_reason(Skip::TargetDown).to_owned(),
                        ..run
                    }),
                    ..Persisted::step(key, generation, step.counter, step.next)
                });
                return;
            }
            TriggerResult::Undeliverable => {
                // Recorded (status and history), the progress left alone.
                self.push_result(Persisted {
                    run: Some(run),
                    record_only: true,
                    ..Persisted::step(key.clone(), generation, entry.counter, None)
                });
                if self.sink.is_deliverable(&key) {
                    // The target came back while this trigger was out: try again now.
                    self.target_back(&key);
                } else {
                    self.jobs.stage(&key);
                }
                return;
            }
        };
        let step = entry.plan.apply(&entry.counter, outcome);
        let waits = step.next.is_none() && entry.plan.waits_forever(&step.counter);
        // A failure that ends its tick: the failure policy is spent.
        let dropped = outcome == Outcome::Failed && step.counter.attempts == 0;
        let (pause, dead_letter) = if dropped {
            self.on_exhausted(&key, entry, &attempt, step.next)
        } else {
            (None, None)
        };
        let now = self.clock.now();
        // `overlap: skip | bufferOne`: the ticks that fell due while this one ran (its retries
        // included) are passed over; `bufferOne` keeps the latest of them, to run now.
        let keep = match entry.plan.policy().overlap {
            Overlap::Skip => Some(Keep::After(now)),
            Overlap::BufferOne => Some(Keep::Latest(now)),
            Overlap::Serial | Overlap::Allow(_) => None,
        };
        // A job paused now is not passed over: its catch-up policy decides on resume.
        let overlapped = keep
            .filter(|_| step.next.is_some() && pause.is_none())
            .and_then(|keep| entry.plan.pass_over(&step.counter, keep));
        self.jobs.set_persisting(&key);
        match overlapped {
            None => self.push_result(Persisted {
                run: Some(run),
                dropped,
                pause,
                dead_letter,
                waits,
                ..Persisted::step(key, generation, step.counter, step.next)
            }),
            Some((counter, skipped)) => {
                self.push_result(Persisted {
                    run: Some(run),
                    dropped,
                    dead_letter,
                    record_only: true,
                    ..Persisted::step(key.clone(), generation, step.counter, None)
                });
                self.skip_ticks(key, generation, counter, skipped, Skip::Overlap, now);
            }
        }
    }

    fn entry_of(&mut self, key: &str, job: StoredJob, plan: Plan, counter: Counter) -> Entry {
        // A new entry replaces one being disowned (the partition came back, e.g. after the
        // lease was lost): letting go of the old one must not drop the new one.
        for (keys, _) in &mut self.disowning {
            keys.retain(|k| &**k != key);
        }
        let metadata = job.metadata.unwrap_or_default();
        let prefix = keys::name_prefix(&metadata).unwrap_or_default();
        // The name is what follows the owner's prefix (names may contain `||`).
        let name_at = if key.starts_with(&prefix) {
            u32::try_from(prefix.len()).unwrap_or(0)
        } else {
            0
        };
        let created_by = (!job.traceparent.is_empty()).then(|| Arc::from(job.traceparent));
        self.incarnations = self.incarnations.wrapping_add(1);
        Entry {
            generation: job.generation,
            incarnation: self.incarnations,
            plan,
            counter,
            name_at,
            created_by,
            data: job.job.and_then(|j| j.data),
            metadata: self.owners.intern(&prefix, metadata),
            state: State::Persisting,
            overlapping: None,
            paused: false,
            concurrency_key: job
                .policy
                .as_ref()
                .map(|p| p.concurrency_key.as_str())
                .filter(|k| !k.is_empty())
                .map(Arc::from),
        }
    }

    /// Drops disowned entries whose trigger came back (their result is written, or they
    /// were queued again), and answers whoever waits for a set that is now empty.
    fn settle_disowning(&mut self) {
        if self.disowning.is_empty() {
            return;
        }
        let jobs = &mut self.jobs;
        for (keys, _) in &mut self.disowning {
            keys.retain(|key| match jobs.get(key).map(|e| e.state) {
                Some(State::InFlight | State::Persisting) => true,
                Some(_) => {
                    jobs.remove(key);
                    false
                }
                None => false,
            });
        }
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.disowning)
            .into_iter()
            .partition(|(keys, _)| keys.is_empty());
        self.disowning = waiting;
        for (_, reply) in done {
            let _ = reply.send(());
        }
    }
}

/// What every delivery task uses: where the trigger goes and where its answer is reported.
struct Outlet {
    sink: Arc<dyn Sink>,
    tx: mpsc::UnboundedSender<Command>,
    /// Times each attempt for its run record.
    clock: Arc<dyn Clock>,
    /// Lateness and outcome of every trigger.
    metrics: EngineMetrics,
}

/// One shared copy of each owner's metadata, so a million jobs of one app hold one.
#[derive(Default)]
struct Owners {
    /// Owner prefix → its metadata, while some entry still holds it.
    by_prefix: HashMap<String, Weak<sv1::JobMetadata>>,
    /// Map size after the last sweep of dead owners.
    swept_at: usize,
}

impl Owners {
    /// The shared metadata equal to `metadata` (registering it if new).
    fn intern(&mut self, prefix: &str, metadata: sv1::JobMetadata) -> Arc<sv1::JobMetadata> {
        if let Some(shared) = self.by_prefix.get(prefix).and_then(Weak::upgrade)
            && *shared == metadata
        {
            return shared;
        }
        let shared = Arc::new(metadata);
        self.by_prefix
            .insert(prefix.to_owned(), Arc::downgrade(&shared));
        if self.by_prefix.len() > 2 * self.swept_at.max(512) {
            self.by_prefix.retain(|_, w| w.strong_count() > 0);
            self.swept_at = self.by_prefix.len();
        }
        shared
    }
}
