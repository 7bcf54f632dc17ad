//! What the shared informers keep of each Node and Service: everything a controller of the SDK reads, and nothing
//! large that none reads. The shape is defined once, by [`CachedNode`] and [`CachedService`], into which the
//! informers decode the API's JSON, skipping what is not kept while parsing (serde passes over an unknown field
//! without building it; only a Node spec's two small deprecated fields are built, then dropped); [`strip_node`] and
//! [`strip_service`] reduce an object already in memory by the same types.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Service, ServiceSpec,
    ServiceStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::{Deserialize, Deserializer};

use crate::names::annotations::LAST_APPLIED_CONFIGURATION;

/// How a cached `kubectl.kubernetes.io/last-applied-configuration` value starts: the informers replace the
/// applied JSON with `stripped, <length> bytes, fingerprint <16 hex digits>`.
pub const STRIPPED_VALUE_PREFIX: &str = "stripped, ";

/// Reduce a Node already in memory to what the shared cache holds (the informer decodes it so, as a
/// [`CachedNode`]: the `managedFields` of a heartbeating node, half its JSON, are never built), for tests and tools
/// that compare a cached Node with a whole one.
///
/// | part | kept | stripped |
/// |---|---|---|
/// | `metadata` | everything else: name, uid, resourceVersion, generation, creation and deletion timestamps, labels, annotations, finalizers, ownerReferences | `managedFields`; the value of `kubectl.kubernetes.io/last-applied-configuration` becomes a short fingerprint (see below) |
/// | `spec` | `providerID`, `taints`, `podCIDR`, `podCIDRs`, `unschedulable` | `configSource`, `externalID` (both deprecated) |
/// | `status` | `addresses`, `conditions` (whole, every type), `nodeInfo.systemUUID`, `.machineID`, `.bootID`, `.operatingSystem`, `.architecture` | `images`, `volumesInUse`, `volumesAttached`, `capacity`, `allocatable`, `daemonEndpoints`, `config`, `runtimeHandlers`, `features`, `declaredFeatures`, `phase`, and the rest of `nodeInfo` (`kubeletVersion`, `kubeProxyVersion`, `kernelVersion`, `osImage`, `containerRuntimeVersion`, `swap`) |
///
/// What reads the kept fields: the cloud node controller (taints, providerID, labels, the
/// `alpha.kubernetes.io/provided-node-ip` annotation, addresses, resourceVersion for its guarded patches and its
/// stale-cache check, creationTimestamp for its metrics), the lifecycle controller (providerID, taints, the Ready
/// condition, uid as the delete precondition), the service controller (labels, taints, providerID,
/// deletionTimestamp), the route controller (podCIDR(s), addresses, uid, resourceVersion, the NetworkUnavailable
/// condition), the instance cache's invalidator (providerID, the Ready condition), the bootstrap self-check
/// (taints, creationTimestamp) and the provider, which gets cached Nodes in its InstancesV2 and LoadBalancer calls
/// (name, providerID, addresses, labels; `unschedulable` and the `nodeInfo` identity fields are kept for
/// providers that find an instance by its system UUID or treat cordoned nodes or one platform specially).
///
/// The container-level `Option`s are never emptied: a Node that had a `spec` or `status` keeps one, and a map
/// that had annotations keeps it, so a JSON Patch planned from a cached Node (`add /status/addresses` rather
/// than `add /status`) never replaces a whole object on the server. A controller that needs a stripped field
/// reads the Node from the API; and no controller may write a cached Node back whole (update or apply), since
/// that would erase what the cache left out: patch the fields you own.
///
/// `kubectl.kubernetes.io/last-applied-configuration` is a copy of the applied object and can be as large as the
/// object itself. It is kept as `stripped, <length> bytes, fingerprint <hash>`, so a change of the annotation is
/// still a change (Go's service controller syncs a Service on any annotation change; the fingerprint keeps that
/// decision identical) while the JSON is gone. Stripping twice changes nothing.
///
/// ```
/// use ccm_core::runtime::informer::strip_node;
/// use k8s_openapi::api::core::v1::{ContainerImage, Node, NodeAddress, NodeStatus};
///
/// let mut node = Node {
///     status: Some(NodeStatus {
///         addresses: Some(vec![NodeAddress { type_: "InternalIP".into(), address: "10.0.0.1".into() }]),
///         images: Some(vec![ContainerImage { names: Some(vec!["registry.example/app:1".into()]), size_bytes: Some(1) }]),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// strip_node(&mut node);
/// let status = node.status.unwrap();
/// assert_eq!(status.addresses.unwrap()[0].address, "10.0.0.1");
/// assert_eq!(status.images, None);
/// ```
pub fn strip_node(node: &mut Node) {
    *node = reduce::<CachedNode, _>(node);
}

