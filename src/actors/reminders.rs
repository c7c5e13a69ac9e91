//! The reminders trait an actor runtime uses, and its one implementation over the Scheduler
//! seam, which both schedulers serve (the embedded engine and remote replicas): a reminder is
//! a Scheduler job whose target is the actor, stored under
//! `actorreminder||<namespace>||<type>||<id>||<name>`, as daprd stores it
//! (`pkg/actors/internal/scheduler`).

use std::sync::Arc;

use prost::Message;

use super::ActorRef;
use crate::proto::{common, dapr_scheduler as sv1};
use crate::schedule::period::{self, PeriodError};
use crate::seam::{self, Scheduler};

/// Type URL of the `data` daprd stores with a reminder: the raw JSON it was given, wrapped
/// in a `google.protobuf.BytesValue`.
pub const BYTES_VALUE_TYPE_URL: &str = "type.googleapis.com/google.protobuf.BytesValue";

/// A reminder to register.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewReminder {
    /// Whose reminder it is.
    pub actor: ActorRef,
    /// Its name, unique per actor.
    pub name: String,
    /// First tick: RFC 3339, Go duration or ISO-8601 (empty or `None` = one period from now).
    pub due_time: Option<String>,
    /// Go duration or ISO-8601 with an optional `Rn/` (empty or `None` = fires once).
    pub period: Option<String>,
    /// When it stops: RFC 3339, Go duration or ISO-8601, counted from the due time.
    pub ttl: Option<String>,
    /// Handed back on every tick, unchanged.
    pub data: Option<prost_types::Any>,
    /// Retries of a failed tick; `None` = the Scheduler default (constant 1 s × 3).
    pub failure_policy: Option<common::JobFailurePolicy>,
    /// Replace an existing reminder of that name (`None` = yes, daprd's default).
    pub overwrite: Option<bool>,
    /// W3C `traceparent` of the request that registered it (well-formed, or `None`): linked
    /// from every delivery's span.
    pub traceparent: Option<String>,
}

/// A reminder as the scheduler keeps it (daprd's `api.Reminder` read back from a job).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reminder {
    /// Whose reminder it is.
    pub actor: ActorRef,
    /// Its name.
    pub name: String,
    /// The due time as registered.
    pub due_time: Option<String>,
    /// The job's schedule (`@every 10s`), not the period as registered: daprd shows this too.
    pub schedule: Option<String>,
    /// Ticks at most (`Rn/` of the period).
    pub repeats: Option<u32>,
    /// The ttl as registered.
    pub ttl: Option<String>,
    /// The payload.
    pub data: Option<prost_types::Any>,
    /// The failure policy stored with it.
    pub failure_policy: Option<common::JobFailurePolicy>,
}

