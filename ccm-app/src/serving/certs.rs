//! The certificates a port serves, as a rustls certificate resolver: the default one (files, or a self-signed
//! pair) and the `--tls-sni-cert-key` ones chosen by the name the client asks for; every certificate read from
//! files is re-read when the files change ([`DynamicCerts::reload`], polled by [`DynamicCerts::watch`]), as Go's
//! dynamic serving certificates are. A changed file that does not load is logged and the previous certificate kept.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ccm_core::runtime::every::{Timing, every};
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;
use x509_parser::extensions::GeneralName;

use crate::tls::{CertSource, TlsError};

/// How often the certificate files are checked for changes (Go re-reads them at least once a minute).
pub(crate) const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// One `--tls-sni-cert-key` value: `CERT,KEY` or `CERT,KEY:NAME,NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SniCertKey {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    /// The explicit names; empty: the certificate's own names.
    pub(crate) names: Vec<String>,
}

impl SniCertKey {
    /// Parse Go's `CERT,KEY[:NAME,...]`.
    pub(crate) fn parse(value: &str) -> Result<Self, String> {
        let (files, names) = value
            .split_once(':')
            .map_or((value, None), |(f, n)| (f, Some(n)));
        let parts: Vec<&str> = files.split(',').map(str::trim).collect();
        let [cert, key] = parts[..] else {
            return Err(format!(
                "{value:?}: expected a certificate and a key file separated by a comma, optionally followed by \
                 ':' and comma-separated names, such as foo.crt,foo.key:*.foo.com,foo.com"
            ));
        };
        if cert.is_empty() || key.is_empty() {
            return Err(format!(
                "{value:?}: the certificate and key file paths must not be empty"
            ));
        }
        let names: Vec<String> = names
            .into_iter()
            .flat_map(|n| n.split(','))
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        if names.iter().any(|n| n.contains('*') && !wildcard_ok(n)) {
            return Err(format!(
                "{value:?}: a wildcard name must be \"*.\" followed by a domain, such as *.foo.com"
            ));
        }
        Ok(SniCertKey {
            cert: cert.into(),
            key: key.into(),
            names,
        })
    }
}

fn wildcard_ok(name: &str) -> bool {
    name.strip_prefix("*.")
        .is_some_and(|rest| !rest.is_empty() && !rest.contains('*'))
}

/// One certificate and where it is re-read from.
#[derive(Debug)]
struct Slot {
    /// The certificate and key files; `None` for a certificate generated in memory.
    files: Option<(PathBuf, PathBuf)>,
    current: RwLock<Arc<Loaded>>,
}

/// A certificate as loaded, and the file contents (certificate, key) it was built from.
#[derive(Debug)]
struct Loaded {
    pem: (Vec<u8>, Vec<u8>),
    key: Arc<CertifiedKey>,
}

impl Slot {
    fn from_pem(
        pem: (Vec<u8>, Vec<u8>),
        files: Option<(PathBuf, PathBuf)>,
        provider: &CryptoProvider,
    ) -> Result<Self, TlsError> {
        let origin = files.as_ref().map_or_else(
            || (PathBuf::from("(generated)"), PathBuf::from("(generated)")),
            Clone::clone,
        );
        let key = Arc::new(certified(&pem, (&origin.0, &origin.1), provider)?);
        Ok(Slot {
            files,
            current: RwLock::new(Arc::new(Loaded { pem, key })),
        })
    }

    fn from_files(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<Self, TlsError> {
        let files = Some((cert.to_owned(), key.to_owned()));
        Self::from_pem(read_pair(cert, key)?, files, provider)
    }

    fn loaded(&self) -> Arc<Loaded> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn get(&self) -> Arc<CertifiedKey> {
        self.loaded().key.clone()
    }

    /// Re-read the files; `Ok(true)` when a changed pair was loaded.
    fn reload(&self, provider: &CryptoProvider) -> Result<bool, TlsError> {
        let Some((cert, key)) = &self.files else {
            return Ok(false);
        };
        let pem = read_pair(cert, key)?;
        if self.loaded().pem == pem {
            return Ok(false);
        }
        let key = Arc::new(certified(&pem, (cert, key), provider)?);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(Loaded { pem, key });
        Ok(true)
    }
}

fn read_pair(cert: &Path, key: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let load = |what: &'static str, path: &Path| {
        std::fs::read(path).map_err(|e| TlsError::Load {
            what,
            path: path.to_owned(),
            reason: e.to_string(),
        })
    };
    Ok((load("certificate", cert)?, load("private key", key)?))
}

