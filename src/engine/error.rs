//! The engine's errors, named for what went wrong; the edges turn them into gRPC statuses
//! (`seam::Error`, the replica's `tonic::Status`) with the codes Dapr's Scheduler uses.

use crate::schedule::{NameError, ValidationError};
use crate::store;
use crate::trigger::keys::KeyError;

/// Why the engine refused or failed a call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request's metadata names no owner or no target (Scheduler: `InvalidArgument`).
    #[error("{0}")]
    BadMetadata(KeyError),
    /// The composed name breaks the name rules (Scheduler: `Unknown`, a plain go-etcd-cron
    /// error).
    #[error(transparent)]
    Name(#[from] NameError),
    /// The job breaks a validation rule (Scheduler: `Unknown`).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The request carries no job (Scheduler: `Unknown`, go-etcd-cron's text).
    #[error("job cannot be nil")]
    NoJob,
    /// Create-only and the key is taken (Scheduler: `AlreadyExists`).
    #[error("job already exists: '{0}'")]
    AlreadyExists(String),
    /// No job under that name (Scheduler: `NotFound`).
    #[error("job not found: {0}")]
    NotFound(String),
    /// jobsd's settings of a job (labels, policies) break their rules, or a request to
    /// jobsd's own views is malformed (a page token it did not hand out): `InvalidArgument`.
    #[error("{0}")]
    BadRequest(String),
    /// A run by hand was refused because the job is busy and its overlap rule is `skip`
    /// (`Aborted`: 409).
    #[error("{0}")]
    Busy(String),
    /// This engine cannot do that here (no trigger loop, e.g. a replica that does not own
    /// the job): `Unavailable`.
    #[error("{0}")]
    Unavailable(String),
    /// No execution of the caller's app is held under that id (unknown, ended, or another
    /// app's): `NotFound`.
    #[error("{0}")]
    ExecutionNotFound(String),
    /// The held execution already ended otherwise (completed, failed, lease expired, or it
    /// was never held): `Aborted` (HTTP 409).
    #[error("{0}")]
    ExecutionEnded(String),
    /// The store failed (Scheduler: `Internal`).
    #[error("store: {0}")]
    Store(#[from] store::Error),
}

impl From<KeyError> for Error {
    fn from(err: KeyError) -> Self {
        match err {
            KeyError::Name(e) => Error::Name(e),
            other => Error::BadMetadata(other),
        }
    }
}
