//! Conditional writes (issue 13, feature E3): `Idempotency-Key` on a create and `If-Match` on
//! a create or delete, checked by the store in the same commit as the write
//! ([`Op::Guarded`]), so that neither a concurrent writer nor a replica can come between the
//! check and the write.
//!
//! The rules are [`crate::jobs::guard`]'s; here they are applied to the store's writes.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use prost::Message;
use tokio_util::sync::CancellationToken;

use super::convert::timestamp;
use super::detached::to_the_end;
use super::{Command, Engine, Error, JobExtras};
use crate::clock::Clock;
use crate::jobs::guard::{
    Conditions, Guarded, IDEMPOTENCY_KEY, IDEMPOTENCY_WINDOW, IF_MATCH, IfMatch, etag,
    generation_of,
};
use crate::proto::dapr_scheduler as sv1;
use crate::store::{self, GuardedWrite, IdempotencyClaim, IdempotencyRecord, Op, OpResult, Store};
use crate::trigger::keys;

/// How often expired idempotency records are swept, by the engine's clock.
const SWEEP_PERIOD: Duration = Duration::from_secs(600);

/// Idempotency records read per sweep page.
const SWEEP_PAGE: usize = 1024;

impl Engine {
    /// [`Engine::schedule_job_with`] under `conditions`; `AlreadyExists` and every check of
    /// a create are as there. See the module for the rules.
    pub async fn schedule_job_guarded(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
        conditions: &Conditions,
    ) -> Result<Guarded, Error> {
        let (engine, conditions) = (self.clone(), conditions.clone());
        to_the_end(async move { engine.store_guarded(req, extras, &conditions).await }).await
    }

    /// [`Engine::schedule_job_guarded`] in the caller's task.
    async fn store_guarded(
        &self,
        req: sv1::ScheduleJobRequest,
        extras: JobExtras,
        conditions: &Conditions,
    ) -> Result<Guarded, Error> {
        let name = req.name.clone();
        let fingerprint = conditions
            .idempotency_key
            .as_ref()
            .map(|_| fingerprint(&req, &extras, conditions.if_match.as_ref()));
        let owner = keys::owner_prefix(keys::check_metadata(req.metadata.as_ref())?)?;
        let new = self.prepare_job(req, extras)?;
        let now = self.inner.clock.now();
        let claim = conditions
            .idempotency_key
            .as_ref()
            .map(|key| IdempotencyClaim {
                key: format!("{owner}{key}"),
                record: Some(IdempotencyRecord {
                    name: name.clone(),
                    fingerprint: fingerprint.unwrap_or_default(),
                    at: Some(timestamp(now)),
                    generation: new.stored.generation,
                }),
                expired_before: Some(timestamp(now - IDEMPOTENCY_WINDOW)),
            });
        let write = GuardedWrite {
            key: new.key.clone(),
            create_only: new.create_only,
            if_match: conditions.if_match.as_ref().map(to_store),
            idempotency: claim,
            due_ms: new.first_due(),
        };
        let _guard = self.lock(&new.key).await;
        let result = self
            .write(vec![Op::Guarded {
                write: Box::new(write),
                job: Some(Box::new(new.stored.clone())),
            }])
            .await?;
        Ok(match result.first().copied().unwrap_or(OpResult::Done) {
            OpResult::AlreadyExists => return Err(Error::AlreadyExists(new.key)),
            OpResult::PreconditionFailed => {
                precondition_failed(conditions.if_match.as_ref(), &name, self, &new.key).await
            }
            OpResult::Replayed(generation) => Guarded::Replayed {
                etag: etag(generation),
            },
            OpResult::KeyReused => key_reused(conditions, &name),
            _ => {
                let etag = etag(new.stored.generation);
                self.created(new);
                Guarded::Written { etag }
            }
        })
    }

    /// [`Engine::delete_job`] only if the job meets `if_match`.
    pub async fn delete_job_guarded(
        &self,
        req: sv1::DeleteJobRequest,
        if_match: &IfMatch,
    ) -> Result<Guarded, Error> {
        let (engine, if_match) = (self.clone(), if_match.clone());
        to_the_end(async move { engine.remove_guarded(req, &if_match).await }).await
    }

