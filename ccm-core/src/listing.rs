//! What a provider reports when it lists the load balancers it owns ([`LoadBalancer::list_load_balancers`]), and
//! the one comparison of such a report with what a Service needs.
//!
//! A new leader (or a restarted CCM) uses the listing to learn the state of every load balancer in a few paginated
//! calls instead of one `EnsureLoadBalancer` per Service (docs/service-controller.md, "Takeover").
//!
//! [`LoadBalancer::list_load_balancers`]: crate::LoadBalancer::list_load_balancers

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use serde::Serialize;

use crate::helpers::{load_balancer_status_equal, node_name, node_provider_id};

/// The prefix of every [`load_balancer_fingerprint`]; a new algorithm gets a new prefix, so a fingerprint written by
/// an older SDK never matches (its load balancers are ensured once more, never skipped wrongly).
const FINGERPRINT_VERSION: &str = "v1";

/// A port of a listed load balancer, as the cloud has it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct ObservedPort {
    /// The protocol, as in `spec.ports[].protocol` (`TCP`, `UDP`, `SCTP`).
    pub protocol: String,
    /// The load balancer's port (`spec.ports[].port`).
    pub port: i32,
    /// The node port traffic goes to, `None` if the load balancer does not use node ports.
    pub node_port: Option<i32>,
}

impl ObservedPort {
    /// A port; `node_port` is `None` when the load balancer sends traffic elsewhere than to node ports.
    pub fn new(protocol: impl Into<String>, port: i32, node_port: Option<i32>) -> Self {
        ObservedPort {
            protocol: protocol.into(),
            port,
            node_port,
        }
    }
}

/// One load balancer as the cloud reports it in a listing.
///
/// ```
/// use ccm_core::listing::{ObservedLoadBalancer, ObservedPort, load_balancer_fingerprint};
/// use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Service};
///
/// let service = Service::default();
/// let status = LoadBalancerStatus {
///     ingress: Some(vec![LoadBalancerIngress { ip: Some("203.0.113.7".into()), ..Default::default() }]),
/// };
/// let observed = ObservedLoadBalancer::new("a5f1c2a9e0b7d4c1e9f001234567890a", status)
///     .with_ports(vec![ObservedPort::new("TCP", 80, Some(30080))])
///     .with_backends(["node-1", "node-2"])
///     .with_fingerprint(load_balancer_fingerprint(&service));
/// assert_eq!(observed.backends.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ObservedLoadBalancer {
    /// The load balancer's cloud name: what [`get_load_balancer_name`](crate::LoadBalancer::get_load_balancer_name)
    /// returns for its Service. The controller matches listed load balancers to Services by this name.
    pub name: String,
    /// The status the load balancer would report (what `ensure_load_balancer` returns).
    pub status: LoadBalancerStatus,
    /// The ports it serves.
    pub ports: Vec<ObservedPort>,
    /// Its backends, each the node name or the node's providerID (whichever the cloud knows).
    pub backends: BTreeSet<String>,
    /// The [`load_balancer_fingerprint`] of the Service it was last ensured for, if the provider stored one (for
    /// example as a tag). Without it the controller cannot tell whether the Service changed while no CCM was
    /// running, so it ensures the load balancer.
    pub fingerprint: Option<String>,
}

impl ObservedLoadBalancer {
    /// A listed load balancer with its name and status, no ports, no backends and no fingerprint.
    pub fn new(name: impl Into<String>, status: LoadBalancerStatus) -> Self {
        ObservedLoadBalancer {
            name: name.into(),
            status,
            ..Default::default()
        }
    }
    /// Set the ports.
    pub fn with_ports(mut self, ports: Vec<ObservedPort>) -> Self {
        self.ports = ports;
        self
    }
    /// Set the backends (node names or providerIDs).
    pub fn with_backends<I, S>(mut self, backends: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.backends = backends.into_iter().map(Into::into).collect();
        self
    }
    /// Set the fingerprint stored at the last ensure.
    pub fn with_fingerprint(mut self, fingerprint: impl Into<String>) -> Self {
        self.fingerprint = Some(fingerprint.into());
        self
    }

