//! The write-ahead log of the [`Redb`](super::Redb) store.
//!
//! A redb durable commit rewrites several B-tree and allocator pages plus the header and
//! syncs them; an append of the batch to a log and one `fdatasync` costs about half as much.
//! So the writer thread logs each batch here and syncs it, then applies it to redb with a
//! non-durable commit, and only every so often makes redb durable (a checkpoint, which also
//! records the last applied batch number in redb's `meta` table). On open, the batches past
//! that number are applied again from the log.
//!
//! Layout: records one after another from offset 0, each
//! `[payload length u32][crc32 u32][seq u64][payload][footer]` (little endian), the CRC
//! covering the seq and the payload. The footer repeats the header (length without its top
//! bit, which marks a record that has one; logs written before the footer have records
//! without it). Batch numbers (`seq`) never repeat and grow by one per record. After a
//! checkpoint the log is written again from offset 0: what is left of older records past the
//! new end either fails its CRC (a record cut in the middle) or carries a seq that is not the
//! next one, so a reader stops there. The file is grown in zero-filled, synced chunks and
//! never shrinks, so an append overwrites allocated blocks and `fdatasync` has no file size or
//! extent change to journal.
//!
//! Telling a crash from damage: a crash can only cut the last record short, and that record
//! was never acknowledged (its `fdatasync` had not returned). A record whose footer matches
//! its header but whose CRC fails, or a valid record with a newer seq further on, means bytes
//! of acknowledged batches changed on disk: [`read_records`] reports that as [`End::Damaged`]
//! and the store refuses to open rather than drop them.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::apply::Prepared;

/// File name inside the data directory.
pub(crate) const FILE_NAME: &str = "jobsd.wal";

/// Bytes before a record's payload: length, CRC, seq.
const HEADER: usize = 16;
/// Bytes after a record's payload: the header again.
const FOOTER: usize = HEADER;
/// Top bit of the length field: the record has a footer.
const HAS_FOOTER: u32 = 1 << 31;
/// Size of a new log file; it grows when a record does not fit.
const INITIAL_LEN: u64 = 4 << 20;
/// Largest single growth step, so a big log does not double into gigabytes at once.
const MAX_GROWTH: u64 = 64 << 20;
/// Largest payload a reader accepts: bounds what a corrupt length can make it allocate.
const MAX_PAYLOAD: u64 = 1 << 30;

/// An open log positioned for the next append.
pub(crate) struct Wal {
    /// The log file.
    file: File,
    /// Where the next record goes.
    offset: u64,
    /// Length of the file: zero-filled and synced beyond the records.
    len: u64,
    /// The record being built, reused between batches.
    buf: Vec<u8>,
}

/// One valid record read back from the log.
pub(crate) struct Record {
    /// Offset of the record in the file.
    pub(crate) offset: u64,
    /// Bytes the record takes (header included).
    // Read by the tests that damage a record.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) size: u64,
    /// Its batch number.
    pub(crate) seq: u64,
    /// The batch's requests, each a list of ops; `None` when the payload does not decode
    /// although its CRC matched (a bug or a foreign file).
    pub(crate) requests: Option<Vec<Vec<Prepared>>>,
}

