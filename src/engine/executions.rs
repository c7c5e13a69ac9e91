//! Async completion (jobsd's `/jobsd/v1/executions/{id}/…`): an execution whose app answered
//! "later" (HTTP `202` with `Jobsd-Async: true` or a job with `policy.lease`; gRPC metadata
//! `jobsd-async: true`) stays in flight under a lease. The app extends the lease with
//! heartbeats and ends the execution with complete (the attempt succeeded) or fail (it
//! failed; the job's failure policy decides). A lease that runs out fails the attempt.
//!
//! The trigger loop owns the held executions (`runner::lease`); these calls go through it,
//! and each answers once its change is durable. Calls are owner-scoped: an app sees only
//! the executions of its own jobs, and every other id is `NotFound`.

use super::runner::{Call, Command};
use super::{Engine, Error};
pub use crate::jobs::{Ending, ExecutionCall, HeldExecution};
use crate::proto::dapr_scheduler as sv1;
use crate::trigger::{ExecutionId, keys};

impl Engine {
    /// Applies `call` to the held execution `id` of the metadata's owner and answers with the
    /// execution as it is after the call, once the change is durable.
    ///
    /// `ExecutionNotFound` when no execution of this owner is held under `id` (unknown,
    /// ended long ago, of another app, or a heartbeat of an ended one); `ExecutionEnded` for
    /// a complete of an execution that ended otherwise (failed, lease expired, answered at
    /// once), or a fail of one completed. A complete of a completed execution (or a fail of a
    /// failed one) answers as the first did: retrying a call is safe.
    pub async fn execution_call(
        &self,
        metadata: &sv1::JobMetadata,
        id: &str,
        call: ExecutionCall,
    ) -> Result<HeldExecution, Error> {
        let owner = keys::owner_prefix(keys::check_metadata(Some(metadata))?)?;
        let parsed = ExecutionId::parse(id).ok_or_else(|| {
            Error::BadRequest(format!(
                "executionId: {id:?} is not an execution id (a UUID)"
            ))
        })?;
        let not_held =
            || Error::ExecutionNotFound(format!("execution {id} is not held (unknown or ended)"));
        let (reply, answer) = tokio::sync::oneshot::channel();
        let Some(tx) = self
            .inner
            .loop_tx
            .as_ref()
            .filter(|_| !self.inner.following)
        else {
            return Err(not_held());
        };
        tx.send(Command::Execution(Box::new(Call {
            id: parsed,
            owner,
            call,
            reply,
        })))
        .map_err(|_| not_held())?;
        answer.await.map_err(|_| not_held())?
    }
}
