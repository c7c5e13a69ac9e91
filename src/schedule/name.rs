//! The name validator of current go-etcd-cron (v0.12.6+, Dapr 1.16.15 / 1.17.11 / 1.18.2 and
//! later), applied to the composed keys jobs are stored under (built in `trigger::keys`).

use crate::go::quote::quote;

/// Longest composed name, in bytes, that the Scheduler accepts.
pub const MAX_NAME_BYTES: usize = 512;

/// Why a composed job name was rejected. `Display` is go-etcd-cron's exact text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is the empty string.
    #[error("job name cannot be empty")]
    Empty,
    /// The composed name is longer than [`MAX_NAME_BYTES`].
    #[error("job name is invalid {}: must be at most {MAX_NAME_BYTES} characters", quote(.0))]
    TooLong(String),
    /// The name contains `/`, `\`, `#` or `?` (they would break the key space).
    #[error("job name is invalid {}: must not contain '/', '\\', '#' or '?'", quote(.0))]
    ForbiddenChar(String),
    /// The name contains a control character (C0, DEL or C1).
    #[error("job name is invalid {}: must not contain control characters", quote(.0))]
    ControlChar(String),
    /// The name is `.` or `..`.
    #[error("job name is invalid {}: must not be a path traversal sequence", quote(.0))]
    PathTraversal(String),
}

/// Validates a composed name as go-etcd-cron does on Add, Get and Delete.
///
/// `|`, `||`, `@`, upper case and any printable Unicode are allowed. Control characters are
/// rejected with the stricter of the two published variants (C0, DEL and C1), so nothing
/// either variant rejects is accepted here.
pub fn validate(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(NameError::TooLong(name.to_owned()));
    }
    // NUL is a control character: go-etcd-cron's next check names it so.
    if name.contains(['/', '\\', '#', '?']) {
        return Err(NameError::ForbiddenChar(name.to_owned()));
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::ControlChar(name.to_owned()));
    }
    if name == "." || name == ".." {
        return Err(NameError::PathTraversal(name.to_owned()));
    }
    Ok(())
}

/// Validates a name prefix the way `DeletePrefixes` does: an empty prefix is fine (it means
/// "everything"), otherwise `prefix + "a"` must be a valid name.
pub fn validate_prefix(prefix: &str) -> Result<(), NameError> {
    if prefix.is_empty() {
        return Ok(());
    }
    validate(&format!("{prefix}a"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name composed as an app job of `default/myapp` (see `trigger::keys`).
    fn composed(name: &str) -> String {
        format!("app||default||myapp||{name}")
    }

    #[test]
    fn accepts_what_dapr_accepts() {
        for name in [
            "my||job@name",
            "UPPER",
            "with space",
            "dots.in.name",
            "ünïcødé-名前",
            "a|b",
            "emoji-🙂",
        ] {
            assert_eq!(validate(&composed(name)), Ok(()), "{name:?}");
        }
        let exactly_max = "a".repeat(MAX_NAME_BYTES - composed("").len());
        assert_eq!(validate(&composed(&exactly_max)), Ok(()));
    }

    #[test]
    fn rejects_dapr_invalidnames_with_exact_texts() {
        // daprd tests/integration/suite/daprd/jobs/invalidnames.go
        let k = composed("bad/name");
        assert_eq!(
            validate(&k).unwrap_err().to_string(),
            r#"job name is invalid "app||default||myapp||bad/name": must not contain '/', '\', '#' or '?'"#
        );
        for name in ["bad\\name", "bad#name", "bad?name"] {
            assert!(
                matches!(validate(&composed(name)), Err(NameError::ForbiddenChar(_))),
                "{name:?}"
            );
        }
        assert_eq!(
            validate(&composed("bad\0name")).unwrap_err().to_string(),
            r#"job name is invalid "app||default||myapp||bad\x00name": must not contain control characters"#
        );
        assert_eq!(
            validate(&composed("bad\nname")).unwrap_err().to_string(),
            r#"job name is invalid "app||default||myapp||bad\nname": must not contain control characters"#
        );
        for name in ["bad\u{7f}name", "bad\u{85}name", "bad\u{1b}name"] {
            assert!(
                matches!(validate(&composed(name)), Err(NameError::ControlChar(_))),
                "{name:?}"
            );
        }
        let long = "a".repeat(600);
        let err = validate(&composed(&long)).unwrap_err().to_string();
        assert!(
            err.ends_with(r#"": must be at most 512 characters"#),
            "{err}"
        );
        assert!(err.starts_with(r#"job name is invalid "app||default||myapp||aaaa"#));
        assert_eq!(
            validate("").unwrap_err().to_string(),
            "job name cannot be empty"
        );
        assert_eq!(
            validate("..").unwrap_err().to_string(),
            r#"job name is invalid "..": must not be a path traversal sequence"#
        );
    }

    #[test]
    fn length_limit_counts_bytes_not_chars() {
        let room = MAX_NAME_BYTES - composed("").len();
        // 'é' is two bytes: room/2 + 1 of them no longer fit.
        let name = "é".repeat(room / 2 + 1);
        assert!(matches!(
            validate(&composed(&name)),
            Err(NameError::TooLong(_))
        ));
    }

    #[test]
    fn prefixes_validate_with_a_dummy_suffix() {
        assert_eq!(validate_prefix(""), Ok(()));
        assert_eq!(validate_prefix(&composed("")), Ok(()));
        assert!(validate_prefix("app||default||myapp||a/").is_err());
    }
}
