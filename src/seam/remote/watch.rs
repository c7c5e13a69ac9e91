//! Receiving triggers: daprd's WatchJobs connectors (`dapr-jobs-api.md` §4.2). While the app
//! can take triggers, every replica gets `--scheduler-job-streams` streams; each trigger a
//! stream brings is delivered to the app in its own task and acknowledged on the same stream.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::hosts::{Host, HostSet, diff};
use super::{JITTER, client};
use crate::clock::Clock;
use crate::proto::dapr_scheduler as sv1;
use crate::resiliency::backoff::jittered;
use crate::trigger::{ExecutionId, Sink, Trigger, TriggerKind, TriggerResult, keys};

/// Wait before reopening a stream that failed or ended (`500ms ± 250ms`, see [`JITTER`]).
const RECONNECT: Duration = Duration::from_millis(500);
/// How long a closing stream waits for the deliveries in flight, so their acks still go out.
pub(super) const DELIVERY_GRACE: Duration = Duration::from_secs(5);
/// How long a closing stream waits for the Scheduler to end it after our last ack, so the
/// acks are on the wire before the connection forgets the stream.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Acks queued per stream before the deliveries wait for the Scheduler to read them.
const ACK_BUFFER: usize = 256;
/// Triggers delivered at once over all streams: past this, streams stop reading and HTTP/2
/// flow control holds the Scheduler back, so a flood cannot grow tasks without bound.
pub(super) const MAX_IN_FLIGHT: usize = 4096;

/// What every stream of this sidecar shares.
pub(super) struct StreamContext {
    /// Sent first on every stream; `actor_types` and `accept_job_types` are filled in from
    /// [`StreamContext::actor_types`] when the stream opens.
    pub initial: sv1::WatchJobsRequestInitial,
    /// The actor types the app hosts now (its reminders come on these streams too).
    pub actor_types: watch::Receiver<Arc<Vec<String>>>,
    /// Where triggers go (the app's delivery).
    pub sink: Arc<dyn Sink>,
    /// Stamps triggers: the stream does not say when a trigger was due.
    pub clock: Arc<dyn Clock>,
    /// Bounds the deliveries in flight over all streams.
    pub in_flight: Arc<Semaphore>,
    /// Streams per replica.
    pub streams_per_host: usize,
    /// Streams the Scheduler has answered and that are still open.
    pub open_streams: Arc<AtomicUsize>,
}

/// Counts a stream as open for as long as it lives.
struct OpenStream(Arc<AtomicUsize>);

