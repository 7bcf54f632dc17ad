//! What initializing a node writes, computed purely from the node and the cloud's metadata.
//!
//! ```
//! use ccm_core::{names, InstanceMetadata};
//! use ccm_nodecontroller::plan::plan_initialization;
//! use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
//!
//! let node = Node {
//!     spec: Some(NodeSpec {
//!         taints: Some(vec![Taint { key: names::taints::UNINITIALIZED.into(), effect: "NoSchedule".into(), ..Default::default() }]),
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let plan = plan_initialization(&node, &InstanceMetadata::new("fake://n1").with_zone("z1")).unwrap();
//! assert_eq!(plan.provider_id.as_deref(), Some("fake://n1"));
//! assert!(!plan.spec_ops.is_empty());
//! ```

use std::collections::BTreeMap;

use ccm_core::helpers::{NodeFields, node_has_taint, node_name, node_provider_id};
use ccm_core::runtime::informer::InformerEvent;
use ccm_core::{InstanceMetadata, names};
use json_patch::PatchOperation;
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::addresses::{self, AddressUpdate, NodeIpError};
use crate::error::Error;
use crate::labels::{self, DiscardedLabel, LabelPlan};
use crate::patch::{self, Step, Target};

/// Whether an update of a cached node (`old` → `new`) is worth queueing: the node is (or was) tainted
/// uninitialized, or its labels changed (all a sync of an initialized node reads, for the beta → GA copy). Other
/// updates (a kubelet's status heartbeat, a condition refresh, a new pod CIDR) would only wake a worker to find
/// nothing to do. Go queues every update; adds, resyncs and retries still queue the node regardless.
///
/// ```
/// use ccm_nodecontroller::plan::worth_syncing;
/// use k8s_openapi::api::core::v1::Node;
///
/// let old = Node::default();
/// let mut heartbeat = old.clone();
/// heartbeat.metadata.resource_version = Some("2".into());
/// assert!(!worth_syncing(&old, &heartbeat));
/// let mut relabelled = old.clone();
/// relabelled.metadata.labels = Some([("failure-domain.beta.kubernetes.io/zone".to_string(), "z1".to_string())].into());
/// assert!(worth_syncing(&old, &relabelled));
/// ```
pub fn worth_syncing(old: &Node, new: &Node) -> bool {
    let tainted = |node: &Node| node_has_taint(node, names::taints::UNINITIALIZED);
    tainted(new) || tainted(old) || old.metadata.labels != new.metadata.labels
}

/// The key a Node event queues for the cloud node controller: the name of an added Node, or of an updated one
/// that is [`worth_syncing`]; deletions and resyncs queue nothing.
pub(crate) fn node_event_key(event: &InformerEvent<Node>) -> Option<String> {
    match event {
        InformerEvent::Added(node) => Some(node_name(node).to_owned()),
        InformerEvent::Updated { old, new } => {
            worth_syncing(old, new).then(|| node_name(new).to_owned())
        }
        InformerEvent::Deleted(_) | InformerEvent::Resync => None,
    }
}

/// The write that brings an initialized node's addresses in line with the cloud's (the periodic address sync):
/// the status patch, none (still uninitialized, unchanged, or no cloud addresses), or the node-IP error.
pub(crate) fn address_step(current: &Node, cloud_addresses: &[NodeAddress]) -> Step {
    if node_has_taint(current, names::taints::UNINITIALIZED) {
        return Ok(None);
    }
    match addresses::plan_address_update(current, cloud_addresses) {
        Ok(AddressUpdate::Replace(list)) => {
            Ok(Some((Target::Status, patch::address_ops(current, &list))))
        }
        Ok(AddressUpdate::Unchanged | AddressUpdate::NoCloudAddresses) => Ok(None),
        Err(source) => Err(Error::InvalidNodeIp {
            node: node_name(current).to_owned(),
            source,
        }),
    }
}

/// One step of a node's initialization: the next write, and the provider's additional labels that are dropped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InitStep {
    /// The next guarded patch; `None` when the node is initialized.
    pub write: Option<(Target, Vec<PatchOperation>)>,
    /// The additional labels dropped (for the log).
    pub discarded: Vec<DiscardedLabel>,
}

