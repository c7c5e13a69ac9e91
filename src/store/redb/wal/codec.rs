//! The payload of a log record: a batch's requests, each a list of ops, as bytes.
//!
//! `[requests u32]`, then for each request `[ops u32]` and its ops, each its tag (one byte)
//! and its fields in order ([`Field`]: little endian; strings and bytes after a u32 length;
//! an optional value after a flag byte). A tag is never reused: a layout that changes gets
//! a new tag and the old one stays readable, so a log left by an older jobsd replays after an
//! upgrade (`every_op_keeps_its_bytes_and_reads_back` holds every layout to its bytes).

use prost::Message;
use prost_types::Timestamp;

use crate::store::encoded::{EncodedCounter, EncodedRestore, Prepared};
use crate::store::{GuardedWrite, Paused, ResultRecord};

/// Appends each value (a tag, then fields) in order.
macro_rules! put {
    ($buf:expr, $($field:expr),+) => {{
        $($field.put($buf);)+
    }};
}

/// Op tags.
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
// Issue 38 (actor state).
const PUT_VALUE: u8 = 50;

/// Appends the op `op`.
pub(super) fn encode_op(buf: &mut Vec<u8>, op: &Prepared) {
    match op {
        Prepared::PutJob {
            key,
            job,
            create_only,
            due,
        } => {
            buf.push(if due.is_some() { PUT_JOB_DUE } else { PUT_JOB });
            put!(buf, create_only, key, job);
            if let Some(due) = due {
                due.put(buf);
            }
        }
        Prepared::DeleteJob { key } => put!(buf, DELETE_JOB, key),
        Prepared::DeletePrefix { prefix } => put!(buf, DELETE_PREFIX, prefix),
        Prepared::PutCounter { key, counter } => put!(buf, PUT_COUNTER, key, counter),
        Prepared::FinishJob { key, generation } => put!(buf, FINISH_JOB, key, generation),
        Prepared::RecordResult(record) => put!(buf, RECORD_RESULT, record),
        Prepared::SetPaused {
            key,
            generation,
            paused,
        } => put!(buf, SET_PAUSED, key, generation, paused),
        Prepared::DeleteFinished { key, before } => put!(buf, DELETE_FINISHED, key, before),
        Prepared::Guarded { write, job } => put!(buf, GUARDED, write, job),
        Prepared::ForgetIdempotency { key, before } => {
            put!(buf, FORGET_IDEMPOTENCY, key, before);
        }
        Prepared::Restore(record) => {
            let EncodedRestore {
                key,
                value,
                counter,
                finished,
                overwrite,
                due,
            } = &**record;
            buf.push(if due.is_some() { RESTORE_DUE } else { RESTORE });
            // Flags, not empty values: an empty counter is still a counter.
            buf.push(
                u8::from(*overwrite) | u8::from(*finished) << 1 | u8::from(counter.is_some()) << 2,
            );
            put!(buf, key, value);
            put_bytes(buf, counter.as_deref().unwrap_or_default());
            if let Some(due) = due {
                due.put(buf);
            }
        }
        Prepared::DropDue { key, due } => put!(buf, DROP_DUE, key, due),
        Prepared::IndexDue {
            key,
            generation,
            due,
        } => put!(buf, INDEX_DUE, key, generation, due),
        Prepared::MarkDueIndexed => buf.push(MARK_DUE_INDEXED),
        Prepared::AdvanceDue { before } => put!(buf, ADVANCE_DUE, before),
        Prepared::PutValue { key, value } => put!(buf, PUT_VALUE, key, value),
    }
}

