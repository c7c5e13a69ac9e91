//! Pausing, resuming and running a job by hand in remote mode. Only the replica that fires
//! the job applies them (in order with the job's results, `jobsd.scheduler.v1.Jobs`): the
//! home replica is asked first, and one that does not fire the job names the one that does,
//! which is asked next. A Dapr Scheduler has no such calls (it answers Unimplemented): they
//! are refused then, saying so.

use futures_util::FutureExt;

use super::{Error, Remote, Rpc, jobsd_client};
use crate::proto::jobsd_replica as jsv1;

/// Owners named in a row before a call gives up: partitions move between members only when
/// members come or go, so a second name is already rare.
const MAX_HOPS: usize = 4;

/// What a call that needs jobsd's replicas answers when the replicas are Dapr Schedulers.
fn needs_jobsd(what: &str) -> Error {
    Error::new(
        tonic::Code::FailedPrecondition,
        format!(
            "{what} needs jobsd's scheduler (embedded, or `jobsd scheduler` replicas): the \
             replicas at --scheduler-host-address do not serve it (a Dapr Scheduler)"
        ),
    )
}

/// Which of these calls: how a refusal names it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Steer {
    /// Pause or resume.
    Pause,
    /// Run now or backfill.
    ByHand,
}

impl Steer {
    fn refusal(self) -> Error {
        match self {
            Steer::Pause => needs_jobsd("pausing and resuming jobs"),
            Steer::ByHand => needs_jobsd("running a job by hand (trigger, backfill)"),
        }
    }

    /// A replica without the call (a Dapr Scheduler answers `Unimplemented`: it ran
    /// nothing) refuses it, saying why; every other error is the replica's answer.
    pub(super) fn unless_served(self, err: Error) -> Error {
        if err.code == tonic::Code::Unimplemented {
            self.refusal()
        } else {
            err
        }
    }
}

impl Remote {
    /// Sends `request` to the replica that fires its job: the home one first, then each
    /// replica named as the owner (at most [`MAX_HOPS`]).
    pub(super) async fn steer<R>(
        &self,
        kind: Steer,
        request: R,
        rpc: Rpc<R, jsv1::SteerResponse>,
    ) -> Result<jsv1::SteerResponse, Error>
    where
        R: Clone + Send + 'static,
    {
        let mut offset = 0;
        let mut named = String::new();
        for _ in 0..MAX_HOPS {
            let answer = self
                .call_on(offset, request.clone(), rpc)
                .await
                .map_err(|e| kind.unless_served(e))?;
            if answer.owner.is_empty() {
                return Ok(answer);
            }
            offset = self.offset_of(&answer.owner).ok_or_else(|| {
                Error::new(
                    tonic::Code::Unavailable,
                    format!(
                        "the scheduler replica at {} fires this job, and this sidecar has not \
                         learned of it yet; try again",
                        answer.owner
                    ),
                )
            })?;
            named = answer.owner;
        }
        Err(Error::new(
            tonic::Code::Unavailable,
            format!(
                "the scheduler replicas named another owner of this job {MAX_HOPS} times in a \
                 row (last {named}): its partition is moving; try again"
            ),
        ))
    }

    /// How many places after the home the replica at `address` is, if it is known.
    fn offset_of(&self, address: &str) -> Option<usize> {
        let set = self.shared.hosts.borrow().clone();
        let len = set.hosts.len();
        let at = set.hosts.iter().position(|h| &*h.address == address)?;
        let home = self.shared.next.load(std::sync::atomic::Ordering::Relaxed) % len;
        Some((at + len - home) % len)
    }
}

/// The rpcs, boxed for [`Remote::steer`].
pub(super) fn pause() -> Rpc<jsv1::PauseJobRequest, jsv1::SteerResponse> {
    |ch, r| async move { jobsd_client(ch).pause_job(r).await }.boxed()
}

/// See [`pause`].
pub(super) fn resume() -> Rpc<jsv1::ResumeJobRequest, jsv1::SteerResponse> {
    |ch, r| async move { jobsd_client(ch).resume_job(r).await }.boxed()
}

/// See [`pause`].
pub(super) fn trigger() -> Rpc<jsv1::TriggerJobRequest, jsv1::SteerResponse> {
    |ch, r| async move { jobsd_client(ch).trigger_job(r).await }.boxed()
}

