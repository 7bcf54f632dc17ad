//! What the suite needs to know about the cloud under test: [`ConformanceFixture`] (instances, cluster names,
//! route CIDRs, time limits), [`InstanceRef`] (one instance and the Node that stands for it), and
//! [`ConformanceSubject`] (a provider with its fixture and optional [`LoadBalancerInspector`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_core::intercept::Capability;
use ccm_core::{BoxError, CloudProvider};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::clause::Clause;

/// One instance of the cloud under test and how the Node standing for it looks.
///
/// ```
/// use ccm_conformance::InstanceRef;
///
/// let running = InstanceRef::new("worker-1")
///     .with_provider_id("acme://eu-1/i-0001")
///     .with_internal_ip("10.0.0.11");
/// let node = running.node();
/// assert_eq!(node.metadata.name.as_deref(), Some("worker-1"));
/// assert_eq!(node.spec.unwrap().provider_id.as_deref(), Some("acme://eu-1/i-0001"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct InstanceRef {
    /// The Node name (the kubelet's `--hostname-override`, usually the cloud's instance name).
    pub node_name: String,
    /// The providerID the cloud reports for it (`<provider>://<id>`), if known in advance.
    pub provider_id: Option<String>,
    /// Addresses the Node carries in `status.addresses` (what a kubelet reports).
    pub addresses: Vec<NodeAddress>,
    /// Labels the Node carries.
    pub labels: BTreeMap<String, String>,
}

impl InstanceRef {
    /// An instance known by its Node name only.
    pub fn new(node_name: impl Into<String>) -> Self {
        InstanceRef {
            node_name: node_name.into(),
            provider_id: None,
            addresses: Vec::new(),
            labels: BTreeMap::new(),
        }
    }

    /// Set the providerID.
    pub fn with_provider_id(mut self, provider_id: impl Into<String>) -> Self {
        self.provider_id = Some(provider_id.into());
        self
    }

    /// Add an `InternalIP` address.
    pub fn with_internal_ip(mut self, ip: impl Into<String>) -> Self {
        self.addresses.push(NodeAddress {
            type_: "InternalIP".to_owned(),
            address: ip.into(),
        });
        self
    }

    /// Add an address of any type.
    pub fn with_address(mut self, type_: impl Into<String>, address: impl Into<String>) -> Self {
        self.addresses.push(NodeAddress {
            type_: type_.into(),
            address: address.into(),
        });
        self
    }

    /// Add a Node label.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The Node as the controllers would pass it: name, labels, `spec.providerID` (if known), the addresses
    /// and a `Ready=True` condition.
    pub fn node(&self) -> Node {
        let mut node = self.node_without_provider_id();
        if let Some(spec) = node.spec.as_mut() {
            spec.provider_id = self.provider_id.clone();
        }
        node
    }

    /// The Node of a kubelet that was not given `--provider-id`: like [`node`](Self::node) without
    /// `spec.providerID`.
    pub fn node_without_provider_id(&self) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(self.node_name.clone()),
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                addresses: (!self.addresses.is_empty()).then(|| self.addresses.clone()),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".to_owned(),
                    status: "True".to_owned(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }
}

/// Changes a Service the suite is about to hand to the load balancer (for example to add the annotations a
/// vendor's load balancers require).
pub type ServiceCustomizer = Arc<dyn Fn(&mut Service) + Send + Sync>;

