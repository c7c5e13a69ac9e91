//! Remote mode: the sidecar forwards the Scheduler calls to Dapr Scheduler replicas (a real
//! `dapr scheduler` or `jobsd scheduler`) and receives triggers from them, as daprd does
//! (`dapr-jobs-api.md` §4.1–4.3, `pkg/runtime/scheduler`).
//!
//! - `hosts`: WatchHosts on a configured address names the replicas; each gets one channel.
//! - unary calls ([`Remote`] as the [`Scheduler`] seam) go to one replica, this sidecar's
//!   home (picked by its app id, so apps spread over the replicas), and move on to the next
//!   one when it cannot be reached or cancels; they wait (up to 30 s) until replicas are known
//!   and reachable, and are retried once on `Canceled` on the next replica. One home rather
//!   than round robin because every replica writes into the same etcd, where a txn costs far
//!   more than one more job in it: the home replica's writer batches the app's concurrent
//!   creates into one txn, where round robin would cut them into one txn per replica. A
//!   batch of creates (`ScheduleJobs`) fills a txn on its own, so batches go round the
//!   replicas from the home: their writers then commit into etcd side by side.
//!   Creates with jobsd's settings and jobsd's views go to `jobsd.scheduler.v1.Jobs`, which
//!   only a jobsd replica serves.
//! - `watch`: `--scheduler-job-streams` WatchJobs streams per replica, held while the app is
//!   deliverable; every trigger is delivered to the app and acknowledged on its stream.

mod actor_state;
mod address;
mod bulk;
mod calls;
mod coalesce;
mod concurrency;
#[cfg(test)]
mod fake;
mod hosts;
mod steer;
mod watch;

pub use address::{BadAddress, parse_addresses};
pub use watch::CONTEXT_METADATA;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::{Semaphore, watch as channel};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::transport::Channel;

use super::{Error, JobExtras, untravelled, untravelled_field};
use crate::clock::Clock;
use crate::proto::dapr_scheduler as sv1;
use crate::proto::dapr_scheduler::scheduler_client::SchedulerClient;
use crate::proto::jobsd_replica::{self as jsv1, jobs_client::JobsClient};
use crate::resiliency::backoff::{connect_backoff, jittered};
use crate::trigger::Sink;
use hosts::{Host, HostSet, Publisher};

/// How long one call may take, waiting for replicas included (daprd's `rpcTimeout`).
const RPC_TIMEOUT: Duration = Duration::from_secs(30);
/// How much sooner than [`RPC_TIMEOUT`] a call gives up: the API runs every call under the
/// same deadline, and the call's own answer (naming why no replica could be reached) must be
/// the one the app gets.
const ANSWER_MARGIN: Duration = Duration::from_millis(100);
/// Pause before the one retry of a `Canceled` call (daprd's wrapper: `250ms ± 125ms`).
const CANCELED_RETRY: Duration = Duration::from_millis(250);
/// Jitter of the pauses between attempts (`±50 %`, as daprd's).
const JITTER: f64 = 0.5;
/// Largest message either way, as daprd dials the Scheduler (`MaxInt32`).
const MAX_MESSAGE: usize = i32::MAX as usize;

/// Where the replicas are and who this sidecar is.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// `--scheduler-host-address` entries (`host:port`), not empty.
    pub addresses: Vec<String>,
    /// This sidecar's app id: the streams ask for its jobs.
    pub app_id: String,
    /// The app's namespace.
    pub namespace: String,
    /// WatchJobs streams per replica (`--scheduler-job-streams`).
    pub job_streams: usize,
    /// TLS to the replicas (`--scheduler-tls-*`); `None` = plaintext.
    pub tls: Option<crate::tls::ClientTls>,
    /// The actor types the app hosts (their reminders come on the job streams too); the
    /// streams reopen when it changes. `None`: app jobs only.
    pub actor_types: Option<channel::Receiver<Arc<Vec<String>>>>,
}

/// The Scheduler seam over Dapr Scheduler replicas; cheap to clone.
#[derive(Clone)]
pub struct Remote {
    /// State shared with every clone.
    shared: Arc<Shared>,
}

