//! Running one call under a policy: per-attempt timeout, circuit breaker, retries.
//!
//! The layering is Dapr's `NewRunnerWithOptions` (`pkg/resiliency/policy.go`): the timeout
//! wraps the call, the breaker wraps the timed call (so a timeout counts as a breaker
//! failure), and the retry loop wraps the breaker (so every attempt passes the breaker, and
//! its rejections end the loop at once).

use std::fmt;
use std::time::{Duration, Instant};

use super::backoff::{
    BackOff, ConstantBackOff, DEFAULT_INITIAL_INTERVAL, DEFAULT_MAX_ELAPSED_TIME,
    DEFAULT_MAX_INTERVAL, DEFAULT_MULTIPLIER, DEFAULT_RANDOMIZATION_FACTOR, ExponentialBackOff,
    WithMaxRetries,
};
use super::breaker::{BreakerSettings, CircuitBreaker, Rejection};

/// How a failed attempt looked, for `matching` and the breaker.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Failure {
    /// The HTTP status the app answered with, if the call got that far over HTTP.
    pub http_status: Option<u16>,
    /// The gRPC status code the app answered with, if the call got that far over gRPC.
    pub grpc_code: Option<i32>,
    /// What went wrong, for logs and the caller.
    pub message: String,
}

impl Failure {
    /// A failure the app reported with an HTTP status.
    pub fn http(status: u16, message: impl Into<String>) -> Self {
        Failure {
            http_status: Some(status),
            grpc_code: None,
            message: message.into(),
        }
    }

    /// A failure the app reported with a gRPC status code.
    pub fn grpc(code: i32, message: impl Into<String>) -> Self {
        Failure {
            http_status: None,
            grpc_code: Some(code),
            message: message.into(),
        }
    }

    /// A failure without a status (connection refused, reset, malformed answer, …).
    pub fn other(message: impl Into<String>) -> Self {
        Failure {
            http_status: None,
            grpc_code: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match (self.http_status, self.grpc_code) {
            (Some(h), Some(g)) => write!(f, " (HTTP status {h}, gRPC code {g})"),
            (Some(h), None) => write!(f, " (HTTP status {h})"),
            (None, Some(g)) => write!(f, " (gRPC code {g})"),
            (None, None) => Ok(()),
        }
    }
}

impl std::error::Error for Failure {}

/// Why [`Policy::execute`] gave up. It is always the outcome of the last attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The last attempt ran past the policy's timeout and was cancelled.
    #[error("the call timed out (resiliency timeout policy)")]
    Timeout,
    /// The circuit breaker is open: the call was not made.
    #[error("circuit breaker is open: the call was not made")]
    CircuitOpen,
    /// The circuit breaker is half-open and its trial calls are taken: the call was not made.
    #[error(
        "circuit breaker is half-open and has no trial call left (too many requests): the call was not made"
    )]
    TooManyRequests,
    /// The last attempt failed.
    #[error("{0}")]
    Failed(Failure),
}

impl From<Rejection> for PolicyError {
    fn from(r: Rejection) -> Self {
        match r {
            Rejection::Open => PolicyError::CircuitOpen,
            Rejection::TooManyRequests => PolicyError::TooManyRequests,
        }
    }
}

/// An inclusive range of status codes in a `matching` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeRange {
    /// First code of the range.
    pub start: i32,
    /// Last code of the range (inclusive).
    pub end: i32,
}

impl CodeRange {
    fn contains(&self, code: i32) -> bool {
        self.start <= code && code <= self.end
    }
}

/// Which failures a retry policy retries (`matching`). A list that is `None` (field absent or
/// `""`) retries every code of its protocol; a list that is present retries only the codes it
/// names. A failure without a code of that protocol is not filtered by it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matching {
    /// `httpStatusCodes`.
    pub http_status_codes: Option<Vec<CodeRange>>,
    /// `gRPCStatusCodes`.
    pub grpc_status_codes: Option<Vec<CodeRange>>,
}

