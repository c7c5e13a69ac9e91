//! The [`Scheduler`] seam over the replicas: each call the API makes, as the rpc (or rpcs)
//! it becomes on a replica, through [`Remote`]'s retrying calls. Dapr's calls go to Dapr's
//! `Scheduler` service; what Dapr has no call or field for goes to `jobsd.scheduler.v1.Jobs`,
//! which only a jobsd replica serves, and is refused (naming why) by a Dapr Scheduler.

use std::sync::atomic::Ordering;

use futures_util::FutureExt;

use super::steer::{self, Steer};
use super::{Remote, client, jobsd_client};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_api as jv1;
use crate::proto::jobsd_replica as jsv1;
use crate::seam::{
    Bulk, ByHand, Conditions, Error, Guarded, Guards, IfMatch, JobExtras, JobView, ListFilter,
    ListPage, Pausing, Run, Scheduler, Selection, Views, guard, guarded_wire, steer_wire,
    untravelled, untravelled_field, views_wire,
};
use crate::trigger::ExecutionId;

#[async_trait::async_trait]
impl Scheduler for Remote {
    async fn schedule_job(&self, req: sv1::ScheduleJobRequest) -> Result<(), Error> {
        self.create_coalesced(req).await
    }

    async fn schedule_job_with(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
    ) -> Result<(), Error> {
        // A job Dapr's protocol can carry goes on it as daprd sends it, so that a Dapr
        // Scheduler keeps working; a create's trace context alone is only a link, not worth
        // a call a Dapr Scheduler would refuse.
        if untravelled_field(&extras).is_none() {
            return self.schedule_job(req).await;
        }
        self.create_alone(req, extras).await
    }

    async fn schedule_jobs(
        &self,
        jobs: Vec<(sv1::ScheduleJobRequest, JobExtras)>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        // A batch fills a txn of its own, so batches spread over the replicas: their writers
        // then commit into etcd side by side instead of one txn after another.
        let number = self.shared.batches.fetch_add(1, Ordering::Relaxed);
        self.batch_on(number, number, jobs).await
    }

    async fn get_job(&self, req: sv1::GetJobRequest) -> Result<sv1::Job, Error> {
        let response = self
            .call(req, |ch, r| {
                async move { client(ch).get_job(r).await }.boxed()
            })
            .await?;
        // A replica answering OK without a job breaks the protocol; an empty job is what
        // Go's nil-tolerant getters would read.
        Ok(response.job.unwrap_or_default())
    }

    async fn delete_job(&self, req: sv1::DeleteJobRequest) -> Result<(), Error> {
        self.call(req, |ch, r| {
            async move { client(ch).delete_job(r).await }.boxed()
        })
        .await
        .map(drop)
    }

    async fn list_jobs(&self, req: sv1::ListJobsRequest) -> Result<Vec<sv1::NamedJob>, Error> {
        self.call(req, |ch, r| {
            async move { client(ch).list_jobs(r).await }.boxed()
        })
        .await
        .map(|response| response.jobs)
    }

    async fn delete_by_name_prefix(
        &self,
        req: sv1::DeleteByNamePrefixRequest,
    ) -> Result<(), Error> {
        self.call(req, |ch, r| {
            async move { client(ch).delete_by_name_prefix(r).await }.boxed()
        })
        .await
        .map(drop)
    }