/// What the calls read.
struct Shared {
    /// The working set of replicas.
    hosts: channel::Receiver<Arc<HostSet>>,
    /// The working set as addresses (readiness, metadata).
    addresses: channel::Receiver<Vec<String>>,
    /// The home replica: its position in the working set (modulo its size).
    next: AtomicUsize,
    /// Batches sent so far: batch `n` goes to the replica `n` places after the home.
    batches: AtomicUsize,
    /// The batch number at which a replica last answered `ScheduleJobs` with Unimplemented
    /// (a Dapr Scheduler), plus one; 0 while none has. Until [`BATCH_PROBE`] batches later,
    /// batches go one by one without asking again.
    unbatched_at: AtomicUsize,
    /// WatchJobs streams open now (shared with the stream holder).
    open_streams: Arc<AtomicUsize>,
    /// Plain creates waiting to be sent together (`coalesce.rs`).
    coalescer: coalesce::Coalescer,
    /// Why discovery cannot reach the configured replicas, while it cannot.
    unreachable: channel::Receiver<Option<String>>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("hosts", &*self.shared.addresses.borrow())
            .finish_non_exhaustive()
    }
}

/// The background work of a [`Remote`]: host discovery and the job streams. Close it to stop
/// receiving triggers; calls keep working over the last known replicas.
#[derive(Debug)]
pub struct Connections {
    /// Stops discovery and closes the streams.
    stop: CancellationToken,
    /// The discovery and stream-holding tasks.
    tasks: TaskTracker,
}

impl Remote {
    /// Starts discovering replicas from `config.addresses` and, while `deliverable` is true,
    /// holding WatchJobs streams whose triggers go to `sink`. Must be called within a Tokio
    /// runtime.
    pub fn start(
        config: RemoteConfig,
        sink: Arc<dyn Sink>,
        deliverable: channel::Receiver<bool>,
        clock: Arc<dyn Clock>,
    ) -> (Remote, Connections) {
        let (hosts_tx, hosts) = channel::channel(Arc::new(HostSet::default()));
        let (addresses_tx, addresses) = channel::channel(Vec::new());
        let (unreachable_tx, unreachable) = channel::channel(None);
        let stop = CancellationToken::new();
        let tasks = TaskTracker::new();
        let open_streams = Arc::new(AtomicUsize::new(0));
        let home = home_of(&config.app_id);
        let context = Arc::new(watch::StreamContext {
            initial: sv1::WatchJobsRequestInitial {
                app_id: config.app_id,
                namespace: config.namespace,
                actor_types: Vec::new(),
                accept_job_types: vec![sv1::JobTargetType::Job.into()],
                concurrency_limits: Vec::new(),
            },
            actor_types: config
                .actor_types
                .unwrap_or_else(|| channel::channel(Arc::new(Vec::new())).1),
            sink,
            clock,
            in_flight: Arc::new(Semaphore::new(watch::MAX_IN_FLIGHT)),
            streams_per_host: config.job_streams,
            open_streams: open_streams.clone(),
        });
        tasks.spawn(hosts::discover(
            config.addresses,
            Publisher {
                hosts: hosts_tx,
                addresses: addresses_tx,
                tls: config.tls,
                unreachable: unreachable_tx,
            },
            stop.clone(),
        ));
        tasks.spawn(watch::hold(
            context,
            hosts.clone(),
            deliverable,
            stop.clone(),
        ));
        tasks.close();
        let remote = Remote {
            shared: Arc::new(Shared {
                hosts,
                addresses,
                next: AtomicUsize::new(home),
                batches: AtomicUsize::new(0),
                unbatched_at: AtomicUsize::new(0),
                open_streams,
                coalescer: coalesce::Coalescer::default(),
                unreachable,
            }),
        };
        (remote, Connections { stop, tasks })
    }

    /// The addresses of the replicas in use; empty until WatchHosts has named some (the
    /// sidecar is not ready until then).
    pub fn hosts(&self) -> channel::Receiver<Vec<String>> {
        self.shared.addresses.clone()
    }

    /// WatchJobs streams open now: `--scheduler-job-streams` per replica while the app is
    /// deliverable, 0 while it is not (or has no `--app-port`). A stream counts once the
    /// Scheduler has answered it.
    pub fn job_streams(&self) -> usize {
        self.shared.open_streams.load(Ordering::Relaxed)
    }

