//! The provider registry: provider names mapped to async factories (Go: `cloudprovider.RegisterCloudProvider`).
//!
//! A vendor registers a factory under its provider name; the runtime looks up `--cloud-provider` and awaits the
//! factory with the resolved [`ProviderSettings`]. The factory runs in **every replica**, before leader election
//! (as in Go), so it is the place for work every replica needs (loading credentials, starting a refresher, with
//! its [`BackgroundTasks`](ProviderSettings::tasks)); work only the leader does belongs in
//! [`CloudProvider::initialize`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::Arc;
//! use ccm_core::{CloudProvider, ProviderRegistry, ProviderSettings};
//!
//! struct Acme { zone: String }
//! impl CloudProvider for Acme {
//!     fn provider_name(&self) -> &str { "acme" }
//! }
//!
//! let registry = ProviderRegistry::new();
//! registry
//!     .register("acme", |settings: ProviderSettings| async move {
//!         let zone = settings.cloud_config_str()?.unwrap_or("zone-a").trim().to_owned();
//!         Ok(Arc::new(Acme { zone }) as Arc<dyn CloudProvider>)
//!     })
//!     .unwrap();
//! # let client = kube::Client::new(
//! #     tower::service_fn(|_: http::Request<kube::client::Body>| async {
//! #         Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other("offline"))
//! #     }),
//! #     "default",
//! # );
//! let settings = ProviderSettings::new(client).with_cloud_config(b"zone-b\n".to_vec());
//! let cloud = registry.init_cloud_provider("acme", settings.clone()).await.unwrap().unwrap();
//! assert_eq!(cloud.provider_name(), "acme");
//! assert!(registry.init_cloud_provider("external", settings).await.unwrap().is_none());
//! # }
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use parking_lot::Mutex;

use crate::background::BackgroundTasks;
use crate::error::BoxError;
use crate::names::EXTERNAL_PROVIDER;
use crate::provider::CloudProvider;
use crate::vendor::VendorSettings;

/// What a factory returns: the provider, or why it cannot be created.
pub type ProviderFuture = BoxFuture<'static, Result<Arc<dyn CloudProvider>, BoxError>>;

/// Builds a provider from the resolved runtime settings.
pub type ProviderFactory = Arc<dyn Fn(ProviderSettings) -> ProviderFuture + Send + Sync>;

/// What a provider factory receives: the runtime's resolved settings. Cheap to clone.
#[derive(Clone)]
#[non_exhaustive]
pub struct ProviderSettings {
    /// A client for the cluster, with the CCM's identity (its own user agent and API budget).
    pub client: kube::Client,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// The contents of the `--cloud-config` file, `None` without `--cloud-config`.
    pub cloud_config: Option<Vec<u8>>,
    /// The `--cloud-config` path, `None` without it.
    pub cloud_config_path: Option<PathBuf>,
    /// The vendor's parsed flags and config section, and values shared with its controllers.
    pub vendor: VendorSettings,
    /// Background tasks stopped (awaited, then aborted) when the CCM shuts down; see [`crate::background`].
    pub tasks: BackgroundTasks,
    watched: Arc<Mutex<Vec<PathBuf>>>,
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("cluster_name", &self.cluster_name)
            .field("cloud_config_path", &self.cloud_config_path)
            .field(
                "cloud_config_bytes",
                &self.cloud_config.as_ref().map(Vec::len),
            )
            .field("vendor", &self.vendor)
            .field("watched", &self.watched_files())
            .finish_non_exhaustive()
    }
}

impl ProviderSettings {
    /// Settings with `client`, cluster name `kubernetes`, no cloud config, no vendor settings, and background tasks
    /// of their own (stopped by [`BackgroundTasks::stop`]).
    pub fn new(client: kube::Client) -> Self {
        ProviderSettings {
            client,
            cluster_name: "kubernetes".to_owned(),
            cloud_config: None,
            cloud_config_path: None,
            vendor: VendorSettings::new(),
            tasks: BackgroundTasks::new(tokio_util::sync::CancellationToken::new()),
            watched: Arc::default(),
        }
    }

    /// With `--cluster-name`.
    pub fn with_cluster_name(mut self, name: impl Into<String>) -> Self {
        self.cluster_name = name.into();
        self
    }

    /// With the `--cloud-config` contents.
    pub fn with_cloud_config(mut self, contents: Vec<u8>) -> Self {
        self.cloud_config = Some(contents);
        self
    }

