//! Where triggers go when they fire: the app (embedded sidecar) or the WatchJobs streams
//! (scheduler replica). The engine only knows this trait.

use std::sync::Arc;

use crate::proto::scheduler as sv1;

/// One firing of a job, handed to the sink.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// Composed key of the job (`app||ns||app||name`, `actorreminder||…`).
    pub key: Arc<str>,
    /// The job's name as its owner gave it (no key prefix).
    pub name: Arc<str>,
    /// The stored payload, passed through unchanged.
    pub data: Option<prost_types::Any>,
    /// Owner and target the job was stored with.
    pub metadata: Arc<sv1::JobMetadata>,
    /// The nominal time this trigger is for (the tick, plus retry intervals).
    pub scheduled_at: chrono::DateTime<chrono::Utc>,
}

/// What became of a trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerResult {
    /// The target took it (Dapr `SUCCESS`).
    Success,
    /// The target failed it; the job's failure policy decides (Dapr `FAILED`).
    Failed,
    /// Nobody could take it (no app, app unhealthy, no stream): the trigger is staged, not
    /// counted, and fires again as soon as the target reports itself deliverable (Dapr
    /// `UNDELIVERABLE`).
    Undeliverable,
}

/// The receiver of triggers.
#[async_trait::async_trait]
pub trait Sink: Send + Sync + 'static {
    /// Delivers one trigger and reports what became of it. Called concurrently for different
    /// jobs; never twice at once for the same job.
    async fn deliver(&self, trigger: Trigger) -> TriggerResult;

    /// Whether a trigger for `key` could be taken right now. A trigger answered
    /// `Undeliverable` is staged only while this is false (otherwise it is retried at once);
    /// staged triggers come back through `Engine::release`.
    fn is_deliverable(&self, key: &str) -> bool;

    /// Most triggers worth handing to the sink at once (an app's concurrency limit). The
    /// engine keeps the rest queued, in time order, and fires them as answers come back, so a
    /// burst of due jobs never becomes a task per job. Unbounded by default.
    fn capacity(&self) -> usize {
        usize::MAX
    }
}
