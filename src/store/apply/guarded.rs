//! The meaning of [`Op::Guarded`](crate::store::Op::Guarded) and
//! [`Op::ForgetIdempotency`](crate::store::Op::ForgetIdempotency): a job write under its client's
//! `If-Match` and `Idempotency-Key`, checked and applied in one step of the store's single
//! writer (or one etcd compare-and-swap txn), so that nothing comes between check and write.

use prost::Message;
use prost_types::Timestamp;

use super::{delete_job, put_job};
use crate::store::records::{corrupt, generation_of};
use crate::store::tables::{Table, Tables, Undo};
use crate::store::{Error, GuardedWrite, IdempotencyRecord, IfMatch, OpResult};

/// Applies [`Op::Guarded`](crate::store::Op::Guarded): `job` (encoded) is put, or with `None` the
/// job is deleted.
pub(super) fn apply<T: Tables>(
    tables: &mut T,
    write: GuardedWrite,
    job: Option<Vec<u8>>,
    mut undo: Option<&mut Undo>,
) -> Result<OpResult, Error> {
    let key = write.key.as_str();
    if let Some(claim) = &write.idempotency {
        let mine = claim.record.clone().unwrap_or_default();
        let expired_before = claim.expired_before.unwrap_or_default();
        if let Some(first) = record(tables, &claim.key)?
            .filter(|first| !before(&first.at.unwrap_or_default(), &expired_before))
        {
            return Ok(
                if first.name == mine.name && first.fingerprint == mine.fingerprint {
                    OpResult::Replayed(first.generation)
                } else {
                    OpResult::KeyReused
                },
            );
        }
    }
    if let Some(if_match) = &write.if_match
        && !matches(if_match, generation_of(tables, Table::Jobs, key)?)
    {
        return Ok(OpResult::PreconditionFailed);
    }
    let Some(job) = job else {
        return delete_job(tables, key, undo);
    };
    let result = put_job(
        tables,
        key,
        job,
        (write.create_only, write.due_ms),
        undo.as_deref_mut(),
    )?;
    if let (OpResult::Done, Some(claim)) = (result, write.idempotency) {
        let record = claim.record.unwrap_or_default().encode_to_vec();
        tables.insert(Table::Idempotency, &claim.key, record, undo)?;
    }
    Ok(result)
}

/// Applies [`Op::ForgetIdempotency`](crate::store::Op::ForgetIdempotency).
pub(super) fn forget<T: Tables>(
    tables: &mut T,
    key: &str,
    cutoff: &Timestamp,
    undo: Option<&mut Undo>,
) -> Result<OpResult, Error> {
    let expired = record(tables, key)?.is_some_and(|r| before(&r.at.unwrap_or_default(), cutoff));
    if !expired {
        return Ok(OpResult::Deleted(0));
    }
    tables.remove(Table::Idempotency, key, undo)?;
    Ok(OpResult::Deleted(1))
}

/// Whether a job of `generation` (`None`: no job) meets `if_match`.
fn matches(if_match: &IfMatch, generation: Option<u64>) -> bool {
    generation.is_some_and(|g| if_match.any || if_match.generations.contains(&g))
}

/// The idempotency record under `key`, if any.
fn record<T: Tables>(tables: &mut T, key: &str) -> Result<Option<IdempotencyRecord>, Error> {
    tables
        .with_value(Table::Idempotency, key, |bytes| {
            IdempotencyRecord::decode(bytes)
        })?
        .transpose()
        .map_err(|source| corrupt(Table::Idempotency, key, source))
}

/// Whether `a` is strictly before `b`.
fn before(a: &Timestamp, b: &Timestamp) -> bool {
    (a.seconds, a.nanos) < (b.seconds, b.nanos)
}
