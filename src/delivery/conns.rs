//! The connections to an HTTP app: a stack of idle HTTP/1.1 keep-alive connections, or one
//! multiplexed h2c connection.
//!
//! This replaces hyper-util's pooled `Client`: its pool checkout and return (a task spawned
//! per request to put the connection back), pool keys and request extensions were ≈10 % of
//! jobsd's CPU in a burst of triggers. Here a call takes an idle connection (or opens one),
//! sends, reads the answer to its end and puts the connection back, all inline.

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::Error;

/// The request body type sent to the app.
pub(super) type ReqBody = Full<Bytes>;

/// How long an idle connection is kept; apps commonly close theirs after 60–120 s.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Bounds a connect attempt: the app is local, so a connect that hangs means it is not there.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections to one app address.
pub(super) struct Conns {
    /// Where the app listens.
    addr: SocketAddr,
    /// HTTP/1.1 or h2c.
    kind: Kind,
}

enum Kind {
    /// HTTP/1.1: one request per connection at a time.
    H1 {
        /// Idle connections, the most recently used last (expired ones sink to the bottom).
        idle: Mutex<Vec<Idle>>,
        /// Most idle connections kept; more are closed when their call ends.
        max_idle: usize,
        /// One permit per connection that may be open at once: a call waits for a
        /// connection to come back rather than open one more past the bound.
        slots: tokio::sync::Semaphore,
    },
    /// h2c: every call shares one connection; the lock is held only to replace a closed one.
    H2(tokio::sync::Mutex<Option<http2::SendRequest<ReqBody>>>),
}

/// An idle HTTP/1.1 connection, ready for its next request.
struct Idle {
    sender: http1::SendRequest<ReqBody>,
    since: Instant,
}

impl Conns {
    /// Connections (opened lazily) to `addr`; HTTP/1.1 opens at most `max_open` at once and
    /// keeps all of them when idle.
    pub(super) fn new(addr: SocketAddr, h2c: bool, max_open: usize) -> Self {
        let max_open = max_open.max(1);
        let kind = if h2c {
            Kind::H2(tokio::sync::Mutex::new(None))
        } else {
            Kind::H1 {
                idle: Mutex::new(Vec::new()),
                max_idle: max_open,
                slots: tokio::sync::Semaphore::new(max_open),
            }
        };
        Self { addr, kind }
    }

    /// Connections of their own to the same app (HTTP/1.1: at most `max_open`).
    pub(super) fn fresh(&self, max_open: usize) -> Self {
        Self::new(self.addr, self.is_h2(), max_open)
    }

    /// Whether requests must carry an absolute URI (h2c: `:scheme` and `:authority`) rather
    /// than origin-form and a `Host` header (HTTP/1.1).
    pub(super) fn is_h2(&self) -> bool {
        matches!(self.kind, Kind::H2(_))
    }

    /// Sends `req` and reads the response body (up to `max_drain` bytes; a longer one costs
    /// the connection instead of being read), so the connection can serve the next call.
    /// With [`Keep::Body`] the body is kept and returned (a longer one is an error).
    pub(super) async fn send(
        &self,
        req: Request<ReqBody>,
        max_drain: usize,
        keep: Keep,
    ) -> Result<Answer, Error> {
        match &self.kind {
            Kind::H1 {
                idle,
                max_idle,
                slots,
            } => {
                // Never closed, so the permit always comes.
                let _slot = slots.acquire().await;
                self.send_h1(idle, *max_idle, req, max_drain, keep).await
            }
            Kind::H2(shared) => self.send_h2(shared, req, max_drain, keep).await,
        }
    }

