//! `jobsd.scheduler.v1.Jobs` on a replica: what Dapr's Scheduler protocol has no place for.
//! Creates with jobsd's settings (labels, policies), checked and stored by the same engine
//! call as in the embedded scheduler; and jobsd's views of a sidecar's jobs (labels, status,
//! run history, filtered pages), read from the store the replicas share, with the live state
//! of the jobs this replica owns. A Dapr Scheduler has no such service; sidecars say so.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::cluster::{Directory, Owner};
use super::pool::{Pool, job_type};
use super::server;
use crate::engine::{Engine, JobExtras, MAX_PAGE_SIZE, MAX_RUNS, MAX_SCHEDULE_BATCH};
use crate::jobs::guard::IfMatch;
use crate::observe::JobType;
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_api as jv1;
use crate::proto::jobsd_replica::{self as jsv1, jobs_server::JobsServer};
use crate::seam::{
    actor_state_wire as actor_state, concurrency_wire, guarded_wire, steer_wire, views_wire,
};
use crate::trigger::keys;

/// How long a call only a job's owner applies waits while the job's partition changes hands
/// (a member died: up to its lease TTL), polling every [`OWNER_POLL`].
const OWNER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// See [`OWNER_WAIT`].
const OWNER_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// jobsd's service over the replica's engine.
#[derive(Clone)]
pub struct JobsService {
    /// Checks, stores and shows the jobs.
    engine: Engine,
    /// Where creates are counted (the Dapr Scheduler's metrics), as on the Scheduler service.
    pool: Arc<Pool>,
    /// Who fires which job in a cluster; `None` alone (this replica fires every job).
    directory: Option<Directory>,
}

/// The `Jobs` server for `engine`, counting creates in `pool`'s metrics; in a cluster,
/// `directory` says which member applies what only a job's owner may.
pub fn server(
    engine: Engine,
    pool: Arc<Pool>,
    directory: Option<Directory>,
) -> JobsServer<JobsService> {
    JobsServer::new(JobsService {
        engine,
        pool,
        directory,
    })
    .max_decoding_message_size(server::MAX_MESSAGE_SIZE)
    .max_encoding_message_size(server::MAX_MESSAGE_SIZE)
}

fn invalid(message: String) -> Status {
    Status::invalid_argument(message)
}

/// jobsd's settings of a create as the request carries them.
fn extras_of(req: &jsv1::ScheduleJobRequest) -> JobExtras {
    JobExtras {
        labels: req.labels.clone().into_iter().collect(),
        traceparent: (!req.traceparent.is_empty()).then(|| req.traceparent.clone()),
        policy: req.policy.clone(),
        failure_policy: req.failure_policy.clone(),
    }
}

impl JobsService {
    /// The address of the member that fires job `name` of `metadata`'s owner when it is not
    /// this one; `None` when this one does, once its trigger loop holds the job (or the key
    /// is malformed: the engine refuses it then, as it would here). While nobody fires the
    /// job's partition (it is changing hands) it waits for the next owner, up to
    /// [`OWNER_WAIT`].
    async fn owner_elsewhere(
        &self,
        metadata: &sv1::JobMetadata,
        name: &str,
    ) -> Result<Option<String>, Status> {
        let Some(directory) = &self.directory else {
            return Ok(None);
        };
        let Ok(key) = keys::check_metadata(Some(metadata)).and_then(|m| keys::job_key(m, name))
        else {
            return Ok(None);
        };
        let deadline = tokio::time::Instant::now() + OWNER_WAIT;
        loop {
            match directory.owner_of(&key) {
                // Read in first: the trigger loop may not hold the job yet.
                Owner::Me if directory.bring_in(&key).await => return Ok(None),
                Owner::At(address) => return Ok(Some(address)),
                _ if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(OWNER_POLL).await;
                }
                _ => {
                    return Err(Status::unavailable(format!(
                        "no scheduler replica took job {name:?} in hand within {}s (its \
                         partition is changing hands, or etcd does not answer); try again",
                        OWNER_WAIT.as_secs()
                    )));
                }
            }
        }
    }
}

/// The answer of a call sent to a member that does not fire the job: the one that does.
fn elsewhere(owner: String) -> Response<jsv1::SteerResponse> {
    Response::new(jsv1::SteerResponse {
        owner,
        ..Default::default()
    })
}

#[tonic::async_trait]
impl jsv1::jobs_server::Jobs for JobsService {
    async fn schedule_job(
        &self,
        request: Request<jsv1::ScheduleJobRequest>,
    ) -> Result<Response<jsv1::ScheduleJobResponse>, Status> {
        let req = request.into_inner();
        let extras = extras_of(&req);
        // A missing job is an empty request: the engine refuses it as the Scheduler service
        // refuses one without metadata.
        let job = req.job.unwrap_or_default();
        server::create(&self.engine, &self.pool, job, extras).await?;
        Ok(Response::new(jsv1::ScheduleJobResponse {}))
    }

