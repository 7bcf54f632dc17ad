//! The inventory file: parsing, every error kind, the registry factory and the published JSON schema.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ccm_core::{
    CloudProvider, ErrorKind, InstanceLookup, ProviderRegistry, ProviderSettings, RegistryError,
    ReloadContext,
};
use ccm_provider_fake::{Capability, FakeCloud, Inventory, InventoryError, Operation};
use common::{node, service};

fn example_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory.example.yaml")
}

fn schema_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema/fake-inventory.schema.json")
}

fn parse_err(yaml: &str) -> InventoryError {
    match FakeCloud::from_inventory_str(yaml, "inventory.yaml") {
        Ok(_) => panic!("expected an error for:\n{yaml}"),
        Err(err) => err,
    }
}

#[tokio::test(start_paused = true)]
async fn example_inventory_builds_the_described_cloud() {
    let cloud =
        FakeCloud::from_inventory_file(&example_path()).expect("the example inventory is valid");
    assert_eq!(cloud.provider_name(), "fake");
    for cap in Capability::ALL {
        assert!(cloud.has_capability(cap), "{cap:?}");
    }
    assert!(
        !std::sync::Arc::new(cloud.clone())
            .instances_v2()
            .unwrap()
            .supports_bulk(),
        "bulk is off by default"
    );
    let names: Vec<String> = cloud.instances().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["node-a", "node-b", "node-c"]);

    let a = cloud.instance("node-a").unwrap();
    assert_eq!(a.provider_id.as_deref(), Some("fake://node-a"));
    assert_eq!(a.instance_type, "fake.large");
    assert_eq!((a.zone.as_str(), a.region.as_str()), ("zone-a", "region-1"));
    assert_eq!(a.addresses.len(), 3);
    assert_eq!(
        a.labels.get("fake.example.com/rack").map(String::as_str),
        Some("r1")
    );
    let b = cloud.instance("node-b").unwrap();
    assert_eq!(
        b.provider_id.as_deref(),
        Some("fake://node-b"),
        "default providerID"
    );
    assert_eq!(b.addresses[1].address, "fd00::12");
    let c = cloud.instance("node-c").unwrap();
    assert!(c.shutdown);
    assert_eq!(c.provider_id.as_deref(), Some("fake:///zone-a/i-0c"));

    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    assert!(
        v2.instance_shutdown(&node("node-c", "fake:///zone-a/i-0c"))
            .await
            .unwrap()
    );
    let zones = std::sync::Arc::new(cloud.clone()).zones().unwrap();
    assert_eq!(zones.get_zone().await.unwrap().failure_domain, "zone-a");
    assert_eq!(
        std::sync::Arc::new(cloud.clone())
            .clusters()
            .unwrap()
            .list_clusters()
            .await
            .unwrap(),
        ["kubernetes"]
    );

    let routes = cloud.routes();
    assert_eq!(routes.len(), 1);
    assert!(routes[0].blackhole);
    assert_eq!(routes[0].name, "kubernetes-node-gone-10.244.9.0-24");

    // the first create is "in progress" (retry after 5 s) and takes 500 ms; the second gets the first pool IP
    let lbs = CloudProvider::load_balancer(std::sync::Arc::new(cloud.clone())).unwrap();
    let svc = service("default", "web", &[80]);
    let start = tokio::time::Instant::now();
    let err = lbs
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    assert_eq!(err.retry_after(), Some(Duration::from_secs(5)));
    let status = lbs
        .ensure_load_balancer("kubernetes", &svc, &[])
        .await
        .unwrap();
    assert_eq!(
        status.ingress.unwrap()[0].ip.as_deref(),
        Some("203.0.113.1")
    );
    // every other operation takes the default 20 ms
    let start = tokio::time::Instant::now();
    v2.instance_exists(&node("node-a", "")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(20));
}

