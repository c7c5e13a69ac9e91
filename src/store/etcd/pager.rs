//! Reading a table in pages: `list_jobs` and `scan` read every page at the revision of the
//! first, so a listing is one consistent snapshot however long it takes. `page`
//! (`history.rs`) reads one page the same way.

use tokio::sync::mpsc;

use super::client::{self, RangeRequest};
use super::{Inner, job_value};
use crate::store::paging::Joiner;
use crate::store::tables::Table;
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
        let start = inner.full(table, prefix).into_bytes();
        let end = client::prefix_end(&start);
        Pager::between(inner, table, start, end, limit)
    }

    /// Pages of `table`'s keys from the full key `start` (included) to `end` (excluded).
    pub(super) fn between(
        inner: &'a Inner,
        table: Table,
        start: Vec<u8>,
        end: Vec<u8>,
        limit: i64,
    ) -> Self {
        Pager {
            inner,
            table,
            from: Some(start),
            end,
            limit,
            revision: 0,
        }
    }

    /// The revision every page is read at (0 before the first).
    pub(super) fn revision(&self) -> i64 {
        self.revision
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
        let counters = counters_of(inner, &page, jobs.revision).await?;
        let mut joiner = Joiner::decoding(counters.into_iter().map(Ok), job_value::decode);
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

/// The counters of exactly the key range of `page` (jobs in key order), read at `revision`,
/// in key order; none for an empty page.
pub(super) async fn counters_of(
    inner: &Inner,
    page: &[(String, Vec<u8>)],
    revision: i64,
) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let (Some((first, _)), Some((last, _))) = (page.first(), page.last()) else {
        return Ok(Vec::new());
    };
    let first = inner.full(Table::Counters, first).into_bytes();
    let mut end = inner.full(Table::Counters, last).into_bytes();
    end.push(0);
    inner
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
        .map(|kv| Ok((inner.strip(Table::Counters, &kv.key)?, kv.value)))
        .collect()
}