/// Everything the suite needs to know about the cloud under test.
///
/// A vendor fills it for their cloud: names of instances that exist (one running, one stopped), an instance
/// that does not exist, nodes to use as load-balancer backends, route CIDRs it may create, time limits. Every
/// field has a default; clauses that need something the fixture lacks are skipped with the reason.
///
/// ```
/// use std::time::Duration;
/// use ccm_conformance::{Clause, ConformanceFixture, InstanceRef};
///
/// let fixture = ConformanceFixture::new()
///     .with_running(InstanceRef::new("worker-1").with_provider_id("acme://i-0001"))
///     .with_stopped(InstanceRef::new("worker-2").with_provider_id("acme://i-0002"))
///     .with_unknown(InstanceRef::new("ghost").with_provider_id("acme://i-ffff"))
///     .with_backend_nodes(vec![
///         InstanceRef::new("worker-1").with_provider_id("acme://i-0001"),
///         InstanceRef::new("worker-3").with_provider_id("acme://i-0003"),
///     ])
///     .with_route_cidrs(["10.244.250.0/24", "10.244.251.0/24"])
///     .with_ready_timeout(Duration::from_secs(600))
///     .skip(Clause::RoutesScopedToCluster, "one route table per VPC, one cluster per VPC");
/// assert_eq!(fixture.cluster_name, "kubernetes");
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ConformanceFixture {
    /// The `--cluster-name` passed to load-balancer and route calls (default `kubernetes`).
    pub cluster_name: String,
    /// A second cluster name that has no routes (default `ccm-conformance-other`).
    pub other_cluster_name: String,
    /// An instance that exists and runs. Instance clauses are skipped without it.
    pub running: Option<InstanceRef>,
    /// An instance that exists but is stopped (shut down). Clauses about stopped instances are skipped without
    /// it.
    pub stopped: Option<InstanceRef>,
    /// An instance the cloud does not have. Without it the suite uses a Node named
    /// `ccm-conformance-absent-<run id>` with providerID `<provider_name>://ccm-conformance-absent-<run id>`;
    /// set it when that is not a well-formed ID for your cloud (a malformed ID may rightly be an error).
    pub unknown: Option<InstanceRef>,
    /// Nodes to use as load-balancer backends (default: none, then the running instance is used). The clauses
    /// that replace backends need at least two.
    pub backend_nodes: Vec<InstanceRef>,
    /// The node routes point to (default: the running instance).
    pub route_target: Option<InstanceRef>,
    /// Destination CIDRs the suite may create routes for; they must be free in the cloud (defaults:
    /// `10.244.250.0/24` to `10.244.253.0/24`).
    pub route_cidrs: Vec<String>,
    /// Namespace of the Services the suite makes up (default `ccm-conformance`; nothing is created in a
    /// cluster).
    pub namespace: String,
    /// Prefix of those Services' names (default `conformance`); a random run id is appended.
    pub service_name_prefix: String,
    /// Whether the provider finds a Node without `spec.providerID` by name (default true; set false if your
    /// kubelets always run with `--provider-id`).
    pub lookup_by_name: bool,
    /// How many concurrent calls the concurrency clauses make (default 20).
    pub concurrency: usize,
    /// Limit of one provider call (default 2 minutes).
    pub call_timeout: Duration,
    /// How long `ensure_load_balancer` may keep answering with the retry-after error before the load
    /// balancer counts as never ready (default 10 minutes).
    pub ready_timeout: Duration,
    /// How long a state change may take to become visible (get after delete, list after create), polled
    /// every second (default zero: visible at once).
    pub consistency_timeout: Duration,
    /// Limit of a whole clause, clean-up included (default 20 minutes).
    pub clause_timeout: Duration,
    /// Capabilities the provider must have: their clauses fail, instead of being skipped, if it lacks one.
    pub expected_capabilities: BTreeSet<Capability>,
    /// Clauses to skip, with the reason reported.
    pub skipped: BTreeMap<Clause, String>,
    /// Applied to every Service the suite makes up.
    pub customize_service: Option<ServiceCustomizer>,
}

impl fmt::Debug for ConformanceFixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConformanceFixture")
            .field("cluster_name", &self.cluster_name)
            .field("other_cluster_name", &self.other_cluster_name)
            .field("running", &self.running)
            .field("stopped", &self.stopped)
            .field("unknown", &self.unknown)
            .field("backend_nodes", &self.backend_nodes)
            .field("route_target", &self.route_target)
            .field("route_cidrs", &self.route_cidrs)
            .field("namespace", &self.namespace)
            .field("service_name_prefix", &self.service_name_prefix)
            .field("lookup_by_name", &self.lookup_by_name)
            .field("concurrency", &self.concurrency)
            .field("call_timeout", &self.call_timeout)
            .field("ready_timeout", &self.ready_timeout)
            .field("consistency_timeout", &self.consistency_timeout)
            .field("clause_timeout", &self.clause_timeout)
            .field("expected_capabilities", &self.expected_capabilities)
            .field("skipped", &self.skipped)
            .field("customize_service", &self.customize_service.is_some())
            .finish()
    }
}

