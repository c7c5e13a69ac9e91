//! Composed keys from Scheduler metadata, as Dapr's Scheduler builds them
//! (`pkg/scheduler/server/internal/serialize`).

use tonic::Status;

use crate::proto::scheduler as sv1;
use crate::proto::scheduler::job_target_metadata::Type as Target;
use crate::schedule::name;

/// Checks what the Scheduler's authz checks first: namespace and app id are required.
pub fn check_metadata(metadata: Option<&sv1::JobMetadata>) -> Result<&sv1::JobMetadata, Status> {
    match metadata {
        Some(m) if !m.namespace.is_empty() && !m.app_id.is_empty() => Ok(m),
        _ => Err(Status::invalid_argument(
            "missing namespace or appID in request",
        )),
    }
}

/// The key prefix of everything owned by this metadata's target: `app||ns||app||` for app
/// jobs, `actorreminder||ns||type||id||` for one actor's reminders (`…||type||` when the
/// actor id is empty).
pub fn owner_prefix(metadata: &sv1::JobMetadata) -> Result<String, Status> {
    match metadata.target.as_ref().and_then(|t| t.r#type.as_ref()) {
        Some(Target::Job(_)) => Ok(name::app_job_prefix(&metadata.namespace, &metadata.app_id)),
        Some(Target::Actor(actor)) if actor.id.is_empty() => Ok([
            "actorreminder",
            name::SEPARATOR,
            &metadata.namespace,
            name::SEPARATOR,
            &actor.r#type,
            name::SEPARATOR,
        ]
        .concat()),
        Some(Target::Actor(actor)) => Ok(name::actor_reminder_key(
            &metadata.namespace,
            &actor.r#type,
            &actor.id,
            "",
        )),
        None => Err(Status::invalid_argument(format!(
            "unknown job type: {:?}",
            metadata.target
        ))),
    }
}

/// The prefix `DeleteByMetadata` removes: the owner prefix, except that with
/// `id_prefix_match` an actor id is matched as a prefix (`actorreminder||ns||type||<id>`, no
/// trailing separator). The actor type and the app id are always matched whole, so one
/// type's or app's deletion never reaches `CartItem` or `myapp2`.
pub fn metadata_prefix(
    metadata: &sv1::JobMetadata,
    id_prefix_match: bool,
) -> Result<String, Status> {
    let prefix = owner_prefix(metadata)?;
    let actor_id = match metadata.target.as_ref().and_then(|t| t.r#type.as_ref()) {
        Some(Target::Actor(actor)) => !actor.id.is_empty(),
        _ => false,
    };
    Ok(match prefix.strip_suffix(name::SEPARATOR) {
        Some(bare) if id_prefix_match && actor_id => bare.to_owned(),
        _ => prefix,
    })
}

/// The composed key of job `name` under this metadata, validated with Dapr's name rules.
/// Name errors are plain errors in go-etcd-cron, so the Scheduler reports them as `Unknown`.
pub fn job_key(metadata: &sv1::JobMetadata, job_name: &str) -> Result<String, Status> {
    let key = owner_prefix(metadata)? + job_name;
    name::validate(&key).map_err(|e| Status::unknown(e.to_string()))?;
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
        for exact in [true, false] {
            assert_eq!(
                metadata_prefix(&actor(""), exact).unwrap(),
                "actorreminder||default||Cart||"
            );
            assert_eq!(
                metadata_prefix(&app_meta(), exact).unwrap(),
                "app||default||myapp||"
            );
        }
    }

    #[test]
    fn bad_metadata_and_names_are_rejected_with_dapr_codes() {
        let err = check_metadata(None).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert_eq!(err.message(), "missing namespace or appID in request");
        let mut m = app_meta();
        m.target = None;
        assert_eq!(
            job_key(&m, "j").unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let err = job_key(&app_meta(), "bad/name").unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unknown);
        assert!(err.message().contains("must not contain '/'"));
    }
}
