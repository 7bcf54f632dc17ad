//! Property tests of the route controller's pure decisions: the route plan, `--cluster-cidr` parsing, CIDR keys,
//! the `NetworkUnavailable` condition and the node update filter. Each property runs
//! `ccm_testenv::properties::DEFAULT_CASES` generated cases (or `PROPTEST_CASES`); see docs/architecture.md,
//! "Property tests".

use std::collections::{BTreeSet, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use ccm_core::Route;
use ccm_routecontroller::filter::node_update_needs_reconcile;
use ccm_routecontroller::parse_cluster_cidrs;
use ccm_routecontroller::plan::{
    CidrAction, DeleteReason, RoutePlan, cidr_key, desired_network_condition,
    is_responsible_for_route, node_pod_cidrs, plan, same_addresses,
};
use ccm_testenv::properties::config;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------------------

const NODE_NAMES: [&str; 4] = ["n0", "n1", "n2", "n3"];

/// CIDRs from a pool: inside the cluster CIDRs (some written with host bits or another IPv6 spelling), outside
/// them, and unparsable.
fn cidr_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("10.244.0.0/24".to_owned()),
        Just("10.244.1.0/24".to_owned()),
        Just("10.244.1.7/24".to_owned()),
        Just("10.244.2.0/24".to_owned()),
        Just("fd00:10:244:1::/64".to_owned()),
        Just("fd00:10:244:1:0::/64".to_owned()),
        Just("192.168.0.0/24".to_owned()),
        Just(" 10.244.2.0/24".to_owned()),
        Just("not-a-cidr".to_owned()),
        Just(String::new()),
    ]
}

fn address() -> impl Strategy<Value = NodeAddress> {
    (
        prop_oneof![Just("InternalIP"), Just("ExternalIP")],
        prop_oneof![Just("10.0.0.1"), Just("10.0.0.2"), Just("fd00::1")],
    )
        .prop_map(|(t, a)| NodeAddress {
            type_: t.into(),
            address: a.into(),
        })
}

prop_compose! {
    fn node()(
        name in 0..NODE_NAMES.len(),
        generation in 0..2u8,
        pod_cidrs in prop::option::of(prop::collection::vec(cidr_text(), 0..3)),
        pod_cidr in prop::option::of(cidr_text()),
        addresses in prop::collection::vec(address(), 0..3),
    ) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(NODE_NAMES[name].to_owned());
        node.metadata.uid = Some(format!("uid-{}-{generation}", NODE_NAMES[name]));
        node.spec = Some(NodeSpec { pod_cidrs, pod_cidr, ..Default::default() });
        node.status = Some(NodeStatus { addresses: Some(addresses), ..Default::default() });
        node
    }
}

/// Nodes with distinct names (the informer's view).
fn nodes() -> impl Strategy<Value = Vec<Node>> {
    prop::collection::vec(node(), 0..4).prop_map(|nodes| {
        let mut seen = BTreeSet::new();
        nodes
            .into_iter()
            .filter(|n| seen.insert(n.metadata.name.clone()))
            .collect()
    })
}

prop_compose! {
    /// A listed route; `addressed` is the provider's `enable_node_addresses`, the same for all its routes.
    fn route(addressed: bool)(
        target in prop_oneof![(0..NODE_NAMES.len()).prop_map(|i| NODE_NAMES[i].to_owned()), Just("gone".to_owned()), Just(String::new())],
        cidr in cidr_text(),
        blackhole in prop::bool::weighted(0.2),
        addresses in prop::collection::vec(address(), 0..3),
    ) -> Route {
        let mut route = Route::new(target, cidr).with_blackhole(blackhole);
        route.enable_node_addresses = addressed;
        if addressed {
            route.target_node_addresses = addresses;
        }
        route
    }
}

fn cloud() -> impl Strategy<Value = (bool, Vec<Route>)> {
    any::<bool>().prop_flat_map(|addressed| {
        (
            Just(addressed),
            prop::collection::vec(route(addressed), 0..6),
        )
    })
}

fn cluster_cidrs() -> impl Strategy<Value = Vec<IpNet>> {
    prop_oneof![
        Just(vec!["10.244.0.0/16".parse().unwrap()]),
        Just(vec![
            "10.244.0.0/16".parse().unwrap(),
            "fd00:10:244::/56".parse().unwrap()
        ]),
        Just(vec!["10.244.1.0/24".parse().unwrap()]),
        Just(Vec::new()),
    ]
}

/// The cloud's routes after the plan's calls succeeded (as the fake cloud would store them).
fn after_plan(routes: &[Route], plan: &RoutePlan, addressed: bool) -> Vec<Route> {
    let mut remaining = routes.to_vec();
    for delete in &plan.deletes {
        let at = remaining
            .iter()
            .position(|r| *r == delete.route)
            .expect("deletes are listed routes");
        remaining.remove(at);
    }
    for create in &plan.creates {
        let mut route = create.route.clone();
        route.enable_node_addresses = addressed;
        if !addressed {
            route.target_node_addresses.clear();
        }
        remaining.push(route);
    }
    remaining
}

