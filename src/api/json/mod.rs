//! The parts of protojson (Go's `google.golang.org/protobuf/encoding/protojson`) that daprd's
//! jobs API exposes, by hand: reading the POST body into `internals.v1.JobHTTPRequest` and
//! writing `runtime.v1.Job` for GET.
//!
//! Reading follows `UnmarshalOptions{DiscardUnknown: true, AllowPartial: true}`: json_name and
//! proto field names, duplicate fields rejected, `null` leaves a field unset (except `data`,
//! a `google.protobuf.Value`), numbers or numeric strings for `uint32`, Duration JSON for the
//! retry interval, unknown fields skipped. The decoder reads tokens in order like Go's, so the
//! first problem in the text is the one reported, with Go's `(line L:C)` positions.
//!
//! Writing follows `protojson.Marshal`: json names in field-number order, unset fields left
//! out, `Any` as `{"@type": …, …}` for the well-known types daprd can resolve.

mod decode;
mod encode;
mod scalar;

pub use crate::go::protojson::format_duration;
pub use decode::parse_job_http_request;
pub use encode::{job_to_json, value_to_any, view_job_to_json, write_any, write_job};
pub use scalar::parse_duration;

use crate::go::protojson::{MAX_DURATION_SECONDS, ValueError};

/// Type URL of `google.protobuf.Value`, the type of HTTP-scheduled job data.
pub const VALUE_TYPE_URL: &str = "type.googleapis.com/google.protobuf.Value";

/// A protojson error; its text reads like Go's (`proto: (line 1:14): invalid value …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("proto: {0}")]
pub struct JsonError(pub(crate) String);

impl From<ValueError> for JsonError {
    fn from(err: ValueError) -> Self {
        JsonError(err.0)
    }
}

/// How deep arrays and objects may nest. Go allows 10 000, but prost decodes at most 100
/// nested messages, which a `Value` reaches at about 33 JSON levels; anything deeper could
/// be stored but never read back, so it is refused here (and bounds the parser's recursion).
const MAX_DEPTH: usize = 100;

/// Nesting (the request object included) up to which prost surely decodes `data` again: a
/// JSON level costs prost at most 3 of its 100 recursion levels (`Value`, `Struct`, map entry),
/// so objects fail from 34 levels of `data` on. Shallower bodies skip the costly check.
const SURELY_DECODABLE_DEPTH: usize = 32;

#[cfg(test)]
mod tests;