    async fn schedule_jobs(
        &self,
        request: Request<jsv1::ScheduleJobsRequest>,
    ) -> Result<Response<jsv1::ScheduleJobsResponse>, Status> {
        let jobs = request.into_inner().jobs;
        if jobs.len() > MAX_SCHEDULE_BATCH {
            return Err(invalid(format!(
                "jobs: at most {MAX_SCHEDULE_BATCH} per call, got {}",
                jobs.len()
            )));
        }
        // One store write per run of distinct names: the writer sends it as one txn without a
        // read (several when it is larger than etcd takes), and gathers other calls' runs and
        // single creates into the same txn.
        let names_kinds: Vec<_> = jobs
            .iter()
            .map(|req| {
                let job = req.job.as_ref();
                let kind = job
                    .and_then(|j| j.metadata.as_ref())
                    .map_or(JobType::Unknown, job_type);
                (job.map(|j| j.name.clone()).unwrap_or_default(), kind)
            })
            .collect();
        let requests = jobs
            .into_iter()
            .map(|req| {
                let extras = extras_of(&req);
                (req.job.unwrap_or_default(), extras)
            })
            .collect();
        let outcomes = self.engine.schedule_jobs(requests).await?;
        let results = names_kinds
            .into_iter()
            .zip(outcomes)
            .map(|((name, kind), outcome)| {
                let (code, message) = match outcome {
                    Ok(()) => {
                        self.pool.metrics().created(kind);
                        (0, String::new())
                    }
                    Err(e) => {
                        self.pool.metrics().create_failed(kind);
                        let s = Status::from(e);
                        (s.code() as i32, s.message().to_owned())
                    }
                };
                jv1::ScheduleJobResult {
                    name,
                    code,
                    message,
                }
            })
            .collect();
        Ok(Response::new(jsv1::ScheduleJobsResponse { results }))
    }

    async fn schedule_job_guarded(
        &self,
        request: Request<jsv1::GuardedScheduleJobRequest>,
    ) -> Result<Response<jsv1::GuardedResponse>, Status> {
        let req = request.into_inner();
        let conditions = guarded_wire::conditions_from_wire(&req.idempotency_key, &req.if_match)
            .map_err(invalid)?;
        let create = req.create.unwrap_or_default();
        let extras = extras_of(&create);
        let job = create.job.unwrap_or_default();
        let outcome =
            server::create_guarded(&self.engine, &self.pool, job, extras, &conditions).await?;
        Ok(Response::new(guarded_wire::to_wire(outcome)))
    }

    async fn delete_job_guarded(
        &self,
        request: Request<jsv1::GuardedDeleteJobRequest>,
    ) -> Result<Response<jsv1::GuardedResponse>, Status> {
        let req = request.into_inner();
        let if_match = IfMatch::parse(&req.if_match).map_err(invalid)?;
        let outcome = self
            .engine
            .delete_job_guarded(req.delete.unwrap_or_default(), &if_match)
            .await?;
        Ok(Response::new(guarded_wire::to_wire(outcome)))
    }

