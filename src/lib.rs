//! jobsd: the Dapr Jobs building block as one Rust binary.
//!
//! Layout (see `DESIGN.md` of the project for the whole house):
//! - [`schedule`]: pure parsing and time maths — Dapr's cron grammar, Go durations, ISO-8601,
//!   strict RFC 3339, job validation and the trigger plan. No I/O, no clock reads.
//! - [`proto`]: generated code for Dapr's protos (`dapr.proto.{common,runtime,scheduler}.v1`).
#![forbid(unsafe_code)]

pub mod proto;
pub mod schedule;
