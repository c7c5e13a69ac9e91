//! Pausing and resuming many jobs at once: an owner's jobs selected by name prefix and labels,
//! the same selection as a filtered list. Each job goes through the per-key change of
//! `pause.rs` (in order with its results); many at a time, so that their writes share
//! commits.

use futures_util::StreamExt;

use super::detached::to_the_end;
use super::runner::paused_by_hand;
use super::views::has_labels;
use super::{Engine, Error};
use crate::jobs::{Bulk, MAX_BULK_NAMES, Selection};
use crate::proto::dapr_scheduler as sv1;
use crate::store::{PageItem, PageOf, Paused};
use crate::trigger::keys;

/// Jobs read per store page.
const PAGE: usize = 512;

/// Jobs changed at once: enough for their writes to share commits.
const PARALLEL: usize = 256;

impl Engine {
    /// Pauses the selected jobs of the metadata's owner that are not paused yet, saying why
    /// in `note`.
    pub async fn pause_jobs(
        &self,
        metadata: &sv1::JobMetadata,
        selection: &Selection,
        note: &str,
    ) -> Result<Bulk, Error> {
        let paused = paused_by_hand(self.inner.clock.now(), note);
        self.bulk(metadata, selection, Some(paused)).await
    }

    /// Resumes the selected jobs of the metadata's owner that are paused.
    pub async fn resume_jobs(
        &self,
        metadata: &sv1::JobMetadata,
        selection: &Selection,
    ) -> Result<Bulk, Error> {
        self.bulk(metadata, selection, None).await
    }

    /// Sets `paused` on every selected job whose pause it changes.
    async fn bulk(
        &self,
        metadata: &sv1::JobMetadata,
        selection: &Selection,
        paused: Option<Paused>,
    ) -> Result<Bulk, Error> {
        let (engine, metadata, selection) = (self.clone(), metadata.clone(), selection.clone());
        to_the_end(async move { engine.write_bulk(&metadata, &selection, paused).await }).await
    }

    /// [`Engine::bulk`] in the caller's task.
    async fn write_bulk(
        &self,
        metadata: &sv1::JobMetadata,
        selection: &Selection,
        paused: Option<Paused>,
    ) -> Result<Bulk, Error> {
        let owner = keys::owner_prefix(keys::check_metadata(Some(metadata))?)?;
        let prefix = format!("{owner}{}", selection.name_prefix);
        let pausing = paused.is_some();
        let mut bulk = Bulk::default();
        let mut after: Option<String> = None;
        loop {
            let items = self
                .inner
                .store
                .page(PageOf::Active, &prefix, after.as_deref(), PAGE)
                .await?;
            let last_page = items.len() < PAGE;
            after = items.last().map(|item| item.key.clone());
            let keys = items
                .into_iter()
                .filter(|item| {
                    has_labels(&item.job, &selection.labels) && is_paused(item) != pausing
                })
                .map(|item| item.key);
            let mut changed = futures_util::stream::iter(keys)
                .map(|key| {
                    let paused = paused.clone();
                    async move { (self.set_paused(key.clone(), paused).await, key) }
                })
                .buffered(PARALLEL);
            while let Some((result, key)) = changed.next().await {
                // `None`: it finished (or was deleted) meanwhile.
                if result?.is_some() {
                    bulk.count += 1;
                    if bulk.names.len() < MAX_BULK_NAMES {
                        bulk.names.push(key[owner.len()..].to_owned());
                    }
                }
            }
            if last_page {
                return Ok(bulk);
            }
        }
    }
}

/// Whether the job of a page item is paused now.
fn is_paused(item: &PageItem) -> bool {
    item.counter
        .as_ref()
        .is_some_and(|c| c.generation == item.job.generation && c.paused.is_some())
}