impl Wal {
    /// Opens the log at `path`, creating and preallocating it if needed. The caller reads it
    /// ([`read_records`]) before appending; appends start at offset 0.
    pub(crate) fn open(path: &Path) -> io::Result<Wal> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = file.metadata()?.len();
        let mut wal = Wal {
            file,
            offset: 0,
            len,
            buf: Vec::new(),
        };
        if len < INITIAL_LEN {
            wal.grow_to(INITIAL_LEN)?;
            // The new name must survive a power cut along with the records written under it.
            if let Some(dir) = path.parent() {
                File::open(dir)?.sync_all()?;
            }
        }
        Ok(wal)
    }

    /// Bytes of records written since the last [`Wal::reset`].
    pub(crate) fn used(&self) -> u64 {
        self.offset
    }

    /// Encodes the batch `seq` (`requests` in arrival order) as the next record, in memory;
    /// [`Wal::write`] puts it on disk.
    pub(crate) fn encode<'a>(&mut self, seq: u64, requests: impl Iterator<Item = &'a [Prepared]>) {
        let buf = &mut self.buf;
        buf.clear();
        buf.extend_from_slice(&[0; HEADER]);
        let count_at = buf.len();
        buf.extend_from_slice(&0u32.to_le_bytes());
        let mut count = 0u32;
        for ops in requests {
            count += 1;
            put_u32(buf, ops.len());
            for op in ops {
                encode_op(buf, op);
            }
        }
        buf[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
        let payload_len = (buf.len() - HEADER) as u32;
        buf[16 - 8..HEADER].copy_from_slice(&seq.to_le_bytes());
        let crc = crc32(&buf[8..]);
        buf[0..4].copy_from_slice(&(payload_len | HAS_FOOTER).to_le_bytes());
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        buf.extend_from_slice(&payload_len.to_le_bytes());
        buf.extend_from_slice(&crc.to_le_bytes());
        buf.extend_from_slice(&seq.to_le_bytes());
    }

    /// Appends the record built by [`Wal::encode`] and waits until it is on disk.
    ///
    /// After an error the log's contents past the last successful write are unknown: the
    /// caller must not append again (see the writer's poisoning).
    pub(crate) fn write(&mut self) -> io::Result<()> {
        let end = self.offset + self.buf.len() as u64;
        if end > self.len {
            let step = self.len.clamp(INITIAL_LEN, MAX_GROWTH);
            self.grow_to(end.div_ceil(step) * step)?;
        }
        self.file.write_all_at(&self.buf, self.offset)?;
        // Data only: the blocks are allocated and the size is fixed, so there is no metadata
        // that has to reach the disk with it.
        self.file.sync_data()?;
        self.offset = end;
        Ok(())
    }

    /// Starts writing from offset 0 again. Only after a durable checkpoint that covers every
    /// record written: the old records are then never replayed (their seqs are not newer).
    pub(crate) fn reset(&mut self) {
        self.offset = 0;
    }

    /// Extends the file with zeros to `len` and syncs it, size included.
    fn grow_to(&mut self, len: u64) -> io::Result<()> {
        // Real zeros rather than `set_len` alone: a hole or an unwritten extent would make
        // every later append allocate or convert blocks, i.e. journal metadata on each sync.
        const CHUNK: usize = 1 << 20;
        let zeros = vec![0u8; CHUNK];
        let mut at = self.len;
        while at < len {
            let n = (len - at).min(CHUNK as u64) as usize;
            self.file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        self.file.sync_all()?;
        self.len = len;
        Ok(())
    }
}

/// How the valid records of a log end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// Zeros, the end of the file, or what is left of an older log (records with older seqs).
    Clean,
    /// The next record was cut short by a crash while it was written: it was never
    /// acknowledged. Says where.
    Torn(String),
    /// Bytes of a batch newer than `applied` changed after it was written (or later batches
    /// follow a bad one): acknowledged writes would be lost. Says where and why.
    Damaged(String),
}

/// A record header (or footer) as read.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Header {
    /// Payload length, footer flag included.
    len: u32,
    /// CRC of seq and payload.
    crc: u32,
    /// Batch number.
    seq: u64,
}

impl Header {
    /// The 16 bytes at `at`, if the file holds them.
    fn at(bytes: &[u8], at: usize) -> Option<Header> {
        let h = bytes.get(at..at.checked_add(HEADER)?)?;
        Some(Header {
            len: u32::from_le_bytes(h[0..4].try_into().ok()?),
            crc: u32::from_le_bytes(h[4..8].try_into().ok()?),
            seq: u64::from_le_bytes(h[8..16].try_into().ok()?),
        })
    }

    /// Payload length without the flag.
    fn payload_len(self) -> usize {
        (self.len & !HAS_FOOTER) as usize
    }

