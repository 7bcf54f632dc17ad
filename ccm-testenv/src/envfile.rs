//! The "env file": a JSON document describing a running local control plane, written by the
//! launcher and read by test binaries (through the `CCM_TESTENV` environment variable) and by
//! `cargo xtask controlplane stop`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Name of the environment variable that points test binaries at an env file.
pub const ENV_VAR: &str = "CCM_TESTENV";

/// File name of the env file inside a control plane's directory.
pub const FILE_NAME: &str = "env.json";

/// Format version written to [`EnvFile::format`]; readers reject other versions.
pub const FORMAT_VERSION: u32 = 1;

/// Process ids of the servers of a control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pids {
    /// The etcd process.
    pub etcd: u32,
    /// The kube-apiserver process.
    pub kube_apiserver: u32,
}

/// Everything a client needs to use, and a tool needs to stop, a local control plane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvFile {
    /// Format version, [`FORMAT_VERSION`].
    pub format: u32,
    /// The control plane's directory; everything below belongs to it.
    pub dir: PathBuf,
    /// API server URL, `https://127.0.0.1:<port>`.
    pub server: String,
    /// etcd client URL, `http://127.0.0.1:<port>`.
    pub etcd_url: String,
    /// Admin kubeconfig (user `admin`, group `system:masters`).
    pub kubeconfig: PathBuf,
    /// CA certificate (PEM) that signed the serving and client certificates.
    pub ca_cert: PathBuf,
    /// CA private key (PEM), for issuing more client certificates.
    pub ca_key: PathBuf,
    /// Admin client certificate (PEM).
    pub admin_cert: PathBuf,
    /// Admin client key (PEM).
    pub admin_key: PathBuf,
    /// Client certificate (PEM) accepted for request-header authentication: requests made with
    /// it name their user in `X-Remote-User` and groups in `X-Remote-Group`.
    pub front_proxy_cert: PathBuf,
    /// Key (PEM) of [`EnvFile::front_proxy_cert`].
    pub front_proxy_key: PathBuf,
    /// Server process ids.
    pub pids: Pids,
}

/// Failures reading or writing an env file.
#[derive(Debug, thiserror::Error)]
pub enum EnvFileError {
    /// The file could not be read or written.
    #[error("cannot {action} control-plane env file {path}: {source}")]
    Io {
        /// "read" or "write".
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid env file.
    #[error("control-plane env file {path} is not valid: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The file was written by an incompatible version of this crate.
    #[error(
        "control-plane env file {path} has format {found}, expected {FORMAT_VERSION}: restart the \
         control plane with this version of the tools"
    )]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
}

impl EnvFile {
    /// Reads and validates an env file.
    ///
    /// # Errors
    /// [`EnvFileError`] if the file cannot be read, parsed, or has another format version.
    pub fn read(path: &Path) -> Result<Self, EnvFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| EnvFileError::Io {
            action: "read",
            path: path.to_owned(),
            source,
        })?;
        let env: EnvFile = serde_json::from_str(&text).map_err(|source| EnvFileError::Parse {
            path: path.to_owned(),
            source,
        })?;
        if env.format != FORMAT_VERSION {
            return Err(EnvFileError::Version {
                path: path.to_owned(),
                found: env.format,
            });
        }
        Ok(env)
    }

    /// Writes the env file (pretty JSON), replacing any previous one atomically.
    ///
    /// # Errors
    /// [`EnvFileError::Io`] if writing fails.
    pub fn write(&self, path: &Path) -> Result<(), EnvFileError> {
        let io = |source| EnvFileError::Io {
            action: "write",
            path: path.to_owned(),
            source,
        };
        let mut text = serde_json::to_string_pretty(self).map_err(|e| io(e.into()))?;
        text.push('\n');
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dir: &Path) -> EnvFile {
        EnvFile {
            format: FORMAT_VERSION,
            dir: dir.to_owned(),
            server: "https://127.0.0.1:1234".into(),
            etcd_url: "http://127.0.0.1:2345".into(),
            kubeconfig: dir.join("admin.kubeconfig"),
            ca_cert: dir.join("pki/ca.crt"),
            ca_key: dir.join("pki/ca.key"),
            admin_cert: dir.join("pki/admin.crt"),
            admin_key: dir.join("pki/admin.key"),
            front_proxy_cert: dir.join("pki/front-proxy-client.crt"),
            front_proxy_key: dir.join("pki/front-proxy-client.key"),
            pids: Pids {
                etcd: 10,
                kube_apiserver: 11,
            },
        }
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        let env = sample(dir.path());
        env.write(&path).expect("write");
        assert_eq!(EnvFile::read(&path).expect("read"), env);
        assert!(!path.with_extension("json.tmp").exists());
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing.json");
        let err = EnvFile::read(&missing).expect_err("missing");
        assert!(matches!(err, EnvFileError::Io { .. }));
        assert!(err.to_string().contains("missing.json"));

        let garbage = dir.path().join("garbage.json");
        std::fs::write(&garbage, "{").expect("write");
        assert!(matches!(
            EnvFile::read(&garbage),
            Err(EnvFileError::Parse { .. })
        ));

        let future = dir.path().join("future.json");
        let mut env = sample(dir.path());
        env.format = FORMAT_VERSION + 1;
        std::fs::write(&future, serde_json::to_string(&env).expect("json")).expect("write");
        assert!(matches!(
            EnvFile::read(&future),
            Err(EnvFileError::Version { found, .. }) if found == FORMAT_VERSION + 1
        ));
    }
}
