//! Certificates made for a test (rcgen, ring): a CA, and certificates it signs, written as PEM
//! files in a temporary folder that goes with the test. None is ever committed.

use std::path::PathBuf;

use jobsd::tls::{ClientTls, PemFile, ServerTls};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    date_time_ymd,
};
use tempfile::TempDir;

/// A certificate authority and the folder its files go in.
pub struct Ca {
    /// Signs the certificates.
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// Where the PEM files are written (removed on drop).
    dir: TempDir,
    /// The CA certificate's file.
    pub cert: PathBuf,
}

/// A certificate and its key, as files.
pub struct Leaf {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
}

impl Ca {
    /// A new CA called `name`.
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join(format!("{name}.crt"));
        std::fs::write(&cert, issuer.pem()).unwrap();
        Ca { issuer, dir, cert }
    }

    /// A certificate for `names` (DNS names or IP addresses), valid now, saved as `file`.
    pub fn leaf(&self, file: &str, names: &[&str]) -> Leaf {
        self.sign(file, CertificateParams::new(to_strings(names)).unwrap())
    }

    /// A certificate for `names` that expired in 2021.
    pub fn expired_leaf(&self, file: &str, names: &[&str]) -> Leaf {
        let mut params = CertificateParams::new(to_strings(names)).unwrap();
        params.not_before = date_time_ymd(2020, 1, 1);
        params.not_after = date_time_ymd(2021, 1, 1);
        self.sign(file, params)
    }

    fn sign(&self, file: &str, mut params: CertificateParams) -> Leaf {
        params.distinguished_name.push(DnType::CommonName, file);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let leaf = Leaf {
            cert: self.dir.path().join(format!("{file}.crt")),
            key: self.dir.path().join(format!("{file}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }

    /// A path in the CA's folder, for files a test writes itself.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// A replica's TLS with `leaf`, requiring client certificates signed by `clients` if given.
    pub fn server(leaf: &Leaf, clients: Option<&Ca>) -> ServerTls {
        ServerTls::load(
            PemFile::new("--tls-cert-file", &leaf.cert),
            PemFile::new("--tls-key-file", &leaf.key),
            clients.map(|ca| PemFile::new("--tls-client-ca-file", &ca.cert)),
        )
        .unwrap()
    }

    /// A client trusting this CA, presenting `leaf` if given, checking `server_name` if given.
    pub fn client(&self, leaf: Option<&Leaf>, server_name: Option<&str>) -> ClientTls {
        ClientTls::load(
            PemFile::new("--scheduler-tls-ca", &self.cert),
            leaf.map(|l| {
                (
                    PemFile::new("--scheduler-tls-cert", &l.cert),
                    PemFile::new("--scheduler-tls-key", &l.key),
                )
            }),
            server_name.map(str::to_owned),
        )
        .unwrap()
    }
}

fn to_strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}