    /// Whether a footer follows the payload.
    fn has_footer(self) -> bool {
        self.len & HAS_FOOTER != 0
    }
}

/// Reads the valid records of the log at `path` from the start, in order, stopping at the
/// first one that is cut short, fails its CRC or does not carry the seq after its
/// predecessor's, and says how the log ends there. `applied` is the last batch the database
/// already holds: damage to batches up to it loses nothing.
pub(crate) fn read_records(path: &Path, applied: u64) -> io::Result<(Vec<Record>, End)> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), End::Clean)),
        Err(err) => return Err(err),
    };
    let mut records: Vec<Record> = Vec::new();
    let mut offset = 0usize;
    let bad = loop {
        let Some(h) = Header::at(&bytes, offset) else {
            break None;
        };
        if h.len == 0 && h.crc == 0 && h.seq == 0 {
            // Preallocated space: the clean end of the log.
            break None;
        }
        let payload_len = h.payload_len();
        let footer = if h.has_footer() { FOOTER } else { 0 };
        let end = offset + HEADER + payload_len + footer;
        if payload_len as u64 > MAX_PAYLOAD || end > bytes.len() {
            break Some("runs past the end of the file");
        }
        let body = &bytes[offset + 8..offset + HEADER + payload_len];
        if crc32(body) != h.crc {
            break Some("fails its CRC");
        }
        // A footer that does not match is no reason to stop: header and CRC say the record
        // is whole (the footer only serves to prove damage, below).
        if let Some(last) = records.last()
            && last.seq.checked_add(1) != Some(h.seq)
        {
            // Left over from before the last reset: not part of this log.
            break None;
        }
        records.push(Record {
            offset: offset as u64,
            size: (end - offset) as u64,
            seq: h.seq,
            requests: decode_payload(&body[8..]),
        });
        offset = end;
    };
    let Some(why) = bad else {
        return Ok((records, End::Clean));
    };
    // The first seq that would be lost if the log ended here and was acknowledged.
    let next = records.last().map_or(0, |r| r.seq + 1).max(applied + 1);
    let end = if let Some(proof) = damage(&bytes, offset, next) {
        End::Damaged(format!("record at offset {offset} {why}: {proof}"))
    } else if Header::at(&bytes, offset).is_some_and(|h| h.seq == next) {
        End::Torn(format!(
            "record at offset {offset} {why} (cut short by a crash before it was acknowledged)"
        ))
    } else {
        // Bytes of an older log: the current one ended before them.
        End::Clean
    };
    Ok((records, end))
}

/// Evidence that the bad record at `offset` held an acknowledged batch (`next` or newer)
/// rather than a write cut short by a crash.
fn damage(bytes: &[u8], offset: usize, next: u64) -> Option<String> {
    let body_end = |len: usize| offset + HEADER + len;
    if let Some(h) = Header::at(bytes, offset)
        && h.has_footer()
        && h.seq >= next
        && Header::at(bytes, body_end(h.payload_len()))
            == Some(Header {
                len: h.len & !HAS_FOOTER,
                ..h
            })
    {
        // Written whole (its footer is there), so its append returned: batch acknowledged.
        return Some(format!("batch {} was written whole, then changed", h.seq));
    }
    // Every record takes at least a header's bytes and the log's seqs go up by one, so a
    // lost batch found `at` bytes past `offset` is at most this many batches past `next`.
    // Without the bound, old records' bytes (timestamps, lengths) pass for headers of batches
    // far ahead, and checking each one's CRC over megabytes of log made a restart after a
    // crash take a second or more.
    let reachable =
        |at: usize, seq: u64| seq >= next && seq - next <= ((at - offset) / HEADER) as u64;
    for at in offset + HEADER..bytes.len().saturating_sub(HEADER - 1) {
        // A footer whose length says it ends the record at `offset`, whose seq is a lost one
        // and whose CRC matches the bytes in between: the header is what changed.
        let len = at - offset - HEADER;
        if let Some(f) = Header::at(bytes, at)
            && f.len as usize == len
            && reachable(at, f.seq)
        {
            let crc = crc32_update(!0, &f.seq.to_le_bytes());
            if !crc32_update(crc, &bytes[offset + HEADER..at]) == f.crc {
                return Some(format!("the header of batch {} changed", f.seq));
            }
        }
        // Any whole, valid record of a lost batch further on.
        if let Some(h) = Header::at(bytes, at)
            && reachable(at, h.seq)
            && (h.payload_len() as u64) <= MAX_PAYLOAD
            && at + HEADER + h.payload_len() <= bytes.len()
            // A record written with a footer ends with a copy of its header: cheaper to
            // compare than the CRC, and garbage rarely has it.
            && (!h.has_footer()
                || Header::at(bytes, at + HEADER + h.payload_len())
                    == Some(Header {
                        len: h.len & !HAS_FOOTER,
                        ..h
                    }))
            && crc32(&bytes[at + 8..at + HEADER + h.payload_len()]) == h.crc
        {
            return Some(format!(
                "batch {} follows at offset {at}, so the batches before it were acknowledged",
                h.seq
            ));
        }
    }
    None
}

