//! TLS from certificate files, for the two connections a cluster sends over the network: a
//! sidecar to its Scheduler replicas, and a replica to etcd (both as a client), and the
//! replica's Scheduler port (as a server).
//!
//! Files are PEM. Everything is read and checked when the role starts, so that a missing,
//! unreadable or mismatched file stops it with a message naming the flag and the file,
//! rather than failing the first call much later. rustls with the `ring` provider does the
//! cryptography (no `aws-lc-sys`: it needs cmake to build). Certificates are read once:
//! replacing them takes a restart.
//!
//! Dapr secures the same connections with Sentry-issued SPIFFE certificates (`--enable-mtls`);
//! jobsd has no Sentry and takes plain certificate files instead.

pub mod flags;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// How long a client may take to complete its handshake: a connection that opens and says
/// nothing must not hold a task for ever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after the listener failed to accept (out of file descriptors, say): retrying at once
/// would spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);
/// Longest a refused client is given to read its alert and close.
const LINGER: Duration = Duration::from_secs(1);
/// Handshaken connections waiting for the gRPC server to take them.
const ACCEPTED_QUEUE: usize = 64;

/// A certificate file and the flag that named it (for messages).
#[derive(Clone, PartialEq, Eq)]
pub struct PemFile {
    /// The flag, e.g. `--scheduler-tls-ca`.
    pub flag: &'static str,
    /// The file.
    pub path: PathBuf,
}

impl PemFile {
    /// The file `path` given as `flag`.
    pub fn new(flag: &'static str, path: impl Into<PathBuf>) -> PemFile {
        PemFile {
            flag,
            path: path.into(),
        }
    }

    /// The file's bytes.
    fn read(&self) -> Result<Vec<u8>, Error> {
        std::fs::read(&self.path).map_err(|source| Error::Read {
            flag: self.flag,
            path: self.path.clone(),
            source,
        })
    }

    /// The error `what` about this file.
    fn invalid(&self, what: impl fmt::Display) -> Error {
        Error::Invalid {
            flag: self.flag,
            path: self.path.clone(),
            what: what.to_string(),
        }
    }

    /// The certificates in the file (at least one).
    fn certificates(&self) -> Result<(Vec<u8>, Vec<CertificateDer<'static>>), Error> {
        let pem = self.read()?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.invalid(format!("not a PEM certificate file: {e}")))?;
        if certs.is_empty() {
            return Err(self.invalid("no PEM certificate (BEGIN CERTIFICATE) in the file"));
        }
        Ok((pem, certs))
    }

    /// The private key in the file.
    fn private_key(&self) -> Result<(Vec<u8>, PrivateKeyDer<'static>), Error> {
        let pem = self.read()?;
        let key = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| self.invalid(format!("no PEM private key in the file: {e}")))?;
        Ok((pem, key))
    }
}

impl fmt::Debug for PemFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.flag, self.path.display())
    }
}

/// Why TLS flags or certificate files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A TLS flag without the addresses it applies to.
    #[error("{0} needs {1}: there is no connection for it to secure")]
    Without(&'static str, &'static str),
    /// A TLS flag without the flag it goes with.
    #[error("{0} needs {1}")]
    Needs(&'static str, &'static str),
    /// A file could not be read.
    #[error("{flag} {}: cannot read the file: {source}", path.display())]
    Read {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable certificate or key, or the key does not fit the certificate.
    #[error("{flag} {}: {what}", path.display())]
    Invalid {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

/// A certificate chain and its private key, read and checked.
#[derive(Clone, PartialEq, Eq)]
struct KeyPair {
    /// The certificate file.
    cert: PemFile,
    /// The key file.
    key: PemFile,
    /// The chain, PEM.
    cert_pem: Vec<u8>,
    /// The key, PEM.
    key_pem: Vec<u8>,
}

impl KeyPair {
    /// Reads `cert` and `key` and checks that the key is the certificate's.
    fn load(cert: PemFile, key: PemFile) -> Result<(KeyPair, CertifiedKey), Error> {
        let (cert_pem, chain) = cert.certificates()?;
        let (key_pem, private) = key.private_key()?;
        let certified = (chain, private);
        // A throwaway config: rustls checks the key's type and that it fits the certificate.
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| key.invalid(e))?
            .with_root_certificates(RootCertStore::empty())
            .with_client_auth_cert(certified.0.clone(), certified.1.clone_key())
            .map_err(|e| key.invalid(format!("does not fit {}: {e}", cert.flag)))?;
        let pair = KeyPair {
            cert,
            key,
            cert_pem,
            key_pem,
        };
        Ok((pair, certified))
    }

    /// The pair as tonic takes it.
    fn identity(&self) -> Identity {
        Identity::from_pem(&self.cert_pem, &self.key_pem)
    }
}

impl fmt::Debug for KeyPair {
    // The key never reaches a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}, {:?}", self.cert, self.key)
    }
}

