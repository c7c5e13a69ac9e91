//! The scalar texts protojson reads: JSON numbers, `uint32` fields and Duration strings.

pub use crate::go::protojson::parse_duration;

/// Go's `isNotDelim`: characters that may not directly follow a literal or number.
pub(super) fn is_not_delim(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.' | b'_')
}

/// The length of the JSON number at the start of `s` (Go's `parseNumber`), if there is one.
pub(super) fn parse_number(s: &[u8]) -> Option<usize> {
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
pub(super) fn parse_uint32(text: &str) -> Option<u32> {
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