/// Durations are Go durations, as in the CCM's flags and config file: fractions, concatenations, a bare 0.
#[tokio::test(start_paused = true)]
async fn durations_are_go_durations() {
    let yaml = "defaultLatency: 1.5s\n\
                latency: {create: 1m30s, update: .5s, delete: 0, list: 1h}\n\
                faults:\n  - {operation: list-routes, error: retry, retryAfter: 1h30m}\n";
    let inventory = Inventory::from_yaml_str(yaml, "inventory.yaml").unwrap();
    assert_eq!(inventory.default_latency, Some(Duration::from_millis(1500)));
    assert_eq!(inventory.latency["create"].get(), Duration::from_secs(90));
    assert_eq!(
        inventory.latency["update"].get(),
        Duration::from_millis(500)
    );
    assert_eq!(inventory.latency["delete"].get(), Duration::ZERO);
    assert_eq!(inventory.latency["list"].get(), Duration::from_secs(3600));
    assert_eq!(
        inventory.faults[0].retry_after,
        Some(Duration::from_secs(5400))
    );
    let cloud = FakeCloud::from_inventory(inventory, "inventory.yaml").unwrap();
    let start = tokio::time::Instant::now();
    let err = CloudProvider::routes(std::sync::Arc::new(cloud.clone()))
        .unwrap()
        .list_routes("kubernetes")
        .await
        .unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(5400)));
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(1500),
        "the default latency"
    );
}

#[test]
fn empty_documents_give_an_empty_cloud_with_defaults() {
    for yaml in ["", "\n", "# nothing yet\n", "---\n", "{}"] {
        let cloud = FakeCloud::from_inventory_str(yaml, "inventory.yaml").unwrap();
        assert!(cloud.instances().is_empty(), "{yaml:?}");
        assert_eq!(cloud.provider_name(), "fake");
        assert!(Capability::ALL.iter().all(|c| cloud.has_capability(*c)));
        assert!(cloud.has_cluster_id());
    }
    assert_eq!(
        Inventory::from_yaml_str("", "x").unwrap(),
        Inventory::default()
    );
}

#[test]
fn capabilities_default_to_on_individually_and_provider_name_changes_ids() {
    let yaml = "providerName: acme\ncapabilities: {instancesV2: false, routes: false}\nhasClusterID: false\n\
                instances: [{name: n1}, {name: n2, providerID: 'acme://i-2'}, {name: n3, providerID: ''}]\n";
    let cloud = FakeCloud::from_inventory_str(yaml, "inventory.yaml").unwrap();
    assert_eq!(cloud.provider_name(), "acme");
    assert!(!cloud.has_capability(Capability::InstancesV2));
    assert!(!cloud.has_capability(Capability::Routes));
    assert!(cloud.has_capability(Capability::Instances));
    assert!(cloud.has_capability(Capability::LoadBalancer));
    assert!(!cloud.has_cluster_id());
    assert_eq!(
        cloud.instance("n1").unwrap().provider_id.as_deref(),
        Some("acme://n1")
    );
    assert_eq!(
        cloud.instance("n2").unwrap().provider_id.as_deref(),
        Some("acme://i-2")
    );
    assert_eq!(
        cloud.instance("n3").unwrap().provider_id.as_deref(),
        Some("")
    );
}

#[tokio::test]
async fn pool_ip_mode_metadata_and_targeted_faults_from_yaml() {
    let yaml = "\
loadBalancerIPPool: 198.51.100.64/26
loadBalancerIPMode: Proxy
supportsBulk: true
instances:
  - {name: quiet, metadata: false}
  - {name: loud}
faults:
  - {operation: instance-metadata-by-provider-id, target: loud, error: other, message: flaky, times: 2}
  - {operation: list-routes, error: throttled, retryAfter: 3s}
";
    let cloud = FakeCloud::from_inventory_str(yaml, "inventory.yaml").unwrap();
    let v2 = std::sync::Arc::new(cloud.clone()).instances_v2().unwrap();
    assert!(v2.supports_bulk());
    assert_eq!(
        v2.instance_metadata(&node("quiet", "")).await.unwrap(),
        InstanceLookup::skip("fake instance quiet is set to report no metadata")
    );
    for _ in 0..2 {
        let err = v2.instance_metadata(&node("loud", "")).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "injected failure of instance-metadata-by-provider-id: flaky"
        );
    }
    assert!(
        v2.instance_metadata(&node("loud", ""))
            .await
            .unwrap()
            .found()
            .is_some()
    );
    let err = CloudProvider::routes(std::sync::Arc::new(cloud.clone()))
        .unwrap()
        .list_routes("kubernetes")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Throttled);
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));

    let status = CloudProvider::load_balancer(std::sync::Arc::new(cloud.clone()))
        .unwrap()
        .ensure_load_balancer("k", &service("d", "s", &[80]), &[])
        .await
        .unwrap();
    let ingress = &status.ingress.unwrap()[0];
    assert_eq!(ingress.ip.as_deref(), Some("198.51.100.65"));
    assert_eq!(ingress.ip_mode.as_deref(), Some("Proxy"));
}

