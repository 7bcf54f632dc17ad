//! The cloud node controller against the real API server and the fake cloud.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_core::names::{self, labels as l};
use ccm_nodecontroller::{CloudNodeConfig, reasons};
use ccm_provider_fake::{Capability, FakeCloud, FakeInstance, Fault, InjectedError, Operation};
use json_patch::PatchOperation;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Patch, PatchParams};
use support::*;

fn uninitialized(node: &Node) -> bool {
    has_taint(node, names::taints::UNINITIALIZED)
}

#[tokio::test]
async fn initializes_a_fresh_tainted_node() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("n1");
    fake.add_instance(
        FakeInstance::new(&name)
            .with_internal_ip("10.0.0.11")
            .with_external_ip("203.0.113.11")
            .with_instance_type("fake.large")
            .with_zone("zone-a", "region-1")
            .with_label("example.com/rack", "r7"),
    );
    let mut node = h.kubelet_node(&name, true);
    // A taint the kubelet (or an admin) put there: it must survive.
    node.spec
        .as_mut()
        .unwrap()
        .taints
        .as_mut()
        .unwrap()
        .push(Taint {
            key: "example.com/dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    h.create(&node).await;
    h.start_node_controller(CloudNodeConfig::default());

    let node = h
        .wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    assert_eq!(
        ccm_core::helpers::node_provider_id(&node),
        format!("fake://{name}")
    );
    let labels = labels(&node);
    assert_eq!(labels[l::INSTANCE_TYPE], "fake.large");
    assert_eq!(labels[l::INSTANCE_TYPE_BETA], "fake.large");
    assert_eq!(labels[l::TOPOLOGY_ZONE], "zone-a");
    assert_eq!(labels[l::FAILURE_DOMAIN_BETA_ZONE], "zone-a");
    assert_eq!(labels[l::TOPOLOGY_REGION], "region-1");
    assert_eq!(labels[l::FAILURE_DOMAIN_BETA_REGION], "region-1");
    assert_eq!(labels["example.com/rack"], "r7");
    assert_eq!(labels[TEST_LABEL], h.id, "existing labels are kept");
    // The cloud's addresses, then the kubelet's hostname (the cloud reported none).
    assert_eq!(
        addresses(&node),
        vec![
            address("InternalIP", "10.0.0.11"),
            address("ExternalIP", "203.0.113.11"),
            address("Hostname", &name),
        ]
    );
    let taints = taint_keys(&node);
    assert!(
        taints.contains(&"example.com/dedicated:NoSchedule".to_owned()),
        "{taints:?}"
    );
    assert!(
        taints.contains(&format!("{}:NoSchedule", names::taints::NOT_READY)),
        "the admission-added taint survives: {taints:?}"
    );

    let event = h.wait_event(&name, names::events::SYNCED).await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.message.as_deref(), Some("Node synced successfully"));
    assert_eq!(
        event.reporting_component.as_deref(),
        Some(names::components::CLOUD_NODE_CONTROLLER)
    );
    // One metadata call initialized it; the metrics saw one node.
    assert_eq!(fake.call_count(Operation::InstanceMetadata), 1);
    let text = h.registry.encode();
    assert!(
        text.contains("node_controller_cloud_provider_taint_removal_delay_seconds_count 1"),
        "{text}"
    );
    assert!(
        text.contains("node_controller_initial_node_sync_delay_seconds_count 1"),
        "{text}"
    );
    assert!(
        text.contains("workqueue_adds_total{name=\"Nodes\"}"),
        "{text}"
    );
    h.finish().await;
}

