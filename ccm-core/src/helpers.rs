//! Helpers that providers and controllers share: load-balancer names, source ranges, health-check settings,
//! providerIDs and node conditions.

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service, Taint};

use crate::names;

/// `"a"` followed by the Service UID without dashes, cut to 32 characters (Go: `DefaultLoadBalancerName`).
///
/// ```
/// use k8s_openapi::api::core::v1::Service;
/// let mut svc = Service::default();
/// svc.metadata.uid = Some("5f1c2a9e-0b7d-4c1e-9f00-1234567890ab".into());
/// assert_eq!(ccm_core::helpers::default_load_balancer_name(&svc), "a5f1c2a9e0b7d4c1e9f001234567890a");
/// ```
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let mut name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    name.truncate(32);
    name
}

/// An invalid load-balancer source range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "service {service}: invalid load balancer source range {value:?} in {origin}; use CIDRs such as 10.0.0.0/8"
)]
pub struct SourceRangeError {
    /// `namespace/name` of the Service.
    pub service: String,
    /// The value that did not parse.
    pub value: String,
    /// Where it came from (`spec.loadBalancerSourceRanges` or the annotation).
    pub origin: &'static str,
}

/// The CIDRs allowed to reach the load balancer (Go: `GetLoadBalancerSourceRanges`): the spec field wins, then
/// the `service.beta.kubernetes.io/load-balancer-source-ranges` annotation, else `0.0.0.0/0`.
///
/// ```
/// use k8s_openapi::api::core::v1::{Service, ServiceSpec};
/// let svc = Service {
///     spec: Some(ServiceSpec { load_balancer_source_ranges: Some(vec!["10.0.0.0/8".into()]), ..Default::default() }),
///     ..Default::default()
/// };
/// let ranges = ccm_core::helpers::load_balancer_source_ranges(&svc).unwrap();
/// assert_eq!(ranges[0].to_string(), "10.0.0.0/8");
/// ```
pub fn load_balancer_source_ranges(service: &Service) -> Result<Vec<IpNet>, SourceRangeError> {
    let spec_ranges = service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.as_deref())
        .unwrap_or_default();
    let annotation = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::annotations::LOAD_BALANCER_SOURCE_RANGES))
        .map_or("", |v| v.trim());
    let (values, origin): (Vec<&str>, &'static str) = if !spec_ranges.is_empty() {
        let values = spec_ranges.iter().map(|s| s.trim()).collect();
        (values, "spec.loadBalancerSourceRanges")
    } else if !annotation.is_empty() {
        let values = annotation.split(',').map(str::trim).collect();
        (values, names::annotations::LOAD_BALANCER_SOURCE_RANGES)
    } else {
        return Ok(vec!["0.0.0.0/0".parse().expect("a valid constant CIDR")]);
    };
    values
        .into_iter()
        .map(|value| {
            value.parse::<IpNet>().map_err(|_| SourceRangeError {
                service: service_key(service),
                value: value.to_owned(),
                origin,
            })
        })
        .collect()
}

/// True if the Service is `type: LoadBalancer` (or NodePort) with `externalTrafficPolicy: Local`.
pub fn requests_only_local_traffic(service: &Service) -> bool {
    let Some(spec) = service.spec.as_ref() else {
        return false;
    };
    let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
    (ty == "LoadBalancer" || ty == "NodePort")
        && spec.external_traffic_policy.as_deref() == Some("Local")
}

/// True if the Service needs a health check: a LoadBalancer with `externalTrafficPolicy: Local`.
pub fn needs_health_check(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
        && requests_only_local_traffic(service)
}

/// The health-check path and port for a Service that needs one (Go: `GetServiceHealthCheckPathPort`):
/// `/healthz` on `spec.healthCheckNodePort`.
///
/// ```
/// use k8s_openapi::api::core::v1::{Service, ServiceSpec};
/// let svc = Service {
///     spec: Some(ServiceSpec {
///         type_: Some("LoadBalancer".into()),
///         external_traffic_policy: Some("Local".into()),
///         health_check_node_port: Some(32000),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// assert_eq!(ccm_core::helpers::service_health_check_path_port(&svc), Some(("/healthz".to_string(), 32000)));
/// ```
pub fn service_health_check_path_port(service: &Service) -> Option<(String, i32)> {
    if !needs_health_check(service) {
        return None;
    }
    let port = service.spec.as_ref()?.health_check_node_port?;
    (port != 0).then(|| ("/healthz".to_owned(), port))
}

/// True if the Service carries the `service.kubernetes.io/load-balancer-cleanup` finalizer.
pub fn has_load_balancer_finalizer(service: &Service) -> bool {
    service.metadata.finalizers.as_ref().is_some_and(|f| {
        f.iter()
            .any(|f| f == names::finalizers::LOAD_BALANCER_CLEANUP)
    })
}

/// Whether two load-balancer statuses have the same ingress (Go: `LoadBalancerStatusEqual`, which compares only
/// `.ingress`; `None` and an empty list are equal).
pub fn load_balancer_status_equal(a: &LoadBalancerStatus, b: &LoadBalancerStatus) -> bool {
    fn ingress(s: &LoadBalancerStatus) -> &[LoadBalancerIngress] {
        s.ingress.as_deref().unwrap_or_default()
    }
    ingress(a) == ingress(b)
}

