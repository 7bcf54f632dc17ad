//! JSON Patches for Node writes, built purely from a node as the controller last saw it.
//!
//! Lists that others write too are never replaced blindly: `spec.taints` and `status.addresses` are replaced only
//! after a `test` of their exact current value, and when the list is absent (so there is nothing to test) the
//! patch tests `metadata.resourceVersion` instead. A failed test makes the API server reject the whole patch, and
//! the caller re-reads the node and plans again.
//!
//! ```
//! use ccm_nodecontroller::patch::{taint_ops, without_taint};
//! use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
//!
//! let taint = |k: &str| Taint { key: k.into(), effect: "NoSchedule".into(), ..Default::default() };
//! let node = Node {
//!     spec: Some(NodeSpec { taints: Some(vec![taint("a"), taint("b")]), ..Default::default() }),
//!     ..Default::default()
//! };
//! let ops = taint_ops(&node, without_taint(&node, "a"));
//! let json = serde_json::to_value(&ops).unwrap();
//! assert_eq!(json[0]["op"], "test");
//! assert_eq!(json[1]["op"], "replace");
//! assert_eq!(json[1]["value"][0]["key"], "b");
//! ```

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation, TestOperation};
use k8s_openapi::api::core::v1::{Node, NodeAddress, Taint};
use serde_json::Value;

use crate::error::Error;

/// The `NoSchedule` taint effect.
pub const NO_SCHEDULE: &str = "NoSchedule";

pub(crate) fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    // Serializing k8s-openapi types and string maps into a JSON value cannot fail.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn test(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Test(TestOperation { path, value })
}

fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

/// `add` `value` as `parent/field`, or `{field: value}` as `parent` when the node has no `parent` yet.
fn add_field(has_parent: bool, parent: &str, field: &str, value: Value) -> PatchOperation {
    if has_parent {
        add(pointer(&[parent, field]), value)
    } else {
        add(pointer(&[parent]), serde_json::json!({ field: value }))
    }
}

/// Operations that change the list `parent/field` from `current` to `new` (`None`: remove it), guarded as above.
fn list_ops<T: serde::Serialize>(
    node: &Node,
    (parent, has_parent): (&str, bool),
    field: &str,
    current: &[T],
    new: Option<Value>,
) -> Vec<PatchOperation> {
    let path = pointer(&[parent, field]);
    if current.is_empty() {
        let resource_version = node.metadata.resource_version.clone();
        let guard = resource_version
            .map(|rv| test(pointer(&["metadata", "resourceVersion"]), Value::String(rv)));
        let value = new.unwrap_or(Value::Array(Vec::new()));
        return guard
            .into_iter()
            .chain([add_field(has_parent, parent, field, value)])
            .collect();
    }
    let change = match new {
        Some(value) => PatchOperation::Replace(ReplaceOperation {
            path: path.clone(),
            value,
        }),
        None => PatchOperation::Remove(RemoveOperation { path: path.clone() }),
    };
    vec![test(path, to_value(&current)), change]
}

/// The node's taints.
pub fn taints(node: &Node) -> &[Taint] {
    ccm_core::helpers::NodeFields::taints(node)
}

/// The node's taints without any taint whose key is `key` (whatever its value or effect).
pub fn without_taint(node: &Node, key: &str) -> Vec<Taint> {
    taints(node)
        .iter()
        .filter(|t| t.key != key)
        .cloned()
        .collect()
}

/// Guarded operations that change the node's taints to `new` (`remove` the list when `new` is empty); empty when
/// nothing changes.
pub fn taint_ops(node: &Node, new: Vec<Taint>) -> Vec<PatchOperation> {
    let current = taints(node);
    if current == new.as_slice() {
        return Vec::new();
    }
    let new = (!new.is_empty()).then(|| to_value(&new));
    list_ops(node, ("spec", node.spec.is_some()), "taints", current, new)
}

/// Operations that set these labels (adding or overwriting each key); the other labels are untouched.
pub fn label_ops(node: &Node, set: &BTreeMap<String, String>) -> Vec<PatchOperation> {
    if set.is_empty() {
        return Vec::new();
    }
    if node.metadata.labels.is_none() {
        return vec![add(pointer(&["metadata", "labels"]), to_value(set))];
    }
    set.iter()
        .map(|(k, v)| {
            add(
                pointer(&["metadata", "labels", k]),
                Value::String(v.clone()),
            )
        })
        .collect()
}

/// The operation that sets `spec.providerID` (only used when it is empty).
pub fn provider_id_op(node: &Node, provider_id: &str) -> PatchOperation {
    let value = Value::String(provider_id.to_owned());
    add_field(node.spec.is_some(), "spec", "providerID", value)
}

/// Guarded operations for the status subresource that replace `status.addresses` with `new`.
pub fn address_ops(node: &Node, new: &[NodeAddress]) -> Vec<PatchOperation> {
    let current = crate::addresses::node_addresses(node);
    let status = ("status", node.status.is_some());
    list_ops(node, status, "addresses", current, Some(to_value(&new)))
}

