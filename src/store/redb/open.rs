//! Opening the redb file: the integrity check ([`StoreCheck`]) and the replay of the
//! write-ahead log into it.

use std::path::Path;
use std::time::Instant;

use ::redb::{Database, ReadableTable};

use super::{APPLIED_SEQ, Error, FILE_NAME, META, RedbOptions, RedbTables, begin_write};
use super::{disk, wal};
use crate::store::apply;
use crate::store::tables::Table;

/// When opening the store reads the whole redb file to verify its page checksums.
///
/// redb verifies them only in this pass, not on reads, so without it a byte changed on disk
/// would be served as data. The pass reads every page: about a second per GiB here, which
/// would make a restart's first trigger wait on the size of the store. `auto` runs it for
/// files up to [`AUTO_CHECK_MAX_BYTES`] and skips it (saying so) for larger ones. A crash never
/// calls for it: redb's commits are atomic and the allocator state is saved with each of
/// them (quick repair), and the write-ahead log has its own checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum StoreCheck {
    /// Verify files up to 256 MiB (about 500,000 jobs) at every open; skip larger ones.
    #[default]
    Auto,
    /// Verify at every open, whatever the size.
    Always,
    /// Never verify at open.
    Never,
}

/// The largest file [`StoreCheck::Auto`] verifies at open.
pub const AUTO_CHECK_MAX_BYTES: u64 = 256 << 20;

impl StoreCheck {
    /// Whether a file of `len` bytes is verified.
    pub(crate) fn applies_to(self, len: u64) -> bool {
        match self {
            StoreCheck::Auto => len <= AUTO_CHECK_MAX_BYTES,
            StoreCheck::Always => true,
            StoreCheck::Never => false,
        }
    }
}

/// Opens (or creates) the database file at `path`; the errors name the file and, for a file
/// another process holds, say so.
pub(super) fn open_db(path: &Path, options: &RedbOptions) -> Result<Database, Error> {
    let builder = {
        let mut b = Database::builder();
        b.set_cache_size(options.cache_size);
        b
    };
    // redb asserts on some inconsistencies of a damaged file: a refusal, not a crash.
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        builder.create(path).map(|mut db| {
            let len = std::fs::metadata(path).map_or(0, |m| m.len());
            if !options.check.applies_to(len) {
                if len > 0 && options.check == StoreCheck::Auto {
                    tracing::info!(
                        file = %path.display(),
                        mib = len >> 20,
                        "skipping the checksum pass over a store larger than 256 MiB \
                         (`--store-check always` runs it at every start)"
                    );
                }
                return (db, Ok(true));
            }
            // redb checks page checksums only here, not on reads: a changed byte would
            // otherwise be served as data.
            let started = Instant::now();
            let check = db.check_integrity();
            tracing::debug!(
                file = %path.display(),
                mib = len >> 20,
                ms = started.elapsed().as_millis() as u64,
                "checksum pass over the store"
            );
            (db, check)
        })
    }));
    let damaged = |how: &str| damaged(path, how);
    match opened {
        Ok(Ok((db, check))) => match check {
            Ok(true) => Ok(db),
            Ok(false) => Err(damaged(
                "its checksums failed; redb went back to an earlier commit, which can lack \
                 acknowledged writes",
            )),
            Err(::redb::DatabaseError::Storage(::redb::StorageError::Corrupted(why))) => {
                Err(damaged(&why))
            }
            Err(err) => Err(disk::at(path, "cannot check", err)),
        },
        Ok(Err(::redb::DatabaseError::DatabaseAlreadyOpen)) => Err(Error::io(std::io::Error::new(
            std::io::ErrorKind::ResourceBusy,
            format!(
                "the data dir {} is in use: another jobsd holds {} (one jobsd per data \
                     dir; stop the other one or give this one its own --data-dir)",
                path.parent().unwrap_or(path).display(),
                path.display()
            ),
        ))),
        Ok(Err(err)) => Err(disk::at(path, "cannot open", err)),
        Err(_) => Err(damaged("redb stopped on an inconsistency")),
    }
}

/// Drops a database handle, swallowing redb's asserts: the last handle of a database commits
/// its allocator state on the way out, which panics on a damaged file (opened with
/// `--store-check never`). Nothing acknowledged is lost by not letting that crash the process:
/// every write is in the write-ahead log or an earlier commit.
pub(super) fn drop_quietly<T>(db: T) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(db))).is_err() {
        tracing::error!("redb stopped on an inconsistency while closing the store file");
    }
}

