//! Property tests of the fake cloud's inventory parser: arbitrary text never panics, valid inventories read back
//! as written, and the cloud built from them holds exactly what they describe. Each property runs
//! `ccm_testenv::properties::DEFAULT_CASES` generated cases (or `PROPTEST_CASES`); see docs/architecture.md,
//! "Property tests".

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use ccm_core::duration::format_go_duration;
use ccm_core::intercept::Operation;
use ccm_provider_fake::{FakeCloud, Inventory};
use ccm_testenv::properties::config;
use ipnet::IpNet;
use proptest::prelude::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------------------
// Arbitrary input
// ---------------------------------------------------------------------------------------------------------

/// YAML-looking text with the inventory's keys, nesting and values of every type.
fn inventory_like() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("instances:"),
        Just("- name:"),
        Just("name:"),
        Just("providerID:"),
        Just("addresses:"),
        Just("- type:"),
        Just("address:"),
        Just("labels:"),
        Just("routes:"),
        Just("- targetNode:"),
        Just("destinationCIDR:"),
        Just("latency:"),
        Just("create:"),
        Just("faults:"),
        Just("- operation:"),
        Just("error:"),
        Just("retryAfter:"),
        Just("quota:"),
        Just("requestsPerSecond:"),
        Just("loadBalancerIPPool:"),
        Just("bogus:"),
    ];
    let value = prop_oneof![
        Just(""),
        Just(" node-a"),
        Just(" fake://node-a"),
        Just(" other://x"),
        Just(" InternalIP"),
        Just(" 10.0.0.300"),
        Just(" 10.0.0.1"),
        Just(" 10.244.1.0/24"),
        Just(" 10.244.1.1/24"),
        Just(" 2s"),
        Just(" -1"),
        Just(" 0"),
        Just(" retry"),
        Just(" [a, b]"),
        Just(" {x: 1}"),
        Just(" ~"),
        Just(" 'open"),
    ];
    let line =
        (0usize..4, key, value).prop_map(|(indent, k, v)| format!("{}{k}{v}", "  ".repeat(indent)));
    prop::collection::vec(line, 0..8).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_inventory_text_parses_or_fails_with_its_origin(text in prop_oneof![any::<String>(), inventory_like()]) {
        match Inventory::from_yaml_str(&text, "inventory.yaml") {
            Ok(inventory) => {
                // Parsed inventories are checked when the cloud is built: that never panics either.
                if let Err(err) = FakeCloud::from_inventory(inventory, "inventory.yaml") {
                    let message = err.to_string();
                    prop_assert!(message.contains("inventory.yaml"), "{}", message);
                }
            }
            Err(err) => {
                let message = err.to_string();
                prop_assert!(message.contains("inventory.yaml"), "{}", message);
            }
        }
    }

    #[test]
    fn any_bytes_as_inventory_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(inventory) = Inventory::from_yaml_str(&text, "inventory.yaml") {
            let _ = FakeCloud::from_inventory(inventory, "inventory.yaml");
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Valid inventories
// ---------------------------------------------------------------------------------------------------------

/// An instance as written in the inventory.
#[derive(Debug, Clone)]
struct InstanceModel {
    name: String,
    /// absent, `""` (no providerID) or an explicit id.
    provider_id: Option<String>,
    instance_type: String,
    zone: String,
    addresses: Vec<(&'static str, String)>,
    labels: BTreeMap<String, String>,
    shutdown: bool,
    metadata: bool,
}

/// A route as written in the inventory.
#[derive(Debug, Clone)]
struct RouteModel {
    target: String,
    cidr: IpNet,
    blackhole: bool,
}

/// A whole inventory as written.
#[derive(Debug, Clone)]
struct Model {
    provider_name: Option<String>,
    instances: Vec<InstanceModel>,
    routes: Vec<RouteModel>,
    clusters: Vec<String>,
    latency: BTreeMap<&'static str, Duration>,
    default_latency: Option<Duration>,
}

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(IpAddr::from),
        any::<[u16; 8]>().prop_map(IpAddr::from)
    ]
}

fn address() -> impl Strategy<Value = (&'static str, String)> {
    prop_oneof![
        ip().prop_map(|ip| ("InternalIP", ip.to_string())),
        ip().prop_map(|ip| ("ExternalIP", ip.to_string())),
        "[a-z][a-z0-9.-]{0,20}".prop_map(|name| ("Hostname", name)),
        "[a-z][a-z0-9.-]{0,20}".prop_map(|name| ("InternalDNS", name)),
    ]
}

