//! The service controller decides the same on stripped cached objects (`ccm_core::runtime::informer::strip_node`
//! and `strip_service`) as on whole ones.

use std::sync::Arc;

use ccm_core::names;
use ccm_core::runtime::informer::{strip_node, strip_service};
use ccm_servicecontroller::predicates::{
    NodeSet, ServiceSelector, in_stable_node_set, needs_cleanup,
    node_update_affects_load_balancers, should_enqueue_added, should_enqueue_updated,
    should_sync_updated_node, stable_nodes, update_reason, wants_deletion,
};
use k8s_openapi::api::core::v1::{Node, Service, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const NODE: &str = include_str!("../../ccm-core/tests/fixtures/node.json");
const SERVICE: &str = include_str!("../../ccm-core/tests/fixtures/service.json");

fn stripped<T: Clone>(object: &T, strip: fn(&mut T)) -> T {
    let mut copy = object.clone();
    strip(&mut copy);
    copy
}

fn service() -> Service {
    serde_json::from_str(SERVICE).unwrap()
}

fn changed(f: impl FnOnce(&mut Service)) -> Service {
    let mut svc = service();
    svc.metadata.resource_version = Some("18370078".into());
    f(&mut svc);
    svc
}

fn annotate(svc: &mut Service, key: &str, value: &str) {
    svc.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
}

fn services() -> Vec<(&'static str, Service)> {
    vec![
        ("as applied", service()),
        ("resynced", changed(|_| {})),
        (
            "LB annotation changed",
            changed(|s| annotate(s, "example.com/load-balancer-internal", "true")),
        ),
        (
            "applied again with another selector (only last-applied changes)",
            changed(|s| {
                let applied = s.metadata.annotations.as_ref().unwrap()
                    [names::annotations::LAST_APPLIED_CONFIGURATION]
                    .replace("payments-api\"}", "payments-api-v2\"}");
                annotate(s, names::annotations::LAST_APPLIED_CONFIGURATION, &applied);
                s.spec.as_mut().unwrap().selector =
                    Some([("app.kubernetes.io/name".into(), "payments-api-v2".into())].into());
            }),
        ),
        (
            "last-applied removed",
            changed(|s| {
                s.metadata
                    .annotations
                    .as_mut()
                    .unwrap()
                    .remove(names::annotations::LAST_APPLIED_CONFIGURATION);
            }),
        ),
        (
            "port changed",
            changed(|s| s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].port = 8443),
        ),
        (
            "source ranges changed",
            changed(|s| {
                s.spec.as_mut().unwrap().load_balancer_source_ranges =
                    Some(vec!["0.0.0.0/0".into()])
            }),
        ),
        (
            "being deleted",
            changed(|s| s.metadata.deletion_timestamp = Some(Time(Default::default()))),
        ),
        (
            "now ClusterIP",
            changed(|s| s.spec.as_mut().unwrap().type_ = Some("ClusterIP".into())),
        ),
        (
            "with a class",
            changed(|s| {
                s.spec.as_mut().unwrap().load_balancer_class = Some("example.com/lb".into())
            }),
        ),
        ("no finalizer", changed(|s| s.metadata.finalizers = None)),
        (
            "status changed",
            changed(|s| s.status.as_mut().unwrap().load_balancer = Some(Default::default())),
        ),
    ]
}

fn selectors() -> Vec<ServiceSelector> {
    vec![
        ServiceSelector::default(),
        ServiceSelector {
            class_less: false,
            class: Some("example.com/lb".into()),
        },
    ]
}

