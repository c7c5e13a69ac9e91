//! Plain creates sent together: the sidecar → replica hop pipelined.
//!
//! Every Dapr create (`ScheduleJob`, no jobsd settings) waits in one queue; [`IN_FLIGHT`]
//! calls may be out at once, each carrying what was queued when it left (up to [`MOST`]) as one
//! `jobsd.scheduler.v1.Jobs/ScheduleJobs` to the home replica. A create that finds a call
//! slot free leaves at once, alone: an idle app's create waits for nothing. Under load the
//! creates that arrive while the calls are out leave together in the next one, so the
//! replica's writer gets them in one request (one etcd txn) and both sides spend one gRPC
//! call on many creates.
//!
//! Each create gets the answer its own `ScheduleJob` would have got: the replica checks and
//! stores every job of a batch as it would a single create (in order: two creates of one
//! name in a batch are answered as if sent one after the other, as they could have been),
//! and answers each with its status code and message, which is all the sidecar keeps of a
//! replica's error. A replica without `ScheduleJobs` (a Dapr Scheduler) gets each create as
//! Dapr's `ScheduleJob` instead, asked again every [`BATCH_PROBE`](super::BATCH_PROBE)
//! batches as [`Remote::schedule_jobs`](super::Remote) does.
//!
//! A call, once out, runs to its end on a task of its own: a caller that gives up (its client
//! went away) never takes the answers of the creates sent with it down with it. A create
//! whose caller gave up before it was sent is not sent.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::{Error, Remote};
use crate::proto::dapr_scheduler as sv1;

/// Create calls one sidecar keeps out at once.
pub(super) const IN_FLIGHT: usize = 2;
/// Most creates one call carries.
pub(super) const MOST: usize = 256;

/// The queue of creates waiting for a call, and the call slots.
pub(super) struct Coalescer {
    /// Creates not sent yet, oldest first.
    queue: Mutex<VecDeque<Pending>>,
    /// One permit per call slot.
    slots: Arc<Semaphore>,
}

/// One create waiting for its answer.
struct Pending {
    /// The create.
    req: sv1::ScheduleJobRequest,
    /// Where its caller waits.
    reply: oneshot::Sender<Result<(), Error>>,
}

impl Default for Coalescer {
    fn default() -> Self {
        Coalescer {
            queue: Mutex::new(VecDeque::new()),
            slots: Arc::new(Semaphore::new(IN_FLIGHT)),
        }
    }
}

impl Coalescer {
    /// Up to [`MOST`] of the oldest creates queued whose callers still wait (a create whose
    /// caller gave up before it was sent is dropped unsent).
    fn take(&self) -> Vec<Pending> {
        let mut queue = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut batch = Vec::new();
        while batch.len() < MOST {
            match queue.pop_front() {
                Some(pending) if pending.reply.is_closed() => {}
                Some(pending) => batch.push(pending),
                None => break,
            }
        }
        batch
    }

    /// Creates queued, their callers gone or not.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.queue.lock().map_or(0, |q| q.len())
    }

    /// Queues a create.
    fn push(&self, pending: Pending) {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push_back(pending);
    }
}

impl Remote {
    /// Stores `req` as Dapr's `ScheduleJob` would, sent with the creates queued beside it.
    pub(super) async fn create_coalesced(&self, req: sv1::ScheduleJobRequest) -> Result<(), Error> {
        let coalescer = &self.shared.coalescer;
        let (reply, mut answer) = oneshot::channel();
        coalescer.push(Pending { req, reply });
        loop {
            tokio::select! {
                biased;
                got = &mut answer => return got.unwrap_or_else(|_| Err(closed())),
                slot = Arc::clone(&coalescer.slots).acquire_owned() => {
                    let Ok(slot) = slot else { return Err(closed()) };
                    let batch = coalescer.take();
                    if batch.is_empty() {
                        // Another caller's call took this create: its answer comes.
                        drop(slot);
                        return answer.await.unwrap_or_else(|_| Err(closed()));
                    }
                    tokio::spawn(self.clone().send(batch, slot));
                }
            }
        }
    }

