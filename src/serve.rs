//! Serving connections with limits that hold against hostile or broken clients, for the API's
//! HTTP and gRPC servers and the metrics server: a cap on open connections per listener, a
//! deadline for a connection's first byte and for a request's headers (which also closes idle
//! keep-alive connections), and
//! HTTP/2 stream limits (concurrent streams, and the streams a client may reset before they
//! are accepted: the "rapid reset" flood, CVE-2023-44487).
//!
//! `axum::serve` sets no timer, so hyper would wait forever for headers trickled a byte a
//! minute (slowloris) and keep every idle connection open; this module serves axum routers
//! through hyper-util's connection builder with those limits instead.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How long a client may take to send a request's headers, how long a keep-alive connection
/// may sit idle before the next request's first byte (hyper counts both on one deadline), and
/// how long a new connection (HTTP or gRPC) may wait before its first byte. Longer than the
/// idle time of common client pools (aiohttp's 15 s, used by the Dapr Python SDK), so that a
/// client seldom reuses a connection at the moment jobsd closes it; short enough that a
/// slowloris client holds its slot for half a minute, not for ever.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Most connections one listener keeps open; at the cap the next connection waits in the
/// kernel's backlog until one closes.
pub const MAX_CONNECTIONS: usize = 16_384;

/// Most HTTP/2 streams one connection may have open at once (grpc-go's server has no default
/// limit; 1,000 is far above what a sidecar's app multiplexes).
pub const MAX_CONCURRENT_STREAMS: u32 = 1_000;

/// Most streams a client may open and reset before the server has accepted them; past it the
/// connection is closed with `ENHANCE_YOUR_CALM` (h2's default, set here so that it is a
/// decision, not an accident of a dependency's version).
pub const MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;

/// After this long without a frame from the client an HTTP/2 PING is sent; unanswered within
/// [`H2_KEEPALIVE_TIMEOUT`], the connection is closed (daprd's gRPC server: 3 s / 5 s is for
/// its internal links; this is for clients that vanished).
pub const H2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);

/// How long a keep-alive PING may go unanswered.
pub const H2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves `router` on `listener` (HTTP/1.1 and h2c) within this module's limits until `stop`
/// is cancelled; then stops accepting and waits for the open connections to finish their
/// requests.
pub async fn http(
    listener: TcpListener,
    router: axum::Router,
    stop: CancellationToken,
) -> io::Result<()> {
    let builder = http_builder();
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = accept(&listener, &permits) => accepted,
        };
        let service = TowerToHyperService::new(router.clone());
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(accepted), service);
        let conn = graceful.watch(conn.into_owned());
        tokio::spawn(async move {
            // A client that breaks off, or is cut off by a limit, ends only its connection.
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "http connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// hyper's connection builder with this module's limits.
fn http_builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESET_STREAMS)
        .keep_alive_interval(H2_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(H2_KEEPALIVE_TIMEOUT)
        .enable_connect_protocol();
    builder
}

/// The next connection once a slot is free. Accept errors (out of file descriptors, a
/// connection reset before it was accepted) are logged and retried after a pause, as hyper's
/// and axum's own loops do, rather than ending the server.
async fn accept(listener: &TcpListener, permits: &Arc<Semaphore>) -> Capped {
    let permit = Arc::clone(permits)
        .acquire_owned()
        .await
        .expect("the connection semaphore is never closed");
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                // Small h2 frames and HTTP responses go out at once rather than waiting for
                // the peer's delayed ACK.
                let _ = stream.set_nodelay(true);
                return Capped {
                    stream,
                    _permit: permit,
                    first_byte: Some(Box::pin(tokio::time::sleep(HEADER_READ_TIMEOUT))),
                };
            }
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The connections of `listener`, at most [`MAX_CONNECTIONS`] open at once, for tonic's
/// `serve_with_incoming_shutdown`.
pub fn capped_incoming(listener: TcpListener) -> impl Stream<Item = io::Result<Capped>> {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    futures_util::stream::unfold((listener, permits), |(listener, permits)| async move {
        let capped = accept(&listener, &permits).await;
        Some((Ok(capped), (listener, permits)))
    })
}

/// A connection holding one of its listener's slots until it is dropped, and closed if its
/// first byte does not come within [`HEADER_READ_TIMEOUT`]: hyper's own header deadline starts
/// only once it knows the protocol (HTTP/1.1 or h2, from the first bytes), and tonic has none,
/// so without this a connection that never sends anything would keep its slot for ever.
#[derive(Debug)]
pub struct Capped {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    /// The deadline for the first byte; `None` once it came.
    first_byte: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl tonic::transport::server::Connected for Capped {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Capped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(deadline) = self.first_byte.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request within the header deadline",
            )));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.first_byte = None;
        }
        read
    }
}

impl AsyncWrite for Capped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Applies the HTTP/2 limits above to a tonic server.
pub fn grpc_limits(builder: tonic::transport::Server) -> tonic::transport::Server {
    builder
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_ACCEPT_RESET_STREAMS))
        .http2_keepalive_interval(Some(H2_KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(H2_KEEPALIVE_TIMEOUT))
}

/// Whether `given` is `token`, compared in time that depends on the lengths only, so response
/// timing does not reveal how much of the token a guess got right. `subtle` rather than a
/// hand-written loop: its comparison sits behind an optimisation barrier, so the compiler
/// cannot turn it back into an early exit. Only the token's length can leak (a guess of
/// another length is refused at once), which is not worth hiding.
pub fn token_matches(given: &[u8], token: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    given.ct_eq(token).into()
}

/// Raises this process's soft limit on open files to the hard limit, as the Go runtime does
/// for daprd at start: the default soft limit (often 1,024) would refuse connections long
/// before [`MAX_CONNECTIONS`]. Failing to raise it is not fatal (the server then refuses
/// connections past the limit, retrying accept).
pub fn raise_open_files_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!(error = %e, "could not raise the open files limit");
        }
    }
}
