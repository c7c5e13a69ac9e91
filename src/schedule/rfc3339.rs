//! Go's `time.Parse(time.RFC3339, s)`, accepting exactly what Go accepts.
//!
//! Go's `Parse` first tries a strict fast path (`parseRFC3339`) and, when that fails, falls back
//! to its general layout parser with the layout `2006-01-02T15:04:05Z07:00`. The fast path only
//! accepts a subset of what the general parser accepts (with the same result), so Go's accepted
//! set *is* the general parser's, and that is what this module ports, element by element:
//!
//! - `2006`: exactly four ASCII digits (years 0000–9999);
//! - `-01-02`: two-digit month 01–12 and two-digit day (validated against the month at the end,
//!   so `02-30` fails, `02-29` only in leap years);
//! - `T`: exactly an upper-case `T` (no space, no `t`);
//! - `15`: hour of **one or two** digits, below 24 (Go's lax `stdHour`, go.dev/issue/54580);
//! - `:04:05`: two-digit minute and second, each below 60 (no leap second);
//! - an optional fraction not in the layout: `.` **or `,`** followed by digits, truncated to
//!   nanoseconds;
//! - `Z07:00`: upper-case `Z`, or `±hh:mm` with offset hour **≤ 24** and minute **≤ 60** (Go's
//!   general parser uses `>` for these range checks);
//! - nothing after that.
//!
//! Error texts are Go's `ParseError` texts.

use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, Utc};

use super::duration::quote;

/// Go's `time.RFC3339` layout, as it appears in Go's error texts.
pub const LAYOUT: &str = "2006-01-02T15:04:05Z07:00";

/// Why a timestamp was rejected; `Display` is Go's `*time.ParseError` text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A layout element did not match: `parsing time "x" as "2006-01-02T15:04:05Z07:00":
    /// cannot parse "x" as "2006"`.
    #[error(
        "parsing time {} as {}: cannot parse {} as {}",
        quote(.value),
        quote(LAYOUT),
        quote(.value_elem),
        quote(.layout_elem)
    )]
    CannotParse {
        /// The whole input.
        value: String,
        /// The rest of the input where the element was expected.
        value_elem: String,
        /// The layout element, e.g. `2006`, `T` or `Z07:00`.
        layout_elem: &'static str,
    },
    /// A field is out of range: `parsing time "x": second out of range`.
    #[error("parsing time {}: {what} out of range", quote(.value))]
    OutOfRange {
        /// The whole input.
        value: String,
        /// `month`, `day`, `hour`, `minute`, `second`, `time zone offset hour`, …
        what: &'static str,
    },
    /// Input left over after the offset: `parsing time "x": extra text: "junk"`.
    #[error("parsing time {}: extra text: {}", quote(.value), quote(.extra))]
    ExtraText {
        /// The whole input.
        value: String,
        /// What was left over.
        extra: String,
    },
}

