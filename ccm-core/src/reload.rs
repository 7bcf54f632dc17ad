//! What [`crate::CloudProvider::reload`] receives when a watched file changed.
//!
//! The runtime watches `--cloud-config` and every file the provider factory declared with
//! [`ProviderSettings::watch_file`](crate::registry::ProviderSettings::watch_file) (credentials, for example in a
//! mounted Secret, whose `..data` symlink swaps are seen as changes). When one of them changes it calls `reload`
//! with the current contents of all of them:
//! - `Ok(())`: the provider now uses the new contents (the runtime records a Normal `CloudConfigReloaded` Event);
//! - an error: the new contents are rejected and the provider keeps its old configuration (a Warning
//!   `CloudConfigReloadFailed` Event and an error log line); the runtime calls again only when a file changes again;
//! - [`crate::CloudError::NotImplemented`], the default: no reload; the CCM must be restarted to apply the
//!   change, as with Go's cloud-controller-manager.
//!
//! ```
//! use ccm_core::reload::ReloadContext;
//!
//! let ctx = ReloadContext::new(Some(b"zone: b\n".to_vec()))
//!     .with_file("/etc/acme/token", Some(b"s3cret".to_vec()))
//!     .with_changed(["/etc/acme/token"]);
//! assert_eq!(ctx.cloud_config_str().unwrap(), Some("zone: b\n"));
//! assert_eq!(ctx.file("/etc/acme/token"), Some(&b"s3cret"[..]));
//! assert!(ctx.changed("/etc/acme/token") && !ctx.changed("/etc/acme/other"));
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The new contents of the watched files.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReloadContext {
    /// The `--cloud-config` file's contents, `None` without `--cloud-config`.
    pub cloud_config: Option<Vec<u8>>,
    /// Every file the provider declared, by the path it declared; `None` if it cannot be read now.
    pub files: BTreeMap<PathBuf, Option<Vec<u8>>>,
    /// The paths that changed since the last reload (the `--cloud-config` path among them if it changed).
    pub changed: Vec<PathBuf>,
}

impl std::fmt::Debug for ReloadContext {
    // Contents may be credentials: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadContext")
            .field(
                "cloud_config_bytes",
                &self.cloud_config.as_ref().map(Vec::len),
            )
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .field("changed", &self.changed)
            .finish()
    }
}

impl ReloadContext {
    /// A context with the `--cloud-config` contents.
    pub fn new(cloud_config: Option<Vec<u8>>) -> Self {
        ReloadContext {
            cloud_config,
            ..Self::default()
        }
    }

    /// Add a declared file and its contents.
    pub fn with_file(mut self, path: impl Into<PathBuf>, contents: Option<Vec<u8>>) -> Self {
        self.files.insert(path.into(), contents);
        self
    }

    /// Name the paths that changed.
    pub fn with_changed<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.changed.extend(paths.into_iter().map(Into::into));
        self
    }

    /// The `--cloud-config` contents as UTF-8 text.
    ///
    /// # Errors
    ///
    /// The UTF-8 error if the file is not text.
    pub fn cloud_config_str(&self) -> Result<Option<&str>, std::str::Utf8Error> {
        self.cloud_config
            .as_deref()
            .map(std::str::from_utf8)
            .transpose()
    }

    /// The contents of the declared file `path`, if it could be read.
    pub fn file(&self, path: impl AsRef<Path>) -> Option<&[u8]> {
        self.files.get(path.as_ref())?.as_deref()
    }

    /// Whether `path` changed.
    pub fn changed(&self, path: impl AsRef<Path>) -> bool {
        self.changed.iter().any(|p| p == path.as_ref())
    }
}
