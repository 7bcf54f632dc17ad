//! What the secure port and the webhook port share: their flags read as one [`PortFlags`] (Go's
//! `SecureServingOptions`, once without a prefix and once with `webhook-`), checked by [`PortFlags::validate`];
//! the TLS configuration they serve with (certificate files or a self-signed pair, SNI certificates, key exchange
//! groups, versions and suites), its certificates re-read when the files change (`serving/certs.rs`); and the listening
//! socket with `--permit-port-sharing` / `--permit-address-sharing`.

pub(crate) mod certs;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::SupportedKxGroup;
use tokio_rustls::rustls::crypto::ring::kx_group;
use tokio_rustls::rustls::server::danger::ClientCertVerifier;
use tokio_util::sync::CancellationToken;

use crate::options::{CcmOptions, ValidationError};
use crate::tls::{
    CertSource, PeerCertificates, TlsError, TlsListener, TlsPolicy, bind_address_name,
};
use certs::{DynamicCerts, RELOAD_INTERVAL, SniCertKey};

/// The base name of the webhook port's self-signed pair in `--webhook-cert-dir` (Go's pair name).
pub const WEBHOOK_PAIR_NAME: &str = "cloud-controller-manager-webhook";

/// Go's crypto/tls CurveID values and the rustls group each is.
const CURVES: &[(i32, &str, Option<&dyn SupportedKxGroup>)] = &[
    (23, "P-256", Some(kx_group::SECP256R1)),
    (24, "P-384", Some(kx_group::SECP384R1)),
    (25, "P-521", None),
    (29, "X25519", Some(kx_group::X25519)),
    (4587, "SecP256r1MLKEM768", None),
    (4588, "X25519MLKEM768", None),
    (4589, "SecP384r1MLKEM1024", None),
];

/// Read `--tls-curve-preferences`: Go's numeric CurveID values, in the order given (duplicates dropped).
///
/// # Errors
///
/// A message for a value that is not a number, a Go curve rustls does not implement, or an unknown curve.
pub fn parse_curve_preferences(
    values: &[String],
) -> Result<Vec<&'static dyn SupportedKxGroup>, String> {
    let mut groups: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    for value in values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
        let id: i32 = value.parse().map_err(|_| {
            format!(
                "{value:?} is not a number; use Go's numeric CurveID values: 23 (P-256), 24 (P-384), 29 (X25519)"
            )
        })?;
        match CURVES.iter().find(|(known, _, _)| *known == id) {
            Some((_, _, Some(group))) => {
                if !groups.iter().any(|g| g.name() == group.name()) {
                    groups.push(*group);
                }
            }
            Some((_, name, None)) => {
                return Err(format!(
                    "{id} ({name}) is not implemented by rustls's ring provider; use 23 (P-256), 24 (P-384) or 29 \
                     (X25519)"
                ));
            }
            None => {
                return Err(format!(
                    "unknown curve {id}; use Go's numeric CurveID values: 23 (P-256), 24 (P-384), 29 (X25519)"
                ));
            }
        }
    }
    Ok(groups)
}

/// The serving flags of one port, read from [`CcmOptions`]: the secure port ([`PortFlags::secure`]) or the
/// webhook port ([`PortFlags::webhook`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PortFlags {
    /// `""` for the secure port, `"webhook-"` for the webhook port: the prefix of the flag names in messages.
    pub prefix: &'static str,
    /// `--[webhook-]bind-address`.
    pub bind_address: IpAddr,
    /// `--[webhook-]secure-port`; 0 = not served.
    pub port: u16,
    /// `--[webhook-]cert-dir`.
    pub cert_dir: Option<PathBuf>,
    /// `--[webhook-]tls-cert-file`.
    pub cert_file: Option<PathBuf>,
    /// `--[webhook-]tls-private-key-file`.
    pub key_file: Option<PathBuf>,
    /// `--[webhook-]tls-min-version`.
    pub min_version: Option<String>,
    /// `--[webhook-]tls-cipher-suites`.
    pub cipher_suites: Vec<String>,
    /// `--[webhook-]tls-curve-preferences`.
    pub curve_preferences: Vec<String>,
    /// `--[webhook-]tls-sni-cert-key`.
    pub sni_cert_keys: Vec<String>,
    /// The base name of the self-signed pair in the cert dir.
    pub pair_name: &'static str,
    /// `--permit-port-sharing` (both ports, as in Go).
    pub permit_port_sharing: bool,
    /// `--permit-address-sharing` (both ports, as in Go).
    pub permit_address_sharing: bool,
}