fn certified(
    (cert_pem, key_pem): &(Vec<u8>, Vec<u8>),
    (cert_path, key_path): (&Path, &Path),
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let load = |what: &'static str, path: &Path, reason: String| TlsError::Load {
        what,
        path: path.to_owned(),
        reason,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| load("certificate", cert_path, e.to_string()))?;
    if chain.is_empty() {
        return Err(load(
            "certificate",
            cert_path,
            "no PEM certificate found".to_owned(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| load("private key", key_path, e.to_string()))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        load(
            "private key",
            key_path,
            format!(
                "it does not match the certificate {}: {e}",
                cert_path.display()
            ),
        )
    })
}

/// The names a certificate was issued for: its DNS subject alternative names, or its common name without them.
fn certificate_names(cert: &CertifiedKey) -> Vec<String> {
    let leaf = cert.cert.first();
    let Some((_, parsed)) = leaf.and_then(|c| x509_parser::parse_x509_certificate(c).ok()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = parsed
        .subject_alternative_name()
        .ok()
        .flatten()
        .into_iter()
        .flat_map(|san| san.value.general_names.iter())
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some(dns.to_ascii_lowercase()),
            _ => None,
        })
        .collect();
    if names.is_empty() {
        names.extend(
            parsed
                .subject()
                .iter_common_name()
                .filter_map(|cn| cn.as_str().ok())
                .map(str::to_ascii_lowercase),
        );
    }
    names
}

/// The certificates of one port.
#[derive(Debug)]
pub(crate) struct DynamicCerts {
    default: Slot,
    sni: Vec<Slot>,
    /// Name (or `*.domain`) → index into `sni`.
    by_name: BTreeMap<String, usize>,
    provider: Arc<CryptoProvider>,
}

