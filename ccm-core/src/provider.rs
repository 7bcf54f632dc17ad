//! The provider traits a cloud vendor implements: the Rust shape of Go's `cloudprovider.Interface`.
//!
//! [`CloudProvider`] is the root; each capability ([`LoadBalancer`], [`Instances`], [`InstancesV2`], [`Zones`],
//! [`Clusters`], [`Routes`]) is optional and reported through an accessor returning `None` when unsupported.
//! Every trait is async, object-safe and `Send + Sync`, so controllers hold them as `Arc<dyn ...>`.
//!
//! With the `mock` feature, mockall mocks (`MockCloudProvider`, `MockLoadBalancer`, ...) are generated for
//! downstream tests.
//!
//! Every method's documentation says when the runtime (ccm-app and the controllers of this SDK) calls it. Calls
//! made by a controller go through the runtime's interceptors: the cloud-call budget may delay them, the call
//! timeout may end them, and the instance cache may answer `instance_metadata` / `instance_exists` from a recent
//! answer or share one call between concurrent callers (existence and shutdown checks of the lifecycle pass are
//! always fresh; docs/cloud-budget.md). A call is never made while this replica is not the confirmed leader (the
//! leadership fence, [`crate::fence`]).
//!
//! One type serving two capabilities, `InstancesV2` and `Routes`:
//!
//! ```
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use ccm_core::{CloudError, CloudProvider, InstanceLookup, InstanceMetadata, InstancesV2, Route, Routes};
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
//!     fn routes(self: Arc<Self>) -> Option<Arc<dyn Routes>> {
//!         Some(self)
//!     }
//! }
//!
//! #[async_trait]
//! impl InstancesV2 for Acme {
//!     async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
//!         Ok(node.metadata.name.as_deref() != Some("gone"))
//!     }
//!     async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
//!         Ok(false)
//!     }
//!     async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError> {
//!         match node.metadata.name.as_deref() {
//!             Some("gone") | None => Err(CloudError::InstanceNotFound),
//!             Some(name) => Ok(InstanceMetadata::new(format!("acme://{name}")).with_zone("zone-a").into()),
//!         }
//!     }
//! }
//!
//! #[async_trait]
//! impl Routes for Acme {
//!     async fn list_routes(&self, _cluster: &str) -> Result<Vec<Route>, CloudError> {
//!         Ok(vec![Route::new("n1", "10.244.1.0/24")])
//!     }
//!     async fn create_route(&self, _cluster: &str, _hint: &str, _route: &Route) -> Result<(), CloudError> {
//!         Ok(())
//!     }
//!     async fn delete_route(&self, _cluster: &str, _route: &Route) -> Result<(), CloudError> {
//!         Ok(())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let cloud: Arc<dyn CloudProvider> = Arc::new(Acme);
//! assert!(Arc::clone(&cloud).load_balancer().is_none());
//! let v2 = Arc::clone(&cloud).instances_v2().expect("acme serves InstancesV2");
//! let routes = Arc::clone(&cloud).routes().expect("acme serves Routes");
//!
//! let mut node = Node::default();
//! node.metadata.name = Some("n1".into());
//! let lookup = v2.instance_metadata(&node).await.unwrap();
//! assert_eq!(lookup.found().map(|m| m.provider_id.as_str()), Some("acme://n1"));
//! node.metadata.name = Some("gone".into());
//! assert!(v2.instance_metadata(&node).await.unwrap_err().is_instance_not_found());
//! assert_eq!(routes.list_routes("kubernetes").await.unwrap().len(), 1);
//! # });
//! ```

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{self, StreamExt};
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};
use tokio_util::sync::CancellationToken;

use crate::error::CloudError;
use crate::listing::LoadBalancerPage;
use crate::reload::ReloadContext;
use crate::types::{InstanceLookup, Route, Zone};

/// What [`CloudProvider::initialize`] receives: a Kubernetes client and the process's shutdown signal.
#[derive(Clone)]
#[non_exhaustive]
pub struct InitializeContext {
    /// A client for the cluster, with the CCM's identity.
    pub client: kube::Client,
    /// Cancelled when the CCM stops or loses leadership; background tasks started by the provider must stop then.
    pub shutdown: CancellationToken,
}

impl InitializeContext {
    /// A context from a client and a shutdown token.
    pub fn new(client: kube::Client, shutdown: CancellationToken) -> Self {
        InitializeContext { client, shutdown }
    }
}

impl std::fmt::Debug for InitializeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InitializeContext").finish_non_exhaustive()
    }
}

