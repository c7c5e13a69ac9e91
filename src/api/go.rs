//! Small pieces of Go's standard library whose exact behaviour daprd's HTTP API exposes:
//! `url.QueryUnescape`, `path.Clean`, `strings.TrimSpace` and `strconv.Quote` over bytes.

use std::fmt::Write as _;

/// Go's `url.EscapeError`: a `%` not followed by two hex digits (the offending text, at most
/// three bytes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL escape {}", quote_bytes(.0))]
pub struct EscapeError(pub Vec<u8>);

/// Go's `url.QueryUnescape`: `%XX` becomes the byte, `+` a space. The result may be invalid
/// UTF-8, as in Go.
pub fn query_unescape(s: &str) -> Result<Vec<u8>, EscapeError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (Some(hi), Some(lo)) = (
                    b.get(i + 1).copied().and_then(hex_value),
                    b.get(i + 2).copied().and_then(hex_value),
                ) else {
                    let end = (i + 3).min(b.len());
                    return Err(EscapeError(b[i..end].to_vec()));
                };
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Go's `strconv.Quote` of a byte string: valid UTF-8 quoted as `%q` does, invalid bytes as
/// `\xNN`.
pub fn quote_bytes(b: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in b.utf8_chunks() {
        let valid = crate::schedule::go_quote::quote(chunk.valid());
        // Strip the quotes the helper adds around each piece.
        out.push_str(&valid[1..valid.len() - 1]);
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out.push('"');
    out
}

/// Go's `path.Clean` for a rooted URL path: repeated slashes collapse, `.` and `..` elements
/// resolve, a trailing slash goes.
pub fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for element in p.split('/') {
        match element {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            e => parts.push(e),
        }
    }
    let mut out = String::with_capacity(p.len());
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_unescape_is_gos() {
        assert_eq!(query_unescape("a+b%20c").as_deref(), Ok(&b"a b c"[..]));
        assert_eq!(
            query_unescape("bad%2Fname").as_deref(),
            Ok(&b"bad/name"[..])
        );
        assert_eq!(query_unescape("%00").as_deref(), Ok(&b"\0"[..]));
        assert_eq!(query_unescape("%ff").as_deref(), Ok(&b"\xff"[..]));
        let err = query_unescape("a%zzb").unwrap_err();
        assert_eq!(err.to_string(), r#"invalid URL escape "%zz""#);
        let err = query_unescape("ab%4").unwrap_err();
        assert_eq!(err.to_string(), r#"invalid URL escape "%4""#);
        let err = query_unescape("%").unwrap_err();
        assert_eq!(err.to_string(), r#"invalid URL escape "%""#);
    }

    #[test]
    fn quote_bytes_escapes_invalid_utf8() {
        assert_eq!(quote_bytes(b"a\xffb\n"), r#""a\xffb\n""#);
        assert_eq!(quote_bytes("é".as_bytes()), "\"é\"");
    }

    #[test]
    fn clean_path_is_gos() {
        assert_eq!(clean_path("/v1.0/jobs/a/"), "/v1.0/jobs/a");
        assert_eq!(clean_path("//v1.0///jobs/./a"), "/v1.0/jobs/a");
        assert_eq!(clean_path("/v1.0/jobs/x/../a"), "/v1.0/jobs/a");
        assert_eq!(clean_path("/../.."), "/");
        assert_eq!(clean_path("/"), "/");
    }
}