    /// How this load balancer differs from what `service` needs with `nodes` as its backends, in the order
    /// checked; `None` when it serves the Service as an ensure would leave it.
    ///
    /// `service` must want a load balancer; `nodes` is the backend set an ensure would pass.
    pub fn drift(&self, service: &Service, nodes: &[&Node]) -> Option<Drift> {
        if self.fingerprint.as_deref() != Some(load_balancer_fingerprint(service).as_str()) {
            return Some(Drift::Configuration);
        }
        if !ports_match(&self.ports, service) {
            return Some(Drift::Ports);
        }
        let backends_match = self.backends.len() == nodes.len()
            && nodes.iter().all(|n| {
                self.backends.contains(node_name(n))
                    || (!node_provider_id(n).is_empty()
                        && self.backends.contains(node_provider_id(n)))
            });
        if !backends_match {
            return Some(Drift::Backends);
        }
        let recorded = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.clone())
            .unwrap_or_default();
        if !load_balancer_status_equal(&as_stored(&self.status), &as_stored(&recorded)) {
            return Some(Drift::Status);
        }
        None
    }
}

/// Why a listed load balancer does not match its Service ([`ObservedLoadBalancer::drift`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
#[non_exhaustive]
pub enum Drift {
    /// No load balancer of that name was listed.
    Missing,
    /// The Service's load-balancer settings changed since the last ensure, or the provider stored no fingerprint.
    Configuration,
    /// The cloud serves other ports than the Service's.
    Ports,
    /// The backends are not the nodes an ensure would pass.
    Backends,
    /// The Service's `status.loadBalancer` is not what the load balancer reports.
    Status,
}

impl Drift {
    /// A lower-case word for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One page of a load-balancer listing.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct LoadBalancerPage {
    /// The load balancers of this page.
    pub items: Vec<ObservedLoadBalancer>,
    /// The token of the next page, `None` on the last page.
    pub next_page: Option<String>,
}

impl LoadBalancerPage {
    /// A page with these items and, unless it is the last, the token of the next.
    pub fn new(items: Vec<ObservedLoadBalancer>, next_page: Option<String>) -> Self {
        LoadBalancerPage { items, next_page }
    }
}

/// A status as the API server stores it: an ingress entry with an IP and no `ipMode` gets `VIP` (the API server's
/// default since Kubernetes 1.30), so a provider that leaves `ipMode` out matches the stored status.
fn as_stored(status: &LoadBalancerStatus) -> LoadBalancerStatus {
    let mut out = status.clone();
    for ingress in out.ingress.iter_mut().flatten() {
        if ingress.ip.is_some() && ingress.ip_mode.is_none() {
            ingress.ip_mode = Some("VIP".to_owned());
        }
    }
    out
}

fn ports_match(observed: &[ObservedPort], service: &Service) -> bool {
    let wanted: BTreeSet<ObservedPort> = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|p| {
            ObservedPort::new(
                p.protocol
                    .as_deref()
                    .filter(|p| !p.is_empty())
                    .unwrap_or("TCP"),
                p.port,
                p.node_port.filter(|n| *n != 0),
            )
        })
        .collect();
    let have: BTreeSet<ObservedPort> = observed.iter().cloned().collect();
    have.len() == observed.len() && have == wanted
}

/// The fields of a Service that decide its load balancer, in a canonical form: exactly what the service
/// controller compares to decide that an update needs an ensure (Go's `needsUpdate`, with the extended fields), plus
/// the type and class.
#[derive(Serialize)]
struct Canonical<'a> {
    uid: &'a str,
    type_: &'a str,
    class: &'a str,
    source_ranges: &'a [String],
    ports: Vec<(&'a str, &'a str, i32, i32, String, &'a str)>,
    session_affinity: &'a str,
    session_affinity_config: String,
    load_balancer_ip: &'a str,
    external_ips: &'a [String],
    annotations: BTreeMap<&'a str, &'a str>,
    external_traffic_policy: &'a str,
    health_check_node_port: i32,
    ip_families: &'a [String],
    allocate_node_ports: Option<bool>,
}

