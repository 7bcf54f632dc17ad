//! Property tests of the service controller's pure decisions: the Service predicates and the finalizer rules,
//! the finalizer and status patches, the node predicates, the node sets, and the coalescing of node changes
//! (`ccm_core::runtime::debounce::burst::next_burst`, which the node-sync loop runs on). Each property runs `ccm_testenv::properties::DEFAULT_CASES` generated cases (or
//! `PROPTEST_CASES`); see docs/architecture.md, "Property tests".

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ccm_core::helpers::has_load_balancer_finalizer;
use ccm_core::names;
use ccm_core::runtime::debounce::burst::next_burst;
use ccm_core::runtime::workqueue::{ItemExponentialBackoff, WorkQueue};
use ccm_servicecontroller::patches::{add_finalizer, load_balancer_status, remove_finalizer};
use ccm_servicecontroller::predicates::{
    MAX_NODE_NAMES_TO_LOG, NodeSet, ServiceSelector, UpdateReason, in_stable_node_set,
    loggable_node_names, needs_cleanup, node_included, node_update_affects_load_balancers,
    nodes_sufficiently_equal, parse_go_bool, should_enqueue_added, should_enqueue_updated,
    should_sync_updated_node, stable_nodes, update_reason, wants_deletion,
};
use ccm_testenv::properties::config;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeCondition, NodeSpec, NodeStatus, Service,
    ServicePort, ServiceSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use tokio::time::Instant;

const CLEANUP: &str = names::finalizers::LOAD_BALANCER_CLEANUP;

// ---------------------------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------------------------

fn service_type() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        3 => Just("LoadBalancer".to_owned()),
        1 => Just("ClusterIP".to_owned()),
        1 => Just("NodePort".to_owned()),
    ])
}

fn class() -> impl Strategy<Value = Option<String>> {
    prop_oneof![2 => Just(None), 1 => Just(Some("example.com/lb".to_owned())), 1 => Just(Some("other.io/lb".to_owned()))]
}

fn finalizers() -> impl Strategy<Value = Option<Vec<String>>> {
    prop::option::of(prop::collection::vec(
        prop_oneof![
            Just(CLEANUP.to_owned()),
            Just("example.com/other".to_owned())
        ],
        0..4,
    ))
}

fn port() -> impl Strategy<Value = ServicePort> {
    (
        prop::option::of(prop_oneof![Just("http"), Just("https")]),
        prop_oneof![Just(80), Just(443)],
        prop::option::of(prop_oneof![Just(30080), Just(30443)]),
        prop::option::of(prop_oneof![Just("TCP"), Just("UDP")]),
    )
        .prop_map(|(name, port, node_port, protocol)| ServicePort {
            name: name.map(Into::into),
            port,
            node_port,
            protocol: protocol.map(Into::into),
            ..Default::default()
        })
}

