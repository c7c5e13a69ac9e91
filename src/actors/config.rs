//! What the app says about its actors: daprd's `GET /dapr/config` (`entities`,
//! `actorIdleTimeout`, `entitiesConfig`…), read into the types this sidecar hosts.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::schedule::duration;

/// daprd's default actor idle timeout (`pkg/actors/api/config.go`): 60 minutes.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// daprd's default `drainOngoingCallTimeout` (`DefaultOngoingCallTimeout`): how long a call
/// to an actor that moved to another host may still run before it is cancelled.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest drain: daprd clamps `drainOngoingCallTimeout` to 80 % of its dissemination
/// timeout (30 s by default), so a drain never holds a placement round past it.
pub const MAX_DRAIN_TIMEOUT: Duration = Duration::from_secs(24);

/// The app's answer to `GET /dapr/config`, as far as jobsd uses it. Unknown keys are
/// ignored, as Go's `encoding/json` does.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AppConfig {
    /// Actor types the app hosts.
    #[serde(default)]
    entities: Vec<String>,
    /// Go duration (the Python SDK writes `1h0m0s0ms0μs`).
    #[serde(default)]
    actor_idle_timeout: Option<String>,
    /// Per-type overrides.
    #[serde(default)]
    entities_config: Vec<EntityConfig>,
    /// How long calls to actors that moved may still run (Go duration).
    #[serde(default)]
    drain_ongoing_call_timeout: Option<String>,
    /// Whether calls to actors that moved may finish (`false`: cancelled at once).
    #[serde(default)]
    drain_rebalanced_actors: Option<bool>,
}

/// One `entitiesConfig` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntityConfig {
    /// The types it applies to.
    #[serde(default)]
    entities: Vec<String>,
    /// Their idle timeout.
    #[serde(default)]
    actor_idle_timeout: Option<String>,
}

/// The actor types this sidecar hosts, with their settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosted {
    /// Idle timeout per hosted type.
    pub types: BTreeMap<String, Duration>,
    /// How long a call to an actor that moved to another host may still run before it is
    /// cancelled (`drainOngoingCallTimeout`, clamped as daprd clamps it; zero with
    /// `drainRebalancedActors: false`).
    pub drain: Duration,
}

/// Why the app's actor configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The body is not the JSON daprd expects.
    #[error("cannot read the app's /dapr/config: {0}")]
    Json(String),
    /// The top-level idle timeout does not parse (daprd refuses to register the actors).
    #[error("failed to parse default actor idle timeout: {0}")]
    IdleTimeout(String),
}

impl Default for Hosted {
    fn default() -> Self {
        Hosted {
            types: BTreeMap::new(),
            drain: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

impl Hosted {
    /// Reads the app's `/dapr/config` body. A bad per-type timeout falls back to the
    /// default, as daprd does; a bad top-level one is an error.
    pub fn from_json(body: &[u8]) -> Result<Hosted, ConfigError> {
        let config: AppConfig =
            serde_json::from_slice(body).map_err(|e| ConfigError::Json(e.to_string()))?;
        let default = match config
            .actor_idle_timeout
            .as_deref()
            .filter(|s| !s.is_empty())
        {
            Some(text) => {
                parse_duration(text).ok_or_else(|| ConfigError::IdleTimeout(text.into()))?
            }
            None => DEFAULT_IDLE_TIMEOUT,
        };
        let mut types: BTreeMap<String, Duration> = config
            .entities
            .into_iter()
            .filter(|t| !t.is_empty())
            .map(|t| (t, default))
            .collect();
        for entry in config.entities_config {
            let Some(timeout) = entry.actor_idle_timeout.as_deref().and_then(parse_duration) else {
                continue;
            };
            for t in entry.entities {
                if let Some(slot) = types.get_mut(&t) {
                    *slot = timeout;
                }
            }
        }
        let drain = if config.drain_rebalanced_actors == Some(false) {
            Duration::ZERO
        } else {
            config
                .drain_ongoing_call_timeout
                .as_deref()
                .and_then(parse_duration)
                .unwrap_or(DEFAULT_DRAIN_TIMEOUT)
                .min(MAX_DRAIN_TIMEOUT)
        };
        Ok(Hosted { types, drain })
    }

    /// Whether `actor_type` is hosted here.
    pub fn hosts(&self, actor_type: &str) -> bool {
        self.types.contains_key(actor_type)
    }

    /// The idle timeout of `actor_type` (the default for a type not hosted).
    pub fn idle_timeout(&self, actor_type: &str) -> Duration {
        self.types
            .get(actor_type)
            .copied()
            .unwrap_or(DEFAULT_IDLE_TIMEOUT)
    }
}

/// A positive Go duration.
fn parse_duration(text: &str) -> Option<Duration> {
    let nanos = duration::parse(text).ok()?;
    u64::try_from(nanos).ok().map(Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_python_sdks_config() {
        let body = "{\"actorIdleTimeout\":\"1h0m0s0ms0\\u03bcs\",\"actorScanInterval\":\"0h0m30s0ms0\\u03bcs\",\
                    \"drainRebalancedActors\":true,\"entitiesConfig\":[],\"entities\":[\"DemoActor\"]}";
        let hosted = Hosted::from_json(body.as_bytes()).unwrap();
        assert!(hosted.hosts("DemoActor"));
        assert!(!hosted.hosts("Other"));
        assert_eq!(hosted.idle_timeout("DemoActor"), Duration::from_secs(3600));
    }

    #[test]
    fn per_type_timeouts_override_and_bad_ones_fall_back() {
        let body = r#"{"entities":["A","B","C"],"actorIdleTimeout":"10m",
            "entitiesConfig":[{"entities":["A"],"actorIdleTimeout":"5s"},
                              {"entities":["B"],"actorIdleTimeout":"soon"}]}"#;
        let hosted = Hosted::from_json(body.as_bytes()).unwrap();
        assert_eq!(hosted.idle_timeout("A"), Duration::from_secs(5));
        assert_eq!(hosted.idle_timeout("B"), Duration::from_secs(600));
        assert_eq!(hosted.idle_timeout("C"), Duration::from_secs(600));
        assert_eq!(
            Hosted::from_json(br#"{"entities":["A"],"actorIdleTimeout":"x"}"#).unwrap_err(),
            ConfigError::IdleTimeout("x".into())
        );
        assert_eq!(Hosted::from_json(b"{}").unwrap(), Hosted::default());
        assert!(Hosted::from_json(b"not json").is_err());
    }

    #[test]
    fn the_drain_time_is_daprds_clamped_or_zero_without_draining() {
        let read = |body: &str| Hosted::from_json(body.as_bytes()).unwrap().drain;
        assert_eq!(read(r#"{"entities":["A"]}"#), DEFAULT_DRAIN_TIMEOUT);
        assert_eq!(
            read(r#"{"entities":["A"],"drainOngoingCallTimeout":"5s"}"#),
            Duration::from_secs(5)
        );
        assert_eq!(
            read(r#"{"entities":["A"],"drainOngoingCallTimeout":"1m"}"#),
            MAX_DRAIN_TIMEOUT
        );
        assert_eq!(
            read(
                r#"{"entities":["A"],"drainOngoingCallTimeout":"5s","drainRebalancedActors":false}"#
            ),
            Duration::ZERO
        );
    }
}
