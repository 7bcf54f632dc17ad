//! Property tests of the node controllers' pure decisions: the initialization plan, the address rules, the label
//! rules, the taint helpers and the lifecycle decision. Each property runs
//! `ccm_testenv::properties::DEFAULT_CASES` generated cases (or `PROPTEST_CASES`); see docs/architecture.md,
//! "Property tests".

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ccm_core::names::{self, labels as l};
use ccm_core::{ErrorKind, InstanceMetadata};
use ccm_nodecontroller::addresses::{
    AddressUpdate, addresses_equivalent, addresses_from_node_ip, parse_ip_sloppy,
    parse_node_ip_annotation, plan_address_update,
};
use ccm_nodecontroller::labels::{
    BETA_GA_PAIRS, DiscardReason, is_kubernetes_namespaced, plan_cloud_labels,
    reconcile_beta_to_ga, validate_label,
};
use ccm_nodecontroller::lifecycle::{LifecycleAction, Probe, SkipReason, decide, is_owned};
use ccm_nodecontroller::patch::{shutdown_taint, taints, with_taint, without_matching_taint};
use ccm_nodecontroller::plan::plan_initialization;
use ccm_nodecontroller::{CloudNodeLifecycleConfig, NodeOwnership};
use ccm_testenv::properties::config;
use json_patch::PatchOperation;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Taint};
use proptest::prelude::*;

/// The six labels initialization owns (written from the zone, region and instance type).
const OWNED: [&str; 6] = [
    l::INSTANCE_TYPE,
    l::INSTANCE_TYPE_BETA,
    l::TOPOLOGY_ZONE,
    l::FAILURE_DOMAIN_BETA_ZONE,
    l::TOPOLOGY_REGION,
    l::FAILURE_DOMAIN_BETA_REGION,
];

// ---------------------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------------------

fn address_type() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("InternalIP".to_owned()),
        Just("ExternalIP".to_owned()),
        Just("Hostname".to_owned()),
        Just("InternalDNS".to_owned()),
    ]
}

/// Addresses from a small pool, so lists overlap: IPs (some written with leading zeros or IPv4-mapped), names,
/// and a name that looks like an IP.
fn address_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("10.0.0.1".to_owned()),
        Just("10.0.0.2".to_owned()),
        Just("010.0.0.2".to_owned()),
        Just("::ffff:10.0.0.1".to_owned()),
        Just("fd00::1".to_owned()),
        Just("203.0.113.7".to_owned()),
        Just("node-a".to_owned()),
        Just("node-a.cloud.internal".to_owned()),
    ]
}

prop_compose! {
    fn address()(type_ in address_type(), address in address_value()) -> NodeAddress {
        NodeAddress { type_, address }
    }
}

fn addresses(max: usize) -> impl Strategy<Value = Vec<NodeAddress>> {
    prop::collection::vec(address(), 0..max)
}

/// The provided-node-ip annotation: absent, one IP, a pair, or something invalid.
fn node_ip_annotation() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some("10.0.0.1".to_owned())),
        1 => Just(Some("10.0.0.2".to_owned())),
        1 => Just(Some("10.0.0.1,fd00::1".to_owned())),
        1 => Just(Some("10.0.0.99".to_owned())),
        1 => Just(Some(" 10.0.0.1".to_owned())),
        1 => Just(Some(String::new())),
    ]
}

fn taint_strategy() -> impl Strategy<Value = Taint> {
    let key = prop_oneof![
        Just(names::taints::UNINITIALIZED.to_owned()),
        Just(names::taints::SHUTDOWN.to_owned()),
        Just(names::taints::NOT_READY.to_owned()),
        Just("example.com/dedicated".to_owned()),
    ];
    let effect = prop_oneof![Just("NoSchedule".to_owned()), Just("NoExecute".to_owned())];
    let value = prop::option::of(prop_oneof![Just("true".to_owned()), Just("gpu".to_owned())]);
    (key, effect, value).prop_map(|(key, effect, value)| Taint {
        key,
        effect,
        value,
        ..Default::default()
    })
}

