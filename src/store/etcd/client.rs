//! A thin etcd v3 client: the generated tonic clients of etcd's KV, Watch and Lease services
//! (`proto/third_party/etcd/`, compiled by `build.rs` without a system `protoc`) over one channel balanced
//! across the endpoints, and builders for the few request shapes the store and the cluster
//! send.
//!
//! Calls fail with [`tonic::Status`]; an endpoint that cannot be reached is `Unavailable`
//! (with the transport error as its source). [`is_transient`] and [`is_too_large`] read
//! etcd's answers.
//!
//! Nothing waits for etcd to be up: [`Client::connect`] only builds the channel, and every
//! call connects (again) as needed.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Status, Streaming};

use crate::proto::etcd::etcdserverpb as pb;
use crate::tls::ClientTls;
use pb::compare::{CompareResult, CompareTarget};
use pb::kv_client::KvClient;
use pb::lease_client::LeaseClient;
use pb::response_op::Response;
use pb::watch_client::WatchClient;
use pb::{request_op, watch_request};

pub use crate::proto::etcd::mvccpb::KeyValue;
pub use crate::proto::etcd::mvccpb::event::EventType;
pub use pb::compare::TargetUnion as CompareWith;
pub use pb::{
    Compare, DeleteRangeRequest, LeaseKeepAliveResponse, RangeRequest, RangeResponse, RequestOp,
    ResponseOp, TxnRequest, TxnResponse, WatchCreateRequest, WatchResponse,
};

/// How long connecting to one endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 keep-alive pings, also while idle: a dead etcd is noticed by the watches too.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// How long a keep-alive ping may go unanswered before the connection counts as dead.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest etcd response we decode: etcd's own Go client's default (`math.MaxInt32`), which
/// Dapr's Scheduler uses. tonic's 4 MiB, and the 64 MiB this was, are too small for a page of
/// large jobs (Dapr's `scheduler/api/list/size` lists 100 jobs of 2 MB).
const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// Why [`Client::connect`] refused its endpoints.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The list was empty.
    #[error("no etcd endpoints given")]
    NoEndpoints,
    /// An endpoint is not a valid URI.
    #[error("invalid etcd endpoint {endpoint:?}: {source}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What tonic said.
        #[source]
        source: tonic::transport::Error,
    },
    /// An `https://` endpoint without TLS settings.
    #[error("etcd endpoint {0:?} is https: give the CA to trust with --etcd-ca-file")]
    Tls(String),
    /// An `http://` endpoint with TLS settings: the connection would not be secured.
    #[error(
        "etcd endpoint {0:?} is plaintext http but --etcd-ca-file is given: \
         write https:// or no scheme"
    )]
    Plaintext(String),
}

/// A client of one etcd cluster; cheap to clone (one balanced channel).
#[derive(Debug, Clone)]
pub struct Client {
    /// Requests go to any endpoint that is up.
    channel: Channel,
}

impl Client {
    /// A client of the etcd cluster at `endpoints` (`host:port` or `http://host:port`). Must be
    /// called within a Tokio runtime (the channel's balancer runs on it).
    #[cfg(test)]
    pub fn connect<E: AsRef<str>>(endpoints: &[E]) -> Result<Client, ConnectError> {
        Self::connect_with(endpoints, None)
    }

    /// [`connect`](Self::connect) over TLS when `tls` is given (endpoints `https://host:port`
    /// or `host:port`).
    pub fn connect_with<E: AsRef<str>>(
        endpoints: &[E],
        tls: Option<&ClientTls>,
    ) -> Result<Client, ConnectError> {
        let endpoints = endpoints
            .iter()
            .map(|e| endpoint(e.as_ref(), tls))
            .collect::<Result<Vec<_>, _>>()?;
        if endpoints.is_empty() {
            return Err(ConnectError::NoEndpoints);
        }
        Ok(Client {
            channel: Channel::balance_list(endpoints.into_iter()),
        })
    }