    async fn send_h1(
        &self,
        idle: &Mutex<Vec<Idle>>,
        max_idle: usize,
        mut req: Request<ReqBody>,
        max_drain: usize,
        keep: Keep,
    ) -> Result<Answer, Error> {
        loop {
            let (mut sender, reused) = match checkout(idle) {
                Some(sender) => (sender, true),
                None => (self.connect_h1().await?, false),
            };
            match sender.try_send_request(req).await {
                Ok(resp) => {
                    let (answer, complete) = read(resp, max_drain, keep).await;
                    // hyper's connection task marks the connection ready in the same poll in
                    // which it hands over the answer's end, unless it is closing (after a
                    // `Connection: close`, or an answer left unread). Anything else is
                    // closed rather than waited for: the trigger's answer must not wait.
                    if complete && sender.is_ready() {
                        checkin(idle, max_idle, sender);
                    }
                    return answer;
                }
                Err(mut e) => match e.take_message() {
                    // Never written: a kept-alive connection the app had closed. Another one
                    // (or a new one) gets it, as hyper-util retries such requests.
                    Some(again) if reused => req = again,
                    _ => return Err(Error::Transport(error_chain(e.error()))),
                },
            }
        }
    }

    async fn send_h2(
        &self,
        shared: &tokio::sync::Mutex<Option<http2::SendRequest<ReqBody>>>,
        mut req: Request<ReqBody>,
        max_drain: usize,
        keep: Keep,
    ) -> Result<Answer, Error> {
        // Set when the shared connection refused the request: open a new one.
        let mut renew = false;
        loop {
            let (mut sender, fresh) = {
                let mut slot = shared.lock().await;
                match slot.as_ref().filter(|s| !renew && !s.is_closed()) {
                    Some(sender) => (sender.clone(), false),
                    None => {
                        let sender = self.connect_h2().await?;
                        *slot = Some(sender.clone());
                        (sender, true)
                    }
                }
            };
            let sent = match sender.ready().await {
                Ok(()) => sender.try_send_request(req).await,
                Err(e) => return Err(Error::Transport(error_chain(&e))),
            };
            match sent {
                Ok(resp) => return read(resp, max_drain, keep).await.0,
                Err(mut e) => match e.take_message() {
                    // Refused before it was sent (the app had just closed the connection):
                    // once more, on a new connection.
                    Some(again) if !fresh => {
                        renew = true;
                        req = again;
                    }
                    _ => return Err(Error::Transport(error_chain(e.error()))),
                },
            }
        }
    }

    async fn connect_h1(&self) -> Result<http1::SendRequest<ReqBody>, Error> {
        let io = self.connect().await?;
        let (sender, conn) = http1::handshake(io)
            .await
            .map_err(|e| Error::Transport(error_chain(&e)))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "app connection ended");
            }
        });
        Ok(sender)
    }

    async fn connect_h2(&self) -> Result<http2::SendRequest<ReqBody>, Error> {
        let io = self.connect().await?;
        let (sender, conn) = http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| Error::Transport(error_chain(&e)))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "app connection ended");
            }
        });
        Ok(sender)
    }

    async fn connect(&self) -> Result<TokioIo<TcpStream>, Error> {
        let addr = self.addr;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::Transport(format!("tcp connect to {addr}: timed out")))?
            .map_err(|e| Error::Transport(format!("tcp connect to {addr}: {e}")))?;
        // One small request and answer per call: never wait for more to fill a segment.
        stream
            .set_nodelay(true)
            .map_err(|e| Error::Transport(format!("tcp connect to {addr}: {e}")))?;
        Ok(TokioIo::new(stream))
    }
}

fn lock(idle: &Mutex<Vec<Idle>>) -> std::sync::MutexGuard<'_, Vec<Idle>> {
    // The critical sections only push and pop; a panic elsewhere leaves the stack consistent.
    idle.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The most recently used idle connection that is still open; expired ones are closed.
fn checkout(idle: &Mutex<Vec<Idle>>) -> Option<http1::SendRequest<ReqBody>> {
    let mut stack = lock(idle);
    while let Some(conn) = stack.pop() {
        if conn.since.elapsed() >= IDLE_TIMEOUT {
            // Everything below it has been idle longer still; close them outside the lock.
            let expired = std::mem::take(&mut *stack);
            drop(stack);
            drop(expired);
            return None;
        }
        // A connection went back ready and stays so until it is used, or closed by the app.
        if conn.sender.is_ready() {
            return Some(conn.sender);
        }
    }
    None
}