#[test]
fn unknown_keys_are_rejected_with_their_path() {
    let err = parse_err("instances:\n  - name: a\n    zonee: x\n");
    assert!(
        matches!(err, InventoryError::UnknownField { ref field, .. } if field == "zonee"),
        "{err:?}"
    );
    assert_eq!(err.path(), Some("instances[0]"));
    let text = err.to_string();
    assert!(
        text.starts_with(
            "inventory.yaml: instances[0]: unknown field \"zonee\" (line 3, column 5)"
        ),
        "{text}"
    );
    assert!(
        text.contains("expected one of: name, providerID, instanceType, zone"),
        "{text}"
    );

    let err = parse_err("capabilities: {lb: true}\n");
    assert_eq!(err.path(), Some("capabilities"));
    let err = parse_err("bogus: 1\n");
    assert!(
        err.to_string()
            .starts_with("inventory.yaml: (top level): unknown field \"bogus\""),
        "{err}"
    );
    let err = parse_err(
        "instances:\n  - name: a\n    addresses: [{type: InternalIP, address: 10.0.0.1, port: 1}]\n",
    );
    assert_eq!(err.path(), Some("instances[0].addresses[0]"));
}

#[test]
fn wrong_types_name_the_field() {
    let cases = [
        (
            "instances:\n  - name: a\n    shutdown: maybe\n",
            "instances[0].shutdown",
            "expected true or false",
        ),
        ("instances: {a: b}\n", "instances", "expected a list"),
        ("clusters: kubernetes\n", "clusters", "expected a list"),
        (
            "instances:\n  - zone: a\n",
            "instances[0]",
            "missing required field \"name\"",
        ),
        (
            "instances:\n  - name: a\n    addresses: [{type: InternalIp, address: 10.0.0.1}]\n",
            "instances[0].addresses[0].type",
            "unknown value \"InternalIp\"; expected one of: Hostname, InternalIP, ExternalIP, InternalDNS, ExternalDNS",
        ),
        (
            "faults:\n  - {operation: create, error: retry, retryAfter: soon}\n",
            "faults[0].retryAfter",
            "invalid duration \"soon\": expected a number with a unit",
        ),
        (
            "latency: {create: 2 parsecs}\n",
            "latency.create",
            "invalid duration \"2 parsecs\": it must not contain blanks",
        ),
        (
            "defaultLatency: 1d\n",
            "defaultLatency",
            "invalid duration \"1d\": unknown unit \"d\"",
        ),
        (
            "defaultLatency: 5\n",
            "defaultLatency",
            "invalid duration 5: missing unit",
        ),
        (
            "latency: {create: -1s}\n",
            "latency.create",
            "invalid duration \"-1s\": it must not be negative",
        ),
        (
            "faults:\n  - {operation: create, error: explode}\n",
            "faults[0].error",
            "unknown value \"explode\"",
        ),
        (
            "faults:\n  - {operation: create, error: other, times: -1}\n",
            "faults[0].times",
            "",
        ),
        (
            "loadBalancerIPMode: Direct\n",
            "loadBalancerIPMode",
            "unknown value \"Direct\"",
        ),
    ];
    for (yaml, path, message) in cases {
        let err = parse_err(yaml);
        assert!(
            matches!(err, InventoryError::WrongType { .. }),
            "{yaml}: {err:?}"
        );
        assert_eq!(err.path(), Some(path), "{yaml}: {err}");
        assert!(
            err.to_string()
                .starts_with(&format!("inventory.yaml: {path}: ")),
            "{err}"
        );
        assert!(err.to_string().contains(message), "{yaml}: {err}");
        assert!(
            err.to_string().contains("(line "),
            "positions are shown: {err}"
        );
    }
}

