//! The opt-in test clock (`--test-clock`, for apps' own tests): jobsd runs on a manual clock
//! that starts at the real time and moves only when told to.
//!
//! - `GET /jobsd/v1/clock`: `{"now"}`.
//! - `POST /jobsd/v1/clock/advance` with `{"by": "<Go duration>"}` or `{"to": "<RFC 3339>"}`:
//!   `{"previous", "now"}`, once every tick due by the new time has fired and been answered.
//!
//! Without the flag both answer 412 `ERR_JOBSD_TEST_CLOCK_OFF` (gRPC `FailedPrecondition`).
//!
//! An advance steps the clock through every fire time on the way (ticks, retries, timeouts,
//! held executions' leases running out alike), waiting at each until the trigger loop has
//! handed out what is due and the app has answered, so each tick fires at its own instant as
//! it would in real time: `@every 1h` advanced by `3h` is three deliveries, not one late tick
//! and its catch-up. The clock drives everything the engine times (ticks, retries,
//! `policy.timeout`, leases, catch-up, ttl, finished retention, actor reminders and timers);
//! the app's health probes and resiliency policies measure the app, and stay on real time.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use http::StatusCode;
use serde_json::json;

use super::bad_request;
use crate::api::http_parts::{Shared, json_response, read_body};
use crate::api::{ApiError, ApiState};
use crate::clock::{Clock, ManualClock};

/// Most fire times one advance stops at; past them the clock jumps to the end, and the ticks
/// left are missed ticks (`policy.catchUp`).
const MAX_STEPS: usize = 100_000;

/// Longest an advance waits, in real time, for the engine to settle (the app to answer);
/// past it the clock jumps to the end.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// How often an advance asks the engine whether it has settled.
const POLL: Duration = Duration::from_millis(2);

/// The manual clock of a `--test-clock` sidecar.
#[derive(Debug, Clone)]
pub struct TestClock {
    /// The clock every part of the sidecar reads.
    clock: ManualClock,
    /// One advance at a time: two interleaved would step past each other's fire times.
    advancing: Arc<tokio::sync::Mutex<()>>,
}

impl TestClock {
    /// The test clock moving `clock`.
    pub fn new(clock: ManualClock) -> Self {
        TestClock {
            clock,
            advancing: Arc::default(),
        }
    }
}

/// Where an advance goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// Forward by this much.
    By(TimeDelta),
    /// To this instant.
    To(DateTime<Utc>),
}

/// What the routes answer without `--test-clock`.
fn clock_off() -> ApiError {
    ApiError::Legacy {
        code: tonic::Code::FailedPrecondition,
        http: StatusCode::PRECONDITION_FAILED,
        error_code: "ERR_JOBSD_TEST_CLOCK_OFF",
        message: "the test clock is off: start jobsd with --test-clock (or JOBSD_TEST_CLOCK=true) \
                  to move its time by hand"
            .to_owned(),
    }
}

impl ApiState {
    fn test_clock(&self) -> Result<&TestClock, ApiError> {
        self.test_clock.as_ref().ok_or_else(clock_off)
    }

    /// The test clock's time.
    pub fn clock_now(&self) -> Result<DateTime<Utc>, ApiError> {
        Ok(self.test_clock()?.clock.now())
    }

    /// Moves the test clock forward through every fire time on the way (see the module);
    /// answers the time before and after.
    pub async fn advance_clock(
        &self,
        advance: Advance,
    ) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
        let test = self.test_clock()?;
        let _one = test.advancing.lock().await;
        let clock = &test.clock;
        let previous = clock.now();
        let target = match advance {
            Advance::By(by) if by < TimeDelta::zero() => {
                return Err(bad_request(
                    "by: the test clock only moves forward".to_owned(),
                ));
            }
            Advance::By(by) => previous.checked_add_signed(by),
            Advance::To(to) if to < previous => {
                return Err(bad_request(format!(
                    "to: {} is before the test clock's time {}; it only moves forward",
                    rfc3339(to),
                    rfc3339(previous)
                )));
            }
            Advance::To(to) => Some(to),
        }
        .ok_or_else(|| bad_request("by: too far".to_owned()))?;
        let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
        for _ in 0..MAX_STEPS {
            if !self.settle(clock, deadline).await {
                break;
            }
            let next = self.scheduler.sync().await.and_then(|s| s.next_event());
            match next {
                Some(at) if at <= target && at > clock.now() => clock.set(at),
                _ => break,
            }
        }
        clock.set(target.max(clock.now()));
        self.settle(clock, deadline).await;
        Ok((previous, clock.now()))
    }

    /// Waits until the trigger loop has nothing out or being written and nothing due at the
    /// clock's time; `false` once `deadline` passes first (or there is no loop here).
    async fn settle(&self, clock: &ManualClock, deadline: tokio::time::Instant) -> bool {
        loop {
            let Some(stats) = self.scheduler.sync().await else {
                return false;
            };
            if stats.outstanding == 0 && stats.next_event().is_none_or(|t| t > clock.now()) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!("test clock: the app did not answer in time; jumping ahead");
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// The routes, to merge into jobsd's router.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobsd/v1/clock", get(now))
        .route("/jobsd/v1/clock/advance", post(advance))
}

async fn now(State(state): State<Shared>) -> Response {
    super::http::respond(
        state
            .clock_now()
            .map(|now| json_response(json!({ "now": rfc3339(now) }).to_string())),
    )
}

/// `{"by": "1h"}` or `{"to": "2026-01-01T00:00:00Z"}`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AdvanceBody {
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    to: Option<String>,
}

/// The advance a body or an RPC asks for: exactly one of `by` (a Go duration) and `to`
/// (RFC 3339).
pub(super) fn parse_advance(by: Option<&str>, to: Option<&str>) -> Result<Advance, ApiError> {
    match (by.filter(|b| !b.is_empty()), to.filter(|t| !t.is_empty())) {
        (Some(by), None) => crate::schedule::duration::parse(by)
            .map(|nanos| Advance::By(TimeDelta::nanoseconds(nanos)))
            .map_err(|e| bad_request(format!("by: {by:?} is not a Go duration: {e}"))),
        (None, Some(to)) => crate::schedule::rfc3339::parse(to)
            .map(Advance::To)
            .map_err(|e| bad_request(format!("to: {to:?} is not an RFC 3339 time: {e}"))),
        _ => Err(bad_request(
            "give one of by (a Go duration, \"1h\") and to (an RFC 3339 time)".to_owned(),
        )),
    }
}

async fn advance(State(state): State<Shared>, body: Body) -> Response {
    super::http::respond(
        async {
            state.test_clock()?;
            let bytes = read_body(body, state.body_limit()).await?;
            let body: AdvanceBody =
                serde_json::from_slice(&bytes).map_err(|e| bad_request(format!("body: {e}")))?;
            let advance = parse_advance(body.by.as_deref(), body.to.as_deref())?;
            let (previous, now) = state.advance_clock(advance).await?;
            Ok(json_response(
                json!({ "previous": rfc3339(previous), "now": rfc3339(now) }).to_string(),
            ))
        }
        .await,
    )
}
