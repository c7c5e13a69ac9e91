//! ISO-8601 durations the Dapr way: a port of `dapr/kit` `time.ParseISO8601Duration`, plus Go's
//! `Time.AddDate` calendar arithmetic to apply the result.
//!
//! The kit parser is lenient and idiosyncratic; this port keeps every quirk:
//! - an optional `R<n>/` prefix (`n` parsed with Go's `strconv.Atoi`, so `R-1/` and `R+4/` are
//!   accepted); `R4` or `R4/` alone is accepted with zero durations; repetitions are -1 when the
//!   prefix is absent;
//! - then a mandatory `P`; the whole input must be at least 2 bytes (`P` alone fails, `PT` is
//!   zero);
//! - integers only (`PT1.5S` fails), but each number goes through `strconv.Atoi`, so a sign
//!   *inside* is accepted (`PT-1H` is minus one hour) while a leading `-PT1H` fails;
//! - `Y`, `D`, `W` (7 days) before `T`; `H`, `S` after it; `M` is months before `T` and minutes
//!   after it; `D`/`W` and `H`/`M`(minutes)/`S` accumulate, `Y` and `M`(months) overwrite;
//! - unknown characters are skipped (they become part of the next number, so `PXY` fails),
//!   and trailing digits without a unit are ignored (`PT1H30` is one hour).
//!
//! Go's `int` is 64-bit; this port keeps Go's wrapping `int64` arithmetic for the H/M/S part,
//! but rejects (with kit's error text) years, months, days or repetitions outside `i32`.

use chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Utc};

/// The parts of an ISO-8601 duration as dapr/kit returns them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsoDuration {
    /// Years (`nY`), applied with Go's `AddDate`.
    pub years: i32,
    /// Months (`nM` before `T`), applied with Go's `AddDate`.
    pub months: i32,
    /// Days (`nD` plus 7 × `nW`), applied with Go's `AddDate`.
    pub days: i32,
    /// H/M/S part, in nanoseconds (Go's `time.Duration`).
    pub nanos: i64,
    /// -1 when no `Rn/` prefix.
    pub repetitions: i32,
}

/// Why an ISO-8601 duration was rejected; `Display` is kit's exact text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `unsupported ISO8601 duration format: <input>` (the input is not quoted, as in kit).
    #[error("unsupported ISO8601 duration format: {0}")]
    Unsupported(String),
}

const SECOND: i64 = 1_000_000_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;

