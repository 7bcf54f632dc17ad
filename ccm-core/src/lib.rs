//! # ccm-core
//!
//! The foundation of the SDK for Kubernetes cloud controller managers (CCMs):
//!
//! - [`prelude`]: **start here as a provider author** — `use ccm_core::prelude::*;` brings the provider traits,
//!   their value types, [`CloudError`] and the registry;
//! - [`provider`]: the traits a cloud vendor implements ([`CloudProvider`], [`InstancesV2`], [`Instances`],
//!   [`Zones`], [`LoadBalancer`], [`Routes`], [`Clusters`]); with the `mock` feature, mockall mocks of each;
//! - [`error`]: [`CloudError`], whose kinds (instance not found, not implemented, implemented elsewhere,
//!   retry-after, ...) survive any amount of wrapping;
//! - [`types`]: [`InstanceMetadata`], [`InstanceLookup`], [`Zone`], [`Route`];
//! - [`registry`]: [`ProviderRegistry`], provider names mapped to async factories, and [`ProviderSettings`], what
//!   a factory receives;
//! - [`vendor`]: [`VendorSettings`], a vendor's typed flags, config section and shared values;
//! - [`background`]: background tasks tied to the runtime's shutdown;
//! - [`reload`]: [`ReloadContext`], what the opt-in [`CloudProvider::reload`] hook receives;
//! - [`names`]: every label, taint, annotation, finalizer, condition, event reason, controller name, lease
//!   and port the Go reference uses, spelled the same way;
//! - [`helpers`]: load-balancer names, source ranges, health checks, providerIDs, node conditions;
//! - [`fence`]: the leadership fence, checked before every write and cloud call;
//! - [`intercept`]: provider middleware (rate limits, fault injection, metrics, timeouts) around any provider;
//! - [`budget`] and [`cache`]: the cloud-call budget (rate limits, per-operation metrics), coalescing and a
//!   short-lived instance cache;
//! - [`duration`]: Go durations (`1h30m`, `1.5s`), the one parser and formatter of every duration the SDK reads
//!   or writes, with serde helpers and a JSON schema;
//! - [`runtime`]: shared informers, the work queue, events, metrics and the controller interface;
//! - [`settings`]: [`settings::InvalidSetting`], which setting of a controller's `Config` breaks which rule.
//!
//! See `docs/architecture.md` in the repository for how the crates fit together.
//!
//! ## Cargo features
//!
//! | feature | default | what it compiles in |
//! |---|---|---|
//! | `mock` | off | `mockall` mocks of every provider trait (`MockCloudProvider`, `MockInstancesV2`, ...), for a vendor's unit tests; enable it in `[dev-dependencies]` only. |
//!
//! Like every library crate of the SDK, ccm-core enables no `k8s-openapi` version feature: the binary or test
//! that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

pub mod background;
pub mod budget;
pub mod cache;
pub mod duration;
pub mod error;
pub mod fence;
pub mod helpers;
pub mod intercept;
pub mod listing;
pub mod names;
pub mod prelude;
pub mod provider;
pub mod registry;
pub mod reload;
pub mod runtime;
pub mod settings;
pub mod syntax;
pub mod types;
pub mod vendor;

pub use error::{
    BoxError, ClientTimeout, CloudError, ErrorKind, ResultExt, SharedError, error_kind,
    find_cloud_error,
};
pub use provider::{
    CloudProvider, Clusters, InitializeContext, Instances, InstancesV2, LoadBalancer, Routes, Zones,
};
#[cfg(feature = "mock")]
pub use provider::{
    MockCloudProvider, MockClusters, MockInstances, MockInstancesV2, MockLoadBalancer, MockRoutes,
    MockZones,
};
pub use registry::{ProviderFactory, ProviderRegistry, ProviderSettings, RegistryError};
pub use reload::ReloadContext;
pub use types::{InstanceLookup, InstanceMetadata, Route, Zone};
pub use vendor::VendorSettings;