impl PortFlags {
    /// The secure port's flags.
    pub fn secure(options: &CcmOptions) -> Self {
        PortFlags {
            prefix: "",
            bind_address: options.bind_address,
            port: options.secure_port,
            cert_dir: options.cert_dir.clone(),
            cert_file: options.tls_cert_file.clone(),
            key_file: options.tls_private_key_file.clone(),
            min_version: options.tls_min_version.clone(),
            cipher_suites: options.tls_cipher_suites.clone(),
            curve_preferences: options.tls_curve_preferences.clone(),
            sni_cert_keys: options.tls_sni_cert_key.clone(),
            pair_name: crate::tls::PAIR_NAME,
            permit_port_sharing: options.permit_port_sharing,
            permit_address_sharing: options.permit_address_sharing,
        }
    }

    /// The webhook port's flags.
    pub fn webhook(options: &CcmOptions) -> Self {
        PortFlags {
            prefix: "webhook-",
            bind_address: options.webhook_bind_address,
            port: options.webhook_secure_port,
            cert_dir: options.webhook_cert_dir.clone(),
            cert_file: options.webhook_tls_cert_file.clone(),
            key_file: options.webhook_tls_private_key_file.clone(),
            min_version: options.webhook_tls_min_version.clone(),
            cipher_suites: options.webhook_tls_cipher_suites.clone(),
            curve_preferences: options.webhook_tls_curve_preferences.clone(),
            sni_cert_keys: options.webhook_tls_sni_cert_key.clone(),
            pair_name: WEBHOOK_PAIR_NAME,
            permit_port_sharing: options.permit_port_sharing,
            permit_address_sharing: options.permit_address_sharing,
        }
    }

    /// The flag `name` of this port (`tls-min-version` → `webhook-tls-min-version` for the webhook port).
    fn flag(&self, name: &'static str) -> &'static str {
        const WEBHOOK_FLAGS: &[&str] = &[
            "webhook-tls-cert-file",
            "webhook-tls-min-version",
            "webhook-tls-cipher-suites",
            "webhook-tls-curve-preferences",
            "webhook-tls-sni-cert-key",
        ];
        let prefixed = WEBHOOK_FLAGS
            .iter()
            .find(|f| f.strip_prefix(self.prefix) == Some(name));
        prefixed.copied().unwrap_or(name)
    }

    /// Every rule of these flags that needs no file: the pair given together, the versions, suites, curves and
    /// the shape of the SNI entries.
    pub fn validate(&self) -> Vec<ValidationError> {
        let invalid = |name, reason| ValidationError::Invalid {
            setting: self.flag(name),
            reason,
        };
        let mut errors = Vec::new();
        if self.cert_file.is_some() != self.key_file.is_some() {
            let p = self.prefix;
            errors.push(invalid(
                "tls-cert-file",
                format!("--{p}tls-cert-file and --{p}tls-private-key-file must be given together"),
            ));
        }
        if let Err(err) = self.policy() {
            errors.push(match err {
                TlsError::Policy { setting, reason } => invalid(setting, reason),
                other => invalid("tls-min-version", other.to_string()),
            });
        }
        if let Err(reason) = parse_curve_preferences(&self.curve_preferences) {
            errors.push(invalid("tls-curve-preferences", reason));
        }
        let sni_errors = self
            .sni_cert_keys
            .iter()
            .filter_map(|entry| SniCertKey::parse(entry).err());
        errors.extend(sni_errors.map(|reason| invalid("tls-sni-cert-key", reason)));
        errors
    }

    fn policy(&self) -> Result<TlsPolicy, TlsError> {
        TlsPolicy::parse(self.min_version.as_deref(), &self.cipher_suites)
    }

    /// Where the default certificate comes from: the files, or a self-signed pair (in memory or in the cert dir)
    /// for `localhost`, `127.0.0.1` and a specific bind address.
    fn source(&self) -> CertSource {
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => CertSource::SelfSigned {
                dir: self.cert_dir.clone(),
                extra_names: bind_address_name(self.bind_address).into_iter().collect(),
            },
        }
    }

