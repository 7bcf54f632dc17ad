//! Key material for a local control plane: a self-made certificate authority, the API server's
//! serving certificate, client certificates and the service-account signing key.
//!
//! Every key is ECDSA P-256 (the only key type the `ring` backend of `rcgen` can generate), which
//! kube-apiserver accepts for serving, client authentication and service-account token signing.

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};

/// Common name of the certificate authority every control plane of this crate creates.
///
/// Certificates are issued under this name; [`CertificateAuthority::from_pem`] relies on it to
/// rebuild the issuer of a CA loaded from disk.
pub const CA_COMMON_NAME: &str = "ccm-testenv-ca";

/// Failures while generating or loading key material.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Key generation, certificate signing or key parsing failed inside `rcgen`.
    #[error("failed to {action}: {source}")]
    Rcgen {
        /// What was being done, e.g. "generate the CA key".
        action: &'static str,
        /// The underlying error.
        #[source]
        source: rcgen::Error,
    },
    /// A PEM document had no `CERTIFICATE` block or a block that is not valid base64.
    #[error("invalid PEM certificate data: {reason}")]
    InvalidPem {
        /// Why the data was rejected.
        reason: String,
    },
    /// A user name or group is empty or contains characters that cannot go into a certificate.
    #[error("invalid certificate subject {value:?}: {reason}")]
    InvalidSubject {
        /// The rejected value.
        value: String,
        /// Why it was rejected.
        reason: &'static str,
    },
}

fn rcgen_err(action: &'static str) -> impl FnOnce(rcgen::Error) -> PkiError {
    move |source| PkiError::Rcgen { action, source }
}

/// A PEM-encoded certificate together with its PEM-encoded (PKCS#8) private key.
#[derive(Clone)]
pub struct CertifiedKey {
    /// The certificate, PEM `CERTIFICATE` block.
    pub cert_pem: String,
    /// The private key, PEM `PRIVATE KEY` block (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for CertifiedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertifiedKey")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"[elided]")
            .finish()
    }
}

/// A certificate authority able to issue serving and client certificates.
///
/// ```
/// use ccm_testenv::pki::CertificateAuthority;
///
/// let ca = CertificateAuthority::generate()?;
/// let serving = ca.issue_serving("kube-apiserver", &["127.0.0.1", "localhost"])?;
/// let admin = ca.issue_client("admin", &["system:masters"])?;
/// assert!(serving.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// assert!(admin.key_pem.contains("PRIVATE KEY"));
/// # Ok::<(), ccm_testenv::pki::PkiError>(())
/// ```
pub struct CertificateAuthority {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"[elided]")
            .finish()
    }
}

/// The parameters of the CA certificate. The issuer of every issued certificate is rebuilt from
/// these (distinguished name, key usages, key identifier method), so they must stay stable.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, CA_COMMON_NAME);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn random_serial() -> SerialNumber {
    let mut bytes = *uuid::Uuid::new_v4().as_bytes();
    // A positive DER integer: clear the sign bit.
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

fn check_subject(value: &str) -> Result<(), PkiError> {
    if value.is_empty() {
        return Err(PkiError::InvalidSubject {
            value: value.to_owned(),
            reason: "must not be empty",
        });
    }
    if value.chars().any(char::is_control) {
        return Err(PkiError::InvalidSubject {
            value: value.to_owned(),
            reason: "must not contain control characters",
        });
    }
    Ok(())
}

