//! Changes that run to their end whether or not their caller still waits.
//!
//! A change writes to the store and then tells the trigger loop (and the metrics). Run as
//! part of the caller's request, a caller that gives up between the two — a gRPC deadline, a
//! closed HTTP connection: the server drops the request's future — would leave the write
//! durable but unknown to the loop: a job stored and never fired until the next restart, a
//! job deleted that still fires. (The 1-hour soak of issue 15 saw two such creates.) So every
//! change runs on a task of its own that the request only awaits.

use std::future::Future;

use super::Error;

/// Runs `change` on its own task and gives its result; the change goes on to its end if the
/// future returned here is dropped. A panic in it is passed on to the caller, as if it had
/// run inline.
pub(super) async fn to_the_end<T, F>(change: F) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
{
    match tokio::spawn(change).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime shutting down cancels a spawned task.
        Err(_) => Err(Error::Unavailable(
            "the scheduler is shutting down".to_owned(),
        )),
    }
}
