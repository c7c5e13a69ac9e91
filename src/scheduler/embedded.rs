//! The embedded scheduler: the engine in this process answers the Scheduler calls.

use crate::engine::Engine;
use crate::proto::scheduler as sv1;

use super::{Error, Scheduler};

#[async_trait::async_trait]
impl Scheduler for Engine {
    async fn schedule_job(&self, req: sv1::ScheduleJobRequest) -> Result<(), Error> {
        Ok(Engine::schedule_job(self, req).await?)
    }

    async fn get_job(&self, req: sv1::GetJobRequest) -> Result<sv1::Job, Error> {
        Ok(Engine::get_job(self, req).await?)
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
}
