//! With a provider that answers InstancesV2 bulk calls natively: both periodic loops make one cloud call per
//! period for all nodes (the address sync's `instance_metadata_bulk`, the lifecycle's `instance_exists_bulk` and
//! `instance_shutdown_bulk`), and initialization asks about many waiting nodes in one `instance_metadata_bulk`
//! call, with the same outcomes as the per-node calls.

mod support;

use std::time::Duration;

use ccm_core::names;
use ccm_nodecontroller::{CloudNodeConfig, CloudNodeLifecycleConfig};
use ccm_provider_fake::{FakeCloud, FakeInstance, Fault, InjectedError, Operation};
use k8s_openapi::api::core::v1::Node;
use support::*;

const NODES: usize = 20;

/// An initialized node (providerID set, no uninitialized taint).
fn initialized(h: &Harness, name: &str, ready: bool) -> Node {
    let mut node = h.kubelet_node(name, ready);
    let spec = node.spec.as_mut().unwrap();
    spec.taints = None;
    spec.provider_id = Some(format!("fake://{name}"));
    node
}

fn internal_ip(node: &Node) -> Option<String> {
    addresses(node)
        .into_iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address)
}

#[tokio::test]
async fn address_sync_makes_one_bulk_call_per_period() {
    let fake = FakeCloud::new();
    fake.set_bulk(true);
    let mut h = Harness::new(fake.clone()).await;
    let names: Vec<String> = (0..NODES).map(|i| h.name(&format!("n{i}"))).collect();
    for (i, name) in names.iter().enumerate() {
        fake.add_instance(FakeInstance::new(name).with_internal_ip(format!("10.1.0.{}", i + 1)));
        h.create(&initialized(&h, name, true)).await;
    }
    h.start_node_controller(
        CloudNodeConfig::default().with_node_status_update_frequency(Duration::from_millis(300)),
    );
    for (i, name) in names.iter().enumerate() {
        let want = format!("10.1.0.{}", i + 1);
        h.wait_node(name, "has its cloud address", |n| {
            internal_ip(n).as_deref() == Some(want.as_str())
        })
        .await;
    }
    // a change in the cloud reaches the node through the bulk call too
    fake.set_addresses(&names[3], vec![address("InternalIP", "10.9.9.9")]);
    h.wait_node(&names[3], "has the new address", |n| {
        internal_ip(n).as_deref() == Some("10.9.9.9")
    })
    .await;
    // one failed item skips only its node; a failed call skips the round
    fake.inject_for(
        Operation::InstanceMetadata,
        &format!("fake://{}", names[0]),
        Fault::once(InjectedError::Other("item down".into())),
    );
    fake.inject(
        Operation::InstanceMetadataBulk,
        Fault::once(InjectedError::Throttled),
    );
    let before = fake.call_count(Operation::InstanceMetadataBulk);
    h.wait_calls(Operation::InstanceMetadataBulk, before + 3)
        .await;
    assert_eq!(fake.pending_faults(Operation::InstanceMetadataBulk), 0);
    assert_eq!(fake.pending_faults(Operation::InstanceMetadata), 0);

    let bulk = fake.call_targets(Operation::InstanceMetadataBulk);
    assert!(bulk.len() >= 3, "{bulk:?}");
    assert!(
        bulk.iter().all(|t| *t == format!("{NODES} nodes")),
        "every bulk call is about every node: {bulk:?}"
    );
    assert_eq!(
        fake.call_count(Operation::InstanceMetadata),
        0,
        "no per-node call for the address sync"
    );
    h.finish().await;
}

#[tokio::test]
async fn lifecycle_checks_existence_in_one_bulk_call_per_period() {
    let fake = FakeCloud::new();
    fake.set_bulk(true);
    let mut h = Harness::new(fake.clone()).await;
    let gone = h.name("gone");
    let off = h.name("off");
    let ready = h.name("ready");
    let alive: Vec<String> = (0..NODES).map(|i| h.name(&format!("a{i}"))).collect();
    fake.add_instance(FakeInstance::new(&off).with_shutdown(true));
    fake.add_instance(FakeInstance::new(&ready));
    h.create(&initialized(&h, &gone, false)).await;
    h.create(&initialized(&h, &off, false)).await;
    h.create(&initialized(&h, &ready, true)).await;
    for name in &alive {
        fake.add_instance(FakeInstance::new(name));
        h.create(&initialized(&h, name, false)).await;
    }
    h.start_lifecycle_controller(
        CloudNodeLifecycleConfig::default().with_node_monitor_period(Duration::from_millis(200)),
    );
    h.wait_deleted(&gone).await;
    h.wait_node(&off, "has the shutdown taint", |n| {
        has_taint(n, names::taints::SHUTDOWN)
    })
    .await;
    let before = fake.call_count(Operation::InstanceExistsBulk);
    h.wait_calls(Operation::InstanceExistsBulk, before + 2)
        .await;

    assert_eq!(
        fake.call_count(Operation::InstanceExists),
        0,
        "no per-node existence check"
    );
    let targets = fake.call_targets(Operation::InstanceExistsBulk);
    assert_eq!(
        targets[0],
        format!("{} nodes", NODES + 2),
        "the NotReady nodes, never the Ready one"
    );
    assert_eq!(
        targets.last().map(String::as_str),
        Some(format!("{} nodes", NODES + 1).as_str()),
        "the deleted node is gone from later calls"
    );
    // shutdown checks are one bulk call too, about the existing NotReady nodes only
    assert_eq!(
        fake.call_count(Operation::InstanceShutdown),
        0,
        "no per-node shutdown check"
    );
    let shutdown = fake.call_targets(Operation::InstanceShutdownBulk);
    assert_eq!(
        shutdown[0],
        format!("{} nodes", NODES + 1),
        "the NotReady nodes that exist: never the gone one, never the Ready one"
    );
    // the alive nodes stay, untainted
    for name in &alive {
        let node = h.get(name).await.expect("still there");
        assert!(!has_taint(&node, names::taints::SHUTDOWN), "{name}");
    }
    h.finish().await;
}

