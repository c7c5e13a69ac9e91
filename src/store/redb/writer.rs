//! The writer thread of [`Redb`]: group commits, the write-ahead log, checkpoints and the
//! reopening after an I/O error.

use super::*;

/// A durable write transaction with the configured repair mode.
pub(super) fn begin_write(db: &Database, options: &RedbOptions) -> Result<WriteTransaction, Error> {
    let mut txn = db.begin_write().map_err(Error::io)?;
    txn.set_durability(Durability::Immediate)
        .map_err(Error::io)?;
    txn.set_quick_repair(options.quick_repair);
    Ok(txn)
}

/// How often a broken writer tries to reopen the database.
const HEAL_EVERY: Duration = Duration::from_secs(1);

/// The writer thread's state.
pub(super) struct Writer {
    /// The database; dropped when the thread ends, and while it is reopened after an I/O
    /// error ([`Writer::heal`]).
    pub(super) db: Option<Arc<Database>>,
    /// Shared with `Redb`: where readers find the database.
    pub(super) slot: Arc<RwLock<Option<Arc<Database>>>>,
    /// The data directory.
    pub(super) dir: PathBuf,
    /// When the last attempt to reopen after an I/O error was made.
    pub(super) last_heal: Option<Instant>,
    /// Requests from `Redb` handles.
    pub(super) rx: std_mpsc::Receiver<Msg>,
    /// Shared with `Redb::stats`.
    pub(super) stats: Arc<StatCells>,
    /// Batch bounds and repair mode.
    pub(super) options: RedbOptions,
    /// The write-ahead log, when batches are made durable there.
    pub(super) wal: Option<Wal>,
    /// The number of the last batch logged (batch numbers grow by one and never repeat).
    pub(super) seq: u64,
    /// With the log: the non-durable transaction the logged batches are applied to, kept open
    /// across batches until they are published ([`Writer::publish`]).
    pub(super) open: Option<WriteTransaction>,
    /// Shared with `Redb`: `open` holds answered batches readers cannot see yet.
    pub(super) unpublished: Arc<AtomicBool>,
    /// When the oldest logged batch not yet in a durable redb commit was applied.
    pub(super) dirty_since: Option<Instant>,
    /// Time spent applying the logged batches not yet in a durable redb commit: about what a
    /// replay would redo ([`RedbOptions::checkpoint_work`]).
    pub(super) applied_for: Duration,
    /// Set when the log and redb may disagree (a failed log write, or a redb transaction that
    /// failed after batches in it were logged): every later write, every read that would need
    /// those batches and every checkpoint fails with it, since going on could log batches that
    /// a replay would apply on top of a different state. Reopening replays the log and clears
    /// it: [`Writer::heal`] does that once the disk has room again.
    pub(super) broken: Option<Error>,
}