impl Default for ConformanceFixture {
    fn default() -> Self {
        ConformanceFixture {
            cluster_name: "kubernetes".to_owned(),
            other_cluster_name: "ccm-conformance-other".to_owned(),
            running: None,
            stopped: None,
            unknown: None,
            backend_nodes: Vec::new(),
            route_target: None,
            route_cidrs: (250..=253).map(|i| format!("10.244.{i}.0/24")).collect(),
            namespace: "ccm-conformance".to_owned(),
            service_name_prefix: "conformance".to_owned(),
            lookup_by_name: true,
            concurrency: 20,
            call_timeout: Duration::from_secs(120),
            ready_timeout: Duration::from_secs(600),
            consistency_timeout: Duration::ZERO,
            clause_timeout: Duration::from_secs(1200),
            expected_capabilities: BTreeSet::new(),
            skipped: BTreeMap::new(),
            customize_service: None,
        }
    }
}

impl ConformanceFixture {
    /// A fixture with the defaults (see the fields).
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the cluster name.
    pub fn with_cluster_name(mut self, name: impl Into<String>) -> Self {
        self.cluster_name = name.into();
        self
    }

    /// Set the second cluster name (see [`Clause::RoutesScopedToCluster`]).
    pub fn with_other_cluster_name(mut self, name: impl Into<String>) -> Self {
        self.other_cluster_name = name.into();
        self
    }

    /// Set the running instance.
    pub fn with_running(mut self, instance: InstanceRef) -> Self {
        self.running = Some(instance);
        self
    }

    /// Set the stopped instance.
    pub fn with_stopped(mut self, instance: InstanceRef) -> Self {
        self.stopped = Some(instance);
        self
    }

    /// Set the instance that does not exist.
    pub fn with_unknown(mut self, instance: InstanceRef) -> Self {
        self.unknown = Some(instance);
        self
    }

    /// Set the load-balancer backend nodes.
    pub fn with_backend_nodes(mut self, nodes: Vec<InstanceRef>) -> Self {
        self.backend_nodes = nodes;
        self
    }

    /// Set the node routes point to.
    pub fn with_route_target(mut self, instance: InstanceRef) -> Self {
        self.route_target = Some(instance);
        self
    }

    /// Set the route CIDRs the suite may use.
    pub fn with_route_cidrs<I, S>(mut self, cidrs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.route_cidrs = cidrs.into_iter().map(Into::into).collect();
        self
    }

    /// Set the namespace of made-up Services.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Set the prefix of made-up Service names.
    pub fn with_service_name_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.service_name_prefix = prefix.into();
        self
    }

    /// Say that the provider needs `spec.providerID` (it cannot find a Node by name).
    pub fn without_lookup_by_name(mut self) -> Self {
        self.lookup_by_name = false;
        self
    }

    /// Set the number of concurrent calls of the concurrency clauses (at least 2).
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(2);
        self
    }

    /// Set the limit of one provider call.
    pub fn with_call_timeout(mut self, limit: Duration) -> Self {
        self.call_timeout = limit;
        self
    }

    /// Set how long a load balancer may stay "being built" (retry-after answers).
    pub fn with_ready_timeout(mut self, limit: Duration) -> Self {
        self.ready_timeout = limit;
        self
    }

    /// Set how long changes may take to become visible.
    pub fn with_consistency_timeout(mut self, limit: Duration) -> Self {
        self.consistency_timeout = limit;
        self
    }

    /// Set the limit of one clause.
    pub fn with_clause_timeout(mut self, limit: Duration) -> Self {
        self.clause_timeout = limit;
        self
    }

    /// Require a capability: its clauses fail instead of being skipped when the provider lacks it.
    pub fn expect_capability(mut self, capability: Capability) -> Self {
        self.expected_capabilities.insert(capability);
        self
    }

    /// Skip a clause, with the reason to report.
    pub fn skip(mut self, clause: Clause, reason: impl Into<String>) -> Self {
        self.skipped.insert(clause, reason.into());
        self
    }

    /// Change every made-up Service with `customize` (add annotations, a load-balancer class, ...).
    pub fn with_service_customizer(
        mut self,
        customize: impl Fn(&mut Service) + Send + Sync + 'static,
    ) -> Self {
        self.customize_service = Some(Arc::new(customize));
        self
    }

    /// The node name of the instance whose providerID is `provider_id`, among the fixture's instances
    /// (useful in a [`LoadBalancerInspector`] that sees instance IDs).
    pub fn node_name_for_provider_id(&self, provider_id: &str) -> Option<&str> {
        self.instances()
            .find(|i| i.provider_id.as_deref() == Some(provider_id))
            .map(|i| i.node_name.as_str())
    }

    fn instances(&self) -> impl Iterator<Item = &InstanceRef> {
        self.running
            .iter()
            .chain(self.stopped.iter())
            .chain(self.backend_nodes.iter())
            .chain(self.route_target.iter())
    }

    /// The backend nodes, or the running instance if none are set.
    pub(crate) fn effective_backends(&self) -> Vec<InstanceRef> {
        if self.backend_nodes.is_empty() {
            self.running.iter().cloned().collect()
        } else {
            self.backend_nodes.clone()
        }
    }
}

