//! Test support: a real local kube-apiserver and etcd for integration tests.
//!
//! Every integration test in the workspace that talks to Kubernetes uses [`TestEnv::shared`]:
//!
//! - Under `cargo xtask test` (and `cargo xtask ci`), one control plane is started for the whole
//!   run and its env file is passed in the `CCM_TESTENV` environment variable; every test binary
//!   attaches to it.
//! - Otherwise (plain `cargo test -p <crate>`), each test binary starts a private control plane
//!   from the binaries built by `cargo xtask controlplane build`, on free loopback ports in a
//!   temporary directory. A watchdog process removes it when the test binary exits, even if the
//!   binary is killed.
//!
//! Tests share one API server, so each test isolates itself: objects in a namespace from
//! [`TestEnv::namespace`], cluster-scoped objects named with [`TestEnv::unique_name`].
//!
//! ```no_run
//! use ccm_testenv::TestEnv;
//! use k8s_openapi::api::core::v1::Node;
//! use kube::api::{Api, PostParams};
//!
//! #[tokio::test]
//! async fn creates_a_node() {
//!     let env = TestEnv::shared().await;
//!     let nodes: Api<Node> = Api::all(env.client());
//!     let mut node = Node::default();
//!     node.metadata.name = Some(env.unique_name("node"));
//!     nodes.create(&PostParams::default(), &node).await.unwrap();
//! }
//! ```
//!
//! The control plane runs with RBAC authorization; [`TestEnv::client`] is a cluster admin
//! (group `system:masters`), [`TestEnv::client_for_user`] and
//! [`TestEnv::client_for_service_account`] give clients with no permissions beyond what RBAC
//! objects grant them.
//!
//! [`cluster`] adds kube-scheduler, kube-controller-manager and kwok-simulated kubelets to a control plane of
//! its own: the cluster in a box of the end-to-end tests and `cargo xtask cluster up`.
//!
//! ## Cargo features
//!
//! None: this crate has no optional features. Like every library crate of the SDK it enables no `k8s-openapi`
//! version feature; the binary or test that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

pub mod audit;
pub mod ccm;
pub mod cluster;
pub mod controlplane;
pub mod emulator;
pub mod envfile;
mod identity;
pub mod kubeconfig;
pub mod nodes;
pub mod pki;
pub mod ports;
#[cfg(feature = "proptest")]
pub mod properties;
pub mod services;
mod wait;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http::{HeaderName, HeaderValue};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};

use crate::controlplane::{
    Binaries, ControlPlane, ControlPlaneError, LaunchOptions, REMOTE_GROUP_HEADER,
    REMOTE_USER_HEADER, Supervision,
};
use crate::envfile::{EnvFile, EnvFileError};
use crate::pki::PkiError;

pub use crate::wait::{POLL_INTERVAL, WaitError, wait_for};

/// Label put on every namespace created by [`TestEnv::namespace`].
pub const NAMESPACE_LABEL: &str = "ccm-testenv/test-namespace";

/// Lifetime of service-account tokens issued by [`TestEnv::client_for_service_account`].
pub const SERVICE_ACCOUNT_TOKEN_SECONDS: i64 = 3600;

