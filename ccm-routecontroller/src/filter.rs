//! Which Node changes can change the routes (used by [`RouteSyncMode::EventDriven`](crate::RouteSyncMode)).

use ccm_core::runtime::informer::InformerEvent;
use k8s_openapi::api::core::v1::Node;

/// Whether a Node update can change the desired routes (Go: `handleNodeUpdate`, plus a UID check).
///
/// True if `spec.podCIDRs` or `spec.podCIDR` changed, `status.addresses` changed, the UID changed (the Node was
/// deleted and re-created under the same name between two observations: the UID is the routes' name hint), or
/// the resourceVersion is the same (an informer resync, used as a repair signal as in Go).
///
/// ```
/// use ccm_routecontroller::filter::node_update_needs_reconcile;
/// use k8s_openapi::api::core::v1::{Node, NodeStatus};
///
/// let old = Node::default();
/// let mut new = old.clone();
/// new.metadata.resource_version = Some("2".into());
/// new.status = Some(NodeStatus { phase: Some("Running".into()), ..Default::default() });
/// assert!(!node_update_needs_reconcile(&old, &new));
/// ```
pub fn node_update_needs_reconcile(old: &Node, new: &Node) -> bool {
    let resync = old.metadata.resource_version == new.metadata.resource_version;
    let spec = |n: &Node| {
        n.spec
            .as_ref()
            .map(|s| (s.pod_cidrs.clone(), s.pod_cidr.clone()))
    };
    let addresses = |n: &Node| n.status.as_ref().and_then(|s| s.addresses.clone());
    resync
        || spec(old) != spec(new)
        || addresses(old) != addresses(new)
        || old.metadata.uid != new.metadata.uid
}

/// Whether an informer event can change the desired routes: every add, delete and resync, and the updates
/// [`node_update_needs_reconcile`] selects.
pub fn event_needs_reconcile(event: &InformerEvent<Node>) -> bool {
    match event {
        InformerEvent::Added(_) | InformerEvent::Deleted(_) | InformerEvent::Resync => true,
        InformerEvent::Updated { old, new } => node_update_needs_reconcile(old, new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerImage, NodeAddress, NodeCondition, NodeSpec, NodeStatus,
    };
    use std::sync::Arc;

    fn node() -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("node-1".into());
        n.metadata.uid = Some("01".into());
        n.metadata.resource_version = Some("1".into());
        n.spec = Some(NodeSpec {
            pod_cidr: Some("10.120.0.0/24".into()),
            pod_cidrs: Some(vec!["10.120.0.0/24".into()]),
            ..Default::default()
        });
        n.status = Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.1.1".into(),
            }]),
            ..Default::default()
        });
        n
    }

    fn updated(f: impl FnOnce(&mut Node)) -> Node {
        let mut n = node();
        n.metadata.resource_version = Some("2".into());
        f(&mut n);
        n
    }

    #[test]
    fn update_table() {
        let cases: Vec<(&str, Node, bool)> = vec![
            (
                "internal IP updated",
                updated(|n| {
                    n.status.as_mut().unwrap().addresses.as_mut().unwrap()[0].address =
                        "10.0.1.2".into()
                }),
                true,
            ),
            (
                "pod CIDR updated",
                updated(|n| {
                    let s = n.spec.as_mut().unwrap();
                    s.pod_cidr = Some("10.121.0.0/24".into());
                    s.pod_cidrs = Some(vec!["10.121.0.0/24".into()]);
                }),
                true,
            ),
            (
                "only the legacy podCIDR set",
                updated(|n| n.spec.as_mut().unwrap().pod_cidrs = None),
                true,
            ),
            ("informer resync (same resourceVersion)", node(), true),
            (
                "re-created under the same name",
                updated(|n| n.metadata.uid = Some("99".into())),
                true,
            ),
            (
                "unrelated status change",
                updated(|n| {
                    n.status.as_mut().unwrap().images = Some(vec![ContainerImage {
                        names: Some(vec!["registry.k8s.io/pause:latest".into()]),
                        size_bytes: Some(239_840),
                    }])
                }),
                false,
            ),
            (
                "our own condition write",
                updated(|n| {
                    n.status.as_mut().unwrap().conditions = Some(vec![NodeCondition {
                        type_: "NetworkUnavailable".into(),
                        status: "False".into(),
                        ..Default::default()
                    }])
                }),
                false,
            ),
            (
                "labels changed",
                updated(|n| n.metadata.labels = Some([("a".to_string(), "b".to_string())].into())),
                false,
            ),
        ];
        for (what, new, want) in cases {
            assert_eq!(node_update_needs_reconcile(&node(), &new), want, "{what}");
        }
    }

    #[test]
    fn events() {
        let n = Arc::new(node());
        assert!(event_needs_reconcile(&InformerEvent::Added(n.clone())));
        assert!(event_needs_reconcile(&InformerEvent::Deleted(n.clone())));
        assert!(event_needs_reconcile(&InformerEvent::Resync));
        let same_but_newer = Arc::new(updated(|_| {}));
        assert!(!event_needs_reconcile(&InformerEvent::Updated {
            old: n.clone(),
            new: same_but_newer
        }));
    }
}
