//! The parts of protojson (Go's `google.golang.org/protobuf/encoding/protojson`) that daprd's
//! jobs API exposes, by hand: reading the POST body into `internals.v1.JobHTTPRequest` and
//! writing `runtime.v1.Job` for GET.
//!
//! Reading follows `UnmarshalOptions{DiscardUnknown: true, AllowPartial: true}`: json_name and
//! proto field names, duplicate fields rejected, `null` leaves a field unset (except `data`,
//! a `google.protobuf.Value`), numbers or numeric strings for `uint32`, Duration JSON for the
//! retry interval, unknown fields skipped. The decoder reads tokens in order like Go's, so the
//! first problem in the text is the one reported, with Go's `(line L:C)` positions.
//!
//! Writing follows `protojson.Marshal`: json names in field-number order, unset fields left
//! out, `Any` as `{"@type": …, …}` for the well-known types daprd can resolve.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prost::Message;
use prost_types::value::Kind;
use prost_types::{Any, Duration, ListValue, Struct, Timestamp, Value};

use crate::proto::common::{
    JobFailurePolicy, JobFailurePolicyConstant, JobFailurePolicyDrop, job_failure_policy::Policy,
};
use crate::proto::internals::JobHttpRequest;
use crate::proto::runtime;

/// Type URL of `google.protobuf.Value`, the type of HTTP-scheduled job data.
pub const VALUE_TYPE_URL: &str = "type.googleapis.com/google.protobuf.Value";

/// A protojson error; its text reads like Go's (`proto: (line 1:14): invalid value …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("proto: {0}")]
pub struct JsonError(String);

/// The largest Duration protojson accepts or prints (±10 000 years).
const MAX_DURATION_SECONDS: i64 = 315_576_000_000;

/// How deep arrays and objects may nest. Go allows 10 000, but prost decodes at most 100
/// nested messages, which a `Value` reaches at about 33 JSON levels; anything deeper could
/// be stored but never read back, so it is refused here (and bounds the parser's recursion).
const MAX_DEPTH: usize = 100;

/// Nesting (the request object included) up to which prost surely decodes `data` again: a
/// JSON level costs prost at most 3 of its 100 recursion levels (`Value`, `Struct`, map entry),
/// so objects fail from 34 levels of `data` on. Shallower bodies skip the costly check.
const SURELY_DECODABLE_DEPTH: usize = 32;

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// Parses a POST body into a `JobHTTPRequest` as daprd does. The caller skips empty bodies.
pub fn parse_job_http_request(body: &[u8]) -> Result<JobHttpRequest, JsonError> {
    let mut d = Decoder::new(body);
    let req = d.job_http_request()?;
    let tok = d.next()?;
    if tok.kind != TokKind::Eof {
        return Err(d.unexpected(&tok));
    }
    if let Some(data) = &req.data
        && d.max_depth > SURELY_DECODABLE_DEPTH
    {
        // Refuse what could not be decoded again later (see MAX_DEPTH).
        if Value::decode(data.encode_to_vec().as_slice()).is_err() {
            return Err(JsonError("exceeded max recursion depth".to_owned()));
        }
    }
    Ok(req)
}

#[derive(Debug, Clone, PartialEq)]
enum TokKind {
    ObjectOpen,
    ObjectClose,
    ArrayOpen,
    ArrayClose,
    Comma,
    Colon,
    Null,
    Bool(bool),
    /// The number's text (validated JSON number syntax).
    Number,
    /// The decoded string.
    Str(String),
    Eof,
}

#[derive(Debug, Clone)]
struct Token {
    kind: TokKind,
    /// Byte offset of the token's first byte.
    pos: usize,
    /// Byte offset just past the token.
    end: usize,
}

struct Decoder<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
    /// The deepest `depth` reached.
    max_depth: usize,
}

