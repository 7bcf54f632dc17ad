//! A vendor's own settings, typed: its parsed command-line flags, its section of the config file, and values its
//! provider factory shares with its controllers.
//!
//! The runtime (`ccm_app::CcmBuilder::with_vendor_args` / `with_vendor_config`) parses them and hands one
//! [`VendorSettings`] to the provider factory ([`ProviderSettings`](crate::registry::ProviderSettings)) and to every
//! controller ([`ControllerContext::vendor`](crate::runtime::controller::ControllerContext::vendor)).
//!
//! ```
//! use ccm_core::vendor::VendorSettings;
//!
//! #[derive(Debug, PartialEq)]
//! struct AcmeArgs { region: String }
//! #[derive(Clone, Debug, PartialEq)]
//! struct AcmeClient(&'static str);
//!
//! let vendor = VendorSettings::new().with_args(AcmeArgs { region: "eu-1".into() });
//! assert_eq!(vendor.args::<AcmeArgs>().unwrap().region, "eu-1");
//! assert!(vendor.config::<AcmeArgs>().is_none(), "no config section was declared");
//! // The provider factory shares its cloud client; a vendor controller takes it from its context.
//! vendor.share(AcmeClient("api.acme.example"));
//! assert_eq!(vendor.shared::<AcmeClient>(), Some(AcmeClient("api.acme.example")));
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

type AnyValue = Arc<dyn Any + Send + Sync>;

/// The vendor's typed settings; cheap to clone (clones share the [`share`](Self::share)d values).
#[derive(Clone, Default)]
pub struct VendorSettings {
    args: Option<AnyValue>,
    config: Option<AnyValue>,
    shared: Arc<Mutex<HashMap<TypeId, AnyValue>>>,
}

impl std::fmt::Debug for VendorSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendorSettings")
            .field("args", &self.args.is_some())
            .field("config", &self.config.is_some())
            .field("shared", &self.shared.lock().len())
            .finish()
    }
}

impl VendorSettings {
    /// No flags, no config section, nothing shared.
    pub fn new() -> Self {
        Self::default()
    }

    /// With the vendor's parsed flags (its `clap::Args` type).
    pub fn with_args<T: Send + Sync + 'static>(self, args: T) -> Self {
        self.with_args_value(Arc::new(args))
    }

    /// With already type-erased flags (what the runtime's parser produces).
    pub fn with_args_value(mut self, args: Arc<dyn Any + Send + Sync>) -> Self {
        self.args = Some(args);
        self
    }

    /// With the vendor's config-file section (its serde type).
    pub fn with_config<T: Send + Sync + 'static>(self, config: T) -> Self {
        self.with_config_value(Arc::new(config))
    }

    /// With an already type-erased config section.
    pub fn with_config_value(mut self, config: Arc<dyn Any + Send + Sync>) -> Self {
        self.config = Some(config);
        self
    }

    /// The vendor's flags as `T`; `None` if no flags of type `T` were declared.
    pub fn args<T: 'static>(&self) -> Option<&T> {
        self.args.as_deref()?.downcast_ref()
    }

    /// The vendor's config-file section as `T` (its `Default` when the file has no such section); `None` if no
    /// section of type `T` was declared.
    pub fn config<T: 'static>(&self) -> Option<&T> {
        self.config.as_deref()?.downcast_ref()
    }

    /// Share `value` (one per type; a second `share` of the same type replaces it): the provider factory shares
    /// what its controllers need, such as its cloud client.
    pub fn share<T: Clone + Send + Sync + 'static>(&self, value: T) {
        self.shared
            .lock()
            .insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// A clone of the shared value of type `T`, if one was shared.
    pub fn shared<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        let shared = self.shared.lock();
        shared.get(&TypeId::of::<T>())?.downcast_ref::<T>().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct A(u32);
    #[derive(Clone, Debug, PartialEq)]
    struct B(&'static str);

    #[test]
    fn typed_access_checks_the_type() {
        let v = VendorSettings::new().with_args(A(1)).with_config(B("x"));
        assert_eq!(v.args::<A>(), Some(&A(1)));
        assert_eq!(v.args::<B>(), None);
        assert_eq!(v.config::<B>(), Some(&B("x")));
        assert_eq!(v.config::<A>(), None);
        assert!(VendorSettings::new().args::<A>().is_none());
    }

    #[test]
    fn shared_values_are_seen_by_every_clone_and_replaced_by_type() {
        let v = VendorSettings::new();
        let seen = v.clone();
        assert_eq!(seen.shared::<A>(), None);
        v.share(A(1));
        v.share(B("b"));
        v.share(A(2));
        assert_eq!(seen.shared::<A>(), Some(A(2)));
        assert_eq!(seen.shared::<B>(), Some(B("b")));
    }
}
