//! Dapr's schedule grammar and trigger semantics, as a pure module.
//!
//! Everything here is deterministic: callers pass "now" in; nothing reads a clock or does I/O.

pub mod backfill;
pub mod cron;
pub mod duration;
pub mod iso8601;
pub mod job;
pub mod job_policy;
pub mod labels;
pub mod name;
pub mod period;
pub mod plan;
pub mod policy;
pub mod policy_json;
pub mod policy_messages;
pub mod preview;
pub mod rfc3339;

pub use cron::Schedule;
pub use job::{JobSpec, Rule, ValidationError, point_in_time, validate};
pub use job_policy::{CatchUp, OnExhausted, Overlap, TickPolicy, WhileTargetDown};
pub use name::NameError;
pub use plan::{Begin, Counter, Keep, Outcome, Plan, PlanPolicy, Resume, Step};
pub use policy::FailurePolicy;
