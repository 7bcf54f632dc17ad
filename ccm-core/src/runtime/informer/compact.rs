//! How a [`Store`](super::Store) keeps its objects ([`Slot`]): whole, or, for the shared Node informer, as a
//! [`CompactNode`].
//!
//! A k8s-openapi `Node` is about 1.5 KB before any of its strings: every optional field of its metadata, spec and
//! status has room inline, and a Node the cache keeps fills few of them. Its labels are a `BTreeMap` of owned
//! strings, though every Node of a pool carries the same keys and most of the same values. A `CompactNode` keeps
//! exactly the fields a cached Node keeps ([`strip_node`](super::strip_node) lists them), in boxed strings and
//! slices, and shares label keys and values, address types and condition texts between Nodes. A Node is made
//! from it again for each read of the store.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;

use crate::helpers::{ConditionStatus, NodeFields};

mod sealed {
    pub trait Sealed {}
}

/// How a [`Store`](super::Store) keeps each object of kind `K`: as a shared `Arc<K>` (the default, for any kind),
/// or as a [`CompactNode`] (the shared Node informer's store). Sealed: the SDK defines the ways.
pub trait Slot<K>: sealed::Sealed + Send + Sync + 'static {
    /// What the store keeps of `object`; `previous` is what it kept under the same key, whose shared parts are
    /// reused where they are equal.
    fn pack(object: &Arc<K>, previous: Option<&Self>) -> Self;
    /// The object again.
    fn unpack(&self) -> Arc<K>;
    /// The object's `metadata.resourceVersion`.
    fn resource_version(&self) -> Option<&str>
    where
        K: Resource;
}

impl<K> sealed::Sealed for Arc<K> {}

impl<K: Send + Sync + 'static> Slot<K> for Arc<K> {
    fn pack(object: &Arc<K>, _previous: Option<&Self>) -> Self {
        object.clone()
    }
    fn unpack(&self) -> Arc<K> {
        self.clone()
    }
    fn resource_version(&self) -> Option<&str>
    where
        K: Resource,
    {
        self.meta().resource_version.as_deref()
    }
}

/// A string shared between the Nodes that carry it (a label key or value, an address type, a condition's type,
/// status, reason or message).
type Shared = Arc<str>;

/// Shared keys with their own values (annotations; addresses by type).
type Keyed = Box<[(Shared, Box<str>)]>;

/// A cached Node in little memory: what [`strip_node`](super::strip_node) keeps, with label keys and values,
/// address types and condition texts shared between Nodes. About a quarter of a cached `Node` for a small Node
/// with a dozen labels (docs/benchmarks.md, "Cached object size"). Read through the store, which makes a `Node`
/// of it ([`Slot::unpack`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactNode(Box<Parts>);

/// The parts of a [`CompactNode`], boxed so that a store's table holds a pointer per Node rather than the parts.
#[derive(Debug, Clone, PartialEq)]
struct Parts {
    name: Option<Box<str>>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<Box<[(Shared, Shared)]>>,
    annotations: Option<Keyed>,
    rare: Option<Box<RareMeta>>,
    spec: Option<Spec>,
    status: Option<Status>,
}

/// The metadata few cached Nodes have.
#[derive(Debug, Clone, PartialEq, Default)]
struct RareMeta {
    deletion_grace_period_seconds: Option<i64>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    self_link: Option<String>,
}