/// Reduce a Service to what the shared cache holds: everything but `metadata.managedFields`, with the value of
/// `kubectl.kubernetes.io/last-applied-configuration` replaced by its fingerprint (as [`strip_node`] does).
///
/// The spec, status, labels, the other annotations and the finalizers all stay: the service controller compares
/// most of them (Go's `needsUpdate`), and the provider gets the cached Service in every LoadBalancer call and may
/// read any of its own annotations.
pub fn strip_service(service: &mut Service) {
    *service = reduce::<CachedService, _>(service);
}

/// `object` decoded as the cache decodes it. Serializing a k8s-openapi object gives JSON of its own schema, which
/// the cached shapes read without fail (they require nothing); should that ever fail, the object is only cleared of
/// its managed fields rather than lost.
fn reduce<C, K>(object: &K) -> K
where
    C: for<'de> Deserialize<'de> + Into<K>,
    K: serde::Serialize + Clone + Resource,
{
    match serde_json::to_value(object).and_then(serde_json::from_value::<C>) {
        Ok(cached) => cached.into(),
        Err(err) => {
            tracing::error!(error = %err, "could not reduce an object to its cached shape; dropping its managed fields only");
            let mut copy = object.clone();
            copy.meta_mut().managed_fields = None;
            copy
        }
    }
}

/// A Node as the shared cache holds it ([`strip_node`] lists the fields), decoded straight from the API's JSON:
/// what the Node informer lists and watches.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedNode(pub Node);

/// A Service as the shared cache holds it ([`strip_service`]), decoded straight from the API's JSON.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedService(pub Service);

/// The API metadata of the cached shapes: every field of `ObjectMeta` but `managedFields`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<WireMeta> for ObjectMeta {
    fn from(wire: WireMeta) -> ObjectMeta {
        let mut annotations = wire.annotations;
        if let Some(value) = annotations
            .as_mut()
            .and_then(|a| a.get_mut(LAST_APPLIED_CONFIGURATION))
            && !value.starts_with(STRIPPED_VALUE_PREFIX)
        {
            *value = fingerprint(value);
        }
        ObjectMeta {
            annotations,
            creation_timestamp: wire.creation_timestamp,
            deletion_grace_period_seconds: wire.deletion_grace_period_seconds,
            deletion_timestamp: wire.deletion_timestamp,
            finalizers: wire.finalizers,
            generate_name: wire.generate_name,
            generation: wire.generation,
            labels: wire.labels,
            managed_fields: None,
            name: wire.name,
            namespace: wire.namespace,
            owner_references: wire.owner_references,
            resource_version: wire.resource_version,
            self_link: wire.self_link,
            uid: wire.uid,
        }
    }
}