impl Matching {
    /// Whether `failure` may be retried.
    pub fn is_retryable(&self, failure: &Failure) -> bool {
        let allows = |ranges: &Option<Vec<CodeRange>>, code: i32| match ranges {
            None => true,
            Some(ranges) => ranges.iter().any(|r| r.contains(code)),
        };
        failure
            .http_status
            .is_none_or(|code| allows(&self.http_status_codes, i32::from(code)))
            && failure
                .grpc_code
                .is_none_or(|code| allows(&self.grpc_status_codes, code))
    }
}

/// The delay strategy of a retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryKind {
    /// The same delay (`duration`) between attempts.
    #[default]
    Constant,
    /// cenkalti's exponential backoff.
    Exponential,
}

/// One `retries` entry, with Dapr's defaults (`dapr/kit/retry.DefaultConfig`) filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// `policy`.
    pub kind: RetryKind,
    /// `duration`: the constant delay (default 5 s).
    pub duration: Duration,
    /// `initialInterval` (exponential; default 500 ms).
    pub initial_interval: Duration,
    /// `randomizationFactor` (exponential; default 0.5).
    pub randomization_factor: f64,
    /// `multiplier` (exponential; default 1.5).
    pub multiplier: f64,
    /// `maxInterval` (exponential; default 60 s).
    pub max_interval: Duration,
    /// `maxElapsedTime` (exponential; default 15 min; zero means no limit).
    pub max_elapsed_time: Duration,
    /// `maxRetries`: retries after the first attempt; −1 means no limit (the default).
    pub max_retries: i64,
    /// `matching`: which failures are retried; `None` retries all.
    pub matching: Option<Matching>,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            kind: RetryKind::Constant,
            duration: Duration::from_secs(5),
            initial_interval: DEFAULT_INITIAL_INTERVAL,
            randomization_factor: DEFAULT_RANDOMIZATION_FACTOR,
            multiplier: DEFAULT_MULTIPLIER,
            max_interval: DEFAULT_MAX_INTERVAL,
            max_elapsed_time: DEFAULT_MAX_ELAPSED_TIME,
            max_retries: -1,
            matching: None,
        }
    }
}

impl RetryConfig {
    /// A fresh backoff for one run of the retry loop (`retry.Config.NewBackOff`), reset at
    /// `now`, drawing jitter from `rng`.
    pub fn new_backoff(&self, rng: fastrand::Rng, now: Instant) -> Box<dyn BackOff + Send> {
        let inner: Box<dyn BackOff + Send> = match self.kind {
            RetryKind::Constant => Box::new(ConstantBackOff::new(self.duration)),
            RetryKind::Exponential => {
                let mut b = ExponentialBackOff::new(rng);
                b.initial_interval = self.initial_interval;
                b.randomization_factor = self.randomization_factor;
                b.multiplier = self.multiplier;
                b.max_interval = self.max_interval;
                b.max_elapsed_time = self.max_elapsed_time;
                Box::new(b)
            }
        };
        let mut backoff: Box<dyn BackOff + Send> = match u64::try_from(self.max_retries) {
            Ok(max) => Box::new(WithMaxRetries::new(inner, max)),
            Err(_) => inner,
        };
        backoff.reset(now);
        backoff
    }

    fn is_retryable(&self, failure: &Failure) -> bool {
        self.matching
            .as_ref()
            .is_none_or(|m| m.is_retryable(failure))
    }
}

/// Timeout, retry and circuit breaker for calls to one target, e.g. job deliveries to an app.
/// Shared (`Arc`) by all calls to that target, so its breaker sees all of them.
#[derive(Debug)]
pub struct Policy {
    /// For logs, e.g. `app[myapp]`.
    name: String,
    /// Per-attempt limit; `None` waits as long as the call takes.
    timeout: Option<Duration>,
    /// `None`: one attempt only.
    retry: Option<RetryConfig>,
    /// `None`: no breaker.
    breaker: Option<CircuitBreaker>,
    /// Fixed jitter seed for tests; `None` seeds each run randomly.
    rng_seed: Option<u64>,
}

