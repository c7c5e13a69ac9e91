//! The embedded scheduler: the engine in this process answers the Scheduler calls, with the
//! codes a Dapr Scheduler replica would give.

use tonic::Code;

use crate::engine::{self, Engine};
use crate::proto::dapr_scheduler as sv1;

use crate::jobs::concurrency::{ConcurrencyView, Rule};

use super::{
    ActorState, ActorStateOwner, Backup, BackupRecord, Bulk, ByHand, Concurrency, Conditions,
    Error, ExecutionCall, Executions, ExportCursor, ExportPage, Guarded, Guards, HeldExecution,
    IfMatch, Imported, JobExtras, JobView, ListFilter, ListPage, NextFireTimes, Pausing, Run,
    Scheduler, Selection, StateChange, Stats, Views,
};

impl From<engine::Error> for Error {
    /// The code Dapr's Scheduler answers for each engine error: go-etcd-cron's plain errors
    /// (validation, names, a nil job) surface as `Unknown`.
    fn from(err: engine::Error) -> Self {
        let code = match &err {
            engine::Error::BadMetadata(_) | engine::Error::BadRequest(_) => Code::InvalidArgument,
            engine::Error::Name(_) | engine::Error::Invalid(_) | engine::Error::NoJob => {
                Code::Unknown
            }
            engine::Error::AlreadyExists(_) => Code::AlreadyExists,
            engine::Error::NotFound(_) | engine::Error::ExecutionNotFound(_) => Code::NotFound,
            engine::Error::ExecutionEnded(_) => Code::Aborted,
            engine::Error::Busy(_) => Code::Aborted,
            engine::Error::Unavailable(_) => Code::Unavailable,
            engine::Error::Store(_) => Code::Internal,
        };
        Error::new(code, err.to_string())
    }
}

impl From<engine::Error> for tonic::Status {
    /// What a replica's Scheduler service answers for an engine error.
    fn from(err: engine::Error) -> Self {
        Error::from(err).into()
    }
}

#[async_trait::async_trait]
impl Scheduler for Engine {
    async fn schedule_job(&self, req: sv1::ScheduleJobRequest) -> Result<(), Error> {
        Ok(Engine::schedule_job(self, req).await?)
    }

    async fn schedule_job_with(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
    ) -> Result<(), Error> {
        Ok(Engine::schedule_job_with(self, req, extras).await?)
    }

    async fn schedule_jobs(
        &self,
        jobs: Vec<(sv1::ScheduleJobRequest, JobExtras)>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let outcomes = Engine::schedule_jobs(self, jobs).await?;
        Ok(outcomes
            .into_iter()
            .map(|o| o.map_err(Error::from))
            .collect())
    }

    async fn get_job(&self, req: sv1::GetJobRequest) -> Result<sv1::Job, Error> {
        Ok(Engine::get_job(self, req).await?)
    }

    async fn sync(&self) -> Option<Stats> {
        Engine::sync(self).await
    }

    async fn delete_job(&self, req: sv1::DeleteJobRequest) -> Result<(), Error> {
        Ok(Engine::delete_job(self, req).await?)
    }

    async fn list_jobs(&self, req: sv1::ListJobsRequest) -> Result<Vec<sv1::NamedJob>, Error> {
        Ok(Engine::list_jobs(self, req).await?)
    }

    async fn delete_by_name_prefix(
        &self,
        req: sv1::DeleteByNamePrefixRequest,
    ) -> Result<(), Error> {
        Ok(Engine::delete_by_name_prefix(self, req).await?)
    }

    async fn delete_by_metadata(&self, req: sv1::DeleteByMetadataRequest) -> Result<(), Error> {
        Ok(Engine::delete_by_metadata(self, req).await?)
    }

    fn as_guards(&self) -> Option<&dyn Guards> {
        Some(self)
    }

    fn as_views(&self) -> Option<&dyn Views> {
        Some(self)
    }

    fn as_pausing(&self) -> Option<&dyn Pausing> {
        Some(self)
    }

    fn as_by_hand(&self) -> Option<&dyn ByHand> {
        Some(self)
    }

    fn as_executions(&self) -> Option<&dyn Executions> {
        Some(self)
    }

    fn as_backup(&self) -> Option<&dyn Backup> {
        Some(self)
    }

    fn as_actor_state(&self) -> Option<&dyn ActorState> {
        Some(self)
    }

