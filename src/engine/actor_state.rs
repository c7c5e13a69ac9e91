//! Actor state, kept beside the jobs in the store's values table: one entry per state key of
//! an actor ([`keys::actor_state_key`]), read back byte for byte; a transaction's changes
//! are one store request, so they land together or not at all.

use super::{Engine, Error};
use crate::jobs::actor_state::{self, ActorStateOwner, StateChange};
use crate::store::Op;
use crate::trigger::keys;

/// The values-table key of `key` in `owner`'s state.
fn entry_key(owner: &ActorStateOwner, key: &str) -> String {
    keys::actor_state_key(
        &owner.namespace,
        &owner.app_id,
        &owner.actor_type,
        &owner.actor_id,
        key,
    )
}

impl Engine {
    /// The value stored under `key` in the actor's state; `None` when there is none.
    pub async fn get_actor_state(
        &self,
        owner: &ActorStateOwner,
        key: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.inner.store.get_value(&entry_key(owner, key)).await?)
    }

    /// Applies `changes` to the actor's state, in order, in one commit. `BadRequest` for a
    /// change without a key or a transaction too large to be written at once (nothing is
    /// written).
    pub async fn actor_state_transaction(
        &self,
        owner: &ActorStateOwner,
        changes: Vec<StateChange>,
    ) -> Result<(), Error> {
        if changes.iter().any(|c| c.key().is_empty()) {
            return Err(Error::BadRequest("missing key".into()));
        }
        if let Some(why) = actor_state::too_large(&changes) {
            return Err(Error::BadRequest(why));
        }
        if changes.is_empty() {
            return Ok(());
        }
        let ops = changes
            .into_iter()
            .map(|change| match change {
                StateChange::Upsert { key, value } => Op::PutValue {
                    key: entry_key(owner, &key),
                    value: Some(value),
                },
                StateChange::Delete { key } => Op::PutValue {
                    key: entry_key(owner, &key),
                    value: None,
                },
            })
            .collect();
        self.inner.store.write(ops).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::store::Memory;

    fn owner(app: &str, id: &str) -> ActorStateOwner {
        ActorStateOwner {
            namespace: "default".into(),
            app_id: app.into(),
            actor_type: "Counter".into(),
            actor_id: id.into(),
        }
    }

    fn upsert(key: &str, value: &str) -> StateChange {
        StateChange::Upsert {
            key: key.into(),
            value: value.as_bytes().to_vec(),
        }
    }

    #[tokio::test]
    async fn state_is_kept_per_actor_and_changed_whole() {
        let store = Arc::new(Memory::new());
        let engine = Engine::new(store, Arc::new(ManualClock::new(chrono::Utc::now())));
        let a = owner("app", "a");
        engine
            .actor_state_transaction(&a, vec![upsert("count", "1"), upsert("name", "\"x\"")])
            .await
            .unwrap();
        assert_eq!(
            engine
                .get_actor_state(&a, "count")
                .await
                .unwrap()
                .as_deref(),
            Some(&b"1"[..])
        );
        // Another actor, or the same actor id of another app, has state of its own.
        assert_eq!(
            engine
                .get_actor_state(&owner("app", "b"), "count")
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            engine
                .get_actor_state(&owner("other", "a"), "count")
                .await
                .unwrap(),
            None
        );
        // Later changes win; a delete removes.
        engine
            .actor_state_transaction(
                &a,
                vec![
                    upsert("count", "2"),
                    StateChange::Delete { key: "name".into() },
                ],
            )
            .await
            .unwrap();
        assert_eq!(
            engine
                .get_actor_state(&a, "count")
                .await
                .unwrap()
                .as_deref(),
            Some(&b"2"[..])
        );
        assert_eq!(engine.get_actor_state(&a, "name").await.unwrap(), None);
        // A change without a key refuses the whole transaction.
        let err = engine
            .actor_state_transaction(&a, vec![upsert("count", "3"), upsert("", "4")])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            Error::BadRequest("missing key".into()).to_string()
        );
        assert_eq!(
            engine
                .get_actor_state(&a, "count")
                .await
                .unwrap()
                .as_deref(),
            Some(&b"2"[..])
        );
    }
}
