//! The history reads of the etcd store, with the meaning the other stores give them
//! (`Store::get_finished`, `Store::list_runs`, `Store::page`): each is one etcd range read
//! (`page` of active jobs adds their counters, read at the same revision), decoded by the
//! helpers every store shares (`records.rs`, `paging.rs`).

use std::collections::HashMap;
use std::ops::Bound;

use super::client::{self, prefix_end};
use super::pager::{Pager, counters_of};
use super::{Inner, job_value};
use crate::store::tables::Table;
use crate::store::{Error, FinishedJob, PageItem, PageOf, StoredRun, run_key, runs_prefix};
use crate::store::{paging, records};

/// The finished record of `key`, if one is kept.
pub(super) async fn get_finished(inner: &Inner, key: &str) -> Result<Option<FinishedJob>, Error> {
    let value = inner.get_value(inner.full(Table::Finished, key)).await?;
    value.map(|v| records::decode_finished(key, &v)).transpose()
}

/// Up to `limit` runs of `key`, newest first, numbered below `before` when given.
///
/// One range read sorted by key, descending. etcd sorts a whole range before applying the
/// limit, so this reads every run of the job below `before`: at most its history limit.
pub(super) async fn list_runs(
    inner: &Inner,
    key: &str,
    before: Option<u64>,
    limit: usize,
) -> Result<Vec<(u64, StoredRun)>, Error> {
    // etcd reads a limit of 0 as "no limit"; a range ending where it starts is empty anyway.
    if limit == 0 || before == Some(0) {
        return Ok(Vec::new());
    }
    let from = inner.full(Table::Runs, &runs_prefix(key)).into_bytes();
    let to = match before {
        Some(seq) => inner.full(Table::Runs, &run_key(key, seq)).into_bytes(),
        None => prefix_end(&from),
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let resp = inner
        .retrying(|etcd| {
            let request = client::read_descending(from.clone(), to.clone(), limit);
            async move { etcd.range(request).await }
        })
        .await?;
    resp.kvs
        .into_iter()
        .map(|kv| records::decode_run(&inner.strip(Table::Runs, &kv.key)?, &kv.value))
        .collect()
}

/// Up to `limit` records of `of` under `prefix`, in key order, after `after` when given.
///
/// One range read with a limit (no copy of the table); active jobs get the counters of the
/// page's key range, read at the same revision.
pub(super) async fn page(
    inner: &Inner,
    of: PageOf,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<PageItem>, Error> {
    let Some(start) = paging::page_start(prefix, after) else {
        return Ok(Vec::new());
    };
    // etcd reads a limit of 0 as "no limit".
    if limit == 0 {
        return Ok(Vec::new());
    }
    let table = match of {
        PageOf::Active => Table::Jobs,
        PageOf::Finished => Table::Finished,
    };
    let start = match start {
        Bound::Excluded(after) => {
            let mut next = inner.full(table, after).into_bytes();
            // The first key after `after`.
            next.push(0);
            next
        }
        Bound::Included(from) => inner.full(table, from).into_bytes(),
        Bound::Unbounded => inner.prefix(table).as_bytes().to_vec(),
    };
    let end = prefix_end(inner.full(table, prefix).as_bytes());
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut pager = Pager::between(inner, table, start, end, limit);
    let Some(records) = pager.next().await? else {
        return Ok(Vec::new());
    };
    match of {
        PageOf::Finished => records
            .into_iter()
            .map(|(key, value)| records::finished_item(key, &value))
            .collect(),
        PageOf::Active => {
            let counters: HashMap<String, Vec<u8>> = counters_of(inner, &records, pager.revision())
                .await?
                .into_iter()
                .collect();
            records
                .into_iter()
                .map(|(key, job)| {
                    let counter = counters.get(&key).map(Vec::as_slice);
                    let job = job_value::into_stored(&key, job)?;
                    records::active_item(key, &job, counter)
                })
                .collect()
        }
    }
}

/// Up to `limit` idempotency records (key and when written), in key order, after `after`.
pub(super) async fn page_idempotency(
    inner: &Inner,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<(String, prost_types::Timestamp)>, Error> {
    // etcd reads a limit of 0 as "no limit".
    if limit == 0 {
        return Ok(Vec::new());
    }
    let table = Table::Idempotency;
    let start = match after {
        Some(after) => {
            let mut next = inner.full(table, after).into_bytes();
            // The first key after `after`.
            next.push(0);
            next
        }
        None => inner.prefix(table).as_bytes().to_vec(),
    };
    let end = prefix_end(inner.prefix(table).as_bytes());
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut pager = Pager::between(inner, table, start, end, limit);
    let Some(records) = pager.next().await? else {
        return Ok(Vec::new());
    };
    records
        .into_iter()
        .map(|(key, value)| {
            let at = records::record_time(&key, &value)?;
            Ok((key, at))
        })
        .collect()
}