impl Writer {
    /// Serves batches until told to close or every sender is gone.
    pub(super) fn run(mut self) {
        let mut batch: Vec<WriteReq> = Vec::new();
        let mut publish: Vec<oneshot::Sender<Result<(), Error>>> = Vec::new();
        loop {
            self.heal();
            // Broken: wake up to try reopening; else when the next checkpoint is due.
            let wait = if self.broken.is_some() {
                Some(HEAL_EVERY)
            } else {
                self.dirty_since.map(|since| {
                    (since + self.options.checkpoint_interval)
                        .saturating_duration_since(Instant::now())
                })
            };
            let first = match wait {
                None => match self.rx.recv() {
                    Ok(msg) => msg,
                    Err(std_mpsc::RecvError) => break,
                },
                Some(wait) => match self.rx.recv_timeout(wait) {
                    Ok(msg) => msg,
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {
                        self.checkpoint();
                        continue;
                    }
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
                },
            };
            let mut bytes = 0;
            let mut close = None;
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Write(req) => {
                        bytes += req.bytes;
                        batch.push(req);
                    }
                    Msg::Publish(reply) => publish.push(reply),
                    Msg::Close(done) => {
                        close = Some(done);
                        break;
                    }
                    // Tried at the top of the loop.
                    Msg::Heal => {}
                }
                if batch.len() >= self.options.max_batch_requests
                    || bytes >= self.options.max_batch_bytes
                {
                    break;
                }
                next = self.rx.try_recv().ok();
            }
            if !batch.is_empty() {
                self.commit(&mut batch);
            }
            if !publish.is_empty() {
                let outcome = self.publish();
                for reply in publish.drain(..) {
                    let _ = reply.send(outcome.clone());
                }
            }
            if self.checkpoint_due() {
                self.checkpoint();
            }
            if let Some(done) = close {
                self.shut_down(done);
                return;
            }
        }
        // Every handle is gone without a close (cannot happen while `Redb` lives, as its drop
        // sends one); still leave an empty log behind.
        self.checkpoint();
    }

    /// Whether the logged batches should be made durable in redb now.
    fn checkpoint_due(&self) -> bool {
        match (&self.wal, self.dirty_since) {
            (Some(wal), Some(since)) => {
                since.elapsed() >= self.options.checkpoint_interval
                    || wal.used() >= self.options.checkpoint_bytes
                    || self.applied_for >= self.options.checkpoint_work
            }
            _ => false,
        }
    }

    /// Commits the open transaction, if any, without an fsync: readers see its batches from
    /// now on. Its batches were answered, so a failure leaves redb behind the log for good:
    /// the writer is broken until reopened (which replays them).
    fn publish(&mut self) -> Result<(), Error> {
        if let Some(err) = &self.broken {
            return Err(err.clone());
        }
        let Some(txn) = self.open.take() else {
            return Ok(());
        };
        if let Err(err) = txn.commit() {
            let err = disk::at(&self.db_path(), "cannot write to", err);
            self.broken = Some(err.clone());
            return Err(err);
        }
        self.unpublished.store(false, Ordering::Release);
        Ok(())
    }

    /// Commits redb durably with the number of the last logged batch, then lets the log start
    /// over. On failure the log keeps everything and the writer is broken until
    /// [`Writer::heal`] reopens redb. A broken writer never checkpoints: redb may lack logged
    /// batches, which only a replay restores.
    fn checkpoint(&mut self) {
        if self.dirty_since.is_none() || self.publish().is_err() {
            return;
        }
        let outcome = (|| {
            let txn = begin_write(self.db()?, &self.options)?;
            txn.open_table(META)
                .map_err(Error::io)?
                .insert(APPLIED_SEQ, self.seq)
                .map_err(Error::io)?;
            txn.commit().map_err(Error::io)
        })();
        match outcome {
            Ok(()) => {
                if let Some(wal) = &mut self.wal {
                    wal.reset();
                }
                self.dirty_since = None;
                self.applied_for = Duration::ZERO;
                self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => {
                // redb refuses everything after a failed write of its file until reopened:
                // the writer is broken, and heals by reopening and replaying the log, which
                // stays the durable copy of everything answered.
                let err = disk::at(&self.db_path(), "cannot checkpoint", err);
                tracing::warn!(error = %err, "store checkpoint failed");
                self.broken = Some(err);
                self.dirty_since = Some(Instant::now());
            }
        }
    }

    /// Applies `batch` in one transaction, commits, and answers (and empties) it.
    fn commit(&mut self, batch: &mut Vec<WriteReq>) {
        let ops: usize = batch.iter().map(|req| req.ops.len()).sum();
        if ops == 0 {
            // Nothing to make durable: an fsync would only delay the next batch.
            for req in batch.drain(..) {
                let _ = req.reply.send(Ok(Vec::new()));
            }
            return;
        }
        let metrics = self.stats.metrics.get().filter(|m| m.is_enabled()).cloned();
        let started = metrics.as_ref().map(|_| Instant::now());
        let outcome = match self.broken.clone().or_else(|| self.no_room(batch)) {
            Some(err) => Err(err),
            None if self.wal.is_some() => self.apply_logged(batch),
            None => self.apply(batch),
        };
        if let (Some(metrics), Some(started)) = (metrics, started) {
            metrics.committed(ops, started.elapsed(), outcome.is_ok());
        }
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        self.stats
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.stats.ops.fetch_add(ops as u64, Ordering::Relaxed);
        match outcome {
            Ok(results) => {
                for (req, result) in batch.drain(..).zip(results) {
                    // The caller may have given up waiting; its write stands anyway.
                    let _ = req.reply.send(result);
                }
            }
            Err(err) => {
                self.stats.failed_commits.fetch_add(1, Ordering::Relaxed);
                for req in batch.drain(..) {
                    let _ = req.reply.send(Err(err.clone()));
                }
            }
        }
    }

    /// The per-request results of `batch`, once committed. Takes the requests' ops.
    fn apply(&self, batch: &mut [WriteReq]) -> Result<Vec<Result<Vec<OpResult>, Error>>, Error> {
        let txn = begin_write(self.db()?, &self.options)?;
        let results = apply_batch(&txn, batch)?;
        txn.commit()
            .map_err(|e| disk::at(&self.db_path(), "cannot write to", e))?;
        Ok(results)
    }

    /// [`Writer::apply`] through the log: the batch is on disk in the log before redb commits
    /// it (without an fsync) and before anyone is answered.
    fn apply_logged(
        &mut self,
        batch: &mut [WriteReq],
    ) -> Result<Vec<Result<Vec<OpResult>, Error>>, Error> {
        let Some(wal) = &mut self.wal else {
            return self.apply(batch);
        };
        let seq = self.seq + 1;
        // Encoded first because applying consumes the ops.
        wal.encode(seq, batch.iter().map(|req| req.ops.as_slice()));
        // Applied before logging, so that a failing apply (the batch fails, nothing changed)
        // never leaves a logged batch that a replay would apply.
        let holds_answered = self.open.is_some();
        let txn = match &mut self.open {
            Some(txn) => txn,
            None => {
                let db_path = self.dir.join(FILE_NAME);
                let db = self.db.as_ref().ok_or_else(|| reopening(&db_path))?;
                let mut txn = match db.begin_write() {
                    Ok(txn) => txn,
                    // Only after a failed write of the file (redb wants a reopen).
                    Err(err) => {
                        let err = disk::at(&db_path, "cannot write to", err);
                        self.broken = Some(err.clone());
                        return Err(err);
                    }
                };
                txn.set_durability(Durability::None).map_err(Error::io)?;
                self.open.insert(txn)
            }
        };
        let applying = Instant::now();
        let results = match apply_batch(txn, batch) {
            Ok(results) => results,
            // Nothing of this batch is logged; earlier ones in the transaction were answered.
            Err(err) => return Err(self.abandon(err, holds_answered)),
        };
        self.applied_for += applying.elapsed();
        if let Err(err) = wal.write() {
            // The batch is in the transaction, but maybe only partly in the log.
            let err = disk::at(
                &self.dir.join(wal::FILE_NAME),
                "cannot append to the write-ahead log",
                err,
            );
            return Err(self.abandon(err, true));
        }
        self.seq = seq;
        self.dirty_since.get_or_insert_with(Instant::now);
        // Before anyone is answered: see `Redb::begin_read`.
        self.unpublished.store(true, Ordering::Release);
        Ok(results)
    }

    /// The open database, or why there is none (it is being reopened).
    fn db(&self) -> Result<&Database, Error> {
        self.db.as_deref().ok_or_else(|| reopening(&self.db_path()))
    }

    /// The database file.
    fn db_path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The refusal of `batch` when it would add data while the data dir's filesystem is down
    /// to its floor ([`disk::floor`]). Deletes still go through: they make room.
    fn no_room(&self, batch: &[WriteReq]) -> Option<Error> {
        let adds = batch.iter().flat_map(|req| &req.ops).any(|op| {
            !matches!(
                op,
                Prepared::DeleteJob { .. }
                    | Prepared::DeletePrefix { .. }
                    | Prepared::DeleteFinished { .. }
                    | Prepared::FinishJob { .. }
                    | Prepared::ForgetIdempotency { .. }
            )
        });
        // A filesystem that cannot say is not refused on a guess.
        let (free, total) = disk::space(&self.dir).ok()?;
        (adds && free < disk::floor(total)).then(|| disk::full(&self.dir, free, total))
    }

    /// After an I/O error broke the writer (redb refuses everything once a write of its file
    /// failed, until reopened): once the disk has room, reopens the database and replays the
    /// log, which holds every acknowledged batch, so writes resume with nothing lost and no
    /// restart. Tried at most every [`HEAL_EVERY`]; until it works, writes keep getting the
    /// error that broke the writer and reads that need the lost batches fail.
    fn heal(&mut self) {
        if self.broken.is_none() || self.last_heal.is_some_and(|t| t.elapsed() < HEAL_EVERY) {
            return;
        }
        self.last_heal = Some(Instant::now());
        // A replay into a still full disk would only fail again; meanwhile the old handle
        // keeps serving what readers can still get from it.
        if let Ok((free, total)) = disk::space(&self.dir)
            && free < disk::floor(total)
        {
            return;
        }
        let path = self.db_path();
        self.open = None;
        *self.slot.write().unwrap_or_else(PoisonError::into_inner) = None;
        self.db = None;
        let reopened = open_db(&path, &self.options)
            .and_then(|db| recover(db, &self.options, &self.dir.join(wal::FILE_NAME)));
        match reopened {
            Ok((db, seq, replayed)) => {
                let db = Arc::new(db);
                *self.slot.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&db));
                self.db = Some(db);
                self.seq = seq;
                if let Some(wal) = &mut self.wal {
                    wal.reset();
                }
                self.dirty_since = None;
                self.applied_for = Duration::ZERO;
                self.broken = None;
                self.unpublished.store(false, Ordering::Release);
                tracing::warn!(
                    db = %path.display(),
                    replayed,
                    "store reopened after an I/O error; writes resume"
                );
            }
            // Readers hold the old file open for a moment, or the disk filled again.
            Err(err) => tracing::warn!(error = %err, "store not reopened yet; retrying"),
        }
    }

    /// Drops (aborts) the open transaction after `err`, and breaks the writer when the
    /// transaction may have held batches that the log has and redb now lacks. Gives `err`.
    fn abandon(&mut self, err: Error, broken: bool) -> Error {
        self.open = None;
        if broken {
            self.broken = Some(err.clone());
        }
        err
    }

    /// Refuses what came after the close, makes everything durable in redb, releases the
    /// database, then reports.
    fn shut_down(mut self, done: Option<oneshot::Sender<()>>) {
        let mut waiters = Vec::from_iter(done);
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                Msg::Write(req) => {
                    let _ = req.reply.send(Err(Error::Closed));
                }
                Msg::Publish(reply) => {
                    let _ = reply.send(Err(Error::Closed));
                }
                Msg::Close(done) => waiters.extend(done),
                Msg::Heal => {}
            }
        }
        // A clean stop leaves nothing to replay (and a short next open).
        self.checkpoint();
        // Only a broken writer can still hold a transaction; it goes before the database.
        drop(self.open);
        // Requests sent from now on find the channel closed, or are dropped unanswered with
        // it: their callers see `Closed` either way.
        drop(self.rx);
        drop(self.db);
        for done in waiters {
            let _ = done.send(());
        }
    }
}