/// The root provider trait (Go: `cloudprovider.Interface`).
///
/// Every capability accessor defaults to `None` ("unsupported"); a provider overrides the ones it has. The
/// accessors take `self: Arc<Self>` (dispatchable through `Arc<dyn CloudProvider>`): a type that implements a
/// capability itself returns `Some(self)`, a provider built from per-capability types returns clones of the
/// `Arc`s it holds. Call them on a clone of a handle you still need: `Arc::clone(&cloud).routes()`.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait CloudProvider: Send + Sync + 'static {
    /// The provider's name, used as the `<name>://` providerID prefix and in logs.
    ///
    /// Called whenever the runtime needs it: to build providerIDs (V1 instances), in log lines and warnings, and
    /// by the doctor.
    fn provider_name(&self) -> &str;

    /// Called at the start of every leadership term of this replica (once per term: again after leadership was
    /// lost and regained), after the API server answered and the shared informers were created, before any
    /// controller starts. Without leader election, once at start-up.
    ///
    /// A provider may start leader-only background work here; it must stop when `ctx.shutdown` is cancelled (at
    /// shutdown or when leadership is lost). Work every replica needs belongs in the provider factory's
    /// [`BackgroundTasks`](crate::background::BackgroundTasks). Unlike Go, an error is returned to the runtime,
    /// which stops the CCM with that error.
    async fn initialize(&self, ctx: InitializeContext) -> Result<(), CloudError> {
        let _ = ctx;
        Ok(())
    }

    /// Apply changed configuration without a restart (opt-in): called in every replica, leader or not, when the
    /// runtime's periodic check of `--cloud-config` and of the files the factory declared with
    /// [`ProviderSettings::watch_file`](crate::registry::ProviderSettings::watch_file) finds new contents (one
    /// reload at a time; contents it rejected are not offered again until they change). Return an error to reject
    /// the new contents and keep the old configuration. The default,
    /// [`CloudError::NotImplemented`], means a restart is needed (as in Go). See [`crate::reload`].
    async fn reload(&self, ctx: ReloadContext) -> Result<(), CloudError> {
        let _ = ctx;
        Err(CloudError::NotImplemented)
    }

    /// Load balancers for `type: LoadBalancer` Services, if supported.
    ///
    /// Called when the service controller starts (each leadership term): `None` means the controller does not
    /// start (a warning says so), as in Go.
    fn load_balancer(self: Arc<Self>) -> Option<Arc<dyn LoadBalancer>> {
        None
    }

    /// The legacy V1 instance API, if supported. Not used when [`instances_v2`](Self::instances_v2) is supported.
    ///
    /// Called when the cloud node and node lifecycle controllers start (each leadership term), only if
    /// `instances_v2` returned `None`; with neither, those controllers do not start.
    fn instances(self: Arc<Self>) -> Option<Arc<dyn Instances>> {
        None
    }

    /// The preferred instance API, if supported. When supported, `instances` and `zones` are never called.
    ///
    /// Called when the cloud node and node lifecycle controllers start (each leadership term); the runtime's
    /// provider wrappers (budget, cache) forward the call.
    fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
        None
    }

    /// Zones (deprecated; used only with the V1 instance API), if supported.
    ///
    /// Called when the node controllers start with the V1 instance API; `None` leaves nodes without zone labels.
    fn zones(self: Arc<Self>) -> Option<Arc<dyn Zones>> {
        None
    }

    /// Cluster listing, if supported. The runtime never calls it (no controller uses clusters).
    fn clusters(self: Arc<Self>) -> Option<Arc<dyn Clusters>> {
        None
    }

    /// Pod-CIDR routes, if supported.
    ///
    /// Called when the route controller starts (each leadership term), only with `--configure-cloud-routes`:
    /// `None` means the controller does not start (a warning says so), as in Go.
    fn routes(self: Arc<Self>) -> Option<Arc<dyn Routes>> {
        None
    }

    /// Whether the provider has a cluster ID (Go: `HasClusterID`).
    ///
    /// Called once at start-up in every replica, right after the provider factory built the provider and before
    /// leader election: `false` stops the start-up with an error (the CCM exits) unless `--allow-untagged-cloud`
    /// is set, which logs a warning instead (Go's behaviour).
    fn has_cluster_id(&self) -> bool {
        true
    }
}

