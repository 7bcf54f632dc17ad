//! Provider middleware: wrap any [`CloudProvider`] so every call passes through interceptors.
//!
//! [`InterceptedProvider`] implements every provider trait by delegating to the wrapped provider. Before each
//! call, each [`ProviderInterceptor`] may wait (a rate limiter), add latency, or fail the call (fault injection);
//! after it, each interceptor sees the outcome and duration (metrics). An optional per-call timeout turns a hung
//! cloud call into [`CloudError::Timeout`].
//!
//! Every call is named by an [`Operation`], whose documentation is the table of the stable names (`create`,
//! `instance-exists`, `list-routes`, ...) used in metrics, errors, budgets, call logs and fault rules.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use async_trait::async_trait;
//! use ccm_core::intercept::{CallInfo, InterceptedProvider, ProviderInterceptor};
//! use ccm_core::{CloudError, CloudProvider};
//!
//! struct LogCalls;
//!
//! #[async_trait]
//! impl ProviderInterceptor for LogCalls {
//!     fn after_call(&self, call: &CallInfo<'_>, elapsed: Duration, outcome: Result<(), &CloudError>) {
//!         println!("{} {} took {elapsed:?}: ok={}", call.operation.as_str(), call.target, outcome.is_ok());
//!     }
//! }
//!
//! # struct Acme;
//! # impl CloudProvider for Acme { fn provider_name(&self) -> &str { "acme" } }
//! let cloud: Arc<dyn CloudProvider> = Arc::new(
//!     InterceptedProvider::new(Arc::new(Acme))
//!         .with_interceptor(LogCalls)
//!         .with_call_timeout(Duration::from_secs(30)),
//! );
//! assert_eq!(cloud.provider_name(), "acme");
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use strum::{Display, IntoStaticStr, VariantArray};
use tokio::time::Instant;

use crate::cache::{CachedV2, InstanceCache};
use crate::error::CloudError;
use crate::fence::LeadershipFence;
use crate::provider::{
    CloudProvider, Clusters, InitializeContext, Instances, InstancesV2, LoadBalancer, Routes, Zones,
};
use crate::reload::ReloadContext;

mod wrapped;
use wrapped::Wrapped;

/// A provider capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "kebab-case")]
#[non_exhaustive]
pub enum Capability {
    /// [`LoadBalancer`].
    LoadBalancer,
    /// [`Instances`] (V1).
    Instances,
    /// [`InstancesV2`].
    InstancesV2,
    /// [`Zones`].
    Zones,
    /// [`Clusters`].
    Clusters,
    /// [`Routes`].
    Routes,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; Self::VARIANTS.len()] =
        *Self::VARIANTS.first_chunk().expect("all variants");

    /// A stable lower-case name (`load-balancer`, `instances-v2`, ...).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether `provider` supports this capability.
    pub fn supported_by(self, provider: &Arc<dyn CloudProvider>) -> bool {
        let provider = Arc::clone(provider);
        match self {
            Capability::LoadBalancer => provider.load_balancer().is_some(),
            Capability::Instances => provider.instances().is_some(),
            Capability::InstancesV2 => provider.instances_v2().is_some(),
            Capability::Zones => provider.zones().is_some(),
            Capability::Clusters => provider.clusters().is_some(),
            Capability::Routes => provider.routes().is_some(),
        }
    }
}

