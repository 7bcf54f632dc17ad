//! # ccm-nodecontroller
//!
//! The two node controllers of a Kubernetes cloud controller manager, behaviour-compatible with Go's
//! `k8s.io/cloud-provider` and stricter where it is weak (see `docs/node-controllers.md`):
//!
//! - the **cloud node controller** ([`CloudNodeController`], `cloud-node-controller`, alias `cloud-node`)
//!   initializes nodes registered with the `node.cloudprovider.kubernetes.io/uninitialized` taint (providerID,
//!   zone / region / instance-type labels, the provider's additional labels, addresses; then removes the taint),
//!   copies beta topology labels to their GA names, and refreshes every node's addresses periodically;
//! - the **cloud node lifecycle controller** ([`CloudNodeLifecycleController`], `cloud-node-lifecycle-controller`,
//!   alias `cloud-node-lifecycle`) deletes Nodes whose instance is gone and taints shut-down instances with
//!   `node.cloudprovider.kubernetes.io/shutdown:NoSchedule`, only for nodes it owns ([`NodeOwnership`]).
//!
//! The decisions are pure functions with exhaustive tests: [`plan::plan_initialization`],
//! [`addresses::plan_address_update`], [`addresses::addresses_from_node_ip`], [`labels::plan_cloud_labels`],
//! [`labels::reconcile_beta_to_ga`] and [`lifecycle::decide`]. Writes are guarded JSON Patches ([`patch`]).
//!
//! Both controllers are registered with the runtime through their descriptors:
//!
//! ```no_run
//! use ccm_nodecontroller::{cloud_node_descriptor, cloud_node_lifecycle_descriptor, CloudNodeConfig, CloudNodeLifecycleConfig};
//!
//! let descriptors = vec![
//!     cloud_node_descriptor(CloudNodeConfig::default().with_concurrent_node_syncs(5)),
//!     cloud_node_lifecycle_descriptor(CloudNodeLifecycleConfig::default()),
//! ];
//! assert_eq!(descriptors[0].name, "cloud-node-controller");
//! ```
//!
//! ## Cargo features
//!
//! None: this crate has no optional features. Like every library crate of the SDK it enables no `k8s-openapi`
//! version feature; the binary or test that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

use std::time::Duration;

pub mod addresses;
mod cloud;
mod error;
pub mod labels;
pub mod lifecycle;
pub mod metrics;
pub mod node;
pub mod patch;
pub mod plan;
pub mod prefetch;
mod write;

pub use cloud::answers::fill_provider_id;
pub use error::Error;
pub use lifecycle::{
    CloudNodeLifecycleController, Config as CloudNodeLifecycleConfig, NodeOwnership,
    descriptor as cloud_node_lifecycle_descriptor,
};
pub use node::{
    CloudNodeController, Config as CloudNodeConfig, descriptor as cloud_node_descriptor,
};
pub use write::MAX_GUARD_RETRIES;

/// Default limit on one cloud call (both controllers): 30 s.
pub const DEFAULT_CLOUD_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Event reasons this crate adds to the Go reference's (`Synced`, `DeletingNode`, `DeletingNodeFailed`, which
/// live in `ccm_core::names::events`). Both are Warnings from `cloud-node-controller` on the Node.
pub mod reasons {
    /// The provider returned no providerID for a node that has none: the node stays tainted and is retried.
    pub const MISSING_PROVIDER_ID: &str = "MissingProviderID";
    /// The `alpha.kubernetes.io/provided-node-ip` annotation is invalid or matches no cloud address: the node
    /// stays tainted and is retried.
    pub const INVALID_NODE_IP: &str = "InvalidNodeIP";
}