#[tokio::test]
async fn a_failed_bulk_existence_check_deletes_nothing() {
    let fake = FakeCloud::new();
    fake.set_bulk(true);
    let mut h = Harness::new(fake.clone()).await;
    let gone = h.name("gone");
    h.create(&initialized(&h, &gone, false)).await;
    fake.inject(
        Operation::InstanceExistsBulk,
        Fault::always(InjectedError::Other("api down".into())),
    );
    h.start_lifecycle_controller(
        CloudNodeLifecycleConfig::default().with_node_monitor_period(Duration::from_millis(100)),
    );
    h.wait_calls(Operation::InstanceExistsBulk, 3).await;
    assert!(
        h.get(&gone).await.is_some(),
        "a failed call is never read as gone"
    );
    // once the cloud answers again, the node goes
    fake.clear_faults();
    h.wait_deleted(&gone).await;
    assert_eq!(fake.call_count(Operation::InstanceExists), 0);
    h.finish().await;
}

#[tokio::test]
async fn waiting_nodes_are_initialized_from_one_bulk_call() {
    let fake = FakeCloud::new();
    fake.set_bulk(true);
    let mut h = Harness::new(fake.clone()).await;
    let names: Vec<String> = (0..NODES).map(|i| h.name(&format!("w{i}"))).collect();
    for (i, name) in names.iter().enumerate() {
        fake.add_instance(FakeInstance::new(name).with_internal_ip(format!("10.2.0.{}", i + 1)));
        h.create(&h.kubelet_node(name, true)).await;
    }
    // Two of them fail in the batch: they are asked about alone, and initialized all the same.
    for name in &names[..2] {
        fake.inject_for(
            Operation::InstanceMetadata,
            name,
            Fault::once(InjectedError::Other("item down".into())),
        );
    }
    h.start_node_controller(CloudNodeConfig::default().with_concurrent_node_syncs(4));
    for (i, name) in names.iter().enumerate() {
        let want = format!("10.2.0.{}", i + 1);
        h.wait_node(name, "is initialized with its cloud address", |n| {
            !has_taint(n, names::taints::UNINITIALIZED)
                && internal_ip(n).as_deref() == Some(want.as_str())
        })
        .await;
    }
    let bulk = fake.call_targets(Operation::InstanceMetadataBulk);
    assert_eq!(bulk.len(), 1, "one batch for every waiting node: {bulk:?}");
    assert_eq!(bulk[0], format!("{NODES} nodes"));
    let single = fake.call_targets(Operation::InstanceMetadata);
    assert_eq!(
        single.len(),
        2,
        "only the failed items are asked about alone: {single:?}"
    );
    h.finish().await;
}

#[tokio::test]
async fn without_batches_each_node_is_asked_about_alone() {
    let fake = FakeCloud::new();
    fake.set_bulk(true);
    let mut h = Harness::new(fake.clone()).await;
    let names: Vec<String> = (0..4).map(|i| h.name(&format!("s{i}"))).collect();
    for name in &names {
        fake.add_instance(FakeInstance::new(name));
        h.create(&h.kubelet_node(name, true)).await;
    }
    h.start_node_controller(CloudNodeConfig::default().with_initialization_batch(0));
    for name in &names {
        h.wait_node(name, "is initialized", |n| {
            !has_taint(n, names::taints::UNINITIALIZED)
        })
        .await;
    }
    assert_eq!(fake.call_count(Operation::InstanceMetadataBulk), 0);
    assert_eq!(fake.call_count(Operation::InstanceMetadata), 4);
    h.finish().await;
}