/// One provider method, by its stable name: **the one table of cloud operation names**.
///
/// [`as_str`](Operation::as_str) (and `Display`) is the only spelling of an operation anywhere in the SDK: the
/// `operation` label of the cloud-call metrics (`cloudprovider_api_requests_total`, the budget-wait histogram,
/// the instance cache's counters), the per-operation limits of the cloud-call budget
/// (`--cloud-api-operation-limit`, `cloudApiOperationLimits`), [`CloudError::Timeout`], the node controllers'
/// errors, the fake provider's call log, fault injection and inventory, and the conformance suite's fault
/// rules. Where the Go reference fake provider logs a call, the name is the one it logs, so tests ported from Go
/// read the same; the others (`get-load-balancer`, `master`, `initialize`, the bulk calls) are ours.
///
/// | operation | name | the call's target ([`CallInfo::target`]) |
/// |---|---|---|
/// | [`Initialize`](Operation::Initialize) | `initialize` | `""` (not intercepted, see below) |
/// | [`GetLoadBalancer`](Operation::GetLoadBalancer) | `get-load-balancer` | the Service, `namespace/name` |
/// | [`EnsureLoadBalancer`](Operation::EnsureLoadBalancer) | `create` | the Service |
/// | [`UpdateLoadBalancer`](Operation::UpdateLoadBalancer) | `update` | the Service |
/// | [`EnsureLoadBalancerDeleted`](Operation::EnsureLoadBalancerDeleted) | `delete` | the Service |
/// | [`NodeAddresses`](Operation::NodeAddresses) | `node-addresses` | the node name |
/// | [`NodeAddressesByProviderId`](Operation::NodeAddressesByProviderId) | `node-addresses-by-provider-id` | the providerID |
/// | [`InstanceId`](Operation::InstanceId) | `instance-id` | the node name |
/// | [`InstanceType`](Operation::InstanceType) | `instance-type` | the node name |
/// | [`InstanceTypeByProviderId`](Operation::InstanceTypeByProviderId) | `instance-type-by-provider-id` | the providerID |
/// | [`InstanceExistsByProviderId`](Operation::InstanceExistsByProviderId) | `instance-exists-by-provider-id` | the providerID |
/// | [`InstanceShutdownByProviderId`](Operation::InstanceShutdownByProviderId) | `instance-shutdown-by-provider-id` | the providerID |
/// | [`InstanceExists`](Operation::InstanceExists) | `instance-exists` | the node's providerID, or its name if it has none |
/// | [`InstanceShutdown`](Operation::InstanceShutdown) | `instance-shutdown` | the node's providerID, or its name |
/// | [`InstanceMetadata`](Operation::InstanceMetadata) | `instance-metadata-by-provider-id` | the node's providerID, or its name |
/// | [`InstanceMetadataBulk`](Operation::InstanceMetadataBulk) | `instance-metadata-bulk` | `<n> nodes` |
/// | [`InstanceExistsBulk`](Operation::InstanceExistsBulk) | `instance-exists-bulk` | `<n> nodes` |
/// | [`InstanceShutdownBulk`](Operation::InstanceShutdownBulk) | `instance-shutdown-bulk` | `<n> nodes` |
/// | [`GetZone`](Operation::GetZone) | `get-zone` | `""` |
/// | [`GetZoneByProviderId`](Operation::GetZoneByProviderId) | `get-zone-by-provider-id` | the providerID |
/// | [`GetZoneByNodeName`](Operation::GetZoneByNodeName) | `get-zone-by-node-name` | the node name |
/// | [`ListClusters`](Operation::ListClusters) | `list` | `""` |
/// | [`Master`](Operation::Master) | `master` | the cluster name |
/// | [`ListRoutes`](Operation::ListRoutes) | `list-routes` | the cluster name |
/// | [`CreateRoute`](Operation::CreateRoute) | `create-route` | the destination CIDR |
/// | [`DeleteRoute`](Operation::DeleteRoute) | `delete-route` | the destination CIDR |
/// | [`ListLoadBalancers`](Operation::ListLoadBalancers) | `list-load-balancers` | the cluster name |
///
/// [`CloudProvider::initialize`] runs once at startup and is not intercepted ([`is_intercepted`] is false):
/// [`InterceptedProvider`] passes it straight through, so it has no metrics, no budget and no call timeout, and
/// a budget limit or a conformance fault rule cannot name it. The fake provider logs it and can fail it.
///
/// [`is_intercepted`]: Operation::is_intercepted
///
/// ```
/// use ccm_core::intercept::{Capability, Operation};
///
/// assert_eq!(Operation::EnsureLoadBalancer.to_string(), "create");
/// assert_eq!(Operation::from_name("list-routes"), Some(Operation::ListRoutes));
/// assert_eq!(Operation::InstanceMetadata.capability(), Some(Capability::InstancesV2));
/// assert!(Operation::from_name("instance-metadata").is_none());
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, IntoStaticStr, Display, VariantArray,
)]
#[strum(serialize_all = "kebab-case")]
#[non_exhaustive]
pub enum Operation {
    /// [`CloudProvider::initialize`] (not intercepted).
    Initialize,
    /// [`LoadBalancer::get_load_balancer`].
    GetLoadBalancer,
    /// [`LoadBalancer::ensure_load_balancer`].
    #[strum(serialize = "create")]
    EnsureLoadBalancer,
    /// [`LoadBalancer::update_load_balancer`].
    #[strum(serialize = "update")]
    UpdateLoadBalancer,
    /// [`LoadBalancer::ensure_load_balancer_deleted`].
    #[strum(serialize = "delete")]
    EnsureLoadBalancerDeleted,
    /// [`Instances::node_addresses`].
    NodeAddresses,
    /// [`Instances::node_addresses_by_provider_id`].
    NodeAddressesByProviderId,
    /// [`Instances::instance_id`].
    InstanceId,
    /// [`Instances::instance_type`].
    InstanceType,
    /// [`Instances::instance_type_by_provider_id`].
    InstanceTypeByProviderId,
    /// [`Instances::instance_exists_by_provider_id`].
    InstanceExistsByProviderId,
    /// [`Instances::instance_shutdown_by_provider_id`].
    InstanceShutdownByProviderId,
    /// [`InstancesV2::instance_exists`].
    InstanceExists,
    /// [`InstancesV2::instance_shutdown`].
    InstanceShutdown,
    /// [`InstancesV2::instance_metadata`].
    #[strum(serialize = "instance-metadata-by-provider-id")]
    InstanceMetadata,
    /// [`InstancesV2::instance_metadata_bulk`] (native bulk implementations only).
    InstanceMetadataBulk,
    /// [`InstancesV2::instance_exists_bulk`] (native bulk implementations only).
    InstanceExistsBulk,
    /// [`InstancesV2::instance_shutdown_bulk`] (native bulk implementations only).
    InstanceShutdownBulk,
    /// [`Zones::get_zone`].
    GetZone,
    /// [`Zones::get_zone_by_provider_id`].
    GetZoneByProviderId,
    /// [`Zones::get_zone_by_node_name`].
    GetZoneByNodeName,
    /// [`Clusters::list_clusters`].
    #[strum(serialize = "list")]
    ListClusters,
    /// [`Clusters::master`].
    Master,
    /// [`Routes::list_routes`].
    ListRoutes,
    /// [`Routes::create_route`].
    CreateRoute,
    /// [`Routes::delete_route`].
    DeleteRoute,
    /// [`LoadBalancer::list_load_balancers`] (native listings only), one call per page.
    ListLoadBalancers,
}