impl OpenStream {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        OpenStream(count.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Holds the streams until `stop`: to every replica of the working set while `deliverable`
/// is true, to none while it is false (daprd's StartApp / StopApp). Streams of replicas that
/// leave the set, and all streams when the app stops being deliverable, close gracefully:
/// deliveries in flight finish and are acknowledged first. On `stop`, waits (bounded) for
/// every stream to close.
pub(super) async fn hold(
    ctx: Arc<StreamContext>,
    mut hosts: watch::Receiver<Arc<HostSet>>,
    mut deliverable: watch::Receiver<bool>,
    stop: CancellationToken,
) {
    let tracker = TaskTracker::new();
    // Streams by replica address; each token closes that replica's streams.
    let mut open: BTreeMap<Arc<str>, CancellationToken> = BTreeMap::new();
    let mut hosts_live = true;
    let mut deliverable_live = true;
    let mut actor_types = ctx.actor_types.clone();
    actor_types.borrow_and_update();
    let mut actor_types_live = true;
    loop {
        let wanted: Vec<Host> = if *deliverable.borrow_and_update() {
            hosts.borrow_and_update().hosts.clone()
        } else {
            hosts.borrow_and_update();
            Vec::new()
        };
        let current: Vec<&str> = open.keys().map(AsRef::as_ref).collect();
        let wanted_addresses: Vec<&str> = wanted.iter().map(|h| h.address.as_ref()).collect();
        let change = diff(&current, &wanted_addresses);
        for address in &change.removed {
            if let Some(token) = open.remove(address.as_str()) {
                tracing::debug!(%address, "closing job streams");
                token.cancel();
            }
        }
        for host in wanted
            .iter()
            .filter(|h| change.added.iter().any(|a| a.as_str() == &*h.address))
        {
            let token = stop.child_token();
            tracing::debug!(address = %host.address, streams = ctx.streams_per_host, "opening job streams");
            for index in 0..ctx.streams_per_host {
                tracker.spawn(run(ctx.clone(), host.clone(), index, token.clone()));
            }
            open.insert(host.address.clone(), token);
        }
        // A watch whose sender is gone never changes again; waiting on it would spin.
        tokio::select! {
            () = stop.cancelled() => break,
            changed = hosts.changed(), if hosts_live => hosts_live = changed.is_ok(),
            changed = deliverable.changed(), if deliverable_live => {
                deliverable_live = changed.is_ok();
            }
            changed = actor_types.changed(), if actor_types_live => {
                actor_types_live = changed.is_ok();
                if actor_types_live {
                    // The initial message names the actor types: reopen every stream so
                    // the Scheduler learns the new set (daprd reconnects the same way).
                    tracing::debug!(types = ?*actor_types.borrow_and_update(), "actor types changed; reopening job streams");
                    for (_, token) in std::mem::take(&mut open) {
                        token.cancel();
                    }
                }
            }
        }
    }
    tracker.close();
    let bound = DELIVERY_GRACE + CLOSE_GRACE + Duration::from_secs(1);
    if tokio::time::timeout(bound, tracker.wait()).await.is_err() {
        tracing::warn!("job streams did not close in time");
    }
}

/// One stream slot: open, receive until it fails or `stop`, reopen after a jittered pause.
async fn run(ctx: Arc<StreamContext>, host: Host, index: usize, stop: CancellationToken) {
    let mut failures = 0u32;
    loop {
        match session(&ctx, &host, &stop).await {
            Ok(Ended::Stopped) => return,
            Ok(Ended::ByScheduler) => {
                failures = 0;
                tracing::debug!(address = %host.address, index, "job stream ended by the scheduler");
            }
            Err(status) => {
                failures += 1;
                // One line when a replica goes away, not one every half second.
                if failures == 1 {
                    tracing::warn!(address = %host.address, index, error = %status, "job stream failed; reconnecting");
                } else {
                    tracing::debug!(address = %host.address, index, error = %status, "job stream failed again");
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(jittered(RECONNECT, JITTER, &mut fastrand::Rng::new())) => {}
        }
    }
}

/// How a stream that did not fail ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// We closed it (`stop`).
    Stopped,
    /// The Scheduler ended it.
    ByScheduler,
}

/// One WatchJobs stream from `initial` to its end.
async fn session(
    ctx: &Arc<StreamContext>,
    host: &Host,
    stop: &CancellationToken,
) -> Result<Ended, tonic::Status> {
    // One queue per stream funnels the initial message and every ack: gRPC allows one sender.
    let (acks, outbound) = mpsc::channel(ACK_BUFFER);
    let initial = sv1::WatchJobsRequest {
        watch_job_request_type: Some(sv1::watch_jobs_request::WatchJobRequestType::Initial(
            initial_message(&ctx.initial, &ctx.actor_types.borrow()),
        )),
    };
    if acks.try_send(initial).is_err() {
        // A fresh queue always has room; nothing to do but report it.
        return Err(tonic::Status::internal("cannot queue the initial message"));
    }
    let mut client = client(host.channel.clone());
    // A Go Scheduler may send its response headers only with the first trigger, so this can
    // wait for as long as there is nothing to deliver.
    let opened = tokio::select! {
        () = stop.cancelled() => return Ok(Ended::Stopped),
        opened = client.watch_jobs(asking_context(ReceiverStream::new(outbound))) => opened?,
    };
    let _open = OpenStream::new(&ctx.open_streams);
    let mut inbound = opened.into_inner();
    let handlers = TaskTracker::new();
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => break,
            message = inbound.message() => message,
        };
        // Deliveries of a stream that died go on; their acks find no stream and the
        // Scheduler redelivers those triggers elsewhere (at least once).
        let job = match message {
            Ok(Some(job)) => job,
            Ok(None) => return Ok(Ended::ByScheduler),
            Err(status) => return Err(status),
        };
        let permit = tokio::select! {
            () = stop.cancelled() => break,
            permit = ctx.in_flight.clone().acquire_owned() => permit,
        };
        let Ok(permit) = permit else {
            // The semaphore is never closed; a trigger left unacked is redelivered.
            continue;
        };
        tracing::debug!(address = %host.address, job = %job.name, id = job.id, "trigger received");
        let ctx = ctx.clone();
        let acks = acks.clone();
        let channel = host.channel.clone();
        handlers.spawn(async move {
            let _permit = permit;
            let ack = deliver(&ctx, job, channel).await;
            // No stream any more: the Scheduler resolves the trigger on its side.
            let _ = acks.send(ack).await;
        });
    }
    // Closing on purpose (shutdown, app unhealthy, replica gone): triggers already received
    // are finished and acknowledged, so none is delivered twice.
    handlers.close();
    if tokio::time::timeout(DELIVERY_GRACE, handlers.wait())
        .await
        .is_err()
    {
        tracing::warn!(address = %host.address, "deliveries still running at stream close; their triggers will be redelivered");
    }
    drop(acks);
    // Our side is done once every ack is queued; waiting for the Scheduler's end of the
    // stream lets the acks reach it. Triggers that arrive meanwhile stay unacked and are
    // redelivered when the stream closes.
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        while let Ok(Some(_)) = inbound.message().await {}
    })
    .await;
    Ok(Ended::Stopped)
}

