//! # ccm-provider-fake
//!
//! An in-memory cloud implementing every ccm-core provider trait ([`CloudProvider`](ccm_core::CloudProvider),
//! [`InstancesV2`](ccm_core::InstancesV2), [`Instances`](ccm_core::Instances), [`Zones`](ccm_core::Zones),
//! [`LoadBalancer`](ccm_core::LoadBalancer), [`Routes`](ccm_core::Routes), [`Clusters`](ccm_core::Clusters)),
//! for controller tests, demos and as a reference of the provider contracts.
//!
//! - [`FakeCloud`] holds instances ([`FakeInstance`]), load balancers ([`FakeLoadBalancer`]), routes and
//!   clusters behind one mutex: clones are cheap and share state, and changes made at run time (an instance
//!   removed or shut down, a fault injected) are seen by the next call;
//! - every call is counted and logged ([`Call`], naming its [`Operation`], whose names are the one table of
//!   operation names of ccm-core; the log keeps the most recent [`CALL_LOG_LIMIT`]); errors can be injected per operation
//!   ([`Fault`], [`Times`], [`InjectedError`], including the retry-after error) and answers delayed
//!   ([`FakeCloud::set_latency`], honouring paused tokio time), and an API quota can be enforced
//!   ([`FakeCloud::set_quota`], answering [`CloudError::Throttled`](ccm_core::CloudError::Throttled) beyond it);
//! - an inventory's `randomFaults` ([`RandomFaultsSpec`]) fails calls at random with a given probability and
//!   adds a random latency (`latency ± jitter`), optionally in a time window, from a seeded generator;
//! - the cloud can write its state ([`CloudSnapshot`]) to a file whenever its load balancers change
//!   ([`FakeCloud::set_state_file`], the inventory's `stateFile`), for tests that run the CCM in another
//!   process;
//! - an [`Inventory`] YAML file describes a whole cloud, so a CCM can run against it with
//!   `--cloud-provider=fake --cloud-config=inventory.yaml` after [`FakeCloud::register`]; a changed inventory
//!   is applied without a restart through the provider's reload hook ([`FakeCloud::reload_inventory`]), and
//!   [`InstanceDefaults`] fill in every inventory instance.
//!
//! Nothing is random unless `randomFaults` asks for it: load-balancer IPs are allocated in order from `203.0.113.0/24` (or the inventory's
//! pool).
//!
//! ```
//! use std::sync::Arc;
//! use ccm_core::CloudProvider;
//! use ccm_provider_fake::{Call, FakeCloud, FakeInstance, Operation};
//! use k8s_openapi::api::core::v1::Node;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let cloud = FakeCloud::new();
//! cloud.add_instance(FakeInstance::new("node-a").with_internal_ip("10.0.0.11").with_zone("zone-a", "region-1"));
//!
//! // the capability accessors take an `Arc` of the provider (a FakeCloud clone shares the same cloud)
//! let v2 = Arc::new(cloud.clone()).instances_v2().expect("InstancesV2 is on by default");
//! let mut node = Node::default();
//! node.metadata.name = Some("node-a".into());
//! let meta = v2.instance_metadata(&node).await.unwrap().into_found().expect("node-a exists");
//! assert_eq!(meta.provider_id, "fake://node-a");
//!
//! cloud.remove_instance("node-a");
//! assert!(!v2.instance_exists(&node).await.unwrap());
//! assert_eq!(cloud.calls()[1], Call::new(Operation::InstanceExists, "node-a"));
//! # }
//! ```
//!
//! ## Cargo features
//!
//! None: this crate has no optional features. Like every library crate of the SDK it enables no `k8s-openapi`
//! version feature; the binary or test that uses it selects the Kubernetes API version (e.g. `k8s-openapi/v1_36`).

mod cloud;
mod fault;
mod instance;
mod inventory;
mod provider;
mod quota;
mod random;
mod random_spec;
mod registry;
mod reload;
mod snapshot;

/// The provider capabilities (re-exported from ccm-core), switched with [`FakeCloud::set_capability`].
pub use ccm_core::intercept::Capability;
/// The provider operations (re-exported from ccm-core): what the call log records and what faults and latencies
/// are set for. Their names (`create`, `instance-exists`, ...) are the ones inventories use.
pub use ccm_core::intercept::Operation;
pub use cloud::{
    CALL_LOG_LIMIT, DEFAULT_CLUSTER, DEFAULT_LOAD_BALANCER_IP_POOL, FakeCloud, FakeLoadBalancer,
    FakePort, LOAD_BALANCER_CALL_LOG_LIMIT, PROVIDER_NAME,
};
pub use fault::{Call, Fault, InjectedError, LoadBalancerCall, Times};
pub use instance::FakeInstance;
pub use inventory::{
    AddressSpec, AddressType, CapabilitiesSpec, FaultKind, FaultSpec, InstanceSpec, Inventory,
    InventoryError, IpModeSpec, Position, QuotaSpec, RouteSpec, ZoneSpec,
};
pub use quota::QuotaError;
pub use random_spec::{RandomFaultSpec, RandomFaultsSpec};
pub use reload::InstanceDefaults;
pub use snapshot::{CloudSnapshot, LoadBalancerSnapshot, PortSnapshot, RestoreError};