    /// Sends `batch` in one call and answers each create; `slot` is free again after.
    async fn send(self, batch: Vec<Pending>, slot: OwnedSemaphorePermit) {
        let (reqs, replies): (Vec<_>, Vec<_>) = batch.into_iter().map(|p| (p.req, p.reply)).unzip();
        let answers = self.send_creates(reqs).await;
        drop(slot);
        match answers {
            Ok(answers) => {
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(answer);
                }
            }
            Err(err) => {
                for reply in replies {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
    }
}

/// The answer of a create whose call was lost (the sidecar is stopping).
fn closed() -> Error {
    Error::new(tonic::Code::Unavailable, "scheduler clients are closed")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::super::tests::undeliverable;
    use super::super::{Connections, fake};
    use super::*;
    use crate::seam::Scheduler;

    fn create(name: &str) -> sv1::ScheduleJobRequest {
        sv1::ScheduleJobRequest {
            name: name.into(),
            ..Default::default()
        }
    }

    /// `fake` served, and a sidecar's calls to it.
    async fn on(fake: fake::Fake) -> (Arc<fake::Fake>, fake::Served, Remote, Connections) {
        let fake = Arc::new(fake);
        let served = fake::serve(fake.clone()).await;
        let (remote, connections) = undeliverable(vec![served.address.clone()]);
        (fake, served, remote, connections)
    }

    /// A replica that takes 100 ms over each `ScheduleJobs`, so creates queue behind the
    /// calls out.
    fn slow() -> fake::Fake {
        fake::Fake {
            slow_batches: true,
            ..Default::default()
        }
    }

    /// Creates `name` on a task of its own.
    fn spawn_create(remote: &Remote, name: String) -> tokio::task::JoinHandle<Result<(), Error>> {
        let remote = remote.clone();
        tokio::spawn(async move { remote.schedule_job(create(&name)).await })
    }

    /// Many creates at once leave in a few calls, each answered; an idle create leaves alone
    /// at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_creates_go_to_the_replica_in_few_calls() {
        let (replica, served, remote, connections) = on(slow()).await;
        remote.schedule_job(create("first")).await.unwrap();
        assert_eq!(replica.batches.load(Ordering::SeqCst), 1);
        assert_eq!(replica.jobs.load(Ordering::SeqCst), 1);

        let creates: Vec<_> = (0..200)
            .map(|i| spawn_create(&remote, format!("j{i}")))
            .collect();
        for create in creates {
            create.await.unwrap().unwrap();
        }
        let calls = replica.batches.load(Ordering::SeqCst) - 1;
        assert_eq!(replica.jobs.load(Ordering::SeqCst), 201);
        assert!(
            calls <= 200 / 4,
            "200 creates sent in {calls} calls, at least 4 per call expected"
        );
        assert_eq!(
            replica.schedule.load(Ordering::SeqCst),
            0,
            "no single ScheduleJob"
        );
        connections.close().await;
        served.stop().await;
    }

    /// Each create gets its own answer: a job the replica refuses fails alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_create_gets_its_own_answer() {
        let (_, served, remote, connections) = on(slow()).await;
        let name = |i| {
            if i % 8 == 0 {
                format!("exists{i}")
            } else {
                format!("j{i}")
            }
        };
        let creates: Vec<_> = (0..64).map(|i| spawn_create(&remote, name(i))).collect();
        for (i, create) in creates.into_iter().enumerate() {
            let answer = create.await.unwrap();
            if i % 8 == 0 {
                let err = answer.unwrap_err();
                assert_eq!(err.code, tonic::Code::AlreadyExists);
                assert_eq!(err.message, format!("job already exists: 'exists{i}'"));
            } else {
                answer.unwrap();
            }
        }
        connections.close().await;
        served.stop().await;
    }

    /// A caller that gives up does not take the answers of the creates sent with it, and a
    /// create given up before it was sent is not sent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_caller_that_gives_up_leaves_the_others_answered() {
        let (replica, served, remote, connections) = on(slow()).await;
        let spawn = |name: String| spawn_create(&remote, name);
        let coalescer = &remote.shared.coalescer;
        // A call out in every slot (the replica takes 100 ms over each).
        let mut busy = Vec::new();
        for i in 0..IN_FLIGHT {
            busy.push(spawn(format!("b{i}")));
            wait_for(|| replica.batches.load(Ordering::SeqCst) == i + 1).await;
        }
        // Creates that wait for a slot; then the callers of the calls out give up, and so do
        // half of the waiting ones.
        let queued: Vec<_> = (0..16).map(|i| spawn(format!("q{i}"))).collect();
        wait_for(|| coalescer.queued() == 16).await;
        for task in busy.iter().chain(queued.iter().step_by(2)) {
            task.abort();
        }
        for (i, task) in queued.into_iter().enumerate() {
            match task.await {
                Ok(answer) => answer.unwrap(),
                Err(e) => assert!(e.is_cancelled() && i % 2 == 0, "create {i}: {e}"),
            }
        }
        // The calls of the callers that gave up still ran; the 8 given up unsent never left.
        wait_for(|| replica.jobs.load(Ordering::SeqCst) == IN_FLIGHT + 8).await;
        assert_eq!(
            replica.batches.load(Ordering::SeqCst),
            IN_FLIGHT + 1,
            "the 8 in one call"
        );
        connections.close().await;
        served.stop().await;
    }

    /// Waits (up to 10 s) until `done`.
    async fn wait_for(done: impl Fn() -> bool) {
        for _ in 0..1000 {
            if done() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("not reached in 10 s");
    }

    /// A Dapr Scheduler (no `ScheduleJobs`) gets each create as its own `ScheduleJob`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dapr_scheduler_gets_each_create_as_schedule_job() {
        let (dapr, served, remote, connections) = on(fake::Fake {
            on_schedule: Some(|_| Ok(())),
            no_batches: true,
            ..Default::default()
        })
        .await;
        let creates: Vec<_> = (0..40)
            .map(|i| spawn_create(&remote, format!("j{i}")))
            .collect();
        for create in creates {
            create.await.unwrap().unwrap();
        }
        assert_eq!(dapr.schedule.load(Ordering::SeqCst), 40);
        // The calls out before the first answer came ask too; none after.
        let asked = dapr.batches.load(Ordering::SeqCst);
        assert!((1..=IN_FLIGHT).contains(&asked), "asked {asked} times");
        connections.close().await;
        served.stop().await;
    }
}