/// See [`pause`].
pub(super) fn backfill() -> Rpc<jsv1::BackfillJobRequest, jsv1::SteerResponse> {
    |ch, r| async move { jobsd_client(ch).backfill_job(r).await }.boxed()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::super::tests::undeliverable;
    use super::super::{Connections, Remote, fake};
    use crate::proto::dapr_scheduler as sv1;
    use crate::seam::{ByHand, Pausing};
    use crate::trigger::ExecutionId;

    fn metadata() -> sv1::JobMetadata {
        sv1::JobMetadata {
            app_id: "myapp".into(),
            namespace: "default".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
            }),
            ..Default::default()
        }
    }

    /// Two fakes and a sidecar over them, and which fake the sidecar asks first.
    struct Pair {
        fakes: Vec<Arc<fake::Fake>>,
        served: Vec<fake::Served>,
        remote: Remote,
        _connections: Connections,
        home: usize,
    }

    async fn pair() -> Pair {
        let fakes: Vec<Arc<fake::Fake>> = (0..2)
            .map(|_| {
                Arc::new(fake::Fake {
                    steers_jobs: true,
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
        remote
            .shared
            .hosts
            .clone()
            .wait_for(|s| s.hosts.len() == 2)
            .await
            .unwrap();
        let at = remote.shared.next.load(Ordering::Relaxed) % 2;
        // The sidecar's list is sorted by address; find the fake it names.
        let address = remote.shared.hosts.borrow().hosts[at].address.to_string();
        let home = served.iter().position(|s| s.address == address).unwrap();
        Pair {
            fakes,
            served,
            remote,
            _connections: connections,
            home,
        }
    }

    #[tokio::test]
    async fn a_call_goes_on_to_the_replica_named_as_the_owner() {
        let p = pair().await;
        let other = 1 - p.home;
        *p.fakes[p.home].owner.lock().unwrap() = Some(p.served[other].address.clone());
        p.remote
            .pause_job(metadata(), "j".into(), String::new())
            .await
            .unwrap();
        let id = p
            .remote
            .trigger_job(metadata(), "j".into(), None)
            .await
            .unwrap();
        let owners = ExecutionId::for_tick("j", chrono::DateTime::UNIX_EPOCH);
        assert_eq!(id, owners, "the owner's answer");
        assert_eq!(p.fakes[p.home].steers.load(Ordering::SeqCst), 2);
        assert_eq!(p.fakes[other].steers.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn owners_named_in_a_loop_or_unknown_end_in_unavailable() {
        let p = pair().await;
        let other = 1 - p.home;
        *p.fakes[p.home].owner.lock().unwrap() = Some(p.served[other].address.clone());
        *p.fakes[other].owner.lock().unwrap() = Some(p.served[p.home].address.clone());
        let unavailable = async || {
            let err = p
                .remote
                .pause_job(metadata(), "j".into(), String::new())
                .await
                .unwrap_err();
            assert_eq!(err.code, tonic::Code::Unavailable, "{err}");
            err.message
        };
        let why = unavailable().await;
        assert!(why.contains("4 times in a row"), "{why}");
        let asked: usize = p
            .fakes
            .iter()
            .map(|f| f.steers.load(Ordering::SeqCst))
            .sum();
        assert_eq!(asked, super::MAX_HOPS);

        *p.fakes[p.home].owner.lock().unwrap() = Some("10.9.9.9:50006".into());
        let why = unavailable().await;
        assert!(why.contains("10.9.9.9:50006"), "{why}");
    }

    #[tokio::test]
    async fn a_dapr_scheduler_refuses_them_saying_what_they_need() {
        let fake = Arc::new(fake::Fake::default());
        let served = fake::serve(fake.clone()).await;
        let (remote, _connections) = undeliverable(vec![served.address.clone()]);
        let err = remote
            .pause_job(metadata(), "j".into(), String::new())
            .await
            .unwrap_err();
        assert_eq!(err.code, tonic::Code::FailedPrecondition, "{err}");
        let pausing = "pausing and resuming jobs needs jobsd's scheduler";
        assert!(err.message.starts_with(pausing), "{err}");
        let err = remote
            .trigger_job(metadata(), "j".into(), None)
            .await
            .unwrap_err();
        assert!(err.message.starts_with("running a job by hand"), "{err}");
        served.stop().await;
    }
}