impl RareMeta {
    fn is_empty(&self) -> bool {
        *self == RareMeta::default()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Spec {
    provider_id: Option<Box<str>>,
    pod_cidr: Option<Box<str>>,
    pod_cidrs: Option<Box<[Box<str>]>>,
    taints: Option<Box<[Taint]>>,
    unschedulable: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
struct Status {
    addresses: Option<Keyed>,
    conditions: Option<Box<[Condition]>>,
    identity: Option<Box<Identity>>,
}

#[derive(Debug, Clone, PartialEq)]
struct Condition {
    type_: Shared,
    status: Shared,
    reason: Option<Shared>,
    message: Option<Shared>,
    last_heartbeat_time: Option<Time>,
    last_transition_time: Option<Time>,
}

/// The `nodeInfo` fields a cached Node keeps.
#[derive(Debug, Clone, PartialEq)]
struct Identity {
    architecture: Box<str>,
    boot_id: Box<str>,
    machine_id: Box<str>,
    operating_system: Box<str>,
    system_uuid: Box<str>,
}

impl sealed::Sealed for CompactNode {}

impl Slot<Node> for CompactNode {
    fn pack(node: &Arc<Node>, previous: Option<&Self>) -> Self {
        CompactNode::new(node, previous)
    }
    fn unpack(&self) -> Arc<Node> {
        Arc::new(self.to_node())
    }
    fn resource_version(&self) -> Option<&str> {
        self.0.resource_version.as_deref()
    }
}

impl NodeFields for CompactNode {
    fn name(&self) -> &str {
        self.0.name.as_deref().unwrap_or_default()
    }
    fn provider_id(&self) -> &str {
        self.0
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default()
    }
    fn taints(&self) -> &[Taint] {
        self.0
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default()
    }
    fn condition_status(&self, condition_type: &str) -> ConditionStatus {
        let status = self
            .0
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .and_then(|c| c.iter().find(|c| *c.type_ == *condition_type))
            .map(|c| &*c.status);
        ConditionStatus::parse(status)
    }
}

impl CompactNode {
    /// What a store keeps of `node`, sharing strings with `previous` (the same Node before) or else with the other
    /// Nodes.
    fn new(node: &Node, previous: Option<&CompactNode>) -> CompactNode {
        let meta = &node.metadata;
        let mut sharer = Sharer::new(previous);
        let rare = RareMeta {
            deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
            finalizers: meta.finalizers.clone(),
            generate_name: meta.generate_name.clone(),
            generation: meta.generation,
            namespace: meta.namespace.clone(),
            owner_references: meta.owner_references.clone(),
            self_link: meta.self_link.clone(),
        };
        CompactNode(Box::new(Parts {
            name: boxed(&meta.name),
            uid: boxed(&meta.uid),
            resource_version: boxed(&meta.resource_version),
            creation_timestamp: meta.creation_timestamp.clone(),
            deletion_timestamp: meta.deletion_timestamp.clone(),
            labels: meta.labels.as_ref().map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| (sharer.key(k), sharer.value(k, v)))
                    .collect()
            }),
            annotations: meta.annotations.as_ref().map(|annotations| {
                annotations
                    .iter()
                    .enumerate()
                    .map(|(i, (k, v))| {
                        let before = sharer.previous_annotation(i);
                        (sharer.text(before, k), Box::from(v.as_str()))
                    })
                    .collect()
            }),
            rare: (!rare.is_empty()).then(|| Box::new(rare)),
            spec: node.spec.as_ref().map(|spec| Spec {
                provider_id: boxed(&spec.provider_id),
                pod_cidr: boxed(&spec.pod_cidr),
                pod_cidrs: spec
                    .pod_cidrs
                    .as_ref()
                    .map(|cidrs| cidrs.iter().map(|c| Box::from(c.as_str())).collect()),
                taints: spec.taints.as_ref().map(|t| t.as_slice().into()),
                unschedulable: spec.unschedulable,
            }),
            status: node.status.as_ref().map(|status| Status {
                addresses: status.addresses.as_ref().map(|addresses| {
                    addresses
                        .iter()
                        .enumerate()
                        .map(|(i, a)| {
                            let before = sharer.previous_address(i);
                            (sharer.text(before, &a.type_), Box::from(a.address.as_str()))
                        })
                        .collect()
                }),
                conditions: status.conditions.as_ref().map(|conditions| {
                    conditions
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            let before = sharer.previous_condition(i);
                            Condition {
                                type_: sharer.text(before.map(|b| &b.type_), &c.type_),
                                status: sharer.text(before.map(|b| &b.status), &c.status),
                                reason: c.reason.as_deref().map(|r| {
                                    sharer.text(before.and_then(|b| b.reason.as_ref()), r)
                                }),
                                message: c.message.as_deref().map(|m| {
                                    sharer.text(before.and_then(|b| b.message.as_ref()), m)
                                }),
                                last_heartbeat_time: c.last_heartbeat_time.clone(),
                                last_transition_time: c.last_transition_time.clone(),
                            }
                        })
                        .collect()
                }),
                identity: status.node_info.as_ref().map(|info| {
                    Box::new(Identity {
                        architecture: info.architecture.as_str().into(),
                        boot_id: info.boot_id.as_str().into(),
                        machine_id: info.machine_id.as_str().into(),
                        operating_system: info.operating_system.as_str().into(),
                        system_uuid: info.system_uuid.as_str().into(),
                    })
                }),
            }),
        }))
    }

    /// The cached Node this holds.
    fn to_node(&self) -> Node {
        let parts = &*self.0;
        let rare = parts.rare.as_deref().cloned().unwrap_or_default();
        Node {
            metadata: ObjectMeta {
                annotations: parts.annotations.as_ref().map(|annotations| {
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>()
                }),
                creation_timestamp: parts.creation_timestamp.clone(),
                deletion_grace_period_seconds: rare.deletion_grace_period_seconds,
                deletion_timestamp: parts.deletion_timestamp.clone(),
                finalizers: rare.finalizers,
                generate_name: rare.generate_name,
                generation: rare.generation,
                labels: parts.labels.as_ref().map(|labels| {
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>()
                }),
                managed_fields: None,
                name: owned(&parts.name),
                namespace: rare.namespace,
                owner_references: rare.owner_references,
                resource_version: owned(&parts.resource_version),
                self_link: rare.self_link,
                uid: owned(&parts.uid),
            },
            spec: parts.spec.as_ref().map(|spec| NodeSpec {
                provider_id: owned(&spec.provider_id),
                pod_cidr: owned(&spec.pod_cidr),
                pod_cidrs: spec
                    .pod_cidrs
                    .as_ref()
                    .map(|cidrs| cidrs.iter().map(|c| c.to_string()).collect()),
                taints: spec.taints.as_ref().map(|t| t.to_vec()),
                unschedulable: spec.unschedulable,
                ..Default::default()
            }),
            status: parts.status.as_ref().map(|status| NodeStatus {
                addresses: status.addresses.as_ref().map(|addresses| {
                    addresses
                        .iter()
                        .map(|(type_, address)| NodeAddress {
                            type_: type_.to_string(),
                            address: address.to_string(),
                        })
                        .collect()
                }),
                conditions: status.conditions.as_ref().map(|conditions| {
                    conditions
                        .iter()
                        .map(|c| NodeCondition {
                            type_: c.type_.to_string(),
                            status: c.status.to_string(),
                            reason: c.reason.as_deref().map(str::to_string),
                            message: c.message.as_deref().map(str::to_string),
                            last_heartbeat_time: c.last_heartbeat_time.clone(),
                            last_transition_time: c.last_transition_time.clone(),
                        })
                        .collect()
                }),
                node_info: status.identity.as_deref().map(|id| NodeSystemInfo {
                    architecture: id.architecture.to_string(),
                    boot_id: id.boot_id.to_string(),
                    machine_id: id.machine_id.to_string(),
                    operating_system: id.operating_system.to_string(),
                    system_uuid: id.system_uuid.to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }
    }
}

fn boxed(value: &Option<String>) -> Option<Box<str>> {
    value.as_deref().map(Box::from)
}

fn owned(value: &Option<Box<str>>) -> Option<String> {
    value.as_deref().map(str::to_string)
}

/// Finds the shared copy of a string: in the Node's previous state first (a heartbeat changes a timestamp and
/// keeps every label, so no lookup is needed), then in the process-wide table.
struct Sharer<'a> {
    previous: Option<&'a CompactNode>,
}

impl<'a> Sharer<'a> {
    fn new(previous: Option<&'a CompactNode>) -> Self {
        Sharer { previous }
    }

    /// A label key.
    fn key(&mut self, key: &str) -> Shared {
        self.previous_label(key)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| share(key))
    }

    /// The value of label `key`.
    fn value(&mut self, key: &str, value: &str) -> Shared {
        match self.previous_label(key) {
            Some((_, v)) if **v == *value => v.clone(),
            _ => share(value),
        }
    }

    fn previous_label(&self, key: &str) -> Option<&'a (Shared, Shared)> {
        let labels = self.previous?.0.labels.as_deref()?;
        labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &labels[i])
    }

    /// Any other shared text (annotation keys, address types, condition texts): `before`, the text at the same
    /// place in the previous state, if it is equal; else the table's copy.
    fn text(&mut self, before: Option<&Shared>, text: &str) -> Shared {
        match before {
            Some(before) if **before == *text => before.clone(),
            _ => share(text),
        }
    }

    fn previous_annotation(&self, i: usize) -> Option<&'a Shared> {
        Some(&self.previous?.0.annotations.as_deref()?.get(i)?.0)
    }

    fn previous_address(&self, i: usize) -> Option<&'a Shared> {
        Some(
            &self
                .previous?
                .0
                .status
                .as_ref()?
                .addresses
                .as_deref()?
                .get(i)?
                .0,
        )
    }

    fn previous_condition(&self, i: usize) -> Option<&'a Condition> {
        self.previous?
            .0
            .status
            .as_ref()?
            .conditions
            .as_deref()?
            .get(i)
    }
}

