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

use crate::store::encoded::Prepared;

mod codec;
mod crc;

use codec::{decode_payload, encode_op, put_u32};
use crc::{crc32, crc32_update};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::encoded::EncodedCounter;

    #[test]
    fn records_round_trip_and_a_reset_hides_older_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut wal = Wal::open(&path).unwrap();
        let ops = |k: &str| {
            vec![
                Prepared::PutJob {
                    key: k.into(),
                    job: vec![1, 2, 3],
                    create_only: true,
                    due: None,
                },
                Prepared::PutCounter {
                    key: k.into(),
                    counter: EncodedCounter {
                        generation: 7,
                        bytes: vec![9],
                    },
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
                    paused: Some(crate::store::Paused::default()),
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
            job: vec![7; 5000],
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
}
