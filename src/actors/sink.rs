//! The trigger sink of a sidecar that hosts actors: app jobs go to the app's delivery,
//! actor reminders to the actor runtime.

use std::sync::Arc;

use super::runtime::ActorRuntime;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
use crate::trigger::{Report, Sink, Trigger, TriggerResult, keys};

/// Routes each trigger by its target.
pub struct Targets {
    /// App jobs (`POST /job/<name>`).
    jobs: Arc<dyn Sink>,
    /// Actor reminders.
    actors: ActorRuntime,
}

impl Targets {
    /// Jobs to `jobs`, reminders to `actors`.
    pub fn new(jobs: Arc<dyn Sink>, actors: ActorRuntime) -> Self {
        Targets { jobs, actors }
    }
}

#[async_trait::async_trait]
impl Sink for Targets {
    async fn deliver(&self, trigger: Trigger) -> TriggerResult {
        match trigger
            .metadata
            .target
            .as_ref()
            .and_then(|t| t.r#type.as_ref())
        {
            Some(Target::Actor(_)) => self.actors.remind(&trigger).await,
            _ => self.jobs.deliver(trigger).await,
        }
    }

    async fn deliver_reported(&self, trigger: Trigger) -> Report {
        match trigger
            .metadata
            .target
            .as_ref()
            .and_then(|t| t.r#type.as_ref())
        {
            Some(Target::Actor(_)) => self.actors.remind(&trigger).await.into(),
            _ => self.jobs.deliver_reported(trigger).await,
        }
    }

    fn is_deliverable(&self, key: &str) -> bool {
        match keys::actor_type_of(key) {
            Some(actor_type) => self.actors.deliverable(actor_type),
            None => self.jobs.is_deliverable(key),
        }
    }

    /// The app's concurrency bound covers reminder calls too (daprd's
    /// `--app-max-concurrency` limits every call to the app).
    fn capacity(&self) -> usize {
        self.jobs.capacity()
    }
}