#[derive(Deserialize)]
struct WireNodeStatus {
    addresses: Option<Vec<NodeAddress>>,
    conditions: Option<Vec<NodeCondition>>,
    #[serde(rename = "nodeInfo")]
    node_info: Option<WireNodeInfo>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WireNodeInfo {
    architecture: String,
    #[serde(rename = "bootID")]
    boot_id: String,
    #[serde(rename = "machineID")]
    machine_id: String,
    operating_system: String,
    #[serde(rename = "systemUUID")]
    system_uuid: String,
}

#[derive(Deserialize)]
struct WireNode {
    #[serde(default)]
    metadata: Option<WireMeta>,
    spec: Option<NodeSpec>,
    status: Option<WireNodeStatus>,
}

#[derive(Deserialize)]
struct WireService {
    #[serde(default)]
    metadata: Option<WireMeta>,
    spec: Option<ServiceSpec>,
    status: Option<ServiceStatus>,
}

impl<'de> Deserialize<'de> for CachedNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireNode::deserialize(deserializer)?;
        Ok(CachedNode(Node {
            metadata: wire.metadata.map(ObjectMeta::from).unwrap_or_default(),
            spec: wire.spec.map(|spec| NodeSpec {
                config_source: None,
                external_id: None,
                taints: spec.taints.map(exact),
                ..spec
            }),
            status: wire.status.map(|status| NodeStatus {
                addresses: status.addresses.map(exact),
                conditions: status.conditions.map(exact),
                node_info: status.node_info.map(|info| NodeSystemInfo {
                    architecture: info.architecture,
                    boot_id: info.boot_id,
                    machine_id: info.machine_id,
                    operating_system: info.operating_system,
                    system_uuid: info.system_uuid,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }))
    }
}

/// A decoded list without the spare capacity its growth left (five conditions take room for eight): the cache
/// keeps every Node for the process's life, so the spare room would be a third of what its lists cost.
fn exact<T>(mut list: Vec<T>) -> Vec<T> {
    list.shrink_to_fit();
    list
}

impl<'de> Deserialize<'de> for CachedService {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireService::deserialize(deserializer)?;
        Ok(CachedService(Service {
            metadata: wire.metadata.map(ObjectMeta::from).unwrap_or_default(),
            spec: wire.spec,
            status: wire.status,
        }))
    }
}

/// The cached shapes are watched under their kinds' names (the API is that of `Node` and `Service`), and convert
/// into the objects they wrap.
macro_rules! resource_as {
    ($cached:ident, $kind:ty) => {
        impl From<$cached> for $kind {
            fn from(cached: $cached) -> $kind {
                cached.0
            }
        }

        impl Resource for $cached {
            type DynamicType = ();
            type Scope = <$kind as Resource>::Scope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as Resource>::kind(dt)
            }
            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as Resource>::group(dt)
            }
            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as Resource>::version(dt)
            }
            fn api_version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as Resource>::api_version(dt)
            }
            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as Resource>::plural(dt)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.0.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.0.metadata
            }
        }
    };
}

resource_as!(CachedNode, Node);
resource_as!(CachedService, Service);