    /// With the `--cloud-config` path (the runtime sets it with the contents).
    pub fn with_cloud_config_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.cloud_config_path = Some(path.into());
        self
    }

    /// With the vendor's settings.
    pub fn with_vendor(mut self, vendor: VendorSettings) -> Self {
        self.vendor = vendor;
        self
    }

    /// With background tasks owned by the caller (the runtime passes tasks tied to its shutdown).
    pub fn with_tasks(mut self, tasks: BackgroundTasks) -> Self {
        self.tasks = tasks;
        self
    }

    /// The `--cloud-config` contents as UTF-8 text, `None` without `--cloud-config`; the UTF-8 error if the file
    /// is not text.
    pub fn cloud_config_str(&self) -> Result<Option<&str>, std::str::Utf8Error> {
        self.cloud_config
            .as_deref()
            .map(std::str::from_utf8)
            .transpose()
    }

    /// The vendor's flags as `T` (declared with `ccm_app::CcmBuilder::with_vendor_args`).
    pub fn vendor_args<T: 'static>(&self) -> Option<&T> {
        self.vendor.args()
    }

    /// The vendor's config-file section as `T` (declared with `ccm_app::CcmBuilder::with_vendor_config`).
    pub fn vendor_config<T: 'static>(&self) -> Option<&T> {
        self.vendor.config()
    }

    /// Ask the runtime to watch `path` (a credentials file, for example) beside `--cloud-config`: when it changes,
    /// [`CloudProvider::reload`] receives its new contents.
    pub fn watch_file(&self, path: impl Into<PathBuf>) {
        let path = path.into();
        let mut watched = self.watched.lock();
        if !watched.contains(&path) {
            watched.push(path);
        }
    }

    /// The files declared with [`watch_file`](Self::watch_file), in declaration order.
    pub fn watched_files(&self) -> Vec<PathBuf> {
        self.watched.lock().clone()
    }
}

/// What can go wrong registering or creating a provider.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The name is already taken.
    #[error("cloud provider {name:?} was registered twice; register each provider name once")]
    Duplicate {
        /// The provider name.
        name: String,
    },
    /// No factory has this name.
    #[error("unknown cloud provider {name:?}; registered providers: {known}")]
    Unknown {
        /// The provider name.
        name: String,
        /// The registered names, comma separated.
        known: String,
    },
    /// The provider name is empty.
    #[error("--cloud-provider cannot be empty; set it to the name of your provider")]
    Empty,
    /// The configuration file could not be read.
    #[error("could not read cloud config file {path}: {source}; check --cloud-config")]
    ConfigOpen {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The factory failed.
    #[error("could not init cloud provider {name:?}: {source}")]
    Factory {
        /// The provider name.
        name: String,
        /// The factory's error.
        #[source]
        source: BoxError,
    },
}

/// Read the `--cloud-config` file at `path`, or fail with [`RegistryError::ConfigOpen`] naming the path.
pub fn read_cloud_config(path: &Path) -> Result<Vec<u8>, RegistryError> {
    std::fs::read(path).map_err(|source| RegistryError::ConfigOpen {
        path: path.to_owned(),
        source,
    })
}

/// A thread-safe map from provider names to factories.
#[derive(Default)]
pub struct ProviderRegistry {
    factories: Mutex<BTreeMap<String, ProviderFactory>>,
}

impl std::fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRegistry")
            .field("names", &self.names())
            .finish()
    }
}