/// Go's `time.Parse(time.RFC3339, s)`: the instant, in UTC.
pub fn parse(s: &str) -> Result<DateTime<Utc>, Error> {
    let cannot = |value_elem: &[u8], layout_elem: &'static str| Error::CannotParse {
        value: s.to_owned(),
        // Every split point is next to an ASCII byte, so this is lossless.
        value_elem: String::from_utf8_lossy(value_elem).into_owned(),
        layout_elem,
    };
    let range = |what: &'static str| Error::OutOfRange {
        value: s.to_owned(),
        what,
    };
    let mut rest = s.as_bytes();

    // "2006": stdLongYear, four bytes, all digits (Go's atoi with a leading digit).
    let hold = rest;
    let year = match (rest.get(..4), rest.get(4..)) {
        (Some(p), Some(r)) if p.iter().all(u8::is_ascii_digit) => {
            rest = r;
            p.iter()
                .fold(0i32, |acc, &c| acc * 10 + i32::from(c - b'0'))
        }
        _ => return Err(cannot(hold, "2006")),
    };

    rest = skip(rest, b'-').ok_or_else(|| cannot(rest, "-"))?;

    // "01": stdZeroMonth.
    let hold = rest;
    let (month, r) = getnum(rest, true).ok_or_else(|| cannot(hold, "01"))?;
    rest = r;
    if month == 0 || month > 12 {
        return Err(range("month"));
    }

    rest = skip(rest, b'-').ok_or_else(|| cannot(rest, "-"))?;

    // "02": stdZeroDay; validated against the month once everything is parsed.
    let hold = rest;
    let (day, r) = getnum(rest, true).ok_or_else(|| cannot(hold, "02"))?;
    rest = r;

    rest = skip(rest, b'T').ok_or_else(|| cannot(rest, "T"))?;

    // "15": stdHour, one or two digits.
    let hold = rest;
    let (hour, r) = getnum(rest, false).ok_or_else(|| cannot(hold, "15"))?;
    rest = r;
    if hour >= 24 {
        return Err(range("hour"));
    }

    rest = skip(rest, b':').ok_or_else(|| cannot(rest, ":"))?;

    // "04": stdZeroMinute.
    let hold = rest;
    let (minute, r) = getnum(rest, true).ok_or_else(|| cannot(hold, "04"))?;
    rest = r;
    if minute >= 60 {
        return Err(range("minute"));
    }

    rest = skip(rest, b':').ok_or_else(|| cannot(rest, ":"))?;

    // "05": stdZeroSecond, then a fractional second the layout does not mention.
    let hold = rest;
    let (second, r) = getnum(rest, true).ok_or_else(|| cannot(hold, "05"))?;
    rest = r;
    if second >= 60 {
        return Err(range("second"));
    }
    let mut nanos = 0u32;
    if let [sep, d, ..] = rest
        && (*sep == b'.' || *sep == b',')
        && d.is_ascii_digit()
    {
        let n = 1 + rest
            .iter()
            .skip(1)
            .take_while(|c| c.is_ascii_digit())
            .count();
        let (frac, r) = rest.split_at_checked(n).ok_or_else(|| cannot(hold, "05"))?;
        nanos = parse_nanoseconds(frac);
        rest = r;
    }

    // "Z07:00": stdISO8601ColonTZ.
    let hold = rest;
    let offset_secs: i64 = if let Some((b'Z', r)) = rest.split_first() {
        rest = r;
        0
    } else {
        let &[sign, h1, h2, colon, m1, m2, ref r @ ..] = rest else {
            return Err(cannot(hold, "Z07:00"));
        };
        if colon != b':' {
            return Err(cannot(hold, "Z07:00"));
        }
        rest = r;
        // Go parses the hour, then the minute only if the hour parsed; a failed part reads 0.
        let hr = getnum(&[h1, h2], true).map(|(v, _)| v);
        let mm = hr.and_then(|_| getnum(&[m1, m2], true).map(|(v, _)| v));
        let (hr_v, mm_v) = (hr.unwrap_or(0), mm.unwrap_or(0));
        // The range tests use > rather than >=, as in Go.
        let mut range_err = None;
        if hr_v > 24 {
            range_err = Some("time zone offset hour");
        }
        if mm_v > 60 {
            range_err = Some("time zone offset minute");
        }
        if let Some(what) = range_err {
            return Err(range(what));
        }
        if hr.is_none() || mm.is_none() {
            return Err(cannot(hold, "Z07:00"));
        }
        let magnitude = i64::from((hr_v * 60 + mm_v) * 60);
        match sign {
            b'+' => magnitude,
            b'-' => -magnitude,
            _ => return Err(cannot(hold, "Z07:00")),
        }
    };

    if !rest.is_empty() {
        return Err(Error::ExtraText {
            value: s.to_owned(),
            extra: String::from_utf8_lossy(rest).into_owned(),
        });
    }

    // Validate the day of the month (Go: "day out of range").
    let date = NaiveDate::from_ymd_opt(year, month, day).ok_or_else(|| range("day"))?;
    let time =
        NaiveTime::from_hms_nano_opt(hour, minute, second, nanos).ok_or_else(|| range("second"))?;
    date.and_time(time)
        .and_utc()
        .checked_sub_signed(TimeDelta::seconds(offset_secs))
        .ok_or_else(|| range("time"))
}

/// Go's `skip` for a one-byte layout prefix: the rest after `c`, or `None`.
fn skip(s: &[u8], c: u8) -> Option<&[u8]> {
    match s.split_first() {
        Some((&first, rest)) if first == c => Some(rest),
        _ => None,
    }
}

