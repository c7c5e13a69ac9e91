//! A Scheduler server for the client's tests: counts the calls it gets and answers
//! `ScheduleJob`, `GetJob` and `ListJobs` as programmed (by call number); every other rpc,
//! and any rpc left unprogrammed, is `Unimplemented`, as a Scheduler older than Dapr 1.15
//! answers WatchHosts. On jobsd's side (`jobsd.scheduler.v1.Jobs`) it counts `ScheduleJobs`
//! calls and the jobs in them and answers every job of one OK, but `AlreadyExists` for a name
//! starting with `exists` (or, programmed so, the whole call Unimplemented as a Dapr
//! Scheduler). It counts `PauseJob` and `TriggerJob` calls and answers them Unimplemented as
//! a Dapr Scheduler, or (`steers_jobs`, as a jobsd replica) as applied or naming `owner` as
//! the replica that fires the job; its other rpcs are `Unimplemented`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_api as jv1;
use crate::proto::jobsd_replica as jsv1;

/// What a programmed rpc answers to its n-th call (counting from 0).
type Answer<T> = Option<fn(usize) -> Result<T, Status>>;

/// The fake replica; see the module doc.
#[derive(Default)]
pub(super) struct Fake {
    /// `ScheduleJob` calls so far.
    pub schedule: AtomicUsize,
    /// `GetJob` calls so far.
    pub get: AtomicUsize,
    /// `ListJobs` calls so far.
    pub list: AtomicUsize,
    /// `jobsd.scheduler.v1.Jobs/ScheduleJobs` calls so far.
    pub batches: AtomicUsize,
    /// Jobs received in `ScheduleJobs` calls so far.
    pub jobs: AtomicUsize,
    /// Answer `ScheduleJobs` with Unimplemented, as a Dapr Scheduler does.
    pub no_batches: bool,
    /// Take 100 ms over each `ScheduleJobs` call, as a replica waiting for etcd.
    pub slow_batches: bool,
    /// `ScheduleJob`'s answer.
    pub on_schedule: Answer<()>,
    /// `GetJob`'s answer.
    pub on_get: Answer<sv1::Job>,
    /// `ListJobs`' answer.
    pub on_list: Answer<Vec<sv1::NamedJob>>,
    /// `PauseJob` and `TriggerJob` calls so far.
    pub steers: AtomicUsize,
    /// Answer them naming this replica as the job's owner instead of applying them.
    pub owner: std::sync::Mutex<Option<String>>,
    /// Answer them as a jobsd replica does (else Unimplemented, as a Dapr Scheduler).
    pub steers_jobs: bool,
}

impl Fake {
    /// `PauseJob`'s and `TriggerJob`'s answer when applied here (`applied`).
    fn steer(&self, applied: jsv1::SteerResponse) -> Result<Response<jsv1::SteerResponse>, Status> {
        self.steers.fetch_add(1, Ordering::SeqCst);
        if !self.steers_jobs {
            return Err(Status::unimplemented(""));
        }
        Ok(Response::new(match self.owner.lock().unwrap().clone() {
            Some(owner) => jsv1::SteerResponse {
                owner,
                ..Default::default()
            },
            None => applied,
        }))
    }
}

/// A running fake: its address, and how to stop it.
pub(super) struct Served {
    /// `127.0.0.1:<port>`.
    pub address: String,
    stop: CancellationToken,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Served {
    /// Stops the server and waits for it.
    pub async fn stop(self) {
        self.stop.cancel();
        self.server.await.unwrap().unwrap();
    }
}

/// Serves `fake` on a free loopback port.
pub(super) async fn serve(fake: Arc<Fake>) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let stop = CancellationToken::new();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(sv1::scheduler_server::SchedulerServer::new(fake.clone()))
            .add_service(jsv1::jobs_server::JobsServer::new(fake))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                stop.clone().cancelled_owned(),
            ),
    );
    Served {
        address,
        stop,
        server,
    }
}

/// Counts a call and gives the programmed answer.
fn answer<T, U>(
    calls: &AtomicUsize,
    program: Answer<T>,
    wrap: impl FnOnce(T) -> U,
) -> Result<Response<U>, Status> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    match program {
        Some(answer) => answer(n).map(|t| Response::new(wrap(t))),
        None => Err(Status::unimplemented("")),
    }
}

type Nothing<T> = tokio_stream::Empty<Result<T, Status>>;

