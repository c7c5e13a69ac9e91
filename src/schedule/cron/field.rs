//! The field grammar of kit's `parser.go`: ranges, steps, names and Go's `strconv.Atoi`, so
//! each field becomes the bit set kit would build, or kit's first error.

use std::fmt;

use super::{Error, STAR_BIT};
use crate::go::quote::quote;

/// Go's `strconv.Atoi` error: `strconv.Atoi: parsing "x": invalid syntax` or
/// `... value out of range`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtoiError {
    num: String,
    out_of_range: bool,
}

impl fmt::Display for AtoiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = if self.out_of_range {
            "value out of range"
        } else {
            "invalid syntax"
        };
        write!(f, "strconv.Atoi: parsing {}: {why}", quote(&self.num))
    }
}

impl std::error::Error for AtoiError {}

/// A field's range and names (kit's `bounds`).
pub(super) struct Bounds {
    pub(super) min: u64,
    pub(super) max: u64,
    pub(super) names: &'static [(&'static str, u64)],
}

pub(super) const SECONDS: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
pub(super) const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
pub(super) const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
pub(super) const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
pub(super) const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
pub(super) const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// Kit's `getField`: the union of the comma-separated ranges; empty pieces are skipped, so
/// `,` alone is a valid field that matches nothing.
pub(super) fn get_field(field: &str, bounds: &Bounds) -> Result<u64, Error> {
    let mut bits = 0;
    for expr in field.split(',').filter(|e| !e.is_empty()) {
        bits |= get_range(expr, bounds)?;
    }
    Ok(bits)
}

/// Kit's `getRange`: `number | number "-" number [ "/" number ]`, `*`/`?`, and `N/step`
/// meaning `N-max/step`. The checks run in Go's order so the first error is Go's.
pub(super) fn get_range(expr: &str, bounds: &Bounds) -> Result<u64, Error> {
    let mut slashes = expr.split('/');
    let range = slashes.next().unwrap_or_default();
    let step_text = slashes.next();
    let extra_slash = slashes.next().is_some();

    let mut hyphens = range.split('-');
    let low = hyphens.next().unwrap_or_default();
    let high = hyphens.next();
    let extra_hyphen = hyphens.next().is_some();
    let single = high.is_none();

    let (start, mut end, mut extra);
    if low == "*" || low == "?" {
        // Go ignores anything after a star's hyphen: `*-5` is `*`.
        (start, end, extra) = (bounds.min, bounds.max, STAR_BIT);
    } else {
        start = parse_int_or_name(low, bounds.names)?;
        end = match (high, extra_hyphen) {
            (None, _) => start,
            (Some(high), false) => parse_int_or_name(high, bounds.names)?,
            (Some(_), true) => {
                return Err(Error::TooManyHyphens {
                    expr: expr.to_owned(),
                });
            }
        };
        extra = 0;
    }

    let step = match (step_text, extra_slash) {
        (None, _) => 1,
        (Some(text), false) => {
            let step = must_parse_int(text)?;
            if single {
                end = bounds.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        (Some(_), true) => {
            return Err(Error::TooManySlashes {
                expr: expr.to_owned(),
            });
        }
    };

    if start < bounds.min {
        return Err(Error::BelowMinimum {
            start,
            min: bounds.min,
            expr: expr.to_owned(),
        });
    }
    if end > bounds.max {
        return Err(Error::AboveMaximum {
            end,
            max: bounds.max,
            expr: expr.to_owned(),
        });
    }
    if start > end {
        return Err(Error::StartAfterEnd {
            start,
            end,
            expr: expr.to_owned(),
        });
    }
    if step == 0 {
        return Err(Error::ZeroStep {
            expr: expr.to_owned(),
        });
    }
    Ok(get_bits(start, end, step) | extra)
}

/// Kit's `parseIntOrName`: a case-insensitive name from the field's table, else an integer.
pub(super) fn parse_int_or_name(expr: &str, names: &[(&str, u64)]) -> Result<u64, Error> {
    if let Some(&(_, value)) = names.iter().find(|(name, _)| go_lower_eq(expr, name)) {
        return Ok(value);
    }
    must_parse_int(expr)
}

/// Whether Go's `strings.ToLower(s) == lower`, for an ASCII `lower`. Go lowers rune by rune
/// with the simple case mapping, so `İ` (U+0130) becomes plain `i` and the Kelvin sign `k`,
/// unlike Rust's full mapping.
pub(super) fn go_lower_eq(s: &str, lower: &str) -> bool {
    let mut want = lower.chars();
    for c in s.chars() {
        let got = if c == '\u{130}' {
            'i'
        } else {
            let mut l = c.to_lowercase();
            match (l.next(), l.next()) {
                (Some(one), None) => one,
                _ => return false,
            }
        };
        if want.next() != Some(got) {
            return false;
        }
    }
    want.next().is_none()
}

/// Kit's `mustParseInt`: Go's `strconv.Atoi`, then a sign check.
pub(super) fn must_parse_int(expr: &str) -> Result<u64, Error> {
    let num = atoi(expr).map_err(|cause| Error::ParseInt {
        expr: expr.to_owned(),
        cause,
    })?;
    u64::try_from(num).map_err(|_| Error::Negative {
        num,
        expr: expr.to_owned(),
    })
}

/// Go's `strconv.Atoi` on a 64-bit platform, fast path and `ParseInt` slow path alike, so
/// syntax and range errors come out where Go's do.
pub(super) fn atoi(s: &str) -> Result<i64, AtoiError> {
    let err = |out_of_range| AtoiError {
        num: s.to_owned(),
        out_of_range,
    };
    let bytes = s.as_bytes();
    let (neg, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return Err(err(false));
    }
    if bytes.len() < 19 {
        // At most 18 digits: cannot overflow.
        let mut n: i64 = 0;
        for &c in digits {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return Err(err(false));
            }
            n = n * 10 + i64::from(d);
        }
        return Ok(if neg { -n } else { n });
    }
    // ParseUint stops at the first overflow, even if a bad byte follows it.
    let mut n: u64 = 0;
    let mut overflow = false;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(err(false));
        }
        match n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(c - b'0')))
        {
            Some(v) => n = v,
            None => {
                overflow = true;
                break;
            }
        }
    }
    const CUTOFF: u64 = 1 << 63;
    if overflow || (!neg && n >= CUTOFF) || (neg && n > CUTOFF) {
        return Err(err(true));
    }
    // n <= 2^63 here; 2^63 only when negative, which wraps to i64::MIN as in Go.
    let n = n as i64;
    Ok(if neg { n.wrapping_neg() } else { n })
}

/// Kit's `getBits`: every `step`-th value in `[min, max]`; callers ensure `max <= 59`.
pub(super) fn get_bits(min: u64, max: u64, step: u64) -> u64 {
    if step == 1 {
        return !(u64::MAX << (max + 1)) & (u64::MAX << min);
    }
    let mut bits = 0;
    let mut i = min;
    while i <= max {
        bits |= 1 << i;
        match i.checked_add(step) {
            Some(next) => i = next,
            None => break,
        }
    }
    bits
}

/// Kit's `all`: every value in range, plus the star bit.
pub(super) fn all(bounds: &Bounds) -> u64 {
    get_bits(bounds.min, bounds.max, 1) | STAR_BIT
}
