//! The pieces of Go's standard library whose exact behaviour Dapr's wire shows: how daprd
//! quotes user input in its error texts, unescapes query parameters, cleans and escapes URL
//! paths, trims data and writes protojson. Pure functions, no I/O; gathered here so that each
//! exists once.

pub mod json;
pub mod json_stream;
pub mod path;
pub mod protojson;
pub mod quote;
pub mod text;
pub mod url;
