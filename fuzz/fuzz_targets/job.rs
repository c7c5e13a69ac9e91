#![no_main]
//! Whole-job validation and the trigger plan on arbitrary field strings: never panics, and a
//! valid job never fires before its due time.

use chrono::{TimeZone, Utc};
use jobsd::schedule::{Begin, Counter, JobSpec, Outcome, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let mut parts = s.splitn(3, '\u{1}');
    let field = |p: Option<&str>| p.filter(|v| !v.is_empty()).map(str::to_owned);
    let spec = JobSpec {
        schedule: field(parts.next()),
        due_time: field(parts.next()),
        ttl: field(parts.next()),
        repeats: Some(3),
        failure_policy: None,
    };
    let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let Ok(plan) = validate(&spec, now) else { return };
    let mut counter = Counter::default();
    let mut next = plan.fire_time(&counter);
    for i in 0..16 {
        let Some(at) = next else { break };
        if let Begin::DueTime(due) = plan.begin {
            assert!(at >= due);
        }
        let step = plan.apply(&counter, if i % 3 == 0 { Outcome::Failed } else { Outcome::Success });
        counter = step.counter;
        next = step.next;
    }
});
