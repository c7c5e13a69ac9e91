//! Actors on one host: reminders kept by the scheduler, timers kept in memory, and actor
//! method calls, all delivered to the app the way daprd delivers them.
//!
//! - [`SchedulerReminders`] keeps an app's reminders as jobs through the Scheduler seam, so
//!   both the embedded engine and remote Scheduler replicas serve them.
//! - [`ActorRuntime`] is the single-host runtime: it learns the app's actor types from
//!   `GET /dapr/config`, hosts every actor of those types (there is no placement service:
//!   one host), runs one call at a time per actor (methods, reminders and timers alike),
//!   deactivates idle actors and keeps timers. Reminder triggers come back to it through
//!   [`ActorRuntime::remind`], with Dapr's outcomes (success, failure, cancel).
//! - [`Targets`] is the trigger sink of a sidecar: app jobs go to `delivery`, reminders to
//!   the runtime.
//!
//! Actor state is out of scope: its routes answer with Dapr's error for a sidecar without an
//! actor state store.

mod calls;
pub mod config;
mod hosts;
pub mod placement;
pub mod reminders;
mod runtime;
mod sink;
mod timers;

use std::fmt;
use std::sync::Arc;

pub use reminders::{NewReminder, Reminder, ReminderError, SchedulerReminders};
pub use runtime::{ActorError, ActorRuntime, MethodAnswer, MethodCall, RuntimeConfig};
pub use sink::Targets;
pub use timers::NewTimer;

/// One actor: its type and id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorRef {
    /// The actor type (a class of the app).
    pub actor_type: Arc<str>,
    /// The actor id within its type.
    pub actor_id: Arc<str>,
}

impl ActorRef {
    /// The actor `actor_type` / `actor_id`.
    pub fn new(actor_type: &str, actor_id: &str) -> Self {
        ActorRef {
            actor_type: actor_type.into(),
            actor_id: actor_id.into(),
        }
    }
}

impl fmt::Display for ActorRef {
    /// daprd's actor key: `<type>||<id>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}||{}", self.actor_type, self.actor_id)
    }
}