    /// The KV service.
    fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channel.clone()).max_decoding_message_size(MAX_RESPONSE_BYTES)
    }

    /// The Lease service.
    fn lease(&self) -> LeaseClient<Channel> {
        LeaseClient::new(self.channel.clone())
    }

    /// Reads a key or a range.
    pub async fn range(&self, request: RangeRequest) -> Result<RangeResponse, Status> {
        Ok(self.kv().range(request).await?.into_inner())
    }

    /// Puts `value` under `key` (no lease).
    #[cfg(test)]
    pub async fn put(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> Result<pb::PutResponse, Status> {
        let request = pb::PutRequest {
            key: key.into(),
            value: value.into(),
            ..pb::PutRequest::default()
        };
        Ok(self.kv().put(request).await?.into_inner())
    }

    /// Deletes one key.
    pub async fn delete(&self, key: impl Into<Vec<u8>>) -> Result<(), Status> {
        let request = pb::DeleteRangeRequest {
            key: key.into(),
            ..pb::DeleteRangeRequest::default()
        };
        self.kv().delete_range(request).await?;
        Ok(())
    }

    /// Runs a transaction.
    pub async fn txn(&self, request: TxnRequest) -> Result<TxnResponse, Status> {
        Ok(self.kv().txn(request).await?.into_inner())
    }

    /// Drops the history before `revision`.
    #[cfg(test)]
    pub async fn compact(&self, revision: i64) -> Result<(), Status> {
        let request = pb::CompactionRequest {
            revision,
            physical: false,
        };
        self.kv().compact(request).await?;
        Ok(())
    }

    /// Opens a watch on its own stream.
    pub async fn watch(&self, create: WatchCreateRequest) -> Result<Watch, Status> {
        let (requests, rx) = mpsc::channel(1);
        // The create request goes first: etcd answers (and sends the stream's headers, which
        // the call waits for) only once it has it.
        let create = pb::WatchRequest {
            request_union: Some(watch_request::RequestUnion::CreateRequest(create)),
        };
        requests
            .send(create)
            .await
            .map_err(|_| Status::internal("watch request queue closed"))?;
        let responses = WatchClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
            .watch(ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(Watch {
            _requests: requests,
            responses,
        })
    }

    /// Grants a lease of `ttl` seconds: `(id, the TTL etcd granted)`.
    pub async fn lease_grant(&self, ttl: i64) -> Result<(i64, i64), Status> {
        let request = pb::LeaseGrantRequest { ttl, id: 0 };
        let granted = self.lease().lease_grant(request).await?.into_inner();
        Ok((granted.id, granted.ttl))
    }

    /// Revokes lease `id`, deleting every key attached to it.
    pub async fn lease_revoke(&self, id: i64) -> Result<(), Status> {
        self.lease()
            .lease_revoke(pb::LeaseRevokeRequest { id })
            .await?;
        Ok(())
    }

    /// Opens a keep-alive stream for lease `id`; its first renewal is already sent.
    pub async fn lease_keep_alive(&self, id: i64) -> Result<KeepAlive, Status> {
        let (requests, rx) = mpsc::channel(4);
        // As for a watch: etcd answers the call once it has a request. That first renewal is
        // answered like the others, through `message`.
        let asked = VecDeque::from([Instant::now()]);
        requests
            .send(pb::LeaseKeepAliveRequest { id })
            .await
            .map_err(|_| Status::internal("lease keep-alive queue closed"))?;
        let responses = self
            .lease()
            .lease_keep_alive(ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(KeepAlive {
            id,
            requests,
            responses,
            asked,
        })
    }
}

/// One watch, on its own gRPC stream.
pub struct Watch {
    /// The request side, held open: the watch lives as long as the stream.
    _requests: mpsc::Sender<pb::WatchRequest>,
    /// What etcd sends.
    responses: Streaming<WatchResponse>,
}

impl Watch {
    /// The next response; `None` once etcd ended the stream.
    pub async fn message(&mut self) -> Result<Option<WatchResponse>, Status> {
        self.responses.message().await
    }
}

/// One lease's keep-alive stream.
pub struct KeepAlive {
    /// The lease.
    id: i64,
    /// Renewal requests to etcd.
    requests: mpsc::Sender<pb::LeaseKeepAliveRequest>,
    /// etcd's answers, one per request, in order.
    responses: Streaming<LeaseKeepAliveResponse>,
    /// When each request not answered yet was sent, oldest first: an answer renews the lease
    /// from its own request's time, never from a later one's.
    asked: VecDeque<Instant>,
}

impl KeepAlive {
    /// Asks etcd to renew the lease; the answer comes through [`message`](Self::message).
    pub async fn keep_alive(&mut self) -> Result<(), Status> {
        let asked = Instant::now();
        self.requests
            .send(pb::LeaseKeepAliveRequest { id: self.id })
            .await
            .map_err(|_| Status::unavailable("lease keep-alive stream closed"))?;
        self.asked.push_back(asked);
        Ok(())
    }

    /// The next answer (a TTL of 0 means the lease is gone) and when the request it answers
    /// was sent (etcd's TTL runs from then at the latest); `None` once the stream ended.
    pub async fn message(&mut self) -> Result<Option<(LeaseKeepAliveResponse, Instant)>, Status> {
        let Some(answer) = self.responses.message().await? else {
            return Ok(None);
        };
        let asked = self.asked.pop_front().ok_or_else(|| {
            Status::internal("etcd answered a lease keep-alive that was not asked for")
        })?;
        Ok(Some((answer, asked)))
    }
}

/// The endpoint of `url` with the connection settings of every etcd call: `https://` with
/// `tls`, `http://` without; a URL without a scheme gets the one that fits.
fn endpoint(url: &str, tls: Option<&ClientTls>) -> Result<Endpoint, ConnectError> {
    let uri = match (url.split_once("://").map(|(scheme, _)| scheme), tls) {
        (Some("https"), None) => return Err(ConnectError::Tls(url.to_owned())),
        (Some("http"), Some(_)) => return Err(ConnectError::Plaintext(url.to_owned())),
        (Some(_), _) => url.to_owned(),
        (None, Some(_)) => format!("https://{url}"),
        (None, None) => format!("http://{url}"),
    };
    let invalid = |source| ConnectError::InvalidEndpoint {
        endpoint: url.to_owned(),
        source,
    };
    let endpoint = Endpoint::from_shared(uri)
        .map_err(invalid)?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    match tls {
        Some(tls) => endpoint.tls_config(tls.tonic()).map_err(invalid),
        None => Ok(endpoint),
    }
}

// ---- requests ----

/// A txn: `success` if every compare holds, else `failure`.
pub fn txn(compare: Vec<Compare>, success: Vec<RequestOp>, failure: Vec<RequestOp>) -> TxnRequest {
    TxnRequest {
        compare,
        success,
        failure,
    }
}

/// `key`'s `target` (mod or create revision, version, value or lease) equals the given one;
/// a revision or version of 0 means the key does not exist.
pub fn equal(key: impl Into<Vec<u8>>, target: CompareWith) -> Compare {
    let kind = match target {
        CompareWith::Version(_) => CompareTarget::Version,
        CompareWith::CreateRevision(_) => CompareTarget::Create,
        CompareWith::ModRevision(_) => CompareTarget::Mod,
        CompareWith::Value(_) => CompareTarget::Value,
        CompareWith::Lease(_) => CompareTarget::Lease,
    };
    Compare {
        result: CompareResult::Equal.into(),
        target: kind.into(),
        key: key.into(),
        target_union: Some(target),
        range_end: Vec::new(),
    }
}

/// A read of one key.
pub fn read_key(key: impl Into<Vec<u8>>) -> RangeRequest {
    RangeRequest {
        key: key.into(),
        ..RangeRequest::default()
    }
}

/// Reads up to `limit` keys (0 = all) from `from` (included) to `to` (excluded), last key
/// first. etcd sorts the whole range before it applies the limit: for short ranges only.
pub fn read_descending(
    from: impl Into<Vec<u8>>,
    to: impl Into<Vec<u8>>,
    limit: i64,
) -> RangeRequest {
    RangeRequest {
        key: from.into(),
        range_end: to.into(),
        limit,
        sort_order: pb::range_request::SortOrder::Descend.into(),
        sort_target: pb::range_request::SortTarget::Key.into(),
        ..RangeRequest::default()
    }
}

/// Reads one key, in a txn.
pub fn get(key: impl Into<Vec<u8>>) -> RequestOp {
    range_op(read_key(key))
}

/// Reads every key starting with `prefix`.
pub fn get_prefix(prefix: impl Into<Vec<u8>>) -> RequestOp {
    let key = prefix.into();
    range_op(RangeRequest {
        range_end: prefix_end(&key),
        key,
        ..RangeRequest::default()
    })
}

/// Puts `value` under `key`, attached to `lease` (0 = none).
pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>, lease: i64) -> RequestOp {
    request(request_op::Request::RequestPut(pb::PutRequest {
        key: key.into(),
        value: value.into(),
        lease,
        ..pb::PutRequest::default()
    }))
}

/// Deletes one key.
pub fn delete(key: impl Into<Vec<u8>>) -> RequestOp {
    request(request_op::Request::RequestDeleteRange(
        DeleteRangeRequest {
            key: key.into(),
            ..DeleteRangeRequest::default()
        },
    ))
}

/// Deletes every key starting with `prefix`; the answer counts them.
pub fn delete_prefix(prefix: impl Into<Vec<u8>>) -> RequestOp {
    let key = prefix.into();
    request(request_op::Request::RequestDeleteRange(
        DeleteRangeRequest {
            range_end: prefix_end(&key),
            key,
            ..DeleteRangeRequest::default()
        },
    ))
}

/// Deletes the keys from `from` (included) to `to` (excluded); the answer counts them.
pub fn delete_range(from: impl Into<Vec<u8>>, to: impl Into<Vec<u8>>) -> RequestOp {
    request(request_op::Request::RequestDeleteRange(
        DeleteRangeRequest {
            key: from.into(),
            range_end: to.into(),
            ..DeleteRangeRequest::default()
        },
    ))
}

/// A range read as a txn op.
pub fn range_op(range: RangeRequest) -> RequestOp {
    request(request_op::Request::RequestRange(range))
}

/// A txn nested in a txn's branch (etcd 3.3 and later): its compares decide its own ops.
pub fn nested(txn: TxnRequest) -> RequestOp {
    request(request_op::Request::RequestTxn(txn))
}

/// A txn op.
fn request(request: request_op::Request) -> RequestOp {
    RequestOp {
        request: Some(request),
    }
}

/// A watch of every key starting with `prefix`, from `start_revision` (0 = from now), with
/// progress notifications.
pub fn watch_prefix(prefix: impl Into<Vec<u8>>, start_revision: i64) -> WatchCreateRequest {
    let key = prefix.into();
    WatchCreateRequest {
        range_end: prefix_end(&key),
        key,
        start_revision,
        progress_notify: true,
        ..WatchCreateRequest::default()
    }
}

/// The first key after every key starting with `prefix` (etcd's range end for a prefix).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): to the end of the keyspace.
    vec![0]
}

