//! Go's `json.NewDecoder(r).Decode(&v)` as daprd reads actor reminder bodies: only the first
//! JSON value of the stream counts (what follows it is never read), its syntax is checked by
//! Go's scanner (with Go's error texts and its nesting limit of 10,000), and bytes that are
//! not UTF-8 inside strings are decoded as U+FFFD, one per byte.

use super::quote::quote;

/// Go's `maxNestingDepth`: the scanner refuses the 10,001st nested `{` or `[`.
const MAX_NESTING_DEPTH: usize = 10_000;

/// The bytes of the first JSON value in `input` (leading whitespace skipped), or the text of
/// Go's error: `EOF` for nothing but whitespace, `unexpected EOF` for a value cut short, the
/// scanner's `invalid character …` for a syntax error.
pub fn first_value(input: &[u8]) -> Result<&[u8], String> {
    let mut scan = Scanner::default();
    let mut start = None;
    for (i, &c) in input.iter().enumerate() {
        if start.is_none() && !is_space(c) {
            start = Some(i);
        }
        match scan.step(c) {
            Step::Continue => {}
            // The value ended just before `c` (a number or literal, or the byte after a
            // string), or with `c` (a closing bracket).
            Step::EndBefore => return Ok(&input[start.unwrap_or(i)..i]),
            Step::EndWith => return Ok(&input[start.unwrap_or(i)..=i]),
            Step::Error(msg) => return Err(format!("invalid character {} {msg}", quote_char(c))),
        }
    }
    match start {
        None => Err("EOF".to_owned()),
        // At the end of the stream Go feeds one more space: a number or literal ends there.
        Some(s) => match scan.step(b' ') {
            Step::EndBefore | Step::EndWith => Ok(&input[s..]),
            _ => Err("unexpected EOF".to_owned()),
        },
    }
}

/// `bytes` with every byte that does not start valid UTF-8 replaced by U+FFFD, as Go's
/// decoder reads strings (one replacement per byte, where Rust's lossy conversion may
/// replace a cut-short sequence by one).
pub fn lossy(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                out.push_str(valid);
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push('\u{fffd}');
                rest = &after[1..];
            }
        }
    }
    out
}

