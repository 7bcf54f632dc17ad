//! The controller's decisions as pure functions: which Services it owns, when a Service must be synced, which
//! nodes serve load balancers, and when a node change matters.
//!
//! Each function mirrors a Go function of `controllers/service/controller.go` (named in its docs); where the SDK
//! adds behaviour, a separate function or a parameter says so and the Go variant stays available.

use std::collections::BTreeMap;
use std::sync::Arc;

use ccm_core::helpers::{has_load_balancer_finalizer, node_has_taint, node_name, node_provider_id};
use ccm_core::names;
use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The `spec.type` of load-balanced Services.
pub const LOAD_BALANCER_TYPE: &str = "LoadBalancer";

/// How many node names the `UpdateLoadBalancerFailed` event lists (Go: `maxNodeNamesToLog`).
pub const MAX_NODE_NAMES_TO_LOG: usize = 20;

/// Which `type: LoadBalancer` Services a controller owns, by `spec.loadBalancerClass`.
///
/// The default owns exactly what the Go controller owns: Services without a class.
///
/// ```
/// use ccm_servicecontroller::predicates::ServiceSelector;
/// use k8s_openapi::api::core::v1::{Service, ServiceSpec};
///
/// let lb = |class: Option<&str>| Service {
///     spec: Some(ServiceSpec {
///         type_: Some("LoadBalancer".into()),
///         load_balancer_class: class.map(str::to_owned),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// let selector = ServiceSelector { class_less: false, class: Some("example.com/lb".into()) };
/// assert!(selector.wants_load_balancer(&lb(Some("example.com/lb"))));
/// assert!(!selector.wants_load_balancer(&lb(None)));
/// assert!(ServiceSelector::default().wants_load_balancer(&lb(None)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, educe::Educe)]
#[educe(Default)]
pub struct ServiceSelector {
    /// Own Services without a `loadBalancerClass`.
    #[educe(Default = true)]
    pub class_less: bool,
    /// Own Services with this `loadBalancerClass`.
    pub class: Option<String>,
}

impl ServiceSelector {
    /// True if the Service is `type: LoadBalancer` and its class is one this selector owns (Go:
    /// `wantsLoadBalancer`, which owns class-less Services only).
    pub fn wants_load_balancer(&self, service: &Service) -> bool {
        let Some(spec) = service.spec.as_ref() else {
            return false;
        };
        if spec.type_.as_deref() != Some(LOAD_BALANCER_TYPE) {
            return false;
        }
        match spec.load_balancer_class.as_deref() {
            None => self.class_less,
            Some(class) => self.class.as_deref() == Some(class),
        }
    }
}

/// Go's `needsCleanup`: the Service carries `service.kubernetes.io/load-balancer-cleanup` and is being deleted or
/// is no longer `type: LoadBalancer`.
pub fn needs_cleanup(service: &Service) -> bool {
    has_load_balancer_finalizer(service)
        && (service.metadata.deletion_timestamp.is_some()
            || service_type(service) != LOAD_BALANCER_TYPE)
}

/// True if the Service's cloud load balancer must be deleted rather than ensured (the delete branch of Go's
/// `syncLoadBalancerIfNeeded`).
pub fn wants_deletion(selector: &ServiceSelector, service: &Service) -> bool {
    !selector.wants_load_balancer(service) || needs_cleanup(service)
}

/// True if a Service seen for the first time must be synced (Go's add handler).
pub fn should_enqueue_added(selector: &ServiceSelector, service: &Service) -> bool {
    selector.wants_load_balancer(service) || needs_cleanup(service)
}

/// True if a Service update must be synced (Go's update handler: `needsUpdate(old, new) || needsCleanup(new)`).
pub fn should_enqueue_updated(
    selector: &ServiceSelector,
    extended: bool,
    old: &Service,
    new: &Service,
) -> bool {
    update_reason(selector, extended, old, new).is_some() || needs_cleanup(new)
}

fn service_type(service: &Service) -> &str {
    service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or_default()
}

