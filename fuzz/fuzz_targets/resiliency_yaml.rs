#![no_main]
//! Resiliency YAML: loading any text through the same entry point as `--resources-path`
//! never panics, and what loads hands out policies for the apps it targets.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(resiliency) = jobsd::resiliency::Resiliency::from_yaml_str(text, "myapp") {
        let _ = resiliency.app_policy("myapp");
    }
});
