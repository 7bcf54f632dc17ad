//! The cloud node lifecycle controller against the real API server and the fake cloud.

mod support;

use std::time::Duration;

use ccm_core::names;
use ccm_nodecontroller::{CloudNodeLifecycleConfig, NodeOwnership};
use ccm_provider_fake::{Capability, FakeCloud, FakeInstance, Fault, InjectedError, Operation};
use k8s_openapi::api::core::v1::{Node, Taint};
use support::*;

fn fast() -> CloudNodeLifecycleConfig {
    CloudNodeLifecycleConfig::default().with_node_monitor_period(Duration::from_millis(100))
}

/// An initialized node (providerID set, no uninitialized taint).
fn initialized(h: &Harness, name: &str, provider_id: &str, ready: bool) -> Node {
    let mut node = h.kubelet_node(name, ready);
    let spec = node.spec.as_mut().unwrap();
    spec.taints = None;
    spec.provider_id = Some(provider_id.to_owned());
    node
}

#[tokio::test]
async fn deleted_instance_deletes_the_node() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let gone = h.name("gone");
    let alive = h.name("alive");
    fake.add_instance(FakeInstance::new(&alive));
    h.create(&initialized(&h, &gone, &format!("fake://{gone}"), false))
        .await;
    h.create(&initialized(&h, &alive, &format!("fake://{alive}"), false))
        .await;
    h.start_lifecycle_controller(fast());

    h.wait_deleted(&gone).await;
    let event = h.wait_event(&gone, names::events::DELETING_NODE).await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(
        event.message.as_deref(),
        Some(
            format!("Deleting node {gone} because it does not exist in the cloud provider")
                .as_str()
        )
    );
    assert_eq!(
        event.reporting_component.as_deref(),
        Some(names::components::CLOUD_NODE_LIFECYCLE_CONTROLLER)
    );
    // The existing (not shut down) instance's node stays, untainted.
    h.wait_calls(Operation::InstanceShutdown, 2).await;
    let node = h.get(&alive).await.expect("still there");
    assert!(!has_taint(&node, names::taints::SHUTDOWN));
    h.finish().await;
}

#[tokio::test]
async fn ready_nodes_are_never_checked_or_deleted() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let ready = h.name("ready");
    let probe = h.name("probe");
    h.create(&initialized(&h, &ready, &format!("fake://{ready}"), true))
        .await;
    // A NotReady node whose deletion shows a full pass happened.
    h.create(&initialized(&h, &probe, &format!("fake://{probe}"), false))
        .await;
    h.start_lifecycle_controller(fast());
    h.wait_deleted(&probe).await;
    h.wait_calls(Operation::InstanceExists, 1).await;
    assert!(h.get(&ready).await.is_some());
    assert!(
        !fake
            .call_targets(Operation::InstanceExists)
            .contains(&format!("fake://{ready}")),
        "a Ready node is never looked up"
    );
    h.finish().await;
}

#[tokio::test]
async fn shutdown_taint_added_then_removed_when_ready() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("off");
    fake.add_instance(FakeInstance::new(&name).with_shutdown(true));
    let mut node = initialized(&h, &name, &format!("fake://{name}"), false);
    node.spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: "example.com/kubelet".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    h.create(&node).await;
    h.start_lifecycle_controller(fast());

    let node = h
        .wait_node(&name, "shutdown taint", |n| {
            has_taint(n, names::taints::SHUTDOWN)
        })
        .await;
    let taint = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .and_then(|t| t.iter().find(|t| t.key == names::taints::SHUTDOWN))
        .cloned()
        .unwrap();
    assert_eq!(taint.effect, "NoSchedule");
    assert_eq!(taint.value, None, "no value");
    assert!(taint_keys(&node).contains(&"example.com/kubelet:NoSchedule".to_owned()));

    // Further passes do not write again.
    let rv = node.metadata.resource_version.clone();
    let seen = fake.call_count(Operation::InstanceShutdown);
    h.wait_calls(Operation::InstanceShutdown, seen + 3).await;
    assert_eq!(h.get(&name).await.unwrap().metadata.resource_version, rv);

    // Started again but still NotReady: the taint stays.
    fake.set_shutdown(&name, false);
    let seen = fake.call_count(Operation::InstanceShutdown);
    h.wait_calls(Operation::InstanceShutdown, seen + 3).await;
    assert!(has_taint(
        &h.get(&name).await.unwrap(),
        names::taints::SHUTDOWN
    ));

    // Ready: removed, the kubelet's taint kept.
    h.set_ready(&name, true).await;
    let node = h
        .wait_node(&name, "shutdown taint removed", |n| {
            !has_taint(n, names::taints::SHUTDOWN)
        })
        .await;
    assert!(taint_keys(&node).contains(&"example.com/kubelet:NoSchedule".to_owned()));
    h.finish().await;
}