/// The process-wide table of shared strings. An entry that only the table still holds is dropped when the table
/// has doubled since it was last swept, so the table stays within twice the strings in use.
struct Table {
    strings: HashSet<Shared>,
    sweep_at: usize,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// The table's size below which it is never swept.
const MIN_SWEEP: usize = 4096;

/// The shared copy of `text`.
fn share(text: &str) -> Shared {
    let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let table = guard.get_or_insert_with(|| Table {
        strings: HashSet::new(),
        sweep_at: MIN_SWEEP,
    });
    if let Some(shared) = table.strings.get(text) {
        return shared.clone();
    }
    if table.strings.len() >= table.sweep_at {
        table.strings.retain(|s| Arc::strong_count(s) > 1);
        table.sweep_at = (table.strings.len() * 2).max(MIN_SWEEP);
    }
    let shared: Shared = Arc::from(text);
    table.strings.insert(shared.clone());
    shared
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::informer::strip_node;
    use proptest::prelude::*;

    const NODE: &str = include_str!("../../../tests/fixtures/node.json");

    fn stripped_fixture() -> Node {
        let mut node: Node = serde_json::from_str(NODE).unwrap();
        strip_node(&mut node);
        node
    }

    fn round_trip(node: &Node, previous: Option<&CompactNode>) -> Node {
        CompactNode::new(node, previous).to_node()
    }

    #[test]
    fn a_cached_node_comes_back_as_it_was() {
        let node = stripped_fixture();
        assert_eq!(round_trip(&node, None), node);
        let compact = CompactNode::new(&node, None);
        assert_eq!(round_trip(&node, Some(&compact)), node);
    }

    #[test]
    fn empty_containers_stay_empty_and_absent_ones_absent() {
        // A JSON Patch planned from a cached Node tells `add /metadata/labels/x` from `add /metadata/labels`.
        let bare = Node::default();
        assert_eq!(round_trip(&bare, None), bare);
        let empty = Node {
            metadata: ObjectMeta {
                labels: Some(BTreeMap::new()),
                annotations: Some(BTreeMap::new()),
                finalizers: Some(vec![]),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(vec![]),
                pod_cidrs: Some(vec![]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![]),
                conditions: Some(vec![]),
                ..Default::default()
            }),
        };
        assert_eq!(round_trip(&empty, None), empty);
    }

