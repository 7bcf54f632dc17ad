//! The servers' command lines and the files they use (the layout of a control plane's directory).

use std::path::{Path, PathBuf};

use crate::audit;
use crate::envfile::{self};

use super::*;

/// Files of a control plane's directory.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub(super) dir: PathBuf,
}

impl Layout {
    pub(super) fn pki(&self, name: &str) -> PathBuf {
        self.dir.join("pki").join(name)
    }
    pub(super) fn etcd_data(&self) -> PathBuf {
        self.dir.join("etcd-data")
    }
    pub(super) fn log(&self, server: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{server}.log"))
    }
    pub(super) fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }
    pub(super) fn env_file(&self) -> PathBuf {
        self.dir.join(envfile::FILE_NAME)
    }
    pub(super) fn audit_policy(&self) -> PathBuf {
        self.dir.join(audit::POLICY_FILE)
    }
    pub(super) fn audit_log(&self) -> PathBuf {
        self.dir.join("logs").join(audit::LOG_FILE)
    }
}

/// The kube-apiserver arguments for the given ports and files (without extra arguments).
pub fn apiserver_args(dir: &Path, etcd_url: &str, secure_port: u16) -> Vec<String> {
    let layout = Layout {
        dir: dir.to_owned(),
    };
    let path = |name: &str| layout.pki(name).display().to_string();
    vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={secure_port}"),
        format!("--cert-dir={}", layout.dir.join("pki").display()),
        format!("--tls-cert-file={}", path("apiserver.crt")),
        format!("--tls-private-key-file={}", path("apiserver.key")),
        format!("--client-ca-file={}", path("ca.crt")),
        format!("--requestheader-client-ca-file={}", path("ca.crt")),
        format!("--requestheader-allowed-names={FRONT_PROXY_USER}"),
        format!("--requestheader-username-headers={REMOTE_USER_HEADER}"),
        format!("--requestheader-group-headers={REMOTE_GROUP_HEADER}"),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
        format!("--service-account-key-file={}", path("sa.pub")),
        format!("--service-account-signing-key-file={}", path("sa.key")),
        format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
        "--authorization-mode=RBAC".into(),
        "--endpoint-reconciler-type=none".into(),
    ]
}

/// The etcd arguments for the given ports and data directory.
pub fn etcd_args(data_dir: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    vec![
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-url=http://127.0.0.1:{client_port}"),
        format!("--listen-peer-url=http://127.0.0.1:{peer_port}"),
        "--name=ccm-testenv".into(),
        "--log-level=warn".into(),
        "--unsafe-no-fsync".into(),
    ]
}
