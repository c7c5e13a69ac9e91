//! The `Resiliency` resource as written (Dapr's CRD, `apiVersion: dapr.io/v1alpha1`,
//! `kind: Resiliency`), read from YAML with serde-saphyr, and its validation into the values
//! the policies run with.
//!
//! Field names and shapes follow `pkg/apis/resiliency/v1alpha1/types.go`; unknown fields are
//! ignored, as Dapr ignores them. Only `targets.apps` is applied (job deliveries call an app);
//! `targets.actors` and `targets.components` are accepted and ignored.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::Error;
use super::breaker::{BreakerSettings, Trip};
use super::policy::{CodeRange, Matching, RetryConfig, RetryKind};

/// The `kind` of the documents this module reads; others are skipped.
pub const KIND: &str = "Resiliency";

/// One `Resiliency` document.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResiliencyDoc {
    /// `apiVersion`, e.g. `dapr.io/v1alpha1` (not checked, as in Dapr).
    pub api_version: Option<String>,
    /// `kind`: `Resiliency`.
    pub kind: Option<String>,
    /// `metadata`; the name appears in error messages.
    pub metadata: Option<Metadata>,
    /// App ids the resource applies to; absent or empty means every app.
    pub scopes: Option<Vec<String>>,
    /// `spec`.
    pub spec: Option<Spec>,
}

impl ResiliencyDoc {
    /// `metadata.name`, or `""`.
    pub fn name(&self) -> &str {
        self.metadata
            .as_ref()
            .and_then(|m| m.name.as_deref())
            .unwrap_or_default()
    }

    /// Whether the resource applies to `app_id` (Dapr's `filterResiliencyConfigs`).
    pub fn applies_to(&self, app_id: &str) -> bool {
        match &self.scopes {
            None => true,
            Some(scopes) => scopes.is_empty() || scopes.iter().any(|s| s == app_id),
        }
    }
}

/// `metadata` (Kubernetes `ObjectMeta`; only these fields are read).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Metadata {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
}

/// `spec`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Spec {
    /// `spec.policies`: named timeouts, retries and circuit breakers.
    pub policies: Option<Policies>,
    /// `spec.targets`: which policies apply to what.
    pub targets: Option<Targets>,
}

/// `spec.policies`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policies {
    /// Name → Go duration (a bare integer is milliseconds, as in Dapr).
    pub timeouts: Option<BTreeMap<String, GoDuration>>,
    /// Name → retry policy.
    pub retries: Option<BTreeMap<String, RetrySpec>>,
    /// Name → circuit breaker.
    pub circuit_breakers: Option<BTreeMap<String, CircuitBreakerSpec>>,
}

/// One `spec.policies.retries` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrySpec {
    /// `constant` (default) or `exponential`, case-insensitive.
    pub policy: Option<String>,
    /// Delay of the constant policy (default 5 s).
    pub duration: Option<GoDuration>,
    /// First interval of the exponential policy (default 500 ms). Dapr's CRD has no such
    /// field and so ignores it; jobsd honours it.
    pub initial_interval: Option<GoDuration>,
    /// Jitter of the exponential policy, in `[0, 1]` (default 0.5; Dapr ignores it).
    pub randomization_factor: Option<f64>,
    /// Growth of the exponential policy, at least 1 (default 1.5; Dapr ignores it).
    pub multiplier: Option<f64>,
    /// Cap on the exponential interval (default 60 s).
    pub max_interval: Option<GoDuration>,
    /// Give up after this much time since the first attempt (exponential; default 15 min;
    /// `0` means never; Dapr ignores it).
    pub max_elapsed_time: Option<GoDuration>,
    /// Retries after the first attempt; −1 (the default) means no limit.
    pub max_retries: Option<i64>,
    /// Which failures are retried.
    pub matching: Option<MatchingSpec>,
}