/// Cloud load balancers (Go: `cloudprovider.LoadBalancer`).
///
/// Every method receives the Service read-only. `cluster_name` is `--cluster-name` (default `kubernetes`). Only
/// the service controller calls these methods, from its workers (at most `--concurrent-service-syncs` Services at
/// once, one call at a time per Service) and its node-sync pass.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait LoadBalancer: Send + Sync + 'static {
    /// The load balancer's status if it exists, `None` if it does not.
    ///
    /// Called before deleting a load balancer (a Service that no longer wants one, or is being deleted with the
    /// finalizer), and after a failed [`update_load_balancer`](Self::update_load_balancer) (a load balancer that
    /// no longer exists is not an error).
    ///
    /// For Services whose load balancer is implemented elsewhere, report `Some` only for load balancers this
    /// provider created.
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError>;

    /// The cloud name of the Service's load balancer. The runtime never calls it.
    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        let _ = cluster_name;
        crate::helpers::default_load_balancer_name(service)
    }

    /// Create or update the load balancer so it serves `service` through `nodes`, and return its status.
    ///
    /// Called when a Service wants a load balancer and was added, or changed in a field that affects it (type,
    /// ports, annotations, `loadBalancerIP`, source ranges, external traffic policy, ...), when the service
    /// controller starts (once for each existing Service), after a failed node update, on retries with backoff,
    /// and every `periodic_reensure` when that is set. `nodes` is the stable node set, sorted by name.
    ///
    /// The status must contain at least one ingress entry: an empty status is treated as an error. While the
    /// load balancer is still being built, return [`CloudError::Retry`]. Return
    /// [`CloudError::ImplementedElsewhere`] for Services another controller serves.
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError>;

    /// Replace the load balancer's backend hosts with `nodes`.
    ///
    /// Called by the node-sync pass when the set of nodes eligible for load balancers changed (a node added,
    /// removed, excluded, tainted for deletion...), once per load balancer per pass, for Services that already
    /// have a load balancer. Changes are coalesced: passes start at most once per `--service-node-sync-max-delay`.
    /// A failure makes the Service's next sync re-ensure it.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError>;

    /// Delete the load balancer. Idempotent: succeeds if it does not exist. Must not return
    /// [`CloudError::ImplementedElsewhere`].
    ///
    /// Called when a Service with the controller's finalizer no longer wants a load balancer or is being deleted
    /// (after [`get_load_balancer`](Self::get_load_balancer) found one), when a Service the controller synced
    /// disappears without the finalizer, and when a Service is re-created under its name with a new UID.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError>;

    /// Whether [`list_load_balancers`](Self::list_load_balancers) is implemented. The service controller asks once
    /// when it starts; `false` (the default) keeps Go's takeover: one `ensure_load_balancer` per Service.
    fn supports_listing(&self) -> bool {
        false
    }

    /// One page of the load balancers this provider created for `cluster_name`, with their ports, backends and
    /// the [fingerprint](crate::listing::load_balancer_fingerprint) of the Service each was last ensured for.
    ///
    /// The service controller calls it when it starts (a new leader, a restarted CCM), page after page from
    /// `page_token: None` until a page has no `next_page`, and skips the ensure of every Service whose load
    /// balancer is listed and matches it ([`ObservedLoadBalancer::drift`](crate::listing::ObservedLoadBalancer::drift)).
    /// List only load balancers of this cluster; a load balancer missing from the listing is ensured. Called only
    /// when [`supports_listing`](Self::supports_listing) is true; an error makes the controller ensure every
    /// Service, as Go does.
    async fn list_load_balancers(
        &self,
        cluster_name: &str,
        page_token: Option<String>,
    ) -> Result<LoadBalancerPage, CloudError> {
        let _ = (cluster_name, page_token);
        Err(CloudError::NotImplemented)
    }
}

