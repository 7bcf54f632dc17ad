//! Object builders shared by the integration tests.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};

/// A Node with a name and, if non-empty, a `spec.providerID`.
pub fn node(name: &str, provider_id: &str) -> Node {
    let mut node = Node::default();
    node.metadata.name = Some(name.to_owned());
    if !provider_id.is_empty() {
        node.spec = Some(NodeSpec {
            provider_id: Some(provider_id.to_owned()),
            ..Default::default()
        });
    }
    node
}

/// Nodes with these names and no providerID.
pub fn nodes(names: &[&str]) -> Vec<Node> {
    names.iter().map(|n| node(n, "")).collect()
}

/// A `type: LoadBalancer` Service `namespace/name` with a UID and these TCP ports.
pub fn service(namespace: &str, name: &str, ports: &[i32]) -> Service {
    let mut svc = Service::default();
    svc.metadata.namespace = Some(namespace.to_owned());
    svc.metadata.name = Some(name.to_owned());
    svc.metadata.uid = Some(format!("0000-{namespace}-{name}-uid"));
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".to_owned()),
        ports: (!ports.is_empty()).then(|| {
            ports
                .iter()
                .map(|p| ServicePort {
                    port: *p,
                    protocol: Some("TCP".to_owned()),
                    node_port: Some(30000 + p),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    });
    svc
}