/// The next write of a node's initialization, given the writes already made (`written`): nothing once the
/// uninitialized taint is gone (someone else initialized it meanwhile, or our last write did); else the
/// addresses first (status), so the node is never schedulable with only the kubelet's addresses, then labels,
/// providerID and taint removal (spec). An invalid provided node IP is [`Error::InvalidNodeIp`].
pub(crate) fn initialization_step(
    current: &Node,
    meta: &InstanceMetadata,
    written: &[Target],
) -> Result<InitStep, Error> {
    if !node_has_taint(current, names::taints::UNINITIALIZED) {
        return Ok(InitStep {
            write: None,
            discarded: Vec::new(),
        });
    }
    let plan = plan_initialization(current, meta).map_err(|source| Error::InvalidNodeIp {
        node: node_name(current).to_owned(),
        source,
    })?;
    let write = if !plan.status_ops.is_empty() && !written.contains(&Target::Status) {
        (Target::Status, plan.status_ops)
    } else {
        (Target::Spec, plan.spec_ops)
    };
    Ok(InitStep {
        write: Some(write),
        discarded: plan.labels.discarded,
    })
}

/// The Warning Event reason of a failed initialization the user must act on ([`crate::reasons`]), if it is one.
pub(crate) fn warning_reason(err: &Error) -> Option<&'static str> {
    match err {
        Error::MissingProviderId { .. } => Some(crate::reasons::MISSING_PROVIDER_ID),
        Error::InvalidNodeIp { .. } => Some(crate::reasons::INVALID_NODE_IP),
        _ => None,
    }
}

/// Go `reconcileNodeLabels`: the GA topology labels to set from their beta names (no cloud call); `None` when
/// there is nothing to copy.
pub(crate) fn ga_labels(node: &Node) -> Option<BTreeMap<String, String>> {
    let set = labels::reconcile_beta_to_ga(node.metadata.labels.as_ref()?);
    (!set.is_empty()).then_some(set)
}

/// Whether the periodic address sync refreshes `node`: it is initialized already.
pub(crate) fn is_initialized(node: &impl NodeFields) -> bool {
    !node.has_taint(names::taints::UNINITIALIZED)
}

/// Everything initialization writes for one node.
#[derive(Debug, Clone, PartialEq)]
pub struct InitPlan {
    /// The providerID to set (the node has none and the cloud gave one).
    pub provider_id: Option<String>,
    /// The labels to set, and the additional labels dropped.
    pub labels: LabelPlan,
    /// The new `status.addresses`, if they change.
    pub addresses: AddressUpdate,
    /// ONE JSON Patch for metadata and spec: the labels, the providerID, and the removal of the uninitialized
    /// taint (guarded by a `test` of the current taint list).
    pub spec_ops: Vec<PatchOperation>,
    /// ONE JSON Patch for the status subresource replacing the addresses (guarded); empty when they do not change.
    pub status_ops: Vec<PatchOperation>,
}