/// Looks at a load balancer in the cloud, to check what the provider traits cannot report: its backends.
///
/// Optional: without one, the clauses about backends are skipped.
///
/// ```
/// use async_trait::async_trait;
/// use ccm_conformance::LoadBalancerInspector;
/// use ccm_core::BoxError;
/// use k8s_openapi::api::core::v1::Service;
///
/// struct AcmeInspector;
///
/// #[async_trait]
/// impl LoadBalancerInspector for AcmeInspector {
///     async fn backend_nodes(&self, _cluster: &str, _service: &Service) -> Result<Option<Vec<String>>, BoxError> {
///         // Ask the cloud for the load balancer's pool and map its members back to node names.
///         Ok(Some(vec!["worker-1".to_owned()]))
///     }
/// }
/// ```
#[async_trait]
pub trait LoadBalancerInspector: Send + Sync + 'static {
    /// The node names behind the Service's load balancer in any order, or `None` if it has no load balancer.
    async fn backend_nodes(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<Vec<String>>, BoxError>;
}

/// The provider under test with what the suite needs to know about it; what a factory returns.
///
/// ```
/// use std::sync::Arc;
/// use ccm_conformance::{ConformanceFixture, ConformanceSubject, InstanceRef};
/// use ccm_core::CloudProvider;
///
/// struct Acme;
/// impl CloudProvider for Acme {
///     fn provider_name(&self) -> &str { "acme" }
/// }
///
/// let subject = ConformanceSubject::new(
///     Arc::new(Acme),
///     ConformanceFixture::new().with_running(InstanceRef::new("worker-1")),
/// );
/// assert!(subject.inspector.is_none());
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ConformanceSubject {
    /// The provider.
    pub provider: Arc<dyn CloudProvider>,
    /// What the suite needs to know about its cloud.
    pub fixture: ConformanceFixture,
    /// How to see load-balancer backends, if the vendor provides it.
    pub inspector: Option<Arc<dyn LoadBalancerInspector>>,
}

impl fmt::Debug for ConformanceSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConformanceSubject")
            .field("provider", &self.provider.provider_name())
            .field("fixture", &self.fixture)
            .field("inspector", &self.inspector.is_some())
            .finish()
    }
}

impl ConformanceSubject {
    /// A provider and its fixture, without inspector.
    pub fn new(provider: Arc<dyn CloudProvider>, fixture: ConformanceFixture) -> Self {
        ConformanceSubject {
            provider,
            fixture,
            inspector: None,
        }
    }

    /// Add a load-balancer inspector.
    pub fn with_inspector(mut self, inspector: impl LoadBalancerInspector) -> Self {
        self.inspector = Some(Arc::new(inspector));
        self
    }

    /// Add a load-balancer inspector held elsewhere too.
    pub fn with_shared_inspector(mut self, inspector: Arc<dyn LoadBalancerInspector>) -> Self {
        self.inspector = Some(inspector);
        self
    }

    /// Replace the provider, keeping fixture and inspector (for example to wrap it in an
    /// [`InterceptedProvider`](ccm_core::intercept::InterceptedProvider)).
    pub fn map_provider(
        mut self,
        wrap: impl FnOnce(Arc<dyn CloudProvider>) -> Arc<dyn CloudProvider>,
    ) -> Self {
        self.provider = wrap(self.provider);
        self
    }
}