// ---- payload encoding ----

/// Op tags in the payload.
const PUT_JOB: u8 = 1;
const DELETE_JOB: u8 = 2;
const DELETE_PREFIX: u8 = 3;
const PUT_COUNTER: u8 = 4;
const FINISH_JOB: u8 = 5;
const RECORD_RESULT: u8 = 6;
const DELETE_FINISHED: u8 = 7;
const SET_PAUSED: u8 = 8;
// Issue 13 (conditional writes); numbered apart from the others so that parallel additions
// do not collide.
const GUARDED: u8 = 20;
const FORGET_IDEMPOTENCY: u8 = 21;
// Issue 14 (backup and restore).
const RESTORE: u8 = 30;
// Issue 16 (the due index): a put or restore with its first fire time appended (the old
// tags stay readable: a log written before the index replays as before).
const PUT_JOB_DUE: u8 = 40;
const RESTORE_DUE: u8 = 41;
const DROP_DUE: u8 = 42;
const MARK_DUE_INDEXED: u8 = 43;
const INDEX_DUE: u8 = 44;
const ADVANCE_DUE: u8 = 45;

fn put_u32(buf: &mut Vec<u8>, n: usize) {
    // Lengths come from in-memory strings and a batch bounded far below 4 GiB.
    buf.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(buf, bytes.len());
    buf.extend_from_slice(bytes);
}