fn label() -> impl Strategy<Value = (String, String)> {
    (
        "([a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?\\.)?[a-z0-9]{1,6}/",
        "[A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?",
        "([A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?)?",
        any::<bool>(),
    )
        .prop_map(|(prefix, name, value, prefixed)| {
            (
                if prefixed {
                    format!("{prefix}{name}")
                } else {
                    name
                },
                value,
            )
        })
}

prop_compose! {
    fn instance()(
        provider_id in prop_oneof![2 => Just(None), 1 => Just(Some(String::new())), 1 => "[a-z0-9/-]{1,10}".prop_map(Some)],
        instance_type in "[a-z0-9.]{0,8}",
        zone in "[a-z0-9-]{0,8}",
        addresses in prop::collection::vec(address(), 0..4),
        labels in prop::collection::btree_map(label().prop_map(|(k, _)| k), label().prop_map(|(_, v)| v), 0..3),
        shutdown in any::<bool>(),
        metadata in prop::bool::weighted(0.8),
    ) -> InstanceModel {
        // The explicit id is completed with the provider name when the model is written.
        InstanceModel { name: String::new(), provider_id, instance_type, zone, addresses, labels, shutdown, metadata }
    }
}

prop_compose! {
    fn route()(target in "[a-z]{1,6}", v4 in any::<bool>(), bits in any::<u128>(), len in 0u8..=128, blackhole in any::<bool>()) -> RouteModel {
        let cidr = if v4 {
            IpNet::new(std::net::Ipv4Addr::from(bits as u32).into(), len % 33).unwrap()
        } else {
            IpNet::new(std::net::Ipv6Addr::from(bits).into(), len).unwrap()
        };
        RouteModel { target, cidr: cidr.trunc(), blackhole }
    }
}

prop_compose! {
    fn model()(
        provider_name in prop::option::of("[a-z][a-z0-9-]{0,8}"),
        instances in prop::collection::vec(instance(), 0..3),
        routes in prop::collection::vec(route(), 0..3),
        clusters in prop::collection::btree_set("[a-z][a-z0-9-]{0,8}", 0..3),
        latency in prop::collection::btree_map((1..Operation::ALL.len()).prop_map(|i| Operation::ALL[i].as_str()), (0u64..100_000).prop_map(Duration::from_millis), 0..3),
        default_latency in prop::option::of((0u64..10_000_000).prop_map(Duration::from_micros)),
    ) -> Model {
        // Distinct names and route CIDRs, as the inventory requires.
        let instances = instances.into_iter().enumerate().map(|(i, mut instance)| { instance.name = format!("node-{i}"); instance }).collect();
        let mut cidrs = BTreeSet::new();
        let routes = routes.into_iter().filter(|r| cidrs.insert(r.cidr)).collect();
        Model { provider_name, instances, routes, clusters: clusters.into_iter().collect(), latency, default_latency }
    }
}

impl Model {
    fn provider(&self) -> &str {
        self.provider_name.as_deref().unwrap_or("fake")
    }

    /// The providerID written for an instance: `None` absent, `Some("")`, or `<provider>://<id>`.
    fn written_id(&self, instance: &InstanceModel) -> Option<String> {
        instance.provider_id.as_ref().map(|id| {
            if id.is_empty() {
                String::new()
            } else {
                format!("{}://{}-{id}", self.provider(), instance.name)
            }
        })
    }