impl Operation {
    /// Every operation, in the order of the table above.
    pub const ALL: [Operation; Self::VARIANTS.len()] =
        *Self::VARIANTS.first_chunk().expect("all variants");

    /// The stable name (see the table above).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The operation with this name.
    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| op.as_str() == name)
    }

    /// Every name, comma separated, in table order (for error messages that list the known names).
    pub fn names() -> String {
        Operation::ALL.map(Operation::as_str).join(", ")
    }

    /// The names of the [intercepted](Operation::is_intercepted) operations, comma separated (what a budget
    /// limit or a fault rule may name).
    pub fn intercepted_names() -> String {
        Operation::ALL
            .into_iter()
            .filter(|op| op.is_intercepted())
            .map(Operation::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether [`InterceptedProvider`] passes calls of this operation through its interceptors (every
    /// operation but [`Initialize`](Operation::Initialize)).
    pub fn is_intercepted(self) -> bool {
        self != Operation::Initialize
    }

    /// The capability the operation belongs to (`None` for [`Initialize`](Operation::Initialize), which
    /// every provider has).
    pub fn capability(self) -> Option<Capability> {
        use Operation::*;
        Some(match self {
            Initialize => return None,
            GetLoadBalancer
            | EnsureLoadBalancer
            | UpdateLoadBalancer
            | EnsureLoadBalancerDeleted
            | ListLoadBalancers => Capability::LoadBalancer,
            NodeAddresses
            | NodeAddressesByProviderId
            | InstanceId
            | InstanceType
            | InstanceTypeByProviderId
            | InstanceExistsByProviderId
            | InstanceShutdownByProviderId => Capability::Instances,
            InstanceExists | InstanceShutdown | InstanceMetadata | InstanceMetadataBulk
            | InstanceExistsBulk | InstanceShutdownBulk => Capability::InstancesV2,
            GetZone | GetZoneByProviderId | GetZoneByNodeName => Capability::Zones,
            ListClusters | Master => Capability::Clusters,
            ListRoutes | CreateRoute | DeleteRoute => Capability::Routes,
        })
    }
}

/// What is being called: the operation and its target (a node name, a providerID, a Service key `ns/name`, a
/// cluster name or a route CIDR).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CallInfo<'a> {
    /// The provider method.
    pub operation: Operation,
    /// What it is about.
    pub target: &'a str,
}

impl<'a> CallInfo<'a> {
    /// A call of `operation` on `target`.
    pub fn new(operation: Operation, target: &'a str) -> Self {
        CallInfo { operation, target }
    }
}

/// A hook around every provider call. Both methods have no-op defaults.
#[async_trait]
pub trait ProviderInterceptor: Send + Sync + 'static {
    /// Runs before the provider is called; an error fails the call without calling the provider.
    async fn before_call(&self, call: &CallInfo<'_>) -> Result<(), CloudError> {
        let _ = call;
        Ok(())
    }

    /// Runs after the call finished (or was failed by an interceptor), with its duration and outcome.
    fn after_call(&self, call: &CallInfo<'_>, elapsed: Duration, outcome: Result<(), &CloudError>) {
        let _ = (call, elapsed, outcome);
    }
}