fn encode_op(buf: &mut Vec<u8>, op: &Prepared) {
    match op {
        Prepared::PutJob {
            key,
            value,
            create_only,
            due,
        } => {
            buf.push(if due.is_some() { PUT_JOB_DUE } else { PUT_JOB });
            buf.push(u8::from(*create_only));
            put_bytes(buf, key.as_bytes());
            put_bytes(buf, value);
            if let Some(due) = due {
                buf.extend_from_slice(&due.to_le_bytes());
            }
        }
        Prepared::DeleteJob { key } => {
            buf.push(DELETE_JOB);
            put_bytes(buf, key.as_bytes());
        }
        Prepared::DeletePrefix { prefix } => {
            buf.push(DELETE_PREFIX);
            put_bytes(buf, prefix.as_bytes());
        }
        Prepared::PutCounter {
            key,
            generation,
            value,
        } => {
            buf.push(PUT_COUNTER);
            put_bytes(buf, key.as_bytes());
            buf.extend_from_slice(&generation.to_le_bytes());
            put_bytes(buf, value);
        }
        Prepared::FinishJob { key, generation } => {
            buf.push(FINISH_JOB);
            put_bytes(buf, key.as_bytes());
            buf.extend_from_slice(&generation.to_le_bytes());
        }
        Prepared::RecordResult(record) => {
            buf.push(RECORD_RESULT);
            put_bytes(buf, &prost::Message::encode_to_vec(&**record));
        }
        Prepared::SetPaused {
            key,
            generation,
            paused,
        } => {
            buf.push(SET_PAUSED);
            put_bytes(buf, key.as_bytes());
            buf.extend_from_slice(&generation.to_le_bytes());
            // A flag, not an empty message: an empty `Paused` still pauses.
            buf.push(u8::from(paused.is_some()));
            put_bytes(
                buf,
                &paused
                    .as_ref()
                    .map(prost::Message::encode_to_vec)
                    .unwrap_or_default(),
            );
        }
        Prepared::DeleteFinished { key, before } => {
            buf.push(DELETE_FINISHED);
            put_bytes(buf, key.as_bytes());
            put_time(buf, before);
        }
        Prepared::Guarded { write, job } => {
            buf.push(GUARDED);
            put_bytes(buf, &prost::Message::encode_to_vec(&**write));
            // A flag, not an empty value: a put of an empty job is still a put.
            buf.push(u8::from(job.is_some()));
            put_bytes(buf, job.as_deref().unwrap_or_default());
        }
        Prepared::ForgetIdempotency { key, before } => {
            buf.push(FORGET_IDEMPOTENCY);
            put_bytes(buf, key.as_bytes());
            put_time(buf, before);
        }
        Prepared::Restore {
            key,
            value,
            counter,
            finished,
            overwrite,
            due,
        } => {
            buf.push(if due.is_some() { RESTORE_DUE } else { RESTORE });
            // Flags, not empty values: an empty counter is still a counter.
            buf.push(
                u8::from(*overwrite) | u8::from(*finished) << 1 | u8::from(counter.is_some()) << 2,
            );
            put_bytes(buf, key.as_bytes());
            put_bytes(buf, value);
            put_bytes(buf, counter.as_deref().unwrap_or_default());
            if let Some(due) = due {
                buf.extend_from_slice(&due.to_le_bytes());
            }
        }
        Prepared::DropDue { key, due } => {
            buf.push(DROP_DUE);
            put_bytes(buf, key.as_bytes());
            buf.extend_from_slice(&due.to_le_bytes());
        }
        Prepared::IndexDue {
            key,
            generation,
            due,
        } => {
            buf.push(INDEX_DUE);
            put_bytes(buf, key.as_bytes());
            buf.extend_from_slice(&generation.to_le_bytes());
            buf.extend_from_slice(&due.to_le_bytes());
        }
        Prepared::MarkDueIndexed => buf.push(MARK_DUE_INDEXED),
        Prepared::AdvanceDue { before } => {
            buf.push(ADVANCE_DUE);
            buf.extend_from_slice(&before.to_le_bytes());
        }
    }
}

/// Reads a payload back; `None` if it is malformed.
fn decode_payload(mut p: &[u8]) -> Option<Vec<Vec<Prepared>>> {
    let count = take_u32(&mut p)?;
    let mut requests = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        let n = take_u32(&mut p)?;
        let mut ops = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            ops.push(decode_op(&mut p)?);
        }
        requests.push(ops);
    }
    p.is_empty().then_some(requests)
}