#[tokio::test]
async fn foreign_and_initializing_nodes_are_left_alone() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let foreign = h.name("foreign");
    let empty = h.name("empty");
    let initializing = h.name("init");
    let ours = h.name("ours");
    h.create(&initialized(
        &h,
        &foreign,
        &format!("other://{foreign}"),
        false,
    ))
    .await;
    let mut no_id = initialized(&h, &empty, "", false);
    no_id.spec.as_mut().unwrap().provider_id = None;
    h.create(&no_id).await;
    let mut init = h.kubelet_node(&initializing, false);
    init.spec.as_mut().unwrap().provider_id = Some(format!("fake://{initializing}"));
    h.create(&init).await;
    // Ours: one gone from the cloud, one alive (NotReady, so every pass looks it up).
    let alive = h.name("alive");
    fake.add_instance(FakeInstance::new(&alive));
    h.create(&initialized(&h, &ours, &format!("fake://{ours}"), false))
        .await;
    h.create(&initialized(&h, &alive, &format!("fake://{alive}"), false))
        .await;
    h.start_lifecycle_controller(fast());

    h.wait_deleted(&ours).await;
    let seen = fake.call_count(Operation::InstanceExists);
    // Several more passes.
    h.wait_calls(Operation::InstanceExists, seen + 5).await;
    for name in [&foreign, &empty, &initializing] {
        assert!(h.get(name).await.is_some(), "{name} must not be deleted");
    }
    let ours_targets = [format!("fake://{ours}"), format!("fake://{alive}")];
    for target in fake.call_targets(Operation::InstanceExists) {
        assert!(
            ours_targets.contains(&target),
            "only our nodes are looked up, not {target}"
        );
    }
    assert_eq!(
        fake.call_count(Operation::InstanceShutdown),
        fake.call_targets(Operation::InstanceShutdown)
            .iter()
            .filter(|t| **t == ours_targets[1])
            .count()
    );
    h.finish().await;
}

#[tokio::test]
async fn go_ownership_deletes_foreign_nodes() {
    // NodeOwnership::AllNodes reproduces the Go behaviour (documented as unsafe for shared clusters).
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let foreign = h.name("foreign");
    h.create(&initialized(
        &h,
        &foreign,
        &format!("other://{foreign}"),
        false,
    ))
    .await;
    h.start_lifecycle_controller(
        fast()
            .with_ownership(NodeOwnership::AllNodes)
            .with_protect_initializing_nodes(false),
    );
    h.wait_deleted(&foreign).await;
    h.finish().await;
}

#[tokio::test]
async fn existence_errors_never_delete_and_timeouts_are_bounded() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("flaky");
    h.create(&initialized(&h, &name, &format!("fake://{name}"), false))
        .await;
    // The instance is gone, but the cloud API fails, then hangs.
    fake.inject(
        Operation::InstanceExists,
        Fault::times(InjectedError::Other("cloud API down".into()), 3),
    );
    h.start_lifecycle_controller(fast().with_cloud_call_timeout(Duration::from_millis(200)));
    h.wait_calls(Operation::InstanceExists, 3).await;
    fake.set_latency(Operation::InstanceExists, Duration::from_secs(10));
    let seen = fake.call_count(Operation::InstanceExists);
    h.wait_calls(Operation::InstanceExists, seen + 2).await;
    assert!(
        h.get(&name).await.is_some(),
        "an error is never read as 'gone'"
    );
    // The cloud recovers: the node is deleted.
    fake.clear_latency();
    h.wait_deleted(&name).await;
    h.finish().await;
}

#[tokio::test]
async fn v1_provider_lifecycle() {
    let fake = FakeCloud::new();
    fake.set_capability(Capability::InstancesV2, false);
    let mut h = Harness::new(fake.clone()).await;
    let off = h.name("v1off");
    let gone = h.name("v1gone");
    fake.add_instance(FakeInstance::new(&off).with_shutdown(true));
    h.create(&initialized(&h, &off, &format!("fake://{off}"), false))
        .await;
    h.create(&initialized(&h, &gone, &format!("fake://{gone}"), false))
        .await;
    h.start_lifecycle_controller(fast());
    h.wait_deleted(&gone).await;
    h.wait_node(&off, "shutdown taint", |n| {
        has_taint(n, names::taints::SHUTDOWN)
    })
    .await;
    assert_eq!(
        fake.call_count(Operation::InstanceExists),
        0,
        "V2 is never called"
    );
    assert!(fake.call_count(Operation::InstanceExistsByProviderId) >= 2);
    assert!(fake.call_count(Operation::InstanceShutdownByProviderId) >= 1);
    h.finish().await;
}
