//! `jobsd jobs preview`: a job's next fire times before it is created, with no server. The
//! body (a create's: Dapr's fields, `labels`, `policy`, jobsd's `failurePolicy`, from
//! `--file` and the flags) goes to `POST /jobsd/v1/preview` of an API served in this process
//! over a memory store, so it meets the create's own parsing and checks and the engine's own
//! preview ([`crate::seam::preview_job`]): a bad job gets the error its create would.
//! Nothing is stored and nothing is sent anywhere.

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use clap::Args;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};
use tower::ServiceExt;

use super::CliError;
use super::client::{self, Answer};
use super::output::{
    Column, Printer, Table, absolute_or_dash, print, relative_or_dash, str_of, time_of,
};
use crate::api::{self, ApiState};
use crate::clock::{Clock, ManualClock};
use crate::engine::Engine;
use crate::seam::Scheduler;

/// `jobsd jobs preview`.
#[derive(Debug, Clone, Args)]
pub struct PreviewArgs {
    /// The job's name (checked as a create checks it; it picks the jitter offset).
    #[arg(default_value = "preview")]
    pub name: String,
    /// A create body as JSON (`-` for stdin); the flags below add to it or replace its fields.
    #[arg(long, short = 'f', value_name = "PATH")]
    pub file: Option<String>,
    /// Cron expression (`TZ=Europe/Paris 0 30 2 * * *`) or `@every 1h`-style period.
    #[arg(long)]
    pub schedule: Option<String>,
    /// When it first fires (RFC 3339, or a Go duration from now).
    #[arg(long)]
    pub due_time: Option<String>,
    /// How many times it fires.
    #[arg(long)]
    pub repeats: Option<u32>,
    /// When it expires (RFC 3339, or a Go duration from now).
    #[arg(long)]
    pub ttl: Option<String>,
    /// A label (`key=value`); repeat for several.
    #[arg(long = "label", short = 'l', value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// jobsd's `policy` object, as JSON.
    #[arg(long, value_name = "JSON")]
    pub policy: Option<String>,
    /// The failure policy, as JSON (Dapr's or jobsd's kinds).
    #[arg(long, value_name = "JSON")]
    pub failure_policy: Option<String>,
    /// How many fire times (1 to 1000) [default: 10].
    #[arg(long)]
    pub count: Option<usize>,
    /// The instant to preview from (RFC 3339) [default: now].
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
}

/// The app and namespace the previewed job would belong to (they only show in error
/// messages and dead-letter checks).
#[derive(Debug, Clone)]
pub struct Owner {
    /// `--app-id`, else `app`.
    pub app_id: String,
    /// `--namespace`.
    pub namespace: String,
}

/// `jobsd jobs preview`.
pub async fn run(args: &PreviewArgs, owner: &Owner, out: &Printer) -> Result<(), CliError> {
    let at = match &args.at {
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| t.to_utc())
            .map_err(|e| CliError::Usage(format!("--at {text:?} is not an RFC 3339 time: {e}")))?,
        None => Utc::now(),
    };
    let body = body_of(args)?;
    let answer = preview_locally(owner, &args.name, &body, at).await?;
    if !out.is_table() {
        return out.document(&answer);
    }
    print(&format!(
        "job {}, zone {}, from {}:\n{}",
        str_of(&answer, "/name"),
        zone_of(&answer),
        absolute_or_dash(Some(at)),
        ticks_table(&answer, at, out.is_wide())
    ))
}

