//! Dapr Resiliency policies (timeouts, retries, circuit breakers) applied to the calls
//! jobsd makes to an app, i.e. job deliveries.
//!
//! Resources are Dapr's own `Resiliency` YAML (`apiVersion: dapr.io/v1alpha1`), read from the
//! `--resources-path` folder like daprd does: every `*.yaml`/`*.yml` file, in file-name order,
//! documents of other kinds skipped, `scopes` honoured, later definitions of a name replacing
//! earlier ones. Unlike daprd, which logs and skips what it cannot use, loading fails with the
//! file and field at fault: bad durations, bad status-code lists, CEL `trip` errors, and
//! targets naming policies that do not exist.
//!
//! - [`config`]: the resource as written, and its validation.
//! - [`backoff`]: cenkalti/backoff v4 (constant, exponential, max retries).
//! - [`breaker`]: sony/gobreaker with a CEL `trip`.
//! - [`policy`]: [`Policy::execute`], the retry loop around timeout and breaker.

pub mod backoff;
pub mod breaker;
pub mod config;
mod counts;
pub mod policy;
mod trip;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

pub use breaker::{BreakerSettings, CircuitBreaker, Counts, State, Trip};
pub use policy::{CodeRange, Failure, Matching, Policy, PolicyError, RetryConfig, RetryKind};

use config::{Catalog, KIND, ResiliencyDoc, split_documents};

