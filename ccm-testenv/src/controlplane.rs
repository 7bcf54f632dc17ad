//! Launching and stopping a local control plane: one etcd member and one kube-apiserver on free
//! loopback ports, with TLS, RBAC and client certificates made by [`crate::pki`].
//!
//! The binaries are the ones `cargo xtask controlplane build` puts in
//! `<target dir>/controlplane/bin`. `cargo xtask controlplane start` and `cargo xtask test` use
//! this module, and [`TestEnv::shared`](crate::TestEnv::shared) uses it to start a private
//! control plane when no `CCM_TESTENV` is set.
//!
//! One concern per file: `binaries` (where the servers are), `args` (their command lines and files),
//! `certs` (the PKI written for them), `lifecycle` (launch, restart, stop), `watchdog` (cleanup when the owner
//! dies) and `probes` (readiness, logs).

use std::path::PathBuf;
use std::time::Duration;

use crate::envfile::EnvFileError;
use crate::pki::PkiError;

mod args;
mod binaries;
mod certs;
mod lifecycle;
mod probes;
mod watchdog;

use args::Layout;
pub use args::{apiserver_args, etcd_args};
pub use binaries::Binaries;
use certs::{WrittenPki, write_pki};
pub use lifecycle::{ControlPlane, LaunchOptions, Supervision, stop_detached};
pub(crate) use lifecycle::{
    client_config, kill_and_reap, process_belongs_to, spawn_server, wait_gone, write_file,
};
pub(crate) use probes::log_tail;
use probes::{apiserver_ready, etcd_healthy, is_port_conflict};
pub(crate) use watchdog::spawn_watchdog;

/// Environment variable naming the directory holding the `etcd` and `kube-apiserver` binaries;
/// overrides the search in [`Binaries::find`].
pub const BIN_DIR_ENV_VAR: &str = "CCM_CONTROLPLANE_BIN";

/// Command that builds the binaries, quoted in error messages.
pub const BUILD_COMMAND: &str = "cargo xtask controlplane build";

/// User name of the admin client certificate (group `system:masters`).
pub const ADMIN_USER: &str = "ccm-testenv-admin";

/// Common name of the client certificate allowed to assert identities through request headers.
pub const FRONT_PROXY_USER: &str = "front-proxy-client";

/// Header carrying the user name in request-header authentication.
pub const REMOTE_USER_HEADER: &str = "X-Remote-User";

/// Header carrying one group in request-header authentication (repeated per group).
pub const REMOTE_GROUP_HEADER: &str = "X-Remote-Group";

/// Service-account token issuer configured on the API server.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Service cluster IP range configured on the API server.
pub const SERVICE_CLUSTER_IP_RANGE: &str = "10.96.0.0/12";

const LAUNCH_ATTEMPTS: usize = 3;
const POLL_INTERVAL: Duration = Duration::from_millis(100);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Failures launching, locating or stopping a control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// The binaries are not where they were looked for.
    #[error(
        "control-plane binaries not found (looked for {missing}): run `{BUILD_COMMAND}` first, or \
         set {BIN_DIR_ENV_VAR} to a directory holding etcd and kube-apiserver"
    )]
    BinariesMissing {
        /// The paths that do not exist.
        missing: String,
    },
    /// The directory for a new control plane is not empty.
    #[error(
        "directory {0} is not empty: stop the control plane using it (`cargo xtask controlplane \
         stop --dir {0}`) or choose another directory"
    )]
    DirectoryNotEmpty(PathBuf),
    /// A file-system or process operation failed.
    #[error("failed to {action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Key material could not be generated.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// The env file could not be read or written.
    #[error(transparent)]
    EnvFile(#[from] EnvFileError),
    /// A server process exited while starting.
    #[error("{server} exited during start-up with {status}; last lines of {log}:\n{tail}")]
    ServerExited {
        /// `etcd` or `kube-apiserver`.
        server: &'static str,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its log file.
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },
    /// A server did not become ready in time.
    #[error("{server} was not ready after {timeout:?}; last lines of {log}:\n{tail}")]
    NotReady {
        /// `etcd` or `kube-apiserver`.
        server: &'static str,
        /// How long it was given.
        timeout: Duration,
        /// Its log file.
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },
    /// A client for the API server could not be built.
    #[error("failed to build a client for the API server: {0}")]
    Client(#[source] kube::Error),
    /// No env file exists in the directory given to stop.
    #[error("no control plane found in {0} (it has no env.json)")]
    NotRunning(PathBuf),
}

pub(crate) fn io_err(
    action: impl Into<String>,
) -> impl FnOnce(std::io::Error) -> ControlPlaneError {
    let action = action.into();
    move |source| ControlPlaneError::Io { action, source }
}

#[cfg(test)]
mod tests;