prop_compose! {
    fn service()(
        type_ in service_type(),
        load_balancer_class in class(),
        finalizers in finalizers(),
        deleting in prop::bool::weighted(0.2),
        uid in prop_oneof![Just("uid-1"), Just("uid-2")],
        annotations in prop::option::of(prop::collection::btree_map(prop_oneof![Just("a"), Just("b")], prop_oneof![Just(""), Just("x")], 0..2)),
        ports in prop::option::of(prop::collection::vec(port(), 0..2)),
        source_ranges in prop::option::of(prop::collection::vec(prop_oneof![Just("10.0.0.0/8"), Just("0.0.0.0/0")], 0..2)),
        external_traffic_policy in prop::option::of(prop_oneof![Just("Cluster"), Just("Local")]),
        ip_families in prop::option::of(prop::collection::vec(prop_oneof![Just("IPv4"), Just("IPv6")], 0..2)),
        allocate in prop::option::of(any::<bool>()),
    ) -> Service {
        let mut svc = Service {
            spec: Some(ServiceSpec {
                type_,
                load_balancer_class,
                ports,
                load_balancer_source_ranges: source_ranges.map(|r| r.into_iter().map(Into::into).collect()),
                external_traffic_policy: external_traffic_policy.map(Into::into),
                ip_families: ip_families.map(|f| f.into_iter().map(Into::into).collect()),
                allocate_load_balancer_node_ports: allocate,
                ..Default::default()
            }),
            ..Default::default()
        };
        svc.metadata.name = Some("svc".into());
        svc.metadata.namespace = Some("ns".into());
        svc.metadata.uid = Some(uid.into());
        svc.metadata.finalizers = finalizers;
        svc.metadata.annotations = annotations.map(|a| a.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect());
        if deleting {
            svc.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        svc
    }
}

fn selector() -> impl Strategy<Value = ServiceSelector> {
    (any::<bool>(), class()).prop_map(|(class_less, class)| ServiceSelector { class_less, class })
}

/// Apply a JSON patch (as a JSON value) to a Service, as the API server would.
///
/// The API server never stores an empty finalizer list, and its JSON patch `test` treats a missing member as
/// `null` (unlike RFC 6902, which the `json_patch` crate follows): so the document gets an explicit `null`.
fn apply(svc: &Service, patch: serde_json::Value) -> Result<Service, String> {
    let patch: json_patch::Patch = serde_json::from_value(patch).map_err(|e| e.to_string())?;
    let mut doc = serde_json::to_value(svc).map_err(|e| e.to_string())?;
    let metadata = doc["metadata"].as_object_mut().ok_or("no metadata")?;
    if metadata
        .get("finalizers")
        .is_none_or(|f| f.as_array().is_some_and(Vec::is_empty))
    {
        metadata.insert("finalizers".into(), serde_json::Value::Null);
    }
    json_patch::patch(&mut doc, &patch).map_err(|e| e.to_string())?;
    serde_json::from_value(doc).map_err(|e| e.to_string())
}

fn finalizer_list(svc: &Service) -> Vec<String> {
    svc.metadata.finalizers.clone().unwrap_or_default()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_service_keeps_its_finalizer_while_it_wants_a_load_balancer(selector in selector(), svc in service()) {
        let deleting = svc.metadata.deletion_timestamp.is_some();
        // The delete branch (which ends by removing the finalizer) runs only for a Service that no longer wants a
        // load balancer of this controller, or is being deleted; otherwise the ensure branch keeps (or adds) it.
        // (A Service being deleted without the finalizer takes the ensure branch, as in Go: adding the finalizer
        // is then refused by the API server, before any cloud call.)
        if wants_deletion(&selector, &svc) {
            prop_assert!(!selector.wants_load_balancer(&svc) || deleting);
        } else {
            prop_assert!(selector.wants_load_balancer(&svc));
            prop_assert!(!(deleting && has_load_balancer_finalizer(&svc)));
        }
        // Cleanup is needed only with the finalizer, and then the Service is always synced, on add and update.
        if needs_cleanup(&svc) {
            prop_assert!(has_load_balancer_finalizer(&svc));
            prop_assert!(should_enqueue_added(&selector, &svc));
            prop_assert!(wants_deletion(&selector, &svc));
        }
        // A Service with the finalizer that is being deleted is never ignored.
        if has_load_balancer_finalizer(&svc) && deleting {
            prop_assert!(needs_cleanup(&svc));
        }
        // A Service this controller wants is synced when first seen.
        if selector.wants_load_balancer(&svc) {
            prop_assert!(should_enqueue_added(&selector, &svc));
        }
    }

    #[test]
    fn cleanup_is_never_filtered_out_of_updates(selector in selector(), extended in any::<bool>(), old in service(), new in service()) {
        if needs_cleanup(&new) {
            prop_assert!(should_enqueue_updated(&selector, extended, &old, &new));
        }
    }

    #[test]
    fn update_reasons_are_reflexive_and_symmetric(selector in selector(), extended in any::<bool>(), old in service(), new in service()) {
        prop_assert_eq!(update_reason(&selector, extended, &old, &old), None);
        let forward = update_reason(&selector, extended, &old, &new);
        let backward = update_reason(&selector, extended, &new, &old);
        prop_assert_eq!(forward, backward, "the first differing field is the same both ways");
        let (old_wants, new_wants) = (selector.wants_load_balancer(&old), selector.wants_load_balancer(&new));
        prop_assert_eq!(forward == Some(UpdateReason::WantsLoadBalancer), old_wants != new_wants);
        if !old_wants && !new_wants {
            prop_assert_eq!(forward, None);
        }
        // The extended field list only adds reasons.
        if update_reason(&selector, false, &old, &new).is_some() {
            prop_assert!(update_reason(&selector, true, &old, &new).is_some());
        }
    }

    #[test]
    fn absent_and_empty_lists_are_the_same_service(selector in selector(), svc in service()) {
        let mut emptied = svc.clone();
        let spec = emptied.spec.as_mut().unwrap();
        for list in [&mut spec.load_balancer_source_ranges, &mut spec.ip_families] {
            if list.as_ref().is_some_and(Vec::is_empty) {
                *list = None;
            } else if list.is_none() {
                *list = Some(Vec::new());
            }
        }
        if spec.ports.as_ref().is_some_and(Vec::is_empty) {
            spec.ports = None;
        }
        if emptied.metadata.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
            emptied.metadata.annotations = None;
        } else if emptied.metadata.annotations.is_none() {
            emptied.metadata.annotations = Some(BTreeMap::new());
        }
        prop_assert_eq!(update_reason(&selector, true, &svc, &emptied), None);
    }

    #[test]
    fn finalizer_patches_add_once_and_remove_only_the_cleanup_finalizer(svc in service(), concurrent in "[a-z]{1,4}") {
        let current = finalizer_list(&svc);
        let added = apply(&svc, add_finalizer(&current)).map_err(TestCaseError::fail)?;
        let mut expected = current.clone();
        expected.push(CLEANUP.to_owned());
        prop_assert_eq!(finalizer_list(&added), expected);

        match remove_finalizer(&current) {
            None => prop_assert!(!current.iter().any(|f| f == CLEANUP)),
            Some(patch) => {
                let removed = apply(&svc, patch.clone()).map_err(TestCaseError::fail)?;
                let others: Vec<String> = current.iter().filter(|f| *f != CLEANUP).cloned().collect();
                prop_assert_eq!(finalizer_list(&removed), others);
                // Someone else changed the list meanwhile (an entry replaced): the guarded patch fails rather than
                // removing their finalizer.
                let mut changed = svc.clone();
                let list = changed.metadata.finalizers.as_mut().unwrap();
                let at = list.iter().position(|f| f == CLEANUP).unwrap();
                list[at] = concurrent;
                prop_assert!(apply(&changed, patch).is_err());
            }
        }
        // Adding to a list someone else changed fails too.
        let mut changed = svc.clone();
        changed.metadata.finalizers.get_or_insert_with(Vec::new).push("example.com/late".into());
        prop_assert!(apply(&changed, add_finalizer(&current)).is_err());
    }

    #[test]
    fn status_patch_sets_exactly_the_ingress(ips in prop::collection::vec(prop_oneof![Just("203.0.113.1"), Just("203.0.113.2")], 0..3)) {
        let status = LoadBalancerStatus {
            ingress: Some(ips.iter().map(|ip| LoadBalancerIngress { ip: Some((*ip).into()), ..Default::default() }).collect()),
        };
        let patch = load_balancer_status(&status);
        let ingress = &patch["status"]["loadBalancer"]["ingress"];
        if ips.is_empty() {
            prop_assert!(ingress.is_null());
        } else {
            let got: Vec<&str> = ingress.as_array().unwrap().iter().map(|i| i["ip"].as_str().unwrap()).collect();
            prop_assert_eq!(got, ips);
        }
    }

    #[test]
    fn go_booleans_are_exactly_strconv_parse_bool(text in prop_oneof![any::<String>(), "[tTfF01rRuUeEaAlLsS]{1,5}"]) {
        let expected = match text.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
            _ => None,
        };
        prop_assert_eq!(parse_go_bool(&text), expected);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------------------------------------

fn exclude_label() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("False".to_owned()),
        Just("0".to_owned()),
        Just("f".to_owned()),
        Just(String::new()),
        Just("no".to_owned()),
        Just("1".to_owned()),
    ])
}

