//! Kubeconfig files with a client certificate of their own, so that several processes (the
//! replicas of a CCM under test) talk to the control plane as distinct users, and the API
//! server's audit log ([`crate::audit`]) tells their requests apart.

use std::path::Path;

use crate::controlplane::ControlPlaneError;
use crate::kubeconfig::{self, KubeconfigSpec};
use crate::pki::CertificateAuthority;
use crate::{TestEnv, TestEnvError};

impl TestEnv {
    /// Issues a client certificate for user `user` (with at most one group, e.g.
    /// `system:masters` for a cluster admin), signed by the control plane's CA, and writes a
    /// kubeconfig using it to `path` (readable by the owner only).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), ccm_testenv::TestEnvError> {
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let path = std::env::temp_dir().join("replica-1.kubeconfig");
    /// env.write_user_kubeconfig("replica-1", &["system:masters"], &path)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`TestEnvError::ReadFile`] if the CA files cannot be read, [`TestEnvError::Pki`] for an
    /// invalid user or group (or more than one group), [`TestEnvError::ControlPlane`] if the file
    /// cannot be written.
    pub fn write_user_kubeconfig(
        &self,
        user: &str,
        groups: &[&str],
        path: &Path,
    ) -> Result<(), TestEnvError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| TestEnvError::ReadFile {
                path: path.to_owned(),
                source,
            })
        };
        let ca = CertificateAuthority::from_pem(
            &read(&self.env().ca_cert)?,
            &read(&self.env().ca_key)?,
        )?;
        let client = ca.issue_client(user, groups)?;
        let text = kubeconfig::render(&KubeconfigSpec {
            name: user,
            server: &self.env().server,
            ca_pem: ca.cert_pem(),
            client_cert_pem: &client.cert_pem,
            client_key_pem: &client.key_pem,
        });
        write_private(path, &text).map_err(|source| {
            TestEnvError::ControlPlane(ControlPlaneError::Io {
                action: format!("write {}", path.display()),
                source,
            })
        })
    }
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}