    /// [`Engine::delete_job_guarded`] in the caller's task.
    async fn remove_guarded(
        &self,
        req: sv1::DeleteJobRequest,
        if_match: &IfMatch,
    ) -> Result<Guarded, Error> {
        let metadata = keys::check_metadata(req.metadata.as_ref())?;
        let key = keys::job_key(metadata, &req.name)?;
        let write = GuardedWrite {
            key: key.clone(),
            if_match: Some(to_store(if_match)),
            ..GuardedWrite::default()
        };
        let _guard = self.lock(&key).await;
        let results = self
            .write(vec![Op::Guarded {
                write: Box::new(write),
                job: None,
            }])
            .await?;
        if results.first() == Some(&OpResult::PreconditionFailed) {
            return Ok(precondition_failed(Some(if_match), &req.name, self, &key).await);
        }
        self.count_deleted(&results);
        self.notify(Command::Remove(key.into()));
        Ok(Guarded::Written {
            etag: String::new(),
        })
    }
}

/// What the store compares for `if_match`: the generations of the strong etags that are
/// jobsd's.
fn to_store(if_match: &IfMatch) -> store::IfMatch {
    match if_match {
        IfMatch::Any => store::IfMatch {
            any: true,
            generations: Vec::new(),
        },
        IfMatch::Etags(etags) => store::IfMatch {
            any: false,
            generations: etags.iter().filter_map(|t| generation_of(t)).collect(),
        },
    }
}

/// The refusal of a write whose `If-Match` the job did not meet, naming the job's etag now
/// (read after the refusal: it says what the client may retry with, not why it failed).
async fn precondition_failed(
    if_match: Option<&IfMatch>,
    name: &str,
    engine: &Engine,
    key: &str,
) -> Guarded {
    let given = if_match.map(IfMatch::to_header).unwrap_or_default();
    let now = engine.inner.store.get_job(key).await.ok().flatten();
    Guarded::PreconditionFailed(match now {
        None => format!("{IF_MATCH}: {given} but job '{name}' does not exist"),
        Some(job) => format!(
            "{IF_MATCH}: {given} does not match job '{name}', whose etag is {}; read it again \
             and retry",
            etag(job.generation)
        ),
    })
}

/// The refusal of a create whose `Idempotency-Key` came with another request before.
fn key_reused(conditions: &Conditions, name: &str) -> Guarded {
    let key = conditions.idempotency_key.as_deref().unwrap_or_default();
    Guarded::KeyReused(format!(
        "{IDEMPOTENCY_KEY}: {key:?} was used for a different request (not this create of job \
         '{name}') within the last {} hours; use a new key for a new request",
        IDEMPOTENCY_WINDOW.num_hours()
    ))
}

/// What makes a create the same request: its name, job, `overwrite`, jobsd's settings and
/// `If-Match`, hashed (name-based UUID, SHA-1) over a length-prefixed encoding. The trace
/// context is left out: a retry carries a new one.
fn fingerprint(
    req: &sv1::ScheduleJobRequest,
    extras: &JobExtras,
    if_match: Option<&IfMatch>,
) -> Vec<u8> {
    fn part(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    let mut out = Vec::new();
    part(&mut out, req.name.as_bytes());
    part(
        &mut out,
        &req.job
            .as_ref()
            .map(Message::encode_to_vec)
            .unwrap_or_default(),
    );
    part(&mut out, &[u8::from(req.overwrite)]);
    part(&mut out, &(extras.labels.len() as u64).to_le_bytes());
    for (k, v) in &extras.labels {
        part(&mut out, k.as_bytes());
        part(&mut out, v.as_bytes());
    }
    part(
        &mut out,
        &extras
            .policy
            .as_ref()
            .map(|p| [&[1u8][..], &p.encode_to_vec()].concat())
            .unwrap_or_default(),
    );
    part(
        &mut out,
        &extras
            .failure_policy
            .as_ref()
            .map(|p| [&[1u8][..], &p.encode_to_vec()].concat())
            .unwrap_or_default(),
    );
    part(
        &mut out,
        if_match
            .map(IfMatch::to_header)
            .unwrap_or_default()
            .as_bytes(),
    );
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, &out)
        .as_bytes()
        .to_vec()
}