/// A certificate chain with its private key, as rustls takes them.
type CertifiedKey = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The client side of a TLS connection: whom to trust, who we are (mTLS), and the name the
/// server's certificate must carry.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA file the server's certificate must chain to.
    ca: PemFile,
    /// Its certificates, PEM.
    ca_pem: Vec<u8>,
    /// Our certificate and key, for servers that ask for one.
    identity: Option<KeyPair>,
    /// The name checked against the server's certificate instead of the host we dial.
    server_name: Option<String>,
}

impl ClientTls {
    /// Reads the files: the CA, and our certificate and key if given.
    pub fn load(
        ca: PemFile,
        identity: Option<(PemFile, PemFile)>,
        server_name: Option<String>,
    ) -> Result<ClientTls, Error> {
        let (ca_pem, _) = ca.certificates()?;
        let identity = identity
            .map(|(cert, key)| KeyPair::load(cert, key).map(|(pair, _)| pair))
            .transpose()?;
        Ok(ClientTls {
            ca,
            ca_pem,
            identity,
            server_name,
        })
    }

    /// Whether a client certificate is sent.
    pub fn is_mutual(&self) -> bool {
        self.identity.is_some()
    }

    /// The config of a tonic endpoint (whose URI must be `https://`).
    pub fn tonic(&self) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca_pem));
        if let Some(pair) = &self.identity {
            config = config.identity(pair.identity());
        }
        if let Some(name) = &self.server_name {
            config = config.domain_name(name.clone());
        }
        config
    }
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca", &self.ca)
            .field("identity", &self.identity)
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// The server side: our certificate and key, and the CA client certificates must chain to
/// when clients must present one (mTLS).
#[derive(Clone)]
pub struct ServerTls {
    /// Our certificate and key.
    pair: KeyPair,
    /// The CA file of client certificates; `None` = no client certificate asked for.
    client_ca: Option<PemFile>,
    /// The rustls config built from them.
    config: Arc<ServerConfig>,
}

impl ServerTls {
    /// Reads the files and builds the server's config (HTTP/2 only, as gRPC needs).
    pub fn load(cert: PemFile, key: PemFile, client_ca: Option<PemFile>) -> Result<Self, Error> {
        let (pair, (chain, private)) = KeyPair::load(cert, key)?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| pair.cert.invalid(e))?;
        let builder = match &client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let (_, certs) = ca.certificates()?;
                let mut roots = RootCertStore::empty();
                for cert in certs {
                    roots.add(cert).map_err(|e| ca.invalid(e))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                        .build()
                        .map_err(|e| ca.invalid(e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, private)
            .map_err(|e| pair.key.invalid(e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(ServerTls {
            pair,
            client_ca,
            config: Arc::new(config),
        })
    }

    /// Whether clients must present a certificate.
    pub fn is_mutual(&self) -> bool {
        self.client_ca.is_some()
    }
}

impl PartialEq for ServerTls {
    fn eq(&self, other: &Self) -> bool {
        self.pair == other.pair && self.client_ca == other.client_ca
    }
}

impl Eq for ServerTls {}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("identity", &self.pair)
            .field("client_ca", &self.client_ca)
            .finish()
    }
}

/// The crypto provider of every config: `ring`, whatever else the process links.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS connections of `listener`, for a gRPC server to serve. Handshakes run beside each
/// other (a slow client holds up no one) and a failed one is logged with the client's address
/// and why: a client without a certificate, with one from another CA, or speaking plaintext.
/// Accepting stops when the stream is dropped.
pub fn incoming(
    listener: TcpListener,
    tls: &ServerTls,
) -> impl Stream<Item = Result<TlsStream<TcpStream>, std::io::Error>> + use<> {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = tx.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let (tcp, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            };
            // Without nodelay, h2's small trailer writes wait for the peer's delayed ACK.
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
            }
            tokio::spawn(handshake(acceptor.clone(), tcp, peer, tx.clone()));
        }
    });
    ReceiverStream::new(rx)
}

/// One server handshake; the connection goes to `accepted` if it succeeds.
async fn handshake(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
    accepted: mpsc::Sender<Result<TlsStream<TcpStream>, std::io::Error>>,
) {
    let handshake = acceptor.accept(tcp).into_fallible();
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(stream)) => {
            // Closed: the server is stopping, and the connection with it.
            let _ = accepted.send(Ok(stream)).await;
        }
        Ok(Err((e, tcp))) => {
            tracing::warn!(%peer, error = %e, "TLS handshake failed");
            linger(tcp).await;
        }
        Err(_) => tracing::warn!(%peer, timeout = ?HANDSHAKE_TIMEOUT, "TLS handshake timed out"),
    }
}

/// Closes a connection whose handshake failed so that the client reads the alert rustls sent
/// (why it was refused: `CertificateRequired`, `UnknownCA`): a TLS 1.3 client has already
/// sent its first request, and closing with those bytes unread would reset the connection,
/// which loses the alert. So: end our side, then read until the client closes (briefly).
async fn linger(mut tcp: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tcp.shutdown().await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(1..) = tcp.read(&mut sink).await {}
    })
    .await;
}

/// The innermost cause of an error: what a TLS or connect failure was really about, without
/// the layers of transport wrapping around it.
pub fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}