    #[test]
    fn what_the_cache_does_not_keep_is_not_kept() {
        let mut whole: Node = serde_json::from_str(NODE).unwrap();
        let compact = CompactNode::new(&whole, None).to_node();
        assert_eq!(compact.metadata.managed_fields, None);
        assert_eq!(compact.status.as_ref().unwrap().images, None);
        // the fixture's last-applied annotation is fingerprinted when decoded, not here: compare the rest
        strip_node(&mut whole);
        let mut expected = whole;
        expected.metadata.annotations = compact.metadata.annotations.clone();
        assert_eq!(compact, expected);
    }

    #[test]
    fn nodes_share_label_strings() {
        let node = stripped_fixture();
        let a = CompactNode::new(&node, None);
        let b = CompactNode::new(&node, None);
        let (ka, va) = &a.0.labels.as_ref().unwrap()[0];
        let (kb, vb) = &b.0.labels.as_ref().unwrap()[0];
        assert!(Arc::ptr_eq(ka, kb));
        assert!(Arc::ptr_eq(va, vb));
        // and a Node's next state reuses its own
        let c = CompactNode::new(&node, Some(&a));
        assert!(Arc::ptr_eq(&c.0.labels.as_ref().unwrap()[0].1, va));
        let message = |n: &CompactNode| {
            n.0.status.as_ref().unwrap().conditions.as_ref().unwrap()[0]
                .message
                .clone()
        };
        assert!(Arc::ptr_eq(&message(&c).unwrap(), &message(&a).unwrap()));
    }

    #[test]
    fn a_changed_label_value_is_not_taken_from_the_previous_state() {
        let node = stripped_fixture();
        let before = CompactNode::new(&node, None);
        let mut changed = node.clone();
        let labels = changed.metadata.labels.as_mut().unwrap();
        let key = labels.keys().next().unwrap().clone();
        labels.insert(key, "another value".into());
        assert_eq!(round_trip(&changed, Some(&before)), changed);
    }