/// Failures of the test environment.
#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    /// `CCM_TESTENV` names an env file that cannot be used.
    #[error(
        "the control plane named by {var} cannot be used: {0} (unset {var} to start a private \
         control plane, or restart it with `cargo xtask controlplane start`)",
        var = envfile::ENV_VAR
    )]
    EnvFile(#[from] EnvFileError),
    /// A private control plane could not be started.
    #[error("failed to start a private control plane: {0}")]
    ControlPlane(#[from] ControlPlaneError),
    /// A file of the control plane could not be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    WriteFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Certificate data of the control plane is not valid.
    #[error("invalid certificate data of the control plane: {0}")]
    Pki(#[from] PkiError),
    /// A temporary directory could not be created.
    #[error("cannot create a temporary directory for a private control plane: {0}")]
    TempDir(#[source] std::io::Error),
    /// A `kube::Client` could not be built (must be called inside a tokio runtime).
    #[error("failed to build a kube client (is this called inside a tokio runtime?): {0}")]
    Client(#[source] kube::Error),
    /// A user name or group cannot be sent as an HTTP header.
    #[error("invalid user or group name {0:?}: must be non-empty visible ASCII")]
    InvalidIdentity(String),
    /// A request to the API server failed.
    #[error("failed to {action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The API server answered without the expected data.
    #[error("unexpected answer from the API server: {0}")]
    Unexpected(String),
    /// Waiting for a condition timed out.
    #[error(transparent)]
    Wait(#[from] WaitError),
}

fn api_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> TestEnvError {
    let action = action.into();
    move |source| TestEnvError::Api { action, source }
}

/// A control plane shared by all tests of a test binary, and factories for clients of it.
///
/// Holds configuration only (URLs, certificates, paths); every client is created fresh for the
/// calling test's tokio runtime.
pub struct TestEnv {
    env: EnvFile,
    env_path: PathBuf,
    server: http::Uri,
    ca_der: Vec<Vec<u8>>,
    admin_cert_b64: String,
    admin_key_b64: String,
    front_proxy_cert_b64: String,
    front_proxy_key_b64: String,
    /// Keeps a private control plane (and its watchdog pipe) alive for the process lifetime.
    _private: Option<ControlPlane>,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("server", &self.server)
            .field("env_file", &self.env_path)
            .field("private", &self._private.is_some())
            .finish_non_exhaustive()
    }
}

static SHARED: tokio::sync::OnceCell<Result<TestEnv, TestEnvError>> =
    tokio::sync::OnceCell::const_new();

impl TestEnv {
    /// The test environment of this test binary: attaches to the control plane named by the
    /// `CCM_TESTENV` environment variable (set by `cargo xtask test`) or, if it is unset, starts
    /// a private one from the binaries in `target/controlplane/bin`. Started once per process;
    /// later calls (from any test and runtime) return the same value.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let client = env.client();
    /// # }
    /// ```
    ///
    /// # Panics
    /// If the environment cannot be set up; the message says why and what to run (e.g.
    /// `cargo xtask controlplane build` when the binaries are missing). Use
    /// [`TestEnv::try_shared`] to handle the error instead.
    pub async fn shared() -> &'static TestEnv {
        match Self::try_shared().await {
            Ok(env) => env,
            Err(err) => panic!("ccm-testenv: {err}"),
        }
    }

    /// Like [`TestEnv::shared`], but returns the set-up error. A failed set-up is not retried:
    /// every later call returns the same error.
    ///
    /// # Errors
    /// [`TestEnvError`] describing why the control plane cannot be used or started.
    pub async fn try_shared() -> Result<&'static TestEnv, &'static TestEnvError> {
        SHARED
            .get_or_init(|| async { Self::attach_or_start().await })
            .await
            .as_ref()
    }

    async fn attach_or_start() -> Result<TestEnv, TestEnvError> {
        if let Some(path) = std::env::var_os(envfile::ENV_VAR) {
            let path = PathBuf::from(path);
            tracing::info!(env_file = %path.display(), "attaching to a running control plane");
            let env = EnvFile::read(&path)?;
            return Self::from_env(env, path, None);
        }
        let binaries = Binaries::find()?;
        let dir = tempfile::Builder::new()
            .prefix("ccm-testenv-")
            .tempdir()
            .map_err(TestEnvError::TempDir)?
            .keep();
        let started = Instant::now();
        let control_plane =
            ControlPlane::launch(LaunchOptions::new(binaries, &dir, Supervision::Watchdog)).await?;
        tracing::info!(
            dir = %dir.display(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "started a private control plane"
        );
        let env = control_plane.env().clone();
        let path = control_plane.env_file_path();
        Self::from_env(env, path, Some(control_plane))
    }

    /// A test environment for the control plane described by the env file at `path`, without
    /// the once-per-process caching of [`TestEnv::shared`].
    ///
    /// # Errors
    /// [`TestEnvError`] if the env file or the files it names cannot be read.
    pub fn attach(path: &Path) -> Result<TestEnv, TestEnvError> {
        let env = EnvFile::read(path)?;
        Self::from_env(env, path.to_owned(), None)
    }

    fn from_env(
        env: EnvFile,
        env_path: PathBuf,
        private: Option<ControlPlane>,
    ) -> Result<TestEnv, TestEnvError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| TestEnvError::ReadFile {
                path: path.to_owned(),
                source,
            })
        };
        let b64 = |text: String| base64::engine::general_purpose::STANDARD.encode(text);
        let server = env.server.parse().map_err(|e| {
            TestEnvError::Unexpected(format!("invalid server URL in env file: {e}"))
        })?;
        Ok(TestEnv {
            server,
            ca_der: pki::pem_certificates_to_der(&read(&env.ca_cert)?)?,
            admin_cert_b64: b64(read(&env.admin_cert)?),
            admin_key_b64: b64(read(&env.admin_key)?),
            front_proxy_cert_b64: b64(read(&env.front_proxy_cert)?),
            front_proxy_key_b64: b64(read(&env.front_proxy_key)?),
            env,
            env_path,
            _private: private,
        })
    }

    /// The env file describing the control plane (URLs, certificate paths, process ids).
    pub fn env(&self) -> &EnvFile {
        &self.env
    }

    /// Path of the env file; pass it as `CCM_TESTENV` to child processes that use this crate.
    pub fn env_file_path(&self) -> &Path {
        &self.env_path
    }

    /// The API server URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &http::Uri {
        &self.server
    }

    /// The admin kubeconfig file (cluster admin, group `system:masters`), e.g. for starting a
    /// controller binary under test with `--kubeconfig`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.env.kubeconfig
    }

    fn base_config(&self) -> kube::Config {
        let mut config = kube::Config::new(self.server.clone());
        config.root_cert = Some(self.ca_der.clone());
        config
    }

    /// A `kube::Config` for the admin user (group `system:masters`).
    pub fn config(&self) -> kube::Config {
        let mut config = self.base_config();
        config.auth_info.client_certificate_data = Some(self.admin_cert_b64.clone());
        config.auth_info.client_key_data = Some(self.admin_key_b64.clone().into());
        config
    }

    /// A new admin client, bound to the current tokio runtime. Each `#[tokio::test]` has its own
    /// runtime, so create clients inside the test and never share them between tests.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), kube::Error> {
    /// use k8s_openapi::api::core::v1::Namespace;
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let namespaces: kube::Api<Namespace> = kube::Api::all(env.client());
    /// namespaces.get("default").await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Panics
    /// Outside a tokio runtime. [`TestEnv::try_client`] returns the error instead.
    pub fn client(&self) -> kube::Client {
        self.try_client()
            .unwrap_or_else(|err| panic!("ccm-testenv: {err}"))
    }

    /// Like [`TestEnv::client`], returning the error.
    ///
    /// # Errors
    /// [`TestEnvError::Client`] if the client cannot be built.
    pub fn try_client(&self) -> Result<kube::Client, TestEnvError> {
        kube::Client::try_from(self.config()).map_err(TestEnvError::Client)
    }

    /// A client that the API server authenticates as `user` in `groups` (plus
    /// `system:authenticated`), with no other rights than RBAC grants them. For RBAC tests.
    ///
    /// The client presents a client certificate signed by the test CA that the API server
    /// trusts for request-header authentication (`--requestheader-*` flags), and names the user
    /// and groups in the `X-Remote-User` and `X-Remote-Group` headers, which allows any number
    /// of groups.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// use k8s_openapi::api::core::v1::Node;
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let nodes: kube::Api<Node> = kube::Api::all(env.client_for_user("alice", &["devs"]));
    /// let err = nodes.list(&Default::default()).await.unwrap_err();
    /// # }
    /// ```
    ///
    /// # Panics
    /// If `user` or a group is empty or not visible ASCII, or outside a tokio runtime.
    /// [`TestEnv::try_client_for_user`] returns the error instead.
    pub fn client_for_user(&self, user: &str, groups: &[&str]) -> kube::Client {
        self.try_client_for_user(user, groups)
            .unwrap_or_else(|err| panic!("ccm-testenv: {err}"))
    }

    /// Like [`TestEnv::client_for_user`], returning the error.
    ///
    /// # Errors
    /// [`TestEnvError::InvalidIdentity`] for names that cannot be sent as headers,
    /// [`TestEnvError::Client`] if the client cannot be built.
    pub fn try_client_for_user(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<kube::Client, TestEnvError> {
        kube::Client::try_from(self.user_config(user, groups)?).map_err(TestEnvError::Client)
    }

    /// The `kube::Config` used by [`TestEnv::client_for_user`].
    ///
    /// # Errors
    /// [`TestEnvError::InvalidIdentity`] for names that cannot be sent as headers.
    pub fn user_config(&self, user: &str, groups: &[&str]) -> Result<kube::Config, TestEnvError> {
        let mut config = self.base_config();
        config.auth_info.client_certificate_data = Some(self.front_proxy_cert_b64.clone());
        config.auth_info.client_key_data = Some(self.front_proxy_key_b64.clone().into());
        let user_header = header_name(REMOTE_USER_HEADER)?;
        let group_header = header_name(REMOTE_GROUP_HEADER)?;
        config.headers.push((user_header, header_value(user)?));
        for group in groups {
            config
                .headers
                .push((group_header.clone(), header_value(group)?));
        }
        Ok(config)
    }

    /// A client authenticating with a token of ServiceAccount `namespace/name`, which is created
    /// if missing (the namespace must exist). Returns once the API server accepts the token.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let ns = env.namespace("sa").await;
    /// let client = env.client_for_service_account(&ns, "cloud-controller-manager").await;
    /// # }
    /// ```
    ///
    /// # Panics
    /// If the account or token cannot be created. [`TestEnv::try_client_for_service_account`]
    /// returns the error instead.
    pub async fn client_for_service_account(&self, namespace: &str, name: &str) -> kube::Client {
        self.try_client_for_service_account(namespace, name)
            .await
            .unwrap_or_else(|err| panic!("ccm-testenv: {err}"))
    }

    /// Like [`TestEnv::client_for_service_account`], returning the error.
    ///
    /// # Errors
    /// [`TestEnvError`] if the account or token cannot be created, or the token is not accepted
    /// within 30 s.
    pub async fn try_client_for_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client, TestEnvError> {
        let token = self.service_account_token(namespace, name).await?;
        let mut config = self.base_config();
        config.auth_info.token = Some(token.into());
        kube::Client::try_from(config).map_err(TestEnvError::Client)
    }

    /// A token of ServiceAccount `namespace/name` (created if missing; the namespace must
    /// exist), valid for [`SERVICE_ACCOUNT_TOKEN_SECONDS`], from the TokenRequest API. Returns
    /// once the API server accepts the token. For programs started with their own kubeconfig, see
    /// [`TestEnv::write_service_account_kubeconfig`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), ccm_testenv::TestEnvError> {
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let token = env.service_account_token("kube-system", "cloud-controller-manager").await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`TestEnvError`] if the account or token cannot be created, or the token is not accepted
    /// within 30 s.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, TestEnvError> {
        let admin = self.try_client()?;
        let accounts: Api<ServiceAccount> = Api::namespaced(admin, namespace);
        let mut account = ServiceAccount::default();
        account.metadata.name = Some(name.to_owned());
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => {
                return Err(api_err(format!("create ServiceAccount {namespace}/{name}"))(err));
            }
        }
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(SERVICE_ACCOUNT_TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let token = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(api_err(format!(
                "request a token for ServiceAccount {namespace}/{name}"
            )))?
            .status
            .and_then(|status| status.token)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| TestEnvError::Unexpected("TokenRequest returned no token".into()))?;

        let mut config = self.base_config();
        config.auth_info.token = Some(token.clone().into());
        let client = kube::Client::try_from(config).map_err(TestEnvError::Client)?;

        // The token authenticator looks the account up through a cache; wait until it knows it.
        let expected = format!("system:serviceaccount:{namespace}:{name}");
        let reviews: Api<SelfSubjectReview> = Api::all(client);
        let what = format!("the API server to accept the token of {expected}");
        wait_for(&what, Duration::from_secs(30), || async {
            let review = reviews
                .create(&PostParams::default(), &SelfSubjectReview::default())
                .await
                .ok()?;
            let user = review.status?.user_info?.username?;
            (user == expected).then_some(())
        })
        .await?;
        Ok(token)
    }

    /// Writes to `path` a kubeconfig for this control plane that authenticates as ServiceAccount
    /// `namespace/name` ([`TestEnv::service_account_token`]), for a program under test that runs
    /// as a separate process, as it would in a pod.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), ccm_testenv::TestEnvError> {
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let path = std::env::temp_dir().join("ccm.kubeconfig");
    /// env.write_service_account_kubeconfig("kube-system", "cloud-controller-manager", &path)
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`TestEnv::service_account_token`], or [`TestEnvError::ReadFile`] /
    /// [`TestEnvError::WriteFile`] if the CA cannot be read or the kubeconfig written.
    pub async fn write_service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        path: &Path,
    ) -> Result<(), TestEnvError> {
        let token = self.service_account_token(namespace, name).await?;
        let ca_pem = std::fs::read_to_string(&self.env.ca_cert).map_err(|source| {
            TestEnvError::ReadFile {
                path: self.env.ca_cert.clone(),
                source,
            }
        })?;
        let yaml = kubeconfig::render_token(
            &format!("{namespace}-{name}"),
            &self.env.server,
            &ca_pem,
            &token,
        );
        std::fs::write(path, yaml).map_err(|source| TestEnvError::WriteFile {
            path: path.to_owned(),
            source,
        })
    }

    /// `<prefix>-<random suffix>`: a DNS-1123 label (at most 63 characters, lower-case
    /// alphanumerics and `-`), different on every call. Use it for cluster-scoped objects so
    /// tests running in parallel do not collide. Characters not allowed in a label are replaced
    /// by `-`; an empty prefix becomes `test`.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let name = env.unique_name("node");
    /// assert!(name.starts_with("node-"));
    /// # }
    /// ```
    pub fn unique_name(&self, prefix: &str) -> String {
        unique_name(prefix)
    }

    /// Creates a namespace named [`TestEnv::unique_name`]`(prefix)` and returns its name.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let env = ccm_testenv::TestEnv::shared().await;
    /// let ns = env.namespace("lb").await;
    /// # }
    /// ```
    ///
    /// # Panics
    /// If the namespace cannot be created; [`TestEnv::try_namespace`] returns the error instead.
    pub async fn namespace(&self, prefix: &str) -> String {
        self.try_namespace(prefix)
            .await
            .unwrap_or_else(|err| panic!("ccm-testenv: {err}"))
    }

    /// Like [`TestEnv::namespace`], returning the error.
    ///
    /// # Errors
    /// [`TestEnvError`] if the namespace cannot be created.
    pub async fn try_namespace(&self, prefix: &str) -> Result<String, TestEnvError> {
        let name = unique_name(prefix);
        let namespaces: Api<Namespace> = Api::all(self.try_client()?);
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(name.clone());
        namespace.metadata.labels = Some([(NAMESPACE_LABEL.to_owned(), "true".to_owned())].into());
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(api_err(format!("create namespace {name}")))?;
        Ok(name)
    }
}