/// The shutdown taint (`node.cloudprovider.kubernetes.io/shutdown:NoSchedule`, no value).
pub fn shutdown_taint() -> Taint {
    Taint {
        key: ccm_core::names::taints::SHUTDOWN.to_owned(),
        effect: NO_SCHEDULE.to_owned(),
        ..Default::default()
    }
}

fn matches_key_and_effect(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// The taints after adding `taint` (Go: `AddOrUpdateTaintOnNode`): a taint with the same key and effect is
/// replaced unless it is identical; `None` when nothing changes.
pub fn with_taint(node: &Node, taint: &Taint) -> Option<Vec<Taint>> {
    taints_with(taints(node), taint)
}

/// [`with_taint`] of a node whose taints are `current`.
pub(crate) fn taints_with(current: &[Taint], taint: &Taint) -> Option<Vec<Taint>> {
    if !current.iter().any(|t| matches_key_and_effect(t, taint)) {
        return Some(current.iter().chain([taint]).cloned().collect());
    }
    let differs = |t: &Taint| matches_key_and_effect(t, taint) && t.value != taint.value;
    let replaced = current.iter().map(|t| if differs(t) { taint } else { t });
    current
        .iter()
        .any(differs)
        .then(|| replaced.cloned().collect())
}

/// The taints after removing every taint with the key and effect of `taint` (Go: `RemoveTaintOffNode`); `None`
/// when there is none.
pub fn without_matching_taint(node: &Node, taint: &Taint) -> Option<Vec<Taint>> {
    let current = taints(node);
    let result: Vec<Taint> = current
        .iter()
        .filter(|t| !matches_key_and_effect(t, taint))
        .cloned()
        .collect();
    (result.len() != current.len()).then_some(result)
}

/// Which endpoint a patch goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// `nodes/<name>`: metadata and spec.
    Spec,
    /// `nodes/<name>/status`.
    Status,
}

impl Target {
    pub(crate) fn action(self) -> &'static str {
        match self {
            Target::Spec => "patch",
            Target::Status => "patch the status of",
        }
    }
}