fn decode_op(p: &mut &[u8]) -> Option<Prepared> {
    let tag = take(p, 1)?[0];
    Some(match tag {
        PUT_JOB | PUT_JOB_DUE => {
            let create_only = match take(p, 1)?[0] {
                0 => false,
                1 => true,
                _ => return None,
            };
            let key = take_string(p)?;
            let value = take_bytes(p)?.to_vec();
            let due = if tag == PUT_JOB_DUE {
                Some(take_i64(p)?)
            } else {
                None
            };
            Prepared::PutJob {
                key,
                value,
                create_only,
                due,
            }
        }
        DELETE_JOB => Prepared::DeleteJob {
            key: take_string(p)?,
        },
        DELETE_PREFIX => Prepared::DeletePrefix {
            prefix: take_string(p)?,
        },
        PUT_COUNTER => {
            let key = take_string(p)?;
            let generation = take_u64(p)?;
            let value = take_bytes(p)?.to_vec();
            Prepared::PutCounter {
                key,
                generation,
                value,
            }
        }
        FINISH_JOB => {
            let key = take_string(p)?;
            let generation = take_u64(p)?;
            Prepared::FinishJob { key, generation }
        }
        RECORD_RESULT => {
            let record = <super::ResultRecord as prost::Message>::decode(take_bytes(p)?).ok()?;
            Prepared::RecordResult(Box::new(record))
        }
        SET_PAUSED => {
            let key = take_string(p)?;
            let generation = take_u64(p)?;
            let set = match take(p, 1)?[0] {
                0 => false,
                1 => true,
                _ => return None,
            };
            let bytes = take_bytes(p)?;
            let paused = if set {
                Some(<super::Paused as prost::Message>::decode(bytes).ok()?)
            } else {
                None
            };
            Prepared::SetPaused {
                key,
                generation,
                paused,
            }
        }
        DELETE_FINISHED => {
            let key = take_string(p)?;
            let before = take_time(p)?;
            Prepared::DeleteFinished { key, before }
        }
        GUARDED => {
            let write = <super::GuardedWrite as prost::Message>::decode(take_bytes(p)?).ok()?;
            let put = match take(p, 1)?[0] {
                0 => false,
                1 => true,
                _ => return None,
            };
            let job = take_bytes(p)?.to_vec();
            Prepared::Guarded {
                write: Box::new(write),
                job: put.then_some(job),
            }
        }
        FORGET_IDEMPOTENCY => {
            let key = take_string(p)?;
            let before = take_time(p)?;
            Prepared::ForgetIdempotency { key, before }
        }
        RESTORE | RESTORE_DUE => {
            let flags = take(p, 1)?[0];
            if flags > 0b111 {
                return None;
            }
            let key = take_string(p)?;
            let value = take_bytes(p)?.to_vec();
            let counter = take_bytes(p)?.to_vec();
            let due = if tag == RESTORE_DUE {
                Some(take_i64(p)?)
            } else {
                None
            };
            Prepared::Restore {
                key,
                value,
                counter: (flags & 0b100 != 0).then_some(counter),
                finished: flags & 0b10 != 0,
                overwrite: flags & 1 != 0,
                due,
            }
        }
        DROP_DUE => {
            let key = take_string(p)?;
            let due = take_i64(p)?;
            Prepared::DropDue { key, due }
        }
        MARK_DUE_INDEXED => Prepared::MarkDueIndexed,
        ADVANCE_DUE => Prepared::AdvanceDue {
            before: take_i64(p)?,
        },
        INDEX_DUE => {
            let key = take_string(p)?;
            let generation = take_u64(p)?;
            let due = take_i64(p)?;
            Prepared::IndexDue {
                key,
                generation,
                due,
            }
        }
        _ => return None,
    })
}

fn put_time(buf: &mut Vec<u8>, t: &prost_types::Timestamp) {
    buf.extend_from_slice(&t.seconds.to_le_bytes());
    buf.extend_from_slice(&t.nanos.to_le_bytes());
}

fn take_time(p: &mut &[u8]) -> Option<prost_types::Timestamp> {
    let seconds = i64::from_le_bytes(take(p, 8)?.try_into().ok()?);
    let nanos = i32::from_le_bytes(take(p, 4)?.try_into().ok()?);
    Some(prost_types::Timestamp { seconds, nanos })
}

fn take<'a>(p: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if p.len() < n {
        return None;
    }
    let (head, rest) = p.split_at(n);
    *p = rest;
    Some(head)
}

fn take_i64(p: &mut &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(take(p, 8)?.try_into().ok()?))
}

fn take_u32(p: &mut &[u8]) -> Option<usize> {
    let b = take(p, 4)?;
    Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
}

fn take_u64(p: &mut &[u8]) -> Option<u64> {
    let b = take(p, 8)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

fn take_bytes<'a>(p: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = take_u32(p)?;
    take(p, n)
}

fn take_string(p: &mut &[u8]) -> Option<String> {
    String::from_utf8(take_bytes(p)?.to_vec()).ok()
}

