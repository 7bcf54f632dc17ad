//! Client certificates on the secure port: the CA bundles of `--client-ca-file` and
//! `--requestheader-client-ca-file`, the check of a presented chain against one of them, the identity a
//! certificate carries (common name and organizations), and the TLS verifier that asks for a certificate without
//! requiring one (Go's `tls.RequestClientCert`: the chain is checked per request, so an untrusted certificate gets
//! a 401, not a failed handshake).

use std::sync::Arc;

use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{
    CryptoProvider, WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, UnixTime};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::{
    DigitallySignedStruct, DistinguishedName, Error as RustlsError, RootCertStore, SignatureScheme,
};

/// A bundle of trusted CAs and the verifier of client chains built on them.
#[derive(Clone, Debug)]
pub struct CaBundle {
    verifier: Arc<dyn ClientCertVerifier>,
    subjects: Vec<DistinguishedName>,
}

impl CaBundle {
    /// The CAs of a PEM bundle.
    ///
    /// # Errors
    ///
    /// A message saying why the bundle has no usable CA.
    pub fn from_pem(pem: &str, provider: &Arc<CryptoProvider>) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("cannot read a PEM certificate: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("cannot use a certificate as a CA: {e}"))?;
        }
        if roots.is_empty() {
            return Err("no PEM certificate found".to_owned());
        }
        let subjects = roots.subjects();
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| format!("cannot build a certificate verifier: {e}"))?;
        Ok(CaBundle { verifier, subjects })
    }

    /// Whether `chain` (leaf first) is a valid client chain to one of the CAs, now.
    ///
    /// # Errors
    ///
    /// Why it is not (expired, unknown issuer, not for client authentication, ...).
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain
            .split_first()
            .ok_or_else(|| "no client certificate".to_owned())?;
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| format!("x509: {e}"))
    }
}

/// The identity in a certificate's subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The common name (empty when there is none).
    pub common_name: String,
    /// The organizations, which Kubernetes reads as groups.
    pub organizations: Vec<String>,
}

/// The subject of a DER certificate.
///
/// # Errors
///
/// A message when the certificate cannot be parsed.
pub fn subject(cert: &CertificateDer<'_>) -> Result<Subject, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("cannot parse the client certificate: {e}"))?;
    let subject = parsed.subject();
    let common_name = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    let organizations = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_owned)
        .collect();
    Ok(Subject {
        common_name,
        organizations,
    })
}

/// The TLS side of client certificates: ask for one, naming the trusted CAs, but accept any (or none) once the
/// client proves it holds the key; the authenticators check the chain per request.
#[derive(Debug)]
pub(crate) struct RequestClientCert {
    subjects: Vec<DistinguishedName>,
    offer: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl RequestClientCert {
    /// A verifier hinting the CAs of `bundles`; with none, client certificates are asked for only if CAs may be
    /// trusted later (`later`: they come from the cluster's ConfigMap).
    pub(crate) fn new(bundles: &[&CaBundle], later: bool, provider: &CryptoProvider) -> Self {
        let subjects: Vec<DistinguishedName> = bundles
            .iter()
            .flat_map(|b| b.subjects.iter().cloned())
            .collect();
        RequestClientCert {
            offer: later || !subjects.is_empty(),
            subjects,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        self.offer
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.subjects
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, RustlsError> {
        // Checked per request against the CA of each authenticator (see the module documentation).
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, RustlsError> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, RustlsError> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_rustls::rustls::crypto::ring;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(ring::default_provider())
    }

    struct Ca {
        pem: String,
        issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    }

    fn ca(name: &str) -> Ca {
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    fn client(ca: &Ca, cn: &str, orgs: &[&str]) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *org);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().unwrap();
        params.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    #[test]
    fn chains_are_checked_against_their_own_bundle() {
        let (one, two) = (ca("one"), ca("two"));
        let bundle = CaBundle::from_pem(&one.pem, &provider()).unwrap();
        let good = client(&one, "alice", &["devs"]);
        assert_eq!(bundle.verify(std::slice::from_ref(&good)), Ok(()));
        let other = client(&two, "mallory", &[]);
        let err = bundle.verify(&[other]).unwrap_err();
        assert!(err.starts_with("x509: "), "{err}");
        assert_eq!(bundle.verify(&[]).unwrap_err(), "no client certificate");
        // a bundle of both trusts both
        let both = CaBundle::from_pem(&format!("{}{}", one.pem, two.pem), &provider()).unwrap();
        assert_eq!(both.verify(&[client(&two, "bob", &[])]), Ok(()));
        assert_eq!(
            subject(&good).unwrap(),
            Subject {
                common_name: "alice".into(),
                organizations: vec!["devs".into()]
            }
        );
    }

    #[test]
    fn bad_bundles_are_explained() {
        assert_eq!(
            CaBundle::from_pem("", &provider()).unwrap_err(),
            "no PEM certificate found"
        );
        let err = CaBundle::from_pem(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            &provider(),
        )
        .unwrap_err();
        assert!(err.starts_with("cannot use a certificate as a CA"), "{err}");
    }

    #[test]
    fn the_tls_verifier_asks_only_when_there_are_or_may_be_cas() {
        let one = ca("one");
        let bundle = CaBundle::from_pem(&one.pem, &provider()).unwrap();
        let asks = RequestClientCert::new(&[&bundle], false, &provider());
        assert!(asks.offer_client_auth());
        assert!(!asks.client_auth_mandatory());
        assert_eq!(asks.root_hint_subjects().len(), 1);
        let silent = RequestClientCert::new(&[], false, &provider());
        assert!(!silent.offer_client_auth());
        let later = RequestClientCert::new(&[], true, &provider());
        assert!(
            later.offer_client_auth(),
            "CAs may come from the ConfigMap later"
        );
        assert!(later.root_hint_subjects().is_empty());
    }
}