/// Why a reminder call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReminderError {
    /// The period has a date part or does not parse.
    #[error(transparent)]
    Period(#[from] PeriodError),
    /// The scheduler refused or failed the call (validation errors come back this way, as
    /// `Unknown` with go-etcd-cron's text, exactly as from a Dapr Scheduler).
    #[error(transparent)]
    Scheduler(#[from] seam::Error),
}

/// An app's actor reminders, kept as jobs by the Scheduler seam (the embedded engine or
/// remote Scheduler replicas: the seam's two implementations are what varies, so there is no
/// reminders trait of its own).
#[derive(Clone)]
pub struct SchedulerReminders {
    /// Embedded engine or remote replicas.
    scheduler: Arc<dyn Scheduler>,
    /// The app hosting the actors.
    app_id: String,
    /// Its namespace.
    namespace: String,
}

impl SchedulerReminders {
    /// Reminders of `app_id`'s actors in `namespace`, kept by `scheduler`.
    pub fn new(scheduler: Arc<dyn Scheduler>, app_id: &str, namespace: &str) -> Self {
        SchedulerReminders {
            scheduler,
            app_id: app_id.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    /// The Scheduler metadata of an actor (`actor_id` empty = the whole type).
    fn metadata(&self, actor_type: &str, actor_id: &str) -> sv1::JobMetadata {
        sv1::JobMetadata {
            app_id: self.app_id.clone(),
            namespace: self.namespace.clone(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(sv1::job_target_metadata::Type::Actor(
                    sv1::TargetActorReminder {
                        id: actor_id.to_owned(),
                        r#type: actor_type.to_owned(),
                    },
                )),
            }),
            concurrency_key: None,
        }
    }
}

/// The reminder a stored job stands for.
fn reminder_of(actor: ActorRef, name: String, job: sv1::Job) -> Reminder {
    Reminder {
        actor,
        name,
        due_time: job.due_time,
        schedule: job.schedule,
        repeats: job.repeats,
        ttl: job.ttl,
        data: job.data,
        failure_policy: job.failure_policy,
    }
}

/// Empty strings are unset, as in daprd's reminder requests.
fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

impl SchedulerReminders {
    /// Registers a reminder (replacing one of the same name unless `overwrite` is false:
    /// then `AlreadyExists`).
    pub async fn create(&self, reminder: NewReminder) -> Result<(), ReminderError> {
        let (schedule, repeats) = period::reminder_schedule(reminder.period.as_deref())?;
        let job = sv1::Job {
            schedule,
            repeats,
            due_time: non_empty(reminder.due_time),
            ttl: non_empty(reminder.ttl),
            data: reminder.data,
            failure_policy: reminder.failure_policy,
        };
        let metadata = self.metadata(&reminder.actor.actor_type, &reminder.actor.actor_id);
        let req = sv1::ScheduleJobRequest {
            name: reminder.name,
            job: Some(job),
            metadata: Some(metadata),
            overwrite: reminder.overwrite.unwrap_or(true),
        };
        match reminder.traceparent {
            None => self.scheduler.schedule_job(req).await?,
            traceparent => {
                let extras = seam::JobExtras {
                    traceparent,
                    ..Default::default()
                };
                self.scheduler.schedule_job_with(req, extras).await?
            }
        }
        Ok(())
    }

    /// The reminder, or `None` when there is none.
    pub async fn get(
        &self,
        actor: &ActorRef,
        name: &str,
    ) -> Result<Option<Reminder>, ReminderError> {
        let got = self
            .scheduler
            .get_job(sv1::GetJobRequest {
                name: name.to_owned(),
                metadata: Some(self.metadata(&actor.actor_type, &actor.actor_id)),
            })
            .await;
        match got {
            Ok(job) => Ok(Some(reminder_of(actor.clone(), name.to_owned(), job))),
            Err(e) if e.code == tonic::Code::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a reminder; deleting a missing one succeeds.
    pub async fn delete(&self, actor: &ActorRef, name: &str) -> Result<(), ReminderError> {
        self.scheduler
            .delete_job(sv1::DeleteJobRequest {
                name: name.to_owned(),
                metadata: Some(self.metadata(&actor.actor_type, &actor.actor_id)),
            })
            .await?;
        Ok(())
    }

    /// Every reminder of `actor_type`, or of one actor of it.
    pub async fn list(
        &self,
        actor_type: &str,
        actor_id: Option<&str>,
    ) -> Result<Vec<Reminder>, ReminderError> {
        let jobs = self
            .scheduler
            .list_jobs(sv1::ListJobsRequest {
                metadata: Some(self.metadata(actor_type, actor_id.unwrap_or(""))),
            })
            .await?;
        Ok(jobs
            .into_iter()
            .map(|named| {
                let id = match named.metadata.and_then(|m| m.target).and_then(|t| t.r#type) {
                    Some(sv1::job_target_metadata::Type::Actor(a)) => a.id,
                    _ => actor_id.unwrap_or_default().to_owned(),
                };
                let actor = ActorRef::new(actor_type, &id);
                reminder_of(actor, named.name, named.job.unwrap_or_default())
            })
            .collect())
    }

    /// Deletes every reminder of `actor_type` (`actor_id` `None`), of one actor, or with
    /// `id_prefix` of every actor whose id starts with `actor_id`.
    pub async fn delete_all(
        &self,
        actor_type: &str,
        actor_id: Option<&str>,
        id_prefix: bool,
    ) -> Result<(), ReminderError> {
        self.scheduler
            .delete_by_metadata(sv1::DeleteByMetadataRequest {
                metadata: Some(self.metadata(actor_type, actor_id.unwrap_or(""))),
                // As daprd: a prefix match only when asked for (it would take every type
                // whose name starts with this one's).
                id_prefix_match: Some(id_prefix && actor_id.is_some()),
            })
            .await?;
        Ok(())
    }
}

/// A reminder's `data` as daprd stores what an HTTP or SDK caller sent: the raw JSON bytes
/// inside a `google.protobuf.BytesValue` (`None` for an empty body field).
pub fn data_from_json(raw: &[u8]) -> Option<prost_types::Any> {
    if raw.is_empty() {
        return None;
    }
    Some(prost_types::Any {
        type_url: BYTES_VALUE_TYPE_URL.to_owned(),
        value: raw.to_vec().encode_to_vec(),
    })
}

/// The JSON daprd writes for a reminder's `data` (in the app call and on GET): a
/// BytesValue's raw bytes inline (the JSON the caller sent, compacted as Go's `json.Marshal`
/// compacts a `json.RawMessage`); other types as protojson when they have a JSON form this
/// crate writes, else `null`.
pub fn data_to_json(data: &prost_types::Any) -> Vec<u8> {
    if data.type_url == BYTES_VALUE_TYPE_URL {
        if let Ok(raw) = Vec::<u8>::decode(data.value.as_slice()) {
            return crate::go::json::compact(&raw).unwrap_or(raw);
        }
    } else if data.type_url == "type.googleapis.com/google.protobuf.Value"
        && let Ok(value) = prost_types::Value::decode(data.value.as_slice())
    {
        let mut out = String::new();
        if crate::go::protojson::write_value(&mut out, &value).is_ok() {
            return out.into_bytes();
        }
    }
    b"null".to_vec()
}