/// Delivers one trigger and builds its ack. The app's answer decides: SUCCESS, or FAILED for
/// a failed call and for anything the delivery could not take (daprd's app-channel errors
/// are FAILED too; the stream protocol has no UNDELIVERABLE).
///
/// A reminder the actor cancelled (`X-DaprReminderCancel`) is acked SUCCESS and deleted on
/// the Scheduler, as daprd does: the stream protocol has no "cancel" result.
async fn deliver(
    ctx: &StreamContext,
    job: sv1::WatchJobsResponse,
    channel: tonic::transport::Channel,
) -> sv1::WatchJobsRequest {
    let id = job.id;
    let cancel_request = sv1::DeleteJobRequest {
        name: job.name.clone(),
        metadata: job.metadata.clone(),
    };
    let name = job.name.clone();
    let result = ctx.sink.deliver(trigger(job, ctx.clock.as_ref())).await;
    if result == TriggerResult::Held {
        // Holding would need the Scheduler to wait for an ack it cannot be told about; the
        // attempt fails (its failure policy decides) rather than being taken as done.
        tracing::error!(
            job = %name,
            "the app answered Jobsd-Async (async completion), which needs jobsd's embedded \
             scheduler and is not available with --scheduler-host-address; the attempt fails"
        );
    }
    if result == TriggerResult::Cancel {
        tokio::spawn(async move {
            if let Err(e) = client(channel).delete_job(cancel_request).await {
                tracing::warn!(error = %e, "deleting a cancelled reminder failed");
            }
        });
    }
    ack(id, result)
}

/// The initial message of a stream: app jobs, and the reminders of `actor_types` when the
/// app hosts any.
pub(super) fn initial_message(
    base: &sv1::WatchJobsRequestInitial,
    actor_types: &[String],
) -> sv1::WatchJobsRequestInitial {
    let mut initial = base.clone();
    initial.actor_types = actor_types.to_vec();
    initial.accept_job_types = vec![sv1::JobTargetType::Job.into()];
    if !actor_types.is_empty() {
        initial
            .accept_job_types
            .push(sv1::JobTargetType::ActorReminder.into());
    }
    initial
}

/// The ack for trigger `id` with `result`.
pub(super) fn ack(id: u64, result: TriggerResult) -> sv1::WatchJobsRequest {
    let status = result.to_wire();
    sv1::WatchJobsRequest {
        watch_job_request_type: Some(sv1::watch_jobs_request::WatchJobRequestType::Result(
            sv1::WatchJobsRequestResult {
                id,
                status: status.into(),
            },
        )),
    }
}

