//! The sidecar's `/jobsd/v1` routes over HTTP/1.1, as `jobsd jobs …` calls them: the API
//! token sent as daprd expects it, answers turned into JSON or a [`CliError`] with the right
//! exit code.

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use super::CliError;
use super::output::time_of;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client of one sidecar.
#[derive(Debug, Clone)]
pub struct Client {
    /// `http://host:port` without a trailing slash.
    base: String,
    /// `DAPR_API_TOKEN`, sent as `dapr-api-token`.
    token: Option<String>,
    /// The pooled HTTP/1.1 client.
    http: HyperClient<HttpConnector, Full<Bytes>>,
    /// Longest one request may take.
    timeout: Duration,
}

/// A successful answer: its status and body.
#[derive(Debug)]
pub struct Answer {
    /// 2xx.
    pub status: StatusCode,
    /// The body (JSON for every jobsd route that has one).
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON (`null` when empty).
    pub fn json(&self) -> Result<Value, CliError> {
        if self.body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| CliError::Other(format!("the answer is not JSON: {e}")))
    }
}

impl Client {
    /// A client of the sidecar at `address` (`http://host:port`, or `host:port`).
    pub fn new(address: &str, token: Option<String>, timeout: Duration) -> Result<Self, CliError> {
        let with_scheme = if address.contains("://") {
            address.to_owned()
        } else {
            format!("http://{address}")
        };
        let uri: Uri = with_scheme
            .parse()
            .map_err(|e| CliError::Usage(format!("--address {address:?}: {e}")))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(CliError::Usage(format!(
                "--address {address:?}: give http://host:port (jobsd serves plain HTTP)"
            )));
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let http = HyperClient::builder(TokioExecutor::new()).build(connector);
        Ok(Client {
            base: with_scheme.trim_end_matches('/').to_owned(),
            token,
            http,
            timeout,
        })
    }

    /// `method path` with an optional JSON body; a 2xx answer, or the error it stands for.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, CliError> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header("dapr-api-token", token);
        }
        let body = match body {
            Some(json) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                Full::new(Bytes::from(json.to_string()))
            }
            None => Full::new(Bytes::new()),
        };
        let request = request
            .body(body)
            .map_err(|e| CliError::Usage(format!("cannot build the request for {path}: {e}")))?;
        let unreachable = |reason: String| CliError::Unreachable {
            address: self.base.clone(),
            reason,
        };
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| {
                // The innermost cause says what happened ("Connection refused").
                unreachable(crate::tls::innermost(&e))
            })?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| unreachable(format!("the answer broke off: {e}")))?
                .to_bytes();
            Ok::<_, CliError>(Answer { status, body })
        };
        let answer = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| unreachable(format!("no answer within {:?}", self.timeout)))??;
        if answer.status.is_success() {
            return Ok(answer);
        }
        Err(error_of(&self.base, &answer))
    }

    /// A request for `path` with the API token set, for the calls that stream their bodies
    /// (`export`, `import`) and so do not go through [`Client::call`].
    pub fn request(&self, method: Method, path: &str) -> http::request::Builder {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header("dapr-api-token", token);
        }
        request
    }

    /// The sidecar's address (`http://host:port`), for messages.
    pub fn address(&self) -> &str {
        &self.base
    }

    /// Longest one request may take; for a stream, the longest wait for its next chunk.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `GET path` as JSON.
    pub async fn get(&self, path: &str) -> Result<Value, CliError> {
        self.call(Method::GET, path, None).await?.json()
    }

    /// `POST path` with `body`, the answer as JSON.
    pub async fn post(&self, path: &str, body: Option<&Value>) -> Result<Value, CliError> {
        self.call(Method::POST, path, body).await?.json()
    }

    /// The sidecar's "now", the base of relative times: its test clock's time when it runs
    /// one (`GET /jobsd/v1/clock`), else this machine's.
    pub async fn now(&self) -> Result<DateTime<Utc>, CliError> {
        match self.get("/jobsd/v1/clock").await {
            Ok(clock) => Ok(time_of(&clock, "/now").unwrap_or_else(Utc::now)),
            // 412: no test clock; an older jobsd has no such route.
            Err(CliError::Server { .. } | CliError::NotFound(_)) => Ok(Utc::now()),
            Err(e) => Err(e),
        }
    }
}

/// The error an answer that is not a 2xx stands for.
pub fn error_of(address: &str, answer: &Answer) -> CliError {
    let text = String::from_utf8_lossy(&answer.body).trim().to_owned();
    if answer.status == StatusCode::UNAUTHORIZED {
        return CliError::Unauthorized {
            address: address.to_owned(),
            reason: if text.is_empty() {
                answer.status.to_string()
            } else {
                text
            },
        };
    }
    let parsed: Option<Value> = serde_json::from_slice(&answer.body).ok();
    let field = |k: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match (field("errorCode"), field("message")) {
        (Some(code), message) => {
            let message = message.unwrap_or_default();
            if answer.status == StatusCode::NOT_FOUND {
                CliError::NotFound(format!("{code}: {message}"))
            } else {
                CliError::Server { code, message }
            }
        }
        // No jobsd error body: a route this server does not have, or not jobsd at all.
        (None, _) if answer.status == StatusCode::NOT_FOUND => CliError::Server {
            code: "404".to_owned(),
            message: format!(
                "{} has no such route: is it a jobsd sidecar, and as new as this CLI?",
                address
            ),
        },
        (None, _) => CliError::Server {
            code: answer.status.as_u16().to_string(),
            message: if text.is_empty() {
                answer.status.to_string()
            } else {
                text
            },
        },
    }
}

/// `text` percent-encoded for a path segment or a query value: everything but RFC 3986's
/// unreserved characters is escaped, so any job name or label travels intact.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `/jobsd/v1/jobs/{name}` plus `rest`.
pub fn job_path(name: &str, rest: &str) -> String {
    format!("/jobsd/v1/jobs/{}{rest}", escape(name))
}

/// A query string (`?k=v&…`, empty without pairs), every value escaped.
pub fn query<'a>(pairs: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let joined: Vec<String> = pairs
        .into_iter()
        .map(|(k, v)| format!("{k}={}", escape(&v)))
        .collect();
    if joined.is_empty() {
        String::new()
    } else {
        format!("?{}", joined.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_travel_escaped() {
        assert_eq!(escape("report-1.a_b~"), "report-1.a_b~");
        assert_eq!(escape("a b/c?d=e&f"), "a%20b%2Fc%3Fd%3De%26f");
        assert_eq!(escape("été"), "%C3%A9t%C3%A9");
        assert_eq!(
            query([("prefix", "a b".to_owned()), ("label", "team=x".to_owned())]),
            "?prefix=a%20b&label=team%3Dx"
        );
        assert_eq!(query([]), "");
    }

    #[test]
    fn addresses_need_plain_http() {
        let t = Duration::from_secs(1);
        assert_eq!(
            Client::new("127.0.0.1:3500", None, t).unwrap().base,
            "http://127.0.0.1:3500"
        );
        assert_eq!(
            Client::new("http://localhost:3500/", None, t).unwrap().base,
            "http://localhost:3500"
        );
        assert!(matches!(
            Client::new("https://h:1", None, t),
            Err(CliError::Usage(_))
        ));
    }
}