/// What a factory may return: a [`ConformanceSubject`], or a `Result` of one (an error fails the clause with
/// the message).
pub trait IntoSubject {
    /// The subject, or why it could not be created.
    fn into_subject(self) -> Result<ConformanceSubject, BoxError>;
}

impl IntoSubject for ConformanceSubject {
    fn into_subject(self) -> Result<ConformanceSubject, BoxError> {
        Ok(self)
    }
}

impl<E: Into<BoxError>> IntoSubject for Result<ConformanceSubject, E> {
    fn into_subject(self) -> Result<ConformanceSubject, BoxError> {
        self.map_err(Into::into)
    }
}

/// A future that creates a subject.
pub type SubjectFuture = Pin<Box<dyn Future<Output = Result<ConformanceSubject, BoxError>>>>;

/// Creates a fresh provider under test for each clause: any `Fn() -> impl Future<Output = S>` where `S` is a
/// [`ConformanceSubject`] or a `Result` of one, such as an `async fn`.
///
/// ```
/// # use std::sync::Arc;
/// use ccm_conformance::{ConformanceFixture, ConformanceSubject, SubjectFactory};
/// # struct Acme;
/// # impl ccm_core::CloudProvider for Acme { fn provider_name(&self) -> &str { "acme" } }
///
/// async fn acme() -> ConformanceSubject {
///     ConformanceSubject::new(Arc::new(Acme), ConformanceFixture::new())
/// }
/// fn takes_factory(_: impl SubjectFactory) {}
/// takes_factory(acme);
/// takes_factory(|| async { Ok::<_, std::io::Error>(ConformanceSubject::new(Arc::new(Acme), ConformanceFixture::new())) });
/// ```
pub trait SubjectFactory {
    /// Start creating a subject.
    fn create(&self) -> SubjectFuture;
}

impl<F, Fut, S> SubjectFactory for F
where
    F: Fn() -> Fut,
    Fut: Future<Output = S> + 'static,
    S: IntoSubject,
{
    fn create(&self) -> SubjectFuture {
        let future = self();
        Box::pin(async move { future.await.into_subject() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_carry_name_provider_id_addresses_labels_and_ready() {
        let i = InstanceRef::new("n1")
            .with_provider_id("acme://i-1")
            .with_internal_ip("10.0.0.1")
            .with_address("Hostname", "n1")
            .with_label("pool", "a");
        let node = i.node();
        assert_eq!(node.metadata.name.as_deref(), Some("n1"));
        assert_eq!(
            node.metadata.labels.as_ref().and_then(|l| l.get("pool")),
            Some(&"a".to_owned())
        );
        assert_eq!(ccm_core::helpers::node_provider_id(&node), "acme://i-1");
        let status = node.status.expect("status");
        assert_eq!(status.addresses.expect("addresses").len(), 2);
        assert_eq!(status.conditions.expect("conditions")[0].status, "True");
        let bare = i.node_without_provider_id();
        assert_eq!(ccm_core::helpers::node_provider_id(&bare), "");
        assert_eq!(bare.metadata.name.as_deref(), Some("n1"));
    }

    #[test]
    fn fixture_defaults_and_lookups() {
        let f = ConformanceFixture::new();
        assert_eq!(f.cluster_name, "kubernetes");
        assert_eq!(f.route_cidrs.len(), 4);
        assert!(f.lookup_by_name);
        assert!(f.effective_backends().is_empty());
        let f = f
            .with_running(InstanceRef::new("r").with_provider_id("acme://r"))
            .with_backend_nodes(vec![InstanceRef::new("b").with_provider_id("acme://b")])
            .with_concurrency(1)
            .skip(Clause::RoutesScopedToCluster, "why");
        assert_eq!(f.concurrency, 2);
        assert_eq!(f.node_name_for_provider_id("acme://b"), Some("b"));
        assert_eq!(f.node_name_for_provider_id("acme://r"), Some("r"));
        assert_eq!(f.node_name_for_provider_id("acme://x"), None);
        assert_eq!(f.effective_backends().len(), 1);
        assert_eq!(f.effective_backends()[0].node_name, "b");
        assert!(format!("{f:?}").contains("RoutesScopedToCluster"));
    }
}