    async fn delete_by_metadata(&self, req: sv1::DeleteByMetadataRequest) -> Result<(), Error> {
        self.call(req, |ch, r| {
            async move { client(ch).delete_by_metadata(r).await }.boxed()
        })
        .await
        .map(drop)
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

    fn as_actor_state(&self) -> Option<&dyn crate::seam::ActorState> {
        Some(self)
    }

    fn as_concurrency(&self) -> Option<&dyn crate::seam::Concurrency> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl Guards for Remote {
    async fn schedule_job_guarded(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
        conditions: Conditions,
    ) -> Result<Guarded, Error> {
        let header = conditions.first_header().unwrap_or(guard::IF_MATCH);
        let (idempotency_key, if_match) = guarded_wire::conditions_to_wire(&conditions);
        let req = jsv1::GuardedScheduleJobRequest {
            create: Some(jsv1::ScheduleJobRequest {
                job: Some(req),
                labels: extras.labels.into_iter().collect(),
                policy: extras.policy,
                failure_policy: extras.failure_policy,
                traceparent: extras.traceparent.unwrap_or_default(),
            }),
            idempotency_key,
            if_match,
        };
        self.call(req, |ch, r| {
            async move { jobsd_client(ch).schedule_job_guarded(r).await }.boxed()
        })
        .await
        .map(guarded_wire::from_wire)
        .map_err(|err| unguarded(err, header))
    }

    async fn delete_job_guarded(
        &self,
        req: sv1::DeleteJobRequest,
        if_match: IfMatch,
    ) -> Result<Guarded, Error> {
        let req = jsv1::GuardedDeleteJobRequest {
            delete: Some(req),
            if_match: if_match.to_header(),
        };
        self.call(req, |ch, r| {
            async move { jobsd_client(ch).delete_job_guarded(r).await }.boxed()
        })
        .await
        .map(guarded_wire::from_wire)
        .map_err(|err| unguarded(err, guard::IF_MATCH))
    }
}

#[async_trait::async_trait]
impl Views for Remote {
    async fn job_view(&self, metadata: sv1::JobMetadata, name: String) -> Result<JobView, Error> {
        let req = jsv1::GetJobRequest {
            metadata: Some(metadata),
            name,
        };
        let view = self
            .call(req, |ch, r| {
                async move { jobsd_client(ch).get_job(r).await }.boxed()
            })
            .await
            .map_err(views_error)?;
        Ok(views_wire::view_from_wire(view))
    }

    async fn list_runs(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Run>, Error> {
        let req = jsv1::ListRunsRequest {
            metadata: Some(metadata),
            name,
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
            before,
        };
        let runs = self
            .call(req, |ch, r| {
                async move { jobsd_client(ch).list_runs(r).await }.boxed()
            })
            .await
            .map_err(views_error)?;
        Ok(runs
            .runs
            .into_iter()
            .map(views_wire::run_from_wire)
            .collect())
    }

    async fn list_views(
        &self,
        metadata: sv1::JobMetadata,
        filter: ListFilter,
    ) -> Result<ListPage, Error> {
        self.list_page(metadata, filter).await.map_err(views_error)
    }
}

#[async_trait::async_trait]
impl Pausing for Remote {
    async fn pause_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        note: String,
    ) -> Result<(), Error> {
        let req = jsv1::PauseJobRequest {
            metadata: Some(metadata),
            pause: Some(jv1::PauseJobRequest { name, note }),
        };
        self.steer(Steer::Pause, req, steer::pause())
            .await
            .map(drop)
    }

    async fn resume_job(&self, metadata: sv1::JobMetadata, name: String) -> Result<(), Error> {
        let req = jsv1::ResumeJobRequest {
            metadata: Some(metadata),
            resume: Some(jv1::ResumeJobRequest { name }),
        };
        self.steer(Steer::Pause, req, steer::resume())
            .await
            .map(drop)
    }

    async fn pause_jobs(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
        note: String,
    ) -> Result<Bulk, Error> {
        self.bulk(metadata, selection, Some(note)).await
    }

    async fn resume_jobs(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
    ) -> Result<Bulk, Error> {
        self.bulk(metadata, selection, None).await
    }
}

#[async_trait::async_trait]
impl ByHand for Remote {
    async fn trigger_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        overlap: Option<crate::schedule::Overlap>,
    ) -> Result<ExecutionId, Error> {
        let req = jsv1::TriggerJobRequest {
            metadata: Some(metadata),
            trigger: Some(jv1::TriggerJobRequest {
                name,
                overlap: steer_wire::overlap_to_wire(overlap),
            }),
        };
        let answer = self.steer(Steer::ByHand, req, steer::trigger()).await?;
        let id = answer.trigger.unwrap_or_default().execution_id;
        ExecutionId::parse(&id).ok_or_else(|| {
            Error::new(
                tonic::Code::Internal,
                format!("the scheduler replica answered {id:?}, not an execution id"),
            )
        })
    }

    async fn backfill_job(
        &self,
        metadata: sv1::JobMetadata,
        name: String,
        range: (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
        overlap: Option<crate::schedule::Overlap>,
        limit: usize,
    ) -> Result<Vec<(chrono::DateTime<chrono::Utc>, ExecutionId)>, Error> {
        let req = jsv1::BackfillJobRequest {
            metadata: Some(metadata),
            backfill: Some(jv1::BackfillJobRequest {
                name,
                start: views_wire::stamp(Some(range.0)),
                end: views_wire::stamp(Some(range.1)),
                overlap: steer_wire::overlap_to_wire(overlap),
            }),
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
        };
        let answer = self.steer(Steer::ByHand, req, steer::backfill()).await?;
        steer_wire::backfill_from_wire(answer.backfill.unwrap_or_default()).map_err(|why| {
            Error::new(
                tonic::Code::Internal,
                format!("the scheduler replica's backfill answer is malformed: {why}"),
            )
        })
    }
}

impl Remote {
    /// One page of jobsd's list of the owner's jobs, as the replica answers it.
    pub(super) async fn list_page(
        &self,
        metadata: sv1::JobMetadata,
        filter: ListFilter,
    ) -> Result<ListPage, Error> {
        let req = jsv1::ListJobsRequest {
            metadata: Some(metadata),
            filter: Some(views_wire::filter_to_wire(filter)),
        };
        let page = self
            .call(req, |ch, r| {
                async move { jobsd_client(ch).list_jobs(r).await }.boxed()
            })
            .await?;
        Ok(views_wire::page_from_wire(page))
    }
}

/// A replica without jobsd's views (a Dapr Scheduler answers `Unimplemented`) is refused as
/// an embedded-only feature would be; every other error is the replica's answer.
fn views_error(err: Error) -> Error {
    if err.code == tonic::Code::Unimplemented {
        return Error::new(
            tonic::Code::FailedPrecondition,
            "jobsd's job views need jobsd's scheduler: the replicas at \
             --scheduler-host-address do not serve them (a Dapr Scheduler keeps no status or \
             history)",
        );
    }
    err
}

/// A replica without conditional writes (a Dapr Scheduler, or a jobsd replica older than
/// them, answers `Unimplemented`: it ran nothing) refuses the request naming `header`, as one
/// that cannot keep a setting refuses it; every other error is the replica's answer.
fn unguarded(err: Error, header: &str) -> Error {
    if err.code == tonic::Code::Unimplemented {
        untravelled(header)
    } else {
        err
    }
}