/// `namespace/name` of an object, or just the name for cluster-scoped objects.
pub fn service_key(service: &Service) -> String {
    object_key(
        service.metadata.namespace.as_deref(),
        service.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// `namespace/name`, or `name` when there is no namespace (Go: `MetaNamespaceKeyFunc`).
pub fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

/// A providerID that does not have the form `<provider>://<id>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid provider ID {value:?}: expected the form <provider>://<instance id>")]
pub struct ProviderIdError {
    /// The value that did not parse.
    pub value: String,
}

/// A parsed providerID, `<provider>://<instance id>`.
///
/// ```
/// let id = ccm_core::helpers::ProviderId::parse("aws:///eu-west-1a/i-0abc").unwrap();
/// assert_eq!(id.provider(), "aws");
/// assert_eq!(id.instance(), "/eu-west-1a/i-0abc");
/// assert!(ccm_core::helpers::ProviderId::parse("i-0abc").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderId {
    provider: String,
    instance: String,
}

impl ProviderId {
    /// Parse `<provider>://<id>`; the provider part must be non-empty and contain no `/`.
    pub fn parse(value: &str) -> Result<Self, ProviderIdError> {
        let err = || ProviderIdError {
            value: value.to_owned(),
        };
        let (provider, instance) = value.split_once("://").ok_or_else(err)?;
        if provider.is_empty() || provider.contains('/') || instance.is_empty() {
            return Err(err());
        }
        Ok(ProviderId {
            provider: provider.to_owned(),
            instance: instance.to_owned(),
        })
    }
    /// The provider name (the scheme).
    pub fn provider(&self) -> &str {
        &self.provider
    }
    /// Everything after `://`.
    pub fn instance(&self) -> &str {
        &self.instance
    }
}

impl std::fmt::Display for ProviderId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.provider, self.instance)
    }
}

/// The status of a node condition; a missing condition is [`ConditionStatus::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`, or the condition is absent.
    Unknown,
}

impl ConditionStatus {
    /// The status a condition's `status` string spells (`True`, `False`; anything else is `Unknown`).
    pub fn parse(status: Option<&str>) -> ConditionStatus {
        match status {
            Some("True") => ConditionStatus::True,
            Some("False") => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        }
    }
}

/// The few fields of a Node that the SDK's per-node decisions over the whole cache read (which nodes a lifecycle
/// pass looks at, which join a batched initialization), from a `Node` or straight from the Node store's
/// [`CompactNode`](crate::runtime::informer::CompactNode), so a pass over every cached Node makes a `Node` only
/// of those it acts on ([`Store::select`](crate::runtime::informer::Store::select)).
///
/// ```
/// use ccm_core::helpers::{ConditionStatus, NodeFields};
/// use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
///
/// let node = Node {
///     spec: Some(NodeSpec {
///         provider_id: Some("fake://a".into()),
///         taints: Some(vec![Taint { key: "example.com/t".into(), effect: "NoSchedule".into(), ..Default::default() }]),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// assert_eq!(node.provider_id(), "fake://a");
/// assert!(node.has_taint("example.com/t"));
/// assert_eq!(node.condition_status("Ready"), ConditionStatus::Unknown);
/// ```
pub trait NodeFields {
    /// `metadata.name`, or `""`.
    fn name(&self) -> &str;
    /// `spec.providerID`, or `""`.
    fn provider_id(&self) -> &str;
    /// `spec.taints` (none when absent).
    fn taints(&self) -> &[Taint];
    /// The status of the condition of type `condition_type`.
    fn condition_status(&self, condition_type: &str) -> ConditionStatus;
    /// True if a taint has this key (any value or effect).
    fn has_taint(&self, key: &str) -> bool {
        self.taints().iter().any(|t| t.key == key)
    }
}

impl NodeFields for Node {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
    fn provider_id(&self) -> &str {
        self.spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default()
    }
    fn taints(&self) -> &[Taint] {
        self.spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default()
    }
    fn condition_status(&self, condition_type: &str) -> ConditionStatus {
        let status = self
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == condition_type))
            .map(|c| c.status.as_str());
        ConditionStatus::parse(status)
    }
}

impl<N: NodeFields + ?Sized> NodeFields for std::sync::Arc<N> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn provider_id(&self) -> &str {
        (**self).provider_id()
    }
    fn taints(&self) -> &[Taint] {
        (**self).taints()
    }
    fn condition_status(&self, condition_type: &str) -> ConditionStatus {
        (**self).condition_status(condition_type)
    }
}

/// The status of the node's condition of type `condition_type` ([`NodeFields::condition_status`]).
pub fn node_condition_status(node: &Node, condition_type: &str) -> ConditionStatus {
    node.condition_status(condition_type)
}

/// True if the node has a taint with this key, any value or effect ([`NodeFields::has_taint`]).
pub fn node_has_taint(node: &Node, key: &str) -> bool {
    node.has_taint(key)
}