/// A short, stable digest of every Service field that decides its load balancer: the UID, type, class, source
/// ranges, ports (name, protocol, port, node port, target port, app protocol), session affinity and its config,
/// `loadBalancerIP`, external IPs, annotations, external traffic policy, health-check node port, IP families and
/// `allocateLoadBalancerNodePorts`. Absent and empty values digest alike.
///
/// A provider that implements [`list_load_balancers`](crate::LoadBalancer::list_load_balancers) stores the
/// fingerprint of the Service it ensured (for example in a tag) and reports it in
/// [`ObservedLoadBalancer::fingerprint`]: equal fingerprints mean no update since that ensure needs another.
///
/// ```
/// use k8s_openapi::api::core::v1::Service;
/// use ccm_core::listing::load_balancer_fingerprint;
///
/// let mut svc = Service::default();
/// let before = load_balancer_fingerprint(&svc);
/// svc.metadata.annotations = Some([("example.com/lb-size".to_owned(), "large".to_owned())].into());
/// assert_ne!(before, load_balancer_fingerprint(&svc));
/// assert!(before.starts_with("v1-"));
/// ```
pub fn load_balancer_fingerprint(service: &Service) -> String {
    let spec = service.spec.clone().unwrap_or_default();
    let ports = spec.ports.clone().unwrap_or_default();
    let canonical = Canonical {
        uid: service.metadata.uid.as_deref().unwrap_or_default(),
        type_: spec.type_.as_deref().unwrap_or_default(),
        class: spec.load_balancer_class.as_deref().unwrap_or_default(),
        source_ranges: spec
            .load_balancer_source_ranges
            .as_deref()
            .unwrap_or_default(),
        ports: ports
            .iter()
            .map(|p| {
                (
                    p.name.as_deref().unwrap_or_default(),
                    p.protocol.as_deref().unwrap_or_default(),
                    p.port,
                    p.node_port.unwrap_or(0),
                    p.target_port
                        .as_ref()
                        .map(|t| serde_json::to_string(t).unwrap_or_default())
                        .unwrap_or_else(|| "0".to_owned()),
                    p.app_protocol.as_deref().unwrap_or_default(),
                )
            })
            .collect(),
        session_affinity: spec.session_affinity.as_deref().unwrap_or_default(),
        session_affinity_config: spec
            .session_affinity_config
            .as_ref()
            .map(|c| serde_json::to_string(c).unwrap_or_default())
            .unwrap_or_default(),
        load_balancer_ip: spec.load_balancer_ip.as_deref().unwrap_or_default(),
        external_ips: spec.external_ips.as_deref().unwrap_or_default(),
        annotations: service
            .metadata
            .annotations
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        external_traffic_policy: spec.external_traffic_policy.as_deref().unwrap_or_default(),
        health_check_node_port: spec.health_check_node_port.unwrap_or(0),
        ip_families: spec.ip_families.as_deref().unwrap_or_default(),
        allocate_node_ports: spec.allocate_load_balancer_node_ports,
    };
    // Serializing these plain values cannot fail; an empty string would only make every Service drift.
    let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
    format!("{FINGERPRINT_VERSION}-{:016x}", fnv1a64(&bytes))
}

