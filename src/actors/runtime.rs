//! The single-host actor runtime: hosted types, one turn at a time per actor, method calls,
//! reminder deliveries, idle deactivation (timers are in `timers.rs`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use bytes::Bytes;
use chrono::{DateTime, TimeDelta, Utc};
use http::{HeaderMap, Method, StatusCode};
use tokio::sync::{Notify, OwnedMutexGuard, watch};
use tokio_util::sync::CancellationToken;

use super::ActorRef;
use super::calls::not_found;
use super::calls::{self, json_headers};
use super::config::{ConfigError, Hosted};
use super::placement::{Peers, Placement, Route};
use super::reminders::{NewReminder, Reminder, ReminderError, SchedulerReminders};
use super::timers::{Fire, NewTimer, Timers};
use crate::clock::Clock;
use crate::delivery::{self, Keep};
use crate::observe::otlp::{Attempt, Kind, Spans};
use crate::observe::trace::{TRACEPARENT, TraceParent};
use crate::resiliency::backoff;
use crate::schedule::period::TimerError;
use crate::trigger::{Trigger, TriggerResult};

/// Why an actor call failed; the API turns each into daprd's error for its route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActorError {
    /// The app does not host this actor type (or has said nothing yet).
    #[error("actor type {0} is not hosted by this app")]
    NotHosted(String),
    /// There is no app channel (`--app-port` not given, or a gRPC app).
    #[error("app channel is not initialized")]
    NoApp,
    /// No scheduler is attached for reminders (daprd's text for a sidecar without one).
    #[error("reminder scheduler is not configured")]
    NoReminders,
    /// The reminder call failed.
    #[error(transparent)]
    Reminder(#[from] ReminderError),
    /// The timer cannot be registered.
    #[error(transparent)]
    Timer(#[from] TimerError),
    /// The method call failed (transport, or an answer other than 200); daprd's text.
    #[error("{0}")]
    Call(String),
    /// The actor moved to another host while its call waited or ran here: the call is
    /// cancelled and made again where the actor lives now.
    #[error("remote actor moved")]
    Moved,
    /// The sidecar hosting the actor answered with this status: gRPC callers get it as it
    /// is, HTTP callers in Go's words (`rpc error: code = … desc = …`), as daprd's do.
    #[error("rpc error: code = {} desc = {}", crate::seam::go_code_name(*.code), .message)]
    Remote {
        /// Its code.
        code: tonic::Code,
        /// Its message.
        message: String,
    },
}

/// A method call to an actor, as the API received it.
#[derive(Debug, Clone, Default)]
pub struct MethodCall {
    /// The actor.
    pub actor: ActorRef,
    /// The method name.
    pub method: String,
    /// The caller's query string, forwarded.
    pub query: Option<String>,
    /// The caller's headers, forwarded (daprd copies them into the call's metadata).
    pub headers: HeaderMap,
    /// The body, passed through.
    pub body: Bytes,
}

/// The app's answer to a method call: status, headers and body, passed back to the caller.
#[derive(Debug, Clone)]
pub struct MethodAnswer {
    /// The status (200, or the app's own with `X-DaprErrorResponseHeader`).
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// How the runtime reaches the app and the scheduler.
pub struct RuntimeConfig {
    /// The app's HTTP channel; `None` without `--app-port` or for a gRPC app (actors need
    /// the HTTP channel, as the Dapr SDKs' actor runtimes serve HTTP).
    pub app: Option<delivery::Http>,
    /// Whether the app passes its health checks (always true without checks).
    pub app_healthy: watch::Receiver<bool>,
    /// Time, for idle deactivation and timers.
    pub clock: Arc<dyn Clock>,
    /// Where each reminder delivery's span goes (`--otlp-endpoint`); `None` = no spans.
    pub spans: Option<Spans>,
}

/// The single-host actor runtime. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct ActorRuntime {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    /// The app's HTTP channel.
    app: Option<delivery::Http>,
    /// App health (from delivery's probes).
    app_healthy: watch::Receiver<bool>,
    /// Where reminders are kept: attached once the scheduler exists (which needs this
    /// runtime as its reminders' sink first).
    reminders: OnceLock<Arc<SchedulerReminders>>,
    /// Time.
    pub(super) clock: Arc<dyn Clock>,
    /// Where reminder deliveries' spans go; `None` = no spans.
    spans: Option<Spans>,
    /// The types hosted, as the app last said; published so remote mode can register them
    /// on its job streams and the wiring can release staged reminders.
    hosted: watch::Sender<Arc<Hosted>>,
    /// The names of the hosted types, sorted; changes only when the set does.
    types: watch::Sender<Arc<Vec<String>>>,
    /// Whether reminders can be delivered now: the app's config is read and the app was
    /// reachable at the last call. A failed connection clears it until the config is read
    /// again (the loader notices).
    ready: watch::Sender<bool>,
    /// `true` once the app's config has been read (or the hosted types set) at least once:
    /// calls that come before wait for it, as daprd's actor lookups wait for placement.
    configured: watch::Sender<bool>,
    /// Active actors.
    actors: Mutex<HashMap<ActorRef, Arc<Slot>>>,
    /// `(deactivate at, actor)` of every active actor, earliest first.
    idle: Mutex<BTreeSet<(DateTime<Utc>, ActorRef)>>,
    /// Wakes the deactivation loop when an earlier deadline is queued.
    idle_changed: Notify,
    /// In-memory timers.
    timers: Timers,
    /// The placement client and connections to other sidecars, once attached
    /// (`--placement-host-address`): actors live across hosts (see `placement/`).
    pub(super) placement: OnceLock<(Placement, Peers)>,
}

/// One active actor.
struct Slot {
    /// The actor's turn: one call at a time (methods, reminders, timers), FIFO. The flag is
    /// set once the actor is deactivated: a waiter that gets the turn then starts over with
    /// a fresh activation.
    turn: Arc<tokio::sync::Mutex<bool>>,
    /// The deadline this actor is queued under in `idle`.
    idle_at: Mutex<Option<DateTime<Utc>>>,
    /// Cancelled when the actor moved to another host and its drain time ran out: the call
    /// in its turn stops.
    moved: CancellationToken,
}

/// Holding an actor's turn; the idle deadline restarts when it ends.
pub(super) struct Turn {
    /// The turn itself.
    _guard: OwnedMutexGuard<bool>,
    /// Whose turn.
    actor: ActorRef,
    /// Its slot.
    slot: Arc<Slot>,
    /// To requeue the idle deadline.
    runtime: ActorRuntime,
}

impl Turn {
    /// Resolves when the actor moved to another host and its call must stop.
    fn moved(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.slot.moved.cancelled()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.runtime.requeue_idle(&self.actor, &self.slot);
    }
}

/// How many times a call follows an actor that moved before it gives up.
const MOVED_TRIES: u32 = 3;

/// How long a call made before the app's config was first read waits for it.
const CONFIG_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ActorRuntime {
    /// A runtime hosting nothing until the app's `/dapr/config` is read ([`ActorRuntime::start`]).
    pub fn new(cfg: RuntimeConfig) -> Self {
        ActorRuntime {
            inner: Arc::new(Inner {
                app: cfg.app,
                app_healthy: cfg.app_healthy,
                reminders: OnceLock::new(),
                clock: cfg.clock,
                spans: cfg.spans,
                hosted: watch::Sender::new(Arc::new(Hosted::default())),
                types: watch::Sender::new(Arc::new(Vec::new())),
                ready: watch::Sender::new(false),
                configured: watch::Sender::new(false),
                actors: Mutex::default(),
                idle: Mutex::default(),
                idle_changed: Notify::new(),
                timers: Timers::default(),
                placement: OnceLock::new(),
            }),
        }
    }

    /// A runtime with no app (it hosts nothing until [`ActorRuntime::set_hosted`]) over
    /// `reminders`: for tools and tests of the reminder API.
    pub fn without_app(reminders: Arc<SchedulerReminders>, clock: Arc<dyn Clock>) -> Self {
        let runtime = ActorRuntime::new(RuntimeConfig {
            app: None,
            app_healthy: watch::channel(false).1,
            clock,
            spans: None,
        });
        runtime.attach_reminders(reminders);
        runtime
    }

    /// Reads the app's actor config now and whenever the app turns healthy or unreachable,
    /// and deactivates idle actors, until `stop`.
    pub fn start(&self, stop: CancellationToken) {
        if self.inner.app.is_some() {
            tokio::spawn(self.clone().load_config(stop.clone()));
        }
        tokio::spawn(self.clone().deactivate_idle(stop));
    }

    /// The types hosted now, and each later change.
    pub fn hosted(&self) -> watch::Receiver<Arc<Hosted>> {
        self.inner.hosted.subscribe()
    }

    /// Whether reminders can be delivered now, and each later change.
    pub fn ready(&self) -> watch::Receiver<bool> {
        self.inner.ready.subscribe()
    }

    /// Whether a reminder of `actor_type` can be delivered now (otherwise it is staged).
    pub fn deliverable(&self, actor_type: &str) -> bool {
        *self.inner.ready.borrow() && self.inner.hosted.borrow().hosts(actor_type)
    }

    /// Attaches where reminders are kept; the first call wins.
    pub fn attach_reminders(&self, reminders: Arc<SchedulerReminders>) {
        if self.inner.reminders.set(reminders).is_err() {
            tracing::warn!("actor reminders already attached; ignoring another store");
        }
    }

    /// Where reminders are kept.
    fn reminders(&self) -> Result<&Arc<SchedulerReminders>, ActorError> {
        self.inner.reminders.get().ok_or(ActorError::NoReminders)
    }

    /// The names of the hosted types now, and each later change of the set.
    pub fn actor_types(&self) -> watch::Receiver<Arc<Vec<String>>> {
        self.inner.types.subscribe()
    }

    /// Publishes the hosted types (and their names, when the set changed).
    fn publish_hosted(&self, hosted: Hosted) {
        let names: Vec<String> = hosted.types.keys().cloned().collect();
        self.inner.hosted.send_replace(Arc::new(hosted));
        self.inner
            .configured
            .send_if_modified(|c| !std::mem::replace(c, true));
        self.inner.types.send_if_modified(|types| {
            if **types == names {
                false
            } else {
                *types = Arc::new(names);
                true
            }
        });
    }

    /// Whether `actor` is active on this host (daprd's `table.ActorExists`).
    pub fn is_active(&self, actor: &ActorRef) -> bool {
        lock(&self.inner.actors).contains_key(actor)
    }

    /// Active actors (for tests and tools).
    pub fn active(&self) -> usize {
        lock(&self.inner.actors).len()
    }

    /// Active actors of each hosted type (every hosted type listed, 0 included), by type name.
    pub fn active_by_type(&self) -> Vec<(String, usize)> {
        let mut counts: std::collections::BTreeMap<String, usize> = self
            .inner
            .types
            .borrow()
            .iter()
            .map(|t| (t.clone(), 0))
            .collect();
        for actor in lock(&self.inner.actors).keys() {
            *counts.entry(actor.actor_type.to_string()).or_default() += 1;
        }
        counts.into_iter().collect()
    }

    /// Hosts exactly `hosted` (tests; the app's `/dapr/config` otherwise).
    pub fn set_hosted(&self, hosted: Hosted) {
        self.publish_hosted(hosted);
        self.inner.ready.send_replace(true);
    }

    /// Until the app's config is first read (an app that is still starting), waits for it,
    /// up to [`CONFIG_WAIT`]: a call made just after the sidecar and the app start together
    /// (`dapr run`) then finds the app's types, as daprd's does (its actor lookups wait for
    /// the placement table). Without an app there is nothing to wait for.
    async fn await_config(&self) {
        if self.inner.app.is_none() {
            return;
        }
        let mut configured = self.inner.configured.subscribe();
        let _ = tokio::time::timeout(CONFIG_WAIT, configured.wait_for(|c| *c)).await;
    }

    async fn check_hosted(&self, actor_type: &str) -> Result<(), ActorError> {
        self.await_config().await;
        if self.inner.hosted.borrow().hosts(actor_type) {
            Ok(())
        } else {
            Err(ActorError::NotHosted(actor_type.to_owned()))
        }
    }

    // ---- reminders (the API's calls; the trait does the work) ----

    /// Registers a reminder of a hosted actor.
    pub async fn create_reminder(&self, reminder: NewReminder) -> Result<(), ActorError> {
        self.check_hosted(&reminder.actor.actor_type).await?;
        Ok(self.reminders()?.create(reminder).await?)
    }

    /// Every check a reminder call makes before it reaches the scheduler: the type is hosted,
    /// a scheduler is attached and (for a create) the period parses. daprd makes them on a
    /// request whose path holds bytes that are not UTF-8 before its Scheduler call fails.
    pub async fn check_reminder_call(
        &self,
        actor_type: &str,
        period: Option<Option<&str>>,
    ) -> Result<(), ActorError> {
        self.check_hosted(actor_type).await?;
        self.reminders()?;
        if let Some(period) = period {
            crate::schedule::period::reminder_schedule(period).map_err(ReminderError::from)?;
        }
        Ok(())
    }

    /// A reminder of a hosted actor (`None`: there is none).
    pub async fn get_reminder(
        &self,
        actor: &ActorRef,
        name: &str,
    ) -> Result<Option<Reminder>, ActorError> {
        self.check_hosted(&actor.actor_type).await?;
        Ok(self.reminders()?.get(actor, name).await?)
    }

    /// Deletes a reminder of a hosted actor.
    pub async fn delete_reminder(&self, actor: &ActorRef, name: &str) -> Result<(), ActorError> {
        self.check_hosted(&actor.actor_type).await?;
        Ok(self.reminders()?.delete(actor, name).await?)
    }

    /// The reminders of a hosted type, or of one actor of it.
    pub async fn list_reminders(
        &self,
        actor_type: &str,
        actor_id: Option<&str>,
    ) -> Result<Vec<Reminder>, ActorError> {
        self.check_hosted(actor_type).await?;
        Ok(self.reminders()?.list(actor_type, actor_id).await?)
    }

    /// Deletes the reminders of a hosted type, or of one actor of it.
    pub async fn delete_reminders(
        &self,
        actor_type: &str,
        actor_id: Option<&str>,
    ) -> Result<(), ActorError> {
        self.check_hosted(actor_type).await?;
        Ok(self
            .reminders()?
            .delete_all(actor_type, actor_id, false)
            .await?)
    }

    // ---- timers ----

    /// Registers (or replaces) a timer of a hosted actor.
    pub fn create_timer(&self, timer: NewTimer) -> Result<(), ActorError> {
        if !self.inner.hosted.borrow().hosts(&timer.actor.actor_type) {
            return Err(ActorError::Call(format!(
                "can't create timer for actor {}: actor type not registered",
                timer.actor
            )));
        }
        let plan = timer.plan(self.inner.clock.now())?;
        self.inner.timers.start(
            Arc::new(self.clone()),
            self.inner.clock.clone(),
            timer,
            plan,
        );
        Ok(())
    }

    /// Deletes a timer; a missing one is fine.
    pub fn delete_timer(&self, actor: &ActorRef, name: &str) {
        self.inner.timers.stop(actor, name);
    }

    /// Timers running (for tests and tools).
    pub fn timers(&self) -> usize {
        self.inner.timers.len()
    }

    // ---- calls to the app ----

    /// Calls an actor method: on this host (below), or, with placement, on the host the
    /// actor lives on.
    pub async fn invoke(&self, call: MethodCall) -> Result<MethodAnswer, ActorError> {
        let mut tries = 0;
        loop {
            tries += 1;
            let result = match self.locate(&call.actor).await {
                Some(Route::Remote(host, peers)) => {
                    self.invoke_remote(&host, &peers, call.clone()).await
                }
                Some(Route::Nowhere) => Err(not_found(&call.actor)),
                Some(Route::Local) | None => self.invoke_local(call.clone()).await,
            };
            // Moved while the call waited or ran (here, or on the host it went to): once
            // the tables say where the actor is now, the call goes there.
            let moved = match &result {
                Err(ActorError::Moved) => true,
                Err(ActorError::Remote { message, .. }) => {
                    message == super::placement::remote::MOVED
                }
                _ => false,
            };
            if !moved || tries >= MOVED_TRIES {
                return result;
            }
        }
    }

    /// Calls an actor method here: the app's `PUT /actors/<type>/<id>/method/<method>` in
    /// the actor's turn. Only a 200 is a success (daprd's contract), or an answer carrying
    /// `X-DaprErrorResponseHeader`, which is handed back as it is.
    pub(crate) async fn invoke_local(&self, call: MethodCall) -> Result<MethodAnswer, ActorError> {
        let app = self.inner.app.as_ref().ok_or(ActorError::NoApp)?;
        self.await_config().await;
        if !self.inner.hosted.borrow().hosts(&call.actor.actor_type) {
            return Err(not_found(&call.actor));
        }
        let mut path = calls::method_path(&call.actor, &call.method);
        if let Some(q) = call.query.as_deref().filter(|q| !q.is_empty()) {
            path.push('?');
            path.push_str(q);
        }
        let turn = self.turn(&call.actor).await;
        let answer = tokio::select! {
            answer = app.send(Method::PUT, path, call.headers, call.body, Keep::Body) => answer,
            () = turn.moved() => return Err(ActorError::Moved),
        }
        .map_err(|e| ActorError::Call(e.to_string()))?;
        if answer.status == StatusCode::OK
            || answer.headers.contains_key("x-daprerrorresponseheader")
        {
            return Ok(MethodAnswer {
                status: answer.status,
                headers: answer.headers,
                body: answer.body,
            });
        }
        if answer.status == StatusCode::NOT_FOUND {
            return Err(ActorError::Call(format!(
                "actor method not found: actors/{}/{}/method/{}",
                call.actor.actor_type, call.actor.actor_id, call.method
            )));
        }
        Err(ActorError::Call(format!(
            "error from actor service: ({}) {}",
            answer.status.as_u16(),
            String::from_utf8_lossy(&answer.body)
        )))
    }

    /// Delivers a reminder trigger: here (below), or, with placement, to the host the actor
    /// lives on.
    pub async fn remind(&self, trigger: &Trigger) -> TriggerResult {
        let Some(actor) = actor_of(trigger) else {
            tracing::warn!(key = %trigger.key, "reminder without an actor target");
            return TriggerResult::Failed;
        };
        match self.locate(&actor).await {
            Some(Route::Remote(host, peers)) => {
                self.remind_remote(&host, &peers, &actor, trigger).await
            }
            Some(Route::Nowhere) => TriggerResult::Undeliverable,
            Some(Route::Local) | None => self.remind_local(trigger).await,
        }
    }

    /// Delivers a reminder trigger here: the app's `PUT …/method/remind/<name>` in the actor's
    /// turn. 200 is a success, 200 with `X-DaprReminderCancel` a cancel (the reminder is
    /// deleted), anything else a failure for the reminder's failure policy; with no app
    /// config yet, a type not hosted or an app that cannot be reached, the trigger is staged
    /// until the app is back.
    pub(crate) async fn remind_local(&self, trigger: &Trigger) -> TriggerResult {
        let Some(actor) = actor_of(trigger) else {
            tracing::warn!(key = %trigger.key, "reminder without an actor target");
            return TriggerResult::Failed;
        };
        let Some(app) = self.inner.app.as_ref() else {
            return TriggerResult::Undeliverable;
        };
        if !self.deliverable(&actor.actor_type) {
            return TriggerResult::Undeliverable;
        }
        let path = calls::method_path(&actor, &format!("remind/{}", trigger.name));
        let body = calls::remind_body(trigger.data.as_ref());
        let trace = TraceParent::for_attempt(&trigger.execution_id);
        let mut headers = json_headers();
        headers.insert(TRACEPARENT, trace.header_value());
        delivery::http::insert_context(&mut headers, &crate::trigger::context::headers(trigger));
        let turn = self.turn(&actor).await;
        let started = self.inner.spans.as_ref().map(Spans::begin);
        let answer = tokio::select! {
            answer = app.send(Method::PUT, path, headers, body, Keep::Status) => answer,
            // Moved while the tick ran: a failure, retried where the actor is now.
            () = turn.moved() => return TriggerResult::Failed,
        };
        let (result, error) = match answer {
            Ok(answer) if calls::cancels(answer.status, &answer.headers) => {
                (TriggerResult::Cancel, None)
            }
            Ok(answer) if answer.status == StatusCode::OK => (TriggerResult::Success, None),
            Ok(answer) => {
                tracing::debug!(actor = %actor, reminder = %trigger.name, status = %answer.status,
                    "reminder failed");
                let status = answer.status.as_u16();
                (
                    TriggerResult::Failed,
                    Some(delivery::Error::HttpStatus(status)),
                )
            }
            Err(delivery::Error::Transport(e)) => {
                tracing::warn!(actor = %actor, reminder = %trigger.name, error = %e,
                    "app unreachable; reminders wait for it");
                self.inner.ready.send_replace(false);
                (
                    TriggerResult::Undeliverable,
                    Some(delivery::Error::Transport(e)),
                )
            }
            Err(e) => {
                tracing::warn!(actor = %actor, reminder = %trigger.name, error = %e, "reminder failed");
                (TriggerResult::Failed, Some(e))
            }
        };
        if let Some((spans, started)) = self.inner.spans.as_ref().zip(started) {
            spans.record(Attempt {
                kind: Kind::Reminder,
                trigger,
                trace: &trace,
                started,
                outcome: result.outcome(),
                error: error.map(|e| e.to_string()),
            });
        }
        result
    }

    /// Calls a timer's callback in the actor's turn; errors are logged and the timer goes
    /// on, as in daprd.
    async fn fire_timer(&self, actor: &ActorRef, name: &str, body: Bytes) {
        let Some(app) = self.inner.app.as_ref() else {
            return;
        };
        if !self.deliverable(&actor.actor_type) {
            tracing::debug!(actor = %actor, timer = name, "app not ready; timer tick skipped");
            return;
        }
        let path = calls::method_path(actor, &format!("timer/{name}"));
        let _turn = self.turn(actor).await;
        match app
            .send(Method::PUT, path, json_headers(), body, Keep::Status)
            .await
        {
            Ok(a) if a.status == StatusCode::OK => {}
            Ok(a) => {
                tracing::debug!(actor = %actor, timer = name, status = %a.status, "timer call failed")
            }
            Err(e) => {
                tracing::debug!(actor = %actor, timer = name, error = %e, "timer call failed")
            }
        }
    }

    // ---- turns and idle deactivation ----

    /// Waits for `actor`'s turn, activating it if it is not active.
    pub(super) async fn turn(&self, actor: &ActorRef) -> Turn {
        loop {
            let slot = {
                let mut actors = lock(&self.inner.actors);
                actors
                    .entry(actor.clone())
                    .or_insert_with(|| {
                        Arc::new(Slot {
                            turn: Arc::new(tokio::sync::Mutex::new(false)),
                            idle_at: Mutex::new(None),
                            moved: CancellationToken::new(),
                        })
                    })
                    .clone()
            };
            let guard = slot.turn.clone().lock_owned().await;
            if *guard {
                // Deactivated while we waited: the next lookup activates a fresh one.
                continue;
            }
            return Turn {
                _guard: guard,
                actor: actor.clone(),
                slot,
                runtime: self.clone(),
            };
        }
    }

    /// Queues `actor`'s deactivation one idle timeout from now.
    fn requeue_idle(&self, actor: &ActorRef, slot: &Slot) {
        let timeout = self.inner.hosted.borrow().idle_timeout(&actor.actor_type);
        let at =
            self.inner.clock.now() + TimeDelta::from_std(timeout).unwrap_or(TimeDelta::MAX / 2);
        let mut idle_at = lock(&slot.idle_at);
        let mut idle = lock(&self.inner.idle);
        if let Some(old) = idle_at.take() {
            idle.remove(&(old, actor.clone()));
        }
        let earliest = idle.first().is_none_or(|(first, _)| at < *first);
        idle.insert((at, actor.clone()));
        *idle_at = Some(at);
        drop(idle);
        drop(idle_at);
        if earliest {
            self.inner.idle_changed.notify_one();
        }
    }

    /// Deactivates actors whose idle deadline passed: each in its turn, with the app's
    /// `DELETE /actors/<type>/<id>`. Busy actors are skipped: their turn requeues them.
    async fn deactivate_idle(self, stop: CancellationToken) {
        loop {
            let next = lock(&self.inner.idle).first().map(|(at, _)| *at);
            let clock = self.inner.clock.clone();
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.inner.idle_changed.notified() => continue,
                () = async {
                    match next {
                        Some(at) => clock.sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
            let now = self.inner.clock.now();
            let due: Vec<(DateTime<Utc>, ActorRef)> = {
                let mut idle = lock(&self.inner.idle);
                let mut due = Vec::new();
                while idle.first().is_some_and(|(at, _)| *at <= now) {
                    if let Some(entry) = idle.pop_first() {
                        due.push(entry);
                    }
                }
                due
            };
            for (at, actor) in due {
                self.deactivate(&actor, at).await;
            }
        }
    }

    /// Deactivates `actor`, which moved to another host, once the call in its turn (if any)
    /// ends, or is cancelled after the app's drain time (`drainOngoingCallTimeout`).
    pub(super) async fn deactivate_moved(&self, actor: &ActorRef) {
        let Some(slot) = lock(&self.inner.actors).get(actor).cloned() else {
            return;
        };
        let drain = self.inner.hosted.borrow().drain;
        let mut guard = match tokio::time::timeout(drain, slot.turn.clone().lock_owned()).await {
            Ok(guard) => guard,
            Err(_) => {
                tracing::debug!(actor = %actor, ?drain, "moved actor's call cancelled after its drain time");
                slot.moved.cancel();
                slot.turn.clone().lock_owned().await
            }
        };
        if *guard {
            return;
        }
        if let Some(at) = lock(&slot.idle_at).take() {
            lock(&self.inner.idle).remove(&(at, actor.clone()));
        }
        *guard = true;
        lock(&self.inner.actors).remove(actor);
        self.delete_in_app(actor).await;
        drop(guard);
    }

    /// The active actors.
    pub(super) fn active_actors(&self) -> Vec<ActorRef> {
        lock(&self.inner.actors).keys().cloned().collect()
    }

    async fn deactivate(&self, actor: &ActorRef, at: DateTime<Utc>) {
        let Some(slot) = lock(&self.inner.actors).get(actor).cloned() else {
            return;
        };
        let Ok(mut guard) = slot.turn.clone().try_lock_owned() else {
            // In a turn: it requeues itself when the turn ends.
            return;
        };
        {
            let mut idle_at = lock(&slot.idle_at);
            if *idle_at != Some(at) {
                return;
            }
            *idle_at = None;
        }
        *guard = true;
        lock(&self.inner.actors).remove(actor);
        self.delete_in_app(actor).await;
        drop(guard);
    }

    /// The app's `DELETE /actors/<type>/<id>`.
    async fn delete_in_app(&self, actor: &ActorRef) {
        if let Some(app) = &self.inner.app {
            let result = app
                .send(
                    Method::DELETE,
                    calls::actor_path(actor),
                    HeaderMap::new(),
                    Bytes::new(),
                    Keep::Status,
                )
                .await;
            match result {
                Ok(a) if a.status == StatusCode::OK => {
                    tracing::debug!(actor = %actor, "actor deactivated");
                }
                Ok(a) => {
                    tracing::debug!(actor = %actor, status = %a.status, "deactivation answered")
                }
                Err(e) => tracing::debug!(actor = %actor, error = %e, "deactivation failed"),
            }
        }
    }

    // ---- the app's actor config ----

    /// Reads `GET /dapr/config` until the app answers, then again whenever the app turns
    /// healthy after being unhealthy, or a reminder found it unreachable.
    async fn load_config(self, stop: CancellationToken) {
        let mut healthy = self.inner.app_healthy.clone();
        let mut ready = self.inner.ready.subscribe();
        loop {
            // Wait until the app is healthy and the config needs reading.
            loop {
                let need = !*ready.borrow_and_update() && *healthy.borrow_and_update();
                if need {
                    break;
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    r = healthy.changed() => if r.is_err() { return },
                    r = ready.changed() => if r.is_err() { return },
                }
            }
            let mut delays = backoff::connect_backoff();
            loop {
                match self.read_config().await {
                    Ok(hosted) => {
                        tracing::info!(types = ?hosted.types.keys().collect::<Vec<_>>(), "actor types hosted");
                        self.publish_hosted(hosted);
                        self.inner.ready.send_replace(true);
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "app actor config not read yet");
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(delays.next_delay()) => {}
                        }
                    }
                }
            }
            // A later unhealthy → healthy edge reads the config again.
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    r = healthy.changed() => if r.is_err() { return },
                    r = ready.changed() => if r.is_err() { return },
                }
                if !*healthy.borrow_and_update() {
                    self.inner.ready.send_replace(false);
                }
                if !*ready.borrow_and_update() {
                    break;
                }
            }
        }
    }

    /// One `GET /dapr/config`. Any answer but a transport failure counts: a non-200 means
    /// the app hosts no actors (daprd's empty config).
    async fn read_config(&self) -> Result<Hosted, ConfigRead> {
        let app = self.inner.app.as_ref().ok_or(ConfigRead::NoApp)?;
        let answer = app
            .send(
                Method::GET,
                "/dapr/config".to_owned(),
                json_headers(),
                Bytes::new(),
                Keep::Body,
            )
            .await
            .map_err(|e| ConfigRead::Unreachable(e.to_string()))?;
        if answer.status != StatusCode::OK {
            return Ok(Hosted::default());
        }
        match Hosted::from_json(&answer.body) {
            Ok(hosted) => Ok(hosted),
            Err(e @ ConfigError::IdleTimeout(_)) => {
                tracing::error!(error = %e, "the app's actors cannot be registered");
                Ok(Hosted::default())
            }
            Err(e) => {
                tracing::warn!(error = %e, "the app's /dapr/config is not valid JSON; no actors");
                Ok(Hosted::default())
            }
        }
    }
}

/// Why the config could not be read (retried).
#[derive(Debug, thiserror::Error)]
enum ConfigRead {
    #[error("no app channel")]
    NoApp,
    #[error("app unreachable: {0}")]
    Unreachable(String),
}

/// The actor a reminder trigger is for.
fn actor_of(trigger: &Trigger) -> Option<ActorRef> {
    match trigger.metadata.target.as_ref()?.r#type.as_ref()? {
        crate::proto::dapr_scheduler::job_target_metadata::Type::Actor(a) => {
            Some(ActorRef::new(&a.r#type, &a.id))
        }
        crate::proto::dapr_scheduler::job_target_metadata::Type::Job(_) => None,
    }
}

#[async_trait::async_trait]
impl Fire for ActorRuntime {
    async fn fire(&self, actor: &ActorRef, name: &str, body: Bytes) {
        self.fire_timer(actor, name, body).await;
    }
}
