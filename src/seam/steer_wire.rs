//! Running a job by hand on the wire: the `overlap` of a run-now or backfill request and the
//! executions a backfill started, as `jobsd.v1` carries them. jobsd's own API reads and
//! answers them, and a sidecar in remote mode sends them to the replica that fires the job.

use chrono::{DateTime, Utc};

use super::views_wire::stamp;
use crate::proto::jobsd_api as jv1;
use crate::proto::jobsd_replica as jsv1;
use crate::schedule::Overlap;
use crate::trigger::ExecutionId;

/// The overlap named `text` (empty: the job's own policy); why not otherwise.
pub fn overlap_from_wire(text: &str) -> Result<Option<Overlap>, String> {
    Ok(Some(match text {
        "" => return Ok(None),
        "serial" => Overlap::Serial,
        "skip" => Overlap::Skip,
        "bufferOne" => Overlap::BufferOne,
        // How many at once does not apply: hand-started executions of a job run one at a
        // time; `allow` only lets them run beside the scheduled ones.
        "allow" => Overlap::Allow(1),
        other => {
            return Err(format!(
                "overlap: {other:?} is not one of serial, skip, bufferOne, allow"
            ));
        }
    }))
}

/// `overlap`'s name as [`overlap_from_wire`] reads it.
pub fn overlap_to_wire(overlap: Option<Overlap>) -> String {
    match overlap {
        None => "",
        Some(Overlap::Serial) => "serial",
        Some(Overlap::Skip) => "skip",
        Some(Overlap::BufferOne) => "bufferOne",
        Some(Overlap::Allow(_)) => "allow",
    }
    .to_owned()
}

/// A replica's answer to a run now that started execution `id`.
pub fn triggered(id: ExecutionId) -> jsv1::SteerResponse {
    jsv1::SteerResponse {
        trigger: Some(jv1::TriggerJobResponse {
            execution_id: id.to_string(),
            scheduled_time: None,
        }),
        ..Default::default()
    }
}

/// The instant of a backfill request's `field` (`start`, `end`); why not when it is missing
/// or out of range.
pub fn instant_from_wire(
    field: &str,
    t: Option<prost_types::Timestamp>,
) -> Result<DateTime<Utc>, String> {
    t.and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
        .ok_or_else(|| format!("{field}: a valid timestamp is required"))
}

/// A backfill's executions (nominal tick, execution id), in order.
pub fn backfill_to_wire(runs: Vec<(DateTime<Utc>, ExecutionId)>) -> jv1::BackfillJobResponse {
    jv1::BackfillJobResponse {
        executions: runs
            .into_iter()
            .map(|(tick, id)| jv1::BackfillExecution {
                scheduled_time: stamp(Some(tick)),
                execution_id: id.to_string(),
            })
            .collect(),
    }
}

/// [`backfill_to_wire`]'s executions back; why not when one is malformed.
pub fn backfill_from_wire(
    resp: jv1::BackfillJobResponse,
) -> Result<Vec<(DateTime<Utc>, ExecutionId)>, String> {
    resp.executions
        .into_iter()
        .map(|e| {
            let tick = instant_from_wire("scheduledTime", e.scheduled_time)?;
            let id = ExecutionId::parse(&e.execution_id)
                .ok_or_else(|| format!("{:?} is not an execution id", e.execution_id))?;
            Ok((tick, id))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_and_backfills_read_back_as_sent() {
        for overlap in [
            None,
            Some(Overlap::Serial),
            Some(Overlap::Skip),
            Some(Overlap::BufferOne),
            Some(Overlap::Allow(1)),
        ] {
            assert_eq!(overlap_from_wire(&overlap_to_wire(overlap)), Ok(overlap));
        }
        assert!(
            overlap_from_wire("never")
                .unwrap_err()
                .contains("\"never\"")
        );
        let tick = DateTime::from_timestamp(1_767_225_600, 250_000_000).unwrap();
        let runs = vec![
            (tick, ExecutionId::for_tick("k", tick)),
            (
                tick + chrono::TimeDelta::hours(1),
                ExecutionId::for_tick("k", tick),
            ),
        ];
        assert_eq!(backfill_from_wire(backfill_to_wire(runs.clone())), Ok(runs));
        let broken = jv1::BackfillJobResponse {
            executions: vec![jv1::BackfillExecution {
                scheduled_time: stamp(Some(tick)),
                execution_id: "x".into(),
            }],
        };
        assert!(backfill_from_wire(broken).is_err());
    }
}