/// Go's `quoteChar`: the byte as a Latin-1 rune in single quotes, `strconv.Quote`d.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        _ => {
            let q = quote(&char::from(c).to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// What one byte did to the scan.
enum Step {
    Continue,
    EndBefore,
    EndWith,
    Error(&'static str),
}

/// Where the scanner is (Go's `scanner.step` functions).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    Zero,
    Digits,
    Dot,
    DotDigits,
    E,
    ESign,
    EDigits,
    /// Inside `true`, `false` or `null`: the rest of the literal, and its name.
    Literal(&'static [u8], &'static str),
}

/// What the value being read belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Default)]
struct Scanner {
    state: State,
    stack: Vec<Parse>,
}

impl Scanner {
    fn step(&mut self, c: u8) -> Step {
        use State::*;
        match self.state {
            BeginValueOrEmpty if is_space(c) => Step::Continue,
            BeginValueOrEmpty if c == b']' => self.end_value(c),
            BeginValueOrEmpty | BeginValue => self.begin_value(c),
            BeginStringOrEmpty if is_space(c) => Step::Continue,
            BeginStringOrEmpty if c == b'}' => {
                if let Some(top) = self.stack.last_mut() {
                    *top = Parse::ObjectValue;
                }
                self.end_value(c)
            }
            BeginStringOrEmpty | BeginString => {
                if is_space(c) {
                    Step::Continue
                } else if c == b'"' {
                    self.state = InString;
                    Step::Continue
                } else {
                    Step::Error("looking for beginning of object key string")
                }
            }
            EndValue => self.end_value(c),
            InString => {
                match c {
                    b'"' => self.state = EndValue,
                    b'\\' => self.state = InStringEsc,
                    c if c < 0x20 => return Step::Error("in string literal"),
                    _ => {}
                }
                Step::Continue
            }
            InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.state = InString;
                    Step::Continue
                }
                b'u' => {
                    self.state = InStringEscU(0);
                    Step::Continue
                }
                _ => Step::Error("in string escape code"),
            },
            InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return Step::Error("in \\u hexadecimal character escape");
                }
                self.state = if n == 3 {
                    InString
                } else {
                    InStringEscU(n + 1)
                };
                Step::Continue
            }
            Neg => match c {
                b'0' => {
                    self.state = Zero;
                    Step::Continue
                }
                b'1'..=b'9' => {
                    self.state = Digits;
                    Step::Continue
                }
                _ => Step::Error("in numeric literal"),
            },
            Digits if c.is_ascii_digit() => Step::Continue,
            Zero | Digits => match c {
                b'.' => {
                    self.state = Dot;
                    Step::Continue
                }
                b'e' | b'E' => {
                    self.state = E;
                    Step::Continue
                }
                _ => self.end_value(c),
            },
            Dot if c.is_ascii_digit() => {
                self.state = DotDigits;
                Step::Continue
            }
            Dot => Step::Error("after decimal point in numeric literal"),
            DotDigits if c.is_ascii_digit() => Step::Continue,
            DotDigits if c == b'e' || c == b'E' => {
                self.state = E;
                Step::Continue
            }
            DotDigits => self.end_value(c),
            E if c == b'+' || c == b'-' => {
                self.state = ESign;
                Step::Continue
            }
            E | ESign if c.is_ascii_digit() => {
                self.state = EDigits;
                Step::Continue
            }
            E | ESign => Step::Error("in exponent of numeric literal"),
            EDigits if c.is_ascii_digit() => Step::Continue,
            EDigits => self.end_value(c),
            Literal(rest, name) => {
                if c != rest[0] {
                    return Step::Error(literal_error(name, rest[0]));
                }
                self.state = if rest.len() == 1 {
                    EndValue
                } else {
                    Literal(&rest[1..], name)
                };
                Step::Continue
            }
        }
    }

    fn begin_value(&mut self, c: u8) -> Step {
        use State::*;
        self.state = match c {
            b' ' | b'\t' | b'\r' | b'\n' => return Step::Continue,
            b'{' => {
                if let Some(e) = self.push(Parse::ObjectKey) {
                    return e;
                }
                BeginStringOrEmpty
            }
            b'[' => {
                if let Some(e) = self.push(Parse::ArrayValue) {
                    return e;
                }
                BeginValueOrEmpty
            }
            b'"' => InString,
            b'-' => Neg,
            b'0' => Zero,
            b'1'..=b'9' => Digits,
            b't' => Literal(b"rue", "true"),
            b'f' => Literal(b"alse", "false"),
            b'n' => Literal(b"ull", "null"),
            _ => return Step::Error("looking for beginning of value"),
        };
        Step::Continue
    }

    fn push(&mut self, p: Parse) -> Option<Step> {
        self.stack.push(p);
        (self.stack.len() > MAX_NESTING_DEPTH).then_some(Step::Error("exceeded max depth"))
    }

    /// Go's `stateEndValue`, with `c` the byte after a value.
    fn end_value(&mut self, c: u8) -> Step {
        let Some(&top) = self.stack.last() else {
            // The top-level value is complete: the decoder stops before `c`.
            return Step::EndBefore;
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Step::Continue;
        }
        match top {
            Parse::ObjectKey if c == b':' => {
                *self.stack.last_mut().unwrap_or(&mut Parse::ObjectValue) = Parse::ObjectValue;
                self.state = State::BeginValue;
                Step::Continue
            }
            Parse::ObjectKey => Step::Error("after object key"),
            Parse::ObjectValue if c == b',' => {
                *self.stack.last_mut().unwrap_or(&mut Parse::ObjectKey) = Parse::ObjectKey;
                self.state = State::BeginString;
                Step::Continue
            }
            Parse::ObjectValue if c == b'}' => self.pop(),
            Parse::ObjectValue => Step::Error("after object key:value pair"),
            Parse::ArrayValue if c == b',' => {
                self.state = State::BeginValue;
                Step::Continue
            }
            Parse::ArrayValue if c == b']' => self.pop(),
            Parse::ArrayValue => Step::Error("after array element"),
        }
    }

    /// A closing bracket: the value it closes ends with it.
    fn pop(&mut self) -> Step {
        self.stack.pop();
        if self.stack.is_empty() {
            Step::EndWith
        } else {
            self.state = State::EndValue;
            Step::Continue
        }
    }
}

