//! Reading: `protojson.Unmarshal` of daprd's POST body into `internals.v1.JobHTTPRequest`.

use std::collections::BTreeMap;

use prost::Message;
use prost_types::value::Kind;
use prost_types::{Duration, ListValue, Struct, Value};

use super::scalar::{is_not_delim, parse_duration, parse_number, parse_uint32};
use super::{JsonError, MAX_DEPTH, MAX_DURATION_SECONDS, SURELY_DECODABLE_DEPTH};
use crate::go::quote::{quote, quote_bytes};
use crate::proto::common::{
    JobFailurePolicy, JobFailurePolicyConstant, JobFailurePolicyDrop, job_failure_policy::Policy,
};
use crate::proto::internals::JobHttpRequest;

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
                            start,
                            format!(
                                "invalid escape code {} in string",
                                quote_bytes(&src[i..(i + 2).min(src.len())])
                            ),
                        ));
                    }
                    let (c, used) = self.unicode_escape(start, i)?;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    i += used;
                }
                0x00..=0x1f => {
                    // Go's `%q` of a rune: single quotes.
                    let quoted = quote(&char::from(b).to_string());
                    return Err(self.syntax_error(
                        start,
                        format!(
                            "invalid character '{}' in string",
                            &quoted[1..quoted.len() - 1]
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

    /// A `\uXXXX` escape at `i` (and its low surrogate, if any) of the string opened at
    /// `start` (where Go places its errors): the character and the bytes used.
    fn unicode_escape(&self, start: usize, i: usize) -> Result<(char, usize), JsonError> {
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
                start,
                format!(
                    "invalid escape code {} in string",
                    quote_bytes(&src[at..(at + 6).min(src.len())])
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

    fn enter(&mut self) -> Result<(), JsonError> {
        self.depth += 1;
        self.max_depth = self.max_depth.max(self.depth);
        if self.depth > MAX_DEPTH {
            // Go's recursion limit error carries no position.
            return Err(JsonError("exceeded max recursion depth".to_owned()));
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
        if tok.kind == TokKind::Eof && self.depth == 0 {
            // Go's decoder hands an EOF outside any object back as a token (its "unexpected
            // EOF" check is always false there), so a body of only whitespace is an
            // unexpected empty token.
            return Err(self.syntax_error(tok.pos, "unexpected token "));
        }
        if tok.kind != TokKind::ObjectOpen {
            return Err(self.unexpected(&tok));
        }
        self.enter()
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
            Some(_) => Err(self.error_at(
                tok.pos,
                format!(
                    "google.protobuf.Duration value out of range: {}",
                    self.raw(&tok)
                ),
            )),
            None => Err(self.error_at(
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
                self.enter()?;
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
                self.enter()?;
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
                self.enter()?;
                self.members(|d, _, _| d.skip_value())
            }
            TokKind::ArrayOpen => {
                self.enter()?;
                self.elements(Self::skip_value).map(drop)
            }
            _ => Err(self.unexpected(&tok)),
        }
    }
}

fn unexpected_eof() -> JsonError {
    JsonError("unexpected EOF".to_owned())
}
