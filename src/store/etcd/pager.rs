//! Reading a table in pages: `list_jobs` and `scan` read every page at the revision of the
//! first, so a listing is one consistent snapshot however long it takes.

use tokio::sync::mpsc;

use super::Inner;
use super::client::{self, RangeRequest};
use crate::store::apply::{Joiner, Table};
use crate::store::{Error, LoadedJob, ScanItem};

/// Pages of `(key, value)` of one table under a prefix, all read at the revision of the first.
pub(super) struct Pager<'a> {
    /// The store.
    inner: &'a Inner,
    /// The table.
    table: Table,
    /// The next full key to read from; `None` when done.
    from: Option<Vec<u8>>,
    /// The end of the range (exclusive).
    end: Vec<u8>,
    /// Keys per page.
    limit: i64,
    /// The revision of the first page (0 before it).
    revision: i64,
}

impl<'a> Pager<'a> {
    /// Pages of `table`'s keys starting with `prefix`.
    pub(super) fn new(inner: &'a Inner, table: Table, prefix: &str, limit: i64) -> Self {
        let start = format!("{}{prefix}", inner.prefix(table)).into_bytes();
        let end = client::prefix_end(&start);
        Pager {
            inner,
            table,
            from: Some(start),
            end,
            limit,
            revision: 0,
        }
    }

    /// The next page (never empty), or `None` at the end.
    pub(super) async fn next(&mut self) -> Result<Option<Vec<(String, Vec<u8>)>>, Error> {
        let Some(from) = self.from.take() else {
            return Ok(None);
        };
        let (end, limit, revision) = (self.end.clone(), self.limit, self.revision);
        let resp = self
            .inner
            .retrying(|etcd| {
                let request = RangeRequest {
                    key: from.clone(),
                    range_end: end.clone(),
                    limit,
                    revision,
                    ..RangeRequest::default()
                };
                async move { etcd.range(request).await }
            })
            .await?;
        if self.revision == 0 {
            self.revision = client::revision(resp.header.as_ref());
        }
        let kvs = resp.kvs;
        if kvs.is_empty() {
            return Ok(None);
        }
        if resp.more {
            let mut next = kvs[kvs.len() - 1].key.clone();
            next.push(0);
            self.from = Some(next);
        }
        let page = kvs
            .into_iter()
            .map(|kv| Ok((self.inner.strip(self.table, &kv.key)?, kv.value)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Some(page))
    }
}

/// Feeds `tx` with pages of jobs under `prefix` joined with their counters, everything read at
/// the revision of the first page.
pub(super) async fn scan_pages(
    inner: &Inner,
    prefix: &str,
    page_size: i64,
    tx: &mpsc::Sender<ScanItem>,
) -> Result<(), Error> {
    let mut jobs = Pager::new(inner, Table::Jobs, prefix, page_size);
    while let Some(page) = jobs.next().await? {
        // The counters of exactly this page's key range, at the same revision.
        let first = format!("{}{}", inner.counters_prefix, page[0].0).into_bytes();
        let mut end = format!("{}{}", inner.counters_prefix, page[page.len() - 1].0).into_bytes();
        end.push(0);
        let revision = jobs.revision;
        let counters = inner
            .retrying(|etcd| {
                let request = RangeRequest {
                    key: first.clone(),
                    range_end: end.clone(),
                    revision,
                    ..RangeRequest::default()
                };
                async move { etcd.range(request).await }
            })
            .await?
            .kvs
            .into_iter()
            .map(|kv| Ok((inner.strip(Table::Counters, &kv.key)?, kv.value)));
        let mut joiner = Joiner::new(counters);
        let loaded = page
            .into_iter()
            .map(|(key, value)| joiner.join(key, &value))
            .collect::<Result<Vec<LoadedJob>, Error>>()?;
        if tx.send(ScanItem::Page(loaded)).await.is_err() {
            // Dropped: stop reading.
            return Ok(());
        }
    }
    Ok(())
}