/// FNV-1a, 64 bits: stable across platforms and releases (the fingerprint is stored in clouds).
fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |hash, b| (hash ^ u64::from(*b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, ServicePort, ServiceSpec, ServiceStatus,
    };

    fn service() -> Service {
        let mut svc = Service::default();
        svc.metadata.uid = Some("uid-1".into());
        svc.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                node_port: Some(30080),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        svc.status = Some(ServiceStatus {
            load_balancer: Some(status("203.0.113.1")),
            ..Default::default()
        });
        svc
    }

    fn status(ip: &str) -> LoadBalancerStatus {
        LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip.into()),
                ..Default::default()
            }]),
        }
    }

    fn node(name: &str, provider_id: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: (!provider_id.is_empty()).then(|| provider_id.to_owned()),
            ..Default::default()
        });
        n
    }

    fn observed(svc: &Service) -> ObservedLoadBalancer {
        ObservedLoadBalancer::new("lb", status("203.0.113.1"))
            .with_ports(vec![ObservedPort::new("TCP", 80, Some(30080))])
            .with_backends(["a", "fake://b"])
            .with_fingerprint(load_balancer_fingerprint(svc))
    }

    #[test]
    fn a_load_balancer_as_ensured_has_no_drift() {
        let svc = service();
        let (a, b) = (node("a", "fake://a"), node("b", "fake://b"));
        assert_eq!(observed(&svc).drift(&svc, &[&a, &b]), None);
    }

    #[test]
    fn each_difference_is_named() {
        let svc = service();
        let (a, b, c) = (node("a", ""), node("b", "fake://b"), node("c", ""));
        let nodes = [&a, &b];
        let mut o = observed(&svc);
        o.fingerprint = None;
        assert_eq!(o.drift(&svc, &nodes), Some(Drift::Configuration));
        let mut changed = svc.clone();
        changed.metadata.annotations = Some([("x".to_owned(), "y".to_owned())].into());
        assert_eq!(
            observed(&svc).drift(&changed, &nodes),
            Some(Drift::Configuration)
        );
        let o = observed(&svc).with_ports(vec![ObservedPort::new("TCP", 81, Some(30080))]);
        assert_eq!(o.drift(&svc, &nodes), Some(Drift::Ports));
        let o = observed(&svc).with_ports(vec![]);
        assert_eq!(o.drift(&svc, &nodes), Some(Drift::Ports));
        assert_eq!(observed(&svc).drift(&svc, &[&a]), Some(Drift::Backends));
        assert_eq!(observed(&svc).drift(&svc, &[&a, &c]), Some(Drift::Backends));
        assert_eq!(
            observed(&svc).drift(&svc, &[&a, &b, &c]),
            Some(Drift::Backends)
        );
        let mut o = observed(&svc);
        o.status = status("203.0.113.2");
        assert_eq!(o.drift(&svc, &nodes), Some(Drift::Status));
        let mut o = observed(&svc);
        o.status.ingress.as_mut().unwrap()[0].ip_mode = Some("Proxy".into());
        assert_eq!(o.drift(&svc, &nodes), Some(Drift::Status));
    }

    #[test]
    fn the_api_server_s_ip_mode_default_is_no_drift() {
        let mut svc = service();
        let stored = &mut svc
            .status
            .as_mut()
            .unwrap()
            .load_balancer
            .as_mut()
            .unwrap()
            .ingress;
        stored.as_mut().unwrap()[0].ip_mode = Some("VIP".into());
        let (a, b) = (node("a", ""), node("b", "fake://b"));
        assert_eq!(observed(&svc).drift(&svc, &[&a, &b]), None);
    }

    #[test]
    fn the_fingerprint_covers_what_needs_an_ensure_and_nothing_else() {
        let svc = service();
        let base = load_balancer_fingerprint(&svc);
        assert_eq!(
            base,
            load_balancer_fingerprint(&svc.clone()),
            "deterministic"
        );
        let mut labels = svc.clone();
        labels.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
        labels.metadata.resource_version = Some("42".into());
        labels.status = None;
        assert_eq!(
            base,
            load_balancer_fingerprint(&labels),
            "labels, status, versions do not count"
        );
        type Change = Box<dyn Fn(&mut Service)>;
        let changes: Vec<Change> = vec![
            Box::new(|s| s.metadata.uid = Some("uid-2".into())),
            Box::new(|s| {
                s.spec.as_mut().unwrap().load_balancer_source_ranges =
                    Some(vec!["10.0.0.0/8".into()])
            }),
            Box::new(|s| {
                s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].node_port = Some(30081)
            }),
            Box::new(|s| s.spec.as_mut().unwrap().session_affinity = Some("ClientIP".into())),
            Box::new(|s| s.spec.as_mut().unwrap().load_balancer_ip = Some("203.0.113.9".into())),
            Box::new(|s| s.spec.as_mut().unwrap().external_ips = Some(vec!["198.51.100.1".into()])),
            Box::new(|s| s.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into())),
            Box::new(|s| s.spec.as_mut().unwrap().health_check_node_port = Some(31000)),
            Box::new(|s| s.spec.as_mut().unwrap().ip_families = Some(vec!["IPv6".into()])),
            Box::new(|s| s.spec.as_mut().unwrap().allocate_load_balancer_node_ports = Some(false)),
            Box::new(|s| {
                s.spec.as_mut().unwrap().load_balancer_class = Some("example.com/x".into())
            }),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut s = svc.clone();
            change(&mut s);
            assert_ne!(base, load_balancer_fingerprint(&s), "change {i} is seen");
        }
        let mut empty_lists = svc.clone();
        empty_lists.spec.as_mut().unwrap().external_ips = Some(vec![]);
        empty_lists.metadata.annotations = Some(BTreeMap::new());
        assert_eq!(
            base,
            load_balancer_fingerprint(&empty_lists),
            "absent and empty alike"
        );
    }
}