/// Plan the initialization of `node` with `meta` (Go: `getNodeModifiersFromCloudProvider` plus
/// `updateNodeAddress`):
///
/// 1. the provided-node-ip annotation, if any, must parse and match one of the cloud's addresses, otherwise the
///    node stays tainted ([`NodeIpError`]);
/// 2. `spec.providerID` is set only if it is empty and the cloud gave one;
/// 3. the cloud labels ([`labels::plan_cloud_labels`]);
/// 4. every taint with the uninitialized key is removed, other taints are kept;
/// 5. the addresses as the periodic sync would set them ([`addresses::plan_address_update`]).
pub fn plan_initialization(node: &Node, meta: &InstanceMetadata) -> Result<InitPlan, NodeIpError> {
    if let Some(annotation) = addresses::provided_node_ip(node) {
        addresses::addresses_from_node_ip(annotation, &meta.node_addresses)?;
    }
    let provider_id = (node_provider_id(node).is_empty() && !meta.provider_id.is_empty())
        .then(|| meta.provider_id.clone());
    let current_labels = node.metadata.labels.clone().unwrap_or_default();
    let labels = labels::plan_cloud_labels(&current_labels, meta);

    let mut spec_ops = patch::taint_ops(
        node,
        patch::without_taint(node, names::taints::UNINITIALIZED),
    );
    spec_ops.extend(patch::label_ops(node, &labels.set));
    if let Some(id) = &provider_id {
        spec_ops.push(patch::provider_id_op(node, id));
    }

    let addresses = addresses::plan_address_update(node, &meta.node_addresses)?;
    let status_ops = match &addresses {
        AddressUpdate::Replace(list) => patch::address_ops(node, list),
        AddressUpdate::NoCloudAddresses | AddressUpdate::Unchanged => Vec::new(),
    };
    Ok(InitPlan {
        provider_id,
        labels,
        addresses,
        spec_ops,
        status_ops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::tests::{apply, taint};
    use crate::patch::{NO_SCHEDULE, taints};
    use ccm_core::names::labels as l;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};
    use std::collections::BTreeMap;

    fn a(t: &str, v: &str) -> NodeAddress {
        NodeAddress {
            type_: t.into(),
            address: v.into(),
        }
    }

    fn uninit() -> k8s_openapi::api::core::v1::Taint {
        taint(names::taints::UNINITIALIZED, Some("true"), NO_SCHEDULE)
    }

    #[test]
    fn only_updates_that_change_what_a_sync_reads_are_worth_syncing() {
        let labelled = |labels: &[(&str, &str)]| Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        let with_taints = |mut node: Node, taints: Vec<k8s_openapi::api::core::v1::Taint>| {
            node.spec = Some(NodeSpec {
                taints: Some(taints),
                ..Default::default()
            });
            node
        };
        let initialized = labelled(&[(l::TOPOLOGY_ZONE, "z1")]);
        // a heartbeat: status and resourceVersion change, nothing the controller reads
        let mut heartbeat = initialized.clone();
        heartbeat.metadata.resource_version = Some("7".into());
        heartbeat.status = Some(NodeStatus {
            addresses: Some(vec![a("InternalIP", "10.0.0.9")]),
            ..Default::default()
        });
        assert!(!worth_syncing(&initialized, &heartbeat));
        // another taint comes and goes: still nothing to do for an initialized node
        let cordoned = with_taints(
            initialized.clone(),
            vec![taint("node.kubernetes.io/unschedulable", None, NO_SCHEDULE)],
        );
        assert!(!worth_syncing(&initialized, &cordoned));
        // labels changed (a beta label may need its GA copy), added or removed
        assert!(worth_syncing(
            &initialized,
            &labelled(&[(l::TOPOLOGY_ZONE, "z2")])
        ));
        assert!(worth_syncing(&initialized, &labelled(&[])));
        assert!(worth_syncing(&Node::default(), &initialized));
        // tainted uninitialized: every update counts, as in Go (a skipped node is retried when it changes)
        let tainted = with_taints(initialized.clone(), vec![uninit()]);
        let mut tainted_heartbeat = tainted.clone();
        tainted_heartbeat.metadata.resource_version = Some("8".into());
        assert!(worth_syncing(&tainted, &tainted_heartbeat));
        // the taint just went (our own initialization, or someone else's)
        assert!(worth_syncing(&tainted, &initialized));
    }

    /// A node as a kubelet with `--cloud-provider=external` registers it.
    fn kubelet_node() -> Node {
        let mut node = Node {
            spec: Some(NodeSpec {
                taints: Some(vec![uninit()]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![a("Hostname", "nodeoverriden")]),
                ..Default::default()
            }),
            ..Default::default()
        };
        node.metadata.name = Some("node0".into());
        node.metadata.resource_version = Some("7".into());
        node
    }

    /// Apply both patches of the plan, as the controller sends them.
    fn initialized(node: &Node, plan: &InitPlan) -> Node {
        let after_status = apply(node, &plan.status_ops).expect("status patch applies");
        apply(&after_status, &plan.spec_ops).expect("spec patch applies")
    }

    fn with_annotation(mut node: Node, ip: &str) -> Node {
        node.metadata.annotations = Some(BTreeMap::from([(
            names::annotations::PROVIDED_NODE_IP.to_owned(),
            ip.to_owned(),
        )]));
        node
    }

    #[test]
    fn node_initialized_with_hostname() {
        // Go Test_syncNode: "node initialized with hostname" (V1 metadata: providerID fake://12345, no type).
        let node = kubelet_node();
        let meta = InstanceMetadata::new("fake://12345").with_addresses(vec![
            a("Hostname", "node0.cloud.internal"),
            a("InternalIP", "10.0.0.1"),
            a("ExternalIP", "132.143.154.163"),
        ]);
        let plan = plan_initialization(&node, &meta).unwrap();
        let after = initialized(&node, &plan);
        let spec = after.spec.clone().unwrap();
        assert_eq!(spec.provider_id.as_deref(), Some("fake://12345"));
        assert_eq!(spec.taints, None);
        assert_eq!(
            after.metadata.labels, None,
            "no labels without type, zone or region"
        );
        assert_eq!(
            after.status.unwrap().addresses.unwrap(),
            meta.node_addresses
        );
    }

    #[test]
    fn provider_id_already_set_is_kept() {
        // Go: "provider ID already set" / "[instanceV2] provider ID already set".
        let mut node = kubelet_node();
        node.spec.as_mut().unwrap().provider_id = Some("test:///12345".into());
        let meta = InstanceMetadata::new("fake://other").with_instance_type("t1.micro");
        let plan = plan_initialization(&node, &meta).unwrap();
        assert_eq!(plan.provider_id, None);
        let after = initialized(&node, &plan);
        assert_eq!(
            after.spec.unwrap().provider_id.as_deref(),
            Some("test:///12345")
        );
        let labels = after.metadata.labels.unwrap();
        assert_eq!(labels[l::INSTANCE_TYPE], "t1.micro");
        assert_eq!(labels[l::INSTANCE_TYPE_BETA], "t1.micro");
    }

    #[test]
    fn provider_id_not_implemented_initializes_without_one() {
        // Go: "provider ID not implemented" — V1 metadata with an empty providerID.
        let node = kubelet_node();
        let plan = plan_initialization(&node, &InstanceMetadata::new("")).unwrap();
        assert_eq!(plan.provider_id, None);
        let after = initialized(&node, &plan);
        assert_eq!(after.spec.unwrap().provider_id, None);
        // The kubelet's hostname stays: the cloud gave no addresses.
        assert_eq!(plan.addresses, AddressUpdate::NoCloudAddresses);
        assert!(plan.status_ops.is_empty());
    }

    #[test]
    fn zone_region_type_labels_added() {
        let mut node = kubelet_node();
        node.metadata.labels = Some(BTreeMap::from([("existing".into(), "kept".into())]));
        let meta = InstanceMetadata::new("fake://n")
            .with_instance_type("m1")
            .with_zone("us-west-1a")
            .with_region("us-west");
        let after = initialized(&node, &plan_initialization(&node, &meta).unwrap());
        let labels = after.metadata.labels.unwrap();
        assert_eq!(labels["existing"], "kept");
        assert_eq!(labels[l::TOPOLOGY_ZONE], "us-west-1a");
        assert_eq!(labels[l::FAILURE_DOMAIN_BETA_ZONE], "us-west-1a");
        assert_eq!(labels[l::TOPOLOGY_REGION], "us-west");
        assert_eq!(labels[l::FAILURE_DOMAIN_BETA_REGION], "us-west");
        assert_eq!(labels.len(), 7);
    }

    #[test]
    fn provided_node_ip_filters_addresses() {
        // Go: "provided node IP address" / "[instanceV2] provided node IP address".
        let node = with_annotation(kubelet_node(), "10.0.0.1");
        let meta = InstanceMetadata::new("fake://n").with_addresses(vec![
            a("InternalIP", "10.0.0.1"),
            a("ExternalIP", "132.143.154.163"),
            a("InternalIP", "10.0.0.2"),
        ]);
        let after = initialized(&node, &plan_initialization(&node, &meta).unwrap());
        assert_eq!(
            after.status.unwrap().addresses.unwrap(),
            vec![
                a("InternalIP", "10.0.0.1"),
                a("ExternalIP", "132.143.154.163"),
                a("Hostname", "nodeoverriden"),
            ]
        );
    }

    #[test]
    fn invalid_or_absent_node_ip_keeps_the_taint() {
        // Go: "provided node IP address is not valid" and "provided node IP address is not present".
        let meta =
            InstanceMetadata::new("fake://n").with_addresses(vec![a("InternalIP", "10.0.0.1")]);
        let invalid = with_annotation(kubelet_node(), "invalid-ip");
        assert!(matches!(
            plan_initialization(&invalid, &meta),
            Err(NodeIpError::Unparsable { .. })
        ));
        let absent = with_annotation(kubelet_node(), "10.0.0.99");
        assert!(matches!(
            plan_initialization(&absent, &meta),
            Err(NodeIpError::NoMatchingCloudAddress { .. })
        ));
        // With no cloud addresses at all, the annotated IP cannot match either.
        let none = with_annotation(kubelet_node(), "10.0.0.1");
        assert!(plan_initialization(&none, &InstanceMetadata::new("fake://n")).is_err());
    }

    #[test]
    fn additional_labels_filtered_in_the_patch() {
        let mut node = kubelet_node();
        node.metadata.labels = Some(BTreeMap::from([(
            "example.com/pool".into(),
            "kubelet".into(),
        )]));
        let meta = InstanceMetadata::new("fake://n")
            .with_label("example.com/pool", "cloud")
            .with_label("kubernetes.io/os", "evil")
            .with_label("example.com/rack", "r1");
        let plan = plan_initialization(&node, &meta).unwrap();
        assert_eq!(plan.labels.discarded.len(), 2);
        let labels = initialized(&node, &plan).metadata.labels.unwrap();
        assert_eq!(labels["example.com/pool"], "kubelet");
        assert_eq!(labels["example.com/rack"], "r1");
        assert!(!labels.contains_key("kubernetes.io/os"));
    }

    #[test]
    fn other_taints_survive_and_all_uninitialized_taints_go() {
        let mut node = kubelet_node();
        node.spec.as_mut().unwrap().taints = Some(vec![
            taint(names::taints::NOT_READY, None, NO_SCHEDULE),
            uninit(),
            taint(names::taints::UNINITIALIZED, None, "NoExecute"),
            taint("example.com/dedicated", Some("gpu"), NO_SCHEDULE),
        ]);
        let after = initialized(
            &node,
            &plan_initialization(&node, &InstanceMetadata::new("fake://n")).unwrap(),
        );
        assert_eq!(
            taints(&after),
            &[
                taint(names::taints::NOT_READY, None, NO_SCHEDULE),
                taint("example.com/dedicated", Some("gpu"), NO_SCHEDULE)
            ]
        );
    }

    #[test]
    fn one_patch_each_and_no_status_write_when_addresses_match() {
        let mut node = kubelet_node();
        node.status.as_mut().unwrap().addresses =
            Some(vec![a("InternalIP", "10.0.0.1"), a("Hostname", "h")]);
        let meta =
            InstanceMetadata::new("fake://n").with_addresses(vec![a("InternalIP", "10.0.0.1")]);
        let plan = plan_initialization(&node, &meta).unwrap();
        assert_eq!(plan.addresses, AddressUpdate::Unchanged);
        assert!(plan.status_ops.is_empty());
        // test + remove taints, add providerID.
        assert_eq!(plan.spec_ops.len(), 3);
    }

    #[test]
    fn stale_view_is_rejected_not_clobbered() {
        let seen = kubelet_node();
        let plan = plan_initialization(&seen, &InstanceMetadata::new("fake://n")).unwrap();
        let mut live = seen.clone();
        live.spec.as_mut().unwrap().taints =
            Some(vec![uninit(), taint("kubelet/new", None, NO_SCHEDULE)]);
        assert!(apply(&live, &plan.spec_ops).is_err());
    }

    #[test]
    fn node_events_queue_added_nodes_and_updates_worth_syncing() {
        use std::sync::Arc;
        let mut plain = Node::default();
        plain.metadata.name = Some("n1".into());
        let plain = Arc::new(plain);
        let mut tainted = (*plain).clone();
        tainted.spec = Some(NodeSpec {
            taints: Some(vec![uninit()]),
            ..Default::default()
        });
        let tainted = Arc::new(tainted);
        assert_eq!(
            node_event_key(&InformerEvent::Added(plain.clone())),
            Some("n1".into())
        );
        let same = InformerEvent::Updated {
            old: plain.clone(),
            new: plain.clone(),
        };
        assert_eq!(node_event_key(&same), None);
        let init = InformerEvent::Updated {
            old: plain.clone(),
            new: tainted,
        };
        assert_eq!(node_event_key(&init), Some("n1".into()));
        assert_eq!(node_event_key(&InformerEvent::Deleted(plain)), None);
        assert_eq!(node_event_key(&InformerEvent::Resync), None);
    }

    #[test]
    fn the_address_step_writes_the_status_of_initialized_nodes_only() {
        let mut node = Node::default();
        node.metadata.name = Some("n1".into());
        let cloud = [a("InternalIP", "10.0.0.1")];
        let step = address_step(&node, &cloud).expect("no node-IP error");
        assert!(matches!(step, Some((Target::Status, ops)) if !ops.is_empty()));
        assert!(
            address_step(&node, &[]).expect("no error").is_none(),
            "no cloud addresses"
        );
        node.spec = Some(NodeSpec {
            taints: Some(vec![uninit()]),
            ..Default::default()
        });
        assert!(
            address_step(&node, &cloud).expect("no error").is_none(),
            "uninitialized"
        );
    }

    #[test]
    fn an_initialization_writes_the_addresses_first_then_the_spec_then_nothing() {
        let node = kubelet_node();
        let meta =
            InstanceMetadata::new("fake://node0").with_addresses(vec![a("InternalIP", "10.0.0.1")]);
        let first = initialization_step(&node, &meta, &[]).unwrap();
        let (target, ops) = first.write.expect("a write");
        assert_eq!(target, Target::Status);
        let node = apply(&node, &ops).expect("status patch applies");
        let second = initialization_step(&node, &meta, &[Target::Status]).unwrap();
        let (target, ops) = second.write.expect("a write");
        assert_eq!(target, Target::Spec);
        let node = apply(&node, &ops).expect("spec patch applies");
        let done = initialization_step(&node, &meta, &[Target::Status, Target::Spec]).unwrap();
        assert_eq!(done.write, None, "the taint is gone");
        assert!(done.discarded.is_empty());
    }

    #[test]
    fn an_invalid_node_ip_is_an_error_with_its_event_reason() {
        let mut node = kubelet_node();
        node.metadata.annotations = Some(BTreeMap::from([(
            names::annotations::PROVIDED_NODE_IP.to_owned(),
            "10.9.9.9".to_owned(),
        )]));
        let meta =
            InstanceMetadata::new("fake://node0").with_addresses(vec![a("InternalIP", "10.0.0.1")]);
        let err = initialization_step(&node, &meta, &[]).unwrap_err();
        assert!(
            matches!(err, Error::InvalidNodeIp { ref node, .. } if node == "node0"),
            "{err}"
        );
        assert_eq!(warning_reason(&err), Some(crate::reasons::INVALID_NODE_IP));
        let missing = Error::MissingProviderId { node: "n".into() };
        assert_eq!(
            warning_reason(&missing),
            Some(crate::reasons::MISSING_PROVIDER_ID)
        );
        let other = Error::InvalidConfig {
            controller: "c",
            setting: ccm_core::settings::InvalidSetting::positive("s", 0).expect("0 breaks it"),
        };
        assert_eq!(warning_reason(&other), None);
    }

    #[test]
    fn beta_labels_get_their_ga_copy_and_only_initialized_nodes_get_an_address_sync() {
        let mut node = kubelet_node();
        assert_eq!(ga_labels(&node), None, "no labels");
        node.metadata.labels = Some(BTreeMap::from([(
            l::FAILURE_DOMAIN_BETA_ZONE.to_owned(),
            "z1".to_owned(),
        )]));
        assert_eq!(
            ga_labels(&node),
            Some(BTreeMap::from([(
                l::TOPOLOGY_ZONE.to_owned(),
                "z1".to_owned()
            )]))
        );
        let mut ready = node.clone();
        ready.spec = None;
        assert!(
            !super::is_initialized(&node),
            "the tainted node waits for its initialization"
        );
        assert!(super::is_initialized(&ready));
    }
}
