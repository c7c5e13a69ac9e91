//! Composed keys, as Dapr's Scheduler builds them (`pkg/scheduler/server/internal/serialize`):
//! `app||<namespace>||<app-id>||<name>` for app jobs and
//! `actorreminder||<namespace>||<actor-type>||<actor-id>||<name>` for actor reminders. Every
//! key and key prefix of the project is built here.

use crate::proto::dapr_scheduler as sv1;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
use crate::schedule::name::{self, NameError};

/// Separator between the parts of a composed key.
pub const SEPARATOR: &str = "||";

/// Why no key could be built from a request's metadata and name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Namespace or app id is empty (the Scheduler's authz check; `InvalidArgument`).
    #[error("missing namespace or appID in request")]
    MissingOwner,
    /// Namespace, app id or actor type contains the key separator `||`: such an owner's keys
    /// would fall inside another owner's prefix (app `a||b` inside app `a`), so it is
    /// refused (`InvalidArgument`) rather than stored.
    #[error("namespace, appID and actor type must not contain '||': {0:?}")]
    SeparatorInOwner(String),
    /// The metadata names no target (`InvalidArgument`).
    #[error("unknown job type: {0}")]
    UnknownTarget(String),
    /// The composed name breaks go-etcd-cron's name rules (a plain error: `Unknown`).
    #[error(transparent)]
    Name(#[from] NameError),
}

/// Composed key of an app job: `app||<namespace>||<app-id>||<name>`.
pub fn app_job_key(namespace: &str, app_id: &str, name: &str) -> String {
    [
        "app", SEPARATOR, namespace, SEPARATOR, app_id, SEPARATOR, name,
    ]
    .concat()
}

/// Whether `key` is an app job's (not an actor reminder's).
pub fn is_app_job(key: &str) -> bool {
    key.strip_prefix("app")
        .is_some_and(|rest| rest.starts_with(SEPARATOR))
}

/// The actor type of an actor reminder's key (`actorreminder||<ns>||<type>||…`); `None` for
/// any other key.
pub fn actor_type_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("actorreminder")?.strip_prefix(SEPARATOR)?;
    let (_namespace, rest) = rest.split_once(SEPARATOR)?;
    let (actor_type, _) = rest.split_once(SEPARATOR)?;
    Some(actor_type)
}

/// Key of one actor state entry in the values table:
/// `actorstate||<namespace>||<app-id>||<actor-type>||<actor-id>||<key>` (daprd's
/// `<app-id>||<actor-type>||<actor-id>||<key>` with the namespace).
pub fn actor_state_key(
    namespace: &str,
    app_id: &str,
    actor_type: &str,
    actor_id: &str,
    key: &str,
) -> String {
    [
        "actorstate",
        SEPARATOR,
        namespace,
        SEPARATOR,
        app_id,
        SEPARATOR,
        actor_type,
        SEPARATOR,
        actor_id,
        SEPARATOR,
        key,
    ]
    .concat()
}

/// Prefix every app job of one app shares: `app||<namespace>||<app-id>||`.
pub fn app_job_prefix(namespace: &str, app_id: &str) -> String {
    app_job_key(namespace, app_id, "")
}

/// Composed key of an actor reminder:
/// `actorreminder||<namespace>||<actor-type>||<actor-id>||<name>`.
pub fn actor_reminder_key(namespace: &str, actor_type: &str, actor_id: &str, name: &str) -> String {
    [
        "actorreminder",
        SEPARATOR,
        namespace,
        SEPARATOR,
        actor_type,
        SEPARATOR,
        actor_id,
        SEPARATOR,
        name,
    ]
    .concat()
}

/// Prefix of every reminder of one actor type: `actorreminder||<namespace>||<actor-type>||`.
pub fn actor_type_prefix(namespace: &str, actor_type: &str) -> String {
    [
        "actorreminder",
        SEPARATOR,
        namespace,
        SEPARATOR,
        actor_type,
        SEPARATOR,
    ]
    .concat()
}