/// The result of one planning step.
pub(crate) type Step = Result<Option<(Target, Vec<PatchOperation>)>, Error>;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};

    /// Apply ops to the node as the API server would (RFC 6902), returning the new node or the failure.
    pub(crate) fn apply(node: &Node, ops: &[PatchOperation]) -> Result<Node, String> {
        let mut doc = serde_json::to_value(node).map_err(|e| e.to_string())?;
        json_patch::patch(&mut doc, ops).map_err(|e| e.to_string())?;
        serde_json::from_value(doc).map_err(|e| e.to_string())
    }

    pub(crate) fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn node_with(taints: Option<Vec<Taint>>) -> Node {
        let mut node = Node {
            spec: Some(NodeSpec {
                taints,
                ..Default::default()
            }),
            ..Default::default()
        };
        node.metadata.name = Some("n".into());
        node.metadata.resource_version = Some("42".into());
        node
    }

    #[test]
    fn removing_the_last_taint_removes_the_list() {
        let node = node_with(Some(vec![taint("a", Some("true"), NO_SCHEDULE)]));
        let ops = taint_ops(&node, without_taint(&node, "a"));
        let after = apply(&node, &ops).unwrap();
        assert!(taints(&after).is_empty());
        assert_eq!(after.spec.unwrap().taints, None);
    }

    #[test]
    fn stale_taint_list_fails_the_test() {
        let seen = node_with(Some(vec![taint("a", None, NO_SCHEDULE)]));
        let ops = taint_ops(&seen, without_taint(&seen, "a"));
        // Meanwhile the kubelet added a taint.
        let live = node_with(Some(vec![
            taint("a", None, NO_SCHEDULE),
            taint("k", None, "NoExecute"),
        ]));
        assert!(apply(&live, &ops).is_err());
        // Re-planned from the live node, the kubelet's taint survives.
        let ops = taint_ops(&live, without_taint(&live, "a"));
        let after = apply(&live, &ops).unwrap();
        assert_eq!(taints(&after), &[taint("k", None, "NoExecute")]);
    }

    #[test]
    fn adding_to_no_taints_is_guarded_by_resource_version() {
        let seen = node_with(None);
        let ops = taint_ops(&seen, vec![shutdown_taint()]);
        assert_eq!(ops.len(), 2);
        assert_eq!(taints(&apply(&seen, &ops).unwrap()), &[shutdown_taint()]);
        let mut live = node_with(Some(vec![taint("k", None, NO_SCHEDULE)]));
        live.metadata.resource_version = Some("43".into());
        assert!(
            apply(&live, &ops).is_err(),
            "a concurrent write is not clobbered"
        );
        // Without a spec at all.
        let mut bare = Node::default();
        bare.metadata.resource_version = Some("1".into());
        let ops = taint_ops(&bare, vec![shutdown_taint()]);
        assert_eq!(taints(&apply(&bare, &ops).unwrap()), &[shutdown_taint()]);
    }

    #[test]
    fn no_change_no_ops() {
        let node = node_with(Some(vec![taint("a", None, NO_SCHEDULE)]));
        assert!(taint_ops(&node, taints(&node).to_vec()).is_empty());
        assert!(taint_ops(&node_with(None), vec![]).is_empty());
        assert!(label_ops(&node, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn label_keys_with_slashes_are_escaped() {
        let mut node = node_with(None);
        node.metadata.labels = Some(BTreeMap::from([("keep".into(), "me".into())]));
        let set = BTreeMap::from([
            ("topology.kubernetes.io/zone".to_string(), "z".to_string()),
            ("a~b".to_string(), "t".to_string()),
        ]);
        let after = apply(&node, &label_ops(&node, &set)).unwrap();
        let labels = after.metadata.labels.unwrap();
        assert_eq!(labels["topology.kubernetes.io/zone"], "z");
        assert_eq!(labels["a~b"], "t");
        assert_eq!(labels["keep"], "me");
        // No labels map yet.
        let bare = node_with(None);
        let after = apply(&bare, &label_ops(&bare, &set)).unwrap();
        assert_eq!(after.metadata.labels.unwrap().len(), 2);
    }

    #[test]
    fn provider_id_with_and_without_spec() {
        let node = node_with(None);
        let after = apply(&node, &[provider_id_op(&node, "fake://n")]).unwrap();
        assert_eq!(after.spec.unwrap().provider_id.as_deref(), Some("fake://n"));
        let bare = Node::default();
        let after = apply(&bare, &[provider_id_op(&bare, "fake://n")]).unwrap();
        assert_eq!(after.spec.unwrap().provider_id.as_deref(), Some("fake://n"));
    }

    #[test]
    fn address_ops_replace_whole_list_guarded() {
        let a = |t: &str, v: &str| NodeAddress {
            type_: t.into(),
            address: v.into(),
        };
        let mut node = node_with(None);
        node.status = Some(NodeStatus {
            addresses: Some(vec![a("Hostname", "h"), a("InternalIP", "10.0.0.1")]),
            ..Default::default()
        });
        let new = vec![a("InternalIP", "10.0.0.2")];
        let ops = address_ops(&node, &new);
        let after = apply(&node, &ops).unwrap();
        assert_eq!(after.status.unwrap().addresses.unwrap(), new);
        let mut live = node.clone();
        live.status.as_mut().unwrap().addresses = Some(vec![a("Hostname", "h2")]);
        assert!(apply(&live, &ops).is_err());
        // No status, and status without addresses.
        let bare = node_with(None);
        assert_eq!(
            apply(&bare, &address_ops(&bare, &new))
                .unwrap()
                .status
                .unwrap()
                .addresses
                .unwrap(),
            new
        );
        let mut empty_status = node_with(None);
        empty_status.status = Some(NodeStatus::default());
        assert_eq!(
            apply(&empty_status, &address_ops(&empty_status, &new))
                .unwrap()
                .status
                .unwrap()
                .addresses
                .unwrap(),
            new
        );
    }

    #[test]
    fn add_or_update_taint_semantics() {
        // Absent → appended.
        let node = node_with(Some(vec![taint("other", None, NO_SCHEDULE)]));
        assert_eq!(
            with_taint(&node, &shutdown_taint()).unwrap(),
            vec![taint("other", None, NO_SCHEDULE), shutdown_taint()]
        );
        // Identical → nothing.
        let node = node_with(Some(vec![shutdown_taint()]));
        assert_eq!(with_taint(&node, &shutdown_taint()), None);
        // Same key and effect with a value → replaced in place.
        let node = node_with(Some(vec![
            taint(ccm_core::names::taints::SHUTDOWN, Some("x"), NO_SCHEDULE),
            taint("z", None, NO_SCHEDULE),
        ]));
        assert_eq!(
            with_taint(&node, &shutdown_taint()).unwrap(),
            vec![shutdown_taint(), taint("z", None, NO_SCHEDULE)]
        );
        // Same key, other effect → both kept.
        let node = node_with(Some(vec![taint(
            ccm_core::names::taints::SHUTDOWN,
            None,
            "NoExecute",
        )]));
        assert_eq!(with_taint(&node, &shutdown_taint()).unwrap().len(), 2);
    }

    #[test]
    fn remove_matching_taint_semantics() {
        let node = node_with(Some(vec![
            shutdown_taint(),
            taint(ccm_core::names::taints::SHUTDOWN, None, "NoExecute"),
            taint("k", None, NO_SCHEDULE),
        ]));
        assert_eq!(
            without_matching_taint(&node, &shutdown_taint()).unwrap(),
            vec![
                taint(ccm_core::names::taints::SHUTDOWN, None, "NoExecute"),
                taint("k", None, NO_SCHEDULE)
            ]
        );
        assert_eq!(
            without_matching_taint(&node_with(None), &shutdown_taint()),
            None
        );
    }
}
