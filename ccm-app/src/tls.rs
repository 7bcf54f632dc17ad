//! The serving certificate of the secure port: from `--tls-cert-file`/`--tls-private-key-file`, or self-signed (in
//! memory, or kept in `--cert-dir`) as the Go CCM does; and its TLS policy, `--tls-min-version` and
//! `--tls-cipher-suites` with Go's names ([`TlsPolicy`]).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::{CryptoProvider, ring};
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::server::ResolvesServerCert;
use tokio_rustls::rustls::server::danger::ClientCertVerifier;
use tokio_rustls::rustls::{ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};
use tokio_rustls::server::TlsStream;

/// The base name of the self-signed pair in `--cert-dir` (Go: `cloud-controller-manager.crt` / `.key`).
pub const PAIR_NAME: &str = "cloud-controller-manager";

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the serving certificate cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A certificate or key file cannot be read or parsed.
    #[error(
        "cannot load {what} from {path}: {reason}; check the certificate flags of that port (--tls-cert-file, \
         --tls-private-key-file, --cert-dir, --tls-sni-cert-key, or their --webhook- forms)"
    )]
    Load {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The self-signed certificate cannot be generated.
    #[error("cannot generate a self-signed serving certificate: {0}")]
    Generate(String),
    /// The generated pair cannot be written to `--cert-dir`.
    #[error("cannot write the self-signed certificate to {path}: {source}; check --cert-dir")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// rustls rejected the certificate or key.
    #[error("invalid serving certificate or key: {0}")]
    Rustls(String),
    /// `--tls-min-version` or `--tls-cipher-suites` names something rustls cannot serve.
    #[error("invalid --{setting}: {reason}")]
    Policy {
        /// The flag.
        setting: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// The suite of rustls's ring provider that Go calls `name`. Go's names are rustls's, but for the TLS 1.3 suites
/// (`TLS_AES_128_GCM_SHA256` is rustls's `TLS13_AES_128_GCM_SHA256`), and Go also accepts the older names of the
/// ECDHE ChaCha20 suites, without `_SHA256`.
fn cipher_suite(name: &str) -> Option<SupportedCipherSuite> {
    ring::ALL_CIPHER_SUITES.iter().copied().find(|suite| {
        let go = suite
            .suite()
            .as_str()
            .unwrap_or_default()
            .replacen("TLS13_", "TLS_", 1);
        go == name
            || go
                .strip_suffix("_SHA256")
                .is_some_and(|old| old == name && old.ends_with("_WITH_CHACHA20_POLY1305"))
    })
}

/// Go's names of cipher suites rustls does not implement (CBC, RC4, 3DES, RSA key exchange).
const GO_ONLY_CIPHER_SUITES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// `--tls-min-version=VersionTLS13`.
static TLS13_ONLY: &[&SupportedProtocolVersion] = &[&tokio_rustls::rustls::version::TLS13];

/// The TLS versions and cipher suites of the secure port.
#[derive(Debug, Clone, Default)]
pub struct TlsPolicy {
    /// TLS 1.3 only (`--tls-min-version=VersionTLS13`); otherwise TLS 1.2 and 1.3.
    pub tls13_only: bool,
    /// The TLS 1.2 suites allowed (`--tls-cipher-suites`); empty means rustls's defaults. TLS 1.3 suites are
    /// always on, as in Go.
    pub tls12_suites: Vec<SupportedCipherSuite>,
}

impl TlsPolicy {
    /// Read `--tls-min-version` (Go's `VersionTLS12`/`VersionTLS13`; empty for the default) and
    /// `--tls-cipher-suites` (Go's suite names).
    ///
    /// # Errors
    ///
    /// [`TlsError::Policy`] for TLS 1.0/1.1, an unknown version, a Go suite rustls does not implement, or an
    /// unknown suite.
    pub fn parse(min_version: Option<&str>, cipher_suites: &[String]) -> Result<Self, TlsError> {
        let version = |reason: String| TlsError::Policy {
            setting: "tls-min-version",
            reason,
        };
        let tls13_only = match min_version.map(str::trim).unwrap_or_default() {
            "" | "VersionTLS12" => false,
            "VersionTLS13" => true,
            old @ ("VersionTLS10" | "VersionTLS11") => {
                return Err(version(format!(
                    "{old} is not supported: the secure port serves TLS 1.2 and 1.3 only; use VersionTLS12 or \
                     VersionTLS13"
                )));
            }
            other => {
                return Err(version(format!(
                    "unknown TLS version {other:?}; use VersionTLS12 or VersionTLS13"
                )));
            }
        };
        let mut tls12_suites = Vec::new();
        for name in cipher_suites
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
        {
            let suite = |reason: String| TlsError::Policy {
                setting: "tls-cipher-suites",
                reason,
            };
            match cipher_suite(name) {
                Some(found @ SupportedCipherSuite::Tls12(_)) => {
                    if !tls12_suites.contains(&found) {
                        tls12_suites.push(found);
                    }
                }
                // As in Go, TLS 1.3 suites are always on; naming them changes nothing.
                Some(SupportedCipherSuite::Tls13(_)) => {}
                None if GO_ONLY_CIPHER_SUITES.contains(&name) => {
                    return Err(suite(format!(
                        "{name} is not implemented by rustls (only ECDHE suites with AES-GCM or ChaCha20-Poly1305 \
                         are); remove it"
                    )));
                }
                None => {
                    return Err(suite(format!(
                        "unknown cipher suite {name:?}; use Go's names, for example \
                         TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
                    )));
                }
            }
        }
        Ok(TlsPolicy {
            tls13_only,
            tls12_suites,
        })
    }

    pub(crate) fn provider(&self) -> CryptoProvider {
        let mut provider = ring::default_provider();
        if !self.tls12_suites.is_empty() {
            let allowed = &self.tls12_suites;
            provider.cipher_suites.retain(|s| match s {
                SupportedCipherSuite::Tls12(_) => allowed.contains(s),
                SupportedCipherSuite::Tls13(_) => true,
            });
        }
        provider
    }

    pub(crate) fn versions(&self) -> &'static [&'static SupportedProtocolVersion] {
        if self.tls13_only {
            TLS13_ONLY
        } else {
            tokio_rustls::rustls::DEFAULT_VERSIONS
        }
    }
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CertSource {
    /// PEM files given by the user.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key.
        key: PathBuf,
    },
    /// A self-signed certificate for `localhost`, `127.0.0.1` and the extra names; generated in memory, or kept
    /// in `dir` (reused on restart) when set.
    SelfSigned {
        /// `--cert-dir`.
        dir: Option<PathBuf>,
        /// Extra DNS names or IPs for the certificate.
        extra_names: Vec<String>,
    },
}

/// The server configuration serving the certificates of `certs`: `provider`'s cipher suites, `policy`'s
/// protocol versions, asking clients for a certificate through `client_certs` when given, HTTP/1.1 only (HTTP/2 is
/// never offered: `--disable-http2-serving` is always in effect). `cipher_flag` names the flag in errors.
pub(crate) fn server_config(
    certs: Arc<dyn ResolvesServerCert>,
    provider: Arc<CryptoProvider>,
    policy: &TlsPolicy,
    client_certs: Option<Arc<dyn ClientCertVerifier>>,
    cipher_flag: &'static str,
) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(policy.versions())
        .map_err(|e| TlsError::Policy {
            setting: cipher_flag,
            reason: e.to_string(),
        })?;
    let builder = match client_certs {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(certs);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The names a self-signed certificate covers: `localhost`, `127.0.0.1`, then `extra` (deduplicated).
pub fn self_signed_names(extra: &[String]) -> Vec<String> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    for name in extra {
        if !name.is_empty() && !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// The extra certificate name for a bind address: the address itself unless it is unspecified or loopback.
pub fn bind_address_name(address: IpAddr) -> Option<String> {
    (!address.is_unspecified() && !address.is_loopback()).then(|| address.to_string())
}

/// The files of the self-signed pair for `localhost`, `127.0.0.1` and `extra` kept in `dir`:
/// `<dir>/<pair_name>.crt` and `.key`, generated and written there (the key mode 0600) unless both exist.
pub(crate) fn kept_self_signed(
    dir: &Path,
    pair_name: &str,
    extra: &[String],
) -> Result<(PathBuf, PathBuf), TlsError> {
    let cert_path = dir.join(format!("{pair_name}.crt"));
    let key_path = dir.join(format!("{pair_name}.key"));
    if cert_path.is_file() && key_path.is_file() {
        return Ok((cert_path, key_path));
    }
    let (cert, key) = generate(extra)?;
    let written = |path: &Path, result: std::io::Result<()>| {
        result.map_err(|source| TlsError::Write {
            path: path.to_owned(),
            source,
        })
    };
    written(dir, std::fs::create_dir_all(dir))?;
    written(&key_path, write_private(&key_path, &key))?;
    written(&cert_path, std::fs::write(&cert_path, &cert))?;
    tracing::info!(cert = %cert_path.display(), "wrote a self-signed serving certificate");
    Ok((cert_path, key_path))
}

/// A self-signed pair (PEM certificate and key) for `localhost`, `127.0.0.1` and `extra`, in memory.
pub(crate) fn generate(extra: &[String]) -> Result<(String, String), TlsError> {
    let failed = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let mut params = rcgen::CertificateParams::new(self_signed_names(extra)).map_err(failed)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("localhost@{stamp}"));
    let key = rcgen::KeyPair::generate().map_err(failed)?;
    let cert = params.self_signed(&key).map_err(failed)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn write_private(path: &Path, content: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(content.as_bytes())
}

/// The client certificate chain of a connection, leaf first (empty when the client sent none); the admin router
/// reads it as `ConnectInfo`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeerCertificates(pub(crate) Arc<Vec<CertificateDer<'static>>>);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>>
    for PeerCertificates
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Self {
        let chain = stream
            .io()
            .get_ref()
            .1
            .peer_certificates()
            .map(|certs| certs.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default();
        PeerCertificates(Arc::new(chain))
    }
}

/// A listener that accepts TCP connections and completes TLS handshakes concurrently, for `axum::serve`: the
/// handshakes in progress are polled together with the next TCP accept, so a slow client delays no other.
pub(crate) struct TlsListener {
    tcp: TcpListener,
    local: SocketAddr,
    tls: TlsAcceptor,
    handshakes: FuturesUnordered<Handshake>,
}

/// A handshake in progress: the stream and the client's address, `None` if it failed.
type Handshake = BoxFuture<'static, Option<(TlsStream<TcpStream>, SocketAddr)>>;

impl TlsListener {
    pub(crate) fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        Ok(TlsListener {
            local: tcp.local_addr()?,
            tcp,
            tls: TlsAcceptor::from(config),
            handshakes: FuturesUnordered::new(),
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.tls.accept(tcp));
                        self.handshakes.push(Box::pin(async move {
                            match handshake.await {
                                Ok(Ok(stream)) => return Some((stream, peer)),
                                Ok(Err(err)) => tracing::debug!(%peer, error = %err, "TLS handshake failed"),
                                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                            }
                            None
                        }));
                    }
                    Err(err) => {
                        tracing::warn!(address = %self.local, error = %err, "accepting a TLS connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Some(Some(connection)) = self.handshakes.next() => return connection,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::certs::DynamicCerts;

    /// A loaded serving certificate: the default certificate (PEM) and the configuration serving it.
    #[derive(Debug)]
    struct ServingCert {
        cert_pem: String,
        config: Arc<ServerConfig>,
    }

    impl ServingCert {
        fn server_config(&self) -> Arc<ServerConfig> {
            self.config.clone()
        }

        /// Load or generate the certificate described by `source`, as the servers do.
        fn load(source: &CertSource) -> Result<Self, TlsError> {
            Self::load_with(source, &TlsPolicy::default(), None)
        }

        /// Load or generate the certificate described by `source`, serving with `policy`.
        fn load_with(
            source: &CertSource,
            policy: &TlsPolicy,
            client_certs: Option<Arc<dyn ClientCertVerifier>>,
        ) -> Result<Self, TlsError> {
            let provider = Arc::new(policy.provider());
            let certs = Arc::new(DynamicCerts::load(
                source,
                PAIR_NAME,
                Vec::new(),
                provider.clone(),
            )?);
            let config = server_config(
                certs.clone(),
                provider,
                policy,
                client_certs,
                "tls-cipher-suites",
            )?;
            Ok(ServingCert {
                cert_pem: certs.default_pem(),
                config,
            })
        }
    }

    #[test]
    fn self_signed_in_memory() {
        let cert = ServingCert::load(&CertSource::SelfSigned {
            dir: None,
            extra_names: vec!["10.0.0.5".into()],
        })
        .unwrap();
        assert!(cert.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(
            cert.server_config().alpn_protocols,
            vec![b"http/1.1".to_vec()]
        );
    }

    fn policy_err(min: Option<&str>, suites: &[&str]) -> String {
        let suites: Vec<String> = suites.iter().map(|s| (*s).to_owned()).collect();
        TlsPolicy::parse(min, &suites).unwrap_err().to_string()
    }

    #[test]
    fn tls_policy_from_go_names() {
        let default = TlsPolicy::parse(None, &[]).unwrap();
        assert!(!default.tls13_only);
        assert!(default.tls12_suites.is_empty());
        assert_eq!(default.versions().len(), 2);
        assert!(
            !TlsPolicy::parse(Some("VersionTLS12"), &[])
                .unwrap()
                .tls13_only
        );
        let only13 = TlsPolicy::parse(Some("VersionTLS13"), &[]).unwrap();
        assert!(only13.tls13_only);
        assert_eq!(only13.versions().len(), 1);

        let suites: Vec<String> = [
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_AES_128_GCM_SHA256",
        ]
        .map(str::to_owned)
        .to_vec();
        let policy = TlsPolicy::parse(None, &suites).unwrap();
        assert_eq!(
            policy.tls12_suites.len(),
            2,
            "the two ChaCha names are one suite"
        );
        let provider = policy.provider();
        let tls12 = provider
            .cipher_suites
            .iter()
            .filter(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
            .count();
        let tls13 = provider
            .cipher_suites
            .iter()
            .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)))
            .count();
        assert_eq!((tls12, tls13), (2, 3), "TLS 1.3 suites stay on");
        // every Go name of a suite rustls implements is accepted
        let all: Vec<String> = [
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_AES_128_GCM_SHA256",
            "TLS_AES_256_GCM_SHA384",
            "TLS_CHACHA20_POLY1305_SHA256",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(TlsPolicy::parse(None, &all).unwrap().tls12_suites.len(), 6);

        assert_eq!(
            policy_err(Some("VersionTLS10"), &[]),
            "invalid --tls-min-version: VersionTLS10 is not supported: the secure port serves TLS 1.2 and 1.3 \
             only; use VersionTLS12 or VersionTLS13"
        );
        assert_eq!(
            policy_err(Some("TLS1.2"), &[]),
            "invalid --tls-min-version: unknown TLS version \"TLS1.2\"; use VersionTLS12 or VersionTLS13"
        );
        assert_eq!(
            policy_err(None, &["TLS_RSA_WITH_AES_128_CBC_SHA"]),
            "invalid --tls-cipher-suites: TLS_RSA_WITH_AES_128_CBC_SHA is not implemented by rustls (only ECDHE \
             suites with AES-GCM or ChaCha20-Poly1305 are); remove it"
        );
        assert_eq!(
            policy_err(None, &["TLS_NOPE"]),
            "invalid --tls-cipher-suites: unknown cipher suite \"TLS_NOPE\"; use Go's names, for example \
             TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        );
    }

    #[test]
    fn tls13_only_with_restricted_suites_serves() {
        let suites = vec!["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_owned()];
        let policy = TlsPolicy::parse(Some("VersionTLS13"), &suites).unwrap();
        ServingCert::load_with(
            &CertSource::SelfSigned {
                dir: None,
                extra_names: vec![],
            },
            &policy,
            None,
        )
        .unwrap();
    }

    #[test]
    fn names() {
        assert_eq!(self_signed_names(&[]), vec!["localhost", "127.0.0.1"]);
        assert_eq!(
            self_signed_names(&["localhost".into(), "10.0.0.1".into(), String::new()]),
            vec!["localhost", "127.0.0.1", "10.0.0.1"]
        );
        assert_eq!(bind_address_name("0.0.0.0".parse().unwrap()), None);
        assert_eq!(bind_address_name("127.0.0.1".parse().unwrap()), None);
        assert_eq!(bind_address_name("::".parse().unwrap()), None);
        assert_eq!(
            bind_address_name("10.1.2.3".parse().unwrap()).as_deref(),
            Some("10.1.2.3")
        );
    }

    #[test]
    fn cert_dir_is_written_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let source = CertSource::SelfSigned {
            dir: Some(dir.path().join("certs")),
            extra_names: vec![],
        };
        let first = ServingCert::load(&source).unwrap();
        let second = ServingCert::load(&source).unwrap();
        assert_eq!(first.cert_pem, second.cert_pem);
        let key = dir
            .path()
            .join("certs")
            .join("cloud-controller-manager.key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // the written files load as user-provided files too
        let files = ServingCert::load(&CertSource::Files {
            cert: dir
                .path()
                .join("certs")
                .join("cloud-controller-manager.crt"),
            key,
        })
        .unwrap();
        assert_eq!(files.cert_pem, first.cert_pem);
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        let err = ServingCert::load(&CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("cannot load certificate from {}", cert.display())),
            "{err}"
        );
        std::fs::write(&cert, "not a certificate").unwrap();
        std::fs::write(&key, "not a key").unwrap();
        let err = ServingCert::load(&CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("no PEM certificate found"),
            "{err}"
        );
        let (good_cert, _) = generate(&[]).unwrap();
        std::fs::write(&cert, good_cert).unwrap();
        let err = ServingCert::load(&CertSource::Files {
            cert,
            key: key.clone(),
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("cannot load private key from {}", key.display())),
            "{err}"
        );
    }
}
