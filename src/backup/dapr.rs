//! A Dapr Scheduler export (`dapr scheduler export -o FILE`, dapr/cli): one Go `gob` value
//! `ExportFile{Jobs, Counters map[string][]byte}` holding the etcd keys of the Scheduler
//! (`dapr/jobs/<key>`, `dapr/counters/<key>`) and their values, go-etcd-cron's `stored.Job`
//! and `stored.Counter` protobufs. Only the gob this struct makes is read (maps of strings to
//! bytes): anything else is refused saying what was found.
//!
//! The jobs of the importing app (its namespace and app id) are restored with their
//! progress, under the same generation (go-etcd-cron's `partition_id`); the file's other
//! records (other apps, actor reminders, workflows) are counted as not this app's.

use std::collections::HashMap;

use prost::Message;
use prost_types::Timestamp;

use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_store::{EtcdJob, StoredCounter, StoredJob, etcd_job, stored_job::Begin};
use crate::seam::BackupRecord;
use crate::trigger::keys;

/// Largest Dapr export read (it is one gob value, read whole).
pub const MAX_FILE: usize = 512 << 20;

/// The etcd key prefixes of go-etcd-cron under Dapr's namespace.
const JOBS: &str = "dapr/jobs/";
const COUNTERS: &str = "dapr/counters/";

/// The refusal of a file past [`MAX_FILE`].
pub fn too_large() -> String {
    format!(
        "a Dapr Scheduler export (Go gob) is read whole, and this one is larger than {} MiB",
        MAX_FILE >> 20
    )
}

/// Whether `head` (the first bytes of an input) starts a gob stream of dapr/cli's
/// `ExportFile`: the type definition sent first names the struct.
pub fn looks_like_dapr_export(head: &[u8]) -> bool {
    head.windows(b"ExportFile".len())
        .any(|w| w == b"ExportFile")
}

/// go-etcd-cron's `stored.Counter`.
#[derive(Clone, PartialEq, Message)]
struct DaprCounter {
    #[prost(uint64, tag = "1")]
    job_partition_id: u64,
    #[prost(uint32, tag = "2")]
    count: u32,
    #[prost(message, optional, tag = "3")]
    last_trigger: Option<Timestamp>,
    #[prost(uint32, tag = "4")]
    attempts: u32,
}

/// What a Dapr export holds for the importing app: its jobs as records, and how many of the
/// file's jobs belong to someone else.
#[derive(Debug, Default)]
pub struct DaprJobs {
    /// This app's jobs, in key order.
    pub records: Vec<BackupRecord>,
    /// Jobs of other apps or namespaces, actor reminders, workflows.
    pub not_ours: u64,
}

/// The jobs of `metadata`'s app in the Dapr export `bytes`.
pub fn records(bytes: &[u8], metadata: &sv1::JobMetadata) -> Result<DaprJobs, String> {
    let (jobs, counters) = decode_export_file(bytes)?;
    let owner = keys::owner_prefix(metadata).map_err(|e| e.to_string())?;
    let mut out = DaprJobs::default();
    let mut keys: Vec<&String> = jobs.keys().collect();
    keys.sort();
    for key in keys {
        let Some(job_key) = key.strip_prefix(JOBS) else {
            return Err(format!(
                "Dapr Scheduler export: job key {key:?} is not under {JOBS:?}"
            ));
        };
        let Some(name) = job_key.strip_prefix(owner.as_str()) else {
            out.not_ours += 1;
            continue;
        };
        // go-etcd-cron's `stored.Job`, as a Dapr Scheduler writes it and as a jobsd cluster
        // does, with jobsd's settings beside it (`proto/jobsd/store/v1/etcd.proto`).
        let stored = EtcdJob::decode(jobs[key].as_slice())
            .map_err(|e| format!("Dapr Scheduler export: job {job_key:?}: {e}"))?;
        let counter = counters
            .get(&format!("{COUNTERS}{job_key}"))
            .map(|bytes| DaprCounter::decode(bytes.as_slice()))
            .transpose()
            .map_err(|e| format!("Dapr Scheduler export: counter {job_key:?}: {e}"))?
            .filter(|c| c.job_partition_id == stored.partition_id);
        out.records.push(record_of(name, stored, counter));
    }
    Ok(out)
}

/// jobsd's record of a go-etcd-cron job and counter (with jobsd's settings when a jobsd
/// cluster was exported).
fn record_of(name: &str, stored: EtcdJob, counter: Option<DaprCounter>) -> BackupRecord {
    let api = stored.job.unwrap_or_default();
    let begin = stored.begin.map(|b| match b {
        etcd_job::Begin::DueTime(due) => Begin::DueTime(due),
        etcd_job::Begin::Start(start) => Begin::Start(start),
    });
    BackupRecord {
        name: name.to_owned(),
        job: StoredJob {
            job: Some(sv1::Job {
                schedule: api.schedule,
                repeats: api.repeats,
                due_time: api.due_time,
                ttl: api.ttl,
                data: api.payload,
                failure_policy: api.failure_policy,
            }),
            metadata: None,
            generation: stored.partition_id,
            begin,
            expiration: stored.expiration,
            labels: stored.labels,
            traceparent: stored.traceparent,
            policy: stored.policy,
            failure_policy: stored.failure_policy,
        },
        counter: counter.map(|c| StoredCounter {
            generation: stored.partition_id,
            count: c.count,
            last_trigger: c.last_trigger,
            attempts: c.attempts,
            ..StoredCounter::default()
        }),
        finished_at: None,
    }
}