/// The legacy V1 instance API (Go: `cloudprovider.Instances`).
///
/// Used only when [`CloudProvider::instances_v2`] returns `None`. The cloud node controller calls these methods
/// to initialize a node (one carrying the `node.cloudprovider.kubernetes.io/uninitialized` taint) and, every
/// `--node-status-update-frequency` (5 min), to refresh each node's addresses; the node lifecycle controller, every
/// `--node-monitor-period` (5 s), for each node that is not Ready.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait Instances: Send + Sync + 'static {
    /// The addresses of the named node: the fallback when
    /// [`node_addresses_by_provider_id`](Self::node_addresses_by_provider_id) fails, at initialization and in the
    /// address sync.
    async fn node_addresses(&self, node_name: &str) -> Result<Vec<NodeAddress>, CloudError>;
    /// The addresses of the instance with this providerID; must not depend on local metadata. Called at
    /// initialization and by every address sync.
    async fn node_addresses_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Vec<NodeAddress>, CloudError>;
    /// The cloud's instance ID of the named node; [`CloudError::InstanceNotFound`] if it is gone (never for a
    /// stopped instance). Called to build the providerID `<provider>://<instance id>` of a node whose
    /// `spec.providerID` is empty (initialization, lifecycle checks); [`CloudError::NotImplemented`] means "no
    /// providerID".
    async fn instance_id(&self, node_name: &str) -> Result<String, CloudError>;
    /// The instance type of the named node: the fallback when
    /// [`instance_type_by_provider_id`](Self::instance_type_by_provider_id) fails, at initialization.
    async fn instance_type(&self, node_name: &str) -> Result<String, CloudError>;
    /// The instance type of the instance with this providerID. Called at initialization (the
    /// `node.kubernetes.io/instance-type` label).
    async fn instance_type_by_provider_id(&self, provider_id: &str) -> Result<String, CloudError>;
    /// Legacy; the runtime never calls it.
    async fn add_ssh_key_to_all_instances(&self, user: &str, key: &[u8]) -> Result<(), CloudError> {
        let _ = (user, key);
        Err(CloudError::NotImplemented)
    }
    /// Legacy; the runtime never calls it.
    async fn current_node_name(&self, hostname: &str) -> Result<String, CloudError> {
        Ok(hostname.to_owned())
    }
    /// Whether the instance exists; `false` with no error means the Node is deleted. True for stopped instances.
    /// Called by the lifecycle controller, every `--node-monitor-period`, for each node that is not Ready.
    async fn instance_exists_by_provider_id(&self, provider_id: &str) -> Result<bool, CloudError>;
    /// Whether the instance is shut down; [`CloudError::NotImplemented`] counts as "not shut down". Called by the
    /// lifecycle controller right after [`instance_exists_by_provider_id`](Self::instance_exists_by_provider_id)
    /// answered `true` for a node that is not Ready (a shut-down instance gets the
    /// `node.cloudprovider.kubernetes.io/shutdown` taint).
    async fn instance_shutdown_by_provider_id(&self, provider_id: &str)
    -> Result<bool, CloudError>;
}

/// The preferred instance API (Go: `cloudprovider.InstancesV2`); every call receives the whole Node.
///
/// Each method says when it is called: the cloud node controller's address sync runs every
/// `--node-status-update-frequency` (5 min), the node lifecycle controller's pass every `--node-monitor-period`
/// (5 s; Ready nodes cost no call).
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait InstancesV2: Send + Sync + 'static {
    /// Whether the node's instance exists (look it up by `spec.providerID`, or by name). `false` with no error
    /// means the Node may be deleted; stopped instances exist.
    ///
    /// Called by the lifecycle controller, every `--node-monitor-period`, for each node that is not Ready (one
    /// [`instance_exists_bulk`](Self::instance_exists_bulk) call per pass instead with bulk support).
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError>;
    /// Whether the node's instance is shut down.
    ///
    /// Called by the lifecycle controller right after [`instance_exists`](Self::instance_exists) (or the bulk
    /// answer) said that a node that is not Ready exists: `true` taints it with
    /// `node.cloudprovider.kubernetes.io/shutdown`.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError>;
    /// The instance's metadata: `Ok(metadata.into())` ([`InstanceLookup::Found`]) when the instance exists,
    /// `Err(`[`CloudError::InstanceNotFound`]`)` when it does not (never for a stopped instance), other errors
    /// when the cloud could not answer.
    ///
    /// [`InstanceLookup::skip`] makes the node controller skip the node on purpose (Go: `(nil, nil)`): it logs
    /// the reason as "Skip sync node" and does not retry until the node changes or the next resync. Use it only
    /// for nodes this provider deliberately does not manage; an unknown instance is `InstanceNotFound`.
    ///
    /// Called by the cloud node controller when it initializes a node (a node with the
    /// `node.cloudprovider.kubernetes.io/uninitialized` taint: once, then with backoff while it fails), and every
    /// `--node-status-update-frequency` for each initialized node to refresh its addresses (one
    /// [`instance_metadata_bulk`](Self::instance_metadata_bulk) call per pass instead with bulk support).
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceLookup, CloudError>;

    /// Whether [`instance_metadata_bulk`](Self::instance_metadata_bulk),
    /// [`instance_exists_bulk`](Self::instance_exists_bulk) and
    /// [`instance_shutdown_bulk`](Self::instance_shutdown_bulk) are implemented natively, answering for any number of
    /// nodes with one (or a few) cloud calls. The controllers use the bulk methods only when this is true.
    ///
    /// Called when the node controllers start and at each periodic pass.
    fn supports_bulk(&self) -> bool {
        false
    }

    /// Metadata for many nodes at once, in the order of `nodes`. The outer error means the whole call failed.
    ///
    /// Called once per address-sync pass (every `--node-status-update-frequency`) with every initialized node,
    /// only when [`supports_bulk`](Self::supports_bulk) is true; initialization calls
    /// [`instance_metadata`](Self::instance_metadata).
    ///
    /// The default makes one [`instance_metadata`](Self::instance_metadata) call per node, one after another;
    /// a provider that can list its instances should override it (and [`supports_bulk`](Self::supports_bulk)).
    async fn instance_metadata_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<InstanceLookup, CloudError>>, CloudError> {
        Ok(one_by_one(nodes, |n| self.instance_metadata(n)).await)
    }

    /// Existence of many nodes' instances at once, in the order of `nodes`. The outer error means the whole call
    /// failed. The default makes one [`instance_exists`](Self::instance_exists) call per node.
    ///
    /// Called once per lifecycle pass (every `--node-monitor-period`) with the nodes that are not Ready, only when
    /// [`supports_bulk`](Self::supports_bulk) is true.
    async fn instance_exists_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        Ok(one_by_one(nodes, |n| self.instance_exists(n)).await)
    }

    /// Whether many nodes' instances are shut down, at once, in the order of `nodes`. The outer error means the
    /// whole call failed. The default makes one [`instance_shutdown`](Self::instance_shutdown) call per node.
    ///
    /// Called once per lifecycle pass (every `--node-monitor-period`), after
    /// [`instance_exists_bulk`](Self::instance_exists_bulk), with the nodes that are not Ready and whose instance
    /// exists, only when [`supports_bulk`](Self::supports_bulk) is true. A provider whose bulk lookup returns the
    /// instance state (EC2's `DescribeInstances` does) answers both questions with the same kind of request.
    async fn instance_shutdown_bulk(
        &self,
        nodes: &[Node],
    ) -> Result<Vec<Result<bool, CloudError>>, CloudError> {
        Ok(one_by_one(nodes, |n| self.instance_shutdown(n)).await)
    }
}