/// Label keys the node or the cloud may use: the owned ones, Kubernetes-namespaced ones, a provider's, and
/// invalid ones.
fn label_key() -> impl Strategy<Value = String> {
    prop_oneof![
        (0..OWNED.len()).prop_map(|i| OWNED[i].to_owned()),
        Just("kubernetes.io/os".to_owned()),
        Just("node.k8s.io/pool".to_owned()),
        Just("example.com/rack".to_owned()),
        Just("example.com/pool".to_owned()),
        Just("rack".to_owned()),
        Just("Example.com/bad".to_owned()),
        Just("example.com/".to_owned()),
    ]
}

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("r1".to_owned()),
        Just("r2".to_owned()),
        Just("has space".to_owned()),
        Just("-bad".to_owned()),
    ]
}

fn label_map(max: usize) -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(label_key(), label_value(), 0..max)
}

/// A zone, region or instance type: often unset.
fn topology_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("z1".to_owned()),
        Just("z2".to_owned()),
        Just("r1".to_owned())
    ]
}

prop_compose! {
    fn metadata()(
        provider_id in prop_oneof![Just(String::new()), Just("fake://n1".to_owned())],
        instance_type in topology_value(),
        zone in topology_value(),
        region in topology_value(),
        node_addresses in addresses(5),
        additional in label_map(4),
    ) -> InstanceMetadata {
        InstanceMetadata::new(provider_id)
            .with_instance_type(instance_type)
            .with_zone(zone)
            .with_region(region)
            .with_addresses(node_addresses)
            .with_labels(additional)
    }
}

prop_compose! {
    /// A node as the controller may see it: any labels, taints, providerID, addresses and node-ip annotation.
    fn node()(
        labels in prop::option::of(label_map(5)),
        taints in prop::option::of(prop::collection::vec(taint_strategy(), 0..4)),
        provider_id in prop::option::of(prop_oneof![Just(String::new()), Just("fake://n1".to_owned()), Just("other://n1".to_owned())]),
        has_spec in prop::bool::weighted(0.9),
        status_addresses in prop::option::of(addresses(4)),
        has_status in prop::bool::weighted(0.9),
        annotation in node_ip_annotation(),
    ) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        node.metadata.resource_version = Some("7".into());
        node.metadata.labels = labels;
        node.metadata.annotations = annotation
            .map(|ip| BTreeMap::from([(names::annotations::PROVIDED_NODE_IP.to_owned(), ip)]));
        if has_spec {
            node.spec = Some(NodeSpec { taints, provider_id, ..Default::default() });
        }
        if has_status {
            node.status = Some(NodeStatus { addresses: status_addresses, ..Default::default() });
        }
        node
    }
}

/// Apply JSON Patch operations to a node as the API server would.
fn apply(node: &Node, ops: &[PatchOperation]) -> Result<Node, String> {
    let mut doc = serde_json::to_value(node).map_err(|e| e.to_string())?;
    json_patch::patch(&mut doc, ops).map_err(|e| e.to_string())?;
    serde_json::from_value(doc).map_err(|e| e.to_string())
}

fn labels_of(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

fn node_addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}

fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default()
}

fn has_duplicates(list: &[NodeAddress]) -> bool {
    let mut seen = BTreeSet::new();
    !list
        .iter()
        .all(|a| seen.insert((a.type_.as_str(), a.address.as_str())))
}