/// Reads the op at the start of `p`; `None` if it is malformed.
fn decode_op(p: &mut &[u8]) -> Option<Prepared> {
    let tag = take::<u8>(p)?;
    Some(match tag {
        PUT_JOB | PUT_JOB_DUE => Prepared::PutJob {
            create_only: take(p)?,
            key: take(p)?,
            job: take(p)?,
            due: if tag == PUT_JOB_DUE {
                Some(take(p)?)
            } else {
                None
            },
        },
        DELETE_JOB => Prepared::DeleteJob { key: take(p)? },
        DELETE_PREFIX => Prepared::DeletePrefix { prefix: take(p)? },
        PUT_COUNTER => Prepared::PutCounter {
            key: take(p)?,
            counter: take(p)?,
        },
        FINISH_JOB => Prepared::FinishJob {
            key: take(p)?,
            generation: take(p)?,
        },
        RECORD_RESULT => Prepared::RecordResult(take(p)?),
        SET_PAUSED => Prepared::SetPaused {
            key: take(p)?,
            generation: take(p)?,
            paused: take(p)?,
        },
        DELETE_FINISHED => Prepared::DeleteFinished {
            key: take(p)?,
            before: take(p)?,
        },
        GUARDED => Prepared::Guarded {
            write: take(p)?,
            job: take(p)?,
        },
        FORGET_IDEMPOTENCY => Prepared::ForgetIdempotency {
            key: take(p)?,
            before: take(p)?,
        },
        RESTORE | RESTORE_DUE => {
            let flags = take::<u8>(p)?;
            if flags > 0b111 {
                return None;
            }
            let key = take(p)?;
            let value = take(p)?;
            let counter: Vec<u8> = take(p)?;
            Prepared::Restore(Box::new(EncodedRestore {
                key,
                value,
                counter: (flags & 0b100 != 0).then_some(counter),
                finished: flags & 0b10 != 0,
                overwrite: flags & 1 != 0,
                due: if tag == RESTORE_DUE {
                    Some(take(p)?)
                } else {
                    None
                },
            }))
        }
        DROP_DUE => Prepared::DropDue {
            key: take(p)?,
            due: take(p)?,
        },
        MARK_DUE_INDEXED => Prepared::MarkDueIndexed,
        INDEX_DUE => Prepared::IndexDue {
            key: take(p)?,
            generation: take(p)?,
            due: take(p)?,
        },
        ADVANCE_DUE => Prepared::AdvanceDue { before: take(p)? },
        PUT_VALUE => Prepared::PutValue {
            key: take(p)?,
            value: take(p)?,
        },
        _ => return None,
    })
}

/// Appends a length: of a string, a value or a list, all bounded far below 4 GiB.
pub(super) fn put_u32(buf: &mut Vec<u8>, n: usize) {
    buf.extend_from_slice(&(n as u32).to_le_bytes());
}

/// Appends `bytes` after their length.
fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(buf, bytes.len());
    buf.extend_from_slice(bytes);
}

/// Reads a payload back; `None` if it is malformed.
pub(super) fn decode_payload(mut p: &[u8]) -> Option<Vec<Vec<Prepared>>> {
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

/// The next `T` of `p`.
fn take<T: Field>(p: &mut &[u8]) -> Option<T> {
    T::take(p)
}

/// The next `n` bytes of `p`.
fn take_n<'a>(p: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if p.len() < n {
        return None;
    }
    let (head, rest) = p.split_at(n);
    *p = rest;
    Some(head)
}

/// The next `N` bytes of `p`, as an array.
fn take_array<const N: usize>(p: &mut &[u8]) -> Option<[u8; N]> {
    take_n(p, N)?.try_into().ok()
}

/// The next length.
fn take_u32(p: &mut &[u8]) -> Option<usize> {
    Some(u32::from_le_bytes(take_array(p)?) as usize)
}

/// The next length-prefixed bytes.
fn take_bytes<'a>(p: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = take_u32(p)?;
    take_n(p, n)
}

/// A value as the log holds it.
trait Field: Sized {
    /// Appends the value.
    fn put(&self, buf: &mut Vec<u8>);
    /// Reads the value at the start of `p`; `None` if it is malformed.
    fn take(p: &mut &[u8]) -> Option<Self>;
}

/// A tag or flags byte.
impl Field for u8 {
    fn put(&self, buf: &mut Vec<u8>) {
        buf.push(*self);
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        Some(take_array::<1>(p)?[0])
    }
}