/// Deletes expired idempotency records every [`SWEEP_PERIOD`] (by `clock`) until `stop`.
pub(super) fn spawn_sweep(store: Arc<dyn Store>, clock: Arc<dyn Clock>, stop: CancellationToken) {
    let period = TimeDelta::from_std(SWEEP_PERIOD).unwrap_or(TimeDelta::MAX);
    super::sweep::every(clock, period, stop, move |now| {
        let store = Arc::clone(&store);
        async move {
            if let Err(e) = sweep(&*store, now).await {
                tracing::warn!(error = %e, "idempotency-key sweep failed; next time");
            }
        }
    });
}

/// Deletes the idempotency records that expired by `now`; how many.
pub async fn sweep(store: &dyn Store, now: DateTime<Utc>) -> Result<u64, store::Error> {
    let before = timestamp(now - IDEMPOTENCY_WINDOW);
    let mut after: Option<String> = None;
    let mut deleted = 0;
    loop {
        let page = store.page_idempotency(after.as_deref(), SWEEP_PAGE).await?;
        let Some((last, _)) = page.last() else {
            return Ok(deleted);
        };
        after = Some(last.clone());
        let ops: Vec<Op> = page
            .into_iter()
            .filter(|(_, at)| (at.seconds, at.nanos) < (before.seconds, before.nanos))
            .map(|(key, _)| Op::ForgetIdempotency { key, before })
            .collect();
        if ops.is_empty() {
            continue;
        }
        for result in store.write(ops).await? {
            if let OpResult::Deleted(n) = result {
                deleted += n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_match_parses_star_lists_and_weak_tags_and_refuses_bare_words() {
        assert_eq!(IfMatch::parse(" * "), Ok(IfMatch::Any));
        let parsed = IfMatch::parse("\"00000000000000ff\", W/\"x\"").unwrap();
        assert_eq!(
            parsed,
            IfMatch::Etags(vec!["\"00000000000000ff\"".into(), "W/\"x\"".into()])
        );
        // Only the strong etag of jobsd's form names a generation.
        assert_eq!(to_store(&parsed).generations, [255]);
        for bad in ["abc", "\"a", "", "\"a\"b\"", "*, \"a\""] {
            let err = IfMatch::parse(bad).unwrap_err();
            assert!(err.starts_with("If-Match: "), "{bad}: {err}");
        }
        assert_eq!(etag(255), "\"00000000000000ff\"");
        assert_eq!(generation_of(&etag(u64::MAX)), Some(u64::MAX));
    }

    #[test]
    fn the_fingerprint_covers_the_request_but_not_its_trace_context() {
        let req = sv1::ScheduleJobRequest {
            name: "j".into(),
            job: Some(sv1::Job {
                schedule: Some("@every 1s".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let extras = JobExtras::default();
        let base = fingerprint(&req, &extras, None);
        let traced = JobExtras {
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
            ..JobExtras::default()
        };
        assert_eq!(fingerprint(&req, &traced, None), base);
        let overwrite = sv1::ScheduleJobRequest {
            overwrite: true,
            ..req.clone()
        };
        let renamed = sv1::ScheduleJobRequest {
            name: "k".into(),
            ..req.clone()
        };
        let labelled = JobExtras {
            labels: [("a".to_owned(), "b".to_owned())].into(),
            ..JobExtras::default()
        };
        for other in [
            fingerprint(&overwrite, &extras, None),
            fingerprint(&renamed, &extras, None),
            fingerprint(&req, &labelled, None),
            fingerprint(&req, &extras, Some(&IfMatch::Any)),
        ] {
            assert_ne!(other, base);
        }
    }
}
