#![no_main]
//! Go durations: parsing never panics, and what parses formats back to the same value.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(nanos) = jobsd::schedule::duration::parse(s) {
        let text = jobsd::schedule::duration::format(nanos);
        assert_eq!(jobsd::schedule::duration::parse(&text), Ok(nanos), "{s:?} → {text}");
    }
});
