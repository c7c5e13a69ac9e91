//! daprd's check of actor names (`pkg/messaging/method.ValidateName`, Dapr 1.18): reminder
//! and timer names, and the actor type and id of a method call, must not be able to change
//! the path they become part of.

use crate::go::quote::quote;

/// `Err` with daprd's words when `name` holds `#`, `?`, NUL, `/` or `\`, a control byte
/// (below 0x20, or DEL), or is `.` or `..`.
pub fn validate(name: &str) -> Result<(), String> {
    if name.contains(['#', '?', '\0', '/', '\\']) {
        return Err(format!(
            "name contains forbidden character: {}",
            quote(name)
        ));
    }
    // Go ranges over runes and looks at each one's first byte: a multi-byte rune never
    // starts with a control byte, so checking chars is the same.
    if let Some((i, _)) = name
        .char_indices()
        .find(|&(_, c)| (c as u32) < 0x20 || c == '\x7f')
    {
        return Err(format!(
            "name contains control character at position {i}: {}",
            quote(name)
        ));
    }
    if name == "." || name == ".." {
        return Err(format!(
            "name is a path traversal sequence: {}",
            quote(name)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daprds_forbidden_names() {
        assert_eq!(
            validate("bad/name").unwrap_err(),
            r#"name contains forbidden character: "bad/name""#
        );
        assert_eq!(
            validate("bad\nname").unwrap_err(),
            r#"name contains control character at position 3: "bad\nname""#
        );
        assert_eq!(
            validate("..").unwrap_err(),
            r#"name is a path traversal sequence: "..""#
        );
        for bad in ["", "a#b", "a?b", "a\0b", r"a\b", ".", "é\x7f"] {
            if !bad.is_empty() {
                assert!(validate(bad).is_err(), "{bad:?}");
            }
        }
        for good in ["reminder", "a.b", "...", "été", "a b", "a||b"] {
            assert_eq!(validate(good), Ok(()), "{good:?}");
        }
    }
}
