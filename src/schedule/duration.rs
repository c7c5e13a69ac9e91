//! Go `time.Duration` strings: a port of Go's `time.ParseDuration` and `Duration.String`.
//!
//! Dapr parses `dueTime`, `ttl` and `@every` with Go's parser, so this module accepts exactly what
//! Go accepts and rejects exactly what Go rejects, with Go's error texts. The grammar is
//! `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` with units `ns`, `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`,
//! `s`, `m` and `h`; a lone `0` (optionally signed) is the only unit-less value allowed.
//! Durations are signed 64-bit nanosecond counts, as in Go.
//!
//! Ported from `src/time/format.go` (`ParseDuration`, `leadingInt`, `leadingFraction`,
//! `unitMap`, `quote`) and `src/time/time.go` (`Duration.String`, `fmtFrac`).

/// Why a duration string was rejected; `Display` is Go's exact error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Malformed input or a value outside the `i64` nanosecond range:
    /// `time: invalid duration "x"`.
    #[error("time: invalid duration {}", quote(.0))]
    Invalid(String),
    /// A number without a unit, e.g. `5`: `time: missing unit in duration "5"`.
    #[error("time: missing unit in duration {}", quote(.0))]
    MissingUnit(String),
    /// A unit Go does not know, e.g. `1d`: `time: unknown unit "d" in duration "1d"`.
    #[error("time: unknown unit {} in duration {}", quote(.unit), quote(.input))]
    UnknownUnit {
        /// The offending unit text.
        unit: String,
        /// The whole input.
        input: String,
    },
}

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// `1 << 63`, Go's overflow bound (the magnitude of `i64::MIN`).
const BOUND: u64 = 1 << 63;

/// Go's `time.ParseDuration`: parses `s` and returns signed nanoseconds.
///
/// Fractions are computed with `f64` exactly as Go does (so `0.0000000001s` truncates to 0 and
/// `0.3333333333333333333h` is 20m), and overflow past the `i64` range is an error, except for
/// Go's own quirk that two components of exactly 2^63 ns wrap the running sum to zero.
pub fn parse(s: &str) -> Result<i64, Error> {
    let orig = s;
    let invalid = || Error::Invalid(orig.to_owned());
    let mut s = s.as_bytes();
    let mut d: u64 = 0;
    let mut neg = false;

    // Consume [-+]?
    if let Some((&c, rest)) = s.split_first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = rest;
    }
    // Special case: if all that is left is "0", this is zero.
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    while let Some(&first) = s.first() {
        // The next character must be [0-9.]
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        // Consume [0-9]*
        let pl = s.len();
        let (v, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = pl != s.len(); // whether we consumed anything before a period

        // Consume (\.[0-9]*)?
        let mut post = false;
        let mut f: u64 = 0;
        let mut scale: f64 = 1.0;
        if let Some((&b'.', rest)) = s.split_first() {
            let pl = rest.len();
            let (ff, fscale, rest) = leading_fraction(rest);
            f = ff;
            scale = fscale;
            s = rest;
            post = pl != s.len();
        }
        if !pre && !post {
            // no digits (e.g. ".s" or "-.s")
            return Err(invalid());
        }

        // Consume unit.
        let i = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if i == 0 {
            return Err(Error::MissingUnit(orig.to_owned()));
        }
        let (u, rest) = s.split_at_checked(i).ok_or_else(invalid)?;
        s = rest;
        let unit = match unit_nanos(u) {
            Some(unit) => unit,
            None => {
                return Err(Error::UnknownUnit {
                    // `u` ends before an ASCII byte or at the end, so it is valid UTF-8.
                    unit: String::from_utf8_lossy(u).into_owned(),
                    input: orig.to_owned(),
                });
            }
        };
        if v > BOUND / unit {
            // overflow
            return Err(invalid());
        }
        let mut v = v * unit;
        if f > 0 {
            // f64 is needed to be nanosecond accurate for fractions of hours. The fraction term
            // is below `unit` (at most 3.6e12), so the saturating add never actually saturates.
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let frac = (f as f64 * (unit as f64 / scale)) as u64;
            v = v.saturating_add(frac);
            if v > BOUND {
                // overflow
                return Err(invalid());
            }
        }
        // Go adds in uint64 and so wraps when both addends are exactly 2^63; keep that quirk.
        d = d.wrapping_add(v);
        if d > BOUND {
            return Err(invalid());
        }
    }
    if neg {
        // d <= 2^63 here, so the negation always fits (2^63 becomes i64::MIN).
        return Ok(0i64.wrapping_sub_unsigned(d));
    }
    i64::try_from(d).map_err(|_| invalid())
}