/// The clock the policy reads: tokio's, so paused test runtimes move it together with the
/// sleeps and timeouts.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Policy {
    /// A policy named `name` (for logs). A zero timeout means none, as in Dapr.
    pub fn new(
        name: impl Into<String>,
        timeout: Option<Duration>,
        retry: Option<RetryConfig>,
        breaker: Option<&BreakerSettings>,
    ) -> Self {
        let name = name.into();
        let breaker = breaker.map(|s| CircuitBreaker::new(name.clone(), s, now()));
        Policy {
            name,
            timeout: timeout.filter(|t| !t.is_zero()),
            retry,
            breaker,
            rng_seed: None,
        }
    }

    /// The same policy drawing backoff jitter from a fixed seed, for deterministic tests.
    pub fn with_rng_seed(mut self, seed: u64) -> Self {
        self.rng_seed = Some(seed);
        self
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The per-attempt timeout, if any.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The retry configuration, if any.
    pub fn retry(&self) -> Option<&RetryConfig> {
        self.retry.as_ref()
    }

    /// The circuit breaker, if any.
    pub fn breaker(&self) -> Option<&CircuitBreaker> {
        self.breaker.as_ref()
    }

    /// Runs `op` under the policy: per-attempt timeout, breaker gate and accounting, retries
    /// with the backoff for failures the `matching` rules call retryable. Returns the last
    /// failure when retries run out. Breaker rejections and failures `matching` excludes end
    /// the loop at once; timeouts and failures without a status stay retryable.
    pub async fn execute<T, F, Fut>(&self, mut op: F) -> Result<T, PolicyError>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, Failure>> + Send,
        T: Send,
    {
        let mut backoff = self.retry.as_ref().map(|r| {
            let rng = match self.rng_seed {
                Some(seed) => fastrand::Rng::with_seed(seed),
                None => fastrand::Rng::new(),
            };
            r.new_backoff(rng, now())
        });
        let mut attempts: u64 = 0;
        loop {
            attempts += 1;
            let err = match self.attempt(&mut op).await {
                Ok(value) => {
                    if attempts > 1 {
                        tracing::info!(policy = %self.name, attempts, "recovered after retries");
                    }
                    return Ok(value);
                }
                Err(err) => err,
            };
            let retryable = match (&err, &self.retry) {
                (PolicyError::CircuitOpen | PolicyError::TooManyRequests, _) => false,
                (PolicyError::Failed(failure), Some(retry)) => retry.is_retryable(failure),
                (PolicyError::Timeout, Some(_)) => true,
                (_, None) => false,
            };
            let delay = match backoff.as_mut() {
                Some(b) if retryable => b.next_backoff(now()),
                _ => None,
            };
            let Some(delay) = delay else { return Err(err) };
            tracing::debug!(
                policy = %self.name, attempts, error = %err, ?delay,
                "attempt failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt<T, F, Fut>(&self, op: &mut F) -> Result<T, PolicyError>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T, Failure>> + Send,
        T: Send,
    {
        let mut ticket = match &self.breaker {
            Some(cb) => Some(Ticket {
                breaker: cb,
                generation: cb.before_request(now())?,
                recorded: false,
            }),
            None => None,
        };
        let call = op();
        let result = match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, call).await {
                Ok(outcome) => outcome.map_err(PolicyError::Failed),
                Err(_elapsed) => Err(PolicyError::Timeout),
            },
            None => call.await.map_err(PolicyError::Failed),
        };
        if let Some(ticket) = ticket.as_mut() {
            ticket.record(result.is_ok());
        }
        result
    }
}

/// An admitted breaker request whose outcome is still due.
struct Ticket<'a> {
    breaker: &'a CircuitBreaker,
    generation: u64,
    recorded: bool,
}

impl Ticket<'_> {
    fn record(&mut self, success: bool) {
        self.recorded = true;
        self.breaker.after_request(self.generation, success, now());
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        // The caller dropped the call mid-flight (or it panicked). Count it as a failure, as
        // gobreaker does for a panic: leaving it unrecorded would keep a half-open breaker's
        // trial slot taken forever.
        if !self.recorded {
            self.record(false);
        }
    }
}