fn checkin(idle: &Mutex<Vec<Idle>>, max_idle: usize, sender: http1::SendRequest<ReqBody>) {
    let mut idle = lock(idle);
    if idle.len() < max_idle {
        idle.push(Idle {
            sender,
            since: Instant::now(),
        });
    }
}

/// What of an answer the caller needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Status and headers; the body is read and dropped.
    Status,
    /// The body too (an actor method's answer).
    Body,
}

/// An app's answer.
#[derive(Debug)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: http::HeaderMap,
    /// The body with [`Keep::Body`], else empty.
    pub body: Bytes,
}

/// The answer, after reading the body to its end or past `max_drain` bytes; `true` when it
/// was read to its end. Without [`Keep::Body`] the answer is the status: a body error only
/// costs the connection. With it, a body that fails or is longer than `max_drain` is an error.
async fn read(
    resp: http::Response<Incoming>,
    max_drain: usize,
    keep: Keep,
) -> (Result<Answer, Error>, bool) {
    let (parts, mut body) = resp.into_parts();
    let mut kept = Vec::new();
    let mut drained = 0usize;
    let mut complete = true;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    drained = drained.saturating_add(data.len());
                    if drained > max_drain {
                        complete = false;
                        break;
                    }
                    if keep == Keep::Body {
                        kept.extend_from_slice(data);
                    }
                }
            }
            Err(e) => {
                if keep == Keep::Body {
                    return (Err(Error::Transport(error_chain(&e))), false);
                }
                complete = false;
                break;
            }
        }
    }
    if !complete && keep == Keep::Body {
        return (
            Err(Error::Data(format!(
                "the app's answer is longer than {max_drain} bytes"
            ))),
            false,
        );
    }
    let answer = Answer {
        status: parts.status,
        headers: parts.headers,
        body: Bytes::from(kept),
    };
    (Ok(answer), complete)
}

/// The error and its sources in one line (hyper's top-level message alone says little).
pub(super) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A raw HTTP/1.1 app answering each request on a connection with `answer`, closing the
    /// connection after `per_conn` answers; counts the connections it accepted.
    async fn app(answer: &'static [u8], per_conn: usize) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    for _ in 0..per_conn {
                        // Requests here have no body: one ends at its blank line.
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            let mut chunk = [0u8; 1024];
                            match s.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.clear();
                        if s.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    fn get(addr: SocketAddr) -> Request<ReqBody> {
        Request::builder()
            .uri("/x")
            .header(http::header::HOST, addr.to_string())
            .body(Full::new(Bytes::new()))
            .unwrap()
    }

    #[tokio::test]
    async fn keeps_connections_alive_and_replaces_ones_the_app_closed() {
        let (addr, accepted) = app(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", 2).await;
        let conns = Conns::new(addr, false, 4);
        for _ in 0..6 {
            assert_eq!(
                conns
                    .send(get(addr), 64, Keep::Status)
                    .await
                    .unwrap()
                    .status,
                StatusCode::OK
            );
            // Time for a close to be seen: a request racing it could fail, as with any
            // keep-alive client.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Two calls per connection: reused once, then replaced.
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn an_answer_longer_than_the_drain_limit_costs_its_connection() {
        let (addr, accepted) = app(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 10\r\n\r\n0123456789",
            10,
        )
        .await;
        let conns = Conns::new(addr, false, 4);
        assert_eq!(
            conns.send(get(addr), 4, Keep::Status).await.unwrap().status,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            conns
                .send(get(addr), 64, Keep::Status)
                .await
                .unwrap()
                .status,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            conns
                .send(get(addr), 64, Keep::Status)
                .await
                .unwrap()
                .status,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_unreachable_app_is_a_transport_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let conns = Conns::new(addr, false, 4);
        assert!(matches!(
            conns
                .send(get(addr), 64, Keep::Status)
                .await
                .map(|a| a.status),
            Err(Error::Transport(_))
        ));
    }
}