/// One byte, 0 or 1.
impl Field for bool {
    fn put(&self, buf: &mut Vec<u8>) {
        buf.push(u8::from(*self));
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        match u8::take(p)? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

impl Field for u64 {
    fn put(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self.to_le_bytes());
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        Some(u64::from_le_bytes(take_array(p)?))
    }
}

impl Field for i64 {
    fn put(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self.to_le_bytes());
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        Some(i64::from_le_bytes(take_array(p)?))
    }
}

impl Field for Vec<u8> {
    fn put(&self, buf: &mut Vec<u8>) {
        put_bytes(buf, self);
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        Some(take_bytes(p)?.to_vec())
    }
}

impl Field for Box<Vec<u8>> {
    fn put(&self, buf: &mut Vec<u8>) {
        put_bytes(buf, self);
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        Some(Box::new(Vec::take(p)?))
    }
}

/// UTF-8 bytes.
impl Field for String {
    fn put(&self, buf: &mut Vec<u8>) {
        put_bytes(buf, self.as_bytes());
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        String::from_utf8(Vec::take(p)?).ok()
    }
}

/// Seconds (i64), then nanoseconds (i32).
impl Field for Timestamp {
    fn put(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self.seconds.to_le_bytes());
        buf.extend_from_slice(&self.nanos.to_le_bytes());
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        let seconds = i64::take(p)?;
        let nanos = i32::from_le_bytes(take_array(p)?);
        Some(Timestamp { seconds, nanos })
    }
}

/// The generation, then the counter's bytes.
impl Field for EncodedCounter {
    fn put(&self, buf: &mut Vec<u8>) {
        put!(buf, self.generation, self.bytes);
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        Some(EncodedCounter {
            generation: take(p)?,
            bytes: take(p)?,
        })
    }
}

/// A flag, then the value, or empty bytes for `None`: a flag rather than empty bytes, since
/// an empty message or job is still a value.
impl<T: Field> Field for Option<T> {
    fn put(&self, buf: &mut Vec<u8>) {
        self.is_some().put(buf);
        match self {
            Some(value) => value.put(buf),
            None => put_bytes(buf, &[]),
        }
    }
    fn take(p: &mut &[u8]) -> Option<Self> {
        if bool::take(p)? {
            Some(Some(T::take(p)?))
        } else {
            take_bytes(p)?;
            Some(None)
        }
    }
}

