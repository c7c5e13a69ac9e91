#![no_main]
//! ISO-8601 durations: parsing and applying to an instant never panic.

use chrono::{TimeZone, Utc};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(d) = jobsd::schedule::iso8601::parse(s) {
        let _ = d.add_to(Utc.with_ymd_and_hms(2026, 1, 31, 0, 0, 0).unwrap());
    }
});