#[tonic::async_trait]
impl sv1::scheduler_server::Scheduler for Arc<Fake> {
    async fn schedule_job(
        &self,
        _: Request<sv1::ScheduleJobRequest>,
    ) -> Result<Response<sv1::ScheduleJobResponse>, Status> {
        answer(&self.schedule, self.on_schedule, |()| {
            sv1::ScheduleJobResponse {}
        })
    }
    async fn get_job(
        &self,
        _: Request<sv1::GetJobRequest>,
    ) -> Result<Response<sv1::GetJobResponse>, Status> {
        answer(&self.get, self.on_get, |job| sv1::GetJobResponse {
            job: Some(job),
        })
    }
    async fn delete_job(
        &self,
        _: Request<sv1::DeleteJobRequest>,
    ) -> Result<Response<sv1::DeleteJobResponse>, Status> {
        Err(Status::unimplemented(""))
    }
    type WatchJobsStream = Nothing<sv1::WatchJobsResponse>;
    async fn watch_jobs(
        &self,
        _: Request<tonic::Streaming<sv1::WatchJobsRequest>>,
    ) -> Result<Response<Self::WatchJobsStream>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn list_jobs(
        &self,
        _: Request<sv1::ListJobsRequest>,
    ) -> Result<Response<sv1::ListJobsResponse>, Status> {
        answer(&self.list, self.on_list, |jobs| sv1::ListJobsResponse {
            jobs,
        })
    }
    type WatchHostsStream = Nothing<sv1::WatchHostsResponse>;
    async fn watch_hosts(
        &self,
        _: Request<sv1::WatchHostsRequest>,
    ) -> Result<Response<Self::WatchHostsStream>, Status> {
        Err(Status::unimplemented("unknown method WatchHosts"))
    }
    async fn delete_by_metadata(
        &self,
        _: Request<sv1::DeleteByMetadataRequest>,
    ) -> Result<Response<sv1::DeleteByMetadataResponse>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn delete_by_name_prefix(
        &self,
        _: Request<sv1::DeleteByNamePrefixRequest>,
    ) -> Result<Response<sv1::DeleteByNamePrefixResponse>, Status> {
        Err(Status::unimplemented(""))
    }
}

#[tonic::async_trait]
impl jsv1::jobs_server::Jobs for Arc<Fake> {
    async fn schedule_job(
        &self,
        _: Request<jsv1::ScheduleJobRequest>,
    ) -> Result<Response<jsv1::ScheduleJobResponse>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn schedule_jobs(
        &self,
        request: Request<jsv1::ScheduleJobsRequest>,
    ) -> Result<Response<jsv1::ScheduleJobsResponse>, Status> {
        self.batches.fetch_add(1, Ordering::SeqCst);
        if self.no_batches {
            return Err(Status::unimplemented("unknown method ScheduleJobs"));
        }
        if self.slow_batches {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let jobs = request.into_inner().jobs;
        self.jobs.fetch_add(jobs.len(), Ordering::SeqCst);
        let results = jobs
            .into_iter()
            .map(|req| {
                let name = req.job.map(|j| j.name).unwrap_or_default();
                if name.starts_with("exists") {
                    // A name stored already, as a replica answers a create of it.
                    let message = format!("job already exists: '{name}'");
                    return jv1::ScheduleJobResult {
                        name,
                        code: tonic::Code::AlreadyExists as i32,
                        message,
                    };
                }
                jv1::ScheduleJobResult {
                    name,
                    ..Default::default()
                }
            })
            .collect();
        Ok(Response::new(jsv1::ScheduleJobsResponse { results }))
    }
    async fn schedule_job_guarded(
        &self,
        _: Request<jsv1::GuardedScheduleJobRequest>,
    ) -> Result<Response<jsv1::GuardedResponse>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn delete_job_guarded(
        &self,
        _: Request<jsv1::GuardedDeleteJobRequest>,
    ) -> Result<Response<jsv1::GuardedResponse>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn get_job(
        &self,
        _: Request<jsv1::GetJobRequest>,
    ) -> Result<Response<jsv1::JobView>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn list_runs(
        &self,
        _: Request<jsv1::ListRunsRequest>,
    ) -> Result<Response<jv1::ListRunsResponse>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn list_jobs(
        &self,
        _: Request<jsv1::ListJobsRequest>,
    ) -> Result<Response<jsv1::ListJobsResponse>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn pause_job(
        &self,
        _: Request<jsv1::PauseJobRequest>,
    ) -> Result<Response<jsv1::SteerResponse>, Status> {
        self.steer(jsv1::SteerResponse::default())
    }
    async fn resume_job(
        &self,
        _: Request<jsv1::ResumeJobRequest>,
    ) -> Result<Response<jsv1::SteerResponse>, Status> {
        Err(Status::unimplemented(""))
    }
    async fn trigger_job(
        &self,
        request: Request<jsv1::TriggerJobRequest>,
    ) -> Result<Response<jsv1::SteerResponse>, Status> {
        let name = request.into_inner().trigger.unwrap_or_default().name;
        let id = crate::trigger::ExecutionId::for_tick(&name, chrono::DateTime::UNIX_EPOCH);
        self.steer(crate::seam::steer_wire::triggered(id))
    }
    async fn backfill_job(
        &self,
        _: Request<jsv1::BackfillJobRequest>,
    ) -> Result<Response<jsv1::SteerResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn get_actor_state(
        &self,
        _: Request<jsv1::GetActorStateRequest>,
    ) -> Result<Response<jsv1::GetActorStateResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn actor_state_transaction(
        &self,
        _: Request<jsv1::ActorStateTransactionRequest>,
    ) -> Result<Response<jsv1::ActorStateTransactionResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn set_concurrency_rule(
        &self,
        _: Request<jsv1::SetConcurrencyRuleRequest>,
    ) -> Result<Response<jsv1::SetConcurrencyRuleResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn delete_concurrency_rule(
        &self,
        _: Request<jsv1::DeleteConcurrencyRuleRequest>,
    ) -> Result<Response<jsv1::DeleteConcurrencyRuleResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn get_concurrency(
        &self,
        _: Request<jsv1::GetConcurrencyRequest>,
    ) -> Result<Response<jsv1::GetConcurrencyResponse>, Status> {
        Err(Status::unimplemented(""))
    }
}