/// The trigger a received job stands for. Metadata the Scheduler left out stays empty, and
/// the delivery fails such a trigger rather than guessing its owner.
pub(super) fn trigger(job: sv1::WatchJobsResponse, clock: &dyn Clock) -> Trigger {
    let metadata = job.metadata.unwrap_or_default();
    let key = match keys::name_prefix(&metadata) {
        Ok(prefix) => prefix + &job.name,
        Err(_) => job.name.clone(),
    };
    // Dapr's WatchJobs message carries neither the tick nor the attempt: the execution is
    // named by the arrival time, each arrival an attempt of its own. A jobsd replica adds
    // them (`jobsd_tick`, asked for by `asking_context`), so its triggers name the same
    // execution on every retry and every replica.
    let now = clock.now();
    let tick = job.jobsd_tick.and_then(|t| {
        chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0))
    });
    let kind = TriggerKind::parse(&job.jobsd_trigger).unwrap_or_default();
    let execution_id = match tick {
        Some(tick) => ExecutionId::for_execution(&key, tick, kind),
        None => ExecutionId::for_tick(&key, now),
    };
    Trigger {
        execution_id,
        key: key.into(),
        name: job.name.into(),
        data: job.data,
        metadata: Arc::new(metadata),
        scheduled_at: now,
        tick,
        kind,
        attempt: job.jobsd_attempt.max(1),
        created_by: None,
    }
}

/// Metadata a jobsd sidecar opens its WatchJobs streams with: a jobsd replica then adds the
/// execution context to each trigger; a Dapr Scheduler ignores it.
pub const CONTEXT_METADATA: &str = "jobsd-execution-context";

/// `stream` as a WatchJobs request asking for the execution context.
fn asking_context<T>(stream: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(stream);
    request.metadata_mut().insert(
        CONTEXT_METADATA,
        tonic::metadata::AsciiMetadataValue::from_static("1"),
    );
    request
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::clock::ManualClock;
    use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
    use crate::proto::dapr_scheduler::watch_jobs_request::WatchJobRequestType;

    fn result_of(req: &sv1::WatchJobsRequest) -> (u64, i32) {
        match &req.watch_job_request_type {
            Some(WatchJobRequestType::Result(r)) => (r.id, r.status),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[test]
    fn only_success_acks_success() {
        let success = sv1::WatchJobsRequestResultStatus::Success as i32;
        let failed = sv1::WatchJobsRequestResultStatus::Failed as i32;
        assert_eq!(result_of(&ack(7, TriggerResult::Success)), (7, success));
        assert_eq!(result_of(&ack(8, TriggerResult::Failed)), (8, failed));
        assert_eq!(
            result_of(&ack(9, TriggerResult::Undeliverable)),
            (9, failed)
        );
    }

    #[test]
    fn trigger_carries_name_data_metadata_and_the_composed_key() {
        let now = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        let clock = ManualClock::new(now);
        let metadata = sv1::JobMetadata {
            app_id: "myapp".into(),
            namespace: "default".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        };
        let data = prost_types::Any {
            type_url: "type.googleapis.com/google.protobuf.Value".into(),
            value: vec![1, 2],
        };
        let t = trigger(
            sv1::WatchJobsResponse {
                name: "job1".into(),
                id: 3,
                data: Some(data.clone()),
                metadata: Some(metadata.clone()),
                ..Default::default()
            },
            &clock,
        );
        assert_eq!(&*t.key, "app||default||myapp||job1");
        assert_eq!(&*t.name, "job1");
        assert_eq!(t.data, Some(data));
        assert_eq!(*t.metadata, metadata);
        assert_eq!(t.scheduled_at, now);

        // No metadata from the peer: no owner to build a key from, and no target, so the
        // delivery fails it instead of calling the app.
        let t = trigger(
            sv1::WatchJobsResponse {
                name: "orphan".into(),
                ..Default::default()
            },
            &clock,
        );
        assert_eq!(&*t.key, "orphan");
        assert!(t.metadata.target.is_none());
    }
}