/// The node's `spec.providerID`, or `""` ([`NodeFields::provider_id`]).
pub fn node_provider_id(node: &Node) -> &str {
    NodeFields::provider_id(node)
}

/// The node's name, or `""` ([`NodeFields::name`]).
pub fn node_name(node: &Node) -> &str {
    NodeFields::name(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, ServiceSpec, Taint};
    use std::collections::BTreeMap;

    fn svc_with(spec: ServiceSpec, annotations: &[(&str, &str)]) -> Service {
        let mut svc = Service {
            spec: Some(spec),
            ..Default::default()
        };
        svc.metadata.name = Some("web".into());
        svc.metadata.namespace = Some("default".into());
        if !annotations.is_empty() {
            svc.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            );
        }
        svc
    }

    #[test]
    fn default_name_short_and_long() {
        let mut svc = Service::default();
        assert_eq!(default_load_balancer_name(&svc), "a");
        svc.metadata.uid = Some("12-34".into());
        assert_eq!(default_load_balancer_name(&svc), "a1234");
        svc.metadata.uid = Some("x".repeat(40));
        assert_eq!(default_load_balancer_name(&svc).len(), 32);
    }

    #[test]
    fn source_ranges_precedence_and_errors() {
        let spec = ServiceSpec {
            load_balancer_source_ranges: Some(vec![" 10.0.0.0/8 ".into()]),
            ..Default::default()
        };
        let svc = svc_with(
            spec,
            &[(
                names::annotations::LOAD_BALANCER_SOURCE_RANGES,
                "192.168.0.0/16",
            )],
        );
        assert_eq!(
            load_balancer_source_ranges(&svc).unwrap(),
            vec!["10.0.0.0/8".parse::<IpNet>().unwrap()]
        );

        let svc = svc_with(
            ServiceSpec::default(),
            &[(
                names::annotations::LOAD_BALANCER_SOURCE_RANGES,
                "192.168.0.0/16, fd00::/8",
            )],
        );
        assert_eq!(load_balancer_source_ranges(&svc).unwrap().len(), 2);

        let svc = svc_with(ServiceSpec::default(), &[]);
        assert_eq!(
            load_balancer_source_ranges(&svc).unwrap(),
            vec!["0.0.0.0/0".parse::<IpNet>().unwrap()]
        );

        let svc = svc_with(
            ServiceSpec::default(),
            &[(names::annotations::LOAD_BALANCER_SOURCE_RANGES, "nope")],
        );
        let err = load_balancer_source_ranges(&svc).unwrap_err();
        assert_eq!(err.service, "default/web");
        assert!(err.to_string().contains("\"nope\""));
    }

    #[test]
    fn health_check_only_for_local_load_balancers() {
        let mut spec = ServiceSpec {
            type_: Some("LoadBalancer".into()),
            external_traffic_policy: Some("Local".into()),
            health_check_node_port: Some(31000),
            ..Default::default()
        };
        assert_eq!(
            service_health_check_path_port(&svc_with(spec.clone(), &[])),
            Some(("/healthz".into(), 31000))
        );
        spec.external_traffic_policy = Some("Cluster".into());
        assert_eq!(
            service_health_check_path_port(&svc_with(spec.clone(), &[])),
            None
        );
        spec.type_ = Some("NodePort".into());
        spec.external_traffic_policy = Some("Local".into());
        assert!(requests_only_local_traffic(&svc_with(spec.clone(), &[])));
        assert!(!needs_health_check(&svc_with(spec, &[])));
    }

    #[test]
    fn status_equality_ignores_empty_vs_none() {
        let empty = LoadBalancerStatus {
            ingress: Some(vec![]),
        };
        assert!(load_balancer_status_equal(
            &empty,
            &LoadBalancerStatus::default()
        ));
        let one = LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some("1.2.3.4".into()),
                ..Default::default()
            }]),
        };
        assert!(!load_balancer_status_equal(&one, &empty));
        assert!(load_balancer_status_equal(&one, &one.clone()));
    }

    #[test]
    fn provider_ids() {
        assert!(ProviderId::parse("fake://n1").is_ok());
        for bad in ["", "fake://", "://x", "fake:/x", "a/b://c", "plain"] {
            assert!(ProviderId::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            ProviderId::parse("gce://p/z/i").unwrap().to_string(),
            "gce://p/z/i"
        );
    }

    #[test]
    fn node_accessors() {
        let node = Node {
            spec: Some(NodeSpec {
                provider_id: Some("fake://n".into()),
                taints: Some(vec![Taint {
                    key: names::taints::UNINITIALIZED.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "False".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(node_has_taint(&node, names::taints::UNINITIALIZED));
        assert!(!node_has_taint(&node, names::taints::SHUTDOWN));
        assert_eq!(
            node_condition_status(&node, "Ready"),
            ConditionStatus::False
        );
        assert_eq!(
            node_condition_status(&node, "NetworkUnavailable"),
            ConditionStatus::Unknown
        );
        assert_eq!(node_provider_id(&node), "fake://n");
        assert!(!has_load_balancer_finalizer(&Service::default()));
    }
}
