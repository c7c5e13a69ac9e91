//! Actor state through the replicas (`jobsd.scheduler.v1.Jobs`): any replica answers, the
//! store being shared. A Dapr Scheduler serves no actor state (`Unimplemented`).

use futures_util::FutureExt;

use super::{Remote, jobsd_client};
use crate::proto::jobsd_replica as jsv1;
use crate::seam::actor_state_wire::{change_to_wire, owner_to_wire};
use crate::seam::{ActorState, ActorStateOwner, Error, StateChange};

#[async_trait::async_trait]
impl ActorState for Remote {
    async fn get_actor_state(
        &self,
        owner: ActorStateOwner,
        key: String,
    ) -> Result<Option<Vec<u8>>, Error> {
        let req = jsv1::GetActorStateRequest {
            owner: Some(owner_to_wire(owner)),
            key,
        };
        let answer = self
            .call(req, |ch, r| {
                async move { jobsd_client(ch).get_actor_state(r).await }.boxed()
            })
            .await?;
        Ok(answer.value)
    }

    async fn actor_state_transaction(
        &self,
        owner: ActorStateOwner,
        changes: Vec<StateChange>,
    ) -> Result<(), Error> {
        let req = jsv1::ActorStateTransactionRequest {
            owner: Some(owner_to_wire(owner)),
            changes: changes.into_iter().map(change_to_wire).collect(),
        };
        self.call(req, |ch, r| {
            async move { jobsd_client(ch).actor_state_transaction(r).await }.boxed()
        })
        .await?;
        Ok(())
    }
}