/// Checks what the Scheduler's authz checks first: namespace and app id are required. Then
/// what keeps owners apart: no part of the owner may contain [`SEPARATOR`] (the job name
/// may; it comes last in the key).
pub fn check_metadata(metadata: Option<&sv1::JobMetadata>) -> Result<&sv1::JobMetadata, KeyError> {
    let m = match metadata {
        Some(m) if !m.namespace.is_empty() && !m.app_id.is_empty() => m,
        _ => return Err(KeyError::MissingOwner),
    };
    let actor_type = match m.target.as_ref().and_then(|t| t.r#type.as_ref()) {
        Some(Target::Actor(actor)) => actor.r#type.as_str(),
        _ => "",
    };
    match [m.namespace.as_str(), m.app_id.as_str(), actor_type]
        .into_iter()
        .find(|part| part.contains(SEPARATOR))
    {
        Some(part) => Err(KeyError::SeparatorInOwner(part.to_owned())),
        None => Ok(m),
    }
}

/// The key prefix of everything owned by this metadata's target: `app||ns||app||` for app
/// jobs, `actorreminder||ns||type||id||` for one actor's reminders (`…||type||` when the
/// actor id is empty).
pub fn owner_prefix(metadata: &sv1::JobMetadata) -> Result<String, KeyError> {
    match metadata.target.as_ref().and_then(|t| t.r#type.as_ref()) {
        Some(Target::Job(_)) => Ok(app_job_prefix(&metadata.namespace, &metadata.app_id)),
        Some(Target::Actor(actor)) if actor.id.is_empty() => {
            Ok(actor_type_prefix(&metadata.namespace, &actor.r#type))
        }
        Some(Target::Actor(actor)) => Ok(actor_reminder_key(
            &metadata.namespace,
            &actor.r#type,
            &actor.id,
            "",
        )),
        None => Err(KeyError::UnknownTarget(format!("{:?}", metadata.target))),
    }
}

/// What comes before a job's name in its key (the Scheduler's `PrefixFromMetadata`):
/// `app||ns||app||`, or `actorreminder||ns||type||id||` with the actor id's place kept when
/// it is empty (`actorreminder||ns||T||||name`); unlike [`owner_prefix`], which then means
/// the whole type.
pub fn name_prefix(metadata: &sv1::JobMetadata) -> Result<String, KeyError> {
    match metadata.target.as_ref().and_then(|t| t.r#type.as_ref()) {
        Some(Target::Actor(actor)) => Ok(actor_reminder_key(
            &metadata.namespace,
            &actor.r#type,
            &actor.id,
            "",
        )),
        _ => owner_prefix(metadata),
    }
}

/// The prefix a WatchJobs stream must have registered to take a trigger of this target: the
/// app's jobs, or every reminder of the actor type (`None` without a target).
pub fn target_prefix(metadata: &sv1::JobMetadata) -> Option<String> {
    match metadata.target.as_ref()?.r#type.as_ref()? {
        Target::Job(_) => Some(app_job_prefix(&metadata.namespace, &metadata.app_id)),
        Target::Actor(actor) => Some(actor_type_prefix(&metadata.namespace, &actor.r#type)),
    }
}

/// The prefix `DeleteByMetadata` removes: the owner prefix, without its trailing separator
/// with `id_prefix_match`, whatever the target, as Dapr's Scheduler does (its serializer's
/// `KeyFromMetadata`, v1.18.2): then `app||ns||myapp` also takes `myapp2`'s jobs and
/// `actorreminder||ns||Cart` every type starting with `Cart`. Callers that mean one app or
/// one type exactly send `id_prefix_match` false.
pub fn metadata_prefix(
    metadata: &sv1::JobMetadata,
    id_prefix_match: bool,
) -> Result<String, KeyError> {
    let prefix = owner_prefix(metadata)?;
    Ok(match prefix.strip_suffix(SEPARATOR) {
        Some(bare) if id_prefix_match => bare.to_owned(),
        _ => prefix,
    })
}

/// The composed key of job `name` under this metadata, validated with Dapr's name rules.
/// Name errors are plain errors in go-etcd-cron, so the Scheduler reports them as `Unknown`.
pub fn job_key(metadata: &sv1::JobMetadata, job_name: &str) -> Result<String, KeyError> {
    let key = name_prefix(metadata)? + job_name;
    name::validate(&key)?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app_meta() -> sv1::JobMetadata {
        sv1::JobMetadata {
            app_id: "myapp".into(),
            namespace: "default".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }
    }

    #[test]
    fn keys_are_dapr_shaped() {
        assert_eq!(app_job_key("ns", "app", "job"), "app||ns||app||job");
        assert_eq!(app_job_prefix("ns", "app"), "app||ns||app||");
        assert_eq!(
            actor_reminder_key("ns", "T", "id1", "r"),
            "actorreminder||ns||T||id1||r"
        );
    }

    #[test]
    fn owners_holding_the_separator_are_refused() {
        // App `a||b` in `default` would store under `app||default||a||b||…`, inside app `a`'s
        // prefix; namespace `default||a` likewise.
        for (namespace, app_id) in [("default", "a||b"), ("default||a", "x"), ("||", "a")] {
            let meta = sv1::JobMetadata {
                app_id: app_id.into(),
                namespace: namespace.into(),
                ..app_meta()
            };
            assert!(
                matches!(
                    check_metadata(Some(&meta)),
                    Err(KeyError::SeparatorInOwner(_))
                ),
                "{namespace}/{app_id}"
            );
        }
        let reminder = sv1::JobMetadata {
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Actor(sv1::TargetActorReminder {
                    id: "1".into(),
                    r#type: "Cart||x".into(),
                })),
            }),
            ..app_meta()
        };
        assert!(check_metadata(Some(&reminder)).is_err());
        // One `|` is an ordinary character, and the name may hold the separator.
        let single = sv1::JobMetadata {
            app_id: "a|b".into(),
            ..app_meta()
        };
        assert!(check_metadata(Some(&single)).is_ok());
    }

    #[test]
    fn actor_types_are_read_back_from_reminder_keys() {
        let key = actor_reminder_key("ns", "Cart", "42", "r||1");
        assert_eq!(actor_type_of(&key), Some("Cart"));
        assert_eq!(actor_type_of("app||ns||app||job"), None);
        assert_eq!(actor_type_of("actorreminder||ns"), None);
    }

    #[test]
    fn keys_follow_dapr_layout() {
        assert_eq!(job_key(&app_meta(), "j").unwrap(), "app||default||myapp||j");
        let mut actor = app_meta();
        actor.target = Some(sv1::JobTargetMetadata {
            r#type: Some(Target::Actor(sv1::TargetActorReminder {
                id: "42".into(),
                r#type: "Cart".into(),
            })),
        });
        assert_eq!(
            job_key(&actor, "r").unwrap(),
            "actorreminder||default||Cart||42||r"
        );
        // An empty actor id keeps its place (daprd 1.18.2's Scheduler error texts, seen by
        // e2e/dapr/differential.sh).
        if let Some(Target::Actor(a)) = actor.target.as_mut().and_then(|t| t.r#type.as_mut()) {
            a.id.clear();
        }
        assert_eq!(
            job_key(&actor, "r").unwrap(),
            "actorreminder||default||Cart||||r"
        );
    }

    #[test]
    fn delete_by_metadata_prefixes() {
        let actor = |id: &str| sv1::JobMetadata {
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Actor(sv1::TargetActorReminder {
                    id: id.into(),
                    r#type: "Cart".into(),
                })),
            }),
            ..app_meta()
        };
        assert_eq!(
            metadata_prefix(&actor("4"), true).unwrap(),
            "actorreminder||default||Cart||4"
        );
        assert_eq!(
            metadata_prefix(&actor("4"), false).unwrap(),
            "actorreminder||default||Cart||4||"
        );
        assert_eq!(
            metadata_prefix(&actor(""), false).unwrap(),
            "actorreminder||default||Cart||"
        );
        assert_eq!(
            metadata_prefix(&app_meta(), false).unwrap(),
            "app||default||myapp||"
        );
        // As Dapr's Scheduler: a prefix match drops the separator whatever the target.
        assert_eq!(
            metadata_prefix(&actor(""), true).unwrap(),
            "actorreminder||default||Cart"
        );
        assert_eq!(
            metadata_prefix(&app_meta(), true).unwrap(),
            "app||default||myapp"
        );
    }

    #[test]
    fn bad_metadata_and_names_are_rejected_with_dapr_codes() {
        let err = check_metadata(None).unwrap_err();
        assert_eq!(err, KeyError::MissingOwner);
        assert_eq!(err.to_string(), "missing namespace or appID in request");
        let mut m = app_meta();
        m.target = None;
        assert!(matches!(
            job_key(&m, "j").unwrap_err(),
            KeyError::UnknownTarget(_)
        ));
        let err = job_key(&app_meta(), "bad/name").unwrap_err();
        assert!(matches!(err, KeyError::Name(_)));
        assert!(err.to_string().contains("must not contain '/'"));
    }
}