/// dapr/kit `ParseISO8601Duration`: parses `[Rn/]P[nY][nM][nW][nD][T[nH][nM][nS]]` with kit's
/// lenient rules (see the module docs).
pub fn parse(s: &str) -> Result<IsoDuration, Error> {
    let err = || Error::Unsupported(s.to_owned());
    let from = s.as_bytes();
    let l = from.len();
    let at = |i: usize| from.get(i).copied();

    // Length must be at least 2 characters per specs.
    if l < 2 {
        return Err(err());
    }

    let mut years: i64 = 0;
    let mut months: i64 = 0;
    let mut days: i64 = 0;
    let mut duration: i64 = 0;
    // -1 signifies infinite repetition.
    let mut repetition: i64 = -1;

    let mut i = 0usize;
    // Check if the first character is "R", indicating we have repetitions.
    if at(0) == Some(b'R') {
        // Scan until the "/" character to get the repetitions.
        loop {
            i += 1;
            if i >= l || at(i) == Some(b'/') {
                break;
            }
        }
        if i < 2 {
            return Err(err());
        }
        repetition = atoi(from.get(1..i)).ok_or_else(err)?;
        i += 1;
        // If we're already at the end of the string after getting repetitions, return.
        if i >= l {
            return finish(s, years, months, days, duration, repetition);
        }
    }

    // First character must be a "P".
    if at(i) != Some(b'P') {
        return Err(err());
    }
    i += 1;

    let mut start = i;
    let mut is_parsing_time = false;
    while let Some(c) = at(i) {
        let number = || atoi(from.get(start..i)).ok_or_else(err);
        match c {
            b'T' => {
                if start != i {
                    return Err(err());
                }
                is_parsing_time = true;
                start = i + 1;
            }
            b'Y' => {
                if is_parsing_time || start == i {
                    return Err(err());
                }
                years = number()?;
                start = i + 1;
            }
            b'W' => {
                if is_parsing_time || start == i {
                    return Err(err());
                }
                days = days.wrapping_add(number()?.wrapping_mul(7));
                start = i + 1;
            }
            b'D' => {
                if is_parsing_time || start == i {
                    return Err(err());
                }
                days = days.wrapping_add(number()?);
                start = i + 1;
            }
            b'H' => {
                if !is_parsing_time || start == i {
                    return Err(err());
                }
                duration = duration.wrapping_add(number()?.wrapping_mul(HOUR));
                start = i + 1;
            }
            b'S' => {
                if !is_parsing_time || start == i {
                    return Err(err());
                }
                duration = duration.wrapping_add(number()?.wrapping_mul(SECOND));
                start = i + 1;
            }
            // "M" can be used for both months and minutes.
            b'M' => {
                if start == i {
                    return Err(err());
                }
                let tmp = number()?;
                if is_parsing_time {
                    duration = duration.wrapping_add(tmp.wrapping_mul(MINUTE));
                } else {
                    months = tmp;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }

    finish(s, years, months, days, duration, repetition)
}

/// Narrows kit's 64-bit results into [`IsoDuration`]; out-of-`i32` calendar parts are rejected.
fn finish(
    s: &str,
    years: i64,
    months: i64,
    days: i64,
    nanos: i64,
    repetitions: i64,
) -> Result<IsoDuration, Error> {
    let narrow = |v: i64| i32::try_from(v).map_err(|_| Error::Unsupported(s.to_owned()));
    Ok(IsoDuration {
        years: narrow(years)?,
        months: narrow(months)?,
        days: narrow(days)?,
        nanos,
        repetitions: narrow(repetitions)?,
    })
}

/// Go's `strconv.Atoi` on a 64-bit platform: optional sign, at least one ASCII digit, nothing
/// else, within `i64`. Rust's `i64::from_str` has exactly these rules.
fn atoi(s: Option<&[u8]>) -> Option<i64> {
    std::str::from_utf8(s?).ok()?.parse().ok()
}

impl IsoDuration {
    /// `t.AddDate(years, months, days).Add(nanos)` the Go way (see [`add_date`]); `None` when
    /// the result is outside chrono's range.
    pub fn add_to(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        add_date(t, self.years, self.months, self.days)?
            .checked_add_signed(TimeDelta::nanoseconds(self.nanos))
    }
}

/// Go's `Time.AddDate` in UTC: normalises (2026-01-31 + 1 month = 2026-03-03), does not clamp.
///
/// Like Go's `Date(y+years, m+months, d+days, …)`: months overflow into years, then the day
/// becomes an offset of `day - 1 + days` from the first of the resulting month. The time of day
/// is kept. `None` when the result is outside chrono's range.
pub fn add_date(t: DateTime<Utc>, years: i32, months: i32, days: i32) -> Option<DateTime<Utc>> {
    let month0 = i64::from(t.month0()) + i64::from(months);
    let year = i64::from(t.year()) + i64::from(years) + month0.div_euclid(12);
    let month = u32::try_from(month0.rem_euclid(12) + 1).ok()?;
    let first = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, 1)?;
    let offset = i64::from(t.day()) - 1 + i64::from(days);
    let date = first.checked_add_signed(TimeDelta::try_days(offset)?)?;
    Some(date.and_time(t.time()).and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn iso(years: i32, months: i32, days: i32, nanos: i64, repetitions: i32) -> IsoDuration {
        IsoDuration {
            years,
            months,
            days,
            nanos,
            repetitions,
        }
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .expect("valid test date")
    }

    fn date(y: i32, mo: u32, d: u32) -> DateTime<Utc> {
        utc(y, mo, d, 0, 0, 0)
    }

    /// dapr/kit `time/time_test.go` `TestParseDuration`, ISO cases.
    #[test]
    fn kit_parse_table() {
        let ok: &[(&str, IsoDuration)] = &[
            ("R5/P10Y5M3DT30M", iso(10, 5, 3, 30 * MINUTE, 5)),
            (
                "P1MT2H10M3S",
                iso(0, 1, 0, 2 * HOUR + 10 * MINUTE + 3 * SECOND, -1),
            ),
            ("P2W", iso(0, 0, 14, 0, -1)),
            ("PT1S", iso(0, 0, 0, SECOND, -1)),
            ("P1M", iso(0, 1, 0, 0, -1)),
            ("PT1M", iso(0, 0, 0, MINUTE, -1)),
            ("P0D", iso(0, 0, 0, 0, -1)),
            ("PT0S", iso(0, 0, 0, 0, -1)),
            // Out of order, but kit accepts it.
            ("P1M2D", iso(0, 1, 2, 0, -1)),
            ("R5", iso(0, 0, 0, 0, 5)),
            ("R5/", iso(0, 0, 0, 0, 5)),
            ("P1Y2M3D", iso(1, 2, 3, 0, -1)),
        ];
        for (input, want) in ok {
            assert_eq!(parse(input).as_ref(), Ok(want), "{input}");
        }
        for input in [
            "",
            "0h30m0s",
            "2026-01-01T00:00:00Z",
            "10D1M",
            "P",
            "PM",
            "PT1D",
            "P_D",
            "PTxS",
        ] {
            assert!(parse(input).is_err(), "{input} should fail");
        }
    }

    /// The rust-stack.md §2.3 table.
    #[test]
    fn rust_stack_table() {
        assert_eq!(
            parse("PT2H30M"),
            Ok(iso(0, 0, 0, 2 * HOUR + 30 * MINUTE, -1))
        );
        assert_eq!(parse("P1DT2H"), Ok(iso(0, 0, 1, 2 * HOUR, -1)));
        assert_eq!(parse("P1Y2M"), Ok(iso(1, 2, 0, 0, -1)));
        assert_eq!(parse("R4/PT3S"), Ok(iso(0, 0, 0, 3 * SECOND, 4)));
        assert_eq!(parse("R4"), Ok(iso(0, 0, 0, 0, 4)));
        assert_eq!(parse("P1W"), Ok(iso(0, 0, 7, 0, -1)));
        assert!(parse("PT1.5S").is_err());
        assert!(parse("-PT1H").is_err());
    }

    #[test]
    fn error_text_is_kits() {
        assert_eq!(
            parse("PT1.5S").unwrap_err().to_string(),
            "unsupported ISO8601 duration format: PT1.5S"
        );
        assert_eq!(
            parse("").unwrap_err().to_string(),
            "unsupported ISO8601 duration format: "
        );
    }

    /// Quirks that follow from kit's source, each checked against it by reading.
    #[test]
    fn kit_quirks() {
        let ok: &[(&str, IsoDuration)] = &[
            // W combines with D, both accumulate.
            ("P1W2D", iso(0, 0, 9, 0, -1)),
            ("P1D2W", iso(0, 0, 15, 0, -1)),
            // Y and months overwrite; H/M/S accumulate.
            ("P1Y2Y", iso(2, 0, 0, 0, -1)),
            ("P1M2M", iso(0, 2, 0, 0, -1)),
            ("PT1H1H", iso(0, 0, 0, 2 * HOUR, -1)),
            ("PT1M1M", iso(0, 0, 0, 2 * MINUTE, -1)),
            // M is months before T and minutes after.
            ("P1MT1M", iso(0, 1, 0, MINUTE, -1)),
            // Atoi takes a sign inside the duration.
            ("PT-1H", iso(0, 0, 0, -HOUR, -1)),
            ("P+1D", iso(0, 0, 1, 0, -1)),
            ("P-1Y", iso(-1, 0, 0, 0, -1)),
            // Trailing digits without a unit and unknown characters are ignored.
            ("PT1H30", iso(0, 0, 0, HOUR, -1)),
            ("P5", iso(0, 0, 0, 0, -1)),
            ("P1X", iso(0, 0, 0, 0, -1)),
            ("PT", iso(0, 0, 0, 0, -1)),
            ("PTT1H", iso(0, 0, 0, HOUR, -1)),
            ("P1DX", iso(0, 0, 1, 0, -1)),
            // Leading zeros are fine.
            ("P007D", iso(0, 0, 7, 0, -1)),
            // Repetition prefix variants.
            ("R-1/PT1S", iso(0, 0, 0, SECOND, -1)),
            ("R+4/PT1S", iso(0, 0, 0, SECOND, 4)),
            ("R0/PT1S", iso(0, 0, 0, SECOND, 0)),
            ("R4/P", iso(0, 0, 0, 0, 4)),
            // Go's int64 wraps on the time part.
            (
                "PT9223372036854775807H",
                iso(0, 0, 0, i64::MAX.wrapping_mul(HOUR), -1),
            ),
        ];
        for (input, want) in ok {
            assert_eq!(parse(input).as_ref(), Ok(want), "{input}");
        }
        for input in [
            "R",
            "R/PT1S",
            "RR",
            "RP",
            "Rx/PT1S",
            "R4/X",
            "R4/-PT1S",
            "p1D",
            "P1T1H",
            "P1H",
            "P1S",
            "PT1Y",
            "PT1W",
            "P1.5D",
            "PXY",
            "P-D",
            "P+D",
            " P1D",
            "P9223372036854775808D",
            "P2147483648Y",
            "P306783379W",
            "R2147483648/PT1S",
        ] {
            assert!(parse(input).is_err(), "{input} should fail");
        }
        // "P1DT" and "PT1H T" are accepted: a trailing T, and an unknown space then a T right
        // after a unit (start == i at the T).
        assert_eq!(parse("P1DT"), Ok(iso(0, 0, 1, 0, -1)));
        assert!(parse("PT1H T").is_err());
        assert_eq!(parse("PT1HT"), Ok(iso(0, 0, 0, HOUR, -1)));
    }

    #[test]
    fn add_date_normalises_like_go() {
        // Jan 31 + 1 month: Feb 31 normalises to Mar 3 (2026) / Mar 2 (2024, leap).
        assert_eq!(add_date(date(2026, 1, 31), 0, 1, 0), Some(date(2026, 3, 3)));
        assert_eq!(add_date(date(2024, 1, 31), 0, 1, 0), Some(date(2024, 3, 2)));
        // Feb 29 + 1 year: Feb 29 2025 normalises to Mar 1.
        assert_eq!(add_date(date(2024, 2, 29), 1, 0, 0), Some(date(2025, 3, 1)));
        // Negative months.
        assert_eq!(
            add_date(date(2026, 1, 15), 0, -1, 0),
            Some(date(2025, 12, 15))
        );
        assert_eq!(
            add_date(date(2026, 3, 31), 0, -1, 0),
            Some(date(2026, 3, 3))
        );
        assert_eq!(
            add_date(date(2026, 1, 15), 0, -13, 0),
            Some(date(2024, 12, 15))
        );
        assert_eq!(
            add_date(date(2026, 5, 31), 0, -3, 0),
            Some(date(2026, 3, 3))
        );
        // Month overflow into years.
        assert_eq!(
            add_date(date(2026, 11, 15), 0, 3, 0),
            Some(date(2027, 2, 15))
        );
        assert_eq!(
            add_date(date(2026, 1, 15), 0, 25, 0),
            Some(date(2028, 2, 15))
        );
        assert_eq!(
            add_date(date(2026, 12, 1), 0, 12, 0),
            Some(date(2027, 12, 1))
        );
        // Day -1 normalisation.
        assert_eq!(
            add_date(date(2026, 3, 1), 0, 0, -1),
            Some(date(2026, 2, 28))
        );
        assert_eq!(
            add_date(date(2024, 3, 1), 0, 0, -1),
            Some(date(2024, 2, 29))
        );
        assert_eq!(
            add_date(date(2026, 1, 1), 0, 0, -1),
            Some(date(2025, 12, 31))
        );
        assert_eq!(
            add_date(date(2026, 1, 1), 0, 0, 365),
            Some(date(2027, 1, 1))
        );
        // Mixed, and the time of day is kept.
        assert_eq!(
            add_date(utc(2026, 1, 31, 13, 14, 15), 1, 1, 1),
            Some(utc(2027, 3, 4, 13, 14, 15))
        );
        // Out of chrono's range.
        assert_eq!(add_date(date(2026, 1, 1), i32::MAX, 0, 0), None);
        assert_eq!(
            add_date(date(2026, 1, 1), i32::MIN, i32::MIN, i32::MIN),
            None
        );
    }

    /// kit's "parse ISO8610 and calculate with leap year" and `TestParseTime` cases.
    #[test]
    fn kit_add_to() {
        let d = parse("P1Y2M3D").expect("parses");
        assert_eq!(
            d.add_to(utc(2020, 2, 3, 11, 12, 13)),
            Some(utc(2021, 4, 6, 11, 12, 13))
        );
        assert_eq!(
            d.add_to(utc(2019, 2, 3, 11, 12, 13)),
            Some(utc(2020, 4, 6, 11, 12, 13))
        );

        let start = utc(2021, 12, 6, 17, 43, 51);
        let d = parse("P1MT2H10M3S").expect("parses");
        let want = start + TimeDelta::days(31) + TimeDelta::seconds(2 * 3600 + 10 * 60 + 3);
        assert_eq!(d.add_to(start), Some(want));

        // Negative H/M/S part, and AddDate before Add (Jan 31 + 1M = Mar 3, then -1h).
        let d = parse("P1MT-1H").expect("parses");
        assert_eq!(d.add_to(date(2026, 1, 31)), Some(utc(2026, 3, 2, 23, 0, 0)));
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn parse_never_panics_grammar_like(
            s in "(R[-+0-9]{0,12}/?)?P?([-+0-9]{0,21}[YMWDTHSX.]?){0,6}"
        ) {
            let _ = parse(&s);
        }

        #[test]
        fn add_to_never_panics(
            secs in any::<i64>(),
            years in any::<i32>(),
            months in any::<i32>(),
            days in any::<i32>(),
            nanos in any::<i64>(),
        ) {
            if let Some(t) = DateTime::<Utc>::from_timestamp(secs % 8_000_000_000_000, 0) {
                let d = iso(years, months, days, nanos, -1);
                let _ = d.add_to(t);
            }
        }

        #[test]
        fn add_date_matches_month_arithmetic(
            y in 1i32..9000,
            m in 1u32..=12,
            d in 1u32..=28,
            months in -1200i32..1200,
        ) {
            // With day <= 28 there is no normalisation, so the result is the plain month shift.
            let t = date(y, m, d);
            let got = add_date(t, 0, months, 0).expect("in range");
            let total = i64::from(y) * 12 + i64::from(m) - 1 + i64::from(months);
            prop_assert_eq!(i64::from(got.year()), total.div_euclid(12));
            prop_assert_eq!(i64::from(got.month0()), total.rem_euclid(12));
            prop_assert_eq!(got.day(), d);
        }
    }
}