#[tokio::test]
async fn v1_only_provider_initializes_through_instances_and_zones() {
    let fake = FakeCloud::new();
    fake.set_capability(Capability::InstancesV2, false);
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("v1");
    fake.add_instance(
        FakeInstance::new(&name)
            .with_internal_ip("10.0.1.5")
            .with_hostname(format!("{name}.cloud.internal"))
            .with_instance_type("fake.small")
            .with_zone("zone-b", "region-2"),
    );
    h.create(&h.kubelet_node(&name, true)).await;
    h.start_node_controller(CloudNodeConfig::default());

    let node = h
        .wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    assert_eq!(
        ccm_core::helpers::node_provider_id(&node),
        format!("fake://{name}")
    );
    let labels = labels(&node);
    assert_eq!(labels[l::INSTANCE_TYPE], "fake.small");
    assert_eq!(labels[l::TOPOLOGY_ZONE], "zone-b");
    assert_eq!(labels[l::TOPOLOGY_REGION], "region-2");
    // The cloud gave a hostname, so the kubelet's is replaced.
    assert_eq!(
        addresses(&node),
        vec![
            address("InternalIP", "10.0.1.5"),
            address("Hostname", &format!("{name}.cloud.internal")),
        ]
    );
    assert_eq!(
        fake.call_count(Operation::InstanceMetadata),
        0,
        "V2 is never called"
    );
    assert_eq!(fake.call_count(Operation::InstanceId), 1);
    assert!(fake.call_count(Operation::NodeAddressesByProviderId) >= 1);
    assert_eq!(fake.call_count(Operation::InstanceTypeByProviderId), 1);
    assert_eq!(fake.call_count(Operation::GetZoneByProviderId), 1);
    h.wait_event(&name, names::events::SYNCED).await;
    h.finish().await;
}

#[tokio::test]
async fn missing_provider_id_keeps_the_taint_warns_and_retries() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("noid");
    fake.add_instance(
        FakeInstance::new(&name)
            .without_provider_id()
            .with_internal_ip("10.0.2.1"),
    );
    h.create(&h.kubelet_node(&name, true)).await;
    h.start_node_controller(CloudNodeConfig::default());

    let event = h.wait_event(&name, reasons::MISSING_PROVIDER_ID).await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    // Retried with backoff (5 ms, 10 ms, ...): more calls come without any node change.
    h.wait_calls(Operation::InstanceMetadata, 3).await;
    let node = h.get(&name).await.expect("node exists");
    assert!(uninitialized(&node), "the node stays tainted");
    assert_eq!(ccm_core::helpers::node_provider_id(&node), "");
    assert_eq!(labels(&node).len(), 2, "nothing written");

    // Once the cloud reports an ID, the retries initialize the node.
    fake.update_instance(&name, |i| i.provider_id = None);
    let node = h
        .wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    assert_eq!(
        ccm_core::helpers::node_provider_id(&node),
        format!("fake://{name}")
    );
    h.finish().await;
}

#[tokio::test]
async fn no_metadata_skips_the_node_without_retrying() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("nometa");
    // A witness whose metadata call always fails: it is retried on the same backoff schedule a retried
    // no-metadata node would follow.
    let witness = h.name("witness");
    fake.add_instance(FakeInstance::new(&name).with_no_metadata());
    fake.add_instance(FakeInstance::new(&witness));
    fake.inject_for(
        Operation::InstanceMetadata,
        &witness,
        Fault::always(InjectedError::Other("cloud API down".into())),
    );
    h.create(&h.kubelet_node(&name, true)).await;
    h.create(&h.kubelet_node(&witness, true)).await;
    h.start_node_controller(CloudNodeConfig::default());

    let witness_calls = || {
        fake.call_targets(Operation::InstanceMetadata)
            .iter()
            .filter(|t| **t == witness)
            .count()
    };
    ccm_testenv::wait_for("the witness to be retried 4 times", TIMEOUT, || async {
        (witness_calls() >= 5).then_some(())
    })
    .await
    .unwrap();
    let skipped_calls = fake
        .call_targets(Operation::InstanceMetadata)
        .iter()
        .filter(|t| **t == name)
        .count();
    assert_eq!(skipped_calls, 1, "InstanceLookup::Skip is not retried");
    assert!(uninitialized(&h.get(&name).await.unwrap()));

    // The next change of the node is a new chance.
    fake.update_instance(&name, |i| i.no_metadata = false);
    let touch =
        serde_json::json!({ "metadata": { "annotations": { "example.com/touched": "yes" } } });
    h.nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(touch))
        .await
        .unwrap();
    h.wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    h.finish().await;
}