/// Why the resiliency resources could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The folder or a file in it could not be read.
    #[error("resiliency: cannot read {}: {source}", path.display())]
    Io {
        /// The folder or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A document is not valid YAML, or a `Resiliency` field has the wrong type.
    #[error("resiliency: {file}: document {document}: {message}")]
    Yaml {
        /// The file (or `<memory>`).
        file: String,
        /// 1-based index of the document in the file.
        document: usize,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A `Resiliency` value is invalid or names a policy that does not exist.
    #[error("resiliency: {file}: Resiliency {resource:?}: {field}: {message}")]
    Invalid {
        /// The file (or `<memory>`).
        file: String,
        /// `metadata.name` of the resource.
        resource: String,
        /// The field at fault, e.g. `spec.policies.retries.fast.duration`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// Dapr's names for the policies that apply to apps without a `targets.apps` entry
/// (`Default%sRetryPolicy` etc. with level `App`, then the top level).
const DEFAULT_TIMEOUTS: [&str; 2] = ["DefaultAppTimeoutPolicy", "DefaultTimeoutPolicy"];
const DEFAULT_RETRIES: [&str; 2] = ["DefaultAppRetryPolicy", "DefaultRetryPolicy"];
const DEFAULT_BREAKERS: [&str; 2] = [
    "DefaultAppCircuitBreakerPolicy",
    "DefaultCircuitBreakerPolicy",
];

/// How many apps without a target get a cached default policy (Dapr keeps an LRU of 100
/// breakers per app); past that each lookup gets a fresh policy, so memory stays bounded.
const MAX_DEFAULT_POLICIES: usize = 1024;

/// The loaded resiliency resources: the policy for each app.
#[derive(Debug, Default)]
pub struct Resiliency {
    /// Policies of `targets.apps`, built once so their breakers persist across calls.
    apps: HashMap<String, Arc<Policy>>,
    /// The `Default*Policy` parts, if any is defined.
    defaults: Option<Parts>,
    /// Default policies handed out so far, per app id (each has its own breaker, as in Dapr).
    default_policies: Mutex<HashMap<String, Arc<Policy>>>,
}

/// What a policy is built from.
#[derive(Debug, Clone, Default)]
struct Parts {
    timeout: Option<Duration>,
    retry: Option<RetryConfig>,
    breaker: Option<BreakerSettings>,
}

impl Parts {
    fn policy(&self, app_id: &str) -> Policy {
        Policy::new(
            format!("app[{app_id}]"),
            self.timeout,
            self.retry.clone(),
            self.breaker.as_ref(),
        )
    }
}

impl Resiliency {
    /// No policies: every call is made once, without timeout or breaker.
    pub fn empty() -> Self {
        Resiliency::default()
    }

    /// Loads every `Resiliency` document of the `*.yaml`/`*.yml` files in `dir` that applies
    /// to `app_id`. A folder that does not exist holds no policies (as in daprd).
    pub fn load_dir(dir: &Path, app_id: &str) -> Result<Resiliency, Error> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::empty()),
            Err(e) => return Err(io(dir)(e)),
        };
        let mut files = Vec::new();
        for entry in entries {
            let path = entry.map_err(io(dir))?.path();
            let is_yaml = path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
            if is_yaml && std::fs::metadata(&path).map_err(io(&path))?.is_file() {
                files.push(path);
            }
        }
        // daprd reads the folder in file-name order (os.ReadDir), which decides who wins
        // when two resources define the same name.
        files.sort();
        let mut catalog = Catalog::default();
        for path in &files {
            let text = std::fs::read_to_string(path).map_err(io(path))?;
            add_yaml(&mut catalog, &text, &path.display().to_string(), app_id)?;
        }
        Self::from_catalog(catalog)
    }

    /// Loads the `Resiliency` documents of one YAML text (possibly multi-document) that apply
    /// to `app_id`; errors name the file as `<memory>`. The parser entry point of
    /// [`Resiliency::load_dir`], exposed for fuzzing and tests.
    pub fn from_yaml_str(text: &str, app_id: &str) -> Result<Resiliency, Error> {
        let mut catalog = Catalog::default();
        add_yaml(&mut catalog, text, "<memory>", app_id)?;
        Self::from_catalog(catalog)
    }

    /// The policy for calls to app `app_id`: its `targets.apps` entry, else Dapr's default
    /// app policies (`DefaultAppRetryPolicy`, `DefaultRetryPolicy`, …) if any is defined.
    /// The same `Arc` comes back for the same app, so its circuit breaker sees every call.
    pub fn app_policy(&self, app_id: &str) -> Option<Arc<Policy>> {
        if let Some(policy) = self.apps.get(app_id) {
            return Some(policy.clone());
        }
        let parts = self.defaults.as_ref()?;
        let mut cache = self
            .default_policies
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(policy) = cache.get(app_id) {
            return Some(policy.clone());
        }
        let policy = Arc::new(parts.policy(app_id));
        if cache.len() < MAX_DEFAULT_POLICIES {
            cache.insert(app_id.to_string(), policy.clone());
        }
        Some(policy)
    }

    /// Whether no policy applies to any app.
    pub fn is_empty(&self) -> bool {
        self.apps.is_empty() && self.defaults.is_none()
    }

    fn from_catalog(catalog: Catalog) -> Result<Resiliency, Error> {
        let mut apps = HashMap::new();
        for (app, target) in &catalog.apps {
            let field = |kind: &str| format!("spec.targets.apps.{app}.{kind}");
            let missing = |kind: &str, name: &str, defined: Vec<&String>| {
                let defined = if defined.is_empty() {
                    "none are defined".to_string()
                } else {
                    let names: Vec<&str> = defined.into_iter().map(String::as_str).collect();
                    format!("defined: {}", names.join(", "))
                };
                target.origin.error(
                    field(kind),
                    format!("no {kind} policy named {name:?} ({defined})"),
                )
            };
            let named = |name: &Option<String>| name.clone().filter(|n| !n.is_empty());
            let timeout =
                match named(&target.spec.timeout) {
                    None => None,
                    Some(name) => Some(*catalog.timeouts.get(&name).ok_or_else(|| {
                        missing("timeout", &name, catalog.timeouts.keys().collect())
                    })?),
                };
            let retry =
                match named(&target.spec.retry) {
                    None => None,
                    Some(name) => Some(catalog.retries.get(&name).cloned().ok_or_else(|| {
                        missing("retry", &name, catalog.retries.keys().collect())
                    })?),
                };
            let breaker = match named(&target.spec.circuit_breaker) {
                None => None,
                Some(name) => Some(catalog.breakers.get(&name).cloned().ok_or_else(|| {
                    missing("circuitBreaker", &name, catalog.breakers.keys().collect())
                })?),
            };
            let parts = Parts {
                timeout,
                retry,
                breaker,
            };
            apps.insert(app.clone(), Arc::new(parts.policy(app)));
        }
        let defaults = Parts {
            timeout: DEFAULT_TIMEOUTS
                .iter()
                .find_map(|n| catalog.timeouts.get(*n).copied()),
            retry: DEFAULT_RETRIES
                .iter()
                .find_map(|n| catalog.retries.get(*n).cloned()),
            breaker: DEFAULT_BREAKERS
                .iter()
                .find_map(|n| catalog.breakers.get(*n).cloned()),
        };
        let any_default =
            defaults.timeout.is_some() || defaults.retry.is_some() || defaults.breaker.is_some();
        Ok(Resiliency {
            apps,
            defaults: any_default.then_some(defaults),
            default_policies: Mutex::default(),
        })
    }
}

/// The part of any resource document needed to know whether it is ours.
#[derive(Deserialize)]
struct Head {
    kind: Option<Scalar>,
}

/// Any YAML scalar, as text (so a document with `kind: 5` is "not ours", not an error).
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a scalar")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar(String::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Adds the `Resiliency` documents of `text` that apply to `app_id` to `catalog`.
fn add_yaml(catalog: &mut Catalog, text: &str, file: &str, app_id: &str) -> Result<(), Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, (lines_before, chunk)) in split_documents(text).into_iter().enumerate() {
        // Each document is parsed on its own, so that one of another kind whose fields
        // happen to clash with ours cannot fail the load; the padding keeps line numbers.
        let source = format!("{}{chunk}", "\n".repeat(lines_before));
        let yaml_error = |e: serde_saphyr::Error| Error::Yaml {
            file: file.to_string(),
            document: index + 1,
            message: e.to_string(),
        };
        let head: Option<Head> = serde_saphyr::from_str(&source).map_err(yaml_error)?;
        if head.and_then(|h| h.kind).is_none_or(|k| k.0 != KIND) {
            continue;
        }
        let doc: ResiliencyDoc = serde_saphyr::from_str(&source).map_err(yaml_error)?;
        if doc.applies_to(app_id) {
            catalog.add(&doc, file)?;
        }
    }
    Ok(())
}
