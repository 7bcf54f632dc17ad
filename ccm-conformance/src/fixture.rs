//! What the suite needs to know about the cloud under test: [`ConformanceFixture`] (instances, cluster names,
//! route CIDRs, time limits, declared capabilities) and [`InstanceRef`] (one instance and the Node that stands
//! for it).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ccm_core::intercept::Capability;
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
/// that does not exist, nodes to use as load-balancer backends, route CIDRs it may create, time limits, and the
/// capabilities the provider lacks on purpose ([`without`](Self::without)). Every field has a default; clauses
/// that need something the fixture lacks are skipped with the reason.
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
///
/// // A provider that serves only InstancesV2 says so, and strict mode accepts the clauses it leaves out.
/// use ccm_core::intercept::Capability;
/// let v2_only = ConformanceFixture::new()
///     .with_running(InstanceRef::new("worker-1").with_provider_id("acme://i-0001"))
///     .without_capabilities([Capability::Instances, Capability::Zones, Capability::LoadBalancer])
///     .without(Capability::Routes)
///     .without(Capability::Clusters);
/// assert!(v2_only.absent_capabilities.contains(&Capability::Routes));
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
    /// every [`poll_interval`](Self::poll_interval) (default zero: visible at once).
    pub consistency_timeout: Duration,
    /// How often the consistency wait polls. `None` (the default) takes [`POLL_INTERVAL_ENV_VAR`] (a Go
    /// duration such as `250ms`) if set, else one second.
    pub poll_interval: Option<Duration>,
    /// Limit of a whole clause, clean-up included (default 20 minutes).
    pub clause_timeout: Duration,
    /// Capabilities the provider must have: their clauses fail, instead of being skipped, if it lacks one.
    pub expected_capabilities: BTreeSet<Capability>,
    /// Capabilities the provider lacks on purpose: their clauses are [not
    /// applicable](crate::Outcome::NotApplicable) (which strict mode accepts), and fail if the provider has
    /// the capability after all.
    pub absent_capabilities: BTreeSet<Capability>,
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
            .field("poll_interval", &self.poll_interval)
            .field("clause_timeout", &self.clause_timeout)
            .field("expected_capabilities", &self.expected_capabilities)
            .field("absent_capabilities", &self.absent_capabilities)
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
            poll_interval: None,
            clause_timeout: Duration::from_secs(1200),
            expected_capabilities: BTreeSet::new(),
            absent_capabilities: BTreeSet::new(),
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

    /// Set how often the consistency wait polls (overrides [`POLL_INTERVAL_ENV_VAR`]; zero is taken as one
    /// millisecond).
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// The interval the consistency wait polls at: [`poll_interval`](Self::poll_interval), else
    /// [`POLL_INTERVAL_ENV_VAR`], else one second.
    ///
    /// # Errors
    /// If the environment variable is set to something that is not a Go duration.
    pub fn effective_poll_interval(&self) -> Result<Duration, String> {
        let from_env = std::env::var(POLL_INTERVAL_ENV_VAR).ok();
        poll_interval(self.poll_interval, from_env.as_deref())
    }

    /// Set the limit of one clause.
    pub fn with_clause_timeout(mut self, limit: Duration) -> Self {
        self.clause_timeout = limit;
        self
    }

    /// Require a capability: its clauses fail instead of being skipped when the provider lacks it.
    pub fn expect_capability(mut self, capability: Capability) -> Self {
        self.absent_capabilities.remove(&capability);
        self.expected_capabilities.insert(capability);
        self
    }

    /// Declare a capability absent on purpose (a V2-only provider declares [`Capability::Instances`], ...):
    /// its clauses are [not applicable](crate::Outcome::NotApplicable) instead of skipped, so
    /// `CCM_CONFORMANCE_STRICT=1` accepts them, and they fail if the provider has the capability after all.
    pub fn without(mut self, capability: Capability) -> Self {
        self.expected_capabilities.remove(&capability);
        self.absent_capabilities.insert(capability);
        self
    }

    /// Declare several capabilities absent on purpose (see [`without`](Self::without)).
    pub fn without_capabilities(
        mut self,
        capabilities: impl IntoIterator<Item = Capability>,
    ) -> Self {
        for capability in capabilities {
            self = self.without(capability);
        }
        self
    }

    /// Skip a clause on purpose, with the reason to report: the clause is [not
    /// applicable](crate::Outcome::NotApplicable), which strict mode accepts.
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
    /// (useful in a [`LoadBalancerInspector`](crate::LoadBalancerInspector) that sees instance IDs).
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

/// The environment variable that sets how often the consistency wait polls, as a Go duration (`250ms`, `2s`),
/// when the fixture does not set [`ConformanceFixture::poll_interval`]. Default: one second.
pub const POLL_INTERVAL_ENV_VAR: &str = "CCM_CONFORMANCE_POLL_INTERVAL";

/// The consistency wait's interval: the fixture's, else the environment variable's, else one second; never
/// below a millisecond (a zero interval would spin).
fn poll_interval(
    from_fixture: Option<Duration>,
    from_env: Option<&str>,
) -> Result<Duration, String> {
    let interval = match (from_fixture, from_env.map(str::trim)) {
        (Some(interval), _) => interval,
        (None, None | Some("")) => Duration::from_secs(1),
        (None, Some(text)) => ccm_core::duration::parse_go_duration(text).map_err(|err| {
            format!(
                "{POLL_INTERVAL_ENV_VAR}={text:?} is not a duration ({err}); write it like 250ms or 2s, or unset it for the default of 1s"
            )
        })?,
    };
    Ok(interval.max(Duration::from_millis(1)))
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

    #[test]
    fn poll_interval_precedence_and_errors() {
        let second = Duration::from_secs(1);
        assert_eq!(poll_interval(None, None), Ok(second));
        assert_eq!(poll_interval(None, Some(" ")), Ok(second));
        assert_eq!(
            poll_interval(None, Some("250ms")),
            Ok(Duration::from_millis(250))
        );
        assert_eq!(
            poll_interval(Some(Duration::from_millis(20)), Some("5s")),
            Ok(Duration::from_millis(20))
        );
        assert_eq!(
            poll_interval(Some(Duration::ZERO), None),
            Ok(Duration::from_millis(1))
        );
        let err = poll_interval(None, Some("fast")).unwrap_err();
        assert!(
            err.starts_with("CCM_CONFORMANCE_POLL_INTERVAL=\"fast\" is not a duration"),
            "{err}"
        );
        assert!(err.contains("250ms"), "{err}");
    }

    #[test]
    fn declared_capabilities_exclude_each_other() {
        let f = ConformanceFixture::new()
            .expect_capability(Capability::Routes)
            .without_capabilities([Capability::Routes, Capability::Zones]);
        assert!(f.expected_capabilities.is_empty());
        assert_eq!(
            f.absent_capabilities,
            BTreeSet::from([Capability::Routes, Capability::Zones])
        );
        let f = f.expect_capability(Capability::Zones);
        assert_eq!(f.absent_capabilities, BTreeSet::from([Capability::Routes]));
        assert_eq!(f.expected_capabilities, BTreeSet::from([Capability::Zones]));
    }
}