// ---- answers ----

/// The revision of the store when etcd answered (0 without a header).
pub fn revision(header: Option<&pb::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision)
}

/// The key-values a txn's range read returned (none for other ops).
pub fn range_kvs(op: ResponseOp) -> Vec<KeyValue> {
    match op.response {
        Some(Response::ResponseRange(range)) => range.kvs,
        _ => Vec::new(),
    }
}

/// Whether a nested txn's compares held (`None` for other ops).
pub fn nested_succeeded(op: &ResponseOp) -> Option<bool> {
    match &op.response {
        Some(Response::ResponseTxn(txn)) => Some(txn.succeeded),
        _ => None,
    }
}

/// How many keys the first range read of a nested txn's answer counted (`None` when it has
/// none).
pub fn nested_count(op: &ResponseOp) -> Option<i64> {
    match &op.response {
        Some(Response::ResponseTxn(txn)) => txn.responses.iter().find_map(|r| match &r.response {
            Some(Response::ResponseRange(range)) => Some(range.count),
            _ => None,
        }),
        _ => None,
    }
}

/// A read that counts the keys from `key` (one key, or a range to `range_end`) without
/// returning them.
pub fn count(key: impl Into<Vec<u8>>) -> RequestOp {
    range_op(RangeRequest {
        key: key.into(),
        count_only: true,
        ..RangeRequest::default()
    })
}

