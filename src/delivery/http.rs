//! Delivery to an HTTP app: `POST /job/<name>` over pooled keep-alive connections, with
//! daprd's URL, header, body and status rules (`dapr-jobs-api.md` §4.4).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderName, HeaderValue, USER_AGENT};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::Full;

use super::body::http_body;
use super::conns::{Answer, Conns, Keep, ReqBody};
use super::{Ack, Error};
use crate::observe::trace::{TRACEPARENT, TraceParent};

/// Header carrying `APP_API_TOKEN` to the app.
const API_TOKEN_HEADER: HeaderName = HeaderName::from_static("dapr-api-token");

/// Header carrying the attempt's W3C trace context to the app.
pub(crate) const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(TRACEPARENT);

/// Adds jobsd's execution-context headers ([`crate::trigger::context::headers`]) to `headers`.
pub(crate) fn insert_context(headers: &mut http::HeaderMap, context: &[(&'static str, String)]) {
    for (name, value) in context {
        // Ids, numbers and RFC 3339 times: always valid header values.
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

/// Connections open to the app at once when its concurrency is unlimited.
const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// Calls an HTTP app. Cheap to clone: clones share the connections.
#[derive(Clone)]
pub struct Http {
    /// Keep-alive connections to the app.
    conns: Arc<Conns>,
    /// `host:port` of the app (IPv6 in brackets): h2c's `:authority`.
    authority: Authority,
    /// The `Host` header of HTTP/1.1 requests (the port left out when it is 80, as Go does).
    host: HeaderValue,
    /// `dapr-api-token` value, when `APP_API_TOKEN` is set.
    token: Option<HeaderValue>,
    /// Response bytes read (and discarded) before a connection is given up instead of reused.
    max_drain: usize,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("authority", &self.authority)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Http {
    /// A client for the app at `addr`. `h2c` speaks HTTP/2 without TLS (daprd's
    /// `--app-protocol h2c`); `max_connections` bounds the HTTP/1.1 connections open at once,
    /// all kept alive when idle (0 = a default); `max_body_size` caps how much of a
    /// response is drained for reuse.
    pub fn new(
        addr: SocketAddr,
        api_token: Option<&str>,
        h2c: bool,
        max_connections: usize,
        max_body_size: usize,
    ) -> Result<Self, Error> {
        let token = api_token
            .map(|t| {
                let mut v = HeaderValue::from_str(t).map_err(|_| {
                    Error::Config("APP_API_TOKEN is not a valid header value".into())
                })?;
                v.set_sensitive(true);
                Ok::<_, Error>(v)
            })
            .transpose()?;
        let config_error =
            |e: &dyn std::fmt::Display| Error::Config(format!("app address {addr}: {e}"));
        let authority: Authority = addr.to_string().parse().map_err(|e| config_error(&e))?;
        let host = if addr.port() == 80 {
            authority.host()
        } else {
            authority.as_str()
        };
        let host = HeaderValue::from_str(host).map_err(|e| config_error(&e))?;
        let max_open = if max_connections == 0 {
            DEFAULT_MAX_CONNECTIONS
        } else {
            max_connections
        };
        Ok(Self {
            conns: Arc::new(Conns::new(addr, h2c, max_open)),
            authority,
            host,
            token,
            max_drain: max_body_size,
        })
    }

    /// Sends one job to the app: 2xx → accepted (`202` → [`Ack::Later`], asked with a
    /// `Jobsd-Async: true` header), 404 → [`Ack::NotFound`], any other status or a transport
    /// failure → an error. `trace` goes out as the `traceparent` header, `context` (jobsd's
    /// execution-context headers) as they are.
    pub async fn call(
        &self,
        name: &str,
        data: Option<&prost_types::Any>,
        trace: Option<&TraceParent>,
        context: &[(&'static str, String)],
    ) -> Result<Ack, Error> {
        let body = http_body(data)?;
        let mut req = self.request(Method::POST, job_path(name), body)?;
        let headers = req.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(token) = &self.token {
            headers.insert(API_TOKEN_HEADER, token.clone());
        }
        if let Some(trace) = trace {
            headers.insert(TRACEPARENT_HEADER, trace.header_value());
        }
        insert_context(headers, context);
        let answer = self.conns.send(req, self.max_drain, Keep::Status).await?;
        let status = answer.status;
        if status == StatusCode::ACCEPTED {
            let asked = super::says_async(
                answer
                    .headers
                    .get(super::ASYNC_HEADER)
                    .map(HeaderValue::as_bytes),
            );
            Ok(Ack::Later { asked })
        } else if status.is_success() {
            Ok(Ack::Accepted)
        } else if status == StatusCode::NOT_FOUND {
            Ok(Ack::NotFound)
        } else {
            Err(Error::HttpStatus(status.as_u16()))
        }
    }

    /// Any other call on the app (the actor routes): `method` on `path` (already escaped),
    /// with `headers` (the `dapr-api-token` is added when `APP_API_TOKEN` is set) and
    /// `body`. Every answer is returned, whatever its status; with [`Keep::Body`] its body
    /// too (up to `--max-body-size`).
    pub async fn send(
        &self,
        method: Method,
        path: String,
        headers: http::HeaderMap,
        body: Bytes,
        keep: Keep,
    ) -> Result<Answer, Error> {
        let mut req = self.request(method, path, body)?;
        let out = req.headers_mut();
        for (name, value) in &headers {
            // The connection-level headers are ours to set.
            if name != HOST && name != CONTENT_LENGTH {
                out.append(name, value.clone());
            }
        }
        if let Some(token) = &self.token {
            out.insert(API_TOKEN_HEADER, token.clone());
        }
        self.conns.send(req, self.max_drain, keep).await
    }

    /// The same client on a connection of its own, for health probes: a probe must not
    /// wait for one of the connections the app's calls hold.
    pub(crate) fn for_probes(&self) -> Self {
        Self {
            conns: Arc::new(self.conns.fresh(1)),
            ..self.clone()
        }
    }

    /// One health probe: `GET <path>` answering 2xx. Like daprd's probe it carries no
    /// `dapr-api-token`.
    pub async fn probe(&self, path: &str) -> Result<(), Error> {
        let req = self.request(Method::GET, probe_path(path), Bytes::new())?;
        let status = self
            .conns
            .send(req, self.max_drain, Keep::Status)
            .await?
            .status;
        if status.is_success() {
            Ok(())
        } else {
            Err(Error::HttpStatus(status.as_u16()))
        }
    }

    /// Checks that `path` can be probed (given a leading `/` if it lacks one, as in daprd):
    /// an error for a path that is not a valid URL path.
    pub(crate) fn probe_uri(&self, path: &str) -> Result<Uri, Error> {
        let path = probe_path(path);
        self.uri(path.clone()).map_err(|_| {
            Error::Config(format!(
                "health check path {path:?} is not a valid URL path"
            ))
        })
    }

    /// A request for `path` with `body` and the headers every request carries: `Host` (on
    /// HTTP/1.1), `Content-Length`, `User-Agent`.
    fn request(
        &self,
        method: Method,
        path: String,
        body: Bytes,
    ) -> Result<Request<ReqBody>, Error> {
        let len = body.len();
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = self.uri(path)?;
        let headers = req.headers_mut();
        headers.reserve(7);
        if !self.conns.is_h2() {
            headers.insert(HOST, self.host.clone());
        }
        headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
        headers.insert(USER_AGENT, user_agent());
        Ok(req)
    }

    /// The request target: origin-form (`/job/x`) over HTTP/1.1, absolute over h2c.
    fn uri(&self, path: String) -> Result<Uri, Error> {
        let invalid = |e: http::Error| Error::Data(format!("URL path: {e}"));
        let path =
            PathAndQuery::from_maybe_shared(Bytes::from(path)).map_err(|e| invalid(e.into()))?;
        if !self.conns.is_h2() {
            return Ok(Uri::from(path));
        }
        Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(self.authority.clone())
            .path_and_query(path)
            .build()
            .map_err(invalid)
    }
}

/// The path probed for `path`: with a leading `/`, as daprd adds one.
fn probe_path(path: &str) -> String {
    format!("/{}", path.strip_prefix('/').unwrap_or(path))
}

/// `jobsd/<version>`, sent where Go's client sends `Go-http-client/1.1`.
fn user_agent() -> HeaderValue {
    HeaderValue::from_static(concat!("jobsd/", env!("CARGO_PKG_VERSION")))
}

/// The request path daprd sends for a job: `"/job/" + strings.TrimPrefix(name, "/")` parsed by
/// Go's `url.Parse` and written back with `URL.EscapedPath()` (`my||job@name` →
/// `/job/my%7C%7Cjob@name`). `?` and `#` are escaped (job names cannot contain either).
pub(crate) fn job_path(name: &str) -> String {
    let name = name.strip_prefix('/').unwrap_or(name);
    crate::go::url::escaped_path(&format!("/job/{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_paths_match_go_url_handling() {
        let cases = [
            ("my-job", "/job/my-job"),
            ("/my-job", "/job/my-job"),
            ("//x", "/job//x"),
            ("my||job@name", "/job/my%7C%7Cjob@name"),
            ("my job", "/job/my%20job"),
            ("a:b;c,d=e&f+g$h~i_j.k", "/job/a:b;c,d=e&f+g$h~i_j.k"),
            // Sub-delims Go's escape() would encode stay raw while the whole path is valid.
            ("a(b)!*'[c]", "/job/a(b)!*'[c]"),
            // ... but not once anything else forces Go to re-escape the decoded path.
            ("a(b) c", "/job/a%28b%29%20c"),
            ("héllo", "/job/h%C3%A9llo"),
            ("x\"y<z>{}^`\\", "/job/x%22y%3Cz%3E%7B%7D%5E%60%5C"),
            // Valid escapes are kept as written.
            ("a%20b", "/job/a%20b"),
            ("a%2Fb", "/job/a%2Fb"),
            ("a%41", "/job/a%41"),
            // A decoded %2F becomes a real slash when Go has to re-escape.
            ("a%2fb|", "/job/a/b%7C"),
            // Where Go refuses, escape instead.
            ("100%", "/job/100%25"),
            ("a%zz", "/job/a%25zz"),
            ("a\u{1}b", "/job/a%01b"),
            ("a?b#c", "/job/a%3Fb%23c"),
            ("", "/job/"),
        ];
        for (name, want) in cases {
            assert_eq!(job_path(name), want, "name {name:?}");
        }
    }

    #[test]
    fn job_paths_are_accepted_by_http_uri() {
        let names = [
            "my||job@name",
            "a(b)!*'[c]",
            "x\"y<z>{}^`\\",
            "a\u{7f}\u{0}",
            "日本",
        ];
        for name in names {
            let path = job_path(name);
            assert!(
                path.parse::<http::uri::PathAndQuery>().is_ok(),
                "{name:?} → {path:?}"
            );
        }
    }
}