/// `matching` of a retry policy.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MatchingSpec {
    /// E.g. `"500,502-504"`; valid codes 100–599.
    #[serde(rename = "httpStatusCodes")]
    pub http_status_codes: Option<String>,
    /// E.g. `"2,14"`; valid codes 0–16.
    #[serde(rename = "gRPCStatusCodes")]
    pub grpc_status_codes: Option<String>,
}

/// One `spec.policies.circuitBreakers` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CircuitBreakerSpec {
    /// Trial requests while half-open (0 or absent: 1).
    pub max_requests: Option<u32>,
    /// Closed-state count reset period (absent or 0: never).
    pub interval: Option<GoDuration>,
    /// Open-state period (absent or 0: 60 s).
    pub timeout: Option<GoDuration>,
    /// CEL over the counters (absent or empty: `consecutiveFailures > 5`).
    pub trip: Option<String>,
}

/// `spec.targets` (only `apps` is read).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Targets {
    /// App id → policy names.
    pub apps: Option<BTreeMap<String, AppTargetSpec>>,
}

/// One `spec.targets.apps` entry: names of policies defined under `spec.policies` (of any
/// loaded resource).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppTargetSpec {
    /// A `timeouts` name.
    pub timeout: Option<String>,
    /// A `retries` name.
    pub retry: Option<String>,
    /// A `circuitBreakers` name.
    pub circuit_breaker: Option<String>,
}

