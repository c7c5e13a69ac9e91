//! Conditional writes (`Idempotency-Key`, `If-Match`) between a sidecar and a jobsd replica
//! (`jobsd.scheduler.v1.Jobs/ScheduleJobGuarded`, `DeleteJobGuarded`): the conditions as
//! their header values, the outcome as an answer rather than an error.

use super::{Conditions, Guarded, IfMatch, guard};
use crate::proto::jobsd_replica as jsv1;
use jsv1::guarded_response::Outcome;

/// The conditions of a create as the request carries them.
pub fn conditions_to_wire(conditions: &Conditions) -> (String, String) {
    (
        conditions.idempotency_key.clone().unwrap_or_default(),
        conditions
            .if_match
            .as_ref()
            .map(IfMatch::to_header)
            .unwrap_or_default(),
    )
}

/// The conditions a request carries, checked as the sidecar checks the headers.
pub fn conditions_from_wire(idempotency_key: &str, if_match: &str) -> Result<Conditions, String> {
    Ok(Conditions {
        idempotency_key: (!idempotency_key.is_empty())
            .then(|| guard::idempotency_key(idempotency_key))
            .transpose()?,
        if_match: (!if_match.is_empty())
            .then(|| IfMatch::parse(if_match))
            .transpose()?,
    })
}

/// An outcome as the replica sends it.
pub fn to_wire(outcome: Guarded) -> jsv1::GuardedResponse {
    let (outcome, etag, message) = match outcome {
        Guarded::Written { etag } => (Outcome::Written, etag, String::new()),
        Guarded::Replayed { etag } => (Outcome::Replayed, etag, String::new()),
        Guarded::PreconditionFailed(message) => {
            (Outcome::PreconditionFailed, String::new(), message)
        }
        Guarded::KeyReused(message) => (Outcome::KeyReused, String::new(), message),
    };
    jsv1::GuardedResponse {
        outcome: outcome.into(),
        etag,
        message,
    }
}

/// An outcome as the replica sent it. An outcome this build does not know is taken as a
/// refusal, never as a write.
pub fn from_wire(response: jsv1::GuardedResponse) -> Guarded {
    match Outcome::try_from(response.outcome) {
        Ok(Outcome::Written) => Guarded::Written {
            etag: response.etag,
        },
        Ok(Outcome::Replayed) => Guarded::Replayed {
            etag: response.etag,
        },
        Ok(Outcome::KeyReused) => Guarded::KeyReused(response.message),
        Ok(Outcome::PreconditionFailed) | Err(_) => Guarded::PreconditionFailed(response.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_round_trip_and_an_unknown_one_is_a_refusal() {
        for outcome in [
            Guarded::Written {
                etag: "\"a\"".into(),
            },
            Guarded::Replayed {
                etag: "\"b\"".into(),
            },
            Guarded::PreconditionFailed("If-Match: no".into()),
            Guarded::KeyReused("Idempotency-Key: no".into()),
        ] {
            assert_eq!(from_wire(to_wire(outcome.clone())), outcome);
        }
        let future = jsv1::GuardedResponse {
            outcome: 99,
            etag: "\"c\"".into(),
            message: "later".into(),
        };
        assert_eq!(
            from_wire(future),
            Guarded::PreconditionFailed("later".into())
        );
        let conditions = Conditions {
            idempotency_key: Some("k".into()),
            if_match: Some(IfMatch::Any),
        };
        let (key, if_match) = conditions_to_wire(&conditions);
        assert_eq!(conditions_from_wire(&key, &if_match), Ok(conditions));
        assert_eq!(conditions_from_wire("", ""), Ok(Conditions::default()));
        assert!(conditions_from_wire("", "bare").is_err());
    }
}
