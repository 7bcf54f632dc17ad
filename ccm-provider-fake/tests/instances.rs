//! Capabilities, instance lookups (InstancesV2 and V1), zones and clusters of the fake cloud.

mod common;

use std::sync::Arc;

use ccm_core::{CloudError, CloudProvider, ErrorKind, InstanceLookup, Zone};
use ccm_provider_fake::{Capability, FakeCloud, FakeInstance, Operation};
use common::node;
use k8s_openapi::api::core::v1::NodeAddress;

fn addr(type_: &str, address: &str) -> NodeAddress {
    NodeAddress {
        type_: type_.into(),
        address: address.into(),
    }
}

fn cloud_with_two() -> FakeCloud {
    let cloud = FakeCloud::new();
    cloud.add_instance(
        FakeInstance::new("node-a")
            .with_internal_ip("10.0.0.11")
            .with_hostname("node-a")
            .with_instance_type("fake.large")
            .with_zone("zone-a", "region-1")
            .with_label("fake.example.com/rack", "r1"),
    );
    cloud.add_instance(
        FakeInstance::new("node-b")
            .with_provider_id("fake:///zone-b/i-0b")
            .with_internal_ip("10.0.0.12")
            .with_instance_type("fake.small")
            .with_zone("zone-b", "region-1"),
    );
    cloud
}

#[test]
fn every_capability_is_on_by_default_and_each_can_be_switched_off() {
    let cloud = FakeCloud::new();
    assert_eq!(cloud.provider_name(), "fake");
    let provider: Arc<dyn CloudProvider> = Arc::new(cloud.clone());
    for cap in Capability::ALL {
        assert!(cap.supported_by(&provider), "{cap:?} on by default");
        assert!(cloud.has_capability(cap));
    }
    for cap in Capability::ALL {
        cloud.set_capability(cap, false);
        assert!(!cap.supported_by(&provider), "{cap:?} switched off");
        for other in Capability::ALL.into_iter().filter(|c| *c != cap) {
            assert!(
                other.supported_by(&provider),
                "{other:?} stays on when {cap:?} is off"
            );
        }
        cloud.set_capability(cap, true);
        assert!(cap.supported_by(&provider));
    }
}

#[test]
fn capability_changes_are_seen_by_clones_and_has_cluster_id_is_a_knob() {
    let cloud = FakeCloud::new();
    let provider: Arc<dyn CloudProvider> = Arc::new(cloud.clone());
    cloud.set_capability(Capability::InstancesV2, false);
    assert!(Arc::clone(&provider).instances_v2().is_none());
    assert!(Arc::clone(&provider).instances().is_some());
    assert!(provider.has_cluster_id());
    cloud.set_has_cluster_id(false);
    assert!(!provider.has_cluster_id());
}

#[test]
fn provider_name_sets_the_default_provider_id_prefix() {
    let cloud = FakeCloud::new().with_provider_name("acme");
    cloud.add_instance(FakeInstance::new("n1"));
    assert_eq!(cloud.provider_name(), "acme");
    assert_eq!(cloud.name(), "acme");
    assert_eq!(
        cloud.instance("n1").unwrap().provider_id.as_deref(),
        Some("acme://n1")
    );
}

#[tokio::test]
async fn v2_finds_instances_by_name_when_the_node_has_no_provider_id() {
    let cloud = cloud_with_two();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let n = node("node-a", "");
    assert!(v2.instance_exists(&n).await.unwrap());
    assert!(!v2.instance_shutdown(&n).await.unwrap());
    let meta = v2
        .instance_metadata(&n)
        .await
        .unwrap()
        .into_found()
        .expect("metadata");
    assert_eq!(meta.provider_id, "fake://node-a");
    assert_eq!(meta.instance_type, "fake.large");
    assert_eq!(
        (meta.zone.as_str(), meta.region.as_str()),
        ("zone-a", "region-1")
    );
    assert_eq!(
        meta.node_addresses,
        vec![addr("InternalIP", "10.0.0.11"), addr("Hostname", "node-a")]
    );
    assert_eq!(
        meta.additional_labels
            .get("fake.example.com/rack")
            .map(String::as_str),
        Some("r1")
    );
}