/// Applies `batch` in `txn` and gives the per-request results. Takes the requests' ops.
fn apply_batch(
    txn: &WriteTransaction,
    batch: &mut [WriteReq],
) -> Result<Vec<Result<Vec<OpResult>, Error>>, Error> {
    let mut results = Vec::with_capacity(batch.len());
    let mut tables = RedbTables::open(txn)?;
    for req in batch.iter_mut() {
        let ops = std::mem::take(&mut req.ops);
        // A backend error leaves the transaction unusable: the caller drops it (abort) and
        // fails the whole batch, so no request is half applied.
        results.push(apply::apply_request(&mut tables, ops)?);
    }
    Ok(results)
}

/// The two tables of one write transaction.
pub(super) struct RedbTables<'txn> {
    /// `jobs`.
    pub(super) jobs: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `counters`.
    pub(super) counters: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `runs`.
    pub(super) runs: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `finished`.
    pub(super) finished: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `idempotency`.
    pub(super) idempotency: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `due`.
    pub(super) due: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `due_far`.
    pub(super) due_far: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `due_at`.
    pub(super) due_at: ::redb::Table<'txn, &'static str, &'static [u8]>,
    /// `values`.
    pub(super) values: ::redb::Table<'txn, &'static str, &'static [u8]>,
}