// ---- CRC-32 (IEEE, as zlib) ----

/// Slicing-by-8 lookup tables, built at compile time: `CRC_TABLES[0]` is the classic
/// byte-at-a-time table, `CRC_TABLES[k][b]` the CRC of byte `b` followed by `k` zero bytes.
/// Eight bytes per step instead of one: the writer thread checksums every logged batch.
const CRC_TABLES: [[u32; 256]; 8] = {
    let mut tables = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        tables[0][i] = c;
        i += 1;
    }
    let mut t = 1;
    while t < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[t - 1][i];
            tables[t][i] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            i += 1;
        }
        t += 1;
    }
    tables
};

/// CRC-32 of `bytes`.
fn crc32(bytes: &[u8]) -> u32 {
    !crc32_update(!0, bytes)
}

/// The running (inverted) CRC state `c` after `bytes`.
fn crc32_update(mut c: u32, bytes: &[u8]) -> u32 {
    let t = &CRC_TABLES;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let lo = c ^ u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        let hi = u32::from_le_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
        c = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xFF) as usize]
            ^ t[2][((hi >> 8) & 0xFF) as usize]
            ^ t[1][((hi >> 16) & 0xFF) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        c = t[0][((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        // Every length around the 8-byte steps agrees with the bit-by-bit definition.
        let data: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..data.len() {
            let mut c = !0u32;
            for &b in &data[..len] {
                c ^= u32::from(b);
                for _ in 0..8 {
                    c = if c & 1 != 0 {
                        0xEDB8_8320 ^ (c >> 1)
                    } else {
                        c >> 1
                    };
                }
            }
            assert_eq!(crc32(&data[..len]), !c, "length {len}");
        }
    }

    #[test]
    fn records_round_trip_and_a_reset_hides_older_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut wal = Wal::open(&path).unwrap();
        let ops = |k: &str| {
            vec![
                Prepared::PutJob {
                    key: k.into(),
                    value: vec![1, 2, 3],
                    create_only: true,
                    due: None,
                },
                Prepared::PutCounter {
                    key: k.into(),
                    generation: 7,
                    value: vec![9],
                },
                Prepared::FinishJob {
                    key: k.into(),
                    generation: 7,
                },
                Prepared::DeleteJob { key: k.into() },
                Prepared::DeletePrefix { prefix: k.into() },
                Prepared::SetPaused {
                    key: k.into(),
                    generation: 7,
                    paused: Some(super::super::Paused::default()),
                },
                Prepared::SetPaused {
                    key: k.into(),
                    generation: 7,
                    paused: None,
                },
            ]
        };
        for seq in 1..=5u64 {
            let a = ops(&format!("a{seq}"));
            let b = ops("b");
            wal.encode(seq, [a.as_slice(), b.as_slice()].into_iter());
            wal.write().unwrap();
        }
        let (records, end) = read_records(&path, 0).unwrap();
        assert_eq!(end, End::Clean);
        assert_eq!(
            records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        let requests = records[2].requests.as_ref().unwrap();
        assert_eq!(requests.len(), 2);
        assert!(matches!(&requests[0][0], Prepared::PutJob { key, .. } if key == "a3"));
        assert_eq!(requests[1].len(), 7);
        // An empty `Paused` still pauses; `None` resumes.
        assert!(matches!(
            &requests[1][5],
            Prepared::SetPaused {
                paused: Some(_),
                ..
            }
        ));
        assert!(matches!(
            &requests[1][6],
            Prepared::SetPaused { paused: None, .. }
        ));

        // After a reset, a shorter record 6 is followed by the remains of records 2..5.
        wal.reset();
        wal.encode(6, std::iter::empty());
        wal.write().unwrap();
        let (records, end) = read_records(&path, 5).unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [6]);
        assert_eq!(end, End::Clean, "the rest of an older log is no damage");
    }

    /// A clean restart finds the new log's records followed by the middle of an older, longer
    /// record: that is the end of the log, not damage and not worth a warning.
    #[test]
    fn the_rest_of_an_older_longer_record_is_a_clean_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut wal = Wal::open(&path).unwrap();
        let big = vec![Prepared::PutJob {
            key: "k".into(),
            value: vec![7; 5000],
            create_only: true,
            due: None,
        }];
        for seq in 1..=3u64 {
            wal.encode(seq, std::iter::once(big.as_slice()));
            wal.write().unwrap();
        }
        wal.reset();
        wal.encode(4, std::iter::once(&[][..]));
        wal.write().unwrap();
        let (records, end) = read_records(&path, 4).unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [4]);
        assert_eq!(end, End::Clean);
    }

    /// A torn record followed by a whole record of a batch far ahead of it: no log holds
    /// that many batches in so few bytes, so it is the bytes of something else, not proof
    /// that acknowledged batches were lost (checking such look-alikes made every restart
    /// after `kill -9` CRC megabytes of old records, for a second and more).
    #[test]
    fn a_record_further_ahead_than_the_log_can_reach_is_no_proof_of_loss() {
        let dir = tempfile::tempdir().unwrap();
        let record = |seq: u64| {
            let path = dir.path().join(format!("rec-{seq}"));
            let mut wal = Wal::open(&path).unwrap();
            wal.encode(seq, std::iter::once(&[][..]));
            wal.write().unwrap();
            let used = wal.used() as usize;
            std::fs::read(&path).unwrap()[..used].to_vec()
        };
        let mut bytes = record(1);
        // Batch 2's header, cut short by the crash: its length runs past the file.
        bytes.extend_from_slice(&(HAS_FOOTER | 0x0fff_ffff).to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&2u64.to_le_bytes());
        bytes.extend_from_slice(&record(1_000_000));
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, &bytes).unwrap();
        let (records, end) = read_records(&path, 0).unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1]);
        assert!(matches!(end, End::Torn(_)), "{end:?}");

        // The same with batch 3 right behind the torn one: that is a lost batch.
        let mut bytes = record(1);
        bytes.extend_from_slice(&(HAS_FOOTER | 0x0fff_ffff).to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&2u64.to_le_bytes());
        bytes.extend_from_slice(&record(3));
        std::fs::write(&path, &bytes).unwrap();
        let (_, end) = read_records(&path, 0).unwrap();
        assert!(matches!(end, End::Damaged(_)), "{end:?}");
    }

    #[test]
    fn guarded_writes_round_trip_puts_of_empty_jobs_and_deletes_apart() {
        let before = prost_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 7,
        };
        let write = super::super::GuardedWrite {
            key: "k".into(),
            create_only: true,
            if_match: Some(super::super::IfMatch {
                any: false,
                generations: vec![3, 4],
            }),
            idempotency: Some(super::super::IdempotencyClaim {
                key: "app||ns||a||key".into(),
                ..Default::default()
            }),
            due_ms: Some(-5),
        };
        let ops = [
            Prepared::Guarded {
                write: Box::new(write.clone()),
                job: Some(Vec::new()),
            },
            Prepared::Guarded {
                write: Box::new(write.clone()),
                job: None,
            },
            Prepared::ForgetIdempotency {
                key: "app||ns||a||key".into(),
                before,
            },
        ];
        let mut buf = Vec::new();
        put_u32(&mut buf, 1);
        put_u32(&mut buf, ops.len());
        for op in &ops {
            encode_op(&mut buf, op);
        }
        let requests = decode_payload(&buf).unwrap();
        match requests[0].as_slice() {
            [
                Prepared::Guarded {
                    write: a,
                    job: Some(put),
                },
                Prepared::Guarded {
                    write: b,
                    job: None,
                },
                Prepared::ForgetIdempotency { key, before: at },
            ] => {
                assert_eq!(
                    (**a == write, put.is_empty(), **b == write),
                    (true, true, true)
                );
                assert_eq!((key.as_str(), *at), ("app||ns||a||key", before));
            }
            other => panic!("{} ops decoded", other.len()),
        }
    }
}
