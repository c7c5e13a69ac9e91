//! jobsd's bounds on a job's labels, checked wherever a job with labels comes in (the API
//! before it calls a scheduler, and the engine that stores them, whichever process it runs
//! in). Errors name the field.

use std::collections::BTreeMap;

/// Most labels on one job.
pub const MAX_LABELS: usize = 64;
/// Longest label key, in bytes.
pub const MAX_LABEL_KEY: usize = 63;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE: usize = 256;

/// Checks labels against jobsd's bounds: at most [`MAX_LABELS`]; keys 1–63 bytes of
/// `A-Z a-z 0-9 . _ - /`; values up to 256 bytes.
pub fn check(labels: &BTreeMap<String, String>) -> Result<(), String> {
    if labels.len() > MAX_LABELS {
        return Err(format!(
            "labels: {} labels, at most {MAX_LABELS} are allowed",
            labels.len()
        ));
    }
    for (key, value) in labels {
        let key_ok = !key.is_empty()
            && key.len() <= MAX_LABEL_KEY
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'));
        if !key_ok {
            return Err(format!(
                "labels: key {key:?} must be 1-{MAX_LABEL_KEY} characters of A-Z a-z 0-9 . _ - /"
            ));
        }
        if value.len() > MAX_LABEL_VALUE {
            return Err(format!(
                "labels: value of {key:?} is {} bytes, at most {MAX_LABEL_VALUE} are allowed",
                value.len()
            ));
        }
    }
    Ok(())
}
