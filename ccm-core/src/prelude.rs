//! What a provider author implements against, in one import: `use ccm_core::prelude::*;` brings the provider
//! traits ([`CloudProvider`] and its capabilities, [`InstancesV2`] or the legacy [`Instances`] with [`Zones`],
//! [`LoadBalancer`], [`Routes`], [`Clusters`]) with [`async_trait`](macro@async_trait) to implement them, what
//! they answer and receive, the errors ([`CloudError`], [`ErrorKind`], [`ResultExt`] to add context), and what
//! registering the provider takes ([`ProviderRegistry`], [`ProviderSettings`], [`BackgroundTasks`] for work every
//! replica runs, [`VendorSettings`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use ccm_core::prelude::*;
//! use k8s_openapi::api::core::v1::Node;
//!
//! struct Acme;
//!
//! impl CloudProvider for Acme {
//!     fn provider_name(&self) -> &str {
//!         "acme"
//!     }
//!     fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
//!         Some(self)
//!     }
//! }
//!
//! #[async_trait]
//! impl InstancesV2 for Acme {
//!     async fn instance_exists(&self, _node: &Node) -> Result<bool, CloudError> {
//!         Ok(true)
//!     }
//!     async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
//!         Ok(false)
//!     }
//!     async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
//!         let name = node.metadata.name.as_deref().ok_or(CloudError::InstanceNotFound)?;
//!         Ok(InstanceMetadata::new(format!("acme://{name}")).into())
//!     }
//! }
//!
//! let registry = ProviderRegistry::new();
//! registry
//!     .register("acme", |_settings: ProviderSettings| async {
//!         Ok(Arc::new(Acme) as Arc<dyn CloudProvider>)
//!     })
//!     .expect("a new name");
//! ```

pub use async_trait::async_trait;

pub use crate::background::BackgroundTasks;
pub use crate::error::{BoxError, CloudError, ErrorKind, ResultExt};
pub use crate::provider::{
    CloudProvider, Clusters, InitializeContext, Instances, InstancesV2, LoadBalancer, Routes, Zones,
};
pub use crate::registry::{ProviderRegistry, ProviderSettings};
pub use crate::reload::ReloadContext;
pub use crate::types::{InstanceLookup, InstanceMetadata, Route, Zone};
pub use crate::vendor::VendorSettings;
