//! A job's value in etcd (`<namespace>/jobs/<key>`): go-etcd-cron's `stored.Job` layout
//! ([`EtcdJob`], `proto/jobsd/store/v1/etcd.proto`), so that the Dapr CLI's `dapr scheduler
//! list|get`, which decodes these values as go-etcd-cron's, reads jobsd's jobs.
//!
//! The rest of the store (the ops in `apply/`, shared with redb) works on [`StoredJob`]
//! bytes; this is the boundary. Every value read from etcd's jobs prefix goes through
//! [`decode`] or [`to_stored`], every one written through [`to_etcd`]. The reads take three
//! kinds of value:
//! - what `jobsd scheduler` writes now ([`EtcdJob`]: go-etcd-cron's fields and jobsd's own);
//! - what an older jobsd wrote ([`StoredJob`] itself, whose field 1 is the nested Job, a
//!   length-delimited field, where go-etcd-cron has the varint `partition_id`);
//! - what a Dapr Scheduler wrote (go-etcd-cron's `stored.Job`: an [`EtcdJob`] without jobsd's
//!   fields).

use std::borrow::Cow;

use prost::Message;
use prost::encoding::decode_varint;
use prost_types::Any;

use super::super::{Error, StoredJob};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_store::stored_job;
use crate::proto::jobsd_store::{CronJob, EtcdJob, etcd_job};
use crate::store::records::corrupt;
use crate::store::tables::Table;

/// The type URL Dapr's Scheduler packs a job's `JobMetadata` under (Go's `anypb.New`).
pub(crate) const METADATA_TYPE_URL: &str =
    "type.googleapis.com/dapr.proto.scheduler.v1.JobMetadata";

/// Wire types of the protobuf encoding.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const FIXED32: u64 = 5;

/// The two layouts a job value in etcd may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// go-etcd-cron's `stored.Job` (jobsd's [`EtcdJob`], or a Dapr Scheduler's own value).
    Cron,
    /// jobsd's [`StoredJob`], as jobsd wrote it into etcd before it wrote go-etcd-cron's layout.
    Stored,
}

/// Which layout `bytes` are in, told by the first field whose number and wire type only one of
/// them has: field 1 (`StoredJob.job` is length-delimited, `partition_id` a varint), field 3
/// (`StoredJob.generation` a varint, `due_time` a message), fields 6–10 (only `StoredJob`
/// has them) or 1000 and up (only [`EtcdJob`]). Both layouts write field 1 for any real job
/// (a job always has its Job, and a partition id or generation is never 0); a value none of
/// these fields tells is read as go-etcd-cron's, the layout of etcd.
pub(crate) fn layout(bytes: &[u8]) -> Layout {
    let mut buf = bytes;
    while !buf.is_empty() {
        let Ok(key) = decode_varint(&mut buf) else {
            break;
        };
        let (field, wire) = (key >> 3, key & 7);
        match (field, wire) {
            (1, LEN) | (3, VARINT) | (6..=10, _) => return Layout::Stored,
            (1, VARINT) | (3, LEN) | (1000.., _) => return Layout::Cron,
            _ => {}
        }
        if skip(wire, &mut buf).is_none() {
            break;
        }
    }
    Layout::Cron
}

/// Moves `buf` past the value of a field of wire type `wire`; `None` if it cannot.
fn skip(wire: u64, buf: &mut &[u8]) -> Option<()> {
    let n = match wire {
        VARINT => {
            decode_varint(buf).ok()?;
            0
        }
        FIXED64 => 8,
        LEN => usize::try_from(decode_varint(buf).ok()?).ok()?,
        FIXED32 => 4,
        // Groups (deprecated) are in neither layout.
        _ => return None,
    };
    *buf = buf.get(n..)?;
    Some(())
}

/// The job stored in the etcd value `bytes` (any of the layouts), under `key` (for errors).
pub(crate) fn decode(key: &str, bytes: &[u8]) -> Result<StoredJob, Error> {
    let decoded = match layout(bytes) {
        Layout::Stored => StoredJob::decode(bytes),
        Layout::Cron => EtcdJob::decode(bytes).and_then(from_cron),
    };
    decoded.map_err(|source| corrupt(Table::Jobs, key, source))
}