#[tokio::test]
async fn v2_finds_instances_by_provider_id_first() {
    let cloud = cloud_with_two();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    // the providerID wins over the name: a node named node-a carrying node-b's providerID is node-b
    let n = node("node-a", "fake:///zone-b/i-0b");
    let meta = v2
        .instance_metadata(&n)
        .await
        .unwrap()
        .into_found()
        .unwrap();
    assert_eq!(meta.instance_type, "fake.small");
    assert_eq!(meta.provider_id, "fake:///zone-b/i-0b");
    // the default providerID of node-a works too
    assert!(
        v2.instance_exists(&node("renamed", "fake://node-a"))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn v2_foreign_or_unknown_provider_id_is_not_found() {
    let cloud = cloud_with_two();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    for id in ["aws://node-a", "fake://node-z", "node-a"] {
        let n = node("node-a", id);
        assert!(!v2.instance_exists(&n).await.unwrap(), "{id}");
        assert_eq!(
            v2.instance_metadata(&n).await.unwrap_err().kind(),
            ErrorKind::InstanceNotFound,
            "{id}"
        );
        assert_eq!(
            v2.instance_shutdown(&n).await.unwrap_err().kind(),
            ErrorKind::InstanceNotFound,
            "{id}"
        );
    }
}

#[tokio::test]
async fn v2_unknown_instance_semantics() {
    let cloud = cloud_with_two();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let n = node("node-z", "");
    assert!(!v2.instance_exists(&n).await.unwrap());
    assert!(matches!(
        v2.instance_metadata(&n).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        v2.instance_shutdown(&n).await,
        Err(CloudError::InstanceNotFound)
    ));
}

#[tokio::test]
async fn shutdown_instances_still_exist() {
    let cloud = cloud_with_two();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let v1 = CloudProvider::instances(std::sync::Arc::new(cloud.clone())).unwrap();
    assert!(cloud.set_shutdown("node-b", true));
    assert!(!cloud.set_shutdown("node-z", true));
    let n = node("node-b", "fake:///zone-b/i-0b");
    assert!(v2.instance_exists(&n).await.unwrap());
    assert!(v2.instance_shutdown(&n).await.unwrap());
    assert!(
        v1.instance_exists_by_provider_id("fake:///zone-b/i-0b")
            .await
            .unwrap()
    );
    assert!(
        v1.instance_shutdown_by_provider_id("fake:///zone-b/i-0b")
            .await
            .unwrap()
    );
    assert_eq!(v1.instance_id("node-b").await.unwrap(), "/zone-b/i-0b");
}

#[tokio::test]
async fn run_time_changes_are_visible_immediately() {
    let cloud = cloud_with_two();
    let provider: Arc<dyn CloudProvider> = Arc::new(cloud.clone());
    let v2 = provider.instances_v2().unwrap();
    let n = node("node-a", "fake://node-a");
    assert!(v2.instance_exists(&n).await.unwrap());

    assert!(cloud.set_addresses("node-a", vec![addr("InternalIP", "10.0.0.99")]));
    let meta = v2
        .instance_metadata(&n)
        .await
        .unwrap()
        .into_found()
        .unwrap();
    assert_eq!(meta.node_addresses, vec![addr("InternalIP", "10.0.0.99")]);

    assert!(cloud.update_instance("node-a", |i| i.zone = "zone-c".into()));
    assert_eq!(
        v2.instance_metadata(&n)
            .await
            .unwrap()
            .into_found()
            .unwrap()
            .zone,
        "zone-c"
    );

    assert!(cloud.remove_instance("node-a"));
    assert!(!cloud.remove_instance("node-a"));
    assert!(!v2.instance_exists(&n).await.unwrap());
    assert!(cloud.instance("node-a").is_none());
    assert_eq!(cloud.instances().len(), 1);
    assert_eq!(cloud.all_instances(), cloud.instances());

    cloud.add_instance(FakeInstance::new("node-a"));
    assert!(v2.instance_exists(&n).await.unwrap());
}

#[tokio::test]
async fn no_metadata_and_no_provider_id() {
    let cloud = FakeCloud::new();
    cloud.add_instance(FakeInstance::new("quiet").with_no_metadata());
    cloud.add_instance(
        FakeInstance::new("anon")
            .without_provider_id()
            .with_instance_type("t"),
    );
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let v1 = CloudProvider::instances(std::sync::Arc::new(cloud.clone())).unwrap();

    assert_eq!(
        v2.instance_metadata(&node("quiet", "")).await.unwrap(),
        InstanceLookup::skip("fake instance quiet is set to report no metadata")
    );
    assert!(v2.instance_exists(&node("quiet", "")).await.unwrap());

    let meta = v2
        .instance_metadata(&node("anon", ""))
        .await
        .unwrap()
        .into_found()
        .unwrap();
    assert_eq!(meta.provider_id, "");
    assert_eq!(meta.instance_type, "t");
    // without a providerID the V1 instance ID is "not implemented": Go initializes the node without one
    assert!(matches!(
        v1.instance_id("anon").await,
        Err(CloudError::NotImplemented)
    ));
    assert_eq!(
        cloud.instance("anon").unwrap().provider_id.as_deref(),
        Some("")
    );
}

#[tokio::test]
async fn v1_by_provider_id_and_by_name() {
    let cloud = cloud_with_two();
    let v1 = CloudProvider::instances(std::sync::Arc::new(cloud.clone())).unwrap();

    assert_eq!(
        v1.node_addresses("node-a").await.unwrap()[0],
        addr("InternalIP", "10.0.0.11")
    );
    assert_eq!(
        v1.node_addresses_by_provider_id("fake:///zone-b/i-0b")
            .await
            .unwrap(),
        vec![addr("InternalIP", "10.0.0.12")]
    );
    assert_eq!(v1.instance_id("node-a").await.unwrap(), "node-a");
    assert_eq!(v1.instance_type("node-b").await.unwrap(), "fake.small");
    assert_eq!(
        v1.instance_type_by_provider_id("fake://node-a")
            .await
            .unwrap(),
        "fake.large"
    );
    assert!(
        v1.instance_exists_by_provider_id("fake://node-a")
            .await
            .unwrap()
    );
    assert!(
        !v1.instance_shutdown_by_provider_id("fake://node-a")
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn v1_by_provider_id_fails_so_the_controller_falls_back_to_the_name() {
    // Go's node controller tries the by-providerID call first and the by-name call when it errors: a foreign
    // or stale providerID must give an error (not an empty answer), and the by-name call must still work.
    let cloud = cloud_with_two();
    let v1 = CloudProvider::instances(std::sync::Arc::new(cloud.clone())).unwrap();
    for id in ["aws://node-a", "fake://gone", ""] {
        assert_eq!(
            v1.node_addresses_by_provider_id(id)
                .await
                .unwrap_err()
                .kind(),
            ErrorKind::InstanceNotFound
        );
        assert_eq!(
            v1.instance_type_by_provider_id(id)
                .await
                .unwrap_err()
                .kind(),
            ErrorKind::InstanceNotFound
        );
        assert!(!v1.instance_exists_by_provider_id(id).await.unwrap());
        assert_eq!(
            v1.instance_shutdown_by_provider_id(id)
                .await
                .unwrap_err()
                .kind(),
            ErrorKind::InstanceNotFound
        );
    }
    assert_eq!(v1.node_addresses("node-a").await.unwrap().len(), 2);
    assert_eq!(v1.instance_type("node-a").await.unwrap(), "fake.large");
}

#[tokio::test]
async fn v1_unknown_name_is_instance_not_found() {
    let cloud = cloud_with_two();
    let v1 = CloudProvider::instances(std::sync::Arc::new(cloud.clone())).unwrap();
    assert!(matches!(
        v1.instance_id("gone").await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        v1.node_addresses("gone").await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        v1.instance_type("gone").await,
        Err(CloudError::InstanceNotFound)
    ));
    // the legacy methods keep the trait defaults
    assert!(matches!(
        v1.add_ssh_key_to_all_instances("u", b"k").await,
        Err(CloudError::NotImplemented)
    ));
    assert_eq!(v1.current_node_name("host-1").await.unwrap(), "host-1");
}

#[tokio::test]
async fn zones_by_provider_id_by_name_and_local() {
    let cloud = cloud_with_two();
    let zones = std::sync::Arc::new(cloud.clone()).zones().unwrap();
    assert_eq!(
        zones.get_zone_by_node_name("node-a").await.unwrap(),
        Zone::new("zone-a", "region-1")
    );
    assert_eq!(
        zones
            .get_zone_by_provider_id("fake:///zone-b/i-0b")
            .await
            .unwrap(),
        Zone::new("zone-b", "region-1")
    );
    assert_eq!(
        zones
            .get_zone_by_provider_id("aws://x")
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InstanceNotFound
    );
    assert_eq!(
        zones
            .get_zone_by_node_name("gone")
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InstanceNotFound
    );

    assert!(matches!(
        zones.get_zone().await,
        Err(CloudError::NotImplemented)
    ));
    cloud.set_local_zone(Some(Zone::new("zone-l", "region-l")));
    assert_eq!(
        zones.get_zone().await.unwrap(),
        Zone::new("zone-l", "region-l")
    );
}

#[tokio::test]
async fn clusters_list_and_master() {
    let cloud = FakeCloud::new();
    let clusters = std::sync::Arc::new(cloud.clone()).clusters().unwrap();
    assert!(clusters.list_clusters().await.unwrap().is_empty());
    cloud.set_clusters(vec!["kubernetes".into(), "other".into()]);
    assert_eq!(
        clusters.list_clusters().await.unwrap(),
        ["kubernetes", "other"]
    );
    assert_eq!(
        clusters.master("kubernetes").await.unwrap(),
        "master.kubernetes.fake.invalid"
    );
    cloud.set_master("other", "10.0.0.1");
    assert_eq!(clusters.master("other").await.unwrap(), "10.0.0.1");
    let err = clusters.master("nope").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(
        err.to_string().contains("known: [kubernetes, other]"),
        "{err}"
    );
    cloud.set_master("third", "10.0.0.3");
    assert_eq!(
        clusters.list_clusters().await.unwrap(),
        ["kubernetes", "other", "third"]
    );
}

#[tokio::test]
async fn instance_calls_are_logged_with_their_targets() {
    let cloud = cloud_with_two();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let v1 = CloudProvider::instances(std::sync::Arc::new(cloud.clone())).unwrap();
    let zones = std::sync::Arc::new(cloud.clone()).zones().unwrap();
    let _ = v2.instance_exists(&node("node-a", "")).await;
    let _ = v2
        .instance_shutdown(&node("node-b", "fake:///zone-b/i-0b"))
        .await;
    let _ = v2.instance_metadata(&node("node-a", "")).await;
    let _ = v1.node_addresses("node-a").await;
    let _ = v1.node_addresses_by_provider_id("fake://node-a").await;
    let _ = v1.instance_id("node-a").await;
    let _ = v1.instance_type("node-a").await;
    let _ = v1.instance_type_by_provider_id("fake://node-a").await;
    let _ = v1.instance_exists_by_provider_id("fake://node-a").await;
    let _ = v1.instance_shutdown_by_provider_id("fake://node-a").await;
    let _ = zones.get_zone().await;
    let _ = zones.get_zone_by_provider_id("fake://node-a").await;
    let _ = zones.get_zone_by_node_name("node-a").await;
    let log: Vec<(Operation, String)> = cloud
        .calls()
        .into_iter()
        .map(|c| (c.op, c.target))
        .collect();
    let expected = [
        (Operation::InstanceExists, "node-a"),
        (Operation::InstanceShutdown, "fake:///zone-b/i-0b"),
        (Operation::InstanceMetadata, "node-a"),
        (Operation::NodeAddresses, "node-a"),
        (Operation::NodeAddressesByProviderId, "fake://node-a"),
        (Operation::InstanceId, "node-a"),
        (Operation::InstanceType, "node-a"),
        (Operation::InstanceTypeByProviderId, "fake://node-a"),
        (Operation::InstanceExistsByProviderId, "fake://node-a"),
        (Operation::InstanceShutdownByProviderId, "fake://node-a"),
        (Operation::GetZone, ""),
        (Operation::GetZoneByProviderId, "fake://node-a"),
        (Operation::GetZoneByNodeName, "node-a"),
    ];
    let expected: Vec<(Operation, String)> =
        expected.iter().map(|(o, t)| (*o, t.to_string())).collect();
    assert_eq!(log, expected);
    assert_eq!(
        cloud.call_ops()[..3],
        [
            Operation::InstanceExists,
            Operation::InstanceShutdown,
            Operation::InstanceMetadata
        ]
    );
}

#[tokio::test]
async fn bulk_calls_go_one_by_one_unless_bulk_is_on() {
    let cloud = cloud_with_two();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let nodes = [node("node-a", ""), node("node-z", "")];
    assert!(!v2.supports_bulk());
    let answers = v2.instance_exists_bulk(&nodes).await.unwrap();
    assert_eq!(
        answers.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [true, false]
    );
    assert_eq!(
        cloud.call_ops(),
        [Operation::InstanceExists, Operation::InstanceExists]
    );
    cloud.clear_calls();

    cloud.set_bulk(true);
    assert!(v2.supports_bulk());
    let answers = v2.instance_exists_bulk(&nodes).await.unwrap();
    assert_eq!(
        answers.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [true, false]
    );
    assert_eq!(
        cloud.calls(),
        [ccm_provider_fake::Call::new(
            Operation::InstanceExistsBulk,
            "2 nodes"
        )]
    );
}

#[tokio::test]
async fn native_bulk_metadata_answers_per_node_and_honours_faults() {
    use ccm_provider_fake::{Fault, InjectedError};
    let cloud = cloud_with_two();
    cloud.add_instance(FakeInstance::new("quiet").with_no_metadata());
    cloud.set_bulk(true);
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    let nodes = [
        node("node-a", ""),
        node("node-b", "fake:///zone-b/i-0b"),
        node("quiet", ""),
        node("gone", ""),
    ];

    let answers = v2.instance_metadata_bulk(&nodes).await.unwrap();
    assert_eq!(answers.len(), 4);
    assert_eq!(
        answers[0].as_ref().unwrap().found().unwrap().provider_id,
        "fake://node-a"
    );
    assert_eq!(
        answers[1].as_ref().unwrap().found().unwrap().instance_type,
        "fake.small"
    );
    assert!(answers[2].as_ref().unwrap().skip_reason().is_some());
    assert_eq!(
        answers[3].as_ref().unwrap_err().kind(),
        ErrorKind::InstanceNotFound
    );
    assert_eq!(cloud.call_ops(), [Operation::InstanceMetadataBulk]);

    // a fault aimed at one node fails only its item; a fault of the bulk operation fails the whole call
    cloud.inject_for(
        Operation::InstanceMetadata,
        "fake:///zone-b/i-0b",
        Fault::once(InjectedError::Throttled),
    );
    let answers = v2.instance_metadata_bulk(&nodes).await.unwrap();
    assert!(answers[0].is_ok());
    assert_eq!(
        answers[1].as_ref().unwrap_err().kind(),
        ErrorKind::Throttled
    );
    cloud.inject(
        Operation::InstanceMetadataBulk,
        Fault::once(InjectedError::Timeout),
    );
    assert_eq!(
        v2.instance_metadata_bulk(&nodes).await.unwrap_err().kind(),
        ErrorKind::Timeout
    );
    assert!(v2.instance_metadata_bulk(&nodes).await.unwrap()[1].is_ok());
    assert_eq!(
        cloud.call_count(Operation::InstanceMetadata),
        0,
        "native bulk makes no single calls"
    );
}
