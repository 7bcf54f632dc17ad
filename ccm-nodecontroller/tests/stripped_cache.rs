//! The node controllers decide the same on a stripped cached Node (`ccm_core::runtime::informer::strip_node`)
//! as on the whole object, and the guarded patches they plan from it apply to the whole object on the server.

use std::collections::BTreeMap;

use ccm_core::ErrorKind;
use ccm_core::InstanceMetadata;
use ccm_core::names;
use ccm_core::runtime::informer::strip_node;
use ccm_nodecontroller::NodeOwnership;
use ccm_nodecontroller::addresses::plan_address_update;
use ccm_nodecontroller::lifecycle::{Config, Probe, decide};
use ccm_nodecontroller::patch::{
    address_ops, shutdown_taint, taint_ops, with_taint, without_taint,
};
use ccm_nodecontroller::plan::plan_initialization;
use json_patch::PatchOperation;
use k8s_openapi::api::core::v1::{Node, NodeAddress, Taint};

const NODE: &str = include_str!("../../ccm-core/tests/fixtures/node.json");

fn address(type_: &str, address: &str) -> NodeAddress {
    NodeAddress {
        type_: type_.into(),
        address: address.into(),
    }
}

/// The realistic node of the fixture, initialized and Ready.
fn initialized() -> Node {
    serde_json::from_str(NODE).unwrap()
}

/// The same node as the kubelet registers it: tainted, no providerID, no cloud labels, the kubelet's addresses.
fn registered() -> Node {
    let mut node = initialized();
    let spec = node.spec.as_mut().unwrap();
    spec.provider_id = None;
    spec.taints = Some(vec![Taint {
        key: names::taints::UNINITIALIZED.into(),
        value: Some("true".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    let labels = node.metadata.labels.as_mut().unwrap();
    labels.retain(|k, _| {
        !k.contains("zone") && !k.contains("region") && !k.contains("instance-type")
    });
    node.status.as_mut().unwrap().addresses = Some(vec![
        address("InternalIP", "10.0.12.34"),
        address("Hostname", "worker-pool-a-7f9c2"),
    ]);
    node
}

fn not_ready(mut node: Node) -> Node {
    for c in node.status.as_mut().unwrap().conditions.as_mut().unwrap() {
        if c.type_ == names::conditions::READY {
            c.status = "Unknown".into();
        }
    }
    node
}

fn shut_down(mut node: Node) -> Node {
    node.spec
        .as_mut()
        .unwrap()
        .taints
        .get_or_insert_with(Vec::new)
        .push(shutdown_taint());
    node
}

fn variants() -> Vec<(&'static str, Node)> {
    vec![
        ("initialized", initialized()),
        ("registered", registered()),
        ("not ready", not_ready(initialized())),
        ("not ready, shut down", shut_down(not_ready(initialized()))),
        ("ready, shutdown taint left", shut_down(initialized())),
        ("registered, not ready", not_ready(registered())),
    ]
}

fn stripped(node: &Node) -> Node {
    let mut small = node.clone();
    strip_node(&mut small);
    small
}

fn metadata() -> InstanceMetadata {
    let mut meta = InstanceMetadata::new("aws:///eu-west-1b/i-0a1b2c3d4e5f60718")
        .with_instance_type("m7i.2xlarge")
        .with_addresses(vec![
            address("InternalIP", "10.0.12.34"),
            address("ExternalIP", "203.0.113.34"),
            address("InternalDNS", "ip-10-0-12-34.eu-west-1.compute.internal"),
        ])
        .with_zone("eu-west-1b")
        .with_region("eu-west-1");
    meta.additional_labels = BTreeMap::from([("example.com/rack".into(), "r12".into())]);
    meta
}

/// Apply a patch to the whole node as the API server would.
fn apply(node: &Node, ops: &[PatchOperation]) -> Result<Node, String> {
    let mut doc = serde_json::to_value(node).map_err(|e| e.to_string())?;
    json_patch::patch(&mut doc, ops).map_err(|e| e.to_string())?;
    serde_json::from_value(doc).map_err(|e| e.to_string())
}

#[test]
fn initialization_plans_are_identical_and_apply_to_the_whole_node() {
    let meta = metadata();
    for (what, node) in variants() {
        let small = stripped(&node);
        let whole_plan = plan_initialization(&node, &meta);
        let small_plan = plan_initialization(&small, &meta);
        assert_eq!(small_plan, whole_plan, "{what}");
        let Ok(plan) = small_plan else { continue };
        // the server holds the whole node: the guarded ops from the cache apply and erase nothing
        let after = apply(&node, &plan.status_ops).and_then(|n| apply(&n, &plan.spec_ops));
        let after = after.unwrap_or_else(|e| panic!("{what}: {e}"));
        let status = after.status.as_ref().unwrap();
        assert_eq!(
            status.images,
            node.status.as_ref().unwrap().images,
            "{what}"
        );
        assert_eq!(
            status.capacity,
            node.status.as_ref().unwrap().capacity,
            "{what}"
        );
        assert_eq!(
            after.metadata.managed_fields, node.metadata.managed_fields,
            "{what}"
        );
    }
}

#[test]
fn address_updates_are_identical() {
    let clouds = [
        vec![],
        metadata().node_addresses,
        vec![address("InternalIP", "10.0.12.34")],
        vec![address("InternalIP", "10.0.99.1")],
        vec![
            address("InternalIP", "10.0.12.34"),
            address("ExternalIP", "203.0.113.34"),
            address("InternalDNS", "ip-10-0-12-34.eu-west-1.compute.internal"),
            address("Hostname", "worker-pool-a-7f9c2"),
        ],
    ];
    for (what, node) in variants() {
        let small = stripped(&node);
        for cloud in &clouds {
            assert_eq!(
                plan_address_update(&small, cloud),
                plan_address_update(&node, cloud),
                "{what}: {cloud:?}"
            );
            let ops = address_ops(&small, cloud);
            assert_eq!(ops, address_ops(&node, cloud), "{what}");
            let after = apply(&node, &ops).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                after.status.unwrap().images,
                node.status.as_ref().unwrap().images
            );
        }
    }
}

#[test]
fn taint_patches_are_identical() {
    for (what, node) in variants() {
        let small = stripped(&node);
        let changes = [
            without_taint(&node, names::taints::UNINITIALIZED),
            with_taint(&node, &shutdown_taint()).unwrap_or_default(),
            Vec::new(),
        ];
        for new in changes {
            let ops = taint_ops(&small, new.clone());
            assert_eq!(ops, taint_ops(&node, new), "{what}");
            apply(&node, &ops).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
}

#[test]
fn lifecycle_decisions_are_identical() {
    let answers = [
        None,
        Some(Ok(true)),
        Some(Ok(false)),
        Some(Err(ErrorKind::Retry)),
    ];
    let configs = [
        Config::default(),
        Config::default().with_protect_initializing_nodes(true),
        Config::default().with_ownership(NodeOwnership::AllNodes),
    ];
    for (what, node) in variants() {
        let small = stripped(&node);
        for config in &configs {
            for exists in answers {
                for shutdown in answers {
                    let probe = Probe { exists, shutdown };
                    for provider in ["aws", "fake"] {
                        assert_eq!(
                            decide(&small, config, provider, &probe),
                            decide(&node, config, provider, &probe),
                            "{what}: {probe:?}"
                        );
                    }
                }
            }
        }
    }
}