impl CertificateAuthority {
    /// Generates a new self-signed CA with a fresh key.
    ///
    /// # Errors
    /// [`PkiError::Rcgen`] if key generation or signing fails.
    pub fn generate() -> Result<Self, PkiError> {
        let key = KeyPair::generate().map_err(rcgen_err("generate the CA key"))?;
        let mut params = ca_params();
        params.serial_number = Some(random_serial());
        let cert = params
            .self_signed(&key)
            .map_err(rcgen_err("self-sign the CA certificate"))?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(ca_params(), key),
        })
    }

    /// Loads a CA previously created by [`CertificateAuthority::generate`] from its PEM files.
    ///
    /// # Errors
    /// [`PkiError::Rcgen`] if the key cannot be parsed, [`PkiError::InvalidPem`] if the
    /// certificate holds no `CERTIFICATE` block.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, PkiError> {
        // Validates that the certificate part is well-formed PEM.
        pem_certificates_to_der(cert_pem)?;
        let key = KeyPair::from_pem(key_pem).map_err(rcgen_err("parse the CA private key"))?;
        Ok(Self {
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
            issuer: Issuer::new(ca_params(), key),
        })
    }

    /// The CA certificate (PEM).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key (PEM, PKCS#8).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Issues a TLS server certificate for `common_name` valid for `subject_alt_names` (IP
    /// addresses or DNS names).
    ///
    /// # Errors
    /// [`PkiError::Rcgen`] if a name is not a valid DNS name or signing fails.
    pub fn issue_serving(
        &self,
        common_name: &str,
        subject_alt_names: &[&str],
    ) -> Result<CertifiedKey, PkiError> {
        check_subject(common_name)?;
        let sans: Vec<String> = subject_alt_names.iter().map(|s| (*s).to_owned()).collect();
        let mut params =
            CertificateParams::new(sans).map_err(rcgen_err("parse subject alternative names"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params, "sign a serving certificate")
    }

    /// Issues a TLS client certificate for Kubernetes user `user`.
    ///
    /// kube-apiserver maps the common name to the user name and each organization to a group.
    /// The certificate format allows one organization attribute per certificate here, so at most
    /// one group can be given; use request-header authentication (see
    /// [`TestEnv::client_for_user`](crate::TestEnv::client_for_user)) for more.
    ///
    /// # Errors
    /// [`PkiError::InvalidSubject`] for an empty user or group, or more than one group;
    /// [`PkiError::Rcgen`] if signing fails.
    pub fn issue_client(&self, user: &str, groups: &[&str]) -> Result<CertifiedKey, PkiError> {
        check_subject(user)?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, user);
        match groups {
            [] => {}
            [group] => {
                check_subject(group)?;
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, *group);
            }
            [_, _, ..] => {
                return Err(PkiError::InvalidSubject {
                    value: groups.join(","),
                    reason: "a client certificate issued here carries at most one group",
                });
            }
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params, "sign a client certificate")
    }

    fn sign(
        &self,
        mut params: CertificateParams,
        action: &'static str,
    ) -> Result<CertifiedKey, PkiError> {
        params.serial_number = Some(random_serial());
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(rcgen_err("generate a certificate key"))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(rcgen_err(action))?;
        Ok(CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The key pair kube-apiserver signs service-account tokens with.
#[derive(Clone)]
pub struct SigningKey {
    /// Private key, PEM `PRIVATE KEY` (PKCS#8), for `--service-account-signing-key-file`.
    pub private_key_pem: String,
    /// Public key, PEM `PUBLIC KEY`, for `--service-account-key-file` (the API server does not
    /// derive it from a PKCS#8 private key).
    pub public_key_pem: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("private_key_pem", &"[elided]")
            .field("public_key_pem", &self.public_key_pem)
            .finish()
    }
}

/// Generates a service-account signing key pair.
///
/// # Errors
/// [`PkiError::Rcgen`] if key generation fails.
pub fn generate_signing_key() -> Result<SigningKey, PkiError> {
    let key = KeyPair::generate().map_err(rcgen_err("generate the service-account signing key"))?;
    Ok(SigningKey {
        private_key_pem: key.serialize_pem(),
        public_key_pem: key.public_key_pem(),
    })
}

/// Decodes every `CERTIFICATE` block of a PEM document into DER bytes.
///
/// ```
/// let ca = ccm_testenv::pki::CertificateAuthority::generate()?;
/// let der = ccm_testenv::pki::pem_certificates_to_der(ca.cert_pem())?;
/// assert_eq!(der.len(), 1);
/// # Ok::<(), ccm_testenv::pki::PkiError>(())
/// ```
///
/// # Errors
/// [`PkiError::InvalidPem`] if there is no certificate block, a block is unterminated or its
/// body is not base64.
pub fn pem_certificates_to_der(pem: &str) -> Result<Vec<Vec<u8>>, PkiError> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut certificates = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find(BEGIN) {
        let after_begin = &rest[start + BEGIN.len()..];
        let end = after_begin.find(END).ok_or_else(|| PkiError::InvalidPem {
            reason: "a CERTIFICATE block has no END line".to_owned(),
        })?;
        let body: String = after_begin[..end]
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body.as_bytes())
            .map_err(|e| PkiError::InvalidPem {
                reason: format!("a CERTIFICATE block is not valid base64: {e}"),
            })?;
        certificates.push(der);
        rest = &after_begin[end + END.len()..];
    }
    if certificates.is_empty() {
        return Err(PkiError::InvalidPem {
            reason: "no CERTIFICATE block found".to_owned(),
        });
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_certificate_is_pem_and_decodes() {
        let ca = CertificateAuthority::generate().expect("ca");
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(ca.key_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
        let der = pem_certificates_to_der(ca.cert_pem()).expect("der");
        assert_eq!(der.len(), 1);
        // A DER certificate is a SEQUENCE.
        assert_eq!(der[0][0], 0x30);
    }

    #[test]
    fn issued_certificates_differ_and_have_fresh_keys() {
        let ca = CertificateAuthority::generate().expect("ca");
        let a = ca.issue_client("alice", &[]).expect("alice");
        let b = ca.issue_client("alice", &[]).expect("alice again");
        assert_ne!(a.cert_pem, b.cert_pem);
        assert_ne!(a.key_pem, b.key_pem);
        assert_ne!(a.key_pem, ca.key_pem());
    }

    #[test]
    fn reloaded_ca_keeps_its_key() {
        let ca = CertificateAuthority::generate().expect("ca");
        let loaded = CertificateAuthority::from_pem(ca.cert_pem(), ca.key_pem()).expect("load");
        assert_eq!(loaded.key_pem(), ca.key_pem());
        assert!(loaded.issue_client("bob", &["devs"]).is_ok());
    }

    #[test]
    fn loading_rejects_garbage() {
        let ca = CertificateAuthority::generate().expect("ca");
        assert!(matches!(
            CertificateAuthority::from_pem("not pem", ca.key_pem()),
            Err(PkiError::InvalidPem { .. })
        ));
        assert!(matches!(
            CertificateAuthority::from_pem(ca.cert_pem(), "not a key"),
            Err(PkiError::Rcgen { .. })
        ));
    }

    #[test]
    fn client_certificate_subject_is_validated() {
        let ca = CertificateAuthority::generate().expect("ca");
        assert!(matches!(
            ca.issue_client("", &[]),
            Err(PkiError::InvalidSubject { .. })
        ));
        assert!(matches!(
            ca.issue_client("x", &["a", "b"]),
            Err(PkiError::InvalidSubject { .. })
        ));
        assert!(matches!(
            ca.issue_client("x", &["bad\ngroup"]),
            Err(PkiError::InvalidSubject { .. })
        ));
    }

    #[test]
    fn serving_certificate_accepts_ip_and_dns_names() {
        let ca = CertificateAuthority::generate().expect("ca");
        let cert = ca
            .issue_serving("kube-apiserver", &["127.0.0.1", "localhost", "::1"])
            .expect("serving");
        assert_eq!(
            pem_certificates_to_der(&cert.cert_pem).expect("der").len(),
            1
        );
    }

    #[test]
    fn pem_decoding_handles_bundles_and_errors() {
        let ca = CertificateAuthority::generate().expect("ca");
        let other = CertificateAuthority::generate().expect("ca");
        let bundle = format!("{}\n{}", ca.cert_pem(), other.cert_pem());
        assert_eq!(pem_certificates_to_der(&bundle).expect("bundle").len(), 2);
        assert!(pem_certificates_to_der("").is_err());
        assert!(pem_certificates_to_der("-----BEGIN CERTIFICATE-----\nAAAA").is_err());
        assert!(
            pem_certificates_to_der(
                "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"
            )
            .is_err()
        );
    }

    #[test]
    fn signing_key_pair_is_pem() {
        let key = generate_signing_key().expect("key");
        assert!(
            key.private_key_pem
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
        assert!(key.public_key_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        let parsed = KeyPair::from_pem(&key.private_key_pem).expect("parse");
        assert_eq!(parsed.public_key_pem(), key.public_key_pem);
        assert!(!format!("{key:?}").contains("PRIVATE"));
    }
}
