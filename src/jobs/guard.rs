//! Conditional writes (issue 13, feature E3): `Idempotency-Key` on a create and `If-Match` on
//! a create or delete, checked by the store in the same commit as the write
//! ([`Op::Guarded`]), so that neither a concurrent writer nor a replica can come between the
//! check and the write (`crate::engine::guard` applies them).
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

use chrono::TimeDelta;

/// How long an `Idempotency-Key` is remembered after the request that first used it.
pub const IDEMPOTENCY_WINDOW: TimeDelta = TimeDelta::hours(24);

/// Longest `Idempotency-Key`, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// The HTTP header (and, lower-cased, the gRPC metadata key) of an idempotent create.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// The HTTP header (and, lower-cased, the gRPC metadata key) of a conditional write.
pub const IF_MATCH: &str = "If-Match";

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
}

/// The generation a strong etag of jobsd's names.
pub(crate) fn generation_of(etag: &str) -> Option<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