    async fn get_job(
        &self,
        request: Request<jsv1::GetJobRequest>,
    ) -> Result<Response<jsv1::JobView>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let view = self.engine.job_view(&metadata, &req.name).await?;
        Ok(Response::new(views_wire::view_to_wire(view)))
    }

    async fn list_runs(
        &self,
        request: Request<jsv1::ListRunsRequest>,
    ) -> Result<Response<jv1::ListRunsResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let limit = (req.limit as usize).clamp(1, MAX_RUNS);
        let runs = self
            .engine
            .list_runs(&metadata, &req.name, req.before, limit)
            .await?;
        Ok(Response::new(jv1::ListRunsResponse {
            next_before: views_wire::next_before(&runs, limit).unwrap_or(0),
            runs: runs.into_iter().map(views_wire::run_to_wire).collect(),
        }))
    }

    async fn list_jobs(
        &self,
        request: Request<jsv1::ListJobsRequest>,
    ) -> Result<Response<jsv1::ListJobsResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let mut filter =
            views_wire::filter_from_wire(req.filter.unwrap_or_default()).map_err(invalid)?;
        filter.page_size = filter.page_size.min(MAX_PAGE_SIZE);
        let page = self.engine.list_views(&metadata, &filter).await?;
        Ok(Response::new(views_wire::page_to_wire(page)))
    }
    async fn pause_job(
        &self,
        request: Request<jsv1::PauseJobRequest>,
    ) -> Result<Response<jsv1::SteerResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let pause = req.pause.unwrap_or_default();
        if let Some(owner) = self.owner_elsewhere(&metadata, &pause.name).await? {
            return Ok(elsewhere(owner));
        }
        self.engine
            .pause_job(&metadata, &pause.name, &pause.note)
            .await?;
        Ok(Response::new(jsv1::SteerResponse::default()))
    }

    async fn resume_job(
        &self,
        request: Request<jsv1::ResumeJobRequest>,
    ) -> Result<Response<jsv1::SteerResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let name = req.resume.unwrap_or_default().name;
        if let Some(owner) = self.owner_elsewhere(&metadata, &name).await? {
            return Ok(elsewhere(owner));
        }
        self.engine.resume_job(&metadata, &name).await?;
        Ok(Response::new(jsv1::SteerResponse::default()))
    }

    async fn trigger_job(
        &self,
        request: Request<jsv1::TriggerJobRequest>,
    ) -> Result<Response<jsv1::SteerResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let trigger = req.trigger.unwrap_or_default();
        let overlap = steer_wire::overlap_from_wire(&trigger.overlap).map_err(invalid)?;
        if let Some(owner) = self.owner_elsewhere(&metadata, &trigger.name).await? {
            return Ok(elsewhere(owner));
        }
        let id = self
            .engine
            .trigger_job(&metadata, &trigger.name, overlap)
            .await?;
        Ok(Response::new(steer_wire::triggered(id)))
    }

    async fn backfill_job(
        &self,
        request: Request<jsv1::BackfillJobRequest>,
    ) -> Result<Response<jsv1::SteerResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let backfill = req.backfill.unwrap_or_default();
        let time = |field: &str, t| steer_wire::instant_from_wire(field, t).map_err(invalid);
        let range = (time("start", backfill.start)?, time("end", backfill.end)?);
        let overlap = steer_wire::overlap_from_wire(&backfill.overlap).map_err(invalid)?;
        if let Some(owner) = self.owner_elsewhere(&metadata, &backfill.name).await? {
            return Ok(elsewhere(owner));
        }
        let limit = (req.limit as usize).max(1);
        let runs = self
            .engine
            .backfill_job(&metadata, &backfill.name, range, overlap, limit)
            .await?;
        Ok(Response::new(jsv1::SteerResponse {
            backfill: Some(steer_wire::backfill_to_wire(runs)),
            ..Default::default()
        }))
    }

    async fn get_actor_state(
        &self,
        request: Request<jsv1::GetActorStateRequest>,
    ) -> Result<Response<jsv1::GetActorStateResponse>, Status> {
        let req = request.into_inner();
        let owner = actor_state::owner_from_wire(req.owner.unwrap_or_default());
        let value = self.engine.get_actor_state(&owner, &req.key).await?;
        Ok(Response::new(jsv1::GetActorStateResponse { value }))
    }

    async fn actor_state_transaction(
        &self,
        request: Request<jsv1::ActorStateTransactionRequest>,
    ) -> Result<Response<jsv1::ActorStateTransactionResponse>, Status> {
        let req = request.into_inner();
        let owner = actor_state::owner_from_wire(req.owner.unwrap_or_default());
        let changes = req
            .changes
            .into_iter()
            .map(actor_state::change_from_wire)
            .collect();
        self.engine.actor_state_transaction(&owner, changes).await?;
        Ok(Response::new(jsv1::ActorStateTransactionResponse {}))
    }

    async fn set_concurrency_rule(
        &self,
        request: Request<jsv1::SetConcurrencyRuleRequest>,
    ) -> Result<Response<jsv1::SetConcurrencyRuleResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let rule = concurrency_wire::rule_from_wire(req.rule.unwrap_or_default());
        self.engine.set_concurrency_rule(&metadata, rule).await?;
        Ok(Response::new(jsv1::SetConcurrencyRuleResponse {}))
    }

    async fn delete_concurrency_rule(
        &self,
        request: Request<jsv1::DeleteConcurrencyRuleRequest>,
    ) -> Result<Response<jsv1::DeleteConcurrencyRuleResponse>, Status> {
        let req = request.into_inner();
        let metadata = req.metadata.unwrap_or_default();
        let existed = self
            .engine
            .delete_concurrency_rule(&metadata, &req.key)
            .await?;
        Ok(Response::new(jsv1::DeleteConcurrencyRuleResponse {
            existed,
        }))
    }

    async fn get_concurrency(
        &self,
        request: Request<jsv1::GetConcurrencyRequest>,
    ) -> Result<Response<jsv1::GetConcurrencyResponse>, Status> {
        let metadata = request.into_inner().metadata.unwrap_or_default();
        let view = self.engine.concurrency_view(&metadata).await?;
        Ok(Response::new(jsv1::GetConcurrencyResponse {
            rules: view
                .rules
                .into_iter()
                .map(concurrency_wire::rule_to_wire)
                .collect(),
            keys: view
                .keys
                .into_iter()
                .map(concurrency_wire::key_to_wire)
                .collect(),
            replica: *REPLICA_ID,
        }))
    }
}

/// This process's id in [`jsv1::GetConcurrencyResponse::replica`].
static REPLICA_ID: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| fastrand::u64(..));
