//! The route controller decides the same on stripped cached Nodes (`ccm_core::runtime::informer::strip_node`) as
//! on whole ones: the event filter, the route plan and the `NetworkUnavailable` condition writes.

use std::collections::HashSet;

use ccm_core::Route;
use ccm_core::names;
use ccm_core::runtime::informer::strip_node;
use ccm_routecontroller::filter::node_update_needs_reconcile;
use ccm_routecontroller::{parse_cluster_cidrs, plan};
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const NODE: &str = include_str!("../../ccm-core/tests/fixtures/node.json");

fn node() -> Node {
    serde_json::from_str(NODE).unwrap()
}

fn changed(f: impl FnOnce(&mut Node)) -> Node {
    let mut n = node();
    n.metadata.resource_version = Some("18374622".into());
    f(&mut n);
    n
}

fn stripped(node: &Node) -> Node {
    let mut small = node.clone();
    strip_node(&mut small);
    small
}

fn nodes() -> Vec<(&'static str, Node)> {
    vec![
        ("node", node()),
        (
            "kubelet status update",
            changed(|n| {
                let status = n.status.as_mut().unwrap();
                status.images.as_mut().unwrap().truncate(10);
                status.volumes_in_use = None;
            }),
        ),
        (
            "address changed",
            changed(|n| {
                n.status.as_mut().unwrap().addresses.as_mut().unwrap()[0].address =
                    "10.0.12.35".into()
            }),
        ),
        (
            "pod CIDR changed",
            changed(|n| {
                let spec = n.spec.as_mut().unwrap();
                spec.pod_cidr = Some("10.120.8.0/24".into());
                spec.pod_cidrs = Some(vec!["10.120.8.0/24".into()]);
            }),
        ),
        (
            "re-created",
            changed(|n| n.metadata.uid = Some("11111111-2222-3333-4444-555555555555".into())),
        ),
        (
            "route condition missing",
            changed(|n| {
                n.status
                    .as_mut()
                    .unwrap()
                    .conditions
                    .as_mut()
                    .unwrap()
                    .retain(|c| c.type_ != names::conditions::NETWORK_UNAVAILABLE)
            }),
        ),
        (
            "labels changed",
            changed(|n| {
                n.metadata
                    .labels
                    .as_mut()
                    .unwrap()
                    .insert("example.com/team".into(), "search".into());
            }),
        ),
    ]
}

#[test]
fn the_event_filter_is_identical() {
    let all = nodes();
    for (old_what, old) in &all {
        for (new_what, new) in &all {
            assert_eq!(
                node_update_needs_reconcile(&stripped(old), &stripped(new)),
                node_update_needs_reconcile(old, new),
                "{old_what} -> {new_what}"
            );
        }
    }
}

#[test]
fn plans_and_condition_writes_are_identical() {
    let cidrs = parse_cluster_cidrs("10.120.0.0/16").unwrap();
    let address = |a: &str| NodeAddress {
        type_: "InternalIP".into(),
        address: a.into(),
    };
    let route_sets = [
        vec![],
        vec![Route::new("worker-pool-a-7f9c2", "10.120.7.0/24")],
        vec![
            Route::new("worker-pool-a-7f9c2", "10.120.6.0/24"),
            Route::new("gone", "10.120.9.0/24"),
        ],
        vec![{
            let mut r = Route::new("worker-pool-a-7f9c2", "10.120.7.0/24");
            r.enable_node_addresses = true;
            r.target_node_addresses = vec![address("10.0.12.99")];
            r
        }],
    ];
    let now = Time(Default::default());
    for (what, n) in nodes() {
        let whole = [n.clone()];
        let small = [stripped(&n)];
        for routes in &route_sets {
            let (a, b) = (plan(&small, routes, &cidrs), plan(&whole, routes, &cidrs));
            assert_eq!(a, b, "{what}: {routes:?}");
            for failed in [
                HashSet::new(),
                HashSet::from([("worker-pool-a-7f9c2".to_owned(), "10.120.7.0/24".to_owned())]),
            ] {
                assert_eq!(
                    a.condition_writes(&failed, &now),
                    b.condition_writes(&failed, &now),
                    "{what}"
                );
            }
        }
    }
}