#[test]
fn invalid_ip_address_error_names_file_and_path() {
    let yaml = "instances:\n  - name: a\n  - name: b\n  - name: c\n    addresses:\n      - {type: InternalIP, address: 10.0.0.300}\n";
    let err = parse_err(yaml);
    assert_eq!(
        err.to_string(),
        r#"inventory.yaml: instances[2].addresses[0].address: invalid IP address "10.0.0.300""#
    );
    assert!(matches!(err, InventoryError::InvalidIp { .. }));
    assert_eq!(err.file(), "inventory.yaml");
    // names are fine for Hostname/DNS addresses, but not empty
    let ok = "instances:\n  - {name: a, addresses: [{type: Hostname, address: a.example}, {type: ExternalDNS, address: a.dns}]}\n";
    assert!(FakeCloud::from_inventory_str(ok, "x").is_ok());
    let err = parse_err("instances:\n  - {name: a, addresses: [{type: Hostname, address: ''}]}\n");
    assert_eq!(err.path(), Some("instances[0].addresses[0].address"));
    let err = parse_err(
        "instances:\n  - {name: a, addresses: [{type: ExternalIP, address: ' 10.0.0.1'}]}\n",
    );
    assert!(matches!(err, InventoryError::InvalidIp { .. }), "{err}");
}

