//! Jobs with their progress as an export or import carries them.

use prost_types::Timestamp;

use crate::proto::jobsd_store::{StoredCounter, StoredJob};
use crate::store::PageOf;

/// One job as a backup holds it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BackupRecord {
    /// The job's name (no key prefix).
    pub name: String,
    /// The job as stored; its metadata is the owner's it is restored for.
    pub job: StoredJob,
    /// Its progress (`None`: it never fired).
    pub counter: Option<StoredCounter>,
    /// When it finished (a finished job, kept for jobsd's views); `None`: it still fires.
    pub finished_at: Option<Timestamp>,
}

/// Where an export goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportCursor {
    /// The table being read.
    pub(crate) table: PageOf,
    /// The last key read from it.
    pub(crate) after: Option<String>,
}

/// One page of an export.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportPage {
    /// The records, in order.
    pub records: Vec<BackupRecord>,
    /// Pass back for the next page; `None` once every job was read.
    pub next: Option<ExportCursor>,
}

/// What an import did with one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// Nothing held its name: it was created.
    Created,
    /// It replaced what held its name (`overwrite`).
    Replaced,
    /// A job or finished record held its name; left as it was.
    Skipped,
}

/// Most records an import batch or an export page holds.
pub const MAX_BACKUP_BATCH: usize = 4096;