async fn node_ip_case(annotation: &str) {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("nodeip");
    fake.add_instance(
        FakeInstance::new(&name)
            .with_internal_ip("10.0.3.1")
            .with_internal_ip("10.0.3.2")
            .with_external_ip("203.0.113.3"),
    );
    let mut node = h.kubelet_node(&name, true);
    node.metadata.annotations = Some(BTreeMap::from([(
        names::annotations::PROVIDED_NODE_IP.to_owned(),
        annotation.to_owned(),
    )]));
    h.create(&node).await;
    h.start_node_controller(CloudNodeConfig::default());

    let event = h.wait_event(&name, reasons::INVALID_NODE_IP).await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(
        event
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("provided node ip"),
        "{event:?}"
    );
    h.wait_calls(Operation::InstanceMetadata, 2).await;
    let node = h.get(&name).await.unwrap();
    assert!(uninitialized(&node));
    assert_eq!(
        ccm_core::helpers::node_provider_id(&node),
        "",
        "no write at all"
    );
    assert_eq!(addresses(&node), vec![address("Hostname", &name)]);

    // Fixed annotation: initialized, with the node IP first and the other InternalIP dropped.
    let fix = serde_json::json!({ "metadata": { "annotations": { names::annotations::PROVIDED_NODE_IP: "10.0.3.2" } } });
    h.nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(fix))
        .await
        .unwrap();
    let node = h
        .wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    assert_eq!(
        addresses(&node),
        vec![
            address("InternalIP", "10.0.3.2"),
            address("ExternalIP", "203.0.113.3"),
            address("Hostname", &name),
        ]
    );
    h.finish().await;
}

#[tokio::test]
async fn invalid_node_ip_annotation_keeps_the_taint() {
    node_ip_case("not-an-ip").await;
}

#[tokio::test]
async fn mismatching_node_ip_annotation_keeps_the_taint() {
    node_ip_case("10.9.9.9").await;
}

/// The node controller's label check is the API server's: a prefix part longer than 63 characters is accepted by
/// both (`IsDNS1123Subdomain` bounds only the whole prefix), so the label is written, not discarded.
#[tokio::test]
async fn an_additional_label_with_a_long_prefix_part_is_written() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("longprefix");
    let key = format!("{}.example.com/rack", "a".repeat(70));
    fake.add_instance(FakeInstance::new(&name).with_label(&key, "r1"));
    h.create(&h.kubelet_node(&name, true)).await;
    h.start_node_controller(CloudNodeConfig::default());

    let node = h
        .wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    assert_eq!(labels(&node).get(&key).map(String::as_str), Some("r1"));
    h.finish().await;
}

#[tokio::test]
async fn additional_labels_are_filtered() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("labels");
    fake.add_instance(
        FakeInstance::new(&name)
            .with_label("example.com/rack", "r1")
            .with_label("example.com/pool", "cloud")
            .with_label("node.kubernetes.io/evil", "x")
            .with_label("k8s.io/evil", "x")
            .with_label("example.com/bad", "not a valid value"),
    );
    let mut node = h.kubelet_node(&name, true);
    node.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("example.com/pool".into(), "kubelet".into());
    h.create(&node).await;
    h.start_node_controller(CloudNodeConfig::default());

    let node = h
        .wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    let labels = labels(&node);
    assert_eq!(labels["example.com/rack"], "r1");
    assert_eq!(labels["example.com/pool"], "kubelet", "never overwritten");
    assert!(!labels.contains_key("node.kubernetes.io/evil"));
    assert!(!labels.contains_key("k8s.io/evil"));
    assert!(!labels.contains_key("example.com/bad"));
    h.finish().await;
}

#[tokio::test]
async fn periodic_sync_picks_up_address_changes_and_writes_nothing_otherwise() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("addr");
    fake.add_instance(FakeInstance::new(&name).with_internal_ip("10.0.4.1"));
    h.create(&h.kubelet_node(&name, true)).await;
    h.start_node_controller(
        CloudNodeConfig::default().with_node_status_update_frequency(Duration::from_millis(300)),
    );
    let node = h
        .wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    let rv = node.metadata.resource_version.clone();

    // Several sync passes with unchanged addresses write nothing.
    let seen = fake.call_count(Operation::InstanceMetadata);
    h.wait_calls(Operation::InstanceMetadata, seen + 3).await;
    assert_eq!(
        h.get(&name).await.unwrap().metadata.resource_version,
        rv,
        "no write without a change"
    );

    fake.set_addresses(
        &name,
        vec![
            address("InternalIP", "10.0.4.2"),
            address("InternalIP", "10.0.4.1"),
        ],
    );
    let node = h
        .wait_node(&name, "new addresses", |n| {
            addresses(n).first() == Some(&address("InternalIP", "10.0.4.2"))
        })
        .await;
    assert_eq!(
        addresses(&node),
        vec![
            address("InternalIP", "10.0.4.2"),
            address("InternalIP", "10.0.4.1"),
            address("Hostname", &name),
        ]
    );
    h.finish().await;
}

