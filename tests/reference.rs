//! The generated reference pages are current: `docs/reference/flags.md` (the clap command
//! line) and `docs/reference/metrics.md` (the metrics registries) match what the code renders
//! now. `JOBSD_BLESS=1 cargo test --test reference` rewrites them.

use std::path::Path;

/// Compares `rendered` with the committed file at `path` (relative to the crate), or writes it
/// when `JOBSD_BLESS=1`.
fn check(path: &str, rendered: &str) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if std::env::var("JOBSD_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&file, rendered).expect("write the reference page");
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    if committed != rendered {
        let line = committed
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .map_or(
                committed.lines().count().min(rendered.lines().count()),
                |n| n,
            );
        panic!(
            "{path} is not current (first difference at line {}): run \
             `JOBSD_BLESS=1 cargo test --test reference` and commit the file",
            line + 1
        );
    }
}

#[test]
fn flags_page_is_current() {
    check("docs/reference/flags.md", &jobsd::app::reference::flags());
}

#[test]
fn metrics_page_is_current() {
    check(
        "docs/reference/metrics.md",
        &jobsd::app::reference::metrics(),
    );
}