/// The [`StoredJob`] bytes of the etcd value `bytes`, what the ops of `apply/` read: the
/// value itself when an older jobsd wrote it.
pub(crate) fn to_stored<'a>(key: &str, bytes: &'a [u8]) -> Result<Cow<'a, [u8]>, Error> {
    match layout(bytes) {
        Layout::Stored => Ok(Cow::Borrowed(bytes)),
        Layout::Cron => Ok(Cow::Owned(decode(key, bytes)?.encode_to_vec())),
    }
}

/// [`to_stored`] of a value held already.
pub(crate) fn into_stored(key: &str, bytes: Vec<u8>) -> Result<Vec<u8>, Error> {
    Ok(match to_stored(key, &bytes)? {
        Cow::Borrowed(_) => bytes,
        Cow::Owned(converted) => converted,
    })
}

/// The etcd value of the [`StoredJob`] bytes `stored` (what the ops wrote). The ops only
/// write encoded `StoredJob`s; bytes that were none would be written as they are, which
/// [`decode`] would read back the way it reads an older jobsd's values.
pub(crate) fn to_etcd(stored: &[u8]) -> Vec<u8> {
    match StoredJob::decode(stored) {
        Ok(job) => to_cron(job).encode_to_vec(),
        Err(_) => stored.to_vec(),
    }
}

/// go-etcd-cron's layout of `job`.
fn to_cron(job: StoredJob) -> EtcdJob {
    let StoredJob {
        job: dapr_job,
        metadata,
        generation,
        begin,
        expiration,
        labels,
        traceparent,
        policy,
        failure_policy,
    } = job;
    // go-etcd-cron always has its `api.Job`; a record without a Dapr job or an owner (only
    // tests write one) leaves it out, so that it reads back as it was.
    let has_job = dapr_job.is_some() || metadata.is_some();
    let dapr_job = dapr_job.unwrap_or_default();
    EtcdJob {
        partition_id: generation,
        begin: begin.map(|b| match b {
            stored_job::Begin::Start(t) => etcd_job::Begin::Start(t),
            stored_job::Begin::DueTime(t) => etcd_job::Begin::DueTime(t),
        }),
        expiration,
        job: has_job.then(|| CronJob {
            schedule: dapr_job.schedule,
            due_time: dapr_job.due_time,
            ttl: dapr_job.ttl,
            repeats: dapr_job.repeats,
            metadata: metadata.map(|m| Any {
                type_url: METADATA_TYPE_URL.to_owned(),
                value: m.encode_to_vec(),
            }),
            payload: dapr_job.data,
            failure_policy: dapr_job.failure_policy,
        }),
        labels,
        traceparent,
        policy,
        failure_policy,
    }
}

/// jobsd's record of a job in go-etcd-cron's layout. The metadata `Any` is read whatever its
/// type URL says: go-etcd-cron's users put their own there, and Dapr's is a `JobMetadata`.
fn from_cron(job: EtcdJob) -> Result<StoredJob, prost::DecodeError> {
    let EtcdJob {
        partition_id,
        begin,
        expiration,
        job: cron,
        labels,
        traceparent,
        policy,
        failure_policy,
    } = job;
    let has_job = cron.is_some();
    let cron = cron.unwrap_or_default();
    let metadata = cron
        .metadata
        .map(|any| sv1::JobMetadata::decode(any.value.as_slice()))
        .transpose()?;
    Ok(StoredJob {
        job: has_job.then_some(sv1::Job {
            schedule: cron.schedule,
            repeats: cron.repeats,
            due_time: cron.due_time,
            ttl: cron.ttl,
            data: cron.payload,
            failure_policy: cron.failure_policy,
        }),
        metadata,
        generation: partition_id,
        begin: begin.map(|b| match b {
            etcd_job::Begin::Start(t) => stored_job::Begin::Start(t),
            etcd_job::Begin::DueTime(t) => stored_job::Begin::DueTime(t),
        }),
        expiration,
        labels,
        traceparent,
        policy,
        failure_policy,
    })
}

#[cfg(test)]
#[path = "job_value_tests.rs"]
mod tests;
