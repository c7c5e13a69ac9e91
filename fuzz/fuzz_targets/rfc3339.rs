#![no_main]
//! Strict RFC 3339: never panics; whatever parses is accepted by chrono too.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if jobsd::schedule::rfc3339::parse(s).is_ok() {
        assert!(chrono::DateTime::parse_from_rfc3339(s).is_ok(), "{s:?}");
    }
});