/// A field of the message being read: its number and the json name errors use.
type FieldRef = (u32, &'static str);

impl<'a> Decoder<'a> {
    fn new(src: &'a [u8]) -> Self {
        Decoder {
            src,
            pos: 0,
            depth: 0,
            max_depth: 0,
        }
    }

    /// The token's source text (Go's `RawString`).
    fn raw(&self, tok: &Token) -> String {
        String::from_utf8_lossy(&self.src[tok.pos..tok.end]).into_owned()
    }

    /// Go's `Position`: 1-based line, and column counted in runes.
    fn line_col(&self, pos: usize) -> (usize, usize) {
        let before = &self.src[..pos.min(self.src.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        (line, column)
    }

    fn error_at(&self, pos: usize, msg: impl std::fmt::Display) -> JsonError {
        let (line, column) = self.line_col(pos);
        JsonError(format!("(line {line}:{column}): {msg}"))
    }

    fn syntax_error(&self, pos: usize, msg: impl std::fmt::Display) -> JsonError {
        let (line, column) = self.line_col(pos);
        JsonError(format!("syntax error (line {line}:{column}): {msg}"))
    }

    fn unexpected(&self, tok: &Token) -> JsonError {
        if tok.kind == TokKind::Eof {
            return unexpected_eof();
        }
        self.syntax_error(tok.pos, format!("unexpected token {}", self.raw(tok)))
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.src.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Whether the next token is the punctuation `b` (`}` or `]`), without reading it. Unlike
    /// lexing ahead, this never decodes a string twice; text that is no token gives `false`,
    /// and reading it next reports it exactly as lexing ahead would have.
    fn next_is(&mut self, b: u8) -> bool {
        self.skip_ws();
        self.src.get(self.pos) == Some(&b)
    }

    /// Whether the next token is `null`, without reading it (see [`Decoder::next_is`]).
    fn next_is_null(&mut self) -> bool {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        rest.starts_with(b"null") && rest.get(4).is_none_or(|&b| !is_not_delim(b))
    }

    /// Reads one lexical token.
    fn next(&mut self) -> Result<Token, JsonError> {
        self.skip_ws();
        let start = self.pos;
        let Some(&c) = self.src.get(start) else {
            return Ok(Token {
                kind: TokKind::Eof,
                pos: start,
                end: start,
            });
        };
        let single = |kind| Token {
            kind,
            pos: start,
            end: start + 1,
        };
        let tok = match c {
            b'{' => single(TokKind::ObjectOpen),
            b'}' => single(TokKind::ObjectClose),
            b'[' => single(TokKind::ArrayOpen),
            b']' => single(TokKind::ArrayClose),
            b',' => single(TokKind::Comma),
            b':' => single(TokKind::Colon),
            b'"' => {
                let (s, end) = self.string_at(start)?;
                Token {
                    kind: TokKind::Str(s),
                    pos: start,
                    end,
                }
            }
            b'-' | b'0'..=b'9' => match parse_number(&self.src[start..]) {
                Some(n) => Token {
                    kind: TokKind::Number,
                    pos: start,
                    end: start + n,
                },
                None => return Err(self.invalid_value(start)),
            },
            _ => {
                let literal = [
                    (&b"null"[..], TokKind::Null),
                    (b"true", TokKind::Bool(true)),
                    (b"false", TokKind::Bool(false)),
                ]
                .into_iter()
                .find(|(word, _)| {
                    self.src[start..].starts_with(word)
                        && self
                            .src
                            .get(start + word.len())
                            .is_none_or(|&b| !is_not_delim(b))
                });
                match literal {
                    Some((word, kind)) => Token {
                        kind,
                        pos: start,
                        end: start + word.len(),
                    },
                    None => return Err(self.invalid_value(start)),
                }
            }
        };
        self.pos = tok.end;
        Ok(tok)
    }

    /// Go's `invalid value <fragment>` for text that starts no token.
    fn invalid_value(&self, start: usize) -> JsonError {
        let rest = &self.src[start..];
        let n = rest
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || b"-+._/".contains(&b))
            .count();
        let fragment = if n > 0 {
            String::from_utf8_lossy(&rest[..n]).into_owned()
        } else {
            // One rune.
            let len = match rest.first() {
                Some(b) if *b >= 0xf0 => 4,
                Some(b) if *b >= 0xe0 => 3,
                Some(b) if *b >= 0xc0 => 2,
                _ => 1,
            };
            String::from_utf8_lossy(&rest[..len.min(rest.len())]).into_owned()
        };
        self.syntax_error(start, format!("invalid value {fragment}"))
    }

    /// Decodes the string starting at `start` (its opening quote); returns it and the offset
    /// past the closing quote.
    fn string_at(&self, start: usize) -> Result<(String, usize), JsonError> {
        let src = self.src;
        let mut out: Vec<u8> = Vec::new();
        let mut i = start + 1;
        loop {
            let Some(&b) = src.get(i) else {
                return Err(unexpected_eof());
            };
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = src.get(i + 1) else {
                        return Err(unexpected_eof());
                    };
                    let simple = match e {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0c),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(c) = simple {
                        out.push(c);
                        i += 2;
                        continue;
                    }
                    if e != b'u' {
                        return Err(self.syntax_error(
                            i,
                            format!(
                                "invalid escape code {} in string",
                                crate::api::go::quote_bytes(&src[i..(i + 2).min(src.len())])
                            ),
                        ));
                    }
                    let (c, used) = self.unicode_escape(i)?;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    i += used;
                }
                0x00..=0x1f => {
                    return Err(self.syntax_error(
                        i,
                        format!(
                            "invalid character {} in string",
                            crate::schedule::go_quote::quote(&char::from(b).to_string())
                        ),
                    ));
                }
                _ => {
                    // The run of plain bytes up to the next quote, escape or control byte.
                    let run = src[i..]
                        .iter()
                        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                        .unwrap_or(src.len() - i);
                    out.extend_from_slice(&src[i..i + run]);
                    i += run;
                }
            }
        }
        match String::from_utf8(out) {
            Ok(s) => Ok((s, i + 1)),
            Err(_) => Err(self.syntax_error(start, "invalid UTF-8 in string")),
        }
    }

    /// A `\uXXXX` escape at `i` (and its low surrogate, if any): the character and the bytes
    /// used.
    fn unicode_escape(&self, i: usize) -> Result<(char, usize), JsonError> {
        let src = self.src;
        let hex4 = |at: usize| -> Option<u32> {
            let digits = src.get(at..at + 4)?;
            let text = std::str::from_utf8(digits).ok()?;
            if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(text, 16).ok()
        };
        let bad = |at: usize| {
            self.syntax_error(
                at,
                format!(
                    "invalid escape code {} in string",
                    crate::api::go::quote_bytes(&src[at..(at + 6).min(src.len())])
                ),
            )
        };
        if src.len() < i + 6 {
            return Err(unexpected_eof());
        }
        let hi = hex4(i + 2).ok_or_else(|| bad(i))?;
        if !(0xd800..0xe000).contains(&hi) {
            return char::from_u32(hi).map(|c| (c, 6)).ok_or_else(|| bad(i));
        }
        // A surrogate must be the first half of a pair.
        if src.len() < i + 12 {
            return Err(unexpected_eof());
        }
        let lo = if src[i + 6] == b'\\' && src[i + 7] == b'u' {
            hex4(i + 8)
        } else {
            None
        };
        match lo {
            Some(lo) if (0xd800..0xdc00).contains(&hi) && (0xdc00..0xe000).contains(&lo) => {
                let c = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
                char::from_u32(c).map(|c| (c, 12)).ok_or_else(|| bad(i + 6))
            }
            _ => Err(bad(i + 6)),
        }
    }

    fn enter(&mut self, pos: usize) -> Result<(), JsonError> {
        self.depth += 1;
        self.max_depth = self.max_depth.max(self.depth);
        if self.depth > MAX_DEPTH {
            return Err(self.error_at(pos, "exceeded max recursion depth"));
        }
        Ok(())
    }

    /// Reads the members of an object whose `{` was just read, handing each name to `field`,
    /// which must read the value.
    fn members(
        &mut self,
        mut field: impl FnMut(&mut Self, &str, &Token) -> Result<(), JsonError>,
    ) -> Result<(), JsonError> {
        if self.next_is(b'}') {
            self.next()?;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            let name_tok = self.next()?;
            let TokKind::Str(name) = &name_tok.kind else {
                return Err(self.unexpected(&name_tok));
            };
            let colon = self.next()?;
            if colon.kind != TokKind::Colon {
                return Err(self.unexpected(&colon));
            }
            field(self, name, &name_tok)?;
            let sep = self.next()?;
            match sep.kind {
                TokKind::Comma => continue,
                TokKind::ObjectClose => break,
                _ => return Err(self.unexpected(&sep)),
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// Reads the `{` of a message value.
    fn message_open(&mut self) -> Result<(), JsonError> {
        let tok = self.next()?;
        if tok.kind != TokKind::ObjectOpen {
            return Err(self.unexpected(&tok));
        }
        self.enter(tok.pos)
    }

    /// Reads a message's members with Go's rules: unknown names skipped, a field named twice
    /// rejected, `null` leaving a field unset unless `keep_null` says otherwise. `lookup`
    /// maps a json or proto name to the field; `read` reads a non-null value.
    fn message(
        &mut self,
        lookup: impl Fn(&str) -> Option<FieldRef>,
        keep_null: impl Fn(u32) -> bool,
        mut read: impl FnMut(&mut Self, FieldRef, &Token) -> Result<(), JsonError>,
    ) -> Result<(), JsonError> {
        self.message_open()?;
        let mut seen: Vec<u32> = Vec::new();
        self.members(|d, name, name_tok| {
            let Some(field) = lookup(name) else {
                return d.skip_value();
            };
            if seen.contains(&field.0) {
                return Err(
                    d.error_at(name_tok.pos, format!("duplicate field {}", d.raw(name_tok)))
                );
            }
            seen.push(field.0);
            if !keep_null(field.0) && d.next_is_null() {
                d.next()?;
                return Ok(());
            }
            read(d, field, name_tok)
        })
    }

    fn job_http_request(&mut self) -> Result<JobHttpRequest, JsonError> {
        let mut req = JobHttpRequest::default();
        self.message(
            |name| {
                Some(match name {
                    "name" => (1, "name"),
                    "schedule" => (2, "schedule"),
                    "repeats" => (3, "repeats"),
                    "dueTime" | "due_time" => (4, "dueTime"),
                    "ttl" => (5, "ttl"),
                    "data" => (6, "data"),
                    "overwrite" => (7, "overwrite"),
                    "failurePolicy" | "failure_policy" => (8, "failurePolicy"),
                    _ => return None,
                })
            },
            // A JSON null for a google.protobuf.Value is a value: NullValue.
            |number| number == 6,
            |d, field, _| {
                match field.0 {
                    1 => req.name = d.string_field(field.1)?,
                    2 => req.schedule = Some(d.string_field(field.1)?),
                    3 => req.repeats = Some(d.uint32_field(field.1)?),
                    4 => req.due_time = Some(d.string_field(field.1)?),
                    5 => req.ttl = Some(d.string_field(field.1)?),
                    6 => req.data = Some(d.value()?),
                    7 => req.overwrite = Some(d.bool_field(field.1)?),
                    _ => req.failure_policy = Some(d.failure_policy()?),
                }
                Ok(())
            },
        )?;
        Ok(req)
    }

    fn failure_policy(&mut self) -> Result<JobFailurePolicy, JsonError> {
        let mut policy = None;
        self.message(
            |name| match name {
                "drop" => Some((1, "drop")),
                "constant" => Some((2, "constant")),
                _ => None,
            },
            |_| false,
            |d, field, name_tok| {
                if policy.is_some() {
                    return Err(d.error_at(
                        name_tok.pos,
                        format!(
                            "error parsing {}, oneof dapr.proto.common.v1.JobFailurePolicy.policy is already set",
                            d.raw(name_tok)
                        ),
                    ));
                }
                policy = Some(if field.0 == 1 {
                    d.message(|_| None, |_| false, |_, _, _| Ok(()))?;
                    Policy::Drop(JobFailurePolicyDrop {})
                } else {
                    Policy::Constant(d.constant_policy()?)
                });
                Ok(())
            },
        )?;
        Ok(JobFailurePolicy { policy })
    }

    fn constant_policy(&mut self) -> Result<JobFailurePolicyConstant, JsonError> {
        let mut constant = JobFailurePolicyConstant::default();
        self.message(
            |name| match name {
                "interval" => Some((1, "interval")),
                "maxRetries" | "max_retries" => Some((2, "maxRetries")),
                _ => None,
            },
            |_| false,
            |d, field, _| {
                if field.0 == 1 {
                    constant.interval = Some(d.duration()?);
                } else {
                    constant.max_retries = Some(d.uint32_field(field.1)?);
                }
                Ok(())
            },
        )?;
        Ok(constant)
    }

    fn string_field(&mut self, json_name: &str) -> Result<String, JsonError> {
        let tok = self.next()?;
        match tok.kind {
            TokKind::Str(s) => Ok(s),
            _ => Err(self.invalid_field_value("string", json_name, &tok)),
        }
    }

    fn bool_field(&mut self, json_name: &str) -> Result<bool, JsonError> {
        let tok = self.next()?;
        match tok.kind {
            TokKind::Bool(b) => Ok(b),
            _ => Err(self.invalid_field_value("bool", json_name, &tok)),
        }
    }

    fn uint32_field(&mut self, json_name: &str) -> Result<u32, JsonError> {
        let tok = self.next()?;
        let parsed = match &tok.kind {
            TokKind::Number => std::str::from_utf8(&self.src[tok.pos..tok.end])
                .ok()
                .and_then(parse_uint32),
            // A numeric string: the same number syntax, no surrounding space.
            TokKind::Str(s) if s.trim() == s => {
                parse_number(s.as_bytes()).and_then(|n| parse_uint32(&s[..n]))
            }
            _ => None,
        };
        parsed.ok_or_else(|| self.invalid_field_value("uint32", json_name, &tok))
    }

    fn invalid_field_value(&self, kind: &str, json_name: &str, tok: &Token) -> JsonError {
        if tok.kind == TokKind::Eof {
            return unexpected_eof();
        }
        // For an object or array Go's token is its opening bracket, so that is what gets
        // named.
        self.error_at(
            tok.pos,
            format!(
                "invalid value for {kind} field {json_name}: {}",
                self.raw(tok)
            ),
        )
    }

    fn duration(&mut self) -> Result<Duration, JsonError> {
        let tok = self.next()?;
        let TokKind::Str(text) = &tok.kind else {
            return Err(self.unexpected(&tok));
        };
        match parse_duration(text) {
            Some(d) if d.seconds.abs() <= MAX_DURATION_SECONDS => Ok(d),
            _ => Err(self.error_at(
                tok.pos,
                format!("invalid google.protobuf.Duration value {}", self.raw(&tok)),
            )),
        }
    }

    /// Any JSON value, as a `google.protobuf.Value`.
    fn value(&mut self) -> Result<Value, JsonError> {
        let tok = self.next()?;
        let kind = match tok.kind {
            TokKind::Null => Kind::NullValue(0),
            TokKind::Bool(b) => Kind::BoolValue(b),
            TokKind::Number => {
                let text = String::from_utf8_lossy(&self.src[tok.pos..tok.end]);
                match text.parse::<f64>() {
                    Ok(n) if n.is_finite() => Kind::NumberValue(n),
                    _ => {
                        return Err(self
                            .error_at(tok.pos, format!("invalid google.protobuf.Value: {text}")));
                    }
                }
            }
            TokKind::Str(s) => Kind::StringValue(s),
            TokKind::ObjectOpen => {
                self.enter(tok.pos)?;
                let mut fields = BTreeMap::new();
                self.members(|d, name, name_tok| {
                    if fields.contains_key(name) {
                        return Err(d.error_at(
                            name_tok.pos,
                            format!("duplicate map key {}", d.raw(name_tok)),
                        ));
                    }
                    let v = d.value()?;
                    fields.insert(name.to_owned(), v);
                    Ok(())
                })?;
                Kind::StructValue(Struct { fields })
            }
            TokKind::ArrayOpen => {
                self.enter(tok.pos)?;
                Kind::ListValue(ListValue {
                    values: self.elements(Self::value)?,
                })
            }
            _ => return Err(self.unexpected(&tok)),
        };
        Ok(Value { kind: Some(kind) })
    }

    /// Reads the elements of an array whose `[` was just read.
    fn elements<T>(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Result<T, JsonError>,
    ) -> Result<Vec<T>, JsonError> {
        let mut out = Vec::new();
        if self.next_is(b']') {
            self.next()?;
            self.depth -= 1;
            return Ok(out);
        }
        loop {
            out.push(element(self)?);
            let sep = self.next()?;
            match sep.kind {
                TokKind::Comma => continue,
                TokKind::ArrayClose => break,
                _ => return Err(self.unexpected(&sep)),
            }
        }
        self.depth -= 1;
        Ok(out)
    }

    /// Skips one value of an unknown field (still checking its syntax, as Go does).
    fn skip_value(&mut self) -> Result<(), JsonError> {
        let tok = self.next()?;
        match tok.kind {
            TokKind::Null | TokKind::Bool(_) | TokKind::Number | TokKind::Str(_) => Ok(()),
            TokKind::ObjectOpen => {
                self.enter(tok.pos)?;
                self.members(|d, _, _| d.skip_value())
            }
            TokKind::ArrayOpen => {
                self.enter(tok.pos)?;
                self.elements(Self::skip_value).map(drop)
            }
            _ => Err(self.unexpected(&tok)),
        }
    }
}

fn unexpected_eof() -> JsonError {
    JsonError("unexpected EOF".to_owned())
}

/// Go's `isNotDelim`: characters that may not directly follow a literal or number.
fn is_not_delim(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.' | b'_')
}

/// The length of the JSON number at the start of `s` (Go's `parseNumber`), if there is one.
fn parse_number(s: &[u8]) -> Option<usize> {
    let mut n = 0;
    let digits = |n: &mut usize| {
        while s.get(*n).is_some_and(u8::is_ascii_digit) {
            *n += 1;
        }
    };
    if s.first() == Some(&b'-') {
        n += 1;
    }
    match s.get(n) {
        Some(b'0') => n += 1,
        Some(b'1'..=b'9') => {
            n += 1;
            digits(&mut n);
        }
        _ => return None,
    }
    if s.get(n) == Some(&b'.') && s.get(n + 1).is_some_and(u8::is_ascii_digit) {
        n += 2;
        digits(&mut n);
    }
    if matches!(s.get(n), Some(b'e' | b'E')) && n + 1 < s.len() {
        n += 1;
        if matches!(s.get(n), Some(b'+' | b'-')) {
            n += 1;
            if n >= s.len() {
                return None;
            }
        }
        digits(&mut n);
    }
    if s.get(n).is_some_and(|&b| is_not_delim(b)) {
        return None;
    }
    Some(n)
}

/// A uint32 from a JSON number's text the way protojson reads it: exponents and zero
/// fractions are fine (`1e2`, `3.0`), negatives, real fractions and overflow are not.
fn parse_uint32(text: &str) -> Option<u32> {
    // Plain digits, by far the usual form, read the same either way.
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok();
    }
    let (neg, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i32>().ok()?),
        None => (rest, 0),
    };
    let (intp, frac) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    let intp = intp.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    if intp.is_empty() && frac.is_empty() {
        return Some(0);
    }
    let digits: String = if exp >= 0 {
        let exp = exp as usize;
        if frac.len() > exp || intp.len() + exp > 20 {
            return None;
        }
        let mut s = format!("{intp}{frac}");
        s.extend(std::iter::repeat_n('0', exp - frac.len()));
        s
    } else {
        if !frac.is_empty() {
            return None;
        }
        let index = intp.len().checked_sub(exp.unsigned_abs() as usize)?;
        if intp[index..].bytes().any(|b| b != b'0') {
            return None;
        }
        intp[..index].to_owned()
    };
    if neg {
        return None;
    }
    digits.parse::<u32>().ok()
}

/// protojson's Duration syntax: optional sign, decimal seconds with at most nine fraction
/// digits, then `s` (`"1.5s"`, `"-0.001s"`, `".5s"`).
fn parse_duration(text: &str) -> Option<Duration> {
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

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// `protojson.Marshal` of a `runtime.v1.Job`.
pub fn job_to_json(job: &runtime::Job) -> Result<String, JsonError> {
    let mut out = String::new();
    write_job(&mut out, job)?;
    Ok(out)
}

/// Appends the protojson of a `runtime.v1.Job` to `out`.
pub fn write_job(out: &mut String, job: &runtime::Job) -> Result<(), JsonError> {
    let mut obj = Obj::new(out);
    if !job.name.is_empty() {
        write_str(obj.key("name"), &job.name);
    }
    if let Some(schedule) = &job.schedule {
        write_str(obj.key("schedule"), schedule);
    }
    if let Some(repeats) = job.repeats {
        let _ = write!(obj.key("repeats"), "{repeats}");
    }
    if let Some(due_time) = &job.due_time {
        write_str(obj.key("dueTime"), due_time);
    }
    if let Some(ttl) = &job.ttl {
        write_str(obj.key("ttl"), ttl);
    }
    if let Some(data) = &job.data {
        write_any(obj.key("data"), data)?;
    }
    if let Some(policy) = &job.failure_policy {
        write_failure_policy(obj.key("failurePolicy"), policy)?;
    }
    obj.close();
    Ok(())
}

/// Writes `{…}` one member at a time.
struct Obj<'o> {
    out: &'o mut String,
    first: bool,
}

impl<'o> Obj<'o> {
    fn new(out: &'o mut String) -> Self {
        out.push('{');
        Obj { out, first: true }
    }

    /// Writes the member name; the caller writes the value.
    fn key(&mut self, name: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        write_str(self.out, name);
        self.out.push(':');
        self.out
    }

    fn close(self) {
        self.out.push('}');
    }
}

fn write_failure_policy(out: &mut String, policy: &JobFailurePolicy) -> Result<(), JsonError> {
    let mut obj = Obj::new(out);
    match &policy.policy {
        None => {}
        Some(Policy::Drop(_)) => obj.key("drop").push_str("{}"),
        Some(Policy::Constant(c)) => {
            let out = obj.key("constant");
            let mut inner = Obj::new(out);
            if let Some(interval) = &c.interval {
                let text = format_duration(interval)?;
                write_str(inner.key("interval"), &text);
            }
            if let Some(max) = c.max_retries {
                let _ = write!(inner.key("maxRetries"), "{max}");
            }
            inner.close();
        }
    }
    obj.close();
    Ok(())
}

/// A JSON string as protojson writes it (the same escapes as serde_json's).
fn write_str(out: &mut String, s: &str) {
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

/// An `Any` as protojson writes it: `{}` when empty, else `{"@type": url, "value": …}` for
/// the well-known types with a special JSON form. Types daprd could not resolve are errors,
/// as they are for daprd.
pub fn write_any(out: &mut String, any: &Any) -> Result<(), JsonError> {
    if any.type_url.is_empty() {
        if any.value.is_empty() {
            out.push_str("{}");
            return Ok(());
        }
        return Err(JsonError(
            "google.protobuf.Any: type_url is not set".to_owned(),
        ));
    }
    // Go's resolver looks the message up by the text after the last '/'.
    let name = any.type_url.rsplit('/').next().unwrap_or_default();
    let bytes = any.value.as_slice();
    let unmarshal_err = || {
        JsonError(format!(
            "google.protobuf.Any: unable to unmarshal {}: proto: cannot parse invalid wire-format data",
            crate::schedule::go_quote::quote(&any.type_url)
        ))
    };
    let mut value = String::new();
    match name {
        "google.protobuf.Value" => write_value(
            &mut value,
            &Value::decode(bytes).map_err(|_| unmarshal_err())?,
        )?,
        "google.protobuf.Struct" => write_struct(
            &mut value,
            &Struct::decode(bytes).map_err(|_| unmarshal_err())?,
        )?,
        "google.protobuf.ListValue" => write_list(
            &mut value,
            &ListValue::decode(bytes).map_err(|_| unmarshal_err())?,
        )?,
        "google.protobuf.Duration" => write_str(
            &mut value,
            &format_duration(&Duration::decode(bytes).map_err(|_| unmarshal_err())?)?,
        ),
        "google.protobuf.Timestamp" => write_str(
            &mut value,
            &format_timestamp(&Timestamp::decode(bytes).map_err(|_| unmarshal_err())?)?,
        ),
        "google.protobuf.Empty" => {
            <()>::decode(bytes).map_err(|_| unmarshal_err())?;
            value.push_str("{}");
        }
        "google.protobuf.Any" => write_any(
            &mut value,
            &Any::decode(bytes).map_err(|_| unmarshal_err())?,
        )?,
        "google.protobuf.StringValue" => write_str(
            &mut value,
            &String::decode(bytes).map_err(|_| unmarshal_err())?,
        ),
        "google.protobuf.BytesValue" => {
            use base64::Engine as _;
            let raw = Vec::<u8>::decode(bytes).map_err(|_| unmarshal_err())?;
            write_str(
                &mut value,
                &base64::engine::general_purpose::STANDARD.encode(raw),
            );
        }
        "google.protobuf.BoolValue" => {
            let b = bool::decode(bytes).map_err(|_| unmarshal_err())?;
            value.push_str(if b { "true" } else { "false" });
        }
        "google.protobuf.Int32Value" => {
            let _ = write!(
                value,
                "{}",
                i32::decode(bytes).map_err(|_| unmarshal_err())?
            );
        }
        "google.protobuf.UInt32Value" => {
            let _ = write!(
                value,
                "{}",
                u32::decode(bytes).map_err(|_| unmarshal_err())?
            );
        }
        "google.protobuf.Int64Value" => {
            let _ = write!(
                value,
                "\"{}\"",
                i64::decode(bytes).map_err(|_| unmarshal_err())?
            );
        }
        "google.protobuf.UInt64Value" => {
            let _ = write!(
                value,
                "\"{}\"",
                u64::decode(bytes).map_err(|_| unmarshal_err())?
            );
        }
        "google.protobuf.DoubleValue" => write_float(
            &mut value,
            f64::decode(bytes).map_err(|_| unmarshal_err())?,
            false,
        ),
        "google.protobuf.FloatValue" => write_float(
            &mut value,
            f64::from(f32::decode(bytes).map_err(|_| unmarshal_err())?),
            true,
        ),
        _ => {
            return Err(JsonError(format!(
                "google.protobuf.Any: unable to resolve {}: not found",
                crate::schedule::go_quote::quote(&any.type_url)
            )));
        }
    }
    let mut obj = Obj::new(out);
    write_str(obj.key("@type"), &any.type_url);
    obj.key("value").push_str(&value);
    obj.close();
    Ok(())
}

fn write_value(out: &mut String, v: &Value) -> Result<(), JsonError> {
    match &v.kind {
        None => {
            return Err(JsonError(
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
                return Err(JsonError(format!(
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

fn write_struct(out: &mut String, s: &Struct) -> Result<(), JsonError> {
    // BTreeMap order is Go's sorted map-key order.
    let mut obj = Obj::new(out);
    for (k, v) in &s.fields {
        write_value(obj.key(k), v)?;
    }
    obj.close();
    Ok(())
}

fn write_list(out: &mut String, l: &ListValue) -> Result<(), JsonError> {
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
fn write_float(out: &mut String, n: f64, single: bool) {
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

/// protojson's Duration text: seconds with 0, 3, 6 or 9 fraction digits, then `s`.
pub fn format_duration(d: &Duration) -> Result<String, JsonError> {
    let (secs, nanos) = (d.seconds, d.nanos);
    if !(-MAX_DURATION_SECONDS..=MAX_DURATION_SECONDS).contains(&secs) {
        return Err(JsonError(format!(
            "google.protobuf.Duration: seconds out of range {secs}"
        )));
    }
    if !(-999_999_999..=999_999_999).contains(&nanos) {
        return Err(JsonError(format!(
            "google.protobuf.Duration: nanos out of range {nanos}"
        )));
    }
    if (secs > 0 && nanos < 0) || (secs < 0 && nanos > 0) {
        return Err(JsonError(
            "google.protobuf.Duration: signs of seconds and nanos do not match".to_owned(),
        ));
    }
    let sign = if secs < 0 || nanos < 0 { "-" } else { "" };
    let text = format!("{sign}{}.{:09}", secs.unsigned_abs(), nanos.unsigned_abs());
    Ok(format!("{}s", trim_fraction(&text)))
}

/// Drops trailing zero groups of a nine-digit fraction the way protojson does.
fn trim_fraction(text: &str) -> &str {
    let text = text.strip_suffix("000").unwrap_or(text);
    let text = text.strip_suffix("000").unwrap_or(text);
    text.strip_suffix(".000").unwrap_or(text)
}

/// protojson's Timestamp text: RFC 3339 in UTC with 0, 3, 6 or 9 fraction digits.
fn format_timestamp(t: &Timestamp) -> Result<String, JsonError> {
    const MIN: i64 = -62_135_596_800; // 0001-01-01T00:00:00Z
    const MAX: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    if !(MIN..=MAX).contains(&t.seconds) {
        return Err(JsonError(format!(
            "google.protobuf.Timestamp: seconds out of range {}",
            t.seconds
        )));
    }
    let nanos = u32::try_from(t.nanos)
        .ok()
        .filter(|n| *n <= 999_999_999)
        .ok_or_else(|| {
            JsonError(format!(
                "google.protobuf.Timestamp: nanos out of range {}",
                t.nanos
            ))
        })?;
    let at = chrono::DateTime::from_timestamp(t.seconds, nanos).ok_or_else(|| {
        JsonError(format!(
            "google.protobuf.Timestamp: seconds out of range {}",
            t.seconds
        ))
    })?;
    let text = format!("{}.{nanos:09}", at.format("%Y-%m-%dT%H:%M:%S"));
    Ok(format!("{}Z", trim_fraction(&text)))
}

/// The `data` of an HTTP-scheduled job: an Any of the serialized `google.protobuf.Value`.
pub fn value_to_any(value: &Value) -> Any {
    Any {
        type_url: VALUE_TYPE_URL.to_owned(),
        value: value.encode_to_vec(),
    }
}

#[cfg(test)]
mod tests;