#[derive(Clone, Default)]
struct Chain {
    interceptors: Vec<Arc<dyn ProviderInterceptor>>,
    timeout: Option<Duration>,
    fence: Option<LeadershipFence>,
}

impl Chain {
    async fn call<T, F>(&self, operation: Operation, target: &str, f: F) -> Result<T, CloudError>
    where
        F: Future<Output = Result<T, CloudError>> + Send,
    {
        let info = CallInfo::new(operation, target);
        let start = Instant::now();
        let result = match (self.admit(&info).await, self.timeout) {
            (Err(err), _) => Err(err),
            (Ok(()), None) => f.await,
            (Ok(()), Some(after)) => tokio::time::timeout(after, f)
                .await
                .unwrap_or_else(|_| Err(CloudError::Timeout { operation, after })),
        };
        let elapsed = start.elapsed();
        let outcome = result.as_ref().map(|_| ());
        for interceptor in &self.interceptors {
            interceptor.after_call(&info, elapsed, outcome);
        }
        result
    }

    /// Every interceptor's `before_call`, then the fence: the first refusal fails the call.
    async fn admit(&self, info: &CallInfo<'_>) -> Result<(), CloudError> {
        for interceptor in &self.interceptors {
            interceptor.before_call(info).await?;
        }
        // The fence is checked last, right before the call: an interceptor may have waited (for budget) across
        // the moment leadership stopped being confirmed.
        let operation = info.operation;
        self.fence.as_ref().map_or(Ok(()), |fence| {
            fence
                .check()
                .map_err(|reason| CloudError::NotLeader { operation, reason })
        })
    }
}

/// A provider whose every call passes through interceptors (and an optional timeout), and whose InstancesV2
/// questions go through an optional [`InstanceCache`] first.
#[derive(Clone)]
pub struct InterceptedProvider {
    inner: Arc<dyn CloudProvider>,
    chain: Chain,
    cache: Option<Arc<InstanceCache>>,
}

impl std::fmt::Debug for InterceptedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterceptedProvider")
            .field("provider", &self.inner.provider_name())
            .field("interceptors", &self.chain.interceptors.len())
            .field("timeout", &self.chain.timeout)
            .field("fenced", &self.chain.fence.is_some())
            .field("cache", &self.cache)
            .finish()
    }
}

impl InterceptedProvider {
    /// Wrap `inner` with no interceptors yet.
    pub fn new(inner: Arc<dyn CloudProvider>) -> Self {
        InterceptedProvider {
            inner,
            chain: Chain::default(),
            cache: None,
        }
    }

    /// Add an interceptor; interceptors run in the order they were added.
    pub fn with_interceptor(self, interceptor: impl ProviderInterceptor) -> Self {
        self.with_shared_interceptor(Arc::new(interceptor))
    }

    /// Add an interceptor held elsewhere too (to read its state in tests or metrics).
    pub fn with_shared_interceptor(mut self, interceptor: Arc<dyn ProviderInterceptor>) -> Self {
        self.chain.interceptors.push(interceptor);
        self
    }

