//! The data directory's filesystem as the [`Redb`](super::Redb) store meets it: free space
//! kept back so that the database itself never runs out, and errors that name the file and
//! say what the user can do.
//!
//! Why a floor: redb turns any failed write into a permanent failure of the open database
//! ("previous I/O error", until it is reopened), and a checkpoint that cannot grow the file is
//! such a failure. Refusing new writes while the filesystem still has [`floor`] bytes free
//! keeps the writes already taken (and the log replay after a restart) room to land, so a
//! full disk ends in refused creates, not in a store that can no longer read.

use std::io;
use std::path::Path;

use crate::store::Error;

/// Most bytes kept free on the data directory's filesystem.
const MAX_FLOOR: u64 = 64 << 20;

/// Bytes a write must leave free on a filesystem of `total` bytes: 64 MiB, or an eighth of
/// a smaller filesystem; `JOBSD_MIN_FREE_BYTES` sets it (0 turns the floor off, which the
/// fault tests use to meet a real `ENOSPC`).
pub(crate) fn floor(total: u64) -> u64 {
    static SET: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let set = SET.get_or_init(|| {
        std::env::var("JOBSD_MIN_FREE_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    set.unwrap_or(MAX_FLOOR.min(total / 8))
}

/// Free bytes (for an unprivileged writer) and total bytes of the filesystem holding `dir`.
pub(crate) fn space(dir: &Path) -> io::Result<(u64, u64)> {
    let st = rustix::fs::statvfs(dir)?;
    Ok((
        st.f_bavail.saturating_mul(st.f_frsize),
        st.f_blocks.saturating_mul(st.f_frsize),
    ))
}

/// The refusal of a write when `dir`'s filesystem has only `free` of `total` bytes left.
pub(crate) fn full(dir: &Path, free: u64, total: u64) -> Error {
    Error::io(io::Error::new(
        io::ErrorKind::StorageFull,
        format!(
            "disk full: the data dir {} has {} free of {} and jobsd keeps {} free for what it \
             already accepted; free space there (writes resume by themselves)",
            dir.display(),
            mib(free),
            mib(total),
            mib(floor(total)),
        ),
    ))
}

/// Whether `err` (or what it wraps) is the filesystem running out of space.
pub(crate) fn is_full(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<io::Error>()
            && (io.kind() == io::ErrorKind::StorageFull
                || io.kind() == io::ErrorKind::QuotaExceeded
                || io.raw_os_error() == Some(28))
        {
            return true;
        }
        cur = e.source();
    }
    // redb's errors wrap the io error without exposing it as a source.
    err.to_string().contains("(os error 28)")
}

/// `err` from `what` on `file`, with the file named and, for a full disk, what to do.
pub(crate) fn at(file: &Path, what: &str, err: impl std::error::Error + 'static) -> Error {
    // redb's errors carry the io error only in their text.
    let text = err.to_string();
    let kind = if is_full(&err) {
        io::ErrorKind::StorageFull
    } else if text.contains("(os error 30)") {
        io::ErrorKind::ReadOnlyFilesystem
    } else if text.contains("(os error 13)") {
        io::ErrorKind::PermissionDenied
    } else {
        err_kind(&err)
    };
    let hint = match kind {
        io::ErrorKind::StorageFull => {
            " (disk full: free space on that filesystem; writes resume by themselves)"
        }
        io::ErrorKind::ReadOnlyFilesystem | io::ErrorKind::PermissionDenied => {
            " (the data dir must be writable by jobsd)"
        }
        _ => "",
    };
    Error::io(io::Error::new(
        kind,
        format!("{what} {}: {text}{hint}", file.display()),
    ))
}

/// The io kind of `err` or of the first io error it wraps.
fn err_kind(err: &(dyn std::error::Error + 'static)) -> io::ErrorKind {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return io.kind();
        }
        cur = e.source();
    }
    io::ErrorKind::Other
}

/// `n` bytes in MiB with one decimal.
fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / f64::from(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_found_through_wrappers_and_named() {
        let enospc = io::Error::from_raw_os_error(28);
        let wrapped = ::redb::StorageError::Io(enospc);
        assert!(is_full(&wrapped));
        let err = at(Path::new("/d/jobsd.redb"), "cannot commit to", wrapped);
        let text = err.to_string();
        assert!(text.contains("/d/jobsd.redb"), "{text}");
        assert!(text.contains("disk full"), "{text}");
        assert!(!is_full(&io::Error::other("x")));
        assert_eq!(floor(1 << 30), 64 << 20);
        assert_eq!(floor(64 << 20), 8 << 20);
    }
}
