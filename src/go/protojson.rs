//! protojson's JSON text (Go's `google.golang.org/protobuf/encoding/protojson`) for the parts
//! both of daprd's writers share: strings, numbers, objects and `google.protobuf.Value` (with
//! its `Struct` and `ListValue`). The Jobs API writes a job with them on GET; delivery writes
//! an HTTP-scheduled job's data as the body of `POST /job/<name>`. `google.protobuf.Duration`
//! text is read and written here too: the Jobs API and jobsd's export format both carry it.

use std::fmt::Write as _;

use prost_types::value::Kind;
use prost_types::{Duration, ListValue, Struct, Value};

/// A value protojson cannot write (its text reads like Go's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValueError(pub String);

/// Writes `{…}` one member at a time.
pub struct Obj<'o> {
    /// Where the object is written.
    out: &'o mut String,
    /// No member written yet (no comma before the next).
    first: bool,
}

impl<'o> Obj<'o> {
    /// Opens the object.
    pub fn new(out: &'o mut String) -> Self {
        out.push('{');
        Obj { out, first: true }
    }

    /// Writes the member name; the caller writes the value.
    pub fn key(&mut self, name: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        write_str(self.out, name);
        self.out.push(':');
        self.out
    }

    /// Closes the object.
    pub fn close(self) {
        self.out.push('}');
    }
}

/// A JSON string as protojson writes it (the same escapes as serde_json's).
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends protojson's compact form of `v`, which is what Go's `structpb.Value.MarshalJSON`
/// gives apart from its deliberately random extra spaces. Fails for a value with no JSON form
/// (an unset kind, NaN, infinities), as Go does.
pub fn write_value(out: &mut String, v: &Value) -> Result<(), ValueError> {
    match &v.kind {
        None => {
            return Err(ValueError(
                "google.protobuf.Value: none of the oneof fields is set".to_owned(),
            ));
        }
        Some(Kind::NullValue(_)) => out.push_str("null"),
        Some(Kind::BoolValue(b)) => out.push_str(if *b { "true" } else { "false" }),
        Some(Kind::NumberValue(n)) => {
            if !n.is_finite() {
                let text = if n.is_nan() {
                    "NaN"
                } else if *n > 0.0 {
                    "+Inf"
                } else {
                    "-Inf"
                };
                return Err(ValueError(format!(
                    "google.protobuf.Value.number_value: invalid {text} value"
                )));
            }
            write_float(out, *n, false);
        }
        Some(Kind::StringValue(s)) => write_str(out, s),
        Some(Kind::StructValue(s)) => write_struct(out, s)?,
        Some(Kind::ListValue(l)) => write_list(out, l)?,
    }
    Ok(())
}

/// A `google.protobuf.Struct`: members in key order.
pub fn write_struct(out: &mut String, s: &Struct) -> Result<(), ValueError> {
    // BTreeMap order is Go's sorted map-key order.
    let mut obj = Obj::new(out);
    for (k, v) in &s.fields {
        write_value(obj.key(k), v)?;
    }
    obj.close();
    Ok(())
}

/// A `google.protobuf.ListValue`.
pub fn write_list(out: &mut String, l: &ListValue) -> Result<(), ValueError> {
    out.push('[');
    for (i, v) in l.values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_value(out, v)?;
    }
    out.push(']');
    Ok(())
}

/// A float as Go's JSON encoders write it: shortest round-trip digits, plain notation
/// between 1e-6 and 1e21, exponent notation (`1e+21`, `1e-7`) outside; NaN and infinities as
/// strings. `single` formats with float32 precision.
pub fn write_float(out: &mut String, n: f64, single: bool) {
    if n.is_nan() {
        out.push_str("\"NaN\"");
        return;
    }
    if n.is_infinite() {
        out.push_str(if n > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
        return;
    }
    let abs = n.abs();
    let exponent = abs != 0.0 && !(1e-6..1e21).contains(&abs);
    let text = match (single, exponent) {
        (false, false) => format!("{n}"),
        (false, true) => format!("{n:e}"),
        (true, false) => format!("{}", n as f32),
        (true, true) => format!("{:e}", n as f32),
    };
    match text.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => {
            let _ = write!(out, "{mantissa}e+{exp}");
        }
        _ => out.push_str(&text),
    }
}

/// The largest Duration protojson accepts or prints (±10 000 years).
pub const MAX_DURATION_SECONDS: i64 = 315_576_000_000;

/// protojson's Duration text: seconds with 0, 3, 6 or 9 fraction digits, then `s`.
pub fn format_duration(d: &Duration) -> Result<String, ValueError> {
    let (secs, nanos) = (d.seconds, d.nanos);
    if !(-MAX_DURATION_SECONDS..=MAX_DURATION_SECONDS).contains(&secs) {
        return Err(ValueError(format!(
            "google.protobuf.Duration: seconds out of range {secs}"
        )));
    }
    if !(-999_999_999..=999_999_999).contains(&nanos) {
        return Err(ValueError(format!(
            "google.protobuf.Duration: nanos out of range {nanos}"
        )));
    }
    if (secs > 0 && nanos < 0) || (secs < 0 && nanos > 0) {
        return Err(ValueError(
            "google.protobuf.Duration: signs of seconds and nanos do not match".to_owned(),
        ));
    }
    let sign = if secs < 0 || nanos < 0 { "-" } else { "" };
    let text = format!("{sign}{}.{:09}", secs.unsigned_abs(), nanos.unsigned_abs());
    Ok(format!("{}s", trim_fraction(&text)))
}

/// Drops trailing zero groups of a nine-digit fraction the way protojson does.
pub fn trim_fraction(text: &str) -> &str {
    let text = text.strip_suffix("000").unwrap_or(text);
    let text = text.strip_suffix("000").unwrap_or(text);
    text.strip_suffix(".000").unwrap_or(text)
}

/// protojson's Duration syntax: optional sign, decimal seconds with at most nine fraction
/// digits, then `s` (`"1.5s"`, `"-0.001s"`, `".5s"`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let body = text.strip_suffix('s')?;
    if text.len() < 2 {
        return None;
    }
    let (neg, body) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    if body.is_empty() {
        return None;
    }
    let (intp, frac) = match body.find('.') {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    if !intp.bytes().all(|b| b.is_ascii_digit()) || (intp.len() > 1 && intp.starts_with('0')) {
        return None;
    }
    let seconds: i64 = if intp.is_empty() {
        0
    } else {
        intp.parse().ok()?
    };
    let nanos: i32 = match frac {
        None => 0,
        Some(f) => {
            if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            format!("{f:0<9}").parse().ok()?
        }
    };
    let sign = if neg { -1 } else { 1 };
    Some(Duration {
        seconds: sign * seconds,
        nanos: sign as i32 * nanos,
    })
}
