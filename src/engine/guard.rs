//! Conditional writes (issue 13, feature E3): `Idempotency-Key` on a create and `If-Match` on
//! a create or delete, checked by the store in the same commit as the write
//! ([`Op::Guarded`]), so that neither a concurrent writer nor a replica can come between the
//! check and the write.
//!
//! The rules:
//! - A job's **etag** is its generation (drawn anew on every create and overwrite) as 16 hex
//!   digits, quoted: it names the job's definition, so progress, pauses and runs leave it as
//!   it is, and every overwrite changes it.
//! - **`If-Match`** (`*` or a list of etags): the write happens only if the job exists (`*`)
//!   and is at one of the listed etags; else nothing is written and the answer is
//!   [`Guarded::PreconditionFailed`]. A finished job no longer exists for it.
//! - **`Idempotency-Key`** (creates only; 1–255 printable ASCII characters, scoped to the
//!   job's owner: namespace and app id): the first request under a key that stores its job
//!   records the key with a fingerprint of the request (name, job, `overwrite`, jobsd's
//!   settings, `If-Match`; not the trace context). For [`IDEMPOTENCY_WINDOW`] after that, the
//!   same request under the key is answered as the first was ([`Guarded::Replayed`], with the
//!   etag of the version the first stored) and writes nothing — whether the job was changed,
//!   finished or deleted since; another request under the key is refused
//!   ([`Guarded::KeyReused`]). A request that was refused (validation, `AlreadyExists`,
//!   `If-Match`) records nothing, so its repeat is judged afresh. Past the window the key is
//!   forgotten; a sweep deletes expired records, so the table holds at most a window's worth.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use prost::Message;
use tokio_util::sync::CancellationToken;

use super::convert::timestamp;
use super::detached::to_the_end;
use super::{Command, Engine, Error, JobExtras};
use crate::clock::Clock;
use crate::proto::dapr_scheduler as sv1;
use crate::store::{self, GuardedWrite, IdempotencyClaim, IdempotencyRecord, Op, OpResult, Store};
use crate::trigger::keys;

/// How long an `Idempotency-Key` is remembered after the request that first used it.
pub const IDEMPOTENCY_WINDOW: TimeDelta = TimeDelta::hours(24);

/// Longest `Idempotency-Key`, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// The HTTP header (and, lower-cased, the gRPC metadata key) of an idempotent create.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// The HTTP header (and, lower-cased, the gRPC metadata key) of a conditional write.
pub const IF_MATCH: &str = "If-Match";

/// How often expired idempotency records are swept, by the engine's clock.
const SWEEP_PERIOD: Duration = Duration::from_secs(600);

/// Idempotency records read per sweep page.
const SWEEP_PAGE: usize = 1024;

/// The etag of the job version with `generation`: strong, quoted.
pub fn etag(generation: u64) -> String {
    format!("\"{generation:016x}\"")
}

/// An `If-Match` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfMatch {
    /// `*`: the job must exist.
    Any,
    /// The job must be at one of these etags (as given, quotes included).
    Etags(Vec<String>),
}

impl IfMatch {
    /// Parses an `If-Match` value: `*`, or a comma-separated list of entity tags
    /// (`"…"`, or weak `W/"…"`, which never matches: the comparison is strong).
    pub fn parse(value: &str) -> Result<IfMatch, String> {
        let value = value.trim();
        if value == "*" {
            return Ok(IfMatch::Any);
        }
        let mut etags = Vec::new();
        for tag in value.split(',').map(str::trim) {
            let opaque = tag.strip_prefix("W/").unwrap_or(tag);
            let quoted = opaque.len() >= 2 && opaque.starts_with('"') && opaque.ends_with('"');
            if !quoted || opaque[1..opaque.len() - 1].contains('"') {
                return Err(format!(
                    "{IF_MATCH}: {tag:?} is not an entity tag; give * or the \"etag\" of \
                     GET /jobsd/v1/jobs/{{name}}"
                ));
            }
            etags.push(tag.to_owned());
        }
        Ok(IfMatch::Etags(etags))
    }

    /// The header value it was parsed from, normalised.
    pub fn to_header(&self) -> String {
        match self {
            IfMatch::Any => "*".to_owned(),
            IfMatch::Etags(etags) => etags.join(", "),
        }
    }

    /// What the store compares: the generations of the strong etags that are jobsd's.
    fn to_store(&self) -> store::IfMatch {
        match self {
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
}

/// The generation a strong etag of jobsd's names.
fn generation_of(etag: &str) -> Option<u64> {
    let hex = etag.strip_prefix('"')?.strip_suffix('"')?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// Checks an `Idempotency-Key` value: 1–255 printable ASCII characters; surrounding quotes
/// (a structured-field string, as the IETF draft writes it) are dropped.
pub fn idempotency_key(value: &str) -> Result<String, String> {
    let value = value.trim();
    let key = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY {
        return Err(format!(
            "{IDEMPOTENCY_KEY}: must be 1 to {MAX_IDEMPOTENCY_KEY} characters, got {}",
            key.len()
        ));
    }
    if !key.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(format!(
            "{IDEMPOTENCY_KEY}: only printable ASCII characters are allowed"
        ));
    }
    Ok(key.to_owned())
}

/// What a client conditioned a write on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditions {
    /// `Idempotency-Key` (checked with [`idempotency_key`]); creates only.
    pub idempotency_key: Option<String>,
    /// `If-Match`.
    pub if_match: Option<IfMatch>,
}

impl Conditions {
    /// Whether there is none (a plain write).
    pub fn is_empty(&self) -> bool {
        self.idempotency_key.is_none() && self.if_match.is_none()
    }

    /// The header of the first condition given, to name in a refusal.
    pub fn first_header(&self) -> Option<&'static str> {
        if self.idempotency_key.is_some() {
            Some(IDEMPOTENCY_KEY)
        } else if self.if_match.is_some() {
            Some(IF_MATCH)
        } else {
            None
        }
    }
}

/// What became of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guarded {
    /// Written now; the etag of the job version stored (empty for a delete).
    Written {
        /// The new version's etag.
        etag: String,
    },
    /// A repeat of the request that first used its `Idempotency-Key`: nothing written.
    Replayed {
        /// The etag of the version the first request stored.
        etag: String,
    },
    /// `If-Match` not met: nothing written. The message says why.
    PreconditionFailed(String),
    /// The `Idempotency-Key` was first used with another request: nothing written.
    KeyReused(String),
}

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
            if_match: conditions.if_match.as_ref().map(IfMatch::to_store),
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
            if_match: Some(if_match.to_store()),
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
        assert_eq!(parsed.to_store().generations, [255]);
        for bad in ["abc", "\"a", "", "\"a\"b\"", "*, \"a\""] {
            let err = IfMatch::parse(bad).unwrap_err();
            assert!(err.starts_with("If-Match: "), "{bad}: {err}");
        }
        assert_eq!(etag(255), "\"00000000000000ff\"");
        assert_eq!(generation_of(&etag(u64::MAX)), Some(u64::MAX));
    }

    #[test]
    fn idempotency_keys_are_bounded_printable_ascii() {
        assert_eq!(idempotency_key(" k-1 ").unwrap(), "k-1");
        assert_eq!(idempotency_key("\"quoted key\"").unwrap(), "quoted key");
        assert!(idempotency_key(&"x".repeat(255)).is_ok());
        for bad in ["", "\"\"", &"x".repeat(256), "caf\u{e9}", "a\tb"] {
            let err = idempotency_key(bad).unwrap_err();
            assert!(err.starts_with("Idempotency-Key: "), "{bad:?}: {err}");
        }
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