// ---------------------------------------------------------------------------------------------------------
// The initialization plan
// ---------------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn initialization_removes_only_its_taint_and_writes_only_what_it_owns(node in node(), meta in metadata()) {
        let Ok(plan) = plan_initialization(&node, &meta) else {
            // Only a provided node IP that is invalid or matches no cloud address stops the plan.
            prop_assert!(ccm_nodecontroller::addresses::provided_node_ip(&node).is_some());
            return Ok(());
        };
        // Both patches apply to the node the plan was made from.
        let after_status = apply(&node, &plan.status_ops).map_err(TestCaseError::fail)?;
        let after = apply(&after_status, &plan.spec_ops).map_err(TestCaseError::fail)?;

        // Taints: exactly the uninitialized ones are gone, the others are kept in order.
        let kept: Vec<Taint> =
            taints(&node).iter().filter(|t| t.key != names::taints::UNINITIALIZED).cloned().collect();
        prop_assert_eq!(taints(&after), kept.as_slice());

        // Labels: none removed; a changed or added label is one initialization owns, or an additional label
        // that is valid, outside the Kubernetes namespaces and new to the node.
        let (before_labels, after_labels) = (labels_of(&node), labels_of(&after));
        for (key, value) in &before_labels {
            let now = after_labels.get(key);
            prop_assert!(now.is_some(), "label {} removed", key);
            prop_assert!(now == Some(value) || OWNED.contains(&key.as_str()), "label {} overwritten", key);
        }
        for (key, value) in &after_labels {
            if before_labels.get(key) == Some(value) {
                continue;
            }
            let owned = OWNED.contains(&key.as_str());
            let additional = meta.additional_labels.get(key) == Some(value)
                && !is_kubernetes_namespaced(key)
                && validate_label(key, value).is_ok()
                && !before_labels.contains_key(key);
            prop_assert!(owned || additional, "label {}={} written", key, value);
        }
        // The owned labels follow the cloud's values exactly, in pairs.
        for (value, beta, ga) in [
            (&meta.zone, l::FAILURE_DOMAIN_BETA_ZONE, l::TOPOLOGY_ZONE),
            (&meta.region, l::FAILURE_DOMAIN_BETA_REGION, l::TOPOLOGY_REGION),
            (&meta.instance_type, l::INSTANCE_TYPE_BETA, l::INSTANCE_TYPE),
        ] {
            if !value.is_empty() {
                prop_assert_eq!(after_labels.get(beta), Some(value));
                prop_assert_eq!(after_labels.get(ga), Some(value));
            }
        }

        // providerID: set only when empty, never changed.
        if provider_id(&node).is_empty() {
            prop_assert_eq!(provider_id(&after), meta.provider_id.as_str());
        } else {
            prop_assert_eq!(provider_id(&after), provider_id(&node));
        }

        // Idempotent: planning again on the result changes nothing.
        let again = plan_initialization(&after, &meta).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(again.spec_ops.is_empty(), "second spec patch {:?}", again.spec_ops);
        prop_assert!(again.status_ops.is_empty(), "second status patch {:?}", again.status_ops);
        prop_assert!(again.labels.set.is_empty());
        prop_assert_eq!(again.provider_id, None);
    }

    #[test]
    fn initialization_patches_fail_on_a_changed_taint_list(node in node(), meta in metadata(), extra in taint_strategy()) {
        // The spec patch is guarded: if another writer changed the taints since the node was read, it fails
        // instead of dropping their taint.
        let Ok(plan) = plan_initialization(&node, &meta) else { return Ok(()) };
        if plan.spec_ops.is_empty() || node.spec.is_none() || taints(&node).is_empty() {
            return Ok(());
        }
        let mut live = node.clone();
        live.spec.as_mut().unwrap().taints.get_or_insert_with(Vec::new).push(extra.clone());
        if taints(&node).iter().any(|t| t.key == names::taints::UNINITIALIZED) {
            prop_assert!(apply(&live, &plan.spec_ops).is_err());
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sloppy_ip_parsing_never_panics_and_agrees_with_std(text in prop_oneof![any::<String>(), "[0-9.:a-f]{0,20}"]) {
        let parsed = parse_ip_sloppy(&text);
        if let Ok(ip) = text.parse::<IpAddr>() {
            prop_assert_eq!(parsed, Some(ip.to_canonical()));
        }
        if parsed.is_some() {
            prop_assert!(!text.chars().any(char::is_whitespace));
        }
    }

    #[test]
    fn ipv4_with_leading_zeros_parses_as_decimal(octets in any::<[u8; 4]>(), zeros in any::<[u8; 4]>()) {
        // Each octet padded with up to two zeros.
        let text: Vec<String> = octets
            .iter()
            .zip(zeros)
            .map(|(o, z)| format!("{}{o}", "0".repeat(usize::from(z % 3))))
            .collect();
        let expected = IpAddr::from(octets);
        prop_assert_eq!(parse_ip_sloppy(&text.join(".")), Some(expected));
        prop_assert_eq!(parse_ip_sloppy(&format!("::ffff:{expected}")), Some(expected));
    }

    #[test]
    fn node_ip_annotations_are_one_ip_or_a_dual_stack_pair(text in prop_oneof![any::<String>(), "[0-9.:,a-f ]{0,24}"]) {
        if let Ok(ips) = parse_node_ip_annotation(&text) {
            prop_assert!(ips.len() == 1 || ips.len() == 2);
            if let [a, b] = ips.as_slice() {
                prop_assert_ne!(a.is_ipv4(), b.is_ipv4());
                prop_assert!(!a.is_unspecified() && !b.is_unspecified());
            }
        }
    }

    #[test]
    fn node_ip_filter_keeps_matches_first_and_drops_only_marked_types(annotation in node_ip_annotation(), cloud in addresses(6)) {
        let Some(annotation) = annotation else { return Ok(()) };
        let Ok(result) = addresses_from_node_ip(&annotation, &cloud) else { return Ok(()) };
        let ips = parse_node_ip_annotation(&annotation).unwrap();
        let matches = |a: &NodeAddress| parse_ip_sloppy(&a.address).is_some_and(|ip| ips.contains(&ip));
        // Every result is a cloud address; the first ones are the matches, then the unmarked types in cloud order.
        let first: Vec<&NodeAddress> = result.iter().take_while(|a| matches(a)).collect();
        let marked: BTreeSet<&str> = first.iter().map(|a| a.type_.as_str()).collect();
        let rest: Vec<NodeAddress> = cloud.iter().filter(|a| !marked.contains(a.type_.as_str())).cloned().collect();
        prop_assert!(!first.is_empty());
        prop_assert_eq!(&result[first.len()..], rest.as_slice());
        // Every matching cloud address is in the first part (a matching address has a marked type).
        prop_assert_eq!(first.len(), cloud.iter().filter(|a| matches(a)).count());
        if !has_duplicates(&cloud) {
            prop_assert!(!has_duplicates(&result));
        }
    }

    #[test]
    fn address_updates_follow_the_cloud_and_keep_the_kubelet_hostname(node in node(), cloud in addresses(5)) {
        let Ok(update) = plan_address_update(&node, &cloud) else {
            prop_assert!(ccm_nodecontroller::addresses::provided_node_ip(&node).is_some());
            return Ok(());
        };
        let current = node_addresses(&node);
        match update {
            AddressUpdate::NoCloudAddresses => prop_assert!(cloud.is_empty()),
            AddressUpdate::Unchanged => prop_assert!(!cloud.is_empty()),
            AddressUpdate::Replace(list) => {
                prop_assert!(!addresses_equivalent(&current, &list));
                let cloud_hostname = cloud.iter().any(|a| a.type_ == "Hostname");
                for address in &list {
                    // Every address comes from the cloud, or is the kubelet's hostname when the cloud has none.
                    let from_node = !cloud_hostname && address.type_ == "Hostname" && current.contains(address);
                    prop_assert!(cloud.contains(address) || from_node, "{:?} invented", address);
                }
                if ccm_nodecontroller::addresses::provided_node_ip(&node).is_none() {
                    let mut expected = cloud.clone();
                    if !cloud_hostname {
                        expected.extend(current.iter().filter(|a| a.type_ == "Hostname").cloned());
                    }
                    prop_assert_eq!(&list, &expected);
                }
                let node_hostnames: Vec<NodeAddress> = current.iter().filter(|a| a.type_ == "Hostname").cloned().collect();
                if !has_duplicates(&cloud) && !has_duplicates(&node_hostnames) {
                    prop_assert!(!has_duplicates(&list), "duplicates in {:?}", list);
                }
                // Writing the list settles it.
                let mut updated = node.clone();
                updated.status.get_or_insert_with(Default::default).addresses = Some(list);
                prop_assert_eq!(plan_address_update(&updated, &cloud), Ok(AddressUpdate::Unchanged));
            }
        }
    }

    #[test]
    fn address_equivalence_ignores_only_the_interleaving_of_types(list in addresses(6), other in addresses(6)) {
        prop_assert!(addresses_equivalent(&list, &list));
        prop_assert_eq!(addresses_equivalent(&list, &other), addresses_equivalent(&other, &list));
        // Grouping by type (a stable sort) keeps the order within each type: equivalent.
        let mut grouped = list.clone();
        grouped.sort_by(|a, b| a.type_.cmp(&b.type_));
        prop_assert!(addresses_equivalent(&list, &grouped));
        // Any other change of order within a type is a change.
        let mut by_value = list.clone();
        by_value.sort_by(|a, b| (a.type_.as_str(), a.address.as_str()).cmp(&(b.type_.as_str(), b.address.as_str())));
        let same_order_within_types = {
            let order = |l: &[NodeAddress]| {
                let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
                for a in l {
                    m.entry(a.type_.clone()).or_default().push(a.address.clone());
                }
                m
            };
            order(&list) == order(&by_value)
        };
        prop_assert_eq!(addresses_equivalent(&list, &by_value), same_order_within_types);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Labels
// ---------------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cloud_labels_account_for_every_additional_label(current in label_map(5), meta in metadata()) {
        let plan = plan_cloud_labels(&current, &meta);
        for (key, value) in &plan.set {
            // Nothing already on the node is written again.
            prop_assert_ne!(current.get(key), Some(value));
            if OWNED.contains(&key.as_str()) {
                continue;
            }
            prop_assert!(!is_kubernetes_namespaced(key), "{} is a Kubernetes label", key);
            prop_assert!(!current.contains_key(key), "{} overwritten", key);
            prop_assert!(validate_label(key, value).is_ok());
        }
        // Every additional label is set, discarded with a reason, or already on the node with that value.
        for (key, value) in &meta.additional_labels {
            let set = plan.set.get(key) == Some(value);
            let discarded = plan.discarded.iter().find(|d| &d.key == key && &d.value == value);
            let present = current.get(key) == Some(value);
            let owned_and_written = OWNED.contains(&key.as_str()) && plan.set.contains_key(key);
            prop_assert!(set || discarded.is_some() || present || owned_and_written, "{} unaccounted for", key);
            if let Some(d) = discarded {
                match &d.reason {
                    DiscardReason::KubernetesNamespace => prop_assert!(is_kubernetes_namespaced(key)),
                    DiscardReason::AlreadyPresent { existing } => prop_assert_eq!(current.get(key), Some(existing)),
                    DiscardReason::Invalid(_) => prop_assert!(validate_label(key, value).is_err()),
                    other => prop_assert!(false, "unexpected reason {:?}", other),
                }
            }
        }
        // Each topology value sets both its labels, or neither when empty.
        for (value, beta, ga) in [
            (&meta.zone, l::FAILURE_DOMAIN_BETA_ZONE, l::TOPOLOGY_ZONE),
            (&meta.region, l::FAILURE_DOMAIN_BETA_REGION, l::TOPOLOGY_REGION),
            (&meta.instance_type, l::INSTANCE_TYPE_BETA, l::INSTANCE_TYPE),
        ] {
            for key in [beta, ga] {
                let expected = (!value.is_empty() && current.get(key) != Some(value)).then_some(value);
                let unowned_additional = value.is_empty() && meta.additional_labels.contains_key(key);
                if !unowned_additional {
                    prop_assert_eq!(plan.set.get(key), expected, "label {}", key);
                }
            }
        }
    }

    #[test]
    fn beta_to_ga_copy_is_idempotent_and_writes_only_ga_labels(current in label_map(6)) {
        let set = reconcile_beta_to_ga(&current);
        let ga: BTreeSet<&str> = BETA_GA_PAIRS.iter().map(|(_, ga)| *ga).collect();
        for (key, value) in &set {
            prop_assert!(ga.contains(key.as_str()));
            let beta = BETA_GA_PAIRS.iter().find(|(_, g)| g == key).unwrap().0;
            prop_assert_eq!(current.get(beta), Some(value));
        }
        let mut after = current.clone();
        after.extend(set);
        prop_assert!(reconcile_beta_to_ga(&after).is_empty());
    }

    #[test]
    fn label_validation_never_panics_and_accepts_well_formed_labels(
        key in any::<String>(),
        value in any::<String>(),
        prefix in "([a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?\\.){0,2}[a-z0-9]{1,8}",
        name in "[A-Za-z0-9]([A-Za-z0-9_.-]{0,20}[A-Za-z0-9])?",
        good_value in "([A-Za-z0-9]([A-Za-z0-9_.-]{0,20}[A-Za-z0-9])?)?",
    ) {
        let _ = validate_label(&key, &value);
        let prefixed = format!("{prefix}/{name}");
        prop_assert!(validate_label(&prefixed, &good_value).is_ok());
        prop_assert!(validate_label(&name, &good_value).is_ok());
        // Too long, or a blank, is rejected.
        let too_long = "v".repeat(64);
        prop_assert!(validate_label(&prefixed, &too_long).is_err());
        let blank = format!("{prefixed} ");
        prop_assert!(validate_label(&blank, &good_value).is_err());
    }

    #[test]
    fn kubernetes_namespace_means_a_kubernetes_or_k8s_domain(head in "[a-z0-9-]{0,8}", tail in "[a-z0-9/.-]{0,8}", k8s in any::<bool>()) {
        let domain = if k8s { "k8s.io/" } else { "kubernetes.io/" };
        let (bare, subdomain, glued) = (format!("{domain}{tail}"), format!("{head}.{domain}{tail}"), format!("{head}{domain}{tail}"));
        prop_assert!(is_kubernetes_namespaced(&bare));
        prop_assert!(is_kubernetes_namespaced(&subdomain));
        // Glued to another word, it is another domain.
        if !head.is_empty() && !tail.contains("kubernetes.io/") && !tail.contains("k8s.io/") {
            prop_assert!(!is_kubernetes_namespaced(&glued), "{}", glued);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Taints and the lifecycle decision
// ---------------------------------------------------------------------------------------------------------

fn ready_condition() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        Just(None),
        Just(Some("True")),
        Just(Some("False")),
        Just(Some("Unknown"))
    ]
}

fn answer() -> impl Strategy<Value = Result<bool, ErrorKind>> {
    prop_oneof![
        Just(Ok(true)),
        Just(Ok(false)),
        Just(Err(ErrorKind::Timeout)),
        Just(Err(ErrorKind::Other))
    ]
}

fn with_ready(mut node: Node, ready: Option<&str>) -> Node {
    if let Some(status) = ready {
        node.status.get_or_insert_with(Default::default).conditions = Some(vec![NodeCondition {
            type_: names::conditions::READY.to_owned(),
            status: status.to_owned(),
            ..Default::default()
        }]);
    }
    node
}

fn has_shutdown_taint(node: &Node) -> bool {
    let shutdown = shutdown_taint();
    taints(node)
        .iter()
        .any(|t| t.key == shutdown.key && t.effect == shutdown.effect)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn taint_helpers_are_idempotent(node in node(), taint in taint_strategy()) {
        if let Some(new) = with_taint(&node, &taint) {
            let mut tainted = node.clone();
            tainted.spec.get_or_insert_with(Default::default).taints = Some(new.clone());
            prop_assert!(new.contains(&taint));
            prop_assert_eq!(with_taint(&tainted, &taint), None);
            // Only taints with the same key and effect were touched.
            let others = |l: &[Taint]| l.iter().filter(|t| t.key != taint.key || t.effect != taint.effect).cloned().collect::<Vec<_>>();
            prop_assert_eq!(others(&new), others(taints(&node)));
        } else {
            prop_assert!(taints(&node).contains(&taint));
        }
        if let Some(new) = without_matching_taint(&node, &taint) {
            prop_assert!(new.len() < taints(&node).len());
            prop_assert!(!new.iter().any(|t| t.key == taint.key && t.effect == taint.effect));
        }
    }

    #[test]
    fn lifecycle_never_deletes_an_existing_instance_and_taints_only_shut_down_ones(
        node in node(),
        ready in ready_condition(),
        all_nodes in any::<bool>(),
        protect in any::<bool>(),
        exists in answer(),
        shutdown in answer(),
    ) {
        let node = with_ready(node, ready);
        let ownership = if all_nodes { NodeOwnership::AllNodes } else { NodeOwnership::ProviderIdPrefix };
        let config = CloudNodeLifecycleConfig::default().with_ownership(ownership).with_protect_initializing_nodes(protect);
        let owned = is_owned(&node, ownership, "fake");
        let is_ready = ready == Some("True");
        let initializing = taints(&node).iter().any(|t| t.key == names::taints::UNINITIALIZED);

        // Drive the decision as the controller does: ask the cloud what it asks, until it acts or stops.
        let mut probe = Probe::default();
        let mut checks = 0;
        let action = loop {
            match decide(&node, &config, "fake", &probe) {
                LifecycleAction::CheckExists => {
                    prop_assert!(probe.exists.is_none());
                    probe.exists = Some(exists);
                }
                LifecycleAction::CheckShutdown => {
                    prop_assert!(probe.shutdown.is_none());
                    probe.shutdown = Some(shutdown);
                }
                action => break action,
            }
            checks += 1;
            prop_assert!(checks <= 2, "more than two cloud checks");
        };
        match action {
            LifecycleAction::Skip(SkipReason::NotOwned) => prop_assert!(!owned),
            LifecycleAction::Skip(SkipReason::Initializing) => prop_assert!(owned && protect && initializing && !is_ready),
            LifecycleAction::Delete => {
                prop_assert!(owned && !is_ready);
                prop_assert_eq!(exists, Ok(false), "deleted a node whose instance may exist");
            }
            LifecycleAction::AddShutdownTaint => {
                prop_assert!(owned && !is_ready);
                prop_assert_eq!((exists, shutdown), (Ok(true), Ok(true)));
                prop_assert!(with_taint(&node, &shutdown_taint()).is_some());
            }
            LifecycleAction::RemoveShutdownTaint => prop_assert!(owned && is_ready && has_shutdown_taint(&node)),
            LifecycleAction::Nothing => {
                if owned && is_ready {
                    prop_assert!(!has_shutdown_taint(&node));
                } else if owned && !(protect && initializing) {
                    // Nothing to do: a failed check, a running instance, or the taint already there.
                    prop_assert!(exists.is_err() || shutdown != Ok(true) || with_taint(&node, &shutdown_taint()).is_none());
                }
            }
            other => prop_assert!(false, "unexpected final action {:?}", other),
        }
        // A Ready node never costs a cloud call; an unowned one never does either.
        if is_ready || !owned {
            prop_assert_eq!(checks, 0);
        }
    }
}
