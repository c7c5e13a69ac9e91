//! Go's `bytes.TrimSpace`, which daprd applies to raw job data before sending it to an HTTP app.

/// Go's `bytes.TrimSpace`: drops leading and trailing white space runes (ASCII `\t \n \v \f
/// \r` and space, U+0085, U+00A0 and the other Unicode `White_Space` runes). Trimming stops at
/// the first rune that is not white space, and at bytes that are not valid UTF-8.
pub fn trim_space(s: &[u8]) -> &[u8] {
    let mut start = 0;
    while let Some((c, len)) = decode_first(&s[start..]) {
        if !is_space(c) {
            break;
        }
        start += len;
    }
    let mut end = s.len();
    while end > start {
        match decode_last(&s[start..end]) {
            Some((c, len)) if is_space(c) => end -= len,
            _ => break,
        }
    }
    &s[start..end]
}

/// Go's `unicode.IsSpace`.
fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n'
            | '\u{0B}'
            | '\u{0C}'
            | '\r'
            | ' '
            | '\u{85}'
            | '\u{A0}'
            | '\u{1680}'
            | '\u{2000}'
            ..='\u{200A}' | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// Length of the UTF-8 sequence a lead byte announces (0 for a byte that cannot start one).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 0,
    }
}

/// The first rune of `s` and its length, or `None` if `s` is empty or starts with invalid
/// UTF-8 (Go decodes that as `RuneError`, which is not a space).
fn decode_first(s: &[u8]) -> Option<(char, usize)> {
    let len = utf8_len(*s.first()?);
    let bytes = s.get(..len).filter(|_| len > 0)?;
    let c = std::str::from_utf8(bytes).ok()?.chars().next()?;
    Some((c, len))
}

/// The last rune of `s` and its length, following Go's `utf8.DecodeLastRune`: look back at most
/// four bytes for a rune start, and accept only a valid rune that ends exactly at the end.
fn decode_last(s: &[u8]) -> Option<(char, usize)> {
    let end = s.len();
    let last = *s.last()?;
    if last < 0x80 {
        return Some((char::from(last), 1));
    }
    let limit = end.saturating_sub(4);
    let mut start = end - 1;
    while start > limit && (s[start] & 0xC0) == 0x80 {
        start -= 1;
    }
    let (c, len) = decode_first(&s[start..])?;
    (start + len == end).then_some((c, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_space_matches_go() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b" \t\n\x0b\x0c\r", b""),
            (b"  hello world \n", b"hello world"),
            // wrapperspb.String("hello world"): 0x0a 0x0b are \n \v.
            (b"\x0a\x0bhello world", b"hello world"),
            // wrapperspb.Int64(123): 0x08 is not a space.
            (b"\x08\x7b", b"\x08{"),
            ("\u{a0}\u{3000}x\u{2028}\u{85}".as_bytes(), b"x"),
            ("\u{200b}x".as_bytes(), "\u{200b}x".as_bytes()),
            // Invalid UTF-8 stops trimming on both sides.
            (b"\xff \n", b"\xff"),
            (b" \x80x\x80 ", b"\x80x\x80"),
            // A truncated U+2028 (E2 80 A8) is not a space.
            (b"x\x80\xa8", b"x\x80\xa8"),
            (b"\xe2\x80 x", b"\xe2\x80 x"),
            // Overlong encodings and surrogates are invalid, not spaces.
            (b"\xc0\xa0x", b"\xc0\xa0x"),
            (b"x\xed\xa0\x80", b"x\xed\xa0\x80"),
            (b"\x1c\x1fx", b"\x1c\x1fx"),
        ];
        for (input, want) in cases {
            assert_eq!(trim_space(input), *want, "input {input:?}");
        }
    }
}