/// A duration as written: Go syntax (`5s`, `1m30s`) or a bare integer of milliseconds. YAML
/// integers are accepted too (Dapr's CRD wants strings but reads `"5000"` as 5 s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoDuration(pub String);

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"5s\" or a number of milliseconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<GoDuration, E> {
                Ok(GoDuration(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<GoDuration, E> {
                Ok(GoDuration(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<GoDuration, E> {
                Ok(GoDuration(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl GoDuration {
    /// The duration. Like Dapr, a bare (optionally signed) integer is milliseconds and
    /// anything else is Go's `time.ParseDuration`; unlike Dapr, negative values and
    /// millisecond counts that overflow are errors.
    pub fn parse(&self) -> Result<Duration, String> {
        let text = self.0.as_str();
        let nanos = match text.parse::<i64>() {
            Ok(ms) => ms
                .checked_mul(1_000_000)
                .ok_or_else(|| format!("{text:?} milliseconds is out of range"))?,
            Err(_) => crate::schedule::duration::parse(text).map_err(|e| e.to_string())?,
        };
        u64::try_from(nanos)
            .map(Duration::from_nanos)
            .map_err(|_| format!("negative duration {text:?}"))
    }
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// File path (or `<memory>`).
    pub file: String,
    /// `metadata.name` of the resource.
    pub resource: String,
}

impl Origin {
    pub(crate) fn error(&self, field: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Invalid {
            file: self.file.clone(),
            resource: self.resource.clone(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An app target after parsing, with where it was written.
#[derive(Debug, Clone)]
pub(crate) struct AppTarget {
    pub origin: Origin,
    pub spec: AppTargetSpec,
}

/// All policies of the resources that apply to this app, merged in load order (a later
/// definition of a name replaces an earlier one, as in Dapr).
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub timeouts: BTreeMap<String, Duration>,
    pub retries: BTreeMap<String, RetryConfig>,
    pub breakers: BTreeMap<String, BreakerSettings>,
    pub apps: BTreeMap<String, AppTarget>,
}

impl Catalog {
    /// Validates `doc` and merges it in.
    pub(crate) fn add(&mut self, doc: &ResiliencyDoc, file: &str) -> Result<(), Error> {
        let origin = Origin {
            file: file.to_string(),
            resource: doc.name().to_string(),
        };
        let Some(spec) = &doc.spec else { return Ok(()) };
        if let Some(policies) = &spec.policies {
            for (name, text) in policies.timeouts.iter().flatten() {
                let field = format!("spec.policies.timeouts.{name}");
                let d = text.parse().map_err(|e| origin.error(&field, e))?;
                self.timeouts.insert(name.clone(), d);
            }
            for (name, retry) in policies.retries.iter().flatten() {
                let field = format!("spec.policies.retries.{name}");
                let config = retry_config(retry, &field, &origin)?;
                self.retries.insert(name.clone(), config);
            }
            for (name, cb) in policies.circuit_breakers.iter().flatten() {
                let field = format!("spec.policies.circuitBreakers.{name}");
                let settings = breaker_settings(cb, &field, &origin)?;
                self.breakers.insert(name.clone(), settings);
            }
        }
        if let Some(targets) = &spec.targets {
            for (app, target) in targets.apps.iter().flatten() {
                self.apps.insert(
                    app.clone(),
                    AppTarget {
                        origin: origin.clone(),
                        spec: target.clone(),
                    },
                );
            }
        }
        Ok(())
    }
}

fn retry_config(spec: &RetrySpec, field: &str, origin: &Origin) -> Result<RetryConfig, Error> {
    let mut config = RetryConfig::default();
    let duration = |value: &Option<GoDuration>, name: &str, into: &mut Duration| {
        if let Some(text) = value {
            *into = text
                .parse()
                .map_err(|e| origin.error(format!("{field}.{name}"), e))?;
        }
        Ok::<(), Error>(())
    };
    if let Some(policy) = &spec.policy {
        config.kind = match policy.to_ascii_lowercase().as_str() {
            // Dapr's CRD drops an empty string (`omitempty`), leaving the default.
            "constant" | "" => RetryKind::Constant,
            "exponential" => RetryKind::Exponential,
            _ => {
                return Err(origin.error(
                    format!("{field}.policy"),
                    format!("unexpected back off policy type {policy:?} (constant or exponential)"),
                ));
            }
        };
    }
    duration(&spec.duration, "duration", &mut config.duration)?;
    duration(
        &spec.initial_interval,
        "initialInterval",
        &mut config.initial_interval,
    )?;
    duration(&spec.max_interval, "maxInterval", &mut config.max_interval)?;
    duration(
        &spec.max_elapsed_time,
        "maxElapsedTime",
        &mut config.max_elapsed_time,
    )?;
    if let Some(f) = spec.randomization_factor {
        if !(0.0..=1.0).contains(&f) {
            return Err(origin.error(
                format!("{field}.randomizationFactor"),
                format!("{f} is not between 0 and 1"),
            ));
        }
        config.randomization_factor = f;
    }
    if let Some(m) = spec.multiplier {
        if !(m.is_finite() && m >= 1.0) {
            return Err(origin.error(format!("{field}.multiplier"), format!("{m} is not ≥ 1")));
        }
        config.multiplier = m;
    }
    if let Some(n) = spec.max_retries {
        if n < -1 {
            return Err(origin.error(
                format!("{field}.maxRetries"),
                format!("{n}: use -1 for no limit, or a count ≥ 0"),
            ));
        }
        config.max_retries = n;
    }
    if let Some(m) = &spec.matching {
        config.matching = Some(Matching {
            http_status_codes: code_ranges(m.http_status_codes.as_deref(), HTTP_CODES)
                .map_err(|e| origin.error(format!("{field}.matching.httpStatusCodes"), e))?,
            grpc_status_codes: code_ranges(m.grpc_status_codes.as_deref(), GRPC_CODES)
                .map_err(|e| origin.error(format!("{field}.matching.gRPCStatusCodes"), e))?,
        });
    }
    Ok(config)
}

/// Valid HTTP status codes (Dapr's `validHTTPStatusCodeRange`).
const HTTP_CODES: CodeRange = CodeRange {
    start: 100,
    end: 599,
};
/// Valid gRPC status codes (Dapr's `validGRPCStatusCodeRange`).
const GRPC_CODES: CodeRange = CodeRange { start: 0, end: 16 };

/// Dapr's `parsePatterns`: comma-separated codes and `start-end` ranges; empty items are
/// skipped; `""` or absent means "every code" (`None`).
fn code_ranges(text: Option<&str>, valid: CodeRange) -> Result<Option<Vec<CodeRange>>, String> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let mut ranges = Vec::new();
    for item in text.split(',').filter(|p| !p.is_empty()) {
        let parts: Vec<&str> = item.split('-').collect();
        let (start, end) = match parts.as_slice() {
            [one] => (*one, *one),
            [start, end] => (*start, *end),
            _ => return Err(format!("invalid pattern {item:?}: more than one '-'")),
        };
        let code = |s: &str| {
            let n: i64 = s
                .parse()
                .map_err(|_| format!("invalid pattern {item:?}: {s:?} is not a number"))?;
            i32::try_from(n)
                .ok()
                .filter(|&c| valid.start <= c && c <= valid.end)
                .ok_or_else(|| {
                    format!(
                        "invalid pattern {item:?}: code {n} is not in {}-{}",
                        valid.start, valid.end
                    )
                })
        };
        let (start, end) = (code(start)?, code(end)?);
        if end < start {
            return Err(format!(
                "invalid pattern {item:?}: start is bigger than end"
            ));
        }
        ranges.push(CodeRange { start, end });
    }
    // Like Dapr, a list of only commas keeps the field "present", so nothing matches.
    Ok(Some(ranges))
}

fn breaker_settings(
    spec: &CircuitBreakerSpec,
    field: &str,
    origin: &Origin,
) -> Result<BreakerSettings, Error> {
    let duration = |value: &Option<GoDuration>, name: &str| match value {
        None => Ok(Duration::ZERO),
        Some(text) => text
            .parse()
            .map_err(|e| origin.error(format!("{field}.{name}"), e)),
    };
    let trip = match spec.trip.as_deref() {
        None | Some("") => None,
        Some(source) => Some(Arc::new(Trip::compile(source).map_err(|e| {
            origin.error(format!("{field}.trip"), format!("{source:?} {e}"))
        })?)),
    };
    Ok(BreakerSettings {
        max_requests: spec.max_requests.unwrap_or(0),
        interval: duration(&spec.interval, "interval")?,
        timeout: duration(&spec.timeout, "timeout")?,
        trip,
    })
}

/// The documents of a multi-document YAML text, each with the number of lines before it so
/// that parser messages keep the file's line numbers.
///
/// A line starting with `---` or `...` (followed by nothing, a space or a tab) is a document
/// marker: YAML forbids such lines inside content, so splitting on them is exact. Prefix
/// chunks that hold only blank lines, comments and directives are merged into the next one.
pub(crate) fn split_documents(text: &str) -> Vec<(usize, &str)> {
    fn is_marker(line: &str, marker: &str) -> bool {
        line.strip_prefix(marker)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
    }
    fn has_content(chunk: &str) -> bool {
        chunk.lines().any(|l| {
            let t = l.trim();
            !(t.is_empty() || t.starts_with('#') || l.starts_with('%'))
        })
    }
    let mut docs = Vec::new();
    let (mut start, mut start_line) = (0usize, 0usize);
    let (mut offset, mut line_no) = (0usize, 0usize);
    for line in text.split_inclusive('\n') {
        let end_of_line = offset + line.len();
        // A `---` after only a prefix (comments, directives) belongs to the same document.
        if is_marker(line, "---") && has_content(&text[start..offset]) {
            docs.push((start_line, &text[start..offset]));
            (start, start_line) = (offset, line_no);
        } else if is_marker(line, "...") {
            if has_content(&text[start..offset]) {
                docs.push((start_line, &text[start..end_of_line]));
            }
            (start, start_line) = (end_of_line, line_no + 1);
        }
        offset = end_of_line;
        line_no += 1;
    }
    if has_content(&text[start..]) {
        docs.push((start_line, &text[start..]));
    }
    docs
}