    /// Load the certificates and build the TLS configuration, asking clients for a certificate through
    /// `client_certs` when given. The returned certificates are re-read by `DynamicCerts::reload`; the default
    /// one as loaded at start is `DynamicCerts::default_pem`. A [`TlsError`] names the flag or file that is wrong.
    pub(crate) fn tls(
        &self,
        client_certs: Option<Arc<dyn ClientCertVerifier>>,
    ) -> Result<(Arc<ServerConfig>, Arc<DynamicCerts>), TlsError> {
        let policy = self.policy()?;
        let mut provider = policy.provider();
        let invalid = |name, reason| TlsError::Policy {
            setting: self.flag(name),
            reason,
        };
        let groups = parse_curve_preferences(&self.curve_preferences)
            .map_err(|reason| invalid("tls-curve-preferences", reason))?;
        if !groups.is_empty() {
            provider.kx_groups = groups;
        }
        let provider = Arc::new(provider);
        let sni = self
            .sni_cert_keys
            .iter()
            .map(|entry| {
                SniCertKey::parse(entry).map_err(|reason| invalid("tls-sni-cert-key", reason))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let certs = Arc::new(DynamicCerts::load(
            &self.source(),
            self.pair_name,
            sni,
            provider.clone(),
        )?);
        let config = crate::tls::server_config(
            certs.clone(),
            provider,
            &policy,
            client_certs,
            self.flag("tls-cipher-suites"),
        )?;
        Ok((config, certs))
    }

    /// Bind the port: SO_REUSEADDR as Go's net package sets it, SO_REUSEPORT with `--permit-port-sharing`; the I/O
    /// error of the socket, the option or the bind.
    pub(crate) fn bind(&self) -> std::io::Result<tokio::net::TcpListener> {
        bind(
            SocketAddr::new(self.bind_address, self.port),
            self.permit_port_sharing,
        )
    }
}

/// The `Content-Type` of the ports' plain-text answers.
pub(crate) const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

/// An answer of the secure or the webhook port, with `X-Content-Type-Options: nosniff` as Go's servers send it,
/// and `Cache-Control: no-cache, private` when `private` (the secure port's endpoints and authentication errors).
pub(crate) fn reply(
    status: StatusCode,
    content_type: &'static str,
    private: bool,
    body: String,
) -> Response {
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    let mut response = (status, headers, body).into_response();
    if private {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
    }
    response
}

/// Serve `router` over HTTPS on `listener` with the TLS configuration and certificates of [`PortFlags::tls`]
/// until `stop`, re-reading the certificate files meanwhile; the router sees the client's certificate chain as
/// `ConnectInfo<PeerCertificates>`. Returns the address it listens on and the serving future; `port` (`secure`,
/// `webhook`) names the port in the logs.
pub(crate) fn serve(
    listener: tokio::net::TcpListener,
    (config, certs): (Arc<ServerConfig>, Arc<DynamicCerts>),
    router: axum::Router,
    stop: CancellationToken,
    port: &'static str,
) -> std::io::Result<(SocketAddr, impl Future<Output = ()> + Send + 'static)> {
    let address = listener.local_addr()?;
    let tls = TlsListener::new(listener, config)?;
    certs.watch(RELOAD_INTERVAL, stop.clone(), port);
    let app = router.into_make_service_with_connect_info::<PeerCertificates>();
    let serving = async move {
        let shutdown = stop.cancelled_owned();
        if let Err(err) = axum::serve(tls, app).with_graceful_shutdown(shutdown).await {
            tracing::error!(error = %err, "the {port} port stopped serving");
        }
    };
    Ok((address, serving))
}

/// Bind and listen on `address`, with SO_REUSEADDR, and SO_REUSEPORT when `share_port` (Unix only).
pub(crate) fn bind(
    address: SocketAddr,
    share_port: bool,
) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    #[cfg(unix)]
    {
        socket.set_reuseaddr(true)?;
        if share_port {
            socket.set_reuseport(true)?;
        }
    }
    #[cfg(not(unix))]
    if share_port {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "--permit-port-sharing needs SO_REUSEPORT, which this platform does not have",
        ));
    }
    socket.bind(address)?;
    socket.listen(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn curves_by_go_id() {
        let groups = parse_curve_preferences(&strings(&["29", "23", "24", "29", ""])).unwrap();
        let names: Vec<_> = groups.iter().map(|g| g.name()).collect();
        assert_eq!(
            names,
            [
                kx_group::X25519.name(),
                kx_group::SECP256R1.name(),
                kx_group::SECP384R1.name()
            ]
        );
        assert!(parse_curve_preferences(&[]).unwrap().is_empty());
        assert_eq!(
            parse_curve_preferences(&strings(&["4588"])).unwrap_err(),
            "4588 (X25519MLKEM768) is not implemented by rustls's ring provider; use 23 (P-256), 24 (P-384) or 29 \
             (X25519)"
        );
        assert_eq!(
            parse_curve_preferences(&strings(&["7"])).unwrap_err(),
            "unknown curve 7; use Go's numeric CurveID values: 23 (P-256), 24 (P-384), 29 (X25519)"
        );
        assert!(
            parse_curve_preferences(&strings(&["X25519"]))
                .unwrap_err()
                .starts_with("\"X25519\" is not a number")
        );
    }

    fn webhook_flags() -> PortFlags {
        PortFlags::webhook(&CcmOptions::default())
    }

    #[test]
    fn webhook_messages_name_webhook_flags() {
        let flags = PortFlags {
            cert_file: Some("/c".into()),
            min_version: Some("VersionTLS10".into()),
            curve_preferences: strings(&["25"]),
            sni_cert_keys: strings(&["only-a-cert"]),
            ..webhook_flags()
        };
        let messages: Vec<String> = flags.validate().iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages[0].starts_with(
            "invalid --webhook-tls-cert-file: --webhook-tls-cert-file and --webhook-tls-private-key-file"
        ));
        assert!(messages[1].starts_with("invalid --webhook-tls-min-version: VersionTLS10"));
        assert!(messages[2].starts_with("invalid --webhook-tls-curve-preferences: 25 (P-521)"));
        assert!(messages[3].starts_with("invalid --webhook-tls-sni-cert-key:"));
        let secure = PortFlags {
            cipher_suites: strings(&["TLS_NOPE"]),
            ..PortFlags::secure(&CcmOptions::default())
        };
        assert_eq!(
            secure.validate()[0].to_string(),
            "invalid --tls-cipher-suites: unknown cipher suite \"TLS_NOPE\"; use Go's names, for example \
             TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        );
        assert!(webhook_flags().validate().is_empty());
    }

    #[test]
    fn restricted_curves_serve() {
        let flags = PortFlags {
            curve_preferences: strings(&["24"]),
            ..webhook_flags()
        };
        let (_, certs) = flags.tls(None).unwrap();
        assert!(
            certs
                .default_pem()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
    }

    #[test]
    fn go_defaults_and_a_go_command_line() {
        let defaults = CcmOptions::default();
        let webhook = PortFlags::webhook(&defaults);
        assert_eq!(
            (
                webhook.bind_address.to_string(),
                webhook.port,
                webhook.pair_name
            ),
            (
                "0.0.0.0".to_owned(),
                10260,
                "cloud-controller-manager-webhook"
            )
        );
        assert!(
            defaults.webhooks.is_empty(),
            "no webhook by default, as in Go"
        );
        assert!(!defaults.disable_http2_serving && !defaults.permit_port_sharing);
        assert_eq!(defaults.http2_max_streams_per_connection, 0);
        assert_eq!(defaults.log_json_info_buffer_size, "0");
        assert!(!defaults.enable_leader_migration);

        let registry = ccm_core::ProviderRegistry::new();
        registry
            .register("fake", |_settings| async move {
                Err::<std::sync::Arc<dyn ccm_core::provider::CloudProvider>, ccm_core::BoxError>(
                    "never created".into(),
                )
            })
            .unwrap();
        let hook =
            crate::webhook::WebhookDescriptor::new("hook", "/hook", |_ctx, request| async move {
                Ok(crate::webhook::AdmissionResponse::from(&request))
            });
        let builder = crate::CloudControllerManager::builder(registry).register_webhook(hook);
        let o = builder
            .parse_args([
                "ccm",
                "--cloud-provider=fake",
                "--webhooks=*,-hook,hook",
                "--webhook-bind-address=127.0.0.1",
                "--webhook-secure-port=9443",
                "--webhook-cert-dir=/var/run/webhook",
                "--webhook-tls-cert-file=/etc/w.crt",
                "--webhook-tls-private-key-file=/etc/w.key",
                "--webhook-tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "--webhook-tls-min-version=VersionTLS13",
                "--webhook-tls-curve-preferences=29,23",
                "--webhook-tls-sni-cert-key=a.crt,a.key:a.example",
                "--webhook-tls-sni-cert-key=b.crt,b.key",
                "--webhook-disable-http2-serving",
                "--tls-curve-preferences=24",
                "--tls-sni-cert-key=c.crt,c.key:*.c.example",
                "--disable-http2-serving=true",
                "--http2-max-streams-per-connection=100",
                "--permit-port-sharing",
                "--permit-address-sharing=true",
                "--log-json-split-stream",
                "--log-json-info-buffer-size=64Ki",
                "--log-text-split-stream=false",
                "--log-text-info-buffer-size=1M",
                "--enable-leader-migration=false",
                "--leader-migration-config=/etc/unread-when-disabled.yaml",
            ])
            .unwrap();
        assert_eq!(o.webhooks, ["*", "-hook", "hook"]);
        let webhook = PortFlags::webhook(&o);
        assert_eq!(webhook.port, 9443);
        assert_eq!(webhook.sni_cert_keys.len(), 2);
        assert_eq!(webhook.curve_preferences, ["29", "23"]);
        assert!(o.webhook_disable_http2_serving && o.disable_http2_serving);
        assert!(o.permit_port_sharing && o.permit_address_sharing);
        assert_eq!(o.http2_max_streams_per_connection, 100);
        assert!(o.log_json_split_stream && !o.log_text_split_stream);
        assert_eq!(
            PortFlags::secure(&o).sni_cert_keys,
            ["c.crt,c.key:*.c.example"]
        );
    }

    /// A client verifier that accepts any certificate and records the one presented.
    #[derive(Debug)]
    struct Record(std::sync::Mutex<Vec<u8>>);

    impl tokio_rustls::rustls::client::danger::ServerCertVerifier for Record {
        fn verify_server_cert(
            &self,
            end_entity: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
            _intermediates: &[tokio_rustls::rustls::pki_types::CertificateDer<'_>],
            _server_name: &tokio_rustls::rustls::pki_types::ServerName<'_>,
            _ocsp: &[u8],
            _now: tokio_rustls::rustls::pki_types::UnixTime,
        ) -> Result<
            tokio_rustls::rustls::client::danger::ServerCertVerified,
            tokio_rustls::rustls::Error,
        > {
            *self.0.lock().unwrap() = end_entity.as_ref().to_vec();
            Ok(tokio_rustls::rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _message: &[u8],
            _cert: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
            _dss: &tokio_rustls::rustls::DigitallySignedStruct,
        ) -> Result<
            tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
            tokio_rustls::rustls::Error,
        > {
            Ok(tokio_rustls::rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _message: &[u8],
            _cert: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
            _dss: &tokio_rustls::rustls::DigitallySignedStruct,
        ) -> Result<
            tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
            tokio_rustls::rustls::Error,
        > {
            Ok(tokio_rustls::rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<tokio_rustls::rustls::SignatureScheme> {
            tokio_rustls::rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }

    /// The leaf certificate a TLS client asking for `name` is served.
    async fn served(config: Arc<tokio_rustls::rustls::ServerConfig>, name: &str) -> Vec<u8> {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let record = Arc::new(Record(std::sync::Mutex::default()));
        let client = tokio_rustls::rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(record.clone())
            .with_no_client_auth();
        let server = tokio::spawn(tokio_rustls::TlsAcceptor::from(config).accept(server_io));
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
        // kept open until the server finished its side (it writes session tickets after the handshake)
        let _stream = tokio_rustls::TlsConnector::from(Arc::new(client))
            .connect(name, client_io)
            .await
            .expect("handshake");
        server.await.unwrap().expect("server handshake");
        record.0.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn sni_certificates_are_served_per_name_over_tls() {
        let dir = tempfile::tempdir().unwrap();
        let write = |base: &str, names: &[&str]| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(strings(names))
                .unwrap()
                .self_signed(&key)
                .unwrap();
            let (c, k) = (
                dir.path().join(format!("{base}.crt")),
                dir.path().join(format!("{base}.key")),
            );
            std::fs::write(&c, cert.pem()).unwrap();
            std::fs::write(&k, key.serialize_pem()).unwrap();
            (
                cert.der().as_ref().to_vec(),
                format!("{},{}", c.display(), k.display()),
            )
        };
        let (a_der, a_entry) = write("a", &["a.example"]);
        let (w_der, w_entry) = write("w", &["unused.example"]);
        let flags = PortFlags {
            sni_cert_keys: vec![a_entry, format!("{w_entry}:*.w.example")],
            ..webhook_flags()
        };
        let (config, _) = flags.tls(None).unwrap();
        assert_eq!(served(config.clone(), "a.example").await, a_der);
        assert_eq!(served(config.clone(), "x.w.example").await, w_der);
        let default = served(config, "localhost").await;
        assert_ne!(default, a_der);
        assert_ne!(default, w_der);
    }

    #[tokio::test]
    async fn port_sharing_needs_the_flag() {
        let first = bind("127.0.0.1:0".parse().unwrap(), true).unwrap();
        let address = first.local_addr().unwrap();
        let second = bind(address, true).expect("SO_REUSEPORT on both sockets shares the port");
        assert_eq!(second.local_addr().unwrap(), address);
        let refused = bind(address, false).expect_err("without the flag the port is taken");
        assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse);
    }

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_curve_preferences() {
        let groups =
            crate::serving::parse_curve_preferences(&["29".to_owned(), "23".to_owned()]).unwrap();
        assert_eq!(groups.len(), 2);
        assert!(
            crate::serving::parse_curve_preferences(&["25".to_owned()])
                .unwrap_err()
                .contains("P-521")
        );
    }
}
