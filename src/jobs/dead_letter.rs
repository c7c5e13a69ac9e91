//! The create-time check of where a job dead-letters to (`onExhausted: deadLetter`).

use chrono::DateTime;

use crate::proto::dapr_scheduler as sv1;
use crate::schedule::OnExhausted;
use crate::trigger::{ExecutionId, keys};

/// Checks at create time where job `name` of `metadata`'s owner dead-letters to, when
/// `on_exhausted` says it does (errors name the field).
pub fn check_dead_letter(
    metadata: &sv1::JobMetadata,
    name: &str,
    on_exhausted: &OnExhausted,
) -> Result<(), String> {
    match on_exhausted {
        OnExhausted::DeadLetter(target) => check_target(metadata, name, target),
        OnExhausted::Drop | OnExhausted::Pause => Ok(()),
    }
}

/// Checks that job `name` of `metadata`'s owner may dead-letter into `target`: another job,
/// whose name and fallback name are valid keys of that owner.
fn check_target(metadata: &sv1::JobMetadata, name: &str, target: &str) -> Result<(), String> {
    if target == name {
        return Err(format!(
            "failurePolicy.deadLetterJob: {target:?} is this job; name another job"
        ));
    }
    // Every execution id has the same length: any one shows whether the fallback fits.
    let sample = ExecutionId::for_tick(target, DateTime::UNIX_EPOCH);
    for candidate in [target.to_owned(), fallback_name(target, sample)] {
        keys::job_key(metadata, &candidate)
            .map_err(|e| format!("failurePolicy.deadLetterJob: {candidate:?}: {e}"))?;
    }
    Ok(())
}

/// The name a dead letter takes when `target` is taken.
pub(crate) fn fallback_name(target: &str, execution_id: ExecutionId) -> String {
    format!("{target}-{execution_id}")
}
