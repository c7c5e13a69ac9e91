//! Backup and restore of jobs with their progress, apart from any transport: jobsd's export
//! format (`docs/export-format.md`: NDJSON lines, `format`), the Dapr Scheduler's export file
//! (a Go `gob`, `dapr`) and NDJSON read from a byte stream one line at a time (`lines`). The
//! HTTP and gRPC routes that stream them live in `api::jobsd::backup`; the records they carry
//! are the scheduler seam's (`BackupRecord`).

pub mod dapr;
pub mod format;
pub mod lines;

pub use format::{FORMAT, VERSION};
