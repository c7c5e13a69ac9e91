//! What an operator sees of jobsd's work: tracing ([`trace`]: the W3C `traceparent` sent with
//! every delivery and read from creates; [`otlp`]: one span per delivery attempt, exported
//! over OTLP when `--otlp-endpoint` is set).

pub mod otlp;
pub mod trace;