/// How many keys a txn's delete removed (`None` for other ops).
pub fn deleted(op: &ResponseOp) -> Option<u64> {
    match &op.response {
        Some(Response::ResponseDeleteRange(delete)) => Some(delete.deleted.max(0) as u64),
        _ => None,
    }
}

// ---- failures ----

/// Whether an etcd failure may go away by itself.
pub fn is_transient(status: &Status) -> bool {
    use tonic::Code;
    match status.code() {
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::Cancelled => true,
        // etcd reports some leader and timeout trouble as Unknown, and tonic some transport
        // errors.
        Code::Unknown => {
            let msg = status.message();
            msg.contains("leader") || msg.contains("timed out") || msg.contains("transport")
        }
        _ => false,
    }
}

/// Whether etcd refused a txn for its size.
pub fn is_too_large(status: &Status) -> bool {
    let msg = status.message();
    msg.contains("too many operations") || msg.contains("too large")
}

/// Whether etcd does not know the lease (it expired or was revoked).
pub fn is_lease_not_found(status: &Status) -> bool {
    status.message().contains("requested lease not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_after_its_last_key() {
        assert_eq!(prefix_end(b"dapr/jobs/"), b"dapr/jobs0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), [0]);
        assert_eq!(prefix_end(b""), [0]);
    }

    #[test]
    fn compares_name_the_field_they_hold() {
        let c = equal("k", CompareWith::ModRevision(7));
        assert_eq!(c.target(), CompareTarget::Mod);
        assert_eq!(c.result(), CompareResult::Equal);
        let c = equal("k", CompareWith::Value(b"v".to_vec()));
        assert_eq!(c.target(), CompareTarget::Value);
        let c = equal("k", CompareWith::Version(0));
        assert_eq!(c.target(), CompareTarget::Version);
    }

    #[test]
    fn endpoints_without_a_scheme_are_http_and_https_needs_tls() {
        assert_eq!(
            endpoint("127.0.0.1:2379", None).unwrap().uri().to_string(),
            "http://127.0.0.1:2379/"
        );
        let err = endpoint("https://h:2379", None).unwrap_err();
        assert!(matches!(err, ConnectError::Tls(_)));
        assert!(err.to_string().contains("--etcd-ca-file"), "{err}");
        assert!(matches!(
            endpoint("http://bad host", None),
            Err(ConnectError::InvalidEndpoint { .. })
        ));
    }

    #[tokio::test]
    async fn an_unreachable_etcd_is_transient() {
        // A port nobody listens on: bind, learn the port, close.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let client = Client::connect(&[address]).unwrap();
        let status = client.range(RangeRequest::default()).await.unwrap_err();
        assert!(is_transient(&status), "{status:?}");
        assert!(!is_transient(&Status::invalid_argument(
            "etcdserver: too many operations in txn request"
        )));
        assert!(Client::connect::<&str>(&[]).is_err());
    }
}