    #[test]
    fn the_table_drops_strings_no_node_holds() {
        let unique: Vec<String> = (0..MIN_SWEEP * 3)
            .map(|i| format!("compact-test-only-{i}"))
            .collect();
        for text in &unique {
            drop(share(text));
        }
        let guard = TABLE.lock().unwrap();
        let table = guard.as_ref().unwrap();
        assert!(
            table.strings.len() < MIN_SWEEP * 2 + 64,
            "{} strings kept",
            table.strings.len()
        );
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), "[a-z./-]{1,12}"]
    }

    fn opt<T: std::fmt::Debug + Clone>(
        s: impl Strategy<Value = T>,
    ) -> impl Strategy<Value = Option<T>> {
        proptest::option::of(s)
    }

    fn time() -> impl Strategy<Value = Time> {
        (0i64..4_000_000_000)
            .prop_map(|s| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap()))
    }

    fn any_node() -> impl Strategy<Value = Node> {
        let meta = (
            opt(text()),
            opt(text()),
            opt(text()),
            opt(proptest::collection::btree_map(text(), text(), 0..5)),
            opt(proptest::collection::btree_map(text(), text(), 0..3)),
            opt(time()),
            opt(proptest::collection::vec(text(), 0..2)),
            opt(any::<i64>()),
        )
            .prop_map(
                |(name, uid, rv, labels, annotations, created, finalizers, generation)| {
                    ObjectMeta {
                        name,
                        uid,
                        resource_version: rv,
                        labels,
                        annotations,
                        creation_timestamp: created.clone(),
                        deletion_timestamp: created,
                        finalizers,
                        generation,
                        ..Default::default()
                    }
                },
            );
        let taint = (text(), text(), opt(text()), opt(time())).prop_map(
            |(key, effect, value, time_added)| Taint {
                key,
                effect,
                value,
                time_added,
            },
        );
        let spec = (
            opt(text()),
            opt(text()),
            opt(proptest::collection::vec(text(), 0..3)),
            opt(proptest::collection::vec(taint, 0..3)),
            opt(any::<bool>()),
        )
            .prop_map(
                |(provider_id, pod_cidr, pod_cidrs, taints, unschedulable)| NodeSpec {
                    provider_id,
                    pod_cidr,
                    pod_cidrs,
                    taints,
                    unschedulable,
                    ..Default::default()
                },
            );
        let condition = (text(), text(), opt(text()), opt(text()), opt(time())).prop_map(
            |(type_, status, reason, message, time)| NodeCondition {
                type_,
                status,
                reason,
                message,
                last_heartbeat_time: time.clone(),
                last_transition_time: time,
            },
        );
        let address = (text(), text()).prop_map(|(type_, address)| NodeAddress { type_, address });
        let info =
            (text(), text(), text(), text(), text()).prop_map(|(a, b, m, o, s)| NodeSystemInfo {
                architecture: a,
                boot_id: b,
                machine_id: m,
                operating_system: o,
                system_uuid: s,
                ..Default::default()
            });
        let status = (
            opt(proptest::collection::vec(address, 0..3)),
            opt(proptest::collection::vec(condition, 0..4)),
            opt(info),
        )
            .prop_map(|(addresses, conditions, node_info)| NodeStatus {
                addresses,
                conditions,
                node_info,
                ..Default::default()
            });
        (meta, opt(spec), opt(status)).prop_map(|(metadata, spec, status)| Node {
            metadata,
            spec,
            status,
        })
    }

    proptest! {
        #[test]
        fn a_compact_node_reads_as_its_node(node in any_node(), condition in text()) {
            let compact = CompactNode::new(&node, None);
            prop_assert_eq!(NodeFields::name(&compact), NodeFields::name(&node));
            prop_assert_eq!(compact.provider_id(), node.provider_id());
            prop_assert_eq!(compact.taints(), node.taints());
            for type_ in [condition.as_str(), "Ready"] {
                prop_assert_eq!(compact.condition_status(type_), node.condition_status(type_));
            }
        }

        #[test]
        fn every_cached_node_comes_back_as_it_was(node in any_node(), before in any_node()) {
            prop_assert_eq!(&round_trip(&node, None), &node);
            let previous = CompactNode::new(&before, None);
            prop_assert_eq!(&round_trip(&node, Some(&previous)), &node);
        }
    }
}