prop_compose! {
    fn node()(
        name in prop_oneof![Just("a"), Just("b"), Just("c"), Just("d")],
        provider_id in prop::option::of(prop_oneof![Just("fake://a"), Just("fake://b")]),
        exclude in exclude_label(),
        autoscaler_taint in prop::bool::weighted(0.2),
        deleting in prop::bool::weighted(0.2),
        ready in prop::option::of(prop_oneof![Just("True"), Just("False"), Just("Unknown")]),
    ) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(name.into());
        node.metadata.labels = exclude.map(|v| BTreeMap::from([(names::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS.to_owned(), v)]));
        if deleting {
            node.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        node.spec = Some(NodeSpec {
            provider_id: provider_id.map(Into::into),
            taints: autoscaler_taint.then(|| vec![Taint {
                key: names::taints::TO_BE_DELETED_BY_CLUSTER_AUTOSCALER.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        node.status = ready.map(|status| NodeStatus {
            conditions: Some(vec![NodeCondition { type_: "Ready".into(), status: status.into(), ..Default::default() }]),
            ..Default::default()
        });
        node
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn exclusion_label_follows_go_booleans(node in node()) {
        let label = node.metadata.labels.as_ref().and_then(|l| l.get(names::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS));
        // Absent or a Go "false" includes the node; "true" or anything unparseable excludes it.
        prop_assert_eq!(node_included(&node), label.is_none_or(|v| parse_go_bool(v) == Some(false)));
        let tainted = node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| !t.is_empty());
        prop_assert_eq!(
            in_stable_node_set(&node),
            node_included(&node) && !tainted && node.metadata.deletion_timestamp.is_none()
        );
        // Readiness does not matter.
        let mut flipped = node.clone();
        flipped.status = None;
        prop_assert_eq!(in_stable_node_set(&flipped), in_stable_node_set(&node));
    }

    #[test]
    fn node_update_filters_are_symmetric_and_nested(old in node(), new in node()) {
        prop_assert_eq!(should_sync_updated_node(&old, &new), should_sync_updated_node(&new, &old));
        prop_assert!(!should_sync_updated_node(&old, &old));
        prop_assert!(!node_update_affects_load_balancers(&old, &old));
        if should_sync_updated_node(&old, &new) || in_stable_node_set(&old) != in_stable_node_set(&new) {
            prop_assert!(node_update_affects_load_balancers(&old, &new));
        }
    }

    #[test]
    fn stable_node_sets_are_sorted_filtered_and_compared_by_identity(nodes in prop::collection::vec(node(), 0..6)) {
        let nodes: Vec<Arc<Node>> = nodes.into_iter().map(Arc::new).collect();
        let stable = stable_nodes(&nodes);
        prop_assert!(stable.iter().all(|n| in_stable_node_set(n)));
        prop_assert_eq!(stable.len(), nodes.iter().filter(|n| in_stable_node_set(n)).count());
        prop_assert!(stable.windows(2).all(|w| w[0].metadata.name <= w[1].metadata.name));
        let set = NodeSet::from_nodes(stable.iter().map(|n| &**n));
        prop_assert!(nodes_sufficiently_equal(Some(&set), &set));
        prop_assert_eq!(nodes_sufficiently_equal(None, &set), set.is_empty());
        // Changing one node's providerID makes the set different.
        if let Some(first) = stable.first() {
            let mut changed: Vec<Node> = stable.iter().map(|n| (**n).clone()).collect();
            changed[0].spec.as_mut().unwrap().provider_id = Some("fake://changed".into());
            let other = NodeSet::from_nodes(changed.iter());
            let unique_name = stable.iter().filter(|n| n.metadata.name == first.metadata.name).count() == 1;
            if unique_name {
                prop_assert!(!nodes_sufficiently_equal(Some(&set), &other));
            }
        }
    }

    #[test]
    fn loggable_node_names_are_bounded_and_sorted(names in prop::collection::vec("[a-z]{1,3}", 0..45)) {
        let logged = loggable_node_names(names.iter().map(String::as_str));
        let shown = names.len().min(MAX_NODE_NAMES_TO_LOG);
        let mut sorted = names.clone();
        sorted.sort();
        prop_assert_eq!(&logged[..shown], &sorted[..shown]);
        if names.len() > MAX_NODE_NAMES_TO_LOG {
            prop_assert_eq!(logged.len(), shown + 1);
            prop_assert_eq!(logged[shown].clone(), format!("<{} more>", names.len() - MAX_NODE_NAMES_TO_LOG));
        } else {
            prop_assert_eq!(logged.len(), shown);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Coalescing node changes
// ---------------------------------------------------------------------------------------------------------

/// What one run of the node-sync loop saw: (pass start, keys taken) per burst, and when each change arrived.
struct Run {
    bursts: Vec<(Instant, usize, Instant)>,
    arrivals: Vec<Instant>,
    start: Instant,
    left_over: usize,
}

/// Feed `changes` (milliseconds after the previous change, node key) into a queue and run the node-sync loop over
/// it with passes of `pass_ms`, on a paused clock.
fn run_node_sync(
    changes: &[(u64, String)],
    quiet: Duration,
    max_delay: Duration,
    pass_ms: &[u64],
) -> Run {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let queue: WorkQueue<String> = WorkQueue::new(
            "node",
            ItemExponentialBackoff::new(Duration::from_secs(5), Duration::from_secs(300)),
        );
        let start = Instant::now();
        let feeder = {
            let queue = queue.clone();
            let changes = changes.to_vec();
            tokio::spawn(async move {
                let mut arrivals = Vec::new();
                for (after_ms, key) in changes {
                    tokio::time::sleep(Duration::from_millis(after_ms)).await;
                    arrivals.push(Instant::now());
                    queue.add(key);
                }
                arrivals
            })
        };
        let consumer = {
            let queue = queue.clone();
            let pass_ms = pass_ms.to_vec();
            tokio::spawn(async move {
                let mut bursts = Vec::new();
                let mut previous = None;
                while let Some(burst) = next_burst(&queue, quiet, max_delay, previous).await {
                    let pass_start = Instant::now();
                    previous = Some(pass_start);
                    bursts.push((pass_start, burst.keys, burst.started));
                    let pass = pass_ms
                        .get(bursts.len() % pass_ms.len().max(1))
                        .copied()
                        .unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(pass)).await;
                }
                bursts
            })
        };
        let arrivals = feeder.await.expect("the feeder");
        // Long enough for every burst to end and its pass to finish.
        tokio::time::sleep(max_delay + quiet + Duration::from_secs(10)).await;
        let left_over = queue.len();
        queue.shut_down();
        let bursts = consumer.await.expect("the consumer");
        Run {
            bursts,
            arrivals,
            start,
            left_over,
        }
    })
}

fn changes(distinct: bool) -> impl Strategy<Value = Vec<(u64, String)>> {
    prop::collection::vec(
        (prop_oneof![Just(0u64), 0u64..300, 300u64..3_000], 0..5usize),
        0..25,
    )
    .prop_map(move |list| {
        list.into_iter()
            .enumerate()
            .map(|(i, (after, node))| {
                (
                    after,
                    if distinct {
                        format!("node-{i}")
                    } else {
                        format!("node-{node}")
                    },
                )
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_node_change_is_taken_once_and_soon(
        changes in any::<bool>().prop_flat_map(changes),
        quiet_ms in prop_oneof![Just(0u64), 1u64..500],
        max_ms in 1u64..2_000,
        pass_ms in prop::collection::vec(0u64..1_500, 1..4),
    ) {
        let (quiet, max_delay) = (Duration::from_millis(quiet_ms), Duration::from_millis(max_ms.max(quiet_ms)));
        let run = run_node_sync(&changes, quiet, max_delay, &pass_ms);
        prop_assert_eq!(run.left_over, 0, "changes left in the queue");
        let taken: usize = run.bursts.iter().map(|(_, keys, _)| keys).sum();
        // A key added again while still queued is one change to take; otherwise every change is taken once.
        let unique_keys = changes.iter().map(|(_, k)| k).collect::<std::collections::BTreeSet<_>>().len();
        prop_assert!(taken <= changes.len());
        prop_assert!(taken >= unique_keys);
        if unique_keys == changes.len() {
            prop_assert_eq!(taken, changes.len(), "a change was lost or counted twice");
        }
        // Bounded delay: a pass starts no later than max_delay plus the longest pass after each change.
        let longest_pass = Duration::from_millis(*pass_ms.iter().max().unwrap());
        for arrival in &run.arrivals {
            let next_pass = run.bursts.iter().map(|(at, _, _)| *at).find(|at| at >= arrival);
            prop_assert!(next_pass.is_some(), "no pass after a change at {:?}", *arrival - run.start);
            prop_assert!(next_pass.unwrap() - *arrival <= max_delay + longest_pass, "waited {:?}", next_pass.unwrap() - *arrival);
        }
        for (pass_start, keys, started) in &run.bursts {
            prop_assert!(*keys >= 1);
            prop_assert!(pass_start >= started);
        }
        // With a quiet period, passes start at most once per max_delay.
        if !quiet.is_zero() {
            for pair in run.bursts.windows(2) {
                prop_assert!(pair[1].0 - pair[0].0 >= max_delay);
            }
        }
    }
}