impl DynamicCerts {
    /// Load the default certificate from `source` (a self-signed pair is named `pair_name` in its directory) and
    /// the SNI certificates.
    pub(crate) fn load(
        source: &CertSource,
        pair_name: &str,
        sni: Vec<SniCertKey>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, TlsError> {
        let default = match source {
            CertSource::Files { cert, key } => Slot::from_files(cert, key, &provider)?,
            CertSource::SelfSigned { dir, extra_names } => match dir {
                Some(dir) => {
                    let (cert, key) = crate::tls::kept_self_signed(dir, pair_name, extra_names)?;
                    Slot::from_files(&cert, &key, &provider)?
                }
                None => {
                    let (cert, key) = crate::tls::generate(extra_names)?;
                    Slot::from_pem((cert.into_bytes(), key.into_bytes()), None, &provider)?
                }
            },
        };
        let mut slots = Vec::new();
        let mut explicit: BTreeMap<String, usize> = BTreeMap::new();
        let mut extracted: BTreeMap<String, usize> = BTreeMap::new();
        for (index, entry) in sni.into_iter().enumerate() {
            let slot = Slot::from_files(&entry.cert, &entry.key, &provider)?;
            if entry.names.is_empty() {
                for name in certificate_names(&slot.get()) {
                    extracted.entry(name).or_insert(index);
                }
            } else {
                for name in entry.names {
                    explicit.entry(name).or_insert(index);
                }
            }
            slots.push(slot);
        }
        // Explicit names beat names read from a certificate.
        extracted.extend(explicit);
        Ok(DynamicCerts {
            default,
            sni: slots,
            by_name: extracted,
            provider,
        })
    }

    /// The default certificate (PEM), as loaded last.
    pub(crate) fn default_pem(&self) -> String {
        String::from_utf8_lossy(&self.default.loaded().pem.0).into_owned()
    }

    /// The certificate for a client that asks for `server_name`: an exact name, then a `*.` wildcard for its
    /// parent domain, then the default.
    fn choose(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let found = server_name.map(str::to_ascii_lowercase).and_then(|name| {
            self.by_name.get(&name).copied().or_else(|| {
                let (_, parent) = name.split_once('.')?;
                self.by_name.get(&format!("*.{parent}")).copied()
            })
        });
        match found {
            Some(index) => self.sni[index].get(),
            None => self.default.get(),
        }
    }

    /// Re-read every certificate read from files; returns how many changed. A pair that cannot be read or does
    /// not load keeps its previous certificate and is reported in the errors.
    pub(crate) fn reload(&self) -> (usize, Vec<TlsError>) {
        let mut changed = 0;
        let mut errors = Vec::new();
        for slot in std::iter::once(&self.default).chain(&self.sni) {
            match slot.reload(&self.provider) {
                Ok(true) => changed += 1,
                Ok(false) => {}
                Err(err) => errors.push(err),
            }
        }
        (changed, errors)
    }

    /// Re-read the files every `interval` until `stop`; `port` names the port in the logs.
    pub(crate) fn watch(
        self: Arc<Self>,
        interval: Duration,
        stop: CancellationToken,
        port: &'static str,
    ) {
        if self.default.files.is_none() && self.sni.is_empty() {
            return;
        }
        let checks = every(interval, 0.0, Timing::Sliding).after_first_period();
        tokio::spawn(async move {
            checks
                .run_sync(&stop, || {
                    let (changed, errors) = self.reload();
                    if changed > 0 {
                        tracing::info!(port, changed, "reloaded changed serving certificates");
                    }
                    for err in errors {
                        tracing::warn!(port, error = %err, "a changed serving certificate cannot be loaded; keeping the previous one");
                    }
                })
                .await;
        });
    }
}

impl ResolvesServerCert for DynamicCerts {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.choose(client_hello.server_name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_rustls::rustls::crypto::ring;

    fn pair(names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn write(dir: &Path, base: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let (cert, key) = pair(names);
        let (cert_path, key_path) = (
            dir.join(format!("{base}.crt")),
            dir.join(format!("{base}.key")),
        );
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        (cert_path, key_path)
    }

    fn leaf(key: &CertifiedKey) -> Vec<u8> {
        key.cert[0].as_ref().to_vec()
    }

    #[test]
    fn sni_entries_parse_as_go() {
        assert_eq!(
            SniCertKey::parse("foo.crt,foo.key:*.foo.com, Foo.com").unwrap(),
            SniCertKey {
                cert: "foo.crt".into(),
                key: "foo.key".into(),
                names: vec!["*.foo.com".into(), "foo.com".into()],
            }
        );
        assert!(SniCertKey::parse("a.crt,a.key").unwrap().names.is_empty());
        for bad in ["a.crt", "a.crt,b.key,c", ",a.key", "a.crt,a.key:foo.*.com"] {
            assert!(SniCertKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn certificates_are_chosen_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (dc, dk) = write(dir.path(), "default", &["default.example"]);
        let (ac, ak) = write(dir.path(), "a", &["a.example", "shared.example"]);
        let (bc, bk) = write(dir.path(), "b", &["ignored.example"]);
        let sni = vec![
            SniCertKey {
                cert: ac,
                key: ak,
                names: vec![],
            },
            SniCertKey {
                cert: bc,
                key: bk,
                names: vec!["*.wild.example".into(), "shared.example".into()],
            },
        ];
        let certs = DynamicCerts::load(
            &CertSource::Files { cert: dc, key: dk },
            "unused",
            sni,
            Arc::new(ring::default_provider()),
        )
        .unwrap();
        let default = leaf(&certs.choose(None));
        let a = leaf(&certs.sni[0].get());
        let b = leaf(&certs.sni[1].get());
        assert_eq!(leaf(&certs.choose(Some("other.example"))), default);
        assert_eq!(
            leaf(&certs.choose(Some("A.example"))),
            a,
            "names read from the certificate"
        );
        assert_eq!(leaf(&certs.choose(Some("x.wild.example"))), b, "a wildcard");
        assert_eq!(
            leaf(&certs.choose(Some("x.y.wild.example"))),
            default,
            "one label only"
        );
        assert_eq!(
            leaf(&certs.choose(Some("shared.example"))),
            b,
            "explicit beats extracted"
        );
        assert_eq!(
            leaf(&certs.choose(Some("ignored.example"))),
            default,
            "explicit names replace the certificate's"
        );
    }

    #[test]
    fn changed_files_are_reloaded_and_bad_ones_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write(dir.path(), "tls", &["one.example"]);
        let certs = DynamicCerts::load(
            &CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            "unused",
            vec![],
            Arc::new(ring::default_provider()),
        )
        .unwrap();
        let first = leaf(&certs.choose(None));
        assert_eq!(certs.reload().0, 0, "unchanged files are not reloaded");
        write(dir.path(), "tls", &["two.example"]);
        let (changed, errors) = certs.reload();
        assert_eq!((changed, errors.len()), (1, 0));
        let second = leaf(&certs.choose(None));
        assert_ne!(first, second);
        assert!(
            certs
                .default_pem()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        // a key that does not match: the previous certificate stays
        let (other_cert, _) = pair(&["three.example"]);
        std::fs::write(&cert, other_cert).unwrap();
        let (changed, errors) = certs.reload();
        assert_eq!(changed, 0);
        assert!(
            errors[0]
                .to_string()
                .contains("does not match the certificate"),
            "{}",
            errors[0]
        );
        assert_eq!(leaf(&certs.choose(None)), second);
    }
}