/// Why a Service update requires a sync: the first differing field, in the order Go's `needsUpdate` checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpdateReason {
    /// The Service started or stopped wanting a load balancer.
    WantsLoadBalancer,
    /// `spec.loadBalancerSourceRanges`.
    LoadBalancerSourceRanges,
    /// The port list (name, protocol, port, nodePort, targetPort, appProtocol, in order).
    Ports,
    /// `spec.sessionAffinity`.
    SessionAffinity,
    /// `spec.sessionAffinityConfig`.
    SessionAffinityConfig,
    /// `spec.loadBalancerIP`.
    LoadBalancerIp,
    /// `spec.externalIPs` (count or any element).
    ExternalIps,
    /// Any annotation.
    Annotations,
    /// `metadata.uid` (deleted and re-created).
    Uid,
    /// `spec.externalTrafficPolicy`.
    ExternalTrafficPolicy,
    /// `spec.healthCheckNodePort`.
    HealthCheckNodePort,
    /// The number of `spec.ipFamilies` (or, with extended fields, their values).
    IpFamilies,
    /// `spec.allocateLoadBalancerNodePorts` (extended fields only).
    AllocateLoadBalancerNodePorts,
}

/// Go's `needsUpdate`, returning which field changed; `None` if no sync is needed.
///
/// With `extended`, `spec.allocateLoadBalancerNodePorts` and the values of `spec.ipFamilies` are compared too.
/// Absent and empty lists or maps compare equal (Go's `reflect.DeepEqual` tells `nil` from empty, which the
/// apiserver never stores differently).
pub fn update_reason(
    selector: &ServiceSelector,
    extended: bool,
    old: &Service,
    new: &Service,
) -> Option<UpdateReason> {
    let (old_wants, new_wants) = (
        selector.wants_load_balancer(old),
        selector.wants_load_balancer(new),
    );
    if !old_wants && !new_wants {
        return None;
    }
    if old_wants != new_wants {
        return Some(UpdateReason::WantsLoadBalancer);
    }
    let empty = Default::default();
    let o = old.spec.as_ref().unwrap_or(&empty);
    let n = new.spec.as_ref().unwrap_or(&empty);
    if new_wants && list(&o.load_balancer_source_ranges) != list(&n.load_balancer_source_ranges) {
        return Some(UpdateReason::LoadBalancerSourceRanges);
    }
    if !ports_equal_for_lb(list(&o.ports), list(&n.ports)) {
        return Some(UpdateReason::Ports);
    }
    if text(&o.session_affinity) != text(&n.session_affinity) {
        return Some(UpdateReason::SessionAffinity);
    }
    if o.session_affinity_config != n.session_affinity_config {
        return Some(UpdateReason::SessionAffinityConfig);
    }
    if text(&o.load_balancer_ip) != text(&n.load_balancer_ip) {
        return Some(UpdateReason::LoadBalancerIp);
    }
    if list(&o.external_ips) != list(&n.external_ips) {
        return Some(UpdateReason::ExternalIps);
    }
    let annotations = |s: &Service| s.metadata.annotations.clone().unwrap_or_default();
    if annotations(old) != annotations(new) {
        return Some(UpdateReason::Annotations);
    }
    if old.metadata.uid != new.metadata.uid {
        return Some(UpdateReason::Uid);
    }
    if text(&o.external_traffic_policy) != text(&n.external_traffic_policy) {
        return Some(UpdateReason::ExternalTrafficPolicy);
    }
    if o.health_check_node_port.unwrap_or(0) != n.health_check_node_port.unwrap_or(0) {
        return Some(UpdateReason::HealthCheckNodePort);
    }
    let (of, nf) = (list(&o.ip_families), list(&n.ip_families));
    if of.len() != nf.len() || (extended && of != nf) {
        return Some(UpdateReason::IpFamilies);
    }
    if extended && o.allocate_load_balancer_node_ports != n.allocate_load_balancer_node_ports {
        return Some(UpdateReason::AllocateLoadBalancerNodePorts);
    }
    None
}

fn list<T>(value: &Option<Vec<T>>) -> &[T] {
    value.as_deref().unwrap_or_default()
}

fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or_default()
}

fn ports_equal_for_lb(x: &[ServicePort], y: &[ServicePort]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| port_equal_for_lb(a, b))
}