fn header_name(name: &str) -> Result<HeaderName, TestEnvError> {
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|e| TestEnvError::Unexpected(format!("invalid header name {name:?}: {e}")))
}

fn header_value(value: &str) -> Result<HeaderValue, TestEnvError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(TestEnvError::InvalidIdentity(value.to_owned()));
    }
    HeaderValue::from_str(value).map_err(|_| TestEnvError::InvalidIdentity(value.to_owned()))
}

/// Longest label the API server accepts for namespaces and most names.
const MAX_LABEL: usize = 63;
/// Length of the random suffix of [`unique_name`].
const SUFFIX_LEN: usize = 10;

fn unique_name(prefix: &str) -> String {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    name_with_suffix(prefix, &suffix[..SUFFIX_LEN])
}

/// `<sanitised prefix>-<suffix>`, at most 63 characters.
fn name_with_suffix(prefix: &str, suffix: &str) -> String {
    let mut clean = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            clean.push(c);
        } else if !clean.ends_with('-') {
            clean.push('-');
        }
    }
    let max_prefix = MAX_LABEL - suffix.len() - 1;
    clean.truncate(max_prefix);
    let clean = clean.trim_matches('-');
    let clean = if clean.is_empty() { "test" } else { clean };
    format!("{clean}-{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_dns1123_label(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= 63
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !name.starts_with('-')
            && !name.ends_with('-')
    }

    #[test]
    fn unique_names_are_labels_and_differ() {
        let a = unique_name("node");
        let b = unique_name("node");
        assert_ne!(a, b);
        assert!(a.starts_with("node-"));
        assert_eq!(a.len(), "node-".len() + SUFFIX_LEN);
        assert!(is_dns1123_label(&a), "{a}");
    }

    #[test]
    fn prefixes_are_sanitised() {
        assert_eq!(name_with_suffix("My_Test.Case", "abc"), "my-test-case-abc");
        assert_eq!(name_with_suffix("--x--", "abc"), "x-abc");
        assert_eq!(name_with_suffix("", "abc"), "test-abc");
        assert_eq!(name_with_suffix("***", "abc"), "test-abc");
        assert_eq!(name_with_suffix("ünï", "abc"), "n-abc");
        let long = "a".repeat(100);
        let name = name_with_suffix(&long, "0123456789");
        assert_eq!(name.len(), 63);
        assert!(is_dns1123_label(&name));
        // Truncation that ends on a dash does not leave "--".
        let tricky = format!("{}-b", "a".repeat(51));
        let name = name_with_suffix(&tricky, "0123456789");
        assert!(is_dns1123_label(&name), "{name}");
        assert!(!name.contains("--"), "{name}");
    }

    #[test]
    fn header_values_are_validated() {
        assert!(header_value("alice").is_ok());
        assert!(header_value("system:serviceaccount:ns:sa").is_ok());
        assert!(matches!(
            header_value(""),
            Err(TestEnvError::InvalidIdentity(_))
        ));
        assert!(matches!(
            header_value("a\nb"),
            Err(TestEnvError::InvalidIdentity(_))
        ));
        assert!(matches!(
            header_value("ünï"),
            Err(TestEnvError::InvalidIdentity(_))
        ));
    }

    #[test]
    fn header_names_are_valid() {
        assert_eq!(
            header_name(REMOTE_USER_HEADER).expect("user").as_str(),
            "x-remote-user"
        );
        assert_eq!(
            header_name(REMOTE_GROUP_HEADER).expect("group").as_str(),
            "x-remote-group"
        );
    }
}