#[test]
fn service_predicates_are_identical() {
    let all = services();
    for selector in selectors() {
        for (what, svc) in &all {
            let small = stripped(svc, strip_service);
            assert_eq!(
                should_enqueue_added(&selector, &small),
                should_enqueue_added(&selector, svc),
                "{what}"
            );
            assert_eq!(needs_cleanup(&small), needs_cleanup(svc), "{what}");
            assert_eq!(
                wants_deletion(&selector, &small),
                wants_deletion(&selector, svc),
                "{what}"
            );
        }
        for (old_what, old) in &all {
            for (new_what, new) in &all {
                let (small_old, small_new) =
                    (stripped(old, strip_service), stripped(new, strip_service));
                for extended in [false, true] {
                    assert_eq!(
                        update_reason(&selector, extended, &small_old, &small_new),
                        update_reason(&selector, extended, old, new),
                        "{old_what} -> {new_what}"
                    );
                    assert_eq!(
                        should_enqueue_updated(&selector, extended, &small_old, &small_new),
                        should_enqueue_updated(&selector, extended, old, new),
                        "{old_what} -> {new_what}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_change_of_last_applied_alone_still_syncs_as_in_go() {
    let old = service();
    let (_, new) = services().swap_remove(3);
    let selector = ServiceSelector::default();
    let small = |s: &Service| stripped(s, strip_service);
    assert!(update_reason(&selector, false, &old, &new).is_some());
    assert_eq!(
        update_reason(&selector, false, &small(&old), &small(&new)),
        update_reason(&selector, false, &old, &new)
    );
}

fn node() -> Node {
    serde_json::from_str(NODE).unwrap()
}

fn node_changed(f: impl FnOnce(&mut Node)) -> Node {
    let mut n = node();
    n.metadata.resource_version = Some("18374622".into());
    f(&mut n);
    n
}

fn nodes() -> Vec<(&'static str, Node)> {
    vec![
        ("node", node()),
        (
            "an image gone",
            node_changed(|n| {
                n.status.as_mut().unwrap().images.as_mut().unwrap().pop();
            }),
        ),
        (
            "excluded",
            node_changed(|n| {
                n.metadata.labels.as_mut().unwrap().insert(
                    names::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS.into(),
                    "true".into(),
                );
            }),
        ),
        (
            "autoscaler taint",
            node_changed(|n| {
                n.spec.as_mut().unwrap().taints = Some(vec![Taint {
                    key: names::taints::TO_BE_DELETED_BY_CLUSTER_AUTOSCALER.into(),
                    value: Some("1732352561".into()),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }])
            }),
        ),
        (
            "being deleted",
            node_changed(|n| n.metadata.deletion_timestamp = Some(Time(Default::default()))),
        ),
        (
            "other providerID",
            node_changed(|n| {
                n.spec.as_mut().unwrap().provider_id = Some("aws:///eu-west-1b/i-1".into())
            }),
        ),
        (
            "cordoned",
            node_changed(|n| n.spec.as_mut().unwrap().unschedulable = Some(true)),
        ),
    ]
}

#[test]
fn node_predicates_are_identical() {
    let all = nodes();
    for (what, n) in &all {
        let small = stripped(n, strip_node);
        assert_eq!(in_stable_node_set(&small), in_stable_node_set(n), "{what}");
    }
    for (old_what, old) in &all {
        for (new_what, new) in &all {
            let (small_old, small_new) = (stripped(old, strip_node), stripped(new, strip_node));
            assert_eq!(
                should_sync_updated_node(&small_old, &small_new),
                should_sync_updated_node(old, new),
                "{old_what} -> {new_what}"
            );
            assert_eq!(
                node_update_affects_load_balancers(&small_old, &small_new),
                node_update_affects_load_balancers(old, new),
                "{old_what} -> {new_what}"
            );
        }
    }
    let whole: Vec<Arc<Node>> = all
        .iter()
        .enumerate()
        .map(|(i, (_, n))| {
            let mut n = n.clone();
            n.metadata.name = Some(format!("node-{i}"));
            Arc::new(n)
        })
        .collect();
    let small: Vec<Arc<Node>> = whole
        .iter()
        .map(|n| Arc::new(stripped(&**n, strip_node)))
        .collect();
    let set = |nodes: &[Arc<Node>]| NodeSet::from_nodes(stable_nodes(nodes).iter().map(|n| &**n));
    assert_eq!(set(&small), set(&whole));
    assert!(!set(&whole).is_empty());
}