/// Go's `unitMap`: nanoseconds per unit, or `None` for an unknown unit.
fn unit_nanos(u: &[u8]) -> Option<u64> {
    Some(match u {
        b"ns" => NANOSECOND,
        b"us" => MICROSECOND,
        b"\xC2\xB5s" => MICROSECOND, // U+00B5 = micro symbol
        b"\xCE\xBCs" => MICROSECOND, // U+03BC = Greek letter mu
        b"ms" => MILLISECOND,
        b"s" => SECOND,
        b"m" => MINUTE,
        b"h" => HOUR,
        _ => return None,
    })
}

/// Go's `leadingInt`: consumes the leading `[0-9]*`; `None` on overflow past 2^63.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let mut x: u64 = 0;
    let mut i = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            break;
        }
        if x > BOUND / 10 {
            return None;
        }
        // x <= (2^63)/10, so x*10 + 9 < 2^64: no wrap.
        x = x * 10 + u64::from(c - b'0');
        if x > BOUND {
            return None;
        }
        i += 1;
    }
    Some((x, s.get(i..).unwrap_or_default()))
}

/// Go's `leadingFraction`: consumes the leading `[0-9]*` of a fraction. On overflow it stops
/// accumulating precision but keeps consuming digits; returns `(digits, 10^n, rest)`.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let mut x: u64 = 0;
    let mut scale: f64 = 1.0;
    let mut overflow = false;
    let mut i = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            break;
        }
        i += 1;
        if overflow {
            continue;
        }
        if x > (BOUND - 1) / 10 {
            // It's possible for overflow to give a positive number, so take care.
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > BOUND {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, s.get(i..).unwrap_or_default())
}

/// Go's `Duration.String()`: e.g. 5400 s → `1h30m0s`, 0 → `0s`, 1500 ns → `1.5µs`.
///
/// Leading zero units are omitted; durations under one second use `ms`, `µs` (U+00B5) or `ns`
/// so that the leading digit is non-zero. Every `i64`, including `i64::MIN`, parses back to
/// itself with [`parse`].
pub fn format(nanos: i64) -> String {
    let u = nanos.unsigned_abs();
    let sign = if nanos < 0 { "-" } else { "" };
    if u == 0 {
        return "0s".to_owned();
    }
    if u < SECOND {
        // Special case: if duration is smaller than a second, use smaller units, like 1.2ms.
        let (prec, unit) = if u < MICROSECOND {
            (0, "ns")
        } else if u < MILLISECOND {
            (3, "µs")
        } else {
            (6, "ms")
        };
        let (int, frac) = split_frac(u, prec);
        return format!("{sign}{int}{frac}{unit}");
    }
    let (secs, frac) = split_frac(u, 9);
    let mut out = String::with_capacity(32);
    out.push_str(sign);
    let minutes = secs / 60;
    if minutes > 0 {
        let hours = minutes / 60;
        if hours > 0 {
            out.push_str(&format!("{hours}h"));
        }
        out.push_str(&format!("{}m", minutes % 60));
    }
    out.push_str(&format!("{}{frac}s", secs % 60));
    out
}