/// Zones (Go: `cloudprovider.Zones`, deprecated); used only with the V1 instance API, by the cloud node controller
/// when it initializes a node (the `topology.kubernetes.io/zone` and `region` labels).
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait Zones: Send + Sync + 'static {
    /// The zone of the machine this code runs on (for kubelets). The runtime never calls it.
    async fn get_zone(&self) -> Result<Zone, CloudError>;
    /// The zone of the instance with this providerID. Called at initialization.
    async fn get_zone_by_provider_id(&self, provider_id: &str) -> Result<Zone, CloudError>;
    /// The zone of the named node: the fallback when [`get_zone_by_provider_id`](Self::get_zone_by_provider_id)
    /// fails, at initialization.
    async fn get_zone_by_node_name(&self, node_name: &str) -> Result<Zone, CloudError>;
}

/// Clusters (Go: `cloudprovider.Clusters`). The runtime never calls its methods.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait Clusters: Send + Sync + 'static {
    /// The names of all clusters.
    async fn list_clusters(&self) -> Result<Vec<String>, CloudError>;
    /// The address of the named cluster's control plane.
    async fn master(&self, cluster_name: &str) -> Result<String, CloudError>;
}

/// Pod-CIDR routes (Go: `cloudprovider.Routes`).
///
/// Only the route controller calls these methods (it runs with `--configure-cloud-routes`, the default, and a
/// `--cluster-cidr`), in passes: by default a pass starts 250 ms after a relevant Node change (added, deleted, pod
/// CIDRs or addresses changed) and at least every 5 minutes; in Go's periodic mode, every
/// `--route-reconciliation-period` (10 s). A pass lists the routes once, then deletes and creates what differs.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait Routes: Send + Sync + 'static {
    /// Every route this cluster manages. Called once at the start of every pass.
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError>;
    /// Create a route; `route.name` is ignored and `name_hint` (the node UID) may be used to name it. Called in a
    /// pass for each pod CIDR of a Node without a matching route (and to re-create a route whose target
    /// addresses changed).
    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError>;
    /// Delete a route previously returned by [`list_routes`](Self::list_routes). Called in a pass for each listed
    /// route inside the cluster CIDRs that no Node's pod CIDR wants (a deleted Node, a moved CIDR, a blackhole).
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError>;
}

/// One call per node, one after another (`one_by_one(nodes, |node| v2.instance_exists(node))`): the default of
/// the bulk methods of [`InstancesV2`] for providers without a native bulk call.
pub async fn one_by_one<'n, T, F>(
    nodes: &'n [Node],
    call: impl FnMut(&'n Node) -> F,
) -> Vec<Result<T, CloudError>>
where
    F: Future<Output = Result<T, CloudError>>,
{
    stream::iter(nodes).then(call).collect().await
}