    /// Fail any provider call that takes longer than `limit` with [`CloudError::Timeout`].
    pub fn with_call_timeout(mut self, limit: Duration) -> Self {
        self.chain.timeout = Some(limit);
        self
    }

    /// Refuse every provider call with [`CloudError::NotLeader`], without calling the provider, while `fence` is
    /// closed (checked after the interceptors' `before_call`, right before the call). Without a fence every call
    /// may proceed.
    pub fn with_fence(mut self, fence: LeadershipFence) -> Self {
        self.chain.fence = Some(fence);
        self
    }

    /// Answer InstancesV2 questions through `cache` (see [`crate::cache`]), in front of the interceptors: an answer
    /// from the cache costs no budget and is not counted as a cloud call. A [`reload`](CloudProvider::reload) of
    /// the provider clears the cache.
    pub fn with_instance_cache(mut self, cache: Arc<InstanceCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// `capability` of the wrapped provider, its calls passing through the chain.
    fn wrap<T: ?Sized>(&self, inner: Arc<T>) -> Arc<Wrapped<T>> {
        let chain = self.chain.clone();
        Arc::new(Wrapped { inner, chain })
    }
}

#[async_trait]
impl CloudProvider for InterceptedProvider {
    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }
    async fn initialize(&self, ctx: InitializeContext) -> Result<(), CloudError> {
        self.inner.initialize(ctx).await
    }
    async fn reload(&self, ctx: ReloadContext) -> Result<(), CloudError> {
        // Not a cloud call: no budget, no fence.
        self.inner.reload(ctx).await?;
        // The new configuration may answer differently: forget what the old one said.
        if let Some(cache) = &self.cache {
            cache.clear();
        }
        Ok(())
    }
    fn load_balancer(self: Arc<Self>) -> Option<Arc<dyn LoadBalancer>> {
        Some(self.wrap(Arc::clone(&self.inner).load_balancer()?))
    }
    fn instances(self: Arc<Self>) -> Option<Arc<dyn Instances>> {
        Some(self.wrap(Arc::clone(&self.inner).instances()?))
    }
    fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
        let inner = self.wrap(Arc::clone(&self.inner).instances_v2()?);
        Some(match self.cache.clone() {
            Some(cache) => Arc::new(CachedV2 { inner, cache }),
            None => inner,
        })
    }
    fn zones(self: Arc<Self>) -> Option<Arc<dyn Zones>> {
        Some(self.wrap(Arc::clone(&self.inner).zones()?))
    }
    fn clusters(self: Arc<Self>) -> Option<Arc<dyn Clusters>> {
        Some(self.wrap(Arc::clone(&self.inner).clusters()?))
    }
    fn routes(self: Arc<Self>) -> Option<Arc<dyn Routes>> {
        Some(self.wrap(Arc::clone(&self.inner).routes()?))
    }
    fn has_cluster_id(&self) -> bool {
        self.inner.has_cluster_id()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;

    use super::*;
    use crate::types::InstanceLookup;
    use std::sync::Mutex;

    struct Cloud;
    struct V2;

    #[async_trait]
    impl InstancesV2 for V2 {
        async fn instance_exists(&self, _node: &Node) -> Result<bool, CloudError> {
            Ok(true)
        }
        async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(false)
        }
        async fn instance_metadata(&self, _node: &Node) -> Result<InstanceLookup, CloudError> {
            Err(CloudError::InstanceNotFound)
        }
    }

    impl CloudProvider for Cloud {
        fn provider_name(&self) -> &str {
            "test"
        }
        fn instances_v2(self: Arc<Self>) -> Option<Arc<dyn InstancesV2>> {
            Some(Arc::new(V2))
        }
    }

    #[derive(Default)]
    struct Recorder {
        seen: Mutex<Vec<String>>,
        fail: Mutex<Option<Operation>>,
    }

    #[async_trait]
    impl ProviderInterceptor for Recorder {
        async fn before_call(&self, call: &CallInfo<'_>) -> Result<(), CloudError> {
            self.seen
                .lock()
                .unwrap()
                .push(format!("before {} {}", call.operation, call.target));
            if *self.fail.lock().unwrap() == Some(call.operation) {
                return Err(CloudError::message("injected"));
            }
            Ok(())
        }
        fn after_call(
            &self,
            call: &CallInfo<'_>,
            _elapsed: Duration,
            outcome: Result<(), &CloudError>,
        ) {
            let outcome = match outcome {
                Ok(()) => "ok".to_owned(),
                Err(e) => e.kind().as_str().to_owned(),
            };
            self.seen
                .lock()
                .unwrap()
                .push(format!("after {} {}", call.operation, outcome));
        }
    }

    fn node(name: &str, provider_id: Option<&str>) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: provider_id.map(Into::into),
            ..Default::default()
        });
        n
    }

    #[tokio::test(start_paused = true)]
    async fn interceptors_see_calls_and_can_fail_them() {
        let rec = Arc::new(Recorder::default());
        let cloud = Arc::new(
            InterceptedProvider::new(Arc::new(Cloud))
                .with_shared_interceptor(rec.clone())
                .with_call_timeout(Duration::from_secs(5)),
        );
        assert!(Arc::clone(&cloud).load_balancer().is_none());
        let v2 = Arc::clone(&cloud).instances_v2().unwrap();
        assert!(v2.instance_exists(&node("n1", None)).await.unwrap());
        let err = v2
            .instance_metadata(&node("n1", Some("test://i-1")))
            .await
            .unwrap_err();
        assert!(err.is_instance_not_found());
        *rec.fail.lock().unwrap() = Some(Operation::InstanceExists);
        assert!(v2.instance_exists(&node("n2", None)).await.is_err());
        let err = v2.instance_shutdown(&node("n3", None)).await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Timeout);
        assert_eq!(
            *rec.seen.lock().unwrap(),
            vec![
                "before instance-exists n1",
                "after instance-exists ok",
                "before instance-metadata-by-provider-id test://i-1",
                "after instance-metadata-by-provider-id instance_not_found",
                "before instance-exists n2",
                "after instance-exists other",
                "before instance-shutdown n3",
                "after instance-shutdown timeout",
            ]
        );
    }

    /// The names are a public contract (metric labels, budget keys, inventories, fault rules): pin every one.
    #[test]
    fn operation_names_are_stable_and_unique() {
        let names: Vec<&str> = Operation::ALL.map(Operation::as_str).to_vec();
        assert_eq!(
            names,
            [
                "initialize",
                "get-load-balancer",
                "create",
                "update",
                "delete",
                "node-addresses",
                "node-addresses-by-provider-id",
                "instance-id",
                "instance-type",
                "instance-type-by-provider-id",
                "instance-exists-by-provider-id",
                "instance-shutdown-by-provider-id",
                "instance-exists",
                "instance-shutdown",
                "instance-metadata-by-provider-id",
                "instance-metadata-bulk",
                "instance-exists-bulk",
                "instance-shutdown-bulk",
                "get-zone",
                "get-zone-by-provider-id",
                "get-zone-by-node-name",
                "list",
                "master",
                "list-routes",
                "create-route",
                "delete-route",
                "list-load-balancers",
            ]
        );
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len());
        for op in Operation::ALL {
            assert_eq!(Operation::from_name(op.as_str()), Some(op));
            assert_eq!(op.to_string(), op.as_str());
        }
        assert_eq!(Operation::from_name("instance-metadata"), None);
        assert_eq!(Operation::names().split(", ").count(), 27);
        assert_eq!(Operation::intercepted_names().split(", ").count(), 26);
        assert!(!Operation::intercepted_names().contains("initialize"));
    }

    #[test]
    fn operations_map_to_capabilities() {
        assert_eq!(
            Operation::InstanceMetadata.capability(),
            Some(Capability::InstancesV2)
        );
        assert_eq!(Operation::ListRoutes.capability(), Some(Capability::Routes));
        assert_eq!(Operation::Initialize.capability(), None);
        assert!(!Operation::Initialize.is_intercepted());
        for op in Operation::ALL {
            assert_eq!(op.capability().is_some(), op.is_intercepted(), "{op}");
        }
        let cloud: Arc<dyn CloudProvider> = Arc::new(Cloud);
        assert!(Capability::InstancesV2.supported_by(&cloud));
        assert!(!Capability::Routes.supported_by(&cloud));
    }
}