/// Go's `fmtFrac`: splits `v` into `v / 10^prec` and the fraction text (`.5`, trailing zeros
/// dropped, empty when the fraction is zero).
fn split_frac(v: u64, prec: u32) -> (u64, String) {
    let pow = 10u64.pow(prec);
    let (int, frac) = (v / pow, v % pow);
    if frac == 0 {
        return (int, String::new());
    }
    let digits = format!("{frac:0width$}", width = prec as usize);
    (int, format!(".{}", digits.trim_end_matches('0')))
}

/// Go's `time.quote`: double-quotes `s`, escaping `"` and `\`, and writing every byte of a
/// non-ASCII or control character as `\xNN`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if !c.is_ascii() || c < ' ' {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: i64 = 1_000_000_000;
    const MS: i64 = 1_000_000;
    const US: i64 = 1_000;
    const MIN: i64 = 60 * S;
    const H: i64 = 60 * MIN;

    #[test]
    fn rust_stack_table() {
        let ok: &[(&str, i64)] = &[
            ("2h30m", 9000 * S),
            ("1.5h", 5400 * S),
            ("300ms", 300 * MS),
            ("1h2m3.5s", 3723 * S + 500 * MS),
            ("10s", 10 * S),
            ("-1h", -3600 * S),
            ("0", 0),
            ("+5s", 5 * S),
            (".5s", 500 * MS),
            ("1\u{00B5}s", US),
            ("1\u{03BC}s", US),
            ("2562047h", 9_223_369_200 * S),
            ("0.0000000001s", 0),
        ];
        for &(input, want) in ok {
            assert_eq!(parse(input), Ok(want), "{input}");
        }
        for input in [
            "1h 30m",
            "1d",
            "5",
            "2562047h47m16.854775808s",
            "1H",
            "1e3s",
            "",
        ] {
            assert!(parse(input).is_err(), "{input} should fail");
        }
    }

    #[test]
    fn error_texts() {
        let cases: &[(&str, &str)] = &[
            ("", r#"time: invalid duration """#),
            ("x", r#"time: invalid duration "x""#),
            ("5", r#"time: missing unit in duration "5""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("1h 30m", r#"time: unknown unit "h " in duration "1h 30m""#),
            ("1H", r#"time: unknown unit "H" in duration "1H""#),
            ("1e3s", r#"time: unknown unit "e" in duration "1e3s""#),
            (
                "2562047h47m16.854775808s",
                r#"time: invalid duration "2562047h47m16.854775808s""#,
            ),
            (
                "1\u{00B5}",
                r#"time: unknown unit "\xc2\xb5" in duration "1\xc2\xb5""#,
            ),
            ("\u{FFFD}", r#"time: invalid duration "\xef\xbf\xbd""#),
            ("1\"s", r#"time: unknown unit "\"s" in duration "1\"s""#),
            ("1\\s", r#"time: unknown unit "\\s" in duration "1\\s""#),
            ("1\ns", r#"time: unknown unit "\x0as" in duration "1\x0as""#),
        ];
        for &(input, want) in cases {
            assert_eq!(parse(input).unwrap_err().to_string(), want, "{input:?}");
        }
    }

    /// Go's `parseDurationTests` (src/time/time_test.go).
    #[test]
    fn go_parse_duration_tests() {
        let cases: &[(&str, i64)] = &[
            // simple
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            // sign
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            // decimal
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            // different units
            ("10ns", 10),
            ("11us", 11 * US),
            ("12µs", 12 * US),
            ("12μs", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * MIN),
            ("16h", 16 * H),
            // composite durations
            ("3h30m", 3 * H + 30 * MIN),
            ("10.5s4m", 4 * MIN + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * MIN + 3 * S + 400 * MS)),
            ("1h2m3s4ms5us6ns", H + 2 * MIN + 3 * S + 4 * MS + 5 * US + 6),
            ("39h9m14.425s", 39 * H + 9 * MIN + 14 * S + 425 * MS),
            // large value
            ("52763797000ns", 52_763_797_000),
            // more than 9 digits after decimal point, see https://golang.org/issue/6617
            ("0.3333333333333333333h", 20 * MIN),
            // 9007199254740993 = 1<<53+1 cannot be stored precisely in a float64
            ("9007199254740993ns", (1 << 53) + 1),
            // largest duration that can be represented by int64 in nanoseconds
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            // largest negative round trip value, see https://golang.org/issue/48629
            ("-2562047h47m16.854775808s", i64::MIN),
            // huge string; issue 15011.
            ("0.100000000000000000000h", 6 * MIN),
            // This value tests the first overflow check in leadingFraction.
            ("0.830103483285477580700h", 49 * MIN + 48 * S + 372_539_827),
        ];
        for &(input, want) in cases {
            assert_eq!(parse(input), Ok(want), "{input}");
        }
    }

    /// Go's `parseDurationErrorTests`: the error must contain the quoted input.
    #[test]
    fn go_parse_duration_error_tests() {
        let cases: &[(&str, &str)] = &[
            ("", r#""""#),
            ("3", r#""3""#),
            ("-", r#""-""#),
            ("s", r#""s""#),
            (".", r#"".""#),
            ("-.", r#""-.""#),
            (".s", r#"".s""#),
            ("+.s", r#""+.s""#),
            ("1d", r#""1d""#),
            ("\u{FFFD}", r#""\xef\xbf\xbd""#),
            (
                "\u{FFFD} hello \u{FFFD} world",
                r#""\xef\xbf\xbd hello \xef\xbf\xbd world""#,
            ),
            // overflow
            ("9223372036854775810ns", r#""9223372036854775810ns""#),
            ("9223372036854775808ns", r#""9223372036854775808ns""#),
            ("-9223372036854775809ns", r#""-9223372036854775809ns""#),
            ("9223372036854776us", r#""9223372036854776us""#),
            ("3000000h", r#""3000000h""#),
            ("9223372036854775.808us", r#""9223372036854775.808us""#),
            (
                "9223372036854ms775us808ns",
                r#""9223372036854ms775us808ns""#,
            ),
        ];
        for &(input, want) in cases {
            let err = parse(input).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: {err}");
        }
    }

    /// Go's uint64 accumulator wraps when two components are exactly 2^63 each.
    #[test]
    fn go_wrap_quirk() {
        assert_eq!(parse("9223372036854775808ns9223372036854775808ns"), Ok(0));
        assert_eq!(
            parse("-9223372036854775808ns9223372036854775808ns1s"),
            Ok(-S)
        );
        assert!(parse("9223372036854775808ns1ns").is_err());
    }

    /// Go's `durationTests` (src/time/time_test.go), plus the brief's examples.
    #[test]
    fn go_duration_string_tests() {
        let cases: &[(&str, i64)] = &[
            ("0s", 0),
            ("1ns", 1),
            ("1.1µs", 1100),
            ("2.2ms", 2200 * US),
            ("3.3s", 3300 * MS),
            ("4m5s", 4 * MIN + 5 * S),
            ("4m5.001s", 4 * MIN + 5001 * MS),
            ("5h6m7.001s", 5 * H + 6 * MIN + 7001 * MS),
            ("8m0.000000001s", 8 * MIN + 1),
            ("2562047h47m16.854775807s", i64::MAX),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("1h30m0s", 5400 * S),
            ("1.5µs", 1500),
            ("1h0m0s", H),
            ("1h0m5s", H + 5 * S),
        ];
        for &(want, d) in cases {
            assert_eq!(format(d), want, "{d}");
            if d > 0 {
                assert_eq!(format(-d), format!("-{want}"), "{}", -d);
            }
        }
    }

    #[test]
    fn round_trip_extremes() {
        for d in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX] {
            assert_eq!(parse(&format(d)), Ok(d), "{d}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_grammar_like(s in "[-+]?([0-9.]{0,25}(ns|us|µs|μs|ms|s|m|h|d|H|x)?){0,4}") {
            let _ = parse(&s);
        }

        #[test]
        fn format_round_trips(n in any::<i64>()) {
            prop_assert_eq!(parse(&format(n)), Ok(n));
        }
    }
}
