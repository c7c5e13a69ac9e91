//! Actor state on `jobsd.scheduler.v1.Jobs`: whose state and its changes, to and from the
//! wire (the sidecar's remote seam sends them, a replica reads them back).

use crate::proto::jobsd_replica as jsv1;
use crate::seam::{ActorStateOwner, StateChange};

/// `owner` as the wire carries it.
pub fn owner_to_wire(owner: ActorStateOwner) -> jsv1::ActorStateOwner {
    jsv1::ActorStateOwner {
        namespace: owner.namespace,
        app_id: owner.app_id,
        actor_type: owner.actor_type,
        actor_id: owner.actor_id,
    }
}

/// `owner` as the wire carries it back.
pub fn owner_from_wire(owner: jsv1::ActorStateOwner) -> ActorStateOwner {
    ActorStateOwner {
        namespace: owner.namespace,
        app_id: owner.app_id,
        actor_type: owner.actor_type,
        actor_id: owner.actor_id,
    }
}

/// A change as the wire carries it: a value upserts, none deletes.
pub fn change_from_wire(change: jsv1::ActorStateChange) -> StateChange {
    match change.value {
        Some(value) => StateChange::Upsert {
            key: change.key,
            value,
        },
        None => StateChange::Delete { key: change.key },
    }
}

/// A change as the wire carries it.
pub fn change_to_wire(change: StateChange) -> jsv1::ActorStateChange {
    match change {
        StateChange::Upsert { key, value } => jsv1::ActorStateChange {
            key,
            value: Some(value),
        },
        StateChange::Delete { key } => jsv1::ActorStateChange { key, value: None },
    }
}
