//! Reading records page by page: the key range of a prefix, where a page starts, and the
//! join of jobs with their counters as both arrive in key order.

use std::ops::Bound;

use super::records::{decode_counter, decode_job};
use super::{Error, LoadedJob, StoredJob};

/// Where a [`Store::page`](super::Store::page) starts: after `after` when it is a key of
/// the prefix, else at the prefix; `None` when `after` is past every key of the prefix.
pub(crate) fn page_start<'a>(prefix: &'a str, after: Option<&'a str>) -> Option<Bound<&'a str>> {
    match after {
        Some(after) if after.starts_with(prefix) => Some(Bound::Excluded(after)),
        Some(after) if after > prefix => None,
        _ => Some(Bound::Included(prefix)),
    }
}

/// The key range holding exactly the keys that start with a prefix.
pub(crate) struct PrefixRange<'a> {
    /// The prefix: the smallest key in the range.
    start: &'a str,
    /// The first key past the range; `None` when every key from `start` on is in it.
    end: Option<String>,
}

impl<'a> PrefixRange<'a> {
    /// The range of keys starting with `prefix`.
    ///
    /// Keys order byte-wise, and UTF-8 byte order is code point order, so the range ends at
    /// the prefix with its last incrementable character incremented.
    pub(crate) fn new(prefix: &'a str) -> Self {
        let mut end = prefix.to_owned();
        while let Some(last) = end.pop() {
            if let Some(next) = next_char(last) {
                end.push(next);
                return PrefixRange {
                    start: prefix,
                    end: Some(end),
                };
            }
        }
        // Empty, or only char::MAX: every key from `prefix` on starts with it.
        PrefixRange {
            start: prefix,
            end: None,
        }
    }

    /// The range as bounds for `BTreeMap::range` and redb's `range`.
    pub(crate) fn bounds(&self) -> (Bound<&str>, Bound<&str>) {
        let end = match &self.end {
            Some(end) => Bound::Excluded(end.as_str()),
            None => Bound::Unbounded,
        };
        (Bound::Included(self.start), end)
    }
}

/// The next Unicode scalar value after `c`.
fn next_char(c: char) -> Option<char> {
    match c {
        '\u{D7FF}' => Some('\u{E000}'),
        char::MAX => None,
        c => char::from_u32(u32::from(c) + 1),
    }
}

/// Joins jobs and counters that arrive in key order into [`LoadedJob`]s, attaching a counter
/// only to the job with the same key and generation.
pub(crate) struct Joiner<C> {
    /// Counters in key order, as raw `(key, bytes)`.
    counters: C,
    /// A counter read from `counters` but not joined yet (its key is past the last job's).
    pending: Option<(String, Vec<u8>)>,
    /// How a job's bytes decode: [`decode_job`], or the etcd store's own (its values follow
    /// go-etcd-cron's layout).
    decode: fn(&str, &[u8]) -> Result<StoredJob, Error>,
}

impl<C> Joiner<C>
where
    C: Iterator<Item = Result<(String, Vec<u8>), Error>>,
{
    /// A joiner over `counters`, which must cover at least the keys of the jobs joined.
    pub(crate) fn new(counters: C) -> Self {
        Self::decoding(counters, decode_job)
    }

    /// A joiner over `counters` whose jobs' bytes `decode` reads.
    pub(crate) fn decoding(
        counters: C,
        decode: fn(&str, &[u8]) -> Result<StoredJob, Error>,
    ) -> Self {
        Joiner {
            counters,
            pending: None,
            decode,
        }
    }

    /// The loaded form of the job under `key`; jobs must come in increasing key order.
    pub(crate) fn join(&mut self, key: String, job_bytes: &[u8]) -> Result<LoadedJob, Error> {
        let job = (self.decode)(&key, job_bytes)?;
        let mut counter = None;
        loop {
            let (ckey, bytes) = match self.pending.take() {
                Some(pending) => pending,
                None => match self.counters.next() {
                    Some(next) => next?,
                    None => break,
                },
            };
            match ckey.as_str().cmp(key.as_str()) {
                // A counter without a job: the ops never leave one, but the merge must not
                // stall on it.
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    let stored = decode_counter(&ckey, &bytes)?;
                    if stored.generation == job.generation {
                        counter = Some(stored);
                    }
                    break;
                }
                std::cmp::Ordering::Greater => {
                    self.pending = Some((ckey, bytes));
                    break;
                }
            }
        }
        Ok(LoadedJob { key, job, counter })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_range(prefix: &str, key: &str) -> bool {
        std::ops::RangeBounds::<str>::contains(&PrefixRange::new(prefix).bounds(), key)
    }

    #[test]
    fn prefix_range_holds_exactly_the_prefixed_keys() {
        let keys = [
            "",
            "a",
            "app||ns||a",
            "app||ns||a||",
            "app||ns||a||x",
            "app||ns||a||\u{10FFFF}",
            "app||ns||ab||x",
            "app||ns||a|}",
            "app||ns||a}",
            "\u{D7FF}",
            "\u{D7FF}z",
            "\u{E000}",
            "\u{10FFFF}",
            "\u{10FFFF}a",
            "b",
        ];
        let prefixes = [
            "",
            "a",
            "app||ns||a||",
            "\u{D7FF}",
            "\u{10FFFF}",
            "a\u{10FFFF}",
        ];
        for prefix in prefixes {
            for key in keys {
                assert_eq!(
                    in_range(prefix, key),
                    key.starts_with(prefix),
                    "prefix {prefix:?} key {key:?}"
                );
            }
        }
    }

    /// Characters around the boundaries `PrefixRange` must get right.
    fn boundary_char() -> impl proptest::strategy::Strategy<Value = char> {
        proptest::sample::select(vec![
            'a',
            'b',
            '|',
            '}',
            '\u{7F}',
            '\u{80}',
            '\u{D7FF}',
            '\u{E000}',
            '\u{FFFF}',
            '\u{10000}',
            '\u{10FFFF}',
        ])
    }

    proptest::proptest! {
        #[test]
        fn prefix_range_matches_starts_with(
            prefix in proptest::collection::vec(boundary_char(), 0..4),
            rest in proptest::collection::vec(boundary_char(), 0..5),
            prefixed in proptest::bool::ANY,
        ) {
            let prefix: String = prefix.into_iter().collect();
            let rest: String = rest.into_iter().collect();
            let key = if prefixed { format!("{prefix}{rest}") } else { rest };
            proptest::prop_assert_eq!(in_range(&prefix, &key), key.starts_with(&prefix));
        }
    }
}