fn port_equal_for_lb(x: &ServicePort, y: &ServicePort) -> bool {
    let target = |p: &ServicePort| p.target_port.clone().unwrap_or(IntOrString::Int(0));
    text(&x.name) == text(&y.name)
        && text(&x.protocol) == text(&y.protocol)
        && x.port == y.port
        && x.node_port.unwrap_or(0) == y.node_port.unwrap_or(0)
        && target(x) == target(y)
        && x.app_protocol == y.app_protocol
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `nodeNotDeletedPredicate`: no deletion timestamp.
pub fn node_not_deleted(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
}

/// Go's `nodeIncludedPredicate`: without the `node.kubernetes.io/exclude-from-external-load-balancers` label, or
/// with a value that parses (as Go's `strconv.ParseBool`) to `false`. An unparseable value excludes the node.
pub fn node_included(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS))
        .is_none_or(|value| parse_go_bool(value) == Some(false))
}

/// Go's `nodeUnTaintedPredicate`: no `ToBeDeletedByClusterAutoscaler` taint.
pub fn node_untainted(node: &Node) -> bool {
    !node_has_taint(node, names::taints::TO_BE_DELETED_BY_CLUSTER_AUTOSCALER)
}

/// The stable node set predicate (Go: `stableNodeSetPredicates`): not being deleted, not excluded by label, not
/// tainted for deletion by the cluster autoscaler. Readiness, roles and a missing providerID do not matter.
pub fn in_stable_node_set(node: &Node) -> bool {
    node_not_deleted(node) && node_included(node) && node_untainted(node)
}

/// Go's `shouldSyncUpdatedNode`: the exclusion predicate flipped or `spec.providerID` changed.
pub fn should_sync_updated_node(old: &Node, new: &Node) -> bool {
    node_included(old) != node_included(new) || node_provider_id(old) != node_provider_id(new)
}

/// The SDK's node update filter: Go's [`should_sync_updated_node`], plus a flip of the cluster-autoscaler taint
/// or of the deletion timestamp, so such nodes leave load balancers right away instead of at the next unrelated
/// sync.
pub fn node_update_affects_load_balancers(old: &Node, new: &Node) -> bool {
    should_sync_updated_node(old, new) || in_stable_node_set(old) != in_stable_node_set(new)
}

/// The identity of a load balancer's backend set: node name → `spec.providerID` (`""` when unset), as Go's
/// `nodesSufficientlyEqual` compares them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSet(BTreeMap<String, String>);

impl NodeSet {
    /// The set of `nodes` (not filtered).
    pub fn from_nodes<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> Self {
        NodeSet(
            nodes
                .into_iter()
                .map(|n| (node_name(n).to_owned(), node_provider_id(n).to_owned()))
                .collect(),
        )
    }

    /// True if there is no node.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Go's `nodesSufficientlyEqual`: the same node names with the same providerIDs. A never-synced load balancer
/// (`None`) equals only an empty set.
pub fn nodes_sufficiently_equal(old: Option<&NodeSet>, new: &NodeSet) -> bool {
    old.map_or(new.is_empty(), |old| old == new)
}

/// The nodes of `nodes` in the stable node set, sorted by name.
pub fn stable_nodes(nodes: &[Arc<Node>]) -> Vec<Arc<Node>> {
    let mut out: Vec<Arc<Node>> = nodes
        .iter()
        .filter(|n| in_stable_node_set(n))
        .cloned()
        .collect();
    out.sort_by(|a, b| node_name(a).cmp(node_name(b)));
    out
}

/// Node names for an event: at most [`MAX_NODE_NAMES_TO_LOG`] sorted names, then `<N more>` (Go:
/// `loggableNodeNames`).
pub fn loggable_node_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut all: Vec<&str> = names.into_iter().collect();
    all.sort_unstable();
    let mut out: Vec<String> = all
        .iter()
        .take(MAX_NODE_NAMES_TO_LOG)
        .map(|s| (*s).to_owned())
        .collect();
    if all.len() > MAX_NODE_NAMES_TO_LOG {
        out.push(format!("<{} more>", all.len() - MAX_NODE_NAMES_TO_LOG));
    }
    out
}

/// Format names as Go's `%v` formats a string slice: `[a b c]`.
pub fn go_list(names: &[String]) -> String {
    format!("[{}]", names.join(" "))
}

#[cfg(test)]
mod tests;
