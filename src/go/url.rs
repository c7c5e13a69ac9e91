//! Go's `net/url` escaping as daprd's HTTP sides show it: `url.QueryUnescape` for the API's
//! query parameters and `URL.EscapedPath` for the paths it calls on the app.

use super::quote::quote_bytes;

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

/// Whether Go's `url.ParseRequestURI` takes `path` (a request target's path): every `%` is
/// followed by two hex digits. Go's HTTP server answers anything else with its bare
/// `400 Bad Request` before a handler sees it.
pub fn valid_path_escapes(path: &str) -> bool {
    unescape(path.as_bytes()).is_some()
}

/// What Go's `URL.EscapedPath()` gives for a path parsed from `raw` by `url.Parse`.
///
/// Go keeps the path as written when it is already a valid escaped path (sub-delims like
/// `!'()*` and `[]`, and valid `%XX` escapes, stay as they are); otherwise it escapes the
/// decoded path with its path rules (`|` → `%7C`, space → `%20`, non-ASCII bytes → `%XX`).
/// Where Go would refuse to build the request (an invalid `%` escape, control bytes), this
/// escapes the offending bytes instead; `?` and `#`, which Go would take as query and
/// fragment, are escaped too.
pub fn escaped_path(raw: &str) -> String {
    // The common case: nothing to escape and no `%` to decode, so Go sends it as written.
    if !raw.bytes().any(should_escape) {
        return raw.to_owned();
    }
    let Some(decoded) = unescape(raw.as_bytes()) else {
        return escape(raw.as_bytes());
    };
    let escaped = escape(&decoded);
    // `setPath` leaves RawPath empty when the default encoding reproduces the input;
    // `EscapedPath` then uses RawPath only if it is a valid encoding of the same path.
    if escaped == raw || !valid_encoded(raw.as_bytes()) {
        escaped
    } else {
        raw.to_owned()
    }
}

/// Go's `shouldEscape(c, encodePath)`.
fn should_escape(c: u8) -> bool {
    !(c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'-' | b'_'
                | b'.'
                | b'~'
                | b'$'
                | b'&'
                | b'+'
                | b','
                | b'/'
                | b':'
                | b';'
                | b'='
                | b'@'
        ))
}

/// Go's `escape(s, encodePath)`: uppercase `%XX` for every byte that needs it.
fn escape(s: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len() + 8);
    for &c in s {
        if should_escape(c) {
            out.push('%');
            out.push(char::from(HEX[usize::from(c >> 4)]));
            out.push(char::from(HEX[usize::from(c & 15)]));
        } else {
            out.push(char::from(c));
        }
    }
    out
}

/// Go's `unescape(s, encodePath)`: `None` when a `%` is not followed by two hex digits.
fn unescape(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hi = hex_value(*s.get(i + 1)?)?;
            let lo = hex_value(*s.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Go's `validEncoded(s, encodePath)`: every byte is a sub-delim, `:`/`@`, `[`/`]`, `%` or a
/// byte the path encoding leaves alone.
fn valid_encoded(s: &[u8]) -> bool {
    s.iter().all(|&c| {
        matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'['
                | b']'
                | b'%'
        ) || !should_escape(c)
    })
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
    fn request_paths_need_whole_escapes() {
        assert!(valid_path_escapes("/v1.0/jobs/a%2Fb%e2%82%ac"));
        assert!(valid_path_escapes("/v1.0/jobs/a+b"));
        for bad in ["/v1.0/jobs/a%zz", "/v1.0/jobs/a%", "/v1.0/jobs/a%4", "/%g0"] {
            assert!(!valid_path_escapes(bad), "{bad}");
        }
    }

    #[test]
    fn escaped_paths_keep_valid_escapes_and_escape_the_rest() {
        assert_eq!(escaped_path("/job/my||job@name"), "/job/my%7C%7Cjob@name");
        assert_eq!(escaped_path("/job/a%20b"), "/job/a%20b");
        assert_eq!(escaped_path("/job/100%"), "/job/100%25");
        assert_eq!(escaped_path("/job/plain"), "/job/plain");
    }
}
