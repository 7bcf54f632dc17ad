//! The certificates and keys a control plane's servers and clients use, written into its directory.

use crate::pki::{self, CertificateAuthority};

use super::*;

/// Key material written to `<dir>/pki`.
pub(super) struct WrittenPki {
    pub(super) ca: CertificateAuthority,
    pub(super) admin: pki::CertifiedKey,
}

pub(super) fn write_pki(layout: &Layout) -> Result<WrittenPki, ControlPlaneError> {
    let ca = CertificateAuthority::generate()?;
    let serving = ca.issue_serving(
        "kube-apiserver",
        &[
            "127.0.0.1",
            "localhost",
            "10.96.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
    )?;
    let admin = ca.issue_client(ADMIN_USER, &["system:masters"])?;
    let front_proxy = ca.issue_client(FRONT_PROXY_USER, &[])?;
    let service_account_key = pki::generate_signing_key()?;

    write_file(&layout.pki("ca.crt"), ca.cert_pem(), false)?;
    write_file(&layout.pki("ca.key"), ca.key_pem(), true)?;
    write_file(&layout.pki("apiserver.crt"), &serving.cert_pem, false)?;
    write_file(&layout.pki("apiserver.key"), &serving.key_pem, true)?;
    write_file(&layout.pki("admin.crt"), &admin.cert_pem, false)?;
    write_file(&layout.pki("admin.key"), &admin.key_pem, true)?;
    write_file(
        &layout.pki("front-proxy-client.crt"),
        &front_proxy.cert_pem,
        false,
    )?;
    write_file(
        &layout.pki("front-proxy-client.key"),
        &front_proxy.key_pem,
        true,
    )?;
    write_file(
        &layout.pki("sa.key"),
        &service_account_key.private_key_pem,
        true,
    )?;
    write_file(
        &layout.pki("sa.pub"),
        &service_account_key.public_key_pem,
        false,
    )?;
    Ok(WrittenPki { ca, admin })
}
