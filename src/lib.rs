//! jobsd: the Dapr Jobs building block as one Rust binary.
//!
//! # The house
//!
//! One crate; each folder is a room with one role. Arrows point down only (checked by
//! `tests/house.rs`): `api → seam → engine → store`, `engine → schedule`,
//! `delivery → trigger`, `replica → engine`, `actors → seam`; `api`, `seam` and `engine` speak
//! [`jobs`]' types; `api` imports no `engine` item; `schedule`, `trigger`, `jobs` and `go` do no I/O.
//!
//! | room | owns |
//! |---|---|
//! | [`app`] | wiring of one role (`sidecar.rs`: store, engine or remote client, API servers, delivery; `replica.rs`: `jobsd scheduler`; `metrics.rs`: the metrics server both serve); graceful shutdown |
//! | [`backup`] | jobsd's export format, the Dapr Scheduler's export file (a Go `gob`) and NDJSON lines, apart from the routes that stream them |
//! | [`cli`] | `jobsd jobs …`: the command line over a sidecar's `/jobsd/v1` routes or Scheduler replicas, offline preview |
//! | [`config`] | daprd's and the Dapr Scheduler's flags and environment, validated into settings |
//! | [`api`] | what apps call: daprd's Jobs API over HTTP (axum) and gRPC (tonic), Dapr's error model, protojson |
//! | [`seam`] | the scheduler seam the API talks to (Dapr Scheduler calls): the embedded engine, or `remote` replicas over gRPC |
//! | [`jobs`] | what the API and a scheduler exchange beyond Dapr's messages: a job's extras, views and runs, selections, write conditions, backup records, held executions, previews, the loop's state; plain data and its rules |
//! | [`engine`] | validates and stores jobs, and the trigger loop that fires them into a [`trigger::Sink`]; no transport |
//! | [`replica`] | the `jobsd scheduler` role: Scheduler gRPC service and jobsd's beside it (creates with jobsd's settings, views), WatchJobs stream pool, etcd cluster membership and partitions (wired in [`app`]) |
//! | [`trigger`] | the contract between firing and delivering: `Trigger`, `TriggerResult`, `Sink`, and every composed key |
//! | [`delivery`] | what we call on the app: `POST /job/<name>` or `OnJobEvent`, health gating, concurrency |
//! | [`observe`] | what operators see: Prometheus metrics (daprd's and the Dapr Scheduler's names, jobsd's own) and the `/metrics` server; the W3C `traceparent` on every delivery, OTLP spans per attempt |
//! | [`resiliency`] | Dapr `Resiliency` resources: timeouts, retries, circuit breakers (CEL trip) around delivery |
//! | [`store`] | durable records behind one trait: redb with a WAL (embedded), etcd (cluster), memory (tests) |
//! | [`schedule`] | pure: cron, Go durations, ISO-8601, RFC 3339, names, job validation, failure policies, the trigger plan |
//! | [`go`] | pure: the pieces of Go's standard library Dapr's wire shows (quoting, URL escaping, protojson values) |
//! | [`proto`] | generated code for Dapr's protos and our stored records (protox, no system `protoc`) |
//! | [`clock`] | the only place that reads wall time (system or manual) |
//! | [`serve`] | serving connections within limits against hostile clients (connection cap, header deadline, HTTP/2 stream limits), the constant-time token check |
//! | [`tls`] | TLS from certificate files: the sidecar's and the replica's client configs, the replica's TLS listener, and the flags that name the files (`flags.rs`) |
//! | [`cli`] | what people operate jobsd with: the web console's files and routes (`/jobsd/ui/`) |
#![forbid(unsafe_code)]

pub mod actors;
pub mod api;
pub mod app;
pub mod backup;
pub mod cli;
pub mod clock;
pub mod config;
pub mod delivery;
pub mod engine;
pub mod go;
pub mod jobs;
pub mod observe;
pub mod proto;
pub mod replica;
pub mod resiliency;
pub mod schedule;
pub mod seam;
pub mod serve;
pub mod store;
pub mod tls;
pub mod trigger;