/// Go's `getnum`: one or two leading digits (`fixed` forces two).
fn getnum(s: &[u8], fixed: bool) -> Option<(u32, &[u8])> {
    let digit = |i: usize| {
        s.get(i)
            .filter(|c| c.is_ascii_digit())
            .map(|c| u32::from(c - b'0'))
    };
    let d0 = digit(0)?;
    match digit(1) {
        Some(d1) => Some((d0 * 10 + d1, s.get(2..).unwrap_or_default())),
        None if fixed => None,
        None => Some((d0, s.get(1..).unwrap_or_default())),
    }
}

/// Go's `parseNanoseconds` for `[.,][0-9]+`: at most nine digits count, the rest are dropped.
fn parse_nanoseconds(frac: &[u8]) -> u32 {
    let digits = frac.get(1..).unwrap_or_default();
    let mut ns = 0u32;
    for i in 0..9 {
        ns = ns * 10 + digits.get(i).map_or(0, |c| u32::from(c - b'0'));
    }
    ns
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, SecondsFormat, TimeZone};
    use proptest::prelude::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, ns: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .expect("valid test date")
            + TimeDelta::nanoseconds(i64::from(ns))
    }

    fn err(s: &str) -> String {
        parse(s).expect_err(s).to_string()
    }

    /// The rust-stack.md §2.3 RFC 3339 table.
    #[test]
    fn rust_stack_table() {
        assert_eq!(
            parse("2026-01-01T00:00:00Z"),
            Ok(utc(2026, 1, 1, 0, 0, 0, 0))
        );
        assert_eq!(
            parse("2026-01-01T00:00:00.123456789+05:30"),
            Ok(utc(2025, 12, 31, 18, 30, 0, 123_456_789))
        );
        assert_eq!(
            err("2026-01-01 00:00:00Z"),
            r#"parsing time "2026-01-01 00:00:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse " 00:00:00Z" as "T""#
        );
        assert_eq!(
            err("2026-01-01t00:00:00z"),
            r#"parsing time "2026-01-01t00:00:00z" as "2006-01-02T15:04:05Z07:00": cannot parse "t00:00:00z" as "T""#
        );
        assert_eq!(
            err("2026-01-01T00:00:60Z"),
            r#"parsing time "2026-01-01T00:00:60Z": second out of range"#
        );
        assert_eq!(
            err("2026-01-01T00:00:00"),
            r#"parsing time "2026-01-01T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00""#
        );
    }

    #[test]
    fn go_error_texts() {
        let cases: &[(&str, &str)] = &[
            (
                "x",
                r#"parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006""#,
            ),
            (
                "",
                r#"parsing time "" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006""#,
            ),
            (
                "2026-01-01T00:00:00z",
                r#"parsing time "2026-01-01T00:00:00z" as "2006-01-02T15:04:05Z07:00": cannot parse "z" as "Z07:00""#,
            ),
            (
                "2026-13-01T00:00:00Z",
                r#"parsing time "2026-13-01T00:00:00Z": month out of range"#,
            ),
            (
                "2026-02-30T00:00:00Z",
                r#"parsing time "2026-02-30T00:00:00Z": day out of range"#,
            ),
            (
                "2026-01-01T24:00:00Z",
                r#"parsing time "2026-01-01T24:00:00Z": hour out of range"#,
            ),
            (
                "2026-01-01T00:60:00Z",
                r#"parsing time "2026-01-01T00:60:00Z": minute out of range"#,
            ),
            (
                "2026-01-01T00:00:00+25:00",
                r#"parsing time "2026-01-01T00:00:00+25:00": time zone offset hour out of range"#,
            ),
            (
                "2026-01-01T00:00:00+00:61",
                r#"parsing time "2026-01-01T00:00:00+00:61": time zone offset minute out of range"#,
            ),
            (
                "2026-01-01T00:00:00Zjunk",
                r#"parsing time "2026-01-01T00:00:00Zjunk": extra text: "junk""#,
            ),
            (
                "2026-1-01T00:00:00Z",
                r#"parsing time "2026-1-01T00:00:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse "1-01T00:00:00Z" as "01""#,
            ),
            (
                "2026-01-01T00:00:00é",
                r#"parsing time "2026-01-01T00:00:00\xc3\xa9" as "2006-01-02T15:04:05Z07:00": cannot parse "\xc3\xa9" as "Z07:00""#,
            ),
        ];
        for &(input, want) in cases {
            assert_eq!(err(input), want, "{input:?}");
        }
    }

    #[test]
    fn accepted_like_go() {
        let cases: &[(&str, DateTime<Utc>)] = &[
            ("2026-01-01T00:00:00-08:00", utc(2026, 1, 1, 8, 0, 0, 0)),
            ("2024-02-29T12:00:00Z", utc(2024, 2, 29, 12, 0, 0, 0)),
            ("0000-01-01T00:00:00Z", utc(0, 1, 1, 0, 0, 0, 0)),
            ("9999-12-31T23:59:59Z", utc(9999, 12, 31, 23, 59, 59, 0)),
            (
                "2026-01-01T00:00:00.5Z",
                utc(2026, 1, 1, 0, 0, 0, 500_000_000),
            ),
            // More than nine fraction digits: truncated.
            (
                "2026-01-01T00:00:00.1234567899Z",
                utc(2026, 1, 1, 0, 0, 0, 123_456_789),
            ),
            // Go quirks of the general parser (go.dev/issue/54580):
            // a comma as the fraction separator,
            (
                "2026-01-01T00:00:00,25Z",
                utc(2026, 1, 1, 0, 0, 0, 250_000_000),
            ),
            // a one-digit hour,
            ("2026-01-01T7:00:00Z", utc(2026, 1, 1, 7, 0, 0, 0)),
            // offset hour 24 and offset minute 60 (range checks use >).
            ("2026-01-02T00:00:00+24:00", utc(2026, 1, 1, 0, 0, 0, 0)),
            ("2026-01-01T00:00:00-23:60", utc(2026, 1, 2, 0, 0, 0, 0)),
            ("2026-01-01T00:00:00+00:00", utc(2026, 1, 1, 0, 0, 0, 0)),
            ("2026-01-01T00:00:00-00:00", utc(2026, 1, 1, 0, 0, 0, 0)),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input).as_ref(), Ok(want), "{input}");
        }
    }

    #[test]
    fn rejected_like_go() {
        for input in [
            "2025-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "10000-01-01T00:00:00Z",
            "-001-01-01T00:00:00Z",
            "+2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00.",
            "2026-01-01T00:00:00+0530",
            "2026-01-01T00:00:00+05:3",
            "2026-01-01T00:00:00+05:30:00",
            "2026-01-01T00:00:00 05:30",
            "2026-01-01T00:00:00+5:30",
            "2026-01-01T00:00:00+05-30",
            "2026-01-01T00:00:00UTC",
            "2026-01-01T00:00:00Z ",
            " 2026-01-01T00:00:00Z",
            "2026-01-01T001:00:00Z",
            "2026-01-01T:00:00Z",
            "2026-01-01T00:0:00Z",
            "2026-01-01T00:00:0Z",
            "2026-01-01",
            "2026-01-01T00:00Z",
            "２０２６-01-01T00:00:00Z",
        ] {
            assert!(parse(input).is_err(), "{input} should fail");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_near_grammar(
            s in "[0-9]{0,5}-?[0-9]{0,3}-?[0-9]{0,3}[Tt ]?[0-9]{0,3}:?[0-9]{0,3}:?[0-9]{0,3}([.,][0-9]{0,12})?(Z|z|[-+]?[0-9]{0,3}:?[0-9]{0,3})?.{0,2}"
        ) {
            let _ = parse(&s);
        }

        #[test]
        fn round_trips_chrono_rfc3339(
            secs in -62_167_219_200i64..253_402_300_799,
            nanos in 0u32..1_000_000_000,
            offset_min in -(23 * 60 + 59)..=(23 * 60 + 59),
        ) {
            let instant = DateTime::<Utc>::from_timestamp(secs, nanos).expect("in range");
            let tz = FixedOffset::east_opt(offset_min * 60).expect("valid offset");
            let text = instant.with_timezone(&tz).to_rfc3339_opts(SecondsFormat::AutoSi, true);
            // Only years 0000-9999 after applying the offset are four digits wide.
            let local_year = instant.with_timezone(&tz).format("%Y").to_string();
            prop_assume!(local_year.len() == 4 && !local_year.starts_with('-'));
            prop_assert_eq!(parse(&text), Ok(instant), "{}", text);
        }
    }
}