/// Protobuf messages: their encoding, length-prefixed.
macro_rules! message_field {
    ($($message:ty),+) => {$(
        impl Field for $message {
            fn put(&self, buf: &mut Vec<u8>) {
                put_bytes(buf, &self.encode_to_vec());
            }
            fn take(p: &mut &[u8]) -> Option<Self> {
                <$message>::decode(take_bytes(p)?).ok()
            }
        }
    )+};
}
message_field!(Paused, Box<ResultRecord>, Box<GuardedWrite>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_writes_round_trip_puts_of_empty_jobs_and_deletes_apart() {
        let before = prost_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 7,
        };
        let write = crate::store::GuardedWrite {
            key: "k".into(),
            create_only: true,
            if_match: Some(crate::store::IfMatch {
                any: false,
                generations: vec![3, 4],
            }),
            idempotency: Some(crate::store::IdempotencyClaim {
                key: "app||ns||a||key".into(),
                ..Default::default()
            }),
            due_ms: Some(-5),
        };
        let ops = [
            Prepared::Guarded {
                write: Box::new(write.clone()),
                job: Some(Box::default()),
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

    /// Every op as the log has written it since its tag was made: records of old logs must
    /// still read, so these bytes never change (a new layout gets a new tag).
    fn every_op() -> Vec<Prepared> {
        let at = prost_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 7,
        };
        let write = crate::store::GuardedWrite {
            key: "g".into(),
            create_only: true,
            if_match: Some(crate::store::IfMatch {
                any: false,
                generations: vec![3],
            }),
            idempotency: None,
            due_ms: Some(-5),
        };
        let restore = |counter: Option<Vec<u8>>, finished, overwrite, due| {
            Prepared::Restore(Box::new(EncodedRestore {
                key: "r".into(),
                value: vec![1, 2],
                counter,
                finished,
                overwrite,
                due,
            }))
        };
        vec![
            Prepared::PutJob {
                key: "k".into(),
                job: vec![0xAA, 0xBB],
                create_only: true,
                due: None,
            },
            Prepared::PutJob {
                key: "k".into(),
                job: Vec::new(),
                create_only: false,
                due: Some(-2),
            },
            Prepared::DeleteJob { key: "d".into() },
            Prepared::DeletePrefix { prefix: "p".into() },
            Prepared::PutCounter {
                key: "c".into(),
                counter: EncodedCounter {
                    generation: 9,
                    bytes: vec![8, 9],
                },
            },
            Prepared::FinishJob {
                key: "f".into(),
                generation: 4,
            },
            Prepared::RecordResult(Box::new(crate::store::ResultRecord {
                key: "rr".into(),
                generation: 2,
                finish: true,
                ..Default::default()
            })),
            Prepared::SetPaused {
                key: "s".into(),
                generation: 5,
                paused: Some(crate::store::Paused {
                    reason: "x".into(),
                    ..Default::default()
                }),
            },
            Prepared::SetPaused {
                key: "s".into(),
                generation: 5,
                paused: None,
            },
            Prepared::DeleteFinished {
                key: "df".into(),
                before: at,
            },
            Prepared::Guarded {
                write: Box::new(write.clone()),
                job: Some(Box::new(vec![7])),
            },
            Prepared::Guarded {
                write: Box::new(write),
                job: None,
            },
            Prepared::ForgetIdempotency {
                key: "i".into(),
                before: at,
            },
            restore(None, true, false, None),
            restore(Some(vec![3]), false, true, Some(11)),
            restore(Some(Vec::new()), false, false, None),
            Prepared::DropDue {
                key: "dd".into(),
                due: 12,
            },
            Prepared::MarkDueIndexed,
            Prepared::IndexDue {
                key: "x".into(),
                generation: 6,
                due: -13,
            },
            Prepared::AdvanceDue { before: 14 },
        ]
    }

    /// [`every_op`] as one request of a payload, in hex.
    const EVERY_OP: &str = "01000000140000000101010000006b02000000aabb2800010000006b00000000feffffffffffffff0201000000640301000000700401000000630900000000000000020000000809050100000066040000000000000006080000000a0272721002200108010000007305000000000000000103000000120178080100000073050000000000000000000000000702000000646600d2496b000000000700000014150000000a016710011a0312010328fbffffffffffffffff0101010000000714150000000a016710011a0312010328fbffffffffffffffff01000000000015010000006900d2496b00000000070000001e020100000072020000000102000000002905010000007202000000010201000000030b000000000000001e040100000072020000000102000000002a0200000064640c000000000000002b2c01000000780600000000000000f3ffffffffffffff2d0e00000000000000";

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The ops made after [`EVERY_OP`] was fixed, with their bytes.
    #[test]
    fn put_value_keeps_its_bytes_and_reads_back() {
        let ops = vec![
            Prepared::PutValue {
                key: "v".into(),
                value: Some(vec![1, 2]),
            },
            Prepared::PutValue {
                key: "v".into(),
                value: None,
            },
        ];
        let mut buf = Vec::new();
        put_u32(&mut buf, 1);
        put_u32(&mut buf, ops.len());
        for op in &ops {
            encode_op(&mut buf, op);
        }
        assert_eq!(
            hex(&buf),
            "0100000002000000320100000076010200000001023201000000760000000000"
        );
        let requests = decode_payload(&buf).unwrap();
        assert!(requests == vec![ops], "decoded differently");
    }

    #[test]
    fn every_op_keeps_its_bytes_and_reads_back() {
        let ops = every_op();
        let mut buf = Vec::new();
        put_u32(&mut buf, 1);
        put_u32(&mut buf, ops.len());
        for op in &ops {
            encode_op(&mut buf, op);
        }
        assert_eq!(hex(&buf), EVERY_OP);
        let requests = decode_payload(&buf).unwrap();
        assert!(requests == vec![ops], "decoded differently");
    }
}
