//! The provider registry: provider names mapped to factories (Go: `cloudprovider.RegisterCloudProvider`).
//!
//! A vendor registers a factory under its provider name; the runtime looks up `--cloud-provider` and hands the
//! factory the opened `--cloud-config` file, if one was given.
//!
//! ```
//! use std::sync::Arc;
//! use ccm_core::{CloudProvider, ProviderRegistry};
//!
//! struct Acme;
//! impl CloudProvider for Acme {
//!     fn provider_name(&self) -> &str { "acme" }
//! }
//!
//! let registry = ProviderRegistry::new();
//! registry.register("acme", |_config| Ok(Arc::new(Acme) as Arc<dyn CloudProvider>)).unwrap();
//! assert!(registry.register("acme", |_config| Ok(Arc::new(Acme) as Arc<dyn CloudProvider>)).is_err());
//! let cloud = registry.init_cloud_provider("acme", None).unwrap().unwrap();
//! assert_eq!(cloud.provider_name(), "acme");
//! assert!(registry.init_cloud_provider("external", None).unwrap().is_none());
//! ```

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::BoxError;
use crate::names::EXTERNAL_PROVIDER;
use crate::provider::CloudProvider;

/// Builds a provider from its optional configuration (the opened `--cloud-config` file).
pub type ProviderFactory =
    Arc<dyn Fn(Option<&mut dyn Read>) -> Result<Arc<dyn CloudProvider>, BoxError> + Send + Sync>;

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
    /// The configuration file could not be opened.
    #[error("could not open cloud config file {path}: {source}; check --cloud-config")]
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

    /// Register `factory` under `name`; a name can be registered only once.
    pub fn register<F>(&self, name: &str, factory: F) -> Result<(), RegistryError>
    where
        F: Fn(Option<&mut dyn Read>) -> Result<Arc<dyn CloudProvider>, BoxError>
            + Send
            + Sync
            + 'static,
    {
        let mut factories = self.factories.lock().unwrap_or_else(|e| e.into_inner());
        if factories.contains_key(name) {
            return Err(RegistryError::Duplicate {
                name: name.to_owned(),
            });
        }
        factories.insert(name.to_owned(), Arc::new(factory));
        Ok(())
    }

    /// Whether a factory is registered under `name`.
    pub fn is_registered(&self, name: &str) -> bool {
        self.factories
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.factories
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Run the factory registered under `name` with `config`; `Ok(None)` if no such factory exists.
    pub fn get(
        &self,
        name: &str,
        config: Option<&mut dyn Read>,
    ) -> Result<Option<Arc<dyn CloudProvider>>, RegistryError> {
        let factory = self
            .factories
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned();
        match factory {
            None => Ok(None),
            Some(factory) => factory(config)
                .map(Some)
                .map_err(|source| RegistryError::Factory {
                    name: name.to_owned(),
                    source,
                }),
        }
    }

    /// Create the provider for `--cloud-provider` = `name` and `--cloud-config` = `config_path`.
    ///
    /// `""` and `"external"` mean "no provider in this process" and give `Ok(None)`; an unknown name, an
    /// unreadable file or a failing factory is an error.
    pub fn init_cloud_provider(
        &self,
        name: &str,
        config_path: Option<&Path>,
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
        match config_path {
            None => self.get(name, None),
            Some(path) => {
                let mut file =
                    std::fs::File::open(path).map_err(|source| RegistryError::ConfigOpen {
                        path: path.to_owned(),
                        source,
                    })?;
                self.get(name, Some(&mut file))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    struct Named(String);
    impl CloudProvider for Named {
        fn provider_name(&self) -> &str {
            &self.0
        }
    }

    fn reading_factory(config: Option<&mut dyn Read>) -> Result<Arc<dyn CloudProvider>, BoxError> {
        let mut text = String::new();
        if let Some(config) = config {
            config.read_to_string(&mut text)?;
        }
        if text.trim() == "bad" {
            return Err("config says bad".into());
        }
        Ok(Arc::new(Named(format!("cfg:{}", text.trim()))))
    }

    #[test]
    fn duplicate_is_an_error() {
        let r = ProviderRegistry::new();
        r.register("x", reading_factory).unwrap();
        let err = r.register("x", reading_factory).unwrap_err();
        assert!(matches!(err, RegistryError::Duplicate { ref name } if name == "x"));
        assert_eq!(r.names(), vec!["x".to_string()]);
    }

    #[test]
    fn empty_and_external_mean_no_provider() {
        let r = ProviderRegistry::new();
        assert!(r.init_cloud_provider("", None).unwrap().is_none());
        assert!(r.init_cloud_provider("external", None).unwrap().is_none());
    }

    #[test]
    fn unknown_name_lists_known() {
        let r = ProviderRegistry::new();
        r.register("fake", reading_factory).unwrap();
        let err = r
            .init_cloud_provider("acme", None)
            .err()
            .expect("unknown provider");
        assert!(
            err.to_string().contains("registered providers: fake"),
            "{err}"
        );
        assert!(r.get("acme", None).unwrap().is_none());
    }

    #[test]
    fn config_file_is_passed_and_errors_are_clear() {
        let r = ProviderRegistry::new();
        r.register("fake", reading_factory).unwrap();
        let dir = std::env::temp_dir().join(format!("ccm-core-registry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.conf");
        std::fs::File::create(&good)
            .unwrap()
            .write_all(b"zone-a")
            .unwrap();
        let cloud = r.init_cloud_provider("fake", Some(&good)).unwrap().unwrap();
        assert_eq!(cloud.provider_name(), "cfg:zone-a");

        let bad = dir.join("bad.conf");
        std::fs::File::create(&bad)
            .unwrap()
            .write_all(b"bad")
            .unwrap();
        let err = r.init_cloud_provider("fake", Some(&bad)).err().unwrap();
        assert_eq!(
            err.to_string(),
            "could not init cloud provider \"fake\": config says bad"
        );

        let missing = dir.join("missing.conf");
        let err = r.init_cloud_provider("fake", Some(&missing)).err().unwrap();
        assert!(matches!(err, RegistryError::ConfigOpen { .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
