//! Pausing and resuming many jobs at once in remote mode. The selection is listed through
//! jobsd's views (the same list `GET /jobsd/v1/jobs` shows), and each listed job is paused or
//! resumed as a call by name does it: sent to the replica that fires it (`steer.rs`), so that
//! every change lands in order with that job's results, whichever member owns it. A Dapr
//! Scheduler lists no views and pauses nothing: the call is refused, saying so.

use futures_util::StreamExt;

use super::Remote;
use super::steer::Steer;
use crate::proto::dapr_scheduler as sv1;
use crate::seam::{
    Bulk, Error, JobState, ListFilter, MAX_BULK_NAMES, MAX_PAGE_SIZE, Pausing, Selection,
};

/// Jobs paused or resumed at once: enough to hide a call's round trip, few enough not to
/// crowd out the app's own calls.
const PARALLEL: usize = 256;

/// Which way a bulk call goes.
#[derive(Debug, Clone)]
enum Change {
    /// Pause, with this note.
    Pause(String),
    Resume,
}

impl Remote {
    /// Pauses (`Some(note)`) or resumes (`None`) the jobs of the metadata's owner that
    /// `selection` takes and whose pause it changes. It runs to its end on a task of its own
    /// whether or not the caller still waits, as a bulk change does in embedded mode.
    pub(super) async fn bulk(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
        note: Option<String>,
    ) -> Result<Bulk, Error> {
        let change = note.map_or(Change::Resume, Change::Pause);
        let remote = self.clone();
        match tokio::spawn(async move { remote.change_all(metadata, selection, change).await })
            .await
        {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(Error::new(
                tonic::Code::Unavailable,
                "the sidecar is shutting down",
            )),
        }
    }

    /// [`Remote::bulk`] in the caller's task: page by page, the listed jobs changed
    /// [`PARALLEL`] at a time, counted in name order.
    async fn change_all(
        &self,
        metadata: sv1::JobMetadata,
        selection: Selection,
        change: Change,
    ) -> Result<Bulk, Error> {
        let mut filter = ListFilter {
            name_prefix: selection.name_prefix,
            labels: selection.labels,
            // Those a pause would change are active; those a resume would, paused.
            state: Some(match change {
                Change::Pause(_) => JobState::Active,
                Change::Resume => JobState::Paused,
            }),
            page_size: MAX_PAGE_SIZE,
            page_token: None,
        };
        let mut bulk = Bulk::default();
        loop {
            let page = self
                .list_page(metadata.clone(), filter.clone())
                .await
                .map_err(|e| Steer::Pause.unless_served(e))?;
            let mut changed = futures_util::stream::iter(page.jobs)
                .map(|view| {
                    let (metadata, change) = (metadata.clone(), change.clone());
                    async move {
                        let result = match change {
                            Change::Pause(note) => {
                                self.pause_job(metadata, view.name.clone(), note).await
                            }
                            Change::Resume => self.resume_job(metadata, view.name.clone()).await,
                        };
                        (result, view.name)
                    }
                })
                .buffered(PARALLEL);
            while let Some((result, name)) = changed.next().await {
                match result {
                    Ok(()) => {
                        bulk.count += 1;
                        if bulk.names.len() < MAX_BULK_NAMES {
                            bulk.names.push(name);
                        }
                    }
                    // It finished or was deleted since it was listed.
                    Err(e) if e.code == tonic::Code::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            match page.next_page_token {
                Some(token) => filter.page_token = Some(token),
                None => return Ok(bulk),
            }
        }
    }
}
