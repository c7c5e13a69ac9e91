//! NDJSON read from a byte stream one line at a time, holding at most one line and one chunk:
//! an import of a million jobs never has the file in memory.

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

/// One line, numbered from 1, without its `\n` (nor a `\r` before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// 1 for the first line of the stream.
    pub number: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Whether a newline ended it (the last line of a stream cut short has none).
    pub terminated: bool,
}

/// Why the lines stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinesError {
    /// The stream failed (the client went away, a transport error).
    #[error("reading the request failed after line {after}: {message}")]
    Read {
        /// Lines read before.
        after: u64,
        /// What the transport said.
        message: String,
    },
    /// A line longer than allowed.
    #[error("line {line} is longer than {max} bytes")]
    TooLong {
        /// Its number.
        line: u64,
        /// The limit.
        max: usize,
    },
}

/// Lines of a stream of chunks.
pub struct Lines<S> {
    /// Where the bytes come from.
    stream: S,
    /// Bytes read and not returned yet (from `start` on).
    buf: Vec<u8>,
    /// Where the next line starts in `buf`.
    start: usize,
    /// Lines returned so far.
    number: u64,
    /// The stream has ended.
    eof: bool,
    /// Longest line accepted.
    max_line: usize,
}

impl<S, E> Lines<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    /// Lines of `stream`, none longer than `max_line` bytes.
    pub fn new(stream: S, max_line: usize) -> Self {
        Lines {
            stream,
            buf: Vec::new(),
            start: 0,
            number: 0,
            eof: false,
            max_line,
        }
    }

    /// Lines returned so far.
    pub fn count(&self) -> u64 {
        self.number
    }

    /// The first bytes of the stream, read without consuming them (at least `n` unless the
    /// stream is shorter): to tell formats apart before reading lines.
    pub async fn peek(&mut self, n: usize) -> Result<&[u8], LinesError> {
        while self.buf.len() - self.start < n && !self.eof {
            self.fill().await?;
        }
        Ok(&self.buf[self.start..])
    }

    /// Everything left in the stream, up to `max` bytes (`None` when there is more).
    pub async fn rest(mut self, max: usize) -> Result<Option<Vec<u8>>, LinesError> {
        while !self.eof {
            if self.buf.len() - self.start > max {
                return Ok(None);
            }
            self.fill().await?;
        }
        let rest = self.buf.split_off(self.start);
        Ok((rest.len() <= max).then_some(rest))
    }

    /// The next line; `None` at the end of the stream.
    pub async fn next_line(&mut self) -> Result<Option<Line>, LinesError> {
        // Bytes after `start` known to hold no newline (a fill may move `start`).
        let mut searched = 0;
        loop {
            let from = self.start + searched;
            if let Some(i) = self.buf[from..].iter().position(|&b| b == b'\n') {
                let end = from + i;
                if end - self.start > self.max_line {
                    return Err(self.too_long());
                }
                let bytes = self.take(end, end + 1);
                return Ok(Some(self.line(bytes, true)));
            }
            searched = self.buf.len() - self.start;
            if searched > self.max_line {
                return Err(self.too_long());
            }
            if self.eof {
                if self.start == self.buf.len() {
                    return Ok(None);
                }
                let end = self.buf.len();
                let bytes = self.take(end, end);
                return Ok(Some(self.line(bytes, false)));
            }
            self.fill().await?;
        }
    }

    fn too_long(&self) -> LinesError {
        LinesError::TooLong {
            line: self.number + 1,
            max: self.max_line,
        }
    }

    /// Reads one more chunk into the buffer, dropping what was returned already.
    async fn fill(&mut self) -> Result<(), LinesError> {
        match self.stream.next().await {
            Some(Ok(chunk)) => {
                if self.start > 0 {
                    self.buf.drain(..self.start);
                    self.start = 0;
                }
                self.buf.extend_from_slice(&chunk);
            }
            Some(Err(e)) => {
                return Err(LinesError::Read {
                    after: self.number,
                    message: e.to_string(),
                });
            }
            None => self.eof = true,
        }
        Ok(())
    }

    /// The bytes from `start` to `end`, the next line starting at `next`.
    fn take(&mut self, end: usize, next: usize) -> Vec<u8> {
        let mut bytes = self.buf[self.start..end].to_vec();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        self.start = next;
        bytes
    }

    fn line(&mut self, bytes: Vec<u8>, terminated: bool) -> Line {
        self.number += 1;
        Line {
            number: self.number,
            bytes,
            terminated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&str]) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
        let parts: Vec<Result<Bytes, std::io::Error>> = parts
            .iter()
            .map(|p| Ok(Bytes::copy_from_slice(p.as_bytes())))
            .collect();
        futures_util::stream::iter(parts)
    }

    async fn all(parts: &[&str], max: usize) -> Result<Vec<(u64, String, bool)>, LinesError> {
        let mut lines = Lines::new(chunks(parts), max);
        let mut out = Vec::new();
        while let Some(l) = lines.next_line().await? {
            out.push((l.number, String::from_utf8(l.bytes).unwrap(), l.terminated));
        }
        Ok(out)
    }

    #[tokio::test]
    async fn lines_split_across_chunks_come_out_whole_and_numbered() {
        let got = all(&["a\nb", "c\r\n", "", "\nd"], 100).await.unwrap();
        assert_eq!(
            got,
            vec![
                (1, "a".into(), true),
                (2, "bc".into(), true),
                (3, "".into(), true),
                (4, "d".into(), false),
            ]
        );
    }

    #[tokio::test]
    async fn a_line_across_many_chunks_after_earlier_lines_comes_out_whole() {
        let got = all(&["first\nsec", "ond-", "part", "\nthird\n"], 100)
            .await
            .unwrap();
        let texts: Vec<&str> = got.iter().map(|(_, t, _)| t.as_str()).collect();
        assert_eq!(texts, ["first", "second-part", "third"]);
    }

    #[tokio::test]
    async fn a_line_past_the_limit_is_refused_with_its_number() {
        let err = all(&["ok\n", "0123456789", "0123456789\n"], 12)
            .await
            .unwrap_err();
        assert_eq!(err, LinesError::TooLong { line: 2, max: 12 });
    }

    #[tokio::test]
    async fn peek_leaves_the_bytes_for_the_lines() {
        let mut lines = Lines::new(chunks(&["{", "\"a\"}\nx"]), 100);
        assert_eq!(lines.peek(2).await.unwrap(), b"{\"a\"}\nx");
        assert_eq!(lines.next_line().await.unwrap().unwrap().bytes, b"{\"a\"}");
        assert_eq!(lines.rest(10).await.unwrap(), Some(b"x".to_vec()));
    }
}