impl<'txn> RedbTables<'txn> {
    /// Every table of `txn` (created if missing).
    pub(super) fn open(txn: &'txn WriteTransaction) -> Result<Self, Error> {
        Ok(RedbTables {
            jobs: txn.open_table(JOBS).map_err(Error::io)?,
            counters: txn.open_table(COUNTERS).map_err(Error::io)?,
            runs: txn.open_table(RUNS).map_err(Error::io)?,
            finished: txn.open_table(FINISHED).map_err(Error::io)?,
            idempotency: txn.open_table(IDEMPOTENCY).map_err(Error::io)?,
            due: txn.open_table(DUE).map_err(Error::io)?,
            due_far: txn.open_table(DUE_FAR).map_err(Error::io)?,
            due_at: txn.open_table(DUE_AT).map_err(Error::io)?,
            values: txn.open_table(VALUES).map_err(Error::io)?,
        })
    }

    /// The table `table`.
    fn table(&mut self, table: Table) -> &mut ::redb::Table<'txn, &'static str, &'static [u8]> {
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

impl Tables for RedbTables<'_> {
    fn keeps_due_index(&self) -> bool {
        true
    }

    fn with_value<R>(
        &mut self,
        table: Table,
        key: &str,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error> {
        let value = self.table(table).get(key).map_err(Error::io)?;
        Ok(value.map(|v| f(v.value())))
    }

    fn insert(
        &mut self,
        table: Table,
        key: &str,
        value: Vec<u8>,
        undo: Option<&mut Undo>,
    ) -> Result<(), Error> {
        let old = self
            .table(table)
            .insert(key, value.as_slice())
            .map_err(Error::io)?;
        if let Some(undo) = undo {
            undo.push((table, key.to_owned(), old.map(|v| v.value().to_vec())));
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
        // One descent for a new key, the usual case; a key already there gets its value back.
        let t = self.table(table);
        let old = t
            .insert(key, value.as_slice())
            .map_err(Error::io)?
            .map(|v| v.value().to_vec());
        if let Some(old) = old {
            t.insert(key, old.as_slice()).map_err(Error::io)?;
            return Ok(false);
        }
        if let Some(undo) = undo {
            undo.push((table, key.to_owned(), None));
        }
        Ok(true)
    }

    fn remove(&mut self, table: Table, key: &str, undo: Option<&mut Undo>) -> Result<bool, Error> {
        let old = self.table(table).remove(key).map_err(Error::io)?;
        let removed = old.is_some();
        if let (Some(undo), Some(old)) = (undo, old) {
            undo.push((table, key.to_owned(), Some(old.value().to_vec())));
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
        let mut entries = Vec::with_capacity(limit.min(4096));
        for entry in self
            .table(table)
            .range::<&str>(start..end)
            .map_err(Error::io)?
            .take(limit)
        {
            let (k, v) = entry.map_err(Error::io)?;
            entries.push((k.value().to_owned(), v.value().to_vec()));
        }
        Ok(entries)
    }

    fn remove_prefix(
        &mut self,
        table: Table,
        prefix: &str,
        mut undo: Option<&mut Undo>,
    ) -> Result<u64, Error> {
        let range = PrefixRange::new(prefix);
        let bounds = range.bounds();
        let mut removed = 0;
        let mut extracted = self
            .table(table)
            .extract_from_if::<&str, _>(bounds, |_, _| true)
            .map_err(Error::io)?;
        // redb asserts on some inconsistencies of a damaged file (opened with `--store-check
        // never`). The extraction's own drop flushes its removals and asserts again while the
        // first panic unwinds, which aborts the process: on a panic it is forgotten instead, so
        // the panic reaches the caller that turns it into a refusal (the transaction is
        // poisoned and never commits).
        let walked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for entry in &mut extracted {
                let (k, v) = entry.map_err(Error::io)?;
                removed += 1;
                if let Some(undo) = undo.as_deref_mut() {
                    undo.push((table, k.value().to_owned(), Some(v.value().to_vec())));
                }
            }
            Ok::<_, Error>(())
        }));
        match walked {
            Ok(walked) => walked?,
            Err(panic) => {
                std::mem::forget(extracted);
                std::panic::resume_unwind(panic)
            }
        }
        // Removals are flushed on close; its error would otherwise only poison the commit.
        extracted.close().map_err(Error::io)?;
        Ok(removed)
    }
}