/// The create body: `--file`'s object, then each flag given.
fn body_of(args: &PreviewArgs) -> Result<Value, CliError> {
    let mut body = match &args.file {
        None => Map::new(),
        Some(path) => {
            let text = if path == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(path)
            }
            .map_err(|e| CliError::Usage(format!("--file {path}: {e}")))?;
            match serde_json::from_str(&text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => {
                    return Err(CliError::Usage(format!(
                        "--file {path}: not a JSON object (a create body)"
                    )));
                }
                Err(e) => return Err(CliError::Usage(format!("--file {path}: {e}"))),
            }
        }
    };
    let json_flag = |flag: &str, text: &str| {
        serde_json::from_str::<Value>(text)
            .map_err(|e| CliError::Usage(format!("--{flag}: not JSON: {e}")))
    };
    if let Some(s) = &args.schedule {
        body.insert("schedule".into(), json!(s));
    }
    if let Some(s) = &args.due_time {
        body.insert("dueTime".into(), json!(s));
    }
    if let Some(n) = args.repeats {
        body.insert("repeats".into(), json!(n));
    }
    if let Some(s) = &args.ttl {
        body.insert("ttl".into(), json!(s));
    }
    if !args.labels.is_empty() {
        let labels = body
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        for pair in &args.labels {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| CliError::Usage(format!("--label {pair:?} is not key=value")))?;
            if let Value::Object(map) = labels {
                map.insert(k.to_owned(), json!(v));
            }
        }
    }
    if let Some(text) = &args.policy {
        body.insert("policy".into(), json_flag("policy", text)?);
    }
    if let Some(text) = &args.failure_policy {
        body.insert("failurePolicy".into(), json_flag("failure-policy", text)?);
    }
    if let Some(n) = args.count {
        body.insert("count".into(), json!(n));
    }
    Ok(Value::Object(body))
}

/// `POST /jobsd/v1/preview` answered in this process at `at`: the route's JSON, or its error.
async fn preview_locally(
    owner: &Owner,
    name: &str,
    body: &Value,
    at: DateTime<Utc>,
) -> Result<Value, CliError> {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(at));
    // An engine that stores (in memory) but never fires: the preview reads nothing of it.
    let scheduler: Arc<dyn Scheduler> = Arc::new(Engine::new(
        Arc::new(crate::store::Memory::new()),
        clock.clone(),
    ));
    let state = ApiState {
        app_id: owner.app_id.clone(),
        namespace: owner.namespace.clone(),
        api_token: None,
        max_body_size: 0,
        max_backfill_ticks: crate::engine::DEFAULT_MAX_BACKFILL_TICKS,
        mode: "embedded",
        scheduler_hosts: None,
        app_started: tokio::sync::watch::channel(true).1,
        actors: crate::actors::ActorRuntime::without_app(
            Arc::new(crate::actors::SchedulerReminders::new(
                scheduler.clone(),
                &owner.app_id,
                &owner.namespace,
            )),
            clock.clone(),
        ),
        scheduler,
        clock,
        test_clock: None,
    };
    let request = http::Request::post(format!(
        "/jobsd/v1/preview{}",
        client::query([("name", name.to_owned())])
    ))
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(axum::body::Body::from(body.to_string()))
    .map_err(|e| CliError::Usage(format!("job name {name:?}: {e}")))?;
    let response = api::http::router(state)
        .oneshot(request)
        .await
        .map_err(|e| CliError::Other(format!("preview: {e}")))?;
    let status = response.status();
    let bytes: Bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| CliError::Other(format!("preview: {e}")))?
        .to_bytes();
    let answer = Answer {
        status,
        body: bytes,
    };
    if !status.is_success() {
        return Err(client::error_of("the preview", &answer));
    }
    answer.json()
}

/// The zone of a preview or next-fire-times answer (`UTC` when it names none).
pub fn zone_of(answer: &Value) -> &str {
    match str_of(answer, "/zone") {
        "" => "UTC",
        zone => zone,
    }
}

/// The columns of a table of ticks.
const TICK_COLUMNS: &[Column] = &[
    ("#", false),
    ("TIME (UTC)", false),
    ("FIRES AT (UTC)", true),
    ("LOCAL", false),
    ("ZONE", false),
    ("WHEN", false),
    ("NOTES", false),
];

/// The `ticks` of a preview or next-fire-times answer as a table, times relative to `from`.
pub fn ticks_table(answer: &Value, from: DateTime<Utc>, wide: bool) -> String {
    let ticks = answer
        .get("ticks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let rows: Vec<Vec<String>> = ticks
        .iter()
        .enumerate()
        .map(|(i, tick)| {
            let time = time_of(tick, "/time");
            let notes: Vec<&str> = tick
                .get("notes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            vec![
                (i + 1).to_string(),
                absolute_or_dash(time),
                str_of(tick, "/fireTime").to_owned(),
                str_of(tick, "/local").to_owned(),
                str_of(tick, "/abbreviation").to_owned(),
                relative_or_dash(time, from),
                notes.join("; "),
            ]
        })
        .collect();
    Table::of(TICK_COLUMNS, wide).render(&rows)
}
