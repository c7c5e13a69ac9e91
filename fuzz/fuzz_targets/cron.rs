#![no_main]
//! Parse arbitrary specs and walk a few activations: nothing may panic, and every activation
//! is strictly later than the one before (except `@every 0s`, which stands still).

use chrono::{TimeZone, Utc};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = std::str::from_utf8(data) else { return };
    let Ok(schedule) = jobsd::schedule::cron::parse(spec) else { return };
    let mut t = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    for _ in 0..8 {
        match schedule.next(t) {
            Some(n) => {
                assert!(n >= t, "{spec:?}: {n} before {t}");
                t = n;
            }
            None => break,
        }
    }
});