#[tokio::test]
async fn initialized_nodes_get_ga_labels_without_cloud_calls() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("beta");
    let mut node = h.kubelet_node(&name, true);
    node.spec.as_mut().unwrap().taints = None;
    let labels = node.metadata.labels.as_mut().unwrap();
    labels.insert(l::FAILURE_DOMAIN_BETA_ZONE.into(), "zone-x".into());
    labels.insert(l::INSTANCE_TYPE_BETA.into(), "old-type".into());
    labels.insert(l::INSTANCE_TYPE.into(), "different".into());
    h.create(&node).await;
    // A long status period: the first address pass runs at start, no other cloud call may happen.
    h.start_node_controller(CloudNodeConfig::default());

    let node = h
        .wait_node(&name, "GA labels", |n| {
            labels_of(n).get(l::TOPOLOGY_ZONE).map(String::as_str) == Some("zone-x")
        })
        .await;
    assert_eq!(labels_of(&node)[l::INSTANCE_TYPE], "old-type");
    // Only the start-up address pass asked the cloud (and found no instance).
    assert!(fake.call_count(Operation::InstanceMetadata) <= 1);
    h.finish().await;
}

fn labels_of(node: &Node) -> BTreeMap<String, String> {
    labels(node)
}

#[tokio::test]
async fn cloud_errors_and_timeouts_are_retried_and_write_nothing() {
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let errors = h.name("errors");
    let slow = h.name("slow");
    for name in [&errors, &slow] {
        fake.add_instance(
            FakeInstance::new(name)
                .with_internal_ip("10.0.5.1")
                .with_zone("z", "r"),
        );
    }
    // Before initialization the fake logs (and targets) calls by node name.
    fake.inject_for(
        Operation::InstanceMetadata,
        &errors,
        Fault::times(InjectedError::Other("cloud API down".into()), 3),
    );
    fake.set_latency(Operation::InstanceMetadata, Duration::from_secs(5));
    h.create(&h.kubelet_node(&errors, true)).await;
    h.create(&h.kubelet_node(&slow, true)).await;
    h.start_node_controller(
        CloudNodeConfig::default()
            .with_concurrent_node_syncs(2)
            .with_cloud_call_timeout(Duration::from_millis(200)),
    );

    // Every call times out: both nodes stay untouched while retries go on.
    h.wait_calls(Operation::InstanceMetadata, 4).await;
    for name in [&errors, &slow] {
        let node = h.get(name).await.unwrap();
        assert!(uninitialized(&node));
        assert_eq!(ccm_core::helpers::node_provider_id(&node), "");
        assert_eq!(labels(&node).len(), 2);
    }
    // The cloud answers again: the injected errors are used up, then both nodes are initialized.
    fake.clear_latency();
    for name in [&errors, &slow] {
        let node = h
            .wait_node(name, "initialized", |n| !uninitialized(n))
            .await;
        assert_eq!(labels(&node)[l::TOPOLOGY_ZONE], "z");
    }
    assert_eq!(fake.pending_faults(Operation::InstanceMetadata), 0);
    h.finish().await;
}

