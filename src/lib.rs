//! jobsd: the Dapr Jobs building block as one Rust binary.
//!
//! Layout (see `DESIGN.md` of the project for the whole house):
//! - [`schedule`]: pure parsing and time maths — Dapr's cron grammar, Go durations, ISO-8601,
//!   strict RFC 3339, job validation and the trigger plan. No I/O, no clock reads.
//! - [`proto`]: generated code for Dapr's protos (`dapr.proto.{common,runtime,scheduler}.v1`)
//!   and our stored records (`jobsd.store.v1`).
//! - [`api`]: what apps call — daprd's Jobs API over HTTP (axum) and gRPC (tonic).
//! - [`scheduler`]: the seam the API talks to (Dapr Scheduler calls), embedded or remote.
//! - [`engine`]: validates, stores and fires jobs; the same engine serves `jobsd scheduler`.
//! - [`delivery`]: what we call on the app — `POST /job/<name>` or `OnJobEvent`, health gating.
//! - [`store`]: durable records behind a trait: redb (embedded), memory (tests).
//! - [`clock`]: the only place that reads wall time.
//! - [`config`]: daprd's flags and environment, validated.
#![forbid(unsafe_code)]

pub mod api;
pub mod app;
pub mod clock;
pub mod config;
pub mod delivery;
pub mod engine;
pub mod go;
pub mod proto;
pub mod replica;
pub mod resiliency;
pub mod schedule;
pub mod scheduler;
pub mod store;
pub mod trigger;