    /// The inventory document, as JSON (which is YAML).
    fn document(&self) -> String {
        let mut doc = serde_json::Map::new();
        if let Some(name) = &self.provider_name {
            doc.insert("providerName".into(), json!(name));
        }
        let instances: Vec<Value> = self
            .instances
            .iter()
            .map(|i| {
                let mut v = json!({
                    "name": i.name,
                    "instanceType": i.instance_type,
                    "zone": i.zone,
                    "addresses": i.addresses.iter().map(|(t, a)| json!({"type": t, "address": a})).collect::<Vec<_>>(),
                    "labels": i.labels,
                    "shutdown": i.shutdown,
                    "metadata": i.metadata,
                });
                if let Some(id) = self.written_id(i) {
                    v["providerID"] = json!(id);
                }
                v
            })
            .collect();
        doc.insert("instances".into(), json!(instances));
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|r| json!({"targetNode": r.target, "destinationCIDR": r.cidr.to_string(), "blackhole": r.blackhole}))
            .collect();
        doc.insert("routes".into(), json!(routes));
        doc.insert("clusters".into(), json!(self.clusters));
        let latency: BTreeMap<&str, String> = self
            .latency
            .iter()
            .map(|(op, d)| (*op, format_go_duration(*d)))
            .collect();
        doc.insert("latency".into(), json!(latency));
        if let Some(d) = self.default_latency {
            doc.insert("defaultLatency".into(), json!(format_go_duration(d)));
        }
        serde_json::to_string(&Value::Object(doc)).unwrap()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_inventories_read_back_and_build_the_cloud_they_describe(model in model()) {
        let text = model.document();
        let inventory = Inventory::from_yaml_str(&text, "inventory.yaml").map_err(|e| TestCaseError::fail(e.to_string()))?;

        prop_assert_eq!(inventory.provider_name.clone(), model.provider_name.clone());
        prop_assert_eq!(inventory.instances.len(), model.instances.len());
        for (spec, written) in inventory.instances.iter().zip(&model.instances) {
            prop_assert_eq!(&spec.name, &written.name);
            prop_assert_eq!(spec.provider_id.clone(), model.written_id(written));
            prop_assert_eq!(&spec.instance_type, &written.instance_type);
            prop_assert_eq!(&spec.zone, &written.zone);
            prop_assert_eq!(&spec.labels, &written.labels);
            prop_assert_eq!((spec.shutdown, spec.metadata), (written.shutdown, written.metadata));
            let addresses: Vec<(&str, &str)> = spec.addresses.iter().map(|a| (a.type_.as_str(), a.address.as_str())).collect();
            let expected: Vec<(&str, &str)> = written.addresses.iter().map(|(t, a)| (*t, a.as_str())).collect();
            prop_assert_eq!(addresses, expected);
        }
        prop_assert_eq!(inventory.routes.len(), model.routes.len());
        prop_assert_eq!(&inventory.clusters, &model.clusters);
        prop_assert_eq!(inventory.default_latency, model.default_latency);
        let latency: BTreeMap<&str, Duration> = inventory.latency.iter().map(|(k, v)| (k.as_str(), v.get())).collect();
        prop_assert_eq!(latency, model.latency.clone());

        // The cloud holds exactly the described instances (providerIDs resolved) and routes.
        let cloud = FakeCloud::from_inventory(inventory, "inventory.yaml").map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(cloud.name(), model.provider());
        prop_assert_eq!(cloud.instances().len(), model.instances.len());
        for written in &model.instances {
            let instance = cloud.instance(&written.name).unwrap();
            let expected_id = match model.written_id(written) {
                None => format!("{}://{}", model.provider(), written.name),
                Some(id) => id,
            };
            prop_assert_eq!(instance.provider_id.clone().unwrap_or_default(), expected_id);
            prop_assert_eq!(instance.shutdown, written.shutdown);
            prop_assert_eq!(instance.no_metadata, !written.metadata);
            prop_assert_eq!(&instance.labels, &written.labels);
            prop_assert_eq!(instance.addresses.len(), written.addresses.len());
        }
        let routes: BTreeSet<(String, String, bool)> =
            cloud.routes().into_iter().map(|r| (r.target_node, r.destination_cidr, r.blackhole)).collect();
        let expected: BTreeSet<(String, String, bool)> =
            model.routes.iter().map(|r| (r.target.clone(), r.cidr.to_string(), r.blackhole)).collect();
        prop_assert_eq!(routes, expected);
    }

    #[test]
    fn inventory_labels_follow_the_node_controllers_label_rules(key in prop_oneof![label().prop_map(|(k, _)| k), "[a-zA-Z0-9./_-]{0,12}"], value in prop_oneof![label().prop_map(|(_, v)| v), "[a-zA-Z0-9 ._-]{0,12}"]) {
        // A label the fake cloud accepts is one the cloud node controller applies, and the other way round.
        let text = json!({"instances": [{"name": "n", "labels": {key.clone(): value.clone()}}]}).to_string();
        let inventory = Inventory::from_yaml_str(&text, "inventory.yaml").map_err(|e| TestCaseError::fail(e.to_string()))?;
        let accepted = FakeCloud::from_inventory(inventory, "inventory.yaml").is_ok();
        prop_assert_eq!(accepted, ccm_nodecontroller::labels::validate_label(&key, &value).is_ok(), "{:?}={:?}", key, value);
    }
}
