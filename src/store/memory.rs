//! A [`Store`] in memory, with the same semantics as [`Redb`](super::Redb): for tests of the
//! modules above the store. Values are kept encoded, so decoding behaves as on disk.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::apply;
use super::encoded::Prepared;
use super::paging::{self, Joiner, PrefixRange};
use super::records;
use super::tables::{Table, Tables, Undo};
use super::{
    DueIndex, DuePage, Error, FinishedJob, JobScan, LoadedJob, Op, OpResult, PageItem, PageOf,
    ScanItem, Store, StoredCounter, StoredJob, StoredRun, run_key, runs_prefix,
};

/// An in-memory [`Store`]: nothing survives the process. Every write is applied at once, under
/// one lock.
#[derive(Debug, Default)]
pub struct Memory {
    /// The tables; `None` once closed.
    state: Mutex<Option<MemTables>>,
}

/// The two tables, values encoded.
#[derive(Debug, Default)]
struct MemTables {
    /// `jobs`.
    jobs: BTreeMap<String, Vec<u8>>,
    /// `counters`.
    counters: BTreeMap<String, Vec<u8>>,
    /// `runs`.
    runs: BTreeMap<String, Vec<u8>>,
    /// `finished`.
    finished: BTreeMap<String, Vec<u8>>,
    /// `idempotency`.
    idempotency: BTreeMap<String, Vec<u8>>,
    /// `due`.
    due: BTreeMap<String, Vec<u8>>,
    /// `due_far`.
    due_far: BTreeMap<String, Vec<u8>>,
    /// `due_at`.
    due_at: BTreeMap<String, Vec<u8>>,
    /// `values`.
    values: BTreeMap<String, Vec<u8>>,
}

impl Memory {
    /// An empty store.
    pub fn new() -> Self {
        // A new store holds no job, so every job is indexed.
        let mut tables = MemTables::default();
        tables
            .due_at
            .insert(apply::due::COMPLETE.to_owned(), Vec::new());
        Memory {
            state: Mutex::new(Some(tables)),
        }
    }

    /// Stores raw bytes as a record, to test how corrupt data is handled.
    #[cfg(test)]
    pub(crate) fn put_raw(&self, table: Table, key: &str, value: &[u8]) {
        if let Some(tables) = self.lock().as_mut() {
            tables.map(table).insert(key.to_owned(), value.to_vec());
            if table == Table::Jobs {
                // A job planted raw is in no index, as one written before the index existed.
                tables.due_at.remove(apply::due::COMPLETE);
            }
        }
    }

    /// The tables, even if a panicking test poisoned the lock: every write leaves them
    /// consistent before it can panic.
    fn lock(&self) -> MutexGuard<'_, Option<MemTables>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the open tables.
    fn with<R>(&self, f: impl FnOnce(&mut MemTables) -> Result<R, Error>) -> Result<R, Error> {
        match self.lock().as_mut() {
            Some(tables) => f(tables),
            None => Err(Error::Closed),
        }
    }
}

impl MemTables {
    /// The map of `table`.
    fn map(&mut self, table: Table) -> &mut BTreeMap<String, Vec<u8>> {
        match table {
            Table::Jobs => &mut self.jobs,
            Table::Counters => &mut self.counters,
            Table::Runs => &mut self.runs,
            Table::Finished => &mut self.finished,
            Table::Idempotency => &mut self.idempotency,
            Table::Due => &mut self.due,
            Table::DueFar => &mut self.due_far,
            Table::DueAt => &mut self.due_at,
            Table::Values => &mut self.values,
        }
    }
}

impl Tables for MemTables {
    fn keeps_due_index(&self) -> bool {
        true
    }

