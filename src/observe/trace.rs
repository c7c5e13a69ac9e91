//! W3C Trace Context (`traceparent`, version `00`): the header every delivery to the app
//! carries, and the check a create's `traceparent` must pass before it is stored.
//!
//! One trace per execution: the trace id is the execution id's 16 bytes (the same on every
//! attempt, retry, replica and restart of a tick), the parent id is a fresh random span id per
//! attempt, the flags say "sampled". An app that continues the trace makes its work a child of
//! the attempt that delivered it.

use std::fmt;

use crate::trigger::ExecutionId;

/// The HTTP header and gRPC metadata key.
pub const TRACEPARENT: &str = "traceparent";

/// Length of a version-00 `traceparent`: `00-` + 32 hex + `-` + 16 hex + `-` + 2 hex.
pub const TRACEPARENT_LEN: usize = 55;

/// The `sampled` trace flag.
const SAMPLED: u8 = 0x01;

/// One W3C trace context: trace id, parent (span) id and flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace id (never all zero).
    pub trace_id: [u8; 16],
    /// The id of the caller's span (never all zero).
    pub span_id: [u8; 8],
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// The context of one delivery attempt of `execution`: the execution id as trace id, a
    /// fresh random span id, sampled.
    pub fn for_attempt(execution: &ExecutionId) -> Self {
        let mut span = fastrand::u64(..);
        while span == 0 {
            span = fastrand::u64(..);
        }
        TraceParent {
            trace_id: *execution.as_bytes(),
            span_id: span.to_be_bytes(),
            flags: SAMPLED,
        }
    }

    /// Parses a version-00 `traceparent` strictly: `00`, 32 lower-case hex digits not all
    /// zero, 16 lower-case hex digits not all zero, 2 lower-case hex digits, `-` between
    /// them, nothing around. Anything else (other versions included) is `None`: a create
    /// with such a header is stored without a link.
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != TRACEPARENT_LEN || &b[..3] != b"00-" || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let mut trace_id = [0u8; 16];
        hex_decode(&b[3..35], &mut trace_id)?;
        let mut span_id = [0u8; 8];
        hex_decode(&b[36..52], &mut span_id)?;
        let mut flags = [0u8; 1];
        hex_decode(&b[53..55], &mut flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            flags: flags[0],
        })
    }

    /// The header text, on the stack.
    pub fn encode(&self) -> [u8; TRACEPARENT_LEN] {
        let mut out = [b'-'; TRACEPARENT_LEN];
        out[..2].copy_from_slice(b"00");
        hex_encode(&self.trace_id, &mut out[3..35]);
        hex_encode(&self.span_id, &mut out[36..52]);
        hex_encode(&[self.flags], &mut out[53..55]);
        out
    }

    /// The header value (one allocation: the value's own bytes).
    pub fn header_value(&self) -> http::HeaderValue {
        // Only `0-9a-f` and `-`: always a valid header value.
        http::HeaderValue::from_bytes(&self.encode())
            .unwrap_or_else(|_| http::HeaderValue::from_static(""))
    }
}

impl fmt::Display for TraceParent {
    /// `00-<trace id>-<span id>-<flags>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.encode();
        // Hex digits and dashes only.
        f.write_str(std::str::from_utf8(&bytes).unwrap_or_default())
    }
}

/// The create's `traceparent` worth storing: `Some` only for a well-formed version-00 value.
pub fn valid(value: Option<&[u8]>) -> Option<String> {
    let text = std::str::from_utf8(value?).ok()?;
    TraceParent::parse(text).map(|_| text.to_owned())
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_encode(bytes: &[u8], out: &mut [u8]) {
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 0x0f)];
    }
}

/// Lower-case hex only, as W3C requires.
fn hex_decode(hex: &[u8], out: &mut [u8]) -> Option<()> {
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    for (i, o) in out.iter_mut().enumerate() {
        *o = nibble(hex[2 * i])? << 4 | nibble(hex[2 * i + 1])?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_prints_the_w3c_example() {
        let tp = TraceParent::parse(SAMPLE).expect("valid");
        assert_eq!(tp.trace_id[0], 0x4b);
        assert_eq!(tp.span_id[7], 0xb7);
        assert_eq!(tp.flags, 1);
        assert_eq!(tp.to_string(), SAMPLE);
        assert_eq!(tp.header_value().to_str().ok(), Some(SAMPLE));
        assert_eq!(valid(Some(SAMPLE.as_bytes())).as_deref(), Some(SAMPLE));
    }

    #[test]
    fn refuses_what_w3c_refuses() {
        let bad = [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ];
        for s in bad {
            assert_eq!(TraceParent::parse(s), None, "{s:?}");
        }
        assert_eq!(valid(Some(b"\xff\xfe")), None);
        assert_eq!(valid(None), None);
    }

    #[test]
    fn attempts_share_the_execution_trace_with_fresh_span_ids() {
        let t = chrono::DateTime::UNIX_EPOCH;
        let exec = ExecutionId::for_tick("app||default||myapp||j", t);
        let a = TraceParent::for_attempt(&exec);
        let b = TraceParent::for_attempt(&exec);
        assert_eq!(a.trace_id, *exec.as_bytes());
        assert_eq!(a.trace_id, b.trace_id);
        assert_ne!(a.span_id, b.span_id);
        let text = a.to_string();
        assert_eq!(TraceParent::parse(&text), Some(a));
        assert!(text.ends_with("-01"));
        let hex: String = exec.to_string().replace('-', "");
        assert_eq!(&text[3..35], hex);
    }
}