/// The two maps of an `ExportFile` gob stream.
type Maps = (HashMap<String, Vec<u8>>, HashMap<String, Vec<u8>>);

/// Reads the gob stream of one `ExportFile` value: type definitions (skipped, but the struct's
/// must name `Jobs` before `Counters`, the field order the value is decoded in), then the value.
fn decode_export_file(bytes: &[u8]) -> Result<Maps, String> {
    let bad =
        |what: &str| format!("Dapr Scheduler export (Go gob of dapr/cli's ExportFile): {what}");
    let mut r = Gob(bytes);
    let mut defined_struct = false;
    while !r.0.is_empty() {
        let len = r
            .uint()
            .ok_or_else(|| bad("a message length is cut short"))?;
        let len = usize::try_from(len).map_err(|_| bad("a message length is too large"))?;
        let mut m = Gob(r.take(len).ok_or_else(|| bad("a message is cut short"))?);
        let id = m.int().ok_or_else(|| bad("a type id is cut short"))?;
        if id < 0 {
            let def = m.0;
            let at = |name: &[u8]| def.windows(name.len()).position(|w| w == name);
            if at(b"ExportFile").is_some() {
                match (at(b"Jobs"), at(b"Counters")) {
                    (Some(j), Some(c)) if j < c => defined_struct = true,
                    _ => return Err(bad("its struct is not {Jobs, Counters}")),
                }
            }
            continue;
        }
        if !defined_struct {
            return Err(bad("no ExportFile type definition comes before the value"));
        }
        return decode_value(&mut m).ok_or_else(|| bad("the value is malformed or cut short"));
    }
    Err(bad("the stream holds no value"))
}

/// The struct value: field deltas (Jobs is field 0, Counters 1), each a map, then 0.
fn decode_value(m: &mut Gob<'_>) -> Option<Maps> {
    let (mut jobs, mut counters) = (HashMap::new(), HashMap::new());
    let mut field: u64 = u64::MAX;
    loop {
        let delta = m.uint()?;
        if delta == 0 {
            return Some((jobs, counters));
        }
        field = field.wrapping_add(delta);
        let map = match field {
            0 => &mut jobs,
            1 => &mut counters,
            _ => return None,
        };
        let count = m.uint()?;
        for _ in 0..count {
            let key = String::from_utf8(m.bytes()?.to_vec()).ok()?;
            let value = m.bytes()?.to_vec();
            map.insert(key, value);
        }
    }
}

/// A reader of gob's primitive encodings.
struct Gob<'a>(&'a [u8]);

impl<'a> Gob<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    /// An unsigned integer: below 128 one byte; else the negated byte count, then the bytes
    /// big-endian.
    fn uint(&mut self) -> Option<u64> {
        let first = *self.take(1)?.first()?;
        if first < 0x80 {
            return Some(u64::from(first));
        }
        let n = usize::from(first.wrapping_neg());
        if n > 8 {
            return None;
        }
        Some(
            self.take(n)?
                .iter()
                .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)),
        )
    }

    /// A signed integer: its bit 0 says whether the rest is complemented.
    fn int(&mut self) -> Option<i64> {
        let u = self.uint()?;
        let magnitude = (u >> 1) as i64;
        Some(if u & 1 == 1 { !magnitude } else { magnitude })
    }

    /// A string or byte slice: its length, then the bytes.
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.uint()?).ok()?;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::jobsd::v1::JobPolicy;
    use crate::proto::jobsd_store::CronJob;

    /// A `dapr scheduler export` of a jobsd cluster carries jobsd's settings beside
    /// go-etcd-cron's fields; `jobsd jobs import` keeps them, with the progress of the version.
    #[test]
    fn a_jobsd_clusters_job_keeps_its_settings_and_progress() {
        let value = EtcdJob {
            partition_id: 42,
            begin: Some(etcd_job::Begin::Start(Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            })),
            job: Some(CronJob {
                schedule: Some("@every 1h".into()),
                ..CronJob::default()
            }),
            labels: [("team".to_owned(), "a".to_owned())].into(),
            policy: Some(JobPolicy {
                catch_up: "latest".into(),
                ..JobPolicy::default()
            }),
            ..EtcdJob::default()
        }
        .encode_to_vec();
        let counter = DaprCounter {
            job_partition_id: 42,
            count: 3,
            ..DaprCounter::default()
        };
        let stored = EtcdJob::decode(value.as_slice()).unwrap();
        let record = record_of("j", stored, Some(counter));
        assert_eq!(record.job.generation, 42);
        assert_eq!(record.job.labels.get("team").map(String::as_str), Some("a"));
        assert_eq!(record.job.policy.unwrap().catch_up, "latest");
        assert_eq!(
            record.job.job.unwrap().schedule.as_deref(),
            Some("@every 1h")
        );
        assert!(matches!(record.job.begin, Some(Begin::Start(_))));
        assert_eq!(
            record.counter.map(|c| (c.generation, c.count)),
            Some((42, 3))
        );
    }
}