    fn with_value<R>(
        &mut self,
        table: Table,
        key: &str,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error> {
        Ok(self.map(table).get(key).map(|v| f(v)))
    }

    fn insert(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<(), Error> {
        let old = self.map(table).insert(key.to_owned(), value);
        if let Some(undo) = undo {
            undo.push((table, key.to_owned(), old));
        }
        Ok(())
    }

    fn insert_new(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<bool, Error> {
        let Entry::Vacant(slot) = self.map(table).entry(key.to_owned()) else {
            return Ok(false);
        };
        slot.insert(value);
        if let Some(undo) = undo {
            undo.push((table, key.to_owned(), None));
        }
        Ok(true)
    }

    fn remove(&mut self, table: Table, key: &str, undo: Option<&mut Undo>) -> Result<bool, Error> {
        let old = self.map(table).remove(key);
        let removed = old.is_some();
        if let (Some(undo), Some(old)) = (undo, old) {
            undo.push((table, key.to_owned(), Some(old)));
        }
        Ok(removed)
    }

    fn first_entries(
        &mut self,
        table: Table,
        start: &str,
        end: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, Error> {
        Ok(self
            .map(table)
            .range::<str, _>((Bound::Included(start), Bound::Excluded(end)))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn remove_prefix(
        &mut self,
        table: Table,
        prefix: &str,
        mut undo: Option<&mut Undo>,
    ) -> Result<u64, Error> {
        let map = self.map(table);
        let keys: Vec<String> = map
            .range::<str, _>(PrefixRange::new(prefix).bounds())
            .map(|(k, _)| k.clone())
            .collect();
        for key in &keys {
            let old = map.remove(key);
            if let Some(undo) = undo.as_deref_mut() {
                undo.push((table, key.clone(), old));
            }
        }
        Ok(keys.len() as u64)
    }
}

#[async_trait]
impl Store for Memory {
    async fn write(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, Error> {
        let ops: Vec<Prepared> = ops.into_iter().map(Op::encode).collect();
        // Memory tables cannot fail, so the outer (abandon the transaction) error never
        // happens; a corrupt record is rolled back by `apply_request` itself.
        self.with(|tables| apply::apply_request(tables, ops)?)
    }

    async fn get_job(&self, key: &str) -> Result<Option<StoredJob>, Error> {
        self.with(|tables| {
            tables
                .jobs
                .get(key)
                .map(|v| records::decode_job(key, v))
                .transpose()
        })
    }

    async fn get_value(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        self.with(|tables| Ok(tables.values.get(key).cloned()))
    }

    async fn list_values(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, Error> {
        self.with(|tables| {
            Ok(tables
                .values
                .range::<str, _>(PrefixRange::new(prefix).bounds())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect())
        })
    }

    async fn get_counter(&self, key: &str) -> Result<Option<StoredCounter>, Error> {
        self.with(|tables| {
            tables
                .counters
                .get(key)
                .map(|v| records::decode_counter(key, v))
                .transpose()
        })
    }

    async fn list_jobs(&self, prefix: &str) -> Result<Vec<(String, StoredJob)>, Error> {
        self.with(|tables| {
            tables
                .jobs
                .range::<str, _>(PrefixRange::new(prefix).bounds())
                .map(|(k, v)| Ok((k.clone(), records::decode_job(k, v)?)))
                .collect()
        })
    }

    async fn get_finished(&self, key: &str) -> Result<Option<FinishedJob>, Error> {
        self.with(|tables| {
            tables
                .finished
                .get(key)
                .map(|v| records::decode_finished(key, v))
                .transpose()
        })
    }

    async fn list_runs(
        &self,
        key: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, StoredRun)>, Error> {
        let start = runs_prefix(key);
        let end = before.map_or_else(|| format!("{key}\u{1}"), |seq| run_key(key, seq));
        self.with(|tables| {
            tables
                .runs
                .range::<str, _>((
                    Bound::Included(start.as_str()),
                    Bound::Excluded(end.as_str()),
                ))
                .rev()
                .take(limit)
                .map(|(k, v)| records::decode_run(k, v))
                .collect()
        })
    }

    async fn page(
        &self,
        of: PageOf,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PageItem>, Error> {
        let Some(start) = paging::page_start(prefix, after) else {
            return Ok(Vec::new());
        };
        let range = PrefixRange::new(prefix);
        let end = range.bounds().1;
        self.with(|tables| {
            let table = match of {
                PageOf::Active => &tables.jobs,
                PageOf::Finished => &tables.finished,
            };
            table
                .range::<str, _>((start, end))
                .take(limit)
                .map(|(k, v)| match of {
                    PageOf::Active => records::active_item(
                        k.clone(),
                        v,
                        tables.counters.get(k).map(Vec::as_slice),
                    ),
                    PageOf::Finished => records::finished_item(k.clone(), v),
                })
                .collect()
        })
    }

    async fn scan(&self, prefix: &str, page_size: usize) -> Result<JobScan, Error> {
        // Memory is for tests: the whole result is built at once, then paged like Redb's,
        // including a corrupt record surfacing as a failed page rather than a failed call.
        let (loaded, failure) = self.with(|tables| {
            let counters = tables
                .counters
                .range::<str, _>(PrefixRange::new(prefix).bounds())
                .map(|(k, v)| Ok((k.clone(), v.clone())));
            let mut joiner = Joiner::new(counters);
            let mut loaded = Vec::new();
            for (k, v) in tables
                .jobs
                .range::<str, _>(PrefixRange::new(prefix).bounds())
            {
                match joiner.join(k.clone(), v) {
                    Ok(job) => loaded.push(job),
                    Err(err) => return Ok((loaded, Some(err))),
                }
            }
            Ok((loaded, None))
        })?;
        let page_size = page_size.max(1);
        let (tx, scan) = JobScan::channel();
        tokio::spawn(async move {
            let mut loaded = loaded.into_iter().peekable();
            while loaded.peek().is_some() {
                let page: Vec<LoadedJob> = loaded.by_ref().take(page_size).collect();
                if tx.send(ScanItem::Page(page)).await.is_err() {
                    return;
                }
            }
            let last = match failure {
                Some(err) => ScanItem::Failed(err),
                None => ScanItem::End,
            };
            // The consumer may be gone; nothing to do then.
            let _ = tx.send(last).await;
        });
        Ok(scan)
    }

    async fn page_idempotency(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, prost_types::Timestamp)>, Error> {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.with(|tables| {
            tables
                .idempotency
                .range::<str, _>((start, Bound::Unbounded))
                .take(limit)
                .map(|(k, v)| Ok((k.clone(), records::record_time(k, v)?)))
                .collect()
        })
    }

    async fn due_index(&self) -> Result<DueIndex, Error> {
        self.with(|tables| {
            Ok(if tables.due_at.contains_key(apply::due::COMPLETE) {
                DueIndex::Complete
            } else {
                DueIndex::Partial
            })
        })
    }

    async fn due_page(&self, start: &str, before: i64, limit: usize) -> Result<DuePage, Error> {
        while !self.with(|tables| {
            let cursor = tables.due_at.get(apply::due::CURSOR);
            Ok(apply::due::covers(cursor.map(Vec::as_slice), before))
        })? {
            self.write(vec![Op::AdvanceDue { before }]).await?;
        }
        self.with(|tables| {
            let entries = tables
                .due
                .range::<str, _>((Bound::Included(start), Bound::Unbounded))
                .map(|(k, _)| Ok(k.clone()));
            apply::due::read_page(entries, before, limit, |key| {
                let at = tables
                    .due_at
                    .get(key)
                    .and_then(|v| apply::due::decode_ms(v));
                let job = tables
                    .jobs
                    .get(key)
                    .map(|job| (job.clone(), tables.counters.get(key).cloned()));
                Ok((at, job))
            })
        })
    }

    async fn close(&self) -> Result<(), Error> {
        *self.lock() = None;
        Ok(())
    }
}