#[test]
fn invalid_cidrs_are_rejected() {
    let err = parse_err("loadBalancerIPPool: 203.0.113.0/33\n");
    assert!(matches!(err, InventoryError::InvalidCidr { .. }));
    assert!(
        err.to_string()
            .starts_with(r#"inventory.yaml: loadBalancerIPPool: invalid CIDR "203.0.113.0/33""#),
        "{err}"
    );
    let err = parse_err("loadBalancerIPPool: 203.0.113.7/24\n");
    assert!(
        err.to_string()
            .contains("host bits are set; did you mean 203.0.113.0/24?"),
        "{err}"
    );
    let err = parse_err("routes:\n  - {targetNode: a, destinationCIDR: 10.244.1.0}\n");
    assert_eq!(err.path(), Some("routes[0].destinationCIDR"));
    assert!(matches!(err, InventoryError::InvalidCidr { .. }));
}

#[test]
fn invalid_provider_ids_are_rejected() {
    let err = parse_err("instances:\n  - {name: a, providerID: i-123}\n");
    assert!(matches!(err, InventoryError::InvalidProviderId { .. }));
    assert_eq!(
        err.to_string(),
        r#"inventory.yaml: instances[0].providerID: invalid provider ID "i-123": expected fake://<instance id>"#
    );
    let err = parse_err("instances:\n  - {name: a, providerID: 'aws:///eu-1a/i-1'}\n");
    assert!(
        err.to_string()
            .contains("it belongs to provider \"aws\", not \"fake\"; use fake:///eu-1a/i-1"),
        "{err}"
    );
}

#[test]
fn duplicates_are_rejected_with_both_places() {
    let err = parse_err("instances: [{name: a}, {name: b}, {name: a}]\n");
    assert_eq!(
        err.to_string(),
        r#"inventory.yaml: instances[2].name: duplicate instance name "a", already used at instances[0].name"#
    );
    let err = parse_err("instances: [{name: a, providerID: 'fake://x'}, {name: x}]\n");
    assert!(
        matches!(
            err,
            InventoryError::Duplicate {
                what: "provider ID",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.path(), Some("instances[1].providerID"));
    let err = parse_err(
        "routes:\n  - {targetNode: a, destinationCIDR: 10.244.1.0/24}\n  - {targetNode: b, destinationCIDR: 10.244.1.0/24}\n",
    );
    assert_eq!(err.path(), Some("routes[1].destinationCIDR"));
    let err = parse_err("clusters: [k, k]\n");
    assert_eq!(err.path(), Some("clusters[1]"));
}

#[test]
fn unknown_operations_are_rejected() {
    let err = parse_err("faults:\n  - {operation: ensure, error: timeout}\n");
    assert!(matches!(err, InventoryError::UnknownOperation { .. }));
    assert!(err.to_string().starts_with(r#"inventory.yaml: faults[0].operation: unknown operation "ensure"; known operations: initialize, get-load-balancer, create,"#), "{err}");
    let err = parse_err("latency: {ensure: 1s}\n");
    assert_eq!(err.path(), Some("latency.ensure"));
}

#[test]
fn other_invalid_values_are_explained() {
    let cases = [
        (
            "faults:\n  - {operation: create, error: retry}\n",
            "faults[0].retryAfter",
            "needs retryAfter",
        ),
        (
            "faults:\n  - {operation: create, error: other, times: 0}\n",
            "faults[0].times",
            "at least 1",
        ),
        (
            "faults:\n  - {operation: create, error: timeout, message: x}\n",
            "faults[0].message",
            "only an error of kind other",
        ),
        (
            "faults:\n  - {operation: create, error: timeout, retryAfter: 1s}\n",
            "faults[0].retryAfter",
            "only errors of kind retry",
        ),
        (
            "instances:\n  - {name: a, labels: {'bad key!': x}}\n",
            "instances[0].labels.bad key!",
            "label key name",
        ),
        (
            "instances:\n  - {name: a, labels: {'Example.COM/x': y}}\n",
            "instances[0].labels.Example.COM/x",
            "DNS subdomain",
        ),
        (
            "instances:\n  - {name: a, labels: {ok: '-bad'}}\n",
            "instances[0].labels.ok",
            "label value",
        ),
        (
            "instances:\n  - {name: ''}\n",
            "instances[0].name",
            "must not be empty",
        ),
        (
            "providerName: 'a b'\n",
            "providerName",
            "not a valid provider name",
        ),
        (
            "localZone: {zone: ''}\n",
            "localZone.zone",
            "must not be empty",
        ),
        (
            "routes:\n  - {targetNode: '', destinationCIDR: 10.0.0.0/24}\n",
            "routes[0].targetNode",
            "must not be empty",
        ),
    ];
    for (yaml, path, message) in cases {
        let err = parse_err(yaml);
        assert!(
            matches!(err, InventoryError::Invalid { .. }),
            "{yaml}: {err:?}"
        );
        assert_eq!(err.path(), Some(path), "{yaml}: {err}");
        assert!(err.to_string().contains(message), "{yaml}: {err}");
    }
}

#[test]
fn syntax_errors_have_a_position() {
    let err = parse_err("instances:\n  - name: a\n---\nfoo: 1\n");
    assert!(matches!(err, InventoryError::Syntax { .. }), "{err:?}");
    assert!(err.to_string().contains("single YAML document"), "{err}");
    let err = parse_err("null\n");
    assert_eq!(
        err.to_string(),
        "inventory.yaml (line 1, column 1): expected a mapping of keys to values"
    );
    assert_eq!(err.path(), None);
    let err = parse_err("instances: [\n");
    assert!(err.to_string().starts_with("inventory.yaml"), "{err}");
}

#[test]
fn file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let err = FakeCloud::from_inventory_file(&missing).unwrap_err();
    assert!(matches!(err, InventoryError::Read { .. }));
    assert!(
        err.to_string().starts_with(&format!(
            "{}: cannot read the fake cloud inventory",
            missing.display()
        )),
        "{err}"
    );

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "instances:\n  - {name: a, addresses: [{type: InternalIP, address: nope}]}\n",
    )
    .unwrap();
    let err = FakeCloud::from_inventory_file(&bad).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: instances[0].addresses[0].address: invalid IP address \"nope\"",
            bad.display()
        )
    );
    assert_eq!(err.file(), bad.display().to_string());
}

/// A client that never connects: the factories here do not call the API server.
fn offline_client() -> kube::Client {
    kube::Client::new(
        tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                "offline",
            ))
        }),
        "default",
    )
}

/// The factory's settings with the contents of `path` as `--cloud-config`.
fn with_config(path: Option<&std::path::Path>) -> ProviderSettings {
    let settings = ProviderSettings::new(offline_client());
    match path {
        None => settings,
        Some(path) => settings
            .with_cloud_config_path(path)
            .with_cloud_config(std::fs::read(path).unwrap()),
    }
}

