//! Creating many jobs in one call (`jobsd.v1.Jobs/ScheduleJobs`): each request is checked as a
//! create is, and the ones that pass are written together, one store write (one group commit)
//! for the lot instead of one per job. A refused request does not stop the others.

use std::collections::HashSet;

use super::detached::to_the_end;
use super::prepare::Prepared;
use super::{Engine, Error, JobExtras};
use crate::proto::dapr_scheduler as sv1;
use crate::store::{Op, OpResult};

impl Engine {
    /// Stores each of `jobs` as [`Engine::schedule_job_with`] would, in order (a later job of
    /// a name the batch created already is `AlreadyExists` unless `overwrite`), answering each
    /// one's outcome. `Err` only when the store write itself failed: then none was stored.
    pub async fn schedule_jobs(
        &self,
        jobs: Vec<(sv1::ScheduleJobRequest, JobExtras)>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let engine = self.clone();
        to_the_end(async move { engine.store_jobs(jobs).await }).await
    }

    /// [`Engine::schedule_jobs`] in the caller's task.
    async fn store_jobs(
        &self,
        jobs: Vec<(sv1::ScheduleJobRequest, JobExtras)>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let mut outcomes: Vec<Result<(), Error>> = Vec::with_capacity(jobs.len());
        let mut prepared = Vec::with_capacity(jobs.len());
        for (req, extras) in jobs {
            match self.prepare_job(req, extras) {
                Ok(new) => {
                    prepared.push((outcomes.len(), new));
                    outcomes.push(Ok(()));
                }
                Err(e) => outcomes.push(Err(e)),
            }
        }
        for run in runs_of_distinct_keys(prepared) {
            self.store_run(run, &mut outcomes).await?;
        }
        Ok(outcomes)
    }

    /// Writes `run` (no key twice) in one store write, under its keys' locks.
    async fn store_run(
        &self,
        run: Vec<(usize, Prepared)>,
        outcomes: &mut [Result<(), Error>],
    ) -> Result<(), Error> {
        // Each key's own lock: batches of other keys are written side by side.
        let _guards = self
            .inner
            .locks
            .lock_many(run.iter().map(|(_, new)| &*new.key))
            .await;
        let ops = run
            .iter()
            .map(|(_, new)| Op::PutJob {
                key: new.key.clone(),
                job: new.stored.clone(),
                create_only: new.create_only,
                due: new.first_due(),
            })
            .collect();
        let results = self.write(ops).await?;
        for ((slot, new), result) in run.into_iter().zip(results) {
            if result == OpResult::AlreadyExists {
                outcomes[slot] = Err(Error::AlreadyExists(new.key));
            } else {
                self.created(new);
            }
        }
        Ok(())
    }
}

/// `prepared` cut, in order, into runs in which no key comes twice: a store write holds one
/// change per key, and a later create of the same name must see the earlier one.
fn runs_of_distinct_keys(prepared: Vec<(usize, Prepared)>) -> Vec<Vec<(usize, Prepared)>> {
    let mut runs = Vec::new();
    let mut run = Vec::new();
    let mut keys = HashSet::new();
    for (slot, new) in prepared {
        if !keys.insert(new.key.clone()) {
            runs.push(std::mem::take(&mut run));
            keys.clear();
            keys.insert(new.key.clone());
        }
        run.push((slot, new));
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}