#[tokio::test]
async fn stale_guards_are_rejected_by_the_api_server() {
    // The guarded patches rely on the API server refusing a JSON Patch whose `test` fails; check that it does,
    // and with the status codes the controllers treat as "re-read and retry".
    let fake = FakeCloud::new();
    let h = Harness::new(fake).await;
    let name = h.name("guard");
    let seen = h.create(&h.kubelet_node(&name, true)).await;
    let plan = ccm_nodecontroller::plan::plan_initialization(
        &seen,
        &ccm_core::InstanceMetadata::new(format!("fake://{name}"))
            .with_addresses(vec![address("InternalIP", "10.0.6.1")]),
    )
    .unwrap();
    // Meanwhile the kubelet adds a taint and changes its addresses.
    let kubelet_taints = serde_json::json!({ "spec": { "taints": [
        { "key": names::taints::UNINITIALIZED, "value": "true", "effect": "NoSchedule" },
        { "key": "example.com/late", "effect": "NoExecute" }
    ] } });
    h.nodes
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(kubelet_taints),
        )
        .await
        .unwrap();
    let kubelet_status = serde_json::json!({ "status": { "addresses": [ { "type": "Hostname", "address": "renamed" } ] } });
    h.nodes
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(kubelet_status),
        )
        .await
        .unwrap();

    let send = |ops: Vec<PatchOperation>, status: bool| {
        let nodes = h.nodes.clone();
        let name = name.clone();
        async move {
            let patch: Patch<()> = Patch::Json(json_patch::Patch(ops));
            if status {
                nodes
                    .patch_status(&name, &PatchParams::default(), &patch)
                    .await
            } else {
                nodes.patch(&name, &PatchParams::default(), &patch).await
            }
        }
    };
    for (ops, status) in [
        (plan.spec_ops.clone(), false),
        (plan.status_ops.clone(), true),
    ] {
        match send(ops, status).await {
            Err(kube::Error::Api(s)) => {
                eprintln!("stale guard rejected with {}: {}", s.code, s.message);
                assert!(s.code == 409 || s.code == 422, "{s:?}")
            }
            other => panic!("a stale guard must be rejected, got {other:?}"),
        }
    }
    let node = h.get(&name).await.unwrap();
    assert!(taint_keys(&node).contains(&"example.com/late:NoExecute".to_owned()));
    assert_eq!(addresses(&node), vec![address("Hostname", "renamed")]);
    assert!(uninitialized(&node));

    // Planned again from the live node, both patches apply and keep the kubelet's taint.
    let plan = ccm_nodecontroller::plan::plan_initialization(
        &node,
        &ccm_core::InstanceMetadata::new(format!("fake://{name}"))
            .with_addresses(vec![address("InternalIP", "10.0.6.1")]),
    )
    .unwrap();
    send(plan.status_ops, true)
        .await
        .expect("status patch applies");
    let node = send(plan.spec_ops, false)
        .await
        .expect("spec patch applies");
    assert!(!uninitialized(&node));
    assert!(taint_keys(&node).contains(&"example.com/late:NoExecute".to_owned()));
    h.finish().await;
}

#[tokio::test]
async fn a_kubelet_taint_added_during_initialization_survives() {
    // The kubelet adds a taint while the cloud call is in flight: the controller's first patch fails its test,
    // it re-reads the node and removes only its own taint.
    let fake = FakeCloud::new();
    let mut h = Harness::new(fake.clone()).await;
    let name = h.name("race");
    // The cloud's addresses equal the kubelet's, so the only write is the (now stale) spec patch.
    fake.add_instance(FakeInstance::new(&name).with_hostname(&name));
    fake.set_latency(Operation::InstanceMetadata, Duration::from_millis(1500));
    h.create(&h.kubelet_node(&name, true)).await;
    h.start_node_controller(CloudNodeConfig::default());
    h.wait_calls(Operation::InstanceMetadata, 1).await;
    // While the metadata call is in flight.
    let taints = serde_json::json!({ "spec": { "taints": [
        { "key": names::taints::UNINITIALIZED, "value": "true", "effect": "NoSchedule" },
        { "key": "example.com/kubelet", "effect": "NoSchedule" }
    ] } });
    h.nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(taints))
        .await
        .unwrap();
    let node = h
        .wait_node(&name, "initialized", |n| !uninitialized(n))
        .await;
    assert!(
        taint_keys(&node).contains(&"example.com/kubelet:NoSchedule".to_owned()),
        "{:?}",
        taint_keys(&node)
    );
    h.finish().await;
}

#[tokio::test]
async fn descriptors_start_with_instances_and_skip_a_provider_without() {
    use ccm_nodecontroller::{
        CloudNodeLifecycleConfig, cloud_node_descriptor, cloud_node_lifecycle_descriptor,
    };
    let fake = FakeCloud::new();
    fake.set_capability(Capability::InstancesV2, false);
    let h = Harness::new(fake.clone()).await;
    let node = cloud_node_descriptor(CloudNodeConfig::default());
    let lifecycle = cloud_node_lifecycle_descriptor(CloudNodeLifecycleConfig::default());
    // V1 Instances is enough.
    assert!((node.init)(&h.ctx).unwrap().is_some());
    assert!((lifecycle.init)(&h.ctx).unwrap().is_some());
    // Neither InstancesV2 nor Instances: not started, not an error.
    fake.set_capability(Capability::Instances, false);
    assert!((node.init)(&h.ctx).unwrap().is_none());
    assert!((lifecycle.init)(&h.ctx).unwrap().is_none());
    // An invalid setting is an error, whatever the provider.
    let bad = cloud_node_descriptor(CloudNodeConfig::default().with_concurrent_node_syncs(0));
    let err = (bad.init)(&h.ctx)
        .err()
        .expect("an invalid setting is an error");
    assert!(err.to_string().contains("cloud-node-controller"), "{err}");
    h.finish().await;
}