#[tokio::test]
async fn registry_factory_reads_the_inventory() {
    let registry = ProviderRegistry::new();
    FakeCloud::register(&registry).unwrap();
    assert!(matches!(
        FakeCloud::register(&registry),
        Err(RegistryError::Duplicate { .. })
    ));

    let empty = registry
        .init_cloud_provider("fake", with_config(None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(empty.provider_name(), "fake");
    assert!(empty.instances_v2().is_some());

    let cloud = registry
        .init_cloud_provider("fake", with_config(Some(&example_path())))
        .await
        .unwrap()
        .unwrap();
    assert!(Arc::clone(&cloud).instances_v2().is_some());

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::File::create(&bad)
        .unwrap()
        .write_all(b"instances: [{name: a, zonee: b}]\n")
        .unwrap();
    let err = registry
        .init_cloud_provider("fake", with_config(Some(&bad)))
        .await
        .err()
        .expect("a bad config fails");
    assert!(matches!(err, RegistryError::Factory { .. }));
    assert!(
        err.to_string().starts_with("could not init cloud provider \"fake\": --cloud-config: instances[0]: unknown field \"zonee\""),
        "{err}"
    );

    let off = dir.path().join("off.yaml");
    std::fs::write(
        &off,
        "capabilities: {loadBalancer: false}\ninstances: [{name: n1}]\n",
    )
    .unwrap();
    let cloud = registry
        .init_cloud_provider("fake", with_config(Some(&off)))
        .await
        .unwrap()
        .unwrap();
    assert!(Arc::clone(&cloud).load_balancer().is_none());
    assert!(cloud.routes().is_some());
}

#[tokio::test]
async fn the_reload_hook_applies_a_valid_inventory_and_rejects_a_bad_one() {
    let cloud =
        FakeCloud::from_inventory_str("instances: [{name: a}]\n", "inventory.yaml").unwrap();
    let provider: &dyn CloudProvider = &cloud;
    let reload = |yaml: &str| ReloadContext::new(Some(yaml.as_bytes().to_vec()));
    provider
        .reload(reload("instances: [{name: a}, {name: b}]\n"))
        .await
        .unwrap();
    assert!(cloud.instance("b").is_some());
    let err = provider
        .reload(reload("instances: [{name: a, zonee: b}]\n"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown field \"zonee\""), "{err}");
    let err = provider
        .reload(reload("providerName: other\ninstances: []\n"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot change"), "{err}");
    assert_eq!(
        cloud.instances().len(),
        2,
        "rejected inventories change nothing"
    );
    let unsupported = provider.reload(ReloadContext::new(None)).await.unwrap_err();
    assert!(unsupported.is_not_implemented(), "{unsupported}");
}

#[tokio::test]
async fn shared_registration_hands_out_the_same_cloud() {
    let cloud = FakeCloud::new();
    let registry = ProviderRegistry::new();
    cloud.register_shared(&registry, "fake").unwrap();
    let provider = registry
        .init_cloud_provider("fake", with_config(None))
        .await
        .unwrap()
        .unwrap();
    cloud.add_instance(ccm_provider_fake::FakeInstance::new("late"));
    assert!(
        provider
            .instances_v2()
            .unwrap()
            .instance_exists(&node("late", ""))
            .await
            .unwrap()
    );
    assert_eq!(cloud.call_ops(), [Operation::InstanceExists]);
    let err = registry
        .init_cloud_provider("fake", with_config(Some(&example_path())))
        .await
        .err()
        .expect("config refused");
    assert!(err.to_string().contains("takes no --cloud-config"), "{err}");
}

#[test]
fn committed_schema_is_current() {
    let generated = Inventory::json_schema();
    let path = schema_path();
    if std::env::var_os("CCM_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale; regenerate it with `CCM_UPDATE_SCHEMA=1 cargo test -p ccm-provider-fake --test inventory committed_schema_is_current`",
        path.display()
    );
}

fn yaml_to_json(yaml: &str) -> serde_json::Value {
    serde_saphyr::from_str(yaml).expect("valid YAML")
}

#[test]
fn schema_accepts_the_example_and_rejects_typos() {
    let schema: serde_json::Value = serde_json::from_str(&Inventory::json_schema()).unwrap();
    assert_eq!(
        schema["additionalProperties"],
        serde_json::Value::Bool(false)
    );
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON schema");
    let example = yaml_to_json(&std::fs::read_to_string(example_path()).unwrap());
    let problems: Vec<String> = validator
        .iter_errors(&example)
        .map(|e| e.to_string())
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
    for bad in [
        "instances: [{name: a, zonee: b}]",
        "bogus: 1",
        "instances: [{name: a, addresses: [{type: InternalIp, address: x}]}]",
        "faults: [{operation: create, error: explode}]",
        "capabilities: {routes: 1}",
    ] {
        assert!(!validator.is_valid(&yaml_to_json(bad)), "{bad}");
    }
}