impl ProviderRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide registry, for vendors that register from their `main` and look up by flag.
    pub fn global() -> &'static ProviderRegistry {
        static GLOBAL: OnceLock<ProviderRegistry> = OnceLock::new();
        GLOBAL.get_or_init(ProviderRegistry::new)
    }

    /// Register the async `factory` under `name`; a name can be registered only once.
    pub fn register<F, Fut>(&self, name: &str, factory: F) -> Result<(), RegistryError>
    where
        F: Fn(ProviderSettings) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Arc<dyn CloudProvider>, BoxError>> + Send + 'static,
    {
        let mut factories = self.factories.lock();
        if factories.contains_key(name) {
            return Err(RegistryError::Duplicate {
                name: name.to_owned(),
            });
        }
        let factory: ProviderFactory = Arc::new(move |settings| factory(settings).boxed());
        factories.insert(name.to_owned(), factory);
        Ok(())
    }

    /// Whether a factory is registered under `name`.
    pub fn is_registered(&self, name: &str) -> bool {
        self.factories.lock().contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.factories.lock().keys().cloned().collect()
    }

    /// Run the factory registered under `name` with `settings`; `Ok(None)` if no such factory exists.
    pub async fn get(
        &self,
        name: &str,
        settings: ProviderSettings,
    ) -> Result<Option<Arc<dyn CloudProvider>>, RegistryError> {
        let Some(factory) = self.factories.lock().get(name).cloned() else {
            return Ok(None);
        };
        factory(settings)
            .await
            .map(Some)
            .map_err(|source| RegistryError::Factory {
                name: name.to_owned(),
                source,
            })
    }

    /// Create the provider for `--cloud-provider` = `name` with `settings`.
    ///
    /// `""` and `"external"` mean "no provider in this process" and give `Ok(None)`; an unknown name or a failing
    /// factory is an error.
    pub async fn init_cloud_provider(
        &self,
        name: &str,
        settings: ProviderSettings,
    ) -> Result<Option<Arc<dyn CloudProvider>>, RegistryError> {
        if name.is_empty() {
            return Ok(None);
        }
        if name == EXTERNAL_PROVIDER {
            tracing::info!("external cloud provider specified; no provider runs in this process");
            return Ok(None);
        }
        if !self.is_registered(name) {
            return Err(RegistryError::Unknown {
                name: name.to_owned(),
                known: self.names().join(", "),
            });
        }
        self.get(name, settings).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(String);
    impl CloudProvider for Named {
        fn provider_name(&self) -> &str {
            &self.0
        }
    }

    fn offline_client() -> kube::Client {
        kube::Client::new(
            tower::service_fn(|_req: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                    "offline",
                ))
            }),
            "default",
        )
    }

    async fn reading_factory(
        settings: ProviderSettings,
    ) -> Result<Arc<dyn CloudProvider>, BoxError> {
        let text = settings
            .cloud_config_str()?
            .unwrap_or_default()
            .trim()
            .to_owned();
        if text == "bad" {
            return Err("config says bad".into());
        }
        let region = settings
            .vendor_args::<String>()
            .cloned()
            .unwrap_or_default();
        Ok(Arc::new(Named(format!(
            "cfg:{text}:{region}:{}",
            settings.cluster_name
        ))))
    }

    #[tokio::test]
    async fn duplicate_is_an_error() {
        let r = ProviderRegistry::new();
        r.register("x", reading_factory).unwrap();
        let err = r.register("x", reading_factory).unwrap_err();
        assert!(matches!(err, RegistryError::Duplicate { ref name } if name == "x"));
        assert_eq!(r.names(), vec!["x".to_string()]);
    }

    #[tokio::test]
    async fn empty_and_external_mean_no_provider() {
        let r = ProviderRegistry::new();
        let settings = ProviderSettings::new(offline_client());
        assert!(
            r.init_cloud_provider("", settings.clone())
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            r.init_cloud_provider("external", settings)
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn unknown_name_lists_known() {
        let r = ProviderRegistry::new();
        r.register("fake", reading_factory).unwrap();
        let settings = ProviderSettings::new(offline_client());
        let err = r
            .init_cloud_provider("acme", settings.clone())
            .await
            .err()
            .expect("unknown provider");
        assert!(
            err.to_string().contains("registered providers: fake"),
            "{err}"
        );
        assert!(r.get("acme", settings).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_factory_gets_the_settings_and_its_errors_are_clear() {
        let r = ProviderRegistry::new();
        r.register("fake", reading_factory).unwrap();
        let settings = ProviderSettings::new(offline_client())
            .with_cluster_name("prod")
            .with_cloud_config(b"zone-a\n".to_vec())
            .with_vendor(VendorSettings::new().with_args("eu-1".to_owned()));
        let cloud = r
            .init_cloud_provider("fake", settings)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cloud.provider_name(), "cfg:zone-a:eu-1:prod");

        let bad = ProviderSettings::new(offline_client()).with_cloud_config(b"bad".to_vec());
        let err = r.init_cloud_provider("fake", bad).await.err().unwrap();
        assert_eq!(
            err.to_string(),
            "could not init cloud provider \"fake\": config says bad"
        );

        let err = read_cloud_config(Path::new("/nonexistent/cloud.conf")).unwrap_err();
        assert!(matches!(err, RegistryError::ConfigOpen { .. }), "{err}");
        assert!(err.to_string().contains("check --cloud-config"), "{err}");
    }

    #[tokio::test]
    async fn declared_files_are_seen_through_every_clone() {
        let settings = ProviderSettings::new(offline_client());
        let kept = settings.clone();
        settings.watch_file("/etc/acme/token");
        settings.watch_file("/etc/acme/token");
        settings.watch_file("/etc/acme/ca.pem");
        assert_eq!(
            kept.watched_files(),
            [
                PathBuf::from("/etc/acme/token"),
                PathBuf::from("/etc/acme/ca.pem")
            ]
        );
    }
}