/// Go's `in literal true (expecting 'r')`.
fn literal_error(name: &'static str, expected: u8) -> &'static str {
    match (name, expected) {
        ("true", b'r') => "in literal true (expecting 'r')",
        ("true", b'u') => "in literal true (expecting 'u')",
        ("true", _) => "in literal true (expecting 'e')",
        ("false", b'a') => "in literal false (expecting 'a')",
        ("false", b'l') => "in literal false (expecting 'l')",
        ("false", b's') => "in literal false (expecting 's')",
        ("false", _) => "in literal false (expecting 'e')",
        (_, b'u') => "in literal null (expecting 'u')",
        _ => "in literal null (expecting 'l')",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_value_counts() {
        assert_eq!(first_value(b" {\"a\":1}x"), Ok(&b"{\"a\":1}"[..]));
        assert_eq!(first_value(b"[1,[2]] trailing"), Ok(&b"[1,[2]]"[..]));
        assert_eq!(first_value(b"123x"), Ok(&b"123"[..]));
        assert_eq!(first_value(b"\"s\"{"), Ok(&b"\"s\""[..]));
        assert_eq!(first_value(b"-1.5e+3"), Ok(&b"-1.5e+3"[..]));
        assert_eq!(first_value(b"true"), Ok(&b"true"[..]));
    }

    #[test]
    fn errors_are_gos() {
        let err = |b: &[u8]| first_value(b).unwrap_err();
        assert_eq!(err(b""), "EOF");
        assert_eq!(err(b" \n"), "EOF");
        assert_eq!(err(b"{\"a\":"), "unexpected EOF");
        assert_eq!(err(b"tru"), "unexpected EOF");
        assert_eq!(
            err(b"\xef\xbb\xbf{}"),
            "invalid character '\u{ef}' looking for beginning of value"
        );
        assert_eq!(err(b"{\"a\" 1}"), "invalid character '1' after object key");
        assert_eq!(
            err(b"{\"a\":1 \"b\"}"),
            "invalid character '\"' after object key:value pair"
        );
        assert_eq!(
            err(b"{1:2}"),
            "invalid character '1' looking for beginning of object key string"
        );
        assert_eq!(err(b"[1 2]"), "invalid character '2' after array element");
        assert_eq!(
            err(b"\"a\tb\""),
            "invalid character '\\t' in string literal"
        );
        assert_eq!(
            err(b"\"\\x\""),
            "invalid character 'x' in string escape code"
        );
        assert_eq!(
            err(b"nul!"),
            "invalid character '!' in literal null (expecting 'l')"
        );
        // Go's decoder stops at the end of the first value, before any complaint about what
        // follows it.
        assert_eq!(first_value(b"01"), Ok(&b"0"[..]));
        assert_eq!(
            err(b"{'a':1}"),
            r"invalid character '\'' looking for beginning of object key string"
        );
        let deep = "[".repeat(MAX_NESTING_DEPTH + 1);
        assert_eq!(
            err(deep.as_bytes()),
            "invalid character '[' exceeded max depth"
        );
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_NESTING_DEPTH),
            "]".repeat(MAX_NESTING_DEPTH)
        );
        assert!(first_value(ok.as_bytes()).is_ok());
    }

    #[test]
    fn lossy_replaces_each_bad_byte() {
        assert_eq!(lossy(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(lossy(b"\xe2\x82"), "\u{fffd}\u{fffd}");
        assert_eq!(lossy("é€".as_bytes()), "é€");
    }
}