/// `stripped, <length> bytes, fingerprint <hash>`: equal for equal values and, but for a 64-bit hash collision,
/// different for different ones (the hash only has to agree within one process: the cache is never persisted).
fn fingerprint(value: &str) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    format!(
        "{STRIPPED_VALUE_PREFIX}{} bytes, fingerprint {:016x}",
        value.len(),
        hasher.finish()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers;
    use crate::names;
    use serde_json::{Value, json};

    const NODE: &str = include_str!("../../../tests/fixtures/node.json");
    const SERVICE: &str = include_str!("../../../tests/fixtures/service.json");

    fn node() -> Node {
        serde_json::from_str(NODE).unwrap()
    }

    fn service() -> Service {
        serde_json::from_str(SERVICE).unwrap()
    }

    fn stripped<T: Clone>(object: &T, strip: fn(&mut T)) -> T {
        let mut copy = object.clone();
        strip(&mut copy);
        copy
    }

    fn keys(value: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    fn last_applied(meta: &ObjectMeta) -> Option<&str> {
        meta.annotations
            .as_ref()?
            .get(LAST_APPLIED_CONFIGURATION)
            .map(String::as_str)
    }

    #[test]
    fn a_realistic_node_keeps_exactly_the_kept_fields() {
        let original = node();
        let before = serde_json::to_value(&original).unwrap();
        let after = serde_json::to_value(stripped(&original, strip_node)).unwrap();

        assert_eq!(
            keys(&after),
            ["apiVersion", "kind", "metadata", "spec", "status"]
        );
        assert_eq!(
            keys(&after["metadata"]),
            [
                "annotations",
                "creationTimestamp",
                "labels",
                "name",
                "resourceVersion",
                "uid"
            ]
        );
        for field in [
            "creationTimestamp",
            "labels",
            "name",
            "resourceVersion",
            "uid",
        ] {
            assert_eq!(
                after["metadata"][field], before["metadata"][field],
                "{field}"
            );
        }
        assert_eq!(after["spec"], before["spec"]);
        assert_eq!(
            keys(&after["status"]),
            ["addresses", "conditions", "nodeInfo"]
        );
        assert_eq!(after["status"]["addresses"], before["status"]["addresses"]);
        assert_eq!(
            after["status"]["conditions"],
            before["status"]["conditions"]
        );
        assert_eq!(
            after["status"]["nodeInfo"],
            json!({
                "architecture": "amd64",
                "bootID": "6f1d2c3b-4a59-4e8d-9c7b-1a2b3c4d5e6f",
                "containerRuntimeVersion": "",
                "kernelVersion": "",
                "kubeProxyVersion": "",
                "kubeletVersion": "",
                "machineID": "ec2a9d3c1f7e4b5d8a6c0e2f4b1d3a5c",
                "operatingSystem": "linux",
                "osImage": "",
                "systemUUID": "ec2a9d3c-1f7e-4b5d-8a6c-0e2f4b1d3a5c",
            })
        );

        // every annotation but last-applied is untouched; last-applied is a fingerprint
        let mut annotations = before["metadata"]["annotations"].clone();
        let applied = annotations[LAST_APPLIED_CONFIGURATION]
            .as_str()
            .unwrap()
            .to_owned();
        annotations[LAST_APPLIED_CONFIGURATION] = Value::String(fingerprint(&applied));
        assert_eq!(after["metadata"]["annotations"], annotations);
        let kept = after["metadata"]["annotations"][LAST_APPLIED_CONFIGURATION]
            .as_str()
            .unwrap();
        assert!(kept.starts_with(&format!(
            "{STRIPPED_VALUE_PREFIX}{} bytes, fingerprint ",
            applied.len()
        )));
        assert!(kept.len() < 60, "{kept}");

        // what was there and is gone
        assert!(
            before["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len()
                > 5
        );
        assert_eq!(before["status"]["images"].as_array().unwrap().len(), 50);
        for gone in [
            "allocatable",
            "capacity",
            "config",
            "daemonEndpoints",
            "features",
            "images",
            "runtimeHandlers",
            "volumesAttached",
            "volumesInUse",
        ] {
            assert!(
                before["status"].get(gone).is_some(),
                "the fixture has {gone}"
            );
        }

        let (full, small) = (before.to_string().len(), after.to_string().len());
        assert!(small * 5 < full, "{full} bytes stripped to {small}");
    }

    #[test]
    fn the_informers_decode_the_same_shape_from_the_wire() {
        // straight from the API's JSON, as the informers decode a list or a watch event
        let from_wire: CachedNode = serde_json::from_str(NODE).unwrap();
        assert_eq!(from_wire.0, stripped(&node(), strip_node));
        let from_wire: CachedService = serde_json::from_str(SERVICE).unwrap();
        assert_eq!(from_wire.0, stripped(&service(), strip_service));

        let line = format!(r#"{{"type":"MODIFIED","object":{NODE}}}"#);
        let event: kube::core::WatchEvent<CachedNode> = serde_json::from_str(&line).unwrap();
        let kube::core::WatchEvent::Modified(cached) = event else {
            panic!("a MODIFIED event");
        };
        assert_eq!(
            cached.meta().name.as_deref(),
            node().metadata.name.as_deref()
        );
        assert_eq!(cached.0.metadata.managed_fields, None);
        assert_eq!(<CachedNode as Resource>::plural(&()), "nodes");
        assert_eq!(<CachedService as Resource>::kind(&()), "Service");
    }

    #[test]
    fn decoded_lists_hold_no_spare_room() {
        let mut wire: Value = serde_json::from_str(NODE).unwrap();
        wire["spec"]["taints"] =
            json!([{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]);
        let CachedNode(node) = serde_json::from_value(wire).unwrap();
        let (spec, status) = (node.spec.unwrap(), node.status.unwrap());
        let lists = [
            ("taints", spec.taints.map(|l| (l.len(), l.capacity()))),
            (
                "addresses",
                status.addresses.map(|l| (l.len(), l.capacity())),
            ),
            (
                "conditions",
                status.conditions.map(|l| (l.len(), l.capacity())),
            ),
        ];
        for (name, list) in lists {
            let (len, capacity) = list.unwrap_or_else(|| panic!("the fixture has {name}"));
            assert!(len > 1, "{name}: the fixture has several");
            assert_eq!(capacity, len, "{name}");
        }
    }

    #[test]
    fn odd_but_valid_json_decodes_without_loss_of_what_is_kept() {
        // nulls, missing nodeInfo fields and no metadata at all
        let cached: CachedNode = serde_json::from_value(json!({
            "spec": {"providerID": null, "taints": null},
            "status": {"nodeInfo": {"systemUUID": "u"}, "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}
        }))
        .unwrap();
        assert_eq!(cached.0.metadata, ObjectMeta::default());
        assert_eq!(cached.0.spec, Some(NodeSpec::default()));
        let status = cached.0.status.unwrap();
        assert_eq!(status.node_info.unwrap().system_uuid, "u");
        assert_eq!(status.addresses.unwrap()[0].address, "10.0.0.1");
        // a wrong type in a kept field is an error, as it is for the whole object
        assert!(serde_json::from_value::<CachedNode>(json!({"spec": {"taints": "x"}})).is_err());
    }

    #[test]
    fn every_unkept_spec_and_status_field_goes() {
        let mut node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "spec": {"externalID": "i-1", "configSource": {"configMap": {"name": "c", "namespace": "kube-system", "kubeletConfigKey": "k"}}, "unschedulable": true},
            "status": {"phase": "Running", "declaredFeatures": ["A"], "nodeInfo": {
                "architecture": "arm64", "bootID": "b", "containerRuntimeVersion": "c", "kernelVersion": "k",
                "kubeProxyVersion": "p", "kubeletVersion": "v", "machineID": "m", "operatingSystem": "linux",
                "osImage": "o", "systemUUID": "u", "swap": {"capacity": 1}}}
        }))
        .unwrap();
        strip_node(&mut node);
        assert_eq!(
            serde_json::to_value(&node).unwrap(),
            json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n"},
                "spec": {"unschedulable": true},
                "status": {"nodeInfo": {
                    "architecture": "arm64", "bootID": "b", "containerRuntimeVersion": "", "kernelVersion": "",
                    "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "m", "operatingSystem": "linux",
                    "osImage": "", "systemUUID": "u"}}
            })
        );
    }

    #[test]
    fn empty_parts_stay_present_and_absent_ones_absent() {
        let mut bare = Node::default();
        strip_node(&mut bare);
        assert_eq!(bare, Node::default());

        // `status: {}` stays `Some`: a patch planned from the cache adds `/status/addresses`, never `/status`
        let mut empty: Node = serde_json::from_value(
            json!({"metadata": {"annotations": {}}, "spec": {}, "status": {"images": []}}),
        )
        .unwrap();
        strip_node(&mut empty);
        assert_eq!(empty.spec, Some(NodeSpec::default()));
        assert_eq!(empty.status, Some(NodeStatus::default()));
        assert_eq!(empty.metadata.annotations, Some(Default::default()));
    }

    #[test]
    fn stripping_is_idempotent() {
        let once = stripped(&node(), strip_node);
        assert_eq!(stripped(&once, strip_node), once);
        let once = stripped(&service(), strip_service);
        assert_eq!(stripped(&once, strip_service), once);
    }

    #[test]
    fn last_applied_fingerprints_tell_changes_apart() {
        let a = fingerprint("{\"a\":1}\n");
        assert_eq!(a, fingerprint("{\"a\":1}\n"));
        assert_ne!(a, fingerprint("{\"a\":2}\n"));
        assert!(a.starts_with(STRIPPED_VALUE_PREFIX));

        let mut changed = node();
        changed
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(LAST_APPLIED_CONFIGURATION.into(), "{}\n".into());
        assert_ne!(
            last_applied(&stripped(&node(), strip_node).metadata),
            last_applied(&stripped(&changed, strip_node).metadata)
        );
        let mut none = node();
        none.metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(LAST_APPLIED_CONFIGURATION);
        assert_eq!(last_applied(&stripped(&none, strip_node).metadata), None);
    }

    #[test]
    fn a_realistic_service_loses_only_managed_fields_and_the_applied_json() {
        let original = service();
        let after = stripped(&original, strip_service);
        assert!(original.metadata.managed_fields.is_some());
        assert_eq!(after.metadata.managed_fields, None);
        assert_eq!(
            last_applied(&after.metadata),
            Some(fingerprint(last_applied(&original.metadata).unwrap()).as_str())
        );
        let mut expected = original.clone();
        expected.metadata.managed_fields = None;
        expected.metadata.annotations.as_mut().unwrap().insert(
            LAST_APPLIED_CONFIGURATION.into(),
            last_applied(&after.metadata).unwrap().into(),
        );
        assert_eq!(after, expected);
    }

    #[test]
    fn the_core_helpers_answer_the_same_on_stripped_objects() {
        let original = node();
        let mut variants = vec![original.clone()];
        let mut tainted = original.clone();
        tainted.spec.as_mut().unwrap().taints = Some(vec![k8s_openapi::api::core::v1::Taint {
            key: names::taints::UNINITIALIZED.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        variants.push(tainted);
        let mut not_ready = original.clone();
        for c in not_ready
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
        {
            if c.type_ == names::conditions::READY {
                c.status = "Unknown".into();
            }
        }
        variants.push(not_ready);
        for node in variants {
            let small = stripped(&node, strip_node);
            assert_eq!(helpers::node_name(&small), helpers::node_name(&node));
            assert_eq!(
                helpers::node_provider_id(&small),
                helpers::node_provider_id(&node)
            );
            for taint in [names::taints::UNINITIALIZED, names::taints::SHUTDOWN] {
                assert_eq!(
                    helpers::node_has_taint(&small, taint),
                    helpers::node_has_taint(&node, taint)
                );
            }
            for condition in [
                names::conditions::READY,
                names::conditions::NETWORK_UNAVAILABLE,
            ] {
                assert_eq!(
                    helpers::node_condition_status(&small, condition),
                    helpers::node_condition_status(&node, condition)
                );
            }
        }

        let svc = service();
        let small = stripped(&svc, strip_service);
        assert_eq!(
            helpers::default_load_balancer_name(&small),
            helpers::default_load_balancer_name(&svc)
        );
        assert_eq!(helpers::service_key(&small), helpers::service_key(&svc));
        assert_eq!(
            helpers::load_balancer_source_ranges(&small),
            helpers::load_balancer_source_ranges(&svc)
        );
        assert_eq!(
            helpers::has_load_balancer_finalizer(&small),
            helpers::has_load_balancer_finalizer(&svc)
        );
        assert_eq!(
            helpers::needs_health_check(&small),
            helpers::needs_health_check(&svc)
        );
        assert_eq!(
            helpers::service_health_check_path_port(&small),
            helpers::service_health_check_path_port(&svc)
        );
        assert_eq!(
            helpers::requests_only_local_traffic(&small),
            helpers::requests_only_local_traffic(&svc)
        );
    }
}