    fn as_concurrency(&self) -> Option<&dyn Concurrency> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl Concurrency for Engine {
    async fn set_concurrency_rule(
        &self,
        metadata: sv1::JobMetadata,
        rule: Rule,
    ) -> Result<(), Error> {
        Ok(Engine::set_concurrency_rule(self, &metadata, rule).await?)
    }

    async fn delete_concurrency_rule(
        &self,
        metadata: sv1::JobMetadata,
        key: String,
    ) -> Result<bool, Error> {
        Ok(Engine::delete_concurrency_rule(self, &metadata, &key).await?)
    }

    async fn concurrency_view(&self, metadata: sv1::JobMetadata) -> Result<ConcurrencyView, Error> {
        Ok(Engine::concurrency_view(self, &metadata).await?)
    }
}

#[async_trait::async_trait]
impl ActorState for Engine {
    async fn get_actor_state(
        &self,
        owner: ActorStateOwner,
        key: String,
    ) -> Result<Option<Vec<u8>>, Error> {
        Ok(Engine::get_actor_state(self, &owner, &key).await?)
    }

    async fn actor_state_transaction(
        &self,
        owner: ActorStateOwner,
        changes: Vec<StateChange>,
    ) -> Result<(), Error> {
        Ok(Engine::actor_state_transaction(self, &owner, changes).await?)
    }
}

#[async_trait::async_trait]
impl Guards for Engine {
    async fn schedule_job_guarded(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
        conditions: Conditions,
    ) -> Result<Guarded, Error> {
        Ok(Engine::schedule_job_guarded(self, req, extras, &conditions).await?)
    }

    async fn delete_job_guarded(
        &self,
        req: sv1::DeleteJobRequest,
        if_match: IfMatch,
    ) -> Result<Guarded, Error> {
        Ok(Engine::delete_job_guarded(self, req, &if_match).await?)
    }
}

#[async_trait::async_trait]
impl Views for Engine {
    async fn job_view(&self, metadata: sv1::JobMetadata, name: String) -> Result<JobView, Error> {
        Ok(Engine::job_view(self, &metadata, &name).await?)
    }

    async fn next_fire_times(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        count: usize,
    ) -> Result<NextFireTimes, Error> {
        Ok(Engine::next_fire_times(self, &metadata, &name, count).await?)
    }

    async fn list_runs(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Run>, Error> {
        Ok(Engine::list_runs(self, &metadata, &name, before, limit).await?)
    }

    async fn list_views(
        &self,
        metadata: sv1::JobMetadata,
        filter: ListFilter,
    ) -> Result<ListPage, Error> {
        Ok(Engine::list_views(self, &metadata, &filter).await?)
    }
}

#[async_trait::async_trait]
impl Pausing for Engine {
    async fn pause_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        note: String,
    ) -> Result<(), Error> {
        Ok(Engine::pause_job(self, &metadata, &name, &note).await?)
    }

    async fn resume_job(&self, metadata: sv1::JobMetadata, name: String) -> Result<(), Error> {
        Ok(Engine::resume_job(self, &metadata, &name).await?)
    }

    async fn pause_jobs(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
        note: String,
    ) -> Result<Bulk, Error> {
        Ok(Engine::pause_jobs(self, &metadata, &selection, &note).await?)
    }

    async fn resume_jobs(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
    ) -> Result<Bulk, Error> {
        Ok(Engine::resume_jobs(self, &metadata, &selection).await?)
    }
}

#[async_trait::async_trait]
impl ByHand for Engine {
    async fn trigger_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        overlap: Option<crate::schedule::Overlap>,
    ) -> Result<crate::trigger::ExecutionId, Error> {
        Ok(Engine::trigger_job(self, &metadata, &name, overlap).await?)
    }

    async fn backfill_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        range: (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
        overlap: Option<crate::schedule::Overlap>,
        limit: usize,
    ) -> Result<Vec<(chrono::DateTime<chrono::Utc>, crate::trigger::ExecutionId)>, Error> {
        Ok(Engine::backfill_job(self, &metadata, &name, range, overlap, limit).await?)
    }
}

#[async_trait::async_trait]
impl Executions for Engine {
    async fn execution_call(
        &self,
        metadata: sv1::JobMetadata,
        id: String,
        call: ExecutionCall,
    ) -> Result<HeldExecution, Error> {
        Ok(Engine::execution_call(self, &metadata, &id, call).await?)
    }
}

#[async_trait::async_trait]
impl Backup for Engine {
    async fn export_page(
        &self,
        metadata: sv1::JobMetadata,
        cursor: Option<ExportCursor>,
        limit: usize,
    ) -> Result<ExportPage, Error> {
        Ok(Engine::export_page(self, &metadata, cursor, limit).await?)
    }

    async fn hand_over(&self, metadata: sv1::JobMetadata) -> Result<(), Error> {
        Ok(Engine::hand_over(self, &metadata).await?)
    }

    async fn import_batch(
        &self,
        metadata: sv1::JobMetadata,
        records: Vec<BackupRecord>,
        overwrite: bool,
    ) -> Result<Vec<Result<Imported, Error>>, Error> {
        let outcomes = Engine::import_batch(self, &metadata, records, overwrite).await?;
        Ok(outcomes
            .into_iter()
            .map(|o| o.map_err(Error::from))
            .collect())
    }
}