// ---------------------------------------------------------------------------------------------------------
// The route plan
// ---------------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn route_plan_deletes_only_owned_routes_and_creates_exactly_the_missing_ones(
        nodes in nodes(),
        (_, routes) in cloud(),
        cluster in cluster_cidrs(),
    ) {
        let plan = plan(&nodes, &routes, &cluster);

        // Deletes: listed routes inside the cluster CIDRs only, each for a reason that holds.
        for delete in &plan.deletes {
            prop_assert!(routes.contains(&delete.route));
            prop_assert_eq!(is_responsible_for_route(&delete.route.destination_cidr, &cluster), Some(true));
            prop_assert_eq!(delete.reason == DeleteReason::Blackhole, delete.route.blackhole);
        }
        for route in &plan.unparsable {
            prop_assert_eq!(is_responsible_for_route(&route.destination_cidr, &cluster), None);
            prop_assert!(!plan.deletes.iter().any(|d| d.route == *route));
        }

        // Creates: one per node and pod CIDR without a working route, never one for a CIDR that has one.
        let mut expected = BTreeSet::new();
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap();
            let addresses = node.status.as_ref().and_then(|s| s.addresses.clone()).unwrap_or_default();
            for cidr in node_pod_cidrs(node) {
                let working = routes.iter().any(|r| {
                    r.target_node == name
                        && !r.blackhole
                        && cidr_key(&r.destination_cidr) == cidr_key(&cidr)
                        && (!r.enable_node_addresses || same_addresses(&r.target_node_addresses, &addresses))
                });
                if !working {
                    expected.insert((name.clone(), cidr));
                }
            }
        }
        let created: BTreeSet<(String, String)> =
            plan.creates.iter().map(|c| (c.node_name.clone(), c.route.destination_cidr.clone())).collect();
        prop_assert_eq!(created.len(), plan.creates.len(), "a create twice");
        prop_assert_eq!(created, expected);
        for create in &plan.creates {
            prop_assert_eq!(&create.route.target_node, &create.node_name);
            prop_assert!(create.action != CidrAction::Keep);
            // A create whose CIDR is being deleted waits for the delete.
            let key = cidr_key(&create.route.destination_cidr);
            if plan.deletes.iter().any(|d| cidr_key(&d.route.destination_cidr) == key) {
                prop_assert!(create.after_deletes);
            }
        }

        // A working route (not a blackhole, to a node that has its CIDR, at the node's addresses if the provider
        // uses them) is never deleted.
        for delete in &plan.deletes {
            let r = &delete.route;
            let working = !r.blackhole
                && nodes.iter().any(|n| {
                    let addresses = n.status.as_ref().and_then(|s| s.addresses.clone()).unwrap_or_default();
                    n.metadata.name.as_deref() == Some(r.target_node.as_str())
                        && node_pod_cidrs(n).iter().any(|c| cidr_key(c) == cidr_key(&r.destination_cidr))
                        && (!r.enable_node_addresses || same_addresses(&r.target_node_addresses, &addresses))
                });
            prop_assert!(!working, "deleted a working route {:?}", r);
        }
    }

    #[test]
    fn route_plan_is_idempotent(nodes in nodes(), (addressed, routes) in cloud(), cluster in cluster_cidrs()) {
        let first = plan(&nodes, &routes, &cluster);
        let routes = after_plan(&routes, &first, addressed);
        let second = plan(&nodes, &routes, &cluster);
        prop_assert!(second.is_noop(), "second pass: {:?}", second);
        // Every node with pod CIDRs now has all its routes.
        for entry in &second.nodes {
            if !entry.pod_cidrs.is_empty() {
                prop_assert!(entry.routes_created(&HashSet::new()));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// CIDRs
// ---------------------------------------------------------------------------------------------------------

prop_compose! {
    fn v4_net()(addr in any::<u32>(), len in 0u8..=32) -> IpNet {
        IpNet::V4(Ipv4Net::new(Ipv4Addr::from(addr), len).unwrap())
    }
}

prop_compose! {
    fn v6_net()(addr in any::<u128>(), len in 0u8..=128) -> IpNet {
        IpNet::V6(Ipv6Net::new(Ipv6Addr::from(addr), len).unwrap())
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cluster_cidr_parsing_never_panics(text in prop_oneof![any::<String>(), "[0-9a-f.:/, ]{0,30}"]) {
        if let Ok(cidrs) = parse_cluster_cidrs(&text) {
            prop_assert!(cidrs.len() == 1 || cidrs.len() == 2);
            for cidr in &cidrs {
                prop_assert_eq!(cidr.trunc(), *cidr);
            }
            if let [a, b] = cidrs.as_slice() {
                prop_assert_ne!(matches!(a, IpNet::V4(_)), matches!(b, IpNet::V4(_)));
            }
        }
    }

    #[test]
    fn valid_cluster_cidrs_round_trip(v4 in v4_net(), v6 in v6_net(), dual in any::<bool>(), v6_first in any::<bool>(), pad in "[ ]{0,2}") {
        let nets: Vec<IpNet> = match (dual, v6_first) {
            (false, false) => vec![v4],
            (false, true) => vec![v6],
            (true, false) => vec![v4, v6],
            (true, true) => vec![v6, v4],
        };
        let text = nets.iter().map(|n| format!("{pad}{n}{pad}")).collect::<Vec<_>>().join(",");
        let parsed = parse_cluster_cidrs(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&parsed, &nets.iter().map(IpNet::trunc).collect::<Vec<_>>());
        // Written back, they parse to themselves.
        let again = parsed.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        prop_assert_eq!(parse_cluster_cidrs(&again).unwrap(), parsed);
        // Two of one family are refused.
        let same_family = format!("{v4},{v4}");
        prop_assert!(parse_cluster_cidrs(&same_family).is_err());
    }

    #[test]
    fn cidr_keys_are_canonical(text in prop_oneof![any::<String>(), cidr_text()], net in prop_oneof![v4_net(), v6_net()]) {
        let key = cidr_key(&text);
        prop_assert_eq!(cidr_key(&key), key.clone());
        // Equal networks have equal keys however they are written.
        let written = net.to_string();
        prop_assert_eq!(cidr_key(&written), net.trunc().to_string());
        let padded = format!(" {written} ");
        prop_assert_eq!(cidr_key(&padded), cidr_key(&written));
        // Responsibility depends only on the network.
        let cluster = vec!["10.244.0.0/16".parse::<IpNet>().unwrap(), "fd00::/8".parse().unwrap()];
        prop_assert_eq!(is_responsible_for_route(&written, &cluster), is_responsible_for_route(&key_of(&net), &cluster));
    }

    #[test]
    fn pod_cidrs_have_no_duplicates_or_blanks(node in node()) {
        let cidrs = node_pod_cidrs(&node);
        let keys: BTreeSet<String> = cidrs.iter().map(|c| cidr_key(c)).collect();
        prop_assert_eq!(keys.len(), cidrs.len());
        prop_assert!(cidrs.iter().all(|c| !c.trim().is_empty() && c.trim() == c));
    }
}

fn key_of(net: &IpNet) -> String {
    net.trunc().to_string()
}

// ---------------------------------------------------------------------------------------------------------
// The NetworkUnavailable condition and the node update filter
// ---------------------------------------------------------------------------------------------------------

fn time(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap())
}

prop_compose! {
    fn condition()(status in prop_oneof![Just("True"), Just("False"), Just("Unknown")], reason in prop::option::of(prop_oneof![Just("RouteCreated"), Just("NoRouteCreated"), Just("CNIReady")]), at in 0i64..1_000) -> NodeCondition {
        NodeCondition {
            type_: "NetworkUnavailable".into(),
            status: status.into(),
            reason: reason.map(Into::into),
            last_transition_time: Some(time(at)),
            ..Default::default()
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn network_condition_settles_and_keeps_its_transition_time(current in prop::option::of(condition()), created in any::<bool>(), now in 1_000i64..2_000) {
        let now = time(now);
        match desired_network_condition(current.as_ref(), created, &now) {
            None => {
                let c = current.unwrap();
                prop_assert_eq!(c.status.as_str(), if created { "False" } else { "True" });
            }
            Some(written) => {
                prop_assert_eq!(written.status.as_str(), if created { "False" } else { "True" });
                prop_assert_eq!(written.last_heartbeat_time.as_ref(), Some(&now));
                let kept = current.as_ref().filter(|c| c.status == written.status).and_then(|c| c.last_transition_time.clone());
                prop_assert_eq!(written.last_transition_time, Some(kept.unwrap_or_else(|| now.clone())));
                // Once written, nothing more to write.
                let later = time(5_000);
                let settled = desired_network_condition(Some(&desired_network_condition(current.as_ref(), created, &now).unwrap()), created, &later);
                prop_assert_eq!(settled, None);
            }
        }
    }

    #[test]
    fn node_update_filter_sees_every_route_relevant_change(old in node(), new in node(), same_version in any::<bool>()) {
        let mut old = old;
        let mut new = new;
        old.metadata.resource_version = Some("1".into());
        new.metadata.resource_version = Some(if same_version { "1" } else { "2" }.into());
        let relevant = node_pod_cidrs(&old) != node_pod_cidrs(&new)
            || old.metadata.uid != new.metadata.uid
            || old.status.as_ref().and_then(|s| s.addresses.clone()) != new.status.as_ref().and_then(|s| s.addresses.clone());
        if relevant || same_version {
            prop_assert!(node_update_needs_reconcile(&old, &new));
        }
        // Identical nodes with a new resourceVersion need nothing.
        let mut bumped = old.clone();
        bumped.metadata.resource_version = Some("3".into());
        prop_assert!(!node_update_needs_reconcile(&old, &bumped));
    }
}