/// The refusal to open the damaged database file at `path`.
fn damaged(path: &Path, how: &str) -> Error {
    Error::io(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "cannot open {}: the database file is damaged ({how}); restore the data dir \
             from a copy, or start from a backup with `jobsd jobs import`",
            path.display()
        ),
    ))
}

/// [`replay`], with redb's asserts on a damaged file (which a file opened without the
/// checksum pass can still hit when the recovery commits) turned into a refusal. Gives the
/// database back with replay's figures.
pub(super) fn recover(
    db: Database,
    options: &RedbOptions,
    wal_path: &Path,
) -> Result<(Database, u64, u64), Error> {
    let replayed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        replay(&db, options, wal_path)
    }));
    match replayed {
        Ok(Ok((seq, replayed))) => Ok((db, seq, replayed)),
        Ok(Err(err)) => Err(err),
        Err(_) => {
            // The database's own state is poisoned now: its drop asserts too.
            drop_quietly(db);
            Err(damaged(
                &wal_path.with_file_name(FILE_NAME),
                "redb stopped on an inconsistency while recovering",
            ))
        }
    }
}

/// Brings the database up to date with the write-ahead log at `wal_path` and makes that
/// durable: creates the tables, applies every valid logged batch newer than `meta.applied_seq`
/// in order, and records the newest batch number seen. Gives that number (the next batch gets
/// the one after it) and how many batches were applied. Refuses, naming the log, when the log
/// shows that acknowledged batches were damaged: opening would silently drop them.
fn replay(db: &Database, options: &RedbOptions, wal_path: &Path) -> Result<(u64, u64), Error> {
    // One transaction: a crash during recovery leaves the files as they were, so the next
    // open recovers the same way.
    let txn = begin_write(db, options)?;
    let mut replayed = 0;
    let seq;
    {
        let mut meta = txn.open_table(META).map_err(Error::io)?;
        let applied = meta
            .get(APPLIED_SEQ)
            .map_err(Error::io)?
            .map_or(0, |v| v.value());
        let (records, end) = wal::read_records(wal_path, applied)
            .map_err(|e| disk::at(wal_path, "cannot read the write-ahead log", e))?;
        let refuse = |why: String| {
            Error::io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "write-ahead log {} is damaged: {why}; it holds acknowledged writes that \
                     are not in {} yet, so jobsd refuses to start without them (keep a copy \
                     of the data dir; moving the log aside starts without those writes)",
                    wal_path.display(),
                    wal_path.with_file_name(FILE_NAME).display(),
                ),
            ))
        };
        if let wal::End::Damaged(why) = &end {
            return Err(refuse(why.clone()));
        }
        // A new file holds no job: every job it will hold is indexed as it is written.
        let fresh = !txn
            .list_tables()
            .map_err(Error::io)?
            .any(|t| ::redb::TableHandle::name(&t) == Table::Jobs.name());
        let mut tables = RedbTables::open(&txn)?;
        if fresh {
            apply::due::mark_complete(&mut tables, None)?;
        }
        // Past every seq in the file, so no leftover record can ever pass for a new one.
        let newest = records.iter().map(|r| r.seq).max().unwrap_or(0);
        let mut last = applied;
        for record in records.into_iter().filter(|r| r.seq > applied) {
            if record.seq != last + 1 {
                return Err(refuse(format!(
                    "record at offset {} holds batch {} where {} was expected",
                    record.offset,
                    record.seq,
                    last + 1
                )));
            }
            let Some(requests) = record.requests else {
                return Err(refuse(format!(
                    "record at offset {} passes its CRC but does not decode",
                    record.offset
                )));
            };
            for ops in requests {
                // The per-request outcome was already reported to its caller; replay only
                // needs the same state changes, which the same code on the same state gives.
                apply::apply_request(&mut tables, ops)?.ok();
            }
            last = record.seq;
            replayed += 1;
        }
        if let wal::End::Torn(why) = end {
            // A crash in the middle of an append: that batch was never acknowledged.
            tracing::warn!(
                wal = %wal_path.display(),
                replayed,
                "write-ahead log ends in a write cut short: {why}"
            );
        }
        seq = newest.max(last);
        meta.insert(APPLIED_SEQ, seq).map_err(Error::io)?;
    }
    txn.commit()
        .map_err(|e| disk::at(&wal_path.with_file_name(FILE_NAME), "cannot commit to", e))?;
    Ok((seq, replayed))
}