    /// The replica `offset` places after the home, and the home's position, waiting until
    /// `deadline` for one to be known.
    async fn next_host(&self, deadline: Instant, offset: usize) -> Result<(usize, Host), Error> {
        let mut hosts = self.shared.hosts.clone();
        let waited =
            tokio::time::timeout_at(deadline, hosts.wait_for(|s| !s.hosts.is_empty())).await;
        let set = match waited {
            Ok(Ok(set)) => set.clone(),
            Ok(Err(_)) => {
                return Err(Error::new(
                    tonic::Code::Unavailable,
                    "scheduler clients are closed",
                ));
            }
            Err(_) => return Err(deadline_exceeded()),
        };
        let at = self.shared.next.load(Ordering::Relaxed);
        Ok((
            at,
            set.hosts[at.wrapping_add(offset) % set.hosts.len()].clone(),
        ))
    }

    /// Makes the replica after the one at `at` the home, unless another call did already.
    fn move_on(&self, at: usize) {
        let _ = self.shared.next.compare_exchange(
            at,
            at.wrapping_add(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// One unary call with daprd's client semantics: a 30 s deadline; wait-for-ready (a
    /// replica that cannot be reached is retried, on the next one, until the deadline);
    /// one retry on `Canceled` on the next replica. Every other status is the answer.
    async fn call<R, T>(&self, request: R, rpc: Rpc<R, T>) -> Result<T, Error>
    where
        R: Clone + Send + 'static,
    {
        self.call_on(0, request, rpc).await
    }

    /// [`call`](Self::call) on the replica `offset` places after the home (and then on the
    /// ones after it).
    async fn call_on<R, T>(&self, offset: usize, request: R, rpc: Rpc<R, T>) -> Result<T, Error>
    where
        R: Clone + Send + 'static,
    {
        let deadline = Instant::now() + RPC_TIMEOUT - ANSWER_MARGIN;
        let mut canceled_retry_left = true;
        let mut backoff = connect_backoff();
        // Why the replicas could not be reached, for the answer when time runs out.
        let mut unreachable: Option<String> = None;
        let timed_out = |why: &Option<String>| match why
            .clone()
            .or_else(|| self.shared.unreachable.borrow().clone())
        {
            // grpc-go's wait-for-ready answer names the last connection error too.
            Some(why) => Error::new(
                tonic::Code::DeadlineExceeded,
                format!("context deadline exceeded; latest connection error: {why}"),
            ),
            None => deadline_exceeded(),
        };
        loop {
            let (at, host) = match self.next_host(deadline, offset).await {
                Err(e) if e.code == tonic::Code::DeadlineExceeded => {
                    return Err(timed_out(&unreachable));
                }
                other => other?,
            };
            let mut req = tonic::Request::new(request.clone());
            req.set_timeout(deadline.saturating_duration_since(Instant::now()));
            let status = match tokio::time::timeout_at(deadline, rpc(host.channel, req)).await {
                Err(_) => return Err(timed_out(&unreachable)),
                Ok(Ok(response)) => return Ok(response.into_inner()),
                Ok(Err(status)) => status,
            };
            let pause = if never_sent(&status) {
                self.move_on(at);
                tracing::debug!(address = %host.address, error = %status, "scheduler not reachable; waiting for it");
                let reason = format!("{}: {}", host.address, crate::tls::innermost(&status));
                unreachable = Some(hosts::telling(unreachable.as_deref(), reason));
                backoff.next_delay()
            } else if status.code() == tonic::Code::Cancelled && canceled_retry_left {
                self.move_on(at);
                canceled_retry_left = false;
                jittered(CANCELED_RETRY, JITTER, &mut fastrand::Rng::new())
            } else {
                return Err(status.into());
            };
            if tokio::time::timeout_at(deadline, tokio::time::sleep(pause))
                .await
                .is_err()
            {
                return Err(timed_out(&unreachable));
            }
        }
    }

    /// One create on the home replica, on its own: Dapr's `ScheduleJob` when Dapr's protocol
    /// can carry the job, jobsd's (refused, naming the field, by a Dapr Scheduler) when it has
    /// settings Dapr's `Job` lacks.
    async fn create_alone(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
    ) -> Result<(), Error> {
        let Some(field) = untravelled_field(&extras) else {
            return self
                .call(req, |ch, r| {
                    async move { client(ch).schedule_job(r).await }.boxed()
                })
                .await
                .map(drop);
        };
        let req = jsv1::ScheduleJobRequest {
            job: Some(req),
            labels: extras.labels.into_iter().collect(),
            policy: extras.policy,
            failure_policy: extras.failure_policy,
            traceparent: extras.traceparent.unwrap_or_default(),
        };
        self.call(req, |ch, r| {
            async move { jobsd_client(ch).schedule_job(r).await }.boxed()
        })
        .await
        .map(drop)
        .map_err(|err| {
            // A Dapr Scheduler has no such call: it ran nothing, so nothing is half stored,
            // and the settings are refused as one that cannot keep them refuses them.
            if err.code == tonic::Code::Unimplemented {
                untravelled(field)
            } else {
                err
            }
        })
    }

    /// Plain creates gathered by the sidecar (`coalesce.rs`), in one `ScheduleJobs` to the
    /// home replica, whose writer then merges concurrent calls into one txn.
    async fn send_creates(
        &self,
        reqs: Vec<sv1::ScheduleJobRequest>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let number = self.shared.batches.fetch_add(1, Ordering::Relaxed);
        let jobs = reqs
            .into_iter()
            .map(|req| (req, JobExtras::default()))
            .collect();
        self.batch_on(0, number, jobs).await
    }

    /// Batch `number` of `jobs` as one `ScheduleJobs` on the replica `offset` places after
    /// the home; to a replica without it (a Dapr Scheduler), each job on its own.
    async fn batch_on(
        &self,
        offset: usize,
        number: usize,
        jobs: Vec<(sv1::ScheduleJobRequest, JobExtras)>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let unbatched_at = self.shared.unbatched_at.load(Ordering::Relaxed);
        if unbatched_at != 0 && number.wrapping_sub(unbatched_at - 1) < BATCH_PROBE {
            return Ok(self.each(jobs).await);
        }
        let wire = jsv1::ScheduleJobsRequest {
            jobs: jobs
                .iter()
                .map(|(req, extras)| jsv1::ScheduleJobRequest {
                    job: Some(req.clone()),
                    labels: extras.labels.clone().into_iter().collect(),
                    policy: extras.policy.clone(),
                    failure_policy: extras.failure_policy.clone(),
                    traceparent: extras.traceparent.clone().unwrap_or_default(),
                })
                .collect(),
        };
        let n = jobs.len();
        let answer = self
            .call_on(offset, wire, |ch, r| {
                async move { jobsd_client(ch).schedule_jobs(r).await }.boxed()
            })
            .await;
        match answer {
            Ok(answer) => {
                let mut results: Vec<_> = answer
                    .results
                    .into_iter()
                    .map(|r| match r.code {
                        0 => Ok(()),
                        code => Err(Error::new(tonic::Code::from(code), r.message)),
                    })
                    .collect();
                let short = Error::new(
                    tonic::Code::Internal,
                    "the scheduler answered fewer jobs than it was sent",
                );
                results.resize(n, Err(short));
                results.truncate(n);
                Ok(results)
            }
            // A Dapr Scheduler (or an older jobsd) has no such call; it stored nothing.
            Err(e) if e.code == tonic::Code::Unimplemented => {
                self.shared
                    .unbatched_at
                    .store(number.wrapping_add(1), Ordering::Relaxed);
                Ok(self.each(jobs).await)
            }
            Err(e) => Err(e),
        }
    }

    /// `jobs` sent one by one, [`FORWARDED_IN_FLIGHT`](super::FORWARDED_IN_FLIGHT) at a time
    /// (straight, not gathered again into batches).
    async fn each(
        &self,
        jobs: Vec<(sv1::ScheduleJobRequest, JobExtras)>,
    ) -> Vec<Result<(), Error>> {
        use futures_util::StreamExt;
        futures_util::stream::iter(jobs)
            .map(|(req, extras)| self.create_alone(req, extras))
            .buffered(super::FORWARDED_IN_FLIGHT)
            .collect()
            .await
    }
}

impl Connections {
    /// Stops discovery and closes every stream: deliveries in flight finish and are
    /// acknowledged first. Bounded: returns after a few seconds at most.
    pub async fn close(self) {
        self.stop.cancel();
        let bound = watch::DELIVERY_GRACE + Duration::from_secs(3);
        if tokio::time::timeout(bound, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("scheduler connections did not close in time");
        }
    }
}

/// Batches sent one by one, without asking, after a replica answered `ScheduleJobs` with
/// Unimplemented; the next one asks again (the replicas may have been upgraded meanwhile).
const BATCH_PROBE: usize = 64;

/// The first home replica of app `app_id`'s sidecars: a stable spread of apps over replicas.
fn home_of(app_id: &str) -> usize {
    app_id.bytes().fold(0usize, |h, b| {
        h.wrapping_mul(31).wrapping_add(usize::from(b))
    })
}

/// One rpc on a replica's channel, boxed so one retry loop serves all of them.
type Rpc<R, T> =
    fn(Channel, tonic::Request<R>) -> BoxFuture<'static, Result<tonic::Response<T>, tonic::Status>>;

/// A Scheduler client over `channel` with daprd's message size limits.
fn client(channel: Channel) -> SchedulerClient<Channel> {
    SchedulerClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE)
}

/// A client of jobsd's side of a replica (`jobsd.scheduler.v1.Jobs`) over `channel`.
fn jobsd_client(channel: Channel) -> JobsClient<Channel> {
    JobsClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE)
}

/// grpc-go's error when a call's context runs out.
fn deadline_exceeded() -> Error {
    Error::new(tonic::Code::DeadlineExceeded, "context deadline exceeded")
}

/// Whether the call failed before it reached the replica (no connection): only then is
/// retrying safe for a create-only `ScheduleJob`, which is what wait-for-ready retries.
fn never_sent(status: &tonic::Status) -> bool {
    let mut cause = std::error::Error::source(status);
    while let Some(err) = cause {
        if err.is::<tonic::ConnectError>() {
            return true;
        }
        cause = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seam::{ListFilter, Pausing, Scheduler, Views};

    #[tokio::test]
    async fn a_refused_connection_counts_as_never_sent_and_a_status_does_not() {
        // A port nobody listens on: bind, learn the port, close.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let channel = hosts::endpoint(&address, None).unwrap().connect_lazy();
        let status = client(channel)
            .get_job(sv1::GetJobRequest::default())
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(never_sent(&status), "{status:?}");
        assert!(!never_sent(&tonic::Status::unavailable("replica says no")));
    }

    /// A sink that is never called: the app is not deliverable, so no stream opens.
    struct NoApp;

    #[async_trait::async_trait]
    impl Sink for NoApp {
        async fn deliver(&self, _: crate::trigger::Trigger) -> crate::trigger::TriggerResult {
            crate::trigger::TriggerResult::Undeliverable
        }
        fn is_deliverable(&self, _: &str) -> bool {
            false
        }
    }

    /// A `Remote` of app `myapp` over the replicas at `addresses`, whose app is never
    /// deliverable (so it opens no job stream).
    pub(super) fn undeliverable(addresses: Vec<String>) -> (Remote, Connections) {
        let (_deliverable_tx, deliverable) = channel::channel(false);
        Remote::start(
            RemoteConfig {
                addresses,
                app_id: "myapp".into(),
                namespace: "default".into(),
                job_streams: 1,
                actor_types: None,
                tls: None,
            },
            Arc::new(NoApp),
            deliverable,
            Arc::new(crate::clock::SystemClock),
        )
    }

    /// Plain creates go to the home replica (gathered into `ScheduleJobs` calls); batches go
    /// round the replicas from it, so that their txns are written side by side.
    #[tokio::test]
    async fn batches_spread_over_the_replicas_and_single_creates_stay_home() {
        let fakes: Vec<Arc<fake::Fake>> = (0..3)
            .map(|_| {
                Arc::new(fake::Fake {
                    on_schedule: Some(|_| Ok(())),
                    ..Default::default()
                })
            })
            .collect();
        let mut served = Vec::new();
        for f in &fakes {
            served.push(fake::serve(f.clone()).await);
        }
        let (remote, connections) =
            undeliverable(served.iter().map(|s| s.address.clone()).collect());
        let create = |name: &str| sv1::ScheduleJobRequest {
            name: name.into(),
            ..Default::default()
        };
        for i in 0..6 {
            let batch = vec![(create(&format!("b{i}")), JobExtras::default())];
            let results = remote.schedule_jobs(batch).await.unwrap();
            assert!(results.iter().all(Result::is_ok), "{results:?}");
        }
        let batches: Vec<usize> = fakes
            .iter()
            .map(|f| f.batches.load(Ordering::SeqCst))
            .collect();
        assert_eq!(batches, [2, 2, 2], "two batches on each replica");
        for i in 0..4 {
            remote.schedule_job(create(&format!("s{i}"))).await.unwrap();
        }
        let singles: Vec<usize> = fakes
            .iter()
            .map(|f| f.batches.load(Ordering::SeqCst) - 2)
            .collect();
        assert_eq!(
            singles.iter().sum::<usize>(),
            4,
            "one at a time: one call each"
        );
        assert_eq!(
            singles.iter().filter(|&&n| n == 4).count(),
            1,
            "every single create on the home replica: {singles:?}"
        );
        let jobs: usize = fakes.iter().map(|f| f.jobs.load(Ordering::SeqCst)).sum();
        assert_eq!(jobs, 10);
        connections.close().await;
        for s in served {
            s.stop().await;
        }
    }

    /// A replica without `ScheduleJobs` (a Dapr Scheduler) is asked once: the batches after
    /// go one by one at once, until `BATCH_PROBE` batches later, which asks again.
    #[tokio::test]
    async fn a_replica_without_batches_is_asked_once_per_probe_interval() {
        let dapr = Arc::new(fake::Fake {
            on_schedule: Some(|_| Ok(())),
            no_batches: true,
            ..Default::default()
        });
        let served = fake::serve(dapr.clone()).await;
        let (remote, connections) = undeliverable(vec![served.address.clone()]);
        let two = || {
            (0..2)
                .map(|i| {
                    let req = sv1::ScheduleJobRequest {
                        name: format!("j{i}"),
                        ..Default::default()
                    };
                    (req, JobExtras::default())
                })
                .collect::<Vec<_>>()
        };
        for _ in 0..BATCH_PROBE + 1 {
            let results = remote.schedule_jobs(two()).await.unwrap();
            assert!(results.iter().all(Result::is_ok), "{results:?}");
        }
        assert_eq!(
            dapr.batches.load(Ordering::SeqCst),
            2,
            "asked by the first batch and by the one {BATCH_PROBE} later"
        );
        assert_eq!(dapr.schedule.load(Ordering::SeqCst), 2 * (BATCH_PROBE + 1));
        connections.close().await;
        served.stop().await;
    }

    #[tokio::test]
    async fn canceled_is_retried_once_and_other_errors_are_the_answer() {
        // A Dapr Scheduler: `GetJob` is `Canceled` once, `ListJobs` always, `ScheduleJob` is
        // `AlreadyExists`; no `ScheduleJobs` and no WatchHosts, so the configured address is
        // the replica.
        let flaky = Arc::new(fake::Fake {
            no_batches: true,
            on_schedule: Some(|_| Err(tonic::Status::already_exists("job already exists: 'x'"))),
            on_get: Some(|n| match n {
                0 => Err(tonic::Status::cancelled("context canceled")),
                _ => Ok(sv1::Job {
                    schedule: Some("@daily".into()),
                    ..Default::default()
                }),
            }),
            on_list: Some(|_| Err(tonic::Status::cancelled("context canceled"))),
            ..Default::default()
        });
        let served = fake::serve(flaky.clone()).await;
        let (remote, connections) = undeliverable(vec![served.address.clone()]);

        let job = remote.get_job(sv1::GetJobRequest::default()).await.unwrap();
        assert_eq!(job.schedule.as_deref(), Some("@daily"));
        assert_eq!(
            flaky.get.load(Ordering::SeqCst),
            2,
            "one retry after Canceled"
        );

        let err = remote
            .list_jobs(sv1::ListJobsRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::Cancelled);
        assert_eq!(flaky.list.load(Ordering::SeqCst), 2, "only one retry");

        let err = remote
            .schedule_job(sv1::ScheduleJobRequest::default())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "rpc error: code = AlreadyExists desc = job already exists: 'x'"
        );
        assert_eq!(flaky.schedule.load(Ordering::SeqCst), 1, "not retried");
        assert_eq!(remote.job_streams(), 0);

        // jobsd's settings: a Dapr Scheduler has no call for them. Refused naming the field,
        // and Dapr's ScheduleJob is not tried instead (it would store the job without them).
        let extras = JobExtras {
            policy: Some(crate::proto::jobsd_api::JobPolicy {
                timeout: "5s".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let err = remote
            .schedule_job_with(sv1::ScheduleJobRequest::default(), extras)
            .await
            .unwrap_err();
        assert_eq!(err, untravelled("policy"));
        assert_eq!(flaky.schedule.load(Ordering::SeqCst), 1, "nothing sent");
        // Without them (a trace context alone included) it is Dapr's call, as before.
        let extras = JobExtras {
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
            ..Default::default()
        };
        let err = remote
            .schedule_job_with(sv1::ScheduleJobRequest::default(), extras)
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::AlreadyExists);
        assert_eq!(flaky.schedule.load(Ordering::SeqCst), 2);

        // A Dapr Scheduler serves no jobsd views: refused, saying why.
        let err = remote
            .job_view(sv1::JobMetadata::default(), "x".into())
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::FailedPrecondition);
        assert!(err.message.contains("need jobsd's scheduler"), "{err}");
        let err = remote
            .list_views(sv1::JobMetadata::default(), ListFilter::default())
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::FailedPrecondition);
        // Nor does it pause jobs: refused too, saying why.
        let err = remote
            .pause_job(sv1::JobMetadata::default(), "x".into(), String::new())
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::FailedPrecondition);
        assert!(err.message.contains("needs jobsd's scheduler"), "{err}");
        let err = remote
            .resume_job(sv1::JobMetadata::default(), "x".into())
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::FailedPrecondition);
        // Nor many at once.
        let some = crate::seam::Selection {
            name_prefix: "x".into(),
            labels: Vec::new(),
        };
        let err = remote
            .pause_jobs(sv1::JobMetadata::default(), some.clone(), String::new())
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::FailedPrecondition);
        assert!(
            err.message.starts_with("pausing and resuming jobs needs"),
            "{err}"
        );
        let err = remote
            .resume_jobs(sv1::JobMetadata::default(), some)
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::FailedPrecondition);
        assert_eq!(remote.sync().await, None, "no trigger loop here");

        connections.close().await;
        served.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn calls_wait_for_hosts_until_the_deadline() {
        let (_tx, hosts) = channel::channel(Arc::new(HostSet::default()));
        let (_atx, addresses) = channel::channel(Vec::new());
        let (unreachable_tx, unreachable) = channel::channel(None);
        let remote = Remote {
            shared: Arc::new(Shared {
                hosts,
                addresses,
                next: AtomicUsize::new(0),
                batches: AtomicUsize::new(0),
                unbatched_at: AtomicUsize::new(0),
                open_streams: Arc::default(),
                coalescer: coalesce::Coalescer::default(),
                unreachable,
            }),
        };
        let started = Instant::now();
        let err = remote
            .get_job(sv1::GetJobRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err, deadline_exceeded());
        // Just before the API's own deadline, so that this answer is the one given.
        assert_eq!(started.elapsed(), RPC_TIMEOUT - ANSWER_MARGIN);

        // Discovery could not reach the configured replicas: the answer says why.
        unreachable_tx.send_replace(Some(
            "h:50006: invalid peer certificate: UnknownIssuer".into(),
        ));
        let err = remote
            .get_job(sv1::GetJobRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::DeadlineExceeded);
        assert_eq!(
            err.message,
            "context deadline exceeded; latest connection error: \
             h:50006: invalid peer certificate: UnknownIssuer"
        );
    }
}
