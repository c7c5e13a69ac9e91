//! Where an actor's calls go when the sidecar uses placement (`--placement-host-address`):
//! here, or to the sidecar the ring places the actor on; and what this sidecar does for calls
//! and reminder ticks other sidecars send it (`api::internal`).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::ActorRef;
use super::placement::remote::{MOVED, REMINDER_CANCELLED};
use super::placement::ring::Host;
use super::placement::{Drain, Identity, Lookup, Peers, Placement, Route, Tables};
use super::runtime::{ActorError, ActorRuntime, MethodAnswer, MethodCall};
use crate::proto::dapr_scheduler as sv1;
use crate::trigger::{ExecutionId, Trigger, TriggerKind, TriggerResult};

impl ActorRuntime {
    /// Places this runtime's actors with the placement service at `me.addresses`: the hosted
    /// types are reported (and each change), actors that a new table places elsewhere are
    /// deactivated here first, and calls go where the ring says.
    pub fn attach_placement(&self, me: Identity, stop: CancellationToken) {
        let runtime = self.clone();
        let host = me.name.clone();
        let drain: Drain = Arc::new(move |tables: Arc<Tables>| {
            let runtime = runtime.clone();
            let host = host.clone();
            Box::pin(async move { runtime.drain_moved(&tables, &host).await })
        });
        let placement = Placement::start(me, self.actor_types(), drain, stop);
        if self
            .inner_placement()
            .set((placement, Peers::default()))
            .is_err()
        {
            tracing::warn!("placement attached twice; the first stays");
        }
    }

    fn inner_placement(&self) -> &std::sync::OnceLock<(Placement, Peers)> {
        &self.inner.placement
    }

    /// Whether placement is connected and ready; `None` without placement (this sidecar
    /// hosts every actor of its types itself).
    pub fn placement_ready(&self) -> Option<bool> {
        self.inner_placement().get().map(|(p, _)| p.is_ready())
    }

    /// Where `actor`'s calls go; `None` without placement (this host).
    pub(super) async fn locate(&self, actor: &ActorRef) -> Option<Route> {
        let (placement, peers) = self.inner_placement().get()?;
        Some(
            match placement.lookup(&actor.actor_type, &actor.actor_id).await {
                Lookup::Local => Route::Local,
                Lookup::Remote(host) => Route::Remote(host, peers.clone()),
                Lookup::Nowhere => Route::Nowhere,
            },
        )
    }

    /// Deactivates the active actors the new tables place on another host (each once its
    /// turn ends), before the update is acked: an actor is never active on two hosts.
    async fn drain_moved(&self, tables: &Tables, me: &str) {
        let moving: Vec<ActorRef> = self
            .active_actors()
            .into_iter()
            .filter(|a| {
                tables
                    .owner(&a.actor_type, &a.actor_id)
                    .is_none_or(|h| h.name != me)
            })
            .collect();
        if !moving.is_empty() {
            tracing::debug!(
                actors = moving.len(),
                "placement: draining actors that moved"
            );
        }
        futures_util::future::join_all(moving.iter().map(|a| self.deactivate_moved(a))).await;
    }

    /// A method call forwarded to `host`.
    pub(super) async fn invoke_remote(
        &self,
        host: &Host,
        peers: &Peers,
        call: MethodCall,
    ) -> Result<MethodAnswer, ActorError> {
        peers
            .call_actor(host, &call)
            .await
            .map_err(|e| ActorError::Remote {
                code: e.code,
                message: e.message,
            })
    }

    /// A reminder tick forwarded to `host`.
    pub(super) async fn remind_remote(
        &self,
        host: &Host,
        peers: &Peers,
        actor: &ActorRef,
        trigger: &Trigger,
    ) -> TriggerResult {
        match peers
            .call_reminder(host, actor, &trigger.name, trigger.data.clone())
            .await
        {
            Ok(()) => TriggerResult::Success,
            Err(e) if e.message == REMINDER_CANCELLED => TriggerResult::Cancel,
            Err(e) => {
                tracing::debug!(actor = %actor, host = %host.name, error = %e,
                    "reminder tick to another host failed");
                TriggerResult::Failed
            }
        }
    }

    /// A method call another sidecar sent: run here if the actor lives here.
    pub async fn invoke_from_peer(&self, call: MethodCall) -> Result<MethodAnswer, ActorError> {
        if let Some((placement, _)) = self.inner_placement().get()
            && !placement.is_local(&call.actor.actor_type, &call.actor.actor_id)
        {
            return Err(ActorError::Call(MOVED.to_owned()));
        }
        self.invoke_local(call).await
    }

    /// A reminder tick another sidecar sent; `Err` carries the status message to answer.
    pub async fn remind_from_peer(
        &self,
        actor: ActorRef,
        name: &str,
        data: Option<prost_types::Any>,
        namespace: &str,
    ) -> Result<(), String> {
        if let Some((placement, _)) = self.inner_placement().get()
            && !placement.is_local(&actor.actor_type, &actor.actor_id)
        {
            return Err(MOVED.to_owned());
        }
        let now = self.inner.clock.now();
        let key = format!(
            "actorreminder||{namespace}||{}||{}||{name}",
            actor.actor_type, actor.actor_id
        );
        let trigger = Trigger {
            execution_id: ExecutionId::for_tick(&key, now),
            key: key.into(),
            name: name.into(),
            data,
            metadata: Arc::new(sv1::JobMetadata {
                app_id: String::new(),
                namespace: namespace.to_owned(),
                target: Some(sv1::JobTargetMetadata {
                    r#type: Some(sv1::job_target_metadata::Type::Actor(
                        sv1::TargetActorReminder {
                            r#type: actor.actor_type.to_string(),
                            id: actor.actor_id.to_string(),
                        },
                    )),
                }),
                ..Default::default()
            }),
            scheduled_at: now,
            tick: None,
            kind: TriggerKind::default(),
            attempt: 1,
            created_by: None,
        };
        match self.remind_local(&trigger).await {
            TriggerResult::Success => Ok(()),
            TriggerResult::Cancel => Err(REMINDER_CANCELLED.to_owned()),
            other => Err(format!("error invoking reminder: {}", other.outcome())),
        }
    }
}
